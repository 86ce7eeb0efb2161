//! Wall-clock time as the protocols want it (unix seconds and
//! milliseconds); 0 if the clock is before 1970.

use std::time::{SystemTime, UNIX_EPOCH};

pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub fn unix_secs() -> u64 {
    unix_ms() / 1000
}

/// Milliseconds on the coarse monotonic clock (a few ms of resolution,
/// a quarter of the precise clock's cost): what response rate limiting
/// integrates over. Wraps after 49 days; the buckets take differences.
pub fn monotonic_ms() -> u32 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut t) };
    (t.tv_sec as u64 * 1000 + t.tv_nsec as u64 / 1_000_000) as u32
}

/// Now, as the request router takes it.
pub fn now() -> xdpdns_core::router::Now {
    xdpdns_core::router::Now {
        unix_secs: unix_secs(),
        monotonic_ms: monotonic_ms(),
    }
}
