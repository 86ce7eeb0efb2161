//! The hot table as a subscriber to the zone store's change feed: each
//! burst of commits is compiled on a blocking thread (as the kernel
//! table's subscriber does, and with the same plan) and applied in place.

use std::sync::Arc;

use tracing::{debug, error};

use super::HotTable;
use crate::xdp::compile::{compile, compile_diffs};
use crate::xdp::subscriber::{plan, Update};
use crate::zone::{Snapshot, Subscription, ZoneStore};

/// Compiles `snapshot` into `table` as a whole.
pub fn fill(table: &HotTable, snapshot: &Snapshot) {
    let (compiled, _) = compile(snapshot);
    table.unsettle();
    table.replace(&compiled);
    table.settle(snapshot.version());
}

/// Fills `table` from `store` and keeps it current until the store is
/// dropped.
pub fn start(table: Arc<HotTable>, store: &ZoneStore) -> tokio::task::JoinHandle<()> {
    let (snapshot, feed) = store.subscribe();
    tokio::spawn(run(table, snapshot, feed))
}

async fn run(table: Arc<HotTable>, first: Arc<Snapshot>, mut feed: Subscription) {
    let t = table.clone();
    let first_fill = move || {
        fill(&t, &first);
        crate::memory::release_freed();
    };
    if tokio::task::spawn_blocking(first_fill).await.is_err() {
        error!("hot answer table: compile panicked; the full handler answers everything");
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
                "hot answer table updated"
            );
        })
        .await;
        if done.is_err() {
            // Left unsettled: the full handler answers everything.
            error!("hot answer table: compile panicked; the full handler answers everything");
            return;
        }
    }
}
