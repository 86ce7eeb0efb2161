//! How many instances the registry holds, in all and per owner, kept
//! beside the state so the instance limits are checked in O(1) per write
//! (a scan of 100k instances per registration would not be).

use std::collections::HashMap;

use super::error::RegistryError;
use super::instance::Instance;
use super::model::Limits;
use super::state::{Entry, Registry};

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Census {
    total: usize,
    /// Instances per CNS owner (Binder-only instances have none).
    by_owner: HashMap<String, usize>,
}

fn owner(inst: &Instance) -> Option<&str> {
    inst.reg.owner.as_deref()
}

impl Census {
    pub fn of(registry: &Registry) -> Self {
        let mut c = Census::default();
        for inst in registry.instances.values() {
            c.add(inst);
        }
        c
    }

    /// Whether `registry` may take `next` (a registration, new or
    /// replacing) within `limits`; the error names the limit's key.
    pub fn admit(
        &self,
        limits: &Limits,
        registry: &Registry,
        next: &Instance,
    ) -> Result<(), RegistryError> {
        let before = registry.instances.get(&next.id);
        if before.is_none() && self.total >= limits.max_instances {
            return Err(RegistryError::Invalid {
                field: "id".into(),
                message: format!(
                    "the registry holds {} instances, its limit (registry.limits.max_instances)",
                    limits.max_instances
                ),
            });
        }
        let Some(o) = owner(next) else { return Ok(()) };
        let moves_in = before.and_then(|b| owner(b)) != Some(o);
        let held = self.by_owner.get(o).copied().unwrap_or(0);
        if moves_in && held >= limits.max_instances_per_owner {
            return Err(RegistryError::Invalid {
                field: "owner".into(),
                message: format!(
                    "owner {o:?} holds {held} instances, its limit (registry.limits.max_instances_per_owner)"
                ),
            });
        }
        Ok(())
    }

    /// Instances held, in all.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Instances held by CNS owner `o`.
    pub fn held_by(&self, o: &str) -> usize {
        self.by_owner.get(o).copied().unwrap_or(0)
    }

    /// Follows `entry`, given the instance it replaces or removes.
    pub fn record(&mut self, before: Option<&Instance>, entry: &Entry) {
        match entry {
            Entry::Put { instance } => {
                if let Some(b) = before {
                    self.remove(b);
                }
                self.add(instance);
            }
            Entry::Delete { .. } => {
                if let Some(b) = before {
                    self.remove(b);
                }
            }
            Entry::Renew { .. } | Entry::Owner { .. } => {}
        }
    }

    fn add(&mut self, inst: &Instance) {
        self.total += 1;
        if let Some(o) = owner(inst) {
            *self.by_owner.entry(o.to_string()).or_default() += 1;
        }
    }

    fn remove(&mut self, inst: &Instance) {
        self.total -= 1;
        if let Some(o) = owner(inst) {
            if let Some(n) = self.by_owner.get_mut(o) {
                *n -= 1;
                if *n == 0 {
                    self.by_owner.remove(o);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::InstanceSpec;

    fn put(
        r: &mut Registry,
        c: &mut Census,
        limits: &Limits,
        id: &str,
        owner: &str,
    ) -> Result<(), RegistryError> {
        let spec: InstanceSpec = serde_json::from_str(&format!(
            r#"{{"owner":"{owner}","addresses":["10.0.0.1"],"lease_secs":30}}"#
        ))
        .unwrap();
        let entry = r.register(id, &spec, 0)?;
        let Entry::Put { instance } = &entry else {
            unreachable!()
        };
        c.admit(limits, r, instance)?;
        let before = r.get(id).cloned();
        r.apply(&entry);
        c.record(before.as_ref(), &entry);
        Ok(())
    }

    #[test]
    fn limits_count_instances_in_all_and_per_owner() {
        let limits = Limits {
            max_instances: 3,
            max_instances_per_owner: 2,
            ..Limits::default()
        };
        let (mut r, mut c) = (Registry::default(), Census::default());
        put(&mut r, &mut c, &limits, "a1", "a").unwrap();
        put(&mut r, &mut c, &limits, "a2", "a").unwrap();
        let e = put(&mut r, &mut c, &limits, "a3", "a")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("owner:") && e.contains("max_instances_per_owner"),
            "{e}"
        );
        // Re-registering one already held is not a new instance.
        put(&mut r, &mut c, &limits, "a2", "a").unwrap();
        put(&mut r, &mut c, &limits, "b1", "b").unwrap();
        let e = put(&mut r, &mut c, &limits, "b2", "b")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("id:") && e.contains("registry.limits.max_instances"),
            "{e}"
        );
        // Moving an instance to another owner frees a place at the first.
        put(&mut r, &mut c, &limits, "a2", "b").unwrap();
        put(&mut r, &mut c, &limits, "a2", "a").unwrap();
        let before = r.get("b1").cloned();
        let del = r.deregister("b1").unwrap();
        r.apply(&del);
        c.record(before.as_ref(), &del);
        put(&mut r, &mut c, &limits, "c1", "c").unwrap();
        assert_eq!(c, Census::of(&r), "the census follows what it is told");
    }
}
