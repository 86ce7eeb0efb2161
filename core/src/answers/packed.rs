//! Compiled entries kept in userspace, packed: entries end to end in one
//! byte arena (name length, query-type slot, name, the kernel entry's
//! 16-byte head, the section, and for an A entry the EXIST facts it may
//! hold) with an index of arena offsets by hash.
//! About 60 bytes for a service name's A entry where a map of
//! `EntryKey → Compiled` took 150–200. A replaced or deleted entry leaves
//! garbage in the arena until it is compacted (once more than half).
//!
//! [`Packed`] is the storage; hashes come from the caller, so the sharded
//! [`super::table::AnswerTable`] hashes once.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use hashbrown::HashTable;
use xdpdns_common::negative::fold;
use xdpdns_common::{qtype_slot, Answer, INLINE_MAX};

use super::compile::{Compiled, EntryKey};

/// Bytes of an entry before its name: name length, query-type slot.
const LEAD: usize = 2;
/// The kernel entry's head ([`Answer::head`]).
pub const HEAD: usize = xdpdns_common::ANSWER_HEAD;

/// Bytes stored after the section: an A entry's last inline bytes, where
/// a name's EXIST facts may be folded (`fold`).
fn tail_len(qtype: u8) -> usize {
    match qtype {
        qtype_slot::A => fold::LEN,
        _ => 0,
    }
}

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
        with_slot(self.name_hash(name), qtype)
    }

    /// The hash every slot of `name` shares but for its tag bits (see
    /// [`with_slot`]).
    pub fn name_hash(&self, name: &[u8]) -> u64 {
        let mut h = self.0.build_hasher();
        h.write(name);
        h.finish()
    }

    fn hash_at(&self, arena: &[u8], at: u32) -> u64 {
        let a = &arena[at as usize..];
        let len = a[0] as usize;
        self.hash(&a[LEAD..LEAD + len], a[1])
    }
}

/// Bits of a hash that hashbrown keeps as a bucket's tag (its top seven).
const TAG_SHIFT: u32 = 57;

/// `name_hash` for the entry in query-type slot `qtype`: only the tag
/// bits differ between a name's slots, so they all probe from the same
/// bucket (hashbrown's low bits) in the same shard (bits 32..), and
/// asking a name for each of its 254 possible slots costs one cache
/// miss, not 254; the tag still tells the slots apart without reading
/// the arena.
pub fn with_slot(name_hash: u64, qtype: u8) -> u64 {
    let tag = (name_hash >> TAG_SHIFT)
        ^ (u64::from(qtype).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> TAG_SHIFT);
    (name_hash & ((1 << TAG_SHIFT) - 1)) | (tag << TAG_SHIFT)
}

#[derive(Default)]
pub struct Packed {
    index: HashTable<u32>,
    arena: Vec<u8>,
    /// Bytes of the arena no index entry points at.
    garbage: usize,
    /// The query-type slots any entry was ever stored under, a bit each:
    /// [`Packed::slots_of`] walks only their tags.
    slots_used: [u64; 4],
}

/// One entry as stored: name, query-type slot, head, section.
pub struct Stored<'a> {
    pub name: &'a [u8],
    pub qtype: u8,
    pub head: [u8; HEAD],
    pub section: &'a [u8],
    /// The entry's last inline bytes, for an A entry (else empty).
    pub tail: &'a [u8],
}

impl Stored<'_> {
    fn len(&self) -> usize {
        LEAD + self.name.len() + HEAD + self.section.len() + self.tail.len()
    }

    /// The kernel entry this was made from.
    pub fn answer(&self) -> Answer {
        let mut a = Answer::from_head(self.head, self.section);
        // (Where the section reaches into them, the tail is its last bytes.)
        if self.tail.len() == fold::LEN {
            a.data[fold::AT..].copy_from_slice(self.tail);
        }
        a
    }

    /// The [`Compiled`] entry this was made from.
    pub fn compiled(&self) -> Compiled {
        Compiled {
            head: self.answer(),
            block: (self.section.len() > INLINE_MAX).then(|| Arc::from(self.section)),
        }
    }
}

impl Packed {
    /// Packs `entries` (with their hashes) at their exact size.
    pub fn build<'a>(entries: &[(u64, &'a EntryKey, &'a Compiled)], hasher: &KeyHasher) -> Packed {
        let bytes = entries
            .iter()
            .map(|(_, k, c)| LEAD + k.name.len() + HEAD + c.section().len() + tail_len(k.qtype))
            .sum();
        let mut p = Packed {
            index: HashTable::with_capacity(entries.len()),
            arena: Vec::with_capacity(bytes),
            garbage: 0,
            slots_used: [0; 4],
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
        let head: [u8; HEAD] = a[LEAD + len..LEAD + len + HEAD].try_into().expect("a head");
        let section_len = (u16::from_le_bytes([head[0], head[1]]) & 0x0fff) as usize;
        let start = LEAD + len + HEAD;
        let end = start + section_len;
        Stored {
            name: &a[LEAD..LEAD + len],
            qtype: a[1],
            head,
            section: &a[start..end],
            tail: &a[end..end + tail_len(a[1])],
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

    /// Every query-type slot with an entry for `name` (whose
    /// [`name_hash`](KeyHasher::name_hash) is `name_hash`), in order.
    /// Its slots share their bucket and differ in the tag alone (see
    /// [`with_slot`]), so one walk per tag finds them all: a walk for
    /// each tag a slot in use here gives the name (a registry's table
    /// uses a dozen slots; walking all 128 tags was a tenth of compiling
    /// a registration's changes).
    pub fn slots_of(&self, name_hash: u64, name: &[u8]) -> Vec<u8> {
        let arena = &self.arena[..];
        let bucket = name_hash & ((1 << TAG_SHIFT) - 1);
        let mut walked = 0u128;
        let mut slots = Vec::new();
        for qtype in
            (0..=u8::MAX).filter(|&q| self.slots_used[q as usize / 64] >> (q % 64) & 1 == 1)
        {
            let tag = with_slot(name_hash, qtype) >> TAG_SHIFT;
            if walked >> tag & 1 == 1 {
                continue;
            }
            walked |= 1 << tag;
            for &at in self.index.iter_hash(bucket | tag << TAG_SHIFT) {
                let a = &arena[at as usize..];
                if a[0] as usize == name.len() && &a[LEAD..LEAD + name.len()] == name {
                    slots.push(a[1]);
                }
            }
        }
        slots.sort_unstable();
        slots
    }

    /// The entry for `name` and `qtype` (whose hash is `hash`).
    pub fn get(&self, hash: u64, name: &[u8], qtype: u8) -> Option<Stored<'_>> {
        Some(self.at(self.offset(hash, name, qtype)?))
    }

    fn push(&mut self, name: &[u8], qtype: u8, c: &Compiled) -> u32 {
        let at = u32::try_from(self.arena.len()).expect("an arena below 4 GiB");
        self.slots_used[qtype as usize / 64] |= 1 << (qtype % 64);
        self.arena.push(name.len() as u8);
        self.arena.push(qtype);
        self.arena.extend_from_slice(name);
        self.arena.extend_from_slice(&c.head.head());
        self.arena.extend_from_slice(c.section());
        if tail_len(qtype) > 0 {
            self.arena.extend_from_slice(&c.head.data[fold::AT..]);
        }
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

    /// Copies the live entries into a new arena once a quarter of it is
    /// garbage: a registry's service entries are replaced at every change
    /// of a member, and at half (what it was) a million instances' table
    /// carried a third more bytes than it held.
    pub fn compact_if_wasteful(&mut self, hasher: &KeyHasher) {
        if self.garbage < 4096 || self.garbage * 4 < self.arena.len() {
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

    /// Arena bytes, live and garbage.
    pub fn arena_len(&self) -> usize {
        self.arena.len()
    }

    /// Heap held: the arena's capacity and the index (a 4-byte offset and
    /// a control byte a bucket).
    pub fn heap_bytes(&self) -> usize {
        self.arena.capacity() + self.index.capacity() * 8 / 7 * 5
    }
}
