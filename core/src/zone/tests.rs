use super::*;
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{LowerName, Name, RData, Record, RecordType};
use std::str::FromStr;

fn name(s: &str) -> Name {
    Name::from_str(s).unwrap()
}

fn a(owner: &str, ip: [u8; 4]) -> Record {
    Record::from_rdata(
        name(owner),
        300,
        RData::A(A::new(ip[0], ip[1], ip[2], ip[3])),
    )
}

#[test]
fn empty_non_terminals_appear_and_disappear_with_their_descendants() {
    let mut z = Zone::new(&name("example.com."));
    z.insert(a("a.b.c.example.com.", [192, 0, 2, 1])).unwrap();
    let ent = LowerName::from(name("b.c.example.com."));
    assert!(z.node(&ent).unwrap().is_empty());
    assert!(z.node(&ent).unwrap().has_children());
    assert!(z.node(&LowerName::from(name("c.example.com."))).is_some());

    assert!(z.remove(&name("A.B.C.example.com."), &RData::A(A::new(192, 0, 2, 1))));
    assert!(
        z.node(&ent).is_none(),
        "ENT must go when its last descendant goes"
    );
    assert!(z.node(&LowerName::from(name("c.example.com."))).is_none());
    assert_eq!(z.node_count(), 1, "only the apex remains");
    assert_eq!(z.record_count(), 0);
}

#[test]
fn zone_cuts_are_counted_as_ns_rrsets_come_and_go() {
    let mut z = Zone::new(&name("example.com."));
    let ns = |owner: &str, target: &str| {
        Record::from_rdata(
            name(owner),
            3600,
            RData::NS(hickory_proto::rr::rdata::NS(name(target))),
        )
    };
    z.insert(ns("example.com.", "ns1.example.com.")).unwrap();
    assert!(!z.has_cuts(), "apex NS is not a cut");
    z.insert(ns("sub.example.com.", "ns1.sub.example.com."))
        .unwrap();
    z.insert(ns("sub.example.com.", "ns2.sub.example.com."))
        .unwrap();
    assert!(z.has_cuts());
    assert!(z.below_cut(&LowerName::new(&name("a.sub.example.com."))));
    z.remove(
        &name("sub.example.com."),
        &RData::NS(hickory_proto::rr::rdata::NS(name("ns1.sub.example.com."))),
    );
    assert!(z.has_cuts(), "one NS record left");
    z.remove(
        &name("sub.example.com."),
        &RData::NS(hickory_proto::rr::rdata::NS(name("ns2.sub.example.com."))),
    );
    assert!(!z.has_cuts());
    assert!(!z.below_cut(&LowerName::new(&name("a.sub.example.com."))));
}

#[test]
fn names_are_case_insensitive_and_duplicates_merge() {
    let mut z = Zone::new(&name("Example.COM."));
    assert!(z.insert(a("www.example.com.", [192, 0, 2, 1])).unwrap());
    assert!(!z.insert(a("WWW.Example.Com.", [192, 0, 2, 1])).unwrap());
    assert!(z.insert(a("WWW.Example.Com.", [192, 0, 2, 2])).unwrap());
    let node = z.node(&LowerName::from(name("wWw.eXample.com."))).unwrap();
    assert_eq!(node.rrset(RecordType::A).unwrap().len(), 2);
    assert_eq!(z.record_count(), 2);
    assert_eq!(z.origin().to_string(), "example.com.");
}

#[test]
fn out_of_zone_records_are_rejected() {
    let mut z = Zone::new(&name("example.com."));
    let err = z.insert(a("www.example.org.", [192, 0, 2, 1])).unwrap_err();
    assert!(matches!(err, ZoneError::OutOfZone { .. }));
}

#[test]
fn clones_share_structure_but_not_changes() {
    let mut z = Zone::new(&name("example.com."));
    z.insert(a("www.example.com.", [192, 0, 2, 1])).unwrap();
    let before = z.clone();
    z.insert(a("www.example.com.", [192, 0, 2, 2])).unwrap();
    let key = LowerName::from(name("www.example.com."));
    assert_eq!(
        before
            .node(&key)
            .unwrap()
            .rrset(RecordType::A)
            .unwrap()
            .len(),
        1
    );
    assert_eq!(z.node(&key).unwrap().rrset(RecordType::A).unwrap().len(), 2);
}

#[test]
fn nsec3_lookups_stay_in_their_chain_and_wrap() {
    let h = |b: u8| {
        data_encoding::BASE32HEX_NOPAD
            .encode(&[b; 20])
            .to_lowercase()
    };
    let text = format!(
        "$TTL 300\n\
         {} NSEC3 1 0 0 - {} A\n{} NSEC3 1 0 0 - {} A\n\
         {} NSEC3 1 0 5 aabb {} A\n",
        h(0x10),
        h(0x80),
        h(0x80),
        h(0x10),
        h(0x40),
        h(0x40)
    );
    let origin = name("example.com.");
    let mut z = Zone::new(&origin);
    for r in parse_zone_str(&text, &origin, std::path::Path::new("z")).unwrap() {
        z.insert(r.record).unwrap();
    }
    let a = nsec3_chain_key(0, &[]);
    let b = nsec3_chain_key(5, &[0xaa, 0xbb]);
    let owner = |b: u8| LowerName::from(name(&format!("{}.example.com.", h(b))));
    assert_eq!(
        z.nsec3_covering(&a, &[0x50; 20]),
        Some(&owner(0x10)),
        "not chain b's"
    );
    assert_eq!(
        z.nsec3_covering(&a, &[0x05; 20]),
        Some(&owner(0x80)),
        "wraps"
    );
    assert_eq!(z.nsec3_covering(&a, &[0x90; 20]), Some(&owner(0x80)));
    assert_eq!(z.nsec3_matching(&a, &[0x40; 20]), None);
    assert_eq!(z.nsec3_matching(&b, &[0x40; 20]), Some(&owner(0x40)));
    assert_eq!(z.nsec3_covering(&b, &[0x10; 20]), Some(&owner(0x40)));
    // NSEC3 owners are no names of the zone.
    assert!(z.node(&owner(0x10)).unwrap().is_nsec3_only());
    // Removing the record takes it out of the index.
    let rec = parse_zone_str(&text, &origin, std::path::Path::new("z")).unwrap();
    assert!(z.remove(&rec[0].record.name, &rec[0].record.data));
    assert_eq!(z.nsec3_covering(&a, &[0x50; 20]), Some(&owner(0x80)));
}

#[test]
fn a_set_added_whole_is_its_records_added_one_by_one() {
    use hickory_proto::rr::rdata::{NS, TXT};
    let origin = name("example.com.");
    let sets: Vec<(Name, RecordType, Vec<RData>)> = vec![
        (
            name("svc.a.example.com."),
            RecordType::A,
            (0..50u8).map(|i| RData::A(A::new(10, 0, 0, i))).collect(),
        ),
        (
            name("svc.a.example.com."),
            RecordType::TXT,
            vec![RData::TXT(TXT::new(vec!["id-1".into()]))],
        ),
        (
            name("deleg.example.com."),
            RecordType::NS,
            vec![RData::NS(NS(name("ns.elsewhere.")))],
        ),
        // A name that has the type already: merged.
        (
            name("www.example.com."),
            RecordType::A,
            vec![
                RData::A(A::new(192, 0, 2, 1)),
                RData::A(A::new(192, 0, 2, 2)),
            ],
        ),
    ];
    let mut one_by_one = Zone::new(&origin);
    let mut whole = Zone::new(&origin);
    for z in [&mut one_by_one, &mut whole] {
        z.insert(a("www.example.com.", [192, 0, 2, 1])).unwrap();
    }
    for (owner, rtype, rdatas) in &sets {
        for d in rdatas {
            one_by_one
                .insert(Record::from_rdata(owner.clone(), 60, d.clone()))
                .unwrap();
        }
        whole
            .insert_set(&LowerName::new(owner), *rtype, 60, rdatas)
            .unwrap();
    }
    let sorted = |z: &Zone| {
        let mut r: Vec<String> = z.records().map(|r| r.to_string()).collect();
        r.sort();
        r
    };
    assert_eq!(sorted(&whole), sorted(&one_by_one));
    assert_eq!(whole.record_count(), one_by_one.record_count());
    assert_eq!(
        whole.node_count(),
        one_by_one.node_count(),
        "empty non-terminals"
    );
    assert!(whole.has_cuts() && whole.below_cut(&LowerName::new(&name("x.deleg.example.com."))));
}
