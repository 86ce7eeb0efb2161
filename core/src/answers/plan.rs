//! How a burst of commits from the zone store's change feed updates an
//! answer table: one plan for the kernel table's subscriber and for the
//! userspace table's follower.

use hickory_proto::rr::LowerName;

use super::compile::compile_all;
use super::table::AnswerTable;
use crate::zone::{FeedItem, Snapshot, ZoneDiff, ZoneEvent};

/// Changes up to this many records are always compiled from the diffs
/// alone.
pub const SMALL_DIFF: usize = 1_000;

/// Beyond [`SMALL_DIFF`], a burst is compiled from its diffs while it
/// touches at most this fraction (1/n) of the served records: a rebuild
/// costs the whole table however small the change, so under a steady
/// stream of registrations (bursts of a few thousand records against a
/// table of a hundred thousand) rebuilding every burst would spend most
/// of the time recompiling names that did not change. Either way the
/// kernel switches generations once.
pub const REBUILD_FRACTION: usize = 4;

/// What to do with the kernel table after a burst of feed items.
#[derive(Debug, PartialEq, Eq)]
pub enum Update {
    /// Recompile everything from the snapshot.
    Rebuild,
    /// Recompile the names these diffs touch.
    Delta(Vec<ZoneDiff>),
}

/// Merges a burst of feed items (in feed order) into one update against
/// the newest snapshot among them: a resync, an expiry change or a change
/// large beside the served records (see [`REBUILD_FRACTION`]) rebuilds;
/// otherwise the diffs are compiled together.
pub fn plan(items: &[FeedItem]) -> Update {
    let mut diffs = Vec::new();
    let mut records = 0;
    let limit = items.last().map_or(SMALL_DIFF, |last| {
        let served: usize = last.snapshot().zones().map(|z| z.record_count()).sum();
        SMALL_DIFF.max(served / REBUILD_FRACTION)
    });
    for item in items {
        let FeedItem::Commit(c) = item else {
            return Update::Rebuild;
        };
        for event in &c.events {
            match event {
                ZoneEvent::Published(d) => {
                    records += d.removed.len() + d.added.len();
                    if d.whole_zone {
                        // The zone's records, from whichever side has them.
                        let before = c.snapshot.zone(&LowerName::new(&d.origin));
                        records += before.map_or(SMALL_DIFF + 1, |z| z.record_count());
                    }
                    diffs.push(d.clone());
                }
                ZoneEvent::Expired(_) | ZoneEvent::Fresh(_) | ZoneEvent::Rotation(_) => {
                    return Update::Rebuild
                }
            }
        }
        if records > limit {
            return Update::Rebuild;
        }
    }
    Update::Delta(diffs)
}

/// Compiles `snapshot` into `table` as a whole.
pub fn fill(table: &AnswerTable, snapshot: &Snapshot) {
    let (compiled, _, dependents) = compile_all(snapshot);
    table.unsettle();
    table.replace(&compiled);
    table.set_dependents(dependents);
    table.settle(snapshot.version());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zone::Commit;
    use hickory_proto::rr::rdata::A;
    use hickory_proto::rr::{Name, RData, Record};
    use std::sync::Arc;

    fn commit(version: u64, events: Vec<ZoneEvent>) -> FeedItem {
        FeedItem::Commit(Arc::new(Commit {
            version,
            snapshot: Arc::new(Snapshot::default()),
            events,
        }))
    }

    fn diff(records: usize) -> ZoneDiff {
        let name = Name::from_ascii("a.example.").unwrap();
        ZoneDiff {
            origin: Name::from_ascii("example.").unwrap(),
            old_serial: Some(1),
            new_serial: Some(2),
            removed: Vec::new(),
            added: (0..records)
                .map(|i| {
                    Record::from_rdata(
                        name.clone(),
                        60,
                        RData::A(A::new(10, 0, (i >> 8) as u8, i as u8)),
                    )
                })
                .collect(),
            whole_zone: false,
        }
    }

    #[test]
    fn a_burst_of_small_commits_is_one_delta_in_feed_order() {
        let items = [
            commit(1, vec![ZoneEvent::Published(diff(1))]),
            commit(2, vec![ZoneEvent::Published(diff(2))]),
        ];
        assert_eq!(plan(&items), Update::Delta(vec![diff(1), diff(2)]));
    }

    #[test]
    fn resync_expiry_rotation_and_large_changes_rebuild() {
        let origin = Name::from_ascii("example.").unwrap();
        let resync = FeedItem::Resync(Arc::new(Snapshot::default()));
        assert_eq!(plan(&[resync]), Update::Rebuild);
        let expired = commit(3, vec![ZoneEvent::Expired(origin.clone())]);
        assert_eq!(plan(&[expired]), Update::Rebuild);
        let fresh = commit(3, vec![ZoneEvent::Fresh(origin.clone())]);
        assert_eq!(plan(&[fresh]), Update::Rebuild);
        // Rotation changes every A/AAAA entry of the zone, no record.
        let rotation = commit(3, vec![ZoneEvent::Rotation(origin)]);
        assert_eq!(plan(&[rotation]), Update::Rebuild);
        let big = [
            commit(1, vec![ZoneEvent::Published(diff(SMALL_DIFF / 2))]),
            commit(2, vec![ZoneEvent::Published(diff(SMALL_DIFF / 2 + 1))]),
        ];
        assert_eq!(plan(&big), Update::Rebuild, "the burst as a whole is large");
    }

    #[test]
    fn bursts_small_beside_the_served_records_stay_deltas() {
        use crate::zone::{load_zone_str, ZoneStore};
        let mut text = String::from(
            "$ORIGIN example.\n$TTL 60\n@ SOA ns h 1 1 1 1 1\n@ NS ns\nns A 10.9.9.9\n",
        );
        for i in 0..8_000 {
            text += &format!("h{i} A 10.0.{}.{}\n", i >> 8, i & 255);
        }
        let origin = Name::from_ascii("example.").unwrap();
        let zone = load_zone_str(&text, &origin, std::path::Path::new("t.zone")).unwrap();
        let served = ZoneStore::with_zones(vec![zone]).snapshot();
        let commit = |version, records| {
            FeedItem::Commit(Arc::new(Commit {
                version,
                snapshot: served.clone(),
                events: vec![ZoneEvent::Published(diff(records))],
            }))
        };
        // 8,003 records served: up to a quarter of them is a delta.
        let over_floor = [commit(1, 1_500), commit(2, 400)];
        assert!(matches!(plan(&over_floor), Update::Delta(d) if d.len() == 2));
        let a_third = [commit(1, 1_500), commit(2, 1_200)];
        assert_eq!(plan(&a_third), Update::Rebuild);
    }
}
