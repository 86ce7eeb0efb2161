//! Many ZooKeeper requests at once, but a bounded number in flight.

use std::future::Future;

use tokio::task::{JoinError, JoinSet};

/// Runs `task` on every item, at most `limit` at once, each a task on
/// the runtime; the results in the order they finish.
pub(super) async fn each<I, T, F, Fut>(
    items: Vec<I>,
    limit: usize,
    task: F,
) -> Result<Vec<T>, JoinError>
where
    F: Fn(I) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let mut out = Vec::with_capacity(items.len());
    let mut items = items.into_iter();
    let mut running = JoinSet::new();
    loop {
        while running.len() < limit {
            let Some(item) = items.next() else { break };
            running.spawn(task(item));
        }
        match running.join_next().await {
            Some(done) => out.push(done?),
            None => return Ok(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[tokio::test]
    async fn every_item_runs_and_never_more_than_the_limit_at_once() {
        let now = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let mut out = each((0..50).collect(), 4, |i: u32| {
            let (now, most) = (now.clone(), most.clone());
            async move {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(n, Ordering::SeqCst);
                tokio::task::yield_now().await;
                now.fetch_sub(1, Ordering::SeqCst);
                i * 2
            }
        })
        .await
        .unwrap();
        out.sort();
        assert_eq!(out, (0..50).map(|i| i * 2).collect::<Vec<_>>());
        assert!(most.load(Ordering::SeqCst) <= 4);
    }
}
