//! The versioned zone store and its one commit path.
//!
//! Readers take the current [`Snapshot`] with one atomic load and never
//! lock; a query that started on a snapshot finishes on it even if a reload
//! publishes a newer one meanwhile. Writers (zone files, the registry,
//! secondary zones, journal recovery) are serialised, build the next
//! snapshot from a structurally shared copy, and go through one function,
//! [`ZoneStore::commit`], which swaps the snapshot in and hands a
//! [`Commit`] to the change feed. What follows a change (IXFR journal,
//! NOTIFY, kernel table) subscribes to the feed and runs outside the lock.
//!
//! The store reads no clock: writers that may pick a serial pass `now`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use arc_swap::{ArcSwap, Guard};
use hickory_proto::rr::rdata::SOA;
use hickory_proto::rr::{LowerName, Name, RData, Record, RecordType};
use tokio::sync::broadcast;

use super::feed::{Commit, Subscription, ZoneEvent, FEED_CAPACITY};
use super::serial::{is_newer, SerialPolicy};
pub use super::snapshot::{Snapshot, ZoneDiff};
pub use signed::Signer;

mod diff;
mod error;
mod signed;
mod step;

use super::Zone;
pub use diff::diff;
use diff::{diff_names, diff_zones};
pub use error::StoreError;
use step::apply_step;
pub use step::{Additions, Change};

/// What a dynamic update does to one zone, decided under the writer lock
/// ([`ZoneStore::edit`]): record changes in order, and the SOA (with its
/// TTL) that replaces the zone's when the update brings a newer one.
#[derive(Clone, Debug, Default)]
pub struct Edit {
    pub changes: Vec<Change>,
    pub soa: Option<(SOA, u32)>,
}

/// A change [`ZoneStore::edit`] committed: its diff (empty when nothing
/// changed) and the store version that holds it (`None`: no commit).
#[derive(Clone, Debug)]
pub struct Edited {
    pub diff: ZoneDiff,
    pub version: Option<u64>,
}

/// Why [`ZoneStore::edit`] changed nothing.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EditError<E: std::fmt::Debug + std::fmt::Display> {
    #[error("{0}")]
    Refused(E),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Which zones rotate their A/AAAA answers (`[[zone]] rotate`): serving
/// policy from the configuration, which the store applies to every zone
/// it commits, whatever source the zone came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RotationPolicy(HashSet<LowerName>);

impl RotationPolicy {
    pub fn new<'a>(origins: impl IntoIterator<Item = &'a Name>) -> Self {
        RotationPolicy(origins.into_iter().map(LowerName::new).collect())
    }

    pub fn rotates(&self, origin: &LowerName) -> bool {
        self.0.contains(origin)
    }
}

/// What writers share: held for the whole of a commit.
#[derive(Default)]
struct Writer {
    policy: SerialPolicy,
    rotation: RotationPolicy,
    /// Zones signed on the commit path.
    signers: std::collections::HashMap<LowerName, Arc<dyn Signer>>,
}

pub struct ZoneStore {
    current: Arc<ArcSwap<Snapshot>>,
    writer: Mutex<Writer>,
    feed: broadcast::Sender<Arc<Commit>>,
}

/// Reads the store's current snapshot and nothing else: what the
/// request router holds, while `serve` owns the [`ZoneStore`] and its
/// commit path.
#[derive(Clone)]
pub struct ZoneReader(Arc<ArcSwap<Snapshot>>);

impl ZoneReader {
    /// The current snapshot, with one atomic load.
    pub fn load(&self) -> Guard<Arc<Snapshot>> {
        self.0.load()
    }

    /// The current snapshot as an owned handle.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.0.load_full()
    }
}

impl Default for ZoneStore {
    fn default() -> Self {
        Self::new()
    }
}

impl ZoneStore {
    pub fn new() -> Self {
        ZoneStore {
            current: Arc::new(ArcSwap::from_pointee(Snapshot::default())),
            writer: Mutex::new(Writer::default()),
            feed: broadcast::channel(FEED_CAPACITY).0,
        }
    }

    /// A new subscriber to the change feed, and the snapshot it starts
    /// from: it is handed every commit after that snapshot, in order.
    pub fn subscribe(&self) -> (Arc<Snapshot>, Subscription) {
        let _w = self.lock();
        let snapshot = self.current.load_full();
        let sub = Subscription::new(
            self.feed.subscribe(),
            self.current.clone(),
            snapshot.version(),
        );
        (snapshot, sub)
    }

    /// How zones xdpdns owns get new serials (default: unix time).
    pub fn set_serial_policy(&self, policy: SerialPolicy) {
        self.lock().policy = policy;
    }

    pub fn serial_policy(&self) -> SerialPolicy {
        self.lock().policy
    }

    /// Which zones rotate their answers. Zones whose rotation changes are
    /// committed at once, each with a [`ZoneEvent::Rotation`].
    pub fn set_rotation(&self, rotation: RotationPolicy) {
        let mut w = self.lock();
        let old = self.current.load_full();
        let flipped: Vec<LowerName> = old
            .zones
            .iter()
            .filter(|(key, zone)| zone.rotates() != rotation.rotates(key))
            .map(|(key, _)| key.clone())
            .collect();
        w.rotation = rotation;
        if flipped.is_empty() {
            return;
        }
        let next = (*old).clone();
        let events = flipped
            .iter()
            .map(|key| ZoneEvent::Rotation(old.zones[key].origin().clone()))
            .collect();
        // `commit` sets each zone's flag from the new policy.
        self.commit(&w, next, events);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The one commit path: every change from every source ends here.
    /// Makes `next` (built from the current snapshot under the writer
    /// lock `w`) the current snapshot under the next version, then hands
    /// the commit to the feed. Sending never blocks; subscribers do their
    /// work on their own tasks.
    fn commit(&self, w: &Writer, mut next: Snapshot, events: Vec<ZoneEvent>) {
        let old = self.current.load();
        next.version = old.version + 1;
        // Every zone a commit touches is served by the rotation policy,
        // whichever source built it.
        for event in &events {
            let key = LowerName::new(event.origin());
            if let Some(zone) = next.zones.get_mut(&key) {
                let rotate = w.rotation.rotates(&key);
                if zone.rotates() != rotate {
                    Arc::make_mut(zone).set_rotation(rotate);
                }
            }
        }
        // A changed zone built from the one it replaces (a clone changed
        // in place) is a new version of the contents; one that arrives
        // with an id of its own (parsed, transferred, read from its
        // image) keeps it.
        for event in &events {
            // Rotation is serving policy, not contents (the table tag
            // hashes it apart), so the zone's image stays current.
            if matches!(event, ZoneEvent::Rotation(_)) {
                continue;
            }
            let key = LowerName::new(event.origin());
            if let (Some(before), Some(after)) = (old.zones.get(&key), next.zones.get_mut(&key)) {
                if before.uid() == after.uid() {
                    Arc::make_mut(after).renew_uid();
                }
            }
        }
        drop(old);
        if !next.zone_ids.covers(next.zones.keys()) {
            Arc::make_mut(&mut next.zone_ids).assign(next.zones.keys());
        }
        let snapshot = Arc::new(next);
        self.current.store(snapshot.clone());
        let commit = Commit {
            version: snapshot.version,
            snapshot,
            events,
        };
        // No subscriber is not an error.
        let _ = self.feed.send(Arc::new(commit));
    }

    fn commit_diffs(&self, w: &Writer, next: Snapshot, diffs: &[ZoneDiff]) {
        let events = diffs.iter().cloned().map(ZoneEvent::Published).collect();
        self.commit(w, next, events);
    }

    /// A store serving `zones` from its first snapshot.
    pub fn with_zones(zones: Vec<Zone>) -> Self {
        let store = ZoneStore::new();
        store.replace_zones(zones, &[], 0);
        store
    }

    /// The current snapshot, for the query path: one atomic load, no lock.
    pub fn load(&self) -> Guard<Arc<Snapshot>> {
        self.current.load()
    }

    /// The current snapshot as an owned handle.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// A read-only handle on the current snapshot, for readers that must
    /// not commit (the request router).
    pub fn reader(&self) -> ZoneReader {
        ZoneReader(self.current.clone())
    }

    /// Installs `zones` xdpdns owns (replacing any with the same origin)
    /// and drops the served zones named in `remove`, all in one new
    /// snapshot. A zone whose records changed but whose serial did not move
    /// forward (RFC 1982) gets the next serial by the serial policy at
    /// `now` (unix seconds), so secondaries always see a change. Returns
    /// one diff per changed zone.
    pub fn replace_zones(&self, zones: Vec<Zone>, remove: &[Name], now: u64) -> Vec<ZoneDiff> {
        self.replace(zones, remove, true, now)
    }

    /// Installs a zone exactly as received (a secondary zone after AXFR):
    /// its serial is the primary's.
    pub fn install_transferred(&self, zone: Zone) -> Vec<ZoneDiff> {
        self.replace(vec![zone], &[], false, 0)
    }

    /// Serves zones as they were before a restart (from the journal),
    /// serials untouched.
    pub fn restore_zones(&self, zones: Vec<Zone>) -> Vec<ZoneDiff> {
        self.replace(zones, &[], false, 0)
    }

    fn replace(&self, zones: Vec<Zone>, remove: &[Name], owned: bool, now: u64) -> Vec<ZoneDiff> {
        // Diffing a large zone takes a while (a 1M-record file: seconds),
        // so it is done against the current snapshot before taking the
        // lock; a zone another writer changed meanwhile is diffed again.
        let (policy, signed) = {
            let w = self.lock();
            let signed: HashSet<LowerName> = w.signers.keys().cloned().collect();
            (w.policy, signed)
        };
        let base = self.current.load_full();
        let prepared: Vec<_> = zones
            .into_iter()
            .map(|zone| {
                let key = zone.origin_key().clone();
                let before = base.zones.get(&key).cloned();
                // A signed zone is compared with its source under the lock
                // (`signed_change`), unsigned records against unsigned.
                let change = match owned && signed.contains(&key) {
                    true => Some((zone, ZoneDiff::default())),
                    false => prepare(before.as_deref(), zone, owned, policy, now),
                };
                (key, before, change)
            })
            .collect();
        drop(base);
        let w = self.lock();
        let old = self.current.load_full();
        let mut next = (*old).clone();
        let mut diffs = Vec::new();
        for origin in remove {
            let key = LowerName::new(origin);
            if let Some(gone) = next.zones.remove(&key) {
                diffs.push(diff_zones(Some(&gone), None, gone.origin()));
            }
        }
        for (key, diffed_against, change) in prepared {
            let current = old.zones.get(&key);
            let unchanged_meanwhile = match (&diffed_against, current) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            let change = match change {
                Some((zone, _)) if owned && w.signer(&key).is_some() => {
                    signed_change(&w, current.map(|z| &**z), zone, now)
                }
                Some((zone, _)) if !unchanged_meanwhile => {
                    prepare(current.map(|z| &**z), zone, owned, w.policy, now)
                }
                other => other,
            };
            if let Some((zone, diff)) = change {
                diffs.push(diff);
                next.zones.insert(key, Arc::new(zone));
            }
        }
        if !diffs.is_empty() {
            self.commit_diffs(&w, next, &diffs);
        }
        diffs
    }

    /// Marks a secondary zone expired (SERVFAIL) or fresh. No records
    /// change, so no diff, but the feed hears of it; returns whether
    /// anything changed.
    pub fn set_expired(&self, origin: &Name, expired: bool) -> bool {
        let w = self.lock();
        let old = self.current.load_full();
        let key = LowerName::new(origin);
        let Some(zone) = old.zones.get(&key).filter(|z| z.is_expired() != expired) else {
            return false;
        };
        let mut zone = (**zone).clone();
        zone.set_expired(expired);
        let event = if expired {
            ZoneEvent::Expired(zone.origin().clone())
        } else {
            ZoneEvent::Fresh(zone.origin().clone())
        };
        let mut next = (*old).clone();
        next.zones.insert(key, Arc::new(zone));
        self.commit(&w, next, vec![event]);
        true
    }

    /// Publishes zones generated from another source (the registry), each
    /// replacing the served zone of the same origin. The SOA serial of the
    /// generated zone is ignored: a zone whose records did not change keeps
    /// its version and serial; one that changed gets the next serial by
    /// the serial policy, never behind `floor` (see
    /// [`SerialPolicy::next_owned`]). All changes go out in one snapshot.
    pub fn publish_generated(
        &self,
        zones: Vec<Zone>,
        floor: Option<u32>,
        now: u64,
    ) -> Vec<ZoneDiff> {
        self.publish_generated_with(zones, now, &|policy, old| {
            policy.next_owned(old, floor, now as u32)
        })
    }

    /// [`publish_generated`](Self::publish_generated), each changed zone
    /// getting `serial` exactly (the etcd registry's serial, derived from
    /// the revision the zones were generated at), or the serial after the
    /// zone's if `serial` is not newer: a serial never goes back.
    /// `now` dates the signatures of a signed zone.
    pub fn publish_generated_at(&self, zones: Vec<Zone>, serial: u32, now: u64) -> Vec<ZoneDiff> {
        self.publish_generated_with(zones, now, &|_, old| forward(serial, old))
    }

    fn publish_generated_with(
        &self,
        zones: Vec<Zone>,
        now: u64,
        serial_of: &dyn Fn(SerialPolicy, Option<u32>) -> u32,
    ) -> Vec<ZoneDiff> {
        let w = self.lock();
        let old = self.current.load_full();
        let mut next = (*old).clone();
        let mut diffs = Vec::new();
        for mut zone in zones {
            let key = zone.origin_key().clone();
            let before = old.zones.get(&key).map(|z| &**z);
            let old_serial = before.and_then(Zone::serial);
            let signed = w.signer(&key).is_some();
            if let Some(serial) = old_serial {
                set_serial(&mut zone, serial);
                let unchanged = match before {
                    Some(b) if signed => diff::diff_unsigned(b, &zone).is_empty(),
                    _ => diff_zones(before, Some(&zone), zone.origin()).is_empty(),
                };
                if unchanged {
                    continue;
                }
            }
            set_serial(&mut zone, serial_of(w.policy, old_serial));
            if !w.sign(before, &mut zone, now) {
                continue;
            }
            diffs.push(diff_zones(before, Some(&zone), zone.origin()));
            next.zones.insert(key, Arc::new(zone));
        }
        if !diffs.is_empty() {
            self.commit_diffs(&w, next, &diffs);
        }
        diffs
    }

    /// Applies record changes to one zone, gives it the next serial by the
    /// serial policy at `now` (unix seconds) and publishes the result. A
    /// change that alters nothing publishes nothing and returns an empty
    /// diff.
    pub fn update(
        &self,
        origin: &Name,
        changes: &[Change],
        now: u64,
    ) -> Result<ZoneDiff, StoreError> {
        self.update_with(origin, changes, Err(now), now, Additions::Checked)
    }

    /// [`update`](Self::update) to serial `serial` exactly, or to the
    /// serial after the zone's if `serial` is not newer (`now` dates the
    /// signatures of a signed zone).
    pub fn update_at(
        &self,
        origin: &Name,
        changes: &[Change],
        serial: u32,
        now: u64,
    ) -> Result<ZoneDiff, StoreError> {
        self.update_generated(origin, changes, Some(serial), now, Additions::Checked)
    }

    /// [`update`](Self::update), or [`update_at`](Self::update_at) with
    /// `serial`, with `additions` looked for in their sets or not: a
    /// source that counts every record's contributors and adds only
    /// records their sets lack (the registry's derivation table, sole
    /// writer of its zones) passes [`Additions::Counted`], so a service's
    /// set of a thousand members is not scanned for every member added.
    pub fn update_generated(
        &self,
        origin: &Name,
        changes: &[Change],
        serial: Option<u32>,
        now: u64,
        additions: Additions,
    ) -> Result<ZoneDiff, StoreError> {
        let serial = match serial {
            Some(serial) => {
                let old = self
                    .snapshot()
                    .zone(&LowerName::new(origin))
                    .and_then(|z| z.serial());
                Ok(forward(serial, old))
            }
            None => Err(now),
        };
        self.update_with(origin, changes, serial, now, additions)
    }

    fn update_with(
        &self,
        origin: &Name,
        changes: &[Change],
        serial: Result<u32, u64>,
        now: u64,
        additions: Additions,
    ) -> Result<ZoneDiff, StoreError> {
        let diffs = self.apply(origin, &[(changes, serial)], Some(now), additions)?;
        Ok(diffs.into_iter().next().unwrap_or_else(|| ZoneDiff {
            origin: origin.clone(),
            ..ZoneDiff::default()
        }))
    }

    /// Decides a change to one zone and applies it in one commit, under
    /// the writer lock: what `decide` saw of the zone is what the change
    /// applies to (a dynamic update's prerequisites hold when it is
    /// committed). The serial is the edit's SOA's when it brings one,
    /// else the next by the serial policy at `now` if anything changed.
    pub fn edit<E: std::fmt::Debug + std::fmt::Display>(
        &self,
        origin: &Name,
        now: u64,
        decide: impl FnOnce(&Zone) -> Result<Edit, E>,
    ) -> Result<Edited, EditError<E>> {
        let w = self.lock();
        let old = self.current.load_full();
        let (key, current) = served(&old, origin)?;
        let edit = decide(current).map_err(EditError::Refused)?;
        let mut zone = (**current).clone();
        let serial = match &edit.soa {
            Some((soa, _)) => Ok(soa.serial),
            None => Err(now),
        };
        let diff = apply_step(
            &mut zone,
            &edit.changes,
            serial,
            w.policy,
            edit.soa.as_ref(),
            Additions::Checked,
        )?;
        if diff.is_empty() {
            return Ok(Edited {
                diff,
                version: None,
            });
        }
        let diff = match w.signer(&key) {
            Some(_) => w
                .sign_change(current, &mut zone, std::slice::from_ref(&diff), now)
                .ok_or_else(|| EditError::Store(StoreError::Signing(origin.clone())))?,
            None => diff,
        };
        let mut next = (*old).clone();
        next.zones.insert(key, Arc::new(zone));
        self.commit_diffs(&w, next, std::slice::from_ref(&diff));
        let version = Some(self.current.load().version);
        Ok(Edited { diff, version })
    }

    /// Applies an incremental transfer: each diff's changes then its
    /// primary's serial, exactly, in order, as one commit; if any diff
    /// does not apply, nothing is (the zone stays at its old serial).
    /// Fails if the zone is not served.
    pub fn apply_transferred(
        &self,
        origin: &Name,
        diffs: &[(Vec<Change>, u32)],
    ) -> Result<Vec<ZoneDiff>, StoreError> {
        let steps: Vec<(&[Change], Result<u32, u64>)> = diffs
            .iter()
            .map(|(changes, serial)| (changes.as_slice(), Ok(*serial)))
            .collect();
        self.apply(origin, &steps, None, Additions::Checked)
    }

    /// Applies each step's changes and serial to one zone, in order, and
    /// commits them together: all of them, or none when one fails (an
    /// incremental transfer is applied whole). Steps that change nothing
    /// add no diff. A signed zone is signed at `now` once the steps are
    /// applied (a transfer, `now` = `None`, is committed as it came).
    fn apply(
        &self,
        origin: &Name,
        steps: &[(&[Change], Result<u32, u64>)],
        now: Option<u64>,
        additions: Additions,
    ) -> Result<Vec<ZoneDiff>, StoreError> {
        let w = self.lock();
        let old = self.current.load_full();
        let (key, current) = served(&old, origin)?;
        // A signed zone's version can lag its source's (a signing that
        // failed leaves it as it was, and a whole publish skips it):
        // its additions are always looked for.
        let additions = match w.signer(&key) {
            Some(_) => Additions::Checked,
            None => additions,
        };
        let mut zone = (**current).clone();
        let mut diffs = Vec::new();
        for (changes, serial) in steps {
            let diff = apply_step(&mut zone, changes, *serial, w.policy, None, additions)?;
            if !diff.is_empty() {
                diffs.push(diff);
            }
        }
        if let (Some(now), Some(_), false) = (now, w.signer(&key), diffs.is_empty()) {
            let diff = w
                .sign_change(current, &mut zone, &diffs, now)
                .ok_or_else(|| StoreError::Signing(origin.clone()))?;
            diffs = vec![diff];
        }
        if !diffs.is_empty() {
            let mut next = (*old).clone();
            next.zones.insert(key, Arc::new(zone));
            self.commit_diffs(&w, next, &diffs);
        }
        Ok(diffs)
    }
}

impl Writer {
    fn signer(&self, key: &LowerName) -> Option<&Arc<dyn Signer>> {
        self.signers.get(key)
    }

    /// Signs `zone` if a signer is set for it; `false` (with the zone left
    /// as it is) when signing failed, which the caller must not commit.
    fn sign(&self, before: Option<&Zone>, zone: &mut Zone, now: u64) -> bool {
        let Some(signer) = self.signer(zone.origin_key()) else {
            return true;
        };
        match signer.sign(before, zone, now) {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(zone = %zone.origin(), "signing failed, change not committed: {e}");
                false
            }
        }
    }
}

impl Writer {
    /// Signs the change from `before` to `zone` (see
    /// [`signed::sign_change`]); `None`: signing failed and nothing may
    /// be committed.
    fn sign_change(
        &self,
        before: &Zone,
        zone: &mut Zone,
        diffs: &[ZoneDiff],
        now: u64,
    ) -> Option<ZoneDiff> {
        let signer = self.signer(zone.origin_key())?;
        match signed::sign_change(signer.as_ref(), before, zone, diffs, now) {
            Ok(diff) => Some(diff),
            Err(e) => {
                tracing::error!(zone = %zone.origin(), "signing failed, change not committed: {e}");
                None
            }
        }
    }
}

impl ZoneStore {
    /// Signs `origin` with `signer` from now on (or stops signing it:
    /// `None`). A served zone not signed by its keys yet is signed (or,
    /// without a signer, stripped) at once, under the next serial.
    pub fn set_signer(&self, origin: &Name, signer: Option<Arc<dyn Signer>>, now: u64) {
        let mut w = self.lock();
        let key = LowerName::new(origin);
        let had = match signer {
            Some(s) => w.signers.insert(key.clone(), s),
            None => w.signers.remove(&key),
        };
        // A zone already signed by these keys (restored from the journal)
        // stays as it is; one signed by no signer (a pre-signed file) too.
        match (w.signers.contains_key(&key), had.is_some()) {
            (true, _) => self.resign_locked(&w, &key, now, false),
            (false, true) => self.resign_locked(&w, &key, now, true),
            (false, false) => false,
        };
    }

    /// Refreshes the signatures due at `now` in batches of at most
    /// `batch` names, each its own commit under the next serial, so the
    /// writer lock is never held for a whole zone: a registration or an
    /// UPDATE waits for one batch at most. Returns the zones refreshed and
    /// the commits each took.
    pub fn refresh_due(&self, now: u64, batch: usize) -> Vec<(Name, usize)> {
        let signers: Vec<(LowerName, Arc<dyn Signer>)> = self
            .lock()
            .signers
            .iter()
            .map(|(k, s)| (k.clone(), s.clone()))
            .collect();
        let mut done = Vec::new();
        for (key, signer) in signers {
            // Found on a snapshot, outside the lock.
            let Some(zone) = self.current.load().zones.get(&key).cloned() else {
                continue;
            };
            let names = signer.due_names(&zone, now);
            drop(zone);
            let mut commits = 0;
            for chunk in names.chunks(batch.max(1)) {
                let w = self.lock();
                let old = self.current.load_full();
                let Some(current) = old.zones.get(&key) else {
                    break;
                };
                let mut zone = (**current).clone();
                let Some(serial) = zone.serial() else {
                    break;
                };
                set_serial(&mut zone, w.policy.next(serial, now as u32));
                let touched = match signer.refresh(&mut zone, chunk, now) {
                    Ok(t) => t,
                    Err(e) => {
                        tracing::error!(zone = %zone.origin(), "signature refresh failed: {e}");
                        break;
                    }
                };
                let diff = diff_names(current, &zone, &touched);
                let mut next = (*old).clone();
                next.zones.insert(key.clone(), Arc::new(zone));
                self.commit_diffs(&w, next, &[diff]);
                commits += 1;
            }
            if commits > 0 {
                done.push((Name::from(&key), commits));
            }
        }
        done
    }

    /// Signs (or, without a signer, strips) `key`'s zone anew under the
    /// next serial when `force` or a signature is due.
    fn resign_locked(&self, w: &Writer, key: &LowerName, now: u64, force: bool) -> bool {
        let old = self.current.load_full();
        let Some(current) = old.zones.get(key) else {
            return false;
        };
        let signer = w.signer(key);
        if !force && !signer.is_some_and(|s| s.due(current, now)) {
            return false;
        }
        let mut zone = (**current).clone();
        let Some(serial) = zone.serial() else {
            return false;
        };
        set_serial(&mut zone, w.policy.next(serial, now as u32));
        match signer {
            Some(_) => {
                if !w.sign(Some(current), &mut zone, now) {
                    return false;
                }
            }
            None => zone.strip_signer_managed(),
        }
        let diff = diff_zones(Some(current), Some(&zone), zone.origin());
        let mut next = (*old).clone();
        next.zones.insert(key.clone(), Arc::new(zone));
        self.commit_diffs(w, next, &[diff]);
        true
    }
}

/// The zone `origin` as `snapshot` serves it, and its key.
fn served<'a>(
    snapshot: &'a Snapshot,
    origin: &Name,
) -> Result<(LowerName, &'a Arc<Zone>), StoreError> {
    let key = LowerName::new(origin);
    let zone = snapshot
        .zones
        .get(&key)
        .ok_or_else(|| StoreError::UnknownZone(origin.clone()))?;
    Ok((key, zone))
}

/// A signed zone's new version from its source: `None` when only what the
/// signer owns differs, else signed (under a serial newer than
/// `before`'s) with its diff.
fn signed_change(
    w: &Writer,
    before: Option<&Zone>,
    mut zone: Zone,
    now: u64,
) -> Option<(Zone, ZoneDiff)> {
    let Some(b) = before else {
        if !w.sign(None, &mut zone, now) {
            return None;
        }
        let diff = diff_zones(None, Some(&zone), zone.origin());
        return Some((zone, diff));
    };
    let source = diff::diff_unsigned(b, &zone);
    let changes: Vec<Change> = source
        .removed
        .iter()
        .filter(|r| r.record_type() != RecordType::SOA)
        .map(|r| Change::Remove(r.clone()))
        .chain(
            source
                .added
                .iter()
                .filter(|r| r.record_type() != RecordType::SOA)
                .map(|r| Change::Add(r.clone())),
        )
        .collect();
    let soa_moved = match (b.soa(), zone.soa()) {
        (Some((was, was_ttl)), Some((new, new_ttl))) => {
            let mut same_serial = new.clone();
            same_serial.serial = was.serial;
            same_serial != *was || was_ttl != new_ttl
        }
        _ => true,
    };
    if changes.is_empty() && !soa_moved {
        return None; // the same records (its serial alone is no change)
    }
    // The change applied to the signed version, so only what it touched
    // is signed again (a file of a million records edited in a few).
    let serial = match (b.serial(), zone.serial()) {
        (Some(was), Some(new)) if is_newer(new, was) => Ok(new),
        _ => Err(now),
    };
    let replacement = zone.soa().map(|(s, t)| (s.clone(), t));
    let mut next = b.clone();
    let checked = Additions::Checked;
    match apply_step(
        &mut next,
        &changes,
        serial,
        w.policy,
        replacement.as_ref(),
        checked,
    ) {
        Ok(step) => {
            let diff = w.sign_change(b, &mut next, std::slice::from_ref(&step), now)?;
            Some((next, diff))
        }
        // Not applicable as a change (never expected of a zone that
        // loaded): the new version is signed whole.
        Err(_) => {
            if let (Some(was), Some(new)) = (b.serial(), zone.serial()) {
                if !is_newer(new, was) {
                    set_serial(&mut zone, w.policy.next(was, now as u32));
                }
            }
            if !w.sign(Some(b), &mut zone, now) {
                return None;
            }
            let diff = diff_zones(Some(b), Some(&zone), zone.origin());
            Some((zone, diff))
        }
    }
}

/// The zone to install and its diff against `before`, or `None` when
/// nothing changed. A zone xdpdns owns (`owned`) whose records changed but
/// whose serial did not move forward gets the next one by `policy`.
fn prepare(
    before: Option<&Zone>,
    mut zone: Zone,
    owned: bool,
    policy: SerialPolicy,
    now: u64,
) -> Option<(Zone, ZoneDiff)> {
    let diff = diff_zones(before, Some(&zone), zone.origin());
    if diff.is_empty() {
        return None;
    }
    if let (true, Some(was), Some(new)) = (owned, diff.old_serial, diff.new_serial) {
        if !is_newer(new, was) {
            // Same records under an older serial (a file reloaded after a
            // restart) is no change; anything else is published under the
            // next serial.
            set_serial(&mut zone, was);
            if diff_zones(before, Some(&zone), zone.origin()).is_empty() {
                return None;
            }
            set_serial(&mut zone, policy.next(was, now as u32));
            let diff = diff_zones(before, Some(&zone), zone.origin());
            return Some((zone, diff));
        }
    }
    Some((zone, diff))
}

/// Rewrites the serial of `zone`'s SOA (a zone without one is left alone).
fn set_serial(zone: &mut Zone, serial: u32) {
    let Some((soa, ttl)) = zone.soa().map(|(s, t)| (s.clone(), t)) else {
        return;
    };
    if soa.serial == serial {
        return;
    }
    let apex = zone.origin().clone();
    zone.remove(&apex, &RData::SOA(soa.clone()));
    let mut next = soa;
    next.serial = serial;
    let _ = zone.insert(Record::from_rdata(apex, ttl, RData::SOA(next)));
}

/// `serial`, unless it is not newer than `old`: then the one after `old`.
fn forward(serial: u32, old: Option<u32>) -> u32 {
    match old {
        Some(o) if !is_newer(serial, o) => o.wrapping_add(1),
        _ => serial,
    }
}

#[cfg(test)]
mod tests;
