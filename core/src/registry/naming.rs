//! The record generator: registry state in, zones out. Pure.
//!
//! CNS names (RFD 1): `<id>.inst.<owner>.<zone>` (A/AAAA + TXT id) for every
//! instance of an opted-in owner; `<svc>.svc.<owner>.<zone>` (A/AAAA of the
//! listed members + one TXT per member id) and, for memberships with a port,
//! SRV at `_<svc>._<proto>.<svc>.svc.<owner>.<zone>`; one PTR per address in
//! whichever registry zone holds its reverse name. Addresses go to the zones
//! whose networks contain them, or else to the one catch-all zone.
//!
//! Binder names (Registrar README): host records `<id>.<domain>` and aliases
//! for queryable host types; at `<domain>` the service's A/AAAA (its listed,
//! serviceable members) and SRV `<srvce>.<proto>.<domain>`, one per member
//! port. TTLs: host = the host record's `ttl`; SRV = the service's `ttl`; A
//! at the service name = the minimum of the SRV TTL and the members' host
//! TTLs; unset TTLs take the configured default.

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::str::FromStr;

use foldhash::fast::FixedState;
use hashbrown::hash_table::{self, HashTable};
use hickory_proto::rr::rdata::{A, AAAA, NS, PTR, SOA, SRV, TXT};
use hickory_proto::rr::{Name, RData, Record};
use ipnet::IpNet;

use super::error::RegistryError;
use super::instance::{binder_key, cns_key, Instance};
use super::model::BinderService;
use super::state::Registry;
use crate::zone::Zone;

/// A zone the registry generates.
#[derive(Clone, Debug, PartialEq)]
pub struct RegistryZone {
    pub name: Name,
    /// Address networks whose CNS names go here; `None` = no CNS forward
    /// names; a `0.0.0.0/0` + `::/0` pair is the catch-all.
    pub networks: Option<Networks>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Networks {
    CatchAll,
    List(Vec<IpNet>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Naming {
    pub zones: Vec<RegistryZone>,
    pub ttl: u32,
    pub srv_ttl: u32,
    /// Owners must opt in before their instances get CNS names.
    pub require_opt_in: bool,
    pub ns: Vec<Name>,
    pub hostmaster: Name,
    /// SOA refresh, retry, expire, minimum (negative-caching TTL).
    pub soa_timers: [u32; 4],
}

impl Naming {
    /// The most specific registry zone containing `name`.
    fn zone_for(&self, name: &Name) -> Option<&RegistryZone> {
        self.zone_index(name).map(|i| &self.zones[i])
    }

    /// CNS forward zones for one address.
    fn cns_zones(&self, addr: IpAddr) -> Vec<&Name> {
        let listed: Vec<&Name> = self
            .zones
            .iter()
            .filter(|z| matches!(&z.networks, Some(Networks::List(nets)) if nets.iter().any(|n| n.contains(&addr))))
            .map(|z| &z.name)
            .collect();
        if !listed.is_empty() {
            return listed;
        }
        self.zones
            .iter()
            .filter(|z| z.networks == Some(Networks::CatchAll))
            .map(|z| &z.name)
            .collect()
    }

    /// Rejects registrations whose Binder names fall outside every zone.
    pub fn check(&self, inst: &Instance) -> Result<(), RegistryError> {
        if let Some(b) = &inst.reg.binder {
            let fields = std::iter::once(("binder.domain".to_string(), &b.domain)).chain(
                b.aliases
                    .iter()
                    .enumerate()
                    .map(|(i, a)| (format!("binder.aliases[{i}]"), a)),
            );
            for (field, d) in fields {
                let in_zone = fqdn(d).is_ok_and(|n| self.zone_for(&n).is_some());
                if !in_zone {
                    return Err(RegistryError::Invalid {
                        field,
                        message: format!("{d:?} is not inside any registry zone"),
                    });
                }
            }
        }
        if inst.reg.owner.is_some() && inst.reg.binder.is_none() {
            let covered = inst
                .reg
                .addresses
                .iter()
                .any(|a| !self.cns_zones(*a).is_empty());
            if !covered {
                return Err(RegistryError::Invalid {
                    field: "addresses".into(),
                    message: "no registry zone's networks contain these addresses".into(),
                });
            }
        }
        Ok(())
    }

    /// Whether DNS shows the instance at all (not disabled; a CNS owner
    /// that has opted in, or a Binder record): what anonymous API readers
    /// may see.
    pub fn in_dns(&self, reg: &Registry, inst: &Instance) -> bool {
        !inst.reg.disabled
            && (inst.reg.binder.is_some()
                || inst
                    .reg
                    .owner
                    .as_deref()
                    .is_some_and(|o| self.owner_enabled(reg, o)))
    }

    fn owner_enabled(&self, reg: &Registry, owner: &str) -> bool {
        !self.require_opt_in || reg.owners.get(owner).copied().unwrap_or(false)
    }

    /// Every name the instance currently has, for the API.
    ///
    /// The walk of [`contributions`](Self::contributions), without
    /// building the records or the reverse names (the API answers every
    /// write with these).
    pub fn names_of(&self, reg: &Registry, inst: &Instance) -> Vec<String> {
        self.plain_cns_names(reg, inst)
            .unwrap_or_else(|| self.walked_names(reg, inst))
    }

    /// [`names_of`](Self::names_of) by the walk, whatever the instance.
    fn walked_names(&self, reg: &Registry, inst: &Instance) -> Vec<String> {
        let mut out = Names::default();
        self.walk(reg, inst, instance_service(reg, inst), &mut out);
        let mut names = out.0;
        names.sort();
        names.dedup();
        names
    }

    /// The names of an instance with CNS names only, written out as text
    /// (what the walk's names print as): an instance's registration and
    /// every write's reply name it, and making each name to print it was
    /// most of that. `None` for anything else (a Binder record, a label
    /// or zone that is not plain lower-case letters, digits and hyphens,
    /// a name near the length limit): the walk names those.
    fn plain_cns_names(&self, reg: &Registry, inst: &Instance) -> Option<Vec<String>> {
        // (An `xn--` label is IDNA's: the walk prints it decoded.)
        let plain = |s: &str| {
            (1..=63).contains(&s.len())
                && !s.starts_with("xn--")
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        };
        if inst.reg.binder.is_some() || !plain(&inst.id) {
            return None;
        }
        let mut names = Vec::new();
        let owner = match inst.reg.owner.as_deref() {
            Some(o) if !inst.reg.disabled && self.owner_enabled(reg, o) => o,
            _ => return Some(names),
        };
        let services_plain =
            inst.reg.services.iter().all(|m| {
                plain(&m.name) && plain(&m.proto) && m.name.len() < 63 && m.proto.len() < 63
            });
        if !plain(owner) || !services_plain {
            return None;
        }
        for &addr in &inst.reg.addresses {
            for zone in self.cns_zones(addr) {
                if !zone.is_fqdn() {
                    return None;
                }
                let zone = zone.to_lowercase().to_string();
                let zone_plain = zone.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'
                });
                if !zone_plain || zone.len() < 2 {
                    return None;
                }
                names.push(format!("{}.inst.{owner}.{zone}", inst.id));
                for m in &inst.reg.services {
                    if !inst.listed_in(&cns_key(owner, &m.name)) {
                        continue;
                    }
                    let svc = format!("{}.svc.{owner}.{zone}", m.name);
                    if m.port.is_some() {
                        names.push(format!("_{}._{}.{svc}", m.name, m.proto));
                    }
                    names.push(svc);
                }
            }
        }
        // (Well short of 255 octets, where the walk would leave a name out.)
        if names.iter().any(|n| n.len() > 240) {
            return None;
        }
        names.sort();
        names.dedup();
        Some(names)
    }

    /// The registry zone that holds `name`, if any.
    pub fn zone_of(&self, name: &Name) -> Option<&Name> {
        self.zone_for(name).map(|z| &z.name)
    }

    /// The position in [`zones`](Self::zones) of the zone `name` is in
    /// (the deepest that holds it).
    pub fn zone_index(&self, name: &Name) -> Option<usize> {
        self.zones
            .iter()
            .enumerate()
            .filter(|(_, z)| z.name.zone_of(name))
            .max_by_key(|(_, z)| z.name.num_labels())
            .map(|(i, _)| i)
    }

    /// Every record `inst` contributes to the registry zones, given the
    /// rest of the registry (owner flags, Binder service definitions).
    /// An RRset is the union of its contributors' records with the least
    /// of their TTLs.
    pub fn contributions(&self, reg: &Registry, inst: &Instance) -> Vec<Contribution> {
        self.contributions_in(reg, inst, instance_service(reg, inst))
    }

    /// [`contributions`](Self::contributions), given the definition of
    /// the instance's Binder service (the caller keeps them indexed: a
    /// search of the registry per instance is quadratic).
    pub fn contributions_in(
        &self,
        reg: &Registry,
        inst: &Instance,
        service: Option<&BinderService>,
    ) -> Vec<Contribution> {
        let mut out = Records::default();
        self.walk(reg, inst, service, &mut out);
        out.list
    }

    /// Puts what `inst` contributes into `out`, given the definition of
    /// its Binder service.
    fn walk(
        &self,
        reg: &Registry,
        inst: &Instance,
        service: Option<&BinderService>,
        out: &mut impl Sink,
    ) {
        self.instance_records(reg, inst, out);
        self.binder_member_records(inst, service, out);
    }

    /// The zone with only its SOA (serial 0) and NS records.
    pub fn empty_zone(&self, origin: &Name) -> Zone {
        let mut z = Zone::new(origin);
        let [refresh, retry, expire, minimum] = self.soa_timers;
        let mname = self.ns.first().cloned().unwrap_or_else(|| origin.clone());
        let soa = SOA::new(
            mname,
            self.hostmaster.clone(),
            0,
            refresh as i32,
            retry as i32,
            expire as i32,
            minimum,
        );
        let _ = z.insert(Record::from_rdata(
            origin.clone(),
            self.ttl.max(minimum),
            RData::SOA(soa),
        ));
        for ns in &self.ns {
            let _ = z.insert(Record::from_rdata(
                origin.clone(),
                3600,
                RData::NS(NS(ns.clone())),
            ));
        }
        z
    }

    fn instance_records(&self, reg: &Registry, inst: &Instance, out: &mut impl Sink) {
        if inst.reg.disabled {
            return;
        }
        if let Some(owner) = inst
            .reg
            .owner
            .as_deref()
            .filter(|o| self.owner_enabled(reg, o))
        {
            self.cns_records(inst, owner, out);
        }
        if let Some(b) = &inst.reg.binder {
            if b.host_type.queryable() {
                let ttl = b.ttl.unwrap_or(self.ttl);
                let host = format!("{}.{}", b.host_label(&inst.id), b.domain);
                for name in std::iter::once(&host).chain(&b.aliases) {
                    if let Ok(name) = fqdn(name) {
                        for &a in &inst.reg.addresses {
                            out.add(&name, ttl, || address(a));
                        }
                    }
                }
            }
        }
    }

    fn cns_records<S: Sink>(&self, inst: &Instance, owner: &str, out: &mut S) {
        let id_txt = || RData::TXT(TXT::new(vec![inst.id.to_string()]));
        let mut ptr_targets: BTreeMap<IpAddr, Name> = BTreeMap::new();
        for &addr in &inst.reg.addresses {
            for zone in self.cns_zones(addr) {
                let Ok(inst_name) = child(&format!("{}.inst.{owner}", inst.id), zone) else {
                    continue;
                };
                out.add(&inst_name, self.ttl, || address(addr));
                out.add(&inst_name, self.ttl, id_txt);
                let shorter = S::REVERSE
                    && ptr_targets
                        .get(&addr)
                        .is_none_or(|t| t.len() > inst_name.len());
                if shorter {
                    ptr_targets.insert(addr, inst_name.clone());
                }
                for m in &inst.reg.services {
                    if !inst.listed_in(&cns_key(owner, &m.name)) {
                        continue;
                    }
                    let Ok(svc) = child(&format!("{}.svc.{owner}", m.name), zone) else {
                        continue;
                    };
                    out.add(&svc, self.ttl, || address(addr));
                    out.add(&svc, self.ttl, id_txt);
                    if let Some(port) = m.port {
                        if let Ok(srv) = child(&format!("_{}._{}", m.name, m.proto), &svc) {
                            out.add(&srv, self.srv_ttl, || {
                                RData::SRV(SRV::new(m.priority, m.weight, port, inst_name.clone()))
                            });
                        }
                    }
                }
            }
        }
        for (addr, target) in ptr_targets {
            out.add(&reverse_name(addr), self.ttl, || RData::PTR(PTR(target)));
        }
    }

    /// A Binder service member's records at its service: A/AAAA at the
    /// domain (TTL: the lesser of the SRV TTL and its host TTL, so the set
    /// gets the minimum over members) and one SRV per port.
    fn binder_member_records(
        &self,
        inst: &Instance,
        service: Option<&BinderService>,
        out: &mut impl Sink,
    ) {
        let Some(b) = inst
            .reg
            .binder
            .as_ref()
            .filter(|b| !inst.reg.disabled && b.host_type.serviceable())
        else {
            return;
        };
        if !inst.listed_in(&binder_key(&b.domain)) {
            return;
        }
        let Some(service) = service else {
            return;
        };
        let Ok(domain_name) = fqdn(&b.domain) else {
            return;
        };
        let srv_ttl = service.ttl.unwrap_or(self.srv_ttl);
        let a_ttl = b.ttl.unwrap_or(self.ttl).min(srv_ttl);
        let Ok(srv_name) = child(
            &format!("{}.{}", service.srvce, service.proto),
            &domain_name,
        ) else {
            return;
        };
        for &a in &inst.reg.addresses {
            out.add(&domain_name, a_ttl, || address(a));
        }
        let Ok(target) = child(b.host_label(&inst.id), &domain_name) else {
            return;
        };
        let ports = if b.ports.is_empty() {
            vec![service.port]
        } else {
            b.ports.clone()
        };
        for port in ports {
            out.add(&srv_name, srv_ttl, || {
                RData::SRV(SRV::new(0, 10, port, target.clone()))
            });
        }
    }
}

/// The definition of `inst`'s Binder service, if it is a Binder member.
fn instance_service<'r>(reg: &'r Registry, inst: &Instance) -> Option<&'r BinderService> {
    let domain = &inst.reg.binder.as_ref()?.domain;
    binder_service(reg, domain)
}

/// The service definition of a Binder domain: that of its first member
/// (by id) that carries one.
pub fn binder_service<'r>(reg: &'r Registry, domain: &str) -> Option<&'r BinderService> {
    reg.instances
        .values()
        .filter(|i| !i.reg.disabled)
        .filter_map(|i| i.reg.binder.as_ref())
        .filter(|b| b.domain == domain)
        .find_map(|b| b.service.as_ref())
}

/// One record an instance contributes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Contribution {
    pub name: Name,
    pub ttl: u32,
    pub data: RData,
}

/// An instance's records in the order first contributed, each once: a
/// table of positions in the list beside it (an instance at every limit
/// contributes thousands, and a linear search per record was quadratic;
/// positions, unlike a set of the records, cost no copy of each).
#[derive(Default)]
struct Records {
    list: Vec<Contribution>,
    seen: HashTable<usize>,
    hasher: FixedState,
}

/// Where the walk over an instance's records puts them: every record
/// ([`Records`]), or only the names ([`Names`]).
trait Sink {
    /// Whether the walk makes the reverse (PTR) records, whose names the
    /// API does not list.
    const REVERSE: bool;
    fn add(&mut self, name: &Name, ttl: u32, data: impl FnOnce() -> RData);
}

impl Sink for Records {
    const REVERSE: bool = true;

    fn add(&mut self, name: &Name, ttl: u32, data: impl FnOnce() -> RData) {
        let c = Contribution {
            name: name.to_lowercase(),
            ttl,
            data: data(),
        };
        let (list, hasher) = (&self.list, &self.hasher);
        let hash = hasher.hash_one(&c);
        match self
            .seen
            .entry(hash, |&i| list[i] == c, |&i| hasher.hash_one(&list[i]))
        {
            hash_table::Entry::Occupied(_) => {}
            hash_table::Entry::Vacant(slot) => {
                slot.insert(list.len());
                self.list.push(c);
            }
        }
    }
}

/// The names of an instance's records but the reverse ones, lower-cased,
/// with repeats.
#[derive(Default)]
struct Names(Vec<String>);

impl Sink for Names {
    const REVERSE: bool = false;

    fn add(&mut self, name: &Name, _ttl: u32, _data: impl FnOnce() -> RData) {
        self.0.push(name.to_lowercase().to_string());
    }
}

fn address(a: IpAddr) -> RData {
    match a {
        IpAddr::V4(v4) => RData::A(A(v4)),
        IpAddr::V6(v6) => RData::AAAA(AAAA(v6)),
    }
}

fn fqdn(s: &str) -> Result<Name, RegistryError> {
    let mut n = parse(s).map_err(|e| RegistryError::Invalid {
        field: "name".into(),
        message: format!("{s:?}: {e}"),
    })?;
    n.set_fqdn(true);
    Ok(n)
}

fn child(labels: &str, parent: &Name) -> Result<Name, RegistryError> {
    let rel = parse(labels).map_err(|e| RegistryError::Invalid {
        field: "name".into(),
        message: format!("{labels:?}: {e}"),
    })?;
    rel.append_domain(parent)
        .map_err(|e| RegistryError::Invalid {
            field: "name".into(),
            message: format!("{labels}.{parent}: {e}"),
        })
}

/// `text` as a name, as `Name::from_str` reads it. Registry labels are
/// lower-case letters, digits and hyphens already, which IDNA processing
/// would return unchanged: those skip it (it is most of the cost of
/// naming an instance, done for every API reply that shows its names).
fn parse(text: &str) -> Result<Name, hickory_proto::ProtoError> {
    let plain_label = |l: &str| {
        l.starts_with('_')
            || (!l.starts_with("xn--")
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'))
    };
    let labels = text.strip_suffix('.').unwrap_or(text);
    match !labels.is_empty() && labels.split('.').all(plain_label) {
        true => Name::from_ascii(text),
        false => Name::from_str(text),
    }
}

/// `in-addr.arpa` / `ip6.arpa` name of an address.
pub fn reverse_name(addr: IpAddr) -> Name {
    let text = match addr {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            format!("{}.{}.{}.{}.in-addr.arpa.", o[3], o[2], o[1], o[0])
        }
        IpAddr::V6(v6) => {
            let mut s = String::new();
            for byte in v6.octets().iter().rev() {
                s.push_str(&format!("{:x}.{:x}.", byte & 0xf, byte >> 4));
            }
            s + "ip6.arpa."
        }
    };
    Name::from_ascii(&text).expect("well-formed reverse name")
}

#[cfg(test)]
pub(crate) mod tests;
