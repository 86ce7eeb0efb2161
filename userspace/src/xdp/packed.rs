//! Compiled entries kept in userspace, packed: entries end to end in one
//! byte arena (name length, query-type slot, name, the kernel entry's
//! 12-byte head, the section) with an index of arena offsets by hash.
//! About 60 bytes for a service name's A entry where a map of
//! `EntryKey → Compiled` took 150–200. A replaced or deleted entry leaves
//! garbage in the arena until it is compacted (once more than half).
//!
//! [`Packed`] is the storage (hashes come from the caller, so a sharded
//! table hashes once); [`PackedTable`] is one unsharded table by
//! [`EntryKey`], what the loader keeps of the kernel's contents.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use hashbrown::HashTable;
use xdpdns_common::{Answer, INLINE_MAX};

use super::compile::{Compiled, EntryKey, Installed, Table, TableDelta};

/// Bytes of an entry before its name: name length, query-type slot.
const LEAD: usize = 2;
/// The kernel entry's head ([`Answer::head`]).
pub const HEAD: usize = 12;

/// The hasher of a packed table (a random seed: names come from clients).
pub struct KeyHasher(foldhash::fast::FixedState);

impl Default for KeyHasher {
    fn default() -> Self {
        let seed = std::collections::hash_map::RandomState::new().hash_one(0u8);
        KeyHasher(foldhash::fast::FixedState::with_seed(seed))
    }
}

impl KeyHasher {
    pub fn hash(&self, name: &[u8], qtype: u8) -> u64 {
        let mut h = self.0.build_hasher();
        h.write(name);
        h.write_u8(qtype);
        h.finish()
    }

    fn hash_at(&self, arena: &[u8], at: u32) -> u64 {
        let a = &arena[at as usize..];
        let len = a[0] as usize;
        self.hash(&a[LEAD..LEAD + len], a[1])
    }
}

#[derive(Default)]
pub struct Packed {
    index: HashTable<u32>,
    arena: Vec<u8>,
    /// Bytes of the arena no index entry points at.
    garbage: usize,
}

/// One entry as stored: name, query-type slot, head, section.
pub struct Stored<'a> {
    pub name: &'a [u8],
    pub qtype: u8,
    pub head: [u8; HEAD],
    pub section: &'a [u8],
}

impl Stored<'_> {
    fn len(&self) -> usize {
        LEAD + self.name.len() + HEAD + self.section.len()
    }

    /// The [`Compiled`] entry this was made from.
    pub fn compiled(&self) -> Compiled {
        Compiled {
            head: Answer::from_head(self.head, self.section),
            block: (self.section.len() > INLINE_MAX).then(|| Arc::from(self.section)),
        }
    }
}

impl Packed {
    /// Packs `entries` (with their hashes) at their exact size.
    pub fn build<'a>(entries: &[(u64, &'a EntryKey, &'a Compiled)], hasher: &KeyHasher) -> Packed {
        let bytes = entries
            .iter()
            .map(|(_, k, c)| LEAD + k.name.len() + HEAD + c.section().len())
            .sum();
        let mut p = Packed {
            index: HashTable::with_capacity(entries.len()),
            arena: Vec::with_capacity(bytes),
            garbage: 0,
        };
        for &(hash, key, entry) in entries {
            let at = p.push(&key.name, key.qtype, entry);
            let arena = &p.arena;
            p.index
                .insert_unique(hash, at, |&x| hasher.hash_at(arena, x));
        }
        p
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    fn at(&self, at: u32) -> Stored<'_> {
        let a = &self.arena[at as usize..];
        let len = a[0] as usize;
        let head: [u8; HEAD] = a[LEAD + len..LEAD + len + HEAD]
            .try_into()
            .expect("12 bytes");
        let section_len = (u16::from_le_bytes([head[0], head[1]]) & 0x0fff) as usize;
        let start = LEAD + len + HEAD;
        Stored {
            name: &a[LEAD..LEAD + len],
            qtype: a[1],
            head,
            section: &a[start..start + section_len],
        }
    }

    fn offset(&self, hash: u64, name: &[u8], qtype: u8) -> Option<u32> {
        let arena = &self.arena[..];
        self.index
            .find(hash, |&at| {
                let a = &arena[at as usize..];
                a[0] as usize == name.len() && a[1] == qtype && &a[LEAD..LEAD + name.len()] == name
            })
            .copied()
    }

    /// The entry for `name` and `qtype` (whose hash is `hash`).
    pub fn get(&self, hash: u64, name: &[u8], qtype: u8) -> Option<Stored<'_>> {
        Some(self.at(self.offset(hash, name, qtype)?))
    }

    fn push(&mut self, name: &[u8], qtype: u8, c: &Compiled) -> u32 {
        let at = u32::try_from(self.arena.len()).expect("an arena below 4 GiB");
        self.arena.push(name.len() as u8);
        self.arena.push(qtype);
        self.arena.extend_from_slice(name);
        self.arena.extend_from_slice(&c.head.head());
        self.arena.extend_from_slice(c.section());
        at
    }

    pub fn upsert(&mut self, hash: u64, key: &EntryKey, c: &Compiled, hasher: &KeyHasher) {
        let at = self.push(&key.name, key.qtype, c);
        match self.offset(hash, &key.name, key.qtype) {
            Some(old) => {
                self.garbage += self.at(old).len();
                *self
                    .index
                    .find_mut(hash, |&x| x == old)
                    .expect("just found") = at;
            }
            None => {
                let arena = &self.arena;
                self.index
                    .insert_unique(hash, at, |&x| hasher.hash_at(arena, x));
            }
        }
    }

    /// Removes the entry; whether there was one.
    pub fn remove(&mut self, hash: u64, key: &EntryKey) -> bool {
        let Some(old) = self.offset(hash, &key.name, key.qtype) else {
            return false;
        };
        self.garbage += self.at(old).len();
        if let Ok(e) = self.index.find_entry(hash, |&x| x == old) {
            e.remove();
        }
        true
    }

    /// Every entry, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = Stored<'_>> {
        self.index.iter().map(|&at| self.at(at))
    }

    /// Copies the live entries into a new arena once most of it is garbage.
    pub fn compact_if_wasteful(&mut self, hasher: &KeyHasher) {
        if self.garbage < 4096 || self.garbage * 2 < self.arena.len() {
            return;
        }
        let mut arena = Vec::with_capacity(self.arena.len() - self.garbage);
        let mut index = HashTable::with_capacity(self.index.len());
        for &at in self.index.iter() {
            let len = self.at(at).len();
            let new_at = arena.len() as u32;
            arena.extend_from_slice(&self.arena[at as usize..at as usize + len]);
            let hash = hasher.hash_at(&arena, new_at);
            index.insert_unique(hash, new_at, |&x| hasher.hash_at(&arena, x));
        }
        self.arena = arena;
        self.index = index;
        self.garbage = 0;
    }

    /// Arena bytes, live and garbage (tests).
    #[cfg(test)]
    pub fn arena_len(&self) -> usize {
        self.arena.len()
    }
}

/// One packed table by [`EntryKey`].
#[derive(Default)]
pub struct PackedTable {
    hasher: KeyHasher,
    packed: Packed,
}

impl PackedTable {
    pub fn from_table(table: &Table) -> Self {
        let hasher = KeyHasher::default();
        let entries: Vec<_> = table
            .iter()
            .map(|(k, c)| (hasher.hash(&k.name, k.qtype), k, c))
            .collect();
        let packed = Packed::build(&entries, &hasher);
        PackedTable { hasher, packed }
    }

    pub fn len(&self) -> usize {
        self.packed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.packed.is_empty()
    }

    pub fn get(&self, key: &EntryKey) -> Option<Compiled> {
        let hash = self.hasher.hash(&key.name, key.qtype);
        Some(self.packed.get(hash, &key.name, key.qtype)?.compiled())
    }

    /// The section of `key`'s entry when it is held outside the entry (a
    /// block), without rebuilding the entry.
    pub fn block_of(&self, key: &EntryKey) -> Option<Arc<[u8]>> {
        let hash = self.hasher.hash(&key.name, key.qtype);
        let e = self.packed.get(hash, &key.name, key.qtype)?;
        (e.section.len() > INLINE_MAX).then(|| Arc::from(e.section))
    }

    /// Whether `key`'s entry holds its section in a block.
    pub fn has_block(&self, key: &EntryKey) -> bool {
        let hash = self.hasher.hash(&key.name, key.qtype);
        self.packed
            .get(hash, &key.name, key.qtype)
            .is_some_and(|e| e.section.len() > INLINE_MAX)
    }

    pub fn remove(&mut self, key: &EntryKey) {
        let hash = self.hasher.hash(&key.name, key.qtype);
        self.packed.remove(hash, key);
    }

    /// Applies `delta` as [`TableDelta::apply_to`] does.
    pub fn apply(&mut self, delta: &TableDelta) {
        for (k, c) in &delta.upsert {
            let hash = self.hasher.hash(&k.name, k.qtype);
            self.packed.upsert(hash, k, c, &self.hasher);
        }
        for k in &delta.delete {
            self.remove(k);
        }
        self.packed.compact_if_wasteful(&self.hasher);
    }

    /// The change that turns this table into `new`.
    pub fn diff(&self, new: &Table) -> TableDelta {
        TableDelta {
            upsert: new
                .iter()
                .filter(|(k, c)| self.get(k).as_ref() != Some(*c))
                .map(|(k, c)| (k.clone(), c.clone()))
                .collect(),
            delete: self
                .packed
                .entries()
                .filter_map(|e| {
                    let key = EntryKey {
                        name: e.name.into(),
                        qtype: e.qtype,
                    };
                    (!new.contains_key(&key)).then_some(key)
                })
                .collect(),
        }
    }

    /// The table unpacked.
    pub fn to_table(&self) -> Table {
        self.packed
            .entries()
            .map(|e| {
                let key = EntryKey {
                    name: e.name.into(),
                    qtype: e.qtype,
                };
                (key, e.compiled())
            })
            .collect()
    }
}

impl Installed for PackedTable {
    fn entry(&self, key: &EntryKey) -> Option<Compiled> {
        self.get(key)
    }

    fn each_key(&self, f: &mut dyn FnMut(&EntryKey)) {
        for e in self.packed.entries() {
            f(&EntryKey {
                name: e.name.into(),
                qtype: e.qtype,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdp::compile::{diff_tables, encode_answer};
    use hickory_proto::rr::rdata::A;
    use hickory_proto::rr::{RData, RecordType};

    /// An entry of `n` A records (a block from three on) of zone `zone`.
    fn entry_of(n: u8, zone: u32) -> Compiled {
        let rdatas: Vec<RData> = (1..=n)
            .map(|i| RData::A(A::new(10, 0, zone as u8, i)))
            .collect();
        let set = crate::zone::RRset::new(RecordType::A, 60, &rdatas).unwrap();
        let mut c = encode_answer(&set, 0).unwrap();
        c.head.set_zone(zone);
        c
    }

    fn name(i: u32) -> Arc<[u8]> {
        let label = format!("n{i}");
        let mut w = vec![label.len() as u8];
        w.extend_from_slice(label.as_bytes());
        w.extend_from_slice(b"\x07example\x00");
        w.into()
    }

    #[test]
    fn packed_entries_come_back_exactly_through_changes_and_compaction() {
        let mut t = PackedTable::default();
        let mut model = Table::default();
        let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for round in 0..40 {
            let mut delta = TableDelta::default();
            for _ in 0..200 {
                let r = next();
                let k = EntryKey {
                    name: name((r % 300) as u32),
                    qtype: (r >> 20) as u8 & 3,
                };
                if r >> 40 & 3 == 0 {
                    delta.delete.push(k);
                } else {
                    let c = entry_of(1 + (r >> 30) as u8 % 6, 1 + (r >> 50) as u32 % 9);
                    delta.upsert.push((k, c));
                }
            }
            // The diff against the model is what the model says.
            let mut after = model.clone();
            delta.apply_to(&mut after);
            let mut want = diff_tables(&model, &after);
            let mut got = t.diff(&after);
            for d in [&mut want, &mut got] {
                d.upsert.sort_by(|a, b| a.0.cmp(&b.0));
                d.delete.sort();
            }
            assert_eq!(got, want, "round {round}");
            model = after;
            t.apply(&delta);
            assert_eq!(t.len(), model.len(), "round {round}");
        }
        assert!(t.packed.arena_len() < 40 * 200 * 40, "garbage is reclaimed");
        assert_eq!(t.to_table(), model);
        for (k, c) in &model {
            assert_eq!(t.get(k).as_ref(), Some(c), "{k:?}");
            assert_eq!(t.block_of(k), c.block);
            assert_eq!(t.has_block(k), c.block.is_some());
        }
        let rebuilt = PackedTable::from_table(&model);
        assert_eq!(rebuilt.to_table(), model);
        assert!(rebuilt.diff(&model).is_empty());
    }
}
