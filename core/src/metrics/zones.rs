//! The fallback's answers per zone, by the zone's small id (given by the
//! zone store, kept in the snapshot: `zone::ids`), in per-thread counters.
//! The kernel counts per id too; a scrape sums both and names the ids
//! from the snapshot.

use std::cell::OnceCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use xdpdns_common::ZONES_MAX;

struct Registry {
    threads: Mutex<Vec<Arc<[AtomicU64]>>>,
}

fn registry() -> &'static Registry {
    static R: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
    R.get_or_init(|| Registry {
        threads: Mutex::new(Vec::new()),
    })
}

thread_local! {
    static COUNTS: OnceCell<Arc<[AtomicU64]>> = const { OnceCell::new() };
}

/// One fallback answer from zone `id` (a relaxed add on this thread's
/// own counters).
pub fn count(id: u32) {
    if id == 0 || id >= ZONES_MAX {
        return;
    }
    COUNTS.with(|c| {
        let counts = c.get_or_init(|| {
            let fresh: Arc<[AtomicU64]> = (0..ZONES_MAX).map(|_| AtomicU64::new(0)).collect();
            let r = registry();
            r.threads
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(fresh.clone());
            fresh
        });
        counts[id as usize].fetch_add(1, Ordering::Relaxed);
    });
}

/// Fallback answers per id, summed over threads (index = id).
pub fn fallback_counts() -> Vec<u64> {
    let mut sums = vec![0u64; ZONES_MAX as usize];
    for t in registry()
        .threads
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
    {
        for (s, c) in sums.iter_mut().zip(t.iter()) {
            *s += c.load(Ordering::Relaxed);
        }
    }
    sums
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_sum_over_threads() {
        let a = 7;
        let before = fallback_counts()[a as usize];
        count(a);
        std::thread::spawn(move || {
            count(a);
            count(a);
        })
        .join()
        .unwrap();
        assert_eq!(fallback_counts()[a as usize] - before, 3);
        count(0); // no zone: not counted, no panic
        count(ZONES_MAX);
    }
}
