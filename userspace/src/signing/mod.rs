//! Online signing, the running half: each zone with a `dnssec_policy`
//! gets its keys (`keystore`) and a signer the store signs it with on
//! every commit; a task re-signs what falls due for refresh.

pub mod keystore;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::rr::Name;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::config::signing::SignedZone;
use crate::zone::ZoneStore;
pub use keystore::KeyError;
use xdpdns_core::signing::{SignPolicy, ZoneSigner};

/// How often signatures are checked for refresh.
const REFRESH_CHECK: Duration = Duration::from_secs(60);

/// The signer `zone` is signed with, its keys read or created under
/// `data_dir`.
pub fn signer_for(data_dir: &Path, zone: &SignedZone, now: u64) -> Result<ZoneSigner, KeyError> {
    let (keys, entries) = keystore::load_or_create(data_dir, &zone.zone, &zone.policy, now)?;
    let tags: Vec<String> = entries
        .iter()
        .map(|e| format!("{:?} {}", e.role, e.tag))
        .collect();
    info!(zone = %zone.zone, keys = %tags.join(", "), "zone signed online");
    if let Some(e) = entries
        .iter()
        .find(|e| e.algorithm != zone.policy.algorithm)
    {
        warn!(zone = %zone.zone, keys = %e.algorithm, policy = %zone.policy.algorithm,
              "the policy's algorithm differs from the keys'; the keys keep signing (an algorithm rollover is not built yet)");
    }
    let policy = SignPolicy {
        validity: zone.policy.signature_validity_s,
        refresh: zone.policy.signature_refresh_s,
        ..SignPolicy::default()
    };
    Ok(ZoneSigner::new(keys, policy))
}

/// Has the store sign every zone of `zones` from now on (a served zone
/// not signed by these keys yet is signed at once).
pub fn install(
    store: &ZoneStore,
    data_dir: &Path,
    zones: &[SignedZone],
    now: u64,
) -> Result<(), KeyError> {
    for z in zones {
        let signer = signer_for(data_dir, z, now)?;
        store.set_signer(&z.zone, Some(Arc::new(signer)), now);
    }
    Ok(())
}

/// Re-signs, every minute, the signatures that fall due (off the async
/// threads: a large zone takes a while).
pub fn start_refresh(
    store: Arc<ZoneStore>,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(REFRESH_CHECK) => {}
                _ = stop.changed() => return,
            }
            let s = store.clone();
            let now = crate::clock::unix_secs();
            let resigned: Vec<Name> = tokio::task::spawn_blocking(move || s.resign_due(now))
                .await
                .unwrap_or_default();
            for zone in resigned {
                info!(%zone, "signatures refreshed");
            }
        }
    })
}
