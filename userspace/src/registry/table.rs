//! The generated records, kept incrementally: every RRset remembers which
//! instances contributed what, so a change to one instance recomputes only
//! the RRsets it touches (its own names and the services it is in), not the
//! whole registry. Pure.

use std::collections::{BTreeMap, HashMap, HashSet};

use hickory_proto::rr::{Name, RData, Record, RecordType};

use super::model::BinderService;
use super::naming::{binder_service, Contribution, Naming};
use super::state::Registry;
use crate::zone::Zone;

pub type SetKey = (Name, RecordType);

#[derive(Default)]
pub struct Table {
    /// RRset → contributing instance → its records (TTL, data).
    sets: HashMap<SetKey, BTreeMap<String, Vec<(u32, RData)>>>,
    /// Instance → the RRsets it contributes to.
    by_instance: HashMap<String, Vec<SetKey>>,
    /// Instance → its Binder domain, and each domain's service definition
    /// as last computed (a change re-derives every member of the domain).
    binder_domain: HashMap<String, String>,
    binder_defs: HashMap<String, Option<BinderService>>,
}

impl Table {
    pub fn build(naming: &Naming, reg: &Registry) -> Table {
        let mut t = Table::default();
        t.update(naming, reg, reg.instances.keys().cloned());
        t
    }

    /// Re-derives the records of the `changed` instances (present or gone
    /// in `reg`) and returns the RRsets that may differ.
    pub fn update(
        &mut self,
        naming: &Naming,
        reg: &Registry,
        changed: impl IntoIterator<Item = String>,
    ) -> Vec<SetKey> {
        let mut ids: HashSet<String> = changed.into_iter().collect();
        // A Binder domain whose service definition changed: every member's
        // SRV and A records depend on it.
        let mut domains: HashSet<String> = HashSet::new();
        for id in &ids {
            if let Some(d) = self.binder_domain.get(id) {
                domains.insert(d.clone());
            }
            if let Some(b) = reg.instances.get(id).and_then(|i| i.reg.binder.as_ref()) {
                domains.insert(b.domain.clone());
            }
        }
        for d in domains {
            let def = binder_service(reg, &d).cloned();
            if self.binder_defs.get(&d) == Some(&def) {
                continue;
            }
            let members: Vec<String> = reg
                .instances
                .values()
                .filter(|i| i.reg.binder.as_ref().is_some_and(|b| b.domain == d))
                .map(|i| i.id.clone())
                .collect();
            if members.is_empty() {
                self.binder_defs.remove(&d);
            } else {
                self.binder_defs.insert(d, def);
            }
            ids.extend(members);
        }
        let mut affected: Vec<SetKey> = Vec::new();
        for id in ids {
            for key in self.by_instance.remove(&id).unwrap_or_default() {
                if let Some(set) = self.sets.get_mut(&key) {
                    set.remove(&id);
                    if set.is_empty() {
                        self.sets.remove(&key);
                    }
                }
                affected.push(key);
            }
            self.binder_domain.remove(&id);
            let Some(inst) = reg.instances.get(&id) else {
                continue;
            };
            if let Some(b) = &inst.reg.binder {
                self.binder_domain.insert(id.clone(), b.domain.clone());
            }
            let mut mine: BTreeMap<SetKey, Vec<(u32, RData)>> = BTreeMap::new();
            for Contribution { name, ttl, data } in naming.contributions(reg, inst) {
                mine.entry((name, data.record_type()))
                    .or_default()
                    .push((ttl, data));
            }
            let keys: Vec<SetKey> = mine.keys().cloned().collect();
            for (key, recs) in mine {
                self.sets.entry(key).or_default().insert(id.clone(), recs);
            }
            affected.extend(keys.iter().cloned());
            self.by_instance.insert(id, keys);
        }
        affected.sort();
        affected.dedup();
        affected
    }

    /// The RRset as served: the union of its contributors' records with
    /// the least TTL. A PTR set keeps one record (one name per address):
    /// the shortest target, then the first in order.
    pub fn rrset(&self, key: &SetKey) -> Option<(u32, Vec<RData>)> {
        let set = self.sets.get(key)?;
        let ttl = set.values().flatten().map(|(t, _)| *t).min()?;
        let mut seen: HashSet<&RData> = HashSet::new();
        let mut data: Vec<RData> = Vec::new();
        for (_, d) in set.values().flatten() {
            if seen.insert(d) {
                data.push(d.clone());
            }
        }
        if key.1 == RecordType::PTR {
            data.sort_by_key(|d| match d {
                RData::PTR(p) => (p.0.len(), p.0.to_string()),
                _ => (usize::MAX, String::new()),
            });
            data.truncate(1);
        }
        Some((ttl, data))
    }

    /// Every registry zone, SOA serial 0.
    pub fn zones(&self, naming: &Naming) -> Vec<Zone> {
        let mut zones: BTreeMap<Name, Zone> = naming
            .zones
            .iter()
            .map(|z| (z.name.clone(), naming.empty_zone(&z.name)))
            .collect();
        for key in self.sets.keys() {
            let (Some(origin), Some((ttl, data))) = (naming.zone_of(&key.0), self.rrset(key))
            else {
                continue;
            };
            let zone = zones.get_mut(origin).expect("configured zone");
            for d in data {
                let _ = zone.insert(Record::from_rdata(key.0.clone(), ttl, d));
            }
        }
        zones.into_values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::model::InstanceSpec;

    /// Incremental updates end where a full rebuild does.
    #[test]
    fn incremental_matches_full_rebuild() {
        let naming = crate::registry::naming::tests::naming();
        let mut reg = Registry::default();
        reg.apply(&reg.set_owner("acme", true).unwrap());
        let mut table = Table::build(&naming, &reg);
        let specs = [
            (
                "a",
                r#"{"owner":"acme","addresses":["10.0.0.1"],"services":["web:80"],"lease_secs":60}"#,
            ),
            (
                "b",
                r#"{"owner":"acme","addresses":["10.0.0.1","165.225.0.9"],"services":["web:80","db"],"lease_secs":60}"#,
            ),
            (
                "c",
                r#"{"addresses":["172.27.10.72"],"lease_secs":60,"binder":{"domain":"example.joyent.us","type":"load_balancer","ttl":20,"service":{"srvce":"_http","proto":"_tcp","port":80,"ttl":60}}}"#,
            ),
            (
                "d",
                r#"{"addresses":["172.27.10.73"],"lease_secs":60,"binder":{"domain":"example.joyent.us","type":"load_balancer","ttl":40}}"#,
            ),
            (
                "a",
                r#"{"owner":"acme","addresses":["10.0.0.2"],"services":["web:81"],"lease_secs":60}"#,
            ),
            (
                "c",
                r#"{"addresses":["172.27.10.72"],"lease_secs":60,"binder":{"domain":"example.joyent.us","type":"load_balancer","ttl":20,"service":{"srvce":"_http","proto":"_tcp","port":8080}}}"#,
            ),
        ];
        let check = |table: &Table, reg: &Registry| {
            let full = Table::build(&naming, reg);
            let mut a: Vec<_> = full
                .sets
                .keys()
                .map(|k| (k.clone(), full.rrset(k)))
                .collect();
            let mut b: Vec<_> = table
                .sets
                .keys()
                .map(|k| (k.clone(), table.rrset(k)))
                .collect();
            a.sort_by(|x, y| x.0.cmp(&y.0));
            b.sort_by(|x, y| x.0.cmp(&y.0));
            assert_eq!(format!("{a:?}"), format!("{b:?}"));
        };
        for (id, json) in specs {
            let spec: InstanceSpec = serde_json::from_str(json).unwrap();
            let e = reg.register(id, &spec, 0).unwrap();
            reg.apply(&e);
            table.update(&naming, &reg, [id.to_string()]);
            check(&table, &reg);
        }
        for id in ["c", "b"] {
            reg.apply(&reg.deregister(id).unwrap());
            table.update(&naming, &reg, [id.to_string()]);
            check(&table, &reg);
        }
        // The service definition moved from c (gone) to nobody: d's
        // service records went with it.
        assert!(table
            .sets
            .keys()
            .all(|k| k.1 != RecordType::SRV || k.0.to_string().contains("svc")));
    }
}
