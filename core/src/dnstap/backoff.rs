//! How long a writer waits before its next connection attempt: doubling
//! from `min` to `max` after each failure, back to `min` once a
//! connection has worked.

use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Self {
        Backoff {
            min,
            max,
            next: min,
        }
    }

    /// A failure at `now`: when to try again.
    pub fn failed(&mut self, now: Instant) -> Instant {
        let wait = self.next;
        self.next = (self.next * 2).min(self.max);
        now + wait
    }

    /// A connection worked.
    pub fn reset(&mut self) {
        self.next = self.min;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_resets() {
        let t0 = Instant::now();
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(500));
        let waits: Vec<_> = (0..5).map(|_| b.failed(t0) - t0).collect();
        let ms = |m| Duration::from_millis(m);
        assert_eq!(waits, [ms(100), ms(200), ms(400), ms(500), ms(500)]);
        b.reset();
        assert_eq!(b.failed(t0) - t0, ms(100));
    }
}
