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
