//! Zone images as a subscriber to the store's change feed: a thread of its
//! own writes the newest version of every changed zone to its image (see
//! [`crate::zone::image`]), so the next start serves it at once.
//!
//! Writes are coalesced: after writing, the thread waits `pause` (or four
//! times as long as the write took, if that is longer) and then writes
//! only the newest version of what changed meanwhile, so a registry zone
//! that changes every few milliseconds is not rewritten for each change.
//! What is on disk is remembered (serial, expiry, sources), so a
//! start-up that loaded a zone from its image does not write it again.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a resting writer drops the commits that came meanwhile.
const REST_STEP: Duration = Duration::from_millis(100);

use hickory_proto::rr::LowerName;
use tracing::{debug, warn};

use crate::zone::image::{self, SourceStamp};
use crate::zone::{FeedItem, Snapshot, Subscription, Zone};

/// What an image on disk holds, enough to tell whether a zone version
/// differs from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Imaged {
    serial: Option<u32>,
    records: usize,
    stamp: SourceStamp,
}

impl Imaged {
    pub fn of(zone: &Zone) -> Imaged {
        Imaged {
            serial: zone.serial(),
            records: zone.record_count(),
            stamp: zone.source().cloned().unwrap_or_default(),
        }
    }
}

pub struct ImageWriter {
    dir: PathBuf,
    on_disk: HashMap<LowerName, Imaged>,
    /// The newest snapshot version synced: an older one (the thread's,
    /// overtaken by the stop's flush) is not written over it.
    synced: u64,
}

impl ImageWriter {
    /// A writer for `dir`, which already holds the images of `loaded`.
    pub fn new(dir: PathBuf, loaded: &[&Zone]) -> ImageWriter {
        let on_disk = loaded
            .iter()
            .map(|z| (z.origin_key().clone(), Imaged::of(z)))
            .collect();
        ImageWriter {
            dir,
            on_disk,
            synced: 0,
        }
    }

    /// Brings every image in step with `snapshot`: writes zones that
    /// differ from their image, removes images of zones no longer served.
    pub fn sync(&mut self, snapshot: &Snapshot) {
        if snapshot.version() < self.synced {
            return;
        }
        self.synced = snapshot.version();
        for zone in snapshot.zones() {
            let now = Imaged::of(zone);
            if self.on_disk.get(zone.origin_key()) == Some(&now) {
                continue;
            }
            let path = image::path_in(&self.dir, zone.origin());
            let started = std::time::Instant::now();
            let bytes = image::encode(zone, &now.stamp);
            match image::write_atomically(&path, &bytes) {
                Ok(()) => {
                    debug!(zone = %zone.origin(), serial = now.serial, bytes = bytes.len(),
                           elapsed_ms = started.elapsed().as_millis() as u64, "zone image written");
                    self.on_disk.insert(zone.origin_key().clone(), now);
                }
                Err(e) => {
                    warn!(zone = %zone.origin(), file = %path.display(), "cannot write the zone image ({e}); the next start loads the zone from its source");
                    self.on_disk.remove(zone.origin_key());
                }
            }
        }
        let gone: Vec<LowerName> = self
            .on_disk
            .keys()
            .filter(|k| snapshot.zone(k).is_none())
            .cloned()
            .collect();
        for key in gone {
            self.on_disk.remove(&key);
            let _ = std::fs::remove_file(image::path_in(&self.dir, &(&key).into()));
        }
    }
}

/// The running writer, for a last write at a clean stop.
#[derive(Clone)]
pub struct Images(Arc<Mutex<ImageWriter>>);

impl Images {
    /// Writes every zone whose image is behind `snapshot` (a clean stop:
    /// the next start then finds every image current).
    pub fn flush(&self, snapshot: &Snapshot) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .sync(snapshot);
    }
}

/// Starts the writer's thread on `feed`, which starts at `snapshot`.
/// `configured` are the zones the configuration serves: images of other
/// zones (removed from the configuration) are deleted.
pub fn start(
    writer: ImageWriter,
    snapshot: Arc<Snapshot>,
    mut feed: Subscription,
    pause: Duration,
    configured: &[hickory_proto::rr::Name],
) -> Images {
    let keep: Vec<PathBuf> = configured
        .iter()
        .map(|origin| image::path_in(&writer.dir, origin))
        .collect();
    if let Ok(entries) = std::fs::read_dir(&writer.dir) {
        for path in entries.flatten().map(|e| e.path()) {
            // Files a write killed half-way left (never read: images are
            // renamed into place whole), and images of zones not served.
            let leftover = match path.extension() {
                Some(x) if x == "tmp" => true,
                Some(x) if x == "zimg" => !keep.contains(&path),
                _ => false,
            };
            if leftover {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    let shared = Images(Arc::new(Mutex::new(writer)));
    let writer = shared.clone();
    std::thread::Builder::new()
        .name("zone-images".into())
        .spawn(move || {
            // Encoding and writing a large zone takes a while; serving
            // comes first.
            crate::background::lower_priority();
            // Zones served from elsewhere than a current image (a file
            // parsed, a journal's newer version) get theirs now.
            writer.flush(&snapshot);
            drop(snapshot);
            let mut waiting = None;
            loop {
                let Some(first) = waiting.take().or_else(|| feed.blocking_next()) else {
                    break;
                };
                // Only the newest snapshot matters: skip to it.
                let item = newest(&mut feed, first);
                let began = Instant::now();
                writer.flush(item.snapshot());
                drop(item);
                // A large zone takes a while to encode: rest four times
                // as long, so a zone that never stops changing (a
                // million-instance registry's) costs a fifth of a core,
                // not all of one. Meanwhile only the newest commit is
                // held: each one waiting in the feed keeps its version
                // of the zone alive.
                let until = Instant::now() + pause.max(began.elapsed() * 4);
                while let Some(left) = until.checked_duration_since(Instant::now()) {
                    std::thread::sleep(left.min(REST_STEP));
                    if let Some(next) = feed.try_next() {
                        waiting = Some(newest(&mut feed, next));
                    }
                }
            }
        })
        .expect("spawn the zone image thread");
    shared
}

/// `item`, or the newest commit after it that the feed holds.
fn newest(feed: &mut Subscription, mut item: FeedItem) -> FeedItem {
    while let Some(next) = feed.try_next() {
        item = next;
    }
    item
}
