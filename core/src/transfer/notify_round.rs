//! One NOTIFY round for one (zone, secondary, serial), as a pure state
//! machine in the manner of quinn-proto: it is told the time and what came
//! back, and answers what to send next and when to wake it. NOTIFY is
//! retried with doubling back-off (RFC 1996 §3.6); then the secondary's
//! SOA is polled until it serves the serial or the poll time runs out.
//! The tokio driver in `notify` does the I/O; the tests here run on a
//! virtual clock.

use std::time::{Duration, Instant};

use crate::zone::serial::is_newer;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotifySettings {
    pub retries: u32,
    pub timeout: Duration,
    pub poll_interval: Duration,
    pub poll_timeout: Duration,
}

/// What the driver does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Send NOTIFY and wait at most this long for the answer.
    Notify(Duration),
    /// Query the secondary's SOA serial, waiting at most this long.
    Poll(Duration),
    /// Nothing to do before this time.
    Wait(Instant),
    /// The round is over.
    Done(Outcome),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The secondary serves the serial (or a newer one).
    InSync,
    /// It did not within the poll time; the next change starts over.
    GaveUp,
}

#[derive(Clone, Copy, Debug)]
enum Phase {
    Notify { attempt: u32, timeout: Duration },
    Poll { deadline: Instant },
    Done(Outcome),
}

#[derive(Debug)]
pub struct Round {
    serial: u32,
    settings: NotifySettings,
    phase: Phase,
    /// Set while waiting: the next step happens at or after this.
    wake: Option<Instant>,
    /// A request is out; `next` is not to be called until its result.
    in_flight: bool,
    /// Every NOTIFY of the round failed: when a round for a newer serial
    /// may send its first, and with what timeout (the back-off goes on).
    retry: Option<(Instant, Duration)>,
}

/// The longest a secondary that stays down waits between NOTIFYs.
const BACKOFF_MAX: Duration = Duration::from_secs(60);

impl Round {
    pub fn new(serial: u32, settings: NotifySettings) -> Round {
        Round {
            serial,
            settings,
            phase: Phase::Notify {
                attempt: 1,
                timeout: settings.timeout,
            },
            wake: None,
            in_flight: false,
            retry: None,
        }
    }

    /// What to do at `now`.
    pub fn next(&mut self, now: Instant) -> Step {
        debug_assert!(!self.in_flight, "a result is outstanding");
        if let Some(at) = self.wake.filter(|at| *at > now) {
            return Step::Wait(at);
        }
        self.wake = None;
        match self.phase {
            Phase::Notify { timeout, .. } => {
                self.in_flight = true;
                Step::Notify(timeout)
            }
            Phase::Poll { .. } => {
                self.in_flight = true;
                Step::Poll(self.settings.timeout)
            }
            Phase::Done(o) => Step::Done(o),
        }
    }

    /// The NOTIFY sent by the last step was acknowledged, or not.
    pub fn notify_result(&mut self, acknowledged: bool, now: Instant) {
        self.in_flight = false;
        let Phase::Notify { attempt, timeout } = self.phase else {
            return;
        };
        if !acknowledged && attempt < self.settings.retries.max(1) {
            // Back off even when the failure was immediate (port
            // unreachable while the secondary restarts).
            self.wake = Some(now + timeout);
            self.phase = Phase::Notify {
                attempt: attempt + 1,
                timeout: timeout * 2,
            };
            return;
        }
        if !acknowledged {
            self.retry = Some((now + timeout, (timeout * 2).min(BACKOFF_MAX)));
        }
        self.phase = Phase::Poll {
            deadline: now + self.settings.poll_timeout,
        };
    }

    /// The poll sent by the last step saw `seen` (`None`: it failed).
    pub fn poll_result(&mut self, seen: Option<u32>, now: Instant) {
        self.in_flight = false;
        let Phase::Poll { deadline } = self.phase else {
            return;
        };
        if seen.is_some_and(|s| !is_newer(self.serial, s)) {
            self.phase = Phase::Done(Outcome::InSync);
        } else if now >= deadline {
            self.phase = Phase::Done(Outcome::GaveUp);
        } else {
            self.wake = Some(now + self.settings.poll_interval);
        }
    }

    /// The round for a newer `serial`, replacing this one between two
    /// requests. While NOTIFY is failing it goes on with this round's
    /// back-off: a secondary that is down gets one NOTIFY per back-off,
    /// not one per change at the rate the zone changes (hundreds a second
    /// while a registry fills). Otherwise it starts over.
    pub fn renewed(&self, serial: u32) -> Round {
        debug_assert!(!self.in_flight, "a result is outstanding");
        let mut next = Round::new(serial, self.settings);
        match (self.phase, self.retry) {
            // Between two failed attempts: the next one as planned.
            (Phase::Notify { attempt, timeout }, _) if attempt > 1 => {
                next.phase = Phase::Notify { attempt, timeout };
                next.wake = self.wake;
            }
            // Every attempt failed: one more, a back-off later.
            (_, Some((at, timeout))) => {
                next.phase = Phase::Notify {
                    attempt: self.settings.retries.max(1),
                    timeout,
                };
                next.wake = Some(at);
            }
            _ => {}
        }
        next
    }

    /// The NOTIFY attempt the next `Notify` step is (1-based).
    pub fn attempt(&self) -> Option<u32> {
        match self.phase {
            Phase::Notify { attempt, .. } => Some(attempt),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn settings() -> NotifySettings {
        NotifySettings {
            retries: 3,
            timeout: 1000 * MS,
            poll_interval: 500 * MS,
            poll_timeout: 300_000 * MS,
        }
    }

    /// Drives a round on a virtual clock: requests take no time; `notify`
    /// and `poll` answer each request; returns the steps with their times
    /// (ms since the start).
    fn drive(
        round: &mut Round,
        mut notify: impl FnMut(u32) -> bool,
        mut poll: impl FnMut(u32) -> Option<u32>,
    ) -> Vec<(u64, Step)> {
        let start = Instant::now();
        let mut now = start;
        let mut log = Vec::new();
        let (mut notifies, mut polls) = (0, 0);
        for _ in 0..10_000 {
            let step = round.next(now);
            let at = (now - start).as_millis() as u64;
            match step {
                Step::Wait(until) => {
                    now = until;
                    continue;
                }
                Step::Notify(_) => {
                    notifies += 1;
                    log.push((at, step));
                    round.notify_result(notify(notifies), now);
                }
                Step::Poll(_) => {
                    polls += 1;
                    log.push((at, step));
                    round.poll_result(poll(polls), now);
                }
                Step::Done(_) => {
                    log.push((at, step));
                    return log;
                }
            }
        }
        panic!("the round never ended");
    }

    #[test]
    fn an_acknowledged_notify_then_polls_until_the_secondary_serves_the_serial() {
        let mut r = Round::new(42, settings());
        let log = drive(&mut r, |_| true, |n| Some(if n < 3 { 41 } else { 42 }));
        assert_eq!(
            log,
            [
                (0, Step::Notify(1000 * MS)),
                (0, Step::Poll(1000 * MS)),
                (500, Step::Poll(1000 * MS)),
                (1000, Step::Poll(1000 * MS)),
                (1000, Step::Done(Outcome::InSync)),
            ]
        );
    }

    #[test]
    fn failed_notifies_back_off_doubling_then_polling_takes_over() {
        let mut r = Round::new(42, settings());
        let log = drive(&mut r, |_| false, |_| Some(42));
        assert_eq!(
            log,
            [
                (0, Step::Notify(1000 * MS)),
                (1000, Step::Notify(2000 * MS)),
                (3000, Step::Notify(4000 * MS)),
                (3000, Step::Poll(1000 * MS)),
                (3000, Step::Done(Outcome::InSync)),
            ]
        );
    }

    #[test]
    fn polling_gives_up_after_the_poll_timeout() {
        let mut s = settings();
        s.poll_timeout = 2000 * MS;
        let mut r = Round::new(42, s);
        let log = drive(&mut r, |n| n == 2, |_| None);
        let polls = log
            .iter()
            .filter(|(_, s)| matches!(s, Step::Poll(_)))
            .count();
        assert_eq!(polls, 5, "at 1000, 1500, 2000, 2500 and 3000 ms: {log:?}");
        assert_eq!(log.last(), Some(&(3000, Step::Done(Outcome::GaveUp))));
    }

    /// Changes at 500 a second to a zone whose secondary is down: the
    /// round renewed for each keeps its back-off, so NOTIFY goes out at
    /// 0, 1 and 3 s with the newest serial; once the secondary answers,
    /// a newer serial is sent at once.
    #[test]
    fn a_newer_serial_keeps_a_failing_rounds_back_off() {
        let start = Instant::now();
        let mut r = Round::new(1, settings());
        let mut sent = Vec::new();
        let mut serial = 1;
        for tick in 0..15_000u32 {
            let now = start + 2 * MS * tick;
            if tick > 0 {
                serial += 1;
                r = r.renewed(serial);
            }
            if let Step::Notify(_) = r.next(now) {
                sent.push(((now - start).as_millis() as u64, serial, r.attempt()));
                r.notify_result(false, now);
            }
        }
        assert_eq!(
            sent,
            [
                (0, 1, Some(1)),
                (1000, 501, Some(2)),
                (3000, 1501, Some(3)),
                // The retries spent, the back-off goes on.
                (7000, 3501, Some(3)),
                (15000, 7501, Some(3)),
            ],
            "one NOTIFY per back-off, each with the newest serial"
        );
        // The secondary answers at last: a newer serial is sent at once.
        let now = start + 31000 * MS;
        let mut r = r.renewed(serial + 1);
        assert_eq!(r.next(now), Step::Notify(32000 * MS));
        r.notify_result(true, now);
        let mut r = r.renewed(serial + 2);
        assert_eq!(
            (r.next(now), r.attempt()),
            (Step::Notify(1000 * MS), Some(1))
        );
    }

    #[test]
    fn a_newer_serial_on_the_secondary_counts_as_in_sync_and_serials_wrap() {
        let mut r = Round::new(u32::MAX, settings());
        let log = drive(&mut r, |_| true, |_| Some(3));
        assert_eq!(log.last(), Some(&(0, Step::Done(Outcome::InSync))));
    }
}
