use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::str::FromStr;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{DNSClass, LowerName, Name, Record, RecordType};

use super::*;
use crate::zone::{load_zone_str, parse_zone_str, ZoneStore};

const ZONE: &str = "\
$ORIGIN example.com.
$TTL 300
@ SOA ns1 hostmaster 10 3600 600 86400 60
@ NS ns1
@ NS ns2
ns1 A 192.0.2.53
ns2 A 192.0.2.54
www A 192.0.2.1
www A 192.0.2.2
alias CNAME www
a.b.c TXT \"deep\"
";

fn origin() -> Name {
    Name::from_str("example.com.").unwrap()
}

fn zone() -> crate::zone::Zone {
    load_zone_str(ZONE, &origin(), Path::new("test.zone")).unwrap()
}

/// A record in presentation form, relative to the zone.
fn rr(text: &str) -> Record {
    let text = format!("$TTL 0\n{text}\n");
    let records = parse_zone_str(&text, &origin(), Path::new("update")).unwrap();
    records.into_iter().next().unwrap().record
}

/// Deletes one RR (class NONE, TTL 0).
fn del(text: &str) -> Record {
    let mut r = rr(text);
    r.dns_class = DNSClass::NONE;
    r.ttl = 0;
    r
}

/// An empty record of `class` (RRset or name deletion, or a
/// prerequisite).
fn empty(owner: &str, rtype: RecordType, class: DNSClass) -> Record {
    let mut r = Record::update0(Name::from_str(owner).unwrap(), 0, rtype);
    r.dns_class = class;
    r
}

fn with_ttl(mut r: Record, ttl: u32) -> Record {
    r.ttl = ttl;
    r
}

fn update(prerequisites: Vec<Record>, updates: Vec<Record>) -> Update {
    Update {
        zone: origin(),
        prerequisites,
        updates,
    }
}

fn everything() -> UpdatePolicy {
    UpdatePolicy::new(
        vec![Grant {
            key: None,
            from: vec![],
            zones: vec![],
            names: NameMatch::Zone,
            types: vec![],
        }],
        [LowerName::new(&origin())],
    )
}

const PEER: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Runs `u` through the store as the server does; the rcode and the
/// zone after it.
fn run(u: &Update, policy: &UpdatePolicy) -> (ResponseCode, crate::zone::Zone) {
    let store = ZoneStore::with_zones(vec![zone()]);
    let key = u.zone_key();
    let permission = policy.permission(&key, PEER, None).unwrap();
    let rcode = match store.edit(&u.zone, 1_000, |z| plan(z, u, &permission)) {
        Ok(_) => ResponseCode::NoError,
        Err(crate::zone::EditError::Refused(r)) => r,
        Err(e) => panic!("{e}"),
    };
    let zone = (**store.snapshot().zone(&key).unwrap()).clone();
    (rcode, zone)
}

fn texts(zone: &crate::zone::Zone, owner: &str, rtype: RecordType) -> Vec<String> {
    let key = LowerName::new(&Name::from_str(owner).unwrap());
    let mut out: Vec<String> = zone
        .node(&key)
        .and_then(|n| n.rrset(rtype))
        .map(|s| {
            s.rdatas()
                .map(|d| format!("{} {d}", s.ttl))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[test]
fn adds_deletes_and_replaces_in_one_commit() {
    let u = update(
        vec![],
        vec![
            rr("new 60 A 192.0.2.9"),
            rr("new 60 AAAA 2001:db8::9"),
            del("www A 192.0.2.1"),
            rr("alias 120 CNAME new"),
        ],
    );
    let (rcode, z) = run(&u, &everything());
    assert_eq!(rcode, ResponseCode::NoError);
    assert_eq!(
        texts(&z, "new.example.com.", RecordType::A),
        ["60 192.0.2.9"]
    );
    assert_eq!(
        texts(&z, "www.example.com.", RecordType::A),
        ["300 192.0.2.2"]
    );
    assert_eq!(
        texts(&z, "alias.example.com.", RecordType::CNAME),
        ["120 new.example.com."],
        "a CNAME is replaced, not added to"
    );
    assert_eq!(z.serial(), Some(11), "the serial moves once");
}

#[test]
fn every_prerequisite_form_refuses_with_its_rcode() {
    use DNSClass::{ANY, NONE};
    let cases = [
        // RRset exists (value independent).
        (
            empty("www.example.com.", RecordType::A, ANY),
            ResponseCode::NoError,
        ),
        (
            empty("www.example.com.", RecordType::MX, ANY),
            ResponseCode::NXRRSet,
        ),
        // RRset does not exist.
        (
            empty("www.example.com.", RecordType::MX, NONE),
            ResponseCode::NoError,
        ),
        (
            empty("www.example.com.", RecordType::A, NONE),
            ResponseCode::YXRRSet,
        ),
        // Name is in use; an empty non-terminal is not.
        (
            empty("www.example.com.", RecordType::ANY, ANY),
            ResponseCode::NoError,
        ),
        (
            empty("b.c.example.com.", RecordType::ANY, ANY),
            ResponseCode::NXDomain,
        ),
        // Name is not in use.
        (
            empty("nope.example.com.", RecordType::ANY, NONE),
            ResponseCode::NoError,
        ),
        (
            empty("www.example.com.", RecordType::ANY, NONE),
            ResponseCode::YXDomain,
        ),
        // Outside the zone, and malformed.
        (
            empty("www.example.org.", RecordType::A, ANY),
            ResponseCode::NotZone,
        ),
        (
            with_ttl(empty("www.example.com.", RecordType::A, ANY), 5),
            ResponseCode::FormErr,
        ),
        (
            empty("www.example.com.", RecordType::A, DNSClass::CH),
            ResponseCode::FormErr,
        ),
    ];
    for (prereq, want) in cases {
        let u = update(vec![prereq.clone()], vec![rr("added 60 TXT \"x\"")]);
        let (rcode, z) = run(&u, &everything());
        assert_eq!(rcode, want, "{prereq:?}");
        let added = !texts(&z, "added.example.com.", RecordType::TXT).is_empty();
        assert_eq!(added, want == ResponseCode::NoError, "all or nothing");
    }
}

#[test]
fn value_dependent_prerequisite_compares_whole_rrsets() {
    let mut both = vec![rr("www 0 A 192.0.2.2"), rr("www 0 A 192.0.2.1")];
    for r in &mut both {
        r.ttl = 0;
    }
    let u = update(both.clone(), vec![rr("ok 60 TXT \"x\"")]);
    assert_eq!(run(&u, &everything()).0, ResponseCode::NoError);
    let u = update(both[..1].to_vec(), vec![rr("ok 60 TXT \"x\"")]);
    assert_eq!(
        run(&u, &everything()).0,
        ResponseCode::NXRRSet,
        "one of two"
    );
    let mut absent = rr("none 0 A 192.0.2.1");
    absent.ttl = 0;
    let u = update(vec![absent], vec![]);
    assert_eq!(run(&u, &everything()).0, ResponseCode::NXRRSet);
}

#[test]
fn prescan_refuses_malformed_and_out_of_zone_updates() {
    let cases = [
        (rr("x.example.org. 60 A 192.0.2.1"), ResponseCode::NotZone),
        (
            empty("www.example.com.", RecordType::AXFR, DNSClass::ANY),
            ResponseCode::FormErr,
        ),
        (with_ttl(del("www A 192.0.2.1"), 60), ResponseCode::FormErr),
        (
            empty("www.example.com.", RecordType::A, DNSClass::IN),
            ResponseCode::FormErr,
        ),
    ];
    for (u, want) in cases {
        // A valid change first: the refusal undoes it too.
        let u = update(vec![], vec![rr("first 60 A 192.0.2.7"), u]);
        let (rcode, z) = run(&u, &everything());
        assert_eq!(rcode, want);
        assert!(texts(&z, "first.example.com.", RecordType::A).is_empty());
        assert_eq!(z.serial(), Some(10));
    }
}

#[test]
fn apex_rules_keep_the_soa_and_the_last_ns() {
    let apex = "example.com.";
    let u = update(
        vec![],
        vec![
            empty(apex, RecordType::ANY, DNSClass::ANY),
            empty(apex, RecordType::NS, DNSClass::ANY),
            empty(apex, RecordType::SOA, DNSClass::ANY),
            del("@ NS ns1"),
            del("@ NS ns2"),
        ],
    );
    let (rcode, z) = run(&u, &everything());
    assert_eq!(rcode, ResponseCode::NoError);
    assert_eq!(
        texts(&z, apex, RecordType::NS),
        ["300 ns2.example.com."],
        "the last NS stays"
    );
    assert!(z.soa().is_some());
}

#[test]
fn soa_is_replaced_only_by_a_newer_serial() {
    let newer = rr("@ 600 SOA ns2 admin 50 1800 300 7200 30");
    let (rcode, z) = run(&update(vec![], vec![newer]), &everything());
    assert_eq!(rcode, ResponseCode::NoError);
    let (soa, ttl) = z.soa().unwrap();
    assert_eq!((soa.serial, ttl), (50, 600));
    assert_eq!(soa.mname, Name::from_str("ns2.example.com.").unwrap());
    let older = rr("@ 600 SOA ns2 admin 5 1800 300 7200 30");
    let (_, z) = run(&update(vec![], vec![older]), &everything());
    assert_eq!(z.serial(), Some(10), "ignored: not newer");
}

#[test]
fn cname_exclusivity_ignores_conflicting_adds() {
    let u = update(
        vec![],
        vec![
            rr("www 60 CNAME elsewhere"),
            rr("alias 60 TXT \"beside a CNAME\""),
        ],
    );
    let (rcode, z) = run(&u, &everything());
    assert_eq!(rcode, ResponseCode::NoError);
    assert!(texts(&z, "www.example.com.", RecordType::CNAME).is_empty());
    assert!(texts(&z, "alias.example.com.", RecordType::TXT).is_empty());
    assert_eq!(z.serial(), Some(10), "nothing changed, no new serial");
}

#[test]
fn deleting_a_name_and_adding_back_in_order() {
    let u = update(
        vec![],
        vec![
            empty("www.example.com.", RecordType::ANY, DNSClass::ANY),
            rr("www 60 A 192.0.2.3"),
        ],
    );
    let (_, z) = run(&u, &everything());
    assert_eq!(
        texts(&z, "www.example.com.", RecordType::A),
        ["60 192.0.2.3"]
    );
}

#[test]
fn policy_refuses_whatever_it_does_not_cover() {
    let acme = UpdatePolicy::new(
        vec![Grant {
            key: None,
            from: vec![],
            zones: vec![],
            names: NameMatch::wildcard(&Name::from_str("_acme-challenge.*.example.com.").unwrap()),
            types: vec![RecordType::TXT],
        }],
        [LowerName::new(&origin())],
    );
    let ok = update(vec![], vec![rr("_acme-challenge.www 60 TXT \"token\"")]);
    assert_eq!(run(&ok, &acme).0, ResponseCode::NoError);
    let wrong_type = update(
        vec![],
        vec![
            rr("_acme-challenge.www 60 TXT \"token\""),
            rr("_acme-challenge.www 60 A 192.0.2.1"),
        ],
    );
    let (rcode, z) = run(&wrong_type, &acme);
    assert_eq!(rcode, ResponseCode::Refused);
    assert!(texts(&z, "_acme-challenge.www.example.com.", RecordType::TXT).is_empty());
    // Deleting every RRset of a name needs a grant for each of them.
    let www_any = update(
        vec![],
        vec![empty("www.example.com.", RecordType::ANY, DNSClass::ANY)],
    );
    assert_eq!(run(&www_any, &acme).0, ResponseCode::Refused);
}

#[test]
fn zone_section_must_be_one_soa_question() {
    use hickory_proto::op::{Message, MessageType, OpCode, Query};
    let mut msg = Message::new(1, MessageType::Query, OpCode::Update);
    msg.add_query(Query::query(origin(), RecordType::A));
    assert_eq!(
        Update::from_message(msg).unwrap_err(),
        ResponseCode::FormErr
    );
    let mut msg = Message::new(1, MessageType::Query, OpCode::Update);
    msg.add_query(Query::query(origin(), RecordType::SOA));
    msg.add_answers((0..MAX_UPDATE_RECORDS + 1).map(|_| rr("x 60 A 192.0.2.1")));
    assert_eq!(
        Update::from_message(msg).unwrap_err(),
        ResponseCode::Refused
    );
}
