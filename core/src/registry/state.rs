//! Registry state as a pure state machine: operations are validated against
//! the current state and turned into journal [`Entry`]s; applying an entry is
//! deterministic, so replaying the journal rebuilds the same state. Time is
//! a parameter (unix milliseconds), never read here.

use std::collections::BTreeMap;
use std::sync::Arc;

use compact_str::CompactString;
use serde::{Deserialize, Serialize};

use super::error::RegistryError;
use super::expiry::Expiry;
use super::instance::Instance;
use super::instances::Instances;
use super::model::{label, InstanceSpec, Registration, Status};
use super::withdrawals::Withdrawals;

/// A durable state change. Every acknowledged API write is one or more of
/// these, journaled before the reply.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Entry {
    Put {
        instance: Box<Instance>,
    },
    Delete {
        id: CompactString,
        reason: RemovalReason,
    },
    Renew {
        id: CompactString,
        expires_at: u64,
    },
    Owner {
        owner: String,
        enabled: bool,
    },
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RemovalReason {
    Deregistered,
    LeaseExpired,
}

/// Persistent maps: readers get a copy of the whole registry after every
/// commit, and `tick` works on a scratch copy; both cost O(1). Instances
/// are shared between the copies: the first change after a copy copies
/// the path to it, 64 entries a node, so an entry must be cheap to clone
/// (a heartbeat changes one lease).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Registry {
    pub instances: Instances,
    /// Per-owner opt-in flags (CNS `triton_cns_enabled`).
    pub owners: imbl::OrdMap<String, bool>,
}

impl Registry {
    pub fn get(&self, id: &str) -> Option<&Instance> {
        self.instances
            .get(id.to_ascii_lowercase().as_str())
            .map(|i| &**i)
    }

    /// Register or replace instance `id`. A re-registration keeps the
    /// health history so a status it repeats is not a new self-report.
    pub fn register(
        &self,
        id: &str,
        spec: &InstanceSpec,
        now: u64,
    ) -> Result<Entry, RegistryError> {
        let id = label("id", id, false)?;
        if let Some(old) = self.instances.get(id.as_str()) {
            old.refuse_if_mirrored()?;
        }
        let reg = spec.validate()?;
        let expires_at = now + u64::from(reg.lease_secs) * 1000;
        self.put(id, reg, spec.status, expires_at, now)
    }

    /// Registers or replaces the instance that mirrors ZooKeeper node
    /// `node`: no lease (it lives while the node does); `spec.status` down
    /// withdraws it through hysteresis like a self-report.
    pub fn mirror(
        &self,
        id: &str,
        spec: &InstanceSpec,
        node: &str,
        now: u64,
    ) -> Result<Entry, RegistryError> {
        let id = label("id", id, false)?;
        let mut reg = spec.validate()?;
        reg.mirrors = Some(node.into());
        self.put(id, reg, spec.status, u64::MAX, now)
    }

    /// Removes a mirrored instance (its node is gone).
    pub fn unmirror(&self, id: &str) -> Result<Entry, RegistryError> {
        let inst = self.lookup(id)?;
        Ok(Entry::Delete {
            id: inst.id.clone(),
            reason: RemovalReason::Deregistered,
        })
    }

    fn put(
        &self,
        id: String,
        reg: Registration,
        status: Status,
        expires_at: u64,
        now: u64,
    ) -> Result<Entry, RegistryError> {
        let known: Vec<String> = self
            .instances
            .get(id.as_str())
            .map(|i| i.service_keys())
            .unwrap_or_default();
        let mut instance = match self.instances.get(id.as_str()) {
            Some(old) => {
                let mut next = (**old).clone();
                next.reg = reg;
                next.expires_at = Expiry::new(expires_at);
                set_status(&mut next, status, now);
                // Memberships that were dropped leave no withdrawal behind.
                let keys = next.service_keys();
                next.withdrawn.retain(|k| keys.iter().any(|key| key == k));
                next
            }
            None => Instance {
                id: id.into(),
                reg,
                status,
                status_at: now,
                expires_at: Expiry::new(expires_at),
                withdrawn: Withdrawals::default(),
            },
        };
        // A member that joins while down was never listed: it starts
        // withdrawn (at time 0, so it uses no one's hysteresis budget).
        if instance.status == Status::Down {
            for key in instance.service_keys() {
                if !known.contains(&key) {
                    instance.withdrawn.insert_if_absent(key, 0);
                }
            }
        }
        Ok(Entry::Put {
            instance: Box::new(instance),
        })
    }

    pub fn deregister(&self, id: &str) -> Result<Entry, RegistryError> {
        let inst = self.lookup_own(id)?;
        Ok(Entry::Delete {
            id: inst.id.clone(),
            reason: RemovalReason::Deregistered,
        })
    }

    pub fn heartbeat(&self, id: &str, now: u64) -> Result<Entry, RegistryError> {
        let (inst, expires_at) = self.renewal(id, now)?;
        Ok(Entry::Renew {
            id: inst.id.clone(),
            expires_at,
        })
    }

    /// What a heartbeat at `now` renews, shared, and the expiry it sets:
    /// for a writer that applies it at once, with no second lookup (a
    /// lookup among a million ids is most of a renewal's cost).
    pub fn renewal(&self, id: &str, now: u64) -> Result<(&Arc<Instance>, u64), RegistryError> {
        let inst = self
            .instances
            .get(id.to_ascii_lowercase().as_str())
            .ok_or_else(|| RegistryError::NotFound(id.to_ascii_lowercase()))?;
        inst.refuse_if_mirrored()?;
        Ok((inst, now + u64::from(inst.reg.lease_secs) * 1000))
    }

    pub fn set_status(&self, id: &str, status: Status, now: u64) -> Result<Entry, RegistryError> {
        let mut inst = self.lookup_own(id)?.clone();
        set_status(&mut inst, status, now);
        Ok(Entry::Put {
            instance: Box::new(inst),
        })
    }

    pub fn set_owner(&self, owner: &str, enabled: bool) -> Result<Entry, RegistryError> {
        Ok(Entry::Owner {
            owner: label("owner", owner, false)?,
            enabled,
        })
    }

    fn lookup(&self, id: &str) -> Result<&Instance, RegistryError> {
        self.get(id)
            .ok_or_else(|| RegistryError::NotFound(id.to_ascii_lowercase()))
    }

    /// An instance the API may change (not a ZooKeeper mirror).
    fn lookup_own(&self, id: &str) -> Result<&Instance, RegistryError> {
        let inst = self.lookup(id)?;
        inst.refuse_if_mirrored()?;
        Ok(inst)
    }

    pub fn apply(&mut self, entry: &Entry) {
        match entry {
            Entry::Put { instance } => {
                self.instances.insert(Arc::new((**instance).clone()));
            }
            Entry::Delete { id, .. } => {
                self.instances.remove(id);
            }
            Entry::Renew { id, expires_at } => {
                if let Some(i) = self.instances.get(id) {
                    i.expires_at.set(*expires_at);
                }
            }
            Entry::Owner { owner, enabled } => {
                self.owners.insert(owner.clone(), *enabled);
            }
        }
    }

    /// Members of each service key, by id.
    pub fn services(&self) -> BTreeMap<String, Vec<&Instance>> {
        let mut out: BTreeMap<String, Vec<&Instance>> = BTreeMap::new();
        for inst in self.instances.values().filter(|i| !i.reg.disabled) {
            for key in inst.service_keys() {
                out.entry(key).or_default().push(inst);
            }
        }
        out
    }
}

/// A status report: `up` returns the instance to every service at once;
/// `down` only records the report (health decides when it takes effect).
fn set_status(inst: &mut Instance, status: Status, now: u64) {
    if inst.status != status {
        inst.status = status;
        inst.status_at = now;
    }
    if status == Status::Up {
        inst.withdrawn.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::instance::cns_key;
    use crate::registry::HealthPolicy;

    fn spec(json: &str) -> InstanceSpec {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn register_renew_expire() {
        let policy = HealthPolicy::default();
        let mut r = Registry::default();
        let e = r
            .register(
                "Web-1",
                &spec(r#"{"owner":"o","addresses":["10.0.0.1"],"lease_secs":10}"#),
                1_000,
            )
            .unwrap();
        r.apply(&e);
        assert_eq!(r.get("web-1").unwrap().expires_at.get(), 11_000);
        assert!(r.tick(10_999, &policy).is_empty());
        r.apply(&r.heartbeat("WEB-1", 5_000).unwrap());
        assert!(r.tick(11_000, &policy).is_empty(), "renewed");
        assert_eq!(r.next_deadline(11_000, &policy), Some(15_000));
        let expired = r.tick(15_000, &policy);
        assert_eq!(
            expired,
            vec![Entry::Delete {
                id: "web-1".into(),
                reason: RemovalReason::LeaseExpired
            }]
        );
        r.apply(&expired[0]);
        assert!(r.get("web-1").is_none());
        assert!(matches!(
            r.heartbeat("web-1", 0),
            Err(RegistryError::NotFound(_))
        ));
    }

    #[test]
    fn joining_while_down_is_never_listed() {
        let mut r = Registry::default();
        let e = r
            .register("a", &spec(r#"{"owner":"o","addresses":["10.0.0.1"],"services":["web"],"status":"down","lease_secs":10}"#), 0)
            .unwrap();
        r.apply(&e);
        assert!(!r.get("a").unwrap().listed_in(&cns_key("o", "web")));
        r.apply(&r.set_status("a", Status::Up, 5).unwrap());
        assert!(r.get("a").unwrap().listed_in(&cns_key("o", "web")));
    }

    #[test]
    fn entries_round_trip_through_json() {
        let r = Registry::default();
        let e = r
            .register(
                "a",
                &spec(r#"{"owner":"o","addresses":["::1"],"services":["x:80"],"lease_secs":10}"#),
                0,
            )
            .unwrap();
        let text = serde_json::to_string(&e).unwrap();
        assert_eq!(serde_json::from_str::<Entry>(&text).unwrap(), e);
    }
}
