use super::*;

const T: Timings = Timings {
    zsk_lifetime: 1000,
    ksk_lifetime: 5000,
    propagation: 10,
    dnskey_ttl: 100,
    max_ttl: 300,
    ds_ttl: 200,
    check_interval: 30,
    algorithm: 0,
};

fn key(tag: u16, role: KeyRole) -> TimedKey {
    TimedKey {
        tag,
        role,
        state: KeyState::Active,
        since: 0,
        submitted: role.signs_keys(),
        ds_seen: Some(0),
        algorithm: 0,
    }
}

fn state(keys: &[TimedKey], tag: u16) -> KeyState {
    keys.iter().find(|k| k.tag == tag).unwrap().state
}

#[test]
fn a_zsk_is_pre_published_then_swapped_then_removed() {
    let mut keys = vec![key(1, KeyRole::Ksk), key(2, KeyRole::Zsk)];
    let s = step(&mut keys, &T, None, 0);
    assert_eq!((s.create, s.changed, s.wake_at), (None, false, 1000));
    let s = step(&mut keys, &T, None, 1000);
    assert_eq!(s.create, Some(KeyRole::Zsk));
    add_successor(&mut keys, 3, KeyRole::Zsk, 1000);
    // Published, not signing, until every cache can know it.
    let s = step(&mut keys, &T, None, 1000);
    assert_eq!((s.create, s.changed, s.wake_at), (None, false, 1110));
    assert_eq!(signing_sets(&keys), (vec![1, 2], vec![3], vec![1]));
    let s = step(&mut keys, &T, None, 1110);
    assert!(s.changed);
    assert_eq!(
        (state(&keys, 2), state(&keys, 3)),
        (KeyState::Retired, KeyState::Active)
    );
    assert_eq!(signing_sets(&keys), (vec![1, 3], vec![2], vec![1]));
    // The old one stays published while its signatures may be cached.
    assert_eq!(s.wake_at, 1110 + 300 + 10);
    assert!(!step(&mut keys, &T, None, 1419).changed);
    let s = step(&mut keys, &T, None, 1420);
    assert!(s.changed && state(&keys, 2) == KeyState::Removed);
    assert_eq!(signing_sets(&keys), (vec![1, 3], vec![], vec![1]));
    // The next rollover is due a lifetime after the new key's activation.
    assert_eq!(s.wake_at, 2110);
}

#[test]
fn a_ksk_waits_for_its_ds_at_the_parent_and_the_old_ds_to_go() {
    let mut keys = vec![key(1, KeyRole::Ksk), key(2, KeyRole::Zsk)];
    let mut t = T;
    t.zsk_lifetime = 0;
    let s = step(&mut keys, &t, Some(&[1]), 5000);
    assert_eq!(s.create, Some(KeyRole::Ksk));
    add_successor(&mut keys, 3, KeyRole::Ksk, 5000);
    assert_eq!(step(&mut keys, &t, Some(&[1]), 5000).wake_at, 5110);
    // Known to caches: submitted (CDS for both), the parent asked.
    let s = step(&mut keys, &t, Some(&[1]), 5110);
    assert!(s.changed && s.wake_at == 5140);
    assert_eq!(signing_sets(&keys).2, vec![1, 3]);
    assert_eq!(state(&keys, 3), KeyState::Published);
    // The parent serves the new DS: it must outlive the DS TTL first.
    let s = step(&mut keys, &t, Some(&[1, 3]), 5200);
    assert!(!s.changed && s.wake_at == 5200 + 200 + 10);
    let s = step(&mut keys, &t, Some(&[1, 3]), 5410);
    assert!(s.changed);
    assert_eq!(
        (state(&keys, 1), state(&keys, 3)),
        (KeyState::Retired, KeyState::Active)
    );
    assert_eq!(signing_sets(&keys), (vec![2, 3], vec![1], vec![3]));
    // The old KSK goes only once the parent dropped its DS.
    assert!(!step(&mut keys, &t, Some(&[1, 3]), 5800).changed);
    assert_eq!(state(&keys, 1), KeyState::Retired);
    let s = step(&mut keys, &t, Some(&[3]), 5830);
    assert!(s.changed && state(&keys, 1) == KeyState::Removed);
}

#[test]
fn without_a_parent_a_submitted_key_waits_for_the_operator() {
    let mut keys = vec![key(1, KeyRole::Csk)];
    let mut t = T;
    t.ksk_lifetime = 100;
    assert_eq!(step(&mut keys, &t, None, 100).create, Some(KeyRole::Csk));
    add_successor(&mut keys, 2, KeyRole::Csk, 100);
    step(&mut keys, &t, None, 210);
    for now in [300, 5000, 90_000] {
        assert!(!step(&mut keys, &t, None, now).changed);
        assert_eq!(state(&keys, 2), KeyState::Published);
    }
    assert!(ds_confirmed(&mut keys, 2, 90_000));
    let s = step(&mut keys, &t, None, 90_000 + 210);
    assert!(s.changed);
    assert_eq!(
        (state(&keys, 1), state(&keys, 2)),
        (KeyState::Retired, KeyState::Active)
    );
    // A CSK signed everything: it stays until no cache holds its work.
    assert!(!step(&mut keys, &t, None, 90_210 + 309).changed);
    assert!(step(&mut keys, &t, None, 90_210 + 310).changed);
    assert_eq!(state(&keys, 1), KeyState::Removed);
}

/// An algorithm rollover of a KSK and a ZSK (13 to 15): the new keys sign
/// before they are published, are published and the new KSK submitted
/// once every cached RRset can have their signatures, the old keys leave
/// the DNSKEY RRset once the parent has served the new DS for its TTL,
/// and stop signing once no cached DNSKEY RRset lists them.
#[test]
fn an_algorithm_rollover_signs_first_publishes_then_withdraws() {
    let old = |tag, role| TimedKey {
        algorithm: 13,
        ..key(tag, role)
    };
    let mut keys = vec![old(1, KeyRole::Ksk), old(2, KeyRole::Zsk)];
    let t = Timings { algorithm: 15, ..T };
    let s = step(&mut keys, &t, None, 50);
    assert_eq!(s.introduce, vec![KeyRole::Ksk, KeyRole::Zsk]);
    assert_eq!(s.create, None, "no other rollover meanwhile");
    add_introduced(&mut keys, 3, KeyRole::Ksk, 15, 50);
    add_introduced(&mut keys, 4, KeyRole::Zsk, 15, 50);
    // Both algorithms sign; only the old keys are published.
    let s = step(&mut keys, &t, None, 50);
    assert!(s.introduce.is_empty() && !s.changed);
    assert_eq!(signing_sets(&keys), (vec![1, 2, 3, 4], vec![], vec![1]));
    assert_eq!(unpublished(&keys), vec![3, 4]);
    assert_eq!(s.wake_at, 50 + 300 + 10);
    let s = step(&mut keys, &t, None, 360);
    assert!(s.changed);
    assert_eq!(signing_sets(&keys), (vec![1, 2, 3, 4], vec![], vec![1, 3]));
    assert!(unpublished(&keys).is_empty());
    // The parent has not got the new DS yet: asked again.
    let s = step(&mut keys, &t, Some(&[1]), 400);
    assert!(!s.changed && s.wake_at == 430);
    let s = step(&mut keys, &t, Some(&[1, 3]), 430);
    assert!(!s.changed && s.wake_at == 430 + 200 + 10);
    let s = step(&mut keys, &t, Some(&[1, 3]), 640);
    assert!(s.changed);
    assert_eq!(
        (state(&keys, 1), state(&keys, 2)),
        (KeyState::Withdrawing, KeyState::Withdrawing)
    );
    // Still signing, out of the DNSKEY RRset, no longer submitted.
    assert_eq!(signing_sets(&keys), (vec![1, 2, 3, 4], vec![], vec![3]));
    assert_eq!(unpublished(&keys), vec![1, 2]);
    assert_eq!(s.wake_at, 640 + 110);
    let s = step(&mut keys, &t, Some(&[3]), 750);
    assert!(s.changed);
    assert_eq!(signing_sets(&keys), (vec![3, 4], vec![], vec![3]));
    // Over: the usual lifetimes apply to the new keys.
    let s = step(&mut keys, &t, Some(&[3]), 751);
    assert!(s.introduce.is_empty() && !s.changed);
    assert_eq!(s.wake_at, 360 + 1000, "the new ZSK's lifetime");
}

/// Keys whose algorithm is not known (saved before it was recorded) and
/// a policy without one start no algorithm rollover.
#[test]
fn no_algorithm_rollover_without_known_algorithms() {
    let mut keys = vec![key(1, KeyRole::Csk)];
    let t = Timings { algorithm: 15, ..T };
    assert!(step(&mut keys, &t, None, 10).introduce.is_empty());
    let mut keys = vec![TimedKey {
        algorithm: 13,
        ..key(1, KeyRole::Csk)
    }];
    assert!(step(&mut keys, &T, None, 10).introduce.is_empty());
}
