//! The tiny-name base table as slots in an array map: a hash table with
//! two candidate buckets of [`BUCKET`] slots per key, laid out by the
//! controller and probed by the kernel.
//!
//! Why not the kernel's hash map: each of its elements carries a 48-byte
//! header and an 8-byte list node beside a 72-byte key and value, and its
//! bucket array takes 16 bytes a slot for a power of two above the
//! capacity: about 150 bytes an entry. A slot here is the key and value
//! alone (72 bytes), at most nine in ten in use.
//!
//! A slot never changes while a packet can read it for its own key: the
//! controller writes slots only while the kernel answers nothing, or for
//! a key the live overlay generation holds (the kernel reads the overlay
//! first). A slot, once given a key, keeps it until the kernel answers
//! nothing again: a deleted entry keeps its key with an absent value. A
//! key new to the table meanwhile takes a free slot, written first
//! without [`IN_USE`] (it matches no lookup), then with it (a deleted
//! key's slot is unmarked first, a grace period before); or it goes to
//! the tiny-name hash map, the table's overflow. So a packet probing for
//! another key never matches a half-written key: the kernel reads a
//! slot's first word (which holds the mark) before the others.

use crate::{Answer, TinyKey};

/// Slots per bucket. Two buckets per key: a hit compares at most eight
/// keys, a miss exactly eight.
pub const BUCKET: usize = 4;

/// Slots of a table for `capacity` entries: nine in ten used at most
/// (two-choice buckets of four leave about 4 % of the keys without a
/// slot at that fill; they go to the overflow), whole buckets.
pub const fn slots_for(capacity: u32) -> u32 {
    let slots = capacity as u64 * 10 / 9;
    let buckets = slots.div_ceil(BUCKET as u64);
    let buckets = if buckets < 2 { 2 } else { buckets };
    let max = (u32::MAX as u64 / BUCKET as u64) - 1;
    (if buckets > max { max } else { buckets }) as u32 * BUCKET as u32
}

/// Bit of a slot key's first byte that marks it in use. Base keys never
/// have it (it is [`layer`](crate::layer)'s bit, zero in the base), so an
/// empty slot (all zero, which is also the root name's EXIST key) matches
/// no key.
pub const IN_USE: u8 = 0x40;

/// A slot: the base key with [`IN_USE`] set, and its answer.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TinySlot {
    pub key: TinyKey,
    pub answer: Answer,
}

impl TinySlot {
    /// An unused slot.
    pub const EMPTY: TinySlot = TinySlot {
        key: TinyKey {
            name: [0; crate::TINY_NAME_MAX],
        },
        answer: Answer::new(0, 0, 0),
    };

    /// The slot holding `answer` under base key `key`.
    pub const fn new(key: TinyKey, answer: Answer) -> Self {
        let mut key = key;
        key.name[0] |= IN_USE;
        TinySlot { key, answer }
    }

    pub const fn in_use(&self) -> bool {
        self.key.name[0] & IN_USE != 0
    }

    /// The base key the slot holds (if in use).
    pub const fn base_key(&self) -> TinyKey {
        let mut key = self.key;
        key.name[0] &= !IN_USE;
        key
    }
}

// SAFETY: plain `repr(C)` bytes and integers, no padding, any bit
// pattern valid.
#[cfg(feature = "user")]
unsafe impl aya::Pod for TinySlot {}

/// The key's four words, little-endian, as the kernel reads them.
pub const fn words(key: &TinyKey) -> [u64; 4] {
    let n = &key.name;
    let mut w = [0u64; 4];
    let mut i = 0;
    while i < 4 {
        let mut b = [0u8; 8];
        let mut j = 0;
        while j < 8 {
            b[j] = n[i * 8 + j];
            j += 1;
        }
        w[i] = u64::from_le_bytes(b);
        i += 1;
    }
    w
}

/// The hash of a base key's words (multiply and fold: a few instructions
/// in the kernel, well spread over the slot range).
#[inline(always)]
pub const fn hash(w: [u64; 4]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = 0x2545_F491_4F6C_DD1D_u64;
    let mut i = 0;
    while i < 4 {
        h = (h ^ w[i]).wrapping_mul(K);
        h ^= h >> 29;
        i += 1;
    }
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^ (h >> 31)
}

/// The two buckets of a key with hash `h` in a table of `buckets`
/// buckets (at least two): distinct, below `buckets`.
#[inline(always)]
pub const fn buckets_of(h: u64, buckets: u32) -> (u32, u32) {
    let n = buckets as u64;
    let first = ((h & 0xffff_ffff) * n) >> 32;
    let mut second = ((h >> 32) * n) >> 32;
    if second == first {
        second = if first + 1 == n { 0 } else { first + 1 };
    }
    (first as u32, second as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> TinyKey {
        let mut name = [0u8; crate::TINY_NAME_MAX];
        name[0] = 6;
        name[1..7].copy_from_slice(&[b'i', b'0' + (i % 10) as u8, b'.', b'g', 0, 0]);
        name[5..9].copy_from_slice(&i.to_le_bytes());
        TinyKey { name }
    }

    #[test]
    fn buckets_are_two_distinct_ones_in_range() {
        for n in [2u32, 3, 7, 1000, 1 << 20] {
            for i in 0..2000 {
                let (a, b) = buckets_of(hash(words(&key(i))), n);
                assert!(a < n && b < n && a != b, "{n} {i}: {a} {b}");
            }
        }
    }

    #[test]
    fn similar_keys_spread_over_the_buckets() {
        let n = 1024u32;
        let mut count = [0u32; 1024];
        for i in 0..(n * 16) {
            let (a, _) = buckets_of(hash(words(&key(i))), n);
            count[a as usize] += 1;
        }
        let max = *count.iter().max().unwrap();
        assert!(max < 48, "16 a bucket on average, the fullest has {max}");
    }

    #[test]
    fn slots_are_whole_buckets_with_a_tenth_spare() {
        assert_eq!(slots_for(0), 8);
        assert_eq!(slots_for(900), 1000);
        assert_eq!(slots_for(901) % BUCKET as u32, 0);
        assert!(slots_for(u32::MAX) > u32::MAX / 2);
        let slot = TinySlot::new(key(5), Answer::new(4, 1, 0));
        assert!(slot.in_use() && !TinySlot::EMPTY.in_use());
        assert_eq!(slot.base_key(), key(5));
        assert_eq!(core::mem::size_of::<TinySlot>(), 72);
    }
}
