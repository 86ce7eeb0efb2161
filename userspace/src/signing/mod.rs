//! Online signing, the running half: each zone with a `dnssec_policy`
//! gets its keys (`keystore`) and a signer the store signs it with on
//! every commit; a task re-signs what falls due for refresh.

mod keys_file;
pub mod keystore;
pub mod rollover;
mod signer;

pub use signer::signer_from;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hickory_proto::rr::{LowerName, Name};
use tokio::sync::watch;
use tracing::info;

use crate::config::signing::SignedZone;
use crate::zone::ZoneStore;
pub use keystore::KeyError;
use xdpdns_core::signing::timeline::{self, KeyState};
use xdpdns_core::signing::ZoneSigner;

/// A key as `ctl keys` shows it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeyInfo {
    pub tag: u16,
    pub role: xdpdns_core::signing::KeyRole,
    pub algorithm: String,
    pub state: xdpdns_core::signing::timeline::KeyState,
    /// Its DS is asked of the parent (CDS/CDNSKEY published).
    pub submitted: bool,
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
    for e in &entries {
        // A removed key is listed (its history), its file may be gone.
        let key = keys
            .iter()
            .find(|k| k.tag == e.tag && e.state != KeyState::Removed);
        let dnskey = key.map(|k| {
            let rdata = RData::DNSSEC(DNSSECRData::DNSKEY(k.dnskey.clone()));
            format!("{zone} IN DNSKEY {rdata}")
        });
        let ds = key.filter(|k| k.role.signs_keys()).and_then(|k| {
            let ds = xdpdns_core::signing::ds_for(zone, &k.dnskey).ok()?;
            Some(format!(
                "{zone} IN DS {}",
                RData::DNSSEC(DNSSECRData::DS(ds))
            ))
        });
        out.push(KeyInfo {
            tag: e.tag,
            role: e.role,
            algorithm: e.algorithm.clone(),
            state: e.state,
            submitted: e.submitted,
            created_unix: e.created_unix,
            dnskey: dnskey.unwrap_or_default(),
            ds,
        });
    }
    Ok(out)
}

/// Names whose due signatures one refresh commit signs again.
const REFRESH_BATCH: usize = 1_000;

/// How often signatures are checked for refresh.
const REFRESH_CHECK: Duration = Duration::from_secs(60);

/// The signer `zone` is signed with, its keys read or created under
/// `data_dir`.
pub fn signer_for(data_dir: &Path, zone: &SignedZone, now: u64) -> Result<ZoneSigner, KeyError> {
    let (_, entries) = keystore::load_or_create(data_dir, &zone.zone, &zone.policy, now)?;
    let tags: Vec<String> = entries
        .iter()
        .filter(|e| e.state != KeyState::Removed)
        .map(|e| format!("{:?} {} {:?}", e.role, e.tag, e.state))
        .collect();
    info!(zone = %zone.zone, keys = %tags.join(", "), "zone signed online");
    if let Some(e) = entries
        .iter()
        .find(|e| e.state == KeyState::Active && e.algorithm != zone.policy.algorithm)
    {
        info!(zone = %zone.zone, keys = %e.algorithm, policy = %zone.policy.algorithm,
              "the policy's algorithm differs from the active keys': an algorithm rollover replaces them");
    }
    signer_from(zone, &keystore::zone_dir(data_dir, &zone.zone), &entries)
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

/// Notes that the parent of `zone` serves the DS of its submitted key
/// `tag` (`ctl keys ZONE --ds-published TAG`), and wakes its rollover.
pub async fn ds_published(
    data_dir: &Path,
    zone: &Name,
    tag: u16,
    now: u64,
) -> Result<(), KeyError> {
    let _file = keys_file::KEYS_FILE.lock().await;
    let dir = keystore::zone_dir(data_dir, zone);
    let mut entries = keystore::list(&dir)?;
    let mut timed: Vec<_> = entries.iter().map(keystore::KeyEntry::timed).collect();
    if !timeline::ds_confirmed(&mut timed, tag, now) {
        return Err(KeyError::NotSubmitted {
            zone: zone.clone(),
            tag,
        });
    }
    for (e, k) in entries.iter_mut().zip(&timed) {
        e.set_timed(k);
    }
    keystore::save(&dir, &entries)?;
    info!(%zone, tag, "the parent's DS for the key confirmed by the operator");
    keys_file::keys_changed().send_modify(|n| *n += 1);
    Ok(())
}

/// Online signing of zones added at runtime (`dnssec_policy` in the
/// request): keys, signer and rollover task per zone, started and
/// stopped with the zone. Policies are those of the configuration the
/// server started with.
pub struct RuntimeSigner {
    store: Arc<ZoneStore>,
    data_dir: PathBuf,
    config: Arc<crate::config::Config>,
    stop: watch::Receiver<bool>,
    tasks: Mutex<HashMap<LowerName, tokio::task::JoinHandle<()>>>,
}

impl RuntimeSigner {
    pub fn new(
        store: Arc<ZoneStore>,
        data_dir: &Path,
        config: Arc<crate::config::Config>,
        stop: watch::Receiver<bool>,
    ) -> RuntimeSigner {
        RuntimeSigner {
            store,
            data_dir: data_dir.to_path_buf(),
            config,
            stop,
            tasks: Mutex::new(HashMap::new()),
        }
    }
}

impl crate::dynamic::runtime::RuntimeSigning for RuntimeSigner {
    fn start(&self, zone: &Name, policy: &str) -> Result<(), String> {
        let policy = self
            .config
            .policy(policy)
            .ok_or_else(|| format!("no [[dnssec_policy]] is called {policy:?}"))?;
        let signed = SignedZone {
            zone: zone.clone(),
            policy,
        };
        let now = crate::clock::unix_secs();
        let signer = signer_for(&self.data_dir, &signed, now).map_err(|e| e.to_string())?;
        self.store.set_signer(zone, Some(Arc::new(signer)), now);
        let r = rollover::Rollover {
            zone: signed,
            data_dir: self.data_dir.clone(),
            store: self.store.clone(),
        };
        let task = tokio::spawn(r.run(self.stop.clone(), keys_file::keys_changed().subscribe()));
        let old = self
            .tasks
            .lock()
            .expect("tasks")
            .insert(LowerName::new(zone), task);
        if let Some(old) = old {
            old.abort();
        }
        Ok(())
    }

    fn stop(&self, zone: &Name) {
        if let Some(task) = self
            .tasks
            .lock()
            .expect("tasks")
            .remove(&LowerName::new(zone))
        {
            task.abort();
        }
        self.store.set_signer(zone, None, crate::clock::unix_secs());
    }
}

/// Starts the rollover task of every signed zone.
pub fn start_rollovers(
    store: &Arc<ZoneStore>,
    data_dir: &Path,
    zones: &[SignedZone],
    stop: &watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    zones
        .iter()
        .map(|z| {
            let r = rollover::Rollover {
                zone: z.clone(),
                data_dir: data_dir.to_path_buf(),
                store: store.clone(),
            };
            tokio::spawn(r.run(stop.clone(), keys_file::keys_changed().subscribe()))
        })
        .collect()
}

/// Re-signs, every minute, the signatures that fall due, a thousand
/// names per commit (off the async threads).
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
            let refreshed = tokio::task::spawn_blocking(move || s.refresh_due(now, REFRESH_BATCH))
                .await
                .unwrap_or_default();
            for (zone, commits) in refreshed {
                info!(%zone, commits, "signatures refreshed");
            }
        }
    })
}
