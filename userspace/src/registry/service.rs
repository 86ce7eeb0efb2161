//! The registry's tokio shell: one writer task owns the state and the
//! journal. API writes arrive as [`Op`]s; the writer turns a burst of them
//! into entries, journals them with one `fdatasync` (group commit), answers
//! every caller, and publishes the regenerated records to the zone store
//! (one new serial per changed zone). What follows a publish (IXFR
//! journal, NOTIFY, the kernel table) hangs off the store's change feed,
//! not off this task. Lease expiry and hysteresis run on the same task at
//! the deadlines the state reports.
//!
//! Publishing is adaptive: a change that finds the writer idle is
//! published at once; what arrives while the writer is busy (a journal
//! sync, a publish) is taken as one group and published together, so
//! latency is low at low rates and throughput holds at high ones.
//! `batch_delay` optionally spaces publishes further apart.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::{error, info, warn};

use std::collections::{BTreeMap, HashSet};

use hickory_proto::rr::{LowerName, Name, RData, Record};

use super::census::Census;
use super::journal::{Batch, Journal, JournalError};
use super::model::Limits;
use super::state::Entry;
use super::table::{SetChange, Table};
use super::{HealthPolicy, Instance, InstanceSpec, Naming, Registry, RegistryError, Status};
use crate::zone::{Change, ZoneDiff, ZoneStore};

/// A write request.
#[derive(Debug)]
pub enum Op {
    Register { id: String, spec: Box<InstanceSpec> },
    Deregister { id: String },
    Heartbeat { id: String },
    SetStatus { id: String, status: Status },
    SetOwner { owner: String, enabled: bool },
}

type Reply = oneshot::Sender<Result<Option<Instance>, RegistryError>>;

/// What readers see: the state as of the last committed batch.
pub struct View {
    pub registry: Registry,
    pub naming: Arc<Naming>,
    pub policy: HealthPolicy,
}

#[derive(Clone)]
pub struct RegistryHandle {
    tx: mpsc::Sender<(Op, Reply)>,
    view: Arc<ArcSwap<View>>,
    stats: Arc<Stats>,
}

/// What `/metrics` and `xdpdns ctl registry` report beside the view.
#[derive(Default)]
pub struct Stats {
    /// From submitting a write to its acknowledgement (journal synced).
    pub write_latency: crate::metrics::Histogram,
    pub lease_expiries: AtomicU64,
    pub journal_bytes: AtomicU64,
}

impl RegistryHandle {
    /// Submits a write and waits until it is durable. Returns the
    /// instance as it now stands (`None` for deletions and owner flags).
    pub async fn write(&self, op: Op) -> Result<Option<Instance>, RegistryError> {
        let started = std::time::Instant::now();
        let (tx, rx) = oneshot::channel();
        self.tx
            .send((op, tx))
            .await
            .map_err(|_| RegistryError::Unavailable)?;
        let result = rx.await.map_err(|_| RegistryError::Unavailable)?;
        self.stats.write_latency.observe(started.elapsed());
        result
    }

    pub fn view(&self) -> Arc<View> {
        self.view.load_full()
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }
}

pub use crate::clock::unix_ms as now_ms;

pub struct Started {
    pub handle: RegistryHandle,
    /// Ends with an error when the journal cannot be written: nothing
    /// more can be acknowledged, so the server must stop.
    pub task: tokio::task::JoinHandle<Result<(), JournalError>>,
    pub recovered_instances: usize,
}

/// Recovers the registry from `data_dir`, publishes its zones into
/// `store` (so names are served before anything heartbeats) and starts
/// the writer.
pub fn start(
    data_dir: &Path,
    naming: Naming,
    policy: HealthPolicy,
    limits: Limits,
    batch_delay: Duration,
    store: Arc<dyn AsRef<ZoneStore> + Send + Sync>,
    stop: watch::Receiver<bool>,
) -> Result<Started, JournalError> {
    let (mut journal, rec) = Journal::open(data_dir)?;
    let mut registry = rec.registry;
    let now = now_ms();
    // Leases resume with the time they had left when the journal was last
    // written, not with the time the server was down.
    let renewals: Vec<Entry> = registry
        .instances
        .values()
        .map(|i| Entry::Renew {
            id: i.id.clone(),
            expires_at: now + i.expires_at.saturating_sub(rec.last_ts),
        })
        .collect();
    for e in &renewals {
        registry.apply(e);
    }
    if !renewals.is_empty() {
        journal.append(&Batch {
            ts: now,
            entries: renewals,
        });
        journal.sync()?;
    }
    let serial_file = data_dir.join("serials");
    let serial_floor = std::fs::read_to_string(&serial_file)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .map(|s| s.wrapping_add(1));
    info!(
        instances = registry.instances.len(),
        batches = rec.batches,
        discarded_bytes = rec.discarded,
        dir = %data_dir.display(),
        "registry recovered"
    );
    let naming = Arc::new(naming);
    let view = Arc::new(ArcSwap::from_pointee(View {
        registry: registry.clone(),
        naming: naming.clone(),
        policy,
    }));
    let (tx, rx) = mpsc::channel(4096);
    let stats = Arc::new(Stats::default());
    stats
        .journal_bytes
        .store(journal.bytes(), Ordering::Relaxed);
    let mut writer = Writer {
        stats: stats.clone(),
        census: Census::of(&registry),
        limits,
        registry,
        journal,
        naming,
        policy,
        batch_delay,
        store,
        view: view.clone(),
        serial_file,
        serial_floor,
        serial_reserved: None,
        publish_at: None,
        last_publish: None,
        table: Table::default(),
        dirty: HashSet::new(),
    };
    writer.publish_all();
    let recovered_instances = writer.registry.instances.len();
    // The writer runs on a thread of its own (with its own small runtime
    // for its channels and timers): its fdatasyncs and record derivation
    // never occupy a thread that answers DNS.
    let (done_tx, done_rx) = oneshot::channel();
    std::thread::Builder::new()
        .name("registry-writer".into())
        .spawn(move || {
            let result = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(JournalError::Writer)
                .and_then(|rt| rt.block_on(writer.run(rx, stop)));
            let _ = done_tx.send(result);
        })
        .map_err(JournalError::Writer)?;
    let task = tokio::spawn(async move {
        done_rx.await.unwrap_or_else(|_| {
            Err(JournalError::Writer(std::io::Error::other(
                "the registry writer stopped unexpectedly",
            )))
        })
    });
    Ok(Started {
        handle: RegistryHandle { tx, view, stats },
        task,
        recovered_instances,
    })
}

struct Writer {
    stats: Arc<Stats>,
    registry: Registry,
    /// Instances in all and per owner, for `limits`.
    census: Census,
    limits: Limits,
    journal: Journal,
    naming: Arc<Naming>,
    policy: HealthPolicy,
    batch_delay: Duration,
    store: Arc<dyn AsRef<ZoneStore> + Send + Sync>,
    view: Arc<ArcSwap<View>>,
    serial_file: PathBuf,
    /// Past every serial published before a restart.
    serial_floor: Option<u32>,
    /// What the serial file holds now.
    serial_reserved: Option<u32>,
    /// When the pending changes go out (`None`: nothing pending).
    publish_at: Option<Instant>,
    last_publish: Option<Instant>,
    table: Table,
    /// Instances whose records must be re-derived at the next publish.
    dirty: HashSet<String>,
}

/// Serials reserved ahead in the serial file (see `remember_serial`).
const SERIAL_RESERVATION: u32 = 1024;

/// Most writes committed with one fsync.
const MAX_GROUP: usize = 1024;

impl Writer {
    async fn run(
        mut self,
        mut rx: mpsc::Receiver<(Op, Reply)>,
        mut stop: watch::Receiver<bool>,
    ) -> Result<(), JournalError> {
        loop {
            if self.publish_at.is_some_and(|t| t <= Instant::now()) {
                self.publish();
            }
            let now = now_ms();
            let tick_at = self
                .registry
                .next_deadline(now, &self.policy)
                .map(|t| Instant::now() + Duration::from_millis(t.saturating_sub(now)));
            let wake = [tick_at, self.publish_at].into_iter().flatten().min();
            tokio::select! {
                first = rx.recv() => {
                    let Some(first) = first else { break };
                    let mut group = vec![first];
                    while group.len() < MAX_GROUP {
                        match rx.try_recv() {
                            Ok(next) => group.push(next),
                            Err(_) => break,
                        }
                    }
                    self.commit_group(group)?;
                }
                _ = sleep_until(wake) => {
                    if tick_at.is_some_and(|t| t <= Instant::now()) {
                        self.tick()?;
                    }
                }
                _ = stop.changed() => break,
            }
        }
        if self.publish_at.is_some() {
            self.publish();
        }
        Ok(())
    }

    fn commit_group(&mut self, group: Vec<(Op, Reply)>) -> Result<(), JournalError> {
        let now = now_ms();
        let mut entries = Vec::new();
        let mut replies = Vec::new();
        for (op, reply) in group {
            match self.entry_for(op, now) {
                Ok(entry) => {
                    self.apply(&entry);
                    let result = match &entry {
                        Entry::Put { instance } => Some((**instance).clone()),
                        Entry::Renew { id, .. } => self.registry.instances.get(id).cloned(),
                        _ => None,
                    };
                    entries.push(entry);
                    replies.push((reply, Ok(result)));
                }
                Err(e) => replies.push((reply, Err(e))),
            }
        }
        if !entries.is_empty() {
            // On failure the replies are dropped unsent: callers see
            // `Unavailable`, and nothing unsynced is acknowledged.
            self.durable(Batch { ts: now, entries })?;
            self.schedule_publish();
            self.refresh_view();
        }
        for (reply, result) in replies {
            let _ = reply.send(result);
        }
        Ok(())
    }

    fn entry_for(&self, op: Op, now: u64) -> Result<Entry, RegistryError> {
        let r = &self.registry;
        let entry = match op {
            Op::Register { id, spec } => r.register(&id, &spec, now)?,
            Op::Deregister { id } => r.deregister(&id)?,
            Op::Heartbeat { id } => r.heartbeat(&id, now)?,
            Op::SetStatus { id, status } => r.set_status(&id, status, now)?,
            Op::SetOwner { owner, enabled } => r.set_owner(&owner, enabled)?,
        };
        if let Entry::Put { instance } = &entry {
            self.naming.check(instance)?;
            self.census.admit(&self.limits, r, instance)?;
        }
        Ok(entry)
    }

    /// Applies `entry` to the state, the census and the pending publish.
    fn apply(&mut self, entry: &Entry) {
        let id = match entry {
            Entry::Put { instance } => Some(&instance.id),
            Entry::Delete { id, .. } => Some(id),
            Entry::Renew { .. } | Entry::Owner { .. } => None,
        };
        let before = id.and_then(|id| self.registry.instances.get(id).cloned());
        self.registry.apply(entry);
        self.census.record(before.as_ref(), entry);
        self.mark_dirty(entry);
    }

    /// Journals and syncs a batch. A journal that cannot be written stops
    /// the writer: nothing in this batch has been acknowledged, and going
    /// on would acknowledge writes a restart would not have.
    fn durable(&mut self, batch: Batch) -> Result<(), JournalError> {
        self.journal.append(&batch);
        if let Err(e) = self.journal.sync() {
            error!("registry journal write failed; stopping without acknowledging: {e}");
            return Err(e);
        }
        if self.journal.wants_compaction() {
            if let Err(e) = self.journal.compact(&self.registry, batch.ts) {
                error!("registry journal compaction failed; stopping: {e}");
                return Err(e);
            }
        }
        self.stats
            .journal_bytes
            .store(self.journal.bytes(), Ordering::Relaxed);
        Ok(())
    }

    fn tick(&mut self) -> Result<(), JournalError> {
        let now = now_ms();
        let entries = self.registry.tick(now, &self.policy);
        if entries.is_empty() {
            return Ok(());
        }
        for e in &entries {
            match e {
                Entry::Delete { id, reason } => {
                    if *reason == super::state::RemovalReason::LeaseExpired {
                        self.stats.lease_expiries.fetch_add(1, Ordering::Relaxed);
                    }
                    info!(instance = %id, ?reason, "instance removed")
                }
                Entry::Put { instance } => {
                    info!(instance = %instance.id, withdrawn = ?instance.withdrawn.keys().collect::<Vec<_>>(), "self-reported down: withdrawn from service")
                }
                _ => {}
            }
            self.apply(e);
        }
        self.durable(Batch { ts: now, entries })?;
        self.refresh_view();
        self.schedule_publish();
        Ok(())
    }

    /// Pending changes go out at once when the last publish is at least
    /// `batch_delay` old (with the default 0: always), else when it is.
    fn schedule_publish(&mut self) {
        if self.publish_at.is_none() {
            let now = Instant::now();
            let earliest = self.last_publish.map_or(now, |t| t + self.batch_delay);
            self.publish_at = Some(earliest.max(now));
        }
    }

    fn refresh_view(&self) {
        self.view.store(Arc::new(View {
            registry: self.registry.clone(),
            naming: self.naming.clone(),
            policy: self.policy,
        }));
    }

    fn mark_dirty(&mut self, entry: &Entry) {
        match entry {
            Entry::Put { instance } => {
                self.dirty.insert(instance.id.clone());
            }
            Entry::Delete { id, .. } => {
                self.dirty.insert(id.clone());
            }
            Entry::Renew { .. } => {}
            Entry::Owner { owner, .. } => {
                let ids = self
                    .registry
                    .instances
                    .values()
                    .filter(|i| i.reg.owner.as_deref() == Some(owner.as_str()))
                    .map(|i| i.id.clone());
                self.dirty.extend(ids);
            }
        }
    }

    /// Startup: derive everything and publish every zone at once.
    fn publish_all(&mut self) {
        self.table = Table::build(&self.naming, &self.registry);
        let zones = self.table.zones(&self.naming);
        // Never behind the clock either, so serials move forward even if
        // the floor file was lost.
        let now = now_ms() / 1000;
        let floor = match self.serial_floor {
            Some(f) if crate::zone::serial::is_newer(f, now as u32) => f,
            _ => now as u32,
        };
        let diffs = (*self.store)
            .as_ref()
            .publish_generated(zones, Some(floor), now);
        self.published(diffs, std::time::Instant::now());
    }

    /// Re-derives the records of the instances changed since the last
    /// publish and applies the RRset differences to the store, one serial
    /// per changed zone.
    fn publish(&mut self) {
        self.publish_at = None;
        self.last_publish = Some(Instant::now());
        let started = std::time::Instant::now();
        let dirty = std::mem::take(&mut self.dirty);
        let updates = self.table.update(&self.naming, &self.registry, dirty);
        let store = (*self.store).as_ref();
        let snapshot = store.snapshot();
        let mut by_zone: BTreeMap<Name, Vec<Change>> = BTreeMap::new();
        for (key, change) in updates {
            let Some(origin) = self.naming.zone_of(&key.0) else {
                continue;
            };
            let changes = by_zone.entry(origin.clone()).or_default();
            match change {
                SetChange::Changes(c) => changes.extend(c),
                SetChange::Recompute => {
                    let old = snapshot
                        .zone(&LowerName::new(origin))
                        .and_then(|z| z.node(&LowerName::new(&key.0)))
                        .and_then(|n| n.rrset(key.1))
                        .map(|s| (s.ttl, s.rdatas().collect()));
                    rrset_changes(&key.0, old, self.table.rrset(&key), changes);
                }
            }
        }
        let mut diffs = Vec::new();
        for (origin, changes) in by_zone {
            if changes.is_empty() {
                continue;
            }
            match store.update(&origin, &changes, now_ms() / 1000) {
                Ok(d) if !d.is_empty() => diffs.push(d),
                Ok(_) => {}
                Err(e) => error!(zone = %origin, "registry zone update failed: {e}"),
            }
        }
        self.published(diffs, started);
    }

    fn published(&mut self, diffs: Vec<ZoneDiff>, started: std::time::Instant) {
        if diffs.is_empty() {
            return;
        }
        let elapsed_us = started.elapsed().as_micros() as u64;
        for d in &diffs {
            info!(zone = %d.origin, serial = d.new_serial, removed = d.removed.len(), added = d.added.len(), elapsed_us, "registry zone published");
        }
        if let Some(max) = diffs.iter().filter_map(|d| d.new_serial).max() {
            self.remember_serial(max);
        }
    }

    /// Keeps serials increasing across restarts even when changes
    /// outpaced the clock. The file holds a reservation ahead of the
    /// serials published, rewritten only when they reach it, so a publish
    /// rarely touches the file system (a rename per publish slowed the
    /// journal's next fdatasync); a restart starts past the reservation.
    fn remember_serial(&mut self, serial: u32) {
        use crate::zone::serial::is_newer;
        if self.serial_reserved.is_some_and(|r| is_newer(r, serial)) {
            return;
        }
        let reserve = serial.wrapping_add(SERIAL_RESERVATION);
        let tmp = self.serial_file.with_extension("tmp");
        // The rename is made durable too (the directory synced): a lost
        // one would bring back an older floor, and serials already
        // published could be reused after a crash.
        let ok = std::fs::write(&tmp, reserve.to_string())
            .and_then(|_| std::fs::File::open(&tmp)?.sync_data())
            .and_then(|_| std::fs::rename(&tmp, &self.serial_file))
            .and_then(|_| match self.serial_file.parent() {
                Some(dir) if !dir.as_os_str().is_empty() => std::fs::File::open(dir)?.sync_all(),
                _ => Ok(()),
            });
        match ok {
            Ok(()) => self.serial_reserved = Some(reserve),
            Err(e) => {
                warn!(file = %self.serial_file.display(), "cannot record the serial reservation: {e}")
            }
        }
    }
}

/// The record changes that turn RRset `old` into `new` (a TTL change
/// replaces the whole set: one TTL per RRset).
fn rrset_changes(
    name: &Name,
    old: Option<(u32, Vec<RData>)>,
    new: Option<(u32, Vec<RData>)>,
    out: &mut Vec<Change>,
) {
    let (old_ttl, old_data) = old.unwrap_or((0, Vec::new()));
    let (new_ttl, new_data) = new.unwrap_or((0, Vec::new()));
    let same_ttl = old_ttl == new_ttl || old_data.is_empty() || new_data.is_empty();
    let record = |ttl, d: &RData| Record::from_rdata(name.clone(), ttl, d.clone());
    let old_set: HashSet<&RData> = old_data.iter().collect();
    let new_set: HashSet<&RData> = new_data.iter().collect();
    for d in &old_data {
        if !same_ttl || !new_set.contains(d) {
            out.push(Change::Remove(record(old_ttl, d)));
        }
    }
    for d in &new_data {
        if !same_ttl || !old_set.contains(d) {
            out.push(Change::Add(record(new_ttl, d)));
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
