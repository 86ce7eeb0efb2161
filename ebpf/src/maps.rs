//! Maps shared with userspace. Layouts come from `xdpdns-common`; the
//! loader resizes the name tables at load time.

use aya_ebpf::macros::map;
use aya_ebpf::maps::{Array, HashMap, PerCpuArray, RingBuf};
use xdpdns_common::rrl::Bucket;
use xdpdns_common::slots::TinySlot;
use xdpdns_common::tap::{TapRecord, RING_BYTES};
use xdpdns_common::{
    counter, Answer, AnswerBlock, LongKey, MiniBlock, OverlayKey, ShortKey, SmallBlock, TinyKey,
    XdpConfig, LONG_NAME_BUF, SHORT_NAME_MAX, TINY_NAME_MAX, ZONES_MAX,
};

use crate::parsed::{Packet, Question, OPT_REPLY_BUF};

/// BPF_F_NO_PREALLOC: an updated element is freed only after an RCU grace
/// period, so a packet reading it never sees it reused mid-copy.
const NO_PREALLOC: u32 = 1;

#[map(name = "CONFIG")]
pub static CONFIG: Array<XdpConfig> = Array::with_max_entries(1, 0);

/// The tiny-name base table (`xdpdns_common::slots`): the loader sizes
/// it to the capacity.
/// Mappable (BPF_F_MMAPABLE): the controller writes a whole table
/// straight into it while the kernel answers nothing.
#[map(name = "TINY_SLOTS")]
pub static TINY_SLOTS: Array<TinySlot> = Array::with_max_entries(8, 1 << 10);

/// Tiny-name base entries without a slot (the slot table's overflow).
#[map(name = "TINY_NAMES")]
pub static TINY_NAMES: HashMap<TinyKey, Answer> = HashMap::with_max_entries(1 << 16, NO_PREALLOC);

#[map(name = "SHORT_NAMES")]
pub static SHORT_NAMES: HashMap<ShortKey, Answer> = HashMap::with_max_entries(1 << 16, NO_PREALLOC);

#[map(name = "LONG_NAMES")]
pub static LONG_NAMES: HashMap<LongKey, Answer> = HashMap::with_max_entries(1 << 12, NO_PREALLOC);

/// The overlay tables: changed entries by generation (see `layer`).
#[map(name = "OVERLAY_TINY")]
pub static OVERLAY_TINY: HashMap<OverlayKey<TinyKey>, Answer> =
    HashMap::with_max_entries(1 << 12, NO_PREALLOC);

#[map(name = "OVERLAY_SHORT")]
pub static OVERLAY_SHORT: HashMap<OverlayKey<ShortKey>, Answer> =
    HashMap::with_max_entries(1 << 12, NO_PREALLOC);

#[map(name = "OVERLAY_LONG")]
pub static OVERLAY_LONG: HashMap<OverlayKey<LongKey>, Answer> =
    HashMap::with_max_entries(1 << 10, NO_PREALLOC);

/// Answer sections too large to inline, up to `MINI_BLOCK_MAX` bytes
/// (positive answers and CNAME chains only), by block id (their own id
/// space).
#[map(name = "MINI_BLOCKS")]
pub static MINI_BLOCKS: HashMap<u32, MiniBlock> = HashMap::with_max_entries(1 << 12, NO_PREALLOC);

/// Answer sections too large to inline, up to `SMALL_BLOCK_MAX` bytes, by
/// block id (their own id space).
#[map(name = "SMALL_BLOCKS")]
pub static SMALL_BLOCKS: HashMap<u32, SmallBlock> = HashMap::with_max_entries(1 << 12, NO_PREALLOC);

/// Answer sections too large for a small block, by block id.
#[map(name = "BLOCKS")]
pub static BLOCKS: HashMap<u32, AnswerBlock> = HashMap::with_max_entries(1 << 12, NO_PREALLOC);

/// Destination addresses answered when `XdpConfig::filter_destination`
/// is set (IPv4 mapped into IPv6).
#[map(name = "ADDRESSES")]
pub static ADDRESSES: HashMap<[u8; 16], u8> = HashMap::with_max_entries(256, 0);

#[map(name = "COUNTERS")]
pub static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::COUNT, 0);

/// Answers per zone, indexed by [`Answer::zone`].
#[map(name = "ZONE_QUERIES")]
pub static ZONE_QUERIES: PerCpuArray<u64> = PerCpuArray::with_max_entries(ZONES_MAX, 0);

/// Response rate limiting buckets, shared by every CPU (lost updates
/// between CPUs only make the limiter more lenient). The loader sizes it
/// to `[rrl] table_size`.
#[map(name = "RRL_BUCKETS")]
pub static RRL_BUCKETS: Array<Bucket> = Array::with_max_entries(1, 0);

/// dnstap samples on their way to the controller (`tap`).
#[map(name = "TAP_RING")]
pub static TAP_RING: RingBuf = RingBuf::with_byte_size(RING_BYTES, 0);

/// The sample being taken, per CPU (too big for the stack).
#[map(name = "TAP_RECORD")]
pub static TAP_RECORD: PerCpuArray<TapRecord> = PerCpuArray::with_max_entries(1, 0);

/// Per-CPU working memory: the lookup keys are too big for the 512-byte
/// BPF stack.
#[repr(C)]
pub struct Scratch {
    /// The lookup keys, each followed by the overlay generation: the
    /// base tables take `.key`, the overlay tables the whole.
    pub tiny: OverlayKey<TinyKey>,
    pub short: OverlayKey<ShortKey>,
    pub long: OverlayKey<LongKey>,
    /// Round-trip slot: a value read back from map memory is unknown to
    /// the verifier, which merges the many exits of the label walk into
    /// one state (see `question::launder`).
    pub launder: u32,
    /// The query's client cookie and (RFC 9018-sized) server cookie.
    pub client_cookie: [u8; 8],
    pub server_cookie: [u8; 16],
    /// `edns::parse`'s record of the options seen so far.
    pub seen: u32,
    /// Inputs of `edns::xdpdns_build_opt`: the client address the cookie
    /// is bound to, the unix second, the DO bit.
    pub client_ip: [u8; 16],
    pub client_v6: u32,
    pub now: u32,
    pub opt_dnssec_ok: u32,
    /// Set by `xdpdns_build_opt`: the query's server cookie was valid
    /// (rate limiting exempts it).
    pub cookie_valid: u32,
    /// Its output: the reply's OPT record and its checksum.
    pub opt_sum: u32,
    pub opt_len: u32,
    pub opt_reply: [u8; OPT_REPLY_BUF],
    /// What `xdpdns_negative` decided: the RCODE (0: NODATA, 3:
    /// NXDOMAIN) and the apex's length (its SOA entry's key is left in
    /// the key buffer for that length).
    pub neg_rcode: u32,
    pub neg_zone_len: u32,
    /// The template's slot: the zone's SOA, or a delegation's referral
    /// (whose cut is then the last `neg_zone_len` bytes of the name).
    pub neg_slot: u32,
    /// Question offset plus one of the label to check against the
    /// template's (0: none).
    pub neg_risky_at: u32,
    /// The zone's id, for the per-zone counters.
    pub neg_zone: u32,
    /// A DNSSEC negative answer (the zone's signed SOA template, then
    /// the records `tail_kind` says).
    pub neg_signed: u32,
    /// Lookup key for the destination address filter.
    pub address: [u8; 16],
    /// What `xdpdns_parse` found, for `xdpdns_reply`.
    pub pkt: Packet,
    pub qn: Question,
    /// The IP header as received, rewritten in place into the reply's.
    pub ip4: [u8; 20],
    pub ip6: [u8; 40],
    /// The NXDOMAIN's search (`gaps`): the query's label below the
    /// closest encloser (lower-cased, zero-padded) and its length, its
    /// question offset, the encloser's length, its list's length, and
    /// the entry found.
    pub gap_label: [u64; 8],
    pub gap_label_len: u32,
    pub gap_label_at: u32,
    pub gap_encloser_len: u32,
    pub gap_count: u32,
    pub gap_found: u32,
    /// The records a DNSSEC negative answer has after its signed SOA
    /// (`negative::build`): what kind (0: none; `tail::NSEC`, a signed
    /// NODATA's NSEC entry; `tail::GAP`, an NXDOMAIN's gap entry), its
    /// block, checksum, length and record count. Kept as numbers, so the
    /// reply's lookups stay those of every negative answer.
    pub tail_kind: u32,
    pub tail_block: u32,
    pub tail_csum: u32,
    pub tail_len: u32,
    pub tail_count: u32,
    /// dnstap: outcomes of each kind to skip before the next sample.
    pub tap_skip: [u32; xdpdns_common::tap::kind::COUNT],
}

const _: () = assert!(TINY_NAME_MAX < SHORT_NAME_MAX && SHORT_NAME_MAX < LONG_NAME_BUF);

/// What follows a DNSSEC negative answer's signed SOA (`Scratch::tail_kind`).
pub mod tail {
    pub const NSEC: u32 = 1;
    pub const GAP: u32 = 2;
}

#[map(name = "SCRATCH")]
pub static SCRATCH: PerCpuArray<Scratch> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
pub(crate) fn count(slot: u32) {
    if let Some(c) = COUNTERS.get_ptr_mut(slot) {
        unsafe { *c += 1 };
    }
}
