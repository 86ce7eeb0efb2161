//! The compiled answers in userspace: the kernel table's entries, keyed
//! by lower-cased wire name and query-type slot, stamped with the
//! zone-store version they were compiled from.
//!
//! One writer (the subscriber) changes entries in place; readers run on
//! every UDP worker. A reader uses an entry only when the table's version
//! equals the snapshot it answers from, before and after the lookup (a
//! sequence lock over a sharded map): while a change is being written,
//! or before the table has caught up with a commit, the full handler
//! answers. So a hot answer is always the full handler's answer for the
//! same snapshot, never a stale one.
//!
//! Entries are packed, not boxed: each shard keeps its entries end to end
//! in one byte arena (name, type, the kernel entry's 12-byte head, the
//! section) and an index of arena offsets. A service name's A entry takes
//! about 60 bytes where a map of structs took 150–200 (a million-record
//! zone: 108 MB before). A replaced or deleted entry leaves garbage in
//! the arena until the shard is compacted.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use hashbrown::HashTable;
use xdpdns_common::{Answer, INLINE_MAX};

use crate::xdp::compile::{Compiled, EntryKey, Installed, Table, TableDelta};

/// The version of a table being changed, or not yet filled.
const UNSETTLED: u64 = u64::MAX;

/// Shards: a writer holds one shard's lock per entry, so readers on other
/// shards never wait.
const SHARDS: usize = 16;

/// Bytes of an entry before its name: name length, query-type slot.
const LEAD: usize = 2;
/// The kernel entry's head ([`Answer::head`]).
const HEAD: usize = 12;

/// One shard: entries packed end to end, and their offsets by hash.
#[derive(Default)]
struct Shard {
    index: HashTable<u32>,
    arena: Vec<u8>,
    /// Bytes of the arena no index entry points at.
    garbage: usize,
}

/// An entry as the hot path reads it: the kernel entry's head
/// ([`Answer::head`]) and the section.
pub struct HotEntry<'a> {
    head: [u8; HEAD],
    pub section: &'a [u8],
}

impl HotEntry<'_> {
    /// The kernel entry's fields, read without building it (the zone of an
    /// inline answer is where a block answer keeps its block id).
    pub fn ancount(&self) -> u16 {
        u16::from(self.head[7])
    }

    pub fn flags(&self) -> u16 {
        self.head[1] as u16 >> 4
    }

    pub fn zone(&self) -> u32 {
        let word = match self.section.len() <= INLINE_MAX {
            true => [self.head[4], self.head[5], self.head[6], 0],
            false => [self.head[8], self.head[9], self.head[10], self.head[11]],
        };
        u32::from_le_bytes(word)
    }
}

impl Shard {
    fn entry_at(&self, at: u32) -> (&[u8], u8, [u8; HEAD], &[u8]) {
        let a = &self.arena[at as usize..];
        let len = a[0] as usize;
        let qtype = a[1];
        let name = &a[LEAD..LEAD + len];
        let head: [u8; HEAD] = a[LEAD + len..LEAD + len + HEAD]
            .try_into()
            .expect("12 bytes");
        let section_len = (u16::from_le_bytes([head[0], head[1]]) & 0x0fff) as usize;
        let start = LEAD + len + HEAD;
        (name, qtype, head, &a[start..start + section_len])
    }

    fn entry_len(&self, at: u32) -> usize {
        let (name, _, _, section) = self.entry_at(at);
        LEAD + name.len() + HEAD + section.len()
    }

    fn find(&self, hash: u64, name: &[u8], qtype: u8) -> Option<u32> {
        let arena = &self.arena[..];
        self.index
            .find(hash, |&at| {
                let a = &arena[at as usize..];
                a[0] as usize == name.len() && a[1] == qtype && &a[LEAD..LEAD + name.len()] == name
            })
            .copied()
    }

    fn push(&mut self, name: &[u8], qtype: u8, c: &Compiled) -> u32 {
        let at = u32::try_from(self.arena.len()).expect("a shard arena below 4 GiB");
        self.arena.push(name.len() as u8);
        self.arena.push(qtype);
        self.arena.extend_from_slice(name);
        self.arena.extend_from_slice(&c.head.head());
        self.arena.extend_from_slice(c.section());
        at
    }

    fn upsert(&mut self, hash: u64, name: &[u8], qtype: u8, c: &Compiled, state: &State) {
        let at = self.push(name, qtype, c);
        if let Some(old) = self.find(hash, name, qtype) {
            self.garbage += self.entry_len(old);
            let slot = self
                .index
                .find_mut(hash, |&x| x == old)
                .expect("just found");
            *slot = at;
        } else {
            let arena = &self.arena;
            self.index
                .insert_unique(hash, at, |&x| state.hash_at(arena, x));
        }
    }

    fn remove(&mut self, hash: u64, name: &[u8], qtype: u8) {
        let Some(old) = self.find(hash, name, qtype) else {
            return;
        };
        self.garbage += self.entry_len(old);
        if let Ok(e) = self.index.find_entry(hash, |&x| x == old) {
            e.remove();
        }
    }

    /// Copies the live entries into a new arena once most of it is garbage.
    fn compact_if_wasteful(&mut self, state: &State) {
        if self.garbage < 4096 || self.garbage * 2 < self.arena.len() {
            return;
        }
        let live = self.arena.len() - self.garbage;
        let mut arena = Vec::with_capacity(live);
        let mut index = HashTable::with_capacity(self.index.len());
        for &at in self.index.iter() {
            let len = self.entry_len(at);
            let new_at = arena.len() as u32;
            arena.extend_from_slice(&self.arena[at as usize..at as usize + len]);
            let hash = state.hash_at(&arena, new_at);
            index.insert_unique(hash, new_at, |&x| state.hash_at(&arena, x));
        }
        self.arena = arena;
        self.index = index;
        self.garbage = 0;
    }
}

/// The tables's hasher (a random seed: query names come from clients).
struct State(foldhash::fast::FixedState);

impl State {
    fn hash(&self, name: &[u8], qtype: u8) -> u64 {
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

    fn shard(hash: u64) -> usize {
        (hash >> 60) as usize % SHARDS
    }
}

pub struct HotTable {
    /// The store version the entries match, or [`UNSETTLED`].
    version: AtomicU64,
    state: State,
    shards: [RwLock<Shard>; SHARDS],
}

impl Default for HotTable {
    fn default() -> Self {
        use std::hash::BuildHasher as _;
        let seed = std::collections::hash_map::RandomState::new().hash_one(0u8);
        HotTable {
            version: AtomicU64::new(UNSETTLED),
            state: State(foldhash::fast::FixedState::with_seed(seed)),
            shards: Default::default(),
        }
    }
}

impl HotTable {
    fn shard(&self, hash: u64) -> &RwLock<Shard> {
        &self.shards[State::shard(hash)]
    }

    /// Calls `f` with the entry for `name` (lower-cased wire form) and
    /// query-type slot `qtype` if the table is at store version
    /// `version` throughout; `None` otherwise or when there is no entry.
    pub fn read<R>(
        &self,
        version: u64,
        name: &[u8],
        qtype: u8,
        f: impl FnOnce(&HotEntry<'_>) -> R,
    ) -> Option<R> {
        if self.version.load(Ordering::Acquire) != version {
            return None;
        }
        let hash = self.state.hash(name, qtype);
        let shard = self.shard(hash).read().unwrap_or_else(|p| p.into_inner());
        let at = shard.find(hash, name, qtype)?;
        let (_, _, head, section) = shard.entry_at(at);
        let out = f(&HotEntry { head, section });
        drop(shard);
        // The entry was read under the shard's lock: if the writer had
        // begun changing the table by then, the version below shows it.
        fence(Ordering::Acquire);
        (self.version.load(Ordering::Relaxed) == version).then_some(out)
    }

    /// The store version the table matches, if it is settled.
    pub fn version(&self) -> Option<u64> {
        Some(self.version.load(Ordering::Acquire)).filter(|v| *v != UNSETTLED)
    }

    /// Entries in the table.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.read().map_or(0, |s| s.index.len()))
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Marks the table as changing: readers stop using it until
    /// [`HotTable::settle`]. Writer only.
    pub fn unsettle(&self) {
        self.version.store(UNSETTLED, Ordering::SeqCst);
    }

    /// Declares the entries those of store version `version`. Writer only.
    pub fn settle(&self, version: u64) {
        self.version.store(version, Ordering::Release);
    }

    fn write(&self, hash: u64) -> std::sync::RwLockWriteGuard<'_, Shard> {
        self.shard(hash).write().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies a change (between [`HotTable::unsettle`] and `settle`).
    pub fn apply(&self, delta: &TableDelta) {
        for (key, entry) in &delta.upsert {
            let hash = self.state.hash(&key.name, key.qtype);
            self.write(hash)
                .upsert(hash, &key.name, key.qtype, entry, &self.state);
        }
        for key in &delta.delete {
            let hash = self.state.hash(&key.name, key.qtype);
            self.write(hash).remove(hash, &key.name, key.qtype);
        }
        for shard in &self.shards {
            let mut s = shard.write().unwrap_or_else(|p| p.into_inner());
            s.compact_if_wasteful(&self.state);
        }
    }

    /// Replaces every entry by `table`'s (between `unsettle` and `settle`),
    /// each shard built at its exact size.
    pub fn replace(&self, table: &Table) {
        let mut parts: Vec<Vec<(u64, &EntryKey, &Compiled)>> = vec![Vec::new(); SHARDS];
        for (key, entry) in table {
            let hash = self.state.hash(&key.name, key.qtype);
            parts[State::shard(hash)].push((hash, key, entry));
        }
        for (shard, part) in self.shards.iter().zip(parts) {
            let bytes = part
                .iter()
                .map(|(_, k, c)| LEAD + k.name.len() + HEAD + c.section().len())
                .sum();
            let mut s = Shard {
                index: HashTable::with_capacity(part.len()),
                arena: Vec::with_capacity(bytes),
                garbage: 0,
            };
            for (hash, key, entry) in part {
                let at = s.push(&key.name, key.qtype, entry);
                let arena = &s.arena;
                s.index
                    .insert_unique(hash, at, |&x| self.state.hash_at(arena, x));
            }
            *shard.write().unwrap_or_else(|p| p.into_inner()) = s;
        }
    }
}

/// The [`Compiled`] entry an arena entry was made from.
fn compiled(head: [u8; HEAD], section: &[u8]) -> Compiled {
    Compiled {
        head: Answer::from_head(head, section),
        block: (section.len() > INLINE_MAX).then(|| Arc::from(section)),
    }
}

impl Installed for HotTable {
    fn entry(&self, key: &EntryKey) -> Option<Compiled> {
        let hash = self.state.hash(&key.name, key.qtype);
        let shard = self.shard(hash).read().unwrap_or_else(|p| p.into_inner());
        let at = shard.find(hash, &key.name, key.qtype)?;
        let (_, _, head, section) = shard.entry_at(at);
        Some(compiled(head, section))
    }

    fn each_key(&self, f: &mut dyn FnMut(&EntryKey)) {
        for shard in &self.shards {
            let s = shard.read().unwrap_or_else(|p| p.into_inner());
            for &at in s.index.iter() {
                let (name, qtype, _, _) = s.entry_at(at);
                f(&EntryKey {
                    name: name.into(),
                    qtype,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdp::compile::encode_answer;
    use hickory_proto::rr::rdata::A;
    use hickory_proto::rr::RData;
    use xdpdns_common::qtype_slot;

    fn entry(last: u8) -> Compiled {
        let set = crate::zone::RRset::new(
            hickory_proto::rr::RecordType::A,
            60,
            [&RData::A(A::new(192, 0, 2, last))],
        )
        .unwrap();
        encode_answer(&set, 0).unwrap()
    }

    fn key(name: &[u8]) -> EntryKey {
        EntryKey {
            name: name.into(),
            qtype: qtype_slot::A,
        }
    }

    #[test]
    fn entries_are_read_only_at_the_settled_version() {
        let t = HotTable::default();
        let name = b"\x03www\x07example\x00";
        let delta = TableDelta {
            upsert: vec![(key(name), entry(1))],
            delete: vec![],
        };
        t.apply(&delta);
        assert_eq!(
            t.read(0, name, qtype_slot::A, |_| ()),
            None,
            "never settled"
        );
        t.settle(7);
        assert_eq!(t.version(), Some(7));
        let got = t.read(7, name, qtype_slot::A, |e| e.section.to_vec());
        assert_eq!(got, Some(entry(1).section().to_vec()));
        assert_eq!(
            t.read(8, name, qtype_slot::A, |_| ()),
            None,
            "other version"
        );
        assert_eq!(
            t.read(7, name, qtype_slot::AAAA, |_| ()),
            None,
            "other type"
        );
        t.unsettle();
        assert_eq!(t.read(7, name, qtype_slot::A, |_| ()), None, "changing");
        t.apply(&TableDelta {
            upsert: vec![],
            delete: vec![key(name)],
        });
        t.settle(8);
        assert_eq!(t.read(8, name, qtype_slot::A, |_| ()), None, "deleted");
        assert!(t.is_empty());
    }

    #[test]
    fn a_change_written_during_a_read_voids_the_read() {
        let t = HotTable::default();
        let name = b"\x01a\x00";
        t.apply(&TableDelta {
            upsert: vec![(key(name), entry(1))],
            delete: vec![],
        });
        t.settle(1);
        // The writer begins a change while the reader holds the entry.
        let got = t.read(1, name, qtype_slot::A, |_| t.unsettle());
        assert_eq!(got, None);
    }

    #[test]
    fn replace_and_installed_view() {
        let t = HotTable::default();
        let mut table = Table::default();
        table.insert(key(b"\x01a\x00"), entry(1));
        table.insert(
            EntryKey {
                name: b"\x01b\x00".as_slice().into(),
                qtype: qtype_slot::AAAA,
            },
            entry(2),
        );
        t.replace(&table);
        assert_eq!(t.len(), 2);
        assert_eq!(t.entry(&key(b"\x01a\x00")), Some(entry(1)));
        let mut keys = Vec::new();
        t.each_key(&mut |k| keys.push(k.clone()));
        keys.sort();
        let mut want: Vec<_> = table.keys().cloned().collect();
        want.sort();
        assert_eq!(keys, want);
    }

    /// An entry of `n` A records (a block from three on) of zone `zone`.
    fn entry_of(n: u8, zone: u32) -> Compiled {
        let rdatas: Vec<RData> = (1..=n)
            .map(|i| RData::A(A::new(10, 0, zone as u8, i)))
            .collect();
        let set = crate::zone::RRset::new(hickory_proto::rr::RecordType::A, 60, &rdatas).unwrap();
        let mut c = encode_answer(&set, 0).unwrap();
        c.head.set_zone(zone);
        c
    }

    #[test]
    fn packed_entries_come_back_exactly_through_changes_and_compaction() {
        let t = HotTable::default();
        let mut model = Table::default();
        let name = |i: u32| -> Vec<u8> {
            let label = format!("n{i}");
            let mut w = vec![label.len() as u8];
            w.extend_from_slice(label.as_bytes());
            w.extend_from_slice(b"\x07example\x00");
            w
        };
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
                    name: name((r % 300) as u32).into(),
                    qtype: (r >> 20) as u8 & 3,
                };
                if r >> 40 & 3 == 0 {
                    delta.delete.push(k);
                } else {
                    let c = entry_of(1 + (r >> 30) as u8 % 6, 1 + (r >> 50) as u32 % 9);
                    delta.upsert.push((k, c));
                }
            }
            // Deletes apply after upserts, as in `TableDelta::apply_to`.
            delta.apply_to(&mut model);
            t.unsettle();
            t.apply(&delta);
            t.settle(round);
            assert_eq!(t.len(), model.len(), "round {round}");
        }
        let arena_bytes = t
            .shards
            .iter()
            .map(|s| s.read().unwrap().arena.len())
            .sum::<usize>();
        assert!(arena_bytes < 40 * 200 * 40, "garbage is reclaimed");
        for (k, c) in &model {
            assert_eq!(t.entry(k).as_ref(), Some(c), "{k:?}");
            let read = t.read(39, &k.name, k.qtype, |e| {
                (e.section.to_vec(), e.zone(), e.ancount(), e.flags())
            });
            assert_eq!(
                read,
                Some((
                    c.section().to_vec(),
                    c.head.zone(),
                    c.head.ancount(),
                    c.head.flags()
                ))
            );
        }
        let mut keys = Vec::new();
        t.each_key(&mut |k| keys.push(k.clone()));
        keys.sort();
        let mut want: Vec<_> = model.keys().cloned().collect();
        want.sort();
        assert_eq!(keys, want);
    }
}
