//! Per-packet kernel cost of the XDP program through BPF_PROG_TEST_RUN,
//! beside a minimal reflector measured in the same run (the floor any
//! in-kernel responder pays). Each program restores the saved frame first
//! (TOOLCHAIN.md); the restore alone is measured and subtracted.
//!
//! `cargo bench --bench xdp_kernel` (root). Under `cargo test` it runs one
//! short round as a smoke test.

#[path = "../tests/support/frames.rs"]
mod frames;
#[path = "../tests/support/signing.rs"]
mod signing;

use std::path::Path;
use std::str::FromStr;

use frames::{frame, Family, Quirks};
use hickory_proto::op::{Edns, Message, Query};
use hickory_proto::rr::rdata::opt::EdnsOption;
use hickory_proto::rr::{Name, RecordType};
use xdpdns::answers::compile;
use xdpdns::xdp::sys::test_run;
use xdpdns::xdp::FastPath;
use xdpdns::zone::{load_zone_str, ZoneStore};
use xdpdns_common::cookie;

fn query(name: &str) -> Vec<u8> {
    query_with(name, None)
}

fn query_with(name: &str, edns: Option<Edns>) -> Vec<u8> {
    query_type(name, RecordType::A, edns)
}

fn query_type(name: &str, rtype: RecordType, edns: Option<Edns>) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.id = 42;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), rtype));
    m.edns = edns;
    m.to_vec().unwrap()
}

/// EDNS0 as a validating resolver sends it: DO set, payload 1232, and a
/// COOKIE option with `cookie` (a client cookie, or client + server).
fn resolver_edns(cookie: &[u8]) -> Edns {
    let mut e = Edns::new();
    e.set_max_payload(1232).set_dnssec_ok(true);
    e.options_mut()
        .insert(EdnsOption::Unknown(10, cookie.to_vec()));
    e
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (runs, repeat) = if full { (7, 200_000) } else { (1, 1_000) };
    assert!(
        unsafe { libc::geteuid() } == 0,
        "needs root to load BPF programs"
    );

    let origin = Name::from_str("example.com.").unwrap();
    // The example zone plus a service with 60 members (960 bytes of
    // answers: a shared block, copied into the reply).
    let mut text = include_str!("../examples/example.com.zone").to_string();
    for i in 1..=60 {
        text += &format!("sixty 30 IN A 10.60.0.{i}\n");
    }
    for i in 1..=5 {
        text += &format!("five 30 IN A 10.5.0.{i}\n");
    }
    // The SRV's target gains an AAAA: two additional records.
    text += "i1.authcache 30 IN AAAA 2001:db8::101\n";
    let zone = load_zone_str(&text, &origin, Path::new("example.com.zone")).unwrap();
    // The same RRsets in a zone that rotates its answers (query ID 42:
    // the five start at their third record, the sixty at their 43rd).
    let pool_origin = Name::from_str("pool.test.").unwrap();
    let pool_text = text.replace("$ORIGIN example.com.", "$ORIGIN pool.test.");
    let pool = load_zone_str(&pool_text, &pool_origin, Path::new("pool.test.zone")).unwrap();
    // A zone signed by dnssec-signzone (ECDSA P-256): DO=1 hits are
    // answered from the signed variant (A + RRSIG, a small block).
    let signed_text = signing::small_signed_zone();
    let signed_zone = load_zone_str(
        &signed_text,
        &Name::from_str("signed.test.").unwrap(),
        Path::new("signed.test.zone"),
    )
    .unwrap();
    let store = ZoneStore::new();
    store.set_rotation(xdpdns::zone::RotationPolicy::new(&[pool_origin]));
    store.replace_zones(vec![zone, signed_zone, pool], &[], 0);
    let edns = xdpdns::wire::ServerEdns::default();
    let capacity = xdpdns::xdp::Capacity {
        entries: 1024,
        rrl_slots: 65_536,
        served: None,
    };
    let mut fp = FastPath::load_for_bench(capacity, 53, &edns).unwrap();
    fp.install(compile(&store.snapshot()).0).unwrap();
    let restore = fp.bench_program_fd("bench_restore").unwrap();
    let answer = fp.bench_program_fd("bench_answer").unwrap();
    let reflect = fp.bench_program_fd("bench_reflect").unwrap();
    let parse = fp.bench_program_fd("bench_parse").unwrap();
    let lookup = fp.bench_program_fd("bench_lookup").unwrap();
    let grow = fp.bench_program_fd("bench_grow").unwrap();

    let hit = frame(Family::V4, 0, &query("www.example.com."), Quirks::default());
    // A name in no served zone: passed up.
    let miss = frame(
        Family::V4,
        0,
        &query("nope.example.net."),
        Quirks::default(),
    );
    // Negative answers in the kernel: NXDOMAIN below the apex, NODATA
    // (AAAA at a name with an A only).
    let nxdomain = frame(
        Family::V4,
        0,
        &query("k3x9q2.example.com."),
        Quirks::default(),
    );
    let nodata = frame(
        Family::V4,
        0,
        &query_type("mail.example.com.", RecordType::AAAA, None),
        Quirks::default(),
    );
    // Other types: an SRV with its target's A and AAAA as additionals,
    // HTTPS NODATA at a name with addresses only (what browsers ask
    // first), and HTTPS NODATA after a CNAME (the chain, then the SOA
    // template).
    let srv = frame(
        Family::V4,
        0,
        &query_type("_http._tcp.authcache.example.com.", RecordType::SRV, None),
        Quirks::default(),
    );
    let https_nodata = frame(
        Family::V4,
        0,
        &query_type("www.example.com.", RecordType::HTTPS, None),
        Quirks::default(),
    );
    let chain_nodata = frame(
        Family::V4,
        0,
        &query_type("web.example.com.", RecordType::HTTPS, None),
        Quirks::default(),
    );
    let other = frame(
        Family::V4,
        0,
        &query("www.example.com."),
        Quirks {
            dst_port: Some(443),
            ..Quirks::default()
        },
    );

    // A resolver's first query (a client cookie: the kernel mints a server
    // cookie, one SipHash) and its next ones (a valid server cookie: the
    // kernel checks it, one SipHash, and echoes it).
    let client = [7u8; 8];
    let first = frame(
        Family::V4,
        0,
        &query_with("www.example.com.", Some(resolver_edns(&client))),
        Quirks::default(),
    );
    let sixty = frame(
        Family::V4,
        0,
        &query_with(
            "sixty.example.com.",
            Some({
                let mut e = Edns::new();
                e.set_max_payload(1232);
                e
            }),
        ),
        Quirks::default(),
    );
    let edns_1232 = || {
        let mut e = Edns::new();
        e.set_max_payload(1232);
        e
    };
    let five = frame(
        Family::V4,
        0,
        &query("five.example.com."),
        Quirks::default(),
    );
    let five_rotated = frame(Family::V4, 0, &query("five.pool.test."), Quirks::default());
    let sixty_rotated = frame(
        Family::V4,
        0,
        &query_with("sixty.pool.test.", Some(edns_1232())),
        Quirks::default(),
    );
    let now = xdpdns::clock::unix_secs() as u32;
    let server = cookie::mint(
        edns.cookies.key_words()[0],
        client,
        now,
        &cookie::ClientIp::V4(frames::CLIENT_V4),
    );
    let next = frame(
        Family::V4,
        0,
        &query_with(
            "www.example.com.",
            Some(resolver_edns(&[&client[..], &server[..]].concat())),
        ),
        Quirks::default(),
    );

    let signed_edns = |dnssec_ok: bool| {
        let mut e = resolver_edns(&client);
        e.set_dnssec_ok(dnssec_ok);
        e
    };
    let signed_do0 = frame(
        Family::V4,
        0,
        &query_with("www.signed.test.", Some(signed_edns(false))),
        Quirks::default(),
    );
    let signed_do1 = frame(
        Family::V4,
        0,
        &query_with("www.signed.test.", Some(signed_edns(true))),
        Quirks::default(),
    );

    let time = |fp: &mut FastPath, fd, f: &[u8], want: u32| -> f64 {
        fp.set_bench_frame(f).unwrap();
        let r = test_run(fd, f, repeat).unwrap();
        assert_eq!(r.action, want, "program verdict");
        r.duration_ns as f64
    };
    // Rate limiting: off; on with a rate no run reaches (the accounting
    // alone); on at one response a second, every limited one dropped
    // (slip 0) or every one slipped (slip 1).
    let rrl = |rate: u32, slip: u32| xdpdns_common::rrl::Settings {
        rate,
        slip,
        ipv4_prefix: 24,
        ipv6_prefix: 56,
        ..Default::default()
    };
    let (rrl_off, rrl_under, rrl_drop, rrl_slip) =
        (rrl(0, 0), rrl(1_000_000, 2), rrl(1, 0), rrl(1, 1));
    let (mut rrl_hit_ns, mut rrl_drop_ns, mut rrl_slip_ns) = (vec![], vec![], vec![]);
    // dnstap: hits with every kind sampled one in 100, and one in one
    // (every answer copied into the ring buffer). Fewer repeats, so the
    // samples of one run fit the 4 MiB ring, which is emptied after each.
    let tap_every = |n: u32| [n; xdpdns_common::tap::kind::COUNT];
    let mut ring = fp.take_tap_ring().expect("the tap ring");
    let tap_repeat = repeat.min(100_000);
    let (mut tap_off_ns, mut tap_100_ns, mut tap_all_ns) = (vec![], vec![], vec![]);
    let (mut nxdomain_ns, mut nodata_ns) = (vec![], vec![]);
    let (mut srv_ns, mut https_nodata_ns, mut chain_nodata_ns) = (vec![], vec![], vec![]);
    let (mut hit_ns, mut miss_ns, mut other_ns, mut floor_ns) = (vec![], vec![], vec![], vec![]);
    let (mut first_ns, mut next_ns, mut sixty_ns) = (vec![], vec![], vec![]);
    let (mut do0_ns, mut do1_ns) = (vec![], vec![]);
    let (mut five_ns, mut five_rot_ns, mut sixty_rot_ns) = (vec![], vec![], vec![]);
    let (mut parse_ns, mut lookup_ns, mut grow_ns) = (vec![], vec![], vec![]);
    for _ in 0..runs {
        // Interleaved so drift on a shared machine hits all figures alike.
        let base_hit = time(&mut fp, restore, &hit, 3);
        hit_ns.push(time(&mut fp, answer, &hit, 3) - base_hit);
        parse_ns.push(time(&mut fp, parse, &hit, 2) - base_hit);
        lookup_ns.push(time(&mut fp, lookup, &hit, 2) - base_hit);
        grow_ns.push(time(&mut fp, grow, &hit, 3) - base_hit);
        floor_ns.push(time(&mut fp, reflect, &hit, 3) - base_hit);
        let base_nx = time(&mut fp, restore, &nxdomain, 3);
        nxdomain_ns.push(time(&mut fp, answer, &nxdomain, 3) - base_nx);
        let base_nodata = time(&mut fp, restore, &nodata, 3);
        nodata_ns.push(time(&mut fp, answer, &nodata, 3) - base_nodata);
        let base_srv = time(&mut fp, restore, &srv, 3);
        srv_ns.push(time(&mut fp, answer, &srv, 3) - base_srv);
        let base_https = time(&mut fp, restore, &https_nodata, 3);
        https_nodata_ns.push(time(&mut fp, answer, &https_nodata, 3) - base_https);
        let base_chain = time(&mut fp, restore, &chain_nodata, 3);
        chain_nodata_ns.push(time(&mut fp, answer, &chain_nodata, 3) - base_chain);
        let base_miss = time(&mut fp, restore, &miss, 3);
        miss_ns.push(time(&mut fp, answer, &miss, 2) - base_miss);
        let base_other = time(&mut fp, restore, &other, 3);
        other_ns.push(time(&mut fp, answer, &other, 2) - base_other);
        let base_first = time(&mut fp, restore, &first, 3);
        first_ns.push(time(&mut fp, answer, &first, 3) - base_first);
        let base_next = time(&mut fp, restore, &next, 3);
        next_ns.push(time(&mut fp, answer, &next, 3) - base_next);
        let base_sixty = time(&mut fp, restore, &sixty, 3);
        sixty_ns.push(time(&mut fp, answer, &sixty, 3) - base_sixty);
        let base_sixty_rot = time(&mut fp, restore, &sixty_rotated, 3);
        sixty_rot_ns.push(time(&mut fp, answer, &sixty_rotated, 3) - base_sixty_rot);
        let base_five = time(&mut fp, restore, &five, 3);
        five_ns.push(time(&mut fp, answer, &five, 3) - base_five);
        let base_five_rot = time(&mut fp, restore, &five_rotated, 3);
        five_rot_ns.push(time(&mut fp, answer, &five_rotated, 3) - base_five_rot);
        let base_do0 = time(&mut fp, restore, &signed_do0, 3);
        do0_ns.push(time(&mut fp, answer, &signed_do0, 3) - base_do0);
        let base_do1 = time(&mut fp, restore, &signed_do1, 3);
        do1_ns.push(time(&mut fp, answer, &signed_do1, 3) - base_do1);
        fp.set_rrl(rrl_under).unwrap();
        rrl_hit_ns.push(time(&mut fp, answer, &hit, 3) - base_hit);
        fp.set_rrl(rrl_drop).unwrap();
        rrl_drop_ns.push(time(&mut fp, answer, &hit, 1) - base_hit);
        fp.set_rrl(rrl_slip).unwrap();
        rrl_slip_ns.push(time(&mut fp, answer, &hit, 3) - base_hit);
        fp.set_rrl(rrl_off).unwrap();
        let mut tap_time = |fp: &mut FastPath, every: u32| -> f64 {
            fp.set_tap(tap_every(every)).unwrap();
            fp.set_bench_frame(&hit).unwrap();
            let r = test_run(answer, &hit, tap_repeat).unwrap();
            assert_eq!(r.action, 3, "program verdict");
            while ring.next().is_some() {}
            r.duration_ns as f64 - base_hit
        };
        tap_off_ns.push(tap_time(&mut fp, 0));
        tap_100_ns.push(tap_time(&mut fp, 100));
        tap_all_ns.push(tap_time(&mut fp, 1));
        fp.set_tap(tap_every(0)).unwrap();
    }
    let tap_ratio = median(tap_100_ns.clone()) / median(tap_off_ns.clone());
    let tap_all_ratio = median(tap_all_ns.clone()) / median(tap_off_ns.clone());
    let floor = median(floor_ns);
    let (hit_m, parse_m, lookup_m) = (median(hit_ns.clone()), median(parse_ns), median(lookup_ns));
    let rrl_ratio = median(rrl_hit_ns.clone()) / hit_m;
    let grow_m = median(grow_ns);
    println!(
        "xdp_kernel: {runs} runs x {repeat} repeats, median ns/packet (save/restore subtracted)"
    );
    println!("| path | ns/packet | ratio to floor |");
    println!("| --- | --- | --- |");
    println!("| reflector floor (swap + XDP_TX, no lookup) | {floor:.1} | 1.00 |");
    for (what, v) in [
        ("hit (A, answered with XDP_TX)", hit_ns),
        ("hit, DO + client cookie (server cookie minted)", first_ns),
        ("hit, DO + valid server cookie (checked, echoed)", next_ns),
        (
            "hit, 60-member RRset, EDNS 1232 (960 bytes copied)",
            sixty_ns,
        ),
        (
            "hit, 60-member RRset rotated, EDNS 1232 (three copies)",
            sixty_rot_ns,
        ),
        ("hit, 5-member RRset (80 bytes, a small block)", five_ns),
        ("hit, 5-member RRset rotated", five_rot_ns),
        ("signed zone, DO=0 + client cookie", do0_ns),
        (
            "signed zone, DO=1 + client cookie (A + RRSIG from a small block)",
            do1_ns,
        ),
        ("hit, RRL on, under its rate", rrl_hit_ns),
        ("hit, RRL on, limited and dropped", rrl_drop_ns),
        (
            "hit, RRL on, limited and slipped (TC=1, question only)",
            rrl_slip_ns,
        ),
        (
            "hit, dnstap off (same repeats as the two below)",
            tap_off_ns,
        ),
        ("hit, dnstap sampling one in 100", tap_100_ns),
        (
            "hit, dnstap sampling every answer (both frames into the ring)",
            tap_all_ns,
        ),
        ("NXDOMAIN (a name below the apex)", nxdomain_ns),
        ("NODATA (AAAA at a name with an A only)", nodata_ns),
        (
            "SRV hit with two additionals (its target's A and AAAA)",
            srv_ns,
        ),
        ("HTTPS NODATA (a name with addresses only)", https_nodata_ns),
        (
            "HTTPS NODATA after a CNAME (chain, then the SOA template)",
            chain_nodata_ns,
        ),
        ("miss: a zone not served (passed)", miss_ns),
        ("non-DNS UDP (passed)", other_ns),
    ] {
        let m = median(v);
        println!("| {what} | {m:.1} | {:.2} |", m / floor);
    }
    println!();
    println!("Where the plain hit's time goes (differences of medians):");
    println!("| step | ns |");
    println!("| --- | --- |");
    println!("| parse: headers, question, key (global function `xdpdns_parse`) | {parse_m:.1} |");
    println!(
        "| lookup: hash of the 32-byte key, hash-table walk, key compare | {:.1} |",
        lookup_m - parse_m
    );
    println!(
        "| reply: grow, copy the answer, headers, checksums (`xdpdns_reply`) | {:.1} |",
        hit_m - lookup_m
    );
    println!("| of which `bpf_xdp_adjust_tail` alone | {grow_m:.1} |");
    println!();
    println!("hit with RRL on / hit with RRL off: {rrl_ratio:.2} (goal <= 1.20)");
    println!(
        "hit with dnstap sampling 1 in 100 / dnstap off: {tap_ratio:.3} (goal <= 1.05); every answer: {tap_all_ratio:.2}"
    );
}
