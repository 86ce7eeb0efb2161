//! Zones the store signs as it commits them (online DNSSEC): a zone with
//! a [`Signer`] is signed on the commit path after its serial is final,
//! so the serial, the IXFR journal, the zone image and the kernel table
//! carry signed data together. Zones restored from the journal or
//! transferred in are committed as they are.

use std::collections::BTreeSet;

use hickory_proto::rr::LowerName;

use super::diff::{diff_names, diff_zones};
use super::ZoneDiff;
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
    /// The names with a signature due for refresh at `now`.
    fn due_names(&self, _zone: &Zone, _now: u64) -> Vec<LowerName> {
        Vec::new()
    }
    /// Signs again what is due at `names` (`zone`: the served version with
    /// its serial moved); returns the names changed.
    fn refresh(
        &self,
        _zone: &mut Zone,
        _names: &[LowerName],
        _now: u64,
    ) -> Result<BTreeSet<LowerName>, String> {
        Ok(BTreeSet::new())
    }
    /// Whether a signature of `zone` is due for refresh at `now` (or the
    /// keys changed).
    fn due(&self, zone: &Zone, now: u64) -> bool;
}

/// Signs the change from `before` to `zone` (whose `diffs` say what
/// changed) with `signer` and returns its one diff, signatures included:
/// only the changed names when the signer can, else the whole zone.
pub(super) fn sign_change(
    signer: &dyn Signer,
    before: &Zone,
    zone: &mut Zone,
    diffs: &[ZoneDiff],
    now: u64,
) -> Result<ZoneDiff, String> {
    let changed: BTreeSet<LowerName> = diffs
        .iter()
        .flat_map(|d| d.added.iter().chain(&d.removed))
        .filter(|r| !signer_managed(r.record_type()))
        .map(|r| LowerName::new(&r.name))
        .collect();
    match signer.sign_changes(before, zone, &changed, now)? {
        Some(touched) => Ok(diff_names(before, zone, &touched)),
        None => {
            signer.sign(Some(before), zone, now)?;
            Ok(diff_zones(Some(before), Some(zone), zone.origin()))
        }
    }
}
