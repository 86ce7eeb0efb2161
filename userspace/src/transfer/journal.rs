//! The IXFR journal: for every served zone, the differences between its
//! recent versions, bounded by count, size and age, and kept on disk so
//! IXFR works across restarts (and a secondary zone is served after a
//! restart before its primary answers).
//!
//! On disk, one file per zone holds `len:u32le crc32:u32le payload` frames:
//! diffs older than the snapshot (history only), one snapshot of the whole
//! zone, then the diffs since (history, and replayed onto the snapshot on
//! open). A torn tail is cut off on open. When the file holds too many
//! diffs it is rewritten (history kept in memory + a fresh snapshot) on a
//! thread of its own while diffs are still appended to the old file, and
//! renamed into place with the diffs appended meanwhile.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use hickory_proto::rr::{LowerName, Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder};
use tracing::{info, warn};

pub use super::ixfr_history::{condense, Ixfr, JournalLimits};
use super::ixfr_history::{emit_zone, without_history, Change, History, IxfrSource, Persist};
use crate::durable::Replacement;
use crate::frames::frame;
use crate::zone::serial::is_newer;
use crate::zone::{Bulk, Snapshot, Zone, ZoneDiff};

use crate::frames::file_err as io_err;
pub use crate::frames::FileError as JournalError;

pub struct IxfrJournal {
    dir: Option<PathBuf>,
    limits: JournalLimits,
    zones: Mutex<HashMap<LowerName, History>>,
    /// Files appended to since the last [`IxfrJournal::sync`].
    unsynced: Mutex<HashSet<PathBuf>>,
    /// Zones rebuilt by their source after any crash: see
    /// [`IxfrJournal::rebuilt_by_source`].
    rebuilt: Mutex<HashSet<LowerName>>,
    /// Zone images are written: see [`IxfrJournal::images_written`].
    imaged: AtomicBool,
    /// Zones whose file is being rewritten beside its appends.
    rewriting: Mutex<HashMap<LowerName, Rewriting>>,
}

/// A zone's file being rewritten on a thread of its own: its history and
/// a snapshot go to a new file while diffs are still appended to the old
/// one, which holds every commit until the new one takes its place. (At
/// a million registered instances a rewrite took seconds, and the
/// commits queued behind it were on disk nowhere: a start after a kill
/// then lacked them until the registry's own rebuild.)
struct Rewriting {
    written: std::thread::JoinHandle<std::io::Result<Replacement>>,
    /// The diff frames appended since the snapshot, to follow it in the
    /// new file, and each one's record count.
    after: Vec<u8>,
    after_records: Vec<usize>,
}

impl Rewriting {
    /// Abandons the new file (once written: its temporary file is then
    /// removed, and cannot be mistaken for a later rewrite's).
    fn abandon(self) {
        let _ = self.written.join();
    }
}

impl Drop for IxfrJournal {
    /// A file still being rewritten is put in its place, not left to a
    /// thread that could race a later journal on the same directory.
    fn drop(&mut self) {
        self.settle();
    }
}

impl IxfrSource for IxfrJournal {
    fn ixfr(&self, zone: &Zone, from: u32) -> Ixfr {
        IxfrJournal::ixfr(self, zone, from)
    }
}

impl IxfrJournal {
    /// A journal kept in memory only.
    pub fn in_memory(limits: JournalLimits) -> IxfrJournal {
        IxfrJournal {
            dir: None,
            limits,
            zones: Mutex::new(HashMap::new()),
            unsynced: Mutex::default(),
            rebuilt: Mutex::default(),
            imaged: AtomicBool::new(false),
            rewriting: Mutex::default(),
        }
    }

    /// Opens the journal in `dir` and returns the newest version of every
    /// zone it holds (to be served before anything else is loaded).
    pub fn open(
        dir: &Path,
        limits: JournalLimits,
    ) -> Result<(IxfrJournal, Vec<Zone>), JournalError> {
        Self::open_holding(dir, limits, &mut HashMap::new())
    }

    /// [`IxfrJournal::open`] when the caller already holds some zones
    /// (from their images), by origin: a held zone at the journal's newest
    /// serial is not decoded again (its history is), and one at an older
    /// serial of the journal's chain is brought forward by the diffs after
    /// it, in place (an image lags the journal by up to a share of the
    /// zone's records, and the journal keeps the diffs since the image:
    /// [`IxfrJournal::keep_from`]; decoding the journal's own copy of a
    /// large zone instead took seconds). Only zones the journal has other
    /// versions of are returned.
    pub fn open_holding(
        dir: &Path,
        limits: JournalLimits,
        held: &mut HashMap<LowerName, Zone>,
    ) -> Result<(IxfrJournal, Vec<Zone>), JournalError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        // Until their images are written again, the diffs since them stay.
        let imaged: HashMap<LowerName, u32> = held
            .iter()
            .filter_map(|(origin, zone)| Some((origin.clone(), zone.serial()?)))
            .collect();
        let mut zones = HashMap::new();
        let mut recovered = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
            let path = entry.map_err(io_err(dir))?.path();
            if path.extension().is_none_or(|e| e != "ixfr") {
                continue;
            }
            let reading = std::time::Instant::now();
            match read_zone_file(&path, held)? {
                Some(Recovered::Zone(zone, mut history)) => {
                    let zone = *zone;
                    history.trim(&limits, crate::clock::unix_secs());
                    info!(zone = %zone.origin(), serial = zone.serial(), diffs = history.changes().count(), file = %path.display(), "journal: recovered zone");
                    zones.insert(zone.origin_key().clone(), history);
                    recovered.push(zone);
                }
                Some(Recovered::Held(origin, mut history, applied)) => {
                    if let Some(&serial) = imaged.get(&origin) {
                        history.keep_from(serial);
                    }
                    history.trim(&limits, crate::clock::unix_secs());
                    let ms = reading.elapsed().as_millis();
                    info!(zone = %origin, diffs = history.changes().count(), applied, ms, file = %path.display(), "journal: history recovered, zone already held (its image brought forward through the diffs applied)");
                    zones.insert(origin, history);
                }
                None => {
                    warn!(file = %path.display(), "journal: no snapshot in the file and no image it brings forward; ignored (a zone rebuilt by its source comes back from it)")
                }
            }
        }
        let journal = IxfrJournal {
            dir: Some(dir.to_path_buf()),
            limits,
            zones: Mutex::new(zones),
            unsynced: Mutex::default(),
            rebuilt: Mutex::default(),
            imaged: AtomicBool::new(false),
            rewriting: Mutex::default(),
        };
        Ok((journal, recovered))
    }

    /// After the journal's feed fell behind and commits were missed: each
    /// zone whose serial moved without the journal starts its history over
    /// from its version in `snapshot` (IXFR from before it becomes AXFR);
    /// zones no longer served are dropped.
    pub fn resync(&self, snapshot: &Snapshot) {
        let mut zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        let mut rewriting = self.rewriting.lock().unwrap_or_else(|p| p.into_inner());
        let gone: Vec<LowerName> = zones
            .keys()
            .filter(|k| snapshot.zone(k).is_none())
            .cloned()
            .collect();
        for key in gone {
            zones.remove(&key);
            if let Some(r) = rewriting.remove(&key) {
                r.abandon();
            }
            if let Some(path) = self.path_of(&Name::from(&key)) {
                let _ = std::fs::remove_file(path);
            }
        }
        for zone in snapshot.zones() {
            let history = zones.entry(zone.origin_key().clone()).or_default();
            let last = history.last_serial();
            if last.is_some() && last == zone.serial() {
                continue;
            }
            warn!(zone = %zone.origin(), serial = zone.serial(), "journal: commits were missed; history starts over");
            history.restart();
            if let Some(r) = rewriting.remove(zone.origin_key()) {
                r.abandon();
            }
            self.rewrite(zone, history);
        }
    }

    /// Records what one commit did. Called in commit order by the
    /// journal's subscriber to the zone store's feed. `false` when a file
    /// could not be written (the commit is then not on disk).
    pub fn record<'a>(
        &self,
        snapshot: &Snapshot,
        diffs: impl IntoIterator<Item = &'a ZoneDiff>,
        now: u64,
    ) -> bool {
        let mut written = true;
        let mut zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        let mut rewriting = self.rewriting.lock().unwrap_or_else(|p| p.into_inner());
        for diff in diffs {
            let key = LowerName::new(&diff.origin);
            let Some(zone) = snapshot.zone(&key) else {
                zones.remove(&key);
                if let Some(r) = rewriting.remove(&key) {
                    r.abandon();
                }
                if let Some(path) = self.path_of(&diff.origin) {
                    let _ = std::fs::remove_file(path);
                }
                continue;
            };
            let history = zones.entry(key.clone()).or_default();
            let persist = history.push(diff, zone.record_count(), now, &self.limits);
            let appended = match persist {
                Persist::Append | Persist::Rewrite if !history.file_damaged => {
                    // In the history's form already: encoded once.
                    match history.pushed(diff) {
                        Some(change) => self.append(zone, change),
                        None => self.append(zone, &Change::new(diff, now)),
                    }
                }
                _ => None,
            };
            written &= match appended {
                Some(frame) if frame.is_empty() => true,
                Some(frame) => {
                    let records = diff.removed.len() + diff.added.len();
                    history.appended(records);
                    if let Some(r) = rewriting.get_mut(&key) {
                        r.after.extend_from_slice(&frame);
                        r.after_records.push(records);
                        true
                    } else if persist == Persist::Rewrite {
                        match self.start_rewrite(zone, history) {
                            Some(r) => {
                                rewriting.insert(key, r);
                                true
                            }
                            None => self.rewrite(zone, history),
                        }
                    } else {
                        true
                    }
                }
                None => {
                    // Restarted, damaged or not appendable: written whole
                    // now, whatever was being written beside it.
                    if let Some(r) = rewriting.remove(&key) {
                        r.abandon();
                    }
                    self.rewrite(zone, history)
                }
            };
        }
        written
    }

    /// Makes every append since the last call durable: one `fdatasync`
    /// per file, however many commits were appended to it (the group
    /// commit: concurrent updates share one). Called after each batch of
    /// [`record`](Self::record)s, before they are reported journaled.
    pub fn sync(&self) -> bool {
        self.finish_rewrites(false);
        let mut synced = true;
        let paths: Vec<PathBuf> = self
            .unsynced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .collect();
        for path in paths {
            if let Err(e) = File::open(&path).and_then(|f| f.sync_data()) {
                warn!(file = %path.display(), "journal: fdatasync failed: {e}");
                synced = false;
            }
        }
        synced
    }

    /// Zones `origins` are derived from a source that keeps itself
    /// durable (the service registry, in its own journal or in etcd):
    /// their appends are written but not synced. A killed process loses
    /// none of them (the kernel still holds the pages); a crash of the
    /// machine may lose the last of their history, which costs the
    /// secondaries that asked for those serials an AXFR, while the source
    /// publishes the zones again at the next start, past every serial
    /// served (an image newer than the history is served as it is).
    /// Their `fdatasync`s were a twentieth of a busy registry's CPU.
    pub fn rebuilt_by_source(&self, origins: impl IntoIterator<Item = LowerName>) {
        let mut rebuilt = self.rebuilt.lock().unwrap_or_else(|p| p.into_inner());
        rebuilt.extend(origins);
    }

    /// Zone images are written from here on. A zone rebuilt by its
    /// source ([`IxfrJournal::rebuilt_by_source`]) then keeps only diffs
    /// in its file, no snapshot: a start takes the zone from its image and
    /// brings it forward through the diffs kept since it
    /// ([`IxfrJournal::keep_from`]), and without an image the source
    /// rebuilds the zone, past every serial served. The snapshot was a
    /// second copy of the image, encoded again at every rewrite (at a
    /// million registered instances, a twelfth of the server's CPU).
    pub fn images_written(&self) {
        self.imaged.store(true, Ordering::Relaxed);
    }

    /// Whether `zone`'s file holds a snapshot of it: always, but for a
    /// zone its image and source bring back whose diffs since its image
    /// are all in `history` (none trimmed, nor lost to a restart of the
    /// history).
    fn keeps_snapshot(&self, zone: &Zone, history: &History) -> bool {
        !self.imaged.load(Ordering::Relaxed)
            || !history.reaches_from_image(zone.serial())
            || !self
                .rebuilt
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(zone.origin_key())
    }

    /// Zone `origin`'s image on disk is at `serial`: its diffs from there
    /// on are kept (see [`History::keep_from`]), so the next start brings
    /// the image forward whatever was rewritten meanwhile.
    pub fn keep_from(&self, origin: &LowerName, serial: u32) {
        let mut zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(history) = zones.get_mut(origin) {
            history.keep_from(serial);
        }
    }

    /// Whether the journal holds a history for zone `origin`.
    pub fn has_zone(&self, origin: &LowerName) -> bool {
        let zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        zones.contains_key(origin)
    }

    /// IXFR from `from` for `zone` (its current version).
    pub fn ixfr(&self, zone: &Zone, from: u32) -> Ixfr {
        let Some(current) = zone.serial() else {
            return Ixfr::Unavailable;
        };
        let zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        match zones.get(zone.origin_key()) {
            Some(history) => history.ixfr(current, from),
            None => without_history(current, from),
        }
    }

    /// Oldest serial IXFR can start from, and the number of diffs held.
    pub fn span(&self, origin: &Name) -> Option<(u32, usize)> {
        let zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        zones.get(&LowerName::new(origin))?.span()
    }

    fn path_of(&self, origin: &Name) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        Some(dir.join(format!("{}ixfr", crate::zone::image::file_stem(origin))))
    }

    /// Appends `change`'s frame to the zone's file: the frame, or `None`
    /// when it could not be written (the file then needs a rewrite). No
    /// file (in memory): an empty frame.
    fn append(&self, zone: &Zone, change: &Change) -> Option<Vec<u8>> {
        let Some(path) = self.path_of(zone.origin()) else {
            return Some(Vec::new());
        };
        let frame = frame(&encode_diff(change));
        let wrote = OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| {
                let end = f.metadata()?.len();
                let written = f.write_all(&frame);
                if written.is_err() {
                    // Best effort: cut a partial frame off again.
                    let _ = f.set_len(end).and_then(|_| f.sync_data());
                }
                written
            });
        match wrote {
            Ok(()) => {
                let rebuilt = self.rebuilt.lock().unwrap_or_else(|p| p.into_inner());
                if !rebuilt.contains(zone.origin_key()) {
                    self.unsynced
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(path);
                }
                Some(frame)
            }
            Err(e) => {
                warn!(file = %path.display(), "journal: append failed ({e}); rewriting");
                None
            }
        }
    }

    /// Starts writing the zone's new file (its history and a snapshot of
    /// `zone`) on a thread of its own; `None` when there is no file or
    /// no thread.
    fn start_rewrite(&self, zone: &Arc<Zone>, history: &History) -> Option<Rewriting> {
        let path = self.path_of(zone.origin())?;
        let changes: Vec<Change> = history.changes().cloned().collect();
        let zone = self.keeps_snapshot(zone, history).then(|| zone.clone());
        let written = std::thread::Builder::new()
            .name("ixfr-rewrite".into())
            .spawn(move || {
                Replacement::write(&path, 0o644, |f| {
                    write_file(f, changes.iter(), zone.as_deref())
                })
            })
            .inspect_err(|e| warn!("journal: no thread to rewrite on ({e}); rewriting in place"))
            .ok()?;
        Some(Rewriting {
            written,
            after: Vec::new(),
            after_records: Vec::new(),
        })
    }

    /// Puts each new file written beside its appends in its place, with
    /// the diffs appended meanwhile: those written by now, or all of them
    /// once written when `wait`.
    fn finish_rewrites(&self, wait: bool) {
        let mut zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        let mut rewriting = self.rewriting.lock().unwrap_or_else(|p| p.into_inner());
        let done: Vec<LowerName> = rewriting
            .iter()
            .filter(|(_, r)| wait || r.written.is_finished())
            .map(|(k, _)| k.clone())
            .collect();
        for key in done {
            let Some(r) = rewriting.remove(&key) else {
                continue;
            };
            let finished = r
                .written
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("the rewriting thread panicked")))
                .and_then(|new| new.finish(&r.after));
            match (finished, zones.get_mut(&key)) {
                (Ok(()), Some(history)) => {
                    history.rewritten();
                    for records in r.after_records {
                        history.appended(records);
                    }
                }
                (Ok(()), None) => {}
                // The old file still holds every diff: nothing is lost,
                // and the rewrite comes due again.
                (Err(e), _) => {
                    warn!(zone = %key, "journal: cannot rewrite the file ({e}); diffs are still appended to the old one")
                }
            }
        }
    }

    /// Waits for every file being rewritten and puts it in its place (a
    /// clean stop, and tests).
    pub fn settle(&self) {
        self.finish_rewrites(true);
    }

    /// Writes history + a snapshot of `zone` (where the file keeps one)
    /// to a new file and renames it into place.
    fn rewrite(&self, zone: &Zone, history: &mut History) -> bool {
        let Some(path) = self.path_of(zone.origin()) else {
            return true;
        };
        let snapshot = self.keeps_snapshot(zone, history).then_some(zone);
        let result = crate::durable::replace_with(&path, 0o644, |f| {
            write_file(f, history.changes(), snapshot)
        });
        match result {
            Ok(()) => {
                history.rewritten();
                history.file_damaged = false;
                true
            }
            Err(e) => {
                history.file_damaged = true;
                warn!(file = %path.display(), "journal: cannot write ({e}); the next change rewrites the file, IXFR history after a restart may be lost until then");
                false
            }
        }
    }
}

// ---- file format ----

/// A zone's file: the diffs of its history, then a snapshot of `zone`
/// (none for a zone its image and source bring back).
fn write_file<'a>(
    f: &mut dyn Write,
    history: impl Iterator<Item = &'a Change>,
    zone: Option<&Zone>,
) -> std::io::Result<()> {
    for c in history {
        f.write_all(&frame(&encode_diff(c)))?;
    }
    match zone {
        Some(zone) => f.write_all(&frame(&encode_snapshot(zone))),
        None => Ok(()),
    }
}

/// A snapshot: the zone's records, its SOA first (since zone images: an
/// open reads the serial without decoding the rest; older files, with
/// the SOA anywhere, are decoded whole).
const TAG_SNAPSHOT: u8 = 1;
const TAG_DIFF: u8 = 2;

fn encode_diff(c: &Change) -> Vec<u8> {
    let (records, (removed, added)) = c.records();
    let mut buf = vec![TAG_DIFF];
    buf.extend_from_slice(&c.at.to_be_bytes());
    buf.extend_from_slice(&origin_bytes(c.origin()));
    for n in [
        c.old_serial().unwrap_or(0),
        c.new_serial().unwrap_or(0),
        removed,
        added,
    ] {
        buf.extend_from_slice(&n.to_be_bytes());
    }
    buf.extend_from_slice(records);
    buf
}

fn encode_snapshot(zone: &Zone) -> Vec<u8> {
    let mut buf = Vec::with_capacity(zone.record_count() * 40);
    buf.push(TAG_SNAPSHOT);
    buf.extend_from_slice(&origin_bytes(zone.origin()));
    let at = buf.len();
    buf.extend_from_slice(&0u32.to_be_bytes());
    // A zone holds one SOA, at its apex: it goes first.
    let count = emit_zone(&mut buf, zone);
    buf[at..at + 4].copy_from_slice(&count.to_be_bytes());
    buf
}

/// The origin as length-prefixed text (no compression pointers to worry about).
fn origin_bytes(origin: &Name) -> Vec<u8> {
    let s = origin.to_ascii();
    let mut out = (s.len() as u16).to_be_bytes().to_vec();
    out.extend_from_slice(s.as_bytes());
    out
}

enum Frame<'a> {
    Snapshot(Zone),
    /// A snapshot not decoded yet: its origin, serial and frame payload.
    SnapshotAt(Name, u32, &'a [u8]),
    Diff(Change),
}

/// What one journal file gave back.
enum Recovered {
    Zone(Box<Zone>, History),
    /// The caller holds the zone's newest version already, after applying
    /// this many of the file's diffs to it.
    Held(LowerName, History, usize),
}

/// Decodes a frame; a snapshot whose first record is its SOA is left
/// encoded, with that serial (see [`decode_snapshot`]).
fn decode_frame(payload: &[u8]) -> Option<Frame<'_>> {
    if payload.first() == Some(&TAG_SNAPSHOT) {
        let mut d = BinDecoder::new(&payload[1..]);
        let len = d.read_u16().ok()?.unverified() as usize;
        let bytes = d.read_slice(len).ok()?.unverified();
        let origin = Name::from_ascii(std::str::from_utf8(bytes).ok()?).ok()?;
        let _count = d.read_u32().ok()?;
        if let Ok(first) = Record::read(&mut d) {
            if let (RData::SOA(soa), true) = (&first.data, first.name == origin) {
                return Some(Frame::SnapshotAt(origin, soa.serial, payload));
            }
        }
    }
    decode_full_frame(payload)
}

/// The zone in a snapshot frame.
fn decode_snapshot(payload: &[u8]) -> Option<Zone> {
    match decode_full_frame(payload)? {
        Frame::Snapshot(zone) => Some(zone),
        _ => None,
    }
}

fn decode_full_frame(payload: &[u8]) -> Option<Frame<'_>> {
    let mut d = BinDecoder::new(payload);
    let tag = d.read_u8().ok()?.unverified();
    let origin = |d: &mut BinDecoder<'_>| -> Option<Name> {
        let len = d.read_u16().ok()?.unverified() as usize;
        let bytes = d.read_slice(len).ok()?.unverified();
        Name::from_ascii(std::str::from_utf8(bytes).ok()?).ok()
    };
    let u32_ = |d: &mut BinDecoder<'_>| d.read_u32().ok().map(|v| v.unverified());
    let records = |d: &mut BinDecoder<'_>, n: u32| -> Option<Vec<Record>> {
        (0..n).map(|_| Record::read(d).ok()).collect()
    };
    match tag {
        TAG_SNAPSHOT => {
            let origin = origin(&mut d)?;
            let n = u32_(&mut d)?;
            let recs = records(&mut d, n)?;
            Zone::from_records(&origin, recs).ok().map(Frame::Snapshot)
        }
        TAG_DIFF => {
            let at = u64::from_be_bytes(d.read_slice(8).ok()?.unverified().try_into().ok()?);
            let origin = origin(&mut d)?;
            let (old, new, nr, na) = (u32_(&mut d)?, u32_(&mut d)?, u32_(&mut d)?, u32_(&mut d)?);
            // As the history keeps them: taken as they are, where a walk
            // finds every name uncompressed (decoding each record and
            // encoding it again was most of reading a journal back).
            let rest = d.read_slice(d.len()).ok()?.unverified();
            if uncompressed_records(rest, nr.checked_add(na)?) {
                let change = Change::from_wire(origin, (old, new), (nr, na), rest, at);
                return Some(Frame::Diff(change));
            }
            let mut d = BinDecoder::new(payload);
            d.read_slice(payload.len() - rest.len()).ok()?;
            // Decoded in the whole payload's context (files from before
            // the history kept wire form compressed names against it), a
            // record that does not decode ending the history here.
            let removed = records(&mut d, nr)?;
            let added = records(&mut d, na)?;
            let diff = ZoneDiff {
                origin,
                old_serial: Some(old),
                new_serial: Some(new),
                removed,
                added,
                whole_zone: false,
            };
            Some(Frame::Diff(Change::new(&diff, at)))
        }
        _ => None,
    }
}

/// Whether `bytes` is exactly `count` records whose names are all
/// uncompressed, as `emit_records` writes them. Files from before the
/// history kept that form may compress names against the frame; those,
/// and records of types whose names this does not know where to find,
/// are decoded instead. A frame that passes but holds a record that does
/// not decode (only a bug could write one under its checksum) is found
/// when it is applied: a start then drops the image it was bringing
/// forward and serves the journal's own copy of the zone, as far as its
/// diffs apply.
fn uncompressed_records(mut bytes: &[u8], count: u32) -> bool {
    for _ in 0..count {
        let Some(owner) = name_len(bytes) else {
            return false;
        };
        let Some(fixed) = bytes.get(owner..owner + 10) else {
            return false;
        };
        let rtype = RecordType::from(u16::from_be_bytes([fixed[0], fixed[1]]));
        let rdlen = u16::from_be_bytes([fixed[8], fixed[9]]) as usize;
        let Some(rdata) = bytes.get(owner + 10..owner + 10 + rdlen) else {
            return false;
        };
        if !rdata_names_uncompressed(rtype, rdata) {
            return false;
        }
        bytes = &bytes[owner + 10 + rdlen..];
    }
    bytes.is_empty()
}

/// Whether the names in `rdata` of `rtype` are uncompressed (`false` for
/// types whose names might be compressed and are not looked for here).
fn rdata_names_uncompressed(rtype: RecordType, rdata: &[u8]) -> bool {
    let names_from = |mut at: usize, names: usize| {
        for _ in 0..names {
            match rdata.get(at..).and_then(name_len) {
                Some(len) => at += len,
                None => return None,
            }
        }
        Some(at)
    };
    match rtype {
        // No names, or names RFC 3597, 4034 and 9460 never compress.
        RecordType::A
        | RecordType::AAAA
        | RecordType::TXT
        | RecordType::CAA
        | RecordType::DS
        | RecordType::DNSKEY
        | RecordType::CDS
        | RecordType::CDNSKEY
        | RecordType::RRSIG
        | RecordType::NSEC
        | RecordType::NSEC3
        | RecordType::NSEC3PARAM
        | RecordType::TLSA
        | RecordType::SSHFP
        | RecordType::HTTPS
        | RecordType::SVCB => true,
        RecordType::NS | RecordType::CNAME | RecordType::PTR => {
            names_from(0, 1) == Some(rdata.len())
        }
        RecordType::MX => names_from(2, 1) == Some(rdata.len()),
        RecordType::SRV => names_from(6, 1) == Some(rdata.len()),
        RecordType::SOA => names_from(0, 2) == Some(rdata.len() - 20.min(rdata.len())),
        _ => false,
    }
}

/// The length of the uncompressed name `bytes` starts with; `None` for a
/// compression pointer or a name that runs off the end.
fn name_len(bytes: &[u8]) -> Option<usize> {
    let mut at = 0;
    loop {
        let len = *bytes.get(at)? as usize;
        if len >= 0x40 {
            return None;
        }
        at += 1 + len;
        if len == 0 {
            return Some(at);
        }
    }
}

/// Reads one zone's file: its newest version and its history. A torn or
/// corrupt tail is cut off. When `held` has the zone at the serial the
/// file ends with, its snapshot is not decoded nor its diffs applied.
fn read_zone_file(
    path: &Path,
    held: &mut HashMap<LowerName, Zone>,
) -> Result<Option<Recovered>, JournalError> {
    let file = File::open(path).map_err(io_err(path))?;
    // SAFETY: only this process writes the journal, and not while it is
    // being opened (nor replaces it: a replaced file is shrunk away); a
    // torn tail is cut off below the last byte read.
    let bytes = unsafe { memmap2::Mmap::map(&file) }.map_err(io_err(path))?;
    let bytes: &[u8] = &bytes;
    let mut at = 0;
    // The newest snapshot, still encoded, with the diffs after it.
    let mut base: Option<(Name, u32, &[u8])> = None;
    let mut zone: Option<Zone> = None;
    let mut after: Vec<Change> = Vec::new();
    let mut history = History::default();
    for (body, end) in crate::frames::frames(bytes) {
        match decode_frame(body) {
            Some(Frame::Snapshot(z)) => {
                zone = Some(z);
                base = None;
                after.clear();
                history.rewritten();
            }
            Some(Frame::SnapshotAt(origin, serial, payload)) => {
                base = Some((origin, serial, payload));
                zone = None;
                after.clear();
                history.rewritten();
            }
            Some(Frame::Diff(c)) => {
                let follows = match (&zone, &base, after.last()) {
                    (_, _, Some(last)) => last.new_serial() == c.old_serial(),
                    (Some(z), _, None) => z.serial() == c.old_serial(),
                    (None, Some((_, serial, _)), None) => Some(*serial) == c.old_serial(),
                    (None, None, None) => {
                        // History before a snapshot, or a file of diffs
                        // alone: a gap starts it over from the newer ones.
                        if history
                            .last_serial()
                            .is_some_and(|last| Some(last) != c.old_serial())
                        {
                            history.restart();
                        }
                        true
                    }
                };
                if !follows {
                    warn!(file = %path.display(), "journal: diff does not apply; history cut here");
                    break;
                }
                if zone.is_some() || base.is_some() {
                    after.push(c.clone());
                }
                // Counted since the last snapshot (which resets the count).
                let (removed, added) = c.records().1;
                history.appended(removed as usize + added as usize);
                history.restored(c);
            }
            None => break,
        }
        at = end;
    }
    if at < bytes.len() {
        warn!(file = %path.display(), offset = at, discarded = bytes.len() - at, "journal: cutting off a torn tail");
        let f = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(io_err(path))?;
        f.set_len(at as u64).map_err(io_err(path))?;
        f.sync_all().map_err(io_err(path))?;
    }
    if let Some((origin, serial, payload)) = base {
        let key = LowerName::new(&origin);
        if let Some(zone) = held.get_mut(&key) {
            let chain: Vec<&Change> = history.changes().collect();
            match catch_up(zone, serial, &chain) {
                CatchUp::Done(applied) => return Ok(Some(Recovered::Held(key, history, applied))),
                CatchUp::Newer => {
                    // The file's last diffs were lost in a crash (a zone
                    // rebuilt by its source is not synced at each commit):
                    // its copy would only be decoded to be dropped.
                    warn!(file = %path.display(), image = zone.serial(),
                          "journal: the zone's image is newer than its history; the image is served, IXFR from the serials between falls back to AXFR");
                    return Ok(Some(Recovered::Held(key, history, 0)));
                }
                CatchUp::NotInChain => {}
                CatchUp::Damaged => {
                    warn!(file = %path.display(), "journal: a diff does not apply to the zone's image; the journal's copy is served");
                    held.remove(&key);
                }
            }
        }
        zone = decode_snapshot(payload);
        if zone.is_none() {
            warn!(file = %path.display(), "journal: snapshot does not decode; ignored");
            return Ok(None);
        }
    }
    if zone.is_none() {
        return Ok(diffs_only(path, history, held));
    }
    let Some(mut zone) = zone else {
        return Ok(None);
    };
    let mut bulk = zone.bulk();
    for c in &after {
        if !c.decoded().is_some_and(|d| apply(&mut bulk, &d)) {
            // Cannot happen for a chain checked above unless the records
            // disagree with the serials; serve what applied.
            warn!(file = %path.display(), "journal: diff does not apply to its snapshot; later history ignored");
            break;
        }
    }
    Ok(Some(Recovered::Zone(Box::new(zone), history)))
}

/// A file of diffs and no snapshot (a zone its image and its source bring
/// back: [`IxfrJournal::images_written`]): the zone's image, if held, is
/// brought forward through them. `None` leaves the zone to its source.
fn diffs_only(
    path: &Path,
    history: History,
    held: &mut HashMap<LowerName, Zone>,
) -> Option<Recovered> {
    let key = LowerName::new(history.changes().next()?.origin());
    let zone = held.get_mut(&key)?;
    let chain: Vec<&Change> = history.changes().collect();
    let newest = chain.last()?.new_serial()?;
    match catch_up(zone, newest, &chain) {
        CatchUp::Done(applied) => Some(Recovered::Held(key, history, applied)),
        CatchUp::Newer => {
            warn!(file = %path.display(), image = zone.serial(),
                  "journal: the zone's image is newer than its history; the image is served, IXFR from the serials between falls back to AXFR");
            Some(Recovered::Held(key, history, 0))
        }
        CatchUp::NotInChain => {
            // The history is kept: it ends elsewhere than the image, so
            // the next commit starts it over (and rewrites the file).
            warn!(file = %path.display(), image = zone.serial(),
                  "journal: the zone's image is older than its history; the image is served until its source rebuilds the zone, IXFR falls back to AXFR");
            Some(Recovered::Held(key, history, 0))
        }
        CatchUp::Damaged => {
            warn!(file = %path.display(), "journal: a diff does not apply to the zone's image; its source rebuilds the zone");
            held.remove(&key);
            None
        }
    }
}

/// Brings `held` forward to the end of `chain` (the file's diffs, before
/// its snapshot at `serial` and after it) when it is at one of the
/// chain's serials. An image older than the file's snapshot is brought
/// forward through the diffs kept before it
/// ([`IxfrJournal::keep_from`]).
///
/// The diffs are applied in place: the image's zone is the only copy of
/// its map, so they go straight into it (on a copy they went into the
/// map's persistent overlay, a path of trie nodes copied per name). One
/// that does not apply leaves `held` half changed:
/// [`CatchUp::Damaged`], and the caller drops it.
fn catch_up(held: &mut Zone, serial: u32, chain: &[&Change]) -> CatchUp {
    let Some(at) = held.serial() else {
        return CatchUp::NotInChain;
    };
    let newest = chain.last().map_or(Some(serial), |c| c.new_serial());
    if newest == Some(at) {
        return CatchUp::Done(0);
    }
    if newest.is_some_and(|newest| is_newer(at, newest)) {
        return CatchUp::Newer;
    }
    let Some(from) = chain.iter().rposition(|c| c.old_serial() == Some(at)) else {
        return CatchUp::NotInChain;
    };
    let linked = chain[from..]
        .windows(2)
        .all(|w| w[0].new_serial() == w[1].old_serial());
    if !linked {
        return CatchUp::NotInChain;
    }
    let mut bulk = held.bulk();
    let applied = |c: &&Change| c.decoded().is_some_and(|d| apply(&mut bulk, &d));
    if chain[from..].iter().all(applied) {
        CatchUp::Done(chain.len() - from)
    } else {
        CatchUp::Damaged
    }
}

enum CatchUp {
    /// At the chain's end now, after applying this many diffs.
    Done(usize),
    /// Newer than the chain's end (its last diffs lost): untouched.
    Newer,
    /// Not at a serial of the chain: untouched.
    NotInChain,
    /// A diff did not apply: half changed.
    Damaged,
}

/// Applies a diff to a zone; false if the zone is not at its old serial.
fn apply(zone: &mut Bulk<'_>, diff: &ZoneDiff) -> bool {
    if zone.zone().serial() != diff.old_serial {
        return false;
    }
    for r in &diff.removed {
        zone.remove(&r.name, &r.data);
    }
    for r in &diff.added {
        if zone.insert(r.clone()).is_err() {
            return false;
        }
    }
    zone.zone().serial() == diff.new_serial
}

#[cfg(test)]
mod tests;
