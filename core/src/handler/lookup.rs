//! Authoritative resolution inside one zone (RFC 1034 §4.3.2, RFC 4592
//! wildcards, RFC 8482 minimal ANY, RFC 4035 DNSSEC for pre-signed
//! zones), producing a [`Reply`]. Pure.

use std::collections::HashSet;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::CNAME;
use hickory_proto::rr::{LowerName, Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder};

use xdpdns_common::rotation;

use super::denial::{self, Denial};
use crate::wire::Reply;
use crate::zone::{label_count, Node, RRset, Zone};

/// Longest CNAME chain followed inside a zone before giving up.
const MAX_CNAME_CHAIN: usize = 16;

/// What the zone says about one name.
enum Found<'z> {
    /// The node that owns the name's data; `wildcard` names the closest
    /// encloser when the node is its wildcard (`*.<closest>`).
    Node {
        node: &'z Node,
        wildcard: Option<LowerName>,
    },
    /// The name is at or below a zone cut: refer to the child.
    Delegation {
        cut: LowerName,
        node: &'z Node,
        ns: &'z RRset,
    },
    /// The name is below a DNAME at `owner` (RFC 6672).
    Dname {
        owner: LowerName,
        node: &'z Node,
        dname: &'z RRset,
    },
    /// No such name; `closest` is its closest encloser.
    NxDomain { closest: LowerName },
}

/// Answers `qname`/`qtype` from `zone`, which must contain `qname`.
/// `dnssec`: the query set DO; a signed zone's answers then carry their
/// RRSIGs and NSEC/NSEC3 proofs (RFC 4035 §3.1).
///
/// Owner names of answers keep the case the client sent; CNAME targets and
/// additional records keep the zone's case. A reply that would hold more
/// than `max_records` records is returned `oversized` as soon as that is
/// known, without copying the rest. In a zone that rotates its answers,
/// every A and AAAA RRset in the answer section starts at record `id`
/// (the query ID) modulo its size (`xdpdns_common::rotation`).
pub fn resolve(
    zone: &Zone,
    qname: &Name,
    qtype: RecordType,
    max_records: usize,
    dnssec: bool,
    id: u16,
) -> Reply {
    let mut out = Gather {
        zone,
        signed: dnssec && zone.is_signed(),
        rotate_by: zone.rotates().then_some(id),
        budget: max_records,
        reply: Reply {
            authoritative: true,
            ..Reply::default()
        },
        proved: Vec::new(),
    };
    out.oversized_unless(|g| g.gather(qname, qtype));
    let mut reply = out.reply;
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

/// A reply being filled, within a budget of records.
struct Gather<'z> {
    zone: &'z Zone,
    /// Add RRSIGs and denial proofs.
    signed: bool,
    /// The query ID, when A/AAAA answers rotate.
    rotate_by: Option<u16>,
    /// Records the reply may still take.
    budget: usize,
    reply: Reply,
    /// Owners of the NSEC/NSEC3 records already in the authority section
    /// (a CNAME chain may need one twice).
    proved: Vec<LowerName>,
}

/// Where a record set goes.
#[derive(Clone, Copy)]
enum Section {
    Answer,
    Authority,
    Additional,
}

/// A push that did not fit the budget.
struct Full;

impl<'z> Gather<'z> {
    fn oversized_unless(&mut self, f: impl FnOnce(&mut Self) -> Result<(), Full>) {
        if f(self).is_err() {
            self.reply.oversized = true;
        }
    }

    fn gather(&mut self, qname: &Name, qtype: RecordType) -> Result<(), Full> {
        let zone = self.zone;
        let mut owner = qname.clone();
        for _ in 0..MAX_CNAME_CHAIN {
            let key = LowerName::new(&owner);
            match find(zone, &key, qtype) {
                Found::Delegation { cut, node, ns } => {
                    // A referral is only authoritative if we already
                    // answered part of it (a CNAME leading into it).
                    self.reply.authoritative = !self.reply.answers.is_empty();
                    self.reply.referral = true;
                    let cut_name = Name::from(&cut);
                    self.push(Section::Authority, &cut_name, ns, None)?;
                    if self.signed {
                        match node.rrset(RecordType::DS) {
                            Some(ds) => {
                                self.push_signed(Section::Authority, &cut_name, node, ds)?
                            }
                            None => self.push_proof(&Denial::NoDs { cut: &cut })?,
                        }
                    }
                    return self.push_addresses_for(ns, true);
                }
                Found::Dname {
                    owner: at,
                    node,
                    dname,
                } => {
                    let at_name = Name::from(&at);
                    self.push_signed(Section::Answer, &at_name, node, dname)?;
                    let Some(target) = dname.first().as_ref().and_then(dname_target) else {
                        return Ok(());
                    };
                    // RFC 6672 §2.2: the labels above the DNAME owner,
                    // moved under its target; too long is YXDOMAIN.
                    let above = label_count(&owner) - label_count(&at_name);
                    let synthesised = Name::from_labels(owner.iter().take(above))
                        .and_then(|prefix| prefix.append_name(&target));
                    let Ok(synthesised) = synthesised else {
                        self.reply.rcode = ResponseCode::YXDomain;
                        return Ok(());
                    };
                    let record = RData::CNAME(CNAME(synthesised.clone()));
                    let Ok(cname) = RRset::new(RecordType::CNAME, dname.ttl, [&record]) else {
                        return Ok(());
                    };
                    self.push(Section::Answer, &owner, &cname, None)?;
                    if qtype == RecordType::CNAME
                        || !zone.origin_key().zone_of(&LowerName::new(&synthesised))
                    {
                        return Ok(());
                    }
                    owner = synthesised;
                }
                Found::NxDomain { closest } => {
                    self.reply.rcode = ResponseCode::NXDomain;
                    self.push_negative_soa()?;
                    return self.push_proof(&Denial::Name {
                        qname: &key,
                        closest: &closest,
                    });
                }
                Found::Node { node, wildcard } => {
                    if let Some(closest) = &wildcard {
                        if self.signed && qtype_answered(node, qtype) {
                            self.push_proof(&Denial::WildcardAnswer {
                                qname: &key,
                                closest,
                            })?;
                        }
                    }
                    if qtype == RecordType::RRSIG && node.rrset(RecordType::RRSIG).is_some() {
                        for set in node
                            .rrsets()
                            .iter()
                            .filter(|s| s.rtype == RecordType::RRSIG)
                        {
                            self.push(Section::Answer, &owner, set, None)?;
                        }
                        return Ok(());
                    }
                    let rrset = match qtype {
                        RecordType::ANY => {
                            node.rrsets().iter().find(|s| s.rtype != RecordType::RRSIG)
                        }
                        t => node.rrset(t),
                    };
                    if let Some(set) = rrset {
                        self.push_signed(Section::Answer, &owner, node, set)?;
                        return self.push_addresses_for(set, false);
                    }
                    let Some(cname) = node.rrset(RecordType::CNAME) else {
                        self.push_negative_soa()?;
                        let denial = match &wildcard {
                            Some(closest) => Denial::WildcardType {
                                qname: &key,
                                closest,
                            },
                            None => Denial::Type {
                                qname: &key,
                                ds: qtype == RecordType::DS,
                            },
                        };
                        return self.push_proof(&denial);
                    };
                    self.push_signed(Section::Answer, &owner, node, cname)?;
                    let Some(RData::CNAME(target)) = cname.first() else {
                        return Ok(());
                    };
                    if !zone.origin_key().zone_of(&LowerName::new(&target.0)) {
                        // Out of zone: the resolver continues from here.
                        return Ok(());
                    }
                    owner = target.0.clone();
                }
            }
        }
        // A chain this long is a loop or abuse; return what we have.
        Ok(())
    }

    fn section(&mut self, section: Section) -> &mut Vec<Record> {
        match section {
            Section::Answer => &mut self.reply.answers,
            Section::Authority => &mut self.reply.authority,
            Section::Additional => &mut self.reply.additional,
        }
    }

    /// Copies `set` (with `ttl` instead of its own, if given).
    fn push(
        &mut self,
        section: Section,
        owner: &Name,
        set: &RRset,
        ttl: Option<u32>,
    ) -> Result<(), Full> {
        self.push_from(section, owner, set, ttl, 0)
    }

    /// [`Gather::push`] starting at record `first` and wrapping round.
    fn push_from(
        &mut self,
        section: Section,
        owner: &Name,
        set: &RRset,
        ttl: Option<u32>,
        first: usize,
    ) -> Result<(), Full> {
        self.budget = self.budget.checked_sub(set.len()).ok_or(Full)?;
        let ttl = ttl.unwrap_or(set.ttl);
        self.section(section).extend(
            set.rdatas()
                .skip(first)
                .chain(set.rdatas().take(first))
                .map(|d| Record::from_rdata(owner.clone(), ttl, d)),
        );
        Ok(())
    }

    /// `set` and, in a signed answer, the RRSIGs over it from `node`.
    fn push_signed(
        &mut self,
        section: Section,
        owner: &Name,
        node: &Node,
        set: &RRset,
    ) -> Result<(), Full> {
        let first = match (section, self.rotate_by, set.rtype) {
            (Section::Answer, Some(id), RecordType::A | RecordType::AAAA) if set.len() > 1 => {
                rotation::first(id, set.len() as u32) as usize
            }
            _ => 0,
        };
        self.push_from(section, owner, set, None, first)?;
        if self.signed {
            if let Some(sigs) = node.signatures(set.rtype) {
                self.push(section, owner, sigs, None)?;
            }
        }
        Ok(())
    }

    /// SOA in authority for NXDOMAIN/NODATA, with the negative-caching TTL
    /// min(SOA TTL, SOA MINIMUM) (RFC 2308 §3), signed like the SOA.
    fn push_negative_soa(&mut self) -> Result<(), Full> {
        let zone = self.zone;
        let apex = zone.apex();
        let Some(soa) = apex.rrset(RecordType::SOA) else {
            return Ok(());
        };
        let Some((fields, _)) = zone.soa() else {
            return Ok(());
        };
        let ttl = soa.ttl.min(fields.minimum);
        self.push(Section::Authority, zone.origin(), soa, Some(ttl))?;
        if self.signed {
            if let Some(sigs) = apex.signatures(RecordType::SOA) {
                self.push(Section::Authority, zone.origin(), sigs, Some(ttl))?;
            }
        }
        Ok(())
    }

    /// The NSEC/NSEC3 records proving `denial`, each with its RRSIGs.
    fn push_proof(&mut self, denial: &Denial<'_>) -> Result<(), Full> {
        if !self.signed {
            return Ok(());
        }
        let zone = self.zone;
        let Some(proof) = denial::prove(zone, denial) else {
            return Ok(());
        };
        let rtype = if proof.nsec3 {
            RecordType::NSEC3
        } else {
            RecordType::NSEC
        };
        for owner in proof.owners {
            if self.proved.contains(&owner) {
                continue;
            }
            let Some(node) = zone.node(&owner) else {
                continue;
            };
            if let Some(set) = node.rrset(rtype) {
                self.push_signed(Section::Authority, &Name::from(&owner), node, set)?;
            }
            self.proved.push(owner);
        }
        Ok(())
    }

    /// A/AAAA records for the in-zone targets of MX, SRV and NS data: the
    /// only additional data a client needs, signed in a signed answer.
    /// With `glue`, targets below a zone cut count too (they are glue for
    /// the referral, and unsigned).
    fn push_addresses_for(&mut self, set: &RRset, glue: bool) -> Result<(), Full> {
        if !matches!(set.rtype, RecordType::MX | RecordType::SRV | RecordType::NS) {
            return Ok(());
        }
        let zone = self.zone;
        // Two MX records to one host must not list it twice (a set: a
        // large SRV RRset must not cost a quadratic search).
        let mut seen = HashSet::new();
        for d in set.rdatas() {
            let target = match &d {
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
                    self.push_signed(Section::Additional, target, node, set)?;
                }
            }
        }
        Ok(())
    }
}

/// The target of a DNAME record (hickory keeps its rdata as bytes).
fn dname_target(rdata: &RData) -> Option<Name> {
    let RData::Unknown { rdata, .. } = rdata else {
        return None;
    };
    let mut decoder = BinDecoder::new(&rdata.anything);
    let name = Name::read(&mut decoder).ok()?;
    decoder.is_empty().then_some(name)
}

/// Whether `node` answers `qtype` itself (rather than by CNAME or NODATA).
fn qtype_answered(node: &Node, qtype: RecordType) -> bool {
    match qtype {
        RecordType::ANY => !node.is_empty(),
        t => node.rrset(t).is_some() || node.rrset(RecordType::CNAME).is_some(),
    }
}

/// Finds the node for `key`, honouring zone cuts below the apex and
/// wildcards with their closest-encloser rule (RFC 4592 §3.3.1). NSEC3
/// owner names are not names of the zone (RFC 5155 §7.2.9).
fn find<'z>(zone: &'z Zone, key: &LowerName, qtype: RecordType) -> Found<'z> {
    // Without cuts below the apex an existing name answers for itself: one
    // lookup rather than one per label (the common service-discovery zone).
    if !zone.has_cuts() && !zone.has_dnames() {
        if let Some(node) = zone.node(key).filter(|n| !n.is_nsec3_only()) {
            return Found::Node {
                node,
                wildcard: None,
            };
        }
    }
    let apex_labels = label_count(zone.origin());
    let depth = label_count(key);
    let mut closest = zone.apex();
    let mut closest_name = zone.origin_key().clone();
    // Walk down from the apex; the first missing name ends the walk at the
    // closest encloser.
    for labels in apex_labels..=depth {
        let name = if labels == apex_labels {
            closest_name.clone()
        } else {
            LowerName::from(key.trim_to(labels))
        };
        let Some(node) = zone.node(&name).filter(|n| !n.is_nsec3_only()) else {
            return wildcard(zone, closest_name);
        };
        // A delegation comes first: at a cut the parent holds no data of
        // the child's, a DNAME there included.
        if labels > apex_labels {
            if let Some(ns) = node.rrset(RecordType::NS) {
                // The parent side answers DS at the cut itself.
                if !(labels == depth && qtype == RecordType::DS) {
                    return Found::Delegation {
                        cut: name,
                        node,
                        ns,
                    };
                }
            }
        }
        if labels < depth {
            if let Some(dname) = node.rrset(RecordType::DNAME) {
                return Found::Dname {
                    owner: name,
                    node,
                    dname,
                };
            }
        }
        closest = node;
        closest_name = name;
    }
    Found::Node {
        node: closest,
        wildcard: None,
    }
}

/// Name does not exist: synthesise from `*.<closest encloser>` if present.
fn wildcard(zone: &Zone, closest: LowerName) -> Found<'_> {
    let source = Name::from(&closest)
        .prepend_label("*")
        .ok()
        .and_then(|s| zone.node(&LowerName::from(s)));
    match source {
        Some(node) => Found::Node {
            node,
            wildcard: Some(closest),
        },
        None => Found::NxDomain { closest },
    }
}
