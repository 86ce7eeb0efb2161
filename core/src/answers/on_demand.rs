//! Hot answers compiled on demand: where no kernel table is kept and the
//! zones are large, the userspace table would be the largest part of the
//! server's memory (about 130 bytes a name, beside the zone itself), so a
//! name's entries are compiled from the snapshot when queries ask for
//! them and kept in a bounded cache of the answering thread.
//!
//! A cache holds entries of one snapshot version of one table: a query on
//! a newer snapshot starts it afresh, so a cached entry is always what the
//! whole table would hold for the snapshot being answered. The cache is
//! per thread (no locks on the query path) and emptied once it holds its
//! share of [`CACHE_BYTES`].
//!
//! Compiling a name costs more than the full handler's answer (about 2.3
//! against 1.2 µs for an A record), so a name is compiled at its second
//! query ([`admits`]): at its first the full handler answers, and only a
//! name asked again takes room in the cache. A name no zone has costs a
//! lookup, is admitted at once and is not kept (its NXDOMAIN comes from
//! its ancestors' cached entries).

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use hashbrown::HashTable;

use super::compile::{compile_one, served_node};
use super::packed::{KeyHasher, Packed, Stored};
use crate::zone::Snapshot;

/// Bytes the answering threads' caches keep in all before they start
/// afresh, shared out as two threads a core (a UDP worker, a runtime
/// thread): 8 MiB each on two cores, about a hundred thousand entries.
pub const CACHE_BYTES: usize = 32 << 20;

/// The least a thread's cache keeps, however many cores.
const THREAD_CACHE_MIN: usize = 1 << 20;

/// A read that could not compile what it asked for (the cache was in use
/// by an outer read, or the compile panicked): nothing may be concluded
/// from it.
#[derive(Debug)]
pub(super) struct Unread;

/// Bits of a thread's filter of names asked for once (128 KiB).
const SEEN_BITS: u64 = 1 << 20;

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
    /// A name's entries when queries ask for them.
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
    /// Names asked for once, a bit each by hash (allocated when first set).
    seen: Vec<u64>,
    /// The last name found in no zone: the hot path asks three or four
    /// times about a missing name before it answers NXDOMAIN, and a flood
    /// of random names must not fill the cache.
    missing: Vec<u8>,
}

impl Default for Cache {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Cache {
            limit: (CACHE_BYTES / (2 * cores)).max(THREAD_CACHE_MIN),
            table: 0,
            version: 0,
            hasher: KeyHasher::default(),
            entries: Packed::default(),
            compiled: HashTable::new(),
            names: Vec::new(),
            seen: Vec::new(),
            missing: Vec::new(),
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

    /// Starts afresh unless the entries are of `table` at `version`.
    fn at(&mut self, table: u64, version: u64) {
        if self.table != table || self.version != version {
            self.start(table, version);
        }
    }

    /// Whether `name` was asked for before; notes it if not.
    fn seen_before(&mut self, hash: u64) -> bool {
        if self.seen.is_empty() {
            self.seen = vec![0; (SEEN_BITS / 64) as usize];
        }
        // (Bits of the hash the cache's buckets do not start from.)
        let bit = (hash >> 32) % SEEN_BITS;
        let word = &mut self.seen[(bit / 64) as usize];
        let before = *word >> (bit % 64) & 1 == 1;
        *word |= 1 << (bit % 64);
        before
    }

    /// The cache's heap, allocated capacity included.
    fn bytes(&self) -> usize {
        self.entries.heap_bytes()
            + self.names.capacity()
            + self.compiled.capacity() * (16 + 1)
            + self.seen.capacity() * 8
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

    /// Compiles `name`'s entries into the cache, or notes it missing.
    fn compile(&mut self, snapshot: &Snapshot, name: &[u8], hash: u64) -> Result<(), Unread> {
        let compiled =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| compile_one(snapshot, name)));
        let entries = match compiled {
            Ok(Some(entries)) => entries,
            Ok(None) => {
                self.missing.clear();
                self.missing.extend_from_slice(name);
                return Ok(());
            }
            Err(_) => {
                tracing::error!(
                    name = ?name,
                    "answers on demand: compiling a name panicked; the full handler answers it"
                );
                return Err(Unread);
            }
        };
        if self.bytes() > self.limit {
            // (The names asked for once are kept: they were asked for
            // at this version.)
            let seen = std::mem::take(&mut self.seen);
            self.start(self.table, self.version);
            self.seen = seen;
        }
        // (A signed name's gap list is kept under names of its own,
        // which only the kernel reads.)
        for (key, entry) in entries.iter().filter(|(key, _)| &*key.name == name) {
            let h = self.hasher.hash(&key.name, key.qtype);
            self.entries.upsert(h, key, entry, &self.hasher);
        }
        let at = self.names.len() as u32;
        self.names.push(name.len() as u8);
        self.names.extend_from_slice(name);
        self.compiled.insert_unique(hash, (hash, at), |&(h, _)| h);
        Ok(())
    }
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
}

/// Calls `f` with the entry of `name` (lower-cased wire form) and slot
/// `qtype` in `snapshot`, compiled now if this thread has not yet
/// compiled the name for this snapshot of table `table`: `Ok(None)` when
/// there is no such entry.
pub(super) fn read<R>(
    table: u64,
    snapshot: &Snapshot,
    name: &[u8],
    qtype: u8,
    f: impl FnOnce(&Stored<'_>) -> R,
) -> Result<Option<R>, Unread> {
    CACHE.with(|cache| {
        // (A read from within `f` finds the cache borrowed.)
        let mut cache = cache.try_borrow_mut().map_err(|_| Unread)?;
        cache.at(table, snapshot.version());
        if cache.missing == name {
            return Ok(None);
        }
        let name_hash = cache.hasher.name_hash(name);
        if !cache.holds(name_hash, name) {
            cache.compile(snapshot, name, name_hash)?;
        }
        let hash = cache.hasher.hash(name, qtype);
        Ok(cache
            .entries
            .get(hash, name, qtype)
            .map(|stored| f(&stored)))
    })
}

/// Whether the hot path should answer a query for `name` (lower-cased
/// wire form) in `snapshot` from table `table`'s entries compiled on
/// demand: the name's are cached, it was asked for before, or no zone has
/// it. Otherwise the full handler answers, and the name is noted.
pub(super) fn admits(table: u64, snapshot: &Snapshot, name: &[u8]) -> bool {
    CACHE.with(|cache| {
        let Ok(mut cache) = cache.try_borrow_mut() else {
            return false;
        };
        cache.at(table, snapshot.version());
        let hash = cache.hasher.name_hash(name);
        if cache.holds(hash, name) || cache.missing == name {
            return true;
        }
        if served_node(snapshot, name).is_none() {
            // (Noted for the reads that follow: not compiled again.)
            cache.missing.clear();
            cache.missing.extend_from_slice(name);
            return true;
        }
        cache.seen_before(hash)
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

    /// [`read`], which compiles whatever it is asked for here.
    fn get<R>(
        table: u64,
        snapshot: &Snapshot,
        name: &[u8],
        qtype: u8,
        f: impl FnOnce(&Stored<'_>) -> R,
    ) -> Option<R> {
        read(table, snapshot, name, qtype, f).expect("compiled")
    }

    /// Replaces the zone by a newer one holding `name` at 10.9.9.9.
    fn move_on(store: &ZoneStore, name: &str) {
        let text = format!(
            "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 h 8 3600 600 86400 60\n@ NS ns1\n\
             ns1 A 192.0.2.53\n{name} A 10.9.9.9\n"
        );
        let origin = Name::from_ascii("example.com.").unwrap();
        let zone = load_zone_str(&text, &origin, Path::new("t.zone")).unwrap();
        store.replace_zones(vec![zone], &[], 1_700_000_000);
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
                let on_demand = get(table, &snapshot, name, qtype, |s| s.compiled());
                assert_eq!(on_demand.as_ref(), whole.get(&key), "{key:?}");
            }
        }
    }

    #[test]
    fn a_name_not_served_has_no_entry_and_a_new_snapshot_starts_afresh() {
        let store = store(3);
        let before = store.snapshot();
        let table = next_table_id();
        let missing = b"\x07nowhere\x07example\x03com\x00";
        assert!(get(table, &before, missing, 2, |_| ()).is_none());
        let h0 = b"\x02h0\x07example\x03com\x00";
        let section = |s: &Stored<'_>| s.section.to_vec();
        let old = get(table, &before, h0, 2, section).expect("h0 has an A entry");
        CACHE.with(|c| assert_eq!(c.borrow().compiled.len(), 1, "h0; no missing name"));
        move_on(&store, "h0");
        let after = store.snapshot();
        let new = get(table, &after, h0, 2, section).expect("h0 has an A entry");
        assert_ne!(old, new, "the new snapshot's address");
        assert!(new.ends_with(&[10, 9, 9, 9]), "{new:?}");
        // The old snapshot's readers (still answering) see its entries.
        assert_eq!(get(table, &before, h0, 2, section), Some(old));
    }

    #[test]
    fn a_served_name_is_admitted_at_its_second_query_a_missing_one_at_its_first() {
        let store = store(3);
        let snapshot = store.snapshot();
        let table = next_table_id();
        let h1 = b"\x02h1\x07example\x03com\x00";
        let missing = b"\x07nowhere\x07example\x03com\x00";
        assert!(!admits(table, &snapshot, h1), "first query");
        assert!(admits(table, &snapshot, h1), "second query");
        assert!(admits(table, &snapshot, missing), "not served");
        get(table, &snapshot, h1, 2, |_| ()).expect("h1 has an A entry");
        assert!(admits(table, &snapshot, h1), "cached");
        // A new snapshot forgets both.
        move_on(&store, "h1");
        let next = store.snapshot();
        assert_ne!(next.version(), snapshot.version());
        assert!(!admits(table, &next, h1), "first query at the new snapshot");
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
            let got = get(table, &snapshot, &wire, 2, |s| s.section.len());
            assert!(got.is_some(), "h{i}");
            most = most.max(CACHE.with(|c| c.borrow().bytes()));
        }
        // (Checked before each compile, counting what the vectors hold
        // allocated: one growing may double it.)
        assert!(most <= 2 * limit + 4096, "{most}");
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
