//! A secondary zone's SOA timers (RFC 1034 §4.3.5) as a pure state
//! machine: told the outcome of each refresh attempt and the time (unix
//! seconds), it says when to check again and when the zone expires
//! (answers SERVFAIL) or is fresh again. The refresh task in `secondary`
//! drives it; the tests run it on a virtual clock.

use std::time::Duration;

use hickory_proto::rr::rdata::SOA;

/// What the SOA timers say after a refresh attempt (RFC 1034 §4.3.5).
#[derive(Debug, PartialEq, Eq)]
pub struct Schedule {
    pub next_check: Duration,
    pub expired: bool,
}

/// `since_ok` is the time since the last successful check (None: never).
pub fn schedule(soa: Option<&SOA>, ok: bool, since_ok: Option<Duration>) -> Schedule {
    let secs = |v: i32| Duration::from_secs(v.max(1) as u64);
    let Some(soa) = soa else {
        // Nothing to serve yet: keep trying every few seconds.
        return Schedule {
            next_check: Duration::from_secs(5),
            expired: false,
        };
    };
    let (refresh, retry, expire) = (secs(soa.refresh), secs(soa.retry), secs(soa.expire));
    let expired = since_ok.is_none_or(|s| s >= expire) && !ok;
    let next_check = if ok { refresh } else { retry };
    Schedule {
        next_check,
        expired,
    }
}

/// What the driver does after a refresh attempt.
#[derive(Debug, PartialEq, Eq)]
pub struct Step {
    /// When to check the primary again.
    pub check_in: Duration,
    /// `Some(expired)` when the zone's expiry changes now.
    pub expiry: Option<bool>,
}

/// The timers of one secondary zone.
#[derive(Debug)]
pub struct Timers {
    /// Unix seconds of the last successful refresh.
    last_ok: Option<u64>,
    expired: bool,
}

impl Timers {
    /// Timers for a copy last refreshed at `last_ok` (from disk, or never),
    /// already `expired` or not.
    pub fn new(last_ok: Option<u64>, expired: bool) -> Timers {
        Timers { last_ok, expired }
    }

    /// After a refresh attempt at `now` that succeeded or not; `soa` is the
    /// served copy's SOA and `has_copy` whether there is one to expire.
    /// A zone expires only when its last good refresh is older than its
    /// expire timer, and comes back only after a successful refresh.
    pub fn refreshed(&mut self, ok: bool, soa: Option<&SOA>, has_copy: bool, now: u64) -> Step {
        if ok {
            self.last_ok = Some(now);
        }
        let since = self
            .last_ok
            .map(|t| Duration::from_secs(now.saturating_sub(t)));
        let plan = schedule(soa, ok, since);
        let changes = has_copy && plan.expired != self.expired && (plan.expired || ok);
        if changes {
            self.expired = plan.expired;
        }
        Step {
            check_in: plan.next_check,
            expiry: changes.then_some(plan.expired),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::Name;

    fn soa(refresh: i32, retry: i32, expire: i32) -> SOA {
        let n = Name::from_ascii("ns.example.").unwrap();
        SOA::new(n.clone(), n, 1, refresh, retry, expire, 60)
    }

    /// Drives the timers over `secs` of virtual time with the primary
    /// answering when `up(t)`; returns (time, expired) at every change.
    fn run(
        timers: &mut Timers,
        soa: &SOA,
        secs: u64,
        up: impl Fn(u64) -> bool,
    ) -> Vec<(u64, bool)> {
        let mut changes = Vec::new();
        let mut t = 0;
        while t <= secs {
            let step = timers.refreshed(up(t), Some(soa), true, t);
            if let Some(e) = step.expiry {
                changes.push((t, e));
            }
            t += step.check_in.as_secs();
        }
        changes
    }

    #[test]
    fn a_copy_expires_after_expire_without_a_good_refresh_and_comes_back_after_one() {
        // refresh 60 s, retry 10 s, expire 100 s; the primary is down from
        // 30 s to 300 s.
        let s = soa(60, 10, 100);
        let mut timers = Timers::new(None, false);
        let changes = run(&mut timers, &s, 1000, |t| !(30..300).contains(&t));
        // Last good refresh at 0 s; checks at 60, 70, ... find it down;
        // the first check at or past 100 s expires it; the first check
        // after 300 s succeeds and it is fresh again.
        assert_eq!(changes, [(100, true), (300, false)]);
    }

    #[test]
    fn checks_follow_refresh_while_up_and_retry_while_down() {
        let s = soa(60, 10, 100);
        let mut timers = Timers::new(Some(0), false);
        assert_eq!(
            timers.refreshed(true, Some(&s), true, 0).check_in,
            Duration::from_secs(60)
        );
        let down = timers.refreshed(false, Some(&s), true, 60);
        assert_eq!(
            down,
            Step {
                check_in: Duration::from_secs(10),
                expiry: None
            }
        );
    }

    #[test]
    fn a_restored_copy_older_than_expire_is_expired_until_a_refresh_succeeds() {
        let s = soa(60, 10, 100);
        // Restored expired (its last good refresh was long ago).
        let mut timers = Timers::new(Some(0), true);
        let step = timers.refreshed(false, Some(&s), true, 5_000);
        assert_eq!(step.expiry, None, "still expired: no change");
        let step = timers.refreshed(true, Some(&s), true, 5_010);
        assert_eq!(step.expiry, Some(false));
    }

    #[test]
    fn nothing_to_expire_without_a_copy() {
        let s = soa(60, 10, 100);
        let mut timers = Timers::new(None, false);
        let step = timers.refreshed(false, Some(&s), false, 1_000);
        assert_eq!(step.expiry, None);
        assert_eq!(
            timers.refreshed(false, None, false, 1_000).check_in,
            Duration::from_secs(5)
        );
    }
}
