//! Key rollovers, the running half: one task per signed zone steps the
//! key timeline (`xdpdns_core::signing::timeline`) when it asks to be
//! woken, creates the successor keys it asks for, asks the parent for
//! its DS records while a DS change is pending, keeps the states in
//! `keys.json` and has the store sign the zone with the new key sets.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::rr::LowerName;
use tokio::sync::watch;
use tracing::{info, warn};
use xdpdns_core::signing::timeline::{self, KeyState, Timings};

use super::keystore;
use crate::clock::unix_secs;
use crate::config::signing::SignedZone;
use crate::zone::ZoneStore;

/// The longest a task sleeps between steps (a clock that jumped is seen).
const MAX_SLEEP: u64 = 3_600;

/// One signed zone's rollovers.
pub struct Rollover {
    pub zone: SignedZone,
    pub data_dir: PathBuf,
    pub store: Arc<ZoneStore>,
}

impl Rollover {
    fn dir(&self) -> PathBuf {
        keystore::zone_dir(&self.data_dir, &self.zone.zone)
    }

    /// The timings of the policy, with the zone's own TTLs.
    fn timings(&self) -> Timings {
        let p = &self.zone.policy;
        let snapshot = self.store.snapshot();
        let zone = snapshot.zone(&LowerName::new(&self.zone.zone));
        let dnskey_ttl = zone.and_then(|z| z.soa()).map_or(3600, |(_, ttl)| ttl);
        let max_ttl = zone
            .map(|z| {
                z.nodes()
                    .flat_map(|(_, n)| n.rrsets().iter().map(|s| s.ttl))
                    .max()
                    .unwrap_or(0)
            })
            .unwrap_or(0);
        Timings {
            zsk_lifetime: p.zsk_lifetime_s,
            ksk_lifetime: p.ksk_lifetime_s,
            propagation: p.propagation_delay_s,
            dnskey_ttl: u64::from(dnskey_ttl),
            max_ttl: u64::from(max_ttl),
            ds_ttl: p.parent_ds_ttl_s,
            check_interval: p.parent_check_interval_s,
            algorithm: keystore::algorithm_number(&p.algorithm),
        }
    }

    /// The tags of the DS records a parent serves for the zone (the first
    /// that answers), or `None` without a parent or an answer.
    async fn parent_ds(&self) -> Option<Vec<u16>> {
        for &server in &self.zone.policy.parent {
            match crate::transfer::client::ds_tags(server, &self.zone.zone, Duration::from_secs(3))
                .await
            {
                Ok(tags) => return Some(tags),
                Err(e) => warn!(zone = %self.zone.zone, %server, "asking the parent for DS: {e}"),
            }
        }
        None
    }

    /// One step at `now`: returns when to step again.
    pub async fn step(&self, now: u64) -> Result<u64, keystore::KeyError> {
        let _file = super::keys_file::KEYS_FILE.lock().await;
        let dir = self.dir();
        let mut entries = keystore::list(&dir)?;
        let mut timed: Vec<timeline::TimedKey> =
            entries.iter().map(keystore::KeyEntry::timed).collect();
        // A DS change is pending: a successor waits for its DS, a
        // predecessor's DS is to go, or an algorithm rollover is under way.
        let policy_algorithm = keystore::algorithm_number(&self.zone.policy.algorithm);
        let algorithm_rollover = timed
            .iter()
            .any(|k| k.state != KeyState::Removed && k.algorithm != policy_algorithm);
        let pending = algorithm_rollover
            || timed.iter().any(|k| {
                k.role.signs_keys()
                    && ((k.state == KeyState::Published && k.ds_seen.is_none())
                        || k.state == KeyState::Retired)
            });
        let parent = match pending && !self.zone.policy.parent.is_empty() {
            true => self.parent_ds().await,
            false => None,
        };
        let t = self.timings();
        let mut s = timeline::step(&mut timed, &t, parent.as_deref(), now);
        let mut changed = s.changed;
        if !s.introduce.is_empty() {
            for &role in &s.introduce {
                let entry = keystore::create_key(&dir, role, &self.zone.policy, now)?;
                info!(zone = %self.zone.zone, role = ?role, tag = entry.tag, algorithm = %entry.algorithm,
                      "algorithm rollover: new key signing, not yet published");
                timeline::add_introduced(&mut timed, entry.tag, role, policy_algorithm, now);
                entries.push(entry);
            }
            s = timeline::step(&mut timed, &t, parent.as_deref(), now);
            changed = true;
        }
        if let Some(role) = s.create {
            let entry = keystore::create_key(&dir, role, &self.zone.policy, now)?;
            info!(zone = %self.zone.zone, role = ?role, tag = entry.tag, "rollover: successor key published");
            timeline::add_successor(&mut timed, entry.tag, role, now);
            entries.push(entry);
            s = timeline::step(&mut timed, &t, parent.as_deref(), now);
            changed = true;
        }
        // A DS first seen at the parent is kept even when no key changes
        // state (the wait for its TTL counts from then).
        let ds_noted = entries
            .iter()
            .zip(&timed)
            .any(|(e, k)| e.ds_seen != k.ds_seen);
        if changed || ds_noted {
            for (e, k) in entries.iter_mut().zip(&timed) {
                if e.state != k.state {
                    info!(zone = %self.zone.zone, tag = k.tag, role = ?k.role, state = ?k.state, "key state");
                }
                e.set_timed(k);
            }
            keystore::save(&dir, &entries)?;
        }
        if changed {
            let signer = super::signer::signer_from(&self.zone, &dir, &entries)?;
            self.store
                .set_signer(&self.zone.zone, Some(Arc::new(signer)), now);
        }
        Ok(s.wake_at.min(now + MAX_SLEEP))
    }

    /// Steps until `stop`, and at once when `keys_changed` says the keys'
    /// file was changed by hand (`ctl keys --ds-published`).
    pub async fn run(
        self,
        mut stop: watch::Receiver<bool>,
        mut keys_changed: watch::Receiver<u64>,
    ) {
        loop {
            let now = unix_secs();
            let wake = match self.step(now).await {
                Ok(at) => at,
                Err(e) => {
                    warn!(zone = %self.zone.zone, "key rollover step failed: {e}");
                    now + 60
                }
            };
            let wait = Duration::from_secs(wake.saturating_sub(unix_secs()).max(1));
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = keys_changed.changed() => {}
                _ = stop.changed() => return,
            }
        }
    }
}
