//! What readers and subscribers see: an immutable [`Snapshot`] of every
//! served zone, and the [`ZoneDiff`] one change made to one zone.

use std::sync::Arc;

use hickory_proto::rr::{LowerName, Name, Record};

use super::ids::ZoneIds;
use super::Zone;

/// Up to this many zones, [`Snapshot::zone_of`] compares with each origin.
const FEW_ZONES: usize = 8;

/// An immutable view of every served zone.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub(super) version: u64,
    pub(super) zones: super::FastMap<LowerName, Arc<Zone>>,
    pub(super) zone_ids: Arc<ZoneIds>,
}

impl Default for Snapshot {
    fn default() -> Self {
        // A random seed: the hash of names clients send is not public.
        let seed = super::random_seed();
        Snapshot {
            version: 0,
            zones: super::FastMap::with_hasher(foldhash::fast::FixedState::with_seed(seed)),
            zone_ids: Arc::default(),
        }
    }
}

impl Snapshot {
    /// Increases by one with every published change.
    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn zone(&self, origin: &LowerName) -> Option<&Arc<Zone>> {
        self.zones.get(origin)
    }

    /// The most specific served zone containing `name` (any case). With
    /// a few zones, comparing with each origin costs less than building
    /// and hashing a lowered name per label (the common case, on every
    /// full answer); with many, the hash walk of [`Snapshot::find_zone`].
    pub fn zone_of(&self, name: &Name) -> Option<&Arc<Zone>> {
        if self.zones.len() > FEW_ZONES {
            return self.find_zone(&LowerName::new(name));
        }
        self.zones
            .values()
            .filter(|z| z.origin().zone_of(name))
            .max_by_key(|z| z.origin().num_labels())
    }

    /// The most specific served zone containing `name`.
    pub fn find_zone(&self, name: &LowerName) -> Option<&Arc<Zone>> {
        if self.zones.len() <= FEW_ZONES {
            // (As in `zone_of`: no lowered name built per label.)
            return self
                .zones
                .iter()
                .filter(|(origin, _)| origin.zone_of(name))
                .max_by_key(|(origin, _)| origin.num_labels())
                .map(|(_, z)| z);
        }
        let mut candidate = name.clone();
        loop {
            if let Some(z) = self.zones.get(&candidate) {
                return Some(z);
            }
            if candidate.is_root() {
                return None;
            }
            candidate = candidate.base_name();
        }
    }

    pub fn zones(&self) -> impl Iterator<Item = &Arc<Zone>> {
        self.zones.values()
    }

    /// The small id of the zone at `origin` (0: none).
    pub fn zone_id(&self, origin: &LowerName) -> u32 {
        self.zone_ids.id(origin)
    }

    /// Every zone id given so far, served now or not.
    pub fn zone_ids(&self) -> &ZoneIds {
        &self.zone_ids
    }

    pub fn zone_count(&self) -> usize {
        self.zones.len()
    }
}

/// What one change did to one zone: the records removed and added, SOA
/// included, in the shape of an IXFR difference sequence.
///
/// A zone that appears or goes as a whole carries no record lists
/// (`whole_zone`): listing a million records that every subscriber reads
/// from the snapshot anyway cost seconds at start-up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ZoneDiff {
    pub origin: Name,
    /// `None` when the zone did not exist before the change.
    pub old_serial: Option<u32>,
    /// `None` when the change removed the zone.
    pub new_serial: Option<u32>,
    pub removed: Vec<Record>,
    pub added: Vec<Record>,
    /// The zone appeared (`old_serial` is `None`) or went (`new_serial`
    /// is `None`): the lists are empty, the snapshot has the records.
    pub whole_zone: bool,
}

impl ZoneDiff {
    pub fn is_empty(&self) -> bool {
        !self.whole_zone && self.removed.is_empty() && self.added.is_empty()
    }
}
