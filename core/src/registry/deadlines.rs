//! The writer's clock without a scan of every instance: whose lease runs
//! out first, who reported `down`, and each service's members, kept up to
//! date with every applied entry (O(log n) each). A writer wakes after
//! every write and every watch batch; with 100k instances a full pass per
//! wake-up was most of a registration's cost.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use compact_str::CompactString;

use super::health::{self, HealthPolicy};
use super::instance::Instance;
use super::instances::ById;
use super::model::Status;
use super::state::{Entry, Registry, RemovalReason};
use super::Expiry;

/// The index holds the registry's own instances (a pointer each), not
/// copies of their ids: at a million instances, ids in its two largest
/// sets were a tenth of the node's memory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deadlines {
    /// Finite lease expiries, by time then id: the time as it was when
    /// indexed (an instance's own expiry moves in place on renewal). With
    /// etcd, leases are etcd's: none here.
    expiries: BTreeSet<(u64, ById)>,
    /// Instances reported `down`, not disabled.
    down: BTreeSet<CompactString>,
    /// Service key → its members (not disabled). Hashed, not ordered: an
    /// ordered set of a service's thousand members compared ids through
    /// ten instances for every member added, a cache miss each.
    members: HashMap<String, HashSet<ById>>,
}

impl Deadlines {
    pub fn of(reg: &Registry) -> Self {
        let mut d = Deadlines::default();
        for inst in reg.instances.values() {
            d.add(inst);
        }
        d
    }

    /// Renews `inst`'s lease to `to`: moves it here, then in place in
    /// every version of the registry that holds the instance (see
    /// [`Expiry`](super::Expiry)); in that order, since afterwards no
    /// version holds the old expiry.
    pub fn renew(&mut self, inst: &Arc<Instance>, to: u64) {
        self.renewed(inst, inst, inst.expires_at.get(), to);
        inst.expires_at.set(to);
    }

    /// Follows a lease moved from `from` (held by `before`) to `to` (held
    /// by `after`, the same instance or its new version).
    fn renewed(&mut self, before: &Arc<Instance>, after: &Arc<Instance>, from: u64, to: u64) {
        if from == to && Arc::ptr_eq(before, after) {
            return;
        }
        self.expiries.remove(&(from, ById(before.clone())));
        if to != Expiry::NEVER {
            self.expiries.insert((to, ById(after.clone())));
        }
    }

    /// Follows one instance's change (`None`: absent before or after);
    /// renewals go through [`renew`](Self::renew).
    pub fn record(&mut self, before: Option<&Arc<Instance>>, after: Option<&Arc<Instance>>) {
        if let (Some(b), Some(a)) = (before, after) {
            if b.id == a.id && b.status == a.status && b.reg == a.reg {
                // Registered again as it was: only the lease moved, and
                // the index now points at the new version.
                self.renewed(b, a, b.expires_at.get(), a.expires_at.get());
                if !a.reg.disabled {
                    for key in a.service_keys() {
                        if let Some(members) = self.members.get_mut(&key) {
                            members.replace(ById(a.clone()));
                        }
                    }
                }
                return;
            }
        }
        if let Some(b) = before {
            self.remove(b);
        }
        if let Some(a) = after {
            self.add(a);
        }
    }

    fn add(&mut self, inst: &Arc<Instance>) {
        if inst.expires_at.is_finite() {
            self.expiries
                .insert((inst.expires_at.get(), ById(inst.clone())));
        }
        if inst.reg.disabled {
            return;
        }
        if inst.status == Status::Down {
            self.down.insert(inst.id.clone());
        }
        for key in inst.service_keys() {
            self.members
                .entry(key)
                .or_default()
                .insert(ById(inst.clone()));
        }
    }

    fn remove(&mut self, inst: &Arc<Instance>) {
        self.expiries
            .remove(&(inst.expires_at.get(), ById(inst.clone())));
        self.down.remove(&inst.id);
        for key in inst.service_keys() {
            if let Some(ids) = self.members.get_mut(&key) {
                ids.remove(inst.id.as_str());
                if ids.is_empty() {
                    self.members.remove(&key);
                }
            }
        }
    }

    /// The services where some member reported `down` and is still
    /// listed, each with its members present in `reg`: the only services
    /// the policy has anything to decide for.
    fn pending<'a>(&self, reg: &'a Registry) -> BTreeMap<String, Vec<&'a Instance>> {
        let keys: BTreeSet<String> = self
            .down
            .iter()
            .filter_map(|id| reg.instances.get(id))
            .flat_map(|i| i.service_keys().into_iter().filter(|k| i.listed_in(k)))
            .collect();
        keys.into_iter()
            .map(|key| {
                let mut members: Vec<&Instance> = self
                    .members
                    .get(&key)
                    .into_iter()
                    .flatten()
                    .filter_map(|m| reg.instances.get(&m.0.id).map(|i| &**i))
                    .collect();
                // In the order of their ids, on every node alike.
                members.sort_unstable_by(|a, b| a.id.cmp(&b.id));
                (key, members)
            })
            .collect()
    }

    /// The earliest time after `now` at which [`tick`](Self::tick) may
    /// have work (a lease expiry or a hysteresis step) for `reg`, the
    /// registry this index follows.
    pub fn next(&self, reg: &Registry, now: u64, policy: &HealthPolicy) -> Option<u64> {
        let lease = self.expiries.first().map(|(at, _)| *at);
        let health = health::next_wake(self.pending(reg), now, policy);
        lease.into_iter().chain(health).min()
    }

    /// Time-driven changes due at `now`: expired leases (hard removals)
    /// and self-removals the hysteresis policy now allows.
    pub fn tick(&self, reg: &Registry, now: u64, policy: &HealthPolicy) -> Vec<Entry> {
        let expired: Vec<Entry> = self
            .expiries
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|(_, due)| Entry::Delete {
                id: due.0.id.clone(),
                reason: RemovalReason::LeaseExpired,
            })
            .collect();
        let mut live = reg.clone();
        for e in &expired {
            live.apply(e);
        }
        let mut changed: BTreeMap<CompactString, Instance> = BTreeMap::new();
        for (service, id) in health::withdrawals(self.pending(&live), now, policy) {
            let inst = changed
                .entry(id.clone())
                .or_insert_with(|| (*live.instances[id.as_str()]).clone());
            inst.withdrawn.insert(service, now);
        }
        let mut out = expired;
        out.extend(changed.into_values().map(|instance| Entry::Put {
            instance: Box::new(instance),
        }));
        out
    }
}

/// The registry's clock-driven side, for a registry without a kept index
/// (tests; the writers keep a [`Deadlines`] beside their state).
impl Registry {
    /// Time-driven changes due at `now`: expired leases (hard removals) and
    /// self-removals the hysteresis policy now allows.
    pub fn tick(&self, now: u64, policy: &HealthPolicy) -> Vec<Entry> {
        Deadlines::of(self).tick(self, now, policy)
    }

    /// The earliest time after `now` at which [`Registry::tick`] may have
    /// work (a lease expiry or a hysteresis step).
    pub fn next_deadline(&self, now: u64, policy: &HealthPolicy) -> Option<u64> {
        Deadlines::of(self).next(self, now, policy)
    }
}

#[cfg(test)]
impl Deadlines {
    /// Panics unless every instance the index holds is the registry's own
    /// (a superseded version would be kept alive, and its memory with it).
    fn holds_only_the_current_versions(&self, reg: &Registry) {
        let held = self.expiries.iter().map(|(_, d)| &d.0);
        let members = self.members.values().flatten().map(|m| &m.0);
        for inst in held.chain(members) {
            let current = reg.instances.get(&inst.id).expect("indexed and registered");
            assert!(
                Arc::ptr_eq(inst, current),
                "{} is a superseded version",
                inst.id
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::model::InstanceSpec;

    /// An index kept up to date entry by entry through registrations,
    /// status reports, heartbeats, withdrawals, expiries and removals is
    /// the index built from scratch, and decides the same.
    #[test]
    fn the_index_kept_by_entries_is_the_index_built_from_scratch() {
        let p = HealthPolicy::default();
        let mut r = Registry::default();
        let mut d = Deadlines::default();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let (mut expired, mut withdrawn) = (0, 0);
        for step in 0..3000u64 {
            let now = step * 1000;
            let id = format!("i{}", next() % 40);
            let entry = match next() % 6 {
                0 | 1 => {
                    let spec: InstanceSpec = serde_json::from_str(&format!(
                        r#"{{"owner":"o","addresses":["10.0.0.1"],"services":["s{}"],"lease_secs":{},"disabled":{}}}"#,
                        next() % 4,
                        1 + next() % 900,
                        next() % 10 == 0
                    ))
                    .unwrap();
                    r.register(&id, &spec, now).ok()
                }
                2 => {
                    let status = [Status::Down, Status::Up][(next() % 2) as usize];
                    r.set_status(&id, status, now).ok()
                }
                3 => r.heartbeat(&id, now).ok(),
                4 => r.deregister(&id).ok(),
                // The same body again (a registrar's refresh).
                _ => {
                    let spec: InstanceSpec = serde_json::from_str(
                        r#"{"owner":"o","addresses":["10.0.0.1"],"services":["s0"],"lease_secs":60}"#,
                    )
                    .unwrap();
                    r.register(&id, &spec, now).ok()
                }
            };
            let mut entries: Vec<Entry> = entry.into_iter().collect();
            for e in d.tick(&r, now, &p) {
                match &e {
                    Entry::Delete { .. } => expired += 1,
                    _ => withdrawn += 1,
                }
                entries.push(e);
            }
            for e in &entries {
                if let Entry::Renew { id, expires_at } = e {
                    if let Some(inst) = r.instances.get(id) {
                        d.renew(inst, *expires_at);
                    }
                    continue;
                }
                let id = match e {
                    Entry::Put { instance } => Some(instance.id.clone()),
                    Entry::Delete { id, .. } | Entry::Renew { id, .. } => Some(id.clone()),
                    Entry::Owner { .. } => None,
                };
                let before = id.as_ref().and_then(|id| r.instances.get(id).cloned());
                r.apply(e);
                let after = id.as_ref().and_then(|id| r.instances.get(id));
                d.record(before.as_ref(), after);
            }
            let scratch = Deadlines::of(&r);
            d.holds_only_the_current_versions(&r);
            assert_eq!(d, scratch, "step {step}");
            assert_eq!(d.next(&r, now, &p), scratch.next(&r, now, &p));
        }
        assert!(expired > 10 && withdrawn > 10, "{expired} {withdrawn}");
    }
}
