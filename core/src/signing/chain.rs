//! The NSEC chain (RFC 4034 §4, RFC 4035 §2.3): one NSEC at every name
//! with authoritative data or a delegation, in canonical order, the last
//! pointing back to the apex.

use std::collections::BTreeSet;

use hickory_proto::dnssec::rdata::{DNSSECRData, NSEC};
use hickory_proto::rr::{LowerName, Name, RData, Record, RecordType};

use crate::zone::Zone;

/// A name the zone is authoritative for (or delegates), with whether it
/// is a delegation point.
#[derive(Clone, Debug)]
pub(super) struct Owner {
    pub key: LowerName,
    pub cut: bool,
}

/// The names that get an NSEC, in canonical order: names with RRsets that
/// are not occluded (below a cut or a DNAME); empty non-terminals have
/// none.
pub(super) fn owners(zone: &Zone) -> Vec<Owner> {
    let apex = zone.origin_key().clone();
    let mut keys: BTreeSet<LowerName> = BTreeSet::new();
    for (key, node) in zone.nodes() {
        if node
            .rrsets()
            .iter()
            .all(|s| crate::zone::signer_managed(s.rtype))
            && key != apex
        {
            continue;
        }
        if key != apex && (zone.below_cut(&key.base_name()) || zone.below_dname(&key)) {
            continue;
        }
        keys.insert(key);
    }
    keys.into_iter()
        .map(|key| {
            let cut = key != apex
                && zone
                    .node(&key)
                    .is_some_and(|n| n.rrset(RecordType::NS).is_some());
            Owner { key, cut }
        })
        .collect()
}

/// The types an owner's NSEC lists: at a delegation only NS and DS (the
/// rest there is not the zone's), anywhere else every type present; with
/// NSEC and RRSIG, which every NSEC has.
pub(super) fn types(zone: &Zone, owner: &Owner) -> Vec<RecordType> {
    let node = zone.node(&owner.key).expect("owners are nodes");
    let mut types: Vec<RecordType> = node
        .rrsets()
        .iter()
        .map(|s| s.rtype)
        .filter(|t| !matches!(t, RecordType::RRSIG | RecordType::NSEC))
        .filter(|t| !owner.cut || matches!(t, RecordType::NS | RecordType::DS))
        .collect();
    types.extend([RecordType::NSEC, RecordType::RRSIG]);
    types
}

/// The NSEC records of `owners` (the zone's DNSKEYs already in place, so
/// the apex lists them), with `ttl`.
pub(super) fn nsec_records(zone: &Zone, owners: &[Owner], ttl: u32) -> Vec<Record> {
    owners
        .iter()
        .enumerate()
        .map(|(i, owner)| {
            let next = &owners[(i + 1) % owners.len()].key;
            let nsec = NSEC::new(Name::from(next), types(zone, owner));
            Record::from_rdata(
                Name::from(&owner.key),
                ttl,
                RData::DNSSEC(DNSSECRData::NSEC(nsec)),
            )
        })
        .collect()
}
