//! Zones the store signs as it commits them (online DNSSEC): a zone with
//! a [`Signer`] is signed on the commit path after its serial is final,
//! so the serial, the IXFR journal, the zone image and the kernel table
//! carry signed data together. Zones restored from the journal or
//! transferred in are committed as they are.

use std::collections::BTreeSet;
use std::sync::Arc;

use hickory_proto::rr::{LowerName, Name};

use super::{diff_names, diff_zones, set_serial, Writer, ZoneDiff, ZoneStore};
use crate::zone::{signer_managed, Zone};

/// Signs a zone on the commit path (`crate::signing::ZoneSigner`).
pub trait Signer: Send + Sync {
    /// Signs `zone` (serial final), reusing `before`'s signatures where
    /// they still hold.
    fn sign(&self, before: Option<&Zone>, zone: &mut Zone, now: u64) -> Result<(), String>;
    /// Signs only what changed at the `changed` names (`zone` is
    /// `before` with those names changed); returns the names whose records
    /// changed, signatures included, or `None` to sign the zone whole.
    fn sign_changes(
        &self,
        _before: &Zone,
        _zone: &mut Zone,
        _changed: &BTreeSet<LowerName>,
        _now: u64,
    ) -> Result<Option<BTreeSet<LowerName>>, String> {
        Ok(None)
    }
    /// Whether a signature of `zone` is due for refresh at `now` (or the
    /// keys changed).
    fn due(&self, zone: &Zone, now: u64) -> bool;
}

impl Writer {
    pub(super) fn signer(&self, key: &LowerName) -> Option<&Arc<dyn Signer>> {
        self.signers.get(key)
    }

    /// Signs `zone` if a signer is set for it; `false` (with the zone left
    /// as it is) when signing failed, which the caller must not commit.
    pub(super) fn sign(&self, before: Option<&Zone>, zone: &mut Zone, now: u64) -> bool {
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
    /// Signs the change from `before` to `zone` (whose `diffs` say what
    /// changed) and returns its one diff, signatures included: only the
    /// changed names when the signer can, else the whole zone. `None`:
    /// signing failed and nothing may be committed.
    pub(super) fn sign_change(
        &self,
        before: &Zone,
        zone: &mut Zone,
        diffs: &[ZoneDiff],
        now: u64,
    ) -> Option<ZoneDiff> {
        let signer = self.signer(zone.origin_key())?;
        let changed: BTreeSet<LowerName> = diffs
            .iter()
            .flat_map(|d| d.added.iter().chain(&d.removed))
            .filter(|r| !signer_managed(r.record_type()))
            .map(|r| LowerName::new(&r.name))
            .collect();
        match signer.sign_changes(before, zone, &changed, now) {
            Ok(Some(touched)) => Some(diff_names(before, zone, &touched)),
            Ok(None) => {
                if !self.sign(Some(before), zone, now) {
                    return None;
                }
                Some(diff_zones(Some(before), Some(zone), zone.origin()))
            }
            Err(e) => {
                tracing::error!(zone = %zone.origin(), "signing failed, change not committed: {e}");
                None
            }
        }
    }
}

/// Whether two versions of a zone hold the same records, leaving out the
/// ones a signer owns (a signed zone against its unsigned source).
pub(super) fn same_unsigned(a: &Zone, b: &Zone) -> bool {
    let strip = |z: &Zone| {
        let mut d: Vec<(LowerName, Vec<crate::zone::RRset>)> = z
            .nodes()
            .map(|(k, n)| {
                let sets = n
                    .rrsets()
                    .iter()
                    .filter(|s| !signer_managed(s.rtype))
                    .cloned()
                    .collect::<Vec<_>>();
                (k.clone(), sets)
            })
            .filter(|(_, sets)| !sets.is_empty())
            .collect();
        d.sort_by(|x, y| x.0.cmp(&y.0));
        for (_, sets) in &mut d {
            sets.sort_by_key(|s| u16::from(s.rtype));
        }
        d
    };
    strip(a) == strip(b)
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

    /// Re-signs every signed zone with a signature due for refresh (or
    /// whose keys changed) at `now`, each under its next serial; returns
    /// the zones committed.
    pub fn resign_due(&self, now: u64) -> Vec<Name> {
        let w = self.lock();
        let keys: Vec<LowerName> = w.signers.keys().cloned().collect();
        keys.into_iter()
            .filter(|key| self.resign_locked(&w, key, now, false))
            .map(|key| Name::from(&key))
            .collect()
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
            None => strip_managed(&mut zone),
        }
        let diff = diff_zones(Some(current), Some(&zone), zone.origin());
        let mut next = (*old).clone();
        next.zones.insert(key.clone(), Arc::new(zone));
        self.commit_diffs(w, next, &[diff]);
        true
    }
}

fn strip_managed(zone: &mut Zone) {
    let managed: Vec<(Name, hickory_proto::rr::RData)> = zone
        .nodes()
        .flat_map(|(key, node)| {
            node.rrsets()
                .iter()
                .filter(|s| signer_managed(s.rtype))
                .flat_map(move |s| s.rdatas().map(move |d| (Name::from(key), d)))
        })
        .collect();
    for (name, rdata) in managed {
        zone.remove(&name, &rdata);
    }
}
