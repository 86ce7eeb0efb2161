//! Answers per zone. Each served zone gets a small id the first time it
//! is seen (stable for the process; ids past [`ZONES_MAX`] share 0, not
//! counted): the XDP compiler writes it into every kernel entry, the
//! kernel counts per id, and the fallback counts per id into per-thread
//! counters here. A scrape sums both and names the ids.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use hickory_proto::rr::LowerName;
use xdpdns_common::ZONES_MAX;

/// foldhash: looked up on every full answer.
#[derive(Default)]
struct Ids {
    by_name: HashMap<LowerName, u32, foldhash::fast::RandomState>,
    names: Vec<LowerName>,
}

struct Registry {
    ids: ArcSwap<Ids>,
    assign: Mutex<()>,
    threads: Mutex<Vec<Arc<[AtomicU64]>>>,
}

fn registry() -> &'static Registry {
    static R: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
    R.get_or_init(|| Registry {
        ids: ArcSwap::from_pointee(Ids::default()),
        assign: Mutex::new(()),
        threads: Mutex::new(Vec::new()),
    })
}

/// Assigns ids to `zones` in name order (those without one yet): the
/// zones served at start-up get the same ids at every start, as the
/// entries of a kernel table kept across a restart say.
pub fn assign_in_order<'a>(zones: impl IntoIterator<Item = &'a LowerName>) {
    let mut zones: Vec<&LowerName> = zones.into_iter().collect();
    zones.sort();
    for z in zones {
        id(z);
    }
}

/// The id of `zone` (1..ZONES_MAX), assigned at first sight; 0 once the
/// ids are used up.
pub fn id(zone: &LowerName) -> u32 {
    let r = registry();
    if let Some(&id) = r.ids.load().by_name.get(zone) {
        return id;
    }
    let _one = r.assign.lock().unwrap_or_else(|p| p.into_inner());
    let ids = r.ids.load();
    if let Some(&id) = ids.by_name.get(zone) {
        return id;
    }
    let id = ids.names.len() as u32 + 1;
    if id >= ZONES_MAX {
        return 0;
    }
    let mut next = Ids {
        by_name: ids.by_name.clone(),
        names: ids.names.clone(),
    };
    next.by_name.insert(zone.clone(), id);
    next.names.push(zone.clone());
    r.ids.store(Arc::new(next));
    id
}

/// The zone named by every id in use, in id order (id = index + 1).
pub fn names() -> Vec<LowerName> {
    registry().ids.load().names.clone()
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
    use hickory_proto::rr::Name;

    fn zone(n: &str) -> LowerName {
        LowerName::new(&Name::from_ascii(n).unwrap())
    }

    #[test]
    fn ids_are_stable_and_counts_sum_over_threads() {
        let a = id(&zone("ids-a.test."));
        let b = id(&zone("ids-b.test."));
        assert!(a > 0 && b > 0 && a != b);
        assert_eq!(
            id(&zone("IDS-A.test.")),
            a,
            "case does not make another zone"
        );
        assert_eq!(names()[a as usize - 1], zone("ids-a.test."));
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
