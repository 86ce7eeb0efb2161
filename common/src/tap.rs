//! The kernel's dnstap samples: what kind of outcome a sample is, how
//! often each kind is sampled, and the record the program writes into
//! its ring buffer (the frame as received and the frame as sent).

/// Outcomes sampled apart, indexing `XdpConfig::tap_every`.
pub mod kind {
    /// A positive answer (any type, signed or not).
    pub const ANSWER: u32 = 0;
    /// NXDOMAIN, NODATA or a referral.
    pub const NEGATIVE: u32 = 1;
    /// An answer rate limiting slipped (TC=1) or dropped.
    pub const LIMITED: u32 = 2;
    /// A DNS query passed up to the fallback.
    pub const PASSED: u32 = 3;
    pub const COUNT: usize = 4;
}

/// `TapRecord::detail` of a rate-limited sample.
pub mod limited {
    pub const SLIPPED: u32 = 0;
    pub const DROPPED: u32 = 1;
}

/// Bytes of the received frame a record keeps.
pub const QUERY_MAX: usize = 1024;
/// Bytes of the sent frame a record keeps.
pub const RESPONSE_MAX: usize = 2048;

/// One sample, as the ring buffer carries it: both frames from their
/// Ethernet header on, each cut at its buffer (the `_len` fields are the
/// frames' whole lengths).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TapRecord {
    /// `bpf_ktime_get_ns()` when the sample was taken (CLOCK_MONOTONIC).
    pub time_ns: u64,
    /// A [`kind`].
    pub kind: u32,
    /// For PASSED the `PassReason`, for LIMITED a [`limited`] value.
    pub detail: u32,
    pub query_len: u32,
    /// 0: nothing was sent.
    pub response_len: u32,
    pub query: [u8; QUERY_MAX],
    pub response: [u8; RESPONSE_MAX],
}

/// Bytes of a [`TapRecord`] before its frames.
pub const RECORD_HEADER: usize = 24;
const _: () =
    assert!(core::mem::size_of::<TapRecord>() == RECORD_HEADER + QUERY_MAX + RESPONSE_MAX);

/// The outcomes of one kind skipped after a sample of it, from a random
/// `r`: uniform from 0 to 2N - 2, so one outcome in N is sampled on
/// average and no periodic pattern in the traffic can line up with the
/// samples. (The program draws a random number only when it samples.)
pub const fn skip_after_sample(every: u32, r: u32) -> u32 {
    match every {
        0 | 1 => 0,
        n => r % (2 * n - 1),
    }
}

/// Size of the ring buffer the samples go through (a power of two).
pub const RING_BYTES: u32 = 4 << 20;
