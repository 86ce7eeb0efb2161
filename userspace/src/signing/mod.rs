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

/// A key as `ctl keys` shows it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeyInfo {
    pub tag: u16,
    pub role: xdpdns_core::signing::KeyRole,
    pub algorithm: String,
    pub state: String,
    pub created_unix: u64,
    /// The DNSKEY record, in presentation form.
    pub dnskey: String,
    /// The DS record (SHA-256) for the parent, for key-signing keys.
    pub ds: Option<String>,
}

/// The keys of signed `zone` under `data_dir`.
pub fn key_info(data_dir: &Path, zone: &Name) -> Result<Vec<KeyInfo>, KeyError> {
    use hickory_proto::dnssec::rdata::DNSSECRData;
    use hickory_proto::rr::RData;
    let dir = keystore::zone_dir(data_dir, zone);
    let entries = keystore::list(&dir)?;
    let keys = keystore::load_existing(&dir, &entries)?;
    let mut out = Vec::new();
    for (e, k) in entries.iter().filter(|e| e.state == "active").zip(keys) {
        let dnskey = RData::DNSSEC(DNSSECRData::DNSKEY(k.dnskey.clone()));
        let ds = match k.role.signs_keys() {
            true => xdpdns_core::signing::ds_for(zone, &k.dnskey)
                .ok()
                .map(|ds| format!("{zone} IN DS {}", RData::DNSSEC(DNSSECRData::DS(ds)))),
            false => None,
        };
        out.push(KeyInfo {
            tag: e.tag,
            role: e.role,
            algorithm: e.algorithm.clone(),
            state: e.state.clone(),
            created_unix: e.created_unix,
            dnskey: format!("{zone} IN DNSKEY {dnskey}"),
            ds,
        });
    }
    Ok(out)
}

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
