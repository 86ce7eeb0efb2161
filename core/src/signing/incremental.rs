//! Signing a change rather than a zone: when a commit changed a few names
//! of a zone already signed by the same keys (a registration, an UPDATE),
//! only those names' RRsets, their NSECs and their neighbours' NSECs are
//! signed again. Changes that move a zone cut or a DNAME (which occlude
//! whole subtrees) are signed whole by [`super::sign_zone`].

use std::collections::BTreeSet;

use hickory_proto::dnssec::rdata::{DNSSECRData, NSEC};
use hickory_proto::rr::{LowerName, Name, RData, Record, RecordType};

use super::chain::{self, Owner};
use super::keys::{SignError, ZoneSigner};
use super::rrsig;
use crate::zone::{signer_managed, Node, RRset, Zone};

/// Whether `key` holds data a signer does not own.
fn has_data(zone: &Zone, key: &LowerName) -> bool {
    zone.node(key)
        .is_some_and(|n| n.rrsets().iter().any(|s| !signer_managed(s.rtype)))
}

fn moves_a_cut(zone: &Zone, key: &LowerName) -> bool {
    zone.node(key)
        .is_some_and(|n| n.rrset(RecordType::NS).is_some() || n.rrset(RecordType::DNAME).is_some())
}

/// Signs the change from `before` to `zone` (a copy of `before` with
/// records of `changed` names changed, the SOA's serial moved): returns
/// the names whose records (signed ones included) changed, or `None` when
/// the change must be signed whole.
pub fn sign_changed(
    signer: &ZoneSigner,
    before: &Zone,
    zone: &mut Zone,
    changed: &BTreeSet<LowerName>,
    now: u32,
) -> Result<Option<BTreeSet<LowerName>>, SignError> {
    let apex = zone.origin_key().clone();
    if !super::zone::signed_by(before, signer) || !before.has_nsec() {
        return Ok(None);
    }
    for key in changed {
        if *key == apex {
            continue;
        }
        let occluded = |z: &Zone| z.below_cut(&key.base_name()) || z.below_dname(key);
        if moves_a_cut(zone, key) || moves_a_cut(before, key) || occluded(zone) {
            return Ok(None);
        }
    }
    let mut touched: BTreeSet<LowerName> = changed.clone();
    touched.insert(apex.clone());
    // The chain's membership first: names gone lose their NSEC, new ones
    // get one (its next name is set below).
    for key in &touched {
        let name = Name::from(key);
        let listed = zone
            .node(key)
            .and_then(|n| n.rrset(RecordType::NSEC))
            .is_some();
        match (has_data(zone, key), listed) {
            (false, true) => remove_type(zone, &name, RecordType::NSEC),
            (true, false) => {
                let placeholder = NSEC::new(name.clone(), [RecordType::NSEC]);
                zone.insert(nsec_record(&name, placeholder, nsec_ttl(zone)))?;
            }
            _ => {}
        }
    }
    // Every NSEC whose next name or types may have moved: the changed
    // names' and their predecessors'.
    let mut nsecs: BTreeSet<LowerName> = BTreeSet::new();
    for key in &touched {
        if has_data(zone, key) {
            nsecs.insert(key.clone());
        }
        if let Some(p) = zone.nsec_before(key) {
            nsecs.insert(p.clone());
        }
    }
    let ttl = nsec_ttl(zone);
    for key in &nsecs {
        let owner = Owner {
            key: key.clone(),
            cut: is_cut(zone, key),
        };
        let next = zone
            .nsec_after(key)
            .cloned()
            .unwrap_or_else(|| apex.clone());
        let wanted = NSEC::new(Name::from(&next), chain::types(zone, &owner));
        let name = Name::from(key);
        let current = zone
            .node(key)
            .and_then(|n| n.rrset(RecordType::NSEC))
            .and_then(|s| s.first());
        if current != Some(RData::DNSSEC(DNSSECRData::NSEC(wanted.clone()))) {
            remove_type(zone, &name, RecordType::NSEC);
            zone.insert(nsec_record(&name, wanted, ttl))?;
        }
        touched.insert(key.clone());
    }
    // Then every RRset of a touched name that differs from `before`'s is
    // signed again; sets gone take their signatures with them.
    let (_, zsks) = signer.signing_keys();
    for key in &touched {
        let name = Name::from(key);
        let old = before.node(key);
        let Some(node) = zone.node(key) else {
            continue;
        };
        let stale: Vec<RecordType> = node
            .rrsets()
            .iter()
            .filter(|s| s.rtype == RecordType::RRSIG)
            .filter_map(|s| s.covered())
            .filter(|t| node.rrset(*t).is_none())
            .collect();
        // At a cut (a neighbour's NSEC moved) only DS and NSEC are ours.
        let cut = is_cut(zone, key);
        let resign: Vec<RRset> = node
            .rrsets()
            .iter()
            .filter(|s| s.rtype != RecordType::RRSIG)
            .filter(|s| !cut || matches!(s.rtype, RecordType::DS | RecordType::NSEC))
            .filter(|s| {
                !matches!(
                    s.rtype,
                    RecordType::DNSKEY | RecordType::CDS | RecordType::CDNSKEY
                )
            })
            .filter(|s| {
                old.and_then(|o| o.rrset(s.rtype)) != Some(*s) || node.signatures(s.rtype).is_none()
            })
            .cloned()
            .collect();
        for t in stale {
            remove_signatures(zone, &name, t);
        }
        for set in resign {
            remove_signatures(zone, &name, set.rtype);
            for d in rrsig::sign(&name, &set, &zsks, zone.origin(), &signer.policy, now)? {
                zone.insert(Record::from_rdata(name.clone(), set.ttl, d))?;
            }
        }
    }
    Ok(Some(touched))
}

fn is_cut(zone: &Zone, key: &LowerName) -> bool {
    *key != *zone.origin_key()
        && zone
            .node(key)
            .is_some_and(|n| n.rrset(RecordType::NS).is_some())
}

fn nsec_ttl(zone: &Zone) -> u32 {
    zone.soa().map_or(0, |(s, ttl)| s.minimum.min(ttl))
}

fn nsec_record(name: &Name, nsec: NSEC, ttl: u32) -> Record {
    Record::from_rdata(name.clone(), ttl, RData::DNSSEC(DNSSECRData::NSEC(nsec)))
}

/// Removes `name`'s `rtype` RRset and its signatures.
fn remove_type(zone: &mut Zone, name: &Name, rtype: RecordType) {
    remove_set(zone, name, |n| n.rrset(rtype));
    remove_signatures(zone, name, rtype);
}

fn remove_signatures(zone: &mut Zone, name: &Name, covered: RecordType) {
    remove_set(zone, name, |n| n.signatures(covered));
}

/// Removes every record of the set `pick` finds at `name`.
fn remove_set(zone: &mut Zone, name: &Name, pick: impl Fn(&Node) -> Option<&RRset>) {
    let rdatas: Vec<RData> = zone
        .node(&LowerName::new(name))
        .and_then(pick)
        .map(|s| s.rdatas().collect())
        .unwrap_or_default();
    for d in rdatas {
        zone.remove(name, &d);
    }
}

/// The names of `zone` holding a signature due for refresh at `now`.
pub fn due_names(signer: &ZoneSigner, zone: &Zone, now: u32) -> Vec<LowerName> {
    zone.nodes()
        .filter(|(_, node)| {
            rrsig::signatures_at(node).any(|(_, expiry)| !rrsig::fresh(expiry, &signer.policy, now))
        })
        .map(|(key, _)| key.clone())
        .collect()
}

/// Signs again, at `names` (and the apex, whose SOA moved), every RRset
/// whose signatures are due at `now`; `zone` is a copy of the served
/// version with its serial moved. Returns the names changed.
pub fn refresh_names(
    signer: &ZoneSigner,
    zone: &mut Zone,
    names: &[LowerName],
    now: u32,
) -> Result<BTreeSet<LowerName>, SignError> {
    let apex = zone.origin_key().clone();
    let (ksks, zsks) = signer.signing_keys();
    let mut touched: BTreeSet<LowerName> = names.iter().cloned().collect();
    touched.insert(apex.clone());
    for key in &touched {
        let name = Name::from(key);
        let Some(node) = zone.node(key) else {
            continue;
        };
        let cut = is_cut(zone, key);
        let due: Vec<(RRset, bool)> = node
            .rrsets()
            .iter()
            .filter(|s| s.rtype != RecordType::RRSIG)
            .filter(|s| !cut || matches!(s.rtype, RecordType::DS | RecordType::NSEC))
            .filter_map(|s| {
                let ksk = matches!(
                    s.rtype,
                    RecordType::DNSKEY | RecordType::CDS | RecordType::CDNSKEY
                );
                let keys = if ksk { &ksks } else { &zsks };
                let stale = s.rtype == RecordType::SOA
                    || rrsig::reusable(node.signatures(s.rtype), keys, &signer.policy, now)
                        .is_none();
                stale.then(|| (s.clone(), ksk))
            })
            .collect();
        for (set, ksk) in due {
            remove_signatures(zone, &name, set.rtype);
            let keys = if ksk { &ksks } else { &zsks };
            for d in rrsig::sign(&name, &set, keys, zone.origin(), &signer.policy, now)? {
                zone.insert(Record::from_rdata(name.clone(), set.ttl, d))?;
            }
        }
    }
    Ok(touched)
}
