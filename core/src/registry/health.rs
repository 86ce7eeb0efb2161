//! Self-removal hysteresis (RFD 1, "Self-removal hysteresis"): at most
//! `max(floor(n/3), 1)` members of a service leave by their own `down`
//! report within any window (60 s), and the last listed member's report
//! takes effect only after a delay (600 s). Hard removals (lease expiry,
//! deregistration, membership or flag changes) never pass through here.

use std::collections::BTreeMap;

use compact_str::CompactString;
use serde::Deserialize;

use super::instance::Instance;
use super::model::Status;
use super::state::Registry;

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct HealthPolicy {
    pub window_ms: u64,
    pub last_member_delay_ms: u64,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        HealthPolicy {
            window_ms: 60_000,
            last_member_delay_ms: 600_000,
        }
    }
}

/// Self-removals allowed per window for a service of `n` members.
pub fn budget(n: usize) -> usize {
    (n / 3).max(1)
}

/// What the policy decides for one service at `now`: the members to
/// withdraw, and when to look again if some must wait.
struct Decision {
    withdraw: Vec<CompactString>,
    wake: Option<u64>,
}

fn decide(service: &str, members: &[&Instance], now: u64, p: &HealthPolicy) -> Decision {
    let recent: Vec<u64> = members
        .iter()
        .filter_map(|m| m.withdrawn.get(service))
        .filter(|&t| now < t + p.window_ms)
        .collect();
    let mut budget = budget(members.len()).saturating_sub(recent.len());
    let mut listed = members.iter().filter(|m| m.listed_in(service)).count();
    let mut candidates: Vec<&&Instance> = members
        .iter()
        .filter(|m| m.status == Status::Down && m.listed_in(service))
        .collect();
    candidates.sort_by(|a, b| (a.status_at, &a.id).cmp(&(b.status_at, &b.id)));
    let window_reopens = recent.iter().min().map(|t| t + p.window_ms);
    let mut out = Decision {
        withdraw: Vec::new(),
        wake: None,
    };
    for c in candidates {
        let due = if listed == 1 {
            c.status_at + p.last_member_delay_ms
        } else {
            now
        };
        if now < due {
            out.wake = Some(due);
            break;
        }
        if budget == 0 {
            // When the oldest recent withdrawal leaves the window.
            out.wake = window_reopens.or(Some(now + p.window_ms));
            break;
        }
        out.withdraw.push(c.id.clone());
        budget -= 1;
        listed -= 1;
    }
    out
}

/// `(service, instance id)` pairs to withdraw at `now`, given the pending
/// services and their members.
pub fn withdrawals(
    pending: BTreeMap<String, Vec<&Instance>>,
    now: u64,
    p: &HealthPolicy,
) -> Vec<(String, CompactString)> {
    pending
        .into_iter()
        .flat_map(|(service, members)| {
            decide(&service, &members, now, p)
                .withdraw
                .into_iter()
                .map(move |id| (service.clone(), id))
        })
        .collect()
}

/// Instances reported `down` that hysteresis still keeps in some
/// service's answers (each will be withdrawn when the policy allows).
pub fn held_down(reg: &Registry) -> usize {
    reg.instances
        .values()
        .filter(|i| i.status == Status::Down && !i.reg.disabled)
        .filter(|i| i.service_keys().iter().any(|k| i.listed_in(k)))
        .count()
}

/// When the policy next has something to do for the pending services.
pub fn next_wake(
    pending: BTreeMap<String, Vec<&Instance>>,
    now: u64,
    p: &HealthPolicy,
) -> Option<u64> {
    pending
        .iter()
        .filter_map(|(service, members)| {
            let d = decide(service, members, now, p);
            if d.withdraw.is_empty() {
                d.wake
            } else {
                Some(now)
            }
        })
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::instance::cns_key;
    use crate::registry::model::InstanceSpec;

    const S: u64 = 1000;

    /// A service of `n` members, all up, with day-long leases.
    fn service(n: usize) -> Registry {
        let mut r = Registry::default();
        for i in 0..n {
            let spec: InstanceSpec = serde_json::from_str(&format!(
                r#"{{"owner":"o","addresses":["10.0.0.{}"],"services":["web"],"lease_secs":86400}}"#,
                i + 1
            ))
            .unwrap();
            let e = r.register(&format!("i{i}"), &spec, 0).unwrap();
            r.apply(&e);
        }
        r
    }

    fn listed(r: &Registry) -> usize {
        let key = cns_key("o", "web");
        r.instances.values().filter(|i| i.listed_in(&key)).count()
    }

    /// Every member reports down at t=0; step time one second at a time
    /// for 15 minutes and record (second, listed count) at each change.
    fn all_down_timeline(n: usize) -> Vec<(u64, usize)> {
        let p = HealthPolicy::default();
        let mut r = service(n);
        for i in 0..n {
            let e = r.set_status(&format!("i{i}"), Status::Down, 0).unwrap();
            r.apply(&e);
        }
        let mut out = vec![(0, listed(&r))];
        for t in 0..=900 {
            for e in r.tick(t * S, &p) {
                r.apply(&e);
            }
            if listed(&r) != out.last().unwrap().1 {
                out.push((t, listed(&r)));
            }
        }
        out
    }

    #[test]
    fn budget_is_a_third_at_least_one() {
        assert_eq!([1, 2, 3, 5, 6, 7, 9].map(budget), [1, 1, 1, 1, 2, 2, 3]);
    }

    #[test]
    fn one_member_leaves_after_the_last_member_delay() {
        assert_eq!(all_down_timeline(1), [(0, 1), (600, 0)]);
    }

    #[test]
    fn two_members_one_now_the_last_after_600s() {
        assert_eq!(all_down_timeline(2), [(0, 2), (0, 1), (600, 0)]);
    }

    #[test]
    fn three_members_one_per_window_then_the_delay() {
        assert_eq!(all_down_timeline(3), [(0, 3), (0, 2), (60, 1), (600, 0)]);
    }

    #[test]
    fn seven_members_two_per_window() {
        assert_eq!(
            all_down_timeline(7),
            [(0, 7), (0, 5), (60, 3), (120, 1), (600, 0)]
        );
    }

    #[test]
    fn up_again_cancels_and_returns_at_once() {
        let p = HealthPolicy::default();
        let mut r = service(3);
        for id in ["i0", "i1"] {
            let e = r.set_status(id, Status::Down, 0).unwrap();
            r.apply(&e);
        }
        for e in r.tick(0, &p) {
            r.apply(&e);
        }
        assert_eq!(listed(&r), 2, "one withdrawn, one waiting for the window");
        assert_eq!(r.next_deadline(0, &p), Some(60 * S));
        // Both report up again: both listed immediately, nothing pending.
        for id in ["i0", "i1"] {
            let e = r.set_status(id, Status::Up, 10 * S).unwrap();
            r.apply(&e);
        }
        assert_eq!(listed(&r), 3);
        assert!(r.tick(60 * S, &p).is_empty());
        assert_eq!(r.next_deadline(60 * S, &p), Some(86_400 * S));
    }

    #[test]
    fn hard_removals_bypass_hysteresis() {
        let p = HealthPolicy::default();
        let mut r = service(1);
        let e = r.set_status("i0", Status::Down, 0).unwrap();
        r.apply(&e);
        assert!(r.tick(S, &p).is_empty(), "the last member waits");
        let e = r.deregister("i0").unwrap();
        r.apply(&e);
        assert!(r.instances.is_empty(), "deregistration is immediate");
    }
}
