//! Zone-file load (parse + checks + build) of a generated 100k-record zone,
//! and of a signed one of 100k records (25k names, each with A, its RRSIG,
//! NSEC and its RRSIG) beside it.

#[path = "../tests/support/signing.rs"]
mod signing;

use std::fmt::Write;
use std::path::Path;
use std::str::FromStr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hickory_proto::rr::Name;
use xdpdns::zone::{check_zone, parse_zone_str};

/// 100 000 records: service names with two A and one AAAA each, plus apex.
fn zone_text(records: usize) -> String {
    let mut s = String::from(
        "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n",
    );
    let mut n = 3;
    let mut i = 0u32;
    while n < records {
        let _ = writeln!(s, "svc{i}.inst A 10.{}.{}.1", (i >> 8) & 0xff, i & 0xff);
        let _ = writeln!(s, "        A 10.{}.{}.2", (i >> 8) & 0xff, i & 0xff);
        let _ = writeln!(s, "        AAAA 2001:db8::{:x}", i);
        n += 3;
        i += 1;
    }
    s
}

fn bench(c: &mut Criterion) {
    let origin = Name::from_str("example.com.").unwrap();
    let path = Path::new("bench.zone");
    let text = zone_text(100_000);
    let mut g = c.benchmark_group("zone_load");
    g.sample_size(10);
    g.throughput(Throughput::Elements(100_000));
    g.bench_function("parse_check_build_100k_records", |b| {
        b.iter(|| {
            let records = parse_zone_str(&text, &origin, path).unwrap();
            check_zone(&origin, path, &records).unwrap()
        })
    });
    // Under `cargo test` (one iteration as a smoke test) a small zone
    // keeps the signing short.
    let full = std::env::args().any(|a| a == "--bench");
    let names = if full { 25_000 } else { 250 };
    let mut unsigned = String::from(
        "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\n\
         ns1 A 192.0.2.1\n",
    );
    for i in 0..names {
        let _ = writeln!(
            unsigned,
            "svc{i}.inst A 10.{}.{}.1",
            (i >> 8) & 0xff,
            i & 0xff
        );
    }
    let signed_text = signing::sign("example.com.", &unsigned, "ECDSAP256SHA256", &[]).text();
    let signed_records = parse_zone_str(&signed_text, &origin, path).unwrap().len();
    println!("zone_load: signed zone of {signed_records} records");
    g.throughput(Throughput::Elements(signed_records as u64));
    g.bench_function("parse_check_build_100k_records_signed", |b| {
        b.iter(|| {
            let records = parse_zone_str(&signed_text, &origin, path).unwrap();
            check_zone(&origin, path, &records).unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
