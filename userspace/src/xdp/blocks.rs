//! Block ids for answer sections too large to inline in a table entry:
//! one id per distinct section, counted by the entries that reference it,
//! and reused only after the loader has deleted the block from the kernel
//! (which it does after an RCU grace period, so no packet still reads it).

use std::hash::BuildHasher;

use aya::maps::{HashMap, IterableMap, MapData, MapError};
use hashbrown::HashTable;
use xdpdns_common::{
    qtype_slot, AnswerBlock, MiniBlock, SmallBlock, BLOCK_MAX, INLINE_MAX, MINI_BLOCK_MAX,
    SMALL_BLOCK_MAX,
};

use crate::answers::compile::EntryKey;

/// The block table a section outside its entry goes to, by size: each
/// element costs the kernel its class's size plus 64 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Class {
    /// Up to `MINI_BLOCK_MAX` bytes, for the answers the kernel reads
    /// from mini blocks (a type's answer or CNAME chain; not a negative
    /// template, a denial or a gap record).
    Mini,
    /// Up to `SMALL_BLOCK_MAX` bytes.
    Small,
    /// Up to `BLOCK_MAX` bytes.
    Large,
}

impl Class {
    pub(super) const ALL: [Class; 3] = [Class::Mini, Class::Small, Class::Large];

    /// The class of `section`, the block of `key`'s entry.
    pub(super) fn of(key: &EntryKey, section: &[u8]) -> Class {
        // A query type's slot (its tail is the type's), signed or not.
        let tail = key.qtype >> 1;
        let answer = (1..qtype_slot::GAP_SIGNED >> 1).contains(&tail) || tail > qtype_slot::NO_TAIL;
        match section.len() {
            n if n > INLINE_MAX && n <= MINI_BLOCK_MAX && answer => Class::Mini,
            n if n <= SMALL_BLOCK_MAX => Class::Small,
            _ => Class::Large,
        }
    }

    pub(super) fn index(self) -> usize {
        self as usize
    }
}

/// The kernel's block tables, one per [`Class`].
pub(super) struct BlockMaps {
    pub(super) mini: HashMap<MapData, u32, MiniBlock>,
    pub(super) small: HashMap<MapData, u32, SmallBlock>,
    pub(super) large: HashMap<MapData, u32, AnswerBlock>,
}

impl BlockMaps {
    /// Writes `section` as block `id` of its class.
    pub(super) fn insert(&mut self, class: Class, id: u32, section: &[u8]) -> Result<(), MapError> {
        match class {
            Class::Mini => {
                let mut b = MiniBlock {
                    data: [0; MINI_BLOCK_MAX],
                };
                b.data[..section.len()].copy_from_slice(section);
                self.mini.insert(id, b, 0)
            }
            Class::Small => {
                let mut b = SmallBlock {
                    data: [0; SMALL_BLOCK_MAX],
                };
                b.data[..section.len()].copy_from_slice(section);
                self.small.insert(id, b, 0)
            }
            Class::Large => {
                let mut b = AnswerBlock {
                    data: [0; BLOCK_MAX],
                };
                b.data[..section.len()].copy_from_slice(section);
                self.large.insert(id, b, 0)
            }
        }
    }

    /// Removes block `id` of `class` (best effort: a missing one is gone).
    pub(super) fn remove(&mut self, class: Class, id: u32) {
        let _ = match class {
            Class::Mini => self.mini.remove(&id),
            Class::Small => self.small.remove(&id),
            Class::Large => self.large.remove(&id),
        };
    }

    /// The ids the kernel holds in `class`'s table.
    pub(super) fn ids(&self, class: Class) -> Vec<u32> {
        match class {
            Class::Mini => self.mini.keys().filter_map(Result::ok).collect(),
            Class::Small => self.small.keys().filter_map(Result::ok).collect(),
            Class::Large => self.large.keys().filter_map(Result::ok).collect(),
        }
    }

    pub(super) fn map(&self, class: Class) -> &MapData {
        match class {
            Class::Mini => self.mini.map(),
            Class::Small => self.small.map(),
            Class::Large => self.large.map(),
        }
    }
}

/// Sections end to end in one arena (a 2-byte length, then the bytes),
/// with an index of slots by content hash: no allocation per block, and
/// nothing left behind in the heap the compile's allocations shared.
#[derive(Default)]
pub(super) struct BlockIds {
    hasher: Seeded,
    index: HashTable<Slot>,
    arena: Vec<u8>,
    /// Arena bytes no slot points at.
    garbage: usize,
    free: Vec<u32>,
    next: u32,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    /// Offset of the section's length in the arena.
    at: u32,
    id: u32,
    refs: u32,
}

/// A random seed: sections come from zone data.
struct Seeded(foldhash::fast::FixedState);

impl Default for Seeded {
    fn default() -> Self {
        let seed = std::collections::hash_map::RandomState::new().hash_one(0u8);
        Seeded(foldhash::fast::FixedState::with_seed(seed))
    }
}

impl std::fmt::Debug for BlockIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockIds")
            .field("blocks", &self.index.len())
            .field("next", &self.next)
            .finish()
    }
}

fn content_at(arena: &[u8], at: u32) -> &[u8] {
    let at = at as usize;
    let len = u16::from_le_bytes([arena[at], arena[at + 1]]) as usize;
    &arena[at + 2..at + 2 + len]
}

impl BlockIds {
    fn hash(&self, content: &[u8]) -> u64 {
        self.hasher.0.hash_one(content)
    }

    fn find(&self, content: &[u8]) -> Option<&Slot> {
        let arena = &self.arena[..];
        self.index
            .find(self.hash(content), |s| content_at(arena, s.at) == content)
    }

    fn find_mut(&mut self, content: &[u8]) -> Option<&mut Slot> {
        let hash = self.hash(content);
        let arena = &self.arena[..];
        self.index
            .find_mut(hash, |s| content_at(arena, s.at) == content)
    }

    fn insert(&mut self, content: &[u8], id: u32, refs: u32) {
        let at = u32::try_from(self.arena.len()).expect("an arena below 4 GiB");
        let len = u16::try_from(content.len()).expect("a section below 64 KiB");
        self.arena.extend_from_slice(&len.to_le_bytes());
        self.arena.extend_from_slice(content);
        let (hasher, arena) = (&self.hasher.0, &self.arena);
        self.index
            .insert_unique(hasher.hash_one(content), Slot { at, id, refs }, |s| {
                hasher.hash_one(content_at(arena, s.at))
            });
    }

    /// Takes a reference to `content`: its id, and whether the block is
    /// new (the loader writes it before any entry points at it).
    pub(super) fn acquire(&mut self, content: &[u8]) -> (u32, bool) {
        if let Some(slot) = self.find_mut(content) {
            slot.refs += 1;
            return (slot.id, false);
        }
        let id = self.free.pop().unwrap_or_else(|| {
            self.next += 1;
            self.next
        });
        self.insert(content, id, 1);
        (id, true)
    }

    /// Drops a reference to `content`; the id when it was the last one
    /// (the loader deletes the block, then calls [`recycle`](Self::recycle)).
    pub(super) fn release(&mut self, content: &[u8]) -> Option<u32> {
        let hash = self.hash(content);
        let arena = &self.arena[..];
        let Ok(mut entry) = self
            .index
            .find_entry(hash, |s| content_at(arena, s.at) == content)
        else {
            return None;
        };
        let slot = entry.get_mut();
        slot.refs -= 1;
        if slot.refs > 0 {
            return None;
        }
        let id = slot.id;
        entry.remove();
        self.garbage += 2 + content.len();
        self.compact_if_wasteful();
        Some(id)
    }

    /// Copies the live sections into a new arena once most of it is
    /// garbage.
    fn compact_if_wasteful(&mut self) {
        if self.garbage < 4096 || self.garbage * 2 < self.arena.len() {
            return;
        }
        let old = std::mem::take(&mut self.arena);
        let slots: Vec<Slot> = self.index.drain().collect();
        self.arena.reserve(old.len() - self.garbage);
        self.garbage = 0;
        for slot in slots {
            self.insert(content_at(&old, slot.at), slot.id, slot.refs);
        }
    }

    /// Makes a released id available again once its block is gone.
    pub(super) fn recycle(&mut self, id: u32) {
        self.free.push(id);
    }

    /// Records a reference to `content` held in a kernel table adopted
    /// from a previous controller, under the id the kernel entry names.
    pub(super) fn adopt(&mut self, content: &[u8], id: u32) {
        match self.find_mut(content) {
            Some(slot) => slot.refs += 1,
            None => self.insert(content, id, 1),
        }
        self.next = self.next.max(id);
    }

    /// Ends an adoption: ids below the highest adopted one that no entry
    /// uses become free. Returns the ids among `in_kernel` (the block
    /// map's keys) no entry uses: blocks to delete before their id is
    /// reused (no packet can read them: no entry points at them).
    pub(super) fn finish_adoption(&mut self, in_kernel: Vec<u32>) -> Vec<u32> {
        let used: std::collections::HashSet<u32> = self.index.iter().map(|s| s.id).collect();
        self.next = in_kernel.iter().copied().fold(self.next, u32::max);
        self.free = (1..=self.next).filter(|id| !used.contains(id)).collect();
        in_kernel
            .into_iter()
            .filter(|id| !used.contains(id))
            .collect()
    }

    pub(super) fn id(&self, content: &[u8]) -> Option<u32> {
        self.find(content).map(|s| s.id)
    }

    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    pub(super) fn clear(&mut self) {
        *self = BlockIds::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry of `www.example.` in slot `qtype`.
    fn entry(qtype: u8) -> EntryKey {
        EntryKey {
            name: b"\x03www\x07example\x00"[..].into(),
            qtype,
        }
    }

    #[test]
    fn sections_pick_their_block_table_by_size_and_reader() {
        use xdpdns_common::{INLINE_MAX, MINI_BLOCK_MAX, SMALL_BLOCK_MAX};
        let a = entry(qtype_slot::A);
        assert_eq!(Class::of(&a, &[1; INLINE_MAX + 1]), Class::Mini);
        assert_eq!(Class::of(&a, &[1; MINI_BLOCK_MAX]), Class::Mini);
        assert_eq!(Class::of(&a, &[1; MINI_BLOCK_MAX + 1]), Class::Small);
        assert_eq!(Class::of(&a, &[1; SMALL_BLOCK_MAX]), Class::Small);
        assert_eq!(Class::of(&a, &[1; SMALL_BLOCK_MAX + 1]), Class::Large);
        let signed_caa = entry(qtype_slot::of(257) | qtype_slot::SIGNED);
        assert_eq!(Class::of(&signed_caa, &[1; 40]), Class::Mini);
        // What the negative answers read stays in the small blocks.
        for slot in [
            qtype_slot::SOA,
            qtype_slot::SOA_SIGNED,
            qtype_slot::REFERRAL,
            qtype_slot::DENIAL_SIGNED,
            qtype_slot::GAPS_SIGNED,
            qtype_slot::GAP_SIGNED,
        ] {
            assert_eq!(Class::of(&entry(slot), &[1; 64]), Class::Small, "{slot}");
        }
    }

    use std::sync::Arc;

    #[test]
    fn shared_sections_share_an_id_until_the_last_reference_goes() {
        let mut b = BlockIds::default();
        let x: Arc<[u8]> = Arc::from(vec![1u8; 64]);
        let y: Arc<[u8]> = Arc::from(vec![2u8; 64]);
        let (ix, new) = b.acquire(&x);
        assert!(new);
        assert_eq!(
            b.acquire(&Arc::from(vec![1u8; 64])),
            (ix, false),
            "by content"
        );
        let (iy, new) = b.acquire(&y);
        assert!(new && iy != ix);
        assert_eq!(b.release(&x), None, "one reference left");
        assert_eq!(b.release(&x), Some(ix));
        assert_eq!(b.id(&x), None);
        // Not reused before the loader says the block is gone.
        let (iz, _) = b.acquire(&Arc::from(vec![3u8; 64]));
        assert!(iz != ix && iz != iy);
        b.recycle(ix);
        assert_eq!(b.acquire(&Arc::from(vec![4u8; 64])).0, ix);
    }

    #[test]
    fn an_adopted_table_keeps_its_ids_and_frees_the_rest() {
        let mut b = BlockIds::default();
        let x: Arc<[u8]> = Arc::from(vec![1u8; 64]);
        let y: Arc<[u8]> = Arc::from(vec![2u8; 64]);
        b.adopt(&x, 5);
        b.adopt(&x, 5);
        b.adopt(&y, 2);
        // Block 7 is in the kernel but no entry uses it.
        assert_eq!(b.finish_adoption(vec![2, 5, 7]), vec![7]);
        assert_eq!((b.id(&x), b.id(&y), b.len()), (Some(5), Some(2), 2));
        assert_eq!(b.release(&x), None, "two references were adopted");
        assert_eq!(b.release(&x), Some(5));
        // New sections get the free ids, never one still in use.
        let mut got: Vec<u32> = (0..6)
            .map(|i| b.acquire(&Arc::from(vec![10 + i; 64])).0)
            .collect();
        got.sort();
        assert_eq!(got, vec![1, 3, 4, 6, 7, 8]);
    }

    #[test]
    fn sections_keep_their_ids_and_counts_through_compaction() {
        let mut b = BlockIds::default();
        let section = |i: u32| -> Vec<u8> { (0..40 + i % 50).map(|j| (i * 7 + j) as u8).collect() };
        let ids: Vec<u32> = (0..2000).map(|i| b.acquire(&section(i)).0).collect();
        for i in (0..2000).step_by(2) {
            b.acquire(&section(i));
        }
        let full = b.arena.len();
        // Odd sections go (one reference each), even ones lose one of two.
        for i in 0..2000 {
            let last = b.release(&section(i));
            assert_eq!(last, (i % 2 == 1).then_some(ids[i as usize]));
        }
        assert!(b.arena.len() < full, "compacted");
        assert_eq!(b.len(), 1000);
        for i in 0..2000 {
            let want = (i % 2 == 0).then_some(ids[i as usize]);
            assert_eq!(b.id(&section(i)), want, "section {i}");
        }
        for i in (0..2000).step_by(2) {
            assert_eq!(b.release(&section(i)), Some(ids[i as usize]));
        }
        assert_eq!(b.len(), 0);
    }
}
