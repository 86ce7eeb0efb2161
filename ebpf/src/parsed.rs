//! What parsing a query found, as plain data: kept in per-CPU scratch
//! memory (`maps::Scratch`) between the parser and the reply builder,
//! which run as separate global functions. Types only, so every stage
//! can name them without depending on another.

use xdpdns_common::{DNS_HEADER_LEN, NSID_MAX, OPT_LEN};

pub const UDP_LEN: u32 = 8;

/// Where the packet's parts are; the IP header as received is kept in
/// `Scratch::ip4`/`ip6` for building the reply.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Packet {
    pub l3: u32,
    pub v6: bool,
    /// Bytes of IPv4 options (dropped from the reply).
    pub ip_options: u32,
    pub l4: u32,
    pub udp: [u8; UDP_LEN as usize],
    /// Offset and length of the DNS message.
    pub dns: u32,
    pub dns_len: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Question {
    pub header: [u8; DNS_HEADER_LEN],
    /// Wire length of the query name, root label included.
    pub name_len: u32,
    /// The query type's slot ([`qtype_slot::of`](xdpdns_common::qtype_slot::of)).
    pub qtype: u8,
    /// The query type as sent.
    pub qtype_wire: u16,
    /// The query's OPT record, if it had one.
    pub edns: Edns,
    /// Ones'-complement sum of the question section (name, type, class)
    /// taken from an even offset.
    pub sum: u64,
}

/// What the query's OPT record asked for. Not an `Option`: LLVM packs
/// one into a register and reads its payload on the `None` path too,
/// which the verifier rejects when that stack slot held a pointer.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Edns {
    /// The query had an OPT record (else every other field is zero).
    pub present: bool,
    /// Client's payload size.
    pub payload: u16,
    pub dnssec_ok: bool,
    pub nsid: bool,
    /// 0: no COOKIE; 1: a client cookie (`Scratch::client_cookie`); 2:
    /// and a server cookie of our length (`Scratch::server_cookie`).
    pub cookie: u8,
}

impl Edns {
    pub const ABSENT: Edns = Edns {
        present: false,
        payload: 0,
        dnssec_ok: false,
        nsid: false,
        cookie: 0,
    };
}

/// The COOKIE option a reply carries: code, length, client and server
/// cookies.
pub const COOKIE_OPTION_LEN: u32 = 4 + 24;

/// Largest OPT record a reply carries: header, NSID, COOKIE.
pub const OPT_REPLY_MAX: u32 = OPT_LEN + 4 + NSID_MAX as u32 + COOKIE_OPTION_LEN;

/// `Scratch::opt_reply`'s size: `OPT_REPLY_MAX` rounded up to 8.
pub const OPT_REPLY_BUF: usize = (OPT_REPLY_MAX as usize + 7) & !7;
