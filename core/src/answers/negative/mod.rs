//! Negative answers decided without the full handler: NXDOMAIN, and
//! NODATA at a name that exists (empty non-terminals included), with the
//! zone's SOA in authority, decided from the snapshot being served and
//! written the way the full handler's encoder writes them (`names`
//! compresses as hickory does). The hot path answers from it, and the
//! XDP compiler asks it which names the kernel may answer negatively.
//!
//! Only what is decided the same way by a lookup or two goes here: names
//! at or below a delegation or a DNAME, names a wildcard could answer,
//! expired zones, signed zones under DO=1 (which need NSEC/NSEC3 proofs)
//! and the query types the full handler treats specially go to it.

use std::sync::Arc;

use hickory_proto::rr::{LowerName, Name, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder};
use xdpdns_common::{plain_type, rtype};

pub use crate::wire::compress::{Compressor, WireName};
use crate::zone::{Snapshot, Zone};

pub mod entries;
pub mod referral;
pub mod signed;

/// What a query for a missing name or type gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Negative {
    NxDomain,
    NoData,
}

impl Negative {
    pub fn rcode(self) -> u8 {
        match self {
            Negative::NxDomain => 3,
            Negative::NoData => 0,
        }
    }
}

/// The zone and the negative answer for `lower` (the query name,
/// lower-cased wire form) and `qtype`, when the full handler would give
/// exactly that; `None` otherwise.
pub fn decide<'s>(
    snapshot: &'s Snapshot,
    lower: &[u8],
    qtype: u16,
    dnssec_ok: bool,
) -> Option<(&'s Arc<Zone>, Negative)> {
    if !plain_type(qtype) && qtype != rtype::DS {
        return None;
    }
    let key = LowerName::read(&mut BinDecoder::new(lower)).ok()?;
    let zone = snapshot.zone_of(&key)?;
    // One SOA record: the authority section the reply's header counts.
    let one_soa = zone
        .apex()
        .rrset(RecordType::SOA)
        .is_some_and(|set| set.len() == 1);
    if zone.is_expired() || (dnssec_ok && zone.is_signed()) || !one_soa {
        return None;
    }
    if zone.below_dname(&key) {
        return None;
    }
    let exists = |name: &LowerName| zone.node(name).filter(|n| !n.is_nsec3_only());
    if zone.below_cut(&key) {
        // A delegation without DS: the parent says NODATA to DS.
        let cut = !zone.below_cut(&key.base_name());
        let node = exists(&key)?;
        let has = |t| node.rrset(t).is_some();
        let no_ds = qtype == rtype::DS && !has(RecordType::DS) && !has(RecordType::CNAME);
        return (cut && no_ds).then_some((zone, Negative::NoData));
    }
    if qtype == rtype::DS && key == *zone.origin_key() {
        return None;
    }
    if let Some(node) = exists(&key) {
        let has = |t| node.rrset(t).is_some();
        let missing = !has(RecordType::from(qtype)) && !has(RecordType::CNAME);
        return missing.then_some((zone, Negative::NoData));
    }
    // Every ancestor of a name in the zone is a node (empty non-terminals
    // are kept), so the first existing ancestor is the closest encloser.
    let mut closest = key.base_name();
    while exists(&closest).is_none() {
        if closest.is_root() {
            return None;
        }
        closest = closest.base_name();
    }
    let wildcard = Name::from(&closest).prepend_label("*").ok();
    if wildcard.is_some_and(|w| zone.node(&LowerName::from(w)).is_some()) {
        return None;
    }
    Some((zone, Negative::NxDomain))
}

/// Writes the zone's SOA as the authority record of a negative answer,
/// with the negative-caching TTL min(SOA TTL, MINIMUM) (RFC 2308 §3),
/// after a question whose name (as sent) is `qname`, at offset 12.
/// `zone` is one [`decide`] returned, which has an SOA.
pub fn write_soa(out: &mut Vec<u8>, qname: &[u8], zone: &Zone) {
    let Some((soa, ttl)) = zone.soa() else {
        return;
    };
    let ttl = ttl.min(soa.minimum);
    let owner = WireName::new(zone.origin());
    let mname = WireName::new(&soa.mname);
    let rname = WireName::new(&soa.rname);
    let mut names = Compressor::default();
    names.written(xdpdns_common::DNS_HEADER_LEN, qname);
    names.write(out, owner.bytes());
    out.extend_from_slice(&rtype::SOA.to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&ttl.to_be_bytes());
    let rdlength_at = out.len();
    out.extend_from_slice(&[0, 0]);
    names.write(out, mname.bytes());
    names.write(out, rname.bytes());
    out.extend_from_slice(&soa.serial.to_be_bytes());
    out.extend_from_slice(&soa.refresh.to_be_bytes());
    out.extend_from_slice(&soa.retry.to_be_bytes());
    out.extend_from_slice(&soa.expire.to_be_bytes());
    out.extend_from_slice(&soa.minimum.to_be_bytes());
    let rdlength = (out.len() - rdlength_at - 2) as u16;
    out[rdlength_at..rdlength_at + 2].copy_from_slice(&rdlength.to_be_bytes());
}
