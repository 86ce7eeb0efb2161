//! What every registry backend shares: the write requests and the handle
//! the API holds, and the projection that turns registry entries into
//! state, the readers' view and published zone records. A backend (the
//! local journal in `service`, etcd in `etcd`) decides when an entry is
//! durable and hands it to [`Projection::apply`]; the projection never
//! knows which one is underneath.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use compact_str::CompactString;
use hickory_proto::rr::{LowerName, Name, RData, Record, RecordType};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tracing::{error, info};

use super::census::Census;
use super::deadlines::Deadlines;
use super::journal::JournalError;
use super::model::Limits;
use super::state::Entry;
use super::table::{SetChange, Table};
use super::{HealthPolicy, Instance, InstanceSpec, Naming, Registry, RegistryError, Status};
use crate::zone::{Additions, Change, ZoneDiff, ZoneStore};

pub use crate::clock::unix_ms as now_ms;

/// A write request.
#[derive(Clone, Debug)]
pub enum Op {
    Register {
        id: String,
        spec: Box<InstanceSpec>,
    },
    Deregister {
        id: String,
    },
    Heartbeat {
        id: String,
    },
    SetStatus {
        id: String,
        status: Status,
    },
    SetOwner {
        owner: String,
        enabled: bool,
    },
    /// From the ZooKeeper source: the instance that mirrors `node`.
    Mirror {
        id: String,
        spec: Box<InstanceSpec>,
        node: String,
    },
    /// From the ZooKeeper source: the mirrored node is gone.
    Unmirror {
        id: String,
    },
}

/// What a write answers: the instance as written (shared with the
/// registry), none for a removal, or why it was refused.
pub type WriteResult = Result<Option<Arc<Instance>>, RegistryError>;
pub type Reply = oneshot::Sender<WriteResult>;
/// A submitted write's result, to come.
type Pending = oneshot::Receiver<WriteResult>;

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
    /// The registry lives in etcd (else in the local journal).
    pub in_etcd: AtomicBool,
    /// etcd cannot be reached: the registry is served as of the last
    /// revision read, and writes are refused.
    pub cut_off: AtomicBool,
    /// The ZooKeeper source, when one is configured.
    pub zookeeper: SourceStats,
}

/// What a registry source that mirrors another store (ZooKeeper) reports.
#[derive(Default)]
pub struct SourceStats {
    pub enabled: AtomicBool,
    /// Not in session with the store, or not yet read in full: its
    /// instances are served as last read (or as the journal kept them).
    pub stale: AtomicBool,
    /// Nodes in the mirrored tree and the instances made from them.
    pub nodes: AtomicU64,
    pub mirrored: AtomicU64,
    /// Records read that could not be served (bad JSON, unknown types,
    /// missing addresses, names outside the registry zones).
    pub skipped: AtomicU64,
    pub sessions: AtomicU64,
    /// Registry writes made from changes in the store.
    pub writes: AtomicU64,
    /// Vanished service members held by hysteresis.
    pub leaving: AtomicU64,
}

impl RegistryHandle {
    /// Submits a write and waits until it is durable. Returns the
    /// instance as it now stands (`None` for deletions and owner flags).
    pub async fn write(&self, op: Op) -> WriteResult {
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

    /// Submits every write before waiting for any, so they reach the
    /// writer as large groups (one journal sync and one publish each);
    /// the results in the order of `ops`, once all are durable.
    pub async fn write_all(&self, ops: Vec<Op>) -> Vec<WriteResult> {
        let mut pending = Vec::with_capacity(ops.len());
        for op in ops {
            pending.push(self.submit(op).await);
        }
        let mut results = Vec::with_capacity(pending.len());
        for submitted in pending {
            results.push(match submitted {
                Ok(rx) => rx.await.unwrap_or(Err(RegistryError::Unavailable)),
                Err(e) => Err(e),
            });
        }
        results
    }

    /// Queues a write without waiting for it.
    async fn submit(&self, op: Op) -> Result<Pending, RegistryError> {
        let (tx, rx) = oneshot::channel();
        // Without yielding while there is room (an await would give the
        // runtime away every so often, and the writer would see the
        // submissions trickle in as many small groups).
        let item = match self.tx.try_send((op, tx)) {
            Ok(()) => return Ok(rx),
            Err(mpsc::error::TrySendError::Full(item)) => item,
            Err(mpsc::error::TrySendError::Closed(_)) => return Err(RegistryError::Unavailable),
        };
        self.tx
            .send(item)
            .await
            .map_err(|_| RegistryError::Unavailable)?;
        Ok(rx)
    }

    pub fn view(&self) -> Arc<View> {
        self.view.load_full()
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }
}

/// Why a registry writer stopped: nothing more can be acknowledged, so
/// the server must stop.
#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("registry etcd backend: {0}")]
    Etcd(String),
}

pub struct Started {
    pub handle: RegistryHandle,
    pub task: tokio::task::JoinHandle<Result<(), WriterError>>,
    pub recovered_instances: usize,
}

/// How a publish numbers the zones it changes.
#[derive(Clone, Copy, Debug)]
pub enum Serials {
    /// By the store's serial policy, never below `floor`.
    Policy { floor: Option<u32> },
    /// This serial, exactly (the etcd backend: one derived from the
    /// revision, the same on every node).
    Exact(u32),
}

/// The registry as entries make it, and what follows from it: the census
/// for the limits, the readers' view, and the derived zone records.
pub struct Projection {
    pub stats: Arc<Stats>,
    pub registry: Registry,
    /// Instances in all and per owner, for `limits`.
    census: Census,
    /// Lease expiries and pending hysteresis, for the writer's wake-ups.
    deadlines: Deadlines,
    limits: Limits,
    pub naming: Arc<Naming>,
    pub policy: HealthPolicy,
    batch_delay: Duration,
    store: Arc<ZoneStore>,
    view: Arc<ArcSwap<View>>,
    /// When the pending changes go out (`None`: nothing pending).
    pub publish_at: Option<Instant>,
    last_publish: Option<Instant>,
    table: Table,
    /// The registry as last published: what the table's records were
    /// derived from (an `imbl` copy, sharing what has not changed since).
    published: Registry,
    /// Instances whose records must be re-derived at the next publish.
    dirty: HashSet<CompactString>,
    /// A publish failed: the served zones may not hold what the table
    /// does, so the next publish derives everything and compares.
    diverged: bool,
    /// Since a publish failed, the table's additions are looked for in
    /// the served sets (see [`ZoneStore::update_generated`]).
    checked: bool,
}

impl Projection {
    pub fn new(
        registry: Registry,
        naming: Naming,
        policy: HealthPolicy,
        limits: Limits,
        batch_delay: Duration,
        store: Arc<ZoneStore>,
    ) -> Self {
        let naming = Arc::new(naming);
        let view = Arc::new(ArcSwap::from_pointee(View {
            registry: registry.clone(),
            naming: naming.clone(),
            policy,
        }));
        Projection {
            stats: Arc::new(Stats::default()),
            census: Census::of(&registry),
            deadlines: Deadlines::of(&registry),
            registry,
            limits,
            naming,
            policy,
            batch_delay,
            store,
            view,
            publish_at: None,
            last_publish: None,
            table: Table::default(),
            published: Registry::default(),
            dirty: HashSet::new(),
            diverged: false,
            checked: false,
        }
    }

    /// The handle for the API, writing through `tx`.
    pub fn handle(&self, tx: mpsc::Sender<(Op, Reply)>) -> RegistryHandle {
        RegistryHandle {
            tx,
            view: self.view.clone(),
            stats: self.stats.clone(),
        }
    }

    /// The entry `op` makes at `now`, checked against the naming rules and
    /// the limits.
    pub fn entry_for(&self, op: Op, now: u64) -> Result<Entry, RegistryError> {
        let r = &self.registry;
        let entry = match op {
            Op::Register { id, spec } => r.register(&id, &spec, now)?,
            Op::Deregister { id } => r.deregister(&id)?,
            Op::Heartbeat { id } => r.heartbeat(&id, now)?,
            Op::SetStatus { id, status } => r.set_status(&id, status, now)?,
            Op::SetOwner { owner, enabled } => r.set_owner(&owner, enabled)?,
            Op::Mirror { id, spec, node } => r.mirror(&id, &spec, &node, now)?,
            Op::Unmirror { id } => r.unmirror(&id)?,
        };
        if let Entry::Put { instance } = &entry {
            self.naming.check(instance)?;
            self.census.admit(&self.limits, r, instance)?;
        }
        Ok(entry)
    }

    /// A heartbeat for `id` at `now`, applied: its journal entry and the
    /// instance as renewed. One lookup where [`entry_for`](Self::entry_for)
    /// and [`apply`](Self::apply) would take three.
    pub fn renew(&mut self, id: &str, now: u64) -> Result<(Entry, Arc<Instance>), RegistryError> {
        let (inst, expires_at) = self.registry.renewal(id, now)?;
        let inst = inst.clone();
        self.deadlines.renew(&inst, expires_at);
        let entry = Entry::Renew {
            id: inst.id.clone(),
            expires_at,
        };
        Ok((entry, inst))
    }

    /// How many more instances the limits let in: in all, or for CNS
    /// owner `owner`.
    pub fn room(&self, owner: Option<&str>) -> usize {
        let total = self
            .limits
            .max_instances
            .saturating_sub(self.census.total());
        match owner {
            Some(o) => total.min(
                self.limits
                    .max_instances_per_owner
                    .saturating_sub(self.census.held_by(o)),
            ),
            None => total,
        }
    }

    /// Applies `entry` to the state, the census and the pending publish.
    pub fn apply(&mut self, entry: &Entry) {
        if let Entry::Renew { id, expires_at } = entry {
            // Only the lease moves: no census, records or publish.
            if let Some(inst) = self.registry.instances.get(id) {
                self.deadlines.renew(inst, *expires_at);
            }
            return;
        }
        let id = match entry {
            Entry::Put { instance } => Some(&instance.id),
            Entry::Delete { id, .. } | Entry::Renew { id, .. } => Some(id),
            Entry::Owner { .. } => None,
        };
        let before = id.and_then(|id| self.registry.instances.get(id).cloned());
        self.registry.apply(entry);
        let after = id.and_then(|id| self.registry.instances.get(id));
        self.deadlines.record(before.as_ref(), after);
        self.census.record(before.as_deref(), entry);
        self.mark_dirty(entry);
    }

    /// Pending changes go out at once when the last publish is at least
    /// `batch_delay` old (with the default 0: always), else when it is.
    pub fn schedule_publish(&mut self) {
        if self.publish_at.is_none() {
            let now = Instant::now();
            let earliest = self.last_publish.map_or(now, |t| t + self.batch_delay);
            self.publish_at = Some(earliest.max(now));
        }
    }

    /// When the clock next has work for the writer (see [`Deadlines`]).
    pub fn next_deadline(&self, now: u64) -> Option<u64> {
        self.deadlines.next(&self.registry, now, &self.policy)
    }

    /// Time-driven entries due at `now`.
    pub fn tick(&self, now: u64) -> Vec<Entry> {
        self.deadlines.tick(&self.registry, now, &self.policy)
    }

    /// Replaces the whole state (a backend's first read); the caller
    /// publishes everything next.
    pub fn reset(&mut self, registry: Registry) {
        self.census = Census::of(&registry);
        self.deadlines = Deadlines::of(&registry);
        self.registry = registry;
        self.refresh_view();
    }

    pub fn refresh_view(&self) {
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

    /// Startup (or a whole re-read): derive everything and publish every
    /// zone that changed at once.
    pub fn publish_all(&mut self, serials: Serials) -> Vec<ZoneDiff> {
        let started = std::time::Instant::now();
        self.table = Table::build(&self.naming, &self.registry);
        self.published = self.registry.clone();
        self.dirty.clear();
        self.publish_at = None;
        let zones = self.table.zones(&self.naming);
        let store = &*self.store;
        let now = now_ms() / 1000;
        let diffs = match serials {
            Serials::Policy { floor } => {
                store.publish_generated(zones, Some(floor_at(floor, now)), now)
            }
            Serials::Exact(serial) => store.publish_generated_at(zones, serial, now),
        };
        log_published(&diffs, started);
        diffs
    }

    /// Re-derives the records of the instances changed since the last
    /// publish and applies the RRset differences to the store, one serial
    /// per changed zone.
    pub fn publish(&mut self, serials: Serials) -> Vec<ZoneDiff> {
        if self.diverged {
            self.diverged = false;
            return self.publish_all(serials);
        }
        self.publish_at = None;
        self.last_publish = Some(Instant::now());
        let started = std::time::Instant::now();
        let dirty = std::mem::take(&mut self.dirty);
        let updates = self
            .table
            .update(&self.naming, &self.published, &self.registry, dirty);
        self.published = self.registry.clone();
        let store = &*self.store;
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
                    rrset_changes(&key.0, old, self.table.rrset(&self.naming, &key), changes);
                }
            }
        }
        let mut diffs = Vec::new();
        let mut failed = false;
        for (origin, changes) in by_zone {
            if changes.is_empty() {
                continue;
            }
            // The table counts every record's contributors, and adds only
            // records the served sets lack: they are not looked for, as
            // long as no update failed.
            let now = now_ms() / 1000;
            let serial = match serials {
                Serials::Policy { .. } => None,
                Serials::Exact(serial) => Some(serial),
            };
            let additions = match self.checked {
                true => Additions::Checked,
                false => Additions::Counted,
            };
            let result = store.update_generated(&origin, &changes, serial, now, additions);
            match result {
                Ok(d) if !d.is_empty() => diffs.push(d),
                Ok(_) => {}
                Err(e) => {
                    error!(zone = %origin, "registry zone update failed: {e}");
                    failed = true;
                }
            }
        }
        if failed && !self.checked {
            // The served zone no longer follows the table: the next
            // publish derives and compares every set, once, and from now
            // on additions are looked for (a failure that persists, such
            // as a set past 65,535 records, is not rebuilt for each time).
            self.checked = true;
            self.diverged = true;
            self.schedule_publish();
        }
        log_published(&diffs, started);
        diffs
    }
}

/// At a start, before the registry's full derivation
/// ([`Projection::publish_all`]): the records of the instances `recent`
/// (put last before the stop) that the served zones lack, added at once.
/// A crash can leave the last commits out of the zones' images and IXFR
/// journal while the registry's journal holds them; deriving every
/// instance takes seconds at a million, the last two seconds' worth a
/// fraction of one. Only additions: what those instances replaced or
/// removed, a PTR set (one record chosen among all), a set of another
/// TTL and a Binder member (its records depend on its domain's other
/// members) wait for the full derivation that follows, which compares
/// every set with what is served. A start with nothing to add publishes
/// nothing (no new serial).
pub fn publish_recent(
    naming: &Naming,
    registry: &Registry,
    store: &ZoneStore,
    recent: &[CompactString],
    floor: Option<u32>,
) -> Vec<ZoneDiff> {
    let started = std::time::Instant::now();
    let snapshot = store.snapshot();
    let mut by_zone: BTreeMap<Name, Vec<Change>> = BTreeMap::new();
    for id in recent {
        let Some(inst) = registry.instances.get(id.as_str()) else {
            continue;
        };
        if inst.reg.binder.is_some() {
            continue;
        }
        for c in naming.contributions_in(registry, inst, None) {
            let Some(origin) = naming.zone_of(&c.name) else {
                continue;
            };
            // Not served yet at all: the full derivation makes it.
            let Some(zone) = snapshot.zone(&LowerName::new(origin)) else {
                continue;
            };
            let rtype = c.data.record_type();
            let served = zone
                .node(&LowerName::new(&c.name))
                .and_then(|n| n.rrset(rtype));
            // (An explicit serial is a change of its own: nothing served
            // already is added.)
            if served
                .is_some_and(|s| rtype == RecordType::PTR || s.ttl != c.ttl || s.contains(&c.data))
            {
                continue;
            }
            by_zone
                .entry(origin.clone())
                .or_default()
                .push(Change::Add(Record::from_rdata(c.name, c.ttl, c.data)));
        }
    }
    let now = now_ms() / 1000;
    let floor = floor_at(floor, now);
    let mut diffs = Vec::new();
    for (origin, changes) in by_zone {
        match store.update_at(&origin, &changes, floor, now) {
            Ok(d) if !d.is_empty() => diffs.push(d),
            Ok(_) => {}
            Err(e) => {
                error!(zone = %origin, "registry: the last instances put before the stop not published ahead: {e}")
            }
        }
    }
    let added: usize = diffs.iter().map(|d| d.added.len().saturating_sub(1)).sum();
    info!(
        target: "xdpdns::registry::start",
        instances = recent.len(),
        added,
        ms = started.elapsed().as_millis() as u64,
        "registry: the instances put last before the stop published ahead of the full derivation"
    );
    diffs
}

/// The serial a publish starts from: `floor` (past every serial published
/// before a restart), and never behind the clock either, so serials move
/// forward even if the floor was lost.
fn floor_at(floor: Option<u32>, now_secs: u64) -> u32 {
    match floor {
        Some(f) if crate::zone::serial::is_newer(f, now_secs as u32) => f,
        _ => now_secs as u32,
    }
}

fn log_published(diffs: &[ZoneDiff], started: std::time::Instant) {
    let elapsed_us = started.elapsed().as_micros() as u64;
    for d in diffs {
        info!(zone = %d.origin, serial = d.new_serial, removed = d.removed.len(), added = d.added.len(), elapsed_us, "registry zone published");
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

/// Most writes taken as one group (one fsync or one pass of etcd writes).
pub const MAX_GROUP: usize = 1024;

/// `first` and whatever else is queued behind it, up to [`MAX_GROUP`].
pub fn group_after(first: (Op, Reply), rx: &mut mpsc::Receiver<(Op, Reply)>) -> Vec<(Op, Reply)> {
    let mut group = vec![first];
    while group.len() < MAX_GROUP {
        match rx.try_recv() {
            Ok(next) => group.push(next),
            Err(_) => break,
        }
    }
    group
}

/// Sleeps until `at`, or forever.
pub async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
