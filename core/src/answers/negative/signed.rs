//! The entries that let the kernel answer DNSSEC NODATA at a name of a
//! signed zone: at the apex the SOA with its RRSIGs as a template (it
//! changes with every serial, so it is kept once per zone), and at each
//! name its NSEC with its RRSIGs (which change only with the name or its
//! neighbour in the chain). The kernel writes the template's records,
//! then the name's: the authority section the full handler writes for a
//! query at that name of a type it lacks (`handler::resolve`, encoded by
//! `wire::encode`), which is how both are compiled here.

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{LowerName, Name, RecordType};
use xdpdns_common::negative::{exist_flags, Template, FIXUPS_MAX, NO_FIXUP};
use xdpdns_common::{
    gaps, rtype, Answer, BLOCK_MAX, DNS_HEADER_LEN, INLINE_MAX, MAX_LABEL_LEN, MAX_NAME_WIRE_LEN,
    SMALL_BLOCK_MAX,
};

use super::entries::{risky_labels, skip_name, template_entry};
use crate::answers::entry::{ones_complement_sum, Compiled};
use crate::handler::resolve;
use crate::wire::compress::WireName;
use crate::wire::encode::{Header, Section, Writer};
use crate::wire::Reply;
use crate::zone::{Node, Zone};

/// Most records a compiled denial holds (the handler's budget).
const MAX_RECORDS: usize = BLOCK_MAX / 11;

/// Types tried, in order, as the missing type of a NODATA query when
/// compiling a name's denial: the answer is the same for every type the
/// name lacks, so any one of them shows it.
const PROBE_TYPES: [RecordType; 5] = [
    RecordType::HTTPS,
    RecordType::TXT,
    RecordType::AAAA,
    RecordType::A,
    RecordType::MX,
];

/// The signed zone's SOA and RRSIG(SOA) records as the template of its
/// DNSSEC negative answers (`SOA_SIGNED`), written after a question whose
/// first label matches no name; `None` when the zone is unsigned, the
/// records are not exactly those, or they do not fit a small block.
pub(in crate::answers) fn soa_template(zone: &Zone, zone_id: u32) -> Option<Compiled> {
    if !zone.is_signed() || zone.origin_key().is_root() {
        return None;
    }
    // A first label of one zero byte: no record's name has it.
    let sample = Name::from_labels([&[0u8][..]])
        .ok()?
        .append_domain(zone.origin())
        .ok()?;
    let apex = Name::from(zone.origin_key());
    let probe = PROBE_TYPES
        .into_iter()
        .find(|t| zone.apex().rrset(*t).is_none())?;
    let reply = resolve(zone, &apex, probe, MAX_RECORDS, true, 0);
    let soa_part = soa_records(&reply)?;
    let mut w = Writer::new(Header::default(), &sample, u16::from(probe), 1, BLOCK_MAX);
    w.records(Section::Authority, &reply.authority[..soa_part])
        .ok()?;
    let records = w.sections().0.to_vec();
    let fixups = pointers(&records, false)?;
    // Every pointer goes back into the question's apex or the records.
    let apex_at = (xdpdns_common::DNS_HEADER_LEN + 2) as u16;
    let back = fixups.iter().all(|&at| {
        let target = u16::from_be_bytes([records[at], records[at + 1]]) & 0x3fff;
        target >= apex_at
    });
    if !back {
        return None;
    }
    let template = Template {
        sample_len: (sample.len() + 1) as u16,
        risky: risky_labels(zone),
        authority: soa_part as u8,
        additional: 0,
        authoritative: true,
        ..Template::default()
    };
    template_entry(template, &fixups, records, soa_part as u8, zone_id)
}

/// The name's NSEC and its RRSIGs (`DENIAL_SIGNED`), as the full handler
/// writes them after the zone's SOA records in a NODATA answer to a DO=1
/// query at the name: owned by 0xC00C, no other pointer. `None` where the
/// zone is unsigned, the name has no NSEC of its own (an empty
/// non-terminal, an NSEC3 zone) or a CNAME, its EXIST `flags` give no
/// NODATA there, or the answer is anything else.
pub(in crate::answers) fn denial_entry(
    zone: &Zone,
    key: &LowerName,
    node: &Node,
    flags: u8,
    zone_id: u32,
) -> Option<Compiled> {
    let nodata = exist_flags::NODATA_A
        | exist_flags::NODATA_AAAA
        | exist_flags::NODATA_OTHER
        | exist_flags::NODATA_DS;
    if !zone.is_signed()
        || flags & nodata == 0
        || node.rrset(RecordType::NSEC).is_none()
        || node.rrset(RecordType::CNAME).is_some()
    {
        return None;
    }
    // At a delegation only DS is the zone's to deny (the rest is a
    // referral).
    let cut = key != zone.origin_key() && node.rrset(RecordType::NS).is_some();
    let probe = match cut {
        true => RecordType::DS,
        false => PROBE_TYPES.into_iter().find(|t| node.rrset(*t).is_none())?,
    };
    let name = Name::from(key);
    let reply = resolve(zone, &name, probe, MAX_RECORDS, true, 0);
    let soa_part = denial_shape(&reply, ResponseCode::NoError)?;
    let rest = &reply.authority[soa_part..];
    let nsec_here = |r: &hickory_proto::rr::Record| LowerName::new(&r.name) == *key;
    if rest.is_empty() || !rest.iter().all(nsec_here) || rest[0].record_type() != RecordType::NSEC {
        return None;
    }
    let mut w = Writer::new(Header::default(), &name, u16::from(probe), 1, BLOCK_MAX);
    w.records(Section::Authority, &reply.authority).ok()?;
    let all = w.sections().0;
    let start = skip_records(all, soa_part)?;
    let section = &all[start..];
    // Position-free: only the owners point, and at the question.
    let owners = pointers(section, true)?;
    if owners.iter().any(|&at| section[at..at + 2] != [0xc0, 0x0c]) {
        return None;
    }
    if section.len() <= INLINE_MAX || section.len() > SMALL_BLOCK_MAX {
        return None;
    }
    let mut head = Answer::new(section.len() as u16, rest.len() as u8, 0);
    head.csum = ones_complement_sum(section);
    head.set_zone(zone_id);
    Some(Compiled {
        head,
        block: Some(section.into()),
    })
}

/// The gap list of `key`, a closest encloser of a signed NSEC zone (its
/// EXIST `flags` say ENCLOSER): the head entry (`GAPS_SIGNED`: how many
/// entries) and the entries (`GAP_SIGNED`, under [`gap_name`]), one per
/// gap between its children in canonical order. Each holds the label
/// the gap follows and, as a template, the NSEC records (with RRSIGs)
/// the full handler writes after the zone's SOA for a name in that gap.
/// `None` when it has more than [`gaps::CHILDREN_MAX`] children, a child
/// label of 63 bytes (no label sorts between it and the next), or an
/// answer of another shape.
pub(in crate::answers) fn gap_entries(
    zone: &Zone,
    key: &LowerName,
    flags: u8,
    zone_id: u32,
    reuse: Option<&GapReuse<'_>>,
) -> Option<(Compiled, Vec<Compiled>)> {
    if !zone.is_signed()
        || !zone.has_nsec()
        || zone.has_nsec3()
        || flags & exist_flags::ENCLOSER == 0
        || flags & exist_flags::REFERRAL != 0
    {
        return None;
    }
    let encloser = Name::from(key);
    if WireName::new(&encloser).bytes().len() + gaps::KEY_LABEL_LEN > MAX_NAME_WIRE_LEN {
        return None;
    }
    let children = children(zone, key)?;
    let mut entries = Vec::with_capacity(children.len() + 1);
    let wildcard = reuse.and_then(|_| {
        let star = Name::from_labels([&b"*"[..]])
            .ok()?
            .append_domain(&encloser)
            .ok()?;
        zone.nsec_at_or_before(&LowerName::new(&star)).cloned()
    });
    for k in 0..=children.len() {
        let label: &[u8] = match k {
            0 => &[],
            _ => &children[k - 1],
        };
        let kept = match (reuse, &wildcard) {
            (Some(r), Some(w)) => r.unchanged(zone, &encloser, label, w),
            _ => None,
        };
        match kept {
            Some(old) => entries.push(old),
            None => entries.push(gap_entry(zone, &encloser, label, zone_id)?),
        }
    }
    let mut head = Answer::new(2, 0, 0);
    head.data[..2].copy_from_slice(&(entries.len() as u16).to_le_bytes());
    head.csum = ones_complement_sum(&head.data[..2]);
    head.set_zone(zone_id);
    Some((Compiled { head, block: None }, entries))
}

/// What a recompile of a gap list may keep of the installed one: an
/// entry's records are the NSECs (with RRSIGs) of the gap's covering name
/// and of the wildcard's, so while neither name's records changed, the
/// entry with the same label is the same. (A covering name that changed
/// its place in the chain changed its NSEC, so it is among `changed`.)
pub(in crate::answers) struct GapReuse<'a> {
    /// The names whose records the diffs being compiled change.
    pub changed: &'a std::collections::HashSet<LowerName>,
    /// The installed entries of the encloser's list, by label.
    pub old: std::collections::HashMap<Vec<u8>, Compiled>,
}

impl GapReuse<'_> {
    fn unchanged(
        &self,
        zone: &Zone,
        encloser: &Name,
        label: &[u8],
        wildcard: &LowerName,
    ) -> Option<Compiled> {
        let old = self.old.get(label)?;
        let probe = LowerName::new(&after_label(label, encloser)?);
        let cover = zone.nsec_at_or_before(&probe)?;
        (!self.changed.contains(cover) && !self.changed.contains(wildcard)).then(|| old.clone())
    }
}

/// The label a gap entry holds (empty for the first).
pub(in crate::answers) fn gap_label(entry: &Compiled) -> Vec<u8> {
    let b = entry.section();
    let len = b.get(gaps::LABEL_LEN_AT).copied().unwrap_or(0) as usize;
    b.get(gaps::LABEL_AT..gaps::LABEL_AT + len)
        .unwrap_or(&[])
        .to_vec()
}

/// How many entries a `GAPS_SIGNED` head says its list has.
pub(in crate::answers) fn gap_count(head: &Compiled) -> u16 {
    u16::from_le_bytes([head.head.data[0], head.head.data[1]])
}

/// The name a gap list's entry `k` is kept under: the encloser's (`wire`,
/// lower-cased) below a label of its index.
pub(in crate::answers) fn gap_name(wire: &[u8], k: u16) -> std::sync::Arc<[u8]> {
    [&gaps::key_label(k)[..], wire].concat().into()
}

/// The labels just below `key` of the names under it, in canonical order
/// (a child that is an empty non-terminal through its descendants), or
/// `None` past [`gaps::CHILDREN_MAX`] or at a 63-byte label. One NSEC
/// lookup per child: each search starts after the last child's subtree.
fn children(zone: &Zone, key: &LowerName) -> Option<Vec<Vec<u8>>> {
    let depth = key.num_labels() as usize;
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut cursor = key.clone();
    loop {
        let next = zone.nsec_after(&cursor)?;
        if next == key || !key.zone_of(next) {
            return Some(out);
        }
        let labels = next.num_labels() as usize;
        let label = next.iter().nth(labels - depth - 1)?.to_vec();
        if label.len() >= MAX_LABEL_LEN || out.len() == gaps::CHILDREN_MAX {
            return None;
        }
        // Every name in the child's subtree sorts before this one.
        cursor = LowerName::new(&after_label(&label, &Name::from(key))?);
        out.push(label);
    }
}

/// The name whose label below `parent` sorts right after `label` (the
/// label with a zero byte appended): nothing lies between `label`'s
/// subtree and it.
fn after_label(label: &[u8], parent: &Name) -> Option<Name> {
    let next = [label, &[0u8][..]].concat();
    Name::from_labels([&next[..]])
        .ok()?
        .append_domain(parent)
        .ok()
}

/// The entry of the gap after child `label` of `encloser` (the first
/// gap: `label` empty).
fn gap_entry(zone: &Zone, encloser: &Name, label: &[u8], zone_id: u32) -> Option<Compiled> {
    let qname = after_label(label, encloser)?;
    let reply = resolve(zone, &qname, RecordType::A, MAX_RECORDS, true, 0);
    let soa_part = denial_shape(&reply, ResponseCode::NXDomain)?;
    let rest = &reply.authority[soa_part..];
    let denial = |r: &hickory_proto::rr::Record| {
        matches!(r.record_type(), RecordType::NSEC | RecordType::RRSIG)
    };
    if rest.is_empty() || !rest.iter().all(denial) {
        return None;
    }
    let mut w = Writer::new(Header::default(), &qname, rtype::A, 1, BLOCK_MAX);
    w.records(Section::Authority, &reply.authority).ok()?;
    let all = w.sections().0;
    let start = skip_records(all, soa_part)?;
    let records = &all[start..];
    let fixups = pointers(records, true)?;
    if fixups.len() > FIXUPS_MAX {
        return None;
    }
    // Pointers go into the encloser's part of the question or after it,
    // never into the sample label: they move with the query name's length.
    let sample_len = WireName::new(&qname).bytes().len();
    let encloser_at = (DNS_HEADER_LEN + 1 + label.len() + 1) as u16;
    let mut summed = records.to_vec();
    let mut template = Template {
        sample_len: sample_len as u16,
        authority: rest.len() as u8,
        additional: 0,
        authoritative: true,
        fixups: [NO_FIXUP; FIXUPS_MAX],
        ..Template::default()
    };
    for (slot, &at) in template.fixups.iter_mut().zip(&fixups) {
        let target = u16::from_be_bytes([records[at], records[at + 1]]) & 0x3fff;
        if target < encloser_at {
            return None;
        }
        *slot = at as u16;
        summed[at..at + 2].fill(0);
    }
    let mut block = vec![0u8; gaps::RECORDS_AT];
    block[gaps::LABEL_AT..gaps::LABEL_AT + label.len()].copy_from_slice(label);
    block[gaps::LABEL_LEN_AT] = label.len() as u8;
    let records_len = u16::try_from(records.len()).ok()?;
    block[gaps::RECORDS_LEN_AT..gaps::RECORDS_LEN_AT + 2]
        .copy_from_slice(&records_len.to_le_bytes());
    block[gaps::TEMPLATE_AT..gaps::RECORDS_AT].copy_from_slice(&template.to_bytes());
    block.extend_from_slice(records);
    // Always a (large) block: the kernel reads gap entries from no other
    // table.
    if block.len() <= SMALL_BLOCK_MAX {
        block.resize(SMALL_BLOCK_MAX + 1, 0);
    }
    if block.len() > BLOCK_MAX {
        return None;
    }
    let mut head = Answer::new(block.len() as u16, rest.len() as u8, 0);
    head.csum = ones_complement_sum(&summed);
    head.set_zone(zone_id);
    Some(Compiled {
        head,
        block: Some(block.into()),
    })
}

/// For a reply that is an authoritative denial with `rcode` (nothing
/// but authority records): how many of them are the SOA and its RRSIGs.
fn denial_shape(reply: &Reply, rcode: ResponseCode) -> Option<usize> {
    let denial = reply.rcode == rcode
        && reply.authoritative
        && !reply.referral
        && !reply.oversized
        && reply.answers.is_empty()
        && reply.additional.is_empty();
    denial.then(|| soa_records(reply))?
}

/// How many of `reply`'s authority records are the SOA and the RRSIGs
/// over it, which come first; `None` when the section does not start so.
fn soa_records(reply: &Reply) -> Option<usize> {
    let auth = &reply.authority;
    if auth.first()?.record_type() != RecordType::SOA {
        return None;
    }
    let sigs = auth[1..]
        .iter()
        .take_while(|r| r.record_type() == RecordType::RRSIG)
        .count();
    (sigs > 0).then_some(1 + sigs)
}

/// The offset just after the first `count` records of `section`.
fn skip_records(section: &[u8], count: usize) -> Option<usize> {
    let mut at = 0;
    for _ in 0..count {
        at = skip_name(section, at, &mut Vec::new())?;
        let rdlen = u16::from_be_bytes([*section.get(at + 8)?, *section.get(at + 9)?]) as usize;
        at += 10 + rdlen;
    }
    (at <= section.len()).then_some(at)
}

/// The offsets of the compression pointers in `records` (SOA, RRSIG and,
/// with `nsec`, NSEC records): owners, and the SOA's MNAME and RNAME.
/// `None` when a record is of another type, or a name hickory writes
/// whole (an RRSIG's signer, an NSEC's next name) holds a pointer.
fn pointers(records: &[u8], nsec: bool) -> Option<Vec<usize>> {
    let mut found = Vec::new();
    let mut at = 0;
    while at < records.len() {
        at = skip_name(records, at, &mut found)?;
        let rtype = u16::from_be_bytes([*records.get(at)?, *records.get(at + 1)?]);
        let rdlen = u16::from_be_bytes([*records.get(at + 8)?, *records.get(at + 9)?]) as usize;
        let rdata = at + 10;
        let end = rdata + rdlen;
        if end > records.len() {
            return None;
        }
        let mut inner = Vec::new();
        match rtype {
            rtype::SOA => {
                let next = skip_name(records, rdata, &mut found)?;
                skip_name(records, next, &mut found)?;
            }
            rtype::RRSIG => {
                skip_name(&records[..end], rdata + 18, &mut inner)?;
            }
            rtype::NSEC if nsec => {
                skip_name(&records[..end], rdata, &mut inner)?;
            }
            _ => return None,
        }
        if !inner.is_empty() {
            return None;
        }
        at = end;
    }
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::str::FromStr;
    use std::sync::Arc;

    use crate::answers::entry::lower_wire;
    use crate::answers::negative::entries::{exist_entry, relocated, ZoneFacts};
    use crate::signing::{ActiveKey, KeyRole, SignPolicy, ZoneSigner};
    use crate::zone::{load_zone_str, ZoneStore};

    const ZONE: &str = "$ORIGIN example.com.\n$TTL 300\n\
        @ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n\
        www A 192.0.2.80\nwww TXT \"hello\"\na.b.ent A 192.0.2.7\n\
        mail MX 10 www\n_sip._tcp SRV 0 5 5060 www\nsub NS ns.sub\nns.sub A 192.0.2.53\n";

    /// The zone above, signed online with an ECDSA CSK.
    fn signed_zone() -> Arc<Zone> {
        use hickory_proto::dnssec::crypto::EcdsaSigningKey;
        use hickory_proto::dnssec::Algorithm;
        let origin = Name::from_str("example.com.").unwrap();
        let zone = load_zone_str(ZONE, &origin, Path::new("t")).unwrap();
        let store = ZoneStore::with_zones(vec![zone]);
        let pkcs8 = EcdsaSigningKey::generate_pkcs8(Algorithm::ECDSAP256SHA256).unwrap();
        let k = EcdsaSigningKey::from_pkcs8(&pkcs8, Algorithm::ECDSAP256SHA256).unwrap();
        let key = ActiveKey::new(KeyRole::Csk, Arc::new(k)).unwrap();
        let signer = ZoneSigner::new(vec![key], SignPolicy::default());
        store.set_signer(&origin, Some(Arc::new(signer)), 1_800_000_000);
        store.snapshot().zones().next().unwrap().clone()
    }

    /// For every name with an NSEC, the kernel's composition (the SOA
    /// template relocated for the name, then the name's denial) is the
    /// authority section the full handler writes for NODATA there.
    #[test]
    fn signed_nodata_is_the_full_handlers_authority_section() {
        let zone = signed_zone();
        let template = soa_template(&zone, 1).expect("a template").block.unwrap();
        let mut compiled = 0;
        let facts = ZoneFacts::of(&zone);
        for (key, node) in zone.nodes() {
            let exist = exist_entry(&zone, &facts, &key, &lower_wire(&key), node, 0, 1).unwrap();
            let flags = exist.head.data[1];
            let Some(entry) = denial_entry(&zone, &key, node, flags, 1) else {
                assert!(
                    node.rrset(RecordType::NSEC).is_none() || flags == 0,
                    "{key}: every NSEC owner the kernel answers NODATA at has a denial"
                );
                continue;
            };
            compiled += 1;
            let name = Name::from(&key);
            let cut = key != *zone.origin_key() && node.rrset(RecordType::NS).is_some();
            let probes = match cut {
                true => vec![RecordType::DS],
                false => vec![RecordType::NULL, RecordType::CAA, RecordType::HTTPS],
            };
            for probe in probes {
                if node.rrset(probe).is_some() {
                    continue;
                }
                let reply = resolve(&zone, &name, probe, MAX_RECORDS, true, 0);
                let mut w = Writer::new(Header::default(), &name, u16::from(probe), 1, BLOCK_MAX);
                w.records(Section::Authority, &reply.authority).unwrap();
                let want = w.sections().0.to_vec();
                let qname_len = crate::wire::compress::WireName::new(&name).bytes().len();
                let mut got = relocated(&template, qname_len, 0);
                got.extend_from_slice(entry.section());
                assert_eq!(got, want, "{key} {probe}");
                let counts = w.sections().1;
                assert_eq!(
                    entry.head.ancount() + 2,
                    counts[1],
                    "{key}: SOA, its RRSIG and the entry's records"
                );
            }
        }
        assert!(compiled >= 6, "{compiled} names, the cut's included");
    }

    /// For names that do not exist, one and two labels below names of
    /// the zone (empty non-terminals, the apex, names before the first
    /// child and after the last), the kernel's composition (the signed
    /// SOA template, then the entry of the last gap whose label sorts
    /// before the query's) is the full handler's authority section.
    #[test]
    fn signed_nxdomain_is_the_full_handlers_authority_section() {
        let zone = signed_zone();
        let template = soa_template(&zone, 1).unwrap().block.unwrap();
        let facts = ZoneFacts::of(&zone);
        let lists: std::collections::HashMap<LowerName, Vec<Compiled>> = zone
            .nodes()
            .filter_map(|(key, node)| {
                let exist = exist_entry(&zone, &facts, &key, &lower_wire(&key), node, 0, 1)?;
                let (head, gaps) = gap_entries(&zone, &key, exist.head.data[1], 1, None)?;
                assert_eq!(gap_count(&head) as usize, gaps.len());
                Some((key.clone(), gaps))
            })
            .collect();
        assert!(lists.len() >= 5, "{} gap lists", lists.len());
        let mut checked = 0;
        for qname in [
            "nope.example.com.",
            "a.example.com.",
            "zzzz.example.com.",
            "0.example.com.",
            "WWW0.example.com.",
            "ww.Example.com.",
            "x.www.example.com.",
            "_x._tcp.example.com.",
            "a.ent.example.com.",
            "c.b.ent.example.com.",
            "x.y.mail.example.com.",
            "!.example.com.",
            "mail0.example.com.",
        ] {
            let name = Name::from_labels(qname.trim_end_matches('.').split('.').map(str::as_bytes))
                .unwrap();
            let key = LowerName::new(&name);
            let encloser = [key.base_name(), key.base_name().base_name()]
                .into_iter()
                .find(|e| zone.node(e).is_some())
                .unwrap();
            let Some(gaps) = lists.get(&encloser) else {
                continue;
            };
            let below = key.trim_to(encloser.num_labels() as usize + 1);
            let label = LowerName::from(below).iter().next().unwrap().to_vec();
            let entry = gaps
                .iter()
                .rev()
                .find(|g| {
                    let b = g.section();
                    let len = b[gaps::LABEL_LEN_AT] as usize;
                    b[gaps::LABEL_AT..gaps::LABEL_AT + len] < label[..]
                })
                .expect("the first gap sorts before every label");
            let b = entry.section();
            let records_len =
                u16::from_le_bytes([b[gaps::RECORDS_LEN_AT], b[gaps::RECORDS_LEN_AT + 1]]);
            let gap = &b[gaps::TEMPLATE_AT..gaps::RECORDS_AT + records_len as usize];
            let qname_len = crate::wire::compress::WireName::new(&name).bytes().len();
            let mut got = relocated(&template, qname_len, 0);
            got.extend_from_slice(&relocated(gap, qname_len, 0));
            let reply = resolve(&zone, &name, RecordType::A, MAX_RECORDS, true, 0);
            assert_eq!(reply.rcode, ResponseCode::NXDomain, "{qname}");
            let mut w = Writer::new(Header::default(), &name, rtype::A, 1, BLOCK_MAX);
            w.records(Section::Authority, &reply.authority).unwrap();
            assert_eq!(got, w.sections().0, "{qname}");
            assert_eq!(usize::from(entry.head.ancount()) + 2, reply.authority.len());
            checked += 1;
        }
        // (RNAME's label, `hostmaster`, compresses RNAME against the
        // question: the kernel checks the query's label apart.)
        assert!(checked >= 12, "{checked} names");
    }

    /// In a zone signed online, names coming and going change their
    /// enclosers' gap lists (entries shift, lists grow and shrink, and an
    /// empty non-terminal's first gap follows the name before it): the
    /// diffs still give the table a full compile gives.
    #[test]
    fn gap_lists_follow_changes_of_a_signed_zone() {
        use crate::answers::compile::{compile, compile_diffs, IndexedTable, Table};
        use crate::zone::Change;
        use hickory_proto::dnssec::crypto::EcdsaSigningKey;
        use hickory_proto::dnssec::Algorithm;
        use hickory_proto::rr::rdata::A;
        use hickory_proto::rr::{RData, Record};
        use xdpdns_common::qtype_slot;
        let origin = Name::from_str("example.com.").unwrap();
        let store =
            ZoneStore::with_zones(vec![load_zone_str(ZONE, &origin, Path::new("t")).unwrap()]);
        let pkcs8 = EcdsaSigningKey::generate_pkcs8(Algorithm::ECDSAP256SHA256).unwrap();
        let k = EcdsaSigningKey::from_pkcs8(&pkcs8, Algorithm::ECDSAP256SHA256).unwrap();
        let key = ActiveKey::new(KeyRole::Csk, Arc::new(k)).unwrap();
        let signer = ZoneSigner::new(vec![key], SignPolicy::default());
        store.set_signer(&origin, Some(Arc::new(signer)), 1_800_000_000);
        let mut installed = IndexedTable::of(&store.snapshot());
        let gaps = |t: &Table| {
            t.keys()
                .filter(|k| k.qtype == qtype_slot::GAP_SIGNED)
                .count()
        };
        let before = gaps(&installed.table);
        assert!(before > 0, "a signed zone has gap lists");
        let a = |n: &str| {
            Record::from_rdata(
                Name::from_str(n).unwrap(),
                300,
                RData::A(A::new(192, 0, 2, 1)),
            )
        };
        let steps = vec![
            vec![
                Change::Add(a("aaa.example.com.")),
                Change::Add(a("x.y.example.com.")),
            ],
            vec![
                Change::Add(a("b.y.example.com.")),
                Change::Add(a("zzz.example.com.")),
            ],
            vec![Change::Remove(a("aaa.example.com."))],
            vec![
                Change::Remove(a("x.y.example.com.")),
                Change::Remove(a("b.y.example.com.")),
            ],
        ];
        for (i, changes) in steps.into_iter().enumerate() {
            let diff = store
                .update(&origin, &changes, 1_800_000_000 + i as u64)
                .unwrap();
            let snap = store.snapshot();
            let delta = compile_diffs(&snap, &[diff], &installed);
            installed.apply(&delta);
            let full = compile(&snap).0;
            let mut differ: Vec<String> = full
                .iter()
                .filter(|(k, v)| installed.table.get(k) != Some(*v))
                .map(|(k, _)| {
                    format!(
                        "{:?} {} {}",
                        String::from_utf8_lossy(&k.name),
                        k.qtype,
                        if installed.table.contains_key(k) {
                            "differs"
                        } else {
                            "missing"
                        }
                    )
                })
                .chain(
                    installed
                        .table
                        .keys()
                        .filter(|k| !full.contains_key(k))
                        .map(|k| {
                            format!("{:?} {} extra", String::from_utf8_lossy(&k.name), k.qtype)
                        }),
                )
                .collect();
            differ.sort();
            assert!(differ.is_empty(), "step {i}: {differ:#?}");
        }
        assert_eq!(
            gaps(&installed.table),
            before + 2,
            "zzz: one child more at the apex, and a list of its own"
        );
    }

    #[test]
    fn unsigned_zones_and_empty_non_terminals_have_none() {
        let origin = Name::from_str("example.com.").unwrap();
        let zone = load_zone_str(ZONE, &origin, Path::new("t")).unwrap();
        assert!(soa_template(&zone, 1).is_none());
        let signed = signed_zone();
        let ent = LowerName::new(&Name::from_str("ent.example.com.").unwrap());
        let node = signed.node(&ent).expect("an empty non-terminal is a node");
        assert!(denial_entry(&signed, &ent, node, exist_flags::NODATA_A, 1).is_none());
    }
}
