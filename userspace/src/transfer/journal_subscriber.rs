//! The IXFR journal as a subscriber to the zone store's change feed: a
//! thread of its own records every commit in order (appends and
//! `fdatasync`s happen here, never under the store's writer lock) and
//! says how far it got, so NOTIFY goes out only for serials the journal
//! already holds, and an UPDATE is acknowledged only once it is durable.
//! Commits that queue while one is written share its `fdatasync`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::journal::IxfrJournal;
use crate::clock::unix_secs;
use crate::zone::{FeedItem, Subscription};

/// The store version the journal has recorded up to, and the batches of
/// versions it could not write.
#[derive(Clone)]
pub struct Journaled {
    version: watch::Receiver<u64>,
    failed: Arc<Mutex<VecDeque<(u64, u64)>>>,
}

/// Failed batches remembered (a failing disk fails every batch; the
/// oldest are forgotten, and their waiters long answered).
const FAILED_KEPT: usize = 256;

impl Journaled {
    /// Resolves once every commit up to `version` is journaled; `false`
    /// if the journal stopped first.
    pub async fn reached(&mut self, version: u64) -> bool {
        self.version.wait_for(|v| *v >= version).await.is_ok()
    }

    /// [`reached`](Self::reached), and `version` is on disk: `false`
    /// when the journal stopped or could not write or sync the batch that
    /// held it (an UPDATE is then answered SERVFAIL, not NOERROR).
    pub async fn durable(&mut self, version: u64) -> bool {
        if !self.reached(version).await {
            return false;
        }
        let failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        !failed
            .iter()
            .any(|&(from, to)| (from..=to).contains(&version))
    }

    pub fn version(&self) -> u64 {
        *self.version.borrow()
    }
}

/// Records one feed item; `false` when it could not be written.
pub fn record(journal: &IxfrJournal, item: &FeedItem) -> bool {
    match item {
        FeedItem::Commit(c) => journal.record(&c.snapshot, c.diffs(), unix_secs()),
        FeedItem::Resync(s) => {
            journal.resync(s);
            true
        }
    }
}

/// Starts the journal's thread on `feed` (which starts at `version`).
pub fn start(journal: Arc<IxfrJournal>, mut feed: Subscription, version: u64) -> Journaled {
    let (tx, rx) = watch::channel(version);
    let failed = Arc::new(Mutex::new(VecDeque::new()));
    let failures = failed.clone();
    std::thread::Builder::new()
        .name("ixfr-journal".into())
        .spawn(move || {
            while let Some(item) = feed.blocking_next() {
                // Every commit already queued joins this one: their
                // appends share one fdatasync (group commit).
                let first = item.version();
                let mut version = first;
                let mut written = record(&journal, &item);
                while let Some(next) = feed.try_next() {
                    version = next.version();
                    written &= record(&journal, &next);
                }
                written &= journal.sync();
                if !written {
                    let mut f = failures.lock().unwrap_or_else(|p| p.into_inner());
                    if f.len() == FAILED_KEPT {
                        f.pop_front();
                    }
                    f.push_back((first, version));
                }
                tx.send_replace(version);
            }
            // The feed ended (a stop): a file still being rewritten is
            // put in its place rather than left beside the old one.
            journal.settle();
        })
        .expect("spawn the journal thread");
    Journaled {
        version: rx,
        failed,
    }
}
