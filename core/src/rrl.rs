//! Response rate limiting in the fallback (`[rrl]`): the algorithm of
//! [`xdpdns_common::rrl`] over a fixed table of buckets, so the kernel
//! and this server decide alike. UDP only (TCP cannot be spoofed); a query
//! with a valid server cookie is exempt and not accounted.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use serde::Deserialize;
use xdpdns_common::rrl::{self, class, Bucket, Key, Verdict};

/// `[rrl]`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct RrlConfig {
    pub enabled: bool,
    /// Responses a second per source prefix and response class.
    pub responses_per_second: u32,
    /// Every `slip`-th limited response is sent truncated (TC=1); the
    /// others are dropped. 0: drop all.
    pub slip: u32,
    pub ipv4_prefix_length: u8,
    pub ipv6_prefix_length: u8,
    /// Count what would be limited, send everything.
    pub log_only: bool,
    /// Buckets in the table (a power of two; 24 bytes each).
    pub table_size: u32,
}

impl Default for RrlConfig {
    fn default() -> Self {
        RrlConfig {
            enabled: false,
            responses_per_second: 20,
            slip: 2,
            ipv4_prefix_length: 24,
            ipv6_prefix_length: 56,
            log_only: false,
            table_size: 65_536,
        }
    }
}

impl RrlConfig {
    /// The kernel's settings for this table (rate 0 when not enabled).
    pub fn kernel_settings(&self) -> rrl::Settings {
        rrl::Settings {
            rate: if self.enabled {
                self.responses_per_second
            } else {
                0
            },
            slip: self.slip,
            slots: self.table_size,
            fixed_now_ms: 0,
            ipv4_prefix: self.ipv4_prefix_length,
            ipv6_prefix: self.ipv6_prefix_length,
            log_only: self.log_only as u8,
            _pad: 0,
            _pad2: 0,
        }
    }

    /// Buckets the kernel's table needs: one when rate limiting is off.
    pub fn kernel_slots(&self) -> u32 {
        if self.enabled {
            self.table_size
        } else {
            1
        }
    }

    /// What is wrong with the table, as (key, message).
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.responses_per_second == 0 || self.responses_per_second > 1_000_000 {
            return Err(("rrl.responses_per_second", "must be 1 to 1000000".into()));
        }
        if self.ipv4_prefix_length > 32 {
            return Err(("rrl.ipv4_prefix_length", "must be 0 to 32".into()));
        }
        if self.ipv6_prefix_length > 64 {
            return Err(("rrl.ipv6_prefix_length", "must be 0 to 64".into()));
        }
        if !self.table_size.is_power_of_two() || !(1024..=1 << 24).contains(&self.table_size) {
            return Err((
                "rrl.table_size",
                "must be a power of two from 1024 to 16777216".into(),
            ));
        }
        Ok(())
    }
}

/// What the limiter did (`/metrics`).
#[derive(Default)]
pub struct RrlCounts {
    pub limited: AtomicU64,
    pub slipped: AtomicU64,
    pub dropped: AtomicU64,
    pub exempt: AtomicU64,
}

pub struct Limiter {
    config: RrlConfig,
    /// One lock per bucket: contention only between queries of one slot.
    buckets: Box<[Mutex<Bucket>]>,
    pub counts: RrlCounts,
    /// A fixed clock (milliseconds) set by tests; 0: the real one.
    fixed_ms: AtomicU32,
}

impl Limiter {
    pub fn new(config: RrlConfig) -> Limiter {
        let buckets = (0..config.table_size)
            .map(|_| Mutex::new(Bucket::default()))
            .collect();
        Limiter {
            config,
            buckets,
            counts: RrlCounts::default(),
            fixed_ms: AtomicU32::new(0),
        }
    }

    /// Judges at `ms` whatever time is passed in (0: the time passed in
    /// again), as `rrl::Settings::fixed_now_ms` does in the kernel: the
    /// differential test holds both paths at one instant.
    pub fn fix_clock(&self, ms: u32) {
        self.fixed_ms.store(ms, Ordering::Relaxed);
    }

    /// The verdict on a UDP response of `class` to `peer` at `now_ms`
    /// (a monotonic clock in milliseconds; the buckets integrate whatever
    /// time passed between two stamps).
    pub fn judge(&self, peer: IpAddr, class: u8, valid_cookie: bool, now_ms: u32) -> Verdict {
        let now_ms = match self.fixed_ms.load(Ordering::Relaxed) {
            0 => now_ms,
            fixed => fixed,
        };
        if valid_cookie {
            self.counts.exempt.fetch_add(1, Ordering::Relaxed);
            return Verdict::Send;
        }
        let c = &self.config;
        let key = match peer {
            IpAddr::V4(a) => Key::v4(a.octets(), c.ipv4_prefix_length, class),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => Key::v4(v4.octets(), c.ipv4_prefix_length, class),
                None => Key::v6(a.octets(), c.ipv6_prefix_length, class),
            },
        };
        let slot = key.slot(c.table_size) as usize;
        let verdict = {
            let mut bucket = self.buckets[slot].lock().expect("rrl bucket");
            rrl::account(&mut bucket, key, now_ms, c.responses_per_second, c.slip)
        };
        if verdict == Verdict::Send {
            return verdict;
        }
        self.counts.limited.fetch_add(1, Ordering::Relaxed);
        let counter = match verdict {
            Verdict::Slip => &self.counts.slipped,
            _ => &self.counts.dropped,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if c.log_only {
            Verdict::Send
        } else {
            verdict
        }
    }
}

/// The response class of an encoded reply, from its header: the same
/// classes the kernel assigns.
pub fn class_of(reply: &[u8]) -> u8 {
    if reply.len() < 12 {
        return class::ERROR;
    }
    let rcode = reply[3] & 0x0f;
    let authoritative = reply[2] & 0x04 != 0;
    let answers = u16::from_be_bytes([reply[6], reply[7]]);
    let authority = u16::from_be_bytes([reply[8], reply[9]]);
    match rcode {
        0 if answers > 0 => class::POSITIVE,
        0 if authoritative => class::NODATA,
        0 if authority > 0 => class::REFERRAL,
        3 => class::NXDOMAIN,
        _ => class::ERROR,
    }
}

/// The slipped form of `reply`: its header with TC=1 and the question
/// only, so the client retries over TCP.
pub fn slipped(reply: &[u8]) -> Option<Vec<u8>> {
    let qdcount = u16::from_be_bytes([*reply.get(4)?, *reply.get(5)?]);
    let mut end = 12;
    if qdcount == 1 {
        while *reply.get(end)? != 0 {
            end += 1 + *reply.get(end)? as usize;
        }
        end += 1 + 4;
    }
    let mut out = reply.get(..end)?.to_vec();
    out[2] |= 0x02;
    out[6..12].fill(0);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(rcode: u8, aa: bool, an: u16, ns: u16) -> Vec<u8> {
        let mut r = vec![0x12, 0x34, 0x80 | if aa { 4 } else { 0 }, rcode, 0, 1];
        r.extend_from_slice(&an.to_be_bytes());
        r.extend_from_slice(&ns.to_be_bytes());
        r.extend_from_slice(&[0, 1]);
        r.extend_from_slice(b"\x03www\x07example\x00\x00\x01\x00\x01");
        r.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
        r
    }

    #[test]
    fn replies_are_classed_by_their_header() {
        assert_eq!(class_of(&reply(0, true, 1, 0)), class::POSITIVE);
        assert_eq!(class_of(&reply(0, true, 0, 1)), class::NODATA);
        assert_eq!(class_of(&reply(0, false, 0, 2)), class::REFERRAL);
        assert_eq!(class_of(&reply(3, true, 0, 1)), class::NXDOMAIN);
        assert_eq!(class_of(&reply(5, false, 0, 0)), class::ERROR);
    }

    #[test]
    fn a_slipped_reply_is_the_question_with_tc() {
        let s = slipped(&reply(0, true, 1, 0)).unwrap();
        assert_eq!(s.len(), 12 + 13 + 4);
        assert_eq!(s[2] & 0x02, 0x02, "TC");
        assert_eq!(&s[4..12], &[0, 1, 0, 0, 0, 0, 0, 0]);
    }

    /// A scripted sequence from several prefixes: a flood is limited to
    /// its rate (slip 2: half slipped, half dropped), a neighbour in the
    /// same /24 shares its bucket, another /24 and a cookie are not
    /// limited; `log_only` sends everything and counts the same.
    #[test]
    fn a_flood_is_limited_and_others_are_not() {
        for log_only in [false, true] {
            let l = Limiter::new(RrlConfig {
                enabled: true,
                log_only,
                table_size: 1024,
                ..RrlConfig::default()
            });
            let flood: IpAddr = "192.0.2.7".parse().unwrap();
            let neighbour: IpAddr = "192.0.2.99".parse().unwrap();
            let other: IpAddr = "198.51.100.7".parse().unwrap();
            let mut verdicts = Vec::new();
            for _ in 0..60 {
                verdicts.push(l.judge(flood, class::NXDOMAIN, false, 1000));
            }
            let sent = verdicts.iter().filter(|v| **v == Verdict::Send).count();
            let neighbour_verdict = l.judge(neighbour, class::NXDOMAIN, false, 1000);
            assert_eq!(l.judge(other, class::NXDOMAIN, false, 1000), Verdict::Send);
            assert_eq!(l.judge(flood, class::NXDOMAIN, true, 1000), Verdict::Send);
            let c = |a: &AtomicU64| a.load(Ordering::Relaxed);
            assert_eq!(c(&l.counts.exempt), 1);
            assert_eq!(c(&l.counts.limited), 41);
            assert_eq!(c(&l.counts.slipped), 20);
            assert_eq!(c(&l.counts.dropped), 21);
            if log_only {
                assert_eq!(sent, 60);
                assert_eq!(neighbour_verdict, Verdict::Send);
            } else {
                assert_eq!(sent, 20);
                assert_eq!(
                    neighbour_verdict,
                    Verdict::Drop,
                    "the 41st limited: dropped"
                );
                assert_eq!(verdicts[20], Verdict::Drop);
                assert_eq!(verdicts[21], Verdict::Slip);
            }
            // A second later the flood has its rate again.
            assert_eq!(l.judge(flood, class::NXDOMAIN, false, 2000), Verdict::Send);
        }
    }
}
