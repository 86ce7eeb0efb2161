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

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tracing::warn;

use super::state::{Entry, Registry};

const JOURNAL: &str = "registry.journal";
const SNAPSHOT: &str = "registry.snapshot";
/// Compact once the journal holds this many bytes.
const COMPACT_BYTES: u64 = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error(transparent)]
    Io(#[from] FileError),
    #[error("{}: corrupt snapshot: {message}", path.display())]
    Snapshot { path: PathBuf, message: String },
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
    bytes: u64,
    pending: Vec<u8>,
}

/// What was on disk.
pub struct Recovered {
    pub registry: Registry,
    /// Time of the newest batch (0 when empty): leases resume from here.
    pub last_ts: u64,
    pub batches: usize,
    /// Bytes of torn tail cut off.
    pub discarded: u64,
}

use crate::frames::{file_err as io_err, FileError};

impl Journal {
    /// Opens (creating) the journal in `dir` and recovers the registry.
    pub fn open(dir: &Path) -> Result<(Journal, Recovered), JournalError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let snap_path = dir.join(SNAPSHOT);
        let (mut registry, mut last_ts) = match std::fs::read(&snap_path) {
            Ok(bytes) => {
                let s: SnapshotFile =
                    serde_json::from_slice(&bytes).map_err(|e| JournalError::Snapshot {
                        path: snap_path.clone(),
                        message: e.to_string(),
                    })?;
                (s.registry, s.ts)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => (Registry::default(), 0),
            Err(e) => return Err(io_err(&snap_path)(e).into()),
        };
        let path = dir.join(JOURNAL);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(io_err(&path))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io_err(&path))?;
        let (batches, good) = decode(&bytes);
        let discarded = bytes.len() as u64 - good as u64;
        if discarded > 0 {
            warn!(file = %path.display(), offset = good, discarded, "journal: cutting off a torn tail (an unacknowledged write)");
            file.set_len(good as u64).map_err(io_err(&path))?;
            file.sync_data().map_err(io_err(&path))?;
        }
        let count = batches.len();
        for b in batches {
            last_ts = last_ts.max(b.ts);
            for e in &b.entries {
                registry.apply(e);
            }
        }
        let journal = Journal {
            dir: dir.to_path_buf(),
            file,
            bytes: good as u64,
            pending: Vec::new(),
        };
        Ok((
            journal,
            Recovered {
                registry,
                last_ts,
                batches: count,
                discarded,
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
        self.file.write_all(&self.pending).map_err(io_err(&path))?;
        self.file.sync_data().map_err(io_err(&path))?;
        self.bytes += self.pending.len() as u64;
        self.pending.clear();
        Ok(())
    }

    pub fn wants_compaction(&self) -> bool {
        self.bytes >= COMPACT_BYTES
    }

    /// Writes `registry` as the new snapshot (atomically, by rename) and
    /// empties the journal.
    pub fn compact(&mut self, registry: &Registry, ts: u64) -> Result<(), JournalError> {
        self.sync()?;
        let snap = self.dir.join(SNAPSHOT);
        let tmp = self.dir.join("registry.snapshot.tmp");
        let body = serde_json::to_vec(&SnapshotFile {
            ts,
            registry: registry.clone(),
        })
        .expect("registry always serialises");
        let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
        f.write_all(&body).map_err(io_err(&tmp))?;
        f.sync_all().map_err(io_err(&tmp))?;
        std::fs::rename(&tmp, &snap).map_err(io_err(&snap))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err(&self.dir))?;
        let path = self.dir.join(JOURNAL);
        self.file.set_len(0).map_err(io_err(&path))?;
        self.file.sync_all().map_err(io_err(&path))?;
        self.bytes = 0;
        Ok(())
    }
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

    #[test]
    fn batches_survive_reopen_and_torn_tails_are_cut() {
        let dir = tmpdir("torn");
        let (mut j, rec) = Journal::open(&dir).unwrap();
        assert!(rec.registry.instances.is_empty());
        let mut reg = Registry::default();
        for (i, id) in ["a", "b", "c"].iter().enumerate() {
            let e = put(&reg, id);
            reg.apply(&e);
            j.append(&Batch {
                ts: i as u64 + 1,
                entries: vec![e],
            });
        }
        j.sync().unwrap();
        drop(j);
        // A torn write: half of a fourth record.
        let e = put(&reg, "d");
        let mut half = Journal {
            dir: dir.clone(),
            file: OpenOptions::new()
                .append(true)
                .open(dir.join(JOURNAL))
                .unwrap(),
            bytes: 0,
            pending: Vec::new(),
        };
        half.append(&Batch {
            ts: 9,
            entries: vec![e],
        });
        let cut = half.pending.len() / 2;
        half.file.write_all(&half.pending[..cut]).unwrap();
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
}
