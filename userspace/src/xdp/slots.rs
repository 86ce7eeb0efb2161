//! The controller's side of the tiny-name slot table (its layout, and the
//! rule that keeps packets from reading a slot mid-write:
//! `xdpdns_common::slots`). It remembers a fingerprint of each slot's
//! key, finds a key's slot by it (confirmed against the kernel's copy),
//! and says which writes make a change: one write where nothing is
//! answered from the table or the slot keeps its key, else a slot is
//! first made to match no key, then given the new key unmarked, then
//! marked in use.

use std::os::fd::{AsFd, AsRawFd};

use aya::maps::{Array, IterableMap, MapData};
use xdpdns_common::slots::{buckets_of, hash, words, TinySlot, BUCKET, IN_USE};
use xdpdns_common::{Answer, TinyKey};

use super::error::XdpError;
use super::writer::bytes_of;

/// A slot's mark: 0 unused; else its key's fingerprint (bit 0 set), with
/// [`ABSENT`] while its entry is deleted in place.
type Mark = u32;
const ABSENT: Mark = 1 << 31;

fn fingerprint(h: u64) -> Mark {
    ((h >> 24) as u32 & !ABSENT) | 1
}

pub(super) struct Slots {
    map: Array<MapData, TinySlot>,
    marks: Vec<Mark>,
    buckets: u32,
    /// Slots holding an entry that is not absent.
    live: usize,
}

/// How a slot is to be written (see the module's rule).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Its old key unmarked: it matches no key any more.
    Retire(u32, TinySlot),
    /// The new key, unmarked.
    Prepare(u32, TinySlot),
    /// The slot as packets are to see it.
    Final(u32, TinySlot),
}

/// Where a key's entry goes.
pub(super) enum Placed {
    /// Written into the slot table by these steps.
    Slot(Vec<Step>),
    /// Both its buckets are full: the overflow map.
    Overflow,
}

impl Slots {
    pub(super) fn new(map: Array<MapData, TinySlot>) -> Self {
        let slots = map.len() as usize;
        Slots {
            buckets: (slots / BUCKET) as u32,
            marks: vec![0; slots],
            live: 0,
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

    pub(super) fn map(&self) -> &MapData {
        self.map.map()
    }

    /// The slots of `key`'s two buckets, and its fingerprint.
    fn candidates(&self, key: &TinyKey) -> (impl Iterator<Item = u32>, Mark) {
        let h = hash(words(key));
        let (a, b) = buckets_of(h, self.buckets.max(2));
        let n = self.buckets;
        let slots = [a, b]
            .into_iter()
            .filter(move |&b| b < n)
            .flat_map(|b| (0..BUCKET as u32).map(move |i| b * BUCKET as u32 + i));
        (slots, fingerprint(h))
    }

    /// The slot holding `key` (live or absent), confirmed by the
    /// kernel's copy.
    pub(super) fn find(&self, key: &TinyKey) -> Result<Option<(u32, bool)>, XdpError> {
        if self.buckets < 2 {
            return Ok(None);
        }
        let (slots, fp) = self.candidates(key);
        for at in slots {
            let mark = self.marks[at as usize];
            if mark & !ABSENT != fp {
                continue;
            }
            let slot = self.map.get(&at, 0)?;
            if slot.in_use() && slot.base_key() == *key {
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
    /// unused or absent slot of the emptier of its buckets. `answering`:
    /// packets may be reading the table (then `key` must be one the live
    /// overlay generation holds).
    pub(super) fn place(
        &mut self,
        key: &TinyKey,
        answer: Answer,
        answering: bool,
    ) -> Result<Placed, XdpError> {
        if self.buckets < 2 {
            return Ok(Placed::Overflow);
        }
        let (slots, fp) = self.candidates(key);
        let slots: Vec<u32> = slots.collect();
        let free = |bucket: &[u32]| {
            let open: Vec<u32> = bucket
                .iter()
                .copied()
                .filter(|&at| self.marks[at as usize] & ABSENT != 0 || self.marks[at as usize] == 0)
                .collect();
            open
        };
        let (first, second) = slots.split_at(BUCKET);
        let (a, b) = (free(first), free(second));
        let open = if b.len() > a.len() { b } else { a };
        // An unused slot before an absent one: it needs no retiring.
        let Some(&at) = open
            .iter()
            .find(|&&at| self.marks[at as usize] == 0)
            .or(open.first())
        else {
            return Ok(Placed::Overflow);
        };
        let slot = TinySlot::new(*key, answer);
        let mut steps = Vec::new();
        if answering {
            if self.marks[at as usize] != 0 {
                let mut old = self.map.get(&at, 0)?;
                old.key.name[0] &= !IN_USE;
                steps.push(Step::Retire(at, old));
            }
            let mut unmarked = slot;
            unmarked.key.name[0] &= !IN_USE;
            steps.push(Step::Prepare(at, unmarked));
        }
        steps.push(Step::Final(at, slot));
        self.marks[at as usize] = fp;
        self.live += 1;
        Ok(Placed::Slot(steps))
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
            Step::Final(at, TinySlot::EMPTY)
        }
    }

    /// Writes `steps` in order: every slot's retiring, then every new
    /// key unmarked, then the final values, one batch each. A slot's
    /// last final value is its only one (a deletion followed by another
    /// key's placement in one change never shows the deleted key again).
    pub(super) fn write(&self, steps: &[Step]) -> Result<(), XdpError> {
        let fd = self.map.map().fd().as_fd().as_raw_fd();
        let mut last = std::collections::HashMap::new();
        for (i, step) in steps.iter().enumerate() {
            if let Step::Final(at, _) = step {
                last.insert(*at, i);
            }
        }
        for phase in 0..3 {
            let (mut keys, mut values) = (Vec::new(), Vec::new());
            for (i, step) in steps.iter().enumerate() {
                if matches!(step, Step::Final(at, _) if last[at] != i) {
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

    /// Empties every slot in use (nothing is answered from the table).
    pub(super) fn clear(&mut self) -> Result<(), XdpError> {
        let steps: Vec<Step> = (0..self.marks.len() as u32)
            .filter(|&at| self.marks[at as usize] != 0)
            .map(|at| Step::Final(at, TinySlot::EMPTY))
            .collect();
        self.write(&steps)?;
        self.marks.iter_mut().for_each(|m| *m = 0);
        self.live = 0;
        Ok(())
    }

    /// Learns the slots from the kernel's copy (an adopted table).
    pub(super) fn reload(&mut self) -> Result<(), XdpError> {
        let fd = self.map.map().fd().as_fd().as_raw_fd();
        let size = std::mem::size_of::<TinySlot>();
        let (mut at, mut values) = (0u32, Vec::new());
        self.live = 0;
        while (at as usize) < self.marks.len() {
            let read = super::sys::lookup_array_batch(fd, at, 8192, size, &mut values)
                .map_err(|e| XdpError::Slots(format!("reading slot {at}: {e}")))?;
            if read == 0 {
                break;
            }
            for (i, v) in values.chunks_exact(size).enumerate() {
                // SAFETY: `TinySlot` is plain data of exactly `size` bytes.
                let slot: TinySlot = unsafe { std::ptr::read_unaligned(v.as_ptr().cast()) };
                let mark = &mut self.marks[at as usize + i];
                *mark = 0;
                if slot.in_use() {
                    *mark = fingerprint(hash(words(&slot.base_key())));
                    match slot.answer.is_absent() {
                        true => *mark |= ABSENT,
                        false => self.live += 1,
                    }
                }
            }
            at += read;
        }
        Ok(())
    }
}
