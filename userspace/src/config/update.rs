//! `[[update_grant]]` and `[update]`: who may change which zones by
//! RFC 2136 UPDATE, and what becomes of the files of zones that take
//! updates. Grants cover file zones only: registry zones belong to the
//! registry, secondary zones to their primaries.

use std::time::Duration;

use super::error::ConfigError;
use super::file::{Config, MatchKind, UpdateConfig};
use crate::transfer::tsig::TSigner;
use crate::transfer::{Acl, Keyring};
use crate::update::{Grant, NameMatch, UpdatePolicy};
use hickory_proto::rr::{LowerName, Name, RecordType};

impl UpdateConfig {
    /// The quiet period before a write-back, if files are written.
    pub fn file_sync(&self) -> Option<Duration> {
        (self.file_sync_ms > 0).then(|| Duration::from_millis(self.file_sync_ms))
    }
}

impl Config {
    /// The catalog zone's name, when one is configured.
    pub fn catalog_origin(&self) -> Option<Name> {
        let c = self.catalog.as_ref()?;
        fqdn(&c.zone).ok()
    }

    /// The catalog's consumers and the key their NOTIFYs are signed with.
    pub fn catalog_notify(&self) -> Option<(Vec<std::net::SocketAddr>, Option<TSigner>)> {
        let c = self.catalog.as_ref().filter(|c| !c.notify.is_empty())?;
        let ring = self.keyring().unwrap_or_default();
        let key = c
            .notify_key
            .as_deref()
            .and_then(|n| ring.by_name(n).cloned());
        Some((c.notify.clone(), key))
    }

    /// Checks `[catalog]`: its name, its key, its transfer rules.
    pub(super) fn catalog_acl(
        &self,
        ring: &Keyring,
    ) -> Result<Option<(LowerName, Acl)>, ConfigError> {
        let Some(c) = &self.catalog else {
            return Ok(None);
        };
        let origin = fqdn(&c.zone).map_err(|e| self.invalid("catalog.zone", e))?;
        if self.zones.iter().any(|z| z.origin_name() == origin) {
            return Err(self.invalid("catalog.zone", "the catalog cannot be a configured zone"));
        }
        self.key(ring, "catalog.notify_key".into(), &c.notify_key)?;
        match &c.allow_transfer {
            Some(rules) => {
                let acl = self.acl(ring, "catalog.allow_transfer".into(), rules)?;
                Ok(Some((LowerName::new(&origin), acl)))
            }
            None => Ok(None),
        }
    }

    /// File zones that take updates (a grant covers them).
    pub fn update_zones(&self) -> Vec<Name> {
        let policy = &self.settings.transfer.update;
        self.zones
            .iter()
            .filter(|z| z.file.is_some())
            .map(|z| z.origin_name())
            .filter(|o| policy.takes_updates(&LowerName::new(o)))
            .collect()
    }

    /// The update policy (validated against the keys and the zones).
    pub(super) fn update_policy(&self, ring: &Keyring) -> Result<UpdatePolicy, ConfigError> {
        let file_zones: Vec<LowerName> = self
            .zones
            .iter()
            .filter(|z| z.file.is_some())
            .map(|z| LowerName::new(&z.origin_name()))
            .collect();
        if !self.update_grants.is_empty() && self.transfer.data_dir.is_none() {
            return Err(self.invalid(
                "update_grant",
                "updates need transfer.data_dir: an acknowledged update is kept in its journal",
            ));
        }
        let mut grants = Vec::new();
        let key_name = |k: &str| {
            Name::from_ascii(k).map(|mut n| {
                n.set_fqdn(true);
                n
            })
        };
        for (i, g) in self.update_grants.iter().enumerate() {
            let at = |field: &str| format!("update_grant[{i}].{field}");
            if g.key.is_none() && g.from.is_empty() {
                return Err(self.invalid(
                    format!("update_grant[{i}]"),
                    "a grant needs a `key`, `from` prefixes, or both",
                ));
            }
            self.key(ring, at("key"), &g.key)?;
            let mut zones = Vec::new();
            for z in &g.zones {
                let zone = fqdn(z).map_err(|e| self.invalid(at("zones"), e))?;
                let zone = LowerName::new(&zone);
                let registry = self
                    .registry
                    .iter()
                    .flat_map(|r| r.zones.iter())
                    .any(|r| fqdn(&r.name).is_ok_and(|r| LowerName::new(&r) == zone));
                let secondary = self
                    .zones
                    .iter()
                    .any(|c| c.file.is_none() && LowerName::new(&c.origin_name()) == zone);
                if registry || secondary {
                    return Err(self.invalid(
                        at("zones"),
                        format!("{z} is a registry or secondary zone: it takes no updates"),
                    ));
                }
                zones.push(zone);
            }
            let name = match (&g.match_kind, &g.name) {
                (MatchKind::Zone, None) => None,
                (MatchKind::Zone, Some(_)) => {
                    return Err(self.invalid(at("name"), "match = \"zone\" takes no name"))
                }
                (_, None) => return Err(self.invalid(at("name"), "this match needs a name")),
                (_, Some(n)) => Some(fqdn(n).map_err(|e| self.invalid(at("name"), e))?),
            };
            let names = match (g.match_kind, name) {
                (MatchKind::Name, Some(n)) => NameMatch::Exact(LowerName::new(&n)),
                (MatchKind::Subdomain, Some(n)) => NameMatch::Subdomain(LowerName::new(&n)),
                (MatchKind::Wildcard, Some(n)) => NameMatch::wildcard(&n),
                _ => NameMatch::Zone,
            };
            let mut types = Vec::new();
            for t in &g.types {
                if t.eq_ignore_ascii_case("ANY") {
                    types.clear();
                    break;
                }
                let rtype: RecordType = t
                    .to_ascii_uppercase()
                    .parse()
                    .map_err(|_| self.invalid(at("types"), format!("unknown type {t:?}")))?;
                types.push(rtype);
            }
            let key = match &g.key {
                Some(k) => Some(key_name(k).map_err(|e| self.invalid(at("key"), e.to_string()))?),
                None => None,
            };
            grants.push(Grant {
                key,
                from: g.from.clone(),
                zones,
                names,
                types,
            });
        }
        let mut forward = std::collections::HashMap::new();
        for (i, z) in self.zones.iter().enumerate() {
            if !z.forward_updates {
                continue;
            }
            if z.primaries.is_empty() {
                return Err(self.invalid(
                    format!("zone[{i}].forward_updates"),
                    "only a secondary zone (with primaries) forwards its UPDATEs",
                ));
            }
            forward.insert(LowerName::new(&z.origin_name()), z.primaries.clone());
        }
        Ok(UpdatePolicy::new(grants, file_zones).forwarding(forward))
    }
}

fn fqdn(text: &str) -> Result<Name, String> {
    let mut name = Name::from_ascii(text).map_err(|e| format!("{text:?}: {e}"))?;
    name.set_fqdn(true);
    Ok(name)
}
