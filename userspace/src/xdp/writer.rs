//! The kernel-table writer: makes the kernel's answer maps hold a compiled
//! table (`crate::answers`), one change at a time through the overlay
//! generations (`overlay`), so a packet sees the old table or the new
//! one and never a freed element; blocks shared by reference count;
//! entries a full map refuses left to the fallback and written again
//! later.

use std::collections::HashSet;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::Arc;

use aya::maps::{HashMap, IterableMap, MapData};
use xdpdns_common::slots::TinySlot;
use xdpdns_common::{layer, qtype_slot, Answer, TinyKey, XdpConfig};

use super::blocks::{BlockIds, Class};
use super::error::XdpError;
use super::layout::{bytes_of, split_key, table_of, Split};
use super::program::FastPath;
use super::slots::Step;
use crate::answers::compile::{Compiled, EntryKey, Installed, Table, TableDelta};
use crate::answers::AnswerTable;

/// Applies `delta` to the compiled table `installed` (unsettled).
fn pack(installed: &AnswerTable, delta: &TableDelta) {
    match installed.is_empty() && delta.delete.is_empty() {
        // A first table: packed at its exact size, not grown to it.
        true => {
            installed.replace(delta.upsert.iter().map(|(k, c)| (k, c)));
            installed.apply_dependents(&delta.depends);
        }
        false => installed.apply(delta),
    }
}

impl FastPath {
    /// Whether the table's contents are not known (adopted and not yet
    /// confirmed, or a rebuild failed): only a whole table can follow.
    pub fn table_unknown(&self) -> bool {
        self.table_unknown
    }

    /// Confirms that the adopted kernel table is `table` (compiled from a
    /// snapshot whose tag the kernel table carries): it becomes what the
    /// controller diffs against, and block ids are read back from the
    /// kernel entries that use them. Nothing is written but the removal
    /// of blocks no entry uses.
    pub fn adopt_table(&mut self, table: &Table) -> Result<(), XdpError> {
        // A tagged table has no overlay in force; whatever a stop left in
        // the overlay tables is unreachable.
        self.reset_overlay();
        self.slots.learn()?;
        self.block_ids.iter_mut().for_each(BlockIds::clear);
        // Each entry is checked against what was compiled: one missing (a
        // write its table had no room for) or different is deleted, so a
        // later change writes it again.
        let mut absent = Vec::new();
        for (key, c) in table {
            let same = match self.get_learning(key)? {
                Some(a) => {
                    let mut expected = c.head;
                    if c.block.is_some() {
                        expected.set_block(a.block());
                    }
                    (expected == a).then_some(a)
                }
                None => None,
            };
            match (same, &c.block) {
                (None, _) => absent.push(key.clone()),
                (Some(_), None) => {}
                (Some(answer), Some(section)) => {
                    self.block_ids[Class::of(key, section).index()].adopt(section, answer.block())
                }
            }
        }
        if !absent.is_empty() {
            // A slot keeps its key while packets may read it: the table
            // stops answering while the entries are removed.
            let port = self.current.port;
            self.current.port = 0;
            self.config.set(0, self.current, 0)?;
            self.grace_clock.sync().map_err(XdpError::Grace)?;
            let deleted = absent.iter().try_for_each(|key| self.del_mapped(key));
            self.slots.unmap();
            deleted?;
            self.current.port = port;
            self.config.set(0, self.current, 0)?;
        }
        for class in Class::ALL {
            let in_kernel = self.block_maps.ids(class);
            for id in self.block_ids[class.index()].finish_adoption(in_kernel) {
                self.block_maps.remove(class, id);
            }
        }
        self.installed.unsettle();
        self.installed.replace(table);
        self.absent = absent.iter().cloned().collect();
        self.refused.clear();
        self.table_unknown = false;
        // Written again now, not at the next change that touches them.
        let missing = TableDelta {
            upsert: absent
                .into_iter()
                .map(|k| {
                    let c = table[&k].clone();
                    (k, c)
                })
                .collect(),
            ..TableDelta::default()
        };
        let tag = self.current.table_tag;
        self.apply_tagged(&missing, tag)
    }

    /// The compiled table the kernel's was made from (see `absent`).
    pub fn installed(&self) -> &Arc<AnswerTable> {
        &self.installed
    }

    /// Keeps the compiled table in `table` (the hot path's) instead of a
    /// table of its own, so it is compiled and held once. Before the
    /// first install or adoption: what `table` holds is replaced then.
    pub fn use_table(&mut self, table: Arc<AnswerTable>) {
        self.installed = table;
    }

    /// (name, type) entries the kernel holds.
    pub fn entries(&self) -> usize {
        self.installed
            .len()
            .saturating_sub(self.absent.len() + self.refused.len())
    }

    /// The block `key`'s kernel entry references, if it holds one.
    pub(super) fn held_block(&self, key: &EntryKey) -> Option<Arc<[u8]>> {
        match self.absent.contains(key) {
            true => None,
            false => self.installed.block_of(key),
        }
    }

    /// Elements in the kernel's name tables, overlay included: after a
    /// change, [`FastPath::entries`].
    pub fn kernel_elements(&self) -> Result<usize, XdpError> {
        fn count<K: aya::Pod>(map: &HashMap<MapData, K, Answer>) -> Result<usize, XdpError> {
            Ok(map.keys().try_fold(0, |n, k| k.map(|_| n + 1))?)
        }
        let base =
            self.slots.live() + count(&self.tiny)? + count(&self.short)? + count(&self.long)?;
        let overlay =
            count(&self.overlay_tiny)? + count(&self.overlay_short)? + count(&self.overlay_long)?;
        Ok(base + overlay)
    }

    /// Answer sections held in the block table (each stored once).
    pub fn blocks_in_use(&self) -> usize {
        self.block_ids.iter().map(BlockIds::len).sum()
    }

    /// Changes made live since the program was loaded or adopted.
    pub fn generation(&self) -> u32 {
        self.changes
    }

    /// Whether the table is in service. After a failed update the kernel
    /// passes every query to the fallback until [`FastPath::install`]
    /// rebuilds the table.
    pub fn healthy(&self) -> bool {
        self.healthy
    }

    /// Makes the kernel table equal to `table`.
    pub fn install(&mut self, table: Table) -> Result<(), XdpError> {
        self.install_tagged(table, 0)
    }

    /// [`install`](Self::install), recording `tag` (`compile::table_tag`
    /// of the snapshot `table` was compiled from) once the kernel holds
    /// it: what a restarted controller checks before adopting the table.
    pub fn install_tagged(&mut self, table: Table, tag: u64) -> Result<(), XdpError> {
        if !self.healthy || self.table_unknown {
            return self.rebuild(table, tag);
        }
        if self.installed.is_empty() {
            // A first table: every entry is new, moved into the change
            // rather than copied.
            let delta = TableDelta {
                upsert: table.into_iter().collect(),
                ..TableDelta::default()
            };
            let written = self.apply_tagged(&delta, tag);
            // Freeing a million entries takes a quarter of a second that
            // nothing waits for: on a thread of its own, which then gives
            // the memory back. (If no thread starts, it is freed here.)
            let _ = std::thread::Builder::new()
                .name("table-free".into())
                .spawn(move || {
                    drop(delta);
                    crate::memory::release_freed();
                });
            return written;
        }
        let mut delta = self.installed.diff(&table);
        // Entries the kernel lacks are written again even when unchanged.
        for key in self.absent.iter().chain(&self.refused) {
            if let Some(c) = table.get(key) {
                if self.installed.entry(key).as_ref() == Some(c) {
                    delta.upsert.push((key.clone(), c.clone()));
                }
            }
        }
        self.apply_tagged(&delta, tag)
    }

    /// Applies a change. The kernel holds one copy of the table (the
    /// base); a change is written beside it as a new overlay generation
    /// and made live with one config write, at once (see `overlay`,
    /// which also folds it into the base as grace periods pass). A change
    /// too large for the overlay tables (the first table, a reload that
    /// rewrites a large part of a zone) is written into the base while
    /// the kernel passes every query to the fallback. On failure the
    /// kernel is told to pass everything.
    pub fn apply(&mut self, delta: &TableDelta) -> Result<(), XdpError> {
        self.apply_tagged(delta, 0)
    }

    /// [`apply`](Self::apply), then records `tag` (see
    /// [`install_tagged`](Self::install_tagged)).
    ///
    /// Whatever becomes of the kernel's write, the compiled table takes
    /// the change: it is what the hot path answers from.
    pub fn apply_tagged(&mut self, delta: &TableDelta, tag: u64) -> Result<(), XdpError> {
        if self.table_unknown {
            // Nothing to diff against: the caller installs a whole table.
            self.record(delta);
            return Err(XdpError::TableUnknown);
        }
        if delta.is_empty() {
            if self.healthy {
                self.negatives_if_whole()?;
            }
            self.overlay.tag = tag;
            return match self.overlay.live {
                0 => self.set_table_tag(tag),
                _ => Ok(()),
            };
        }
        if !self.healthy {
            let mut table = self.installed.to_table();
            delta.apply_to(&mut table);
            return self.rebuild(table, tag);
        }
        // The tag is recorded once the overlay is off (the base is then
        // the whole table).
        // (Hashing every key of a whole table to find none took a tenth of
        // a first install.)
        if !self.refused.is_empty() {
            for key in delta.upsert.iter().map(|(k, _)| k).chain(&delta.delete) {
                self.refused.remove(key);
            }
        }
        // No tag while the change is written (a fold that turns the
        // overlay off meanwhile records none): a table caught half-way by
        // a crash is rebuilt, never adopted.
        self.overlay.tag = 0;
        let first = self.installed.is_empty();
        let written = match first && delta.delete.is_empty() {
            // A first table is packed for the hot path on a thread of its
            // own while its entries go into the kernel: the two share
            // nothing, and each is a second or more at a million names.
            true => {
                self.installed.unsettle();
                let installed = self.installed.clone();
                std::thread::scope(|scope| {
                    let packing = scope.spawn(move || pack(&installed, delta));
                    let written = self
                        .set_table_tag(0)
                        .and_then(|()| self.try_apply(delta, first));
                    if let Err(panic) = packing.join() {
                        std::panic::resume_unwind(panic);
                    }
                    written
                })
            }
            false => {
                let written = self
                    .set_table_tag(0)
                    .and_then(|()| self.try_apply(delta, first));
                self.installed.unsettle();
                pack(&self.installed, delta);
                written
            }
        };
        self.forget_absent(delta);
        match written {
            Ok(left_out) => {
                self.overlay.tag = tag;
                self.absent.extend(left_out.iter().cloned());
                self.negatives_if_whole()?;
                match self.overlay.live {
                    0 => self.set_table_tag(tag),
                    _ => Ok(()),
                }
            }
            Err(e) => {
                self.disable();
                Err(e)
            }
        }
    }

    /// Applies `delta` to the compiled table; its entries count as
    /// written until told otherwise.
    pub(super) fn record(&mut self, delta: &TableDelta) {
        self.installed.unsettle();
        pack(&self.installed, delta);
        self.forget_absent(delta);
    }

    /// Counts `delta`'s entries as written (or deleted) until told
    /// otherwise.
    fn forget_absent(&mut self, delta: &TableDelta) {
        if !self.absent.is_empty() {
            for key in delta.upsert.iter().map(|(k, _)| k).chain(&delta.delete) {
                self.absent.remove(key);
            }
        }
    }

    /// Turns the kernel's negative answers off while an entry that tells
    /// it a name exists is left out: the name would look missing.
    fn negatives_off(&mut self, why: &str) -> Result<(), XdpError> {
        if self.current.negative_answers != 0 {
            tracing::warn!("{why}: negative answers go to the fallback until a rebuild with room (raise [xdp] capacity)");
            self.current.negative_answers = 0;
            self.config.set(0, self.current, 0)?;
        }
        Ok(())
    }

    /// Turns the kernel's negative answers back on once every entry
    /// saying a name exists (an EXIST entry, or an A entry holding the
    /// facts) that a full table left out has been written (or deleted)
    /// since.
    pub(super) fn negatives_if_whole(&mut self) -> Result<(), XdpError> {
        let installed = &self.installed;
        let missing = self.refused.iter().chain(&self.absent).any(|k| {
            k.qtype == qtype_slot::EXIST || k.qtype == qtype_slot::A && installed.holds_exist(k)
        });
        if self.current.negative_answers == 0 && !missing {
            tracing::info!(
                "XDP table: every name is in the kernel again; negative answers back on"
            );
            self.current.negative_answers = 1;
            self.config.set(0, self.current, 0)?;
        }
        Ok(())
    }

    pub(super) fn set_table_tag(&mut self, tag: u64) -> Result<(), XdpError> {
        if self.current.table_tag != tag {
            self.current.table_tag = tag;
            self.config.set(0, self.current, 0)?;
        }
        Ok(())
    }

    /// Returns the entries left out for want of block space.
    /// `first`: the compiled table held nothing before `delta` (it may
    /// be being packed meanwhile, so it is not asked).
    pub(super) fn try_apply(
        &mut self,
        delta: &TableDelta,
        first: bool,
    ) -> Result<HashSet<EntryKey>, XdpError> {
        // Overlay work first: folding writes entries whose blocks this
        // change may release.
        let through_overlay = self.prepare_overlay(delta)?;
        // Blocks first, so no entry ever points at a missing one; the
        // blocks the replaced and deleted entries leave unreferenced go
        // only once no entry or reachable generation points at them.
        let full = self.acquire_blocks(delta)?;
        let mut released = Vec::new();
        // A first table replaces nothing.
        let replaced = delta.upsert.iter().map(|(k, _)| k).chain(&delta.delete);
        for key in replaced.filter(|_| !first) {
            if let Some(section) = self.held_block(key) {
                let class = Class::of(key, &section);
                let ids = &mut self.block_ids[class.index()];
                released.extend(ids.release(&section).map(|id| (class, id)));
            }
        }
        self.changes = self.changes.wrapping_add(1);
        if through_overlay {
            self.apply_through_overlay(delta, &full, released)?;
            return Ok(full);
        }
        // Too large for the overlay (which `prepare_overlay` left folded
        // and off): nothing answers from the table while the base is
        // rewritten, so the released blocks go at once.
        self.current.port = 0;
        self.config.set(0, self.current, 0)?;
        self.grace_clock.sync().map_err(XdpError::Grace)?;
        self.write(delta, &full)?;
        let limbo = std::mem::take(&mut self.overlay.limbo);
        self.free_blocks(limbo);
        self.free_blocks(released);
        // Entries that found no block room may fit now that the blocks
        // they replace are gone.
        let again = TableDelta {
            upsert: delta
                .upsert
                .iter()
                .filter(|(k, _)| full.contains(k))
                .cloned()
                .collect(),
            ..TableDelta::default()
        };
        let mut full = full;
        if !again.upsert.is_empty() {
            let still = self.acquire_blocks(&again)?;
            self.write(&again, &still)?;
            full = still;
        }
        self.current.port = self.port;
        self.config.set(0, self.current, 0)?;
        Ok(full)
    }

    /// Takes a reference to every block `delta` writes, writing new ones.
    /// Returns the entries whose block found its table full: they are left
    /// to the fallback (`entries_left_out`), not written.
    pub(super) fn acquire_blocks(
        &mut self,
        delta: &TableDelta,
    ) -> Result<HashSet<EntryKey>, XdpError> {
        let mut full = HashSet::new();
        for (key, c) in &delta.upsert {
            let Some(section) = &c.block else {
                continue;
            };
            let class = Class::of(key, section);
            let (id, new) = self.block_ids[class.index()].acquire(section);
            if !new {
                continue;
            }
            match self.block_maps.insert(class, id, section) {
                Ok(()) => {}
                Err(e) if table_full(&e) => {
                    let ids = &mut self.block_ids[class.index()];
                    ids.release(section);
                    ids.recycle(id);
                    self.left_out += 1;
                    full.insert(key.clone());
                    if c.head.holds_exist() {
                        self.negatives_off("XDP block table full")?;
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(full)
    }

    /// Writes `delta` into the base; the entries in `left_out` are
    /// removed instead (an older answer must not stay behind).
    pub(super) fn write(
        &mut self,
        delta: &TableDelta,
        left_out: &HashSet<EntryKey>,
    ) -> Result<(), XdpError> {
        let written = self.write_entries(delta, left_out);
        self.slots.unmap();
        written
    }

    fn write_entries(
        &mut self,
        delta: &TableDelta,
        left_out: &HashSet<EntryKey>,
    ) -> Result<(), XdpError> {
        let answering = self.answering();
        let mut steps = Vec::new();
        // Deletions first: the room they free is there for the upserts.
        for key in &delta.delete {
            self.del_into(key, answering, &mut steps)?;
        }
        // Into empty slots, every tiny key is placed at once (moving keys
        // between their buckets), in the order of the upserts.
        let fresh = !answering && self.slots.is_empty() && self.overflow.is_empty();
        let mut placed = match fresh {
            true => {
                let keys: Vec<TinyKey> = delta
                    .upsert
                    .iter()
                    .filter(|(k, _)| table_of(k) == 0 && !left_out.contains(k))
                    .map(|(k, _)| match split_key(k, layer::BASE) {
                        Split::Tiny(k) => k,
                        _ => unreachable!("a tiny name"),
                    })
                    .collect();
                // Each with its key: split once (reading a million
                // scattered names twice was a tenth of the install).
                let places = self.slots.place_all(&keys);
                Some(keys.into_iter().zip(places))
            }
            false => None,
        };
        // Upserts go in batches, one system call per map and thousands of
        // entries (a million-entry table: 2 s one by one).
        let mut batches: [Batch<'_>; 3] = Default::default();
        for (key, c) in &delta.upsert {
            if left_out.contains(key) {
                self.del_into(key, answering, &mut steps)?;
                continue;
            }
            let answer = self.value_of(key, c);
            let value = bytes_of(&answer);
            let split = match &mut placed {
                Some(placed) if table_of(key) == 0 => {
                    let (k, at) = placed.next().expect("one place a key");
                    match at {
                        Some(at) => steps.push(Step::Final(at, TinySlot::new(k, answer))),
                        None => batches[0].push(bytes_of(&k), value, key, Some(c)),
                    }
                    None
                }
                _ => Some(split_key(key, layer::BASE)),
            };
            match &split {
                None => {}
                Some(Split::Tiny(k)) => {
                    let in_slot = self.slot_write(key, k, answer, answering, &mut steps)?;
                    if !in_slot {
                        batches[0].push(bytes_of(k), value, key, Some(c));
                    }
                }
                Some(Split::Short(k)) => batches[1].push(bytes_of(k), value, key, Some(c)),
                Some(Split::Long(k)) => batches[2].push(bytes_of(&**k), value, key, Some(c)),
            }
            if steps.len() >= STEPS_CHUNK {
                self.slots.write(&steps, answering, &self.grace_clock)?;
                steps.clear();
            }
        }
        self.slots.write(&steps, answering, &self.grace_clock)?;
        if batches[0].len() > 0 {
            self.overflow_on()?;
            self.overflow
                .extend(batches[0].entries.iter().map(|(k, _)| (*k).clone()));
        }
        let fds = [
            self.tiny.map().fd().as_fd().as_raw_fd(),
            self.short.map().fd().as_fd().as_raw_fd(),
            self.long.map().fd().as_fd().as_raw_fd(),
        ];
        for (batch, fd) in batches.iter().zip(fds) {
            self.write_batch(fd, batch)?;
        }
        if !self.refused.is_empty() {
            let refused = &self.refused;
            self.overflow.retain(|k| !refused.contains(k));
        }
        if !answering && self.overflow.is_empty() {
            // Written into the kernel's config when answers resume.
            self.current.tiny_overflow = 0;
        }
        Ok(())
    }

    /// Whether packets may be reading the table (else it is being
    /// rewritten while the kernel passes everything).
    fn answering(&self) -> bool {
        self.current.port != 0
    }

    /// Tells the kernel to look in the tiny names' overflow map, before
    /// anything is written there.
    fn overflow_on(&mut self) -> Result<(), XdpError> {
        if self.current.tiny_overflow == 0 {
            self.current.tiny_overflow = 1;
            self.config.set(0, self.current, 0)?;
        }
        Ok(())
    }

    /// Adds to `steps` the slot writes that give tiny key `k` the value
    /// `answer`: in its slot, or a new one; false when it goes to the
    /// overflow map instead (it is there already, or its buckets are
    /// full).
    fn slot_write(
        &mut self,
        key: &EntryKey,
        k: &TinyKey,
        answer: Answer,
        answering: bool,
        steps: &mut Vec<Step>,
    ) -> Result<bool, XdpError> {
        if let Some((at, _)) = self.slots.find(k)? {
            steps.push(self.slots.update(at, k, answer));
            return Ok(true);
        }
        if self.overflow.contains(key) {
            return Ok(false);
        }
        self.slots.place(k, answer, answering, steps)
    }

    /// Writes `batch` into the map `fd` in chunks; an element the kernel
    /// refuses is written on its own (`put` decides: a full table leaves
    /// it to the fallback) and the batch goes on after it.
    pub(super) fn write_batch(&mut self, fd: RawFd, batch: &Batch<'_>) -> Result<(), XdpError> {
        let mut at = 0;
        while at < batch.len() {
            let (done, result) = batch.write_from(fd, at);
            at += done;
            if result.is_err() && at < batch.len() {
                // Refused at element `at`: that one on its own (`put`
                // decides: a full table leaves it to the fallback), then on.
                let (key, answer) = batch.entries[at];
                self.put(key, answer)?;
                at += 1;
            }
        }
        Ok(())
    }

    /// The kernel value for `key`'s entry `c`: its head, pointing at its
    /// block.
    pub(super) fn value_of(&self, key: &EntryKey, c: &Compiled) -> Answer {
        let mut answer = c.head;
        if let Some(section) = &c.block {
            let ids = &self.block_ids[Class::of(key, section).index()];
            answer.set_block(ids.id(section).expect("acquired before the entries"));
        }
        answer
    }

    /// Stops in-kernel answers (port 0: everything is passed) and waits
    /// until no packet still uses the table. Best effort: it runs on an
    /// error path.
    pub(super) fn disable(&mut self) {
        self.healthy = false;
        self.current.port = 0;
        self.current.table_tag = 0;
        let _ = self.config.set(0, self.current, 0);
        let _ = self.grace_clock.sync();
    }

    /// Rebuilds the table from scratch while the kernel passes
    /// everything, then resumes in-kernel answers.
    pub(super) fn rebuild(&mut self, table: Table, tag: u64) -> Result<(), XdpError> {
        self.disable();
        // The slots are rewritten in place: only once no packet can be
        // reading them.
        self.grace_clock.sync().map_err(XdpError::Grace)?;
        self.reset_overlay();
        self.slots.clear()?;
        clear(&mut self.tiny);
        self.overflow.clear();
        self.current.tiny_overflow = 0;
        clear(&mut self.short);
        clear(&mut self.long);
        for class in Class::ALL {
            for id in self.block_maps.ids(class) {
                self.block_maps.remove(class, id);
            }
        }
        self.block_ids.iter_mut().for_each(BlockIds::clear);
        // The compiled table is `table` from here, whatever the kernel's
        // becomes; until this rebuild completes, only a whole table can
        // follow.
        self.installed.unsettle();
        self.installed.replace(&table);
        self.absent.clear();
        self.refused.clear();
        self.table_unknown = true;
        let full = TableDelta {
            upsert: table.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            ..TableDelta::default()
        };
        self.current.negative_answers = 1;
        let left_out = self.acquire_blocks(&full)?;
        self.write(&full, &left_out)?;
        self.changes = self.changes.wrapping_add(1);
        self.overlay.tag = tag;
        self.current = XdpConfig {
            overlay: 0,
            port: self.port,
            table_tag: tag,
            ..self.current
        };
        self.config.set(0, self.current, 0)?;
        self.absent = left_out;
        self.table_unknown = false;
        self.healthy = true;
        Ok(())
    }

    /// Writes one base entry.
    pub(super) fn put(&mut self, key: &EntryKey, c: Option<&Compiled>) -> Result<(), XdpError> {
        let Some(c) = c else {
            return self.del(key);
        };
        let answer = self.value_of(key, c);
        let r = match split_key(key, layer::BASE) {
            Split::Tiny(k) => {
                // Only ever the overflow's: a refused batch element.
                self.overflow_on()?;
                let r = self.tiny.insert(k, answer, 0);
                if r.is_ok() {
                    self.overflow.insert(key.clone());
                }
                r
            }
            Split::Short(k) => self.short.insert(k, answer, 0),
            Split::Long(k) => self.long.insert(k, answer, 0),
        };
        match r {
            Ok(()) => Ok(()),
            // A full table refuses new keys only (replacing one always
            // works), so the name is simply absent: the fallback answers.
            Err(e) if table_full(&e) => {
                self.left_out += 1;
                self.refused.insert(key.clone());
                if key.qtype == qtype_slot::EXIST || c.head.holds_exist() {
                    self.negatives_off("XDP table full")?;
                }
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Entry writes refused so far because their table was full (raise
    /// `[xdp] capacity`).
    pub fn entries_left_out(&self) -> u64 {
        self.left_out
    }

    /// The kernel's base value for `key`, if any; a tiny key found in the
    /// overflow map is remembered there (an adopted table's).
    pub(super) fn get_learning(&mut self, key: &EntryKey) -> Result<Option<Answer>, XdpError> {
        let value = match split_key(key, layer::BASE) {
            Split::Tiny(k) => match self.slots.get(&k)? {
                Some(value) => return Ok(value),
                None => {
                    let r = self.tiny.get(&k, 0);
                    if r.is_ok() {
                        self.overflow.insert(key.clone());
                    }
                    r
                }
            },
            Split::Short(k) => self.short.get(&k, 0),
            Split::Long(k) => self.long.get(&k, 0),
        };
        match value {
            Ok(answer) => Ok(Some(answer)),
            Err(aya::maps::MapError::KeyNotFound) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    pub(super) fn del(&mut self, key: &EntryKey) -> Result<(), XdpError> {
        let deleted = self.del_mapped(key);
        self.slots.unmap();
        deleted
    }

    /// [`del`](Self::del), leaving the slot array mapped for the next
    /// (see `Slots::unmap`).
    fn del_mapped(&mut self, key: &EntryKey) -> Result<(), XdpError> {
        let mut steps = Vec::new();
        let answering = self.answering();
        self.del_into(key, answering, &mut steps)?;
        self.slots.write(&steps, answering, &self.grace_clock)
    }

    /// Deletes `key`'s base entry: a slot's deletion is added to `steps`.
    fn del_into(
        &mut self,
        key: &EntryKey,
        answering: bool,
        steps: &mut Vec<Step>,
    ) -> Result<(), XdpError> {
        let r = match split_key(key, layer::BASE) {
            Split::Tiny(k) => {
                if let Some((at, absent)) = self.slots.find(&k)? {
                    if !absent {
                        steps.push(self.slots.remove(at, &k, answering));
                    }
                    return Ok(());
                }
                self.overflow.remove(key);
                self.tiny.remove(&k)
            }
            Split::Short(k) => self.short.remove(&k),
            Split::Long(k) => self.long.remove(&k),
        };
        match r {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            Err(aya::maps::MapError::SyscallError(e))
                if e.io_error.raw_os_error() == Some(libc::ENOENT) =>
            {
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// Slot writes gathered before they are written (a first table's are
/// written as they come, not held all at once).
const STEPS_CHUNK: usize = 1 << 16;

/// Removes every element of `map` (best effort: it runs while the kernel
/// passes everything).
pub(super) fn clear<K: aya::Pod, V: aya::Pod>(map: &mut HashMap<MapData, K, V>) {
    let keys: Vec<K> = map.keys().filter_map(Result::ok).collect();
    for k in keys {
        let _ = map.remove(&k);
    }
}

/// Entries for one answer map, packed as the kernel takes a batch.
#[derive(Default)]
pub(super) struct Batch<'a> {
    keys: Vec<u8>,
    values: Vec<u8>,
    key_size: usize,
    value_size: usize,
    entries: Vec<(&'a EntryKey, Option<&'a Compiled>)>,
}

impl<'a> Batch<'a> {
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Writes the entries from `at` on into the map `fd`, in chunks of
    /// thousands; how many were written, and the error that stopped it.
    pub(super) fn write_from(&self, fd: RawFd, mut at: usize) -> (usize, std::io::Result<()>) {
        const CHUNK: usize = 4096;
        let start = at;
        let (ks, vs) = (self.key_size, self.value_size);
        while at < self.len() {
            let count = (self.len() - at).min(CHUNK);
            let (done, result) = super::sys::update_batch(
                fd,
                &self.keys[at * ks..(at + count) * ks],
                &self.values[at * vs..(at + count) * vs],
                count as u32,
            );
            match result {
                Ok(()) => at += count,
                // Stopped at element `done`; refused before any element
                // (`done` as sent), nothing is known written.
                Err(e) if (done as usize) < count => return (at - start + done as usize, Err(e)),
                Err(e) => return (at - start, Err(e)),
            }
        }
        (at - start, Ok(()))
    }

    /// [`write_from`](Self::write_from) the first entry.
    pub(super) fn write_all(&self, fd: RawFd) -> (usize, std::io::Result<()>) {
        self.write_from(fd, 0)
    }

    pub(super) fn push(
        &mut self,
        key: &[u8],
        value: &[u8],
        entry: &'a EntryKey,
        c: Option<&'a Compiled>,
    ) {
        self.key_size = key.len();
        self.value_size = value.len();
        self.keys.extend_from_slice(key);
        self.values.extend_from_slice(value);
        self.entries.push((entry, c));
    }
}

/// A map refused a new key because it is full.
pub(super) fn table_full(e: &aya::maps::MapError) -> bool {
    matches!(e, aya::maps::MapError::SyscallError(e) if e.io_error.raw_os_error() == Some(libc::E2BIG))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_packs_keys_and_values_end_to_end() {
        let key = |qtype| EntryKey {
            name: b"\x03www\x00"[..].into(),
            qtype,
        };
        let (k1, k2) = (key(qtype_slot::A), key(qtype_slot::AAAA));
        let c = Compiled {
            head: Answer::new(4, 1, 0),
            block: None,
        };
        let mut batch = Batch::default();
        batch.push(&[1, 2], &[9, 9, 9], &k1, Some(&c));
        batch.push(&[3, 4], &[8, 8, 8], &k2, None);
        assert_eq!((batch.key_size, batch.value_size), (2, 3));
        assert_eq!(batch.keys, [1, 2, 3, 4]);
        assert_eq!(batch.values, [9, 9, 9, 8, 8, 8]);
        assert_eq!(batch.entries.len(), 2);
        assert_eq!(bytes_of(&7u32), 7u32.to_ne_bytes());
    }
}
