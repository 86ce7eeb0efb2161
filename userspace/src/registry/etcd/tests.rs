use super::*;

fn instance(id: &str, last: u8) -> Instance {
    let spec: super::super::InstanceSpec = serde_json::from_str(&format!(
        r#"{{"owner":"o","addresses":["10.0.0.{last}"],"services":["web"],"lease_secs":30}}"#
    ))
    .unwrap();
    match Registry::default().register(id, &spec, 0).unwrap() {
        Entry::Put { instance } => *instance,
        _ => unreachable!(),
    }
}

#[test]
fn a_prefix_range_ends_after_its_last_key() {
    assert_eq!(prefix_end(b"/xdpdns/"), b"/xdpdns0");
    assert_eq!(prefix_end(b"a\xff"), b"b");
    assert_eq!(prefix_end(b"\xff\xff"), b"\0");
}

#[test]
fn the_difference_of_two_registries_turns_one_into_the_other() {
    let mut old = Registry::default();
    let mut new = Registry::default();
    for (id, last) in [("a", 1), ("b", 2), ("c", 3)] {
        old.instances.insert(Arc::new(instance(id, last)));
    }
    new.instances.insert(Arc::new(instance("a", 1)));
    new.instances.insert(Arc::new(instance("b", 9)));
    new.instances.insert(Arc::new(instance("d", 4)));
    old.owners.insert("o".into(), true);
    old.owners.insert("p".into(), true);
    new.owners.insert("o".into(), false);
    let mut got = old.clone();
    let entries = difference(&old, &new);
    for e in &entries {
        got.apply(e);
    }
    assert_eq!(got.instances, new.instances);
    assert_eq!(got.owners.get("o"), Some(&false));
    assert!(!got.owners.get("p").copied().unwrap_or(false));
    assert_eq!(entries.len(), 5, "b, d, c's removal, o and p: {entries:?}");
    assert!(difference(&new, &new).is_empty());
}
