//! The compiled table: every entry by its key, in shards, so that a
//! million-name compile gathers its entries on every core instead of
//! inserting them one by one into a single map (which was over a second
//! of a 1M-name compile, on one core).
//!
//! One hash per key: bits 32.. pick the shard, and the shard's table takes
//! its bucket from the low bits and its tag from the top seven, as
//! [`super::packed`] does. The hasher is one per process, so a key hashed
//! for one table is hashed the same for every other.

use std::hash::BuildHasher;
use std::sync::LazyLock;

use hashbrown::HashTable;

use super::entry::{Compiled, EntryKey};

const SHARDS: usize = 64;

/// Seeded once per process (randomly: keys come from registrations too).
static HASHER: LazyLock<foldhash::fast::RandomState> = LazyLock::new(Default::default);

fn hash_of(key: &EntryKey) -> u64 {
    HASHER.hash_one(key)
}

fn shard_of(hash: u64) -> usize {
    (hash >> 32) as usize % SHARDS
}

type Entry = (EntryKey, Compiled);

/// Every entry the kernel may answer, by key.
#[derive(Clone)]
pub struct Table {
    shards: Box<[HashTable<Entry>]>,
}

impl Default for Table {
    fn default() -> Self {
        Table {
            shards: (0..SHARDS).map(|_| HashTable::new()).collect(),
        }
    }
}

impl Table {
    pub fn len(&self) -> usize {
        self.shards.iter().map(HashTable::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.shards.iter().all(HashTable::is_empty)
    }

    pub fn get(&self, key: &EntryKey) -> Option<&Compiled> {
        let hash = hash_of(key);
        self.shards[shard_of(hash)]
            .find(hash, |(k, _)| k == key)
            .map(|(_, v)| v)
    }

    pub fn contains_key(&self, key: &EntryKey) -> bool {
        self.get(key).is_some()
    }

    /// Puts `value` under `key`, and returns what was there.
    pub fn insert(&mut self, key: EntryKey, value: Compiled) -> Option<Compiled> {
        insert_hashed(&mut self.shards, hash_of(&key), key, value)
    }

    pub fn remove(&mut self, key: &EntryKey) -> Option<Compiled> {
        let hash = hash_of(key);
        match self.shards[shard_of(hash)].find_entry(hash, |(k, _)| k == key) {
            Ok(entry) => Some(entry.remove().0 .1),
            Err(_) => None,
        }
    }

    pub fn iter(&self) -> Iter<'_> {
        self.shards.iter().flatten().map(|(k, v)| (k, v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &EntryKey> + '_ {
        self.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = &Compiled> + '_ {
        self.iter().map(|(_, v)| v)
    }

    /// The table of the entries `parts` sorted into shards, in their
    /// order (a later entry under a key replaces an earlier one), each
    /// shard built on one of `threads` threads.
    pub(super) fn gather(parts: Vec<ByShard>, threads: usize) -> Table {
        // Shard s's entries from every part, in the parts' order.
        let mut columns: Vec<Vec<Vec<Hashed>>> = (0..SHARDS).map(|_| Vec::new()).collect();
        for part in parts {
            for (column, entries) in columns.iter_mut().zip(part.shards) {
                column.push(entries);
            }
        }
        let per_thread = SHARDS.div_ceil(threads.clamp(1, SHARDS));
        let mut built: Vec<HashTable<Entry>> = Vec::with_capacity(SHARDS);
        std::thread::scope(|scope| {
            let mut columns = columns.into_iter();
            let workers: Vec<_> = (0..SHARDS.div_ceil(per_thread))
                .map(|_| {
                    let mine: Vec<_> = columns.by_ref().take(per_thread).collect();
                    scope.spawn(move || mine.into_iter().map(build_shard).collect::<Vec<_>>())
                })
                .collect();
            for w in workers {
                built.extend(w.join().expect("table gather thread"));
            }
        });
        Table {
            shards: built.into_boxed_slice(),
        }
    }
}

fn build_shard(column: Vec<Vec<Hashed>>) -> HashTable<Entry> {
    let mut shard = HashTable::with_capacity(column.iter().map(Vec::len).sum());
    for entries in column {
        for (hash, key, value) in entries {
            insert_into(&mut shard, hash, key, value);
        }
    }
    shard
}

fn insert_hashed(
    shards: &mut [HashTable<Entry>],
    hash: u64,
    key: EntryKey,
    value: Compiled,
) -> Option<Compiled> {
    insert_into(&mut shards[shard_of(hash)], hash, key, value)
}

fn insert_into(
    shard: &mut HashTable<Entry>,
    hash: u64,
    key: EntryKey,
    value: Compiled,
) -> Option<Compiled> {
    match shard.entry(hash, |(k, _)| *k == key, |(k, _)| hash_of(k)) {
        hashbrown::hash_table::Entry::Occupied(mut e) => {
            Some(std::mem::replace(&mut e.get_mut().1, value))
        }
        hashbrown::hash_table::Entry::Vacant(e) => {
            e.insert((key, value));
            None
        }
    }
}

/// An entry with its hash, as a compile thread sorts it.
type Hashed = (u64, EntryKey, Compiled);

/// One compile thread's entries, sorted into the table's shards (their
/// keys hashed on that thread).
pub(super) struct ByShard {
    shards: Vec<Vec<Hashed>>,
}

impl ByShard {
    /// Room for about `entries` in all.
    pub(super) fn with_capacity(entries: usize) -> ByShard {
        let each = entries / SHARDS + entries / SHARDS / 8;
        ByShard {
            shards: (0..SHARDS).map(|_| Vec::with_capacity(each)).collect(),
        }
    }
}

impl Extend<Entry> for ByShard {
    fn extend<I: IntoIterator<Item = Entry>>(&mut self, entries: I) {
        for (key, value) in entries {
            let hash = hash_of(&key);
            self.shards[shard_of(hash)].push((hash, key, value));
        }
    }
}

impl Extend<Entry> for Table {
    fn extend<I: IntoIterator<Item = Entry>>(&mut self, entries: I) {
        for (key, value) in entries {
            self.insert(key, value);
        }
    }
}

impl FromIterator<Entry> for Table {
    fn from_iter<I: IntoIterator<Item = Entry>>(entries: I) -> Self {
        let mut table = Table::default();
        table.extend(entries);
        table
    }
}

impl IntoIterator for Table {
    type Item = Entry;
    type IntoIter = std::iter::Flatten<std::vec::IntoIter<HashTable<Entry>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.shards.into_vec().into_iter().flatten()
    }
}

impl std::ops::Index<&EntryKey> for Table {
    type Output = Compiled;

    /// The entry under `key`; panics if there is none, as a map does.
    fn index(&self, key: &EntryKey) -> &Compiled {
        self.get(key).expect("no entry under the key")
    }
}

/// The entries of a table, by reference.
pub type Iter<'a> = std::iter::Map<
    std::iter::Flatten<std::slice::Iter<'a, HashTable<Entry>>>,
    fn(&'a Entry) -> (&'a EntryKey, &'a Compiled),
>;

impl<'a> IntoIterator for &'a Table {
    type Item = (&'a EntryKey, &'a Compiled);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl PartialEq for Table {
    fn eq(&self, other: &Table) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl Eq for Table {}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use xdpdns_common::Answer;

    use super::*;

    fn key(i: u32, qtype: u8) -> EntryKey {
        EntryKey {
            name: Arc::from(format!("\x04n{i:03}\0").as_bytes()),
            qtype,
        }
    }

    fn value(n: u8) -> Compiled {
        let mut head = Answer::new(4, 1, 0);
        head.data[0] = n;
        Compiled { head, block: None }
    }

    #[test]
    fn behaves_as_a_map() {
        let mut t = Table::default();
        assert!(t.is_empty());
        for i in 0..500 {
            assert_eq!(t.insert(key(i, 1), value(1)), None);
        }
        assert_eq!(t.insert(key(7, 1), value(2)), Some(value(1)));
        assert_eq!(t.len(), 500);
        assert_eq!(t.get(&key(7, 1)), Some(&value(2)));
        assert_eq!(t.get(&key(7, 28)), None);
        assert_eq!(t.remove(&key(8, 1)), Some(value(1)));
        assert_eq!(t.remove(&key(8, 1)), None);
        assert!(!t.contains_key(&key(8, 1)));
        assert_eq!(t.len(), 499);
        assert_eq!(t.keys().count(), 499);
        let copy: Table = t.clone().into_iter().collect();
        assert_eq!(copy, t);
        t.insert(key(8, 1), value(3));
        assert_ne!(copy, t);
    }

    /// Part `p` of three: 200 keys, overlapping the previous part's last 50.
    fn part(p: u8, room: usize) -> ByShard {
        let mut part = ByShard::with_capacity(room);
        part.extend((0..200).map(|i| (key(i + u32::from(p) * 150, 1), value(p))));
        part
    }

    #[test]
    fn a_gathered_table_holds_every_part_in_order() {
        let mut model = Table::default();
        for p in 0..3u8 {
            model.extend((0..200).map(|i| (key(i + u32::from(p) * 150, 1), value(p))));
        }
        for (threads, room) in [(1, 0), (2, 100), (5, 1000), (64, 0), (100, 10)] {
            let t = Table::gather((0..3).map(|p| part(p, room)).collect(), threads);
            assert_eq!(t, model, "{threads} threads");
            assert_eq!(t.len(), 200 + 150 * 2);
            assert_eq!(
                t.get(&key(160, 1)),
                Some(&value(1)),
                "overlap: the later part's"
            );
        }
    }
}
