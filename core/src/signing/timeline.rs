//! The key timeline (RFC 7583), as a pure state machine: time and what
//! the parent publishes go in; which keys to create, which state each key
//! is in, and when to look again come out. The `xdpdns` crate creates the
//! keys, keeps the states on disk, asks the parent for its DS records and
//! re-signs the zone when the states change.
//!
//! * ZSK, by pre-publication (§3.2.1): the successor is published, becomes
//!   active once every cache can know it (DNSKEY TTL + propagation delay);
//!   the predecessor, retired then, is removed once no cache can hold its
//!   signatures (the zone's largest TTL + propagation delay).
//! * KSK or CSK, by double-DS with the successor pre-published: the
//!   successor is published, then submitted (CDS/CDNSKEY list it beside
//!   the active key, RFC 7344); once the parent serves its DS and the DS
//!   TTL has passed, it becomes active and the predecessor retires; the
//!   predecessor is removed once the parent no longer serves its DS and no
//!   cache can hold what it signed. Without a parent to ask, a submitted
//!   key waits for the operator to confirm the DS (`ds_confirmed`).
//! * Algorithm, conservatively (RFC 6781 §4.1.4), when the policy's
//!   algorithm is not the active keys': keys of the new algorithm for
//!   every role sign the zone before they are published (every RRset
//!   carries both algorithms' signatures before a DNSKEY RRset lists the
//!   new one); once no cache can hold an RRset without them they are
//!   published and the new KSK or CSK submitted; once the parent serves
//!   its DS (for the DS TTL), the old keys leave the DNSKEY RRset but keep
//!   signing until no cache can hold a DNSKEY RRset that lists them, and
//!   go. No other rollover starts meanwhile.

use serde::{Deserialize, Serialize};

use super::keys::KeyRole;

/// Where a key is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyState {
    /// In the DNSKEY RRset, not signing yet.
    Published,
    /// In the DNSKEY RRset and signing.
    Active,
    /// In the DNSKEY RRset, signing no more.
    Retired,
    /// Signing, not yet in the DNSKEY RRset: a new algorithm's key.
    Introducing,
    /// Signing, no longer in the DNSKEY RRset: an old algorithm's key.
    Withdrawing,
    /// Gone from the zone.
    Removed,
}

/// One key's place on the timeline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimedKey {
    pub tag: u16,
    pub role: KeyRole,
    pub state: KeyState,
    /// When it entered `state` (unix seconds).
    pub since: u64,
    /// A KSK or CSK whose DS the parent is asked to publish (CDS).
    #[serde(default)]
    pub submitted: bool,
    /// When its DS was first seen at the parent (or confirmed).
    #[serde(default)]
    pub ds_seen: Option<u64>,
    /// Its DNSSEC algorithm number (0: not known; no algorithm rollover
    /// involves it).
    #[serde(default)]
    pub algorithm: u8,
}

/// The timing a rollover waits on, in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timings {
    /// A ZSK older than this is replaced (0: never).
    pub zsk_lifetime: u64,
    /// A KSK or CSK older than this is replaced (0: never).
    pub ksk_lifetime: u64,
    /// How long a change takes to reach every server of the zone.
    pub propagation: u64,
    pub dnskey_ttl: u64,
    /// The largest TTL in the zone (how long a signature may be cached).
    pub max_ttl: u64,
    /// The parent's DS TTL.
    pub ds_ttl: u64,
    /// How often the parent is asked while a DS change is pending.
    pub check_interval: u64,
    /// The policy's algorithm (0: any; keys of another start an
    /// algorithm rollover).
    pub algorithm: u8,
}

/// What the parent serves: the tags of its DS records for the zone, or
/// `None` when it was not asked (no parent configured) or did not answer.
pub type ParentDs<'a> = Option<&'a [u16]>;

/// What one step asks of the caller.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// Create a key of this role and add it with [`add_successor`].
    pub create: Option<KeyRole>,
    /// Create a key of each of these roles in the policy's algorithm and
    /// add it with [`add_introduced`]: an algorithm rollover starts.
    pub introduce: Vec<KeyRole>,
    /// Key states changed: sign the zone with [`signing_sets`] anew.
    pub changed: bool,
    /// When to step again (unix seconds).
    pub wake_at: u64,
}

fn rolls_keys(role: KeyRole) -> bool {
    role.signs_keys()
}

/// Adds a freshly created successor key, published from `now`.
pub fn add_successor(keys: &mut Vec<TimedKey>, tag: u16, role: KeyRole, now: u64) {
    let algorithm = keys
        .iter()
        .find(|k| k.state == KeyState::Active)
        .map_or(0, |k| k.algorithm);
    keys.push(TimedKey {
        tag,
        role,
        state: KeyState::Published,
        since: now,
        submitted: false,
        ds_seen: None,
        algorithm,
    });
}

/// Adds a freshly created key of a new `algorithm`, signing (not yet
/// published) from `now`.
pub fn add_introduced(keys: &mut Vec<TimedKey>, tag: u16, role: KeyRole, algorithm: u8, now: u64) {
    keys.push(TimedKey {
        tag,
        role,
        state: KeyState::Introducing,
        since: now,
        submitted: false,
        ds_seen: None,
        algorithm,
    });
}

/// The operator says the parent serves the DS of `tag` (no parent to ask).
pub fn ds_confirmed(keys: &mut [TimedKey], tag: u16, now: u64) -> bool {
    match keys.iter_mut().find(|k| k.tag == tag && k.submitted) {
        Some(k) if k.ds_seen.is_none() => {
            k.ds_seen = Some(now);
            true
        }
        _ => false,
    }
}

/// Moves every key along at `now`.
pub fn step(keys: &mut [TimedKey], t: &Timings, parent: ParentDs<'_>, now: u64) -> Step {
    let mut out = Step {
        wake_at: u64::MAX,
        ..Step::default()
    };
    let dnskey_known = t.dnskey_ttl + t.propagation;
    let sigs_gone = t.max_ttl.max(t.dnskey_ttl) + t.propagation;
    if algorithm_step(keys, t, parent, now, &mut out) {
        return out;
    }
    for family in [false, true] {
        // `false`: ZSKs; `true`: KSKs and CSKs.
        let mine = |k: &TimedKey| rolls_keys(k.role) == family;
        let lifetime = if family {
            t.ksk_lifetime
        } else {
            t.zsk_lifetime
        };
        // The successor, if one is on its way.
        if let Some(i) = keys
            .iter()
            .position(|k| mine(k) && k.state == KeyState::Published)
        {
            let ready = keys[i].since + dnskey_known;
            if now < ready {
                wake(ready, now, &mut out);
            } else if !family {
                activate(keys, i, now, &mine);
                out.changed = true;
            } else {
                if !keys[i].submitted {
                    keys[i].submitted = true;
                    out.changed = true;
                }
                if keys[i].ds_seen.is_none() && parent.is_some_and(|ds| ds.contains(&keys[i].tag)) {
                    keys[i].ds_seen = Some(now);
                }
                match keys[i].ds_seen {
                    Some(seen) if now >= seen + t.ds_ttl + t.propagation => {
                        activate(keys, i, now, &mine);
                        out.changed = true;
                    }
                    Some(seen) => wake(seen + t.ds_ttl + t.propagation, now, &mut out),
                    None => wake(now + t.check_interval, now, &mut out),
                }
            }
        } else if let Some(active) = keys
            .iter()
            .filter(|k| mine(k) && k.state == KeyState::Active)
            .max_by_key(|k| k.since)
        {
            // No successor yet: one is due at the end of the lifetime.
            if lifetime > 0 {
                let due = active.since + lifetime;
                if now >= due {
                    out.create = out.create.or(Some(active.role));
                } else {
                    wake(due, now, &mut out);
                }
            }
        }
        // Predecessors leave once nothing can still need them.
        for k in keys
            .iter_mut()
            .filter(|k| mine(k) && k.state == KeyState::Retired)
        {
            let gone_at = k.since
                + if family {
                    dnskey_known.max(sigs_gone)
                } else {
                    sigs_gone
                };
            // A KSK's DS must be gone from the parent first (when asked).
            let ds_gone = !family || parent.is_none_or(|ds| !ds.contains(&k.tag));
            if now >= gone_at && ds_gone {
                k.state = KeyState::Removed;
                k.since = now;
                out.changed = true;
            } else if now < gone_at {
                wake(gone_at, now, &mut out);
            } else {
                wake(now + t.check_interval, now, &mut out);
            }
        }
    }
    out
}

fn wake(at: u64, now: u64, out: &mut Step) {
    out.wake_at = out.wake_at.min(at.max(now + 1));
}

/// The algorithm rollover's part of [`step`]: starts one when the active
/// keys' algorithm is not the policy's, moves one along; true while one
/// is under way (no other rollover runs then).
fn algorithm_step(
    keys: &mut [TimedKey],
    t: &Timings,
    parent: ParentDs<'_>,
    now: u64,
    out: &mut Step,
) -> bool {
    let dnskey_known = t.dnskey_ttl + t.propagation;
    let sigs_known = t.max_ttl.max(t.dnskey_ttl) + t.propagation;
    let old = |k: &TimedKey| k.algorithm != t.algorithm && k.state != KeyState::Removed;
    let under_way = keys
        .iter()
        .any(|k| matches!(k.state, KeyState::Introducing | KeyState::Withdrawing))
        || (keys
            .iter()
            .any(|k| k.state == KeyState::Active && k.algorithm == t.algorithm)
            && keys.iter().any(|k| k.state == KeyState::Active && old(k)));
    if t.algorithm == 0
        || keys
            .iter()
            .any(|k| k.algorithm == 0 && k.state != KeyState::Removed)
    {
        return false;
    }
    if !under_way {
        let active: Vec<&TimedKey> = keys
            .iter()
            .filter(|k| k.state == KeyState::Active)
            .collect();
        if active.is_empty() || !active.iter().all(|k| old(k)) {
            return false;
        }
        for k in active {
            if !out.introduce.contains(&k.role) {
                out.introduce.push(k.role);
            }
        }
        wake(now, now, out);
        return true;
    }
    // 1. The new keys have signed long enough: publish them, and submit
    // the new KSK or CSK.
    let mut introducing = false;
    for k in keys.iter_mut().filter(|k| k.state == KeyState::Introducing) {
        let ready = k.since + sigs_known;
        if now >= ready {
            k.state = KeyState::Active;
            k.since = now;
            k.submitted = k.role.signs_keys();
            out.changed = true;
        } else {
            introducing = true;
            wake(ready, now, out);
        }
    }
    // 2. Every cache can know the new keys and the parent serves the new
    // DS (for its TTL): the old keys leave the DNSKEY RRset.
    let old_published = keys.iter().any(|k| {
        old(k)
            && matches!(
                k.state,
                KeyState::Active | KeyState::Published | KeyState::Retired
            )
    });
    if !introducing && old_published {
        let mut ready = 0u64;
        let mut waiting_ds = false;
        for k in keys
            .iter_mut()
            .filter(|k| k.state == KeyState::Active && k.algorithm == t.algorithm)
        {
            ready = ready.max(k.since + dnskey_known);
            if !k.role.signs_keys() {
                continue;
            }
            if k.ds_seen.is_none() && parent.is_some_and(|ds| ds.contains(&k.tag)) {
                k.ds_seen = Some(now);
            }
            match k.ds_seen {
                Some(seen) => ready = ready.max(seen + t.ds_ttl + t.propagation),
                None => waiting_ds = true,
            }
        }
        if waiting_ds {
            wake(now + t.check_interval, now, out);
        } else if now >= ready {
            for k in keys.iter_mut().filter(|k| {
                old(k)
                    && matches!(
                        k.state,
                        KeyState::Active | KeyState::Published | KeyState::Retired
                    )
            }) {
                k.state = KeyState::Withdrawing;
                k.since = now;
                k.submitted = false;
                out.changed = true;
            }
        } else {
            wake(ready, now, out);
        }
    }
    // 3. No cache can hold a DNSKEY RRset that lists the old keys: they
    // stop signing.
    for k in keys.iter_mut().filter(|k| k.state == KeyState::Withdrawing) {
        let gone_at = k.since + dnskey_known;
        if now >= gone_at {
            k.state = KeyState::Removed;
            k.since = now;
            out.changed = true;
        } else {
            wake(gone_at, now, out);
        }
    }
    true
}

/// Makes key `i` the active one of its family and retires the others.
fn activate(keys: &mut [TimedKey], i: usize, now: u64, mine: &dyn Fn(&TimedKey) -> bool) {
    for (j, k) in keys.iter_mut().enumerate() {
        if j == i {
            k.state = KeyState::Active;
            k.since = now;
        } else if mine(k) && k.state == KeyState::Active {
            k.state = KeyState::Retired;
            k.since = now;
            k.submitted = false;
        }
    }
}

/// Which keys sign, which are only published, and which the parent is
/// asked to hold a DS for (the active KSK or CSK, and a submitted
/// successor): tags in each. (Of the signing ones, [`unpublished`] are
/// kept out of the DNSKEY RRset.)
pub fn signing_sets(keys: &[TimedKey]) -> (Vec<u16>, Vec<u16>, Vec<u16>) {
    let signing = keys
        .iter()
        .filter(|k| {
            matches!(
                k.state,
                KeyState::Active | KeyState::Introducing | KeyState::Withdrawing
            )
        })
        .map(|k| k.tag)
        .collect();
    let published = keys
        .iter()
        .filter(|k| matches!(k.state, KeyState::Published | KeyState::Retired))
        .map(|k| k.tag)
        .collect();
    let submitted = keys
        .iter()
        .filter(|k| rolls_keys(k.role))
        .filter(|k| k.state == KeyState::Active || (k.state == KeyState::Published && k.submitted))
        .map(|k| k.tag)
        .collect();
    (signing, published, submitted)
}

/// The signing keys kept out of the DNSKEY RRset: an algorithm
/// rollover's keys before they are published and after they leave.
pub fn unpublished(keys: &[TimedKey]) -> Vec<u16> {
    keys.iter()
        .filter(|k| matches!(k.state, KeyState::Introducing | KeyState::Withdrawing))
        .map(|k| k.tag)
        .collect()
}

#[cfg(test)]
mod tests;
