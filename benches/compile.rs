//! The XDP compiler at scale: time to compile a whole snapshot into kernel
//! table entries, and the kernel map memory those entries take, for zones
//! of 100k and (with `cargo bench`) 1M names: each name with two A and one
//! AAAA record, and a front-line mix of types (`mixed_zone`).
//!
//! Memory: with `--bench` as root, the table is installed in the kernel,
//! its maps sized from it as the server sizes them, and the kernel's own
//! accounting is read back (`memlock` in each map's fdinfo: the tiny
//! names' slot array, bucket arrays plus every element, with the hash
//! map's per-element header and list node), divided by records. Without
//! root, or in the smoke run, the elements' share is computed from their
//! sizes.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hickory_proto::rr::rdata::{A, AAAA, NS, SOA};
use hickory_proto::rr::{Name, RData, Record};
use xdpdns::answers::{compile, compile_all};
use xdpdns::xdp::FastPath;
use xdpdns::zone::{Zone, ZoneStore};
use xdpdns_common::slots::TinySlot;
use xdpdns_common::{
    Answer, AnswerBlock, LongKey, MiniBlock, ShortKey, SmallBlock, MINI_BLOCK_MAX, SHORT_NAME_MAX,
    SMALL_BLOCK_MAX, TINY_NAME_MAX,
};

/// `struct htab_elem` before the key, as the kernel lays it out (x86-64).
const HTAB_ELEM_HEADER: usize = 48;
/// The allocator's list node the kernel counts with each element of a
/// map without preallocation.
const LLIST_NODE: usize = 8;

fn element(key: usize, value: usize) -> usize {
    HTAB_ELEM_HEADER + key.div_ceil(8) * 8 + value.div_ceil(8) * 8 + LLIST_NODE
}

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

/// A zone of `names` names in a front-line type mix, in groups of ten:
/// six instances (A and AAAA), a service (SRV to three instances, whose
/// addresses are its additional records), a CNAME to an instance, a
/// tenant (MX to an instance, TXT), a web name (A and HTTPS).
fn mixed_zone(names: u32) -> (Zone, usize) {
    let origin = "mix.example.";
    let mut text = format!(
        "$ORIGIN {origin}\n$TTL 300\n@ SOA ns1 h 1 3600 600 86400 30\n@ NS ns1\nns1 A 192.0.2.1\n"
    );
    for g in 0..names.div_ceil(10) {
        let (b, c) = ((g >> 8) as u8, g as u8);
        for i in 0..6 {
            let (hi, lo) = (g >> 16, g & 0xffff);
            text += &format!(
                "i{i}.g{g} A 10.{b}.{c}.{i}\ni{i}.g{g} AAAA 2001:db8:{hi:x}:{lo:x}::{i}\n"
            );
        }
        for i in 0..3 {
            text += &format!("_http._tcp.svc.g{g} SRV 0 10 {} i{i}.g{g}\n", 8000 + i);
        }
        text += &format!("www.g{g} CNAME i0.g{g}\n");
        text += &format!("t.g{g} MX 10 i1.g{g}\nt.g{g} TXT \"v=spf1 mx -all\"\n");
        text += &format!("web.g{g} A 10.{b}.{c}.99\nweb.g{g} HTTPS 1 . alpn=h2\n");
    }
    let z = xdpdns::zone::load_zone_str(
        &text,
        &Name::from_ascii(origin).unwrap(),
        std::path::Path::new("mix.zone"),
    )
    .unwrap();
    let records = z.record_count();
    (z, records)
}

/// A zone of so many names, and its record count.
type MakeZone = fn(u32) -> (Zone, usize);

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
    let shapes: [(&str, MakeZone); 2] = [("", zone), ("mixed_", mixed_zone)];
    for ((shape, make), &names) in shapes
        .iter()
        .flat_map(|s| sizes.iter().map(move |n| (s, n)))
    {
        let (z, records) = make(names);
        let store = ZoneStore::with_zones(vec![z]);
        let snapshot = store.snapshot();
        let (table, _) = compile(&snapshot);
        let count = |lo: usize, hi: usize| {
            table
                .keys()
                .filter(|k| k.name.len() > lo && k.name.len() <= hi)
                .count()
        };
        let (tiny, short, long) = (
            count(0, TINY_NAME_MAX),
            count(TINY_NAME_MAX, SHORT_NAME_MAX),
            count(SHORT_NAME_MAX, 255),
        );
        let mut sections: Vec<&[u8]> = table.values().filter_map(|c| c.block.as_deref()).collect();
        sections.sort();
        sections.dedup();
        let value = std::mem::size_of::<Answer>();
        // Tiny names in slots (key and value, no header); the rest are
        // hash map elements.
        let per_gen = tiny * std::mem::size_of::<TinySlot>()
            + short * element(std::mem::size_of::<ShortKey>(), value)
            + long * element(std::mem::size_of::<LongKey>(), value);
        let mini = sections
            .iter()
            .filter(|s| s.len() <= MINI_BLOCK_MAX)
            .count();
        let small = sections
            .iter()
            .filter(|s| s.len() <= SMALL_BLOCK_MAX)
            .count();
        let computed = per_gen
            + mini * element(4, std::mem::size_of::<MiniBlock>())
            + (small - mini) * element(4, std::mem::size_of::<SmallBlock>())
            + (sections.len() - small) * element(4, std::mem::size_of::<AnswerBlock>());
        eprintln!(
            "xdp_compile/{shape}{names}_names: {records} records -> {} entries ({tiny} tiny-, {short} short-, \
             {long} long-key; {} blocks); elements (computed, spare slots and bucket arrays not counted) {:.1} MiB, {:.0} bytes per record",
            table.len(),
            sections.len(),
            computed as f64 / (1 << 20) as f64,
            computed as f64 / records as f64
        );
        if full && unsafe { libc::geteuid() } == 0 {
            let edns = xdpdns::wire::ServerEdns::default();
            // As the server loads it: the maps sized from the table.
            let capacity = xdpdns::xdp::Capacity {
                served: Some(xdpdns::xdp::Served::of(&table)),
                ..xdpdns::xdp::Capacity::from(table.len() as u32)
            };
            let mut fp = FastPath::load(capacity, 53, &edns).unwrap();
            fp.install(table.clone()).unwrap();
            let maps = fp.table_memory();
            let total: u64 = maps.iter().map(|(_, b)| b).sum();
            eprintln!(
                "xdp_compile/{shape}{names}_names: kernel memlock {:.1} MiB ({maps:?}), {:.0} bytes per record",
                total as f64 / (1 << 20) as f64,
                total as f64 / records as f64
            );
        }
        g.throughput(Throughput::Elements(records as u64));
        // What the server compiles: the table and the index of names
        // whose entries hold other names' records. Freeing them is not
        // part of compiling: the server drops a replaced table after the
        // install. It is timed apart.
        g.bench_function(format!("compile_{shape}{names}_names"), |b| {
            b.iter_with_large_drop(|| compile_all(&snapshot))
        });
        let start = std::time::Instant::now();
        drop(table);
        eprintln!(
            "xdp_compile/{shape}{names}_names: dropping a compiled table takes {:?} (not in the compile time)",
            start.elapsed()
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
