use super::step::add_one;
use super::*;
use crate::zone::FeedItem;
use hickory_proto::rr::rdata::{A, NS, SOA};
use std::str::FromStr;

fn name(s: &str) -> Name {
    Name::from_str(s).unwrap()
}

fn a(owner: &str, last: u8) -> Record {
    Record::from_rdata(name(owner), 60, RData::A(A::new(192, 0, 2, last)))
}

fn zone(serial: u32, extra: &[Record]) -> Zone {
    let origin = name("example.com.");
    let soa = SOA::new(
        name("ns1.example.com."),
        name("h.example.com."),
        serial,
        3600,
        600,
        86400,
        60,
    );
    let mut z = Zone::new(&origin);
    z.insert(Record::from_rdata(origin.clone(), 3600, RData::SOA(soa)))
        .unwrap();
    z.insert(Record::from_rdata(
        origin,
        3600,
        RData::NS(NS(name("ns1.example.com."))),
    ))
    .unwrap();
    z.insert(a("ns1.example.com.", 53)).unwrap();
    for r in extra {
        z.insert(r.clone()).unwrap();
    }
    z
}

#[test]
fn readers_keep_their_snapshot_while_a_new_one_is_published() {
    let store = ZoneStore::new();
    store.replace_zones(vec![zone(1, &[a("www.example.com.", 1)])], &[], 0);
    let held = store.snapshot();
    let diff = store
        .update(
            &name("example.com."),
            &[Change::Add(a("www.example.com.", 2))],
            0,
        )
        .unwrap();
    assert_eq!((diff.old_serial, diff.new_serial), (Some(1), Some(2)));
    let key = LowerName::from(name("www.example.com."));
    let count = |s: &Snapshot| {
        s.find_zone(&key)
            .unwrap()
            .node(&key)
            .unwrap()
            .rrset(RecordType::A)
            .unwrap()
            .len()
    };
    assert_eq!(count(&held), 1, "old snapshot unchanged");
    assert_eq!(count(&store.snapshot()), 2);
    assert_eq!(store.snapshot().version(), held.version() + 1);
}

#[test]
fn update_diff_is_condensed_and_soa_framed() {
    let store = ZoneStore::new();
    store.replace_zones(vec![zone(41, &[a("old.example.com.", 9)])], &[], 0);
    let diff = store
        .update(
            &name("example.com."),
            &[
                Change::Add(a("tmp.example.com.", 1)),
                Change::Remove(a("tmp.example.com.", 1)),
                Change::Remove(a("old.example.com.", 9)),
                Change::Add(a("new.example.com.", 7)),
                Change::Remove(a("absent.example.com.", 3)),
            ],
            0,
        )
        .unwrap();
    assert_eq!(diff.removed.len(), 2, "{diff:?}");
    assert_eq!(diff.added.len(), 2, "{diff:?}");
    assert_eq!(diff.removed[0].record_type(), RecordType::SOA);
    assert_eq!(diff.added[0].record_type(), RecordType::SOA);
    assert_eq!(diff.removed[1], a("old.example.com.", 9));
    assert_eq!(diff.added[1], a("new.example.com.", 7));
    assert_eq!(store.snapshot().zones().next().unwrap().serial(), Some(42));
}

#[test]
fn a_ttl_change_replaces_the_whole_rrset_in_the_diff() {
    let store = ZoneStore::new();
    store.replace_zones(
        vec![zone(
            1,
            &[a("www.example.com.", 1), a("www.example.com.", 2)],
        )],
        &[],
        0,
    );
    let mut changed = a("www.example.com.", 1);
    changed.ttl = 120;
    let diff = store
        .update(&name("example.com."), &[Change::Add(changed)], 0)
        .unwrap();
    assert_eq!(diff.new_serial, Some(2), "a TTL change is a change");
    let ttls = |v: &[Record]| v.iter().skip(1).map(|r| r.ttl).collect::<Vec<_>>();
    assert_eq!(ttls(&diff.removed), [60, 60]);
    assert_eq!(ttls(&diff.added), [120, 120]);
}

#[test]
fn the_rotation_policy_follows_every_zone_into_the_store() {
    let store = ZoneStore::new();
    let (_, mut feed) = store.subscribe();
    let rotating = |s: &ZoneStore| s.snapshot().zones().next().unwrap().rotates();
    store.set_rotation(RotationPolicy::new(&[name("example.com.")]));
    store.replace_zones(vec![zone(1, &[])], &[], 0);
    assert!(rotating(&store), "a zone committed after the policy");
    store
        .update(
            &name("example.com."),
            &[Change::Add(a("x.example.com.", 1))],
            0,
        )
        .unwrap();
    store.replace_zones(vec![zone(5, &[])], &[], 0);
    assert!(rotating(&store), "kept through updates and replacements");
    let version = store.snapshot().version();
    store.set_rotation(RotationPolicy::new(&[name("example.com.")]));
    assert_eq!(store.snapshot().version(), version, "no change, no commit");
    let uid = |s: &ZoneStore| s.snapshot().zones().next().unwrap().uid();
    let contents = uid(&store);
    store.set_rotation(RotationPolicy::default());
    assert!(!rotating(&store));
    assert_eq!(
        uid(&store),
        contents,
        "policy, not contents: the image stays current"
    );
    let mut last = None;
    while let Some(FeedItem::Commit(c)) = feed.try_next() {
        last = Some(c);
    }
    let events = last.unwrap().events.clone();
    assert_eq!(events, [ZoneEvent::Rotation(name("example.com."))]);
}

#[test]
fn serial_wraps_per_rfc1982() {
    let store = ZoneStore::new();
    store.replace_zones(vec![zone(u32::MAX, &[])], &[], 0);
    let diff = store
        .update(
            &name("example.com."),
            &[Change::Add(a("x.example.com.", 1))],
            0,
        )
        .unwrap();
    assert_eq!(diff.new_serial, Some(0));
}

#[test]
fn no_op_update_publishes_nothing() {
    let store = ZoneStore::new();
    store.replace_zones(vec![zone(5, &[])], &[], 0);
    let v = store.snapshot().version();
    let diff = store
        .update(
            &name("example.com."),
            &[Change::Add(a("ns1.example.com.", 53))],
            0,
        )
        .unwrap();
    assert!(diff.is_empty());
    assert_eq!(store.snapshot().version(), v);
    assert_eq!(
        store.update(&name("nope.example."), &[], 0).unwrap_err(),
        StoreError::UnknownZone(name("nope.example."))
    );
}

#[test]
fn replacing_a_zone_yields_its_record_diff() {
    let store = ZoneStore::new();
    assert_eq!(
        store
            .replace_zones(vec![zone(1, &[a("a.example.com.", 1)])], &[], 0)
            .len(),
        1
    );
    let diffs = store.replace_zones(vec![zone(2, &[a("b.example.com.", 2)])], &[], 0);
    assert_eq!(diffs.len(), 1);
    let d = &diffs[0];
    assert_eq!((d.old_serial, d.new_serial), (Some(1), Some(2)));
    assert_eq!(d.removed.len(), 2);
    assert_eq!(d.added.len(), 2);
    assert!(d.removed.contains(&a("a.example.com.", 1)));
    assert!(d.added.contains(&a("b.example.com.", 2)));
    // Same content again: nothing changes, nothing is published.
    let v = store.snapshot().version();
    assert!(store
        .replace_zones(vec![zone(2, &[a("b.example.com.", 2)])], &[], 0)
        .is_empty());
    assert_eq!(store.snapshot().version(), v);
    let gone = store.replace_zones(vec![], &[name("example.com.")], 0);
    assert_eq!(gone[0].new_serial, None);
    assert!(store
        .snapshot()
        .find_zone(&LowerName::from(name("a.example.com.")))
        .is_none());
}

#[test]
fn find_zone_picks_the_most_specific() {
    let store = ZoneStore::new();
    let mut child = zone(1, &[]);
    child = Zone::from_records(
        &name("sub.example.com."),
        child.records().filter_map(|mut r| {
            // Re-home the apex records under the child origin.
            if r.name == name("example.com.") {
                r.name = name("sub.example.com.");
                Some(r)
            } else {
                None
            }
        }),
    )
    .unwrap();
    store.replace_zones(vec![zone(1, &[]), child], &[], 0);
    let snap = store.snapshot();
    let z = snap
        .find_zone(&LowerName::from(name("x.SUB.example.com.")))
        .unwrap();
    assert_eq!(z.origin(), &name("sub.example.com."));
    let z = snap
        .find_zone(&LowerName::from(name("x.example.com.")))
        .unwrap();
    assert_eq!(z.origin(), &name("example.com."));
    assert!(snap
        .find_zone(&LowerName::from(name("example.org.")))
        .is_none());
    // The allocation-free walk for a few zones agrees, in any case.
    for (q, want) in [
        ("x.SUB.example.com.", Some("sub.example.com.")),
        ("SUB.Example.COM.", Some("sub.example.com.")),
        ("x.example.com.", Some("example.com.")),
        ("xsub.example.com.", Some("example.com.")),
        ("example.org.", None),
        ("com.", None),
    ] {
        let got = snap.zone_of(&name(q)).map(|z| z.origin().clone());
        assert_eq!(got, want.map(name), "{q}");
    }
}

/// A zone at `origin` with the apex records of [`zone`].
fn zone_at(origin: &str) -> Zone {
    let origin = name(origin);
    let base = zone(1, &[]);
    let apex: Vec<_> = base
        .records()
        .filter_map(|mut r| {
            (r.name == name("example.com.")).then(|| {
                r.name = origin.clone();
                r
            })
        })
        .collect();
    Zone::from_records(&origin, apex).unwrap()
}

#[test]
fn find_zone_among_many_zones_agrees_with_the_few_zones_walk() {
    let few = ZoneStore::new();
    few.replace_zones(
        vec![zone_at("example.com."), zone_at("sub.example.com.")],
        &[],
        0,
    );
    let many = ZoneStore::new();
    let mut zones = vec![zone_at("example.com."), zone_at("sub.example.com.")];
    zones.extend((0..10).map(|i| zone_at(&format!("z{i}.example.net."))));
    many.replace_zones(zones, &[], 0);
    let (few, many) = (few.snapshot(), many.snapshot());
    for q in [
        "x.SUB.example.com.",
        "sub.example.com.",
        "x.example.com.",
        "xsub.example.com.",
        "example.org.",
        "com.",
    ] {
        let key = LowerName::from(name(q));
        let origin = |s: &Snapshot| s.find_zone(&key).map(|z| z.origin().clone());
        assert_eq!(origin(&few), origin(&many), "{q}");
    }
    let key = LowerName::from(name("a.z7.example.net."));
    assert_eq!(
        many.find_zone(&key).map(|z| z.origin().clone()),
        Some(name("z7.example.net."))
    );
}

fn add(store: &ZoneStore, last: u8) {
    let change = [Change::Add(a(&format!("n{last}.example.com."), last))];
    store.update(&name("example.com."), &change, 0).unwrap();
}

#[test]
fn every_source_commits_through_the_feed_in_order() {
    let store = ZoneStore::new();
    let (start, mut feed) = store.subscribe();
    assert_eq!(start.version(), 0);
    store.replace_zones(vec![zone(1, &[])], &[], 0);
    add(&store, 1);
    assert!(store.set_expired(&name("example.com."), true));
    assert!(!store.set_expired(&name("example.com."), true), "no change");
    assert!(store.set_expired(&name("example.com."), false));
    let mut versions = Vec::new();
    let mut events = Vec::new();
    while let Some(FeedItem::Commit(c)) = feed.try_next() {
        assert_eq!(c.snapshot.version(), c.version);
        versions.push(c.version);
        events.extend(c.events.iter().map(|e| match e {
            ZoneEvent::Published(d) => format!("published {:?}", d.new_serial),
            ZoneEvent::Expired(z) => format!("expired {z}"),
            ZoneEvent::Fresh(z) => format!("fresh {z}"),
            ZoneEvent::Rotation(z) => format!("rotation {z}"),
        }));
    }
    assert_eq!(versions, [1, 2, 3, 4]);
    assert_eq!(
        events,
        [
            "published Some(1)",
            "published Some(2)",
            "expired example.com.",
            "fresh example.com."
        ]
    );
}

#[test]
fn a_subscriber_that_falls_behind_resyncs_and_then_sees_only_newer_commits() {
    let store = ZoneStore::new();
    store.replace_zones(vec![zone(1, &[])], &[], 0);
    let (_, mut slow) = store.subscribe();
    // Publishing never waits for a subscriber that does not read.
    let n = crate::zone::feed::FEED_CAPACITY + 10;
    for i in 0..n {
        add(&store, (i % 250) as u8);
        store.set_expired(&name("example.com."), i % 2 == 0);
    }
    let current = store.snapshot().version();
    match slow.try_next() {
        Some(FeedItem::Resync(s)) => assert_eq!(s.version(), current),
        other => panic!("expected a resync, got {other:?}"),
    }
    assert!(
        slow.try_next().is_none(),
        "the backlog is covered by the resync"
    );
    add(&store, 251);
    match slow.try_next() {
        Some(FeedItem::Commit(c)) => assert_eq!(c.version, current + 1),
        other => panic!("expected the next commit, got {other:?}"),
    }
}

#[test]
fn a_subscriber_on_another_thread_sees_commits_without_holding_up_writers() {
    let store = Arc::new(ZoneStore::new());
    store.replace_zones(vec![zone(1, &[])], &[], 0);
    let (start, mut feed) = store.subscribe();
    let first = start.version();
    let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
    let reader = std::thread::spawn(move || {
        gate_rx.recv().unwrap(); // a slow subscriber: busy until told
        let mut seen = vec![first];
        while seen.len() < 51 {
            match feed.blocking_next() {
                Some(FeedItem::Commit(c)) => seen.push(c.version),
                other => panic!("unexpected {other:?}"),
            }
        }
        seen
    });
    for i in 0..50 {
        add(&store, i);
    }
    gate_tx.send(()).unwrap();
    let seen = reader.join().unwrap();
    let expected: Vec<u64> = (first..=first + 50).collect();
    assert_eq!(seen, expected);
}

#[test]
fn an_incremental_transfer_is_applied_whole_or_not_at_all() {
    let store = ZoneStore::new();
    store.replace_zones(vec![zone(10, &[a("www.example.com.", 1)])], &[], 0);
    let (_, mut feed) = store.subscribe();
    let origin = name("example.com.");
    // Diff 10 -> 12 is fine; 12 -> 13 carries a record out of zone.
    let bad = [
        (vec![Change::Add(a("x.example.com.", 5))], 12),
        (vec![Change::Add(a("www.example.org.", 1))], 13),
    ];
    assert!(matches!(
        store.apply_transferred(&origin, &bad),
        Err(StoreError::Zone(_))
    ));
    assert_eq!(store.snapshot().zones().next().unwrap().serial(), Some(10));
    let x = LowerName::from(name("x.example.com."));
    assert!(store.snapshot().zones().next().unwrap().node(&x).is_none());
    assert!(feed.try_next().is_none(), "nothing was committed");

    let good = [
        (vec![Change::Add(a("x.example.com.", 5))], 12),
        (vec![Change::Remove(a("www.example.com.", 1))], 13),
    ];
    let diffs = store.apply_transferred(&origin, &good).unwrap();
    let serials: Vec<_> = diffs.iter().map(|d| (d.old_serial, d.new_serial)).collect();
    assert_eq!(serials, [(Some(10), Some(12)), (Some(12), Some(13))]);
    match feed.try_next() {
        Some(FeedItem::Commit(c)) => assert_eq!(c.diffs().count(), 2, "one commit, both diffs"),
        other => panic!("expected one commit, got {other:?}"),
    }
    assert!(feed.try_next().is_none());
}

/// A publish adds a name's records one after the other; those go in
/// with one lookup of the name, with the zone and the diff they would
/// have made one by one: records already there, a set whose TTL they
/// change and two TTLs for one set in a run included.
#[test]
fn additions_at_one_name_go_in_together_as_they_would_one_by_one() {
    use hickory_proto::rr::rdata::TXT;
    let txt = |owner: &str, text: &str, ttl: u32| {
        Record::from_rdata(name(owner), ttl, RData::TXT(TXT::new(vec![text.into()])))
    };
    let with_ttl = |mut r: Record, ttl: u32| {
        r.ttl = ttl;
        r
    };
    let base = zone(1, &[a("www.example.com.", 1), a("ttl.example.com.", 1)]);
    let changes: Vec<Change> = [
        a("www.example.com.", 2),
        a("www.example.com.", 1),
        txt("www.example.com.", "id", 60),
        a("new.example.com.", 5),
        txt("new.example.com.", "id", 60),
        with_ttl(a("ttl.example.com.", 2), 120),
        txt("ttl.example.com.", "x", 60),
        a("mixed.example.com.", 1),
        with_ttl(a("mixed.example.com.", 2), 30),
        a("one.example.com.", 9),
    ]
    .into_iter()
    .map(Change::Add)
    .collect();
    let mut together = base.clone();
    let diff = apply_step(
        &mut together,
        &changes,
        Err(0),
        SerialPolicy::default(),
        None,
        Additions::Checked,
    )
    .unwrap();
    let mut one_by_one = base.clone();
    let mut expected = ZoneDiff::default();
    for c in &changes {
        let Change::Add(r) = c else { unreachable!() };
        add_one(&mut one_by_one, r, false, &mut expected).unwrap();
    }
    // (The diff's first records are the SOA's.)
    assert_eq!(diff.added[1..], expected.added[..]);
    assert_eq!(diff.removed[1..], expected.removed[..]);
    assert_eq!(diff.added.len(), 11, "{diff:?}");
    let records = |z: &Zone| {
        let mut v: Vec<String> = z
            .records()
            .filter(|r| r.record_type() != RecordType::SOA)
            .map(|r| r.to_string())
            .collect();
        v.sort();
        v
    };
    assert_eq!(records(&together), records(&one_by_one));
    assert_eq!(together.record_count(), one_by_one.record_count());
}

/// A counted source's additions (new to their sets, but where a set's
/// TTL changes and the source adds the whole set again) are not looked
/// for, and make the zone and the diff that checked additions make.
#[test]
fn counted_additions_make_what_checked_ones_make() {
    let with_ttl = |mut r: Record, ttl: u32| {
        r.ttl = ttl;
        r
    };
    let base = zone(
        1,
        &[
            a("svc.example.com.", 1),
            a("svc.example.com.", 2),
            a("retimed.example.com.", 1),
            a("retimed.example.com.", 2),
            a("retimed.example.com.", 3),
        ],
    );
    // As the registry's table makes them: a member added to a service,
    // a new name, and a set whose least TTL moved (one record gone, the
    // rest added again at the new TTL, one after the other).
    let changes: Vec<Change> = vec![
        Change::Add(a("svc.example.com.", 3)),
        Change::Add(a("new.example.com.", 9)),
        Change::Add(with_ttl(a("new.example.com.", 8), 3600)),
        Change::Remove(a("retimed.example.com.", 3)),
        Change::Add(with_ttl(a("retimed.example.com.", 1), 30)),
        Change::Add(with_ttl(a("retimed.example.com.", 2), 30)),
    ];
    let apply = |additions| {
        let store = ZoneStore::with_zones(vec![base.clone()]);
        let diff = store
            .update_generated(&name("example.com."), &changes, None, 0, additions)
            .unwrap();
        let zone = store
            .snapshot()
            .zone(&LowerName::new(&name("example.com.")))
            .unwrap()
            .clone();
        let mut records: Vec<String> = zone.records().map(|r| r.to_string()).collect();
        records.sort();
        (records, diff.added, diff.removed, zone.record_count())
    };
    let counted = apply(Additions::Counted);
    assert_eq!(counted, apply(Additions::Checked));
    let retimed: Vec<&String> = counted
        .0
        .iter()
        .filter(|r| r.starts_with("retimed"))
        .collect();
    assert_eq!(retimed.len(), 2, "{retimed:?}");
    assert!(retimed.iter().all(|r| r.contains(" 30 ")), "{retimed:?}");
}
