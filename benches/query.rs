//! Query parse + answer build through the full request handler (no
//! sockets): a hit, a miss (NXDOMAIN) and a TCP-framed query; and the
//! hits through the router, the path the UDP workers really call (source
//! check, then the hot answer from the compiled table), beside the full
//! handler in one run: plain, and resolver-shaped (EDNS, DO, a cookie);
//! and hits in a signed zone with DO=0 and DO=1 (the RRSIG added), both
//! paths.

#[path = "../tests/support/signing.rs"]
mod signing;

use std::path::Path;
use std::str::FromStr;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};
use xdpdns::handler::{Handler, Transport};
use xdpdns::wire::tcp_frame;
use xdpdns::zone::{load_zone_str, ZoneStore};

const PEER: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));

fn query(name: &str, rtype: RecordType) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.id = 7;
    m.add_query(Query::query(Name::from_str(name).unwrap(), rtype));
    m.to_vec().unwrap()
}

/// `plain` with what a validating resolver adds: EDNS (1232), DO and a
/// client cookie.
fn resolver_shaped(plain: &[u8]) -> Vec<u8> {
    let mut q = plain.to_vec();
    q[11] = 1;
    q.extend_from_slice(&[0, 0, 41, 4, 0xd0, 0, 0, 0x80, 0, 0, 12, 0, 10, 0, 8]);
    q.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    q
}

/// Bytes of a query for `name` without EDNS (header, name, type, class).
fn hit_len(name: &str) -> usize {
    query(name, RecordType::A).len()
}

fn setup() -> (ZoneStore, Handler) {
    let origin = Name::from_str("example.com.").unwrap();
    let path = Path::new("examples/example.com.zone");
    let text = include_str!("../examples/example.com.zone");
    let zone = load_zone_str(text, &origin, path).unwrap();
    (ZoneStore::with_zones(vec![zone]), Handler::default())
}

fn bench(c: &mut Criterion) {
    let (store, handler) = setup();
    let snapshot = store.snapshot();
    let mut g = c.benchmark_group("query");
    g.throughput(Throughput::Elements(1));

    let hit = query("wWw.example.COM.", RecordType::A);
    assert!(handler
        .handle(&snapshot, &hit, Transport::Udp, PEER, 0)
        .is_some());
    g.bench_function("udp_hit_a", |b| {
        b.iter(|| {
            handler.handle(
                &snapshot,
                std::hint::black_box(&hit),
                Transport::Udp,
                PEER,
                0,
            )
        })
    });

    let router = xdpdns::router::Router::new(
        ZoneStore::with_zones(snapshot.zones().map(|z| (**z).clone()).collect()).reader(),
        handler.clone(),
    );
    xdpdns::answers::plan::fill(&router.hot, &router.zones.snapshot());
    let resolver = resolver_shaped(&hit);
    // Negative answers (the hot path from the snapshot), beside the full
    // handler answering the same queries.
    // (`udp_miss_nxdomain` below is the full handler's NXDOMAIN.)
    let nxdomain = query("nope.example.com.", RecordType::A);
    let nodata = query("wWw.example.COM.", RecordType::TXT);
    g.bench_function("udp_nodata_txt", |b| {
        b.iter(|| {
            handler.handle(
                &snapshot,
                std::hint::black_box(&nodata),
                Transport::Udp,
                PEER,
                0,
            )
        })
    });
    for (name, q) in [
        ("router_udp_hit_a", &hit),
        ("router_udp_hit_a_resolver", &resolver),
        ("router_udp_nxdomain", &nxdomain),
        ("router_udp_nodata_txt", &nodata),
    ] {
        let xdpdns::router::Response::One(bytes) = router.respond(q, Transport::Udp, PEER, 0)
        else {
            panic!("no reply")
        };
        assert_eq!(
            Some(bytes),
            handler.handle(&snapshot, q, Transport::Udp, PEER, 0),
            "the hot answer is the full handler's"
        );
        g.bench_function(name, |b| {
            b.iter(|| router.respond(std::hint::black_box(q), Transport::Udp, PEER, 0))
        });
    }
    // Response rate limiting on: the hit under its rate (the accounting
    // alone) and over it (limited: slipped or dropped).
    for (name, rate) in [
        ("router_udp_hit_a_rrl", 1_000_000),
        ("router_udp_hit_a_rrl_limited", 1),
    ] {
        let limited = xdpdns::router::Router::new(
            ZoneStore::with_zones(snapshot.zones().map(|z| (**z).clone()).collect()).reader(),
            handler.clone(),
        );
        xdpdns::answers::plan::fill(&limited.hot, &limited.zones.snapshot());
        let config = xdpdns::rrl::RrlConfig {
            enabled: true,
            responses_per_second: rate,
            ..Default::default()
        };
        let _ = limited.rrl.set(xdpdns::rrl::Limiter::new(config));
        g.bench_function(name, |b| {
            b.iter(|| limited.respond(std::hint::black_box(&hit), Transport::Udp, PEER, 0))
        });
    }
    // A zone signed by dnssec-signzone: DO=1 hits carry the A record and
    // its RRSIG (the hot path from the signed variant), beside DO=0.
    let signed_text = signing::small_signed_zone();
    let signed_zone = load_zone_str(
        &signed_text,
        &Name::from_str("signed.test.").unwrap(),
        Path::new("signed"),
    )
    .unwrap();
    let signed_router = xdpdns::router::Router::new(
        ZoneStore::with_zones(vec![signed_zone]).reader(),
        handler.clone(),
    );
    xdpdns::answers::plan::fill(&signed_router.hot, &signed_router.zones.snapshot());
    let signed_snapshot = signed_router.zones.snapshot();
    let do1 = resolver_shaped(&query("www.signed.test.", RecordType::A));
    let mut do0 = do1.clone();
    do0[hit_len("www.signed.test.") + 7] = 0;
    for (name, q, want_sig) in [("signed_do0", &do0, false), ("signed_do1", &do1, true)] {
        let bytes = handler
            .handle(&signed_snapshot, q, Transport::Udp, PEER, 0)
            .unwrap();
        let reply = Message::from_vec(&bytes).unwrap();
        let sigs = reply
            .answers
            .iter()
            .filter(|r| r.record_type() == RecordType::RRSIG)
            .count();
        assert_eq!(sigs > 0, want_sig, "{name}: {reply}");
        let xdpdns::router::Response::One(hot) = signed_router.respond(q, Transport::Udp, PEER, 0)
        else {
            panic!("no reply")
        };
        assert_eq!(hot, bytes, "{name}: the hot answer is the full handler's");
        g.bench_function(format!("udp_hit_a_{name}"), |b| {
            b.iter(|| {
                handler.handle(
                    &signed_snapshot,
                    std::hint::black_box(q),
                    Transport::Udp,
                    PEER,
                    0,
                )
            })
        });
        g.bench_function(format!("router_udp_hit_a_{name}"), |b| {
            b.iter(|| signed_router.respond(std::hint::black_box(q), Transport::Udp, PEER, 0))
        });
    }

    // 100,000 names asked in turn, so each lookup reads a table far
    // larger than the caches near the core: what a busy server sees.
    let mut text = String::from(
        "$ORIGIN big.test.\n$TTL 60\n@ SOA ns1 h 1 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n",
    );
    for i in 0..100_000u32 {
        text += &format!(
            "i{i}.inst A 10.{}.{}.{}\n",
            i >> 16,
            (i >> 8) & 255,
            i & 255
        );
    }
    let big = load_zone_str(
        &text,
        &Name::from_str("big.test.").unwrap(),
        Path::new("big"),
    )
    .unwrap();
    let big =
        xdpdns::router::Router::new(ZoneStore::with_zones(vec![big]).reader(), handler.clone());
    xdpdns::answers::plan::fill(&big.hot, &big.zones.snapshot());
    let mut order: Vec<u32> = (0..100_000).collect();
    let mut x = 0x9e37_79b9u32;
    for i in (1..order.len()).rev() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        order.swap(i, x as usize % (i + 1));
    }
    let queries: Vec<Vec<u8>> = order
        .iter()
        .map(|i| query(&format!("i{i}.inst.big.test."), RecordType::A))
        .collect();
    let mut next = 0;
    g.bench_function("router_udp_hit_a_100k_names", |b| {
        b.iter(|| {
            next = (next + 1) % queries.len();
            big.respond(&queries[next], Transport::Udp, PEER, 0)
        })
    });
    let misses: Vec<Vec<u8>> = (0..1000)
        .map(|i| query(&format!("nope{i}.inst.big.test."), RecordType::A))
        .collect();
    g.bench_function("router_udp_miss_nxdomain_100k_names", |b| {
        b.iter(|| {
            next = (next + 1) % misses.len();
            big.respond(&misses[next], Transport::Udp, PEER, 0)
        })
    });
    // The same answers compiled on demand (`server.answer_table`): each
    // query a different name of 100k (more than a thread's cache holds,
    // so each is compiled), a thousand names over and over (cached), and
    // NXDOMAIN.
    big.hot.set_on_demand(true);
    g.bench_function("router_udp_hit_a_100k_names_on_demand", |b| {
        b.iter(|| {
            next = (next + 1) % queries.len();
            big.respond(&queries[next], Transport::Udp, PEER, 0)
        })
    });
    g.bench_function("router_udp_hit_a_1k_names_on_demand_cached", |b| {
        b.iter(|| {
            next = (next + 1) % 1000;
            big.respond(&queries[next], Transport::Udp, PEER, 0)
        })
    });
    g.bench_function("router_udp_miss_nxdomain_100k_names_on_demand", |b| {
        b.iter(|| {
            next = (next + 1) % misses.len();
            big.respond(&misses[next], Transport::Udp, PEER, 0)
        })
    });
    big.hot.set_on_demand(false);
    xdpdns::answers::plan::fill(&big.hot, &big.zones.snapshot());
    // What the per-zone count adds to a full-handler answer: finding the
    // zone of the question and its counter id.
    let big_snapshot = big.zones.snapshot();
    let qname = Name::from_str("i7.inst.big.test.").unwrap();
    g.bench_function("zone_of_answer_for_metrics", |b| {
        b.iter(|| {
            let zone = big_snapshot.zone_of(std::hint::black_box(&qname)).unwrap();
            big_snapshot.zone_id(zone.origin_key())
        })
    });
    g.bench_function("udp_hit_a_100k_names", |b| {
        b.iter(|| {
            next = (next + 1) % queries.len();
            handler.handle(&big_snapshot, &queries[next], Transport::Udp, PEER, 0)
        })
    });
    g.bench_function("udp_hit_a_resolver", |b| {
        b.iter(|| {
            handler.handle(
                &snapshot,
                std::hint::black_box(&resolver),
                Transport::Udp,
                PEER,
                0,
            )
        })
    });

    // What counting an answer for /metrics adds to each one: reading the
    // reply's question type and RCODE, one relaxed add.
    let metrics = xdpdns::metrics::Metrics::default();
    let counts = metrics.counts();
    let reply = handler
        .handle(&snapshot, &hit, Transport::Udp, PEER, 0)
        .unwrap();
    g.bench_function("count_reply_for_metrics", |b| {
        b.iter(|| counts.count(Transport::Udp, std::hint::black_box(&reply)))
    });
    // The latency histogram: one observation per UDP batch (of n answers).
    g.bench_function("observe_answer_latency", |b| {
        b.iter(|| {
            counts.answered_in(
                Transport::Udp,
                std::hint::black_box(std::time::Duration::from_micros(7)),
                1,
            )
        })
    });

    let miss = query("nope.example.com.", RecordType::A);
    g.bench_function("udp_miss_nxdomain", |b| {
        b.iter(|| {
            handler.handle(
                &snapshot,
                std::hint::black_box(&miss),
                Transport::Udp,
                PEER,
                0,
            )
        })
    });

    let framed = tcp_frame(&hit);
    g.bench_function("tcp_framed_hit_a", |b| {
        b.iter_batched(
            || framed.clone(),
            |f| {
                let len = u16::from_be_bytes([f[0], f[1]]) as usize;
                let reply = handler
                    .handle(&snapshot, &f[2..2 + len], Transport::Tcp, PEER, 0)
                    .unwrap();
                tcp_frame(&reply)
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
