//! The update section (RFC 2136 §2.5, §3.4): its prescan, the
//! requester's permission for each record, and the records applied in
//! order to a copy of the zone, which yields the changes to commit.

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{DNSClass, LowerName, RData, Record, RecordType};

use super::Permission;
use crate::zone::serial::is_newer;
use crate::zone::store::{Change, Edit};
use crate::zone::Zone;

/// Types that are not data and cannot be added or deleted (query-only
/// and transaction types), but ANY where deletions allow it.
fn meta(rtype: RecordType) -> bool {
    // 128..=255 are the query types (AXFR, IXFR, MAILA, MAILB, ANY) and
    // the transaction records (TKEY, TSIG).
    rtype == RecordType::OPT || (128..=255).contains(&u16::from(rtype))
}

/// §3.4.1: every record is inside the zone (NOTZONE) and well formed for
/// its class (FORMERR).
pub(super) fn prescan(origin: &LowerName, updates: &[Record]) -> Result<(), ResponseCode> {
    for rr in updates {
        if !origin.zone_of(&LowerName::new(&rr.name)) {
            return Err(ResponseCode::NotZone);
        }
        let rtype = rr.record_type();
        let empty = matches!(rr.data, RData::Update0(_));
        let ok = match rr.dns_class {
            DNSClass::IN => !meta(rtype) && !empty,
            DNSClass::ANY => rr.ttl == 0 && empty && (rtype == RecordType::ANY || !meta(rtype)),
            DNSClass::NONE => rr.ttl == 0 && !meta(rtype) && !empty,
            _ => false,
        };
        if !ok {
            return Err(ResponseCode::FormErr);
        }
    }
    Ok(())
}

/// §3.3: the requester may change every RRset the update touches
/// (deleting all of a name's RRsets touches each of them); REFUSED
/// otherwise.
pub(super) fn permitted(
    zone: &Zone,
    updates: &[Record],
    permission: &Permission,
) -> Result<(), ResponseCode> {
    for rr in updates {
        let name = LowerName::new(&rr.name);
        let rtype = rr.record_type();
        let allowed = if rr.dns_class == DNSClass::ANY && rtype == RecordType::ANY {
            let apex = name == *zone.origin_key();
            zone.node(&name).is_none_or(|node| {
                node.rrsets()
                    .iter()
                    .filter(|s| !(apex && kept_at_apex(s.rtype)))
                    .all(|s| permission.allows(&name, s.rtype))
            })
        } else {
            permission.allows(&name, rtype)
        };
        if !allowed {
            return Err(ResponseCode::Refused);
        }
    }
    Ok(())
}

/// The apex's SOA and NS are never deleted by an RRset deletion.
fn kept_at_apex(rtype: RecordType) -> bool {
    matches!(rtype, RecordType::SOA | RecordType::NS)
}

/// §3.4.2: applies the records in order to a copy of `zone`, each seeing
/// what those before it did. Records the RFC says to ignore (a CNAME
/// beside other data, other data beside a CNAME, an SOA that is not
/// newer, deleting the apex's SOA or its last NS) are skipped silently.
pub(super) fn apply(zone: &Zone, updates: &[Record]) -> Edit {
    let mut work = zone.clone();
    let mut edit = Edit::default();
    let apex = zone.origin_key().clone();
    for rr in updates {
        let name = LowerName::new(&rr.name);
        match rr.dns_class {
            DNSClass::IN => add(&mut work, &mut edit, &name, rr),
            DNSClass::ANY => {
                let rtype = rr.record_type();
                let Some(node) = work.node(&name) else {
                    continue;
                };
                let gone: Vec<Record> = node
                    .rrsets()
                    .iter()
                    .filter(|s| rtype == RecordType::ANY || s.rtype == rtype)
                    .filter(|s| !(name == apex && kept_at_apex(s.rtype)))
                    .flat_map(|s| {
                        s.rdatas()
                            .map(|d| Record::from_rdata(rr.name.clone(), s.ttl, d))
                    })
                    .collect();
                for r in gone {
                    remove(&mut work, &mut edit, r);
                }
            }
            DNSClass::NONE => {
                let rtype = rr.record_type();
                if rtype == RecordType::SOA {
                    continue;
                }
                if name == apex && rtype == RecordType::NS {
                    let last = work
                        .node(&name)
                        .and_then(|n| n.rrset(RecordType::NS))
                        .is_none_or(|s| s.len() <= 1);
                    if last {
                        continue;
                    }
                }
                let mut r = rr.clone();
                r.dns_class = DNSClass::IN;
                remove(&mut work, &mut edit, r);
            }
            _ => {}
        }
    }
    edit
}

/// Adds one record (§3.4.2.2), or replaces the SOA or a CNAME.
fn add(work: &mut Zone, edit: &mut Edit, name: &LowerName, rr: &Record) {
    let rtype = rr.record_type();
    if rtype == RecordType::SOA {
        let RData::SOA(new) = &rr.data else { return };
        let newer = name == work.origin_key()
            && work
                .soa()
                .is_some_and(|(old, _)| is_newer(new.serial, old.serial));
        if newer {
            let old = work.soa().map(|(s, _)| s.clone()).expect("checked");
            work.remove(&rr.name, &RData::SOA(old));
            let _ = work.insert(rr.clone());
            edit.soa = Some((new.clone(), rr.ttl));
        }
        return;
    }
    // A CNAME stands alone but for the DNSSEC records beside it (RFC
    // 2181 §10.1, RFC 4035 §2.5).
    let dnssec = |t: RecordType| matches!(t, RecordType::RRSIG | RecordType::NSEC);
    if let Some(node) = work.node(name) {
        let has_other = node
            .rrsets()
            .iter()
            .any(|s| s.rtype != RecordType::CNAME && !dnssec(s.rtype));
        let cname = node.rrset(RecordType::CNAME);
        let conflict = match rtype {
            RecordType::CNAME => has_other,
            t => cname.is_some() && !dnssec(t),
        };
        // A record already there is left as it is, TTL included (as
        // Knot does; RFC 2136 would take the new TTL).
        let same = node.rrset(rtype).is_some_and(|s| s.contains(&rr.data));
        if conflict || same {
            return;
        }
        // A new CNAME replaces the old one.
        let replaced: Vec<Record> = match cname.filter(|_| rtype == RecordType::CNAME) {
            Some(old) => old
                .rdatas()
                .filter(|d| *d != rr.data)
                .map(|d| Record::from_rdata(rr.name.clone(), old.ttl, d))
                .collect(),
            None => Vec::new(),
        };
        for r in replaced {
            remove(work, edit, r);
        }
    }
    if work.insert(rr.clone()).is_ok() {
        edit.changes.push(Change::Add(rr.clone()));
    }
}

/// Deletes one record if present.
fn remove(work: &mut Zone, edit: &mut Edit, r: Record) {
    if work.remove(&r.name, &r.data) {
        edit.changes.push(Change::Remove(r));
    }
}
