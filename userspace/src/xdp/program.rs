//! The program's lifecycle: loaded from the object embedded at build time
//! or adopted from its pins, attached to interfaces (and their links
//! pinned), the benchmark programs, and the helper programs tests and
//! benchmarks attach. [`FastPath`] is the one owner of the program and
//! its maps; the table writer (`writer`) and the settings (`settings`)
//! are its other halves.

use std::collections::HashSet;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::Arc;

use aya::maps::{Array, HashMap, IterableMap, MapData, PerCpuArray};
use aya::programs::links::FdLink;
use aya::programs::{Xdp, XdpMode};
use aya::{Ebpf, EbpfLoader};
use aya_obj::programs::XdpAttachType;
use xdpdns_common::rrl::Bucket;
use xdpdns_common::{
    AddressKey, Answer, BenchFrame, LongKey, OverlayKey, ShortKey, TinyKey, XdpConfig,
    BENCH_FRAME_MAX,
};

use super::blocks::{BlockIds, BlockMaps};
use super::error::XdpError;
use super::generations::Overlay;
use super::grace::GraceClock;
use super::maps::{map_sizes, sized_by_capacity, Capacity, Maps};
use super::pins::PinDir;
use super::slots::Slots;
use crate::answers::compile::EntryKey;
use crate::answers::AnswerTable;
use crate::wire::ServerEdns;

/// The XDP object built from `ebpf/` by `build.rs`: what serves.
pub(super) static OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xdpdns.bpf.o"));

/// SHA-256 of the embedded XDP object, in hex (`xdpdns --version`).
pub fn object_sha256() -> String {
    use sha2::Digest;
    data_encoding::HEXLOWER.encode(&sha2::Sha256::digest(OBJECT))
}

/// `XdpConfig::object_tag`: pinned objects are adopted only by the same
/// build, both the program (`object`'s SHA-256) and the controller that
/// compiled their table (the executable file: device, inode, size and
/// modification time; a reinstalled binary is another file).
pub(super) fn object_tag(object: &[u8]) -> u64 {
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
pub(super) static BENCH_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xdpdns-bench.bpf.o"));
pub(super) const PROGRAM: &str = "xdpdns";

/// How to attach: native (driver) mode, generic (skb) mode, or native with
/// a fallback to generic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttachMode {
    Auto,
    Driver,
    Generic,
}

/// The program: loaded from the embedded object, or adopted from its pin
/// (the maps it was loaded with come from their pins too).
pub(super) enum Object {
    Loaded(Ebpf),
    Pinned(Box<Xdp>),
    /// The program is being loaded into the kernel on another thread
    /// while a first table is written into its maps (only inside
    /// [`FastPath::load_with_table`], which puts it back).
    Verifying,
}

pub struct FastPath {
    pub(super) object: Object,
    /// Where the program, maps and links are pinned, if they are.
    pub(super) pins: Option<PinDir>,
    pub(super) config: Array<MapData, XdpConfig>,
    /// The tiny-name base table's slots, and what the controller knows
    /// of them; `tiny` is their overflow.
    pub(super) slots: Slots,
    pub(super) tiny: HashMap<MapData, TinyKey, Answer>,
    /// The entries written into `tiny` (not refused).
    pub(super) overflow: HashSet<EntryKey>,
    pub(super) short: HashMap<MapData, ShortKey, Answer>,
    pub(super) long: HashMap<MapData, LongKey, Answer>,
    pub(super) overlay_tiny: HashMap<MapData, OverlayKey<TinyKey>, Answer>,
    pub(super) overlay_short: HashMap<MapData, OverlayKey<ShortKey>, Answer>,
    pub(super) overlay_long: HashMap<MapData, OverlayKey<LongKey>, Answer>,
    /// The overlay generations and what they leave to clean up.
    pub(super) overlay: Overlay,
    pub(super) block_maps: BlockMaps,
    /// The ids of each block class (`Class::index`).
    pub(super) block_ids: [BlockIds; 3],
    /// Entry writes refused because their table was full.
    pub(super) left_out: u64,
    pub(super) counters: PerCpuArray<MapData, u64>,
    pub(super) zone_queries: PerCpuArray<MapData, u64>,
    pub(super) addresses: HashMap<MapData, AddressKey, u8>,
    /// Held so the buckets live as long as the program (only the kernel
    /// reads and writes them).
    pub(super) _rrl_buckets: Array<MapData, Bucket>,
    pub(super) rrl_slots: u32,
    /// The dnstap ring buffer, until the reader takes it.
    pub(super) tap_ring: Option<MapData>,
    pub(super) grace_clock: GraceClock,
    pub(super) current: XdpConfig,
    /// The overlay tables' sizes (tiny, short, long).
    pub(super) overlay_room: [usize; 3],
    /// Changes made live since the program was loaded or adopted.
    pub(super) changes: u32,
    /// The port answered while healthy (`current.port` is 0 when not).
    pub(super) port: u16,
    pub(super) healthy: bool,
    /// The compiled table the kernel's was last made from: the hot
    /// path's table (see [`FastPath::use_table`]). The loader unsettles it
    /// while changing it; the caller settles it at the snapshot's version.
    pub(super) installed: Arc<AnswerTable>,
    /// Entries of `installed` the kernel does not hold (their table was
    /// full): they hold no block reference, and the next change or whole
    /// table writes them again.
    pub(super) absent: HashSet<EntryKey>,
    /// Entries of `installed` a full name table refused. Unlike `absent`
    /// they keep their block reference (taken before the write); the
    /// next whole table writes them again, and
    /// while an EXIST entry is among them the kernel answers no negatives.
    pub(super) refused: HashSet<EntryKey>,
    /// Adopted with a whole table whose contents `installed` does not
    /// hold yet (see [`FastPath::adopt_table`]).
    pub(super) table_unknown: bool,
    pub(super) attached: Vec<(String, &'static str)>,
}

impl FastPath {
    /// Loads the program (not yet attached). `capacity` is the number of
    /// (name, type) entries the table holds (the maps have an eighth more
    /// room, for the overlay of a change).
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

    pub(super) fn load_object(
        object: &[u8],
        capacity: Capacity,
        port: u16,
        edns: &ServerEdns,
        pins: Option<PinDir>,
    ) -> Result<Self, XdpError> {
        let mut loader = EbpfLoader::new();
        size_maps(&mut loader, capacity);
        let ebpf = loader.load(object)?;
        let mut fp = Self::with_object(ebpf, object, port, edns, pins)?;
        let Object::Loaded(ebpf) = &mut fp.object else {
            unreachable!("a loaded object")
        };
        verify(ebpf, fp.pins.as_ref())?;
        Ok(fp)
    }

    /// [`load`](Self::load) (into `pins` if given, cleared first), with a
    /// first table written into the maps by `install` while the kernel
    /// verifies the program on another thread: half a second each at a
    /// million names, one after the other before.
    pub fn load_with_table(
        capacity: Capacity,
        port: u16,
        edns: &ServerEdns,
        pins: Option<PinDir>,
        install: impl FnOnce(&mut FastPath) -> Result<(), XdpError>,
    ) -> Result<Self, XdpError> {
        if let Some(p) = &pins {
            p.clear().map_err(XdpError::Unpin)?;
        }
        let mut loader = EbpfLoader::new();
        size_maps(&mut loader, capacity);
        let ebpf = loader.load(OBJECT)?;
        let mut fp = Self::with_object(ebpf, OBJECT, port, edns, pins)?;
        let Object::Loaded(mut ebpf) = std::mem::replace(&mut fp.object, Object::Verifying) else {
            unreachable!("a loaded object")
        };
        let pins = fp.pins.clone();
        let (verified, installed) = std::thread::scope(|scope| {
            let verifying = scope.spawn(move || {
                let verified = verify(&mut ebpf, pins.as_ref());
                (ebpf, verified)
            });
            let installed = install(&mut fp);
            match verifying.join() {
                Ok((ebpf, verified)) => {
                    fp.object = Object::Loaded(ebpf);
                    (verified, installed)
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        });
        verified?;
        installed?;
        Ok(fp)
    }

    /// A loaded object's maps taken over (and pinned, with `pins`), its
    /// program not yet loaded into the kernel.
    fn with_object(
        mut ebpf: Ebpf,
        object: &[u8],
        port: u16,
        edns: &ServerEdns,
        pins: Option<PinDir>,
    ) -> Result<Self, XdpError> {
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
        current.tiny_overflow = 0;
        let mut fp = Self::with_maps(Object::Loaded(ebpf), pins, maps, current, port)?;
        fp.current.tiny_buckets = fp.slots.buckets();
        fp.start_settings(edns)?;
        Ok(fp)
    }

    pub(super) fn with_maps(
        object: Object,
        pins: Option<PinDir>,
        maps: Maps,
        current: XdpConfig,
        port: u16,
    ) -> Result<Self, XdpError> {
        let Maps {
            config,
            tiny_slots,
            tiny,
            short,
            long,
            overlay_tiny,
            overlay_short,
            overlay_long,
            block_maps,
            counters,
            zone_queries,
            addresses,
            rrl_buckets,
            tap_ring,
        } = maps;
        let room =
            |m: &MapData| -> Result<usize, XdpError> { Ok(m.info()?.max_entries() as usize) };
        let overlay_room = [
            room(overlay_tiny.map())?,
            room(overlay_short.map())?,
            room(overlay_long.map())?,
        ];
        Ok(FastPath {
            overlay_room,
            overlay_tiny,
            overlay_short,
            overlay_long,
            overlay: Overlay::default(),
            changes: 0,
            object,
            pins,
            config,
            slots: Slots::new(tiny_slots),
            tiny,
            overflow: HashSet::new(),
            short,
            long,
            block_maps,
            block_ids: Default::default(),
            left_out: 0,
            counters,
            zone_queries,
            addresses,
            rrl_slots: rrl_buckets.len(),
            _rrl_buckets: rrl_buckets,
            tap_ring: Some(tap_ring),
            grace_clock: GraceClock::start().map_err(XdpError::Grace)?,
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
        // The maps sized from a table served are taken as they are.
        for (name, entries) in map_sizes(capacity) {
            if sized_by_capacity(name)
                && MapData::from_pin(pins.map(name))?.info()?.max_entries() != entries
            {
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
        // A change cut short (tag 0) left the table half written, or an
        // overlay behind: the next install rebuilds the table while the
        // kernel passes everything.
        fp.healthy = saved.table_tag != 0 && saved.port != 0;
        fp.table_unknown = true;
        // Which slot holds which key is read back when the table is
        // (`adopt_table`) or cleared (a rebuild); the overflow's entries
        // are learnt as `adopt_table` reads them back.
        fp.slots.adopted();
        fp.current.port = if fp.healthy { port } else { 0 };
        fp.start_settings(edns)?;
        Ok(fp)
    }

    /// The tag of the table the kernel holds (0: unknown or being
    /// changed); see `compile::table_tag`.
    /// The ring buffer the kernel's dnstap samples arrive in, for its
    /// one reader (`crate::dnstap::kernel`).
    pub fn take_tap_ring(&mut self) -> Option<aya::maps::RingBuf<MapData>> {
        let data = self.tap_ring.take()?;
        aya::maps::RingBuf::try_from(aya::maps::Map::RingBuf(data)).ok()
    }

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

    pub(super) fn program(&mut self) -> &mut Xdp {
        match &mut self.object {
            Object::Loaded(ebpf) => ebpf
                .program_mut(PROGRAM)
                .expect("loaded")
                .try_into()
                .expect("an XDP program"),
            Object::Pinned(p) => p,
            Object::Verifying => unreachable!("the program is back once verified"),
        }
    }

    /// The loaded program (read-only).
    pub(super) fn loaded(&self) -> &Xdp {
        match &self.object {
            Object::Loaded(ebpf) => ebpf
                .program(PROGRAM)
                .expect("loaded")
                .try_into()
                .expect("XDP"),
            Object::Pinned(p) => p,
            Object::Verifying => unreachable!("the program is back once verified"),
        }
    }

    pub(super) fn ebpf_mut(&mut self) -> Result<&mut Ebpf, XdpError> {
        match &mut self.object {
            Object::Loaded(ebpf) => Ok(ebpf),
            Object::Pinned(_) | Object::Verifying => Err(XdpError::NotAdoptable(
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
    pub(super) fn keep_pinned_link(
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
}

/// Gives every map of the object its size for `capacity`.
fn size_maps(loader: &mut EbpfLoader<'_>, capacity: Capacity) {
    for (name, entries) in map_sizes(capacity) {
        loader.map_max_entries(name, entries);
    }
}

/// Loads the object's program into the kernel (its verifier), pinning it
/// in `pins` if given.
fn verify(ebpf: &mut Ebpf, pins: Option<&PinDir>) -> Result<(), XdpError> {
    let prog: &mut Xdp = ebpf
        .program_mut(PROGRAM)
        .ok_or(XdpError::MissingMap(PROGRAM))?
        .try_into()?;
    prog.load()?;
    if let Some(p) = pins {
        prog.pin(p.program()).map_err(|source| XdpError::Pin {
            path: p.program(),
            source,
        })?;
    }
    Ok(())
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
