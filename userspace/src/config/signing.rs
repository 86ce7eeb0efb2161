//! Online signing in the configuration: `[[dnssec_policy]]` tables and
//! the zones (`[[zone]]` files, `[[registry.zone]]`) that name one.

use hickory_proto::rr::Name;

use super::{Config, ConfigError, DnssecPolicyConfig};

/// A zone signed online, with its policy.
#[derive(Clone, Debug, PartialEq)]
pub struct SignedZone {
    pub zone: Name,
    pub policy: DnssecPolicyConfig,
}

impl Config {
    /// The policy called `name` (the built-in "default" unless declared).
    pub fn policy(&self, name: &str) -> Option<DnssecPolicyConfig> {
        self.dnssec_policies
            .iter()
            .find(|p| p.name == name)
            .cloned()
            .or_else(|| (name == "default").then(DnssecPolicyConfig::builtin_default))
    }

    /// Every zone signed online, with its policy (the configuration is
    /// validated: every name resolves).
    pub fn signed_zones(&self) -> Vec<SignedZone> {
        let files = self
            .zones
            .iter()
            .filter_map(|z| Some((z.origin_name(), z.dnssec_policy.as_deref()?)));
        let registry = self.registry.iter().flat_map(|r| &r.zones).filter_map(|z| {
            let mut name = Name::from_ascii(&z.name).ok()?;
            name.set_fqdn(true);
            Some((name, z.dnssec_policy.as_deref()?))
        });
        files
            .chain(registry)
            .filter_map(|(zone, p)| {
                Some(SignedZone {
                    zone,
                    policy: self.policy(p)?,
                })
            })
            .collect()
    }

    pub(super) fn validate_signing(&self) -> Result<(), ConfigError> {
        let mut seen = std::collections::HashSet::new();
        for (i, p) in self.dnssec_policies.iter().enumerate() {
            let key = |k: &str| format!("dnssec_policy[{i}].{k}");
            if !seen.insert(p.name.as_str()) {
                return Err(self.invalid(
                    key("name"),
                    format!("policy {:?} is declared twice", p.name),
                ));
            }
            if !matches!(p.algorithm.as_str(), "ecdsap256sha256" | "ed25519") {
                return Err(self.invalid(key("algorithm"), "\"ecdsap256sha256\" or \"ed25519\""));
            }
            if !matches!(p.keys.as_str(), "csk" | "ksk+zsk") {
                return Err(self.invalid(key("keys"), "\"csk\" or \"ksk+zsk\""));
            }
            if p.denial != "nsec" {
                return Err(self.invalid(
                    key("denial"),
                    "only \"nsec\": its denials are pre-signed, so the kernel can answer them",
                ));
            }
            if p.signature_refresh_s >= p.signature_validity_s || p.signature_refresh_s < 3_600 {
                return Err(self.invalid(
                    key("signature_refresh_s"),
                    "at least 3600 and less than signature_validity_s",
                ));
            }
        }
        let named = self
            .zones
            .iter()
            .enumerate()
            .filter_map(|(i, z)| {
                let p = z.dnssec_policy.as_deref()?;
                Some((
                    format!("zone[{i}].dnssec_policy"),
                    p,
                    !z.primaries.is_empty(),
                ))
            })
            .chain(
                self.registry
                    .iter()
                    .flat_map(|r| r.zones.iter().enumerate())
                    .filter_map(|(i, z)| {
                        let p = z.dnssec_policy.as_deref()?;
                        Some((format!("registry.zone[{i}].dnssec_policy"), p, false))
                    }),
            );
        for (key, policy, secondary) in named {
            if secondary {
                return Err(self.invalid(key, "a secondary zone is served as its primary signs it"));
            }
            if self.policy(policy).is_none() {
                return Err(self.invalid(key, format!("no [[dnssec_policy]] named {policy:?}")));
            }
            if self.transfer.data_dir.is_none() {
                return Err(self.invalid(
                    key,
                    "signing keys live under transfer.data_dir, which is not set",
                ));
            }
        }
        Ok(())
    }
}
