//! The compiled answers in userspace: the kernel table's entries, keyed
//! by lower-cased wire name and query-type slot, stamped with the
//! zone-store version they were compiled from. One table serves the hot
//! path (`crate::answers::hot`) and is the loader's record of what it wrote into
//! the kernel, so each change is compiled once and kept once.
//!
//! One writer (the kernel table's subscriber, or without XDP
//! [`super::follow`]) changes entries in place; readers run on every UDP
//! worker. A reader uses an entry only when the table's version
//! equals the snapshot it answers from, before and after the lookup (a
//! sequence lock over a sharded map): while a change is being written,
//! or before the table has caught up with a commit, the full handler
//! answers. So a hot answer is always the full handler's answer for the
//! same snapshot, never a stale one. Each shard is packed
//! ([`crate::answers::packed`]): entries end to end in one byte arena.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use xdpdns_common::negative::fold;
use xdpdns_common::{Answer, INLINE_MAX};

use super::compile::{Compiled, EntryKey, Installed, Table, TableDelta};
use super::depends::Dependents;
use super::on_demand::{self, Compiling};
use super::packed::{KeyHasher, Packed, Stored, HEAD};
use crate::zone::Snapshot;

/// The version of a table being changed, or not yet filled.
const UNSETTLED: u64 = u64::MAX;

/// Shards: a writer holds one shard's lock per entry, so readers on other
/// shards never wait.
const SHARDS: usize = 16;

/// An entry as the hot path reads it: the kernel entry's head
/// ([`xdpdns_common::Answer::head`]) and the section.
pub struct HotEntry<'a> {
    head: [u8; HEAD],
    pub section: &'a [u8],
    /// An A entry's last inline bytes (`Stored::tail`).
    tail: &'a [u8],
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

    /// [`Answer::rotation`] of the kernel entry.
    pub fn rotation(&self, id: u16, record_len: u32) -> Option<(u32, u32)> {
        Answer::from_head(self.head, &[]).rotation(id, record_len)
    }

    pub fn zone(&self) -> u32 {
        let word = match self.section.len() <= INLINE_MAX {
            true => [self.head[4], self.head[5], 0, 0],
            false => [self.head[8], self.head[9], self.head[10], self.head[11]],
        };
        u32::from_le_bytes(word)
    }

    /// [`Answer::more_counts`] of the kernel entry.
    pub fn more_counts(&self) -> (u16, u16) {
        Answer::from_head(self.head, &[]).more_counts()
    }

    /// [`Answer::soa_after`] of the kernel entry: the apex length of the
    /// zone whose SOA follows the section.
    pub fn soa_after(&self) -> Option<u32> {
        Answer::from_head(self.head, &[]).soa_after()
    }

    /// The EXIST facts folded into this (A) entry, laid out as an EXIST
    /// entry's section ([`Answer::folded_exist`]).
    pub fn folded_exist(&self) -> Option<&[u8]> {
        fold::facts(self.section.len(), self.tail)
    }
}

/// Bits 32.. pick the shard: hashbrown takes its control tag from the top
/// seven bits and its bucket from the bottom ones.
fn shard_of(hash: u64) -> usize {
    (hash >> 32) as usize % SHARDS
}

pub struct AnswerTable {
    /// Tells this table's entries from another's in a thread's cache of
    /// entries compiled on demand.
    id: u64,
    /// Entries are compiled when asked for ([`on_demand`]), not held here.
    on_demand: AtomicBool,
    /// How the follower without a kernel table compiles (the writer's).
    compiling: Mutex<Compiling>,
    /// The store version the entries match, or [`UNSETTLED`].
    version: AtomicU64,
    hasher: KeyHasher,
    shards: [RwLock<Packed>; SHARDS],
    /// Which names' entries hold other names' records (the writer's).
    dependents: Mutex<Dependents>,
}

impl Default for AnswerTable {
    fn default() -> Self {
        AnswerTable {
            id: on_demand::next_table_id(),
            on_demand: AtomicBool::new(false),
            compiling: Mutex::default(),
            version: AtomicU64::new(UNSETTLED),
            hasher: KeyHasher::default(),
            shards: Default::default(),
            dependents: Mutex::default(),
        }
    }
}

impl AnswerTable {
    fn read_shard(&self, hash: u64) -> RwLockReadGuard<'_, Packed> {
        self.shards[shard_of(hash)]
            .read()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn write_shard(&self, hash: u64) -> RwLockWriteGuard<'_, Packed> {
        self.shards[shard_of(hash)]
            .write()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// The entries the hot path reads for one query on `snapshot`: the
    /// table's when it is at the snapshot's version (a query reads
    /// nothing from it once it has moved on, since versions only grow:
    /// a read that fails stays failed, and the hot path never takes a
    /// missing entry it could not read for one that is not there), or
    /// compiled on demand. `None` when neither: the full handler answers.
    pub fn view<'a>(&'a self, snapshot: &'a Snapshot) -> Option<View<'a>> {
        let on_demand = self.on_demand();
        if !on_demand && self.version.load(Ordering::Acquire) != snapshot.version() {
            return None;
        }
        Some(View {
            table: self,
            snapshot,
            on_demand,
            failed: std::cell::Cell::new(false),
        })
    }

    /// An entry of the table, if it is at store version `version`.
    fn read_at<R>(
        &self,
        version: u64,
        name: &[u8],
        qtype: u8,
        f: impl FnOnce(&HotEntry<'_>) -> R,
    ) -> Option<R> {
        if self.version.load(Ordering::Acquire) != version {
            return None;
        }
        let hash = self.hasher.hash(name, qtype);
        let shard = self.read_shard(hash);
        let e = shard.get(hash, name, qtype)?;
        let out = f(&HotEntry {
            head: e.head,
            section: e.section,
            tail: e.tail,
        });
        drop(shard);
        // The entry was read under the shard's lock: if the writer had
        // begun changing the table by then, the version below shows it.
        fence(Ordering::Acquire);
        (self.version.load(Ordering::Relaxed) == version).then_some(out)
    }

    /// Calls `f` with `key`'s entry as stored, whatever the version.
    fn stored<R>(&self, key: &EntryKey, f: impl FnOnce(&Stored<'_>) -> R) -> Option<R> {
        let hash = self.hasher.hash(&key.name, key.qtype);
        let shard = self.read_shard(hash);
        Some(f(&shard.get(hash, &key.name, key.qtype)?))
    }

    /// The section of `key`'s entry when it is held outside the entry (a
    /// block), without rebuilding the entry.
    pub fn block_of(&self, key: &EntryKey) -> Option<Arc<[u8]>> {
        self.stored(key, |e| {
            (e.section.len() > INLINE_MAX).then(|| Arc::from(e.section))
        })
        .flatten()
    }

    /// Whether `key`'s entry holds its name's folded EXIST facts.
    pub fn holds_exist(&self, key: &EntryKey) -> bool {
        self.stored(key, |e| fold::facts(e.section.len(), e.tail).is_some())
            .unwrap_or(false)
    }

    /// Whether `key`'s entry holds its section in a block.
    pub fn has_block(&self, key: &EntryKey) -> bool {
        self.stored(key, |e| e.section.len() > INLINE_MAX)
            .unwrap_or(false)
    }

    /// The change that turns this table into `new`.
    pub fn diff(&self, new: &Table) -> TableDelta {
        if self.is_empty() {
            return TableDelta {
                upsert: new.iter().map(|(k, c)| (k.clone(), c.clone())).collect(),
                ..TableDelta::default()
            };
        }
        let mut delete = Vec::new();
        self.each_key(&mut |k| {
            if !new.contains_key(k) {
                delete.push(k.clone());
            }
        });
        TableDelta {
            upsert: new
                .iter()
                .filter(|(k, c)| self.entry(k).as_ref() != Some(*c))
                .map(|(k, c)| (k.clone(), c.clone()))
                .collect(),
            delete,
            depends: Default::default(),
        }
    }

    /// Replaces the index of dependent names (with a whole table).
    pub fn set_dependents(&self, dependents: Dependents) {
        *self.dependents.lock().unwrap_or_else(|p| p.into_inner()) = dependents;
    }

    /// The table unpacked.
    pub fn to_table(&self) -> Table {
        let mut table = Table::default();
        for shard in &self.shards {
            let s = shard.read().unwrap_or_else(|p| p.into_inner());
            for e in s.entries() {
                let key = EntryKey {
                    name: e.name.into(),
                    qtype: e.qtype,
                };
                table.insert(key, e.compiled());
            }
        }
        table
    }

    /// Whether the hot path compiles entries when asked for them (the
    /// table then holds none).
    pub fn on_demand(&self) -> bool {
        self.on_demand.load(Ordering::Acquire)
    }

    /// Switches to entries compiled on demand, dropping the ones held
    /// (readers of the table see it unsettled first), or back (the
    /// caller fills the table first). Writer only.
    pub fn set_on_demand(&self, on: bool) {
        if on == self.on_demand() {
            return;
        }
        if !on {
            self.on_demand.store(false, Ordering::Release);
            return;
        }
        self.on_demand.store(true, Ordering::Release);
        self.unsettle();
        for shard in &self.shards {
            *shard.write().unwrap_or_else(|p| p.into_inner()) = Packed::default();
        }
        self.set_dependents(Dependents::default());
    }

    /// How entries are compiled where no kernel table keeps them.
    pub fn compiling(&self) -> Compiling {
        *self.compiling.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set_compiling(&self, compiling: Compiling) {
        *self.compiling.lock().unwrap_or_else(|p| p.into_inner()) = compiling;
    }

    /// The store version the table matches, if it is settled.
    pub fn version(&self) -> Option<u64> {
        Some(self.version.load(Ordering::Acquire)).filter(|v| *v != UNSETTLED)
    }

    /// Entries in the table.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.read().map_or(0, |s| s.len()))
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Marks the table as changing: readers stop using it until
    /// [`AnswerTable::settle`]. Writer only.
    pub fn unsettle(&self) {
        self.version.store(UNSETTLED, Ordering::SeqCst);
    }

    /// Declares the entries those of store version `version`. Writer only.
    pub fn settle(&self, version: u64) {
        self.version.store(version, Ordering::Release);
    }

    /// Applies a change (between [`AnswerTable::unsettle`] and `settle`).
    pub fn apply(&self, delta: &TableDelta) {
        for (key, entry) in &delta.upsert {
            let hash = self.hasher.hash(&key.name, key.qtype);
            self.write_shard(hash)
                .upsert(hash, key, entry, &self.hasher);
        }
        for key in &delta.delete {
            let hash = self.hasher.hash(&key.name, key.qtype);
            self.write_shard(hash).remove(hash, key);
        }
        for shard in &self.shards {
            let mut s = shard.write().unwrap_or_else(|p| p.into_inner());
            s.compact_if_wasteful(&self.hasher);
        }
        self.apply_dependents(&delta.depends);
    }

    /// Applies a change to the index of dependent names.
    pub fn apply_dependents(&self, delta: &super::depends::DependsDelta) {
        let mut index = self.dependents.lock().unwrap_or_else(|p| p.into_inner());
        delta.apply_to(&mut index);
    }

    /// Replaces every entry by `entries` (distinct keys; between
    /// `unsettle` and `settle`), each shard packed at its exact size.
    pub fn replace<'a>(&self, entries: impl IntoIterator<Item = (&'a EntryKey, &'a Compiled)>) {
        let mut parts: Vec<Vec<(u64, &EntryKey, &Compiled)>> = vec![Vec::new(); SHARDS];
        for (key, entry) in entries {
            let hash = self.hasher.hash(&key.name, key.qtype);
            parts[shard_of(hash)].push((hash, key, entry));
        }
        for (shard, part) in self.shards.iter().zip(parts) {
            let packed = Packed::build(&part, &self.hasher);
            *shard.write().unwrap_or_else(|p| p.into_inner()) = packed;
        }
    }
}

/// One query's reading of an [`AnswerTable`] ([`AnswerTable::view`]).
pub struct View<'a> {
    table: &'a AnswerTable,
    snapshot: &'a Snapshot,
    on_demand: bool,
    /// A compile on demand failed: what the reads said may be wrong.
    failed: std::cell::Cell<bool>,
}

impl View<'_> {
    /// Calls `f` with the entry for `name` (lower-cased wire form) and
    /// query-type slot `qtype`; `None` when there is none (or, from the
    /// table, once it has moved past the snapshot).
    pub fn read<R>(&self, name: &[u8], qtype: u8, f: impl FnOnce(&HotEntry<'_>) -> R) -> Option<R> {
        if !self.on_demand {
            return self.table.read_at(self.snapshot.version(), name, qtype, f);
        }
        let read = on_demand::read(self.table.id, self.snapshot, name, qtype, |e| {
            f(&HotEntry {
                head: e.head,
                section: e.section,
                tail: e.tail,
            })
        });
        match read {
            Ok(found) => found,
            Err(on_demand::Unread) => {
                self.failed.set(true);
                None
            }
        }
    }

    /// Whether a query for `name` should be answered here: always from a
    /// whole table; compiling on demand, once the name is worth
    /// compiling ([`on_demand::admits`]).
    pub fn admits(&self, name: &[u8]) -> bool {
        !self.on_demand || on_demand::admits(self.table.id, self.snapshot, name)
    }

    /// Whether a read could not compile what it asked for: the answer
    /// built from the reads is not to be used.
    pub fn failed(&self) -> bool {
        self.failed.get()
    }
}

impl Installed for AnswerTable {
    fn entry(&self, key: &EntryKey) -> Option<Compiled> {
        self.stored(key, |e| e.compiled())
    }

    /// One hash and one lock for every slot: a name's slots share their
    /// bucket and shard (`packed::with_slot`).
    fn slots_of(&self, name: &[u8]) -> Vec<u8> {
        let base = self.hasher.name_hash(name);
        self.read_shard(base).slots_of(base, name)
    }

    fn each_key(&self, f: &mut dyn FnMut(&EntryKey)) {
        for shard in &self.shards {
            let s = shard.read().unwrap_or_else(|p| p.into_inner());
            for e in s.entries() {
                f(&EntryKey {
                    name: e.name.into(),
                    qtype: e.qtype,
                });
            }
        }
    }

    fn dependents_of(&self, target: &[u8]) -> Vec<Arc<[u8]>> {
        let index = self.dependents.lock().unwrap_or_else(|p| p.into_inner());
        index.of(target).to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answers::compile::encode_answer;
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
        let t = AnswerTable::default();
        let name = b"\x03www\x07example\x00";
        let delta = TableDelta {
            upsert: vec![(key(name), entry(1))],
            delete: vec![],
            ..Default::default()
        };
        t.apply(&delta);
        assert_eq!(
            t.read_at(0, name, qtype_slot::A, |_| ()),
            None,
            "never settled"
        );
        t.settle(7);
        assert_eq!(t.version(), Some(7));
        let got = t.read_at(7, name, qtype_slot::A, |e| e.section.to_vec());
        assert_eq!(got, Some(entry(1).section().to_vec()));
        assert_eq!(
            t.read_at(8, name, qtype_slot::A, |_| ()),
            None,
            "other version"
        );
        assert_eq!(
            t.read_at(7, name, qtype_slot::AAAA, |_| ()),
            None,
            "other type"
        );
        t.unsettle();
        assert_eq!(t.read_at(7, name, qtype_slot::A, |_| ()), None, "changing");
        t.apply(&TableDelta {
            upsert: vec![],
            delete: vec![key(name)],
            ..Default::default()
        });
        t.settle(8);
        assert_eq!(t.read_at(8, name, qtype_slot::A, |_| ()), None, "deleted");
        assert!(t.is_empty());
    }

    #[test]
    fn a_change_written_during_a_read_voids_the_read() {
        let t = AnswerTable::default();
        let name = b"\x01a\x00";
        t.apply(&TableDelta {
            upsert: vec![(key(name), entry(1))],
            delete: vec![],
            ..Default::default()
        });
        t.settle(1);
        // The writer begins a change while the reader holds the entry.
        let got = t.read_at(1, name, qtype_slot::A, |_| t.unsettle());
        assert_eq!(got, None);
    }

    #[test]
    fn a_names_slots_are_found_together_and_told_apart() {
        // Many names with many slots each: every slot of a name probes from
        // one bucket, so their tags alone tell them apart.
        let names: Vec<Vec<u8>> = (0..300u32)
            .map(|i| format!("\x04n{i:03}\x07example\x00").into_bytes())
            .collect();
        let slots_of = |i: usize| -> Vec<u8> {
            qtype_slot::all()
                .filter(|s| (usize::from(*s) * 7 + i).is_multiple_of(11))
                .collect()
        };
        let mut table = Table::default();
        for (i, name) in names.iter().enumerate() {
            for (k, slot) in slots_of(i).into_iter().enumerate() {
                let key = EntryKey {
                    name: name.as_slice().into(),
                    qtype: slot,
                };
                table.insert(key, entry(k as u8));
            }
        }
        let t = AnswerTable::default();
        t.replace(&table);
        assert_eq!(t.len(), table.len());
        for (i, name) in names.iter().enumerate() {
            assert_eq!(t.slots_of(name), slots_of(i), "{i}");
            assert_eq!(t.slots_of(name), table.slots_of(name), "{i}");
            for (k, slot) in slots_of(i).into_iter().enumerate() {
                let key = EntryKey {
                    name: name.as_slice().into(),
                    qtype: slot,
                };
                assert_eq!(t.entry(&key), Some(entry(k as u8)), "{i} {slot}");
            }
        }
        assert!(t.slots_of(b"\x04none\x07example\x00").is_empty());
    }

    #[test]
    fn replace_and_installed_view() {
        let t = AnswerTable::default();
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

    fn name(i: u32) -> Arc<[u8]> {
        let label = format!("n{i}");
        let mut w = vec![label.len() as u8];
        w.extend_from_slice(label.as_bytes());
        w.extend_from_slice(b"\x07example\x00");
        w.into()
    }

    #[test]
    fn packed_entries_come_back_exactly_through_changes_and_compaction() {
        use crate::answers::compile::diff_tables;
        let t = AnswerTable::default();
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
        let arena: usize = t.shards.iter().map(|s| s.read().unwrap().arena_len()).sum();
        assert!(arena < 40 * 200 * 40, "garbage is reclaimed");
        assert_eq!(t.to_table(), model);
        for (k, c) in &model {
            assert_eq!(t.entry(k).as_ref(), Some(c), "{k:?}");
            assert_eq!(t.block_of(k), c.block);
            assert_eq!(t.has_block(k), c.block.is_some());
        }
        let rebuilt = AnswerTable::default();
        rebuilt.replace(&model);
        assert_eq!(rebuilt.to_table(), model);
        assert!(rebuilt.diff(&model).is_empty());
    }
}
