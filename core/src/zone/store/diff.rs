//! Record-level differences between two versions of a zone: what the
//! change feed, the IXFR journal and NOTIFY see of a commit.

use std::collections::BTreeSet;

use hickory_proto::rr::{LowerName, Name, Record, RecordType};

use super::ZoneDiff;
use crate::zone::{Node, RRset, Zone};

/// Adds to `diff` what changed in one RRset. A TTL change touches every
/// record of the set (RFC 2181 §5.2: one TTL per RRset), so all of them
/// leave with the old TTL and come back with the new one.
pub(super) fn record_rrset_change(
    diff: &mut ZoneDiff,
    r: &Record,
    before: Option<RRset>,
    after: Option<RRset>,
) {
    let records = |set: &RRset| -> Vec<Record> {
        set.rdatas()
            .map(|d| Record::from_rdata(r.name.clone(), set.ttl, d))
            .collect()
    };
    let old = before.as_ref().map(records).unwrap_or_default();
    let new = after.as_ref().map(records).unwrap_or_default();
    // hickory's Record equality ignores the TTL; ours must not.
    let same = |a: &Record, b: &Record| a == b && a.ttl == b.ttl;
    for x in old.iter().filter(|x| !new.iter().any(|y| same(x, y))) {
        cancel_or_push(&mut diff.added, &mut diff.removed, x);
    }
    for x in new.iter().filter(|x| !old.iter().any(|y| same(x, y))) {
        cancel_or_push(&mut diff.removed, &mut diff.added, x);
    }
}

/// Records `r` in `push_to` unless it cancels an opposite entry in
/// `cancel_from` (add-then-remove within one change is no change).
pub(super) fn cancel_or_push(cancel_from: &mut Vec<Record>, push_to: &mut Vec<Record>, r: &Record) {
    let same = |x: &Record| x.name == r.name && x.data == r.data && x.ttl == r.ttl;
    match cancel_from.iter().position(same) {
        Some(i) => {
            cancel_from.remove(i);
        }
        None => push_to.push(r.clone()),
    }
}

/// Record-level difference between two versions of one zone (what a
/// zone file's edit changed, for zones that take updates).
pub fn diff(old: &Zone, new: &Zone) -> ZoneDiff {
    diff_zones(Some(old), Some(new), new.origin())
}

/// Record-level difference between two versions of a zone.
pub(super) fn diff_zones(old: Option<&Zone>, new: Option<&Zone>, origin: &Name) -> ZoneDiff {
    let mut diff = ZoneDiff {
        origin: origin.clone(),
        old_serial: old.and_then(Zone::serial),
        new_serial: new.and_then(Zone::serial),
        whole_zone: old.is_none() || new.is_none(),
        ..ZoneDiff::default()
    };
    if diff.whole_zone {
        return diff;
    }
    // Both versions have the same origin, so the same keys.
    if let (Some(old), Some(new)) = (old, new) {
        // Versions made one from the other differ only where either
        // changed its copy.
        if let Some(keys) = new.keys_changed_from(old) {
            for key in keys {
                let owner = || Name::from(new.name_of(key));
                if let Some(node) = new.node_at(key) {
                    push_node_delta(&mut diff.added, &owner, node, old.node_at(key));
                }
                if let Some(node) = old.node_at(key) {
                    push_node_delta(&mut diff.removed, &owner, node, new.node_at(key));
                }
            }
        } else {
            for (key, node) in new.node_keys() {
                let owner = || Name::from(new.name_of(key));
                push_node_delta(&mut diff.added, &owner, node, old.node_at(key));
            }
            for (key, node) in old.node_keys() {
                let owner = || Name::from(old.name_of(key));
                push_node_delta(&mut diff.removed, &owner, node, new.node_at(key));
            }
        }
    }
    // IXFR wants the SOA first in each half.
    let soa_first = |v: &mut Vec<Record>| v.sort_by_key(|r| r.record_type() != RecordType::SOA);
    soa_first(&mut diff.removed);
    soa_first(&mut diff.added);
    diff
}

/// The records that differ between a signed zone and a new unsigned
/// version of it, leaving out what a signer owns (RRSIG, NSEC, DNSKEY…)
/// on both sides: what its source changed.
pub(super) fn diff_unsigned(old: &Zone, new: &Zone) -> ZoneDiff {
    let mut diff = ZoneDiff {
        origin: new.origin().clone(),
        old_serial: old.serial(),
        new_serial: new.serial(),
        ..ZoneDiff::default()
    };
    let unsigned = crate::zone::signer_managed;
    let signs = |t| !unsigned(t);
    for (key, node) in new.node_keys() {
        let owner = || Name::from(new.name_of(key));
        push_sets_delta(&mut diff.added, &owner, node, old.node_at(key), &signs);
    }
    for (key, node) in old.node_keys() {
        let owner = || Name::from(old.name_of(key));
        push_sets_delta(&mut diff.removed, &owner, node, new.node_at(key), &signs);
    }
    diff
}

/// [`diff_zones`] over `names` only (the rest is known to be the same).
pub(super) fn diff_names(old: &Zone, new: &Zone, names: &BTreeSet<LowerName>) -> ZoneDiff {
    let mut diff = ZoneDiff {
        origin: new.origin().clone(),
        old_serial: old.serial(),
        new_serial: new.serial(),
        ..ZoneDiff::default()
    };
    for key in names {
        let owner = || Name::from(key);
        if let Some(node) = new.node(key) {
            push_node_delta(&mut diff.added, &owner, node, old.node(key));
        }
        if let Some(node) = old.node(key) {
            push_node_delta(&mut diff.removed, &owner, node, new.node(key));
        }
    }
    let soa_first = |v: &mut Vec<Record>| v.sort_by_key(|r| r.record_type() != RecordType::SOA);
    soa_first(&mut diff.removed);
    soa_first(&mut diff.added);
    diff
}

/// Pushes the records of `node`, whose name `owner` makes, that `other`
/// lacks (same data and TTL).
fn push_node_delta(
    out: &mut Vec<Record>,
    owner: &dyn Fn() -> Name,
    node: &Node,
    other: Option<&Node>,
) {
    push_sets_delta(out, owner, node, other, &|_| true);
}

/// [`push_node_delta`] for the sets whose type `keep` accepts.
fn push_sets_delta(
    out: &mut Vec<Record>,
    owner: &dyn Fn() -> Name,
    node: &Node,
    other: Option<&Node>,
    keep: &dyn Fn(RecordType) -> bool,
) {
    if other.is_some_and(|o| o.shares_sets(node)) {
        return;
    }
    for set in node.rrsets().iter().filter(|s| keep(s.rtype)) {
        let other_set = other.and_then(|o| o.set_like(set));
        if other_set == Some(set) {
            continue;
        }
        // Compared as wire bytes: a name's case in the data is a change
        // too. Looked up in a set, not scanned: a service's RRset can hold
        // thousands of records.
        let others: std::collections::HashSet<&[u8]> = match other_set {
            Some(o) if o.ttl == set.ttl => o.wire().collect(),
            _ => Default::default(),
        };
        for w in set.wire() {
            if !others.contains(w) {
                let d = crate::zone::packed::decode(set.rtype, w);
                out.push(Record::from_rdata(owner(), set.ttl, d));
            }
        }
    }
}
