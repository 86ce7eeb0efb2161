//! The signer a zone's keys on disk make, for the states their timeline
//! is in.

use std::path::Path;

use xdpdns_core::signing::timeline;
use xdpdns_core::signing::{SignPolicy, ZoneSigner};

use super::keystore::{self, KeyError};
use crate::config::signing::SignedZone;

/// The signer for the key states `entries` lists: active keys sign,
/// published and retired ones are only published, and the parent is asked
/// for DS records of the keys the timeline submits.
pub fn signer_from(
    zone: &SignedZone,
    dir: &Path,
    entries: &[keystore::KeyEntry],
) -> Result<ZoneSigner, KeyError> {
    let keys = keystore::load_existing(dir, entries)?;
    let timed: Vec<_> = entries.iter().map(keystore::KeyEntry::timed).collect();
    let (signing, published, submitted) = timeline::signing_sets(&timed);
    let unpublished = timeline::unpublished(&timed);
    let pick = |tags: &[u16]| -> Vec<_> {
        keys.iter()
            .filter(|k| tags.contains(&k.tag))
            .cloned()
            .collect()
    };
    let policy = SignPolicy {
        validity: zone.policy.signature_validity_s,
        refresh: zone.policy.signature_refresh_s,
        ..SignPolicy::default()
    };
    let mut signer = ZoneSigner::new(pick(&signing), policy);
    signer.published = pick(&published).into_iter().map(|k| k.dnskey).collect();
    signer.submitted = pick(&submitted).into_iter().map(|k| k.dnskey).collect();
    signer.unpublished = pick(&unpublished).into_iter().map(|k| k.dnskey).collect();
    Ok(signer)
}
