//! The registry's local backend (the embedded default): one writer task
//! owns the state and the journal. API writes arrive as [`Op`]s; the
//! writer turns a burst of them into entries, journals them with one
//! `fdatasync` (group commit), answers every caller, and publishes the
//! regenerated records to the zone store (one new serial per changed
//! zone). What follows a publish (IXFR journal, NOTIFY, the kernel table)
//! hangs off the store's change feed, not off this task. Lease expiry and
//! hysteresis run on the same task at the deadlines the state reports.
//!
//! Publishing is adaptive: a change that finds the writer idle is
//! published at once; what arrives while the writer is busy (a journal
//! sync, a publish) is taken as one group and published together, so
//! latency is low at low rates and throughput holds at high ones.
//! `batch_delay` optionally spaces publishes further apart.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::{error, info, warn};

use super::journal::{Batch, Journal, JournalError};
use super::model::Limits;
use super::projection::{group_after, publish_recent, sleep_until, Projection, Reply, Serials};
use super::state::Entry;
use super::{HealthPolicy, Naming};
use crate::zone::{ZoneDiff, ZoneStore};

pub use super::projection::{now_ms, Op, RegistryHandle, Started, Stats, View, WriterError};

/// Recovers the registry from `data_dir`, publishes its zones into
/// `store` (so names are served before anything heartbeats) and starts
/// the writer.
pub fn start(
    data_dir: &Path,
    naming: Naming,
    policy: HealthPolicy,
    limits: Limits,
    batch_delay: Duration,
    store: Arc<ZoneStore>,
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
        .filter(|i| i.expires_at.is_finite())
        .map(|i| Entry::Renew {
            id: i.id.clone(),
            expires_at: now + i.expires_at.get().saturating_sub(rec.last_ts),
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
    // The instances put last first: a crash may have left them out of
    // the zones served from their images, and deriving every instance
    // (below) takes seconds at a million.
    let ahead = publish_recent(&naming, &registry, &store, &rec.recent, serial_floor);
    let proj = Projection::new(registry, naming, policy, limits, batch_delay, store);
    let (tx, rx) = mpsc::channel(4096);
    proj.stats
        .journal_bytes
        .store(journal.bytes(), Ordering::Relaxed);
    let handle = proj.handle(tx);
    let mut writer = Writer {
        proj,
        journal,
        serial_file,
        serial_floor,
        serial_reserved: None,
        compacting: None,
    };
    writer.published(&ahead);
    // (Its serials follow the zones' own, past the floor already.)
    let diffs = writer.proj.publish_all(Serials::Policy {
        floor: writer.serial_floor,
    });
    writer.published(&diffs);
    let recovered_instances = writer.proj.registry.instances.len();
    // The writer runs on a thread of its own (with its own small runtime
    // for its channels and timers): its fdatasyncs and record derivation
    // never occupy a thread that answers DNS.
    let task = spawn_writer("registry-writer", move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(JournalError::Writer)?;
        rt.block_on(writer.run(rx, stop))?;
        Ok(())
    })
    .map_err(JournalError::Writer)?;
    Ok(Started {
        handle,
        task,
        recovered_instances,
    })
}

/// Runs `body` on a thread named `name`; the task ends with its result.
pub(super) fn spawn_writer(
    name: &str,
    body: impl FnOnce() -> Result<(), WriterError> + Send + 'static,
) -> std::io::Result<tokio::task::JoinHandle<Result<(), WriterError>>> {
    let (done_tx, done_rx) = oneshot::channel();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _ = done_tx.send(body());
        })?;
    Ok(tokio::spawn(async move {
        done_rx.await.unwrap_or_else(|_| {
            Err(WriterError::Journal(JournalError::Writer(
                std::io::Error::other("the registry writer stopped unexpectedly"),
            )))
        })
    }))
}

struct Writer {
    proj: Projection,
    journal: Journal,
    serial_file: PathBuf,
    /// Past every serial published before a restart.
    serial_floor: Option<u32>,
    /// What the serial file holds now.
    serial_reserved: Option<u32>,
    /// The snapshot being written beside the writer, if any.
    compacting: Option<std::thread::JoinHandle<Result<u64, JournalError>>>,
}

/// Serials reserved ahead in the serial file (see `remember_serial`).
const SERIAL_RESERVATION: u32 = 1024;

impl Writer {
    async fn run(
        mut self,
        mut rx: mpsc::Receiver<(Op, Reply)>,
        mut stop: watch::Receiver<bool>,
    ) -> Result<(), JournalError> {
        loop {
            if self.proj.publish_at.is_some_and(|t| t <= Instant::now()) {
                self.publish();
            }
            let now = now_ms();
            let tick_at = self
                .proj
                .next_deadline(now)
                .map(|t| Instant::now() + Duration::from_millis(t.saturating_sub(now)));
            let wake = [tick_at, self.proj.publish_at].into_iter().flatten().min();
            tokio::select! {
                first = rx.recv() => {
                    let Some(first) = first else { break };
                    let group = group_after(first, &mut rx);
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
        if self.proj.publish_at.is_some() {
            self.publish();
        }
        // A compaction in flight is finished, not left half-written.
        self.join_compaction();
        // The zeros past the records go at a stop (see `Journal::trim`).
        self.journal.trim()?;
        Ok(())
    }

    fn commit_group(&mut self, group: Vec<(Op, Reply)>) -> Result<(), JournalError> {
        let now = now_ms();
        let mut entries = Vec::new();
        let mut replies = Vec::new();
        for (op, reply) in group {
            if let Op::Heartbeat { id } = &op {
                match self.proj.renew(id, now) {
                    Ok((entry, inst)) => {
                        entries.push(entry);
                        replies.push((reply, Ok(Some(inst))));
                    }
                    Err(e) => replies.push((reply, Err(e))),
                }
                continue;
            }
            match self.proj.entry_for(op, now) {
                Ok(entry) => {
                    self.proj.apply(&entry);
                    let result = match &entry {
                        // As applied, shared with the registry.
                        Entry::Put { instance: i } => {
                            self.proj.registry.instances.get(&i.id).cloned()
                        }
                        _ => None,
                    };
                    entries.push(entry);
                    replies.push((reply, Ok(result)));
                }
                Err(e) => replies.push((reply, Err(e))),
            }
        }
        if !entries.is_empty() {
            // Renewals move leases in place: readers already see them, and
            // no record changes.
            let renewals_only = entries.iter().all(|e| matches!(e, Entry::Renew { .. }));
            // On failure the replies are dropped unsent: callers see
            // `Unavailable`, and nothing unsynced is acknowledged.
            self.durable(Batch { ts: now, entries })?;
            if !renewals_only {
                self.proj.schedule_publish();
                self.proj.refresh_view();
            }
        }
        for (reply, result) in replies {
            let _ = reply.send(result);
        }
        Ok(())
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
        self.compaction_finished();
        if self.journal.wants_compaction() && self.compacting.is_none() {
            self.start_compaction(batch.ts)?;
        }
        self.proj
            .stats
            .journal_bytes
            .store(self.journal.bytes(), Ordering::Relaxed);
        Ok(())
    }

    /// Sets the journal aside and snapshots the registry as it stands on
    /// a thread of its own (a clone of the persistent map costs nothing),
    /// so writes go on meanwhile.
    fn start_compaction(&mut self, ts: u64) -> Result<(), JournalError> {
        let Some(compaction) = self.journal.rotate()? else {
            return Ok(());
        };
        let registry = self.proj.registry.clone();
        let thread = std::thread::Builder::new()
            .name("registry-compaction".into())
            .spawn(move || {
                // Answers and acknowledgements come first.
                crate::background::lower_priority();
                compaction.run(&registry, ts)
            })
            .map_err(JournalError::Writer)?;
        self.compacting = Some(thread);
        Ok(())
    }

    /// Collects a finished compaction. One that failed leaves the journal
    /// set aside, which a start replays, and none is started again until
    /// a restart finishes it (said once, as an error).
    fn compaction_finished(&mut self) {
        if !self.compacting.as_ref().is_some_and(|t| t.is_finished()) {
            return;
        }
        self.join_compaction();
    }

    fn join_compaction(&mut self) {
        let Some(thread) = self.compacting.take() else {
            return;
        };
        match thread.join() {
            Ok(Ok(bytes)) => self.journal.compacted(bytes),
            Ok(Err(e)) => error!("registry journal compaction failed; the journal grows until a restart compacts it: {e}"),
            Err(_) => error!("registry journal compaction panicked; the journal grows until a restart compacts it"),
        }
    }

    fn tick(&mut self) -> Result<(), JournalError> {
        let now = now_ms();
        let entries = self.proj.tick(now);
        if entries.is_empty() {
            return Ok(());
        }
        for e in &entries {
            log_tick_entry(&self.proj, e);
            self.proj.apply(e);
        }
        self.durable(Batch { ts: now, entries })?;
        self.proj.refresh_view();
        self.proj.schedule_publish();
        Ok(())
    }

    fn publish(&mut self) {
        let diffs = self.proj.publish(Serials::Policy { floor: None });
        self.published(&diffs);
    }

    fn published(&mut self, diffs: &[ZoneDiff]) {
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
        // The rename is made durable too (the directory synced): a lost
        // one would bring back an older floor, and serials already
        // published could be reused after a crash.
        let ok = crate::durable::replace_with(&self.serial_file, 0o644, |w| {
            w.write_all(reserve.to_string().as_bytes())
        });
        match ok {
            Ok(()) => self.serial_reserved = Some(reserve),
            Err(e) => {
                warn!(file = %self.serial_file.display(), "cannot record the serial reservation: {e}")
            }
        }
    }
}

/// Logs what a clock-driven change does (and counts lease expiries).
pub(super) fn log_tick_entry(proj: &Projection, e: &Entry) {
    match e {
        Entry::Delete { id, reason } => {
            if *reason == super::state::RemovalReason::LeaseExpired {
                proj.stats.lease_expiries.fetch_add(1, Ordering::Relaxed);
            }
            info!(instance = %id, ?reason, "instance removed")
        }
        Entry::Put { instance } => {
            info!(instance = %instance.id, withdrawn = ?instance.withdrawn.keys().collect::<Vec<_>>(), "self-reported down: withdrawn from service")
        }
        _ => {}
    }
}
