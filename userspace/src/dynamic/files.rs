//! The files of zones that take updates. The IXFR journal holds every
//! acknowledged update; the zone file is kept in step with it both ways,
//! as Knot's `zonefile-sync` and `zonefile-load: difference` do:
//!
//! * **written back** (atomically: a temporary file, `fsync`, rename)
//!   once the zone has been quiet for `[update] file_sync_ms` (or at most
//!   six times that after its first unwritten change), and at a clean
//!   stop. The file is then one absolute record per line: comments,
//!   `$INCLUDE`s and formatting are not kept.
//! * **read as a difference**: at start-up and on SIGHUP the file is
//!   compared with the *base*, a copy of what was last read from it or
//!   written to it (`<data_dir>/dynamic/<zone>base`); what the operator
//!   changed between the two is applied to the zone as served, as one
//!   commit. Updates not yet written back are kept either way.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hickory_proto::rr::{LowerName, Name, RecordType};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::clock::unix_secs;
use crate::config::Config;
use crate::zone::disk::stat;
use crate::zone::dump::master_file;
use crate::zone::serial::is_newer;
use crate::zone::source::SourceFile;
use crate::zone::store::diff;
use crate::zone::{
    load_zone_file, load_zone_str, Change, Edit, FeedItem, LoadError, Zone, ZoneStore,
};

/// Where the files of zones that take updates are, and what was last
/// written to each.
pub struct ZoneFiles {
    dir: PathBuf,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Origin → its zone file.
    files: HashMap<LowerName, PathBuf>,
    /// The zone version (uid) each file holds, once known.
    synced: HashMap<LowerName, u64>,
    /// Each file's length and modification time when last read or
    /// written: a file that differs was edited since.
    stamps: HashMap<LowerName, Option<SourceFile>>,
}

/// What reading a zone's file did.
#[derive(Debug, PartialEq, Eq)]
pub enum FileLoad {
    /// The file is as last read or written: the zone is left alone.
    Unchanged,
    /// The file's edits were applied to the zone as served.
    Merged { added: usize, removed: usize },
    /// The zone was loaded from the file (first load, no base).
    Loaded,
}

impl ZoneFiles {
    /// The zones of `config` that take updates; `None` when there are
    /// none (or no data directory to keep bases in).
    pub fn new(config: &Config) -> Option<Arc<ZoneFiles>> {
        let dir = config.transfer.data_dir.as_ref()?.join("dynamic");
        let files = ZoneFiles {
            dir,
            state: Mutex::default(),
        };
        files.configure(config);
        Some(Arc::new(files))
    }

    /// Follows a reloaded configuration's set of zones that take updates.
    pub fn configure(&self, config: &Config) {
        let zones = config.update_zones();
        let mut state = self.lock();
        state.files = config
            .zones
            .iter()
            .filter(|z| zones.contains(&z.origin_name()))
            .filter_map(|z| Some((LowerName::new(&z.origin_name()), z.file.clone()?)))
            .collect();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `origin` takes updates (its file is read here, not by the
    /// plain zone-file source).
    pub fn takes(&self, origin: &LowerName) -> bool {
        self.lock().files.contains_key(origin)
    }

    pub fn origins(&self) -> Vec<Name> {
        self.lock().files.keys().map(Name::from).collect()
    }

    fn base_path(&self, origin: &LowerName) -> PathBuf {
        self.dir.join(format!("{origin}base"))
    }

    /// Reads the file of `origin` into the store (start-up, SIGHUP): the
    /// whole zone when nothing is served yet or there is no base, else
    /// the difference between the base and the file, applied to the zone
    /// as served.
    pub fn load(&self, store: &ZoneStore, origin: &Name) -> Result<FileLoad, LoadError> {
        // Held throughout: a write-back does not run meanwhile.
        let mut state = self.lock();
        self.load_locked(&mut state, store, origin)
    }

    fn load_locked(
        &self,
        state: &mut State,
        store: &ZoneStore,
        origin: &Name,
    ) -> Result<FileLoad, LoadError> {
        let key = LowerName::new(origin);
        let Some(path) = state.files.get(&key).cloned() else {
            return Ok(FileLoad::Unchanged);
        };
        let stamp = stat(&path).ok();
        let file = load_zone_file(&path, origin)?;
        let base_path = self.base_path(&key);
        let base = std::fs::read_to_string(&base_path)
            .ok()
            .and_then(|text| load_zone_str(&text, origin, &base_path).ok());
        let served = store.snapshot().zone(&key).cloned();
        let outcome = match (served, base) {
            (Some(served), Some(base)) => {
                let d = diff(&base, &file);
                let (added, removed) = (d.added.len(), d.removed.len());
                if added + removed == 0 {
                    if diff(&served, &file).is_empty() {
                        state.synced.insert(key.clone(), served.uid());
                    }
                    state.stamps.insert(key, stamp);
                    return Ok(FileLoad::Unchanged);
                }
                let edit = difference(&d, &file, &served);
                if let Err(e) = store.edit(origin, unix_secs(), |_| Ok::<_, String>(edit)) {
                    warn!(zone = %origin, "applying the zone file's edits: {e}");
                }
                FileLoad::Merged { added, removed }
            }
            _ => {
                store.replace_zones(vec![file.clone()], &[], unix_secs());
                if let Some(z) = store.snapshot().zone(&key) {
                    state.synced.insert(key.clone(), z.uid());
                }
                FileLoad::Loaded
            }
        };
        state.stamps.insert(key, stamp);
        if let Err(e) = write_file(&base_path, &master_file(&file)) {
            warn!(zone = %origin, file = %base_path.display(), "cannot keep the zone file's base: {e}");
        }
        Ok(outcome)
    }

    /// Writes the zone of `origin` as served back to its file (and its
    /// base), unless the file already holds that version.
    pub fn write_back(&self, store: &ZoneStore, origin: &LowerName) {
        let mut state = self.lock();
        let Some(path) = state.files.get(origin).cloned() else {
            return;
        };
        // Edited since it was last read or written: the edit is merged
        // first, never overwritten.
        if state
            .stamps
            .get(origin)
            .is_some_and(|s| *s != stat(&path).ok())
        {
            let name = Name::from(origin);
            match self.load_locked(&mut state, store, &name) {
                Ok(outcome) => {
                    info!(zone = %name, ?outcome, "zone file edited before its write-back; read first")
                }
                Err(e) => {
                    warn!(zone = %name, "zone file edited but it does not load; not written back: {e}");
                    return;
                }
            }
        }
        let snapshot = store.snapshot();
        let Some(zone) = snapshot.zone(origin) else {
            return;
        };
        if state.synced.get(origin) == Some(&zone.uid()) {
            return;
        }
        let text = master_file(zone);
        let written =
            write_file(&path, &text).and_then(|_| write_file(&self.base_path(origin), &text));
        match written {
            Ok(()) => {
                state.synced.insert(origin.clone(), zone.uid());
                state.stamps.insert(origin.clone(), stat(&path).ok());
                info!(zone = %zone.origin(), serial = zone.serial(), file = %path.display(), "zone written back to its file");
            }
            Err(e) => warn!(zone = %zone.origin(), file = %path.display(),
                            "cannot write the zone back to its file (its updates stay in the journal): {e}"),
        }
    }
}

/// The edits of the file (`d`: base → file) as an edit of the zone as
/// served: its records, and the file's SOA when its serial is newer than
/// the served one (else the serial policy moves it).
fn difference(d: &crate::zone::ZoneDiff, file: &Zone, served: &Zone) -> Edit {
    let data = |r: &&hickory_proto::rr::Record| r.record_type() != RecordType::SOA;
    let mut changes: Vec<Change> = d
        .removed
        .iter()
        .filter(data)
        .cloned()
        .map(Change::Remove)
        .collect();
    changes.extend(d.added.iter().filter(data).cloned().map(Change::Add));
    let soa = match (file.soa(), served.serial()) {
        (Some((soa, ttl)), Some(now)) if is_newer(soa.serial, now) => Some((soa.clone(), ttl)),
        _ => None,
    };
    Edit { changes, soa }
}

fn write_file(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    crate::durable::replace_with(path, 0o644, |w| w.write_all(text.as_bytes()))
}

/// Writes zones back to their files as they go quiet, and every one not
/// yet written when `stop` turns true; ends then.
pub fn start_write_back(
    files: Arc<ZoneFiles>,
    store: Arc<ZoneStore>,
    quiet: Duration,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let (_, mut feed) = store.subscribe();
    tokio::spawn(async move {
        // Zone → (first, last) unwritten change.
        let mut dirty: HashMap<LowerName, (Instant, Instant)> = HashMap::new();
        // Zones whose file may lag the journal from before a restart.
        for origin in files.origins() {
            let now = Instant::now();
            dirty.insert(LowerName::new(&origin), (now, now));
        }
        loop {
            let due = |(first, last): &(Instant, Instant)| (*last + quiet).min(*first + quiet * 6);
            let next = dirty.values().map(due).min();
            tokio::select! {
                item = feed.next() => {
                    let Some(item) = item else { break };
                    let now = Instant::now();
                    let origins: Vec<Name> = match &item {
                        FeedItem::Commit(c) => c.events.iter().map(|e| e.origin().clone()).collect(),
                        FeedItem::Resync(_) => files.origins(),
                    };
                    for origin in origins {
                        let key = LowerName::new(&origin);
                        if files.takes(&key) {
                            dirty.entry(key).and_modify(|t| t.1 = now).or_insert((now, now));
                        }
                    }
                }
                _ = sleep_until(next) => {
                    let now = Instant::now();
                    let ready: Vec<LowerName> = dirty.iter().filter(|(_, t)| due(t) <= now).map(|(k, _)| k.clone()).collect();
                    for key in ready {
                        dirty.remove(&key);
                        let (f, s) = (files.clone(), store.clone());
                        let _ = tokio::task::spawn_blocking(move || f.write_back(&s, &key)).await;
                    }
                }
                _ = stop.changed() => break,
            }
        }
        let (f, s) = (files.clone(), store.clone());
        let _ = tokio::task::spawn_blocking(move || {
            for key in dirty.into_keys() {
                f.write_back(&s, &key);
            }
        })
        .await;
    })
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
