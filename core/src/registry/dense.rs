//! A map kept as its entries end to end in a vector, with an index of
//! their positions by hash. A hash table of the entries themselves is
//! half empty after each doubling: the derivation table's two million sets
//! at a million instances had just doubled, 57 bytes a bucket, and each
//! service's thousand counted records took 2,048 buckets of 32 bytes. An
//! empty bucket of the index costs 5. A removal moves the last entry into
//! the gap.

use std::hash::{BuildHasher, Hash};

use hashbrown::HashTable;

pub(crate) struct DenseMap<K, V> {
    entries: Vec<(K, V)>,
    index: HashTable<u32>,
    /// Seeded per map (foldhash: SipHash over every name and record was a
    /// tenth of rebuilding the table for a million instances).
    hasher: foldhash::fast::RandomState,
}

impl<K, V> Default for DenseMap<K, V> {
    fn default() -> Self {
        DenseMap {
            entries: Vec::new(),
            index: HashTable::new(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }
}

impl<K: Hash + Eq, V> DenseMap<K, V> {
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every entry, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &(K, V)> {
        self.entries.iter()
    }

    fn position(&self, hash: u64, key: &K) -> Option<usize> {
        let entries = &self.entries;
        self.index
            .find(hash, |&at| entries[at as usize].0 == *key)
            .map(|&at| at as usize)
    }

    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        let at = self.position(self.hasher.hash_one(key), key)?;
        Some(&self.entries[at].1)
    }

    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        let at = self.position(self.hasher.hash_one(key), key)?;
        Some(&mut self.entries[at].1)
    }

    /// The value at `key`, inserted from `new` if there was none, and
    /// whether it was.
    pub(crate) fn get_or_insert_with(&mut self, key: K, new: impl FnOnce() -> V) -> (&mut V, bool) {
        let hash = self.hasher.hash_one(&key);
        if let Some(at) = self.position(hash, &key) {
            return (&mut self.entries[at].1, false);
        }
        let at = self.entries.len();
        self.entries.push((key, new()));
        let (entries, hasher) = (&self.entries, &self.hasher);
        let at32 = u32::try_from(at).expect("fewer than 2^32 entries");
        self.index
            .insert_unique(hash, at32, |&i| hasher.hash_one(&entries[i as usize].0));
        (&mut self.entries[at].1, true)
    }

    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        let hash = self.hasher.hash_one(key);
        let at = self.position(hash, key)?;
        if let Ok(entry) = self.index.find_entry(hash, |&i| i as usize == at) {
            entry.remove();
        }
        let last = self.entries.len() - 1;
        if at != last {
            let moved = self.hasher.hash_one(&self.entries[last].0);
            let slot = self
                .index
                .find_mut(moved, |&i| i as usize == last)
                .expect("every entry is indexed");
            *slot = at as u32;
        }
        Some(self.entries.swap_remove(at).1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inserts, lookups and removals (the last entry moving into each
    /// gap) agree with a `HashMap` given the same operations.
    #[test]
    fn agrees_with_a_hash_map() {
        let mut dense: DenseMap<u32, u32> = DenseMap::default();
        let mut map = std::collections::HashMap::new();
        let mut seed = 7u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (seed >> 33) % n
        };
        for step in 0..20_000u32 {
            let key = next(500) as u32;
            if next(3) == 0 {
                assert_eq!(dense.remove(&key), map.remove(&key), "remove {key}");
            } else {
                let (value, new) = dense.get_or_insert_with(key, || step);
                assert_eq!(new, !map.contains_key(&key), "insert {key}");
                *value += 1;
                *map.entry(key).or_insert(step) += 1;
            }
            assert_eq!(dense.len(), map.len());
        }
        for (key, value) in &map {
            assert_eq!(dense.get(key), Some(value));
        }
        assert!(dense.iter().all(|(k, v)| map.get(k) == Some(v)));
        assert_eq!(dense.get(&1_000), None);
    }
}
