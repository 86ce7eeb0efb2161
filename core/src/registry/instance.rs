//! One registered instance: what it registered and its health
//! bookkeeping, and the hysteresis groups it belongs to.

use compact_str::CompactString;
use serde::{Deserialize, Serialize};

use super::error::RegistryError;
use super::expiry::Expiry;
use super::model::{Registration, Status};
use super::withdrawals::Withdrawals;

/// One registered instance and its health bookkeeping.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub struct Instance {
    pub id: CompactString,
    pub reg: Registration,
    pub status: Status,
    /// When `status` last changed (self-report time, for hysteresis).
    pub status_at: u64,
    /// When the lease runs out (renewed in place, see [`Expiry`]).
    pub expires_at: Expiry,
    /// Services this instance has been withdrawn from by its own `down`
    /// report, with the time each withdrawal took effect.
    #[serde(default)]
    pub withdrawn: Withdrawals,
}

// With its reference counts, an instance fits a 224-byte allocation
// class (the next is 256): a node with a million holds each once, and
// they are the largest part of its registry.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Instance>() <= 208);

impl Instance {
    /// Service keys this instance is a member of (see [`service_keys`]).
    pub fn service_keys(&self) -> Vec<String> {
        service_keys(&self.reg)
    }

    pub(crate) fn refuse_if_mirrored(&self) -> Result<(), RegistryError> {
        match &self.reg.mirrors {
            Some(node) => Err(RegistryError::Mirrored {
                id: self.id.to_string(),
                node: node.to_string(),
            }),
            None => Ok(()),
        }
    }

    /// Whether the instance is currently listed in `service`.
    pub fn listed_in(&self, service: &str) -> bool {
        !self.withdrawn.contains(service)
    }
}

/// Hysteresis groups: CNS `(owner, service)` and Binder service domains.
pub fn service_keys(reg: &Registration) -> Vec<String> {
    let mut keys: Vec<String> = match &reg.owner {
        Some(owner) => reg
            .services
            .iter()
            .map(|m| cns_key(owner, &m.name))
            .collect(),
        None => Vec::new(),
    };
    if let Some(b) = &reg.binder {
        if b.host_type.serviceable() {
            keys.push(binder_key(&b.domain));
        }
    }
    keys.sort();
    keys.dedup();
    keys
}

pub fn cns_key(owner: &str, service: &str) -> String {
    format!("cns:{owner}:{service}")
}

pub fn binder_key(domain: &str) -> String {
    format!("binder:{domain}")
}
