//! Referral templates: what the fallback answers to a query at or below a
//! delegation (its NS records and their glue, not authoritative), written
//! once after a sample question and sent by the kernel, pointers moved,
//! for the cut itself and for names one or two labels below it that have
//! no entry of their own (the EXIST entry's `REFERRAL` flag).
//!
//! The records compress only against the question's cut and themselves:
//! every NS target inside the delegation must exist as a name (so a query
//! name sharing a label with it below the cut finds that name's own entry
//! first, which has no referral), and the relocated records must be the
//! full handler's referral for the cut itself, byte for byte.

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{LowerName, Name, RData, RecordType};
use xdpdns_common::negative::Template;
use xdpdns_common::{rtype, BLOCK_MAX, DNS_HEADER_LEN};

use super::entries::{relocated, skip_name, template_entry};
use crate::answers::entry::Compiled;
use crate::handler::resolve;
use crate::wire::compress::WireName;
use crate::wire::encode::{Header, Section, Writer};
use crate::zone::{Node, Zone};

/// The first label of the sample question: no name of a referral has it
/// (the check against the cut's own referral would fail if one did).
const PROBE: &str = "xdpdns--referral-probe";

/// Most labels of a cut: the compressor keeps 64 names' suffixes, and a
/// query may be two labels longer.
const MAX_LABELS: u8 = 60;

/// A referral: its template entry, and the names of the zone outside
/// the delegation whose addresses it holds (a change to them changes it).
pub(in crate::answers) struct Referral {
    pub entry: Compiled,
    pub depends: Vec<LowerName>,
}

/// The referral template of `cut` (a name of `zone` with `node`), when it
/// is a delegation whose referral the kernel can send exactly.
pub(in crate::answers) fn referral_template(
    zone: &Zone,
    cut: &LowerName,
    node: &Node,
    zone_id: u32,
) -> Option<Referral> {
    let ns = node.rrset(RecordType::NS)?;
    if cut == zone.origin_key()
        || cut.num_labels() > MAX_LABELS
        || zone.below_cut(&cut.base_name())
        || zone.below_dname(cut)
        || zone.is_expired()
    {
        return None;
    }
    let mut depends = Vec::new();
    for data in ns.rdatas() {
        let RData::NS(target) = data else {
            return None;
        };
        let target = LowerName::new(&target.0);
        if cut.zone_of(&target) {
            zone.node(&target)?;
        } else if zone.origin_key().zone_of(&target) {
            depends.push(target);
        }
    }
    let sample = Name::from(cut).prepend_label(PROBE).ok()?;
    let (records, counts) = referral_records(zone, &sample)?;
    let sample_len = WireName::new(&sample).bytes().len();
    let fixups = pointers(&records, counts, DNS_HEADER_LEN + 1 + PROBE.len())?;
    let template = Template {
        sample_len: sample_len as u16,
        authority: counts.0,
        additional: counts.1,
        authoritative: false,
        ..Template::default()
    };
    let entry = template_entry(template, &fixups, records, 0, zone_id)?;
    // Exact for the cut itself: the kernel's records are the handler's.
    let own = Name::from(cut);
    let (want, _) = referral_records(zone, &own)?;
    let section = entry.block.as_deref()?;
    let cut_len = WireName::new(&own).bytes().len();
    (relocated(section, cut_len, 0) == want).then_some(Referral { entry, depends })
}

/// The full handler's referral for an A query of `qname`: its records
/// after the question, and how many are authority and additional.
fn referral_records(zone: &Zone, qname: &Name) -> Option<(Vec<u8>, (u8, u8))> {
    let reply = resolve(zone, qname, RecordType::A, BLOCK_MAX / 11, false, 0);
    if reply.rcode != ResponseCode::NoError
        || !reply.referral
        || reply.authoritative
        || reply.oversized
        || !reply.answers.is_empty()
    {
        return None;
    }
    let mut w = Writer::new(Header::default(), qname, rtype::A, 1, BLOCK_MAX);
    w.records(Section::Authority, &reply.authority).ok()?;
    w.records(Section::Additional, &reply.additional).ok()?;
    let (records, [_, ns, ar]) = w.sections();
    Some((
        records.to_vec(),
        (u8::try_from(ns).ok()?, u8::try_from(ar).ok()?),
    ))
}

/// The offsets of the compression pointers in `count` records (owners,
/// and NS targets; only NS, A and AAAA records are expected), each of
/// which must point at or after `floor` (past the sample's first label).
fn pointers(records: &[u8], (ns, ar): (u8, u8), floor: usize) -> Option<Vec<usize>> {
    let mut found = Vec::new();
    let mut at = 0;
    for _ in 0..u16::from(ns) + u16::from(ar) {
        at = skip_name(records, at, &mut found)?;
        let rtype = u16::from_be_bytes([*records.get(at)?, *records.get(at + 1)?]);
        let rdlength = u16::from_be_bytes([*records.get(at + 8)?, *records.get(at + 9)?]) as usize;
        at += 10;
        match rtype {
            rtype::NS => {
                if skip_name(records, at, &mut found)? != at + rdlength {
                    return None;
                }
            }
            rtype::A | rtype::AAAA => {}
            _ => return None,
        }
        at += rdlength;
    }
    let past_probe = found.iter().all(|&p| {
        let target = u16::from_be_bytes([records[p], records[p + 1]]) & 0x3fff;
        target as usize >= floor
    });
    (at == records.len() && past_probe).then_some(found)
}
