//! Online DNSSEC signing, the pure half: a zone's keys and signing
//! policy ([`ZoneSigner`]), and signing one version of a zone against the
//! version it replaces (`zone`): an NSEC chain over its authoritative
//! names (`chain`), and RRSIGs for what changed, the rest carried over
//! from the previous version while they stay valid long enough (`rrsig`).
//!
//! Denial is by NSEC: every negative answer of a signed zone is then one
//! of a finite set of pre-signed records (a name's own NSEC for NODATA,
//! the covering NSEC and the wildcard's for NXDOMAIN), which the answer
//! table can hold like any other answer. NSEC3 would need SHA-1 hashing of
//! the query name per query and compact denial a fresh signature per
//! name; neither can be pre-computed, so a random-subdomain flood would
//! go to userspace. Names in service discovery are meant to be found, so
//! NSEC's zone walking gives nothing away.
//!
//! The store calls the signer on its commit path
//! ([`crate::zone::store::Signer`]); keys are created, kept and rolled by
//! the `xdpdns` crate.

mod chain;
mod incremental;
mod keys;
mod rrsig;
pub mod timeline;
mod zone;

pub use incremental::{due_names, refresh_names, sign_changed};
pub use keys::{ds_for, ActiveKey, KeyRole, SignError, SignPolicy, ZoneSigner};
pub use zone::{is_managed, sign_zone};

impl crate::zone::store::Signer for ZoneSigner {
    fn sign(
        &self,
        before: Option<&crate::zone::Zone>,
        zone: &mut crate::zone::Zone,
        now: u64,
    ) -> Result<(), String> {
        sign_zone(self, before, zone, now as u32)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn sign_changes(
        &self,
        before: &crate::zone::Zone,
        zone: &mut crate::zone::Zone,
        changed: &std::collections::BTreeSet<hickory_proto::rr::LowerName>,
        now: u64,
    ) -> Result<Option<std::collections::BTreeSet<hickory_proto::rr::LowerName>>, String> {
        sign_changed(self, before, zone, changed, now as u32).map_err(|e| e.to_string())
    }

    fn due_names(&self, zone: &crate::zone::Zone, now: u64) -> Vec<hickory_proto::rr::LowerName> {
        due_names(self, zone, now as u32)
    }

    fn refresh(
        &self,
        zone: &mut crate::zone::Zone,
        names: &[hickory_proto::rr::LowerName],
        now: u64,
    ) -> Result<std::collections::BTreeSet<hickory_proto::rr::LowerName>, String> {
        refresh_names(self, zone, names, now as u32).map_err(|e| e.to_string())
    }

    fn due(&self, zone: &crate::zone::Zone, now: u64) -> bool {
        zone::refresh_due(self, zone, now as u32)
    }
}

#[cfg(test)]
mod tests;
