//! The generated records, kept incrementally: every RRset counts how many
//! contributions give each of its records (not who gave them: an
//! instance's records are derived again from the registry as it was when
//! they were added, to take them away), so a change to one instance yields
//! the record changes of the RRsets it touches (its own names and the
//! services it is in) in time proportional to what changed, not to the
//! size of those RRsets (a service with thousands of members). Pure.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use compact_str::CompactString;
use hickory_proto::serialize::binary::BinDecodable;

use hickory_proto::rr::{LowerName, Name, RData, Record, RecordType};

use super::dense::DenseMap;
use super::instance::Instance;
use super::model::BinderService;
use super::naming::{Contribution, Naming};
use super::state::Registry;
use crate::zone::inline::InlineBytes;
use crate::zone::{packed, Change, Zone};

pub type SetKey = (Name, RecordType);

/// A record's data as the sets count it: addresses inline, anything else
/// in wire form (inline up to 22 bytes: an instance id's TXT), where
/// hickory's `RData` is 184 bytes by value. The wire form compares as the
/// `RData` does because the names the registry writes are lower-cased
/// when registered (`model::label`, `domain`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Rec {
    V4([u8; 4]),
    V6([u8; 16]),
    Wire(InlineBytes),
    /// What does not encode (never, for the registry's records).
    Other(Box<RData>),
}

const _: () = assert!(std::mem::size_of::<Rec>() == 24);

impl Rec {
    fn new(d: RData) -> Rec {
        match d {
            RData::A(a) => Rec::V4(a.0.octets()),
            RData::AAAA(a) => Rec::V6(a.0.octets()),
            other => match packed::encode(&other) {
                Ok(wire) => Rec::Wire(InlineBytes::from_slice(wire.as_slice())),
                Err(_) => Rec::Other(Box::new(other)),
            },
        }
    }

    /// Where the record goes among a set's records: by its bytes.
    fn order(&self) -> (u8, &[u8]) {
        match self {
            Rec::V4(b) => (0, &b[..]),
            Rec::V6(b) => (0, &b[..]),
            Rec::Wire(w) => (0, w.as_slice()),
            Rec::Other(_) => (1, &[]),
        }
    }

    /// The record data, of type `rtype`.
    fn data(&self, rtype: RecordType) -> RData {
        use hickory_proto::rr::rdata::{A, AAAA};
        match self {
            Rec::V4(b) => RData::A(A::from(std::net::Ipv4Addr::from(*b))),
            Rec::V6(b) => RData::AAAA(AAAA::from(std::net::Ipv6Addr::from(*b))),
            Rec::Wire(wire) => packed::decode(rtype, wire.as_slice()),
            Rec::Other(d) => (**d).clone(),
        }
    }
}

/// How many contributions give each record of one RRset, and with which
/// TTLs. Which instance gave what is not kept: an update re-derives an
/// instance's records as they were from the registry as last published,
/// and takes them away again. Most sets get one record from one instance
/// (its own names): that is kept inline.
enum Tally {
    One { rec: Rec, ttl: u32, n: u32 },
    Many(Box<Counts>),
}

#[derive(Default)]
struct Counts {
    recs: DenseMap<Rec, u32>,
    /// Contributions by TTL (the set's TTL is the least; a set has one
    /// or a few).
    ttls: Vec<(u32, u32)>,
}

impl Counts {
    fn add(&mut self, ttl: u32, rec: &Rec, n: u32) -> bool {
        match self.ttls.binary_search_by_key(&ttl, |&(t, _)| t) {
            Ok(i) => self.ttls[i].1 += n,
            Err(i) => self.ttls.insert(i, (ttl, n)),
        }
        let (count, _) = self.recs.get_or_insert_with(rec.clone(), || 0);
        *count += n;
        *count == n
    }
}

impl Tally {
    fn ttl(&self) -> u32 {
        match self {
            Tally::One { ttl, .. } => *ttl,
            Tally::Many(c) => c.ttls.first().map_or(0, |&(t, _)| t),
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Tally::One { n, .. } => *n == 0,
            Tally::Many(c) => c.recs.is_empty(),
        }
    }

    /// Adds one contribution; true when `rec` is new to the set. (A set
    /// is made as `One` with `n` 0, empty, and filled by its first add.)
    fn add(&mut self, ttl: u32, rec: &Rec) -> bool {
        match self {
            Tally::One { n: 0, .. } => {
                *self = Tally::One {
                    rec: rec.clone(),
                    ttl,
                    n: 1,
                };
                true
            }
            Tally::One { rec: r, ttl: t, n } if r == rec && *t == ttl => {
                *n += 1;
                false
            }
            Tally::One { rec: r, ttl: t, n } => {
                let mut counts = Counts::default();
                counts.add(*t, r, *n);
                let new = counts.add(ttl, rec, 1);
                *self = Tally::Many(Box::new(counts));
                new
            }
            Tally::Many(counts) => counts.add(ttl, rec, 1),
        }
    }

    /// Takes one contribution away: whether it was the last to give
    /// `rec`, or `None` (and nothing changed) when no such contribution
    /// is counted.
    fn remove(&mut self, ttl: u32, rec: &Rec) -> Option<bool> {
        match self {
            Tally::One { rec: r, ttl: t, n } => {
                if r != rec || *t != ttl || *n == 0 {
                    return None;
                }
                *n -= 1;
                Some(*n == 0)
            }
            Tally::Many(counts) => {
                let i = counts.ttls.binary_search_by_key(&ttl, |&(t, _)| t).ok()?;
                let count = counts.recs.get_mut(rec)?;
                counts.ttls[i].1 -= 1;
                if counts.ttls[i].1 == 0 {
                    counts.ttls.remove(i);
                }
                *count -= 1;
                let gone = *count == 0;
                if gone {
                    counts.recs.remove(rec);
                }
                // Back to one record with one TTL: inline again.
                let inline = match (&counts.ttls[..], counts.recs.iter().next()) {
                    ([(ttl, _)], Some((rec, n))) if counts.recs.len() == 1 => Some(Tally::One {
                        rec: rec.clone(),
                        ttl: *ttl,
                        n: *n,
                    }),
                    _ => None,
                };
                if let Some(one) = inline {
                    *self = one;
                }
                Some(gone)
            }
        }
    }

    /// The set's distinct records, in a fixed order (by their bytes).
    fn data(&self, rtype: RecordType) -> Vec<RData> {
        let mut recs: Vec<&Rec> = match self {
            Tally::One { rec, .. } => vec![rec],
            Tally::Many(c) => c.recs.iter().map(|(rec, _)| rec).collect(),
        };
        recs.sort_unstable_by_key(|r| r.order());
        recs.into_iter().map(|r| r.data(rtype)).collect()
    }
}

/// A set's owner as the table keys it: its zone (a position in
/// [`Naming::zones`]) and its labels below the zone's origin in
/// lower-case wire form, which for an instance's names fit inline (a
/// hickory `Name` is 80 bytes, an owner's whole wire form an allocation
/// of 48).
#[derive(Clone, PartialEq, Eq, Hash)]
struct Owner {
    zone: u16,
    below: InlineBytes,
}

impl Owner {
    /// `name`'s key, `None` outside every registry zone (the registry's
    /// names are lower case: `Contribution`).
    fn of(naming: &Naming, name: &Name) -> Option<Owner> {
        let zone = naming.zone_index(name)?;
        // (Labels counted as they are: `num_labels` leaves out a `*`.)
        let depth = name.iter().count() - naming.zones[zone].name.iter().count();
        let mut below = Vec::with_capacity(name.len());
        for label in name.iter().take(depth) {
            below.push(label.len() as u8);
            below.extend_from_slice(label);
        }
        Some(Owner {
            zone: u16::try_from(zone).expect("fewer than 65,536 registry zones"),
            below: InlineBytes::from_vec(below),
        })
    }

    fn name(&self, naming: &Naming) -> Name {
        let mut wire = self.below.as_slice().to_vec();
        for label in naming.zones[usize::from(self.zone)].name.iter() {
            wire.push(label.len() as u8);
            wire.extend_from_slice(label);
        }
        wire.push(0);
        Name::from_bytes(&wire).expect("the table's names are wire names it wrote")
    }
}

/// One generated RRset in the table: its owner and type.
type SetId = (Owner, RecordType);

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
    /// Every generated RRset, counted (see [`Tally`]).
    sets: DenseMap<SetId, Tally>,
    /// Instance → its Binder domain, and each domain's service definition
    /// as last computed (a change re-derives every member of the domain).
    binder_domain: HashMap<CompactString, String>,
    binder_defs: HashMap<String, Option<BinderService>>,
    /// Each Binder domain's members by id (the first that carries a
    /// service record defines the service).
    domain_members: HashMap<String, BTreeSet<CompactString>>,
}

/// One instance's records of one RRset, with the set's owner in the
/// table's form.
struct Group {
    key: SetKey,
    owner: Owner,
    recs: Vec<(u32, Rec)>,
}

/// The RRsets one update touched, by owner and type, each with its name
/// and what happened to it.
type Deltas = HashMap<SetId, (Name, Delta), foldhash::fast::RandomState>;

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
            .values()
            .filter(|i| i.reg.binder.is_some())
            .map(|i| i.id.clone());
        t.derive_domains(reg, binder.collect());
        for inst in reg.instances.values() {
            let service = t.service_of(inst, &HashMap::new());
            for group in records_of(naming, reg, inst, service) {
                t.add(group, None);
            }
        }
        t
    }

    /// Re-derives the records of the `changed` instances (present or gone
    /// in `after`), which were derived from `before` (the registry as
    /// last published), and returns what changed in each RRset they
    /// touch.
    pub fn update(
        &mut self,
        naming: &Naming,
        before: &Registry,
        after: &Registry,
        changed: impl IntoIterator<Item = CompactString>,
    ) -> Vec<(SetKey, SetChange)> {
        let ids: HashSet<CompactString> = changed.into_iter().collect();
        let (ids, old_defs) = self.derive_domains(after, ids);
        let mut deltas = Deltas::default();
        for id in ids {
            if let Some(inst) = before.instances.get(id.as_str()) {
                let service = self.service_of(inst, &old_defs);
                for group in records_of(naming, before, inst, service) {
                    self.remove(group, &mut deltas);
                }
            }
            if let Some(inst) = after.instances.get(id.as_str()) {
                let service = self.service_of(inst, &HashMap::new());
                for group in records_of(naming, after, inst, service) {
                    self.add(group, Some(&mut deltas));
                }
            }
        }
        // In the sets' order, whatever the map's: the zone store sees the
        // same changes in the same order on every node. (Ordered by the
        // set's id, its zone and wire-form labels: comparing names label
        // by label cost more than the rest of the sort.)
        let mut deltas: Vec<_> = deltas.into_iter().collect();
        deltas.sort_unstable_by(|(a, _), (b, _)| {
            (a.0.zone, a.0.below.as_slice(), u16::from(a.1)).cmp(&(
                b.0.zone,
                b.0.below.as_slice(),
                u16::from(b.1),
            ))
        });
        deltas
            .into_iter()
            .map(|(id, (name, delta))| {
                let change = self.changes(self.sets.get(&id), &name, id.1, delta);
                ((name, id.1), change)
            })
            .collect()
    }

    /// The definition of `inst`'s Binder service: from `old` where its
    /// domain's definition changed in this update, else as it stands.
    fn service_of(
        &self,
        inst: &Instance,
        old: &HashMap<String, Option<BinderService>>,
    ) -> Option<BinderService> {
        let domain = &inst.reg.binder.as_ref()?.domain;
        match old.get(domain) {
            Some(def) => def.clone(),
            None => self.binder_defs.get(domain)?.clone(),
        }
    }

    /// Adds one instance's records of one RRset, noting what appears in
    /// `deltas` when given.
    fn add(&mut self, group: Group, deltas: Option<&mut Deltas>) {
        let Group { key, owner, recs } = group;
        let Some((ttl, first)) = recs.first() else {
            return;
        };
        let id = (owner, key.1);
        let tracked = deltas.map(|d| (d, id.clone()));
        // One lookup: the set, made empty if new (see `Tally::add`).
        let (tally, new) = self.sets.get_or_insert_with(id, || Tally::One {
            rec: first.clone(),
            ttl: *ttl,
            n: 0,
        });
        let ttl_before = (!new).then(|| tally.ttl());
        let mut delta = tracked.map(|(d, id)| track(d, &key, &id, ttl_before));
        for (ttl, rec) in &recs {
            if tally.add(*ttl, rec) {
                if let Some(d) = delta.as_mut() {
                    d.appeared(rec);
                }
            }
        }
    }

    /// Takes one instance's records of one RRset away again, noting what
    /// vanishes in `deltas`.
    fn remove(&mut self, group: Group, deltas: &mut Deltas) {
        let Group { key, owner, recs } = group;
        let id = (owner, key.1);
        // What an instance contributed was counted when it was added:
        // a miss means an instance changed without being re-derived.
        let Some(tally) = self.sets.get_mut(&id) else {
            debug_assert!(
                false,
                "{key:?}: records taken away from a set never counted"
            );
            return;
        };
        let delta = track(deltas, &key, &id, Some(tally.ttl()));
        for (ttl, rec) in &recs {
            match tally.remove(*ttl, rec) {
                Some(true) => delta.vanished(rec.clone()),
                Some(false) => {}
                None => debug_assert!(false, "{key:?}: a record taken away was never counted"),
            }
        }
        if tally.is_empty() {
            self.sets.remove(&id);
        }
    }

    /// Follows the Binder domain membership of `ids` and returns them with
    /// every member of a domain whose service definition changed (its
    /// members' SRV and A records depend on it), and those domains'
    /// definitions as they were.
    fn derive_domains(
        &mut self,
        reg: &Registry,
        mut ids: HashSet<CompactString>,
    ) -> (
        HashSet<CompactString>,
        HashMap<String, Option<BinderService>>,
    ) {
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
            if let Some(b) = reg
                .instances
                .get(id.as_str())
                .and_then(|i| i.reg.binder.as_ref())
            {
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
        let mut old_defs = HashMap::new();
        for d in domains {
            let members = self.domain_members.get(&d);
            let def = members.and_then(|m| {
                m.iter()
                    .filter_map(|id| reg.instances.get(id.as_str()))
                    .filter(|i| !i.reg.disabled)
                    .find_map(|i| i.reg.binder.as_ref()?.service.clone())
            });
            if self.binder_defs.get(&d) == Some(&def) {
                continue;
            }
            if let Some(m) = members {
                ids.extend(m.iter().cloned());
            }
            let old = match members {
                None => self.binder_defs.remove(&d),
                Some(_) => self.binder_defs.insert(d.clone(), def),
            };
            old_defs.insert(d, old.flatten());
        }
        (ids, old_defs)
    }

    /// The record changes `delta` made to RRset `set` (owner `name`, type
    /// `rtype`; `None` once empty). A changed TTL (one per RRset)
    /// rewrites the whole set.
    fn changes(
        &self,
        set: Option<&Tally>,
        name: &Name,
        rtype: RecordType,
        delta: Delta,
    ) -> SetChange {
        if rtype == RecordType::PTR {
            return SetChange::Recompute;
        }
        let ttl_after = set.map(Tally::ttl);
        let record = |ttl: u32, d: Rec| Record::from_rdata(name.clone(), ttl, d.data(rtype));
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
                let all = set.map(|s| s.data(rtype)).unwrap_or_default();
                let add = |d| Change::Add(Record::from_rdata(name.clone(), after, d));
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
    pub fn rrset(&self, naming: &Naming, key: &SetKey) -> Option<(u32, Vec<RData>)> {
        let id = (Owner::of(naming, &key.0.to_lowercase())?, key.1);
        self.sets.get(&id).map(|tally| served(key.1, tally))
    }

    /// Every RRset in the table.
    #[cfg(test)]
    fn keys<'a>(&'a self, naming: &'a Naming) -> impl Iterator<Item = SetKey> + 'a {
        self.sets
            .iter()
            .map(|((owner, rtype), _)| (owner.name(naming), *rtype))
    }

    /// Every registry zone, SOA serial 0.
    pub fn zones(&self, naming: &Naming) -> Vec<Zone> {
        let mut zones: BTreeMap<Name, Zone> = naming
            .zones
            .iter()
            .map(|z| (z.name.clone(), naming.empty_zone(&z.name)))
            .collect();
        for ((owner, rtype), tally) in self.sets.iter() {
            let name = owner.name(naming);
            let origin = &naming.zones[usize::from(owner.zone)].name;
            let (ttl, data) = served(*rtype, tally);
            let zone = zones.get_mut(origin).expect("configured zone");
            let _ = zone.insert_set(&LowerName::new(&name), *rtype, ttl, &data);
        }
        zones.into_values().collect()
    }
}

/// A set's records as served (see [`Table::rrset`]).
fn served(rtype: RecordType, tally: &Tally) -> (u32, Vec<RData>) {
    let mut data = tally.data(rtype);
    if rtype == RecordType::PTR {
        data.sort_by_key(|d| match d {
            RData::PTR(p) => (p.0.len(), p.0.to_string()),
            _ => (usize::MAX, String::new()),
        });
        data.truncate(1);
    }
    (tally.ttl(), data)
}

/// `inst`'s records in the registry zones, grouped by RRset. Records
/// outside every zone (the reverse names of addresses no zone serves)
/// are left out: nothing would serve them.
fn records_of(
    naming: &Naming,
    reg: &Registry,
    inst: &Instance,
    service: Option<BinderService>,
) -> Vec<Group> {
    let mut mine: Vec<Group> = Vec::new();
    for Contribution { name, ttl, data } in naming.contributions_in(reg, inst, service.as_ref()) {
        let Some(owner) = Owner::of(naming, &name) else {
            continue;
        };
        let rtype = data.record_type();
        // A handful of sets an instance: a search beats a map.
        let rec = (ttl, Rec::new(data));
        match mine
            .iter_mut()
            .find(|g| g.key.1 == rtype && g.owner == owner)
        {
            Some(g) => g.recs.push(rec),
            None => mine.push(Group {
                key: (name, rtype),
                owner,
                recs: vec![rec],
            }),
        }
    }
    mine
}

/// The delta of RRset `key` in this update, begun with the set's TTL as it
/// was before the update touched it.
fn track<'d>(
    deltas: &'d mut Deltas,
    key: &SetKey,
    id: &SetId,
    ttl_before: Option<u32>,
) -> &'d mut Delta {
    let (_, delta) = deltas.entry(id.clone()).or_insert_with(|| {
        let delta = Delta {
            ttl_before,
            ..Delta::default()
        };
        (key.0.clone(), delta)
    });
    delta
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::model::InstanceSpec;

    /// A set is inline while every contribution gives one record with
    /// one TTL; a second record or TTL counts them; taking contributions
    /// away says when a record is gone, and goes back inline.
    #[test]
    fn a_tally_counts_contributions_and_goes_back_inline() {
        let (a, b) = (Rec::V4([10, 0, 0, 1]), Rec::V4([10, 0, 0, 2]));
        let mut t = Tally::One {
            rec: a.clone(),
            ttl: 30,
            n: 1,
        };
        assert!(!t.add(30, &a), "a second contribution of a is not new");
        assert!(matches!(t, Tally::One { n: 2, .. }));
        assert!(t.add(60, &b), "b is new");
        assert!(matches!(t, Tally::Many(_)));
        assert_eq!(t.ttl(), 30, "the least TTL");
        assert_eq!(t.remove(30, &a), Some(false), "a is still given once");
        assert_eq!(t.data(RecordType::A).len(), 2);
        assert_eq!(t.remove(30, &a), Some(true), "the last contribution of a");
        assert!(matches!(t, Tally::One { ttl: 60, n: 1, .. }));
        assert_eq!(t.ttl(), 60);
        assert_eq!(t.remove(60, &a), None, "not there: nothing changes");
        assert_eq!(t.remove(60, &b), Some(true));
        assert!(t.is_empty());
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
                .keys(&naming)
                .map(|k| (k.clone(), full.rrset(&naming, &k)))
                .collect();
            let mut b: Vec<_> = table
                .keys(&naming)
                .map(|k| (k.clone(), table.rrset(&naming, &k)))
                .collect();
            a.sort_by(|x, y| x.0.cmp(&y.0));
            b.sort_by(|x, y| x.0.cmp(&y.0));
            assert_eq!(format!("{a:?}"), format!("{b:?}"));
        };
        for (id, json) in specs {
            let spec: InstanceSpec = serde_json::from_str(json).unwrap();
            let e = reg.register(id, &spec, 0).unwrap();
            let before = reg.clone();
            reg.apply(&e);
            table.update(&naming, &before, &reg, [CompactString::from(id)]);
            check(&table, &reg);
        }
        for id in ["c", "b"] {
            let before = reg.clone();
            reg.apply(&reg.deregister(id).unwrap());
            table.update(&naming, &before, &reg, [CompactString::from(id)]);
            check(&table, &reg);
        }
        // The service definition moved from c (gone) to nobody: d's
        // service records went with it.
        assert!(table
            .keys(&naming)
            .all(|k| k.1 != RecordType::SRV || k.0.to_string().contains("svc")));
    }

    /// Every RRset of `table` but PTR (a selection, compared apart) is
    /// served by `store` as the table derives it, records in any order.
    fn assert_served_as_derived(
        store: &crate::zone::ZoneStore,
        naming: &Naming,
        table: &Table,
        when: &str,
    ) {
        use hickory_proto::rr::LowerName;
        let snap = store.snapshot();
        let sorted = |ttl: u32, data: Vec<String>| {
            let mut data = data;
            data.sort();
            (ttl, data)
        };
        for key in table.keys(naming).filter(|k| k.1 != RecordType::PTR) {
            let origin = naming.zone_of(&key.0).unwrap();
            let served = snap
                .zone(&LowerName::new(origin))
                .and_then(|z| z.node(&LowerName::new(&key.0)))
                .and_then(|n| n.rrset(key.1))
                .map(|s| sorted(s.ttl, s.rdatas().map(|d| d.to_string()).collect()));
            let derived = table
                .rrset(naming, &key)
                .map(|(ttl, data)| sorted(ttl, data.iter().map(|d| d.to_string()).collect()));
            assert_eq!(served, derived, "{key:?} {when}");
        }
    }

    /// The record changes an update returns, applied to the zones served
    /// before it, give exactly the RRsets a full derivation gives: a big
    /// service RRset changes by what changed, and a TTL change (the least
    /// TTL of the contributors) rewrites the set.
    #[test]
    fn returned_changes_turn_the_served_zones_into_the_new_ones() {
        use crate::zone::{Additions, ZoneStore};
        let naming = crate::registry::naming::tests::naming();
        let mut reg = Registry::default();
        reg.apply(&reg.set_owner("acme", true).unwrap());
        let mut table = Table::build(&naming, &reg);
        let store = ZoneStore::with_zones(table.zones(&naming));
        let mut published = reg.clone();
        let step = |before: &mut Registry, reg: &Registry, table: &mut Table, id: &str| {
            let mut by_zone: BTreeMap<Name, Vec<Change>> = BTreeMap::new();
            for (key, change) in table.update(&naming, before, reg, [CompactString::from(id)]) {
                let origin = naming.zone_of(&key.0).unwrap().clone();
                if let SetChange::Changes(c) = change {
                    by_zone.entry(origin).or_default().extend(c);
                }
            }
            // As the publisher applies them: promised new, not looked for.
            for (origin, changes) in by_zone {
                store
                    .update_generated(&origin, &changes, None, 0, Additions::Counted)
                    .unwrap();
            }
            *before = reg.clone();
            assert_served_as_derived(&store, &naming, table, &format!("after {id}"));
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
            step(&mut published, &reg, &mut table, &id);
        }
        // Two members with the same address: it stays while either does.
        register(
            &mut reg,
            "dup",
            r#"{"owner":"acme","addresses":["10.0.1.7"],"services":["web:80"],"lease_secs":60}"#,
        );
        step(&mut published, &reg, &mut table, "dup");
        reg.apply(&reg.deregister("m7").unwrap());
        step(&mut published, &reg, &mut table, "m7");
        // Binder TTLs: the service's A TTL is the least of its members'.
        for (id, ttl) in [("lb1", 40), ("lb2", 20)] {
            let json = format!(
                r#"{{"addresses":["172.27.10.{ttl}"],"lease_secs":60,"binder":{{"domain":"example.joyent.us","type":"load_balancer","ttl":{ttl}}}}}"#
            );
            register(&mut reg, id, &json);
            step(&mut published, &reg, &mut table, id);
        }
        reg.apply(&reg.deregister("lb2").unwrap());
        step(&mut published, &reg, &mut table, "lb2");
        reg.apply(&reg.deregister("m3").unwrap());
        step(&mut published, &reg, &mut table, "m3");
    }

    /// Random batches of registrations, re-registrations, removals and
    /// owner switches (shared addresses, services, Binder domains whose
    /// definition moves between members): after each batch, the table
    /// kept by updates from the registry as last published holds what a
    /// full derivation of the new registry holds, and the zones its
    /// changes were applied to (promised new, not looked for; a false
    /// promise fails a debug assertion in the store) serve those sets.
    #[test]
    fn random_batches_of_changes_match_a_full_rebuild() {
        use crate::zone::{Additions, ZoneStore};
        let naming = crate::registry::naming::tests::naming();
        let mut reg = Registry::default();
        reg.apply(&reg.set_owner("acme", true).unwrap());
        let mut table = Table::build(&naming, &reg);
        let store = ZoneStore::with_zones(table.zones(&naming));
        let mut published = reg.clone();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        for round in 0..300 {
            let mut dirty: Vec<CompactString> = Vec::new();
            for _ in 0..1 + next(4) {
                let id = format!("i{}", next(12));
                match next(10) {
                    0 => {
                        if let Ok(e) = reg.deregister(&id) {
                            reg.apply(&e);
                            dirty.push(id.into());
                        }
                    }
                    1 => {
                        let enabled = next(2) == 0;
                        reg.apply(&reg.set_owner("acme", enabled).unwrap());
                        dirty.extend(
                            reg.instances
                                .values()
                                .filter(|i| i.reg.owner.as_deref() == Some("acme"))
                                .map(|i| i.id.clone()),
                        );
                    }
                    k => {
                        let addr = match next(3) {
                            0 => format!("10.0.0.{}", next(4)),
                            1 => format!("165.225.0.{}", next(4)),
                            _ => format!("172.27.10.{}", next(4)),
                        };
                        let json = if k < 6 {
                            format!(
                                r#"{{"owner":"acme","addresses":["{addr}"],"services":["web:{}","db"],"lease_secs":60}}"#,
                                80 + next(2)
                            )
                        } else {
                            let service = match next(3) {
                                0 => String::new(),
                                p => format!(
                                    r#","service":{{"srvce":"_http","proto":"_tcp","port":{},"ttl":{}}}"#,
                                    79 + p,
                                    30 * p
                                ),
                            };
                            format!(
                                r#"{{"addresses":["{addr}"],"lease_secs":60,"binder":{{"domain":"example.joyent.us","type":"load_balancer","ttl":{}{service}}}}}"#,
                                10 + 10 * next(3)
                            )
                        };
                        let spec: InstanceSpec = serde_json::from_str(&json).unwrap();
                        reg.apply(&reg.register(&id, &spec, 0).unwrap());
                        dirty.push(id.into());
                    }
                }
            }
            let mut by_zone: BTreeMap<Name, Vec<Change>> = BTreeMap::new();
            for (key, change) in table.update(&naming, &published, &reg, dirty) {
                if let SetChange::Changes(c) = change {
                    let origin = naming.zone_of(&key.0).unwrap().clone();
                    by_zone.entry(origin).or_default().extend(c);
                }
            }
            for (origin, changes) in by_zone {
                store
                    .update_generated(&origin, &changes, None, 0, Additions::Counted)
                    .unwrap();
            }
            published = reg.clone();
            let full = Table::build(&naming, &reg);
            assert_served_as_derived(&store, &naming, &full, &format!("after round {round}"));
            let listed = |t: &Table| {
                let mut all: Vec<_> = t
                    .keys(&naming)
                    .map(|k| (k.clone(), t.rrset(&naming, &k)))
                    .collect();
                all.sort_by(|x, y| x.0.cmp(&y.0));
                format!("{all:?}")
            };
            assert_eq!(listed(&table), listed(&full), "after round {round}");
        }
    }
}
