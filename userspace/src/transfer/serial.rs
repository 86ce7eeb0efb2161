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

/// Unix time in seconds, as a serial-sized number.
pub fn now_secs() -> u32 {
    crate::clock::unix_secs() as u32
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
}
