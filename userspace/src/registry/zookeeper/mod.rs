//! The ZooKeeper source: Registrar's records, mirrored into the registry
//! with watches instead of Binder's read-through cache. One session at a
//! time: persistent recursive watches on every mirrored domain's node, a
//! full read, then each watch event re-reads its node; what the tree
//! (`xdpdns_core::registry::zookeeper::MirrorTree`) says changed becomes
//! registry writes (one commit each, grouped by the writer), so the
//! journal, IXFR, NOTIFY and the kernel table follow like for any
//! registration. A lost connection (events may be lost while away) or a
//! lost session ends in a fresh full read, and only the difference is
//! written; meanwhile the last state read keeps serving, marked stale.

mod bounded;
pub mod config;
mod oneshot;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};
use futures_util::FutureExt;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{info, warn};
use zookeeper_client::{
    AddWatchMode, Client, EventType, MultiReadResult, SessionState, WatchedEvent,
};

use super::projection::{Op, RegistryHandle, SourceStats};
use super::RegistryError;
use oneshot::{Update, Watches};
use paths::{child_path, domain_path};
pub use xdpdns_core::registry::zookeeper::{paths, records, tree, Change, MirrorTree};

pub use config::{WatchMode, ZooKeeperConfig};

/// Most node updates taken into one registry write.
const MAX_BATCH: usize = 4096;
/// Node reads in flight at once after watch events.
const READ_CONCURRENCY: usize = 256;
/// Multi-read requests in flight at once during a full read.
const READ_REQUESTS_IN_FLIGHT: usize = 8;
/// Nodes and their data, and nodes whose ACL refuses this node.
type FullRead = (Vec<(String, Vec<u8>)>, Vec<String>);

/// Why a node that exists is not read.
const NO_AUTH: &str = "its ACL does not let this node read it (registry.zookeeper.digest)";

/// How often held members are checked against hysteresis.
const RELEASE_EVERY: Duration = Duration::from_millis(500);

/// Starts mirroring; the task ends when `stop` is set.
pub fn spawn(
    config: ZooKeeperConfig,
    digest: Option<String>,
    handle: RegistryHandle,
    stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let view = handle.view();
    let mirrored = view
        .registry
        .instances
        .values()
        .filter(|i| i.reg.mirrors.is_some())
        .map(|i| &**i);
    let tree = MirrorTree::resume(config.hysteresis, mirrored);
    let stats = &handle.stats().zookeeper;
    stats.enabled.store(true, Ordering::Relaxed);
    stats.stale.store(true, Ordering::Relaxed);
    stats
        .mirrored
        .store(tree.mirrored() as u64, Ordering::Relaxed);
    let roots = config.domains.iter().map(|d| domain_path(d)).collect();
    let source = Source {
        oneshot: config.watches == WatchMode::Oneshot,
        watch_failures: 0,
        config,
        digest,
        handle,
        tree,
        roots,
        log: Throttle::default(),
    };
    tokio::spawn(source.run(stop))
}

/// Removes every mirrored instance (no ZooKeeper source is configured
/// any more).
pub async fn forget_mirrored(handle: RegistryHandle) {
    let view = handle.view();
    let ids: Vec<String> = view
        .registry
        .instances
        .values()
        .filter(|i| i.reg.mirrors.is_some())
        .map(|i| i.id.to_string())
        .collect();
    if ids.is_empty() {
        return;
    }
    info!(
        instances = ids.len(),
        "no [registry.zookeeper]: removing the instances it mirrored"
    );
    handle
        .write_all(ids.into_iter().map(|id| Op::Unmirror { id }).collect())
        .await;
}

struct Source {
    config: ZooKeeperConfig,
    digest: Option<String>,
    handle: RegistryHandle,
    tree: MirrorTree,
    roots: Vec<String>,
    log: Throttle,
    /// The servers have no persistent watches: child and data watches.
    oneshot: bool,
    /// Sessions in a row whose persistent watches failed.
    watch_failures: u32,
}

/// Why a session ended without an error.
enum Ended {
    Stop,
    SessionLost,
    Reconnected,
}

impl Source {
    fn stats(&self) -> &SourceStats {
        &self.handle.stats().zookeeper
    }

    async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let mut backoff = Duration::from_millis(100);
        loop {
            if *stop.borrow() {
                return;
            }
            match self.session(&mut stop).await {
                Ok(Ended::Stop) => return,
                Ok(Ended::SessionLost) => {
                    warn!("zookeeper: session expired; reconnecting and reading everything again");
                    backoff = Duration::from_millis(100);
                }
                Ok(Ended::Reconnected) => {
                    info!("zookeeper: connection back; a new session reads everything again");
                    backoff = Duration::from_millis(10);
                }
                Err(e) => {
                    warn!(error = %e, servers = %self.config.connect_string(), "zookeeper: no session; serving the last state read")
                }
            }
            self.stats().stale.store(true, Ordering::Relaxed);
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = stop.changed() => return,
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }

    async fn connect(&self) -> Result<Client, zookeeper_client::Error> {
        let mut connector = Client::connector()
            .with_session_timeout(self.config.session_timeout())
            .with_connection_timeout(self.config.session_timeout() / 3);
        if let Some(d) = &self.digest {
            connector = connector.with_auth("digest", d.as_bytes());
        }
        connector.connect(&self.config.connect_string()).await
    }

    /// One session: watches, a full read, then events until the session
    /// or its connection is lost.
    async fn session(
        &mut self,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<Ended, zookeeper_client::Error> {
        let client = self.connect().await?;
        self.stats().sessions.fetch_add(1, Ordering::Relaxed);
        info!(session = ?client.session_id(), timeout_ms = client.session_timeout().as_millis() as u64, "zookeeper: in session");
        let mut states = client.state_watcher();
        let (tx, mut events) = mpsc::unbounded_channel();
        let mut forwarders = Vec::new();
        if !self.oneshot {
            match self.persistent_watches(&client, &tx, &mut forwarders).await {
                Ok(()) => self.watch_failures = 0,
                Err(e) if self.config.watches == WatchMode::Auto => {
                    // A server before 3.6 answers "unimplemented", or
                    // may just drop the connection: twice in a row with a
                    // session established, and persistent watches are
                    // given up for this server.
                    self.watch_failures += 1;
                    if !matches!(e, zookeeper_client::Error::Unimplemented)
                        && self.watch_failures < 2
                    {
                        return Err(e);
                    }
                    info!(error = %e, "zookeeper: the servers have no persistent watches (before 3.6); using child and data watches");
                    self.oneshot = true;
                }
                Err(e) => return Err(e),
            }
        }
        let mut watches = Watches::default();
        let _abort = AbortOnDrop(forwarders);
        let mut release = tokio::time::interval(RELEASE_EVERY);
        {
            let started = Instant::now();
            let (nodes, denied) = if self.oneshot {
                split_full_read(watches.read(&client, self.roots.clone()).await?)
            } else {
                self.read_all(&client).await?
            };
            for node in denied {
                self.skipped(&node, NO_AUTH);
            }
            let count = nodes.len();
            let read_ms = started.elapsed().as_millis() as u64;
            for (node, error) in self.tree.replace_all(nodes) {
                self.skipped(&node, &error.to_string());
            }
            let changes = self.tree.changes();
            let written = changes.len();
            self.write(changes).await;
            self.stats().nodes.store(count as u64, Ordering::Relaxed);
            self.stats().stale.store(false, Ordering::Relaxed);
            info!(
                nodes = count,
                written,
                read_ms,
                ms = started.elapsed().as_millis() as u64,
                "zookeeper: read in full"
            );
            loop {
                tokio::select! {
                    _ = stop.changed() => return Ok(Ended::Stop),
                    state = states.changed() => match state {
                        SessionState::Disconnected => {
                            self.stats().stale.store(true, Ordering::Relaxed);
                        }
                        SessionState::SyncConnected | SessionState::ConnectedReadOnly => {
                            // Events sent while away may be lost, and the
                            // watches may not be back: start afresh (this
                            // source holds no ephemeral nodes to lose).
                            return Ok(Ended::Reconnected);
                        }
                        s if s.is_terminated() => return Ok(Ended::SessionLost),
                        _ => {}
                    },
                    Some(first) = events.recv() => {
                        let mut batch = vec![first];
                        while let Ok(e) = events.try_recv() {
                            batch.push(e);
                        }
                        let updates = self.read_events(&client, batch).await?;
                        self.apply(updates).await;
                    }
                    Some(event) = watches.next(), if !watches.is_empty() => {
                        // Every watch that has fired meanwhile goes into
                        // the same registry write.
                        let mut updates = watches.follow(&client, event).await?;
                        while updates.len() < MAX_BATCH {
                            let Some(Some(event)) = watches.next().now_or_never() else {
                                break;
                            };
                            updates.extend(watches.follow(&client, event).await?);
                        }
                        self.apply(updates).await;
                    }
                    _ = release.tick(), if self.tree.leaving() > 0 => {
                        let view = self.handle.view();
                        let now = super::projection::now_ms();
                        let changes = self.tree.release(|id| {
                            view.registry
                                .instances
                                .get(id)
                                .is_none_or(|i| withdrawn_for_a_window(i, now, view.policy.window_ms))
                        });
                        self.write(changes).await;
                    }
                }
            }
        }
    }

    /// A persistent recursive watch on every root (ZooKeeper 3.6 and
    /// later), each forwarded into `tx`.
    async fn persistent_watches(
        &self,
        client: &Client,
        tx: &mpsc::UnboundedSender<WatchedEvent>,
        forwarders: &mut Vec<JoinHandle<()>>,
    ) -> Result<(), zookeeper_client::Error> {
        for root in &self.roots {
            let mut watcher = client
                .watch(root, AddWatchMode::PersistentRecursive)
                .await?;
            let tx = tx.clone();
            forwarders.push(tokio::spawn(async move {
                loop {
                    let event = watcher.changed().await;
                    if event.event_type == EventType::Session {
                        if event.session_state.is_terminated() {
                            return;
                        }
                        continue;
                    }
                    if tx.send(event).is_err() {
                        return;
                    }
                }
            }));
        }
        Ok(())
    }

    /// Every node under the roots with its data, breadth first: each
    /// level's data in multi-reads of many nodes, then the children of
    /// those that have any (a host record has none), several requests in
    /// flight.
    async fn read_all(&self, client: &Client) -> Result<FullRead, zookeeper_client::Error> {
        let mut out = Vec::new();
        let mut denied = Vec::new();
        let mut frontier: Vec<String> = self.roots.clone();
        while !frontier.is_empty() {
            let mut parents = Vec::new();
            for (path, result) in multi_read(client, &frontier, Read::Data).await? {
                match result {
                    MultiReadResult::Data { data, stat } => {
                        if stat.num_children > 0 {
                            parents.push(path.clone());
                        }
                        out.push((path, data));
                    }
                    MultiReadResult::Error {
                        err: zookeeper_client::Error::NoNode,
                    } => {}
                    MultiReadResult::Error {
                        err: zookeeper_client::Error::NoAuth,
                    } => denied.push(path),
                    MultiReadResult::Error { err } => return Err(err),
                    _ => {}
                }
            }
            frontier.clear();
            for (path, result) in multi_read(client, &parents, Read::Children).await? {
                match result {
                    MultiReadResult::Children { children } => {
                        frontier.extend(children.iter().map(|c| child_path(&path, c)))
                    }
                    MultiReadResult::Error {
                        err: zookeeper_client::Error::NoNode | zookeeper_client::Error::NoAuth,
                    } => {}
                    MultiReadResult::Error { err } => return Err(err),
                    _ => {}
                }
            }
        }
        Ok((out, denied))
    }

    /// What persistent-watch events mean, in order: created and changed
    /// nodes read again (all at once), deleted ones removed.
    async fn read_events(
        &mut self,
        client: &Client,
        batch: Vec<WatchedEvent>,
    ) -> Result<Vec<Update>, zookeeper_client::Error> {
        let read: Vec<_> = stream::iter(batch)
            .map(|event| {
                let client = client.clone();
                async move {
                    let data = match event.event_type {
                        EventType::NodeCreated | EventType::NodeDataChanged => {
                            Some(client.get_data(&event.path).await)
                        }
                        _ => None,
                    };
                    (event, data)
                }
            })
            .buffered(READ_CONCURRENCY)
            .collect()
            .await;
        let mut updates = Vec::new();
        for (event, data) in read {
            let path = event.path;
            match (event.event_type, data) {
                (_, Some(Ok((bytes, _)))) => updates.push(Update::Set(path, bytes)),
                (EventType::NodeDeleted, _) | (_, Some(Err(zookeeper_client::Error::NoNode))) => {
                    updates.push(Update::Removed(path))
                }
                (_, Some(Err(zookeeper_client::Error::NoAuth))) => {
                    updates.push(Update::Denied(path))
                }
                (_, Some(Err(e))) => return Err(e),
                _ => {}
            }
        }
        Ok(updates)
    }

    /// Applies what was read to the tree and writes what changed.
    async fn apply(&mut self, updates: Vec<Update>) {
        for update in updates {
            match update {
                Update::Set(path, bytes) => {
                    if let Err(e) = self.tree.set(&path, &bytes) {
                        self.skipped(&path, &e.to_string());
                    }
                }
                Update::Removed(path) => self.tree.remove(&path),
                Update::Denied(path) => {
                    self.tree.remove(&path);
                    self.skipped(&path, NO_AUTH);
                }
            }
        }
        let changes = self.tree.changes();
        self.write(changes).await;
    }

    /// Writes every change (submitted at once, so the writer takes them
    /// in large groups) and waits until all are durable.
    async fn write(&mut self, changes: Vec<Change>) {
        if changes.is_empty() {
            return;
        }
        let ops = changes
            .iter()
            .map(|change| match change {
                Change::Mirror { id, node, spec } => Op::Mirror {
                    id: id.clone(),
                    spec: spec.clone(),
                    node: node.clone(),
                },
                Change::Unmirror { id, .. } => Op::Unmirror { id: id.clone() },
            })
            .collect();
        let results = self.handle.write_all(ops).await;
        for (change, result) in changes.into_iter().zip(results) {
            match (change, result) {
                (_, Ok(_)) | (Change::Unmirror { .. }, Err(RegistryError::NotFound(_))) => {
                    self.stats().writes.fetch_add(1, Ordering::Relaxed);
                }
                (Change::Mirror { node, .. }, Err(e)) => {
                    self.tree.refused(&node);
                    self.skipped(&node, &e.to_string());
                }
                (Change::Unmirror { node, .. }, Err(e)) => {
                    warn!(%node, error = %e, "zookeeper: the registry refused a removal")
                }
            }
        }
        self.stats()
            .mirrored
            .store(self.tree.mirrored() as u64, Ordering::Relaxed);
        self.stats()
            .leaving
            .store(self.tree.leaving() as u64, Ordering::Relaxed);
    }

    fn skipped(&mut self, node: &str, why: &str) {
        self.stats().skipped.fetch_add(1, Ordering::Relaxed);
        if let Some(more) = self.log.allow() {
            warn!(%node, reason = why, unlogged_before = more, "zookeeper: record skipped");
        }
    }
}

/// A held member leaves the registry once it has been out of every
/// service for a whole window: until then its withdrawal still counts
/// against the service's budget, as a self-reported one does.
fn withdrawn_for_a_window(inst: &super::Instance, now: u64, window_ms: u64) -> bool {
    inst.service_keys().iter().all(|k| {
        inst.withdrawn
            .get(k)
            .is_some_and(|at| now >= at.saturating_add(window_ms))
    })
}

#[derive(Clone, Copy)]
enum Read {
    Data,
    Children,
}

/// Reads `paths` in multi-read requests (fewer per request for children
/// lists, which can be long), a few requests in flight; results in no
/// particular order, each with its path.
async fn multi_read(
    client: &Client,
    paths: &[String],
    read: Read,
) -> Result<Vec<(String, MultiReadResult)>, zookeeper_client::Error> {
    let per_request = match read {
        Read::Data => 256,
        Read::Children => 16,
    };
    let chunks: Vec<Vec<String>> = paths.chunks(per_request).map(<[_]>::to_vec).collect();
    let batches = bounded::each(chunks, READ_REQUESTS_IN_FLIGHT, |chunk| {
        let client = client.clone();
        async move {
            let mut reader = client.new_multi_reader();
            for path in &chunk {
                match read {
                    Read::Data => reader.add_get_data(path)?,
                    Read::Children => reader.add_get_children(path)?,
                }
            }
            let results = reader.commit().await?;
            Ok::<_, zookeeper_client::Error>(chunk.into_iter().zip(results).collect::<Vec<_>>())
        }
    })
    .await
    .map_err(|e| zookeeper_client::Error::UnexpectedError(e.to_string()))?;
    let mut out = Vec::with_capacity(paths.len());
    for batch in batches {
        out.extend(batch?);
    }
    Ok(out)
}

/// A full read from child and data watches, as the multi-read gives it.
fn split_full_read(updates: Vec<Update>) -> FullRead {
    let (mut nodes, mut denied) = (Vec::new(), Vec::new());
    for u in updates {
        match u {
            Update::Set(path, bytes) => nodes.push((path, bytes)),
            Update::Denied(path) => denied.push(path),
            Update::Removed(_) => {}
        }
    }
    (nodes, denied)
}

/// At most `BURST` log lines per `WINDOW`; says how many it held back.
#[derive(Default)]
struct Throttle {
    window: Option<Instant>,
    logged: u32,
    held: u64,
}

impl Throttle {
    const BURST: u32 = 10;
    const WINDOW: Duration = Duration::from_secs(10);

    fn allow(&mut self) -> Option<u64> {
        let now = Instant::now();
        if self
            .window
            .is_none_or(|w| now.duration_since(w) >= Self::WINDOW)
        {
            self.window = Some(now);
            self.logged = 0;
        }
        if self.logged < Self::BURST {
            self.logged += 1;
            Some(std::mem::take(&mut self.held))
        } else {
            self.held += 1;
            None
        }
    }
}

struct AbortOnDrop(Vec<JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_throttle_says_what_it_held_back() {
        let mut t = Throttle::default();
        for _ in 0..Throttle::BURST {
            assert_eq!(t.allow(), Some(0));
        }
        assert_eq!(t.allow(), None);
        assert_eq!(t.allow(), None);
        t.window = Some(Instant::now() - Throttle::WINDOW);
        assert_eq!(t.allow(), Some(2));
    }
}
