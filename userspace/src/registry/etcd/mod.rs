//! The registry in etcd (`[registry] backend = "etcd"`): several nodes
//! share one registry, any of them takes writes, every one serves it.
//!
//! * **State**: instances and owner flags are JSON values under the
//!   configured prefix (`instances/<id>`, `owners/<owner>`). An instance's
//!   lease is an etcd lease: a heartbeat is a lease keep-alive, and etcd
//!   deletes the key when it runs out, whether or not any node is alive.
//! * **Writes**: an API write becomes the same registry entry as with the
//!   local journal ([`Projection::entry_for`]), written in a transaction
//!   that compares the key's revision with the one this node last saw (a
//!   concurrent write elsewhere makes it retry against the newer state).
//!   It is acknowledged once etcd has committed it and this node's state
//!   has reached that revision.
//! * **Every node derives its zones from a watch**: one read of the prefix
//!   at a revision, then a watch from the next one, resumed after a
//!   disconnect from the last revision applied (a compacted one means a
//!   fresh read, applied as one difference).
//! * **Serials**: a zone published with the state at revision `r` gets the
//!   serial `base + r`, where `base` is stored once in etcd by the first
//!   node (`serial-base`, the clock then): the same state has the same
//!   serial on every node, so a secondary may move between them.
//! * **Hysteresis** runs on every node from the shared state; a
//!   withdrawal is a compare-and-set, so one node makes each and the
//!   others see it in the watch.
//!
//! * **TLS**: `https://` endpoints, verified against `ca_file` (or the
//!   system's roots), with a client certificate when `cert_file` and
//!   `key_file` are set; user and password as etcd's `--user`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use compact_str::CompactString;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, KeyValue, TlsOptions, Txn,
    TxnOp, WatchOptions, WatchResponse, WatchStream,
};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{error, info, warn};

use super::model::Limits;
use super::projection::{
    group_after, now_ms, sleep_until, Op, Projection, Reply, Serials, Started, WriteResult,
    WriterError,
};
use super::service::{log_tick_entry, spawn_writer};
use super::state::{Entry, RemovalReason};
use super::{Expiry, HealthPolicy, Instance, Naming, Registry, RegistryError};
use crate::zone::ZoneStore;

mod client;
mod config;
mod writing;

use client::{bounded, difference, keep_alive, next_message, prefix_end};
pub use config::EtcdConfig;
use writing::{Seen, Writing, Written};

/// How long a start waits to reach an etcd member before serving what it
/// has (zone images) and going on trying in the background.
const FIRST_READ_WAIT: Duration = Duration::from_secs(10);

/// Between two attempts to reach etcd again.
const RECONNECT_EVERY: Duration = Duration::from_millis(500);

/// Least time between two hysteresis ticks (a lost compare-and-set leaves
/// the deadline due until the watch brings the winner's write).
const TICK_SPACING: Duration = Duration::from_millis(200);

/// Keys per response of the first read.
const READ_PAGE: i64 = 1000;

/// How often a write that lost a compare is tried again.
const RETRIES: u8 = 3;

/// Reads the registry from etcd, publishes its zones into `store`, and
/// starts the writer. When no etcd member answers within
/// [`FIRST_READ_WAIT`], or the read fails, the server starts with what its zone images hold,
/// answers writes with 503 and keeps trying.
#[allow(clippy::too_many_arguments)]
pub async fn start(
    config: &EtcdConfig,
    naming: Naming,
    policy: HealthPolicy,
    limits: Limits,
    batch_delay: Duration,
    store: std::sync::Arc<ZoneStore>,
    stop: watch::Receiver<bool>,
) -> Result<Started, WriterError> {
    let password = config.password().map_err(WriterError::Etcd)?;
    let tls = config.tls().map_err(WriterError::Etcd)?;
    let proj = Projection::new(
        Registry::default(),
        naming,
        policy,
        limits,
        batch_delay,
        store,
    );
    let (tx, rx) = mpsc::channel(4096);
    let handle = proj.handle(tx);
    let config = config.clone();
    let (first_tx, first_rx) = oneshot::channel();
    let task = spawn_writer("registry-etcd", move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| WriterError::Etcd(format!("writer runtime: {e}")))?;
        rt.block_on(async move {
            let mut w = EtcdWriter::new(config, password, tls, proj);
            // Only reaching etcd is bounded: once a member answers, the
            // read takes as many pages as the registry needs (each bounded
            // on its own), so a large registry is never served empty.
            let first = match tokio::time::timeout(FIRST_READ_WAIT, w.connect()).await {
                Ok(Ok(())) => w.reach().await.map_err(|e| e.to_string()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err("timed out".to_string()),
            };
            let read = match first {
                Ok(()) => Some(w.proj.registry.instances.len()),
                Err(e) => {
                    w.client = None;
                    warn!(endpoints = ?w.config.endpoints, "registry: etcd unreachable at start ({e}); serving what the zone images hold, writes refused until it is reached");
                    None
                }
            };
            let _ = first_tx.send(read.unwrap_or(0));
            w.run(rx, stop).await
        })
    })
    .map_err(|e| WriterError::Etcd(format!("writer thread: {e}")))?;
    let recovered_instances = first_rx
        .await
        .map_err(|_| WriterError::Etcd("the writer stopped during its first read".into()))?;
    Ok(Started {
        handle,
        task,
        recovered_instances,
    })
}

/// A write that lost its compare: tried again once the watch has
/// reached `after`.
struct Deferred {
    op: Op,
    reply: Reply,
    after: i64,
    tries: u8,
}

/// An etcd key under the prefix.
enum Key {
    Instance(String),
    Owner(String),
    /// A deregistration's marker, written with the delete (same revision)
    /// on a lease of its own ([`MARKER_SECS`]).
    Removed(String),
    Other,
}

struct EtcdWriter {
    config: EtcdConfig,
    password: String,
    tls: Option<TlsOptions>,
    proj: Projection,
    client: Option<Client>,
    /// Where the next connection attempt starts in `endpoints`.
    next_endpoint: usize,
    watch: Option<WatchStream>,
    /// Whether the state was ever read (else the next read publishes all).
    read_once: bool,
    seen: HashMap<CompactString, Seen>,
    /// Every change up to this revision is in the projection.
    applied: i64,
    /// The revision of the last change to the registry itself (not to
    /// its markers): what the serial is made from, so nodes that saw the
    /// same changes in different batches agree.
    changed_at: i64,
    /// The highest revision of this node's own writes, applied before the
    /// watch brought them: nothing is published until the watch is there
    /// too, so a serial always names the state at one revision.
    ahead: i64,
    serial_base: u32,
    /// Acknowledgements waiting for the state to reach their revision.
    waiting: Vec<(i64, Reply, WriteResult)>,
    deferred: Vec<Deferred>,
    reconnect_at: Option<Instant>,
    tick_not_before: Instant,
}

impl EtcdWriter {
    fn new(
        config: EtcdConfig,
        password: String,
        tls: Option<TlsOptions>,
        proj: Projection,
    ) -> Self {
        proj.stats.in_etcd.store(true, Ordering::Relaxed);
        proj.stats.cut_off.store(true, Ordering::Relaxed);
        EtcdWriter {
            config,
            password,
            tls,
            proj,
            client: None,
            next_endpoint: 0,
            watch: None,
            read_once: false,
            seen: HashMap::new(),
            applied: 0,
            changed_at: 0,
            ahead: 0,
            serial_base: 0,
            waiting: Vec::new(),
            deferred: Vec::new(),
            reconnect_at: None,
            tick_not_before: Instant::now(),
        }
    }

    fn key(&self, tail: &str) -> String {
        format!("{}{tail}", self.config.prefix)
    }

    fn parse_key(&self, key: &[u8]) -> Key {
        let Some(tail) = std::str::from_utf8(key)
            .ok()
            .and_then(|k| k.strip_prefix(&self.config.prefix))
        else {
            return Key::Other;
        };
        if let Some(id) = tail.strip_prefix("instances/") {
            return Key::Instance(id.to_string());
        }
        if let Some(owner) = tail.strip_prefix("owners/") {
            return Key::Owner(owner.to_string());
        }
        if let Some(id) = tail.strip_prefix("removed/") {
            return Key::Removed(id.to_string());
        }
        Key::Other
    }

    /// The serial of the state as of the last change applied: the same
    /// on every node that holds that state.
    fn serial(&self) -> Serials {
        Serials::Exact(self.serial_base.wrapping_add(self.changed_at as u32))
    }

    /// Connects (if not connected), reads the state if the watch cannot
    /// resume where it stopped, and starts the watch.
    async fn reach(&mut self) -> Result<(), etcd_client::Error> {
        self.connect().await?;
        if self.read_once {
            match self.resume_watch().await {
                Ok(true) => return Ok(()),
                Ok(false) => info!(revision = self.applied, "registry: etcd compacted past the last revision applied; reading the whole registry again"),
                Err(e) => return Err(e),
            }
        }
        self.read_all().await
    }

    async fn connect(&mut self) -> Result<(), etcd_client::Error> {
        if self.client.is_none() {
            self.client = Some(self.connect_one().await?);
        }
        Ok(())
    }

    /// A client of the first member, in turn from the one after the last
    /// used, that answers a status request. One member at a time: a
    /// client balanced over all of them keeps picking a dead one, and the
    /// watch lives on one connection anyway.
    async fn connect_one(&mut self) -> Result<Client, etcd_client::Error> {
        let n = self.config.endpoints.len();
        let mut last = None;
        for k in 0..n {
            let endpoint = self.config.endpoints[(self.next_endpoint + k) % n].clone();
            // No request timeout on the channel: it would cut the watch
            // stream too. Unary calls are bounded one by one instead.
            let mut options = ConnectOptions::new()
                .with_connect_timeout(self.config.timeout())
                .with_keep_alive(Duration::from_secs(2), self.config.timeout());
            if let Some(user) = &self.config.user {
                options = options.with_user(user.clone(), self.password.clone());
            }
            if let Some(tls) = &self.tls {
                options = options.with_tls(tls.clone());
            }
            let attempt = async {
                let mut client = Client::connect([endpoint.as_str()], Some(options)).await?;
                client.status().await?;
                Ok::<_, etcd_client::Error>(client)
            };
            match tokio::time::timeout(self.config.timeout(), attempt).await {
                Ok(Ok(client)) => {
                    self.next_endpoint = (self.next_endpoint + k + 1) % n;
                    info!(%endpoint, "registry: connected to etcd");
                    return Ok(client);
                }
                Ok(Err(e)) => last = Some(e),
                Err(_) => {
                    last = Some(etcd_client::Error::IoError(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("{endpoint}: no answer"),
                    )))
                }
            }
        }
        Err(last.unwrap_or_else(|| etcd_client::Error::InvalidArgs("no endpoints".into())))
    }

    fn client(&mut self) -> &mut Client {
        self.client.as_mut().expect("connected")
    }

    /// One read of everything at one revision, applied as the difference
    /// from what this node holds, then the watch from the next revision.
    async fn read_all(&mut self) -> Result<(), etcd_client::Error> {
        let base_key = self.key("serial-base");
        let now = (now_ms() / 1000) as u32;
        let create = Txn::new()
            .when([Compare::create_revision(
                base_key.clone(),
                CompareOp::Equal,
                0,
            )])
            .and_then([TxnOp::put(base_key.clone(), now.to_string(), None)]);
        let timeout = self.config.timeout();
        bounded(timeout, self.client().txn(create)).await?;
        let started = std::time::Instant::now();
        let (revision, kvs) = self.read_prefix().await?;
        let read_ms = started.elapsed().as_millis() as u64;
        let mut registry = Registry::default();
        let mut seen = HashMap::new();
        // A deletion leaves no key behind but its marker (deregistrations;
        // a lease expiry leaves none, see the README).
        let changed_at = kvs
            .iter()
            .filter(|kv| !matches!(self.parse_key(kv.key()), Key::Other))
            .map(KeyValue::mod_revision)
            .max()
            .unwrap_or(0);
        for kv in &kvs {
            if kv.key() == base_key.as_bytes() {
                if let Some(b) = kv.value_str().ok().and_then(|v| v.trim().parse().ok()) {
                    self.serial_base = b;
                }
                continue;
            }
            match self.decode(kv) {
                Some(Entry::Put { instance }) => {
                    seen.insert(
                        instance.id.clone(),
                        Seen {
                            revision: kv.mod_revision(),
                            lease: kv.lease(),
                        },
                    );
                    registry.instances.insert(Arc::new(*instance));
                }
                Some(Entry::Owner { owner, enabled }) => {
                    registry.owners.insert(owner, enabled);
                }
                _ => {}
            }
        }
        let count = registry.instances.len();
        let decoded_ms = started.elapsed().as_millis() as u64;
        if self.read_once {
            for entry in difference(&self.proj.registry, &registry) {
                self.proj.apply(&entry);
            }
        } else {
            self.proj.reset(registry);
        }
        let applied_ms = started.elapsed().as_millis() as u64;
        self.seen = seen;
        self.applied = revision;
        self.ahead = revision;
        self.changed_at = self.changed_at.max(changed_at);
        self.proj.refresh_view();
        match self.read_once {
            false => self.proj.publish_all(self.serial()),
            true => self.proj.publish(self.serial()),
        };
        self.read_once = true;
        let total_ms = started.elapsed().as_millis() as u64;
        info!(
            instances = count,
            revision, read_ms, decoded_ms, applied_ms, total_ms, "registry read from etcd"
        );
        self.start_watch(revision + 1).await
    }

    /// Every key under the prefix at one revision, read in pages (one
    /// response of 100k instances would pass gRPC's 4 MB message limit),
    /// each page bounded in time.
    async fn read_prefix(&mut self) -> Result<(i64, Vec<KeyValue>), etcd_client::Error> {
        let timeout = self.config.timeout();
        let prefix = self.config.prefix.clone().into_bytes();
        let end = prefix_end(&prefix);
        let (mut from, mut revision, mut kvs) = (prefix, 0, Vec::new());
        loop {
            let mut options = GetOptions::new()
                .with_range(end.clone())
                .with_limit(READ_PAGE);
            if revision != 0 {
                options = options.with_revision(revision);
            }
            let mut resp = bounded(timeout, self.client().get(from.clone(), Some(options))).await?;
            if revision == 0 {
                revision = resp.header().map_or(0, |h| h.revision());
            }
            let more = resp.more();
            let page = resp.take_kvs();
            match page.last() {
                Some(last) if more => {
                    from = last.key().to_vec();
                    from.push(0);
                }
                _ => {
                    kvs.extend(page);
                    return Ok((revision, kvs));
                }
            }
            kvs.extend(page);
        }
    }

    async fn start_watch(&mut self, from: i64) -> Result<(), etcd_client::Error> {
        let prefix = self.config.prefix.clone();
        let options = WatchOptions::new().with_prefix().with_start_revision(from);
        self.watch = Some(self.client().watch(prefix, Some(options)).await?);
        self.proj.stats.cut_off.store(false, Ordering::Relaxed);
        Ok(())
    }

    /// Starts the watch after the last revision applied; `false` when
    /// etcd no longer has that revision (compacted).
    async fn resume_watch(&mut self) -> Result<bool, etcd_client::Error> {
        let timeout = self.config.timeout();
        bounded(timeout, self.start_watch(self.applied + 1)).await?;
        let first = bounded(timeout, self.watch.as_mut().expect("watching").message()).await?;
        match first {
            Some(r) if r.compact_revision() > 0 || r.canceled() => {
                self.watch = None;
                Ok(false)
            }
            Some(r) => {
                self.on_watch(&r);
                Ok(true)
            }
            None => Err(etcd_client::Error::WatchError(
                "watch closed at once".into(),
            )),
        }
    }

    /// The registry entry a key's value stands for.
    fn decode(&self, kv: &KeyValue) -> Option<Entry> {
        match self.parse_key(kv.key()) {
            Key::Instance(id) => match serde_json::from_slice::<Instance>(kv.value()) {
                Ok(mut instance) => {
                    instance.expires_at = Expiry::new(Expiry::NEVER);
                    Some(Entry::Put {
                        instance: Box::new(instance),
                    })
                }
                Err(e) => {
                    warn!(instance = %id, "registry: unreadable instance in etcd ignored: {e}");
                    None
                }
            },
            Key::Owner(owner) => Some(Entry::Owner {
                owner,
                enabled: serde_json::from_slice(kv.value()).unwrap_or(false),
            }),
            Key::Removed(_) | Key::Other => None,
        }
    }

    /// Applies a watch response's events (those this node already applied
    /// as its own writes are skipped).
    fn on_watch(&mut self, resp: &WatchResponse) {
        // A delete without a marker beside it is etcd expiring the lease.
        let deregistered: HashSet<String> = resp
            .events()
            .iter()
            .filter(|e| e.event_type() == EventType::Put)
            .filter_map(|e| match self.parse_key(e.kv()?.key()) {
                Key::Removed(id) => Some(id),
                _ => None,
            })
            .collect();
        for event in resp.events() {
            let Some(kv) = event.kv() else { continue };
            let revision = kv.mod_revision();
            let key = self.parse_key(kv.key());
            match (&key, event.event_type()) {
                (Key::Instance(_) | Key::Owner(_), _) | (Key::Removed(_), EventType::Put) => {
                    self.changed_at = self.changed_at.max(revision);
                }
                _ => {}
            }
            match (event.event_type(), key) {
                (EventType::Put, Key::Instance(id)) => {
                    if self
                        .seen
                        .get(id.as_str())
                        .is_some_and(|s| s.revision >= revision)
                    {
                        // This node's own write, applied already.
                    } else if let Some(entry) = self.decode(kv) {
                        self.seen.insert(
                            id.into(),
                            Seen {
                                revision,
                                lease: kv.lease(),
                            },
                        );
                        self.proj.apply(&entry);
                    }
                }
                // Not seen: this node's own delete, applied already.
                (EventType::Delete, Key::Instance(id))
                    if self.seen.remove(id.as_str()).is_some() =>
                {
                    let reason = match deregistered.contains(&id) {
                        true => RemovalReason::Deregistered,
                        false => RemovalReason::LeaseExpired,
                    };
                    let entry = Entry::Delete {
                        id: id.into(),
                        reason,
                    };
                    log_tick_entry(&self.proj, &entry);
                    self.proj.apply(&entry);
                }
                (EventType::Put, Key::Owner(_)) => {
                    if let Some(entry) = self.decode(kv) {
                        self.proj.apply(&entry);
                    }
                }
                (EventType::Delete, Key::Owner(owner)) => {
                    self.proj.apply(&Entry::Owner {
                        owner,
                        enabled: false,
                    });
                }
                _ => {}
            }
            self.applied = self.applied.max(revision);
        }
        if !resp.events().is_empty() {
            self.proj.refresh_view();
            self.proj.schedule_publish();
        }
    }

    async fn run(
        mut self,
        mut rx: mpsc::Receiver<(Op, Reply)>,
        mut stop: watch::Receiver<bool>,
    ) -> Result<(), WriterError> {
        if self.watch.is_none() {
            self.lost("not reached at start");
        }
        loop {
            self.settle().await;
            let now = now_ms();
            let tick_at = self
                .proj
                .next_deadline(now)
                .map(|t| Instant::now() + Duration::from_millis(t.saturating_sub(now)))
                .map(|t| t.max(self.tick_not_before));
            let publish_at = self.proj.publish_at.filter(|_| self.applied >= self.ahead);
            let wake = [tick_at, publish_at, self.reconnect_at]
                .into_iter()
                .flatten()
                .min();
            tokio::select! {
                first = rx.recv() => {
                    let Some(first) = first else { break };
                    let group = group_after(first, &mut rx);
                    let group = group.into_iter().map(|(op, reply)| (op, reply, 0)).collect();
                    self.commit_group(group).await;
                }
                message = next_message(&mut self.watch) => match message {
                    Ok(Some(resp)) if resp.compact_revision() > 0 => {
                        info!(revision = self.applied, "registry: etcd compacted past the last revision applied; reading the whole registry again");
                        self.watch = None;
                        if let Err(e) = self.read_all().await {
                            self.lost(&e.to_string());
                        }
                    }
                    Ok(Some(resp)) if resp.canceled() => self.lost("watch cancelled"),
                    Ok(Some(resp)) => self.on_watch(&resp),
                    Ok(None) => self.lost("watch closed"),
                    Err(e) => self.lost(&e.to_string()),
                },
                _ = sleep_until(wake) => {
                    if self.reconnect_at.is_some_and(|t| t <= Instant::now()) {
                        self.reconnect().await;
                    }
                    if tick_at.is_some_and(|t| t <= Instant::now()) {
                        self.tick().await;
                    }
                }
                _ = stop.changed() => break,
            }
        }
        if self.proj.publish_at.is_some() && self.applied >= self.ahead {
            self.proj.publish(self.serial());
        }
        Ok(())
    }

    /// What follows the state reaching a revision: acknowledgements,
    /// writes to try again, and a due publish.
    async fn settle(&mut self) {
        let applied = self.applied;
        let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|(r, _, _)| *r <= applied);
        self.waiting = waiting;
        for (_, reply, result) in done {
            let _ = reply.send(result);
        }
        let (ready, deferred): (Vec<_>, Vec<_>) = std::mem::take(&mut self.deferred)
            .into_iter()
            .partition(|d| d.after <= applied || self.watch.is_none());
        self.deferred = deferred;
        if !ready.is_empty() {
            let ready = ready
                .into_iter()
                .map(|d| (d.op, d.reply, d.tries))
                .collect();
            self.commit_group(ready).await;
        }
        if self.proj.publish_at.is_some_and(|t| t <= Instant::now()) && applied >= self.ahead {
            self.proj.publish(self.serial());
        }
    }

    /// The connection or the watch is gone: writes are refused until etcd
    /// is reached again; what was read goes on being served.
    fn lost(&mut self, why: &str) {
        if self.watch.is_some() || self.reconnect_at.is_none() {
            warn!(revision = self.applied, "registry: lost etcd ({why}); serving the registry as of this revision, refusing writes until etcd is back");
        }
        self.watch = None;
        self.client = None;
        self.proj.stats.cut_off.store(true, Ordering::Relaxed);
        self.reconnect_at = Some(Instant::now() + RECONNECT_EVERY);
    }

    async fn reconnect(&mut self) {
        self.reconnect_at = None;
        // Each request inside is bounded; the whole is not, since a
        // fresh read of a large registry takes as many pages as it needs.
        match self.reach().await {
            Ok(()) => info!(
                revision = self.applied,
                "registry: etcd reached; following its changes again"
            ),
            Err(e) => {
                self.client = None;
                self.lost(&e.to_string());
            }
        }
    }

    /// Turns a group of ops into entries and writes them, a wave at a
    /// time: the writes of one wave go to etcd at once (each its own
    /// transaction), so a burst of registrations costs a few round trips
    /// rather than two per registration. Replies go once the state has
    /// reached each write's revision.
    async fn commit_group(&mut self, group: Vec<(Op, Reply, u8)>) {
        let mut queue: VecDeque<_> = group.into();
        while !queue.is_empty() {
            let wave = self.next_wave(&mut queue);
            self.write_wave(wave).await;
        }
    }

    /// The next ops of `queue` that may be written at once: one per
    /// instance or owner (a later op on the same key waits for the one
    /// before it), and no more new instances than any limit has room for,
    /// so concurrent writes cannot pass a limit that writes one by one
    /// would hit. Ops that need no write (errors, heartbeats) are answered
    /// here.
    fn next_wave(&mut self, queue: &mut VecDeque<(Op, Reply, u8)>) -> Vec<Pending> {
        let room = self.proj.room(None);
        let mut keys = HashSet::new();
        let mut per_owner: HashMap<String, usize> = HashMap::new();
        let mut wave = Vec::new();
        while let Some((op, _, _)) = queue.front() {
            let key = match op {
                Op::Register { id, .. }
                | Op::Deregister { id }
                | Op::Heartbeat { id }
                | Op::SetStatus { id, .. }
                | Op::Mirror { id, .. }
                | Op::Unmirror { id } => id.clone(),
                Op::SetOwner { owner, .. } => format!("owner {owner}"),
            };
            let owner = match op {
                Op::Register { spec, .. } => spec.owner.clone(),
                _ => None,
            };
            if !wave.is_empty() {
                let owner_full = owner.as_ref().is_some_and(|o| {
                    per_owner.get(o).copied().unwrap_or(0) >= self.proj.room(Some(o))
                });
                if keys.contains(&key) || wave.len() >= room || owner_full {
                    break;
                }
            }
            let (op, reply, tries) = queue.pop_front().expect("a front");
            let entry = match self.proj.entry_for(op.clone(), now_ms()) {
                Ok(e) => e,
                Err(e) => {
                    let _ = reply.send(Err(e));
                    continue;
                }
            };
            if self.watch.is_none() {
                let _ = reply.send(Err(RegistryError::Unavailable));
                continue;
            }
            if let Entry::Renew { id, .. } = &entry {
                self.heartbeat(id, reply);
                continue;
            }
            keys.insert(key);
            if let Some(o) = owner {
                *per_owner.entry(o).or_default() += 1;
            }
            let (seen, same_lease) = self.before_write(&entry);
            wave.push(Pending {
                op,
                reply,
                tries,
                entry,
                seen,
                same_lease,
            });
        }
        wave
    }

    /// What this node saw of an entry's key, and whether a registration
    /// keeps its lease length (then its lease is renewed, not replaced).
    fn before_write(&self, entry: &Entry) -> (Option<Seen>, bool) {
        match entry {
            Entry::Put { instance } => (
                self.seen.get(&instance.id).copied(),
                self.proj
                    .registry
                    .instances
                    .get(&instance.id)
                    .is_some_and(|old| old.reg.lease_secs == instance.reg.lease_secs),
            ),
            Entry::Delete { id, .. } => (self.seen.get(id).copied(), false),
            _ => (None, false),
        }
    }

    /// Writes a wave's entries at once and follows each result.
    async fn write_wave(&mut self, wave: Vec<Pending>) {
        if wave.is_empty() {
            return;
        }
        let Some(writing) = self.writing() else {
            for p in wave {
                let _ = p.reply.send(Err(RegistryError::Unavailable));
            }
            return;
        };
        let mut tasks = JoinSet::new();
        for (k, p) in wave.iter().enumerate() {
            let (writing, entry, seen, same) =
                (writing.clone(), p.entry.clone(), p.seen, p.same_lease);
            tasks.spawn(async move { (k, writing.write_retrying(&entry, seen, same).await) });
        }
        let mut results: Vec<_> = wave.iter().map(|_| None).collect();
        while let Some(done) = tasks.join_next().await {
            let (k, result) = done.expect("an etcd write task panicked");
            results[k] = Some(result);
        }
        let mut failed = None;
        for (p, result) in wave.into_iter().zip(results) {
            match result.expect("every write answered") {
                Ok((Written::At(revision), lease)) => {
                    let result = match &p.entry {
                        Entry::Put { instance } => Some(Arc::new((**instance).clone())),
                        _ => None,
                    };
                    self.wrote(&p.entry, p.seen, lease, revision);
                    self.waiting.push((revision, p.reply, Ok(result)));
                }
                Ok((Written::Conflict(after), _)) if p.tries < RETRIES => {
                    self.deferred.push(Deferred {
                        op: p.op,
                        reply: p.reply,
                        after,
                        tries: p.tries + 1,
                    })
                }
                Ok((Written::Conflict(_), _)) => {
                    let _ = p.reply.send(Err(RegistryError::Unavailable));
                }
                Err(e) => {
                    error!("registry: etcd write failed: {e}");
                    let _ = p.reply.send(Err(RegistryError::Unavailable));
                    failed = Some(e);
                }
            }
        }
        if let Some(e) = failed {
            self.lost(&e.to_string());
        }
    }

    /// What a write needs of this writer, when connected.
    fn writing(&self) -> Option<Writing> {
        Some(Writing {
            client: self.client.clone()?,
            prefix: self.config.prefix.clone(),
            timeout: self.config.timeout(),
        })
    }

    /// Follows a committed write of this node: the key's lease, then the
    /// state.
    fn wrote(&mut self, entry: &Entry, seen: Option<Seen>, lease: i64, revision: i64) {
        if let Entry::Put { instance } = entry {
            let revision = seen.map_or(0, |s| s.revision);
            self.seen
                .insert(instance.id.clone(), Seen { revision, lease });
        }
        self.apply_own(entry, revision);
    }

    /// Applies this node's own committed write before the watch brings it.
    fn apply_own(&mut self, entry: &Entry, revision: i64) {
        match entry {
            Entry::Put { instance } => {
                let lease = self.seen.get(&instance.id).map_or(0, |s| s.lease);
                self.seen
                    .insert(instance.id.clone(), Seen { revision, lease });
                let mut instance = instance.clone();
                instance.expires_at = Expiry::new(Expiry::NEVER);
                self.proj.apply(&Entry::Put { instance });
            }
            Entry::Delete { id, .. } => {
                self.seen.remove(id);
                self.proj.apply(entry);
            }
            Entry::Owner { .. } => self.proj.apply(entry),
            Entry::Renew { .. } => return,
        }
        self.ahead = self.ahead.max(revision);
        self.changed_at = self.changed_at.max(revision);
        self.proj.refresh_view();
        self.proj.schedule_publish();
    }
}

/// One entry on its way to etcd.
struct Pending {
    op: Op,
    reply: Reply,
    tries: u8,
    entry: Entry,
    /// What this node last saw of the key when the entry was made.
    seen: Option<Seen>,
    same_lease: bool,
}

impl EtcdWriter {
    /// A heartbeat: one keep-alive of the instance's lease, sent from a
    /// task of its own so that a thousand a second do not queue the
    /// writes behind them (it changes nothing the writer holds). The
    /// reply is the instance, or 404 when etcd has expired the lease
    /// already (its delete is on its way: not an etcd failure).
    fn heartbeat(&mut self, id: &str, reply: Reply) {
        let (Some(lease), Some(instance)) = (
            self.seen.get(id).map(|s| s.lease).filter(|l| *l != 0),
            self.proj.registry.instances.get(id).cloned(),
        ) else {
            let _ = reply.send(Err(RegistryError::NotFound(id.to_string())));
            return;
        };
        let mut client = self.client().clone();
        let timeout = self.config.timeout();
        let id = id.to_string();
        tokio::spawn(async move {
            let renewed = bounded(timeout, keep_alive(&mut client, lease)).await;
            let _ = reply.send(match renewed {
                Ok(true) => Ok(Some(instance)),
                Ok(false) => Err(RegistryError::NotFound(id)),
                Err(e) => {
                    warn!(%id, "registry: heartbeat failed: {e}");
                    Err(RegistryError::Unavailable)
                }
            });
        });
    }

    /// Hysteresis: withdrawals now due, each a compare-and-set (lease
    /// expiry is etcd's: no instance here has a local expiry time).
    async fn tick(&mut self) {
        self.tick_not_before = Instant::now() + TICK_SPACING;
        if self.watch.is_none() {
            return;
        }
        let entries = self.proj.tick(now_ms());
        for entry in entries {
            let Some(writing) = self.writing() else {
                return;
            };
            let (seen, same_lease) = self.before_write(&entry);
            match writing.write_retrying(&entry, seen, same_lease).await {
                Ok((Written::At(revision), lease)) => {
                    log_tick_entry(&self.proj, &entry);
                    self.wrote(&entry, seen, lease, revision);
                }
                Ok(_) => {}
                Err(e) => {
                    self.lost(&e.to_string());
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
