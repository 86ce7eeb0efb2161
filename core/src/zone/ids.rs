//! Small ids for served zones, kept in the snapshot: the XDP compiler
//! writes a zone's id into every kernel entry, the kernel and the
//! fallback count answers per id, and a scrape names the ids. An id is
//! given by the commit that first serves the zone and kept for the life
//! of the store (never reused, so a count never changes zone); zones
//! served by one commit get theirs in name order, so the zones loaded at
//! start-up get the same ids at every start, as the entries of a kernel
//! table kept across a restart say. Past [`ZONES_MAX`] zones share id 0
//! (not counted).

use std::collections::HashMap;

use hickory_proto::rr::LowerName;
use xdpdns_common::ZONES_MAX;

#[derive(Clone, Debug, Default)]
pub struct ZoneIds {
    /// foldhash: looked up on every full answer.
    by_name: HashMap<LowerName, u32, foldhash::fast::RandomState>,
    names: Vec<LowerName>,
}

impl ZoneIds {
    /// The id of `zone` (1..ZONES_MAX), or 0: none given, or ids used up.
    pub fn id(&self, zone: &LowerName) -> u32 {
        self.by_name.get(zone).copied().unwrap_or(0)
    }

    /// The zone named by every id given, in id order (id = index + 1).
    pub fn names(&self) -> &[LowerName] {
        &self.names
    }

    /// Whether every one of `zones` has an id (or none can be given).
    pub(super) fn covers<'a>(&self, mut zones: impl Iterator<Item = &'a LowerName>) -> bool {
        self.names.len() as u32 + 1 >= ZONES_MAX || zones.all(|z| self.by_name.contains_key(z))
    }

    /// Gives ids to those of `zones` without one, in name order.
    pub(super) fn assign<'a>(&mut self, zones: impl Iterator<Item = &'a LowerName>) {
        let mut new: Vec<&LowerName> = zones.filter(|z| !self.by_name.contains_key(*z)).collect();
        new.sort();
        for zone in new {
            let id = self.names.len() as u32 + 1;
            if id >= ZONES_MAX {
                return;
            }
            self.by_name.insert(zone.clone(), id);
            self.names.push(zone.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::Name;

    fn zone(n: &str) -> LowerName {
        LowerName::new(&Name::from_ascii(n).unwrap())
    }

    #[test]
    fn ids_are_stable_in_name_order_and_never_reused() {
        let mut ids = ZoneIds::default();
        ids.assign([zone("ids-b.test."), zone("ids-a.test.")].iter());
        let (a, b) = (ids.id(&zone("ids-a.test.")), ids.id(&zone("ids-b.test.")));
        assert_eq!((a, b), (1, 2), "one commit's zones get ids in name order");
        assert_eq!(
            ids.id(&zone("IDS-A.test.")),
            a,
            "case does not make another zone"
        );
        assert_eq!(ids.names()[a as usize - 1], zone("ids-a.test."));
        ids.assign([zone("ids-c.test."), zone("ids-a.test.")].iter());
        assert_eq!(ids.id(&zone("ids-a.test.")), a, "an id is kept");
        assert_eq!(ids.id(&zone("ids-c.test.")), 3);
        assert_eq!(ids.id(&zone("none.test.")), 0);
        assert!(ids.covers([zone("ids-c.test.")].iter()));
        assert!(!ids.covers([zone("ids-d.test.")].iter()));
    }

    #[test]
    fn ids_stop_at_the_limit() {
        let mut ids = ZoneIds::default();
        let many: Vec<LowerName> = (0..ZONES_MAX + 5)
            .map(|i| zone(&format!("z{i}.test.")))
            .collect();
        ids.assign(many.iter());
        assert_eq!(ids.names().len() as u32, ZONES_MAX - 1);
        let zeros = many.iter().filter(|z| ids.id(z) == 0).count();
        assert_eq!(zeros, 6);
        assert!(ids.covers(many.iter()), "nothing more can be given");
    }
}
