//! The catalog zone xdpdns produces (RFC 9432, version 2): every zone it
//! is the primary for (file zones, zones added at runtime, registry
//! zones) as a member, so secondaries configured with nothing but the
//! catalog (Knot's `catalog-role: interpret`, BIND's `catalog-zones`)
//! start and stop serving them by themselves. The catalog changes in the
//! same commit as the zone it adds or removes.

use std::collections::{BTreeSet, HashSet};
use std::sync::Mutex;

use hickory_proto::rr::rdata::{NS, PTR, SOA, TXT};
use hickory_proto::rr::{LowerName, Name, RData, Record};

use crate::zone::{Snapshot, Zone, ZoneStore};

/// The catalog's settings and the zones that are not its members.
pub struct Catalog {
    origin: Name,
    /// The `group` property of every member, when configured.
    group: Option<String>,
    /// Zones served here that are not ours (secondary zones).
    others: Mutex<HashSet<LowerName>>,
    /// Members of catalogs followed here (secondary zones too).
    followed: Mutex<HashSet<LowerName>>,
}

impl Catalog {
    pub fn new(origin: Name, group: Option<String>, secondaries: &[Name]) -> Catalog {
        Catalog {
            origin,
            group,
            others: Mutex::new(secondaries.iter().map(LowerName::new).collect()),
            followed: Mutex::new(HashSet::new()),
        }
    }

    pub fn origin(&self) -> &Name {
        &self.origin
    }

    /// After a reload: the secondary zones now configured.
    pub fn set_secondaries(&self, secondaries: &[Name]) {
        *self.others.lock().unwrap_or_else(|p| p.into_inner()) =
            secondaries.iter().map(LowerName::new).collect();
    }

    /// The members of followed catalogs served now.
    pub fn set_followed(&self, members: impl IntoIterator<Item = LowerName>) {
        *self.followed.lock().unwrap_or_else(|p| p.into_inner()) = members.into_iter().collect();
    }

    /// Whether `zone` is the catalog or one of its members in `snapshot`.
    pub fn covers(&self, snapshot: &Snapshot, zone: &LowerName) -> bool {
        *zone == LowerName::new(&self.origin)
            || (snapshot.zone(zone).is_some() && self.member(zone))
    }

    fn member(&self, zone: &LowerName) -> bool {
        *zone != LowerName::new(&self.origin)
            && !self
                .others
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(zone)
            && !self
                .followed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(zone)
    }

    /// The catalog for the zones served now, with `zone` added (or
    /// removed): what to commit beside that change. Empty when the
    /// catalog would not change.
    pub fn with_member(&self, store: &ZoneStore, zone: &Name, present: bool) -> Vec<Zone> {
        let snapshot = store.snapshot();
        let mut members = self.members(&snapshot);
        let key = LowerName::new(zone);
        match present {
            true if self.member(&key) => members.insert(key),
            true => false,
            false => members.remove(&key),
        };
        vec![self.build(&members)]
    }

    /// The catalog for the zones `snapshot` serves, with `added` and
    /// without `removed` (zones committed with it).
    pub fn for_zones<'a>(
        &self,
        snapshot: &Snapshot,
        added: impl Iterator<Item = &'a Name>,
        removed: &[Name],
    ) -> Zone {
        let mut members = self.members(snapshot);
        members.extend(added.map(LowerName::new).filter(|z| self.member(z)));
        for r in removed {
            members.remove(&LowerName::new(r));
        }
        self.build(&members)
    }

    fn members(&self, snapshot: &Snapshot) -> BTreeSet<LowerName> {
        snapshot
            .zones()
            .map(|z| z.origin_key().clone())
            .filter(|z| self.member(z))
            .collect()
    }

    /// The catalog zone listing `members` (its serial is set by the
    /// store, which moves it whenever the contents change).
    fn build(&self, members: &BTreeSet<LowerName>) -> Zone {
        let origin = &self.origin;
        let name = |label: &str| {
            Name::from_ascii(label)
                .and_then(|l| l.append_domain(origin))
                .expect("a catalog label")
        };
        let invalid = Name::from_ascii("invalid.").expect("static");
        let soa = SOA::new(
            invalid.clone(),
            invalid.clone(),
            1,
            3600,
            600,
            2_147_483_646,
            0,
        );
        let mut records = vec![
            Record::from_rdata(origin.clone(), 0, RData::SOA(soa)),
            Record::from_rdata(origin.clone(), 0, RData::NS(NS(invalid))),
            Record::from_rdata(name("version"), 0, RData::TXT(TXT::new(vec!["2".into()]))),
        ];
        for member in members {
            let member = Name::from(member);
            let id = member_id(&member);
            let owner = name(&format!("{id}.zones"));
            records.push(Record::from_rdata(owner, 0, RData::PTR(PTR(member))));
            if let Some(g) = &self.group {
                let owner = name(&format!("group.{id}.zones"));
                records.push(Record::from_rdata(
                    owner,
                    0,
                    RData::TXT(TXT::new(vec![g.clone()])),
                ));
            }
        }
        Zone::from_records(origin, records).expect("catalog records are in the catalog zone")
    }
}

/// A member's id: stable for its name (RFC 9432 §4.1: a new id is a
/// reset of the member at the consumers), a 64-bit FNV-1a hash of the
/// lower-cased name in hex.
pub fn member_id(zone: &Name) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in zone.to_lowercase().to_ascii().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    #[test]
    fn members_are_ptrs_under_stable_ids_with_their_group() {
        let store = ZoneStore::new();
        let catalog = Catalog::new(
            name("catalog.test."),
            Some("front".into()),
            &[name("sec.test.")],
        );
        let zones = catalog.with_member(&store, &name("Example.COM."), true);
        let z = &zones[0];
        let records: Vec<String> = z.records().map(|r| r.to_string()).collect();
        let id = member_id(&name("example.com."));
        assert_eq!(
            id,
            member_id(&name("EXAMPLE.com.")),
            "case does not change the id"
        );
        assert!(
            records
                .iter()
                .any(|r| r.contains(&format!("{id}.zones.catalog.test."))
                    && r.contains("PTR")
                    && r.contains("example.com.")),
            "{records:#?}"
        );
        assert!(
            records.iter().any(
                |r| r.starts_with(&format!("group.{id}.zones.catalog.test."))
                    && r.contains("front")
            ),
            "{records:#?}"
        );
        assert!(records
            .iter()
            .any(|r| r.starts_with("version.catalog.test.") && r.contains('2')));
        // Secondary zones and the catalog itself are never members.
        let z = catalog
            .with_member(&store, &name("sec.test."), true)
            .remove(0);
        assert!(!z.records().any(|r| r.data.to_string().contains("sec.test")));
    }
}
