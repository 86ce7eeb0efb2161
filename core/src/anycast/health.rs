//! When to announce and when to withdraw the anycast addresses: `rise`
//! passing self-checks in a row announce, `fall` failing ones withdraw,
//! and a node that flaps is held down, the hold doubling with each flap
//! up to a cap. Pure: it is told the time (quinn's style) and says what
//! to do.

use std::time::{Duration, Instant};

/// The rules, from `[anycast]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    pub rise: u32,
    pub fall: u32,
    /// Hold-down after the second withdrawal in a row of flaps; doubled
    /// for each further one, up to `hold_max`.
    pub hold: Duration,
    pub hold_max: Duration,
    /// Announced this long without a withdrawal, the flap count restarts.
    pub flap_reset: Duration,
}

/// What the caller must do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Announce,
    Withdraw,
}

#[derive(Debug)]
pub struct Health {
    rules: Rules,
    announced: bool,
    /// Draining: withdrawn for good (SIGTERM), whatever the checks say.
    draining: bool,
    passes: u32,
    failures: u32,
    /// Withdrawals since the node was last stable.
    flaps: u32,
    announced_at: Option<Instant>,
    held_until: Option<Instant>,
}

impl Health {
    /// Starts withdrawn: the first announcement needs `rise` passes.
    pub fn new(rules: Rules) -> Self {
        Health {
            rules,
            announced: false,
            draining: false,
            passes: 0,
            failures: 0,
            flaps: 0,
            announced_at: None,
            held_until: None,
        }
    }

    pub fn is_announced(&self) -> bool {
        self.announced
    }

    /// The end of the current hold-down, if one is running at `now`.
    pub fn held_until(&self, now: Instant) -> Option<Instant> {
        self.held_until.filter(|&t| t > now)
    }

    /// Takes one self-check result.
    pub fn observe(&mut self, passed: bool, now: Instant) -> Option<Action> {
        if self.draining {
            return None;
        }
        if passed {
            self.passes = self.passes.saturating_add(1);
            self.failures = 0;
            let held = self.held_until(now).is_some();
            if !self.announced && self.passes >= self.rules.rise && !held {
                self.announced = true;
                self.announced_at = Some(now);
                return Some(Action::Announce);
            }
            return None;
        }
        self.failures = self.failures.saturating_add(1);
        self.passes = 0;
        if self.announced && self.failures >= self.rules.fall {
            return Some(self.withdraw(now));
        }
        None
    }

    /// Withdraws for good (graceful drain): no check announces again.
    pub fn drain(&mut self, now: Instant) -> Option<Action> {
        self.draining = true;
        match self.announced {
            true => Some(self.withdraw(now)),
            false => None,
        }
    }

    /// Ends a drain: `rise` passing checks announce again.
    pub fn resume(&mut self) {
        self.draining = false;
        self.passes = 0;
    }

    fn withdraw(&mut self, now: Instant) -> Action {
        let stable = self
            .announced_at
            .is_some_and(|t| now.duration_since(t) >= self.rules.flap_reset);
        self.flaps = if stable { 1 } else { self.flaps + 1 };
        self.announced = false;
        self.announced_at = None;
        // The first withdrawal is no flap yet: `rise` passes bring the
        // node back. From the second on, the hold doubles each time.
        if self.flaps >= 2 {
            let doublings = (self.flaps - 2).min(16);
            let hold = self
                .rules
                .hold
                .saturating_mul(1 << doublings)
                .min(self.rules.hold_max);
            self.held_until = Some(now + hold);
        }
        Action::Withdraw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn rules() -> Rules {
        Rules {
            rise: 3,
            fall: 2,
            hold: 10 * S,
            hold_max: 25 * S,
            flap_reset: 100 * S,
        }
    }

    /// Feeds `results` one per second from `*t`; the actions taken.
    fn run(h: &mut Health, t: &mut Instant, results: &[bool]) -> Vec<(u64, Action)> {
        let start = *t;
        let mut out = Vec::new();
        for &ok in results {
            if let Some(a) = h.observe(ok, *t) {
                out.push((t.duration_since(start).as_secs(), a));
            }
            *t += S;
        }
        out
    }

    #[test]
    fn rise_passes_announce_and_fall_failures_withdraw() {
        let mut h = Health::new(rules());
        let mut t = Instant::now();
        assert_eq!(
            run(&mut h, &mut t, &[true, true, true, true]),
            [(2, Action::Announce)],
            "the third pass"
        );
        assert_eq!(
            run(&mut h, &mut t, &[false, true, false, false, false]),
            [(3, Action::Withdraw)],
            "two failures in a row, not two in all"
        );
        // The first withdrawal holds nothing down: three passes return.
        assert_eq!(h.held_until(t), None);
        assert_eq!(
            run(&mut h, &mut t, &[true, true, true]),
            [(2, Action::Announce)]
        );
    }

    #[test]
    fn a_flapping_node_is_held_down_longer_each_time_up_to_the_cap() {
        let mut h = Health::new(rules());
        let mut t = Instant::now();
        let up = [true; 3];
        let down = [false; 2];
        run(&mut h, &mut t, &up);
        run(&mut h, &mut t, &down); // flap 1: no hold
        run(&mut h, &mut t, &up);
        assert!(h.is_announced());
        let withdrawn_at = t + S;
        run(&mut h, &mut t, &down); // flap 2: 10 s
        assert_eq!(h.held_until(t), Some(withdrawn_at + 10 * S));
        // Passing checks do not announce before the hold ends.
        let actions = run(&mut h, &mut t, &[true; 12]);
        assert_eq!(actions.len(), 1);
        assert!(actions[0].0 >= 8, "{actions:?}");
        let withdrawn_at = t + S;
        run(&mut h, &mut t, &down); // flap 3: 20 s
        assert_eq!(h.held_until(t), Some(withdrawn_at + 20 * S));
        run(&mut h, &mut t, &[true; 22]);
        assert!(h.is_announced());
        let withdrawn_at = t + S;
        run(&mut h, &mut t, &down); // flap 4: 40 s, capped at 25
        assert_eq!(h.held_until(t), Some(withdrawn_at + 25 * S));
    }

    #[test]
    fn a_stable_node_starts_counting_flaps_again() {
        let mut h = Health::new(rules());
        let mut t = Instant::now();
        run(&mut h, &mut t, &[true; 3]);
        run(&mut h, &mut t, &[false; 2]);
        run(&mut h, &mut t, &[true; 3]);
        // Announced for longer than flap_reset: this withdrawal is a
        // first one again, with no hold.
        t += 200 * S;
        run(&mut h, &mut t, &[false; 2]);
        assert_eq!(h.held_until(t), None);
    }

    #[test]
    fn a_drain_withdraws_for_good() {
        let mut h = Health::new(rules());
        let mut t = Instant::now();
        run(&mut h, &mut t, &[true; 3]);
        assert_eq!(h.drain(t), Some(Action::Withdraw));
        assert_eq!(run(&mut h, &mut t, &[true; 10]), []);
        assert!(!h.is_announced());
        h.resume();
        assert_eq!(
            run(&mut h, &mut t, &[true; 3]),
            [(2, Action::Announce)],
            "back after rise passes"
        );
    }
}
