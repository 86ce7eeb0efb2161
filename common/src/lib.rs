//! Types and constants shared by the XDP program (`ebpf/`) and the userspace
//! controller (`userspace/`).
//!
//! This crate is `no_std` and dependency-free so the kernel side can use it.
//! Everything that crosses the kernel/user boundary through a BPF map is
//! `#[repr(C)]` here; `Pod` impls live on the user side only.
#![no_std]

pub mod cookie;
pub mod gaps;
pub mod negative;
pub mod rrl;
pub mod slots;
pub mod tap;

const _: () = assert!(gaps::RECORDS_AT == gaps::TEMPLATE_AT + negative::TEMPLATE_LEN);

/// Fixed DNS header length (RFC 1035 §4.1.1).
pub const DNS_HEADER_LEN: usize = 12;
/// Largest encoded domain name, in wire bytes (RFC 1035 §2.3.4).
pub const MAX_NAME_WIRE_LEN: usize = 255;
/// Largest single label (RFC 1035 §2.3.4).
pub const MAX_LABEL_LEN: usize = 63;
/// Payload size assumed for a client that sent no OPT record.
pub const CLASSIC_UDP_PAYLOAD: u16 = 512;

/// DNS opcodes that matter to both paths.
pub mod opcode {
    pub const QUERY: u8 = 0;
    pub const NOTIFY: u8 = 4;
    pub const UPDATE: u8 = 5;
}

/// Resource record types the fast path answers.
pub mod rtype {
    pub const A: u16 = 1;
    pub const NS: u16 = 2;
    pub const SOA: u16 = 6;
    pub const AAAA: u16 = 28;
    pub const OPT: u16 = 41;
    pub const DS: u16 = 43;
    pub const RRSIG: u16 = 46;
    pub const NSEC: u16 = 47;
}

/// Query types answered negatively without the full handler (in the
/// kernel and the fallback's hot path alike): data types, without those
/// the full handler treats apart (OPT and the meta-types, DS at a parent,
/// RRSIG, ANY).
pub const fn plain_type(qtype: u16) -> bool {
    match qtype {
        rtype::OPT | rtype::DS | rtype::RRSIG => false,
        1..=127 => true,
        256..=0xFEFF => true,
        _ => false,
    }
}

/// Longest name (wire bytes, root label included) kept in the tiny-key
/// table, the common case of service names. Three key sizes keep the
/// hash, the key zeroing and the kernel's per-element memory low.
pub const TINY_NAME_MAX: usize = 32;
/// Longest name kept in the short-key table (33..=64 bytes); longer names
/// go to the long-key table.
pub const SHORT_NAME_MAX: usize = 64;
/// Name buffer of the long-key table (255 rounded up to a multiple of 8).
pub const LONG_NAME_BUF: usize = 256;
/// Largest answer section kept inside a table entry (two A records, or
/// one AAAA); larger ones live once in the block table and are referenced.
/// With the 8-byte head the value is 40 bytes, so a tiny-key element is
/// 128 bytes with the kernel's header: one slab object of 128, not 192.
pub const INLINE_MAX: usize = 32;
/// Largest answer section kept in the mini-block table (a CNAME and its
/// target's address, three or four A records, an MX with its target's
/// addresses): the positive answers (and CNAME chains before a NODATA)
/// of up to this size that do not fit their entry. Templates and
/// denial records are small blocks whatever their size.
pub const MINI_BLOCK_MAX: usize = 64;
/// Largest answer section kept in the small-block table (a few records,
/// or one RRset with an ECDSA or Ed25519 RRSIG); larger ones take a
/// [`BLOCK_MAX`] block.
pub const SMALL_BLOCK_MAX: usize = 256;
/// Largest answer section the kernel can send (a block). Larger RRsets,
/// and answers that do not fit the client's UDP size, are the fallback's.
pub const BLOCK_MAX: usize = 2048;

/// Where a key says which answer it holds: the name's entries differ in
/// the key's last byte (its *tail*: the query type) and in bit 7 of its
/// first byte (the signed variant). A slot is the two together, `tail << 1
/// | signed`.
pub mod qtype_slot {
    use super::rtype;

    /// The name exists ([`negative::Exist`](super::negative::Exist)):
    /// what the kernel needs to answer NODATA at it, or NXDOMAIN below it.
    /// Tail zero: no query type has it.
    pub const EXIST: u8 = 0;
    /// At a zone's apex: the zone's SOA as the authority section of its
    /// negative answers ([`negative::Template`](super::negative::Template)).
    pub const SOA: u8 = 1;
    /// The answer to a query of a type (its RRset, with what the full
    /// handler adds: additional addresses, a CNAME chain), for DO=0 or a
    /// name in an unsigned zone.
    pub const A: u8 = of(rtype::A);
    pub const AAAA: u8 = of(rtype::AAAA);
    /// The DNSSEC variant of a type's slot (the answer with its RRSIGs),
    /// answered when the query sets DO and the plain entry is
    /// [`SIGNED`](super::answer_flags::SIGNED).
    pub const SIGNED: u8 = 1;
    pub const A_SIGNED: u8 = A | SIGNED;
    pub const AAAA_SIGNED: u8 = AAAA | SIGNED;
    /// At a delegation: its referral (NS records and glue) as a
    /// [`Template`](super::negative::Template). Tail 124: an unassigned
    /// type code, which no query type maps to.
    pub const REFERRAL: u8 = 124 << 1;
    /// At a signed zone's apex: the SOA and its RRSIGs as the authority
    /// records of a DNSSEC negative answer, a
    /// [`Template`](super::negative::Template) like [`SOA`]'s. Tail 122.
    pub const SOA_SIGNED: u8 = 122 << 1 | SIGNED;
    /// At a name of a signed zone: its NSEC record and the RRSIGs over
    /// it, owned by a pointer to the question (0xC00C), written after
    /// [`SOA_SIGNED`]'s records in the DNSSEC NODATA answer at that name.
    /// Tail 123.
    pub const DENIAL_SIGNED: u8 = 123 << 1 | SIGNED;
    /// At a name of a signed zone that is a closest encloser: how many
    /// entries its gap list has ([`gaps`](super::gaps)). Tail 121.
    pub const GAPS_SIGNED: u8 = 121 << 1 | SIGNED;
    /// One entry of a gap list, under the name
    /// [`key_label`](super::gaps::key_label) prepends to the encloser's.
    /// Tail 120.
    pub const GAP_SIGNED: u8 = 120 << 1 | SIGNED;
    /// The tail of a type no entry holds (an unassigned type code).
    pub const NO_TAIL: u8 = 125;

    /// The key tail of query type `qtype`: the type itself up to 109
    /// (EUI64), URI and CAA after the unassigned codes, every other type
    /// [`NO_TAIL`] (queries of it miss, and are answered negatively or
    /// passed up).
    pub const fn tail(qtype: u16) -> u8 {
        match qtype {
            1..=109 => qtype as u8,
            256 => 126,
            257 => 127,
            _ => NO_TAIL,
        }
    }

    /// The slot of a query of `qtype` (unsigned).
    pub const fn of(qtype: u16) -> u8 {
        tail(qtype) << 1
    }

    /// Whether answers of `qtype` can be held in the table.
    pub const fn keyed(qtype: u16) -> bool {
        tail(qtype) != NO_TAIL
    }

    /// Every slot a name's entries can have.
    pub fn all() -> impl Iterator<Item = u8> {
        (0..=u8::MAX).filter(|slot| slot >> 1 != NO_TAIL)
    }
}

/// The last byte of a key: the slot's query-type tail. A wire name ends
/// with its zero root label and is zero-padded to the key's size, so the
/// byte is free in every name's key but the longest, whose root label it
/// replaces (a wire name never ends in a non-zero byte, so no two names'
/// keys meet).
pub const fn key_tail(slot: u8) -> u8 {
    slot >> 1
}

/// Key of the tiny-name table: the query name in wire form, lower-cased
/// and zero-padded (wire names are prefix-free, so padding is
/// unambiguous), its first byte marked by [`key_lead`] with the signed
/// bit of the slot and whether the entry is in the table or in the
/// overlay of a change being written, its last by [`key_tail`] with the
/// query type.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TinyKey {
    pub name: [u8; TINY_NAME_MAX],
}

/// Key of the short-name table (names of 33..=64 wire bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ShortKey {
    pub name: [u8; SHORT_NAME_MAX],
}

/// Key of the long-name table (names of 65..=255 wire bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LongKey {
    pub name: [u8; LONG_NAME_BUF],
}

/// The first byte of a key: the name's first label length (at most 63,
/// so its top two bits are free) with the query-type slot in bit 7 and
/// the layer in bit 6 ([`layer`]). Keys stay a multiple of eight bytes,
/// which the kernel's hash table rounds them to anyway.
pub const fn key_lead(label_len: u8, slot: u8, layer: u8) -> u8 {
    (label_len & 0x3f) | (slot & 1) << 7 | (layer & 1) << 6
}

/// Where an entry lives. The kernel's table holds one copy of every
/// entry (the base). Changes are written beside it into the overlay
/// tables, each version of the changed entries under a generation of its
/// own ([`OverlayKey`]); the kernel consults the generation
/// [`XdpConfig::overlay`] names before the base. A change is made live by
/// that one config write, so a packet sees the table before or after it,
/// never a mix, and no element a packet may still read is ever rewritten:
/// older generations are removed, and changed entries folded into the
/// base, only once an RCU grace period has passed since no packet could
/// reach them.
pub mod layer {
    pub const BASE: u8 = 0;
    pub const OVERLAY: u8 = 1;
}

/// Key of an overlay table: the entry's key (lead byte marked with
/// [`layer::OVERLAY`]) and the generation it belongs to.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OverlayKey<K> {
    pub key: K,
    pub generation: u64,
}

/// A table entry: a pre-encoded answer section of `ancount` records, each
/// owned by a compression pointer to the question (0xC00C), `len` bytes
/// in all — in `data` when it fits, else in block `block` of the block
/// table. `csum` is the 16-bit ones'-complement sum of the section taken
/// at an even offset, so the kernel finishes the UDP checksum in O(1).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    /// Section length in bits 0..12 (at most [`BLOCK_MAX`]), [`answer_flags`]
    /// in bits 12..16.
    len_flags: u16,
    pub csum: u16,
    /// Block id in bits 0..24 (when the section is not inline), record
    /// count in bits 24..32 (at most `BLOCK_MAX / 16`).
    block_count: u32,
    pub data: [u8; INLINE_MAX],
}

/// Bytes of [`Answer::head`].
pub const ANSWER_HEAD: usize = 16;

/// Block ids fit in 24 bits of [`Answer`]; the block table never holds more.
pub const BLOCK_ID_MAX: u32 = (1 << 24) - 1;

/// The section length of an overlay entry that hides its base entry (a
/// deletion): longer than any section.
const ABSENT_LEN: u16 = 0x0fff;
const _: () = assert!((ABSENT_LEN as usize) > BLOCK_MAX);

impl Answer {
    /// An entry of `ancount` records, `len` bytes in all, with `flags`
    /// ([`answer_flags`]); the caller fills `data` or sets a block.
    pub const fn new(len: u16, ancount: u8, flags: u16) -> Self {
        Answer {
            len_flags: (len & 0x0fff) | (flags & 0xf) << 12,
            csum: 0,
            block_count: (ancount as u32) << 24,
            data: [0; INLINE_MAX],
        }
    }

    /// An overlay entry saying the name has no entry of its type (the
    /// change deletes it): the kernel does not read the base's.
    pub const fn absent() -> Self {
        Answer::new(ABSENT_LEN, 0, 0)
    }

    #[inline(always)]
    pub const fn is_absent(&self) -> bool {
        self.len_flags & 0x0fff == ABSENT_LEN
    }

    #[inline(always)]
    pub const fn section_len(&self) -> u16 {
        self.len_flags & 0x0fff
    }

    #[inline(always)]
    pub const fn flags(&self) -> u16 {
        self.len_flags >> 12
    }

    #[inline(always)]
    pub const fn ancount(&self) -> u16 {
        (self.block_count >> 24) as u16
    }

    #[inline(always)]
    pub const fn block(&self) -> u32 {
        self.block_count & BLOCK_ID_MAX
    }

    pub fn set_block(&mut self, id: u32) {
        self.block_count = (self.block_count & !BLOCK_ID_MAX) | (id & BLOCK_ID_MAX);
    }

    /// The zone the answer belongs to (below [`ZONES_MAX`]; 0: none), for
    /// per-zone counters. It lives where the entry has room: an inline
    /// answer has no block id (the zone takes its low 16 bits), a block
    /// answer no inline bytes.
    #[inline(always)]
    pub const fn zone(&self) -> u32 {
        if self.section_len() as usize <= INLINE_MAX {
            self.block_count & 0xffff
        } else {
            u32::from_le_bytes([self.data[0], self.data[1], self.data[2], self.data[3]])
        }
    }

    /// The entry's fixed fields (section length and flags, checksum,
    /// block id or zone, record count) and the first eight bytes of
    /// `data` (the zone and the other sections' counts of a block
    /// answer): with the section, all a copy outside the kernel needs to
    /// rebuild the entry ([`Answer::from_head`]).
    pub fn head(&self) -> [u8; ANSWER_HEAD] {
        let mut h = [0; ANSWER_HEAD];
        h[..2].copy_from_slice(&self.len_flags.to_le_bytes());
        h[2..4].copy_from_slice(&self.csum.to_le_bytes());
        h[4..8].copy_from_slice(&self.block_count.to_le_bytes());
        h[8..].copy_from_slice(&self.data[..8]);
        h
    }

    /// The entry [`Answer::head`] came from, given its `section` (copied
    /// into `data` when it is inline).
    pub fn from_head(h: [u8; ANSWER_HEAD], section: &[u8]) -> Self {
        let mut a = Answer {
            len_flags: u16::from_le_bytes([h[0], h[1]]),
            csum: u16::from_le_bytes([h[2], h[3]]),
            block_count: u32::from_le_bytes([h[4], h[5], h[6], h[7]]),
            data: [0; INLINE_MAX],
        };
        a.data[..8].copy_from_slice(&h[8..]);
        if section.len() <= INLINE_MAX {
            a.data[..section.len()].copy_from_slice(section);
        }
        a
    }

    /// For query `id`, where a rotated section splits (the bytes before
    /// record [`rotation::first`]) and the RRset's length in bytes, for
    /// records of `record_len` bytes; `None` when the entry is not rotated.
    #[inline(always)]
    pub const fn rotation(&self, id: u16, record_len: u32) -> Option<(u32, u32)> {
        let flags = self.flags();
        let trailing = answer_flags::trailing(flags);
        if flags & answer_flags::ROTATE == 0 || self.ancount() < trailing + 2 {
            return None;
        }
        let n = (self.ancount() - trailing) as u32;
        Some((rotation::first(id, n) * record_len, n * record_len))
    }

    /// Records of the authority and additional sections that follow the
    /// answer records in the section (additional addresses of an SRV, MX
    /// or NS answer). A block answer keeps them beside its zone, an
    /// inline one above its zone id (at most 15 each). An entry followed
    /// by its zone's SOA has that one authority record.
    #[inline(always)]
    pub const fn more_counts(&self) -> (u16, u16) {
        if answer_flags::soa_after(self.flags()) {
            (1, 0)
        } else if self.section_len() as usize <= INLINE_MAX {
            (
                (self.block_count >> 16 & 0xf) as u16,
                (self.block_count >> 20 & 0xf) as u16,
            )
        } else {
            (self.data[4] as u16, self.data[5] as u16)
        }
    }

    /// Sets [`Answer::more_counts`], after [`Answer::set_zone`]; false
    /// when they do not fit.
    pub fn set_more_counts(&mut self, authority: u16, additional: u16) -> bool {
        if self.section_len() as usize <= INLINE_MAX {
            if authority > 0xf || additional > 0xf {
                return false;
            }
            self.block_count |= (authority as u32) << 16 | (additional as u32) << 20;
        } else {
            if authority > 0xff || additional > 0xff {
                return false;
            }
            self.data[4] = authority as u8;
            self.data[5] = additional as u8;
        }
        true
    }

    /// For an entry whose zone's SOA follows its section
    /// ([`answer_flags::SOA_AFTER`]): the apex's length in wire form, the
    /// end of the query name where the kernel finds the zone's template.
    /// Such an entry has no authority or additional records of its own,
    /// so the length sits where their counts would.
    #[inline(always)]
    pub const fn soa_after(&self) -> Option<u32> {
        if !answer_flags::soa_after(self.flags()) {
            return None;
        }
        if self.section_len() as usize <= INLINE_MAX {
            Some(self.block_count >> 16 & 0xff)
        } else {
            Some(self.data[4] as u32)
        }
    }

    /// Marks the entry as followed by its zone's SOA, whose apex is
    /// `apex_len` bytes long; after [`Answer::set_zone`], instead of
    /// [`Answer::set_more_counts`].
    pub fn set_soa_after(&mut self, apex_len: u8) {
        self.len_flags |= answer_flags::SOA_AFTER << 12;
        if self.section_len() as usize <= INLINE_MAX {
            self.block_count |= (apex_len as u32) << 16;
        } else {
            self.data[4] = apex_len;
        }
    }

    /// Sets [`Answer::zone`]; after the section length, before a block id.
    pub fn set_zone(&mut self, id: u32) {
        if self.section_len() as usize <= INLINE_MAX {
            self.set_block(id);
        } else {
            self.data[..4].copy_from_slice(&id.to_le_bytes());
        }
    }
}

/// Zones counted apart in the kernel's per-zone answer counters.
pub const ZONES_MAX: u32 = 4096;

/// An answer section of up to [`MINI_BLOCK_MAX`] bytes too large to
/// inline (see there), stored once like a [`SmallBlock`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MiniBlock {
    pub data: [u8; MINI_BLOCK_MAX],
}

/// An answer section of up to [`SMALL_BLOCK_MAX`] bytes too large to
/// inline, stored once and referenced by every entry that answers with it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmallBlock {
    pub data: [u8; SMALL_BLOCK_MAX],
}

/// An answer section too large for a small block, stored once and
/// referenced by every entry that answers with it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnswerBlock {
    pub data: [u8; BLOCK_MAX],
}

/// Bits of [`Answer::flags`].
pub mod answer_flags {
    /// The name is in a signed zone: a DO=1 query is answered from the
    /// signed variant of the entry (key with [`key_tail`](super::key_tail)
    /// one), or goes to the fallback when there is none.
    pub const SIGNED: u16 = 1;
    /// The section is an A or AAAA RRset (of at least two records,
    /// followed by [`trailing`] RRSIGs) sent rotated by the query ID
    /// ([`rotation`](super::rotation)).
    pub const ROTATE: u16 = 2;
    /// Where the number of records after the rotated RRset (0 to
    /// [`TRAILING_MAX`]) sits in the flags.
    const TRAILING_SHIFT: u16 = 2;
    pub const TRAILING_MAX: u16 = 3;

    /// [`ROTATE`] with `trailing` records (RRSIGs) after the RRset.
    pub const fn rotate(trailing: u16) -> u16 {
        ROTATE | (trailing & TRAILING_MAX) << TRAILING_SHIFT
    }

    /// The records after the rotated RRset.
    pub const fn trailing(flags: u16) -> u16 {
        flags >> TRAILING_SHIFT & TRAILING_MAX
    }

    /// Without [`ROTATE`]: the section is the answer records of a
    /// NODATA at the end of a CNAME chain, and the zone's SOA (its
    /// negative template) follows them in the authority section
    /// ([`Answer::soa_after`](super::Answer::soa_after)).
    pub const SOA_AFTER: u16 = 1 << TRAILING_SHIFT;

    /// Whether `flags` say the zone's SOA follows the section.
    pub const fn soa_after(flags: u16) -> bool {
        flags & ROTATE == 0 && flags & SOA_AFTER != 0
    }
}

/// Answer rotation: an A or AAAA RRset answered in an order that moves
/// with the query ID, so clients that take the first address spread over
/// every member. One rule for the kernel, the hot path and the full
/// handler: the RRset starts at record `ID mod n` and wraps round.
pub mod rotation {
    /// The record an RRset of `n` (non-zero) records starts with.
    #[inline(always)]
    pub const fn first(id: u16, n: u32) -> u32 {
        id as u32 % n
    }

    /// Bytes of one compiled A or AAAA record (owner pointer, type,
    /// class, TTL, length, address) for a [`qtype_slot`](super::qtype_slot).
    #[inline(always)]
    pub const fn record_len(slot: u8) -> u32 {
        if slot >> 1 == super::rtype::AAAA as u8 {
            28
        } else {
            16
        }
    }

    /// Whether the kernel can send a rotated section of `section_len`
    /// bytes whose first `rotated_len` are the RRset: one held in the
    /// block table is copied with three helper calls, and the verifier
    /// bounds each call's source offset and length apart, so both parts
    /// must fit half a block.
    pub const fn fits_kernel(section_len: usize, rotated_len: usize) -> bool {
        section_len <= super::SMALL_BLOCK_MAX
            || (rotated_len <= super::BLOCK_MAX / 2
                && section_len - rotated_len <= super::BLOCK_MAX / 2)
    }
}

/// The OPT record without options (RFC 6891 §6.1.2): what the kernel and
/// the fallback's hot path parse a query's OPT against.
pub const OPT_LEN: u32 = 11;
/// Most option bytes a query's OPT may carry and be answered by the
/// kernel or the hot path (more go to the full handler).
pub const OPT_RDATA_MAX: u32 = 256;
/// Most options either walks.
pub const OPT_MAX_OPTIONS: usize = 8;

/// Longest NSID payload the kernel sends; a longer configured NSID makes
/// the kernel pass the queries that ask for it.
pub const NSID_MAX: usize = 64;

/// EDNS option codes the fast path reads.
pub mod edns_option {
    pub const NSID: u16 = 3;
    pub const ECS: u16 = 8;
    pub const COOKIE: u16 = 10;
}

/// What the kernel does with a query asking for NSID.
pub mod nsid_mode {
    /// No NSID configured: the option is ignored, as the fallback does.
    pub const NONE: u16 = 0;
    /// Answer with `XdpConfig::nsid`.
    pub const INLINE: u16 = 1;
    /// Configured but longer than `NSID_MAX`: pass the query up.
    pub const PASS: u16 = 2;
}

/// Runtime settings of the XDP program (one-element array map).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XdpConfig {
    /// The overlay generation in force (0: none): the kernel looks an
    /// entry up under it in the overlay tables first ([`layer`]), then
    /// in the base.
    pub overlay: u32,
    /// UDP port answered, host byte order; 0 = answer nothing.
    pub port: u16,
    /// EDNS payload size the server advertises (the fallback's value).
    pub udp_payload: u16,
    /// CLOCK_REALTIME minus CLOCK_MONOTONIC in nanoseconds: the kernel's
    /// unix time is `bpf_ktime_get_coarse_ns() + realtime_offset_ns`.
    /// Refreshed by the controller (the wall clock is slewed by NTP).
    pub realtime_offset_ns: u64,
    /// SipHash keys ([`cookie::key_words`]) of the current server secret
    /// and of the previous one (accepted during a rollover).
    pub cookie_keys: [[u64; 2]; 2],
    /// 1 when `cookie_keys[1]` is accepted.
    pub cookie_previous: u32,
    /// [`nsid_mode`] value.
    pub nsid_mode: u16,
    /// Ones'-complement sum of `nsid[..4 + nsid_len]` at an even offset.
    pub nsid_sum: u16,
    /// Payload length of the NSID option.
    pub nsid_len: u32,
    /// The whole NSID option (code, length, payload), zero-padded.
    pub nsid: [u8; NSID_MAX + 4],
    /// 1: answer only queries to an address in the ADDRESSES map.
    pub filter_destination: u32,
    /// 1: answer NXDOMAIN and NODATA from the EXIST and SOA entries; 0
    /// while the loader cannot vouch that every name's EXIST entry is in
    /// (a full table left one out).
    pub negative_answers: u32,
    /// Buckets of the tiny-name slot table (module `slots`; 0: no slots, the
    /// tiny names are all in the hash map).
    pub tiny_buckets: u32,
    /// 1 when the tiny-name hash map may hold entries (the slot table's
    /// overflow): a key missing from its slots is looked up there too.
    pub tiny_overflow: u32,
    /// Response rate limiting of the kernel's answers (rate 0: off).
    pub rrl: rrl::Settings,
    /// The first 8 bytes of the loaded object's SHA-256: a restarted
    /// controller adopts pinned maps only from the same object. Never
    /// read by the program.
    pub object_tag: u64,
    /// Fingerprint of the zone versions the table holds, or 0 while a
    /// change is being written. Never read by the program.
    pub table_tag: u64,
    /// dnstap: one outcome in this many per [`tap::kind`] (0: none).
    pub tap_every: [u32; tap::kind::COUNT],
}

impl XdpConfig {
    /// A configuration answering on `port` with no cookie secret or NSID
    /// set yet.
    pub const fn new(port: u16, udp_payload: u16) -> Self {
        XdpConfig {
            overlay: 0,
            port,
            udp_payload,
            realtime_offset_ns: 0,
            cookie_keys: [[0; 2]; 2],
            cookie_previous: 0,
            nsid_mode: nsid_mode::NONE,
            nsid_sum: 0,
            nsid_len: 0,
            nsid: [0; NSID_MAX + 4],
            filter_destination: 0,
            negative_answers: 1,
            tiny_buckets: 0,
            tiny_overflow: 1,
            rrl: rrl::Settings {
                rate: 0,
                slip: 0,
                slots: 1,
                fixed_now_ms: 0,
                ipv4_prefix: 24,
                ipv6_prefix: 56,
                log_only: 0,
                _pad: 0,
                _pad2: 0,
            },
            object_tag: 0,
            table_tag: 0,
            tap_every: [0; tap::kind::COUNT],
        }
    }
}

/// Key of the ADDRESSES map: a destination address served, IPv4 as an
/// IPv4-mapped IPv6 address (`::ffff:a.b.c.d`).
pub type AddressKey = [u8; 16];

/// Largest frame the benchmark programs can restore.
pub const BENCH_FRAME_MAX: usize = 512;

/// A saved query frame, restored before every BPF_PROG_TEST_RUN repeat by
/// the benchmark programs (the kernel reuses one buffer across repeats).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BenchFrame {
    pub len: u32,
    pub _pad: u32,
    pub data: [u8; BENCH_FRAME_MAX],
}

// SAFETY: plain `repr(C)` byte and integer fields, no padding, any bit
// pattern valid.
#[cfg(feature = "user")]
mod pod {
    unsafe impl aya::Pod for super::TinyKey {}
    unsafe impl aya::Pod for super::ShortKey {}
    unsafe impl aya::Pod for super::AnswerBlock {}
    unsafe impl aya::Pod for super::SmallBlock {}
    unsafe impl aya::Pod for super::MiniBlock {}
    unsafe impl aya::Pod for super::LongKey {}
    unsafe impl aya::Pod for super::OverlayKey<super::TinyKey> {}
    unsafe impl aya::Pod for super::OverlayKey<super::ShortKey> {}
    unsafe impl aya::Pod for super::OverlayKey<super::LongKey> {}
    unsafe impl aya::Pod for super::Answer {}
    unsafe impl aya::Pod for super::XdpConfig {}
    unsafe impl aya::Pod for super::BenchFrame {}
    unsafe impl aya::Pod for super::rrl::Bucket {}
    unsafe impl aya::Pod for super::tap::TapRecord {}
}

/// Per-CPU counter slots: answers by type, then one per [`PassReason`].
/// (Answers of other types come last: slots keep their numbers.)
pub mod counter {
    pub const ANSWERED_A: u32 = 0;
    pub const ANSWERED_AAAA: u32 = 1;
    pub const PASS_BASE: u32 = 2;
    /// Answers (counted above as A or AAAA too) from a signed variant.
    pub const ANSWERED_SIGNED: u32 = PASS_BASE + super::PassReason::COUNT as u32;
    /// Rate limiting: responses over their bucket's rate, those of them
    /// sent truncated and dropped, and answers exempt by a valid server
    /// cookie.
    pub const RRL_LIMITED: u32 = ANSWERED_SIGNED + 1;
    pub const RRL_SLIPPED: u32 = RRL_LIMITED + 1;
    pub const RRL_DROPPED: u32 = RRL_LIMITED + 2;
    pub const RRL_EXEMPT: u32 = RRL_LIMITED + 3;
    /// Negative answers sent from the EXIST and SOA entries, to A, then
    /// AAAA queries.
    pub const ANSWERED_NXDOMAIN: u32 = RRL_EXEMPT + 1;
    pub const ANSWERED_NODATA: u32 = RRL_EXEMPT + 3;
    /// The same, to queries of every other type: NXDOMAIN, then NODATA.
    pub const ANSWERED_NEGATIVE_OTHER: u32 = ANSWERED_NODATA + 2;
    /// Answers to queries of every type but A and AAAA.
    pub const ANSWERED_OTHER: u32 = ANSWERED_NEGATIVE_OTHER + 2;
    /// Referrals, to A, AAAA and every other type.
    pub const REFERRALS: u32 = ANSWERED_OTHER + 1;
    /// dnstap samples written to the ring buffer, and lost (it was full).
    pub const TAP_SAMPLED: u32 = REFERRALS + 3;
    pub const TAP_LOST: u32 = TAP_SAMPLED + 1;
    pub const COUNT: u32 = TAP_LOST + 1;
}

/// Why a packet was handed to the fallback server instead of being answered
/// in the kernel. Indexes the per-CPU counter array, so values are stable.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PassReason {
    NotDns = 0,
    NotQuery = 1,
    Miss = 2,
    QueryType = 3,
    Edns = 4,
    Size = 5,
    ParseError = 6,
    /// A source no reply may go to: unspecified, broadcast, multicast, or
    /// loopback arriving on another interface (reflection).
    Source = 7,
    /// Sent to an address of the interface that xdpdns does not serve.
    Destination = 8,
}

impl PassReason {
    pub const COUNT: usize = 9;
    pub const ALL: [PassReason; Self::COUNT] = [
        PassReason::NotDns,
        PassReason::NotQuery,
        PassReason::Miss,
        PassReason::QueryType,
        PassReason::Edns,
        PassReason::Size,
        PassReason::ParseError,
        PassReason::Source,
        PassReason::Destination,
    ];

    /// Label used for the Prometheus `reason` dimension.
    pub const fn label(self) -> &'static str {
        match self {
            PassReason::NotDns => "not_dns",
            PassReason::NotQuery => "not_query",
            PassReason::Miss => "miss",
            PassReason::QueryType => "type",
            PassReason::Edns => "edns",
            PassReason::Size => "size",
            PassReason::ParseError => "parse_error",
            PassReason::Source => "source",
            PassReason::Destination => "destination",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_layouts_are_stable() {
        assert_eq!(core::mem::size_of::<TinyKey>(), 32);
        assert_eq!(core::mem::size_of::<ShortKey>(), 64);
        assert_eq!(core::mem::size_of::<LongKey>(), 256);
        assert_eq!(core::mem::size_of::<Answer>(), 40, "no padding");
        assert_eq!(core::mem::size_of::<XdpConfig>(), 200, "no padding");
    }

    #[test]
    fn rotation_starts_at_the_query_id_modulo_the_rrset_size() {
        // Three A records, then two RRSIGs that stay where they are.
        let signed = Answer::new(300, 5, answer_flags::rotate(2));
        assert_eq!(answer_flags::trailing(signed.flags()), 2);
        let splits = [0u16, 1, 2, 3, 4, 5, 6].map(|id| signed.rotation(id, 16));
        let expect = [0, 16, 32, 0, 16, 32, 0].map(|split| Some((split, 48)));
        assert_eq!(splits, expect);
        assert_eq!(
            Answer::new(56, 2, answer_flags::ROTATE).rotation(65535, 28),
            Some((28, 56))
        );
        // Not flagged, or one record left to rotate: sent as stored.
        assert_eq!(Answer::new(48, 3, 0).rotation(1, 16), None);
        assert_eq!(
            Answer::new(16, 1, answer_flags::ROTATE).rotation(1, 16),
            None
        );
        assert_eq!(
            Answer::new(130, 2, answer_flags::rotate(1)).rotation(1, 16),
            None
        );
        assert_eq!(rotation::record_len(qtype_slot::A_SIGNED), 16);
        assert_eq!(rotation::record_len(qtype_slot::AAAA), 28);
        assert!(rotation::fits_kernel(SMALL_BLOCK_MAX, SMALL_BLOCK_MAX));
        assert!(rotation::fits_kernel(2048, 1024));
        assert!(
            !rotation::fits_kernel(1040, 1040),
            "64 A records fit, 65 do not"
        );
        assert!(
            !rotation::fits_kernel(2000, 900),
            "RRSIGs over half a block"
        );
    }

    #[test]
    fn only_the_absent_marker_reads_as_absent() {
        assert!(Answer::absent().is_absent());
        for len in [
            0,
            4,
            INLINE_MAX as u16,
            SMALL_BLOCK_MAX as u16,
            BLOCK_MAX as u16,
        ] {
            for flags in [0, answer_flags::SIGNED, answer_flags::rotate(3)] {
                assert!(!Answer::new(len, 1, flags).is_absent(), "{len} {flags}");
            }
        }
    }

    #[test]
    fn answer_head_packs_its_fields_without_overlap() {
        let max_count = (BLOCK_MAX / 16) as u8;
        let mut a = Answer::new(BLOCK_MAX as u16, max_count, answer_flags::SIGNED);
        a.set_block(BLOCK_ID_MAX);
        assert_eq!(a.section_len() as usize, BLOCK_MAX);
        assert_eq!(a.ancount(), max_count as u16);
        assert_eq!(a.flags(), answer_flags::SIGNED);
        a.set_zone(4095);
        assert_eq!(
            a.zone(),
            4095,
            "a block answer keeps its zone in the unused inline bytes"
        );
        a.set_block(BLOCK_ID_MAX);
        assert_eq!((a.zone(), a.block()), (4095, BLOCK_ID_MAX));
        let mut inline = Answer::new(INLINE_MAX as u16, 2, 0);
        inline.data = [7; INLINE_MAX];
        inline.set_zone(17);
        assert_eq!((inline.zone(), inline.data), (17, [7; INLINE_MAX]));
        assert_eq!(a.block(), BLOCK_ID_MAX);
        a.set_block(7);
        assert_eq!(
            (a.block(), a.ancount(), a.section_len()),
            (7, max_count as u16, 2048)
        );
        let b = Answer::new(28, 1, 0);
        assert_eq!(
            (b.section_len(), b.ancount(), b.flags(), b.block()),
            (28, 1, 0, 0)
        );
    }

    #[test]
    fn pass_reasons_index_their_counter_slot() {
        for (i, r) in PassReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i, "{:?} must index slot {i}", r);
        }
    }
}
