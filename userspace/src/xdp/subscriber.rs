//! The kernel table as a subscriber to the zone store's change feed, and
//! the one owner of the loaded program after start-up.
//!
//! A task takes every commit from the feed, merges a burst of them into
//! one update, compiles it on a blocking thread (a whole-table compile of
//! a large zone takes seconds and must not hold an async worker, let
//! alone a writer) and installs it as one table generation. Requests from
//! elsewhere (counters, the UDP payload size on reload) are messages to
//! that task, so nothing else ever touches the maps.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tracing::{error, info, warn};

use super::{Counters, FastPath, XdpError};
use crate::answers::compile::{compile_all, compile_diffs, table_tag};
use crate::answers::follow;
use crate::answers::plan::{plan, Update};
use crate::wire::ServerEdns;
use crate::zone::{Snapshot, Subscription};

/// How often the kernel's wall clock (cookie timestamps) is re-read.
const CLOCK_REFRESH: std::time::Duration = std::time::Duration::from_secs(1);

/// How often the overlay is cleaned up while a change leaves it busy:
/// often enough that it is folded into the base soon after a grace
/// period (several milliseconds) passes.
const OVERLAY_SETTLE: std::time::Duration = std::time::Duration::from_millis(5);

/// Brings `fp`'s table, and the compiled table it keeps (the hot path's),
/// in line with `snapshot` by `update`.
fn apply(fp: &mut FastPath, snapshot: &Snapshot, update: &Update) -> Result<(), XdpError> {
    let result = write(fp, snapshot, update);
    // The compiled table took the change whether or not the kernel did.
    fp.installed().settle(snapshot.version());
    result
}

fn write(fp: &mut FastPath, snapshot: &Snapshot, update: &Update) -> Result<(), XdpError> {
    // After a failed update the kernel's contents are not known: only a
    // whole table makes them so again.
    let update = match update {
        Update::Delta(_) if fp.table_unknown() || !fp.healthy() => &Update::Rebuild,
        other => other,
    };
    match update {
        Update::Delta(diffs) if diffs.is_empty() => Ok(()),
        Update::Delta(diffs) => {
            let delta = compile_diffs(snapshot, diffs, &**fp.installed());
            info!(
                version = snapshot.version(),
                upserts = delta.upsert.len(),
                deletes = delta.delete.len(),
                "XDP table updated in place"
            );
            fp.apply_tagged(&delta, table_tag(snapshot))
        }
        Update::Rebuild => {
            let (table, skipped, dependents) = compile_all(snapshot);
            let entries = table.len();
            fp.installed().set_dependents(dependents);
            fp.install_tagged(table, table_tag(snapshot))?;
            // The compiled table is kept packed; the map it came in is gone.
            crate::memory::release_freed();
            if fp.entries_left_out() > 0 {
                warn!(
                    left_out = fp.entries_left_out(),
                    "XDP tables full: some names are answered by the fallback only; raise [xdp] capacity"
                );
            }
            info!(
                version = snapshot.version(),
                entries,
                ?skipped,
                generation = fp.generation(),
                "XDP table generation installed"
            );
            Ok(())
        }
    }
}

enum Request {
    Counters(oneshot::Sender<Result<Counters, XdpError>>),
    State(usize, oneshot::Sender<Result<KernelState, XdpError>>),
    Edns(Box<ServerEdns>),
    Destinations(Option<Vec<std::net::IpAddr>>),
    Tap([u32; xdpdns_common::tap::kind::COUNT]),
    SelfCheck(Vec<u8>, oneshot::Sender<Result<SelfCheck, XdpError>>),
}

/// A frame run through the attached program and the live table
/// (BPF_PROG_TEST_RUN), and where the program is attached.
#[derive(Clone, Debug)]
pub struct SelfCheck {
    /// XDP_TX (3), XDP_PASS (2), ...
    pub action: u32,
    /// The frame as the program left it.
    pub frame: Vec<u8>,
    /// The kernel's id of the program.
    pub program_id: u32,
    /// The interfaces it was attached to.
    pub interfaces: Vec<String>,
}

/// The kernel path as `/metrics` and `xdpdns ctl` report it.
#[derive(Clone, Debug)]
pub struct KernelState {
    pub counters: Counters,
    pub generation: u32,
    /// (name, type) entries in the table.
    pub entries: usize,
    /// Kernel memory of the answer maps.
    pub bytes: u64,
    /// (interface, attach mode).
    pub attached: Vec<(String, &'static str)>,
    pub left_out: u64,
    pub healthy: bool,
    /// Answers per zone id (index = id; see `zone::ids`).
    pub zone_queries: Vec<u64>,
}

fn state(fp: &FastPath, zone_ids: usize) -> Result<KernelState, XdpError> {
    Ok(KernelState {
        zone_queries: fp.zone_queries(zone_ids + 1)?,
        counters: fp.counters()?,
        generation: fp.generation(),
        entries: fp.entries(),
        bytes: fp.table_memory().iter().map(|(_, b)| b).sum(),
        attached: fp.attached().to_vec(),
        left_out: fp.entries_left_out(),
        healthy: fp.healthy(),
    })
}

/// How the rest of the server talks to the kernel table's owner.
#[derive(Clone)]
pub struct KernelTable {
    tx: mpsc::Sender<Request>,
}

/// A handle that does not keep the program attached: the stop detaches
/// it when the last [`KernelTable`] goes, whoever else still looks.
#[derive(Clone)]
pub struct WeakKernelTable {
    tx: mpsc::WeakSender<Request>,
}

impl WeakKernelTable {
    pub fn upgrade(&self) -> Option<KernelTable> {
        Some(KernelTable {
            tx: self.tx.upgrade()?,
        })
    }
}

impl KernelTable {
    pub fn downgrade(&self) -> WeakKernelTable {
        WeakKernelTable {
            tx: self.tx.downgrade(),
        }
    }

    /// Starts the subscriber. `fp` holds the table compiled from
    /// `feed`'s starting snapshot `first` (when it was adopted as pinned,
    /// the subscriber first compiles `first` to know its entries). The
    /// program is detached when the task ends (when every handle is
    /// dropped, or the store is), unless it is pinned.
    pub fn start(
        fp: FastPath,
        first: Arc<Snapshot>,
        feed: Subscription,
    ) -> (KernelTable, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(16);
        let task = tokio::spawn(run(fp, first, feed, rx));
        (KernelTable { tx }, task)
    }

    pub async fn counters(&self) -> Option<Result<Counters, XdpError>> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(Request::Counters(tx)).await.ok()?;
        rx.await.ok()
    }

    /// The kernel's state, with its answers for zone ids `1..=zone_ids`.
    pub async fn state(&self, zone_ids: usize) -> Option<Result<KernelState, XdpError>> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(Request::State(zone_ids, tx)).await.ok()?;
        rx.await.ok()
    }

    /// The fallback's EDNS settings (payload size, NSID, cookie
    /// secrets), which the kernel must answer with too (set on reload).
    pub async fn set_edns(&self, edns: ServerEdns) {
        let _ = self.tx.send(Request::Edns(Box::new(edns))).await;
    }

    /// Runs `frame` through the program and the live table.
    pub async fn self_check(&self, frame: Vec<u8>) -> Option<Result<SelfCheck, XdpError>> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(Request::SelfCheck(frame, tx)).await.ok()?;
        rx.await.ok()
    }

    /// The destination addresses answered (`None`: any), on reload.
    pub async fn set_destinations(&self, addresses: Option<Vec<std::net::IpAddr>>) {
        let _ = self.tx.send(Request::Destinations(addresses)).await;
    }

    /// The kernel's dnstap sampling (one in N per kind), on reload.
    pub async fn set_tap(&self, every: [u32; xdpdns_common::tap::kind::COUNT]) {
        let _ = self.tx.send(Request::Tap(every)).await;
    }
}

/// Learns the entries of a kernel table adopted as pinned (compiled from
/// `first`, the snapshot whose tag it carries), or rebuilds it if that
/// fails. The compiled table is `first`'s then either way.
fn learn_adopted(fp: &mut FastPath, first: &Snapshot) {
    learn(fp, first);
    fp.installed().settle(first.version());
}

fn learn(fp: &mut FastPath, first: &Snapshot) {
    let began = std::time::Instant::now();
    let (table, _, dependents) = compile_all(first);
    let entries = table.len();
    fp.installed().set_dependents(dependents);
    if let Err(e) = fp.adopt_table(&table) {
        warn!("XDP: reading the adopted table back failed ({e}); rebuilding it");
        if let Err(e) = fp.install_tagged(table, table_tag(first)) {
            error!("XDP table rebuild failed ({e}); the kernel passes every query to the fallback until the next update succeeds");
        }
        return;
    }
    drop(table);
    crate::memory::release_freed();
    info!(
        entries,
        ms = began.elapsed().as_millis() as u64,
        "XDP: the adopted table's entries are known; changes apply from here"
    );
}

async fn run(
    fp: FastPath,
    first: Arc<Snapshot>,
    mut feed: Subscription,
    mut requests: mpsc::Receiver<Request>,
) {
    // A pinned program outlives the process; if a compile panics, the
    // kernel table is left as it was, so it is unpinned (detached) and the
    // compiled table goes on following the feed for the hot path alone.
    let pins = fp.pins().cloned();
    let table = fp.installed().clone();
    let abandon = |why: String, at: Arc<Snapshot>, feed: Subscription| {
        error!("{why}; the fast path is detached, the fallback answers everything");
        if let Some(p) = &pins {
            if let Err(e) = p.clear() {
                error!(pin_dir = %p.path().display(), "XDP: cannot unpin: {e}");
            }
        }
        follow::follow(table.clone(), at, feed)
    };
    let mut fp = Some(fp);
    if fp.as_ref().is_some_and(FastPath::table_unknown) {
        let mut owned = fp.take().expect("owned");
        let at = first.clone();
        let learned = tokio::task::spawn_blocking(move || {
            learn_adopted(&mut owned, &first);
            owned
        })
        .await;
        match learned {
            Ok(owned) => fp = Some(owned),
            Err(e) => {
                drop(requests);
                let why = format!("XDP: compiling the adopted table panicked ({e})");
                return abandon(why, at, feed).await;
            }
        }
    } else {
        drop(first);
    }
    let mut clock = tokio::time::interval(CLOCK_REFRESH);
    clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut settle = tokio::time::interval(OVERLAY_SETTLE);
    settle.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let busy = fp.as_ref().is_some_and(FastPath::overlay_busy);
        tokio::select! {
            _ = settle.tick(), if busy => {
                if let Some(fp) = fp.as_mut() {
                    if let Err(e) = fp.settle_overlay() {
                        error!("XDP: cleaning up after a change failed ({e}); the kernel passes every query to the fallback until the next update succeeds");
                        fp.disable();
                    }
                }
            }
            _ = clock.tick() => {
                if let Some(fp) = fp.as_mut() {
                    if let Err(e) = fp.refresh_clock() {
                        warn!("XDP: cannot refresh the cookie clock: {e}");
                    }
                }
            }
            item = feed.next() => {
                let Some(first) = item else { break };
                let mut burst = vec![first];
                while let Some(more) = feed.try_next() {
                    burst.push(more);
                }
                let snapshot: Arc<Snapshot> = burst.last().expect("one item").snapshot().clone();
                let update = plan(&burst);
                drop(burst);
                let mut owned = fp.take().expect("owned between updates");
                let at = snapshot.clone();
                let done = tokio::task::spawn_blocking(move || {
                    let result = apply(&mut owned, &snapshot, &update);
                    (owned, result)
                })
                .await;
                match done {
                    Ok((owned, result)) => {
                        if let Err(e) = result {
                            error!("XDP table update failed ({e}); the kernel passes every query to the fallback until the next update succeeds");
                        }
                        fp = Some(owned);
                    }
                    Err(e) => {
                        drop(requests);
                        return abandon(format!("XDP table compile panicked ({e})"), at, feed).await;
                    }
                }
            }
            req = requests.recv() => {
                let Some(req) = req else { break };
                let fp = fp.as_mut().expect("owned between updates");
                match req {
                    Request::Counters(reply) => {
                        let _ = reply.send(fp.counters());
                    }
                    Request::State(zone_ids, reply) => {
                        let _ = reply.send(state(fp, zone_ids));
                    }
                    Request::Edns(edns) => {
                        if let Err(e) = fp.set_edns(&edns) {
                            warn!("XDP: cannot set the EDNS settings: {e}");
                        }
                    }
                    Request::SelfCheck(frame, reply) => {
                        let result = (|| {
                            let run = crate::xdp::sys::test_run(fp.program_fd(), &frame, 1)
                                .map_err(XdpError::TestRun)?;
                            Ok(SelfCheck {
                                action: run.action,
                                frame: run.frame,
                                program_id: fp.program_id()?,
                                interfaces: fp.attached().iter().map(|(i, _)| i.clone()).collect(),
                            })
                        })();
                        let _ = reply.send(result);
                    }
                    Request::Destinations(addresses) => {
                        if let Err(e) = fp.set_destinations(addresses.as_deref()) {
                            warn!("XDP: cannot set the destination addresses: {e}");
                        }
                    }
                    Request::Tap(every) => {
                        if let Err(e) = fp.set_tap(every) {
                            warn!("XDP: cannot set the dnstap sampling: {e}");
                        }
                    }
                }
            }
        }
    }
    if let Some(fp) = fp {
        if let Ok(c) = fp.counters() {
            info!("xdp counters {c}");
        }
        let pinned = fp.pin_dir().map(|p| p.display().to_string());
        drop(fp);
        match pinned {
            Some(dir) => info!(pin_dir = %dir, "XDP program left attached and answering (pinned)"),
            None => info!("XDP program detached"),
        }
    }
}
