//! Response rate limiting (RRL): one algorithm for the kernel and the
//! fallback, so both decide a scripted sequence of queries the same way.
//!
//! Each response is accounted to a bucket keyed by the source's prefix
//! (IPv4 /24, IPv6 /56 by default) and the response's class. A bucket
//! earns `rate` credits a second, holds at most one second's worth, and a
//! response spends one. Without credit the response is limited: every
//! `slip`-th limited response is sent truncated (TC=1, so a real client
//! retries over TCP, which cannot be spoofed), the others are dropped.
//!
//! The table is a fixed array of [`Bucket`]s ([`BUCKET_BYTES`] each),
//! indexed by a hash of the key. A bucket stores its whole key, so two
//! sources never share one: a source that finds its slot taken by another
//! takes it over with full credit. Collisions thus only make the limiter
//! more lenient (the evicted source starts afresh); they never limit a
//! source that stays under its rate.

/// Response classes, accounted separately.
pub mod class {
    pub const POSITIVE: u8 = 0;
    pub const NXDOMAIN: u8 = 1;
    pub const NODATA: u8 = 2;
    pub const ERROR: u8 = 3;
    pub const REFERRAL: u8 = 4;
}

/// What to do with one response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Send,
    /// Send it truncated: TC=1, the question only.
    Slip,
    Drop,
}

/// One source prefix and class. 24 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bucket {
    /// The prefix's leading bytes (IPv4: 4, IPv6: the first 8), masked.
    pub prefix: u64,
    /// `1 << 16 | family << 8 | class`; 0 for an empty bucket.
    pub meta: u32,
    /// When the bucket was last accounted (milliseconds, wrapping).
    pub stamp_ms: u32,
    /// Credit in thousandths of a response.
    pub credit: u32,
    /// Limited responses so far (which of them slip).
    pub limited: u32,
}

pub const BUCKET_BYTES: usize = core::mem::size_of::<Bucket>();

/// The limiter's settings as the kernel reads them (`XdpConfig::rrl`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// Responses a second per bucket; 0: rate limiting is off.
    pub rate: u32,
    /// Every `slip`-th limited response slips (0: none).
    pub slip: u32,
    /// Buckets in the table (a power of two).
    pub slots: u32,
    /// A fixed clock in milliseconds for BPF_PROG_TEST_RUN (the
    /// differential test passes time in); 0: the kernel's coarse
    /// monotonic clock, the one the fallback reads.
    pub fixed_now_ms: u32,
    pub ipv4_prefix: u8,
    pub ipv6_prefix: u8,
    /// Count, but send every response.
    pub log_only: u8,
    pub _pad: u8,
    pub _pad2: u32,
}

impl Settings {
    /// The key of a response of `class` to a source address (IPv4 in the
    /// first four bytes of `addr` unless `v6`).
    #[inline(always)]
    pub fn key(&self, v6: bool, addr: &[u8; 16], class: u8) -> Key {
        if v6 {
            Key::v6(*addr, self.ipv6_prefix, class)
        } else {
            Key::v4(
                [addr[0], addr[1], addr[2], addr[3]],
                self.ipv4_prefix,
                class,
            )
        }
    }
}

/// A source prefix and response class: what a bucket is keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    pub prefix: u64,
    pub meta: u32,
}

impl Key {
    /// The key of an IPv4 source under a `/len` prefix (at most 32).
    pub fn v4(addr: [u8; 4], len: u8, class: u8) -> Key {
        let bits = u32::from_be_bytes(addr) as u64;
        Key {
            prefix: bits & mask(len.min(32), 32),
            meta: meta(4, class),
        }
    }

    /// The key of an IPv6 source under a `/len` prefix (at most 64).
    pub fn v6(addr: [u8; 16], len: u8, class: u8) -> Key {
        let mut head = [0u8; 8];
        head.copy_from_slice(&addr[..8]);
        Key {
            prefix: u64::from_be_bytes(head) & mask(len.min(64), 64),
            meta: meta(6, class),
        }
    }

    /// The bucket slot of this key in a table of `slots` (a power of two).
    pub fn slot(&self, slots: u32) -> u32 {
        let mut h = self.prefix ^ (self.meta as u64).rotate_left(40);
        // splitmix64's finaliser: every prefix bit moves the slot.
        h ^= h >> 30;
        h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 27;
        h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^= h >> 31;
        (h as u32) & (slots - 1)
    }
}

fn meta(family: u32, class: u8) -> u32 {
    1 << 16 | family << 8 | class as u32
}

/// The top `len` bits of a `width`-bit value (`len` ≤ `width` ≤ 64).
fn mask(len: u8, width: u8) -> u64 {
    if len == 0 {
        return 0;
    }
    (u64::MAX << (64 - len as u32)) >> (64 - width as u32)
}

/// Accounts one response for `key` in its bucket at `now_ms`, with `rate`
/// responses a second and every `slip`-th limited one slipped (0: none).
pub fn account(bucket: &mut Bucket, key: Key, now_ms: u32, rate: u32, slip: u32) -> Verdict {
    let full = rate.saturating_mul(1000);
    if bucket.prefix != key.prefix || bucket.meta != key.meta {
        // Empty, or another source's: this one starts with full credit.
        *bucket = Bucket {
            prefix: key.prefix,
            meta: key.meta,
            stamp_ms: now_ms,
            credit: full,
            limited: 0,
        };
    }
    // At most a second's refill: the credit is capped at that anyway, and
    // it keeps the product within 32 bits.
    let elapsed = now_ms.wrapping_sub(bucket.stamp_ms).min(1000);
    bucket.stamp_ms = now_ms;
    bucket.credit = bucket
        .credit
        .saturating_add(elapsed.saturating_mul(rate))
        .min(full);
    if bucket.credit >= 1000 {
        bucket.credit -= 1000;
        return Verdict::Send;
    }
    bucket.limited = bucket.limited.wrapping_add(1);
    if slip != 0 && bucket.limited.is_multiple_of(slip) {
        Verdict::Slip
    } else {
        Verdict::Drop
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE: u32 = 20;

    /// `n` responses for `key` at `now` in a table of `slots`.
    fn run(table: &mut [Bucket], key: Key, now: u32, n: u32, slip: u32) -> (u32, u32, u32) {
        let (mut sent, mut slipped, mut dropped) = (0, 0, 0);
        for _ in 0..n {
            let slot = key.slot(table.len() as u32) as usize;
            match account(&mut table[slot], key, now, RATE, slip) {
                Verdict::Send => sent += 1,
                Verdict::Slip => slipped += 1,
                Verdict::Drop => dropped += 1,
            }
        }
        (sent, slipped, dropped)
    }

    #[test]
    fn a_flood_gets_its_rate_then_every_second_response_slips() {
        let mut table = [Bucket::default(); 64];
        let flood = Key::v4([192, 0, 2, 7], 24, class::NXDOMAIN);
        assert_eq!(run(&mut table, flood, 5000, 100, 2), (20, 40, 40));
        // A quarter of a second later: a quarter of the rate.
        assert_eq!(run(&mut table, flood, 5250, 10, 2).0, 5);
        // A long pause refills one second's worth, not more.
        assert_eq!(run(&mut table, flood, 60_000, 100, 2).0, 20);
        assert_eq!(run(&mut table, flood, 70_000, 100, 0), (20, 0, 80));
        assert_eq!(run(&mut table, flood, 80_000, 100, 1), (20, 80, 0));
    }

    #[test]
    fn a_prefix_shares_its_bucket_and_classes_do_not() {
        let mut table = [Bucket::default(); 64];
        let a = Key::v4([192, 0, 2, 7], 24, class::POSITIVE);
        let b = Key::v4([192, 0, 2, 200], 24, class::POSITIVE);
        assert_eq!(a, b);
        assert_eq!(run(&mut table, a, 0, 20, 2).0, 20);
        assert_eq!(run(&mut table, b, 0, 1, 2).0, 0, "same /24, no credit left");
        let other_class = Key::v4([192, 0, 2, 7], 24, class::NODATA);
        assert_eq!(run(&mut table, other_class, 0, 1, 2).0, 1);
        let other_prefix = Key::v4([192, 0, 3, 7], 24, class::POSITIVE);
        assert_eq!(run(&mut table, other_prefix, 0, 1, 2).0, 1);
        let v6a = Key::v6(
            [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0x12, 0xff, 0, 0, 0, 0, 0, 0, 1],
            56,
            0,
        );
        let v6b = Key::v6(
            [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0x34, 0xee, 0, 0, 0, 0, 0, 0, 1],
            56,
            0,
        );
        let v6c = Key::v6(
            [0x20, 1, 0xd, 0xb8, 0, 0, 1, 0x12, 0xff, 0, 0, 0, 0, 0, 0, 1],
            56,
            0,
        );
        assert_eq!(v6a, v6b, "the same /56");
        assert_ne!(v6a, v6c);
        assert_eq!(Key::v4([10, 1, 2, 3], 0, 0).prefix, 0);
        assert_eq!(Key::v4([10, 1, 2, 3], 32, 0).prefix, 0x0a01_0203);
        assert_eq!(Key::v6([0xff; 16], 64, 0).prefix, u64::MAX);
    }

    /// One slot for everybody: a flood and a quiet source collide on
    /// every response, yet the quiet one is never limited.
    #[test]
    fn collisions_never_limit_a_source_under_its_rate() {
        let mut table = [Bucket::default(); 1];
        let quiet = Key::v4([198, 51, 100, 1], 24, class::POSITIVE);
        let flood = Key::v4([203, 0, 113, 9], 24, class::POSITIVE);
        for ms in (0..10_000).step_by(100) {
            // 10 a second from the quiet source, 1,000 from the flood.
            run(&mut table, flood, ms, 100, 2);
            assert_eq!(run(&mut table, quiet, ms, 1, 2), (1, 0, 0), "at {ms} ms");
        }
    }

    #[test]
    fn a_bucket_is_24_bytes() {
        assert_eq!(BUCKET_BYTES, 24);
        assert_eq!(core::mem::size_of::<Settings>(), 24, "no padding");
    }
}
