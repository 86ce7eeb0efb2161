//! Zone checks run on load, like `named-checkzone`: they turn a list of
//! parsed records into a [`Zone`] or explain, with file and line, why the
//! records do not make a servable zone.

use std::collections::HashMap;
use std::path::Path;

use hickory_proto::rr::{LowerName, Name, RData, RecordType};

use super::{fqdn_lower, SourceRecord, Zone};

/// The first problem found, with where it was found.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{location}: {problem}")]
pub struct ZoneCheckError {
    /// `file:line`, or just `file` when no line applies.
    pub location: String,
    pub problem: String,
}

impl ZoneCheckError {
    fn at(rec: &SourceRecord, problem: String) -> Self {
        Self::at_line(&rec.file, rec.line, problem)
    }

    fn at_line(file: &Path, line: usize, problem: String) -> Self {
        ZoneCheckError {
            location: format!("{}:{line}", file.display()),
            problem,
        }
    }

    fn in_file(file: &Path, problem: String) -> Self {
        ZoneCheckError {
            location: file.display().to_string(),
            problem,
        }
    }
}

/// Checks `records` as the complete contents of zone `origin` loaded from
/// `file`, and builds the zone.
///
/// Rules: every name inside the zone; exactly one SOA, at the apex; NS at
/// the apex; no CNAME beside other data (or a second CNAME); every NS target
/// that lies inside the zone has an address record (glue).
pub fn check_zone(
    origin: &Name,
    file: &Path,
    records: &[SourceRecord],
) -> Result<Zone, ZoneCheckError> {
    let origin = fqdn_lower(origin);
    let origin_key = LowerName::new(&origin);
    let mut zone = Zone::new(&origin);
    let mut seen: HashMap<LowerName, SeenAt> = HashMap::new();
    let mut soa_seen: Option<&SourceRecord> = None;

    for rec in records {
        let key = LowerName::new(&rec.record.name);
        let rtype = rec.record.record_type();
        if !origin_key.zone_of(&key) {
            return Err(ZoneCheckError::at(
                rec,
                format!("{} is outside zone {origin}", rec.record.name),
            ));
        }
        if rtype == RecordType::SOA {
            if key != origin_key {
                return Err(ZoneCheckError::at(
                    rec,
                    format!(
                        "SOA record at {} is not at the zone apex {origin}",
                        rec.record.name
                    ),
                ));
            }
            if let Some(prev) = soa_seen {
                return Err(ZoneCheckError::at(
                    rec,
                    format!(
                        "second SOA record for {origin} (first at line {})",
                        prev.line
                    ),
                ));
            }
            soa_seen = Some(rec);
        }
        check_cname_exclusive(rec, seen.entry(key).or_default())?;
        zone.insert(rec.record.clone())
            .map_err(|e| ZoneCheckError::at(rec, e.to_string()))?;
    }

    let first_line = records.first();
    let missing = |what: &str| match first_line {
        Some(r) => ZoneCheckError::at(r, format!("zone {origin} has no {what} at its apex")),
        None => ZoneCheckError::in_file(file, format!("zone {origin} has no {what} at its apex")),
    };
    if soa_seen.is_none() {
        return Err(missing("SOA record"));
    }
    if zone.apex().rrset(RecordType::NS).is_none() {
        return Err(missing("NS records"));
    }
    check_glue(&zone, records)?;
    Ok(zone)
}

/// A zone built from records streamed in batches, with what the checks
/// after it need: the DNSSEC records (for the signing warnings).
pub struct Built {
    pub zone: Zone,
    pub dnssec: Vec<SourceRecord>,
}

/// [`check_zone`] over records arriving in batches, building the zone as
/// they come and keeping no record it does not need. It finds whether
/// the zone is valid, not the message: on a problem it returns the first
/// one it saw, and the caller runs [`check_zone`] for the exact message
/// (which names the earlier record of a conflict).
pub fn build_checked(
    origin: &Name,
    file: &Path,
    batches: impl IntoIterator<Item = Vec<SourceRecord>>,
) -> Result<Built, ZoneCheckError> {
    let origin = fqdn_lower(origin);
    let origin_key = LowerName::new(&origin);
    let mut zone = Zone::new(&origin);
    let mut dnssec = Vec::new();
    let mut ns = Vec::new();
    let mut first: Option<SourceRecord> = None;
    let mut soa_seen = false;
    // Consecutive records of one owner are added together.
    let mut group: Vec<SourceRecord> = Vec::new();
    let add = |zone: &mut Zone, group: &mut Vec<SourceRecord>| -> Result<(), ZoneCheckError> {
        let Some(head) = group.first() else {
            return Ok(());
        };
        let key = LowerName::new(&head.record.name);
        let (file, line) = (head.file.clone(), head.line);
        let inserted = zone
            .insert_at(&key, group.drain(..).map(|r| r.record))
            .map_err(|e| ZoneCheckError::at_line(&file, line, e.to_string()))?;
        match inserted.cname_conflict {
            true => Err(ZoneCheckError::at_line(
                &file,
                line,
                "CNAME conflict".into(),
            )),
            false => Ok(()),
        }
    };
    for batch in batches {
        for rec in batch {
            if first.is_none() {
                first = Some(rec.clone());
            }
            let rtype = rec.record.record_type();
            let at_apex = || LowerName::new(&rec.record.name) == origin_key;
            match rtype {
                RecordType::SOA if soa_seen || !at_apex() => {
                    return Err(ZoneCheckError::at(
                        &rec,
                        "SOA not at the apex, or a second one".into(),
                    ))
                }
                RecordType::SOA => soa_seen = true,
                RecordType::NS => ns.push(rec.clone()),
                RecordType::DNSKEY
                | RecordType::RRSIG
                | RecordType::NSEC3
                | RecordType::NSEC3PARAM => dnssec.push(rec.clone()),
                _ => {}
            }
            if group
                .first()
                .is_some_and(|g| g.record.name != rec.record.name)
            {
                add(&mut zone, &mut group)?;
            }
            group.push(rec);
        }
    }
    add(&mut zone, &mut group)?;
    let missing = |what: &str| {
        let text = format!("zone {origin} has no {what} at its apex");
        match &first {
            Some(r) => ZoneCheckError::at(r, text),
            None => ZoneCheckError::in_file(file, text),
        }
    };
    if !soa_seen {
        return Err(missing("SOA record"));
    }
    if zone.apex().rrset(RecordType::NS).is_none() {
        return Err(missing("NS records"));
    }
    check_glue(&zone, &ns)?;
    Ok(Built { zone, dnssec })
}

/// What has been seen at one owner name, for the CNAME exclusivity rule.
#[derive(Default)]
struct SeenAt<'a> {
    cname: Option<&'a SourceRecord>,
    other: Option<&'a SourceRecord>,
}

fn check_cname_exclusive<'a>(
    rec: &'a SourceRecord,
    seen: &mut SeenAt<'a>,
) -> Result<(), ZoneCheckError> {
    let name = &rec.record.name;
    // DNSSEC's own records sit beside a CNAME (RFC 4035 §2.5, RFC 2181 §10.1).
    if matches!(
        rec.record.record_type(),
        RecordType::RRSIG | RecordType::NSEC
    ) {
        return Ok(());
    }
    if rec.record.record_type() == RecordType::CNAME {
        if let Some(prev) = seen.cname.filter(|p| p.record.data != rec.record.data) {
            return Err(ZoneCheckError::at(
                rec,
                format!("second CNAME at {name} (first at line {})", prev.line),
            ));
        }
        if let Some(prev) = seen.other {
            return Err(ZoneCheckError::at(
                rec,
                format!(
                    "CNAME and other data at {name} ({} at line {})",
                    prev.record.record_type(),
                    prev.line
                ),
            ));
        }
        seen.cname.get_or_insert(rec);
    } else {
        if let Some(prev) = seen.cname {
            return Err(ZoneCheckError::at(
                rec,
                format!(
                    "CNAME and other data at {name} (CNAME at line {})",
                    prev.line
                ),
            ));
        }
        seen.other.get_or_insert(rec);
    }
    Ok(())
}

/// An NS target inside this zone must resolve from this zone: it needs an
/// A or AAAA record (glue when it sits below a delegation).
fn check_glue(zone: &Zone, records: &[SourceRecord]) -> Result<(), ZoneCheckError> {
    for rec in records {
        let RData::NS(ns) = &rec.record.data else {
            continue;
        };
        let target = LowerName::new(&ns.0);
        if !zone.origin_key().zone_of(&target) {
            continue;
        }
        let has_address = zone.node(&target).is_some_and(|n| {
            n.rrset(RecordType::A).is_some() || n.rrset(RecordType::AAAA).is_some()
        });
        if !has_address {
            return Err(ZoneCheckError::at(
                rec,
                format!(
                    "NS target {} is inside the zone but has no A/AAAA record (missing glue)",
                    ns.0
                ),
            ));
        }
    }
    Ok(())
}
