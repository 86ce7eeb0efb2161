//! The router without sockets or peer servers: TSIG, ACLs and NOTIFY
//! routing, through bytes in and [`Response`]s out, and a fake sink.

use std::net::IpAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};

use super::*;
use crate::transfer::tsig::{make_key, TSigner};
use crate::transfer::{Acl, AclRule, Keyring};
use crate::zone::{load_zone_str, ZoneStore};

const NOW: u64 = 1_700_000_000;
const SECRET: &str = "c2VjcmV0LWZvci10aGUtcm91dGVyLXRlc3Rz";

fn name(s: &str) -> Name {
    Name::from_ascii(s).unwrap()
}

fn key(secret: &str) -> TSigner {
    make_key("xfr", "hmac-sha256", secret).unwrap()
}

/// A fake sink that records the zones it is told about.
#[derive(Clone, Default)]
struct Recorded(Arc<Mutex<Vec<Name>>>);

impl NotifySink for Recorded {
    fn notified(&self, zone: &Name) {
        self.0.lock().unwrap().push(zone.clone());
    }
}

/// example.com. served from a file; sec.example. a secondary zone whose
/// NOTIFYs must come from 192.0.2.1; transfers of example.com. need the
/// `xfr` key or a loopback source.
fn router() -> (Router, Recorded) {
    let zone = load_zone_str(
        "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 h 7 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.53\n",
        &name("example.com."),
        Path::new("t.zone"),
    )
    .unwrap();
    let router = Router::new(
        ZoneStore::with_zones(vec![zone]).reader(),
        Handler::default(),
    );
    let mut policy = TransferPolicy::loopback_only();
    policy.keyring = Keyring::new(vec![key(SECRET)]);
    policy.zone_acl.insert(
        LowerName::new(&name("example.com.")),
        Acl::new(vec![
            AclRule {
                from: vec!["127.0.0.0/8".parse().unwrap()],
                key: None,
            },
            AclRule {
                from: Vec::new(),
                key: Some("xfr".into()),
            },
        ]),
    );
    policy.notify_acl.insert(
        LowerName::new(&name("sec.example.")),
        Acl::new(vec![AclRule {
            from: vec!["192.0.2.1/32".parse().unwrap()],
            key: None,
        }]),
    );
    router.transfer.store(Arc::new(policy));
    let sink = Recorded::default();
    let _ = router.notify_sink.set(Box::new(sink.clone()));
    (router, sink)
}

fn message(op: OpCode, zone: &str, qtype: RecordType) -> Message {
    let mut m = Message::new(4242, MessageType::Query, op);
    m.add_query(Query::query(name(zone), qtype));
    m
}

fn bytes(m: &Message) -> Vec<u8> {
    m.to_vec().unwrap()
}

fn signed(mut m: Message, k: &TSigner, at: u64) -> Vec<u8> {
    m.finalize(k, at).unwrap();
    bytes(&m)
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// The single reply's RCODE (and the whole message).
fn one(r: Response) -> (ResponseCode, Message) {
    match r {
        Response::One(b) => {
            let m = Message::from_vec(&b).unwrap();
            (m.metadata.response_code, m)
        }
        Response::Drop => panic!("dropped"),
        Response::Transfer(_) => panic!("a transfer"),
        Response::Update(_) => panic!("an update to apply"),
    }
}

#[test]
fn plain_queries_go_to_the_handler() {
    let (r, _) = router();
    let q = bytes(&message(OpCode::Query, "ns1.example.com.", RecordType::A));
    let (rcode, m) = one(r.respond(&q, Transport::Udp, ip("198.51.100.9"), NOW));
    assert_eq!(rcode, ResponseCode::NoError);
    assert_eq!(m.answers.len(), 1);
    assert!(matches!(
        r.respond(&[1, 2, 3], Transport::Udp, ip("198.51.100.9"), NOW),
        Response::Drop
    ));
}

#[test]
fn transfers_follow_the_acl() {
    let (r, _) = router();
    let axfr = bytes(&message(OpCode::Query, "example.com.", RecordType::AXFR));
    let (rcode, _) = one(r.respond(&axfr, Transport::Tcp, ip("198.51.100.9"), NOW));
    assert_eq!(rcode, ResponseCode::Refused, "not loopback, no key");
    match r.respond(&axfr, Transport::Tcp, ip("127.0.0.1"), NOW) {
        Response::Transfer(t) => assert_eq!(t.describe(), ("AXFR", 3)),
        _ => panic!("loopback may transfer"),
    }
    // Zones without their own ACL take the default (loopback only).
    let other = bytes(&message(
        OpCode::Query,
        "nothere.example.",
        RecordType::AXFR,
    ));
    let (rcode, _) = one(r.respond(&other, Transport::Tcp, ip("198.51.100.9"), NOW));
    assert_eq!(rcode, ResponseCode::Refused);
}

#[test]
fn a_valid_tsig_key_opens_the_acl_and_signs_every_message() {
    let (r, _) = router();
    let axfr = signed(
        message(OpCode::Query, "example.com.", RecordType::AXFR),
        &key(SECRET),
        NOW,
    );
    let Response::Transfer(t) = r.respond(&axfr, Transport::Tcp, ip("198.51.100.9"), NOW) else {
        panic!("the key allows the transfer");
    };
    let mut messages = Vec::new();
    assert!(t.write(&mut |m| {
        messages.push(Message::from_vec(&m).unwrap());
        true
    }));
    assert!(!messages.is_empty());
    assert!(
        messages.iter().all(|m| m.signature.is_some()),
        "every message is signed"
    );
}

#[test]
fn bad_tsig_gets_notauth() {
    let (r, _) = router();
    let q = message(OpCode::Query, "example.com.", RecordType::AXFR);
    let wrong = key("b3RoZXItc2VjcmV0LW90aGVyLXNlY3JldA==");
    let (rcode, _) = one(r.respond(
        &signed(q.clone(), &wrong, NOW),
        Transport::Tcp,
        ip("198.51.100.9"),
        NOW,
    ));
    assert_eq!(rcode, ResponseCode::NotAuth, "BADSIG");
    let stale = signed(q, &key(SECRET), NOW - 3600);
    let (rcode, _) = one(r.respond(&stale, Transport::Tcp, ip("198.51.100.9"), NOW));
    assert_eq!(
        rcode,
        ResponseCode::NotAuth,
        "BADTIME: the time is passed in"
    );
}

#[test]
fn notify_reaches_the_sink_only_from_the_primary_and_only_for_secondary_zones() {
    let (r, sink) = router();
    let notify = bytes(&message(OpCode::Notify, "sec.example.", RecordType::SOA));
    let (rcode, m) = one(r.respond(&notify, Transport::Udp, ip("192.0.2.1"), NOW));
    assert_eq!(rcode, ResponseCode::NoError);
    assert_eq!(m.metadata.op_code, OpCode::Notify);
    assert_eq!(*sink.0.lock().unwrap(), [name("sec.example.")]);

    let (rcode, _) = one(r.respond(&notify, Transport::Udp, ip("192.0.2.99"), NOW));
    assert_eq!(rcode, ResponseCode::Refused, "not the primary");
    let not_secondary = bytes(&message(OpCode::Notify, "example.com.", RecordType::SOA));
    let (rcode, _) = one(r.respond(&not_secondary, Transport::Udp, ip("192.0.2.1"), NOW));
    assert_eq!(rcode, ResponseCode::NotAuth, "not a secondary zone here");
    assert_eq!(
        sink.0.lock().unwrap().len(),
        1,
        "refused NOTIFYs go nowhere"
    );
}

#[test]
fn no_reply_goes_to_a_source_that_cannot_have_sent_it() {
    let (r, _) = router();
    let q = bytes(&message(OpCode::Query, "ns1.example.com.", RecordType::A));
    for peer in ["0.0.0.0", "255.255.255.255", "224.0.0.251", "::", "ff02::1"] {
        assert!(
            matches!(r.respond(&q, Transport::Udp, ip(peer), NOW), Response::Drop),
            "{peer}"
        );
    }
    let (rcode, _) = one(r.respond(&q, Transport::Udp, ip("192.0.2.7"), NOW));
    assert_eq!(rcode, ResponseCode::NoError);
}

#[test]
fn a_tsig_record_out_of_place_gets_formerr_not_an_unsigned_answer() {
    let (r, _) = router();
    let mut q = signed(
        message(OpCode::Query, "example.com.", RecordType::AXFR),
        &key(SECRET),
        NOW,
    );
    // An OPT record after the TSIG: the TSIG is no longer last (RFC 8945
    // §5.1), so the message cannot be verified.
    q.extend_from_slice(&[0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0]);
    q[11] += 1; // ARCOUNT
    match r.respond(&q, Transport::Tcp, ip("127.0.0.1"), NOW) {
        Response::One(b) => {
            let rcode = u16::from(b[3] & 0x0f);
            assert_eq!(rcode, u16::from(ResponseCode::FormErr), "{b:?}");
        }
        Response::Drop => panic!("dropped"),
        Response::Transfer(_) => panic!("transferred without a verified signature"),
        Response::Update(_) => panic!("an update"),
    }
}

fn reply_cookie(m: &Message) -> Vec<u8> {
    use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
    match m.edns.as_ref().and_then(|e| e.option(EdnsCode::Cookie)) {
        Some(EdnsOption::Unknown(_, c)) => c.clone(),
        other => panic!("no cookie: {other:?}"),
    }
}

fn with_cookie(payload: &[u8]) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.id = 9;
    m.add_query(Query::query(name("ns1.example.com."), RecordType::A));
    let mut e = hickory_proto::op::Edns::new();
    e.options_mut()
        .insert(hickory_proto::rr::rdata::opt::EdnsOption::Unknown(
            10,
            payload.to_vec(),
        ));
    m.edns = Some(e);
    m.to_vec().unwrap()
}

#[test]
fn cookies_are_answered_and_malformed_ones_get_formerr() {
    let (r, _) = router();
    let peer = ip("198.51.100.9");
    // A client cookie: the answer, plus client and a fresh server cookie.
    let (rcode, m) = one(r.respond(&with_cookie(&[7; 8]), Transport::Udp, peer, NOW));
    assert_eq!(rcode, ResponseCode::NoError);
    assert_eq!(m.answers.len(), 1);
    let cookie = reply_cookie(&m);
    assert_eq!(cookie.len(), 24);
    assert_eq!(&cookie[..8], &[7; 8]);
    // Sent back within half an hour from the same address: echoed.
    let (_, again) = one(r.respond(&with_cookie(&cookie), Transport::Tcp, peer, NOW + 60));
    assert_eq!(reply_cookie(&again), cookie);
    // Too short for a client cookie, or between 9 and 15 bytes: FORMERR.
    for len in [5, 12] {
        let (rcode, _) = one(r.respond(&with_cookie(&vec![1; len]), Transport::Udp, peer, NOW));
        assert_eq!(rcode, ResponseCode::FormErr, "{len} bytes");
    }
}

#[test]
fn transfers_over_max_transfers_out_are_refused_until_one_ends() {
    let (r, _) = router();
    let mut policy = (**r.transfer.load()).clone();
    policy.max_transfers_out = 1;
    r.transfer.store(Arc::new(policy));
    let axfr = bytes(&message(OpCode::Query, "example.com.", RecordType::AXFR));
    let local = ip("127.0.0.1");
    let Response::Transfer(first) = r.respond(&axfr, Transport::Tcp, local, NOW) else {
        panic!("the first transfer runs");
    };
    let (rcode, _) = one(r.respond(&axfr, Transport::Tcp, local, NOW));
    assert_eq!(
        rcode,
        ResponseCode::Refused,
        "a second one at once is refused"
    );
    assert!(first.write(&mut |_| true), "written whole");
    assert!(
        matches!(
            r.respond(&axfr, Transport::Tcp, local, NOW),
            Response::Transfer(_)
        ),
        "once it ended, the next one runs"
    );
}

/// The router with one grant: the `xfr` key may change TXT records in
/// example.com.
fn update_router() -> Router {
    let (r, _) = router();
    let mut policy = (**r.transfer.load()).clone();
    policy.update = crate::update::UpdatePolicy::new(
        vec![crate::update::Grant {
            key: Some(name("xfr.")),
            from: vec![],
            zones: vec![LowerName::new(&name("example.com."))],
            names: crate::update::NameMatch::Zone,
            types: vec![RecordType::TXT],
        }],
        [LowerName::new(&name("example.com."))],
    );
    r.transfer.store(Arc::new(policy));
    r
}

#[test]
fn updates_are_admitted_only_for_served_zones_and_granted_keys() {
    let r = update_router();
    let local = ip("127.0.0.1");
    let msg = |zone: &str| message(OpCode::Update, zone, RecordType::SOA);
    // Signed with the granted key: handed on to be applied.
    let q = signed(msg("example.com."), &key(SECRET), NOW);
    let Response::Update(pending) = r.respond(&q, Transport::Udp, local, NOW) else {
        panic!("not handed on")
    };
    assert_eq!(pending.update.zone, name("example.com."));
    // Nothing applies updates here: REFUSED, still signed.
    let (tx, rx) = std::sync::mpsc::channel();
    r.submit_update(pending, Box::new(move |b| tx.send(b).unwrap()), NOW);
    let reply = Message::from_vec(&rx.recv().unwrap()).unwrap();
    assert_eq!(reply.metadata.response_code, ResponseCode::Refused);
    assert_eq!(reply.metadata.op_code, OpCode::Update);
    assert!(reply.signature.is_some(), "the reply is signed");
    // Unsigned: no grant.
    let (rcode, _) = one(r.respond(&bytes(&msg("example.com.")), Transport::Udp, local, NOW));
    assert_eq!(rcode, ResponseCode::Refused);
    // A zone not served here.
    let q = signed(msg("example.org."), &key(SECRET), NOW);
    let (rcode, _) = one(r.respond(&q, Transport::Udp, local, NOW));
    assert_eq!(rcode, ResponseCode::NotAuth);
    // The zone section must ask for SOA.
    let q = signed(
        message(OpCode::Update, "example.com.", RecordType::A),
        &key(SECRET),
        NOW,
    );
    let (rcode, _) = one(r.respond(&q, Transport::Udp, local, NOW));
    assert_eq!(rcode, ResponseCode::FormErr);
    // A bad signature: NOTAUTH before anything else.
    let q = signed(
        msg("example.com."),
        &key("b3RoZXItc2VjcmV0LWZvci10aGUtdGVzdHM="),
        NOW,
    );
    let (rcode, _) = one(r.respond(&q, Transport::Udp, local, NOW));
    assert_eq!(rcode, ResponseCode::NotAuth);
}
