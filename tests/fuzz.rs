//! Fuzzing in CI, bounded: mutated DNS messages through the request
//! router (UDP and TCP, transfers and NOTIFY included), mutated zone
//! files through the parser and checks, mutated registration JSON through
//! validation and the registry. `XDPDNS_FUZZ_EXECS` sets the executions
//! per target (default 20,000; the closing notes quote longer runs). The
//! kernel program's fuzzer is `xdp_differential::fuzzed_queries_*`.

use crate::support::mutate::{executions, mutate, rng, Rng};

use std::net::IpAddr;
use std::path::Path;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::rdata::opt::EdnsOption;
use hickory_proto::rr::rdata::SOA;
use hickory_proto::rr::{Name, RData, Record, RecordType};
use xdpdns::handler::{Handler, Transport};
use xdpdns::registry::{InstanceSpec, Registry};
use xdpdns::router::{Response, Router};
use xdpdns::zone::{load_zone_str, ZoneStore};

const ZONE: &str = include_str!("support/example.com.zone");

fn origin() -> Name {
    Name::from_ascii("example.com.").unwrap()
}

fn zone_text() -> String {
    // The shared test zone without its $INCLUDE (no files here).
    ZONE.replace("$INCLUDE big.inc", "")
}

fn message(name: &str, rtype: RecordType, op: OpCode, edns: Option<Edns>) -> Vec<u8> {
    let mut m = Message::new(0x4242, MessageType::Query, op);
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), rtype));
    m.edns = edns;
    m.to_vec().unwrap()
}

fn dns_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    let resolver = || {
        let mut e = Edns::new();
        e.set_max_payload(1232).set_dnssec_ok(true);
        e.options_mut()
            .insert(EdnsOption::Unknown(10, b"clientck".to_vec()));
        e
    };
    let options = || {
        let mut e = Edns::new();
        e.set_max_payload(4096);
        e.options_mut().insert(EdnsOption::Unknown(3, Vec::new())); // NSID
        e.options_mut()
            .insert(EdnsOption::Unknown(8, vec![0, 1, 24, 0, 192, 0, 2])); // ECS
        e.options_mut().insert(EdnsOption::Unknown(12, vec![0; 8])); // padding
        e.options_mut().insert(EdnsOption::Unknown(
            10,
            [
                b"clientck".as_slice(),
                &[1, 0, 0, 0, 0x65, 0x5e, 0x8c, 0, 1, 2, 3, 4, 5, 6, 7, 8],
            ]
            .concat(),
        ));
        e
    };
    for name in [
        "www.example.com.",
        "alias.example.com.",
        "x.wild.example.com.",
        "a.b.ent.example.com.",
        "host.sub.example.com.",
        "nope.example.com.",
        "example.com.",
        "_sip._udp.example.com.",
        "other.test.",
    ] {
        for rtype in [
            RecordType::A,
            RecordType::AAAA,
            RecordType::MX,
            RecordType::ANY,
            RecordType::SRV,
            RecordType::TXT,
            RecordType::NS,
            RecordType::DS,
        ] {
            seeds.push(message(name, rtype, OpCode::Query, None));
        }
        seeds.push(message(
            name,
            RecordType::A,
            OpCode::Query,
            Some(resolver()),
        ));
        seeds.push(message(
            name,
            RecordType::AAAA,
            OpCode::Query,
            Some(options()),
        ));
    }
    seeds.push(message(
        "example.com.",
        RecordType::AXFR,
        OpCode::Query,
        None,
    ));
    seeds.push(message(
        "example.com.",
        RecordType::SOA,
        OpCode::Notify,
        None,
    ));
    let mut ixfr = Message::new(7, MessageType::Query, OpCode::Query);
    ixfr.add_query(Query::query(origin(), RecordType::IXFR));
    let soa = SOA::new(origin(), origin(), 2026010100, 1, 1, 1, 1);
    ixfr.authorities
        .push(Record::from_rdata(origin(), 0, RData::SOA(soa)));
    seeds.push(ixfr.to_vec().unwrap());
    seeds
}

/// One mutated message from `seeds`, and the transport it goes over
/// (every fourth over TCP).
fn mutated(rng: &mut Rng, seeds: &[Vec<u8>], n: u64) -> (Vec<u8>, Transport) {
    let seed = &seeds[rng.below(seeds.len())];
    let other = &seeds[rng.below(seeds.len())];
    let input = mutate(rng, seed, other, 1024);
    let transport = if n.is_multiple_of(4) {
        Transport::Tcp
    } else {
        Transport::Udp
    };
    (input, transport)
}

/// Mutated messages through the router: it never panics, every reply is
/// a DNS message with the query's ID and QR set that fits the transport,
/// and every transfer writes well-formed messages.
#[test]
fn fuzzed_dns_messages_get_well_formed_replies_or_none() {
    let zone = load_zone_str(&zone_text(), &origin(), Path::new("t.zone")).unwrap();
    let router = Router::new(
        ZoneStore::with_zones(vec![zone]).reader(),
        Handler::default(),
    );
    let seeds = dns_seeds();
    let runs = executions(20_000);
    let mut rng = rng(0x5eed_d115);
    let (mut replies, mut transfers) = (0u64, 0u64);
    let peer: IpAddr = "127.0.0.1".parse().unwrap();
    for n in 0..runs {
        let (input, transport) = mutated(&mut rng, &seeds, n);
        let context = || format!("execution {n}: {input:02x?}");
        match router.respond(&input, transport, peer, 1_767_225_600) {
            Response::Drop => {}
            Response::One(reply) => {
                replies += 1;
                let limit = match transport {
                    Transport::Udp => 1232,
                    Transport::Tcp => 65535,
                };
                assert!(reply.len() <= limit, "{} bytes; {}", reply.len(), context());
                assert_eq!(reply[..2], input[..2], "reply ID; {}", context());
                assert!(reply[2] & 0x80 != 0, "QR set; {}", context());
                if let Err(e) = Message::from_vec(&reply) {
                    panic!("reply does not parse ({e}); {}", context());
                }
            }
            Response::Update(_) => panic!("an UPDATE admitted with no grant; {}", context()),
            Response::Transfer(t) => {
                transfers += 1;
                let mut bad = None;
                t.write(&mut |m| {
                    if let Err(e) = Message::from_vec(&m) {
                        bad = Some(e.to_string());
                    }
                    true
                });
                assert!(bad.is_none(), "transfer message: {bad:?}; {}", context());
            }
        }
    }
    eprintln!("fuzz dns: {runs} executions, {replies} replies, {transfers} transfers, no failure");
    assert!(replies > runs / 4, "mutations still reach the handler");
}

/// Mutated queries through the hot path and the full handler: whenever
/// the hot path answers, it sends the full handler's bytes.
#[test]
fn fuzzed_queries_get_the_same_bytes_hot_or_full() {
    let zone = load_zone_str(&zone_text(), &origin(), Path::new("t.zone")).unwrap();
    let store = ZoneStore::with_zones(vec![zone]);
    let snapshot = store.snapshot();
    let table = xdpdns::answers::AnswerTable::default();
    xdpdns::answers::plan::fill(&table, &snapshot);
    let handler = Handler {
        edns: xdpdns::wire::ServerEdns {
            nsid: Some(b"fuzz-node".to_vec()),
            ..Default::default()
        },
        ..Handler::default()
    };
    // Seeds: A/AAAA queries for every compiled name, TXT and MX there
    // (NODATA), and a missing name below each (NXDOMAIN), plain, with
    // EDNS, and resolver-shaped (DO, a client cookie); the general router
    // target above covers every other kind of message.
    let mut seeds = Vec::new();
    let (compiled, _) = xdpdns::answers::compile(&snapshot);
    for key in compiled.keys() {
        let address = if key.qtype == 0 { 1 } else { 28 };
        let missing = [&[2, b'n', b'x'][..], &key.name].concat();
        for (name, qtype) in [
            (&key.name[..], address),
            (&key.name, 16),
            (&key.name, 15),
            (&missing, address),
        ] {
            let mut q = vec![0x42, 0x42, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
            q.extend_from_slice(name);
            q.extend_from_slice(&[0, qtype, 0, 1]);
            seeds.push(q.clone());
            q[11] = 1;
            q.extend_from_slice(&[0, 0, 41, 4, 0xd0, 0, 0, 0x80, 0, 0, 12, 0, 10, 0, 8]);
            q.extend_from_slice(b"clientck");
            seeds.push(q);
        }
    }
    let runs = executions(20_000);
    let mut rng = rng(0x407_5eed);
    let peers: [IpAddr; 2] = ["192.0.2.7".parse().unwrap(), "2001:db8::7".parse().unwrap()];
    let mut hot = 0u64;
    for n in 0..runs {
        let (input, transport) = mutated(&mut rng, &seeds, n);
        let peer = peers[(n % 2) as usize];
        let now = 1_767_225_600;
        let fast = xdpdns::answers::hot::answer(
            &table,
            &snapshot,
            &input,
            transport,
            peer,
            now,
            &handler.edns,
        );
        if let Some(fast) = fast.map(|a| a.bytes) {
            hot += 1;
            let full = handler.handle(&snapshot, &input, transport, peer, now);
            assert_eq!(Some(fast), full, "execution {n}: {input:02x?}");
        }
    }
    eprintln!("fuzz hot: {runs} executions, {hot} answered hot, all equal to the full handler");
    assert!(
        hot > runs / 50,
        "mutations still reach the hot path ({hot})"
    );
}

/// Mutated zone files: the parser and the checks never panic, and every
/// error names the file.
#[test]
fn fuzzed_zone_files_load_or_fail_with_file_and_line() {
    let seeds: Vec<Vec<u8>> = vec![
        zone_text().into_bytes(),
        b"$ORIGIN example.com.\n$TTL 60\n@ SOA ns1 h ( 1 2 3 4 5 )\n@ NS ns1\nns1 A 192.0.2.1\n\
          t TXT \"a\\\"b\" \"c\\010d\"\ncaa CAA 0 issue \"ca.example\"\nx \\# 4 0a000001\n\
          srv SRV 1 2 3 t\nmx MX 10 ns1\nv6 AAAA 2001:db8::1\n"
            .to_vec(),
    ];
    let runs = executions(20_000);
    let mut rng = rng(0x20_9e5);
    let (mut loaded, mut refused) = (0u64, 0u64);
    for n in 0..runs {
        let seed = &seeds[rng.below(seeds.len())];
        let other = &seeds[rng.below(seeds.len())];
        let input = mutate(&mut rng, seed, other, 8192);
        let text = String::from_utf8_lossy(&input);
        match load_zone_str(&text, &origin(), Path::new("t.zone")) {
            Ok(_) => loaded += 1,
            Err(e) => {
                refused += 1;
                let msg = e.to_string();
                assert!(
                    msg.contains("t.zone"),
                    "execution {n}: error without the file: {msg}"
                );
            }
        }
    }
    eprintln!("fuzz zone files: {runs} executions, {loaded} loaded, {refused} refused, no failure");
    assert!(loaded > 0 && refused > 0);
}

/// Replaces one node of `v` (chosen at random) with an awkward value, or
/// repeats or drops array elements and object keys.
fn mutate_json(rng: &mut Rng, v: &mut serde_json::Value) {
    use serde_json::{json, Value};
    let descend = rng.below(3) != 0;
    match v {
        Value::Object(m) if descend && !m.is_empty() => {
            let keys: Vec<String> = m.keys().cloned().collect();
            let k = &keys[rng.below(keys.len())];
            match rng.below(8) {
                0 => {
                    m.remove(k);
                }
                1 => {
                    m.insert(format!("{k}_x"), json!(1));
                }
                _ => mutate_json(rng, m.get_mut(k).unwrap()),
            }
        }
        Value::Array(a) if descend && !a.is_empty() => match rng.below(6) {
            0 => {
                let e = a[rng.below(a.len())].clone();
                let n = 1 + rng.below(100);
                a.extend(std::iter::repeat_n(e, n));
            }
            1 => {
                a.remove(rng.below(a.len()));
            }
            _ => {
                let i = rng.below(a.len());
                mutate_json(rng, &mut a[i]);
            }
        },
        _ => {
            let awkward = [
                json!(""),
                json!("a".repeat(300)),
                json!("10.0.0.1"),
                json!("::ffff:10.0.0.1"),
                json!("255.255.255.255"),
                json!("x..y"),
                json!("-a-"),
                json!("ÿ.example"),
                json!("web:0"),
                json!("web:65536"),
                json!("web:80:tcp"),
                json!(0),
                json!(-1),
                json!(4_294_967_296u64),
                json!(65_536),
                json!(true),
                json!(null),
                json!([]),
                json!({}),
            ];
            *v = awkward[rng.below(awkward.len())].clone();
        }
    }
}

/// One of `seeds` mutated: half the time as bytes, half the time as
/// values in its JSON tree.
fn mutated_json(rng: &mut Rng, seeds: &[Vec<u8>], n: u64) -> Vec<u8> {
    let seed = &seeds[rng.below(seeds.len())];
    let other = &seeds[rng.below(seeds.len())];
    if n.is_multiple_of(2) {
        mutate(rng, seed, other, 4096)
    } else {
        let mut v: serde_json::Value = serde_json::from_slice(seed).unwrap();
        for _ in 0..1 + rng.below(3) {
            mutate_json(rng, &mut v);
        }
        serde_json::to_vec(&v).unwrap()
    }
}

/// Mutated registration JSON: parsing, validation and the registry never
/// panic, and what validates registers.
#[test]
fn fuzzed_registrations_validate_or_are_refused() {
    let seeds: Vec<Vec<u8>> = [
        r#"{"owner":"acme","addresses":["10.0.0.1","2001:db8::1"],"services":["web:80","db"],"lease_secs":30}"#,
        r#"{"owner":"a","addresses":["10.0.0.2"],"status":"down","lease_secs":5,"disabled":true}"#,
        r#"{"addresses":["10.0.0.3"],"lease_secs":60,"binder":{"domain":"x.binder.example","type":"load_balancer","aliases":["y.binder.example"],"ports":[80,443],"ttl":30,"service":{"type":"service","service":{"srvce":"_http","proto":"_tcp","port":80,"ttl":60}}}}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let runs = executions(20_000);
    let mut rng = rng(0x7e9);
    let registry = Registry::default();
    let (mut parsed, mut registered) = (0u64, 0u64);
    for n in 0..runs {
        let input = mutated_json(&mut rng, &seeds, n);
        let Ok(spec) = serde_json::from_slice::<InstanceSpec>(&input) else {
            continue;
        };
        parsed += 1;
        let id = format!("i{n}");
        if let Ok(entry) = registry.register(&id, &spec, 1_000) {
            registered += 1;
            let json = serde_json::to_string(&entry).expect("an entry serializes");
            let back: xdpdns::registry::Entry =
                serde_json::from_str(&json).expect("and reads back");
            assert_eq!(back, entry, "execution {n}");
        }
    }
    eprintln!("fuzz registrations: {runs} executions, {parsed} parsed, {registered} registered, no failure");
    assert!(registered > 0);
}

/// Mutated Registrar records (the ZooKeeper source's input): parsing
/// never panics, a node whose data cannot be parsed serves nothing, and
/// every instance the tree asks for is one the registry accepts.
#[test]
fn fuzzed_zookeeper_records_are_served_whole_or_not_at_all() {
    use xdpdns::registry::zookeeper::{Change, MirrorTree};
    let seeds: Vec<Vec<u8>> = [
        r#"{"type":"service","service":{"type":"service","service":{"srvce":"_redis","proto":"_tcp","port":6379,"ttl":60},"ttl":60}}"#,
        r#"{"type":"redis_host","address":"172.27.10.62","ttl":30,"redis_host":{"address":"172.27.10.62","ports":[6379]}}"#,
        r#"{"type":"load_balancer","address":"172.27.10.72","load_balancer":{"address":"172.27.10.72","ports":[80]}}"#,
        r#"{"type":"rr_host","rr_host":{"address":"2001:db8::1","ttl":5}}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let runs = executions(20_000);
    let mut rng = rng(0x2c0);
    let mut tree = MirrorTree::default();
    let mut registry = Registry::default();
    let (mut served, mut refused) = (0u64, 0u64);
    for n in 0..runs {
        let input = mutated_json(&mut rng, &seeds, n);
        // A service node and one child, in a few places of the tree.
        let service = format!("/us/joyent/s{}", n % 7);
        let path = if n % 3 == 0 {
            service.clone()
        } else {
            format!("{service}/h{}", n % 11)
        };
        let parsed = tree.set(&path, &input);
        for change in tree.changes() {
            match change {
                Change::Mirror { id, node, spec } => {
                    let entry = registry
                        .mirror(&id, &spec, &node, 1_000)
                        .unwrap_or_else(|e| panic!("execution {n}: {node}: {e}"));
                    registry.apply(&entry);
                    served += 1;
                }
                Change::Unmirror { id, .. } => {
                    if let Ok(entry) = registry.unmirror(&id) {
                        registry.apply(&entry);
                    }
                }
            }
        }
        if parsed.is_err() {
            refused += 1;
            let id = xdpdns::registry::zookeeper::paths::instance_id(&path);
            assert!(
                registry.get(&id).is_none(),
                "execution {n}: unreadable data is served"
            );
        }
    }
    eprintln!("fuzz zookeeper records: {runs} executions, {served} instances written, {refused} records refused, no failure");
    assert!(served > 0 && refused > 0);
}

/// Applies admitted UPDATEs at once, as `serve`'s updater does (without
/// the journal): a fake sink over a real store.
struct ApplyNow(std::sync::Arc<ZoneStore>);

impl xdpdns::router::UpdateSink for ApplyNow {
    fn submit(&self, p: xdpdns::router::PendingUpdate, reply: Box<dyn FnOnce(Vec<u8>) + Send>) {
        use hickory_proto::op::ResponseCode;
        let rcode = match self.0.edit(&p.update.zone, 1_767_225_600, |z| {
            xdpdns::update::plan(z, &p.update, &p.permission)
        }) {
            Ok(_) => ResponseCode::NoError,
            Err(xdpdns::zone::EditError::Refused(r)) => r,
            Err(e) => panic!("the store failed an admitted update: {e}"),
        };
        reply(p.reply(&Handler::default(), rcode, 1_767_225_600));
    }
}

/// UPDATE messages, unsigned and signed, adding, deleting and with
/// prerequisites: the seeds of the update fuzzer.
fn update_seeds(key: &xdpdns::transfer::tsig::TSigner) -> Vec<Vec<u8>> {
    use hickory_proto::rr::DNSClass;
    let name = |s: &str| Name::from_ascii(s).unwrap();
    let a = |owner: &str, ttl| {
        Record::from_rdata(name(owner), ttl, RData::A("192.0.2.9".parse().unwrap()))
    };
    let empty = |owner: &str, t, class| {
        let mut r = Record::update0(name(owner), 0, t);
        r.dns_class = class;
        r
    };
    let mut seeds = Vec::new();
    let shapes: Vec<(Vec<Record>, Vec<Record>)> = vec![
        (vec![], vec![a("new.example.com.", 60)]),
        (
            vec![empty("www.example.com.", RecordType::A, DNSClass::ANY)],
            vec![
                empty("www.example.com.", RecordType::ANY, DNSClass::ANY),
                a("www.example.com.", 300),
            ],
        ),
        (
            vec![empty("gone.example.com.", RecordType::ANY, DNSClass::NONE)],
            vec![{
                let mut r = a("www.example.com.", 0);
                r.dns_class = DNSClass::NONE;
                r
            }],
        ),
        (
            vec![],
            vec![empty("example.com.", RecordType::NS, DNSClass::ANY)],
        ),
    ];
    for (prereqs, updates) in shapes {
        let mut m = Message::new(0x2136, MessageType::Query, OpCode::Update);
        m.add_query(Query::query(origin(), RecordType::SOA));
        m.add_answers(prereqs);
        m.add_authorities(updates);
        seeds.push(m.to_vec().unwrap());
        m.finalize(key, 1_767_225_600).unwrap();
        seeds.push(m.to_vec().unwrap());
    }
    seeds
}

/// Mutated UPDATEs through the router and the commit path: every reply
/// parses, a refused update changes nothing, and the zone keeps its SOA
/// and an NS set whatever was applied.
#[test]
fn fuzzed_updates_are_answered_and_applied_whole_or_not_at_all() {
    use std::sync::{Arc, Mutex};
    let zone = load_zone_str(&zone_text(), &origin(), Path::new("t.zone")).unwrap();
    let store = Arc::new(ZoneStore::with_zones(vec![zone]));
    let router = Router::new(store.reader(), Handler::default());
    let key = xdpdns::transfer::tsig::make_key(
        "ddns",
        "hmac-sha256",
        "c2VjcmV0LWZvci10aGUtdXBkYXRlLWZ1enplcg==",
    )
    .unwrap();
    let mut policy = xdpdns::transfer::TransferPolicy::loopback_only();
    policy.keyring = xdpdns::transfer::Keyring::new(vec![key.clone()]);
    let every = |key: Option<&str>, from: &str| xdpdns::update::Grant {
        key: key.map(|k| Name::from_ascii(k).unwrap()),
        from: if from.is_empty() {
            vec![]
        } else {
            vec![from.parse().unwrap()]
        },
        zones: vec![],
        names: xdpdns::update::NameMatch::Zone,
        types: vec![],
    };
    policy.update = xdpdns::update::UpdatePolicy::new(
        vec![every(Some("ddns."), ""), every(None, "127.0.0.0/8")],
        [hickory_proto::rr::LowerName::new(&origin())],
    );
    router.transfer.store(Arc::new(policy));
    let _ = router.update_sink.set(Box::new(ApplyNow(store.clone())));
    let seeds = update_seeds(&key);
    let runs = executions(20_000);
    let mut rng = rng(0x2136_f022);
    let peer: IpAddr = "127.0.0.1".parse().unwrap();
    let mut by_rcode = std::collections::BTreeMap::<u16, u64>::new();
    for n in 0..runs {
        let (input, transport) = mutated(&mut rng, &seeds, n);
        let context = || format!("execution {n}: {input:02x?}");
        let before = store.snapshot().version();
        let reply = Arc::new(Mutex::new(None));
        match router.respond(&input, transport, peer, 1_767_225_600) {
            Response::Drop => continue,
            Response::One(r) => *reply.lock().unwrap() = Some(r),
            Response::Update(p) => {
                let out = reply.clone();
                router.submit_update(
                    p,
                    Box::new(move |r| *out.lock().unwrap() = Some(r)),
                    1_767_225_600,
                );
            }
            Response::Transfer(_) => continue,
        }
        let reply = reply
            .lock()
            .unwrap()
            .take()
            .expect("the sink replies at once");
        let msg = Message::from_vec(&reply)
            .unwrap_or_else(|e| panic!("reply does not parse ({e}); {}", context()));
        assert_eq!(reply[..2], input[..2], "reply ID; {}", context());
        let rcode = u16::from(msg.metadata.response_code);
        *by_rcode.entry(rcode).or_default() += 1;
        if rcode != 0 {
            assert_eq!(
                store.snapshot().version(),
                before,
                "a refused update changed the zone; {}",
                context()
            );
        }
        let snapshot = store.snapshot();
        let zone = snapshot
            .zone(&hickory_proto::rr::LowerName::new(&origin()))
            .unwrap();
        assert!(zone.soa().is_some(), "the SOA stays; {}", context());
        assert!(
            zone.apex().rrset(RecordType::NS).is_some(),
            "an NS set stays; {}",
            context()
        );
    }
    eprintln!("fuzz updates: {runs} executions, replies by rcode {by_rcode:?}");
    assert!(
        by_rcode.get(&0).copied().unwrap_or(0) > runs / 50,
        "mutations still apply: {by_rcode:?}"
    );
}
