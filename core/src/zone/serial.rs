//! SOA serial arithmetic (RFC 1982) and how xdpdns picks the next serial of
//! a zone it owns.

use serde::Deserialize;

/// `a` is newer than `b` in RFC 1982 sequence space (32-bit serials).
/// Serials exactly 2^31 apart are incomparable: neither is newer.
pub fn is_newer(a: u32, b: u32) -> bool {
    a != b && (a.wrapping_sub(b) as i32) > 0
}

/// How a zone xdpdns owns gets its next serial on a change.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SerialPolicy {
    /// The previous serial plus one.
    #[default]
    Increment,
    /// The current unix time in seconds, or the previous plus one when
    /// that is not newer (several changes within one second, or a clock
    /// behind the zone).
    Unixtime,
}

impl SerialPolicy {
    /// The serial after `old` at `now_secs`; always RFC 1982-newer than
    /// `old`.
    pub fn next(self, old: u32, now_secs: u32) -> u32 {
        let plus_one = old.wrapping_add(1);
        match self {
            SerialPolicy::Increment => plus_one,
            SerialPolicy::Unixtime if is_newer(now_secs, old) => now_secs,
            SerialPolicy::Unixtime => plus_one,
        }
    }
}

impl SerialPolicy {
    /// The serial of a changed zone xdpdns owns: the next after `old` by
    /// this policy, a new zone starting at the clock; either way never
    /// behind `floor` (the last serial published before a restart, plus
    /// one). The one rule for file zones and generated (registry) zones.
    pub fn next_owned(self, old: Option<u32>, floor: Option<u32>, now_secs: u32) -> u32 {
        let candidate = old.map_or(now_secs, |o| self.next(o, now_secs));
        match floor {
            Some(f) if is_newer(f, candidate) => f,
            _ => candidate,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1982_comparison_wraps() {
        assert!(is_newer(2, 1));
        assert!(!is_newer(1, 2));
        assert!(!is_newer(7, 7));
        assert!(is_newer(0, u32::MAX), "0 follows 2^32-1");
        assert!(is_newer(5, u32::MAX - 5));
        assert!(is_newer(0x7fff_ffff, 0));
        // Exactly half the space apart: undefined, so neither is newer.
        assert!(!is_newer(0x8000_0000, 0));
        assert!(!is_newer(0, 0x8000_0000));
    }

    #[test]
    fn next_serial_is_always_newer() {
        let now = 1_700_000_000;
        for old in [0, 1, now - 10, now, now + 10, u32::MAX, 0x8000_0000] {
            for policy in [SerialPolicy::Increment, SerialPolicy::Unixtime] {
                let next = policy.next(old, now);
                assert!(is_newer(next, old), "{policy:?} {old} -> {next}");
            }
        }
        assert_eq!(SerialPolicy::Increment.next(41, now), 42);
        assert_eq!(SerialPolicy::Unixtime.next(41, now), now);
        assert_eq!(
            SerialPolicy::Unixtime.next(now, now),
            now + 1,
            "same second"
        );
        assert_eq!(
            SerialPolicy::Unixtime.next(u32::MAX, 5),
            5,
            "wrapped clock is newer"
        );
    }

    #[test]
    fn owned_serials_start_at_the_clock_and_never_fall_behind_the_floor() {
        let now = 1_700_000_000;
        let p = SerialPolicy::Increment;
        assert_eq!(p.next_owned(None, None, now), now, "a new zone");
        assert_eq!(p.next_owned(Some(7), None, now), 8);
        assert_eq!(p.next_owned(None, Some(now + 50), now), now + 50);
        assert_eq!(p.next_owned(Some(7), Some(now), now), now, "floor ahead");
        assert_eq!(p.next_owned(Some(now + 9), Some(now), now), now + 10);
    }
}
