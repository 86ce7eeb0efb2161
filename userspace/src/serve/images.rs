//! Zone images as a subscriber to the store's change feed: a thread of its
//! own writes the newest version of every changed zone to its image (see
//! [`crate::zone::image`]), so the next start serves it at once.
//!
//! Writes are coalesced: after writing, the thread waits `pause` (or four
//! times as long as the write took, if that is longer) and then writes
//! only the newest version of what changed meanwhile, so a registry zone
//! that changes every few milliseconds is not rewritten for each change.
//! A large zone is written once it has been quiet for ten times as long
//! as its last image took, or once the records changed since its image
//! reach a share of it, or its oldest unwritten change is [`MAX_LAG`]
//! old: a zone edited now and then gets its image soon after, and one
//! that never stops changing (a million-instance registry's) is
//! rewritten as its changes add up, not every few seconds beside them.
//! Each image's serial is reported ([`OnWritten`]): the IXFR journal
//! keeps the diffs since it, so a start brings an older image forward.
//! What is on disk is remembered (serial, expiry, sources), so a
//! start-up that loaded a zone from its image does not write it again.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hickory_proto::rr::LowerName;
use tracing::{debug, warn};

use crate::zone::image::{self, SourceStamp};
use crate::zone::{FeedItem, Snapshot, Subscription, Zone};

/// How often a resting writer drops the commits that came meanwhile.
const REST_STEP: Duration = Duration::from_millis(100);

/// When a changed zone's image is due.
#[derive(Clone, Copy, Debug)]
struct Schedule {
    /// Zones of up to this many records are written after every change
    /// (after the pause): their images cost little.
    small_zone: usize,
    /// A larger zone is written once the records changed since its image
    /// are one `share`th of its own, or `most_unwritten` if fewer...
    share: usize,
    most_unwritten: usize,
    /// ...or once its oldest unwritten change is this old...
    max_lag: Duration,
    /// ...or once it has had no change for `quiet` times as long as its
    /// last image took to write (and at least the pause).
    quiet: u32,
}

/// A start brings an image forward through the journal's diffs since it,
/// at about two microseconds a record on a core (600,000 records of a
/// million-instance registry's zone took 1.2–1.3 s), so a large zone's
/// image lags by at most half a million records. Within that, it is
/// written every quarter of it changed: a fourth of the writing at every
/// sixteenth (the images were a tenth of that registry's CPU).
const SCHEDULE: Schedule = Schedule {
    small_zone: 65_536,
    share: 4,
    most_unwritten: 500_000,
    max_lag: MAX_LAG,
    quiet: 10,
};

/// How long a large zone's image may lag behind a change.
const MAX_LAG: Duration = Duration::from_secs(30);

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

/// Told the serial of every image written (the IXFR journal keeps the
/// diffs since it).
pub type OnWritten = Box<dyn Fn(&LowerName, u32) + Send>;

pub struct ImageWriter {
    dir: PathBuf,
    on_disk: HashMap<LowerName, Imaged>,
    /// The newest snapshot version synced: an older one (the thread's,
    /// overtaken by the stop's flush) is not written over it.
    synced: u64,
    on_written: Option<OnWritten>,
    /// How long each zone's last image took to encode and write.
    took: HashMap<LowerName, Duration>,
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
            on_written: None,
            took: HashMap::new(),
        }
    }

    /// Calls `f` with each zone's serial once its image is on disk.
    pub fn on_written(mut self, f: OnWritten) -> ImageWriter {
        self.on_written = Some(f);
        self
    }

    /// Brings every image in step with `snapshot`: writes zones that
    /// differ from their image, removes images of zones no longer served.
    pub fn sync(&mut self, snapshot: &Snapshot) {
        if snapshot.version() < self.synced {
            return;
        }
        self.synced = snapshot.version();
        for zone in snapshot.zones() {
            self.write(zone);
        }
        let gone: Vec<LowerName> = self
            .on_disk
            .keys()
            .filter(|k| snapshot.zone(k).is_none())
            .cloned()
            .collect();
        for key in gone {
            self.remove(&key);
        }
    }

    /// Brings the images of the zones `origins` in step with `snapshot`.
    fn sync_zones(&mut self, snapshot: &Snapshot, origins: &[LowerName]) {
        if snapshot.version() < self.synced {
            return;
        }
        for origin in origins {
            match snapshot.zone(origin) {
                Some(zone) => self.write(zone),
                None => self.remove(origin),
            }
        }
    }

    /// Writes `zone`'s image unless it is current.
    fn write(&mut self, zone: &Zone) {
        let now = Imaged::of(zone);
        if self.on_disk.get(zone.origin_key()) == Some(&now) {
            return;
        }
        let path = image::path_in(&self.dir, zone.origin());
        let started = std::time::Instant::now();
        let bytes = image::encode(zone, &now.stamp);
        match image::write_atomically(&path, &bytes) {
            Ok(()) => {
                debug!(zone = %zone.origin(), serial = now.serial, bytes = bytes.len(),
                       elapsed_ms = started.elapsed().as_millis() as u64, "zone image written");
                if let (Some(f), Some(serial)) = (&self.on_written, now.serial) {
                    f(zone.origin_key(), serial);
                }
                self.took
                    .insert(zone.origin_key().clone(), started.elapsed());
                self.on_disk.insert(zone.origin_key().clone(), now);
            }
            Err(e) => {
                warn!(zone = %zone.origin(), file = %path.display(), "cannot write the zone image ({e}); the next start loads the zone from its source");
                self.on_disk.remove(zone.origin_key());
            }
        }
    }

    fn remove(&mut self, origin: &LowerName) {
        self.on_disk.remove(origin);
        self.took.remove(origin);
        let _ = std::fs::remove_file(image::path_in(&self.dir, &origin.into()));
    }
}

/// What changed in one zone since its image was written.
struct Unwritten {
    records: usize,
    /// The first change and the last.
    since: Instant,
    last: Instant,
}

/// The zones changed since their images, and whether commits were missed
/// (every zone is then compared with its image).
struct Changed {
    schedule: Schedule,
    zones: HashMap<LowerName, Unwritten>,
    missed: bool,
}

impl Changed {
    fn new(schedule: Schedule) -> Changed {
        Changed {
            schedule,
            zones: HashMap::new(),
            missed: false,
        }
    }

    fn note(&mut self, item: &FeedItem, now: Instant) {
        match item {
            FeedItem::Commit(c) => {
                for d in c.diffs() {
                    let records = if d.whole_zone || d.new_serial.is_none() {
                        usize::MAX
                    } else {
                        d.removed.len() + d.added.len()
                    };
                    let u = self
                        .zones
                        .entry(LowerName::new(&d.origin))
                        .or_insert(Unwritten {
                            records: 0,
                            since: now,
                            last: now,
                        });
                    u.records = u.records.saturating_add(records);
                    u.last = now;
                }
            }
            FeedItem::Resync(_) => self.missed = true,
        }
    }

    fn is_empty(&self) -> bool {
        self.zones.is_empty() && !self.missed
    }

    /// The zones whose images are due at `now` in `snapshot`; `quiet_for`
    /// says how long a zone must have had no change.
    fn due(
        &self,
        snapshot: &Snapshot,
        now: Instant,
        quiet_for: impl Fn(&LowerName) -> Duration,
    ) -> Vec<LowerName> {
        let Schedule {
            small_zone,
            share,
            most_unwritten,
            max_lag,
            ..
        } = self.schedule;
        self.zones
            .iter()
            .filter(|(origin, u)| match snapshot.zone(origin) {
                None => true,
                Some(zone) => {
                    let records = zone.record_count();
                    records <= small_zone
                        || u.records.saturating_mul(share) >= records
                        || u.records >= most_unwritten
                        || now.duration_since(u.since) >= max_lag
                        || now.duration_since(u.last) >= quiet_for(origin)
                }
            })
            .map(|(origin, _)| origin.clone())
            .collect()
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
            write_as_due(&writer, &mut feed, pause);
        })
        .expect("spawn the zone image thread");
    shared
}

/// Writes the images of changed zones as they fall due, until the feed
/// ends. Only the newest commit is held meanwhile: each one waiting in
/// the feed keeps its version of the zone alive.
fn write_as_due(writer: &Images, feed: &mut Subscription, pause: Duration) {
    let mut changed = Changed::new(SCHEDULE);
    let mut newest: Option<FeedItem> = None;
    let mut rest_until = Instant::now();
    loop {
        if changed.is_empty() {
            // Nothing held while nothing changes.
            drop(newest.take());
            let Some(item) = feed.blocking_next() else {
                return;
            };
            changed.note(&item, Instant::now());
            newest = Some(item);
        }
        while let Some(item) = feed.try_next() {
            changed.note(&item, Instant::now());
            newest = Some(item);
        }
        let now = Instant::now();
        if now < rest_until {
            std::thread::sleep(REST_STEP);
            continue;
        }
        let Some(item) = &newest else { continue };
        let snapshot = item.snapshot();
        let due = if changed.missed {
            None
        } else {
            let w = writer.0.lock().unwrap_or_else(|p| p.into_inner());
            let quiet = changed.schedule.quiet;
            Some(changed.due(snapshot, now, |origin| {
                pause.max(w.took.get(origin).copied().unwrap_or_default() * quiet)
            }))
        };
        if due.as_ref().is_some_and(|d| d.is_empty()) {
            std::thread::sleep(REST_STEP);
            continue;
        }
        let began = Instant::now();
        {
            let mut w = writer.0.lock().unwrap_or_else(|p| p.into_inner());
            match &due {
                Some(origins) => w.sync_zones(snapshot, origins),
                None => w.sync(snapshot),
            }
        }
        match due {
            Some(origins) => {
                for origin in origins {
                    changed.zones.remove(&origin);
                }
            }
            None => changed = Changed::new(SCHEDULE),
        }
        // A large zone takes a while to encode: rest four times as long,
        // so a zone that never stops changing costs at most a fifth of a
        // core, not all of one.
        rest_until = Instant::now() + pause.max(began.elapsed() * 4);
    }
}

#[cfg(test)]
mod tests {
    use hickory_proto::rr::rdata::{A, SOA};
    use hickory_proto::rr::{Name, RData, Record};

    use super::*;
    use crate::zone::{Change, ZoneStore};

    fn zone(origin: &str, names: u32) -> Zone {
        let origin = Name::from_ascii(origin).unwrap();
        let mut z = Zone::new(&origin);
        let n = Name::from_ascii("ns.example.").unwrap();
        z.insert(Record::from_rdata(
            origin.clone(),
            60,
            RData::SOA(SOA::new(n.clone(), n, 1, 1, 1, 1, 1)),
        ))
        .unwrap();
        for i in 0..names {
            let name = Name::from_ascii(format!("h{i}"))
                .unwrap()
                .append_domain(&origin)
                .unwrap();
            z.insert(Record::from_rdata(name, 60, RData::A(A::new(10, 0, 0, 1))))
                .unwrap();
        }
        z
    }

    /// A small zone's image is due at its first change; a large one's
    /// once a share of its records changed, or its first change is
    /// `max_lag` old, or it has been quiet long enough; a zone that is
    /// gone is due at once (its image goes).
    #[test]
    fn a_large_zones_image_waits_for_a_share_of_changes_the_lag_or_a_quiet_spell() {
        let schedule = Schedule {
            small_zone: 10,
            share: 16,
            most_unwritten: 30,
            max_lag: Duration::from_secs(30),
            quiet: 10,
        };
        let store = ZoneStore::new();
        store.replace_zones(vec![zone("big.", 199), zone("small.", 5)], &[], 0);
        let (_, mut feed) = store.subscribe();
        let mut changed = Changed::new(schedule);
        let start = Instant::now();
        let add = |origin: &str, i: u32| {
            let origin = Name::from_ascii(origin).unwrap();
            let name = Name::from_ascii(format!("new{i}"))
                .unwrap()
                .append_domain(&origin)
                .unwrap();
            let a = Record::from_rdata(name, 60, RData::A(A::new(10, 0, 0, 2)));
            store.update(&origin, &[Change::Add(a)], 0).unwrap();
        };
        let mut newest = None;
        let mut pump = |changed: &mut Changed| {
            while let Some(item) = feed.try_next() {
                changed.note(&item, start);
                newest = Some(item.snapshot().clone());
            }
            newest.clone().unwrap()
        };
        let names = |due: Vec<LowerName>| {
            let mut n: Vec<String> = due.iter().map(|k| k.to_string()).collect();
            n.sort();
            n
        };
        let never = |_: &LowerName| Duration::MAX;
        // One change to each: three records (the SOA out and in, the A).
        add("big.", 0);
        add("small.", 0);
        let snapshot = pump(&mut changed);
        assert_eq!(names(changed.due(&snapshot, start, never)), ["small."]);
        assert_eq!(
            names(changed.due(&snapshot, start + Duration::from_secs(30), never)),
            ["big.", "small."],
            "the lag"
        );
        let quiet = |_: &LowerName| Duration::from_secs(5);
        assert_eq!(
            names(changed.due(&snapshot, start + Duration::from_secs(4), quiet)),
            ["small."]
        );
        assert_eq!(
            names(changed.due(&snapshot, start + Duration::from_secs(5), quiet)),
            ["big.", "small."],
            "quiet for long enough"
        );
        // 5 x 3 records of 205: at least a sixteenth.
        changed
            .zones
            .remove(&LowerName::new(&Name::from_ascii("small.").unwrap()));
        for i in 1..4 {
            add("big.", i);
        }
        let snapshot = pump(&mut changed);
        assert!(
            changed.due(&snapshot, start, never).is_empty(),
            "12 records of 204"
        );
        add("big.", 4);
        let snapshot = pump(&mut changed);
        assert_eq!(names(changed.due(&snapshot, start, never)), ["big."]);
        // However large the zone, at most `most_unwritten` records behind.
        changed.zones.clear();
        store.replace_zones(vec![zone("huge.", 999)], &[], 0);
        let _ = pump(&mut changed);
        changed.zones.clear();
        for i in 0..9 {
            add("huge.", i);
        }
        let snapshot = pump(&mut changed);
        assert!(
            changed.due(&snapshot, start, never).is_empty(),
            "27 records of a thousand"
        );
        add("huge.", 9);
        let snapshot = pump(&mut changed);
        assert_eq!(
            names(changed.due(&snapshot, start, never)),
            ["huge."],
            "30 records"
        );
        // A zone removed: its image is due to go.
        changed.zones.clear();
        store.replace_zones(
            vec![zone("small.", 5)],
            &[Name::from_ascii("big.").unwrap()],
            0,
        );
        let snapshot = pump(&mut changed);
        assert!(names(changed.due(&snapshot, start, never)).contains(&"big.".to_string()));
    }
}
