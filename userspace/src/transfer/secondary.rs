//! Secondary zones: reading an incoming AXFR/IXFR (pure), the SOA
//! refresh/retry/expire timers (pure), and the tokio task that keeps each
//! zone in step with its primaries. A transferred zone goes through the
//! same store, journal and XDP sync as any other zone.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hickory_proto::rr::{LowerName, Name, RecordType};
use tokio::sync::{mpsc, watch, Semaphore};
use tracing::{info, warn};

use super::client::{self, ClientError, XfrKind};
pub use super::secondary_timers::{schedule, Schedule, Timers};
use super::tsig::TSigner;
pub use super::xfr_reader::{XfrError, XfrOutcome, XfrReader};
use crate::clock::unix_secs;
use crate::zone::serial::is_newer;
use crate::zone::{Change, LoadLog, TransferOutcome, Zone, ZoneStore};
use std::net::SocketAddr;

/// One secondary zone's settings.
#[derive(Clone)]
pub struct SecondaryZone {
    pub zone: Name,
    pub primaries: Vec<SocketAddr>,
    pub key: Option<TSigner>,
}

pub struct Secondaries {
    pub store: Arc<ZoneStore>,
    /// Where the time of each zone's last good refresh is kept.
    pub state_dir: Option<PathBuf>,
    pub timeout: Duration,
    /// Transfers in at once, over all zones (`transfer.max_transfers_in`).
    pub max_transfers: usize,
    /// Records one transfer may carry (`transfer.max_transfer_in_records`).
    pub max_records: usize,
    /// Where each attempt's outcome is recorded.
    pub log: Arc<LoadLog>,
}

/// The secondary zones being kept in step, one task each: those of the
/// configuration, and those a followed catalog adds and removes at
/// runtime. Accepted NOTIFYs reach the zone's task through it.
pub struct SecondarySet {
    shared: Secondaries,
    transfers: Arc<Semaphore>,
    runtime: tokio::runtime::Handle,
    stop: watch::Receiver<bool>,
    running: Mutex<HashMap<LowerName, Running>>,
}

struct Running {
    check: mpsc::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl SecondarySet {
    /// An empty set whose tasks run on the current tokio runtime and end
    /// when `stop` turns true.
    pub fn new(shared: Secondaries, stop: watch::Receiver<bool>) -> Arc<SecondarySet> {
        if let Some(d) = &shared.state_dir {
            let _ = std::fs::create_dir_all(d);
        }
        Arc::new(SecondarySet {
            transfers: Arc::new(Semaphore::new(shared.max_transfers.max(1))),
            shared,
            runtime: tokio::runtime::Handle::current(),
            stop,
            running: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<LowerName, Running>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts keeping `zone` in step (restarting its task if it ran).
    pub fn add(&self, zone: SecondaryZone) {
        let key = LowerName::new(&zone.zone);
        let (check, checks) = mpsc::channel(1);
        let task = ZoneTask {
            zone,
            store: self.shared.store.clone(),
            state_dir: self.shared.state_dir.clone(),
            timeout: self.shared.timeout,
            transfers: self.transfers.clone(),
            max_records: self.shared.max_records,
            log: self.shared.log.clone(),
        };
        let task = self.runtime.spawn(task.run(checks, self.stop.clone()));
        if let Some(old) = self.lock().insert(key, Running { check, task }) {
            old.task.abort();
        }
    }

    /// Stops keeping `zone` in step and forgets when it was last
    /// refreshed (what it served stays in the store: the caller removes
    /// it). The task is aborted between awaits, so a transfer is either
    /// committed whole or not at all.
    pub fn remove(&self, zone: &Name) -> bool {
        let Some(running) = self.lock().remove(&LowerName::new(zone)) else {
            return false;
        };
        running.task.abort();
        if let Some(f) = ok_file(self.shared.state_dir.as_deref(), zone) {
            let _ = std::fs::remove_file(f);
        }
        true
    }

    pub fn contains(&self, zone: &LowerName) -> bool {
        self.lock().contains_key(zone)
    }
}

impl crate::router::NotifySink for SecondarySet {
    fn notified(&self, zone: &Name) {
        if let Some(z) = self.lock().get(&LowerName::new(zone)) {
            let _ = z.check.try_send(()); // one pending check is enough
        }
    }
}

/// Hands NOTIFYs to a shared set (the router keeps a boxed sink).
pub struct NotifyTo(pub Arc<SecondarySet>);

impl crate::router::NotifySink for NotifyTo {
    fn notified(&self, zone: &Name) {
        self.0.notified(zone);
    }
}

/// Where the time of a zone's last good refresh is kept.
fn ok_file(state_dir: Option<&Path>, zone: &Name) -> Option<PathBuf> {
    let name = zone.to_lowercase().to_ascii();
    state_dir.map(|d| d.join(format!("{name}refreshed")))
}

fn last_refresh(state_dir: Option<&Path>, zone: &Name) -> Option<u64> {
    ok_file(state_dir, zone)
        .and_then(|f| std::fs::read_to_string(f).ok())
        .and_then(|s| s.trim().parse().ok())
}

/// At start-up, before anything is served: a copy restored from disk whose
/// last good refresh is older than its SOA expire is expired at once.
pub fn expire_stale_copies(store: &ZoneStore, zones: &[SecondaryZone], state_dir: Option<&Path>) {
    let snapshot = store.snapshot();
    for z in zones {
        let Some(copy) = snapshot.zone(&LowerName::new(&z.zone)) else {
            continue;
        };
        let since = last_refresh(state_dir, &z.zone)
            .map(|t| Duration::from_secs(unix_secs().saturating_sub(t)));
        let soa = copy.soa().map(|(s, _)| s.clone());
        if schedule(soa.as_ref(), false, since).expired {
            warn!(zone = %z.zone, "restored secondary copy is past its SOA expire: SERVFAIL until a primary answers");
            store.set_expired(&z.zone, true);
        }
    }
}

struct ZoneTask {
    zone: SecondaryZone,
    store: Arc<ZoneStore>,
    state_dir: Option<PathBuf>,
    timeout: Duration,
    /// Shared by every zone: transfers in at once.
    transfers: Arc<Semaphore>,
    max_records: usize,
    log: Arc<LoadLog>,
}

impl ZoneTask {
    fn current(&self) -> Option<Arc<Zone>> {
        self.store
            .as_ref()
            .snapshot()
            .zone(&LowerName::new(&self.zone.zone))
            .cloned()
    }

    fn ok_file(&self) -> Option<PathBuf> {
        ok_file(self.state_dir.as_deref(), &self.zone.zone)
    }

    async fn run(self, mut notified: mpsc::Receiver<()>, mut stop: watch::Receiver<bool>) {
        let zone = &self.zone.zone;
        // A copy recovered from disk is as fresh as its last good refresh.
        let mut timers = Timers::new(
            last_refresh(self.state_dir.as_deref(), zone),
            self.current().is_some_and(|z| z.is_expired()),
        );
        let mut next = Duration::ZERO;
        let mut last_good = last_refresh(self.state_dir.as_deref(), zone);
        loop {
            tokio::select! {
                _ = tokio::time::sleep(next) => {}
                Some(()) = notified.recv() => {}
                _ = stop.changed() => return,
            }
            let result = self.refresh().await;
            let now = unix_secs();
            let serial = self.current().and_then(|z| z.serial());
            match &result {
                Ok(outcome) => {
                    if *outcome != TransferOutcome::UpToDate {
                        info!(%zone, serial, "secondary zone updated");
                    }
                    if let Some(f) = self.ok_file() {
                        let _ = std::fs::write(f, now.to_string());
                    }
                    last_good = Some(now);
                    self.log.count_transfer(zone, *outcome);
                    let what = format!("{} at serial {}", outcome.label(), serial.unwrap_or(0));
                    self.log.record(zone, now, Ok(what));
                }
                Err(e) => {
                    warn!(%zone, "secondary refresh failed: {e}");
                    self.log.count_transfer(zone, TransferOutcome::Failed);
                    self.log.record(zone, now, Err(e.to_string()));
                }
            }
            let current = self.current();
            let soa = current
                .as_ref()
                .and_then(|z| z.soa().map(|(s, _)| s.clone()));
            if let Some(soa) = &soa {
                let expire = u64::from(soa.expire.max(0) as u32);
                self.log.set_expiry(zone, last_good.map(|t| t + expire));
            }
            let step = timers.refreshed(result.is_ok(), soa.as_ref(), current.is_some(), now);
            if let Some(expired) = step.expiry {
                self.store.as_ref().set_expired(zone, expired);
                if expired {
                    warn!(%zone, "secondary zone expired: answering SERVFAIL until a primary answers");
                } else {
                    info!(%zone, "secondary zone is fresh again");
                }
            }
            next = step.check_in;
        }
    }

    /// One SOA check and, when the primary is ahead, one transfer; tries
    /// the primaries in order.
    async fn refresh(&self) -> Result<TransferOutcome, ClientError> {
        let mut last_err = None;
        for &primary in &self.zone.primaries {
            match self.refresh_from(primary).await {
                Ok(changed) => return Ok(changed),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.expect("a secondary zone has at least one primary"))
    }

    async fn refresh_from(
        &self,
        primary: std::net::SocketAddr,
    ) -> Result<TransferOutcome, ClientError> {
        let zone = &self.zone.zone;
        let key = self.zone.key.as_ref();
        let current = self.current();
        let ours = current.as_ref().and_then(|z| z.soa_record());
        let theirs = client::soa_serial(primary, zone, key, self.timeout).await?;
        if let Some(serial) = current.as_ref().and_then(|z| z.serial()) {
            if !is_newer(theirs, serial) {
                return Ok(TransferOutcome::UpToDate);
            }
        }
        let kind = if ours.is_some() {
            XfrKind::Ixfr
        } else {
            XfrKind::Axfr
        };
        // The SOA check above is cheap; only the transfer waits its turn.
        let _turn = self.transfers.acquire().await.expect("never closed");
        let (timeout, max) = (self.timeout, self.max_records);
        let outcome =
            match client::transfer(primary, zone, kind, ours.clone(), key, timeout, max).await {
                // Some primaries refuse IXFR outright; fall back to AXFR.
                Err(ClientError::Rcode(_, _)) if kind == XfrKind::Ixfr => {
                    client::transfer(primary, zone, XfrKind::Axfr, None, key, timeout, max).await?
                }
                other => other?,
            };
        self.apply(primary, outcome)
    }

    fn apply(
        &self,
        primary: std::net::SocketAddr,
        outcome: XfrOutcome,
    ) -> Result<TransferOutcome, ClientError> {
        let zone = &self.zone.zone;
        let store = self.store.as_ref();
        match outcome {
            XfrOutcome::UpToDate(_) => Ok(TransferOutcome::UpToDate),
            XfrOutcome::Full(records) => {
                let count = records.len();
                let z =
                    Zone::from_records(zone, records).map_err(|e| ClientError::Zone(primary, e))?;
                store.install_transferred(z);
                info!(%zone, %primary, records = count, "AXFR received");
                Ok(TransferOutcome::Axfr)
            }
            XfrOutcome::Incremental(diffs) => {
                // Applied whole, in one commit, or not at all.
                let steps = diffs
                    .iter()
                    .map(|d| {
                        let changes: Vec<Change> = d
                            .removed
                            .iter()
                            .filter(|r| r.record_type() != RecordType::SOA)
                            .map(|r| Change::Remove(r.clone()))
                            .chain(
                                d.added
                                    .iter()
                                    .filter(|r| r.record_type() != RecordType::SOA)
                                    .map(|r| Change::Add(r.clone())),
                            )
                            .collect();
                        let serial = d
                            .new_serial
                            .ok_or(ClientError::Transfer(primary, XfrError::DiffWithoutSoa))?;
                        Ok((changes, serial))
                    })
                    .collect::<Result<Vec<_>, ClientError>>()?;
                let applied = store
                    .apply_transferred(zone, &steps)
                    .map_err(|e| ClientError::Store(primary, e))?;
                info!(%zone, %primary, diffs = applied.len(), "IXFR received");
                Ok(TransferOutcome::Ixfr)
            }
        }
    }
}

#[cfg(test)]
mod tests;
