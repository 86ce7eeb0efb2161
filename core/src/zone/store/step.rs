//! One step of a change to a zone: its record changes applied in order,
//! then the SOA's new serial, with the record diff they made.

use hickory_proto::rr::rdata::SOA;
use hickory_proto::rr::RecordType;
use hickory_proto::rr::{LowerName, Name, RData, Record};

use super::diff::{cancel_or_push, record_rrset_change};
use super::error::StoreError;
use crate::zone::serial::SerialPolicy;
use crate::zone::snapshot::ZoneDiff;
use crate::zone::{RRset, Zone};

/// A record-level change to a zone.
#[derive(Clone, Debug)]
pub enum Change {
    Add(Record),
    Remove(Record),
}

/// Whether a step's additions are looked for in their sets first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Additions {
    /// Each is looked for: one already there changes nothing but, at
    /// most, its set's TTL (RFC 2181 §5).
    Checked,
    /// The source counts every record's contributors and adds only
    /// records their sets lack: none is looked for, but in a set whose
    /// TTL the step changes (the source then adds the whole set again).
    Counted,
}

/// One step of [`ZoneStore::apply`](super::ZoneStore::apply): record changes, then the SOA's new
/// serial (`Ok`: the primary's, exactly; `Err(now)`: ours, by policy),
/// with the other fields and TTL of `replacement` when given (an update
/// that replaces the SOA).
pub(super) fn apply_step(
    zone: &mut Zone,
    changes: &[Change],
    serial: Result<u32, u64>,
    policy: SerialPolicy,
    replacement: Option<&(SOA, u32)>,
    additions: Additions,
) -> Result<ZoneDiff, StoreError> {
    let origin = zone.origin().clone();
    let (old_soa, soa_ttl) = zone
        .soa()
        .map(|(s, ttl)| (s.clone(), ttl))
        .ok_or_else(|| StoreError::NoSoa(origin.clone()))?;
    let mut diff = ZoneDiff {
        origin: origin.clone(),
        ..ZoneDiff::default()
    };
    // Sets whose TTL this step changed: their records are all added
    // again, most of them already there.
    let mut retimed: Vec<(&Name, RecordType)> = Vec::new();
    let counted = |retimed: &[(&Name, RecordType)], r: &Record| {
        additions == Additions::Counted
            && !retimed
                .iter()
                .any(|(n, t)| *t == r.record_type() && n.eq_case(&r.name))
    };
    let mut at = 0;
    while let Some(change) = changes.get(at) {
        at += 1;
        match change {
            Change::Add(r) | Change::Remove(r) if r.record_type() == RecordType::SOA => {
                return Err(StoreError::SoaChange)
            }
            Change::Add(r) => {
                // The additions at this name that follow it, in one go
                // when they can be.
                let run = &changes[at - 1..][..1 + additions_at(&changes[at..], &r.name)];
                match plain_additions(zone, run) {
                    Some(records) => {
                        at += records.len() - 1;
                        let key = LowerName::new(&r.name);
                        let fresh = records.iter().all(|r| counted(&retimed, r));
                        let mut new = Vec::with_capacity(records.len());
                        let each = records.iter().map(|&r| r.clone());
                        zone.insert_each(&key, each, fresh, |i| new.push(i))?;
                        for i in new {
                            cancel_or_push(&mut diff.removed, &mut diff.added, records[i]);
                        }
                    }
                    None => {
                        let fresh = counted(&retimed, r);
                        if add_one(zone, r, fresh, &mut diff)? == Added::Retimed {
                            retimed.push((&r.name, r.record_type()));
                        }
                    }
                }
            }
            Change::Remove(r) => {
                if let Some(ttl) = rrset_ttl(zone, r) {
                    if zone.remove(&r.name, &r.data) {
                        let mut gone = r.clone();
                        gone.ttl = ttl;
                        cancel_or_push(&mut diff.added, &mut diff.removed, &gone);
                    }
                }
            }
        }
    }
    if diff.is_empty() && serial.ok().is_none_or(|s| s == old_soa.serial) {
        return Ok(diff);
    }
    let (mut new_soa, new_ttl) = replacement
        .cloned()
        .unwrap_or_else(|| (old_soa.clone(), soa_ttl));
    new_soa.serial = match serial {
        Ok(exact) => exact,
        Err(now) => policy.next(old_soa.serial, now as u32),
    };
    zone.remove(&origin, &RData::SOA(old_soa.clone()));
    zone.insert(Record::from_rdata(
        origin.clone(),
        new_ttl,
        RData::SOA(new_soa.clone()),
    ))?;
    diff.old_serial = Some(old_soa.serial);
    diff.new_serial = Some(new_soa.serial);
    diff.removed.insert(
        0,
        Record::from_rdata(origin.clone(), soa_ttl, RData::SOA(old_soa)),
    );
    diff.added
        .insert(0, Record::from_rdata(origin, new_ttl, RData::SOA(new_soa)));
    Ok(diff)
}

/// What [`add_one`] did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Added {
    Record,
    /// The record changed its set's TTL.
    Retimed,
}

/// Adds `r` to `zone` and notes it in `diff`; `fresh`: its set lacks it
/// (the caller's promise, see [`Additions::Counted`]) unless it changes
/// the set's TTL.
pub(super) fn add_one(
    zone: &mut Zone,
    r: &Record,
    fresh: bool,
    diff: &mut ZoneDiff,
) -> Result<Added, StoreError> {
    let ttl_now = rrset_ttl(zone, r);
    if ttl_now.is_some_and(|t| t != r.ttl) {
        // A TTL change rewrites the whole set (rare path).
        let before = rrset_of(zone, r);
        zone.insert(r.clone())?;
        let after = rrset_of(zone, r);
        record_rrset_change(diff, r, before, after);
        return Ok(Added::Retimed);
    }
    let key = LowerName::new(&r.name);
    if zone.insert_each(&key, [r.clone()], fresh, |_| {})?.added == 1 {
        cancel_or_push(&mut diff.removed, &mut diff.added, r);
    }
    Ok(Added::Record)
}

/// How many of `changes`, from the first, add records at `name`: a
/// registry's publish adds a new instance's records, and a member's to
/// its service's sets, each name's one after the other.
fn additions_at(changes: &[Change], name: &Name) -> usize {
    changes
        .iter()
        .take_while(|c| matches!(c, Change::Add(r) if r.name.eq_case(name)))
        .count()
}

/// `run`'s records (two or more additions at one name), when each goes
/// in as it is: no SOA or RRSIG, no set whose TTL it would change, and
/// one TTL a type within the run. Else `None`, and they go in one by one.
fn plain_additions<'c>(zone: &Zone, run: &'c [Change]) -> Option<Vec<&'c Record>> {
    let first = match run {
        [Change::Add(r), _, ..] => r,
        _ => return None,
    };
    let node = zone.node(&LowerName::new(&first.name));
    let mut records: Vec<&Record> = Vec::with_capacity(run.len());
    for c in run {
        let Change::Add(r) = c else { return None };
        let rtype = r.record_type();
        // (An RRSIG's set is the one of the type it covers.)
        if matches!(rtype, RecordType::SOA | RecordType::RRSIG) {
            return None;
        }
        let served = node.and_then(|n| n.rrset(rtype)).map(|s| s.ttl);
        let earlier = records
            .iter()
            .find(|e| e.record_type() == rtype)
            .map(|e| e.ttl);
        if served.or(earlier).is_some_and(|t| t != r.ttl) {
            return None;
        }
        records.push(r);
    }
    Some(records)
}

/// The TTL of the RRset `r` belongs to, if the set exists (no copy).
fn rrset_ttl(zone: &Zone, r: &Record) -> Option<u32> {
    zone.node(&LowerName::new(&r.name))
        .and_then(|n| n.rrset(r.record_type()))
        .map(|s| s.ttl)
}

/// The RRset `r` belongs to, as it stands in `zone`.
fn rrset_of(zone: &Zone, r: &Record) -> Option<RRset> {
    zone.node(&LowerName::new(&r.name))
        .and_then(|n| n.rrset(r.record_type()))
        .cloned()
}
