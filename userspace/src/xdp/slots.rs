//! The controller's side of the tiny-name slot table (its layout, and the
//! rule that keeps packets from reading a slot mid-write:
//! `xdpdns_common::slots`). It remembers a fingerprint of each slot's
//! key, finds a key's slot by it (confirmed against the kernel's copy, or
//! against what this change already put there), and says which writes
//! make a change: one write where nothing is answered from the table or
//! the slot keeps its key; else a free slot is given the new key
//! unmarked, then marked in use, and a deleted key's slot is unmarked
//! first, a grace period before.

use std::os::fd::{AsFd, AsRawFd};

use aya::maps::{Array, IterableMap, MapData};
use xdpdns_common::slots::{buckets_of, hash, words, TinySlot, BUCKET, IN_USE};
use xdpdns_common::{Answer, TinyKey};

use super::error::XdpError;
use super::grace::GraceClock;
use super::layout::bytes_of;

/// [`cuckoo`]'s holder of an empty slot.
const EMPTY: u32 = u32::MAX;

/// Places keys with the bucket pairs `choices` into `buckets` buckets:
/// each key into a free slot of the emptier of its buckets, else in the
/// place of a key of either, which then goes on to its own buckets (a
/// bounded random walk). The key held by each slot ([`EMPTY`]: none);
/// a key in none is left for the overflow.
fn cuckoo(choices: &[(u32, u32)], buckets: u32) -> Vec<u32> {
    /// Moves before a key is given up.
    const WALK: usize = 256;
    let bucket = BUCKET as u32;
    let mut holder = vec![EMPTY; (buckets * bucket) as usize];
    let mut random = 0x2545_F491_u32;
    for i in 0..choices.len() as u32 {
        let mut key = i;
        for step in 0..=WALK {
            let (a, b) = choices[key as usize];
            let slots = |b: u32| b * bucket..(b + 1) * bucket;
            let free = |b: u32| slots(b).filter(|&at| holder[at as usize] == EMPTY).count();
            let (fa, fb) = (free(a), free(b));
            if fa + fb > 0 {
                let b = if fb > fa { b } else { a };
                let at = slots(b)
                    .find(|&at| holder[at as usize] == EMPTY)
                    .expect("a free slot");
                holder[at as usize] = key;
                break;
            }
            if step == WALK {
                break;
            }
            // xorshift: which of the eight slots gives way.
            random ^= random << 13;
            random ^= random >> 17;
            random ^= random << 5;
            let b = if random & 1 == 0 { a } else { b };
            let at = (b * bucket + (random >> 1) % bucket) as usize;
            key = std::mem::replace(&mut holder[at], key);
        }
    }
    holder
}

/// The slot array mapped into the controller for one write, unmapped
/// after it: mapped for good, its pages would count as the process's.
struct Mapped {
    at: *mut TinySlot,
    slots: usize,
    len: usize,
}

impl Mapped {
    fn new(fd: std::os::fd::RawFd, slots: usize) -> Result<Self, XdpError> {
        let page = 4096;
        let len = (slots * std::mem::size_of::<TinySlot>()).div_ceil(page) * page;
        // SAFETY: a shared mapping of the map's own pages (the map is
        // BPF_F_MMAPABLE, `len` its size rounded to a page); unmapped on
        // drop.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if at == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            return Err(XdpError::Slots(format!("mapping the slots: {e}")));
        }
        Ok(Mapped {
            at: at.cast(),
            slots,
            len,
        })
    }

    fn slots(&mut self) -> &mut [TinySlot] {
        // SAFETY: `slots` slots of the array's layout (72 bytes apart,
        // page-aligned start) lie in the mapping.
        unsafe { std::slice::from_raw_parts_mut(self.at, self.slots) }
    }
}

// SAFETY: the mapping is owned by its `Mapped` alone (no other pointer
// into it escapes a borrow of it), so it may move to another thread.
unsafe impl Send for Mapped {}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping `new` made, no longer borrowed.
        unsafe { libc::munmap(self.at.cast(), self.len) };
    }
}

/// A slot's mark: 0 unused; else its key's fingerprint (bit 0 set), with
/// [`ABSENT`] while its entry is deleted in place. Two bytes a slot: one
/// key in 16k of another matches it, and is told apart by reading the
/// kernel's slot.
type Mark = u16;
const ABSENT: Mark = 1 << 15;

/// From all of `h`, mixed again: the keys of one bucket share the bits
/// that chose it.
fn fingerprint(h: u64) -> Mark {
    let mixed = (h ^ h >> 29).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((mixed >> 48) as u16 & !ABSENT) | 1
}

pub(super) struct Slots {
    map: Array<MapData, TinySlot>,
    marks: Vec<Mark>,
    buckets: u32,
    /// Slots holding an entry that is not absent.
    live: usize,
    /// Slots holding a key (live or absent).
    used: usize,
    /// The slots are an adopted table's, not yet read back: what they
    /// hold is unknown until [`Slots::learn`].
    unknown: bool,
    /// Slots given a new key since the last write: the kernel's copy
    /// still holds the old one.
    touched: std::collections::HashMap<u32, TinyKey>,
    /// The array mapped while a whole table is written in chunks
    /// (mapped anew for each, a million-slot table faulted its pages in
    /// twenty times over), until [`Slots::unmap`].
    mapped: Option<Mapped>,
}

/// How a slot is to be written (see the module's rule).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Its old (deleted) key unmarked: it matches no key any more.
    Retire(u32, TinySlot),
    /// The new key, unmarked.
    Prepare(u32, TinySlot),
    /// The slot as packets are to see it.
    Final(u32, TinySlot),
}

impl Slots {
    pub(super) fn new(map: Array<MapData, TinySlot>) -> Self {
        let slots = map.len() as usize;
        Slots {
            buckets: (slots / BUCKET) as u32,
            marks: vec![0; slots],
            live: 0,
            used: 0,
            unknown: false,
            touched: Default::default(),
            mapped: None,
            map,
        }
    }

    /// The number of buckets (the kernel's `XdpConfig::tiny_buckets`).
    pub(super) fn buckets(&self) -> u32 {
        self.buckets
    }

    /// Slots holding an entry.
    pub(super) fn live(&self) -> usize {
        self.live
    }

    /// Whether no slot holds a key.
    pub(super) fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// Places `keys` (all distinct, none in the table) into an empty
    /// table, moving keys already placed to their other bucket to make
    /// room (a bounded random walk, as in cuckoo hashing): with nine
    /// slots in ten used, almost every key finds one, where taking the
    /// emptier bucket alone leaves about 4 % without. The slot of each
    /// key, or `None` (the overflow map). Nothing is answered from the
    /// table meanwhile: the caller writes each key's slot once.
    pub(super) fn place_all(&mut self, keys: &[TinyKey]) -> Vec<Option<u32>> {
        let mut slot_of = vec![None; keys.len()];
        if self.buckets < 2 || !self.is_empty() {
            return slot_of;
        }
        let n = self.buckets;
        let choices: Vec<(u32, u32)> = keys.iter().map(|k| buckets_of(hash(words(k)), n)).collect();
        let holder = cuckoo(&choices, n);
        for (at, &key) in holder.iter().enumerate() {
            if key != EMPTY {
                slot_of[key as usize] = Some(at as u32);
                self.marks[at] = fingerprint(hash(words(&keys[key as usize])));
                self.live += 1;
                self.used += 1;
            }
        }
        slot_of
    }

    pub(super) fn map(&self) -> &MapData {
        self.map.map()
    }

    /// The slots of `key`'s two buckets, and its fingerprint.
    /// (At least two buckets.)
    fn candidates(&self, key: &TinyKey) -> ([u32; 2 * BUCKET], Mark) {
        let h = hash(words(key));
        let (a, b) = buckets_of(h, self.buckets);
        let slot = |i: usize| match i < BUCKET {
            true => a * BUCKET as u32 + i as u32,
            false => b * BUCKET as u32 + (i - BUCKET) as u32,
        };
        (std::array::from_fn(slot), fingerprint(h))
    }

    /// The slot holding `key` (live or absent), confirmed by the
    /// kernel's copy.
    pub(super) fn find(&self, key: &TinyKey) -> Result<Option<(u32, bool)>, XdpError> {
        debug_assert!(!self.unknown, "the adopted slots are read back first");
        if self.buckets < 2 {
            return Ok(None);
        }
        let (slots, fp) = self.candidates(key);
        for at in slots {
            let mark = self.marks[at as usize];
            if mark & !ABSENT != fp {
                continue;
            }
            let held = match self.touched.get(&at) {
                Some(k) => *k == *key,
                None => {
                    let slot = self.map.get(&at, 0)?;
                    slot.in_use() && slot.base_key() == *key
                }
            };
            if held {
                return Ok(Some((at, mark & ABSENT != 0)));
            }
        }
        Ok(None)
    }

    /// The kernel's value for `key`, if it has a slot (an absent one
    /// reads as `Some(None)`).
    pub(super) fn get(&self, key: &TinyKey) -> Result<Option<Option<Answer>>, XdpError> {
        Ok(match self.find(key)? {
            None => None,
            Some((_, true)) => Some(None),
            Some((at, false)) => Some(Some(self.map.get(&at, 0)?.answer)),
        })
    }

    /// Places `answer` under `key`, which has no slot yet: into an
    /// unused or absent slot of the emptier of its buckets, by the writes
    /// added to `steps`; false when both are full (the overflow map).
    /// `answering`: packets may be reading the table (then `key` must be
    /// one the live overlay generation holds).
    pub(super) fn place(
        &mut self,
        key: &TinyKey,
        answer: Answer,
        answering: bool,
        steps: &mut Vec<Step>,
    ) -> Result<bool, XdpError> {
        if self.buckets < 2 {
            return Ok(false);
        }
        let (slots, fp) = self.candidates(key);
        let (first, second) = slots.split_at(BUCKET);
        let mark = |at: &u32| self.marks[*at as usize];
        let open = |bucket: &[u32]| {
            bucket
                .iter()
                .filter(|at| mark(at) == 0 || mark(at) & ABSENT != 0)
                .count()
        };
        let (emptier, other) = match open(second) > open(first) {
            true => (second, first),
            false => (first, second),
        };
        // An unused slot before a deleted key's: it needs no retiring.
        let unused = emptier.iter().chain(other).find(|at| mark(at) == 0);
        let absent = emptier
            .iter()
            .chain(other)
            .find(|at| mark(at) & ABSENT != 0);
        let Some(&at) = unused.or(absent) else {
            return Ok(false);
        };
        let slot = TinySlot::new(*key, answer);
        if answering {
            // A deleted key's slot: unmarked first, and a grace period
            // before the new key is written (a packet may be between
            // reading its words, or have matched it).
            if self.marks[at as usize] != 0 {
                let mut old = match self.touched.get(&at) {
                    Some(k) => TinySlot::new(*k, Answer::absent()),
                    None => self.map.get(&at, 0)?,
                };
                old.key.name[0] &= !IN_USE;
                steps.push(Step::Retire(at, old));
            }
            let mut unmarked = slot;
            unmarked.key.name[0] &= !IN_USE;
            steps.push(Step::Prepare(at, unmarked));
        }
        steps.push(Step::Final(at, slot));
        self.touched.insert(at, *key);
        if self.marks[at as usize] == 0 {
            self.used += 1;
        }
        self.marks[at as usize] = fp;
        self.live += 1;
        Ok(true)
    }

    /// The write that gives slot `at` (holding `key`, live or absent)
    /// the value `answer`.
    pub(super) fn update(&mut self, at: u32, key: &TinyKey, answer: Answer) -> Step {
        let mark = &mut self.marks[at as usize];
        if *mark & ABSENT != 0 {
            *mark &= !ABSENT;
            self.live += 1;
        }
        Step::Final(at, TinySlot::new(*key, answer))
    }

    /// The write that deletes the entry in slot `at` (holding `key`):
    /// while answering, the key stays with an absent value (a packet
    /// probing for another key may be reading it); else the slot is
    /// emptied.
    pub(super) fn remove(&mut self, at: u32, key: &TinyKey, answering: bool) -> Step {
        let mark = &mut self.marks[at as usize];
        if *mark & ABSENT == 0 {
            self.live -= 1;
        }
        if answering {
            *mark |= ABSENT;
            Step::Final(at, TinySlot::new(*key, Answer::absent()))
        } else {
            *mark = 0;
            self.used -= 1;
            Step::Final(at, TinySlot::EMPTY)
        }
    }

    /// Writes `steps` in order: every slot's retiring, then every new
    /// key unmarked, then the final values, one batch each. While
    /// `answering`, a slot's last final value is its only one (a deletion
    /// followed by another key's placement in one change never shows the
    /// deleted key again); else the steps are written as they come.
    pub(super) fn write(
        &mut self,
        steps: &[Step],
        answering: bool,
        grace: &GraceClock,
    ) -> Result<(), XdpError> {
        self.touched.clear();
        let fd = self.map.map().fd().as_fd().as_raw_fd();
        if !answering && !steps.is_empty() {
            // Nothing reads the table: straight into the map's memory, a
            // copy a slot where the batch call takes a system call's worth.
            let mapped = match &mut self.mapped {
                Some(mapped) => mapped,
                None => self.mapped.insert(Mapped::new(fd, self.marks.len())?),
            };
            let slots = mapped.slots();
            for step in steps {
                if let Step::Final(at, slot) = step {
                    slots[*at as usize] = *slot;
                }
            }
            return Ok(());
        }
        let mut last = std::collections::HashMap::new();
        if answering {
            for (i, step) in steps.iter().enumerate() {
                if let Step::Final(at, _) = step {
                    last.insert(*at, i);
                }
            }
        }
        let phases = if answering { 0..3 } else { 2..3 };
        for phase in phases {
            if phase == 1 && steps.iter().any(|s| matches!(s, Step::Retire(..))) {
                grace.sync().map_err(XdpError::Grace)?;
            }
            let (mut keys, mut values) = (Vec::new(), Vec::new());
            for (i, step) in steps.iter().enumerate() {
                if matches!(step, Step::Final(at, _) if answering && last[at] != i) {
                    continue;
                }
                let (p, at, slot) = match step {
                    Step::Retire(at, s) => (0, at, s),
                    Step::Prepare(at, s) => (1, at, s),
                    Step::Final(at, s) => (2, at, s),
                };
                if p == phase {
                    keys.extend_from_slice(&at.to_ne_bytes());
                    values.extend_from_slice(bytes_of(slot));
                }
            }
            const CHUNK: usize = 4096;
            let size = std::mem::size_of::<TinySlot>();
            for (k, v) in keys.chunks(CHUNK * 4).zip(values.chunks(CHUNK * size)) {
                let count = (k.len() / 4) as u32;
                let (done, result) = super::sys::update_batch(fd, k, v, count);
                result.map_err(|e| XdpError::Slots(format!("{done} of {count} written: {e}")))?;
            }
        }
        Ok(())
    }

    /// Drops the mapping a write made (its pages would count as the
    /// process's).
    pub(super) fn unmap(&mut self) {
        self.mapped = None;
    }

    /// Empties every slot in use (nothing is answered from the table).
    /// The whole array is zeroed, whatever the marks say (a failed
    /// write may have left them behind the kernel's copy).
    pub(super) fn clear(&mut self) -> Result<(), XdpError> {
        let fd = self.map.map().fd().as_fd().as_raw_fd();
        let mut mapped = Mapped::new(fd, self.marks.len())?;
        mapped.slots().fill(TinySlot::EMPTY);
        drop(mapped);
        self.unknown = false;
        self.touched.clear();
        self.marks.iter_mut().for_each(|m| *m = 0);
        self.live = 0;
        self.used = 0;
        Ok(())
    }

    /// Marks the slots as an adopted table's: read back when first
    /// needed ([`Slots::learn`]), not while a restart waits to answer.
    pub(super) fn adopted(&mut self) {
        self.unknown = true;
    }

    /// Reads the slots back from the kernel if they are an adopted
    /// table's (the writes and lookups of a table need them known).
    pub(super) fn learn(&mut self) -> Result<(), XdpError> {
        match self.unknown {
            true => self.reload(),
            false => Ok(()),
        }
    }

    /// Learns the slots from the kernel's copy.
    fn reload(&mut self) -> Result<(), XdpError> {
        let fd = self.map.map().fd().as_fd().as_raw_fd();
        let mut mapped = Mapped::new(fd, self.marks.len())?;
        self.unknown = false;
        self.live = 0;
        self.used = 0;
        for (slot, mark) in mapped.slots().iter().zip(&mut self.marks) {
            *mark = 0;
            if slot.in_use() {
                self.used += 1;
                *mark = fingerprint(hash(words(&slot.base_key())));
                match slot.answer.is_absent() {
                    true => *mark |= ABSENT,
                    false => self.live += 1,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nine_slots_in_ten_are_filled_each_key_once_in_one_of_its_buckets() {
        let buckets = 2_500u32;
        let keys = 9_000u32;
        let mut seed = 0x1234_5678_9abc_def0u64;
        let choices: Vec<(u32, u32)> = (0..keys)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                buckets_of(seed, buckets)
            })
            .collect();
        let holder = cuckoo(&choices, buckets);
        let mut seen = vec![false; keys as usize];
        for (at, &key) in holder.iter().enumerate() {
            if key == EMPTY {
                continue;
            }
            assert!(!seen[key as usize], "key {key} twice");
            seen[key as usize] = true;
            let b = at as u32 / BUCKET as u32;
            let (x, y) = choices[key as usize];
            assert!(b == x || b == y, "key {key} in bucket {b}, not {x} or {y}");
        }
        let placed = seen.iter().filter(|&&s| s).count();
        assert!(placed >= 8_990, "{placed} of {keys} placed");
    }
}
