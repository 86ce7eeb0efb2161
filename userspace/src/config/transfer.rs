//! `[transfer]`, `[[tsig_key]]` and the per-zone transfer keys, turned into
//! the server's [`TransferPolicy`] and the NOTIFY/secondary task settings.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use hickory_proto::rr::{LowerName, Name};
use serde::Deserialize;

use super::{Config, ConfigError};
use crate::transfer::notify::NotifyTargets;
use crate::transfer::secondary::SecondaryZone;
use crate::transfer::tsig::{make_key, TSigner};
use crate::transfer::{Acl, AclRule, JournalLimits, Keyring, SerialPolicy, TransferPolicy};

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TransferConfig {
    /// IXFR journal and secondary zone copies; relative to the config
    /// file. Absent = kept in memory only (IXFR history and secondary
    /// zones are lost on restart).
    pub data_dir: Option<PathBuf>,
    /// Serials of zones xdpdns owns: "increment" or "unixtime".
    pub serial_policy: SerialPolicy,
    /// Default transfer ACL (zones may override with `allow_transfer`).
    pub allow_transfer: Vec<AclRule>,
    pub journal: JournalLimits,
    /// NOTIFY: attempts per serial and the first retry delay (doubling).
    pub notify_retries: u32,
    pub notify_timeout_ms: u64,
    /// After a NOTIFY, how often and how long each secondary's SOA is
    /// polled until it serves the new serial.
    pub poll_interval_ms: u64,
    pub poll_timeout_secs: u64,
    /// Secondary zones: timeout of each query/transfer to a primary.
    pub primary_timeout_ms: u64,
    /// Outgoing transfers (AXFR/IXFR served) at once; more are REFUSED
    /// (BIND's `transfers-out`).
    pub max_transfers_out: usize,
    /// Incoming transfers (secondary zones refreshing) at once; more wait
    /// (BIND's `transfers-in`).
    pub max_transfers_in: usize,
    /// Records one incoming transfer may carry; a larger one is abandoned
    /// and the zone keeps what it served (BIND's `max-records`).
    pub max_transfer_in_records: usize,
}

impl Default for TransferConfig {
    fn default() -> Self {
        TransferConfig {
            data_dir: None,
            serial_policy: SerialPolicy::default(),
            allow_transfer: vec![AclRule {
                from: vec![
                    "127.0.0.0/8".parse().expect("prefix"),
                    "::1/128".parse().expect("prefix"),
                ],
                key: None,
            }],
            journal: JournalLimits::default(),
            notify_retries: 5,
            notify_timeout_ms: 1_000,
            poll_interval_ms: 500,
            poll_timeout_secs: 300,
            primary_timeout_ms: 10_000,
            max_transfers_out: crate::transfer::MAX_TRANSFERS_OUT,
            max_transfers_in: 10,
            max_transfer_in_records: 10_000_000,
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TsigKeyConfig {
    pub name: String,
    #[serde(default = "default_algorithm")]
    pub algorithm: String,
    /// Base64 secret (as `tsig-keygen` and `keymgr` print it).
    pub secret: String,
}

fn default_algorithm() -> String {
    "hmac-sha256".into()
}

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
    fn keyring(&self) -> Result<Keyring, ConfigError> {
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

    fn key(
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

    fn acl(&self, ring: &Keyring, key: String, rules: &[AclRule]) -> Result<Acl, ConfigError> {
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
        Ok(TransferPolicy {
            keyring,
            default_acl,
            zone_acl,
            notify_acl,
            max_transfers_out: self.transfer.max_transfers_out,
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
}
