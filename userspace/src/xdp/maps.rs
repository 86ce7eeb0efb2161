//! The kernel's maps: their names, the sizes `[xdp] capacity` gives them,
//! and the handles the controller holds, from a loaded object or from
//! their pins. [`super::FastPath`] is their one owner.

use aya::maps::{Array, HashMap, IterableMap, Map, MapData, PerCpuArray};
use xdpdns_common::rrl::Bucket;
use xdpdns_common::slots::{slots_for, TinySlot};
use xdpdns_common::{
    AddressKey, Answer, LongKey, OverlayKey, ShortKey, TinyKey, XdpConfig, BLOCK_ID_MAX,
};

use super::blocks::{BlockMaps, Class};
use super::error::XdpError;
use super::layout::table_of;
use super::pins::PinDir;
use crate::answers::compile::Table;

/// What the kernel's maps are sized for: (name, type) entries in the
/// table (with an eighth more room beside it for a change's overlay),
/// the rate limiter's buckets, and what the first table holds, if it is
/// known when the maps are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    pub entries: u32,
    pub rrl_slots: u32,
    pub served: Option<Served>,
}

impl From<u32> for Capacity {
    /// `entries`, and a one-bucket rate limiter (rate limiting off).
    fn from(entries: u32) -> Self {
        Capacity {
            entries,
            rrl_slots: 1,
            served: None,
        }
    }
}

/// What a table holds outside the tiny-name slots: entries of short and
/// long names, and sections (counted per entry) of each block class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Served {
    pub short: u32,
    pub long: u32,
    pub mini: u32,
    pub small: u32,
    pub large: u32,
}

impl Served {
    pub fn of(table: &Table) -> Served {
        let mut s = Served::default();
        for (key, c) in table {
            match table_of(key) {
                1 => s.short += 1,
                2 => s.long += 1,
                _ => {}
            }
            if let Some(section) = &c.block {
                match Class::of(key, section) {
                    Class::Mini => s.mini += 1,
                    Class::Small => s.small += 1,
                    Class::Large => s.large += 1,
                }
            }
        }
        s
    }
}

/// The maps sized from the table served, once known: a restart adopts
/// them as pinned whatever their size.
const SIZED_FROM_SERVED: [&str; 7] = [
    "SHORT_NAMES",
    "LONG_NAMES",
    "OVERLAY_SHORT",
    "OVERLAY_LONG",
    "BLOCKS",
    "SMALL_BLOCKS",
    "MINI_BLOCKS",
];

/// Whether a pinned map of `name` must have the size `capacity` gives it.
pub(super) fn sized_by_capacity(name: &str) -> bool {
    !SIZED_FROM_SERVED.contains(&name)
}

pub(super) fn map_sizes(capacity: Capacity) -> [(&'static str, u32); 11] {
    let rrl_slots = capacity.rrl_slots.max(1);
    let served = capacity.served;
    let capacity = capacity.entries;
    // One copy of the table. Elements are allocated as they are inserted
    // (BPF_F_NO_PREALLOC): a hash map costs its elements and a bucket
    // array of 16 bytes a slot for a power of two above its size,
    // allocated up front.
    let entries = capacity.max(16);
    // Tiny names, the bulk of most zones, are kept in slots of an array
    // (`xdpdns_common::slots`), allocated whole at load: 80 bytes an
    // entry of `capacity`. Those without a slot go to the hash map beside
    // it, a sixteenth of the capacity (a change may find both buckets of
    // a new key full).
    let tiny_slots = slots_for(capacity);
    let overflow_entries = (capacity / 16).max(16);
    // The other maps: sized from the first table when it is known (room
    // for a quarter more than it holds, up to the power of two the
    // kernel's bucket array has anyway, and no less than a share of the
    // capacity for what later changes bring: a registry starts empty,
    // and its names are often longer than 32 bytes); else fixed shares
    // of the capacity. Block ids never exceed the block table's size,
    // which fits `Answer`'s 24 bits.
    let ids = |n: u32| n.min(BLOCK_ID_MAX - 1);
    let size = |fixed: u32, floor: u32, cap: u32, held: Option<u32>| -> u32 {
        match (served, held) {
            (Some(_), Some(n)) => {
                let room = n.saturating_add(n / 4).max(floor).max(16);
                room.checked_next_power_of_two()
                    .unwrap_or(room)
                    .min(cap.max(16))
            }
            _ => fixed.max(16),
        }
    };
    let held = |f: fn(&Served) -> u32| served.as_ref().map(f);
    let short_entries = size(capacity / 2, capacity / 4, entries, held(|s| s.short));
    // IPv6 reverse names are 74 bytes.
    let long_entries = size(capacity / 16, capacity / 16, entries, held(|s| s.long));
    // A change writes its new blocks before the old are released (once
    // no overlay generation can reach them): a quarter more room.
    let blocks = |fixed: u32, floor: u32, held: Option<u32>| {
        ids(size(
            with_slack(fixed.max(64)),
            floor,
            with_slack(entries),
            held,
        ))
    };
    let block_entries = blocks(capacity / 8, capacity / 32, held(|s| s.large));
    // Signed variants each take a small block of their own.
    let small_block_entries = blocks(capacity / 4, capacity / 8, held(|s| s.small));
    // Sections of 33 to 64 bytes (a CNAME and an address, a few
    // records) in 128-byte elements rather than 320.
    let mini_block_entries = blocks(capacity / 4, capacity / 8, held(|s| s.mini));
    [
        ("TINY_SLOTS", tiny_slots),
        ("TINY_NAMES", overflow_entries),
        ("SHORT_NAMES", short_entries),
        ("LONG_NAMES", long_entries),
        ("OVERLAY_TINY", overlay_size(entries)),
        ("OVERLAY_SHORT", overlay_size(short_entries)),
        ("OVERLAY_LONG", overlay_size(long_entries)),
        ("BLOCKS", block_entries),
        ("SMALL_BLOCKS", small_block_entries),
        ("MINI_BLOCKS", mini_block_entries),
        ("RRL_BUCKETS", rrl_slots),
    ]
}

/// A quarter more than `share`.
const fn with_slack(share: u32) -> u32 {
    share.saturating_add(share / 4)
}

/// The overlay table beside a name table of `share` entries: an eighth
/// of it. It holds the changed entries not yet folded into the base,
/// once per generation still reachable; a change that would not fit is
/// written while the kernel passes every query up (see
/// `FastPath::apply`).
const fn overlay_size(share: u32) -> u32 {
    let eighth = share / 8;
    if eighth < 16 {
        16
    } else {
        eighth
    }
}

/// Every map the controller reads or writes: what is pinned.
pub(super) const MAPS: [&str; 16] = [
    "CONFIG",
    "RRL_BUCKETS",
    "TINY_SLOTS",
    "TINY_NAMES",
    "SHORT_NAMES",
    "LONG_NAMES",
    "OVERLAY_TINY",
    "OVERLAY_SHORT",
    "OVERLAY_LONG",
    "BLOCKS",
    "SMALL_BLOCKS",
    "MINI_BLOCKS",
    "COUNTERS",
    "ZONE_QUERIES",
    "ADDRESSES",
    "TAP_RING",
];

/// The maps by name, taken from a loaded object or opened from pins.
pub(super) struct Maps {
    pub(super) config: Array<MapData, XdpConfig>,
    pub(super) tiny_slots: Array<MapData, TinySlot>,
    pub(super) tiny: HashMap<MapData, TinyKey, Answer>,
    pub(super) short: HashMap<MapData, ShortKey, Answer>,
    pub(super) long: HashMap<MapData, LongKey, Answer>,
    pub(super) overlay_tiny: HashMap<MapData, OverlayKey<TinyKey>, Answer>,
    pub(super) overlay_short: HashMap<MapData, OverlayKey<ShortKey>, Answer>,
    pub(super) overlay_long: HashMap<MapData, OverlayKey<LongKey>, Answer>,
    pub(super) block_maps: BlockMaps,
    pub(super) counters: PerCpuArray<MapData, u64>,
    pub(super) zone_queries: PerCpuArray<MapData, u64>,
    pub(super) addresses: HashMap<MapData, AddressKey, u8>,
    pub(super) rrl_buckets: Array<MapData, Bucket>,
    /// The ring buffer of the kernel's dnstap samples (read by
    /// `crate::dnstap::kernel`).
    pub(super) tap_ring: MapData,
}

impl Maps {
    pub(super) fn new(
        mut take: impl FnMut(&'static str) -> Result<Map, XdpError>,
    ) -> Result<Self, XdpError> {
        Ok(Maps {
            config: Array::try_from(take("CONFIG")?)?,
            tiny_slots: Array::try_from(take("TINY_SLOTS")?)?,
            tiny: HashMap::try_from(take("TINY_NAMES")?)?,
            short: HashMap::try_from(take("SHORT_NAMES")?)?,
            long: HashMap::try_from(take("LONG_NAMES")?)?,
            overlay_tiny: HashMap::try_from(take("OVERLAY_TINY")?)?,
            overlay_short: HashMap::try_from(take("OVERLAY_SHORT")?)?,
            overlay_long: HashMap::try_from(take("OVERLAY_LONG")?)?,
            block_maps: BlockMaps {
                mini: HashMap::try_from(take("MINI_BLOCKS")?)?,
                small: HashMap::try_from(take("SMALL_BLOCKS")?)?,
                large: HashMap::try_from(take("BLOCKS")?)?,
            },
            counters: PerCpuArray::try_from(take("COUNTERS")?)?,
            zone_queries: PerCpuArray::try_from(take("ZONE_QUERIES")?)?,
            addresses: HashMap::try_from(take("ADDRESSES")?)?,
            rrl_buckets: Array::try_from(take("RRL_BUCKETS")?)?,
            tap_ring: match take("TAP_RING")? {
                Map::RingBuf(data) => data,
                _ => return Err(XdpError::MissingMap("TAP_RING")),
            },
        })
    }

    /// Opens the pinned maps; `None` when one is missing.
    pub(super) fn from_pins(pins: &PinDir) -> Result<Option<Self>, XdpError> {
        if MAPS.iter().any(|name| !pins.map(name).exists()) {
            return Ok(None);
        }
        let open = |name: &'static str| -> Result<Map, XdpError> {
            let data = MapData::from_pin(pins.map(name))?;
            Ok(match name {
                "CONFIG" | "RRL_BUCKETS" | "TINY_SLOTS" => Map::Array(data),
                "COUNTERS" | "ZONE_QUERIES" => Map::PerCpuArray(data),
                "TAP_RING" => Map::RingBuf(data),
                _ => Map::HashMap(data),
            })
        };
        Self::new(open).map(Some)
    }

    pub(super) fn each(&self) -> [(&'static str, &MapData); 16] {
        [
            ("RRL_BUCKETS", self.rrl_buckets.map()),
            ("CONFIG", self.config.map()),
            ("TINY_SLOTS", self.tiny_slots.map()),
            ("TINY_NAMES", self.tiny.map()),
            ("SHORT_NAMES", self.short.map()),
            ("LONG_NAMES", self.long.map()),
            ("OVERLAY_TINY", self.overlay_tiny.map()),
            ("OVERLAY_SHORT", self.overlay_short.map()),
            ("OVERLAY_LONG", self.overlay_long.map()),
            ("BLOCKS", self.block_maps.map(Class::Large)),
            ("SMALL_BLOCKS", self.block_maps.map(Class::Small)),
            ("MINI_BLOCKS", self.block_maps.map(Class::Mini)),
            ("COUNTERS", self.counters.map()),
            ("ZONE_QUERIES", self.zone_queries.map()),
            ("ADDRESSES", self.addresses.map()),
            ("TAP_RING", &self.tap_ring),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(capacity: Capacity) -> std::collections::HashMap<&'static str, u32> {
        map_sizes(capacity).into_iter().collect()
    }

    #[test]
    fn name_tables_hold_one_copy_with_shares_by_name_length_and_overlays_beside() {
        let s = sizes(Capacity::from(131_072));
        assert_eq!(s["TINY_SLOTS"], 145_636, "a tenth spare, whole buckets");
        assert_eq!(s["TINY_NAMES"], 8_192, "the slots' overflow: a sixteenth");
        assert_eq!(s["SHORT_NAMES"], 65_536, "half");
        assert_eq!(s["LONG_NAMES"], 8_192);
        assert_eq!(s["OVERLAY_TINY"], 16_384, "an eighth of its share");
        assert_eq!(s["OVERLAY_LONG"], 1_024);
        assert_eq!(s["BLOCKS"], 16_384 + 4_096);
        assert_eq!(s["SMALL_BLOCKS"], 32_768 + 8_192);
        assert_eq!(s["MINI_BLOCKS"], 32_768 + 8_192);
        assert_eq!(s["RRL_BUCKETS"], 1, "rate limiting off: one bucket");
    }

    #[test]
    fn tiny_capacities_get_floors_and_block_ids_stay_in_range() {
        let s = sizes(Capacity {
            entries: 0,
            rrl_slots: 0,
            served: None,
        });
        assert_eq!(s["TINY_NAMES"], 16);
        assert_eq!(s["TINY_SLOTS"], 8);
        assert_eq!(s["LONG_NAMES"], 16);
        assert_eq!(s["OVERLAY_LONG"], 16);
        assert_eq!(s["BLOCKS"], 80);
        assert_eq!(s["RRL_BUCKETS"], 1);
        let huge = sizes(Capacity {
            entries: u32::MAX,
            rrl_slots: 1 << 20,
            served: None,
        });
        assert!(huge["BLOCKS"] < BLOCK_ID_MAX && huge["SMALL_BLOCKS"] < BLOCK_ID_MAX);
        assert_eq!(huge["SHORT_NAMES"], u32::MAX / 2, "never wraps");
        assert!(huge["TINY_SLOTS"] > u32::MAX / 2, "saturates, never wraps");
        assert_eq!(huge["RRL_BUCKETS"], 1 << 20);
    }

    #[test]
    fn a_known_table_sizes_the_other_maps_with_room_and_floors() {
        let served = Served {
            short: 200_000,
            long: 0,
            mini: 275_000,
            small: 100_000,
            large: 3_000_000,
        };
        let s = sizes(Capacity {
            entries: 2_600_000,
            rrl_slots: 1,
            served: Some(served),
        });
        assert_eq!(
            s["SHORT_NAMES"], 1_048_576,
            "the floor (a quarter), to a power of two"
        );
        assert_eq!(s["OVERLAY_SHORT"], 131_072);
        assert_eq!(s["LONG_NAMES"], 262_144, "the floor: 1/16 of the capacity");
        assert_eq!(
            s["MINI_BLOCKS"], 524_288,
            "a quarter more, to a power of two"
        );
        assert_eq!(s["SMALL_BLOCKS"], 524_288, "the floor: an eighth");
        assert_eq!(
            s["BLOCKS"],
            2_600_000 + 650_000,
            "at most the capacity, with slack"
        );
        let unknown = sizes(Capacity::from(2_600_000));
        for name in ["TINY_SLOTS", "TINY_NAMES", "OVERLAY_TINY", "RRL_BUCKETS"] {
            assert_eq!(
                s[name], unknown[name],
                "{name} depends on the capacity alone"
            );
            assert!(sized_by_capacity(name));
        }
        for name in ["SHORT_NAMES", "MINI_BLOCKS", "BLOCKS"] {
            assert!(!sized_by_capacity(name));
        }
    }

    #[test]
    fn every_sized_map_is_a_pinned_map() {
        for (name, _) in map_sizes(Capacity::from(16)) {
            assert!(MAPS.contains(&name), "{name}");
        }
    }
}
