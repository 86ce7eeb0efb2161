//! Rate-limited logging of per-packet events: a spoofed NOTIFY or a bad
//! TSIG per packet must not become a log line per packet. Each kind of
//! event gets at most `PER_SECOND` lines a second; what is held back is
//! counted and said on the next line of that kind. Pure: time passed in.

use std::collections::HashMap;
use std::sync::Mutex;

/// Lines per kind per second.
pub(super) const PER_SECOND: u32 = 5;

#[derive(Default)]
pub(super) struct LogLimit {
    kinds: Mutex<HashMap<&'static str, Window>>,
}

#[derive(Default)]
struct Window {
    second: u64,
    logged: u32,
    held_back: u64,
}

impl LogLimit {
    /// Whether a line of `kind` may be written at `now` (unix seconds):
    /// `Some(n)` with the lines held back since the last one, or `None`.
    pub(super) fn admit(&self, kind: &'static str, now: u64) -> Option<u64> {
        let mut kinds = self.kinds.lock().unwrap_or_else(|p| p.into_inner());
        let w = kinds.entry(kind).or_default();
        if w.second != now {
            w.second = now;
            w.logged = 0;
        }
        if w.logged >= PER_SECOND {
            w.held_back += 1;
            return None;
        }
        w.logged += 1;
        Some(std::mem::take(&mut w.held_back))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_logs_a_few_lines_a_second_and_counts_the_rest() {
        let limit = LogLimit::default();
        let mut lines = Vec::new();
        for t in 0..3u64 {
            for _ in 0..1000 {
                if let Some(held) = limit.admit("notify", 100 + t) {
                    lines.push((t, held));
                }
            }
        }
        assert_eq!(lines.len(), 3 * PER_SECOND as usize);
        // The first line of each later second reports the second before.
        assert_eq!(
            lines[PER_SECOND as usize],
            (1, 1000 - u64::from(PER_SECOND))
        );
        assert_eq!(limit.admit("tsig", 102), Some(0), "kinds are apart");
    }
}
