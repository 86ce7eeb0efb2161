//! The XDP compiler at scale: time to compile a whole snapshot into kernel
//! table entries, and the kernel map memory those entries take, for zones
//! of 100k and (with `cargo bench`) 1M names, each name with two A and one
//! AAAA record.
//!
//! Memory is key + value bytes per entry, summed over both table
//! generations the maps hold, divided by records; the kernel's own
//! per-element overhead in a hash map (about 50 bytes) comes on top.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hickory_proto::rr::rdata::{A, AAAA, NS, SOA};
use hickory_proto::rr::{Name, RData, Record};
use xdpdns::xdp::compile;
use xdpdns::zone::{Zone, ZoneStore};
use xdpdns_common::{Answer, LongKey, ShortKey, SHORT_NAME_MAX};

fn zone(names: u32) -> (Zone, usize) {
    let origin = Name::from_ascii("sd.example.").unwrap();
    let mut z = Zone::new(&origin);
    let n = |s: &str| Name::from_ascii(s).unwrap();
    let soa = SOA::new(
        n("ns1.sd.example."),
        n("h.sd.example."),
        1,
        3600,
        600,
        86400,
        30,
    );
    z.insert(Record::from_rdata(origin.clone(), 300, RData::SOA(soa)))
        .unwrap();
    z.insert(Record::from_rdata(
        origin,
        300,
        RData::NS(NS(n("ns1.sd.example."))),
    ))
    .unwrap();
    for i in 0..names {
        let owner = n(&format!("i{i}.svc{}.acme.sd.example.", i % 97));
        let (b, c) = ((i >> 8) as u8, i as u8);
        for rd in [
            RData::A(A::new(10, b, c, 1)),
            RData::A(A::new(10, b, c, 2)),
            RData::AAAA(AAAA::new(
                0x2001,
                0xdb8,
                0,
                0,
                0,
                0,
                i as u16,
                (i >> 16) as u16,
            )),
        ] {
            z.insert(Record::from_rdata(owner.clone(), 30, rd)).unwrap();
        }
    }
    let records = z.record_count();
    (z, records)
}

fn bench(c: &mut Criterion) {
    let full = std::env::args().any(|a| a == "--bench");
    let sizes: &[u32] = if full {
        &[100_000, 1_000_000]
    } else {
        &[1_000]
    };
    let mut g = c.benchmark_group("xdp_compile");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    for &names in sizes {
        let (z, records) = zone(names);
        let store = ZoneStore::with_zones(vec![z]);
        let snapshot = store.snapshot();
        let (table, _) = compile(&snapshot);
        let long = table
            .keys()
            .filter(|k| k.name.len() > SHORT_NAME_MAX)
            .count();
        let short = table.len() - long;
        let value = std::mem::size_of::<Answer>();
        let per_gen = short * (std::mem::size_of::<ShortKey>() + value)
            + long * (std::mem::size_of::<LongKey>() + value);
        eprintln!(
            "xdp_compile/{names}_names: {records} records -> {} entries ({short} short-key, {long} long-key); \
             key+value {:.1} MiB per generation, {:.1} MiB for both; {:.0} bytes per record",
            table.len(),
            per_gen as f64 / (1 << 20) as f64,
            2.0 * per_gen as f64 / (1 << 20) as f64,
            2.0 * per_gen as f64 / records as f64
        );
        g.throughput(Throughput::Elements(records as u64));
        g.bench_function(format!("compile_{names}_names"), |b| {
            b.iter(|| compile(&snapshot))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
