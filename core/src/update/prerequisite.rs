//! The prerequisite section (RFC 2136 §2.4, §3.2): conditions on the
//! zone as it stands that must all hold, or the update is refused with
//! the RCODE of the first that does not.

use std::collections::BTreeMap;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{DNSClass, LowerName, RData, Record, RecordType};

use crate::zone::Zone;

/// Checks every prerequisite against `zone`.
pub(super) fn check(zone: &Zone, prerequisites: &[Record]) -> Result<(), ResponseCode> {
    // Value-dependent prerequisites (class IN) are gathered into RRsets
    // and compared whole once every record is read (§3.2.3).
    let mut wanted: BTreeMap<(LowerName, RecordType), Vec<&RData>> = BTreeMap::new();
    for rr in prerequisites {
        if rr.ttl != 0 {
            return Err(ResponseCode::FormErr);
        }
        let name = LowerName::new(&rr.name);
        if !zone.origin_key().zone_of(&name) {
            return Err(ResponseCode::NotZone);
        }
        let rtype = rr.record_type();
        let empty = matches!(rr.data, RData::Update0(_));
        match rr.dns_class {
            DNSClass::ANY => {
                if !empty {
                    return Err(ResponseCode::FormErr);
                }
                if rtype == RecordType::ANY {
                    // Name is in use (§2.4.4).
                    if !in_use(zone, &name) {
                        return Err(ResponseCode::NXDomain);
                    }
                } else if rrset(zone, &name, rtype).is_none() {
                    // RRset exists, value independent (§2.4.1).
                    return Err(ResponseCode::NXRRSet);
                }
            }
            DNSClass::NONE => {
                if !empty {
                    return Err(ResponseCode::FormErr);
                }
                if rtype == RecordType::ANY {
                    // Name is not in use (§2.4.5).
                    if in_use(zone, &name) {
                        return Err(ResponseCode::YXDomain);
                    }
                } else if rrset(zone, &name, rtype).is_some() {
                    // RRset does not exist (§2.4.3).
                    return Err(ResponseCode::YXRRSet);
                }
            }
            DNSClass::IN => {
                if empty || rtype == RecordType::ANY {
                    return Err(ResponseCode::FormErr);
                }
                wanted.entry((name, rtype)).or_default().push(&rr.data);
            }
            _ => return Err(ResponseCode::FormErr),
        }
    }
    // RRset exists, value dependent (§2.4.2): the same records, no more
    // and no fewer (TTLs are not compared).
    for ((name, rtype), mut datas) in wanted {
        let mut unique: Vec<&RData> = Vec::with_capacity(datas.len());
        for d in datas.drain(..) {
            if !unique.contains(&d) {
                unique.push(d);
            }
        }
        let datas = unique;
        let Some(set) = rrset(zone, &name, rtype) else {
            return Err(ResponseCode::NXRRSet);
        };
        if set.len() != datas.len() || !datas.iter().all(|d| set.contains(d)) {
            return Err(ResponseCode::NXRRSet);
        }
    }
    Ok(())
}

/// A name is in use when it owns at least one record (an empty
/// non-terminal is not, §2.4.4).
pub(super) fn in_use(zone: &Zone, name: &LowerName) -> bool {
    zone.node(name).is_some_and(|n| !n.rrsets().is_empty())
}

fn rrset<'z>(
    zone: &'z Zone,
    name: &LowerName,
    rtype: RecordType,
) -> Option<&'z crate::zone::RRset> {
    zone.node(name).and_then(|n| n.rrset(rtype))
}
