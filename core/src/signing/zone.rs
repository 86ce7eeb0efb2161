//! Signing one version of a zone: the DNSKEY (CDS, CDNSKEY) RRsets, the
//! NSEC chain and an RRSIG over every authoritative RRset, carrying over
//! the previous version's signatures of RRsets that did not change.

use hickory_proto::dnssec::rdata::{DNSSECRData, CDNSKEY, CDS};
use hickory_proto::dnssec::Verifier;
use hickory_proto::rr::{LowerName, Name, RData, Record, RecordType};

use super::keys::{ActiveKey, SignError, ZoneSigner};
use super::{chain, rrsig};
use crate::zone::{RRset, Zone};

pub use crate::zone::signer_managed as is_managed;

/// What one signing did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Signed {
    /// RRsets signed anew.
    pub signed: usize,
    /// RRsets whose signatures were carried over.
    pub kept: usize,
}

/// Signs `zone` (its serial already final) with `signer` at `now`, reusing
/// the signatures `before` holds for RRsets that did not change.
pub fn sign_zone(
    signer: &ZoneSigner,
    before: Option<&Zone>,
    zone: &mut Zone,
    now: u32,
) -> Result<Signed, SignError> {
    let (soa, soa_ttl) = zone
        .soa()
        .map(|(s, t)| (s.clone(), t))
        .ok_or(SignError::NoSoa)?;
    let apex = zone.origin().clone();
    zone.strip_signer_managed();
    for rdata in key_rdatas(signer, &apex)? {
        zone.insert(Record::from_rdata(apex.clone(), soa_ttl, rdata))?;
    }
    // RFC 9077: negative answers' TTL is the lesser of the two.
    let nsec_ttl = soa.minimum.min(soa_ttl);
    let owners = chain::owners(zone);
    for r in chain::nsec_records(zone, &owners, nsec_ttl) {
        zone.insert(r)?;
    }
    let (ksks, zsks) = signer.signing_keys();
    if ksks.is_empty() {
        return Err(SignError::NoKey("the DNSKEY RRset"));
    }
    if zsks.is_empty() {
        return Err(SignError::NoKey("the zone"));
    }
    let mut done = Signed::default();
    let mut sigs: Vec<Record> = Vec::new();
    // What must be signed anew, signed after the walk on every core.
    let mut jobs: Vec<(Name, &RRset, &[&ActiveKey])> = Vec::new();
    for owner in &owners {
        let name = Name::from(&owner.key);
        let node = zone.node(&owner.key).expect("owners are nodes");
        let old = before.and_then(|b| b.node(&owner.key));
        for set in node.rrsets() {
            let t = set.rtype;
            // At a cut only DS and NSEC are the zone's (RFC 4035 §2.2).
            if t == RecordType::RRSIG
                || (owner.cut && !matches!(t, RecordType::DS | RecordType::NSEC))
            {
                continue;
            }
            let keys: &[&ActiveKey] = match t {
                RecordType::DNSKEY | RecordType::CDS | RecordType::CDNSKEY => &ksks,
                _ => &zsks,
            };
            let unchanged = old.and_then(|o| o.rrset(t)).is_some_and(|o| o == set);
            let kept = unchanged
                .then(|| {
                    rrsig::reusable(old.and_then(|o| o.signatures(t)), keys, &signer.policy, now)
                })
                .flatten();
            match kept {
                Some(k) => {
                    done.kept += 1;
                    sigs.extend(
                        k.into_iter()
                            .map(|d| Record::from_rdata(name.clone(), set.ttl, d)),
                    );
                }
                None => jobs.push((name.clone(), set, keys)),
            }
        }
    }
    done.signed = jobs.len();
    sigs.extend(sign_all(&jobs, &apex, &signer.policy, now)?);
    for r in sigs {
        zone.insert(r)?;
    }
    Ok(done)
}

/// Signs `jobs`, spread over the machine's cores when there are many.
fn sign_all(
    jobs: &[(Name, &RRset, &[&ActiveKey])],
    apex: &Name,
    policy: &super::SignPolicy,
    now: u32,
) -> Result<Vec<Record>, SignError> {
    let one = |chunk: &[(Name, &RRset, &[&ActiveKey])]| -> Result<Vec<Record>, SignError> {
        let mut out = Vec::new();
        for (name, set, keys) in chunk {
            for d in rrsig::sign(name, set, keys, apex, policy, now)? {
                out.push(Record::from_rdata(name.clone(), set.ttl, d));
            }
        }
        Ok(out)
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads < 2 || jobs.len() < 512 {
        return one(jobs);
    }
    let size = jobs.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .chunks(size)
            .map(|chunk| scope.spawn(move || one(chunk)))
            .collect();
        let mut out = Vec::new();
        for h in handles {
            out.extend(h.join().expect("a signing thread panicked")?);
        }
        Ok(out)
    })
}

/// The apex's DNSKEYs, and CDS/CDNSKEY for the keys submitted to the
/// parent.
fn key_rdatas(signer: &ZoneSigner, apex: &Name) -> Result<Vec<RData>, SignError> {
    let mut out: Vec<RData> = signer
        .dnskeys()
        .into_iter()
        .map(|k| RData::DNSSEC(DNSSECRData::DNSKEY(k)))
        .collect();
    for key in &signer.submitted {
        let ds = super::keys::ds_for(apex, key)?;
        out.push(RData::DNSSEC(DNSSECRData::CDS(CDS::new(
            ds.key_tag(),
            Some(ds.algorithm()),
            ds.digest_type(),
            ds.digest().to_vec(),
        ))));
        out.push(RData::DNSSEC(DNSSECRData::CDNSKEY(CDNSKEY::with_flags(
            key.flags(),
            Some(key.algorithm()),
            key.public_key().clone().into_inner(),
        ))));
    }
    Ok(out)
}

/// Whether any signature in `zone` is due for refresh at `now` (or made by
/// a key that no longer signs): a commit would sign something anew.
pub(super) fn refresh_due(signer: &ZoneSigner, zone: &Zone, now: u32) -> bool {
    let tags: Vec<u16> = signer.signing.iter().map(|k| k.tag).collect();
    zone.nodes().any(|(_, node)| {
        rrsig::signatures_at(node)
            .any(|(tag, expiry)| !tags.contains(&tag) || !rrsig::fresh(expiry, &signer.policy, now))
    }) || !signed_by(zone, signer)
}

pub(super) fn signed_by(zone: &Zone, signer: &ZoneSigner) -> bool {
    let apex = LowerName::new(zone.origin());
    let published: Vec<_> = zone
        .node(&apex)
        .and_then(|n| n.rrset(RecordType::DNSKEY))
        .map(|s| s.rdatas().collect())
        .unwrap_or_default();
    let want: Vec<RData> = signer
        .dnskeys()
        .into_iter()
        .map(|k| RData::DNSSEC(DNSSECRData::DNSKEY(k)))
        .collect();
    published.len() == want.len() && want.iter().all(|k| published.contains(k))
}
