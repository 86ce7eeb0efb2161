//! Entries for every query type but A and AAAA (whose fixed-size records
//! [`super::compile::encode_answer`] writes directly): the full handler's
//! own answer to the query, compiled once. The handler decides
//! (`handler::resolve`), the shared writer encodes (`wire::encode`), so
//! the kernel's bytes are the fallback's by construction.
//!
//! An answer is compiled only when it is the same for every query of the
//! name and type: NOERROR, authoritative, no referral, nothing in the
//! authority section but the zone's SOA after a CNAME chain that ends in
//! NODATA (the SOA changes with every serial, so the kernel appends the
//! zone's negative template rather than a copy), no DNAME, no CNAME
//! chain that leaves the zone, no A/AAAA RRset that the zone rotates. Its compression points only into the question (at a
//! fixed offset, compared case-insensitively) and into itself, so the
//! query's case does not matter.

use std::sync::Arc;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{LowerName, Name, RData, RecordType};
use xdpdns_common::{answer_flags, qtype_slot, rtype, Answer, BLOCK_MAX, INLINE_MAX};

use super::entry::{ones_complement_sum, shared_wire, Compiled};
use super::negative::entries as negatives;
use crate::handler::resolve;
use crate::wire::compress::WireName;
use crate::wire::encode::{Header, Section, Writer};
use crate::wire::Reply;
use crate::zone::{Node, Zone};

mod direct;
use direct::Direct;
pub(super) use direct::Owner;

/// The types a CNAME's owner is compiled for besides those its chain's
/// target has: what clients ask of any name they connect to.
const CNAME_OWNER_TYPES: [RecordType; 3] = [RecordType::A, RecordType::AAAA, RecordType::HTTPS];

/// Most records an answer may hold (the handler's budget).
const MAX_RECORDS: usize = BLOCK_MAX / 11;

/// The query types compiled at `node`: every type it has an RRset of (A
/// and AAAA only through a CNAME), or for a CNAME's owner the CNAME, the
/// usual address types and the target's types.
pub(super) fn types_at(zone: &Zone, node: &Node, out: &mut Vec<RecordType>) {
    out.clear();
    let Some(cname) = node.rrset(RecordType::CNAME) else {
        out.extend(
            node.rrsets()
                .iter()
                .map(|s| s.rtype)
                .filter(|t| !matches!(t, RecordType::A | RecordType::AAAA))
                .filter(|t| compiled_type(*t)),
        );
        return;
    };
    out.push(RecordType::CNAME);
    out.extend(CNAME_OWNER_TYPES);
    let target = match cname.first() {
        Some(RData::CNAME(t)) => LowerName::new(&t.0),
        _ => return,
    };
    if let Some(node) = zone.node(&target) {
        for t in node.rrsets().iter().map(|s| s.rtype) {
            if compiled_type(t) && !out.contains(&t) {
                out.push(t);
            }
        }
    }
}

/// Types whose answer the table may hold: the plain data types and DS
/// (answered by the parent at a delegation), with a key tail.
fn compiled_type(t: RecordType) -> bool {
    let code = u16::from(t);
    (xdpdns_common::plain_type(code) || code == rtype::DS) && qtype_slot::keyed(code)
}

/// The entry answering `qtype` at `owner` (whose node is `node`) in
/// `zone`, with `flags` and zone id `zone_id`, the DNSSEC variant when
/// `dnssec`; and the other names it was built from (a CNAME chain's, the
/// targets of SRV, MX and NS records), whose changes change it. `None`
/// when the answer is not one the table can hold.
pub(super) fn compile_type(
    zone: &Zone,
    owner: &Owner<'_>,
    node: &Node,
    qtype: RecordType,
    dnssec: bool,
    how: (u16, u32),
    depends: &mut Vec<Arc<[u8]>>,
) -> Option<Compiled> {
    let direct = direct::answer(zone, owner, node, qtype, dnssec, MAX_RECORDS, depends);
    let compiled = match direct {
        Direct::Written(w) => finish(zone, owner.name, &w, (Shape::Answer, 0), how),
        Direct::NoEntry => None,
        Direct::Handler => return via_handler(zone, owner.name, qtype, dnssec, how, depends),
    };
    #[cfg(debug_assertions)]
    {
        let mut handler_depends = Vec::new();
        let handler = via_handler(zone, owner.name, qtype, dnssec, how, &mut handler_depends);
        debug_assert_eq!(
            compiled, handler,
            "{} {qtype}: direct != handler",
            owner.name
        );
        debug_assert!(
            handler_depends.iter().all(|d| depends.contains(d)),
            "{} {qtype}: direct depends on fewer names",
            owner.name
        );
    }
    compiled
}

/// [`compile_type`] through the full handler's answer.
fn via_handler(
    zone: &Zone,
    name: &Name,
    qtype: RecordType,
    dnssec: bool,
    how: (u16, u32),
    depends: &mut Vec<Arc<[u8]>>,
) -> Option<Compiled> {
    let reply = resolve(zone, name, qtype, MAX_RECORDS, dnssec, 0);
    // Noted even when not exact: a change there may make it exact.
    note_depends(zone, name, &reply, depends);
    let shape = shape(zone, &reply, qtype)?;
    let mut w = Writer::new(Header::default(), name, u16::from(qtype), 1, BLOCK_MAX);
    w.records(Section::Answer, &reply.answers).ok()?;
    let answer_len = w.sections().0.len();
    match shape {
        Shape::Answer => w.records(Section::Additional, &reply.additional).ok()?,
        Shape::ChainNoData => w.records(Section::Authority, &reply.authority).ok()?,
    }
    finish(zone, name, &w, (shape, answer_len), how)
}

/// The entry of the answer written in `w` (of `shape`, its answer
/// section `answer_len` bytes), with `flags` and `zone_id`.
fn finish(
    zone: &Zone,
    name: &Name,
    w: &Writer,
    (shape, answer_len): (Shape, usize),
    (flags, zone_id): (u16, u32),
) -> Option<Compiled> {
    let (all, [ancount, _, arcount]) = w.sections();
    let (prefix_len, flags) = match shape {
        Shape::Answer => (all.len(), flags),
        Shape::ChainNoData => {
            // The answer section alone: the kernel appends the zone's SOA
            // template, only where that is these very bytes (the SOA's
            // names compress against the question's apex and themselves,
            // not the chain's names).
            let prefix_len = answer_len;
            let qname_len = WireName::new(name).bytes().len();
            let soa = negatives::soa_relocated(zone, qname_len, prefix_len)?;
            if all[prefix_len..] != soa[..] {
                return None;
            }
            (prefix_len, flags | answer_flags::SOA_AFTER)
        }
    };
    let section = &all[..prefix_len];
    if section.is_empty() || section.len() > BLOCK_MAX || ancount > 0xff {
        return None;
    }
    let mut head = Answer::new(section.len() as u16, ancount as u8, flags);
    head.csum = ones_complement_sum(section);
    head.set_zone(zone_id);
    let block = match section.len() <= INLINE_MAX {
        true => {
            head.data[..section.len()].copy_from_slice(section);
            None
        }
        false => Some(Arc::from(section)),
    };
    match shape {
        Shape::Answer => head.set_more_counts(0, arcount).then_some(())?,
        Shape::ChainNoData => head.set_soa_after(zone_apex_len(zone)?),
    }
    Some(Compiled { head, block })
}

/// What an exact answer holds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Answer records, and the additional records they bring.
    Answer,
    /// A CNAME chain that ends at a name of the zone without the type:
    /// the chain, and the zone's SOA in the authority section.
    ChainNoData,
}

/// The wire length of the zone's apex, when the kernel can key it.
fn zone_apex_len(zone: &Zone) -> Option<u8> {
    u8::try_from(WireName::new(zone.origin()).bytes().len()).ok()
}

/// The shape of `reply` when it is the same for every query of its name
/// and type, `None` otherwise.
fn shape(zone: &Zone, reply: &Reply, qtype: RecordType) -> Option<Shape> {
    if reply.rcode != ResponseCode::NoError
        || !reply.authoritative
        || reply.referral
        || reply.oversized
        || reply.answers.is_empty()
    {
        return None;
    }
    let shape = match reply.authority.as_slice() {
        [] => Shape::Answer,
        // NODATA at the chain's end, in this zone (its SOA; a signed
        // zone's proofs are more records).
        [soa]
            if soa.record_type() == RecordType::SOA
                && LowerName::new(&soa.name) == *zone.origin_key()
                && reply.additional.is_empty() =>
        {
            Shape::ChainNoData
        }
        _ => return None,
    };
    let data = || {
        reply
            .answers
            .iter()
            .filter(|r| r.record_type() != RecordType::RRSIG)
    };
    if data().any(|r| r.record_type() == RecordType::DNAME) {
        return None;
    }
    // A chain that stops at a CNAME left the zone (or ran too long),
    // unless the zone said NODATA at its end.
    let last = data().next_back().map(|r| r.record_type());
    let chain_end = qtype != RecordType::CNAME && last == Some(RecordType::CNAME);
    if chain_end != (shape == Shape::ChainNoData) {
        return None;
    }
    // The handler starts a rotating zone's address RRsets at the query ID.
    if zone.rotates() {
        let count = |t| data().filter(|r| r.record_type() == t).count();
        if count(RecordType::A) > 1 || count(RecordType::AAAA) > 1 {
            return None;
        }
    }
    Some(shape)
}

/// The names besides `name` whose records `reply` holds or may come to
/// hold: the owners in its answer section (a CNAME chain) and the
/// in-zone targets of its SRV, MX and NS records (their addresses are
/// the additional section, present or not).
fn note_depends(zone: &Zone, name: &Name, reply: &Reply, depends: &mut Vec<Arc<[u8]>>) {
    let own = LowerName::new(name);
    let mut add = |n: &Name| {
        let key = LowerName::new(n);
        if key != own && zone.origin_key().zone_of(&key) {
            let wire = shared_wire(&key);
            if !depends.contains(&wire) {
                depends.push(wire);
            }
        }
    };
    for r in &reply.answers {
        add(&r.name);
        match &r.data {
            RData::CNAME(t) => add(&t.0),
            RData::SRV(srv) => add(&srv.target),
            RData::MX(mx) => add(&mx.exchange),
            RData::NS(ns) => add(&ns.0),
            _ => {}
        }
    }
}
