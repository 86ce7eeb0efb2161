//! The common typed answer written straight from the zone store's wire
//! form: a name's own RRset of the asked type (and its RRSIGs in a
//! signed variant), with the addresses of its SRV, MX or NS targets as
//! additional records. This is the full handler's answer for such a
//! name, without decoding each record and copying it into a reply first
//! (that was most of a million-name compile); anything else, a CNAME's
//! owner, a zone with cuts or DNAMEs, goes through the handler.
//!
//! Debug builds check every answer written here against the handler's.

use std::sync::Arc;

use hickory_proto::rr::{LowerName, Name, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder};
use xdpdns_common::BLOCK_MAX;

use crate::answers::entry::shared_wire;
use crate::wire::encode::{Header, Section, Writer};
use crate::zone::{Node, RRset, Zone};

/// What writing the answer directly came to.
pub(in crate::answers) enum Direct {
    /// The answer records (answer and additional sections).
    Written(Writer),
    /// The handler's answer is not one the table holds (more records
    /// than the budget, a chain that leaves the zone, a rotated set).
    NoEntry,
    /// Not a shape written here: ask the handler.
    Handler,
}

/// A name being compiled: its key, its name (lower-cased) and its wire
/// form.
pub(in crate::answers) struct Owner<'a> {
    pub key: &'a LowerName,
    pub name: &'a Name,
    pub wire: &'a [u8],
}

/// The answer to `qtype` at `owner`'s `node`, noting the in-zone targets
/// its records name in `depends` as the handler's path does.
pub(super) fn answer(
    zone: &Zone,
    owner: &Owner<'_>,
    node: &Node,
    qtype: RecordType,
    dnssec: bool,
    budget: usize,
    depends: &mut Vec<Arc<[u8]>>,
) -> Direct {
    if !written_here(qtype) || zone.has_cuts() || zone.has_dnames() || node.is_nsec3_only() {
        return Direct::Handler;
    }
    let signed = dnssec && zone.is_signed();
    let mut w = Writer::new(
        Header::default(),
        owner.name,
        u16::from(qtype),
        1,
        BLOCK_MAX,
    );
    let mut budget = Budget(budget);
    let mut note = |target: &LowerName| {
        if zone.origin_key().zone_of(target) && target != owner.key {
            let key = shared_wire(target);
            if !depends.contains(&key) {
                depends.push(key);
            }
        }
    };
    let cname = node.rrset(RecordType::CNAME);
    let (set, at) = match (qtype, cname) {
        (RecordType::CNAME, Some(set)) => (set, node),
        (_, None) => match node.rrset(qtype) {
            Some(set) => (set, node),
            None => return Direct::Handler,
        },
        // A CNAME's owner: the CNAME, then its target's RRset when that
        // is a name of the zone with one (a longer chain, NODATA or a
        // name that does not exist is the handler's).
        (_, Some(cname)) => {
            let Some(rdata) = cname.wire().next() else {
                return Direct::Handler;
            };
            let Some(target) = name_of(rdata) else {
                return Direct::Handler;
            };
            for other in cname.wire().filter_map(name_of) {
                note(&other);
            }
            let own = [(cname, sigs(signed, node, RecordType::CNAME))];
            if !budget.take(&own) || push(&mut w, Section::Answer, owner.wire, &own).is_none() {
                return Direct::NoEntry;
            }
            if !zone.origin_key().zone_of(&target) {
                // The chain leaves the zone: the resolver goes on from it.
                return Direct::NoEntry;
            }
            let Some(at) = zone.node(&target).filter(|n| !n.is_nsec3_only()) else {
                return Direct::Handler;
            };
            let Some(set) = at.rrset(qtype).filter(|_| !has_targets(qtype)) else {
                return Direct::Handler;
            };
            // The handler starts a rotating zone's address RRsets at the
            // query ID: no entry holds one of several records.
            let address = matches!(qtype, RecordType::A | RecordType::AAAA);
            if zone.rotates() && address && set.len() > 1 {
                return Direct::NoEntry;
            }
            let sets = [(set, sigs(signed, at, qtype))];
            if !budget.take(&sets) || push(&mut w, Section::Answer, rdata, &sets).is_none() {
                return Direct::NoEntry;
            }
            return Direct::Written(w);
        }
    };
    let own = [(set, sigs(signed, at, qtype))];
    if !budget.take(&own) || push(&mut w, Section::Answer, owner.wire, &own).is_none() {
        return Direct::NoEntry;
    }
    if qtype == RecordType::CNAME {
        for target in set.wire().filter_map(name_of) {
            note(&target);
        }
    }
    if !has_targets(qtype) {
        return Direct::Written(w);
    }
    // The targets' addresses, each target once, A before AAAA, written
    // with the target's name as its record holds it.
    let mut seen: Vec<LowerName> = Vec::new();
    for rdata in set.wire() {
        let written = rdata.get(target_at(qtype)..);
        let Some((wire, target)) = written.and_then(|w| Some((w, name_of(w)?))) else {
            return Direct::Handler;
        };
        note(&target);
        if !zone.origin_key().zone_of(&target) || seen.contains(&target) {
            continue;
        }
        let Some(at) = zone.node(&target) else {
            continue;
        };
        seen.push(target);
        for t in [RecordType::A, RecordType::AAAA] {
            let Some(set) = at.rrset(t) else { continue };
            let sets = [(set, sigs(signed, at, t))];
            if !budget.take(&sets) || push(&mut w, Section::Additional, wire, &sets).is_none() {
                return Direct::NoEntry;
            }
        }
    }
    Direct::Written(w)
}

/// The types written here: each a name's own RRset, whose RDATA is
/// written as the store keeps it or with names compressed as
/// [`Writer::record`] does.
fn written_here(qtype: RecordType) -> bool {
    has_targets(qtype)
        || matches!(
            qtype,
            RecordType::A
                | RecordType::AAAA
                | RecordType::CNAME
                | RecordType::TXT
                | RecordType::HTTPS
                | RecordType::SVCB
                | RecordType::PTR
                | RecordType::SOA
                | RecordType::CAA
                | RecordType::DS
                | RecordType::TLSA
                | RecordType::SSHFP
        )
}

/// Types whose answers carry their targets' addresses.
fn has_targets(qtype: RecordType) -> bool {
    matches!(qtype, RecordType::MX | RecordType::SRV | RecordType::NS)
}

/// The RRSIGs over `node`'s RRset of type `t`, in a signed answer.
fn sigs(signed: bool, node: &Node, t: RecordType) -> Option<&RRset> {
    signed.then(|| node.signatures(t)).flatten()
}

/// Records the reply may still take (the handler's budget).
struct Budget(usize);

impl Budget {
    fn take(&mut self, sets: &[(&RRset, Option<&RRset>)]) -> bool {
        let n: usize = sets
            .iter()
            .map(|(s, sigs)| s.len() + sigs.map_or(0, RRset::len))
            .sum();
        match self.0.checked_sub(n) {
            Some(left) => {
                self.0 = left;
                true
            }
            None => false,
        }
    }
}

/// Writes each set, then its signatures, owned by `owner`.
fn push(
    w: &mut Writer,
    section: Section,
    owner: &[u8],
    sets: &[(&RRset, Option<&RRset>)],
) -> Option<()> {
    for (set, sigs) in sets {
        for s in std::iter::once(*set).chain(*sigs) {
            let rtype = u16::from(s.rtype);
            for rdata in s.wire() {
                w.record_wire(section, owner, rtype, s.ttl, rdata)?;
            }
        }
    }
    Some(())
}

/// Where the name an SRV, MX or NS record points to starts in its RDATA.
fn target_at(qtype: RecordType) -> usize {
    match qtype {
        RecordType::SRV => 6,
        RecordType::MX => 2,
        _ => 0,
    }
}

/// The name that is the whole of `wire`, lower-cased.
fn name_of(wire: &[u8]) -> Option<LowerName> {
    let mut d = BinDecoder::new(wire);
    let name = Name::read(&mut d).ok()?;
    d.is_empty().then(|| LowerName::new(&name))
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::str::FromStr;

    use super::super::{finish, types_at, via_handler, Shape, MAX_RECORDS};
    use super::*;
    use crate::answers::entry::lower_wire;
    use crate::signing::{ActiveKey, KeyRole, SignPolicy, ZoneSigner};
    use crate::zone::{load_zone_str, RotationPolicy, ZoneStore};

    /// Every type written here, targets in and out of the zone, one of
    /// them twice in two cases, and CNAMEs the handler must take.
    const ZONE: &str = "$ORIGIN example.com.\n$TTL 300\n\
        @ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\n@ NS ns2.example.net.\n\
        @ MX 10 mail\n@ TXT \"v=spf1 -all\"\n@ CAA 0 issue \"letsencrypt.org\"\n\
        ns1 A 192.0.2.1\nmail A 192.0.2.25\nmail AAAA 2001:db8::25\n\
        _sip._tcp SRV 0 5 5060 sip1\n_sip._tcp SRV 0 5 5061 SIP1\n\
        _sip._tcp SRV 1 5 5060 sip2.example.net.\n\
        sip1 A 192.0.2.5\nsip1 A 192.0.2.6\nsip1 AAAA 2001:db8::5\n\
        web HTTPS 1 . alpn=h2 ipv4hint=192.0.2.80\nsvc SVCB 1 web alpn=h3\n\
        txt TXT \"hello\" \"world\"\n5 PTR host.example.com.\n\
        _443._tcp.web TLSA 3 1 1 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n\
        host SSHFP 1 1 0123456789abcdef0123456789abcdef01234567\n\
        alias CNAME Mail\nalias2 CNAME sip1\nout CNAME www.example.net.\n\
        chain CNAME alias\nmxalias CNAME @\n";

    fn zone(signed: bool, rotate: bool) -> std::sync::Arc<Zone> {
        let origin = Name::from_str("example.com.").unwrap();
        let store =
            ZoneStore::with_zones(vec![load_zone_str(ZONE, &origin, Path::new("t")).unwrap()]);
        if signed {
            use hickory_proto::dnssec::crypto::EcdsaSigningKey;
            use hickory_proto::dnssec::Algorithm;
            let pkcs8 = EcdsaSigningKey::generate_pkcs8(Algorithm::ECDSAP256SHA256).unwrap();
            let k = EcdsaSigningKey::from_pkcs8(&pkcs8, Algorithm::ECDSAP256SHA256).unwrap();
            let key = ActiveKey::new(KeyRole::Csk, std::sync::Arc::new(k)).unwrap();
            let signer = ZoneSigner::new(vec![key], SignPolicy::default());
            store.set_signer(&origin, Some(std::sync::Arc::new(signer)), 1_800_000_000);
        }
        if rotate {
            store.set_rotation(RotationPolicy::new(&[origin]));
        }
        store.snapshot().zones().next().unwrap().clone()
    }

    /// Compiles every (name, type) of the zone both ways: each answer
    /// written here is the handler's, with the same dependencies; returns
    /// the (name, type, DO) triples written here, and those with no entry.
    fn both_ways(zone: &Zone) -> (Vec<String>, Vec<String>) {
        let (mut written, mut none) = (Vec::new(), Vec::new());
        for (key, node) in zone.nodes() {
            let name = Name::from(&key);
            let wire = lower_wire(&key);
            let owner = Owner {
                key: &key,
                name: &name,
                wire: &wire,
            };
            let mut types = Vec::new();
            types_at(zone, node, &mut types);
            for t in types {
                for dnssec in [false, true] {
                    let (mut direct, mut handler) = (Vec::new(), Vec::new());
                    let how = (0, 7);
                    let ours = match answer(zone, &owner, node, t, dnssec, MAX_RECORDS, &mut direct)
                    {
                        Direct::Written(w) => finish(zone, &name, &w, (Shape::Answer, 0), how),
                        Direct::NoEntry => None,
                        Direct::Handler => continue,
                    };
                    let theirs = via_handler(zone, &name, t, dnssec, how, &mut handler);
                    let label = format!("{name} {t} DO={dnssec}");
                    assert_eq!(ours, theirs, "{label}");
                    direct.sort();
                    handler.sort();
                    assert_eq!(direct, handler, "{label}: the names it depends on");
                    match ours {
                        Some(_) => written.push(label),
                        None => none.push(label),
                    }
                }
            }
        }
        (written, none)
    }

    #[test]
    fn written_answers_are_the_handlers_in_plain_and_signed_zones() {
        for signed in [false, true] {
            let (written, none) = both_ways(&zone(signed, false));
            for want in [
                "example.com. MX",
                "example.com. NS",
                "example.com. SOA",
                "example.com. TXT",
                "example.com. CAA",
                "_sip._tcp.example.com. SRV",
                "web.example.com. HTTPS",
                "svc.example.com. SVCB",
                "txt.example.com. TXT",
                "5.example.com. PTR",
                "_443._tcp.web.example.com. TLSA",
                "host.example.com. SSHFP",
                "alias.example.com. CNAME",
                "alias.example.com. A",
                "alias.example.com. AAAA",
                "alias2.example.com. A",
            ] {
                for dnssec in [false, true] {
                    let label = format!("{want} DO={dnssec}");
                    assert!(
                        written.contains(&label),
                        "signed={signed}: {label} written here"
                    );
                }
            }
            let out = "out.example.com. A DO=false".to_string();
            assert!(none.contains(&out), "a chain leaving the zone has no entry");
        }
    }

    #[test]
    fn a_rotated_set_behind_a_cname_has_no_entry_as_with_the_handler() {
        let (written, none) = both_ways(&zone(false, true));
        assert!(none.contains(&"alias2.example.com. A DO=false".to_string()));
        assert!(
            written.contains(&"alias.example.com. A DO=false".to_string()),
            "one record"
        );
    }
}
