//! `[transfer]`, `[[tsig_key]]` and the per-zone transfer keys, turned into
//! the server's [`TransferPolicy`] and the NOTIFY/secondary task settings.

use std::collections::HashMap;
use std::time::Duration;

use hickory_proto::rr::{LowerName, Name};

use super::error::ConfigError;
use super::file::{Config, TransferConfig};
use crate::transfer::notify::NotifyTargets;
use crate::transfer::secondary::SecondaryZone;
use crate::transfer::tsig::{make_key, TSigner};
use crate::transfer::{Acl, AclRule, Keyring, TransferPolicy};

impl TransferConfig {
    pub fn notify_timeout(&self) -> Duration {
        Duration::from_millis(self.notify_timeout_ms)
    }
    pub fn poll_interval(&self) -> Duration {
        Duration::from_millis(self.poll_interval_ms)
    }
    pub fn poll_timeout(&self) -> Duration {
        Duration::from_secs(self.poll_timeout_secs)
    }
    pub fn primary_timeout(&self) -> Duration {
        Duration::from_millis(self.primary_timeout_ms)
    }
}

impl Config {
    pub(super) fn keyring(&self) -> Result<Keyring, ConfigError> {
        let mut keys = Vec::new();
        for (i, k) in self.tsig_keys.iter().enumerate() {
            let signer = make_key(&k.name, &k.algorithm, &k.secret).map_err(|e| {
                let field = match e {
                    crate::transfer::tsig::KeyError::Name(_) => "name",
                    crate::transfer::tsig::KeyError::Algorithm(_) => "algorithm",
                    crate::transfer::tsig::KeyError::Secret => "secret",
                };
                self.invalid(format!("tsig_key[{i}].{field}"), e.to_string())
            })?;
            let name = LowerName::new(signer.signer_name());
            if keys
                .iter()
                .any(|k: &TSigner| LowerName::new(k.signer_name()) == name)
            {
                return Err(self.invalid(
                    format!("tsig_key[{i}].name"),
                    format!("key {} is defined twice", k.name),
                ));
            }
            keys.push(signer);
        }
        Ok(Keyring::new(keys))
    }

    pub(super) fn key(
        &self,
        ring: &Keyring,
        key: String,
        name: &Option<String>,
    ) -> Result<Option<TSigner>, ConfigError> {
        match name {
            None => Ok(None),
            Some(n) => ring
                .by_name(n)
                .cloned()
                .map(Some)
                .ok_or_else(|| self.invalid(key, format!("no [[tsig_key]] named {n:?}"))),
        }
    }

    pub(super) fn acl(
        &self,
        ring: &Keyring,
        key: String,
        rules: &[AclRule],
    ) -> Result<Acl, ConfigError> {
        for (j, r) in rules.iter().enumerate() {
            if r.from.is_empty() && r.key.is_none() {
                return Err(self.invalid(
                    format!("{key}[{j}]"),
                    "a rule needs `from` prefixes, a `key`, or both (use from = [\"0.0.0.0/0\", \"::/0\"] to allow everyone)",
                ));
            }
            self.key(ring, format!("{key}[{j}].key"), &r.key)?;
        }
        Ok(Acl::new(rules.to_vec()))
    }

    /// Keys and ACLs for the server (validated).
    pub(super) fn transfer_policy(&self) -> Result<TransferPolicy, ConfigError> {
        let keyring = self.keyring()?;
        let default_acl = self.acl(
            &keyring,
            "transfer.allow_transfer".into(),
            &self.transfer.allow_transfer,
        )?;
        let mut zone_acl = HashMap::new();
        let mut notify_acl = HashMap::new();
        for (i, z) in self.zones.iter().enumerate() {
            let origin = LowerName::new(&z.origin_name());
            if let Some(rules) = &z.allow_transfer {
                zone_acl.insert(
                    origin.clone(),
                    self.acl(&keyring, format!("zone[{i}].allow_transfer"), rules)?,
                );
            }
            self.key(&keyring, format!("zone[{i}].notify_key"), &z.notify_key)?;
            if z.primaries.is_empty() {
                continue;
            }
            self.key(&keyring, format!("zone[{i}].primary_key"), &z.primary_key)?;
            let rules = match &z.allow_notify {
                Some(rules) => rules.clone(),
                None => z
                    .primaries
                    .iter()
                    .map(|p| AclRule {
                        from: vec![ipnet::IpNet::from(p.ip())],
                        key: z.primary_key.clone(),
                    })
                    .collect(),
            };
            notify_acl.insert(
                origin,
                self.acl(&keyring, format!("zone[{i}].allow_notify"), &rules)?,
            );
        }
        if let Some(r) = &self.registry {
            for (i, z) in r.zones.iter().enumerate() {
                let Ok(mut name) = Name::from_ascii(&z.name) else {
                    continue;
                };
                // As the zone is served: fully qualified, or a name written
                // without the final dot would never match a query.
                name.set_fqdn(true);
                if let Some(rules) = &z.allow_transfer {
                    let acl = self.acl(
                        &keyring,
                        format!("registry.zone[{i}].allow_transfer"),
                        rules,
                    )?;
                    zone_acl.insert(LowerName::new(&name), acl);
                }
                self.key(
                    &keyring,
                    format!("registry.zone[{i}].notify_key"),
                    &z.notify_key,
                )?;
            }
        }
        let update = self.update_policy(&keyring)?;
        if let Some((origin, acl)) = self.catalog_acl(&keyring)? {
            zone_acl.insert(origin, acl);
        }
        Ok(TransferPolicy {
            keyring,
            default_acl,
            zone_acl,
            notify_acl,
            max_transfers_out: self.transfer.max_transfers_out,
            update,
        })
    }

    /// Zones with secondaries to NOTIFY (file and registry zones).
    pub(super) fn notify_targets(&self) -> Vec<NotifyTargets> {
        let ring = self.keyring().unwrap_or_default();
        let key = |k: &Option<String>| k.as_deref().and_then(|n| ring.by_name(n).cloned());
        let files = self
            .zones
            .iter()
            .filter(|z| !z.notify.is_empty())
            .map(|z| NotifyTargets {
                zone: z.origin_name(),
                secondaries: z.notify.clone(),
                key: key(&z.notify_key),
            });
        let registry = self
            .registry
            .iter()
            .flat_map(|r| r.zones.iter())
            .filter(|z| !z.notify.is_empty())
            .filter_map(|z| {
                let mut zone = Name::from_ascii(&z.name).ok()?;
                zone.set_fqdn(true);
                Some(NotifyTargets {
                    zone,
                    secondaries: z.notify.clone(),
                    key: key(&z.notify_key),
                })
            });
        files.chain(registry).collect()
    }

    /// Zones transferred in from primaries.
    pub(super) fn secondary_zones(&self) -> Vec<SecondaryZone> {
        let ring = self.keyring().unwrap_or_default();
        self.zones
            .iter()
            .filter(|z| !z.primaries.is_empty())
            .map(|z| SecondaryZone {
                zone: z.origin_name(),
                primaries: z.primaries.clone(),
                key: z
                    .primary_key
                    .as_deref()
                    .and_then(|n| ring.by_name(n).cloned()),
            })
            .collect()
    }

    /// Secondary zones read as catalogs (`consume_catalog`).
    pub(super) fn followed_catalogs(&self) -> Vec<SecondaryZone> {
        let followed: Vec<LowerName> = self
            .zones
            .iter()
            .filter(|z| z.consume_catalog)
            .map(|z| LowerName::new(&z.origin_name()))
            .collect();
        self.secondary_zones()
            .into_iter()
            .filter(|z| followed.contains(&LowerName::new(&z.zone)))
            .collect()
    }
}
