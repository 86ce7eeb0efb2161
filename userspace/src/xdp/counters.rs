//! What the kernel counts: answered and passed packets, answers per zone,
//! and the kernel memory of the answer tables.

use std::os::fd::{AsFd, AsRawFd};

use aya::maps::IterableMap;
use xdpdns_common::{counter, PassReason};

use super::blocks::Class;
use super::error::XdpError;
use super::program::FastPath;

/// Answered and passed packets, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub answered_a: u64,
    pub answered_aaaa: u64,
    /// Answers to queries of every other type.
    pub answered_other: u64,
    /// Of those, answers from a signed variant (DO=1, signed zone).
    pub answered_signed: u64,
    pub passed: [u64; PassReason::COUNT],
    /// Rate limiting: limited, slipped, dropped, exempt by cookie.
    pub rrl: [u64; 4],
    /// Negative answers to A, AAAA and every other type.
    pub nxdomain: [u64; 3],
    pub nodata: [u64; 3],
    /// Referrals to A, AAAA and every other type.
    pub referrals: [u64; 3],
    /// dnstap samples written to the ring buffer, and lost (it was full).
    pub tap_sampled: u64,
    pub tap_lost: u64,
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
            "answered_a={} answered_aaaa={} answered_other={} answered_signed={} nxdomain={} nodata={} \
             referrals={}",
            self.answered_a,
            self.answered_aaaa,
            self.answered_other,
            self.answered_signed,
            self.nxdomain.iter().sum::<u64>(),
            self.nodata.iter().sum::<u64>(),
            self.referrals.iter().sum::<u64>()
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

impl FastPath {
    /// Kernel memory of the answer tables as the kernel accounts it
    /// (`memlock` in the maps' fdinfo: bucket arrays plus every element),
    /// by map name.
    pub fn table_memory(&self) -> Vec<(&'static str, u64)> {
        let fds = [
            ("TINY_SLOTS", self.slots.map().fd().as_fd().as_raw_fd()),
            ("TINY_NAMES", self.tiny.map().fd().as_fd().as_raw_fd()),
            ("SHORT_NAMES", self.short.map().fd().as_fd().as_raw_fd()),
            ("LONG_NAMES", self.long.map().fd().as_fd().as_raw_fd()),
            (
                "OVERLAY_TINY",
                self.overlay_tiny.map().fd().as_fd().as_raw_fd(),
            ),
            (
                "OVERLAY_SHORT",
                self.overlay_short.map().fd().as_fd().as_raw_fd(),
            ),
            (
                "OVERLAY_LONG",
                self.overlay_long.map().fd().as_fd().as_raw_fd(),
            ),
            (
                "BLOCKS",
                self.block_maps.map(Class::Large).fd().as_fd().as_raw_fd(),
            ),
            (
                "SMALL_BLOCKS",
                self.block_maps.map(Class::Small).fd().as_fd().as_raw_fd(),
            ),
            (
                "MINI_BLOCKS",
                self.block_maps.map(Class::Mini).fd().as_fd().as_raw_fd(),
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
            answered_other: sum(counter::ANSWERED_OTHER)?,
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
        c.nxdomain[2] = sum(counter::ANSWERED_NEGATIVE_OTHER)?;
        c.nodata[2] = sum(counter::ANSWERED_NEGATIVE_OTHER + 1)?;
        for (i, v) in c.referrals.iter_mut().enumerate() {
            *v = sum(counter::REFERRALS + i as u32)?;
        }
        c.tap_sampled = sum(counter::TAP_SAMPLED)?;
        c.tap_lost = sum(counter::TAP_LOST)?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counters_line_names_every_pass_reason_and_sums_negatives() {
        let mut c = Counters {
            answered_a: 5,
            nxdomain: [1, 2, 0],
            rrl: [4, 3, 2, 1],
            ..Counters::default()
        };
        c.passed[PassReason::ALL[0] as usize] = 9;
        let line = c.to_string();
        assert!(line.starts_with(
            "answered_a=5 answered_aaaa=0 answered_other=0 answered_signed=0 nxdomain=3 nodata=0 \
             referrals=0"
        ));
        assert!(line.contains(&format!(" pass_{}=9", PassReason::ALL[0].label())));
        for r in PassReason::ALL {
            assert!(line.contains(&format!(" pass_{}=", r.label())));
        }
        assert!(line.ends_with("rrl_limited=4 rrl_slipped=3 rrl_dropped=2 rrl_exempt=1"));
        assert_eq!(c.passed(PassReason::ALL[0]), 9);
    }
}
