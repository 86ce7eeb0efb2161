//! The entries that let the kernel answer NXDOMAIN and NODATA: an
//! EXIST entry for every name that exists, and at each apex the zone's
//! SOA as a template. What an EXIST entry says is what
//! [`super::decide`] says for that name and for a name below
//! it, so the kernel answers negatively exactly where the fallback's hot
//! path does, with the same bytes ([`super::write_soa`]).
//!
//! The SOA record changes with every serial; the EXIST entries do not
//! carry it, so a commit rewrites one template, not every name.

use std::sync::Arc;

use hickory_proto::rr::{LowerName, Name, RecordType};
use xdpdns_common::negative::{
    exist_flags, relocate, Exist, Template, EXIST_HEAD, EXIST_TYPES_MAX, FIXUPS_MAX, NO_FIXUP,
    TEMPLATE_LEN,
};
use xdpdns_common::{Answer, DNS_HEADER_LEN, INLINE_MAX, SMALL_BLOCK_MAX};

use super::{write_soa, WireName};
use crate::answers::entry::{lower_wire, ones_complement_sum, Compiled};
use crate::zone::{Node, Zone};

/// The compressor keeps the suffixes of at most 64 names' labels: a
/// query name with more labels than this may not find its apex among
/// them, and the template would not hold.
const MAX_LABELS: usize = 60;

/// The EXIST entry of `key`, a name of `zone` that exists (not shadowed
/// by a child zone), with the zone's `answer_flags` and id.
pub(in crate::answers) fn exist_entry(
    zone: &Zone,
    facts: &ZoneFacts,
    key: &LowerName,
    wire: &[u8],
    node: &Node,
    answer_flags: u16,
    zone_id: u32,
) -> Option<Compiled> {
    if zone.origin_key().is_root() || key.is_root() {
        return None;
    }
    let apex_len = facts.apex_len;
    let at_apex = key == zone.origin_key();
    let mut flags = negative_flags(zone, facts, key, wire, node);
    if at_apex {
        flags |= exist_flags::APEX;
    }
    let types = match flags & exist_flags::NODATA_OTHER {
        0 => OtherTypes::default(),
        _ => other_types(node).unwrap_or_default(),
    };
    Some(exist_with_types(
        apex_len as u8,
        flags,
        &types,
        answer_flags,
        zone_id,
    ))
}

/// The types `node` has an RRset of, other than A and AAAA (which the
/// flags speak for), once each, in order; `None` when there are more
/// than an EXIST entry lists. No allocation: the compiler asks for every
/// name.
fn other_types(node: &Node) -> Option<OtherTypes> {
    let mut out = OtherTypes::default();
    for set in node.rrsets() {
        let t = u16::from(set.rtype);
        if t == u16::from(RecordType::A) || t == u16::from(RecordType::AAAA) {
            continue;
        }
        // RRSIG sets are one per covered type; the type is listed once.
        if out.types[..out.len].contains(&t) {
            continue;
        }
        if out.len == EXIST_TYPES_MAX {
            return None;
        }
        out.types[out.len] = t;
        out.len += 1;
    }
    out.types[..out.len].sort_unstable();
    Some(out)
}

#[derive(Default)]
struct OtherTypes {
    types: [u16; EXIST_TYPES_MAX],
    len: usize,
}

impl std::ops::Deref for OtherTypes {
    type Target = [u16];
    fn deref(&self) -> &[u16] {
        &self.types[..self.len]
    }
}

/// The wire length of the zone's apex name.
fn zone_len(zone: &Zone) -> usize {
    zone.origin_key().iter().map(|l| 1 + l.len()).sum::<usize>() + 1
}

/// What every EXIST entry of a zone depends on, worked out once.
#[derive(Clone, Copy)]
pub(in crate::answers) struct ZoneFacts {
    /// The apex holds exactly one SOA record, which a negative answer's
    /// authority section needs (`negative::decide` checks the same).
    one_soa: bool,
    apex_len: usize,
    risky: [[u8; 8]; 2],
}

impl ZoneFacts {
    pub(in crate::answers) fn of(zone: &Zone) -> ZoneFacts {
        ZoneFacts {
            one_soa: zone
                .apex()
                .rrset(RecordType::SOA)
                .is_some_and(|set| set.len() == 1),
            apex_len: zone_len(zone),
            risky: risky_labels(zone),
        }
    }
}

/// The NODATA and ENCLOSER flags of a name that exists: what
/// `negative::decide` gives for an A/AAAA query at it and for a missing
/// name below it (the test `flags_agree_with_decide` holds them to it),
/// computed from the node at hand rather than by a lookup per question.
fn negative_flags(zone: &Zone, facts: &ZoneFacts, key: &LowerName, wire: &[u8], node: &Node) -> u8 {
    if !facts.one_soa || zone.is_expired() || zone.below_dname(key) {
        return 0;
    }
    // A query name carries this name's label above the apex; the kernel
    // checks the query's own only at the apex.
    let at_apex = key == zone.origin_key();
    if !at_apex && facts.risky.contains(&label_above(wire, facts.apex_len)) {
        return 0;
    }
    let labels = key.num_labels() as usize;
    let no_ds = labels <= MAX_LABELS + 2
        && node.rrset(RecordType::DS).is_none()
        && node.rrset(RecordType::CNAME).is_none();
    if zone.below_cut(key) {
        // A delegation's own DS is the parent's to deny; everything else
        // at or below a cut is a referral.
        let cut = !zone.below_cut(&key.base_name());
        return match cut && no_ds {
            true => exist_flags::NODATA_DS,
            false => 0,
        };
    }
    let mut flags = 0;
    // The apex's DS is its parent's.
    if no_ds && !at_apex {
        flags |= exist_flags::NODATA_DS;
    }
    if labels <= MAX_LABELS + 2 && node.rrset(RecordType::CNAME).is_none() {
        if node.rrset(RecordType::A).is_none() {
            flags |= exist_flags::NODATA_A;
        }
        if node.rrset(RecordType::AAAA).is_none() {
            flags |= exist_flags::NODATA_AAAA;
        }
        // Every other plain type not listed: the list fits the entry.
        if other_types(node).is_some() {
            flags |= exist_flags::NODATA_OTHER;
        }
    }
    // Below this name: no DNAME redirects it, and no wildcard child
    // answers for a missing name.
    let wildcard = || {
        let star = Name::from(key).prepend_label("*").ok();
        star.is_some_and(|w| zone.node(&LowerName::from(w)).is_some())
    };
    if labels <= MAX_LABELS
        && node.rrset(RecordType::DNAME).is_none()
        && !(node.has_children() && wildcard())
    {
        flags |= exist_flags::ENCLOSER;
    }
    flags
}

/// An EXIST entry with `flags`: with none, it only says the name exists
/// (the kernel passes its queries up).
pub(in crate::answers) fn bare_exist(
    zone_len: u8,
    flags: u8,
    answer_flags: u16,
    zone_id: u32,
) -> Compiled {
    exist_with_types(zone_len, flags, &[], answer_flags, zone_id)
}

/// An EXIST entry with `flags` listing `types` (at most
/// [`EXIST_TYPES_MAX`]: the types NODATA_OTHER does not cover).
fn exist_with_types(
    zone_len: u8,
    flags: u8,
    types: &[u16],
    answer_flags: u16,
    zone_id: u32,
) -> Compiled {
    debug_assert!(types.len() <= EXIST_TYPES_MAX);
    let exist = Exist { zone_len, flags };
    let len = EXIST_HEAD + 2 * types.len();
    let mut head = Answer::new(len as u16, 0, answer_flags);
    head.data[0] = exist.zone_len;
    head.data[1] = exist.flags;
    head.data[2] = types.len() as u8;
    for (i, t) in types.iter().enumerate() {
        let at = EXIST_HEAD + 2 * i;
        head.data[at..at + 2].copy_from_slice(&t.to_le_bytes());
    }
    head.set_zone(zone_id);
    Compiled { head, block: None }
}

/// The zone's SOA template entry, `None` when the zone has no SOA or the
/// template is larger than a small block (MNAME and RNAME of over 170
/// bytes between them: the fallback answers that zone's negatives).
pub(in crate::answers) fn soa_template(zone: &Zone, zone_id: u32) -> Option<Compiled> {
    let apex = lower_wire(zone.origin_key());
    if zone.origin_key().is_root() || zone.soa().is_none() {
        return None;
    }
    // A first label that matches no name of the record: "\x01\x00".
    let sample = [&[1u8, 0][..], &apex].concat();
    let record = record_after(&sample, zone);
    let fixups = pointers(&record)?;
    let template = Template {
        sample_len: sample.len() as u16,
        risky: risky_labels(zone),
        authority: 1,
        additional: 0,
        authoritative: true,
        ..Template::default()
    };
    template_entry(template, &fixups, record, 1, zone_id)
}

/// The entry of `template` (its fixups set from `fixups`) over `records`,
/// `count` records in all, in a small block: `None` when it does not fit
/// one, or has more pointers than a template holds.
pub(in crate::answers) fn template_entry(
    mut template: Template,
    fixups: &[usize],
    records: Vec<u8>,
    count: u8,
    zone_id: u32,
) -> Option<Compiled> {
    if fixups.len() > FIXUPS_MAX {
        return None;
    }
    template.fixups = [NO_FIXUP; FIXUPS_MAX];
    let mut summed = records.clone();
    for (slot, &at) in template.fixups.iter_mut().zip(fixups) {
        *slot = at as u16;
        summed[at..at + 2].fill(0);
    }
    let mut section = Vec::with_capacity(TEMPLATE_LEN + records.len());
    section.extend_from_slice(&template.to_bytes());
    section.extend_from_slice(&records);
    // A small block: the kernel reads templates from no other table.
    if section.len() > SMALL_BLOCK_MAX || section.len() <= INLINE_MAX {
        return None;
    }
    let mut head = Answer::new(section.len() as u16, count, 0);
    head.csum = ones_complement_sum(&summed);
    head.set_zone(zone_id);
    Some(Compiled {
        head,
        block: Some(Arc::from(section)),
    })
}

/// The records of a template entry's `section` as the kernel writes them
/// after a question name of `qname_len` bytes and `prefix_len` bytes of
/// answer records.
pub(in crate::answers) fn relocated(
    section: &[u8],
    qname_len: usize,
    prefix_len: usize,
) -> Vec<u8> {
    let head: &[u8; TEMPLATE_LEN] = section[..TEMPLATE_LEN].try_into().unwrap();
    let t = Template::from_bytes(head);
    let mut records = section[TEMPLATE_LEN..].to_vec();
    for at in t.fixups.iter().take_while(|&&f| f != NO_FIXUP) {
        let at = *at as usize;
        let target = (u16::from_be_bytes([records[at], records[at + 1]]) & 0x3fff) as u32;
        let moved = relocate(
            target,
            t.sample_len as u32,
            qname_len as u32,
            prefix_len as u32,
        );
        records[at..at + 2].copy_from_slice(&(0xc000 | moved as u16).to_be_bytes());
    }
    records
}

/// The zone's SOA record as the kernel writes it from the template after
/// a question name of `qname_len` bytes and `prefix_len` bytes of answer
/// records; `None` when the zone has no template.
pub(in crate::answers) fn soa_relocated(
    zone: &Zone,
    qname_len: usize,
    prefix_len: usize,
) -> Option<Vec<u8>> {
    let section = soa_template(zone, 0)?.block?;
    Some(relocated(&section, qname_len, prefix_len))
}

/// The SOA record `write_soa` writes after a header and a question for
/// `qname` (its pointers into itself count from the message's start).
fn record_after(qname: &[u8], zone: &Zone) -> Vec<u8> {
    let before = DNS_HEADER_LEN + qname.len() + 4;
    let mut message = vec![0u8; before];
    write_soa(&mut message, qname, zone);
    message.split_off(before)
}

/// The offsets of the compression pointers in an SOA record written by
/// `write_soa` (owner, then MNAME and RNAME in its data), each of which
/// must point before the record; `None` if there are more than three.
fn pointers(record: &[u8]) -> Option<Vec<usize>> {
    let mut found = Vec::new();
    let mut at = skip_name(record, 0, &mut found)?;
    at += 10; // type, class, TTL, RDLENGTH
    at = skip_name(record, at, &mut found)?;
    skip_name(record, at, &mut found)?;
    let origin = DNS_HEADER_LEN as u16;
    let all_back = found.iter().all(|&p| {
        let target = u16::from_be_bytes([record[p], record[p + 1]]) & 0x3fff;
        target >= origin
    });
    (found.len() <= 3 && all_back).then_some(found)
}

/// The end of the name at `at`, noting where it ends in a pointer.
pub(super) fn skip_name(bytes: &[u8], mut at: usize, pointers: &mut Vec<usize>) -> Option<usize> {
    loop {
        let len = *bytes.get(at)?;
        if len & 0xc0 == 0xc0 {
            pointers.push(at);
            return Some(at + 2);
        }
        if len == 0 {
            return Some(at + 1);
        }
        at += 1 + len as usize;
    }
}

/// MNAME's and RNAME's labels just above the apex, lower-cased (names
/// compress whatever their case), when they are below it (zeros
/// otherwise).
pub(super) fn risky_labels(zone: &Zone) -> [[u8; 8]; 2] {
    let mut risky = [[0u8; 8]; 2];
    let Some((soa, _)) = zone.soa() else {
        return risky;
    };
    let apex_len = lower_wire(zone.origin_key()).len();
    for (slot, name) in risky.iter_mut().zip([&soa.mname, &soa.rname]) {
        if zone.origin().zone_of(name) && name.num_labels() > zone.origin().num_labels() {
            *slot = label_above(WireName::new(name).bytes(), apex_len);
            slot.make_ascii_lowercase();
        }
    }
    risky
}

/// The label of `wire` that ends where its last `apex_len` bytes begin,
/// as the kernel compares it: length byte and up to seven bytes,
/// zero-padded. Zeros when `wire` is not longer than the apex.
fn label_above(wire: &[u8], apex_len: usize) -> [u8; 8] {
    let mut out = [0u8; 8];
    if wire.len() <= apex_len {
        return out;
    }
    let end = wire.len() - apex_len;
    let mut at = 0;
    while at < end {
        let len = wire[at] as usize;
        if at + 1 + len == end {
            let n = len.min(7);
            out[0] = len as u8;
            out[1..1 + n].copy_from_slice(&wire[at + 1..at + 1 + n]);
            return out;
        }
        at += 1 + len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::str::FromStr;

    use crate::zone::{load_zone_str, Snapshot, ZoneStore};

    fn store(text: &str) -> ZoneStore {
        store_at("example.com.", text)
    }

    fn store_at(origin: &str, text: &str) -> ZoneStore {
        let origin = Name::from_str(origin).unwrap();
        ZoneStore::with_zones(vec![load_zone_str(text, &origin, Path::new("t")).unwrap()])
    }

    const ZONE: &str = "$ORIGIN example.com.\n$TTL 300\n\
        @ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n\
        www A 192.0.2.80\na.b.ent A 192.0.2.7\n*.wild A 192.0.2.9\n\
        sub NS ns.sub\nns.sub A 192.0.2.53\nalias CNAME www\n";

    fn exist(snap: &Snapshot, name: &str) -> Option<Exist> {
        let zone = snap.zones().next().unwrap().clone();
        let key = LowerName::new(&Name::from_str(name).unwrap());
        let node = zone.node(&key)?;
        let facts = ZoneFacts::of(&zone);
        exist_entry(&zone, &facts, &key, &lower_wire(&key), node, 0, 1).map(|c| Exist {
            zone_len: c.head.data[0],
            flags: c.head.data[1],
        })
    }

    /// The oracle: what `negative::decide` says for a query at the name
    /// and for one below it.
    fn decided(snap: &Snapshot, zone: &Zone, key: &LowerName) -> u8 {
        use super::super::{decide, Negative};
        let wire = lower_wire(key);
        let apex_len = zone_len(zone);
        if key != zone.origin_key() && risky_labels(zone).contains(&label_above(&wire, apex_len)) {
            return 0;
        }
        let mut flags = 0;
        // NODATA_OTHER: NODATA for every plain type the name lacks (the
        // entry lists the rest), probed with types it lacks.
        let node = zone.node(key).unwrap();
        let lacks: Vec<RecordType> = [RecordType::HTTPS, RecordType::TXT, RecordType::MX]
            .into_iter()
            .filter(|t| node.rrset(*t).is_none())
            .collect();
        if !lacks.is_empty()
            && lacks.iter().all(|t| {
                matches!(
                    decide(snap, &wire, (*t).into(), false),
                    Some((_, Negative::NoData))
                )
            })
        {
            flags |= exist_flags::NODATA_OTHER;
        }
        for (qtype, bit) in [
            (RecordType::A, exist_flags::NODATA_A),
            (RecordType::AAAA, exist_flags::NODATA_AAAA),
            (RecordType::DS, exist_flags::NODATA_DS),
        ] {
            if matches!(
                decide(snap, &wire, qtype.into(), false),
                Some((_, Negative::NoData))
            ) {
                flags |= bit;
            }
        }
        let probe = Name::from(key)
            .prepend_label("xdpdns--no-such-name")
            .unwrap();
        let below = lower_wire(&LowerName::new(&probe));
        if matches!(
            decide(snap, &below, RecordType::A.into(), false),
            Some((_, Negative::NxDomain))
        ) {
            flags |= exist_flags::ENCLOSER;
        }
        flags
    }

    /// Every name of zones with cuts, DNAMEs, wildcards, CNAMEs, empty
    /// non-terminals and a signed zone: the flags computed from the node
    /// equal those `decide` gives.
    #[test]
    fn flags_agree_with_decide() {
        let extra = "d DNAME other.example.\nx.d A 192.0.2.6\n*.a.b.ent TXT t\n\
            deep.sub NS ns.sub\nmx MX 10 www\nc.wild A 192.0.2.3\n";
        for text in [ZONE.to_string(), format!("{ZONE}{extra}")] {
            let s = store(&text).snapshot();
            let zone = s.zones().next().unwrap();
            let facts = ZoneFacts::of(zone);
            for (key, node) in zone.nodes().filter(|(_, n)| !n.is_nsec3_only()) {
                let got = negative_flags(zone, &facts, &key, &lower_wire(&key), node);
                assert_eq!(got, decided(&s, zone, &key), "{key}");
            }
        }
    }

    #[test]
    fn exist_flags_follow_what_the_fallback_decides() {
        let s = store(ZONE).snapshot();
        use exist_flags::*;
        let f = |n| exist(&s, n).unwrap().flags;
        assert_eq!(exist(&s, "www.example.com.").unwrap().zone_len, 13);
        assert_eq!(
            f("www.example.com."),
            NODATA_AAAA | NODATA_OTHER | NODATA_DS | ENCLOSER
        );
        assert_eq!(
            f("example.com."),
            NODATA_A | NODATA_AAAA | NODATA_OTHER | ENCLOSER | APEX
        );
        assert_eq!(
            f("ent.example.com."),
            NODATA_A | NODATA_AAAA | NODATA_OTHER | NODATA_DS | ENCLOSER,
            "empty non-terminal"
        );
        assert_eq!(
            f("wild.example.com."),
            NODATA_A | NODATA_AAAA | NODATA_OTHER | NODATA_DS,
            "a wildcard below"
        );
        assert_eq!(f("sub.example.com."), NODATA_DS, "a cut without DS");
        assert_eq!(f("ns.sub.example.com."), 0, "glue");
        assert_eq!(f("alias.example.com."), ENCLOSER, "a CNAME: no NODATA");
        // ns1 is MNAME's label: a query name ending in it is compressed
        // against MNAME, which the template does not hold.
        assert_eq!(f("ns1.example.com."), 0);
    }

    /// An EXIST entry lists the name's other types, which NODATA_OTHER
    /// leaves to the rest of the table; a name with more types than an
    /// entry can list gets no NODATA_OTHER.
    #[test]
    fn other_types_are_listed_and_bounded() {
        let types = |text: &str, name: &str| {
            let s = store(text).snapshot();
            let zone = s.zones().next().unwrap().clone();
            let key = LowerName::new(&Name::from_str(name).unwrap());
            let c = exist_entry(
                &zone,
                &ZoneFacts::of(&zone),
                &key,
                &lower_wire(&key),
                zone.node(&key).unwrap(),
                0,
                1,
            )
            .unwrap();
            let n = c.head.data[2] as usize;
            assert_eq!(c.head.section_len() as usize, EXIST_HEAD + 2 * n);
            let listed: Vec<u16> = (0..n)
                .map(|i| u16::from_le_bytes([c.head.data[4 + 2 * i], c.head.data[5 + 2 * i]]))
                .collect();
            (c.head.data[1] & exist_flags::NODATA_OTHER != 0, listed)
        };
        // The apex: SOA (6) and NS (2); A and AAAA are the flags' business.
        assert_eq!(types(ZONE, "example.com."), (true, vec![2, 6]));
        assert_eq!(types(ZONE, "www.example.com."), (true, vec![]));
        let mut many = ZONE.to_string();
        for t in 1000..=1000 + EXIST_TYPES_MAX as u16 {
            many.push_str(&format!("www TYPE{t} \\# 1 00\n"));
        }
        assert_eq!(types(&many, "www.example.com."), (false, vec![]));
    }

    /// RNAME compressed against MNAME, both outside the zone: a pointer
    /// into the record itself.
    const OUTSIDE: &str = "$ORIGIN child.example.com.\n$TTL 120\n\
        @ SOA ns.elsewhere.net. admin.elsewhere.net. 3 3600 600 86400 30\n\
        @ NS ns.elsewhere.net.\nhost A 192.0.2.44\n";

    #[test]
    fn the_template_points_where_the_fallback_does() {
        for (origin, text, qnames) in [
            (
                "example.com.",
                ZONE,
                ["\x03www\x07example\x03com\x00", "\x07example\x03com\x00"],
            ),
            (
                "child.example.com.",
                OUTSIDE,
                [
                    "\x04nope\x05child\x07example\x03com\x00",
                    "\x05child\x07example\x03com\x00",
                ],
            ),
        ] {
            template_matches(origin, text, &qnames);
        }
    }

    fn template_matches(origin: &str, text: &str, qnames: &[&str]) {
        let s = store_at(origin, text).snapshot();
        let zone = s.zones().next().unwrap();
        let c = soa_template(zone, 1).unwrap();
        let section = c.block.unwrap();
        let sample_len = u16::from_le_bytes([section[0], section[1]]) as usize;
        assert_eq!(sample_len, lower_wire(zone.origin_key()).len() + 2);
        // For a query name of n bytes, the kernel moves each pointer by
        // n - sample_len; that must give the fallback's record.
        for qname in qnames {
            let q = qname.as_bytes();
            let want = record_after(q, zone);
            assert_eq!(relocated(&section, q.len(), 0), want, "{qname:?}");
        }
    }

    #[test]
    fn risky_labels_are_those_of_soa_names_below_the_apex() {
        let s = store(ZONE).snapshot();
        let c = soa_template(s.zones().next().unwrap(), 1).unwrap();
        let head = |c: Compiled| {
            Template::from_bytes(c.block.unwrap()[..TEMPLATE_LEN].try_into().unwrap())
        };
        let t = head(c);
        assert_eq!(&t.risky[0][..4], b"\x03ns1");
        assert_eq!(&t.risky[1], b"\x0ahostmas");
        let s = store_at("child.example.com.", OUTSIDE).snapshot();
        let c = soa_template(s.zones().next().unwrap(), 1).unwrap();
        assert_eq!(head(c).risky, [[0; 8]; 2], "both outside the zone");
    }
}
