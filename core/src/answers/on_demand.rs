//! Hot answers compiled on demand: where no kernel table is kept and the
//! zones are large, the userspace table would be the largest part of the
//! server's memory (about 130 bytes a name, beside the zone itself), so a
//! name's entries are compiled from the snapshot when a query first asks
//! for them and kept in a bounded cache of the answering thread.
//!
//! A cache holds entries of one snapshot version of one table: a query on
//! a newer snapshot starts it afresh, so a cached entry is always what the
//! whole table would hold for the snapshot being answered. The cache is
//! per thread (no locks on the query path) and emptied once it holds
//! [`CACHE_BYTES`].

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use hashbrown::HashTable;

use super::compile::compile_one;
use super::packed::{KeyHasher, Packed, Stored};
use crate::zone::Snapshot;

/// Bytes of entries a thread's cache keeps before it starts afresh: about
/// a hundred thousand entries.
pub const CACHE_BYTES: usize = 8 << 20;

/// Served records above which [`Compiling::Auto`] compiles on demand, and
/// below which (half of it) it compiles the whole table again.
pub const ON_DEMAND_ABOVE_RECORDS: usize = 500_000;

/// How the hot path's entries are made where no kernel table is kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compiling {
    /// Whole up to [`ON_DEMAND_ABOVE_RECORDS`] served records, on demand
    /// above.
    #[default]
    Auto,
    /// Every name's entries, compiled ahead and followed through changes.
    Whole,
    /// A name's entries when a query first asks for them.
    OnDemand,
}

impl Compiling {
    /// Whether entries are compiled on demand for `snapshot`, given
    /// whether they are now (a zone near the threshold does not switch at
    /// every change).
    pub fn on_demand(self, snapshot: &Snapshot, now: bool) -> bool {
        let served = || snapshot.zones().map(|z| z.record_count()).sum();
        self.on_demand_at(served, now)
    }

    fn on_demand_at(self, served: impl FnOnce() -> usize, now: bool) -> bool {
        match self {
            Compiling::Whole => false,
            Compiling::OnDemand => true,
            Compiling::Auto => match now {
                true => served() > ON_DEMAND_ABOVE_RECORDS / 2,
                false => served() > ON_DEMAND_ABOVE_RECORDS,
            },
        }
    }
}

/// A distinct id for each table, so that a thread's cache is never read
/// for another table's snapshots.
pub(super) fn next_table_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

struct Cache {
    /// Bytes kept before starting afresh.
    limit: usize,
    /// The table and snapshot version the entries are of (0: none).
    table: u64,
    version: u64,
    hasher: KeyHasher,
    entries: Packed,
    /// Hashes of the names compiled, with their offsets in `names`.
    compiled: HashTable<(u64, u32)>,
    names: Vec<u8>,
}

impl Default for Cache {
    fn default() -> Self {
        Cache {
            limit: CACHE_BYTES,
            table: 0,
            version: 0,
            hasher: KeyHasher::default(),
            entries: Packed::default(),
            compiled: HashTable::new(),
            names: Vec::new(),
        }
    }
}

impl Cache {
    fn start(&mut self, table: u64, version: u64) {
        *self = Cache {
            limit: self.limit,
            table,
            version,
            hasher: std::mem::take(&mut self.hasher),
            ..Cache::default()
        };
    }

    fn bytes(&self) -> usize {
        self.entries.arena_len() + self.names.len() + self.compiled.capacity() * 16
    }

    fn holds(&self, hash: u64, name: &[u8]) -> bool {
        self.compiled
            .find(hash, |&(h, at)| h == hash && self.name_at(at) == name)
            .is_some()
    }

    fn name_at(&self, at: u32) -> &[u8] {
        let at = at as usize;
        let len = self.names[at] as usize;
        &self.names[at + 1..at + 1 + len]
    }

    /// Compiles `name`'s entries into the cache; false when no zone has
    /// the name (nothing is kept: a flood of missing names fills nothing).
    fn compile(&mut self, snapshot: &Snapshot, name: &[u8], hash: u64) -> bool {
        let Some(entries) = compile_one(snapshot, name) else {
            return false;
        };
        if self.bytes() > self.limit {
            self.start(self.table, self.version);
        }
        for (key, entry) in &entries {
            let h = self.hasher.hash(&key.name, key.qtype);
            self.entries.upsert(h, key, entry, &self.hasher);
        }
        let at = self.names.len() as u32;
        self.names.push(name.len() as u8);
        self.names.extend_from_slice(name);
        self.compiled.insert_unique(hash, (hash, at), |&(h, _)| h);
        true
    }
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
}

/// Calls `f` with the entry of `name` (lower-cased wire form) and slot
/// `qtype` in `snapshot`, compiled now if this thread has not yet
/// compiled the name for this snapshot of table `table`.
pub(super) fn read<R>(
    table: u64,
    snapshot: &Snapshot,
    name: &[u8],
    qtype: u8,
    f: impl FnOnce(&Stored<'_>) -> R,
) -> Option<R> {
    CACHE.with(|cache| {
        // (A read from within `f` finds the cache borrowed: the full
        // handler answers.)
        let mut cache = cache.try_borrow_mut().ok()?;
        let version = snapshot.version();
        if cache.table != table || cache.version != version {
            cache.start(table, version);
        }
        let name_hash = cache.hasher.name_hash(name);
        if !cache.holds(name_hash, name) && !cache.compile(snapshot, name, name_hash) {
            return None;
        }
        let hash = cache.hasher.hash(name, qtype);
        let stored = cache.entries.get(hash, name, qtype)?;
        Some(f(&stored))
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use hickory_proto::rr::Name;

    use super::*;
    use crate::answers::compile::compile;
    use crate::zone::{load_zone_str, ZoneStore};

    fn store(records: usize) -> ZoneStore {
        let mut text = String::from(
            "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 h 7 3600 600 86400 60\n@ NS ns1\n\
             ns1 A 192.0.2.53\nwww A 192.0.2.1\nwww AAAA 2001:db8::1\nalias CNAME www\n\
             a.b.ent A 192.0.2.10\ntxt TXT hello\n*.wild A 192.0.2.9\nsub NS ns.sub\n\
             ns.sub A 192.0.2.54\n_http._tcp SRV 10 5 80 www\n@ MX 10 mail\nmail A 192.0.2.25\n",
        );
        for i in 0..records {
            text += &format!("h{i} A 10.0.{}.{}\n", i >> 8, i & 255);
        }
        let origin = Name::from_ascii("example.com.").unwrap();
        let zone = load_zone_str(&text, &origin, Path::new("t.zone")).unwrap();
        ZoneStore::with_zones(vec![zone])
    }

    #[test]
    fn a_name_compiled_alone_has_the_whole_tables_entries() {
        let snapshot = store(50).snapshot();
        let (whole, _) = compile(&snapshot);
        let table = next_table_id();
        let mut names: Vec<_> = whole.keys().map(|k| k.name.clone()).collect();
        names.sort();
        names.dedup();
        assert!(names.len() > 60, "{}", names.len());
        for name in &names {
            for qtype in 0..=u8::MAX {
                let key = crate::answers::compile::EntryKey {
                    name: name.clone(),
                    qtype,
                };
                let on_demand = read(table, &snapshot, name, qtype, |s| s.compiled());
                assert_eq!(on_demand.as_ref(), whole.get(&key), "{key:?}");
            }
        }
    }

    #[test]
    fn a_name_not_served_compiles_nothing_and_a_new_snapshot_starts_afresh() {
        let store = store(3);
        let before = store.snapshot();
        let table = next_table_id();
        let missing = b"\x07nowhere\x07example\x03com\x00";
        assert!(read(table, &before, missing, 2, |_| ()).is_none());
        let h0 = b"\x02h0\x07example\x03com\x00";
        let section = |s: &Stored<'_>| s.section.to_vec();
        let old = read(table, &before, h0, 2, section).expect("h0 has an A entry");
        CACHE.with(|c| assert_eq!(c.borrow().compiled.len(), 1, "only h0 is kept"));
        let text = "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 h 8 3600 600 86400 60\n@ NS ns1\n\
                    ns1 A 192.0.2.53\nh0 A 10.9.9.9\n";
        let origin = Name::from_ascii("example.com.").unwrap();
        let zone = load_zone_str(text, &origin, Path::new("t.zone")).unwrap();
        store.replace_zones(vec![zone], &[], 1_700_000_000);
        let after = store.snapshot();
        let new = read(table, &after, h0, 2, section).expect("h0 has an A entry");
        assert_ne!(old, new, "the new snapshot's address");
        assert!(new.ends_with(&[10, 9, 9, 9]), "{new:?}");
        // The old snapshot's readers (still answering) see its entries.
        assert_eq!(read(table, &before, h0, 2, section), Some(old));
    }

    #[test]
    fn a_full_cache_starts_afresh_and_still_answers() {
        let snapshot = store(4_000).snapshot();
        let table = next_table_id();
        let limit = 64 << 10;
        CACHE.with(|c| c.borrow_mut().limit = limit);
        let mut most = 0;
        for i in 0..4_000 {
            let label = format!("h{i}");
            let mut wire = vec![label.len() as u8];
            wire.extend_from_slice(label.as_bytes());
            wire.extend_from_slice(b"\x07example\x03com\x00");
            let got = read(table, &snapshot, &wire, 2, |s| s.section.len());
            assert!(got.is_some(), "h{i}");
            most = most.max(CACHE.with(|c| c.borrow().bytes()));
        }
        // (Checked before each compile: one name's entries over.)
        assert!(most <= limit + 1024, "{most}");
        CACHE.with(|c| assert!(c.borrow().compiled.len() < 4_000));
    }

    #[test]
    fn auto_compiles_on_demand_above_the_threshold_and_whole_well_below_it() {
        let small = store(10).snapshot();
        assert!(!Compiling::Auto.on_demand(&small, false));
        assert!(Compiling::OnDemand.on_demand(&small, false));
        let auto = |served: usize, now| Compiling::Auto.on_demand_at(|| served, now);
        let above = ON_DEMAND_ABOVE_RECORDS;
        assert!(!auto(above, false));
        assert!(auto(above + 1, false));
        // Once on demand, it stays there down to half the threshold.
        assert!(auto(above / 2 + 1, true));
        assert!(!auto(above / 2, true));
        assert!(!Compiling::Whole.on_demand_at(|| usize::MAX, true));
    }
}
