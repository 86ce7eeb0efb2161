//! Authoritative resolution inside one zone (RFC 1034 §4.3.2, RFC 4592
//! wildcards, RFC 8482 minimal ANY), producing a [`Reply`]. Pure.

use std::collections::HashSet;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{LowerName, Name, RData, Record, RecordType};

use crate::wire::Reply;
use crate::zone::{label_count, Node, RRset, Zone};

/// Longest CNAME chain followed inside a zone before giving up.
const MAX_CNAME_CHAIN: usize = 16;

/// What the zone says about one name.
enum Found<'z> {
    /// The node (possibly a wildcard's) that owns the name's data.
    Node(&'z Node),
    /// The name is at or below a zone cut: refer to the child.
    Delegation {
        cut: LowerName,
        ns: &'z RRset,
    },
    NxDomain,
}

/// Answers `qname`/`qtype` from `zone`, which must contain `qname`.
///
/// Owner names of answers keep the case the client sent; CNAME targets and
/// additional records keep the zone's case. A reply that would hold more
/// than `max_records` records is returned `oversized` as soon as that is
/// known, without copying the rest.
pub fn resolve(zone: &Zone, qname: &Name, qtype: RecordType, max_records: usize) -> Reply {
    let mut reply = gather(zone, qname, qtype, &mut Budget(max_records));
    if reply.answers.len() + reply.authority.len() + reply.additional.len() > max_records {
        reply.oversized = true;
    }
    if reply.oversized {
        reply.answers.clear();
        reply.authority.clear();
        reply.additional.clear();
    }
    reply
}

/// Records a reply may still take; pushing past it marks the reply
/// oversized instead.
struct Budget(usize);

impl Budget {
    /// Takes `n` records from the budget, or says they do not fit.
    fn take(&mut self, n: usize) -> bool {
        match self.0.checked_sub(n) {
            Some(left) => {
                self.0 = left;
                true
            }
            None => false,
        }
    }
}

fn gather(zone: &Zone, qname: &Name, qtype: RecordType, budget: &mut Budget) -> Reply {
    let mut reply = Reply {
        authoritative: true,
        ..Reply::default()
    };
    let mut owner = qname.clone();
    for _ in 0..MAX_CNAME_CHAIN {
        let key = LowerName::new(&owner);
        match find(zone, &key, qtype) {
            Found::Delegation { cut, ns } => {
                // A referral is only authoritative if we already answered
                // part of it (a CNAME leading into the delegation).
                reply.authoritative = !reply.answers.is_empty();
                reply.oversized = !push_rrset(&mut reply.authority, &Name::from(&cut), ns, budget)
                    || !push_addresses_for(zone, &ns.rdatas, &mut reply.additional, true, budget);
                return reply;
            }
            Found::NxDomain => {
                reply.rcode = ResponseCode::NXDomain;
                push_negative_soa(zone, &mut reply);
                return reply;
            }
            Found::Node(node) => {
                let rrset = match qtype {
                    RecordType::ANY => node.rrsets().first(),
                    t => node.rrset(t),
                };
                if let Some(set) = rrset {
                    reply.oversized = !push_rrset(&mut reply.answers, &owner, set, budget)
                        || !push_addresses_for(
                            zone,
                            &set.rdatas,
                            &mut reply.additional,
                            false,
                            budget,
                        );
                    return reply;
                }
                let Some(cname) = node.rrset(RecordType::CNAME) else {
                    push_negative_soa(zone, &mut reply);
                    return reply;
                };
                if !push_rrset(&mut reply.answers, &owner, cname, budget) {
                    reply.oversized = true;
                    return reply;
                }
                let Some(RData::CNAME(target)) = cname.rdatas.first() else {
                    return reply;
                };
                if !zone.origin_key().zone_of(&LowerName::new(&target.0)) {
                    // Out of zone: the resolver continues from here.
                    return reply;
                }
                owner = target.0.clone();
            }
        }
    }
    // A chain this long is a loop or abuse; return what we have.
    reply
}

/// Finds the node for `key`, honouring zone cuts below the apex and
/// wildcards with their closest-encloser rule (RFC 4592 §3.3.1).
fn find<'z>(zone: &'z Zone, key: &LowerName, qtype: RecordType) -> Found<'z> {
    // Without cuts below the apex an existing name answers for itself: one
    // lookup rather than one per label (the common service-discovery zone).
    if !zone.has_cuts() {
        if let Some(node) = zone.node(key) {
            return Found::Node(node);
        }
    }
    let apex_labels = label_count(zone.origin());
    let depth = label_count(key);
    let mut closest = zone.apex();
    let mut closest_name = zone.origin_key().clone();
    // Walk down from the apex; the first missing name ends the walk at the
    // closest encloser.
    for labels in apex_labels + 1..=depth {
        let name = LowerName::from(key.trim_to(labels));
        let Some(node) = zone.node(&name) else {
            return wildcard(zone, &closest_name);
        };
        if let Some(ns) = node.rrset(RecordType::NS) {
            // The parent side answers DS at the cut itself.
            if !(labels == depth && qtype == RecordType::DS) {
                return Found::Delegation { cut: name, ns };
            }
        }
        closest = node;
        closest_name = name;
    }
    Found::Node(closest)
}

/// Name does not exist: synthesise from `*.<closest encloser>` if present.
fn wildcard<'z>(zone: &'z Zone, closest_name: &LowerName) -> Found<'z> {
    match Name::from(closest_name).prepend_label("*") {
        Ok(source) => zone
            .node(&LowerName::from(source))
            .map_or(Found::NxDomain, Found::Node),
        Err(_) => Found::NxDomain,
    }
}

/// Copies `set` into `out` if the budget holds it; false if not.
fn push_rrset(out: &mut Vec<Record>, owner: &Name, set: &RRset, budget: &mut Budget) -> bool {
    if !budget.take(set.rdatas.len()) {
        return false;
    }
    out.extend(
        set.rdatas
            .iter()
            .map(|d| Record::from_rdata(owner.clone(), set.ttl, d.clone())),
    );
    true
}

/// SOA in authority for NXDOMAIN/NODATA, with the negative-caching TTL
/// min(SOA TTL, SOA MINIMUM) (RFC 2308 §3).
fn push_negative_soa(zone: &Zone, reply: &mut Reply) {
    if let Some((soa, ttl)) = zone.soa() {
        reply.authority.push(Record::from_rdata(
            zone.origin().clone(),
            ttl.min(soa.minimum),
            RData::SOA(soa.clone()),
        ));
    }
}

/// A/AAAA records for the in-zone targets of MX, SRV and NS data: the
/// only additional data a client needs. With `glue`, targets below a zone
/// cut count too (they are glue for the referral).
fn push_addresses_for(
    zone: &Zone,
    rdatas: &[RData],
    out: &mut Vec<Record>,
    glue: bool,
    budget: &mut Budget,
) -> bool {
    // Two MX records to one host must not list it twice (a set: a large
    // SRV RRset must not cost a quadratic search).
    let mut seen = HashSet::new();
    for d in rdatas {
        let target = match d {
            RData::MX(mx) => &mx.exchange,
            RData::SRV(srv) => &srv.target,
            RData::NS(ns) => &ns.0,
            _ => continue,
        };
        let key = LowerName::new(target);
        if !zone.origin_key().zone_of(&key) || (!glue && zone.below_cut(&key)) {
            continue;
        }
        let Some(node) = zone.node(&key) else {
            continue;
        };
        if !seen.insert(key) {
            continue;
        }
        for t in [RecordType::A, RecordType::AAAA] {
            if let Some(set) = node.rrset(t) {
                if !push_rrset(out, target, set, budget) {
                    return false;
                }
            }
        }
    }
    true
}
