//! RRSIGs over one RRset (RFC 4034 §3, RFC 4035 §2.2), and whether the
//! ones a previous version carried can stay.

use hickory_proto::dnssec::rdata::sig::SigInput;
use hickory_proto::dnssec::rdata::{DNSSECRData, RRSIG};
use hickory_proto::dnssec::TBS;
use hickory_proto::rr::{DNSClass, Name, RData, RecordType, SerialNumber};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder, NameEncoding};

use super::keys::{ActiveKey, SignError, SignPolicy};
use crate::zone::RRset;

/// Spreads expirations over a tenth of the time between refresh and
/// expiry, by owner and type, so a zone signed at once is not due at once.
fn jitter(owner: &Name, set: &RRset, policy: &SignPolicy) -> u32 {
    use std::hash::{Hash, Hasher};
    let span = policy.validity.saturating_sub(policy.refresh) / 10;
    if span == 0 {
        return 0;
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    owner.to_lowercase().hash(&mut h);
    u16::from(set.rtype).hash(&mut h);
    (h.finish() % u64::from(span)) as u32
}

/// One RRSIG per key over `set` at `owner`.
pub(super) fn sign(
    owner: &Name,
    set: &RRset,
    keys: &[&ActiveKey],
    signer_name: &Name,
    policy: &SignPolicy,
    now: u32,
) -> Result<Vec<RData>, SignError> {
    let rdatas =
        canonical_rdatas(set).map_err(|e| SignError::Encode(owner.clone(), e.to_string()))?;
    let expiration = now.wrapping_add(policy.validity - jitter(owner, set, policy));
    keys.iter()
        .map(|k| {
            let input = SigInput {
                type_covered: set.rtype,
                algorithm: k.algorithm(),
                num_labels: owner.num_labels(),
                original_ttl: set.ttl,
                sig_expiration: SerialNumber::new(expiration),
                sig_inception: SerialNumber::new(now.wrapping_sub(policy.backdate)),
                key_tag: k.tag,
                signer_name: signer_name.clone(),
            };
            let tbs = to_be_signed(owner, &input, &rdatas)
                .map_err(|e| SignError::Encode(owner.clone(), e.to_string()))?;
            let sig = k
                .key
                .sign(&tbs)
                .map_err(|e| SignError::Key(e.to_string()))?;
            Ok(RData::DNSSEC(DNSSECRData::RRSIG(RRSIG::from_sig(
                input, sig,
            ))))
        })
        .collect()
}

/// Types whose RDATA holds no domain name: their canonical form (RFC
/// 4034 §6.2) is the wire form the zone keeps, used as it is. The others
/// are decoded and encoded again with their names lower-cased.
fn name_free(rtype: RecordType) -> bool {
    use RecordType::*;
    matches!(
        rtype,
        A | AAAA
            | TXT
            | CAA
            | DS
            | CDS
            | DNSKEY
            | CDNSKEY
            | TLSA
            | SSHFP
            | NSEC3PARAM
            | OPENPGPKEY
            | SVCB
            | HTTPS
    )
}

type Encoded = Result<Vec<u8>, hickory_proto::ProtoError>;

fn canonical(
    emit: &dyn Fn(&mut BinEncoder<'_>) -> Result<(), hickory_proto::ProtoError>,
) -> Encoded {
    let mut buf = Vec::new();
    let mut e = BinEncoder::new(&mut buf);
    e.set_canonical_form(true);
    e.set_name_encoding(NameEncoding::UncompressedLowercase);
    emit(&mut e).map(|_| buf)
}

/// The set's RDATAs in canonical form and order, once for every key.
fn canonical_rdatas(set: &RRset) -> Result<Vec<Vec<u8>>, hickory_proto::ProtoError> {
    let mut rdatas: Vec<Vec<u8>> = if name_free(set.rtype) {
        set.wire().map(<[u8]>::to_vec).collect()
    } else {
        set.rdatas()
            .map(|d| canonical(&|e| d.emit(e)))
            .collect::<Result<_, _>>()?
    };
    rdatas.sort();
    rdatas.dedup();
    Ok(rdatas)
}

/// The signed data (RFC 4034 §3.1.8.1): the RRSIG RDATA without the
/// signature, then each record in canonical form and order. Built here
/// rather than by hickory's `TBS::from_input`, whose one 64 KiB buffer a
/// service with a thousand instances (its SRV RRset) outgrows.
fn to_be_signed(
    owner: &Name,
    input: &SigInput,
    rdatas: &[Vec<u8>],
) -> Result<TBS, hickory_proto::ProtoError> {
    let mut out = canonical(&|e| input.emit(e))?;
    let head = canonical(&|e| {
        owner.emit(e)?;
        input.type_covered.emit(e)?;
        DNSClass::IN.emit(e)?;
        e.emit_u32(input.original_ttl)
    })?;
    out.reserve(rdatas.iter().map(|r| head.len() + 2 + r.len()).sum());
    for rdata in rdatas {
        out.extend_from_slice(&head);
        out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        out.extend_from_slice(rdata);
    }
    Ok(TBS::from(out.as_slice()))
}

/// The RRSIGs of `old_sigs` that can stay over an unchanged RRset: one
/// per signing key, none due for refresh at `now`. `None` when any key
/// lacks one (the set is signed again).
pub(super) fn reusable(
    old_sigs: Option<&RRset>,
    keys: &[&ActiveKey],
    policy: &SignPolicy,
    now: u32,
) -> Option<Vec<RData>> {
    let sigs: Vec<RData> = old_sigs?.rdatas().collect();
    keys.iter()
        .map(|k| {
            sigs.iter()
                .find(|s| match s {
                    RData::DNSSEC(DNSSECRData::RRSIG(r)) => {
                        let i = r.input();
                        i.key_tag == k.tag
                            && i.algorithm == k.algorithm()
                            && fresh(i.sig_expiration.get(), policy, now)
                    }
                    _ => false,
                })
                .cloned()
        })
        .collect()
}

/// Whether a signature expiring at `expiration` has more than the refresh
/// time left (serial arithmetic: expirations wrap in 2106).
pub(super) fn fresh(expiration: u32, policy: &SignPolicy, now: u32) -> bool {
    let left = expiration.wrapping_sub(now) as i32;
    left > policy.refresh as i32
}

/// The key tag and expiration of every signature at `node`.
pub(super) fn signatures_at(node: &crate::zone::Node) -> impl Iterator<Item = (u16, u32)> + '_ {
    node.rrsets()
        .iter()
        .filter(|s| s.rtype == RecordType::RRSIG)
        .flat_map(|s| s.rdatas())
        .filter_map(|d| match d {
            RData::DNSSEC(DNSSECRData::RRSIG(r)) => {
                Some((r.input().key_tag, r.input().sig_expiration.get()))
            }
            _ => None,
        })
}
