//! NOTIFY out (RFC 1996) and propagation tracking, after the Designate
//! worker: on every new serial of a zone, NOTIFY each of its secondaries
//! (retrying with back-off), then poll the secondary's SOA until it serves
//! that serial, and keep per-secondary state an operator can read.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use hickory_proto::rr::{LowerName, Name, Record};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tracing::{info, warn};

use super::client;
use super::journal_subscriber::Journaled;
pub use super::notify_round::NotifySettings;
use super::notify_round::{Outcome, Round, Step};
use super::tsig::TSigner;
use crate::clock::unix_ms;
use crate::zone::serial::is_newer;
use crate::zone::{FeedItem, Snapshot, Subscription, ZoneDiff};

/// One zone's outgoing NOTIFY settings.
#[derive(Clone)]
pub struct NotifyTargets {
    pub zone: Name,
    pub secondaries: Vec<SocketAddr>,
    pub key: Option<TSigner>,
}

/// What one secondary has of one zone.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct PeerStatus {
    pub zone: String,
    pub secondary: String,
    /// Our serial: what the secondary should end up serving.
    pub serial: Option<u32>,
    /// Unix ms at which that serial was published here.
    pub published_ms: u64,
    /// Last serial whose NOTIFY the secondary acknowledged.
    pub notified: Option<u32>,
    /// Serial the secondary served at the last poll.
    pub serial_seen: Option<u32>,
    pub in_sync: bool,
    /// Publish-to-served time of the last serial that reached it.
    pub lag_ms: Option<u64>,
    /// Failed NOTIFYs and polls since the last success.
    pub failures: u32,
    pub last_error: Option<String>,
}

/// Propagation state of every (zone, secondary), also written as JSON to
/// `status_file` (readable after a stop; `xdpdns ctl secondaries` asks
/// the running server).
pub struct Propagation {
    peers: Arc<Mutex<Peers>>,
    status_file: Option<StatusFile>,
    /// NOTIFY messages sent (retries included) and acknowledged.
    pub notifies_sent: AtomicU64,
    pub notifies_acknowledged: AtomicU64,
}

type Peers = BTreeMap<(String, String), PeerStatus>;

/// The status file, written on a thread of its own at most every
/// [`STATUS_FILE_EVERY`]: a registry publishes many serials a second,
/// and writing the file for each took a fifth of the control runtime.
struct StatusFile {
    path: PathBuf,
    changed: std::sync::mpsc::SyncSender<()>,
}

const STATUS_FILE_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

impl StatusFile {
    fn start(path: PathBuf, peers: Arc<Mutex<Peers>>) -> StatusFile {
        let (changed, wake) = std::sync::mpsc::sync_channel(1);
        let file = path.clone();
        let spawned = std::thread::Builder::new()
            .name("notify-status".into())
            .spawn(move || {
                // Ends once the propagation state is gone.
                while wake.recv().is_ok() {
                    write_statuses(&peers, &file);
                    std::thread::sleep(STATUS_FILE_EVERY);
                }
            });
        if let Err(e) = spawned {
            warn!("cannot start the propagation status writer: {e}");
        }
        StatusFile { path, changed }
    }
}

/// Writes the state to `path`. The state's lock is held throughout: the
/// writer thread and a stop's flush never write the file at once, and
/// what is renamed into place last is the newest state.
fn write_statuses(peers: &Mutex<Peers>, path: &std::path::Path) {
    write_file(&peers.lock().unwrap_or_else(|p| p.into_inner()), path);
}

/// Writes `peers` to `path` through a temporary file renamed into place.
fn write_file(peers: &Peers, path: &std::path::Path) {
    let all: Vec<&PeerStatus> = peers.values().collect();
    let tmp = path.with_extension("tmp");
    let body = serde_json::to_vec_pretty(&all).expect("status serialises");
    if std::fs::write(&tmp, body)
        .and_then(|_| std::fs::rename(&tmp, path))
        .is_err()
    {
        warn!(file = %path.display(), "cannot write the propagation status");
    }
}

impl Propagation {
    /// Writes the status file now (at a stop: its writer may be asleep).
    pub fn flush(&self) {
        if let Some(s) = &self.status_file {
            write_statuses(&self.peers, &s.path);
        }
    }

    pub fn statuses(&self) -> Vec<PeerStatus> {
        self.peers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    fn update(&self, zone: &Name, peer: SocketAddr, f: impl FnOnce(&mut PeerStatus)) {
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        let key = (zone.to_ascii(), peer.to_string());
        let new = !peers.contains_key(&key);
        let entry = peers.entry(key.clone()).or_insert_with(|| PeerStatus {
            zone: key.0.clone(),
            secondary: key.1.clone(),
            ..PeerStatus::default()
        });
        let before = entry.clone();
        f(entry);
        if !new && *entry == before {
            return; // the file already says this
        }
        if let Some(s) = &self.status_file {
            // Full: a write is already due, and it reads the state then.
            // No writer thread (it could not start): written here.
            if let Err(std::sync::mpsc::TrySendError::Disconnected(_)) = s.changed.try_send(()) {
                write_file(&peers, &s.path);
            }
        }
    }
}

/// The newest serial of a zone and its SOA record (sent in the NOTIFY).
#[derive(Clone, Debug)]
struct Target {
    serial: u32,
    soa: Record,
    published_ms: u64,
}

/// Hands new serials to the per-secondary tasks.
#[derive(Default)]
pub struct Notifier {
    zones: Mutex<HashMap<LowerName, watch::Sender<Option<Target>>>>,
    /// Secondaries every zone `Defaults::covers` is sent NOTIFYs for,
    /// zones added at runtime included (a catalog's consumers).
    defaults: Option<Defaults>,
}

/// Whether a zone gets the default NOTIFY targets.
pub type Covers = Box<dyn Fn(&Snapshot, &LowerName) -> bool + Send + Sync>;

/// NOTIFY targets for zones not named in the configuration.
pub struct Defaults {
    pub secondaries: Vec<SocketAddr>,
    pub key: Option<TSigner>,
    /// Whether a zone gets them.
    pub covers: Covers,
    pub settings: NotifySettings,
    pub propagation: Arc<Propagation>,
    pub stop: watch::Receiver<bool>,
}

impl Notifier {
    /// NOTIFY as a subscriber to the zone store's change feed: every new
    /// serial gets a round once the IXFR journal holds it, so the IXFR a
    /// secondary sends in reply can be answered from the journal.
    pub async fn follow(&self, mut feed: Subscription, mut journaled: Journaled) {
        while let Some(item) = feed.next().await {
            if !journaled.reached(item.version()).await {
                return;
            }
            match &item {
                FeedItem::Commit(c) => self.published(&c.snapshot, c.diffs()),
                FeedItem::Resync(s) => self.resync(s),
            }
        }
    }

    /// After a commit: every zone whose serial changed gets a round.
    pub fn published<'a>(
        &self,
        snapshot: &Snapshot,
        diffs: impl IntoIterator<Item = &'a ZoneDiff>,
    ) {
        for d in diffs {
            if d.new_serial.is_some() {
                self.announce(snapshot, &LowerName::new(&d.origin));
            }
        }
    }

    /// After missed commits: every zone whose serial is not the one last
    /// announced gets a round.
    fn resync(&self, snapshot: &Snapshot) {
        let stale: Vec<LowerName> = self
            .lock()
            .iter()
            .filter(|(zone, tx)| {
                let announced = tx.borrow().as_ref().map(|t| t.serial);
                let serial = snapshot.zone(zone).and_then(|z| z.serial());
                serial.is_some() && serial != announced
            })
            .map(|(zone, _)| zone.clone())
            .collect();
        for zone in stale {
            self.announce(snapshot, &zone);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<LowerName, watch::Sender<Option<Target>>>> {
        self.zones.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a round for every zone at its current serial (at start-up,
    /// so secondaries learn of changes made while we were down).
    pub fn announce_all(&self, snapshot: &Snapshot) {
        let mut zones: Vec<LowerName> = self
            .lock()
            .iter()
            // Zones published since start-up already have a round.
            .filter(|(_, tx)| tx.borrow().is_none())
            .map(|(zone, _)| zone.clone())
            .collect();
        if let Some(d) = &self.defaults {
            zones.extend(
                snapshot
                    .zones()
                    .map(|z| z.origin_key().clone())
                    .filter(|z| (d.covers)(snapshot, z) && !self.lock().contains_key(z)),
            );
        }
        for zone in zones {
            self.announce(snapshot, &zone);
        }
    }

    /// The sender of `zone`'s rounds, started with its default targets
    /// the first time a covered zone is announced.
    fn sender(
        &self,
        snapshot: &Snapshot,
        zone: &LowerName,
    ) -> Option<watch::Sender<Option<Target>>> {
        let mut zones = self.lock();
        if let Some(tx) = zones.get(zone) {
            return Some(tx.clone());
        }
        let d = self
            .defaults
            .as_ref()
            .filter(|d| (d.covers)(snapshot, zone))?;
        let (tx, _) = watch::channel(None);
        for &peer in &d.secondaries {
            let worker = PeerWorker {
                zone: Name::from(zone),
                peer,
                key: d.key.clone(),
                settings: d.settings,
                status: d.propagation.clone(),
            };
            tokio::spawn(worker.run(tx.subscribe(), d.stop.clone()));
        }
        zones.insert(zone.clone(), tx.clone());
        Some(tx)
    }

    fn announce(&self, snapshot: &Snapshot, zone: &LowerName) {
        let (Some(tx), Some(z)) = (self.sender(snapshot, zone), snapshot.zone(zone)) else {
            return;
        };
        let Some(soa) = z.soa_record() else {
            return;
        };
        let serial = z.serial().unwrap_or(0);
        tx.send_replace(Some(Target {
            serial,
            soa,
            published_ms: unix_ms(),
        }));
    }
}

/// NOTIFY targets for every zone `covers` says (a catalog's members and
/// the catalog): started as such a zone is first announced.
pub struct DefaultTargets {
    pub secondaries: Vec<SocketAddr>,
    pub key: Option<TSigner>,
    pub covers: Covers,
}

/// Starts one task per (zone, secondary).
pub fn start(
    targets: Vec<NotifyTargets>,
    settings: NotifySettings,
    status_file: Option<PathBuf>,
    stop: watch::Receiver<bool>,
    defaults: Option<DefaultTargets>,
) -> (Notifier, Arc<Propagation>, Vec<tokio::task::JoinHandle<()>>) {
    let peers = Arc::new(Mutex::new(BTreeMap::new()));
    let propagation = Arc::new(Propagation {
        status_file: status_file.map(|path| StatusFile::start(path, peers.clone())),
        peers,
        notifies_sent: AtomicU64::new(0),
        notifies_acknowledged: AtomicU64::new(0),
    });
    let notifier = Notifier {
        defaults: defaults.map(|d| Defaults {
            secondaries: d.secondaries,
            key: d.key,
            covers: d.covers,
            settings,
            propagation: propagation.clone(),
            stop: stop.clone(),
        }),
        ..Notifier::default()
    };
    let mut tasks = Vec::new();
    for t in targets {
        let (tx, _) = watch::channel(None);
        for &peer in &t.secondaries {
            let worker = PeerWorker {
                zone: t.zone.clone(),
                peer,
                key: t.key.clone(),
                settings,
                status: propagation.clone(),
            };
            tasks.push(tokio::spawn(worker.run(tx.subscribe(), stop.clone())));
        }
        notifier.lock().insert(LowerName::new(&t.zone), tx);
    }
    (notifier, propagation, tasks)
}

struct PeerWorker {
    zone: Name,
    peer: SocketAddr,
    key: Option<TSigner>,
    settings: NotifySettings,
    status: Arc<Propagation>,
}

impl PeerWorker {
    /// Rounds for the newest serial, one request in flight at a time: a
    /// newer serial replaces the round between two requests, keeping a
    /// failing round's back-off (`Round::renewed`), so a secondary that
    /// is down is not sent a NOTIFY for every change.
    async fn run(self, mut rx: watch::Receiver<Option<Target>>, mut stop: watch::Receiver<bool>) {
        let mut current: Option<(Target, Round)> = None;
        let mut newer = rx.borrow().is_some();
        loop {
            if newer {
                newer = false;
                if let Some(target) = rx.borrow_and_update().clone() {
                    let round = match &current {
                        Some((_, r)) => r.renewed(target.serial),
                        None => Round::new(target.serial, self.settings),
                    };
                    self.begin(&target);
                    current = Some((target, round));
                }
            }
            let Some((target, round)) = current.as_mut() else {
                tokio::select! {
                    r = rx.changed() => if r.is_err() { return },
                    _ = stop.changed() => return,
                }
                newer = true;
                continue;
            };
            match round.next(Instant::now()) {
                Step::Wait(until) => tokio::select! {
                    _ = tokio::time::sleep_until(until.into()) => {}
                    r = rx.changed() => { if r.is_err() { return } newer = true; }
                    _ = stop.changed() => return,
                },
                Step::Done(outcome) => {
                    self.finished(target, outcome);
                    current = None;
                }
                step => {
                    tokio::select! {
                        _ = self.exchange(target, round, step) => {}
                        _ = stop.changed() => return,
                    }
                    match rx.has_changed() {
                        Ok(changed) => newer |= changed,
                        Err(_) => return,
                    }
                }
            }
        }
    }

    /// A round starts: the status says which serial it is for.
    fn begin(&self, t: &Target) {
        self.status.update(&self.zone, self.peer, |s| {
            s.serial = Some(t.serial);
            s.published_ms = t.published_ms;
            s.in_sync = s.serial_seen.is_some_and(|seen| !is_newer(t.serial, seen));
        });
    }

    fn finished(&self, t: &Target, outcome: Outcome) {
        let (zone, peer) = (&self.zone, self.peer);
        match outcome {
            Outcome::InSync => {
                info!(%zone, secondary = %peer, serial = t.serial, "secondary in sync")
            }
            Outcome::GaveUp => {
                warn!(%zone, secondary = %peer, serial = t.serial, "secondary did not reach the serial in time")
            }
        }
    }

    /// Sends the request `step` asks for and tells `round` the result,
    /// recording it in the propagation status.
    async fn exchange(&self, t: &Target, round: &mut Round, step: Step) {
        let (zone, peer) = (&self.zone, self.peer);
        let key = self.key.as_ref();
        let attempt = round.attempt();
        match step {
            Step::Notify(timeout) => {
                self.status.notifies_sent.fetch_add(1, Ordering::Relaxed);
                let result = client::notify(peer, zone, Some(t.soa.clone()), key, timeout).await;
                let attempt = attempt.unwrap_or(0);
                match &result {
                    Ok(()) => {
                        self.status
                            .notifies_acknowledged
                            .fetch_add(1, Ordering::Relaxed);
                        info!(%zone, secondary = %peer, serial = t.serial, attempt, "NOTIFY acknowledged");
                        self.status
                            .update(zone, peer, |s| s.notified = Some(t.serial));
                    }
                    Err(e) => {
                        warn!(%zone, secondary = %peer, serial = t.serial, attempt, "NOTIFY failed: {e}");
                        self.status.update(zone, peer, |s| {
                            s.failures += 1;
                            s.last_error = Some(format!("notify: {e}"));
                        });
                    }
                }
                round.notify_result(result.is_ok(), Instant::now());
            }
            Step::Poll(timeout) => {
                let result = client::soa_serial(peer, zone, key, timeout).await;
                match &result {
                    Ok(seen) => {
                        let done = !is_newer(t.serial, *seen);
                        self.status.update(zone, peer, |s| {
                            s.serial_seen = Some(*seen);
                            s.in_sync = done;
                            if done {
                                s.lag_ms = Some(unix_ms().saturating_sub(t.published_ms));
                                s.failures = 0;
                                s.last_error = None;
                            }
                        });
                    }
                    Err(e) => self.status.update(zone, peer, |s| {
                        s.failures += 1;
                        s.last_error = Some(format!("poll: {e}"));
                    }),
                }
                round.poll_result(result.ok(), Instant::now());
            }
            Step::Wait(_) | Step::Done(_) => {}
        }
    }
}
