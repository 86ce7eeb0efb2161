//! The loader: owns the BPF objects, attaches the program, installs answer
//! tables and reads the counters. The only code here that talks to the
//! kernel besides `sys`.

use std::collections::HashSet;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::Arc;

use aya::maps::{Array, HashMap, IterableMap, Map, MapData, PerCpuArray};
use aya::programs::links::FdLink;
use aya::programs::{Xdp, XdpMode};
use aya::{Ebpf, EbpfLoader};
use aya_obj::programs::XdpAttachType;
use xdpdns_common::rrl::{Bucket, Settings as RrlSettings};
use xdpdns_common::{
    counter, edns_option, key_lead, key_tail, nsid_mode, qtype_slot, AddressKey, Answer,
    AnswerBlock, BenchFrame, LongKey, PassReason, ShortKey, SmallBlock, TinyKey, XdpConfig,
    BENCH_FRAME_MAX, BLOCK_ID_MAX, BLOCK_MAX, LONG_NAME_BUF, NSID_MAX, SHORT_NAME_MAX,
    SMALL_BLOCK_MAX, TINY_NAME_MAX,
};

use super::blocks::BlockIds;
use super::pins::PinDir;
use super::sys::GracePeriod;
use crate::answers::compile::{
    ones_complement_sum, Compiled, EntryKey, Installed, Table, TableDelta,
};
use crate::answers::AnswerTable;
use crate::wire::ServerEdns;

/// The XDP object built from `ebpf/` by `build.rs`: what serves.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xdpdns.bpf.o"));

/// SHA-256 of the embedded XDP object, in hex (`xdpdns --version`).
pub fn object_sha256() -> String {
    use sha2::Digest;
    data_encoding::HEXLOWER.encode(&sha2::Sha256::digest(OBJECT))
}

/// `XdpConfig::object_tag`: pinned objects are adopted only by the same
/// build, both the program (`object`'s SHA-256) and the controller that
/// compiled their table (the executable file: device, inode, size and
/// modification time; a reinstalled binary is another file).
fn object_tag(object: &[u8]) -> u64 {
    use sha2::Digest;
    use std::os::unix::fs::MetadataExt;
    let mut h = sha2::Sha256::new();
    h.update(object);
    if let Ok(m) = std::fs::metadata("/proc/self/exe") {
        for v in [
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime() as u64,
            m.mtime_nsec() as u64,
        ] {
            h.update(v.to_le_bytes());
        }
    }
    let digest = h.finalize();
    u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
}
/// The same program built with its `bench` feature: plus the timing
/// programs and the benchmark floor (`xdp_reflect`). Never loaded to serve.
static BENCH_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xdpdns-bench.bpf.o"));
const PROGRAM: &str = "xdpdns";

#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    #[error("loading the XDP object: {0}")]
    Load(#[from] aya::EbpfError),
    #[error("XDP program: {0}")]
    Program(#[from] aya::programs::ProgramError),
    #[error("BPF map: {0}")]
    Map(#[from] aya::maps::MapError),
    #[error("attaching to {interface} in {mode} mode: {source}")]
    Attach {
        interface: String,
        mode: &'static str,
        #[source]
        source: aya::programs::ProgramError,
    },
    #[error("waiting for a grace period: {0}")]
    Grace(#[source] std::io::Error),
    #[error("counting CPUs: {0}")]
    Cpus(#[source] std::io::Error),
    #[error("the object lacks map {0}")]
    MissingMap(&'static str),
    #[error("running a frame through the program: {0}")]
    TestRun(#[source] std::io::Error),
    #[error("pinning {}: {source}", path.display())]
    Pin {
        path: std::path::PathBuf,
        #[source]
        source: aya::pin::PinError,
    },
    #[error("pinned program: {0}")]
    Link(#[from] aya::programs::links::LinkError),
    #[error("{0}")]
    PinDir(#[from] super::pins::PinDirError),
    #[error("the pinned objects cannot be adopted: {0}")]
    NotAdoptable(String),
    #[error("unpinning: {0}")]
    Unpin(#[source] std::io::Error),
    #[error("the kernel table's contents are not known: a whole table must be installed")]
    TableUnknown,
}

/// How to attach: native (driver) mode, generic (skb) mode, or native with
/// a fallback to generic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttachMode {
    Auto,
    Driver,
    Generic,
}

/// Answered and passed packets, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub answered_a: u64,
    pub answered_aaaa: u64,
    /// Of those, answers from a signed variant (DO=1, signed zone).
    pub answered_signed: u64,
    pub passed: [u64; PassReason::COUNT],
    /// Rate limiting: limited, slipped, dropped, exempt by cookie.
    pub rrl: [u64; 4],
    /// Negative answers to A and AAAA queries: NXDOMAIN, NODATA.
    pub nxdomain: [u64; 2],
    pub nodata: [u64; 2],
}

impl Counters {
    pub fn passed(&self, reason: PassReason) -> u64 {
        self.passed[reason as usize]
    }
}

impl std::fmt::Display for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "answered_a={} answered_aaaa={} answered_signed={} nxdomain={} nodata={}",
            self.answered_a,
            self.answered_aaaa,
            self.answered_signed,
            self.nxdomain.iter().sum::<u64>(),
            self.nodata.iter().sum::<u64>()
        )?;
        for r in PassReason::ALL {
            write!(f, " pass_{}={}", r.label(), self.passed(r))?;
        }
        let [limited, slipped, dropped, exempt] = self.rrl;
        write!(
            f,
            " rrl_limited={limited} rrl_slipped={slipped} rrl_dropped={dropped} rrl_exempt={exempt}"
        )
    }
}

/// The program: loaded from the embedded object, or adopted from its pin
/// (the maps it was loaded with come from their pins too).
enum Object {
    Loaded(Ebpf),
    Pinned(Box<Xdp>),
}

/// The maps whose size follows `[xdp] capacity`, with their sizes.
/// What the kernel's maps are sized for: (name, type) entries per table
/// generation, and the rate limiter's buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    pub entries: u32,
    pub rrl_slots: u32,
}

impl From<u32> for Capacity {
    /// `entries`, and a one-bucket rate limiter (rate limiting off).
    fn from(entries: u32) -> Self {
        Capacity {
            entries,
            rrl_slots: 1,
        }
    }
}

fn map_sizes(capacity: Capacity) -> [(&'static str, u32); 6] {
    let rrl_slots = capacity.rrl_slots.max(1);
    let capacity = capacity.entries;
    // Both generations in each table. Elements are allocated as they
    // are inserted (BPF_F_NO_PREALLOC): a table sized for every name
    // costs only its bucket array until it fills.
    // Every map's bucket array is allocated up front (16 bytes per
    // slot), so the tables for less common name lengths get a share of
    // `capacity`; an entry that finds its table full is left to the
    // fallback (`entries_left_out`).
    let entries = capacity.max(16).saturating_mul(2);
    let short_entries = (capacity / 2).max(16).saturating_mul(2);
    let long_entries = (capacity / 16).max(16).saturating_mul(2);
    // Ids never exceed the block table's size, which fits `Answer`'s 24 bits.
    let block_entries = (capacity / 8)
        .max(64)
        .saturating_mul(2)
        .min(BLOCK_ID_MAX - 1);
    // Signed variants each take a small block of their own; a quarter
    // of the entries (the bucket array costs 16 bytes a slot even
    // when empty). Sections that find it full are the fallback's.
    let small_block_entries = (capacity / 4)
        .max(64)
        .saturating_mul(2)
        .min(BLOCK_ID_MAX - 1);
    [
        ("TINY_NAMES", entries),
        ("SHORT_NAMES", short_entries),
        ("LONG_NAMES", long_entries),
        ("BLOCKS", block_entries),
        ("SMALL_BLOCKS", small_block_entries),
        ("RRL_BUCKETS", rrl_slots),
    ]
}

/// Every map the controller reads or writes: what is pinned.
const MAPS: [&str; 10] = [
    "CONFIG",
    "RRL_BUCKETS",
    "TINY_NAMES",
    "SHORT_NAMES",
    "LONG_NAMES",
    "BLOCKS",
    "SMALL_BLOCKS",
    "COUNTERS",
    "ZONE_QUERIES",
    "ADDRESSES",
];

/// The maps by name, taken from a loaded object or opened from pins.
struct Maps {
    config: Array<MapData, XdpConfig>,
    tiny: HashMap<MapData, TinyKey, Answer>,
    short: HashMap<MapData, ShortKey, Answer>,
    long: HashMap<MapData, LongKey, Answer>,
    block_map: HashMap<MapData, u32, AnswerBlock>,
    small_block_map: HashMap<MapData, u32, SmallBlock>,
    counters: PerCpuArray<MapData, u64>,
    zone_queries: PerCpuArray<MapData, u64>,
    addresses: HashMap<MapData, AddressKey, u8>,
    rrl_buckets: Array<MapData, Bucket>,
}

impl Maps {
    fn new(mut take: impl FnMut(&'static str) -> Result<Map, XdpError>) -> Result<Self, XdpError> {
        Ok(Maps {
            config: Array::try_from(take("CONFIG")?)?,
            tiny: HashMap::try_from(take("TINY_NAMES")?)?,
            short: HashMap::try_from(take("SHORT_NAMES")?)?,
            long: HashMap::try_from(take("LONG_NAMES")?)?,
            block_map: HashMap::try_from(take("BLOCKS")?)?,
            small_block_map: HashMap::try_from(take("SMALL_BLOCKS")?)?,
            counters: PerCpuArray::try_from(take("COUNTERS")?)?,
            zone_queries: PerCpuArray::try_from(take("ZONE_QUERIES")?)?,
            addresses: HashMap::try_from(take("ADDRESSES")?)?,
            rrl_buckets: Array::try_from(take("RRL_BUCKETS")?)?,
        })
    }

    /// Opens the pinned maps; `None` when one is missing.
    fn from_pins(pins: &PinDir) -> Result<Option<Self>, XdpError> {
        if MAPS.iter().any(|name| !pins.map(name).exists()) {
            return Ok(None);
        }
        let open = |name: &'static str| -> Result<Map, XdpError> {
            let data = MapData::from_pin(pins.map(name))?;
            Ok(match name {
                "CONFIG" | "RRL_BUCKETS" => Map::Array(data),
                "COUNTERS" | "ZONE_QUERIES" => Map::PerCpuArray(data),
                _ => Map::HashMap(data),
            })
        };
        Self::new(open).map(Some)
    }

    fn each(&self) -> [(&'static str, &MapData); 10] {
        [
            ("RRL_BUCKETS", self.rrl_buckets.map()),
            ("CONFIG", self.config.map()),
            ("TINY_NAMES", self.tiny.map()),
            ("SHORT_NAMES", self.short.map()),
            ("LONG_NAMES", self.long.map()),
            ("BLOCKS", self.block_map.map()),
            ("SMALL_BLOCKS", self.small_block_map.map()),
            ("COUNTERS", self.counters.map()),
            ("ZONE_QUERIES", self.zone_queries.map()),
            ("ADDRESSES", self.addresses.map()),
        ]
    }
}

pub struct FastPath {
    object: Object,
    /// Where the program, maps and links are pinned, if they are.
    pins: Option<PinDir>,
    config: Array<MapData, XdpConfig>,
    tiny: HashMap<MapData, TinyKey, Answer>,
    short: HashMap<MapData, ShortKey, Answer>,
    long: HashMap<MapData, LongKey, Answer>,
    block_map: HashMap<MapData, u32, AnswerBlock>,
    blocks: BlockIds,
    small_block_map: HashMap<MapData, u32, SmallBlock>,
    small_blocks: BlockIds,
    /// Entry writes refused because their table was full.
    left_out: u64,
    counters: PerCpuArray<MapData, u64>,
    zone_queries: PerCpuArray<MapData, u64>,
    addresses: HashMap<MapData, AddressKey, u8>,
    /// Held so the buckets live as long as the program (only the kernel
    /// reads and writes them).
    _rrl_buckets: Array<MapData, Bucket>,
    rrl_slots: u32,
    grace: GracePeriod,
    current: XdpConfig,
    /// The port answered while healthy (`current.port` is 0 when not).
    port: u16,
    healthy: bool,
    /// The compiled table both generations were last given: the hot
    /// path's table (see [`FastPath::use_table`]). The loader unsettles it
    /// while changing it; the caller settles it at the snapshot's version.
    installed: Arc<AnswerTable>,
    /// Entries of `installed` the kernel does not hold (their table was
    /// full): they hold no block reference, and the next change or whole
    /// table writes them again.
    absent: HashSet<EntryKey>,
    /// Entries of `installed` a full name table refused (in either
    /// generation). Unlike `absent` they keep their block reference (taken
    /// before the write); the next whole table writes them again, and
    /// while an EXIST entry is among them the kernel answers no negatives.
    refused: HashSet<EntryKey>,
    /// Adopted with a whole table whose contents `installed` does not
    /// hold yet (see [`FastPath::adopt_table`]).
    table_unknown: bool,
    attached: Vec<(String, &'static str)>,
}

impl FastPath {
    /// Loads the program (not yet attached). `capacity` is the number of
    /// (name, type) entries per table generation; the maps hold two.
    pub fn load(
        capacity: impl Into<Capacity>,
        port: u16,
        edns: &ServerEdns,
    ) -> Result<Self, XdpError> {
        Self::load_object(OBJECT, capacity.into(), port, edns, None)
    }

    /// [`load`](Self::load), with the program and maps pinned in `pins`
    /// (whatever was pinned there before is removed first) and every
    /// attachment pinned as it is made: they outlive the process.
    pub fn load_pinned(
        capacity: impl Into<Capacity>,
        port: u16,
        edns: &ServerEdns,
        pins: PinDir,
    ) -> Result<Self, XdpError> {
        pins.clear().map_err(XdpError::Unpin)?;
        Self::load_object(OBJECT, capacity.into(), port, edns, Some(pins))
    }

    /// [`load`](Self::load) from the benchmark object, whose timing
    /// programs (`bench_program_fd`) share the answer tables.
    pub fn load_for_bench(
        capacity: impl Into<Capacity>,
        port: u16,
        edns: &ServerEdns,
    ) -> Result<Self, XdpError> {
        Self::load_object(BENCH_OBJECT, capacity.into(), port, edns, None)
    }

    fn load_object(
        object: &[u8],
        capacity: Capacity,
        port: u16,
        edns: &ServerEdns,
        pins: Option<PinDir>,
    ) -> Result<Self, XdpError> {
        let mut loader = EbpfLoader::new();
        for (name, entries) in map_sizes(capacity) {
            loader.map_max_entries(name, entries);
        }
        let mut ebpf = loader.load(object)?;
        let prog: &mut Xdp = ebpf
            .program_mut(PROGRAM)
            .ok_or(XdpError::MissingMap(PROGRAM))?
            .try_into()?;
        prog.load()?;
        if let Some(p) = &pins {
            prog.pin(p.program()).map_err(|source| XdpError::Pin {
                path: p.program(),
                source,
            })?;
        }
        let maps = Maps::new(|name| ebpf.take_map(name).ok_or(XdpError::MissingMap(name)))?;
        if let Some(p) = &pins {
            for (name, map) in maps.each() {
                map.pin(p.map(name)).map_err(|source| XdpError::Pin {
                    path: p.map(name),
                    source,
                })?;
            }
        }
        let mut current = XdpConfig::new(port, edns.udp_payload);
        current.object_tag = object_tag(object);
        let mut fp = Self::with_maps(Object::Loaded(ebpf), pins, maps, current, port)?;
        set_edns_fields(&mut fp.current, edns);
        fp.current.realtime_offset_ns = realtime_offset_ns();
        fp.config.set(0, fp.current, 0)?;
        Ok(fp)
    }

    fn with_maps(
        object: Object,
        pins: Option<PinDir>,
        maps: Maps,
        current: XdpConfig,
        port: u16,
    ) -> Result<Self, XdpError> {
        let Maps {
            config,
            tiny,
            short,
            long,
            block_map,
            small_block_map,
            counters,
            zone_queries,
            addresses,
            rrl_buckets,
        } = maps;
        Ok(FastPath {
            object,
            pins,
            config,
            tiny,
            short,
            long,
            block_map,
            blocks: BlockIds::default(),
            small_block_map,
            small_blocks: BlockIds::default(),
            left_out: 0,
            counters,
            zone_queries,
            addresses,
            rrl_slots: rrl_buckets.len(),
            _rrl_buckets: rrl_buckets,
            grace: GracePeriod::new().map_err(XdpError::Grace)?,
            current,
            port,
            healthy: true,
            installed: Arc::default(),
            absent: HashSet::new(),
            refused: HashSet::new(),
            table_unknown: false,
            attached: Vec::new(),
        })
    }

    /// Takes over the program and maps a previous controller pinned in
    /// `pins`, answering as they are: no load, no table written. Refused
    /// (`NotAdoptable`) when nothing is pinned, or the objects come from
    /// another build or another `capacity`. The table they hold is
    /// [`FastPath::pinned_table_tag`]'s; the caller either confirms it
    /// with [`FastPath::adopt_table`] or installs another (a rebuild).
    pub fn adopt(
        capacity: impl Into<Capacity>,
        port: u16,
        edns: &ServerEdns,
        pins: PinDir,
    ) -> Result<Self, XdpError> {
        let capacity = capacity.into();
        let refuse = |why: &str| Err(XdpError::NotAdoptable(why.to_string()));
        if !pins.program().exists() {
            return refuse("nothing pinned");
        }
        let Some(maps) = Maps::from_pins(&pins)? else {
            return refuse("a map is missing");
        };
        let saved = maps.config.get(&0, 0)?;
        if saved.object_tag != object_tag(OBJECT) {
            return refuse("pinned by another build of the program");
        }
        for (name, entries) in map_sizes(capacity) {
            if MapData::from_pin(pins.map(name))?.info()?.max_entries() != entries {
                return refuse("[xdp] capacity or [rrl] table_size changed");
            }
        }
        let program = Xdp::from_pin(pins.program(), XdpAttachType::Interface)?;
        let mut fp = Self::with_maps(
            Object::Pinned(Box::new(program)),
            Some(pins),
            maps,
            saved,
            port,
        )?;
        // A change cut short (tag 0) left the generations unequal: the
        // next install rebuilds them while the kernel passes everything.
        fp.healthy = saved.table_tag != 0 && saved.port != 0;
        fp.table_unknown = true;
        fp.current.port = if fp.healthy { port } else { 0 };
        set_edns_fields(&mut fp.current, edns);
        fp.current.realtime_offset_ns = realtime_offset_ns();
        fp.config.set(0, fp.current, 0)?;
        Ok(fp)
    }

    /// Sets the kernel's rate limiting (`settings.rate` 0: off). Its
    /// buckets are the table the program was loaded with
    /// ([`Capacity::rrl_slots`]), whatever `settings.slots` says.
    pub fn set_rrl(&mut self, settings: RrlSettings) -> Result<(), XdpError> {
        self.current.rrl = RrlSettings {
            slots: self.rrl_slots,
            ..settings
        };
        self.config.set(0, self.current, 0)?;
        Ok(())
    }

    /// The tag of the table the kernel holds (0: unknown or being
    /// changed); see `compile::table_tag`.
    pub fn pinned_table_tag(&self) -> u64 {
        self.current.table_tag
    }

    /// Where the objects are pinned, if they are.
    pub fn pin_dir(&self) -> Option<&std::path::Path> {
        self.pins.as_ref().map(PinDir::path)
    }

    pub fn pins(&self) -> Option<&PinDir> {
        self.pins.as_ref()
    }

    /// Whether the table's contents are not known (adopted and not yet
    /// confirmed, or a rebuild failed): only a whole table can follow.
    pub fn table_unknown(&self) -> bool {
        self.table_unknown
    }

    /// Confirms that the adopted kernel table is `table` (compiled from a
    /// snapshot whose tag the kernel table carries): it becomes what the
    /// controller diffs against, and block ids are read back from the
    /// kernel entries that use them. Nothing is written but the removal
    /// of blocks no entry uses.
    pub fn adopt_table(&mut self, table: &Table) -> Result<(), XdpError> {
        let live = self.current.generation as u8;
        self.blocks.clear();
        self.small_blocks.clear();
        // Each entry is checked in both generations against what was
        // compiled: one missing (a write its table had no room for) or
        // different is deleted from both, so a later change writes it
        // again and no generation keeps what the other lost.
        let mut absent = Vec::new();
        for (key, c) in table {
            let live_value = self.get(key, live)?;
            let idle_value = self.get(key, 1 - live)?;
            let same = match (live_value, idle_value) {
                (Some(a), Some(b)) if a == b => {
                    let mut expected = c.head;
                    if c.block.is_some() {
                        expected.set_block(a.block());
                    }
                    (expected == a).then_some(a)
                }
                _ => None,
            };
            match (same, &c.block) {
                (None, _) => {
                    self.del(key, 0)?;
                    self.del(key, 1)?;
                    absent.push(key.clone());
                }
                (Some(_), None) => {}
                (Some(answer), Some(section)) => match is_small(section) {
                    true => self.small_blocks.adopt(section, answer.block()),
                    false => self.blocks.adopt(section, answer.block()),
                },
            }
        }
        for (small, orphans) in [
            (
                false,
                self.blocks.finish_adoption(block_ids(&self.block_map)),
            ),
            (
                true,
                self.small_blocks
                    .finish_adoption(block_ids(&self.small_block_map)),
            ),
        ] {
            for id in orphans {
                let _ = match small {
                    true => self.small_block_map.remove(&id),
                    false => self.block_map.remove(&id),
                };
            }
        }
        self.installed.unsettle();
        self.installed.replace(table);
        self.absent = absent.iter().cloned().collect();
        self.refused.clear();
        self.table_unknown = false;
        // Written again now, not at the next change that touches them.
        let missing = TableDelta {
            upsert: absent
                .into_iter()
                .map(|k| {
                    let c = table[&k].clone();
                    (k, c)
                })
                .collect(),
            delete: Vec::new(),
        };
        let tag = self.current.table_tag;
        self.apply_tagged(&missing, tag)
    }

    fn program(&mut self) -> &mut Xdp {
        match &mut self.object {
            Object::Loaded(ebpf) => ebpf
                .program_mut(PROGRAM)
                .expect("loaded")
                .try_into()
                .expect("an XDP program"),
            Object::Pinned(p) => p,
        }
    }

    /// The loaded program (read-only).
    fn loaded(&self) -> &Xdp {
        match &self.object {
            Object::Loaded(ebpf) => ebpf
                .program(PROGRAM)
                .expect("loaded")
                .try_into()
                .expect("XDP"),
            Object::Pinned(p) => p,
        }
    }

    fn ebpf_mut(&mut self) -> Result<&mut Ebpf, XdpError> {
        match &mut self.object {
            Object::Loaded(ebpf) => Ok(ebpf),
            Object::Pinned(_) => Err(XdpError::NotAdoptable(
                "benchmark programs need a loaded object".into(),
            )),
        }
    }

    /// The kernel's id of the loaded program (what an interface running
    /// it reports).
    pub fn program_id(&self) -> Result<u32, XdpError> {
        Ok(self.loaded().info()?.id())
    }

    /// The program's fd, for BPF_PROG_TEST_RUN.
    pub fn program_fd(&self) -> RawFd {
        self.loaded().fd().expect("loaded").as_fd().as_raw_fd()
    }

    /// Loads one of the benchmark programs (`bench_restore`, `bench_answer`,
    /// `bench_reflect`) and returns its fd for BPF_PROG_TEST_RUN.
    pub fn bench_program_fd(&mut self, name: &'static str) -> Result<RawFd, XdpError> {
        let prog: &mut Xdp = self
            .ebpf_mut()?
            .program_mut(name)
            .ok_or(XdpError::MissingMap(name))?
            .try_into()?;
        if prog.fd().is_err() {
            prog.load()?;
        }
        Ok(prog.fd()?.as_fd().as_raw_fd())
    }

    /// Saves `frame` (on every CPU) for the benchmark programs to restore.
    pub fn set_bench_frame(&mut self, frame: &[u8]) -> Result<(), XdpError> {
        let mut saved = BenchFrame {
            len: frame.len() as u32,
            _pad: 0,
            data: [0; BENCH_FRAME_MAX],
        };
        saved.data[..frame.len()].copy_from_slice(frame);
        let mut map: PerCpuArray<&mut MapData, BenchFrame> = PerCpuArray::try_from(
            self.ebpf_mut()?
                .map_mut("BENCH_FRAME")
                .ok_or(XdpError::MissingMap("BENCH_FRAME"))?,
        )?;
        let cpus = aya::util::nr_cpus().map_err(|(_, e)| XdpError::Cpus(e))?;
        let values =
            aya::maps::PerCpuValues::try_from(vec![saved; cpus]).map_err(XdpError::Cpus)?;
        map.set(0, values, 0)?;
        Ok(())
    }

    /// Attaches to `interface`; returns the mode that worked. With pins,
    /// an attachment already pinned for this program, interface and an
    /// allowed mode is kept as it is, and a new one is pinned.
    pub fn attach(&mut self, interface: &str, mode: AttachMode) -> Result<&'static str, XdpError> {
        let tries: &[(XdpMode, &'static str)] = match mode {
            AttachMode::Driver => &[(XdpMode::Driver, "driver")],
            AttachMode::Generic => &[(XdpMode::Skb, "generic")],
            AttachMode::Auto => &[(XdpMode::Driver, "driver"), (XdpMode::Skb, "generic")],
        };
        if let Some(name) = self.keep_pinned_link(interface, tries)? {
            self.attached.push((interface.to_string(), name));
            return Ok(name);
        }
        let mut last = None;
        for &(m, name) in tries {
            match self.program().attach(interface, m) {
                Ok(id) => {
                    if let Some(pins) = self.pins.clone() {
                        let path = pins.link(interface, name);
                        let link = self.program().take_link(id)?;
                        let link = FdLink::try_from(link)?;
                        link.pin(&path)
                            .map_err(|source| XdpError::Pin { path, source })?;
                    }
                    self.attached.push((interface.to_string(), name));
                    return Ok(name);
                }
                Err(e) => last = Some((name, e)),
            }
        }
        let (mode, source) = last.expect("at least one mode tried");
        Err(XdpError::Attach {
            interface: interface.to_string(),
            mode,
            source,
        })
    }

    /// Looks for a pinned attachment to `interface` in one of `modes`
    /// running this program; unpins (detaches) any other pinned one for
    /// the interface. Returns the mode kept.
    fn keep_pinned_link(
        &mut self,
        interface: &str,
        modes: &[(XdpMode, &'static str)],
    ) -> Result<Option<&'static str>, XdpError> {
        let Some(pins) = self.pins.clone() else {
            return Ok(None);
        };
        let program = self.program_id()?;
        let ifindex = super::sys::interface_index(interface);
        let mut kept = None;
        for (iface, mode, path) in pins.links().into_iter().filter(|l| l.0 == interface) {
            let running = super::sys::pinned_xdp_link(&path)
                .ok()
                .flatten()
                .is_some_and(|(prog, index)| prog == program && Some(index) == ifindex);
            let allowed = modes.iter().find(|(_, m)| *m == mode).map(|(_, m)| *m);
            match (kept, allowed) {
                (None, Some(m)) if running => kept = Some(m),
                _ => {
                    tracing::info!(interface = %iface, %mode, "XDP: removing a stale pinned attachment");
                    std::fs::remove_file(&path).map_err(XdpError::Unpin)?;
                }
            }
        }
        Ok(kept)
    }

    /// Unpins (detaches) the pinned attachments to interfaces not in
    /// `interfaces`.
    pub fn drop_other_pinned_links(&mut self, interfaces: &[String]) -> Result<(), XdpError> {
        let Some(pins) = &self.pins else {
            return Ok(());
        };
        for (iface, mode, path) in pins.links() {
            if !interfaces.contains(&iface) {
                tracing::info!(interface = %iface, %mode, "XDP: detaching from an interface no longer configured");
                std::fs::remove_file(&path).map_err(XdpError::Unpin)?;
            }
        }
        Ok(())
    }

    pub fn attached(&self) -> &[(String, &'static str)] {
        &self.attached
    }

    /// The compiled table the kernel's was made from (see `absent`).
    pub fn installed(&self) -> &Arc<AnswerTable> {
        &self.installed
    }

    /// Keeps the compiled table in `table` (the hot path's) instead of a
    /// table of its own, so it is compiled and held once. Before the
    /// first install or adoption: what `table` holds is replaced then.
    pub fn use_table(&mut self, table: Arc<AnswerTable>) {
        self.installed = table;
    }

    /// (name, type) entries the kernel holds.
    pub fn entries(&self) -> usize {
        self.installed
            .len()
            .saturating_sub(self.absent.len() + self.refused.len())
    }

    /// The block `key`'s kernel entry references, if it holds one.
    fn held_block(&self, key: &EntryKey) -> Option<Arc<[u8]>> {
        match self.absent.contains(key) {
            true => None,
            false => self.installed.block_of(key),
        }
    }

    /// Answer sections held in the block table (each stored once).
    pub fn blocks_in_use(&self) -> usize {
        self.blocks.len() + self.small_blocks.len()
    }

    pub fn generation(&self) -> u32 {
        self.current.generation
    }

    /// Whether the table is in service. After a failed update the kernel
    /// passes every query to the fallback until [`FastPath::install`]
    /// rebuilds the table.
    pub fn healthy(&self) -> bool {
        self.healthy
    }

    /// Makes the kernel table equal to `table`.
    pub fn install(&mut self, table: Table) -> Result<(), XdpError> {
        self.install_tagged(table, 0)
    }

    /// [`install`](Self::install), recording `tag` (`compile::table_tag`
    /// of the snapshot `table` was compiled from) once both generations
    /// hold it: what a restarted controller checks before adopting them.
    pub fn install_tagged(&mut self, table: Table, tag: u64) -> Result<(), XdpError> {
        if !self.healthy || self.table_unknown {
            return self.rebuild(table, tag);
        }
        let mut delta = self.installed.diff(&table);
        // Entries the kernel lacks are written again even when unchanged.
        for key in self.absent.iter().chain(&self.refused) {
            if let Some(c) = table.get(key) {
                if self.installed.entry(key).as_ref() == Some(c) {
                    delta.upsert.push((key.clone(), c.clone()));
                }
            }
        }
        self.apply_tagged(&delta, tag)
    }

    /// Applies a change. Both generations hold the whole table: the change
    /// is written into the idle one, made live with one config write, and
    /// only after an RCU grace period — when no packet can still be reading
    /// the formerly live generation — written into that one too. So a
    /// packet sees the old or the new table, and no element a packet may be
    /// reading is ever freed or rewritten (hash maps reuse freed elements
    /// at once since Linux 6.1, so updating a live entry in place is not
    /// safe). On failure the kernel is told to pass everything.
    pub fn apply(&mut self, delta: &TableDelta) -> Result<(), XdpError> {
        self.apply_tagged(delta, 0)
    }

    /// [`apply`](Self::apply), then records `tag` (see
    /// [`install_tagged`](Self::install_tagged)).
    ///
    /// Whatever becomes of the kernel's write, the compiled table takes
    /// the change: it is what the hot path answers from.
    pub fn apply_tagged(&mut self, delta: &TableDelta, tag: u64) -> Result<(), XdpError> {
        if self.table_unknown {
            // Nothing to diff against: the caller installs a whole table.
            self.record(delta);
            return Err(XdpError::TableUnknown);
        }
        if delta.is_empty() && self.healthy {
            self.negatives_if_whole()?;
            return self.set_table_tag(tag);
        }
        if delta.is_empty() {
            return self.set_table_tag(tag);
        }
        if !self.healthy {
            let mut table = self.installed.to_table();
            delta.apply_to(&mut table);
            return self.rebuild(table, tag);
        }
        // Whether the change frees blocks (after it is written).
        let frees = delta
            .upsert
            .iter()
            .map(|(k, _)| k)
            .chain(&delta.delete)
            .any(|k| self.held_block(k).is_some());
        // The tag is unknown until both generations hold the change.
        for key in delta.upsert.iter().map(|(k, _)| k).chain(&delta.delete) {
            self.refused.remove(key);
        }
        let written = self.set_table_tag(0).and_then(|()| self.try_apply(delta));
        self.record(delta);
        match written {
            Ok(left_out) => {
                self.absent.extend(left_out.iter().cloned());
                if frees {
                    self.retry(delta, &left_out)?;
                }
                self.negatives_if_whole()?;
                self.set_table_tag(tag)
            }
            Err(e) => {
                self.disable();
                Err(e)
            }
        }
    }

    /// Applies `delta` to the compiled table; its entries count as
    /// written until told otherwise.
    fn record(&mut self, delta: &TableDelta) {
        self.installed.unsettle();
        match self.installed.is_empty() && delta.delete.is_empty() {
            // A first table: packed at its exact size, not grown to it.
            true => self
                .installed
                .replace(delta.upsert.iter().map(|(k, c)| (k, c))),
            false => self.installed.apply(delta),
        }
        for key in delta.upsert.iter().map(|(k, _)| k).chain(&delta.delete) {
            self.absent.remove(key);
        }
    }

    /// Turns the kernel's negative answers back on once every EXIST entry
    /// a full table refused has been written (or deleted) since, in both
    /// generations.
    fn negatives_if_whole(&mut self) -> Result<(), XdpError> {
        let missing = self.refused.iter().any(|k| k.qtype == qtype_slot::EXIST);
        if self.current.negative_answers == 0 && !missing {
            tracing::info!(
                "XDP table: every name is in the kernel again; negative answers back on"
            );
            self.current.negative_answers = 1;
            self.config.set(0, self.current, 0)?;
        }
        Ok(())
    }

    fn set_table_tag(&mut self, tag: u64) -> Result<(), XdpError> {
        if self.current.table_tag != tag {
            self.current.table_tag = tag;
            self.config.set(0, self.current, 0)?;
        }
        Ok(())
    }

    /// Writes once more the entries of `delta` that found no block space:
    /// the blocks the change released are gone by now, so they may fit.
    fn retry(&mut self, delta: &TableDelta, left_out: &HashSet<EntryKey>) -> Result<(), XdpError> {
        if left_out.is_empty() {
            return Ok(());
        }
        let again = TableDelta {
            upsert: delta
                .upsert
                .iter()
                .filter(|(k, _)| left_out.contains(k))
                .cloned()
                .collect(),
            delete: Vec::new(),
        };
        match self.try_apply(&again) {
            Ok(still_out) => {
                self.absent
                    .retain(|k| !left_out.contains(k) || still_out.contains(k));
                Ok(())
            }
            Err(e) => {
                self.disable();
                Err(e)
            }
        }
    }

    /// Returns the entries left out for want of block space.
    fn try_apply(&mut self, delta: &TableDelta) -> Result<HashSet<EntryKey>, XdpError> {
        // Blocks first, so no entry ever points at a missing one; the
        // blocks the replaced and deleted entries leave unreferenced go
        // only after both generations stopped pointing at them and a
        // grace period has passed.
        let full = self.acquire_blocks(delta)?;
        let mut released = Vec::new();
        let replaced = delta.upsert.iter().map(|(k, _)| k).chain(&delta.delete);
        for key in replaced {
            if let Some(section) = self.held_block(key) {
                let small = is_small(&section);
                let ids = match small {
                    true => &mut self.small_blocks,
                    false => &mut self.blocks,
                };
                released.extend(ids.release(&section).map(|id| (small, id)));
            }
        }
        let live = self.current.generation as u8;
        let idle = 1 - live;
        self.write(delta, idle, &full)?;
        self.config.set(
            0,
            XdpConfig {
                generation: idle as u32,
                ..self.current
            },
            0,
        )?;
        self.current.generation = idle as u32;
        self.grace.wait().map_err(XdpError::Grace)?;
        self.write(delta, live, &full)?;
        if !released.is_empty() {
            self.grace.wait().map_err(XdpError::Grace)?;
            for (small, id) in released {
                if small {
                    let _ = self.small_block_map.remove(&id);
                    self.small_blocks.recycle(id);
                } else {
                    let _ = self.block_map.remove(&id);
                    self.blocks.recycle(id);
                }
            }
        }
        Ok(full)
    }

    /// Takes a reference to every block `delta` writes, writing new ones.
    /// Returns the entries whose block found its table full: they are left
    /// to the fallback (`entries_left_out`), not written.
    fn acquire_blocks(&mut self, delta: &TableDelta) -> Result<HashSet<EntryKey>, XdpError> {
        let mut full = HashSet::new();
        for (key, c) in &delta.upsert {
            let Some(section) = &c.block else {
                continue;
            };
            let small = is_small(section);
            let ids = match small {
                true => &mut self.small_blocks,
                false => &mut self.blocks,
            };
            let (id, new) = ids.acquire(section);
            if !new {
                continue;
            }
            let r = if small {
                let mut b = SmallBlock {
                    data: [0; SMALL_BLOCK_MAX],
                };
                b.data[..section.len()].copy_from_slice(section);
                self.small_block_map.insert(id, b, 0)
            } else {
                self.block_map.insert(id, block_of(section), 0)
            };
            match r {
                Ok(()) => {}
                Err(e) if table_full(&e) => {
                    let ids = match small {
                        true => &mut self.small_blocks,
                        false => &mut self.blocks,
                    };
                    ids.release(section);
                    ids.recycle(id);
                    self.left_out += 1;
                    full.insert(key.clone());
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(full)
    }

    /// Writes `delta` into `generation`; the entries in `left_out` are
    /// removed instead (an older answer must not stay behind).
    fn write(
        &mut self,
        delta: &TableDelta,
        generation: u8,
        left_out: &HashSet<EntryKey>,
    ) -> Result<(), XdpError> {
        // Deletions first: the room they free is there for the upserts
        // (the generation written is not the live one).
        for key in &delta.delete {
            self.del(key, generation)?;
        }
        // Upserts go in batches, one system call per map and thousands of
        // entries (a million-entry table: 2 s one by one).
        let mut batches: [Batch<'_>; 3] = Default::default();
        for (key, answer) in &delta.upsert {
            if left_out.contains(key) {
                self.del(key, generation)?;
                continue;
            }
            let value = self.value_of(answer);
            let value = bytes_of(&value);
            match &split_key(key, generation) {
                Split::Tiny(k) => batches[0].push(bytes_of(k), value, key, answer),
                Split::Short(k) => batches[1].push(bytes_of(k), value, key, answer),
                Split::Long(k) => batches[2].push(bytes_of(&**k), value, key, answer),
            }
        }
        let fds = [
            self.tiny.map().fd().as_fd().as_raw_fd(),
            self.short.map().fd().as_fd().as_raw_fd(),
            self.long.map().fd().as_fd().as_raw_fd(),
        ];
        for (batch, fd) in batches.iter().zip(fds) {
            self.write_batch(fd, batch, generation)?;
        }
        Ok(())
    }

    /// Writes `batch` into the map `fd` in chunks; an element the kernel
    /// refuses is written on its own (`put` decides: a full table leaves
    /// it to the fallback) and the batch goes on after it.
    fn write_batch(
        &mut self,
        fd: RawFd,
        batch: &Batch<'_>,
        generation: u8,
    ) -> Result<(), XdpError> {
        const CHUNK: usize = 4096;
        let n = batch.entries.len();
        let mut at = 0;
        while at < n {
            let count = (n - at).min(CHUNK);
            let (ks, vs) = (batch.key_size, batch.value_size);
            let (done, result) = super::sys::update_batch(
                fd,
                &batch.keys[at * ks..(at + count) * ks],
                &batch.values[at * vs..(at + count) * vs],
                count as u32,
            );
            match result {
                Ok(()) => at += count,
                // Stopped at element `done`: that one on its own, then on.
                Err(_) if (done as usize) < count => {
                    at += done as usize;
                    let (key, answer) = batch.entries[at];
                    self.put(key, generation, answer)?;
                    at += 1;
                }
                // Refused before any element (no batch support, no
                // memory): nothing is known written, so each on its own.
                Err(_) => {
                    for &(key, answer) in &batch.entries[at..at + count] {
                        self.put(key, generation, answer)?;
                    }
                    at += count;
                }
            }
        }
        Ok(())
    }

    /// The kernel value for `c`: its head, pointing at its block.
    fn value_of(&self, c: &Compiled) -> Answer {
        let mut answer = c.head;
        if let Some(section) = &c.block {
            let ids = match is_small(section) {
                true => &self.small_blocks,
                false => &self.blocks,
            };
            answer.set_block(ids.id(section).expect("acquired before the entries"));
        }
        answer
    }

    /// Stops in-kernel answers (port 0: everything is passed) and waits
    /// until no packet still uses the table. Best effort: it runs on an
    /// error path.
    fn disable(&mut self) {
        self.healthy = false;
        self.current.port = 0;
        self.current.table_tag = 0;
        let _ = self.config.set(0, self.current, 0);
        let _ = self.grace.wait();
    }

    /// Rebuilds both generations from scratch while the kernel passes
    /// everything, then resumes in-kernel answers.
    fn rebuild(&mut self, table: Table, tag: u64) -> Result<(), XdpError> {
        self.disable();
        clear(&mut self.tiny);
        clear(&mut self.short);
        clear(&mut self.long);
        clear(&mut self.block_map);
        self.blocks.clear();
        clear(&mut self.small_block_map);
        self.small_blocks.clear();
        // The compiled table is `table` from here, whatever the kernel's
        // becomes; until this rebuild completes, only a whole table can
        // follow.
        self.installed.unsettle();
        self.installed.replace(&table);
        self.absent.clear();
        self.refused.clear();
        self.table_unknown = true;
        let full = TableDelta {
            upsert: table.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            delete: Vec::new(),
        };
        self.current.negative_answers = 1;
        let left_out = self.acquire_blocks(&full)?;
        self.write(&full, 0, &left_out)?;
        self.write(&full, 1, &left_out)?;
        self.current = XdpConfig {
            generation: 0,
            port: self.port,
            table_tag: tag,
            ..self.current
        };
        self.config.set(0, self.current, 0)?;
        self.absent = left_out;
        self.table_unknown = false;
        self.healthy = true;
        Ok(())
    }

    /// Takes the fallback's EDNS settings: payload size, NSID, cookie
    /// secrets (on reload).
    pub fn set_edns(&mut self, edns: &ServerEdns) -> Result<(), XdpError> {
        set_edns_fields(&mut self.current, edns);
        self.config.set(0, self.current, 0)?;
        Ok(())
    }

    /// Re-reads the wall clock the kernel mints cookie timestamps from
    /// (called every second: NTP slews the wall clock, not the monotonic
    /// one the kernel reads).
    pub fn refresh_clock(&mut self) -> Result<(), XdpError> {
        self.set_clock(realtime_offset_ns())
    }

    /// Sets the kernel's wall clock to CLOCK_MONOTONIC + `offset_ns`
    /// (tests pin the kernel's time this way).
    pub fn set_clock(&mut self, offset_ns: u64) -> Result<(), XdpError> {
        self.current.realtime_offset_ns = offset_ns;
        self.config.set(0, self.current, 0)?;
        Ok(())
    }

    /// Answers only queries sent to `addresses` (`None`: to any address
    /// of the attached interfaces).
    pub fn set_destinations(&mut self, addresses: Option<&[IpAddr]>) -> Result<(), XdpError> {
        let map = &mut self.addresses;
        let old: Vec<AddressKey> = map.keys().filter_map(Result::ok).collect();
        let new: Vec<AddressKey> = addresses
            .unwrap_or_default()
            .iter()
            .map(|a| match a {
                IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
                IpAddr::V6(v6) => v6.octets(),
            })
            .collect();
        for k in &new {
            map.insert(k, 1, 0)?;
        }
        // Filter on only once the addresses are in; off before removing.
        self.current.filter_destination = u32::from(addresses.is_some());
        self.config.set(0, self.current, 0)?;
        for k in old.iter().filter(|k| !new.contains(k)) {
            let _ = map.remove(k);
        }
        Ok(())
    }

    /// Kernel memory of the answer tables as the kernel accounts it
    /// (`memlock` in the maps' fdinfo: bucket arrays plus every element),
    /// by map name.
    pub fn table_memory(&self) -> Vec<(&'static str, u64)> {
        let fds = [
            ("TINY_NAMES", self.tiny.map().fd().as_fd().as_raw_fd()),
            ("SHORT_NAMES", self.short.map().fd().as_fd().as_raw_fd()),
            ("LONG_NAMES", self.long.map().fd().as_fd().as_raw_fd()),
            ("BLOCKS", self.block_map.map().fd().as_fd().as_raw_fd()),
            (
                "SMALL_BLOCKS",
                self.small_block_map.map().fd().as_fd().as_raw_fd(),
            ),
        ];
        fds.into_iter()
            .map(|(name, fd)| {
                let info =
                    std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap_or_default();
                let memlock = info
                    .lines()
                    .find_map(|l| l.strip_prefix("memlock:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                (name, memlock)
            })
            .collect()
    }

    /// Kernel answers per zone id, summed over CPUs, for ids `1..ids`
    /// (index = id).
    pub fn zone_queries(&self, ids: usize) -> Result<Vec<u64>, XdpError> {
        let mut out = vec![0u64; ids.min(xdpdns_common::ZONES_MAX as usize)];
        for (id, slot) in out.iter_mut().enumerate().skip(1) {
            *slot = self.zone_queries.get(&(id as u32), 0)?.iter().sum();
        }
        Ok(out)
    }

    pub fn counters(&self) -> Result<Counters, XdpError> {
        let sum =
            |slot: u32| -> Result<u64, XdpError> { Ok(self.counters.get(&slot, 0)?.iter().sum()) };
        let mut c = Counters {
            answered_a: sum(counter::ANSWERED_A)?,
            answered_aaaa: sum(counter::ANSWERED_AAAA)?,
            answered_signed: sum(counter::ANSWERED_SIGNED)?,
            ..Counters::default()
        };
        for r in PassReason::ALL {
            c.passed[r as usize] = sum(counter::PASS_BASE + r as u32)?;
        }
        for (i, v) in c.rrl.iter_mut().enumerate() {
            *v = sum(counter::RRL_LIMITED + i as u32)?;
        }
        for i in 0..2 {
            c.nxdomain[i] = sum(counter::ANSWERED_NXDOMAIN + i as u32)?;
            c.nodata[i] = sum(counter::ANSWERED_NODATA + i as u32)?;
        }
        Ok(c)
    }

    fn put(&mut self, key: &EntryKey, generation: u8, c: &Compiled) -> Result<(), XdpError> {
        let answer = self.value_of(c);
        let r = match split_key(key, generation) {
            Split::Tiny(k) => self.tiny.insert(k, answer, 0),
            Split::Short(k) => self.short.insert(k, answer, 0),
            Split::Long(k) => self.long.insert(k, answer, 0),
        };
        match r {
            Ok(()) => Ok(()),
            // A full table refuses new keys only (replacing one always
            // works), so the name is simply absent: the fallback answers.
            Err(e) if table_full(&e) => {
                self.left_out += 1;
                self.refused.insert(key.clone());
                if key.qtype == qtype_slot::EXIST && self.current.negative_answers != 0 {
                    // A name that exists would look missing to the kernel.
                    tracing::warn!("XDP table full: negative answers go to the fallback until a rebuild with room (raise [xdp] capacity)");
                    self.current.negative_answers = 0;
                    self.config.set(0, self.current, 0)?;
                }
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Entry writes refused so far because their table was full (raise
    /// `[xdp] capacity`).
    pub fn entries_left_out(&self) -> u64 {
        self.left_out
    }

    /// The kernel's value for `key` in `generation`, if any.
    fn get(&self, key: &EntryKey, generation: u8) -> Result<Option<Answer>, XdpError> {
        let value = match split_key(key, generation) {
            Split::Tiny(k) => self.tiny.get(&k, 0),
            Split::Short(k) => self.short.get(&k, 0),
            Split::Long(k) => self.long.get(&k, 0),
        };
        match value {
            Ok(answer) => Ok(Some(answer)),
            Err(aya::maps::MapError::KeyNotFound) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn del(&mut self, key: &EntryKey, generation: u8) -> Result<(), XdpError> {
        let r = match split_key(key, generation) {
            Split::Tiny(k) => self.tiny.remove(&k),
            Split::Short(k) => self.short.remove(&k),
            Split::Long(k) => self.long.remove(&k),
        };
        match r {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            Err(aya::maps::MapError::SyscallError(e))
                if e.io_error.raw_os_error() == Some(libc::ENOENT) =>
            {
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// Attaches one of the object's helper programs to `interface` and keeps
/// it there while the returned object lives: `xdp_pass` (on a veth pair
/// the peer needs one for native-mode XDP_TX frames to arrive) or
/// `xdp_reflect` (the benchmark floor).
pub fn attach_helper_program(
    interface: &str,
    program: &'static str,
    mode: AttachMode,
) -> Result<Ebpf, XdpError> {
    // The floor is a benchmark program; `xdp_pass` serves tests and peers.
    let object = if program == "xdp_pass" {
        OBJECT
    } else {
        BENCH_OBJECT
    };
    let mut ebpf = EbpfLoader::new().load(object)?;
    let prog: &mut Xdp = ebpf
        .program_mut(program)
        .ok_or(XdpError::MissingMap(program))?
        .try_into()?;
    prog.load()?;
    let (m, name) = match mode {
        AttachMode::Generic => (XdpMode::Skb, "generic"),
        AttachMode::Driver | AttachMode::Auto => (XdpMode::Driver, "driver"),
    };
    prog.attach(interface, m)
        .map_err(|source| XdpError::Attach {
            interface: interface.to_string(),
            mode: name,
            source,
        })?;
    Ok(ebpf)
}

enum Split {
    Tiny(TinyKey),
    Short(ShortKey),
    Long(Box<LongKey>),
}

/// The kernel key layout for an entry (the compiler guarantees ≤ 255 bytes).
fn split_key(key: &EntryKey, generation: u8) -> Split {
    let name = &key.name;
    let lead = key_lead(name[0], key.qtype, generation);
    let fill = |buf: &mut [u8]| {
        buf[..name.len()].copy_from_slice(name);
        buf[0] = lead;
        // Zero in every plain key (root label or padding), one for a
        // signed variant.
        let last = buf.len() - 1;
        buf[last] |= key_tail(key.qtype);
    };
    if name.len() <= TINY_NAME_MAX {
        let mut k = TinyKey {
            name: [0; TINY_NAME_MAX],
        };
        fill(&mut k.name);
        Split::Tiny(k)
    } else if name.len() <= SHORT_NAME_MAX {
        let mut k = ShortKey {
            name: [0; SHORT_NAME_MAX],
        };
        fill(&mut k.name);
        Split::Short(k)
    } else {
        let mut k = Box::new(LongKey {
            name: [0; LONG_NAME_BUF],
        });
        fill(&mut k.name);
        Split::Long(k)
    }
}

/// The ids of the blocks in a block map.
fn block_ids<V: aya::Pod>(map: &HashMap<MapData, u32, V>) -> Vec<u32> {
    map.keys().filter_map(Result::ok).collect()
}

/// Removes every element of `map` (best effort: it runs while the kernel
/// passes everything).
fn clear<K: aya::Pod, V: aya::Pod>(map: &mut HashMap<MapData, K, V>) {
    let keys: Vec<K> = map.keys().filter_map(Result::ok).collect();
    for k in keys {
        let _ = map.remove(&k);
    }
}

/// A map refused a new key because it is full.
/// Entries for one answer map, packed as the kernel takes a batch.
#[derive(Default)]
struct Batch<'a> {
    keys: Vec<u8>,
    values: Vec<u8>,
    key_size: usize,
    value_size: usize,
    entries: Vec<(&'a EntryKey, &'a Compiled)>,
}

impl<'a> Batch<'a> {
    fn push(&mut self, key: &[u8], value: &[u8], entry: &'a EntryKey, c: &'a Compiled) {
        self.key_size = key.len();
        self.value_size = value.len();
        self.keys.extend_from_slice(key);
        self.values.extend_from_slice(value);
        self.entries.push((entry, c));
    }
}

/// The bytes of a map key or value (plain `repr(C)` data without padding
/// the kernel would read).
fn bytes_of<T: aya::Pod>(v: &T) -> &[u8] {
    // SAFETY: `Pod` types are plain data; the slice covers exactly `v`.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }
}

fn table_full(e: &aya::maps::MapError) -> bool {
    matches!(e, aya::maps::MapError::SyscallError(e) if e.io_error.raw_os_error() == Some(libc::E2BIG))
}

/// Whether a section outside its entry goes to the small-block table.
fn is_small(section: &[u8]) -> bool {
    section.len() <= SMALL_BLOCK_MAX
}

/// A section as the kernel's block value (zero-padded).
fn block_of(section: &[u8]) -> AnswerBlock {
    let mut b = AnswerBlock {
        data: [0; BLOCK_MAX],
    };
    b.data[..section.len()].copy_from_slice(section);
    b
}

/// Copies the fallback's EDNS settings into the kernel's configuration.
fn set_edns_fields(cfg: &mut XdpConfig, edns: &ServerEdns) {
    cfg.udp_payload = edns.udp_payload;
    cfg.cookie_keys = edns.cookies.key_words();
    cfg.cookie_previous = u32::from(edns.cookies.previous.is_some());
    cfg.nsid = [0; NSID_MAX + 4];
    cfg.nsid_len = 0;
    cfg.nsid_sum = 0;
    cfg.nsid_mode = match &edns.nsid {
        None => nsid_mode::NONE,
        Some(id) if id.len() > NSID_MAX => nsid_mode::PASS,
        Some(id) => {
            let option = &mut cfg.nsid[..4 + id.len()];
            option[..2].copy_from_slice(&edns_option::NSID.to_be_bytes());
            option[2..4].copy_from_slice(&(id.len() as u16).to_be_bytes());
            option[4..].copy_from_slice(id);
            cfg.nsid_len = id.len() as u32;
            cfg.nsid_sum = ones_complement_sum(option);
            nsid_mode::INLINE
        }
    };
}

/// CLOCK_REALTIME − CLOCK_MONOTONIC, in nanoseconds.
pub fn realtime_offset_ns() -> u64 {
    let read = |clock| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid clock id and out-pointer.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    };
    let mono = read(libc::CLOCK_MONOTONIC);
    let real = read(libc::CLOCK_REALTIME);
    real.wrapping_sub(mono)
}
