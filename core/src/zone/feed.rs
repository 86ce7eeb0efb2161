//! The change feed: every commit of the zone store, in commit order, to
//! any number of subscribers (the IXFR journal, NOTIFY, the kernel table,
//! and whatever comes next), each running on its own task or thread,
//! outside the store's writer lock.
//!
//! Delivery is a bounded ring (`tokio::sync::broadcast`): publishing never
//! waits for a subscriber. A subscriber that falls so far behind that the
//! ring overwrote commits it had not read is not handed the rest out of
//! order: it gets [`FeedItem::Resync`] with the current snapshot, and only
//! commits newer than that snapshot after it.

use std::sync::Arc;

use arc_swap::ArcSwap;
use hickory_proto::rr::Name;
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};

use super::snapshot::{Snapshot, ZoneDiff};

/// What one commit did, with the snapshot it produced.
#[derive(Debug)]
pub struct Commit {
    /// The snapshot's version: one more than the previous commit's.
    pub version: u64,
    pub snapshot: Arc<Snapshot>,
    pub events: Vec<ZoneEvent>,
}

impl Commit {
    /// The record diffs of this commit (events other than `Published`
    /// change no records).
    pub fn diffs(&self) -> impl Iterator<Item = &ZoneDiff> {
        self.events.iter().filter_map(|e| match e {
            ZoneEvent::Published(d) => Some(d),
            _ => None,
        })
    }
}

/// One zone's part of a commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZoneEvent {
    /// Records changed: a new zone, a new serial, or a zone removed
    /// (`new_serial == None`).
    Published(ZoneDiff),
    /// A secondary zone passed its SOA expire: it answers SERVFAIL.
    Expired(Name),
    /// An expired zone answers again.
    Fresh(Name),
    /// The zone's answers started or stopped rotating (the store's
    /// [`RotationPolicy`](super::store::RotationPolicy) changed): no
    /// records changed, but every A/AAAA answer did.
    Rotation(Name),
}

impl ZoneEvent {
    /// The zone the event is about.
    pub fn origin(&self) -> &Name {
        match self {
            ZoneEvent::Published(d) => &d.origin,
            ZoneEvent::Expired(origin) | ZoneEvent::Fresh(origin) | ZoneEvent::Rotation(origin) => {
                origin
            }
        }
    }
}

/// What a subscriber is handed next.
#[derive(Debug)]
pub enum FeedItem {
    Commit(Arc<Commit>),
    /// The subscriber missed commits: everything up to this snapshot's
    /// version is in it; continue from there.
    Resync(Arc<Snapshot>),
}

impl FeedItem {
    /// The version the subscriber is at after this item.
    pub fn version(&self) -> u64 {
        match self {
            FeedItem::Commit(c) => c.version,
            FeedItem::Resync(s) => s.version(),
        }
    }

    pub fn snapshot(&self) -> &Arc<Snapshot> {
        match self {
            FeedItem::Commit(c) => &c.snapshot,
            FeedItem::Resync(s) => s,
        }
    }
}

/// Commits kept for slow subscribers before they are told to resync.
pub const FEED_CAPACITY: usize = 4096;

/// One subscriber's position in the feed.
pub struct Subscription {
    rx: broadcast::Receiver<Arc<Commit>>,
    current: Arc<ArcSwap<Snapshot>>,
    /// Version of the last item handed out.
    seen: u64,
}

impl Subscription {
    pub(super) fn new(
        rx: broadcast::Receiver<Arc<Commit>>,
        current: Arc<ArcSwap<Snapshot>>,
        seen: u64,
    ) -> Self {
        Subscription { rx, current, seen }
    }

    /// The next item; `None` once the store is gone.
    pub async fn next(&mut self) -> Option<FeedItem> {
        loop {
            let got = self.rx.recv().await;
            if let Some(item) = self.accept(got)? {
                return Some(item);
            }
        }
    }

    /// [`next`](Self::next) for a subscriber on its own thread.
    pub fn blocking_next(&mut self) -> Option<FeedItem> {
        loop {
            let got = self.rx.blocking_recv();
            if let Some(item) = self.accept(got)? {
                return Some(item);
            }
        }
    }

    /// The next item if one is waiting (to merge a burst).
    pub fn try_next(&mut self) -> Option<FeedItem> {
        loop {
            let got = match self.rx.try_recv() {
                Ok(c) => Ok(c),
                Err(TryRecvError::Lagged(n)) => Err(RecvError::Lagged(n)),
                Err(TryRecvError::Empty | TryRecvError::Closed) => return None,
            };
            if let Some(item) = self.accept(got)? {
                return Some(item);
            }
        }
    }

    /// `Some(None)`: skip this one (already covered by a resync).
    fn accept(&mut self, got: Result<Arc<Commit>, RecvError>) -> Option<Option<FeedItem>> {
        match got {
            Ok(c) if c.version <= self.seen => Some(None),
            Ok(c) => {
                self.seen = c.version;
                Some(Some(FeedItem::Commit(c)))
            }
            Err(RecvError::Lagged(_)) => {
                // Drop what is left of the backlog; the current snapshot
                // holds all of it. Commits stored after this load are
                // newer and still delivered; older ones are skipped.
                while let Ok(_) | Err(TryRecvError::Lagged(_)) = self.rx.try_recv() {}
                let snapshot = self.current.load_full();
                self.seen = snapshot.version();
                Some(Some(FeedItem::Resync(snapshot)))
            }
            Err(RecvError::Closed) => None,
        }
    }
}
