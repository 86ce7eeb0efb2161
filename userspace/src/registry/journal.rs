//! The registry on disk: a snapshot plus an append-only journal of
//! [`Entry`] batches. A batch is acknowledged only after `fdatasync`, so an
//! acknowledged write survives `kill -9` and power loss. Each record is
//! a [`crate::frames`] frame of JSON; a torn or corrupt tail (the write that was
//! in flight when the process died, never acknowledged) is cut off on open,
//! so a batch is either replayed whole or not at all.
//!
//! Every entry carries the full resulting state of what it touches, so
//! replaying any prefix of the journal on top of the snapshot it was
//! compacted into gives the same state: a crash during compaction is safe.
//!
//! The file grows ahead of its records by [`PREALLOCATE`] bytes of zeros
//! at a time, so a sync writes the records in place and not also the
//! file's new size; a reader takes zeros after the last record for the
//! end.
//!
//! Compaction runs beside the writer: [`Journal::rotate`] sets the
//! journal aside (`registry.journal.compacting`) and starts an empty one,
//! and a [`Compaction`] writes the registry as it stood at that moment as
//! the new snapshot, then removes the file set aside. Writes go on
//! meanwhile (with a million instances the snapshot takes seconds). A
//! start replays the snapshot, then the file set aside if it is still
//! there, then the journal.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use tracing::warn;

use super::state::{Entry, Registry};

const JOURNAL: &str = "registry.journal";
/// The journal set aside while its compaction into the snapshot runs.
const COMPACTING: &str = "registry.journal.compacting";
const SNAPSHOT: &str = "registry.snapshot";
/// Larger than any batch the writer makes (at most 1,024 entries).
const MAX_BATCH_BYTES: u32 = 64 << 20;
/// Compact once the journal holds this many bytes, or as many as the
/// snapshot if that is more: the cost of compacting stays a constant
/// share of what is written, however large the registry.
const COMPACT_BYTES: u64 = 64 << 20;
/// The journal file is extended by this many bytes of zeros at a time.
/// An `fdatasync` after records written over zeros already on disk need
/// not write the file's size too: 135 µs where an append took 205 on the
/// development host (ext4).
const PREALLOCATE: u64 = 4 << 20;

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error(transparent)]
    Io(#[from] FileError),
    #[error("{}: corrupt snapshot: {message}", path.display())]
    Snapshot { path: PathBuf, message: String },
    /// The writer's thread or runtime could not run.
    #[error("registry writer: {0}")]
    Writer(#[source] io::Error),
    /// Damage before the end of the journal: batches after it were
    /// acknowledged, so nothing is dropped silently.
    #[error(
        "{}: corrupt record at byte offset {offset} with {after} bytes of later records; \
         refusing to start (`xdpdns registry-repair --config FILE` keeps everything before \
         the damage and sets the rest aside)",
        path.display()
    )]
    Corrupt {
        path: PathBuf,
        offset: u64,
        after: u64,
    },
}

/// One durable batch: entries applied together, and when.
#[derive(Debug, Deserialize, Serialize, PartialEq)]
pub struct Batch {
    /// Unix milliseconds at which the batch was made.
    pub ts: u64,
    pub entries: Vec<Entry>,
}

#[derive(Deserialize, Serialize)]
struct SnapshotFile {
    ts: u64,
    registry: Registry,
}

pub struct Journal {
    dir: PathBuf,
    file: File,
    /// Where the records end.
    bytes: u64,
    /// The file's length: zeros from `bytes` on.
    allocated: u64,
    pending: Vec<u8>,
    /// Size of the newest snapshot (see [`COMPACT_BYTES`]).
    snapshot_bytes: u64,
}

/// A compaction that may run on another thread: the journal it replaces
/// is already set aside (see [`Journal::rotate`]).
pub struct Compaction {
    dir: PathBuf,
}

/// What was on disk.
pub struct Recovered {
    pub registry: Registry,
    /// Time of the newest batch (0 when empty): leases resume from here.
    pub last_ts: u64,
    pub batches: usize,
    /// Bytes of torn tail cut off.
    pub discarded: u64,
    /// Instances put in the last [`RECENT_MS`] before the newest batch
    /// (those of the journal since the last compaction): the served
    /// zones' images may lack them after a crash.
    pub recent: Vec<CompactString>,
}

/// How far back from the newest batch an instance counts as recent at a
/// start (see [`Recovered::recent`]): the zone images and IXFR journal
/// record a commit milliseconds after the registry acknowledges it.
pub const RECENT_MS: u64 = 2_000;

/// Instances put lately, with their batch's time, oldest first.
type Recent = VecDeque<(u64, CompactString)>;

use crate::frames::{file_err as io_err, FileError};

impl Journal {
    /// Opens (creating) the journal in `dir` and recovers the registry.
    pub fn open(dir: &Path) -> Result<(Journal, Recovered), JournalError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let snap_path = dir.join(SNAPSHOT);
        let (mut registry, mut last_ts, snapshot_bytes) = match std::fs::read(&snap_path) {
            Ok(bytes) => {
                let s: SnapshotFile =
                    serde_json::from_slice(&bytes).map_err(|e| JournalError::Snapshot {
                        path: snap_path.clone(),
                        message: e.to_string(),
                    })?;
                (s.registry, s.ts, bytes.len() as u64)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => (Registry::default(), 0, 0),
            Err(e) => return Err(io_err(&snap_path)(e).into()),
        };
        // A compaction that did not finish: what it set aside comes before
        // the journal (replayed again if the snapshot already has it).
        let compacting = dir.join(COMPACTING);
        let mut count = 0;
        let mut recent = Recent::new();
        match std::fs::read(&compacting) {
            Ok(bytes) => {
                let (batches, good) = decode(&bytes);
                let end = records_end(&bytes, good);
                if good != end {
                    // Synced before it was set aside: any damage is real.
                    return Err(JournalError::Corrupt {
                        path: compacting,
                        offset: good as u64,
                        after: (end - good) as u64,
                    });
                }
                count += batches.len();
                replay(batches, &mut registry, &mut last_ts, &mut recent);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&compacting)(e).into()),
        }
        let path = dir.join(JOURNAL);
        let existed = path.exists();
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err(&path))?;
        if !existed {
            // The new file's directory entry must be durable before the
            // first acknowledged write is.
            sync_dir(dir)?;
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io_err(&path))?;
        let (batches, good) = decode(&bytes);
        let end = records_end(&bytes, good);
        if let Damage::Corrupt = damage(&bytes[..end], good) {
            return Err(JournalError::Corrupt {
                path,
                offset: good as u64,
                after: (end - good) as u64,
            });
        }
        let discarded = (end - good) as u64;
        let mut allocated = bytes.len() as u64;
        if discarded > 0 {
            warn!(file = %path.display(), offset = good, discarded, "journal: cutting off a torn tail (an unacknowledged write)");
            file.set_len(good as u64).map_err(io_err(&path))?;
            file.sync_data().map_err(io_err(&path))?;
            allocated = good as u64;
        }
        count += batches.len();
        replay(batches, &mut registry, &mut last_ts, &mut recent);
        let mut journal = Journal {
            dir: dir.to_path_buf(),
            file,
            bytes: good as u64,
            allocated,
            pending: Vec::new(),
            snapshot_bytes,
        };
        if compacting.exists() {
            // Finished here, so the next compaction can set the journal
            // aside again.
            journal.compact(&registry, last_ts)?;
        }
        Ok((
            journal,
            Recovered {
                registry,
                last_ts,
                batches: count,
                discarded,
                recent: {
                    // Each once, however often it was put.
                    let mut ids: Vec<CompactString> =
                        recent.into_iter().map(|(_, id)| id).collect();
                    ids.sort_unstable();
                    ids.dedup();
                    ids
                },
            },
        ))
    }

    /// Queues a batch; nothing is durable before [`Journal::sync`].
    pub fn append(&mut self, batch: &Batch) {
        let json = serde_json::to_vec(batch).expect("entries always serialise");
        self.pending.extend(crate::frames::frame(&json));
    }

    /// Writes the queued batches and waits for the disk.
    pub fn sync(&mut self) -> Result<(), JournalError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let path = self.dir.join(JOURNAL);
        let end = self.bytes + self.pending.len() as u64;
        if end > self.allocated {
            // Zeros past the records, on disk with them at this sync.
            let to = (end / PREALLOCATE + 1) * PREALLOCATE;
            write_zeros(&self.file, end, to).map_err(io_err(&path))?;
            self.allocated = to;
        }
        self.file
            .write_all_at(&self.pending, self.bytes)
            .map_err(io_err(&path))?;
        self.file.sync_data().map_err(io_err(&path))?;
        self.bytes = end;
        self.pending.clear();
        Ok(())
    }

    /// Syncs, and cuts the zeros past the records: a file set aside, or
    /// left at a stop, then ends with its last record (and a release
    /// before the zeros reads it as it always did).
    pub fn trim(&mut self) -> Result<(), JournalError> {
        self.sync()?;
        if self.allocated > self.bytes {
            let path = self.dir.join(JOURNAL);
            self.file.set_len(self.bytes).map_err(io_err(&path))?;
            self.file.sync_data().map_err(io_err(&path))?;
            self.allocated = self.bytes;
        }
        Ok(())
    }

    /// Bytes in the journal file (the snapshot aside).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn wants_compaction(&self) -> bool {
        self.bytes >= COMPACT_BYTES.max(self.snapshot_bytes)
    }

    /// Writes `registry` as the new snapshot (atomically, by rename) and
    /// empties the journal and whatever was set aside, on this thread.
    pub fn compact(&mut self, registry: &Registry, ts: u64) -> Result<(), JournalError> {
        self.sync()?;
        self.snapshot_bytes = write_snapshot(&self.dir, registry, ts)?;
        let path = self.dir.join(JOURNAL);
        self.file.set_len(0).map_err(io_err(&path))?;
        self.file.sync_all().map_err(io_err(&path))?;
        self.bytes = 0;
        self.allocated = 0;
        remove_compacting(&self.dir)
    }

    /// Sets the journal aside for a [`Compaction`] of the registry as it
    /// stands now, and goes on in an empty one; `None` while an earlier
    /// compaction has not finished (the journal then grows on).
    pub fn rotate(&mut self) -> Result<Option<Compaction>, JournalError> {
        let aside = self.dir.join(COMPACTING);
        if aside.exists() {
            return Ok(None);
        }
        self.trim()?;
        let path = self.dir.join(JOURNAL);
        std::fs::rename(&path, &aside).map_err(io_err(&path))?;
        self.file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err(&path))?;
        // Both names durable before a write lands in the new file.
        sync_dir(&self.dir)?;
        self.bytes = 0;
        self.allocated = 0;
        Ok(Some(Compaction {
            dir: self.dir.clone(),
        }))
    }

    /// A finished [`Compaction`]'s snapshot size.
    pub fn compacted(&mut self, snapshot_bytes: u64) {
        self.snapshot_bytes = snapshot_bytes;
    }
}

impl Compaction {
    /// Writes `registry` (the state when the journal was set aside) as
    /// the new snapshot, then removes the journal set aside; returns the
    /// snapshot's size. A crash at any point leaves a start that replays
    /// the same state.
    pub fn run(self, registry: &Registry, ts: u64) -> Result<u64, JournalError> {
        let bytes = write_snapshot(&self.dir, registry, ts)?;
        remove_compacting(&self.dir)?;
        Ok(bytes)
    }
}

/// Writes the snapshot, streamed (a million instances make hundreds of
/// megabytes of JSON); returns its size.
fn write_snapshot(dir: &Path, registry: &Registry, ts: u64) -> Result<u64, JournalError> {
    struct Counted<'a> {
        out: &'a mut dyn Write,
        bytes: u64,
    }
    impl Write for Counted<'_> {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = self.out.write(buf)?;
            self.bytes += n as u64;
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            self.out.flush()
        }
    }
    let snap = dir.join(SNAPSHOT);
    let mut bytes = 0;
    crate::durable::replace_with(&snap, 0o644, |out| {
        let mut counted = Counted { out, bytes: 0 };
        let file = SnapshotFile {
            ts,
            registry: registry.clone(),
        };
        serde_json::to_writer(&mut counted, &file)?;
        bytes = counted.bytes;
        Ok(())
    })
    .map_err(io_err(&snap))?;
    Ok(bytes)
}

fn remove_compacting(dir: &Path) -> Result<(), JournalError> {
    let aside = dir.join(COMPACTING);
    match crate::durable::remove_file(&aside) {
        Ok(()) => sync_dir(dir),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(&aside)(e).into()),
    }
}

/// Applies `batches` to `registry`, keeping the newest batch time.
fn replay(batches: Vec<Batch>, registry: &mut Registry, last_ts: &mut u64, recent: &mut Recent) {
    for b in batches {
        *last_ts = (*last_ts).max(b.ts);
        for e in &b.entries {
            if let Entry::Put { instance } = e {
                recent.push_back((b.ts, instance.id.clone()));
            }
            registry.apply(e);
        }
        while recent
            .front()
            .is_some_and(|(ts, _)| ts.saturating_add(RECENT_MS) < *last_ts)
        {
            recent.pop_front();
        }
    }
}

/// Writes zeros over `from..to` of `file`.
fn write_zeros(file: &File, from: u64, to: u64) -> io::Result<()> {
    static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
    let mut at = from;
    while at < to {
        let n = (to - at).min(ZEROS.len() as u64);
        file.write_all_at(&ZEROS[..n as usize], at)?;
        at += n;
    }
    Ok(())
}

/// Where what follows the intact records at `good` ends: the zeros the
/// file was extended by are not part of it.
fn records_end(bytes: &[u8], good: usize) -> usize {
    bytes[good..]
        .iter()
        .rposition(|&b| b != 0)
        .map_or(good, |last| good + last + 1)
}

fn sync_dir(dir: &Path) -> Result<(), JournalError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))?;
    Ok(())
}

/// What follows the intact records of a journal.
#[derive(Debug, PartialEq, Eq)]
enum Damage {
    /// Nothing, or the one write in flight when the process died (cut
    /// short, or its checksum fails with nothing after it): never
    /// acknowledged, cut off.
    TornTail,
    /// A record whose checksum passes but whose batch does not decode, or
    /// a bad record with more bytes after it: acknowledged batches may
    /// follow.
    Corrupt,
}

fn damage(bytes: &[u8], good: usize) -> Damage {
    let rest = &bytes[good..];
    if let Some(head) = rest.get(..8) {
        let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(head[4..].try_into().expect("4 bytes"));
        if rest
            .get(8..8 + len)
            .is_some_and(|body| crc32fast::hash(body) == crc)
        {
            // Intact, yet not a batch: not a torn write.
            return Damage::Corrupt;
        }
    }
    // A torn write is the last one: no whole batch may start after it
    // (this also catches a damaged length that points past the end).
    let later = (good + 1..bytes.len().saturating_sub(8)).any(|at| {
        // Skip implausible lengths before hashing (a recovery path, but a
        // damaged 64 MiB journal must not take minutes).
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        len > 0
            && len <= MAX_BATCH_BYTES
            && crate::frames::frames(&bytes[at..])
                .next()
                .is_some_and(|(body, _)| serde_json::from_slice::<Batch>(body).is_ok())
    });
    if later {
        Damage::Corrupt
    } else {
        Damage::TornTail
    }
}

/// `xdpdns registry-repair`: keeps every batch before the first damaged
/// record of the journal in `dir`, moves the rest to
/// `registry.journal.damaged-OFFSET`, and says what it kept and set aside.
pub fn repair(dir: &Path) -> Result<String, JournalError> {
    let path = dir.join(JOURNAL);
    let bytes = std::fs::read(&path).map_err(io_err(&path))?;
    let (batches, good) = decode(&bytes);
    let end = records_end(&bytes, good);
    if good == end {
        return Ok(format!(
            "{}: {} batches, no damage; nothing changed",
            path.display(),
            batches.len()
        ));
    }
    let aside = dir.join(format!("{JOURNAL}.damaged-{good}"));
    std::fs::write(&aside, &bytes[good..end]).map_err(io_err(&aside))?;
    let file = OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(io_err(&path))?;
    file.set_len(good as u64).map_err(io_err(&path))?;
    file.sync_all().map_err(io_err(&path))?;
    sync_dir(dir)?;
    Ok(format!(
        "{}: kept {} batches ({good} bytes); set aside {} bytes from offset {good} in {}",
        path.display(),
        batches.len(),
        end - good,
        aside.display()
    ))
}

/// Decodes whole, intact records; returns them and the length they cover.
fn decode(bytes: &[u8]) -> (Vec<Batch>, usize) {
    let mut out = Vec::new();
    let mut at = 0;
    for (body, end) in crate::frames::frames(bytes) {
        let Ok(batch) = serde_json::from_slice::<Batch>(body) else {
            break;
        };
        out.push(batch);
        at = end;
    }
    (out, at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::model::InstanceSpec;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("xdpdns-journal-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn put(r: &Registry, id: &str) -> Entry {
        let spec: InstanceSpec =
            serde_json::from_str(r#"{"owner":"o","addresses":["10.0.0.1"],"lease_secs":30}"#)
                .unwrap();
        r.register(id, &spec, 0).unwrap()
    }

    /// Journals instances a, b and c, one synced batch each; returns the
    /// registry they make and the journal's length after each.
    fn three_batches(j: &mut Journal) -> (Registry, Vec<u64>) {
        let mut reg = Registry::default();
        let mut ends = Vec::new();
        for (i, id) in ["a", "b", "c"].iter().enumerate() {
            let e = put(&reg, id);
            reg.apply(&e);
            j.append(&Batch {
                ts: i as u64 + 1,
                entries: vec![e],
            });
            j.sync().unwrap();
            ends.push(j.bytes);
        }
        (reg, ends)
    }

    #[test]
    fn batches_survive_reopen_and_torn_tails_are_cut() {
        let dir = tmpdir("torn");
        let (mut j, rec) = Journal::open(&dir).unwrap();
        assert!(rec.registry.instances.is_empty());
        let (reg, _) = three_batches(&mut j);
        drop(j);
        // A torn write: half of a fourth record, where the records end
        // (zeros follow it).
        let e = put(&reg, "d");
        let (mut half, _) = Journal::open(&dir).unwrap();
        half.append(&Batch {
            ts: 9,
            entries: vec![e],
        });
        let cut = half.pending.len() / 2;
        half.file
            .write_all_at(&half.pending[..cut], half.bytes)
            .unwrap();
        drop(half);

        let (j, rec) = Journal::open(&dir).unwrap();
        assert_eq!(
            rec.registry, reg,
            "three whole batches, no half of the fourth"
        );
        assert_eq!(
            (rec.batches, rec.last_ts, rec.discarded),
            (3, 3, cut as u64)
        );
        drop(j);
        let (_, again) = Journal::open(&dir).unwrap();
        assert_eq!(again.discarded, 0, "the tail was cut for good");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The file is extended ahead of its records by zeros: a start takes
    /// them for the end, the next batch goes where the records end, and
    /// anything but zeros past them is damage, not a torn write.
    #[test]
    fn records_go_over_the_zeros_the_file_was_extended_by() {
        let dir = tmpdir("prealloc");
        let (mut j, _) = Journal::open(&dir).unwrap();
        let (mut reg, ends) = three_batches(&mut j);
        drop(j);
        let path = dir.join(JOURNAL);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64, PREALLOCATE);
        assert!(bytes[ends[2] as usize..].iter().all(|&b| b == 0));

        let (mut j, rec) = Journal::open(&dir).unwrap();
        assert_eq!((rec.batches, rec.discarded), (3, 0));
        assert_eq!(rec.registry, reg);
        assert_eq!(j.bytes(), ends[2]);
        let e = put(&reg, "d");
        reg.apply(&e);
        j.append(&Batch {
            ts: 4,
            entries: vec![e],
        });
        j.sync().unwrap();
        drop(j);
        let (_, rec) = Journal::open(&dir).unwrap();
        assert_eq!((rec.batches, rec.last_ts), (4, 4));
        assert_eq!(rec.registry, reg);

        let mut bytes = std::fs::read(&path).unwrap();
        bytes[PREALLOCATE as usize / 2] = 1;
        std::fs::write(&path, &bytes).unwrap();
        match Journal::open(&dir) {
            Err(JournalError::Corrupt { offset, after, .. }) => {
                let good = rec_end(&bytes);
                assert_eq!(offset, good as u64);
                assert_eq!(after as usize, PREALLOCATE as usize / 2 + 1 - good);
            }
            other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Where the intact records of `bytes` end.
    fn rec_end(bytes: &[u8]) -> usize {
        decode(bytes).1
    }

    #[test]
    fn a_batch_larger_than_the_preallocation_extends_the_file_past_it() {
        let dir = tmpdir("prealloc-big");
        let (mut j, _) = Journal::open(&dir).unwrap();
        let mut reg = Registry::default();
        let mut entries = Vec::new();
        // About 200 bytes an entry: past one preallocation.
        for i in 0..(PREALLOCATE / 100) {
            let e = put(&reg, &format!("instance-{i}"));
            reg.apply(&e);
            entries.push(e);
        }
        j.append(&Batch { ts: 1, entries });
        j.sync().unwrap();
        assert!(j.bytes() > PREALLOCATE);
        let len = std::fs::metadata(dir.join(JOURNAL)).unwrap().len();
        assert_eq!(len % PREALLOCATE, 0);
        assert!(len > j.bytes());
        drop(j);
        let (mut j, rec) = Journal::open(&dir).unwrap();
        assert_eq!(rec.registry, reg);
        // At a stop the zeros go: the file ends with its last record.
        j.trim().unwrap();
        let len = std::fs::metadata(dir.join(JOURNAL)).unwrap().len();
        assert_eq!(len, j.bytes());
        drop(j);
        let (_, rec) = Journal::open(&dir).unwrap();
        assert_eq!(rec.registry, reg);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn compaction_keeps_state_and_a_crash_before_truncation_is_harmless() {
        let dir = tmpdir("compact");
        let (mut j, _) = Journal::open(&dir).unwrap();
        let mut reg = Registry::default();
        for id in ["a", "b"] {
            let e = put(&reg, id);
            reg.apply(&e);
            j.append(&Batch {
                ts: 5,
                entries: vec![e],
            });
        }
        let del = reg.deregister("a").unwrap();
        reg.apply(&del);
        j.append(&Batch {
            ts: 6,
            entries: vec![del],
        });
        j.sync().unwrap();
        let journal_bytes = std::fs::read(dir.join(JOURNAL)).unwrap();
        j.compact(&reg, 6).unwrap();
        drop(j);
        let (_, rec) = Journal::open(&dir).unwrap();
        assert_eq!(rec.registry, reg);
        // Simulate a crash after the snapshot rename, before truncation:
        // the old journal replays on top of the snapshot.
        std::fs::write(dir.join(JOURNAL), journal_bytes).unwrap();
        let (_, rec) = Journal::open(&dir).unwrap();
        assert_eq!(rec.registry, reg);
        assert_eq!(rec.last_ts, 6);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A compaction beside the writer: the journal set aside, writes going
    /// on in a new one, the snapshot of the state at the rotation. A start
    /// after a crash at each step (before the snapshot, before the file
    /// set aside is removed) recovers the same registry, and finishes the
    /// compaction so the next can start.
    #[test]
    fn a_compaction_beside_the_writer_recovers_the_same_state_after_a_crash_at_any_step() {
        let dir = tmpdir("rotate");
        let (mut j, _) = Journal::open(&dir).unwrap();
        let (mut reg, ends) = three_batches(&mut j);
        let compaction = j.rotate().unwrap().expect("nothing set aside yet");
        assert!(j.rotate().unwrap().is_none(), "one compaction at a time");
        let at_rotation = reg.clone();
        let set_aside = std::fs::read(dir.join(COMPACTING)).unwrap();
        assert_eq!(
            set_aside.len() as u64,
            ends[2],
            "set aside without its zeros"
        );
        // Writes go on in the new journal, deleting one of the first.
        for e in [put(&reg, "d"), reg.deregister("a").unwrap()] {
            reg.apply(&e);
            j.append(&Batch {
                ts: 7,
                entries: vec![e],
            });
            j.sync().unwrap();
        }
        let journal = std::fs::read(dir.join(JOURNAL)).unwrap();

        // A crash before the snapshot: the old snapshot (none), the file
        // set aside, then the journal.
        drop(j);
        let (j, rec) = Journal::open(&dir).unwrap();
        assert_eq!(rec.registry, reg);
        assert_eq!(rec.last_ts, 7);
        assert!(!dir.join(COMPACTING).exists(), "finished at the start");
        drop(j);

        // The compaction runs to its end: the state is the same, nothing
        // is left aside, and the next compaction may start.
        std::fs::write(dir.join(COMPACTING), &set_aside).unwrap();
        std::fs::write(dir.join(JOURNAL), &journal).unwrap();
        std::fs::remove_file(dir.join(SNAPSHOT)).unwrap();
        let bytes = compaction.run(&at_rotation, 3).unwrap();
        assert!(bytes > 0);
        assert!(!dir.join(COMPACTING).exists());
        let (mut j, rec) = Journal::open(&dir).unwrap();
        assert_eq!(rec.registry, reg);
        assert!(j.rotate().unwrap().is_some());
        drop(j);

        // A crash after the snapshot, before the file set aside is
        // removed: it replays again on top of the snapshot, harmlessly.
        std::fs::write(dir.join(COMPACTING), &set_aside).unwrap();
        std::fs::write(dir.join(JOURNAL), &journal).unwrap();
        let (_, rec) = Journal::open(&dir).unwrap();
        assert_eq!(rec.registry, reg);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Damage before the last record is not a torn write: later batches
    /// were acknowledged. Opening refuses with the file and offset; the
    /// repair keeps everything before the damage and sets the rest aside.
    #[test]
    fn mid_journal_damage_refuses_to_open_and_repair_keeps_what_precedes_it() {
        let dir = tmpdir("corrupt");
        let (mut j, _) = Journal::open(&dir).unwrap();
        let (_, ends) = three_batches(&mut j);
        drop(j);
        let path = dir.join(JOURNAL);
        let mut bytes = std::fs::read(&path).unwrap();
        let second = ends[0] as usize; // the second record starts here
        bytes[second + 20] ^= 0x40; // a flipped bit in its payload
        std::fs::write(&path, &bytes).unwrap();

        match Journal::open(&dir) {
            Err(JournalError::Corrupt { offset, after, .. }) => {
                assert_eq!(offset, ends[0]);
                assert_eq!(after, ends[2] - ends[0]);
            }
            other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
        }
        let said = repair(&dir).unwrap();
        assert!(said.contains("kept 1 batches"), "{said}");
        let aside = dir.join(format!("{JOURNAL}.damaged-{}", ends[0]));
        assert_eq!(
            std::fs::read(&aside).unwrap(),
            bytes[second..ends[2] as usize]
        );
        let (_, rec) = Journal::open(&dir).unwrap();
        assert_eq!(rec.batches, 1);
        assert!(rec.registry.instances.contains_key("a"));
        assert!(repair(&dir).unwrap().contains("no damage"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn only_the_last_write_may_be_torn() {
        let batch = br#"{"ts":1,"entries":[]}"#;
        let mut bytes = crate::frames::frame(batch);
        let good = bytes.len();
        let mut last = crate::frames::frame(batch);
        let n = last.len();
        last[n - 1] ^= 1;
        bytes.extend(&last);
        assert_eq!(damage(&bytes, good), Damage::TornTail, "bad checksum, last");
        assert_eq!(
            damage(&bytes[..good + 5], good),
            Damage::TornTail,
            "cut short"
        );
        let mut more = bytes.clone();
        more.extend(crate::frames::frame(batch));
        assert_eq!(
            damage(&more, good),
            Damage::Corrupt,
            "a whole batch after it"
        );
        // A damaged length pointing past the end, with batches after it.
        let mut long = crate::frames::frame(batch);
        long[1] = 0x7f;
        let mut far = bytes[..good].to_vec();
        far.extend(&long);
        far.extend(crate::frames::frame(batch));
        assert_eq!(damage(&far, good), Damage::Corrupt, "length past the end");
        // Intact but not a batch.
        let mut odd = bytes[..good].to_vec();
        odd.extend(crate::frames::frame(b"not json"));
        assert_eq!(damage(&odd, good), Damage::Corrupt);
    }
}
