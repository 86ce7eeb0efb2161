//! The answer table as a subscriber to the zone store's change feed when
//! no kernel table is kept (XDP off, or its subscriber gone): each burst
//! of commits is compiled on a blocking thread, with the same plan the
//! kernel table's subscriber follows, and applied in place.

use std::sync::Arc;

use tracing::{debug, error};

use super::compile::compile_diffs;
use super::plan::{fill, plan, Update};
use super::table::AnswerTable;
use crate::zone::{Snapshot, Subscription, ZoneStore};

/// Fills `table` from `store` and keeps it current until the store is
/// dropped.
pub fn start(table: Arc<AnswerTable>, store: &ZoneStore) -> tokio::task::JoinHandle<()> {
    let (snapshot, feed) = store.subscribe();
    tokio::spawn(follow(table, snapshot, feed))
}

/// Fills `table` from `first` and keeps it current with `feed`.
pub async fn follow(table: Arc<AnswerTable>, first: Arc<Snapshot>, mut feed: Subscription) {
    let t = table.clone();
    let first_fill = move || {
        fill(&t, &first);
        crate::memory::release_freed();
    };
    if tokio::task::spawn_blocking(first_fill).await.is_err() {
        error!("answer table: compile panicked; the full handler answers everything");
        return;
    }
    while let Some(item) = feed.next().await {
        let mut burst = vec![item];
        while let Some(more) = feed.try_next() {
            burst.push(more);
        }
        let snapshot = burst.last().expect("one item").snapshot().clone();
        let update = plan(&burst);
        drop(burst);
        let t = table.clone();
        let done = tokio::task::spawn_blocking(move || {
            match update {
                Update::Rebuild => {
                    fill(&t, &snapshot);
                    crate::memory::release_freed();
                }
                Update::Delta(diffs) => {
                    let delta = compile_diffs(&snapshot, &diffs, &*t);
                    t.unsettle();
                    t.apply(&delta);
                    t.settle(snapshot.version());
                }
            }
            debug!(
                version = snapshot.version(),
                entries = t.len(),
                "answer table updated"
            );
        })
        .await;
        if done.is_err() {
            // Left unsettled: the full handler answers everything.
            error!("answer table: compile panicked; the full handler answers everything");
            return;
        }
    }
}
