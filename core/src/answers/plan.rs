//! How a burst of commits from the zone store's change feed updates an
//! answer table: one plan for the kernel table's subscriber and for the
//! userspace table's follower.

use hickory_proto::rr::LowerName;

use super::compile::compile_all;
use super::table::AnswerTable;
use crate::zone::{FeedItem, Snapshot, ZoneDiff, ZoneEvent};

/// Changes up to this many records are compiled from the diffs alone;
/// larger ones recompile the whole table (either way the kernel switches
/// generations once).
pub const SMALL_DIFF: usize = 1_000;

/// What to do with the kernel table after a burst of feed items.
#[derive(Debug, PartialEq, Eq)]
pub enum Update {
    /// Recompile everything from the snapshot.
    Rebuild,
    /// Recompile the names these diffs touch.
    Delta(Vec<ZoneDiff>),
}

/// Merges a burst of feed items (in feed order) into one update against
/// the newest snapshot among them: a resync, an expiry change or a large
/// change rebuilds; otherwise the diffs are compiled together.
pub fn plan(items: &[FeedItem]) -> Update {
    let mut diffs = Vec::new();
    let mut records = 0;
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
        if records > SMALL_DIFF {
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
}
