use super::*;
use crate::zone::load_zone_str;

fn catalog(origin: &str, body: &str) -> Zone {
    let text = format!(
        "$ORIGIN {origin}\n$TTL 0\n@ SOA invalid. invalid. 1 3600 600 86400 0\n@ NS invalid.\n{body}"
    );
    load_zone_str(&text, &name(origin), std::path::Path::new("catalog")).unwrap()
}

fn key(text: &str) -> LowerName {
    LowerName::new(&name(text))
}

fn member(zone: &str, catalog: &str, id: &str) -> (LowerName, Owned) {
    (
        key(zone),
        Owned {
            zone: name(zone).to_string(),
            catalog: name(catalog).to_string(),
            id: id.into(),
        },
    )
}

fn listing(origin: &str, body: &str) -> (LowerName, Option<Listing>) {
    (key(origin), Some(read(&catalog(origin, body)).unwrap()))
}

#[test]
fn reads_members_with_their_ids_and_coo() {
    let l = read(&catalog(
        "cat.test.",
        "version TXT \"2\"\n\
         a1.zones PTR one.example.\n\
         b2.zones PTR Two.Example.\n\
         coo.b2.zones PTR other.test.\n\
         group.a1.zones TXT \"front\"\n\
         c3.zones PTR three.example.\n\
         c3.zones PTR four.example.\n",
    ))
    .unwrap();
    assert_eq!(l.len(), 2, "{l:?}");
    assert_eq!(l[&key("one.example.")].id, "a1");
    assert_eq!(l[&key("one.example.")].coo, None);
    assert_eq!(l[&key("two.example.")].coo, Some(key("other.test.")));
    assert!(!l.contains_key(&key("three.example.")), "two PTRs: skipped");
}

#[test]
fn a_catalog_without_version_two_is_not_read() {
    assert!(matches!(
        read(&catalog("cat.test.", "a.zones PTR one.example.\n")),
        Err(CatalogError::NoVersion(_))
    ));
    assert_eq!(
        read(&catalog("cat.test.", "version TXT \"1\"\n")),
        Err(CatalogError::Version("1".into()))
    );
}

#[test]
fn members_are_added_removed_and_reset_when_their_id_changes() {
    let current: BTreeMap<_, _> = [
        member("kept.example.", "cat.test.", "k"),
        member("gone.example.", "cat.test.", "g"),
        member("renamed.example.", "cat.test.", "old"),
    ]
    .into();
    let catalogs: BTreeMap<_, _> = [listing(
        "cat.test.",
        "version TXT \"2\"\n\
         k.zones PTR kept.example.\n\
         new.zones PTR renamed.example.\n\
         n.zones PTR new.example.\n\
         s.zones PTR static.example.\n",
    )]
    .into();
    let (steps, ignored) = plan(&current, &catalogs, |z| *z == key("static.example."));
    assert_eq!(
        steps,
        vec![
            Step::Remove(name("gone.example.")),
            Step::Reset(member("renamed.example.", "cat.test.", "new").1),
            Step::Add(member("new.example.", "cat.test.", "n").1),
        ]
    );
    assert_eq!(ignored, vec![Ignored::Served(name("static.example."))]);
}

#[test]
fn an_unreadable_catalog_keeps_its_members_and_an_unfollowed_one_drops_them() {
    let current: BTreeMap<_, _> = [
        member("a.example.", "cat.test.", "a"),
        member("b.example.", "old.test.", "b"),
    ]
    .into();
    let catalogs: BTreeMap<_, _> = [(key("cat.test."), None)].into();
    let (steps, _) = plan(&current, &catalogs, |_| false);
    assert_eq!(steps, vec![Step::Remove(name("b.example."))]);
}

#[test]
fn a_member_moves_only_where_its_owner_points_it() {
    let current: BTreeMap<_, _> = [
        member("same.example.", "a.test.", "s"),
        member("other.example.", "a.test.", "o"),
        member("stays.example.", "a.test.", "t"),
    ]
    .into();
    let catalogs: BTreeMap<_, _> = [
        listing(
            "a.test.",
            "version TXT \"2\"\n\
             s.zones PTR same.example.\n\
             coo.s.zones PTR b.test.\n\
             o.zones PTR other.example.\n\
             coo.o.zones PTR b.test.\n\
             t.zones PTR stays.example.\n",
        ),
        listing(
            "b.test.",
            "version TXT \"2\"\n\
             s.zones PTR same.example.\n\
             o2.zones PTR other.example.\n\
             t.zones PTR stays.example.\n",
        ),
    ]
    .into();
    let (steps, ignored) = plan(&current, &catalogs, |_| false);
    assert_eq!(
        steps,
        vec![
            Step::Reset(member("other.example.", "b.test.", "o2").1),
            Step::Move(member("same.example.", "b.test.", "s").1),
        ]
    );
    assert_eq!(
        ignored,
        vec![Ignored::OwnedElsewhere {
            zone: name("stays.example."),
            owner: "a.test.".into()
        }]
    );
}

#[test]
fn a_zone_listed_by_two_catalogs_goes_to_the_first_and_to_the_next_once_dropped() {
    let catalogs: BTreeMap<_, _> = [
        listing("a.test.", "version TXT \"2\"\nx.zones PTR both.example.\n"),
        listing("b.test.", "version TXT \"2\"\ny.zones PTR both.example.\n"),
    ]
    .into();
    let (steps, _) = plan(&BTreeMap::new(), &catalogs, |_| false);
    assert_eq!(
        steps,
        vec![Step::Add(member("both.example.", "a.test.", "x").1)]
    );
    // Its owner drops it: the other catalog's entry becomes a new member.
    let current: BTreeMap<_, _> = [member("both.example.", "a.test.", "x")].into();
    let catalogs: BTreeMap<_, _> = [
        listing("a.test.", "version TXT \"2\"\n"),
        listing("b.test.", "version TXT \"2\"\ny.zones PTR both.example.\n"),
    ]
    .into();
    let (steps, _) = plan(&current, &catalogs, |_| false);
    assert_eq!(
        steps,
        vec![
            Step::Remove(name("both.example.")),
            Step::Add(member("both.example.", "b.test.", "y").1),
        ]
    );
}
