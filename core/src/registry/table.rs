//! The generated records, kept incrementally: every RRset remembers which
//! instances contributed what, and how many contribute each record, so a
//! change to one instance yields the record changes of the RRsets it
//! touches (its own names and the services it is in) in time proportional
//! to what changed, not to the size of those RRsets (a service with
//! thousands of members). Pure.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use hickory_proto::rr::{LowerName, Name, RData, Record, RecordType};

use super::model::BinderService;
use super::naming::{Contribution, Naming};
use super::state::{Instance, Registry};
use crate::zone::{packed, Change, Zone};

/// The derivation table's maps, hashed with foldhash (seeded per map):
/// SipHash over every name and record was a tenth of rebuilding the table
/// for a million instances.
type FoldMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

pub type SetKey = (Name, RecordType);

/// A record's data as the sets keep it, each record twice (in its
/// contributor's list and in the counts): addresses inline, anything else
/// in wire form, where hickory's `RData` is 184 bytes by value. The wire
/// form compares as the `RData` does because the names the registry
/// writes are lower-cased when registered (`model::label`, `domain`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Rec {
    V4([u8; 4]),
    V6([u8; 16]),
    Wire(Box<[u8]>),
    /// What does not encode (never, for the registry's records).
    Other(Box<RData>),
}

impl Rec {
    fn new(d: RData) -> Rec {
        match d {
            RData::A(a) => Rec::V4(a.0.octets()),
            RData::AAAA(a) => Rec::V6(a.0.octets()),
            other => match packed::encode(&other) {
                Ok(wire) => Rec::Wire(wire.as_slice().into()),
                Err(_) => Rec::Other(Box::new(other)),
            },
        }
    }

    /// The record data, of type `rtype`.
    fn data(&self, rtype: RecordType) -> RData {
        use hickory_proto::rr::rdata::{A, AAAA};
        match self {
            Rec::V4(b) => RData::A(A::from(std::net::Ipv4Addr::from(*b))),
            Rec::V6(b) => RData::AAAA(AAAA::from(std::net::Ipv6Addr::from(*b))),
            Rec::Wire(wire) => packed::decode(rtype, wire),
            Rec::Other(d) => (**d).clone(),
        }
    }
}

/// One contributor's records (TTL, data).
type Recs = Box<[(u32, Rec)]>;

/// Contributing instance → its records, in id order. Most sets have one
/// contributor (an instance's own names): that one is kept without a map.
#[derive(Default)]
enum Contributors {
    #[default]
    None,
    One(String, Recs),
    Many(BTreeMap<String, Recs>),
}

impl Contributors {
    fn insert(&mut self, id: String, recs: Recs) {
        *self = match std::mem::take(self) {
            Contributors::None => Contributors::One(id, recs),
            Contributors::One(only, _) if only == id => Contributors::One(id, recs),
            Contributors::One(only, theirs) => {
                Contributors::Many(BTreeMap::from([(only, theirs), (id, recs)]))
            }
            Contributors::Many(mut all) => {
                all.insert(id, recs);
                Contributors::Many(all)
            }
        };
    }

    fn remove(&mut self, id: &str) -> Option<Recs> {
        match std::mem::take(self) {
            Contributors::One(only, recs) if only == id => Some(recs),
            Contributors::Many(mut all) => {
                let recs = all.remove(id);
                *self = match all.len() {
                    0 => Contributors::None,
                    _ => Contributors::Many(all),
                };
                recs
            }
            other => {
                *self = other;
                None
            }
        }
    }

    fn is_empty(&self) -> bool {
        matches!(self, Contributors::None)
    }

    /// Every contributor's records, in id order.
    fn records(&self) -> Box<dyn Iterator<Item = &(u32, Rec)> + '_> {
        match self {
            Contributors::None => Box::new(std::iter::empty()),
            Contributors::One(_, recs) => Box::new(recs.iter()),
            Contributors::Many(all) => Box::new(all.values().flat_map(|r| r.iter())),
        }
    }
}

/// One generated RRset: who contributes what, and the union's bookkeeping.
#[derive(Default)]
struct Set {
    by: Contributors,
    /// How many contributions give each record data.
    counts: FoldMap<Rec, u32>,
    /// How many contributions carry each TTL, by TTL (the set's TTL is
    /// the least; a set has one or a few).
    ttls: Vec<(u32, u32)>,
}

impl Set {
    fn ttl(&self) -> Option<u32> {
        self.ttls.first().map(|&(ttl, _)| ttl)
    }

    fn is_empty(&self) -> bool {
        self.by.is_empty()
    }

    /// Adds `id`'s records; what appears goes into `delta` when tracked.
    fn add(&mut self, id: String, recs: Recs, mut delta: Option<&mut Delta>) {
        for (ttl, d) in recs.iter() {
            match self.ttls.binary_search_by_key(ttl, |&(t, _)| t) {
                Ok(i) => self.ttls[i].1 += 1,
                Err(i) => self.ttls.insert(i, (*ttl, 1)),
            }
            let n = self.counts.entry(d.clone()).or_default();
            *n += 1;
            if *n == 1 {
                if let Some(delta) = delta.as_mut() {
                    delta.appeared(d);
                }
            }
        }
        self.by.insert(id, recs);
    }

    fn remove(&mut self, id: &str, mut delta: Option<&mut Delta>) {
        for (ttl, d) in self.by.remove(id).unwrap_or_default() {
            if let Ok(i) = self.ttls.binary_search_by_key(&ttl, |&(t, _)| t) {
                self.ttls[i].1 -= 1;
                if self.ttls[i].1 == 0 {
                    self.ttls.remove(i);
                }
            }
            if let Some(n) = self.counts.get_mut(&d) {
                *n -= 1;
                if *n == 0 {
                    self.counts.remove(&d);
                    if let Some(delta) = delta.as_mut() {
                        delta.vanished(d);
                    }
                }
            }
        }
    }

    /// The union of the contributions (of type `rtype`), in contributor
    /// order, each data once.
    fn data(&self, rtype: RecordType) -> Vec<RData> {
        let mut seen: HashSet<&Rec, foldhash::fast::RandomState> = HashSet::default();
        let mut data: Vec<RData> = Vec::new();
        for (_, d) in self.by.records() {
            if seen.insert(d) {
                data.push(d.data(rtype));
            }
        }
        data
    }
}

/// What one update did to one RRset's data.
#[derive(Default)]
struct Delta {
    ttl_before: Option<u32>,
    gone: Vec<Rec>,
    new: Vec<Rec>,
}

impl Delta {
    fn appeared(&mut self, d: &Rec) {
        match self.gone.iter().position(|g| g == d) {
            Some(i) => {
                self.gone.swap_remove(i);
            }
            None => self.new.push(d.clone()),
        }
    }

    fn vanished(&mut self, d: Rec) {
        match self.new.iter().position(|n| *n == d) {
            Some(i) => {
                self.new.swap_remove(i);
            }
            None => self.gone.push(d),
        }
    }
}

/// The record changes of one RRset after an update, or `Recompute` for a
/// set whose served records are a selection, not a union (PTR: one
/// record), to be compared with what is served.
pub enum SetChange {
    Changes(Vec<Change>),
    Recompute,
}

#[derive(Default)]
pub struct Table {
    /// RRset → its contributions (boxed: the map's spare slots then
    /// cost a pointer, not a set).
    sets: FoldMap<SetKey, Box<Set>>,
    /// Instance → the RRsets it contributes to.
    by_instance: FoldMap<String, Box<[SetKey]>>,
    /// Instance → its Binder domain, and each domain's service definition
    /// as last computed (a change re-derives every member of the domain).
    binder_domain: HashMap<String, String>,
    binder_defs: HashMap<String, Option<BinderService>>,
    /// Each Binder domain's members by id (the first that carries a
    /// service record defines the service).
    domain_members: HashMap<String, BTreeSet<String>>,
}

impl Table {
    pub fn build(naming: &Naming, reg: &Registry) -> Table {
        let mut t = Table::default();
        // Binder domains first (their members' records depend on them),
        // then every instance in map order: nothing is served before, so
        // there are no per-RRset changes to track (for 100k instances
        // they were most of the build), and no instance is looked up by
        // id (at a million, those lookups alone took seconds).
        let binder = reg
            .instances
            .iter()
            .filter(|(_, i)| i.reg.binder.is_some())
            .map(|(id, _)| id.clone());
        t.derive_domains(reg, binder.collect());
        for (id, inst) in reg.instances.iter() {
            t.contribute(naming, reg, id, inst, None);
        }
        t
    }

    /// Re-derives the records of the `changed` instances (present or gone
    /// in `reg`) and returns what changed in each RRset they touch.
    pub fn update(
        &mut self,
        naming: &Naming,
        reg: &Registry,
        changed: impl IntoIterator<Item = String>,
    ) -> Vec<(SetKey, SetChange)> {
        self.derive(naming, reg, changed, true)
    }

    /// [`update`](Self::update), returning the changes only if `tracked`.
    fn derive(
        &mut self,
        naming: &Naming,
        reg: &Registry,
        changed: impl IntoIterator<Item = String>,
        tracked: bool,
    ) -> Vec<(SetKey, SetChange)> {
        let ids: HashSet<String> = changed.into_iter().collect();
        let ids = self.derive_domains(reg, ids);
        let mut deltas: BTreeMap<SetKey, Delta> = BTreeMap::new();
        for id in ids {
            for key in self.by_instance.remove(&id).unwrap_or_default().into_vec() {
                let delta = tracked.then(|| track(&mut deltas, &self.sets, &key));
                if let Some(set) = self.sets.get_mut(&key) {
                    set.remove(&id, delta);
                    if set.is_empty() {
                        self.sets.remove(&key);
                    }
                }
            }
            if let Some(inst) = reg.instances.get(&id) {
                let deltas = tracked.then_some(&mut deltas);
                self.contribute(naming, reg, &id, inst, deltas);
            }
        }
        deltas
            .into_iter()
            .map(|(key, delta)| {
                let change = self.changes(&key, delta);
                (key, change)
            })
            .collect()
    }

    /// Follows the Binder domain membership of `ids` and returns them with
    /// every member of a domain whose service definition changed (its
    /// members' SRV and A records depend on it).
    fn derive_domains(&mut self, reg: &Registry, mut ids: HashSet<String>) -> HashSet<String> {
        // Domain membership first: the service definitions below depend
        // on who is in each domain now.
        let mut domains: HashSet<String> = HashSet::new();
        for id in &ids {
            if let Some(d) = self.binder_domain.remove(id) {
                if let Some(members) = self.domain_members.get_mut(&d) {
                    members.remove(id);
                    if members.is_empty() {
                        self.domain_members.remove(&d);
                    }
                }
                domains.insert(d);
            }
            if let Some(b) = reg.instances.get(id).and_then(|i| i.reg.binder.as_ref()) {
                self.binder_domain.insert(id.clone(), b.domain.clone());
                self.domain_members
                    .entry(b.domain.clone())
                    .or_default()
                    .insert(id.clone());
                domains.insert(b.domain.clone());
            }
        }
        // A Binder domain whose service definition changed: every member's
        // SRV and A records depend on it.
        for d in domains {
            let members = self.domain_members.get(&d);
            let def = members.and_then(|m| {
                m.iter()
                    .filter_map(|id| reg.instances.get(id))
                    .filter(|i| !i.reg.disabled)
                    .find_map(|i| i.reg.binder.as_ref()?.service.clone())
            });
            if self.binder_defs.get(&d) == Some(&def) {
                continue;
            }
            match members {
                None => {
                    self.binder_defs.remove(&d);
                }
                Some(m) => {
                    ids.extend(m.iter().cloned());
                    self.binder_defs.insert(d, def);
                }
            }
        }
        ids
    }

    /// Adds `inst`'s records to the sets (none of them there yet), noting
    /// what appears in `deltas` when given.
    fn contribute(
        &mut self,
        naming: &Naming,
        reg: &Registry,
        id: &str,
        inst: &Instance,
        mut deltas: Option<&mut BTreeMap<SetKey, Delta>>,
    ) {
        let service = inst
            .reg
            .binder
            .as_ref()
            .and_then(|b| self.binder_defs.get(&b.domain)?.as_ref());
        let mut mine: BTreeMap<SetKey, Vec<(u32, Rec)>> = BTreeMap::new();
        for Contribution { name, ttl, data } in naming.contributions_in(reg, inst, service) {
            mine.entry((name, data.record_type()))
                .or_default()
                .push((ttl, Rec::new(data)));
        }
        let keys: Box<[SetKey]> = mine.keys().cloned().collect();
        for (key, recs) in mine {
            let delta = deltas.as_mut().map(|d| track(d, &self.sets, &key));
            let recs = recs.into_boxed_slice();
            self.sets
                .entry(key)
                .or_default()
                .add(id.to_string(), recs, delta);
        }
        self.by_instance.insert(id.to_string(), keys);
    }

    /// The record changes `delta` made to the RRset `key`. A changed TTL
    /// (one per RRset) rewrites the whole set.
    fn changes(&self, key: &SetKey, delta: Delta) -> SetChange {
        if key.1 == RecordType::PTR {
            return SetChange::Recompute;
        }
        let set = self.sets.get(key);
        let ttl_after = set.and_then(|s| s.ttl());
        let record = |ttl: u32, d: Rec| Record::from_rdata(key.0.clone(), ttl, d.data(key.1));
        let mut out = Vec::new();
        if let Some(before) = delta.ttl_before {
            out.extend(
                delta
                    .gone
                    .into_iter()
                    .map(|d| Change::Remove(record(before, d))),
            );
        }
        if let Some(after) = ttl_after {
            if delta.ttl_before.is_some_and(|b| b != after) {
                let all = set.map(|s| s.data(key.1)).unwrap_or_default();
                let add = |d| Change::Add(Record::from_rdata(key.0.clone(), after, d));
                out.extend(all.into_iter().map(add));
            } else {
                out.extend(delta.new.into_iter().map(|d| Change::Add(record(after, d))));
            }
        }
        SetChange::Changes(out)
    }

    /// The RRset as served: the union of its contributors' records with
    /// the least TTL. A PTR set keeps one record (one name per address):
    /// the shortest target, then the first in order.
    pub fn rrset(&self, key: &SetKey) -> Option<(u32, Vec<RData>)> {
        let set = self.sets.get(key)?;
        let ttl = set.ttl()?;
        let mut data = set.data(key.1);
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
            let _ = zone.insert_set(&LowerName::new(&key.0), key.1, ttl, &data);
        }
        zones.into_values().collect()
    }
}

/// The delta of RRset `key` in this update, begun with the set's TTL as it
/// was before the update touched it.
fn track<'d>(
    deltas: &'d mut BTreeMap<SetKey, Delta>,
    sets: &FoldMap<SetKey, Box<Set>>,
    key: &SetKey,
) -> &'d mut Delta {
    deltas.entry(key.clone()).or_insert_with(|| Delta {
        ttl_before: sets.get(key).and_then(|s| s.ttl()),
        ..Delta::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::model::InstanceSpec;

    /// One contributor is kept without a map; the second makes one; ids
    /// stay in order, a second insert of an id replaces its records, and
    /// the last removal leaves the set empty.
    #[test]
    fn contributors_keep_id_order_from_one_to_many_and_back() {
        let recs = |n: u8| -> Recs { Box::new([(30, Rec::V4([10, 0, 0, n]))]) };
        let listed = |c: &Contributors| c.records().map(|(_, r)| r.clone()).collect::<Vec<_>>();
        let mut c = Contributors::default();
        c.insert("b".into(), recs(2));
        c.insert("b".into(), recs(3));
        assert!(matches!(c, Contributors::One(..)));
        assert_eq!(listed(&c), [Rec::V4([10, 0, 0, 3])]);
        c.insert("a".into(), recs(1));
        assert_eq!(listed(&c), [Rec::V4([10, 0, 0, 1]), Rec::V4([10, 0, 0, 3])]);
        assert!(c.remove("zz").is_none(), "not a contributor");
        assert_eq!(c.remove("b").as_deref(), Some(&recs(3)[..]));
        assert!(c.remove("b").is_none());
        assert_eq!(c.remove("a").as_deref(), Some(&recs(1)[..]));
        assert!(c.is_empty());
        assert!(c.remove("a").is_none());
    }

    /// Addresses are kept inline and read back as the records they were.
    #[test]
    fn records_read_back_as_they_went_in() {
        for text in ["192.0.2.1", "2001:db8::1"] {
            let ip: std::net::IpAddr = text.parse().unwrap();
            let d = RData::from(ip);
            assert!(
                matches!(Rec::new(d.clone()), Rec::V4(_) | Rec::V6(_)),
                "{text} inline"
            );
            assert_eq!(Rec::new(d.clone()).data(d.record_type()), d);
        }
        let txt = RData::TXT(hickory_proto::rr::rdata::TXT::new(vec!["id=x".into()]));
        assert!(matches!(Rec::new(txt.clone()), Rec::Wire(_)));
        assert_eq!(Rec::new(txt.clone()).data(RecordType::TXT), txt);
        let srv = RData::SRV(hickory_proto::rr::rdata::SRV::new(
            0,
            10,
            80,
            Name::from_ascii("a.inst.acme.sd.example.").unwrap(),
        ));
        assert_eq!(Rec::new(srv.clone()).data(RecordType::SRV), srv);
    }

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

    /// The record changes an update returns, applied to the zones served
    /// before it, give exactly the RRsets a full derivation gives: a big
    /// service RRset changes by what changed, and a TTL change (the least
    /// TTL of the contributors) rewrites the set.
    #[test]
    fn returned_changes_turn_the_served_zones_into_the_new_ones() {
        use crate::zone::ZoneStore;
        use hickory_proto::rr::LowerName;
        let naming = crate::registry::naming::tests::naming();
        let mut reg = Registry::default();
        reg.apply(&reg.set_owner("acme", true).unwrap());
        let mut table = Table::build(&naming, &reg);
        let store = ZoneStore::with_zones(table.zones(&naming));
        let step = |reg: &Registry, table: &mut Table, id: &str| {
            let mut by_zone: BTreeMap<Name, Vec<Change>> = BTreeMap::new();
            for (key, change) in table.update(&naming, reg, [id.to_string()]) {
                let origin = naming.zone_of(&key.0).unwrap().clone();
                if let SetChange::Changes(c) = change {
                    by_zone.entry(origin).or_default().extend(c);
                }
            }
            for (origin, changes) in by_zone {
                store.update(&origin, &changes, 0).unwrap();
            }
            let snap = store.snapshot();
            for key in table.sets.keys().filter(|k| k.1 != RecordType::PTR) {
                let origin = naming.zone_of(&key.0).unwrap();
                let served = snap
                    .zone(&LowerName::new(origin))
                    .and_then(|z| z.node(&LowerName::new(&key.0)))
                    .and_then(|n| n.rrset(key.1))
                    .map(|s| {
                        let mut d: Vec<String> = s.rdatas().map(|d| d.to_string()).collect();
                        d.sort();
                        (s.ttl, d)
                    });
                let want = table.rrset(key).map(|(ttl, data)| {
                    let mut d: Vec<String> = data.iter().map(|d| d.to_string()).collect();
                    d.sort();
                    (ttl, d)
                });
                assert_eq!(served, want, "{key:?} after {id}");
            }
        };
        let register = |reg: &mut Registry, id: &str, json: &str| {
            let spec: InstanceSpec = serde_json::from_str(json).unwrap();
            let e = reg.register(id, &spec, 0).unwrap();
            reg.apply(&e);
        };
        for i in 0..50 {
            let id = format!("m{i}");
            let json = format!(
                r#"{{"owner":"acme","addresses":["10.0.1.{i}"],"services":["web:80"],"lease_secs":60}}"#
            );
            register(&mut reg, &id, &json);
            step(&reg, &mut table, &id);
        }
        // Two members with the same address: it stays while either does.
        register(
            &mut reg,
            "dup",
            r#"{"owner":"acme","addresses":["10.0.1.7"],"services":["web:80"],"lease_secs":60}"#,
        );
        step(&reg, &mut table, "dup");
        reg.apply(&reg.deregister("m7").unwrap());
        step(&reg, &mut table, "m7");
        // Binder TTLs: the service's A TTL is the least of its members'.
        for (id, ttl) in [("lb1", 40), ("lb2", 20)] {
            let json = format!(
                r#"{{"addresses":["172.27.10.{ttl}"],"lease_secs":60,"binder":{{"domain":"example.joyent.us","type":"load_balancer","ttl":{ttl}}}}}"#
            );
            register(&mut reg, id, &json);
            step(&reg, &mut table, id);
        }
        reg.apply(&reg.deregister("lb2").unwrap());
        step(&reg, &mut table, "lb2");
        reg.apply(&reg.deregister("m3").unwrap());
        step(&reg, &mut table, "m3");
    }
}
