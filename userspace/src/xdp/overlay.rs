//! Changes made live through overlay generations
//! (`xdpdns_common::layer`): each change writes every entry not yet
//! folded into the base under a new generation and makes it live with
//! one config write, without waiting for anything. What a change leaves
//! behind is cleaned up as RCU grace periods pass on their own thread
//! (`grace`): older generations are removed once no packet can reach
//! them, entries that have been reachable in the overlay for a grace
//! period are folded into the base (no packet reads their base element
//! any more), and the overlay is turned off once nothing is left in it.
//! So a change is answered by the kernel as soon as it is written, and no
//! element a packet may still read is ever rewritten or freed.

use std::collections::HashSet;
use std::os::fd::{AsFd, AsRawFd};

use aya::maps::IterableMap;

use xdpdns_common::{layer, Answer, OverlayKey};

use super::blocks::Class;
use super::error::XdpError;
use super::generations::{Pending, Written};
use super::layout::{bytes_of, split_key, table_of, Split};
use super::program::FastPath;
use super::writer::Batch;
use crate::answers::compile::{Compiled, EntryKey, TableDelta};

/// Blocks released while the overlay is on wait for it to be off this
/// long at most: past this many, a change folds everything first.
const LIMBO_MAX: usize = 4096;

impl FastPath {
    /// Whether the overlay has anything left to clean up
    /// ([`settle_overlay`](Self::settle_overlay) is then due as grace
    /// periods pass).
    pub fn overlay_busy(&self) -> bool {
        let o = &self.overlay;
        o.live != 0 || !o.written.is_empty() || !o.freeing.is_empty()
    }

    /// Readies the overlay for `delta` before its blocks are taken and
    /// released: cleans up what it can, and folds everything into the
    /// base first when the overlay lacks room. `false` when even then
    /// `delta` does not fit (it is written while the kernel passes
    /// everything).
    pub(super) fn prepare_overlay(&mut self, delta: &TableDelta) -> Result<bool, XdpError> {
        self.settle_overlay()?;
        if self.overlay.limbo.len() > LIMBO_MAX || !self.overlay_has_room(delta) {
            self.fold_all()?;
        }
        Ok(self.overlay_has_room(delta))
    }

    /// Makes `delta` live through a new overlay generation (after
    /// [`prepare_overlay`](Self::prepare_overlay) said it fits);
    /// `released` are the blocks it leaves unreferenced.
    pub(super) fn apply_through_overlay(
        &mut self,
        delta: &TableDelta,
        left_out: &HashSet<EntryKey>,
        released: Vec<(Class, u32)>,
    ) -> Result<(), XdpError> {
        self.overlay.limbo.extend(released);
        for (key, c) in &delta.upsert {
            let value = (!left_out.contains(key)).then(|| c.clone());
            self.stage(key, value);
        }
        for key in &delta.delete {
            self.stage(key, None);
        }
        self.publish()
    }

    fn stage(&mut self, key: &EntryKey, value: Option<Compiled>) {
        let since = self.overlay.pending.get(key).and_then(|p| p.since);
        self.overlay
            .pending
            .insert(key.clone(), Pending { value, since });
    }

    /// Whether the pending entries with `delta` fit a new generation
    /// beside what the overlay tables hold.
    fn overlay_has_room(&self, delta: &TableDelta) -> bool {
        let mut need = [0usize; 3];
        let keys = delta.upsert.iter().map(|(k, _)| k).chain(&delta.delete);
        for key in keys.filter(|k| !self.overlay.pending.contains_key(*k)) {
            need[table_of(key)] += 1;
        }
        for key in self.overlay.pending.keys() {
            need[table_of(key)] += 1;
        }
        (0..3).all(|t| self.overlay.elements[t] + need[t] <= self.overlay_room[t])
    }

    /// Writes every pending entry under a new generation and makes it
    /// live (or turns the overlay off when none is pending).
    fn publish(&mut self) -> Result<(), XdpError> {
        if self.overlay.pending.is_empty() {
            return self.overlay_off();
        }
        let generation = self.next_generation();
        let entries: Vec<(EntryKey, Option<Compiled>)> = self
            .overlay
            .pending
            .iter()
            .map(|(k, p)| (k.clone(), p.value.clone()))
            .collect();
        self.write_generation(generation, &entries)?;
        self.current.overlay = generation;
        self.current.table_tag = 0;
        self.config.set(0, self.current, 0)?;
        let epoch = self.grace_clock.request();
        for p in self.overlay.pending.values_mut() {
            p.since.get_or_insert(epoch);
        }
        if let Some(old) = self.overlay.written.back_mut() {
            old.unreachable_after.get_or_insert(epoch);
        }
        self.overlay.written.push_back(Written {
            generation,
            keys: entries.into_iter().map(|(k, _)| k).collect(),
            unreachable_after: None,
        });
        self.overlay.live = generation;
        Ok(())
    }

    fn next_generation(&mut self) -> u32 {
        self.overlay.last = self.overlay.last.wrapping_add(1).max(1);
        self.overlay.last
    }

    /// Turns the overlay off once the base holds everything: the kernel
    /// reads the base alone, and the table's tag is recorded.
    fn overlay_off(&mut self) -> Result<(), XdpError> {
        if self.overlay.live == 0 {
            return Ok(());
        }
        self.current.overlay = 0;
        self.current.table_tag = self.overlay.tag;
        self.config.set(0, self.current, 0)?;
        let epoch = self.grace_clock.request();
        if let Some(old) = self.overlay.written.back_mut() {
            old.unreachable_after.get_or_insert(epoch);
        }
        self.overlay.live = 0;
        let limbo = std::mem::take(&mut self.overlay.limbo);
        if !limbo.is_empty() {
            self.overlay.freeing.push((epoch, limbo));
        }
        Ok(())
    }

    /// What can be cleaned up without waiting: generations no packet can
    /// reach are removed, blocks past their grace period freed, entries
    /// reachable in the overlay for a grace period folded into the base,
    /// and the overlay turned off when nothing is left pending.
    pub fn settle_overlay(&mut self) -> Result<(), XdpError> {
        while let Some(w) = self.overlay.written.front() {
            match w.unreachable_after {
                Some(e) if self.grace_clock.passed(e) => {
                    let w = self.overlay.written.pop_front().expect("front");
                    self.remove_generation(&w)?;
                }
                _ => break,
            }
        }
        let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.overlay.freeing)
            .into_iter()
            .partition(|(e, _)| self.grace_clock.passed(*e));
        self.overlay.freeing = waiting;
        for (_, blocks) in ready {
            self.free_blocks(blocks);
        }
        let settled: Vec<EntryKey> = self
            .overlay
            .pending
            .iter()
            .filter(|(_, p)| p.since.is_some_and(|e| self.grace_clock.passed(e)))
            .map(|(k, _)| k.clone())
            .collect();
        if !settled.is_empty() {
            self.fold(&settled)?;
            if self.overlay.pending.is_empty() {
                self.overlay_off()?;
            }
        }
        Ok(())
    }

    /// Waits for what is pending and folds all of it into the base, the
    /// overlay off and emptied (a stop with a pinned table, a change too
    /// large for the room left).
    pub fn fold_all(&mut self) -> Result<(), XdpError> {
        if self.overlay.pending.values().any(|p| p.since.is_none()) {
            // Staged but never made live: cannot happen between changes.
            self.publish()?;
        }
        let newest = self.overlay.pending.values().filter_map(|p| p.since).max();
        if let Some(e) = newest {
            self.grace_clock.wait(e).map_err(XdpError::Grace)?;
        }
        let all: Vec<EntryKey> = self.overlay.pending.keys().cloned().collect();
        self.fold(&all)?;
        self.overlay_off()?;
        self.grace_clock.sync().map_err(XdpError::Grace)?;
        self.settle_overlay()
    }

    /// Writes the pending values of `keys` into the base and stops
    /// tracking them (the live generation still holds the same values).
    fn fold(&mut self, keys: &[EntryKey]) -> Result<(), XdpError> {
        let mut delta = TableDelta::default();
        for key in keys {
            let Some(p) = self.overlay.pending.remove(key) else {
                continue;
            };
            match p.value {
                Some(c) => delta.upsert.push((key.clone(), c)),
                None => delta.delete.push(key.clone()),
            }
        }
        self.write(&delta, &HashSet::new())
    }

    /// Removes a generation's elements (no packet can reach them).
    fn remove_generation(&mut self, w: &Written) -> Result<(), XdpError> {
        for key in &w.keys {
            let generation = w.generation as u64;
            let r = match split_key(key, layer::OVERLAY) {
                Split::Tiny(key) => self.overlay_tiny.remove(&OverlayKey { key, generation }),
                Split::Short(key) => self.overlay_short.remove(&OverlayKey { key, generation }),
                Split::Long(key) => self.overlay_long.remove(&OverlayKey {
                    key: *key,
                    generation,
                }),
            };
            match r {
                Ok(()) => self.overlay.elements[table_of(key)] -= 1,
                Err(aya::maps::MapError::KeyNotFound) => {}
                Err(aya::maps::MapError::SyscallError(e))
                    if e.io_error.raw_os_error() == Some(libc::ENOENT) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Writes `entries` under `generation` into the overlay tables.
    fn write_generation(
        &mut self,
        generation: u32,
        entries: &[(EntryKey, Option<Compiled>)],
    ) -> Result<(), XdpError> {
        let mut batches: [Batch<'_>; 3] = Default::default();
        let generation = generation as u64;
        let absent = Answer::absent();
        for (entry, c) in entries {
            let value = c.as_ref().map_or(absent, |c| self.value_of(entry, c));
            let value = bytes_of(&value);
            let c = c.as_ref();
            match split_key(entry, layer::OVERLAY) {
                Split::Tiny(key) => {
                    let k = OverlayKey { key, generation };
                    batches[0].push(bytes_of(&k), value, entry, c)
                }
                Split::Short(key) => {
                    let k = OverlayKey { key, generation };
                    batches[1].push(bytes_of(&k), value, entry, c)
                }
                Split::Long(key) => {
                    let k = OverlayKey {
                        key: *key,
                        generation,
                    };
                    batches[2].push(bytes_of(&k), value, entry, c)
                }
            }
        }
        let fds = [
            self.overlay_tiny.map().fd().as_fd().as_raw_fd(),
            self.overlay_short.map().fd().as_fd().as_raw_fd(),
            self.overlay_long.map().fd().as_fd().as_raw_fd(),
        ];
        for (t, (batch, fd)) in batches.iter().zip(fds).enumerate() {
            let n = batch.len();
            let (done, result) = batch.write_all(fd);
            self.overlay.elements[t] += done;
            if let Err(e) = result {
                return Err(XdpError::Overlay(format!(
                    "{done} of {n} entries written: {e}"
                )));
            }
        }
        Ok(())
    }

    /// Frees released blocks (no entry and no reachable generation points
    /// at them).
    pub(super) fn free_blocks(&mut self, blocks: Vec<(Class, u32)>) {
        for (class, id) in blocks {
            self.block_maps.remove(class, id);
            self.block_ids[class.index()].recycle(id);
        }
    }

    /// Forgets the overlay (after the kernel's tables were cleared, or
    /// when the tables are adopted): every overlay element is removed.
    pub(super) fn reset_overlay(&mut self) {
        super::writer::clear(&mut self.overlay_tiny);
        super::writer::clear(&mut self.overlay_short);
        super::writer::clear(&mut self.overlay_long);
        let tag = self.overlay.tag;
        self.overlay = super::generations::Overlay {
            tag,
            ..Default::default()
        };
    }
}

/// A pinned table outlives its controller: it is left with the overlay
/// folded into the base and off, so the next start can adopt it.
impl Drop for FastPath {
    fn drop(&mut self) {
        if self.pins.is_some() && self.healthy && self.overlay_busy() {
            if let Err(e) = self.fold_all() {
                tracing::warn!("XDP: folding the overlay into the pinned table failed ({e}); the next start rebuilds it");
            }
        }
    }
}
