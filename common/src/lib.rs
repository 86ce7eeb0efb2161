//! Types and constants shared by the XDP program (`ebpf/`) and the userspace
//! controller (`userspace/`).
//!
//! This crate is `no_std` and dependency-free so the kernel side can use it.
//! Everything that crosses the kernel/user boundary through a BPF map is
//! `#[repr(C)]` here; `Pod` impls live on the user side only.
#![no_std]

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
    pub const AAAA: u16 = 28;
    pub const OPT: u16 = 41;
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
}

impl PassReason {
    pub const COUNT: usize = 7;
    pub const ALL: [PassReason; Self::COUNT] = [
        PassReason::NotDns,
        PassReason::NotQuery,
        PassReason::Miss,
        PassReason::QueryType,
        PassReason::Edns,
        PassReason::Size,
        PassReason::ParseError,
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_reasons_index_their_counter_slot() {
        for (i, r) in PassReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i, "{:?} must index slot {i}", r);
        }
    }
}
