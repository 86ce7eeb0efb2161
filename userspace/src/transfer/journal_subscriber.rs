//! The IXFR journal as a subscriber to the zone store's change feed: a
//! thread of its own records every commit in order (appends and
//! `fdatasync`s happen here, never under the store's writer lock) and
//! says how far it got, so NOTIFY goes out only for serials the journal
//! already holds, and an UPDATE is acknowledged only once it is durable.
//! Commits that queue while one is written share its `fdatasync`.

use std::sync::Arc;

use tokio::sync::watch;

use super::journal::IxfrJournal;
use crate::clock::unix_secs;
use crate::zone::{FeedItem, Subscription};

/// The store version the journal has recorded up to.
#[derive(Clone)]
pub struct Journaled(watch::Receiver<u64>);

impl Journaled {
    /// Resolves once every commit up to `version` is journaled; `false`
    /// if the journal stopped first.
    pub async fn reached(&mut self, version: u64) -> bool {
        self.0.wait_for(|v| *v >= version).await.is_ok()
    }

    pub fn version(&self) -> u64 {
        *self.0.borrow()
    }
}

/// Records one feed item.
pub fn record(journal: &IxfrJournal, item: &FeedItem) {
    match item {
        FeedItem::Commit(c) => journal.record(&c.snapshot, c.diffs(), unix_secs()),
        FeedItem::Resync(s) => journal.resync(s),
    }
}

/// Starts the journal's thread on `feed` (which starts at `version`).
pub fn start(journal: Arc<IxfrJournal>, mut feed: Subscription, version: u64) -> Journaled {
    let (tx, rx) = watch::channel(version);
    std::thread::Builder::new()
        .name("ixfr-journal".into())
        .spawn(move || {
            while let Some(item) = feed.blocking_next() {
                // Every commit already queued joins this one: their
                // appends share one fdatasync (group commit).
                let mut version = item.version();
                record(&journal, &item);
                while let Some(next) = feed.try_next() {
                    version = next.version();
                    record(&journal, &next);
                }
                journal.sync();
                tx.send_replace(version);
            }
        })
        .expect("spawn the journal thread");
    Journaled(rx)
}
