use super::*;

const SERVICE: &str = r#"{"type":"service","service":{"type":"service",
    "service":{"srvce":"_redis","proto":"_tcp","port":6379,"ttl":60},"ttl":60}}"#;

fn host(addr: &str) -> String {
    format!(
        r#"{{"type":"redis_host","address":"{addr}","ttl":30,
            "redis_host":{{"address":"{addr}","ports":[6379]}}}}"#
    )
}

const AUTHCACHE: &str = "/us/joyent/emy-10/authcache";

fn member(n: u8) -> String {
    format!("{AUTHCACHE}/host-{n}")
}

fn mirrored(changes: &[Change]) -> Vec<(String, Option<Status>)> {
    changes
        .iter()
        .map(|c| match c {
            Change::Mirror { node, spec, .. } => (node.clone(), Some(spec.status)),
            Change::Unmirror { node, .. } => (node.clone(), None),
        })
        .collect()
}

#[test]
fn a_host_under_a_service_is_a_member_with_its_domain_and_label() {
    let mut t = MirrorTree::default();
    t.set(AUTHCACHE, SERVICE.as_bytes()).unwrap();
    t.set(&member(1), host("172.27.10.62").as_bytes()).unwrap();
    let changes = t.changes();
    assert_eq!(changes.len(), 1, "the service node itself is no instance");
    let Change::Mirror { id, node, spec } = &changes[0] else {
        panic!()
    };
    assert_eq!(
        (id.as_str(), node.as_str()),
        (instance_id(&member(1)).as_str(), member(1).as_str())
    );
    let b = spec.binder.as_ref().unwrap();
    assert_eq!(b.domain, "authcache.emy-10.joyent.us");
    assert_eq!(b.host.as_deref(), Some("host-1"));
    assert_eq!((b.ports.as_slice(), b.ttl), ([6379].as_slice(), Some(30)));
    assert_eq!(b.service.as_ref().unwrap().srvce, "_redis");
    spec.validate().expect("a valid registration");
    assert!(t.changes().is_empty(), "nothing changes twice");
}

#[test]
fn a_service_record_change_rewrites_its_members_only() {
    let mut t = MirrorTree::default();
    t.set(AUTHCACHE, SERVICE.as_bytes()).unwrap();
    t.set(&member(1), host("172.27.10.62").as_bytes()).unwrap();
    t.set(&member(2), host("172.27.10.67").as_bytes()).unwrap();
    t.set(
        "/us/joyent/emy-10/other/host-3",
        host("10.0.0.3").as_bytes(),
    )
    .unwrap();
    assert_eq!(t.changes().len(), 3);
    t.set(AUTHCACHE, SERVICE.replace("6379,", "6380,").as_bytes())
        .unwrap();
    let nodes: Vec<String> = mirrored(&t.changes()).into_iter().map(|c| c.0).collect();
    assert_eq!(nodes, vec![member(1), member(2)]);
    t.remove(AUTHCACHE);
    let changes = t.changes();
    assert_eq!(changes.len(), 2, "members stay hosts without the service");
    assert!(changes.iter().all(|c| matches!(c,
        Change::Mirror { spec, .. } if spec.binder.as_ref().unwrap().service.is_none())));
}

#[test]
fn bad_data_serves_nothing_and_touches_nothing_else() {
    let mut t = MirrorTree::default();
    t.set(&member(1), host("10.0.0.1").as_bytes()).unwrap();
    t.set(&member(2), host("10.0.0.2").as_bytes()).unwrap();
    t.changes();
    assert!(t.set(&member(1), b"{not json").is_err());
    assert_eq!(mirrored(&t.changes()), vec![(member(1), None)]);
    assert_eq!(t.mirrored(), 1);
}

#[test]
fn a_full_read_after_a_session_loss_writes_only_the_difference() {
    let mut t = MirrorTree::default();
    t.set(AUTHCACHE, SERVICE.as_bytes()).unwrap();
    for n in 1..=3 {
        t.set(&member(n), host(&format!("10.0.0.{n}")).as_bytes())
            .unwrap();
    }
    t.changes();
    // While disconnected: host-2 expired, host-4 joined, host-3 moved.
    let read = vec![
        (AUTHCACHE.to_string(), SERVICE.as_bytes().to_vec()),
        (member(1), host("10.0.0.1").into_bytes()),
        (member(3), host("10.0.0.33").into_bytes()),
        (member(4), host("10.0.0.4").into_bytes()),
    ];
    assert!(t.replace_all(read).is_empty());
    assert_eq!(
        mirrored(&t.changes()),
        vec![
            (member(2), None),
            (member(3), Some(Status::Up)),
            (member(4), Some(Status::Up))
        ]
    );
}

#[test]
fn resuming_from_the_registry_rewrites_nothing_that_still_holds() {
    let mut t = MirrorTree::default();
    t.set(AUTHCACHE, SERVICE.as_bytes()).unwrap();
    t.set(&member(1), host("10.0.0.1").as_bytes()).unwrap();
    let mut reg = crate::registry::Registry::default();
    for c in t.changes() {
        let Change::Mirror { id, node, spec } = c else {
            panic!()
        };
        reg.apply(&reg.mirror(&id, &spec, &node, 0).unwrap());
    }
    let mut again = MirrorTree::resume(false, reg.instances.values().map(|i| &**i));
    let read = vec![
        (AUTHCACHE.to_string(), SERVICE.as_bytes().to_vec()),
        (member(1), host("10.0.0.1").into_bytes()),
    ];
    again.replace_all(read);
    assert!(again.changes().is_empty());
    again.replace_all(Vec::new());
    assert_eq!(mirrored(&again.changes()), vec![(member(1), None)]);
}

#[test]
fn with_hysteresis_vanished_members_go_down_and_leave_once_withdrawn() {
    let mut t = MirrorTree {
        hysteresis: true,
        ..Default::default()
    };
    t.set(AUTHCACHE, SERVICE.as_bytes()).unwrap();
    for n in 1..=3 {
        t.set(&member(n), host(&format!("10.0.0.{n}")).as_bytes())
            .unwrap();
    }
    t.set("/us/joyent/emy-10/alone", host("10.0.0.9").as_bytes())
        .unwrap();
    t.changes();
    for n in 1..=3 {
        t.remove(&member(n));
    }
    t.remove("/us/joyent/emy-10/alone");
    let changes = mirrored(&t.changes());
    assert_eq!(
        changes,
        vec![
            ("/us/joyent/emy-10/alone".to_string(), None),
            (member(1), Some(Status::Down)),
            (member(2), Some(Status::Down)),
            (member(3), Some(Status::Down)),
        ],
        "members are held down; a host outside any service leaves at once"
    );
    assert_eq!(t.leaving(), 3);
    let one = instance_id(&member(1));
    assert_eq!(
        mirrored(&t.release(|id| id == one)),
        vec![(member(1), None)]
    );
    // host-2 comes back before hysteresis let it go.
    t.set(&member(2), host("10.0.0.2").as_bytes()).unwrap();
    let back = mirrored(&t.release(|_| false));
    assert_eq!(back, vec![(member(2), Some(Status::Up))]);
    assert_eq!(t.leaving(), 1);
}
