//! The XDP program, loaded for real and run through BPF_PROG_TEST_RUN (no
//! interface needed): every kernel answer must be byte-identical to the
//! fallback server's, and everything else must pass unchanged.
//! Needs root (CAP_BPF); CI runs as root.

use crate::support::frames;

use std::net::IpAddr;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use frames::*;
use hickory_proto::op::{Edns, Message, Query};
use hickory_proto::rr::rdata::opt::EdnsOption;
use hickory_proto::rr::{DNSClass, LowerName, Name, RecordType};
use xdpdns::answers::{compile, compile_diffs, table_tag};
use xdpdns::cookies::CookieSecrets;
use xdpdns::handler::{Handler, Transport};
use xdpdns::wire::ServerEdns;
use xdpdns::xdp::sys::test_run;
use xdpdns::xdp::{FastPath, PinDir, XdpError};
use xdpdns::zone::{load_zone_str, Snapshot, ZoneStore};
use xdpdns_common::cookie::{self as cookie, ClientIp};

const XDP_PASS: u32 = 2;
const XDP_TX: u32 = 3;
const UDP_PAYLOAD: u16 = 1232;

fn long_label_name(total: usize) -> String {
    // Labels of up to 63 bytes until the wire form reaches `total` bytes
    // (including "example.com." = 13 bytes).
    let mut left = total - 13;
    let mut labels = Vec::new();
    while left > 0 {
        let n = (left - 1).min(63);
        labels.push("x".repeat(n));
        left -= n + 1;
    }
    format!("{}.example.com.", labels.join("."))
}

fn zone_text() -> String {
    let mut z = String::from(
        "$ORIGIN example.com.\n$TTL 300\n\
         @ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\n@ A 192.0.2.10\n@ MX 10 mail\n\
         ns1 A 192.0.2.1\nmail A 192.0.2.25\nmail AAAA 2001:db8::25\n\
         www 60 A 192.0.2.80\nwww 60 A 192.0.2.81\nwww 120 AAAA 2001:db8::80\n\
         ab A 192.0.2.2\nabc AAAA 2001:db8::3\n\
         alias CNAME www\n*.wild A 192.0.2.99\nsub NS ns.sub\nns.sub A 192.0.2.53\n\
         txt TXT hello\na.b.ent A 192.0.2.7\n",
    );
    for i in 1..=16 {
        z += &format!("sixteen A 10.0.0.{i}\n");
    }
    for i in 1..=9 {
        z += &format!("nine AAAA 2001:db8::{i}\n");
    }
    for i in 1..=20 {
        z += &format!("twenty A 10.0.1.{i}\n");
    }
    // Services with 60 members: 960 bytes of A (a block, fits 1232 but
    // not 512) and 1,680 bytes of AAAA (larger than our 1232).
    for i in 1..=60 {
        z += &format!("sixty A 10.0.3.{i}\nsixty AAAA 2001:db8::3:{i:x}\n");
    }
    // Long-key table: 63, 100 and 255-byte names; the last with 16
    // records, so it fits with EDNS but not in 512 bytes.
    z += &format!("{} A 192.0.2.63\n", long_label_name(63));
    z += &format!("{} AAAA 2001:db8::100\n", long_label_name(100));
    for i in 1..=16 {
        z += &format!("{} A 10.0.2.{i}\n", long_label_name(255));
    }
    z
}

/// The unix second both paths answer at: the kernel's clock is pinned
/// to it (`Rig::pin_clock`) and the fallback is told it.
const NOW: u64 = 1_767_225_600;

/// The cookie secrets of RFC 9018 Appendix A: current and previous.
const SECRET: &str = "e5e973e5a6b2a43f48e7dc849e37bfcf\n445536bcd2513298075a5d379663c962\n";
const NSID: &[u8] = b"ns1.test";

struct Rig {
    fast: FastPath,
    store: ZoneStore,
    handler: Handler,
}

fn rig(text: &str) -> Rig {
    assert!(
        unsafe { libc::geteuid() } == 0,
        "the XDP tests load BPF programs and need root (CI runs as root)"
    );
    let store = rig_store(text);
    let handler = Handler {
        edns: ServerEdns {
            udp_payload: UDP_PAYLOAD,
            nsid: Some(NSID.to_vec()),
            cookies: CookieSecrets::parse(SECRET, Path::new("secret")).unwrap(),
        },
        ..Handler::default()
    };
    let mut fast = FastPath::load(1024, 53, &handler.edns).expect("load the XDP program");
    fast.install(compile(&store.snapshot()).0).unwrap();
    let mut r = Rig {
        fast,
        store,
        handler,
    };
    r.pin_clock(NOW);
    r
}

impl Rig {
    /// Sets the kernel's wall clock to the middle of second `unix`.
    fn pin_clock(&mut self, unix: u64) {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
        let mono = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
        let offset = (unix * 1_000_000_000 + 500_000_000).wrapping_sub(mono);
        self.fast.set_clock(offset).unwrap();
    }

    /// The fallback's reply to `dns` from the test client of `family`.
    fn expected(&self, snap: &Snapshot, dns: &[u8], family: Family) -> Vec<u8> {
        self.handler
            .handle(snap, dns, Transport::Udp, client_ip(family), NOW)
            .unwrap()
    }
}

fn client_ip(family: Family) -> IpAddr {
    match family {
        Family::V4 => IpAddr::from(CLIENT_V4),
        Family::V6 => IpAddr::from(CLIENT_V6),
    }
}

fn query(name: &Name, rtype: RecordType, edns: Option<Edns>, id: u16) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.id = id;
    m.metadata.recursion_desired = id.is_multiple_of(2);
    m.metadata.checking_disabled = id.is_multiple_of(3);
    m.add_query(Query::query(name.clone(), rtype));
    m.edns = edns;
    m.to_vec().unwrap()
}

fn edns(payload: u16) -> Edns {
    let mut e = Edns::new();
    e.set_max_payload(payload);
    e
}

/// Deterministic 0x20 case randomisation.
fn randomise_case(name: &str, seed: &mut u64) -> Name {
    Name::from_ascii(crate::support::randomise_case(name, seed)).unwrap()
}

/// Whether the fallback's reply is a direct positive answer from an
/// existing node (not synthesised, not a CNAME) — what the kernel must
/// answer when it fits.
fn is_direct_hit(snap: &Snapshot, reply: &[u8], qname: &Name, qtype: RecordType) -> bool {
    let m = Message::from_vec(reply).unwrap();
    let key = LowerName::new(qname);
    let exists = snap.find_zone(&key).is_some_and(|z| z.node(&key).is_some());
    exists
        && m.metadata.authoritative
        && !m.metadata.truncation
        && !m.answers.is_empty()
        && m.answers.iter().all(|r| r.record_type() == qtype)
}

#[test]
fn kernel_answers_are_byte_identical_to_the_fallback() {
    let r = rig(&zone_text());
    let snap = r.store.snapshot();
    let mut names: Vec<String> = snap
        .zones()
        .flat_map(|z| {
            z.nodes()
                .map(|(k, _)| Name::from(k).to_ascii())
                .collect::<Vec<_>>()
        })
        .collect();
    names.push("nope.example.com.".into());
    names.push("x.wild.example.com.".into());
    names.sort();

    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let (mut total, mut tx, mut hits, mut id) = (0u32, 0u32, 0u32, 0u16);
    let mut must_tx_missed = Vec::new();
    for name in &names {
        for qtype in [RecordType::A, RecordType::AAAA] {
            for payload in [None, Some(512), Some(1232), Some(4096)] {
                for family in [Family::V4, Family::V6] {
                    for vlans in 0..=2 {
                        id = id.wrapping_add(1);
                        let qname = randomise_case(name, &mut seed);
                        let dns = query(&qname, qtype, payload.map(edns), id);
                        let expected = r.expected(&snap, &dns, family);
                        let f = frame(family, vlans, &dns, Quirks::default());
                        let out = test_run(r.fast.program_fd(), &f, 1).unwrap();
                        total += 1;
                        let hit = is_direct_hit(&snap, &expected, &qname, qtype);
                        hits += hit as u32;
                        match out.action {
                            XDP_TX => {
                                tx += 1;
                                let got = check_reply(family, vlans, &f, &out.frame);
                                assert_eq!(
                                    got, expected,
                                    "{qname} {qtype} edns={payload:?} {family:?} vlans={vlans}"
                                );
                            }
                            XDP_PASS => {
                                assert_eq!(out.frame, f, "passed frames are unchanged");
                                if hit {
                                    must_tx_missed.push(format!("{qname} {qtype} {payload:?}"));
                                }
                            }
                            other => panic!("unexpected XDP action {other}"),
                        }
                    }
                }
            }
        }
    }
    assert!(
        must_tx_missed.is_empty(),
        "hits passed up: {must_tx_missed:#?}"
    );
    println!(
        "differential: {total} queries, {tx} answered in-kernel ({:.1}%), {hits} direct hits in the fallback",
        100.0 * tx as f64 / total as f64
    );
    assert!(tx > 0);
    let c = r.fast.counters().unwrap();
    let negatives = c.nxdomain.iter().sum::<u64>()
        + c.nodata.iter().sum::<u64>()
        + c.referrals.iter().sum::<u64>();
    assert_eq!(
        (c.answered_a + c.answered_aaaa + c.answered_other + negatives) as u32,
        tx,
        "counters agree: {c}"
    );
}

/// In a zone signed by `dnssec-signzone` with ECDSA, Ed25519 and RSA keys,
/// DO=1 queries for A/AAAA are answered in the kernel from the signed
/// variants (RRset + RRSIGs), byte for byte as the fallback answers them;
/// DO=0 ones from the plain entries; a name whose RRset has no RRSIG goes
/// up.
#[test]
fn signed_zones_answer_do_queries_in_the_kernel_like_the_fallback() {
    use super::dnssec::{sign_zone, Denial};
    let mut text = String::from(
        "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n\
         @ NS ns1\nns1 A 192.0.2.1\nwww A 192.0.2.80\nwww AAAA 2001:db8::80\n\
         a-rather-long-name-for-the-short-key-table-of-xdpdns A 192.0.2.81\n",
    );
    for i in 1..=12 {
        text += &format!("twelve A 10.0.12.{i}\n");
    }
    let names = [
        "ns1.example.com.",
        "www.example.com.",
        "twelve.example.com.",
        "a-rather-long-name-for-the-short-key-table-of-xdpdns.example.com.",
    ];
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    for algorithm in ["ECDSAP256SHA256", "ED25519", "RSASHA256"] {
        let signed = sign_zone("example.com.", &text, algorithm, Denial::Nsec);
        let r = rig(&std::fs::read_to_string(&signed.file).unwrap());
        let snap = r.store.snapshot();
        let (mut id, mut signed_tx, mut missed) = (0u16, 0u64, Vec::new());
        for name in names {
            for qtype in [RecordType::A, RecordType::AAAA] {
                for (payload, dnssec_ok) in [(1232, true), (4096, true), (512, true), (1232, false)]
                {
                    for family in [Family::V4, Family::V6] {
                        id = id.wrapping_add(1);
                        let qname = randomise_case(name, &mut seed);
                        let dns = query(&qname, qtype, Some(opt(payload, dnssec_ok, &[])), id);
                        let expected = r.expected(&snap, &dns, family);
                        let f = frame(family, 0, &dns, Quirks::default());
                        let out = test_run(r.fast.program_fd(), &f, 1).unwrap();
                        let what = format!("{algorithm} {qname} {qtype} {payload} DO={dnssec_ok}");
                        match out.action {
                            XDP_TX => {
                                let got = check_reply(family, 0, &f, &out.frame);
                                assert_eq!(got, expected, "{what}");
                                signed_tx += u64::from(dnssec_ok);
                            }
                            XDP_PASS => {
                                if is_direct_hit(&snap, &expected, &qname, qtype)
                                    && expected.len() <= payload as usize
                                {
                                    missed.push(what);
                                }
                            }
                            other => panic!("unexpected XDP action {other}"),
                        }
                    }
                }
            }
        }
        assert!(missed.is_empty(), "signed hits passed up: {missed:#?}");
        let c = r.fast.counters().unwrap();
        assert!(
            signed_tx >= 10,
            "{algorithm}: {signed_tx} DO=1 answers in the kernel"
        );
        assert_eq!(c.answered_signed, signed_tx, "{algorithm}: counted: {c}");
    }
}

/// DO=1 queries for a type a name of a signed zone lacks, and for names
/// that do not exist (one and two labels below a name, before the first
/// child and after the last, below an empty non-terminal), are answered
/// in the kernel (the zone's signed SOA, then the NSEC records that prove
/// it, each with its RRSIG), byte for byte as the fallback answers them;
/// an NSEC3 zone's go up.
#[test]
fn signed_negative_answers_are_answered_in_the_kernel_like_the_fallback() {
    use super::dnssec::{sign_zone, Denial};
    use hickory_proto::op::ResponseCode;
    let text = "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n\
         @ NS ns1\nns1 A 192.0.2.1\nwww A 192.0.2.80\nwww TXT \"web\"\n\
         a-rather-long-name-for-the-short-key-table-of-xdpdns A 192.0.2.81\n\
         _sip._tcp SRV 0 5 5060 www\nsub NS ns.sub\nns.sub A 192.0.2.53\n\
         a.b.deep A 192.0.2.9\n";
    let names = [
        "example.com.",
        "www.example.com.",
        "_sip._tcp.example.com.",
        "sub.example.com.",
        "a-rather-long-name-for-the-short-key-table-of-xdpdns.example.com.",
        // Names that do not exist.
        "nope.example.com.",
        "0.example.com.",
        "zzzz.example.com.",
        "wwx.example.com.",
        "x.www.example.com.",
        "y.x.www.example.com.",
        "_udp._tcp.example.com.",
        "x.deep.example.com.",
        "c.b.deep.example.com.",
        "a-rather-long-name-for-the-short-key-table-of-xdpdns-2.example.com.",
        "x.a-rather-long-name-for-the-short-key-table-of-xdpdns.example.com.",
    ];
    let types = [
        RecordType::AAAA,
        RecordType::HTTPS,
        RecordType::MX,
        RecordType::DS,
        RecordType::A,
    ];
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for (algorithm, denial) in [
        ("ECDSAP256SHA256", Denial::Nsec),
        ("ED25519", Denial::Nsec),
        ("ECDSAP256SHA256", Denial::Nsec3),
    ] {
        let nsec3 = matches!(denial, Denial::Nsec3);
        let signed = sign_zone("example.com.", text, algorithm, denial);
        let r = rig(&std::fs::read_to_string(&signed.file).unwrap());
        let snap = r.store.snapshot();
        let (mut id, mut negative_tx, mut nxdomain_tx) = (0u16, 0u64, 0u64);
        let mut missed = Vec::new();
        for name in names {
            for qtype in types {
                for payload in [1232, 4096, 512] {
                    for family in [Family::V4, Family::V6] {
                        id = id.wrapping_add(1);
                        let qname = randomise_case(name, &mut seed);
                        let dns = query(&qname, qtype, Some(opt(payload, true, &[])), id);
                        let expected = r.expected(&snap, &dns, family);
                        let m = Message::from_vec(&expected).unwrap();
                        let nsec = |owner: Option<&Name>| {
                            m.authorities.iter().any(|r| {
                                r.record_type() == RecordType::NSEC
                                    && owner.is_none_or(|o| {
                                        LowerName::new(&r.name) == LowerName::new(o)
                                    })
                            })
                        };
                        let rcode = m.metadata.response_code;
                        let exact = m.metadata.authoritative
                            && !m.metadata.truncation
                            && m.answers.is_empty();
                        let nodata = exact && rcode == ResponseCode::NoError && nsec(Some(&qname));
                        let nxdomain = exact && rcode == ResponseCode::NXDomain && nsec(None);
                        let f = frame(family, 0, &dns, Quirks::default());
                        let out = test_run(r.fast.program_fd(), &f, 1).unwrap();
                        let what = format!("{algorithm} {qname} {qtype} {payload}");
                        match out.action {
                            XDP_TX => {
                                let got = check_reply(family, 0, &f, &out.frame);
                                assert_eq!(got, expected, "{what}");
                                let negative = m.answers.is_empty();
                                assert!(!(nsec3 && negative), "{what}: NSEC3 denial in the kernel");
                                negative_tx += u64::from(nodata || nxdomain);
                                nxdomain_tx += u64::from(nxdomain);
                            }
                            XDP_PASS => {
                                // The apex's DS is its parent's: the
                                // full handler's, signed or not.
                                let apex_ds = qtype == RecordType::DS && name == names[0];
                                if (nodata || nxdomain)
                                    && !apex_ds
                                    && expected.len() <= payload as usize
                                {
                                    missed.push(what);
                                }
                            }
                            other => panic!("unexpected XDP action {other}"),
                        }
                    }
                }
            }
        }
        if nsec3 {
            continue;
        }
        assert!(
            missed.is_empty(),
            "signed denials passed up: {missed:#?} {}",
            r.fast.counters().unwrap()
        );
        assert!(
            nxdomain_tx >= 100,
            "{algorithm}: {nxdomain_tx} signed NXDOMAIN in the kernel"
        );
        assert!(
            negative_tx >= 150,
            "{algorithm}: {negative_tx} signed denials in the kernel"
        );
        let c = r.fast.counters().unwrap();
        assert!(
            c.answered_signed >= negative_tx,
            "{algorithm}: counted as signed: {c}"
        );
    }
}

/// A zone signed online shaped like a registry's (services with rotated
/// address sets, SRV records, instance names with TXT ids), asked as a
/// validating resolver asks (DO, a client cookie or a valid server
/// cookie, 0x20 case): the names it serves, types they lack, and random
/// names that do not exist below the apex and below services. At least
/// 95 % are answered in the kernel, every one byte for byte as the
/// fallback answers it.
#[test]
fn resolver_queries_for_a_signed_registry_zone_are_answered_in_the_kernel() {
    use hickory_proto::dnssec::crypto::EcdsaSigningKey;
    use hickory_proto::dnssec::Algorithm;
    use xdpdns_core::signing::{ActiveKey, KeyRole, SignPolicy, ZoneSigner};
    let mut text = String::from(
        "$ORIGIN example.com.\n$TTL 30\n@ 300 SOA ns1 hostmaster 1 3600 600 86400 30\n\
         @ 300 NS ns1\nns1 300 A 192.0.2.1\n",
    );
    let services = 12;
    for s in 0..services {
        for i in 0..3 {
            text += &format!("svc{s} A 10.{s}.0.{i}\n");
            text +=
                &format!("i-{s}-{i}.svc{s} A 10.{s}.0.{i}\ni-{s}-{i}.svc{s} TXT \"id-{s}-{i}\"\n");
            text += &format!("_http._tcp.svc{s} SRV 0 10 80{i} i-{s}-{i}.svc{s}\n");
        }
        text += &format!("svc{s} AAAA 2001:db8::{s:x}\n");
    }
    let origin = Name::from_str("example.com.").unwrap();
    let mut zone = load_zone_str(&text, &origin, Path::new("registry")).unwrap();
    zone.set_rotation(true);
    let store = ZoneStore::with_zones(vec![zone]);
    let pkcs8 = EcdsaSigningKey::generate_pkcs8(Algorithm::ECDSAP256SHA256).unwrap();
    let k = EcdsaSigningKey::from_pkcs8(&pkcs8, Algorithm::ECDSAP256SHA256).unwrap();
    let key = ActiveKey::new(KeyRole::Csk, Arc::new(k)).unwrap();
    let signer = ZoneSigner::new(vec![key], SignPolicy::default());
    store.set_signer(&origin, Some(Arc::new(signer)), NOW);
    let mut r = rig("$ORIGIN example.com.\n@ SOA ns1 hostmaster 1 3600 600 86400 30\n@ NS ns1\nns1 A 192.0.2.1\n");
    r.store = store;
    let snap = r.store.snapshot();
    r.fast.install(compile(&snap).0).unwrap();

    let mut seed = 0x51_7cc1_b727_220a_u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut total, mut in_kernel, mut denials) = (0u32, 0u32, 0u32);
    let mut passed = Vec::new();
    for id in 0..1200u16 {
        let n = next();
        let svc = n % services;
        let inst = (n >> 8) % 3;
        let random = format!("{:x}", next() & 0xff_ffff_ffff);
        let (name, qtype) = match n >> 16 & 15 {
            0..=2 => (format!("svc{svc}.example.com."), RecordType::A),
            3 => (format!("svc{svc}.example.com."), RecordType::AAAA),
            4 => (format!("_http._tcp.svc{svc}.example.com."), RecordType::SRV),
            5 => (
                format!("i-{svc}-{inst}.svc{svc}.example.com."),
                RecordType::TXT,
            ),
            6 => (
                format!("i-{svc}-{inst}.svc{svc}.example.com."),
                RecordType::A,
            ),
            // Types the names lack.
            7 => (format!("svc{svc}.example.com."), RecordType::HTTPS),
            8 => (
                format!("i-{svc}-{inst}.svc{svc}.example.com."),
                RecordType::AAAA,
            ),
            // Names that do not exist.
            9..=11 => (format!("{random}.example.com."), RecordType::A),
            12 => (format!("{random}.example.com."), RecordType::HTTPS),
            13 => (format!("{random}.svc{svc}.example.com."), RecordType::A),
            14 => (format!("x.{random}.example.com."), RecordType::AAAA),
            _ => (format!("{random}.svc{svc}.example.com."), RecordType::AAAA),
        };
        let family = if id % 2 == 0 { Family::V4 } else { Family::V6 };
        let cookie = match id % 3 {
            0 => CLIENT_COOKIE.to_vec(),
            _ => fresh_cookie_at(&r, family, NOW),
        };
        let qname = randomise_case(&name, &mut n.clone());
        let dns = query(
            &qname,
            qtype,
            Some(opt(1232, true, &[(COOKIE, cookie)])),
            id,
        );
        let expected = r.expected(&snap, &dns, family);
        let f = frame(family, 0, &dns, Quirks::default());
        let out = test_run(r.fast.program_fd(), &f, 1).unwrap();
        total += 1;
        let m = Message::from_vec(&expected).unwrap();
        denials += u32::from(m.answers.is_empty());
        match out.action {
            XDP_TX => {
                in_kernel += 1;
                let got = check_reply(family, 0, &f, &out.frame);
                assert_eq!(got, expected, "{qname} {qtype}");
            }
            XDP_PASS => passed.push(format!("{qname} {qtype}")),
            other => panic!("unexpected XDP action {other}"),
        }
    }
    let share = f64::from(in_kernel) / f64::from(total);
    println!(
        "signed registry zone: {in_kernel} of {total} resolver queries in the kernel ({:.1} %), \
         {denials} of them denials; passed: {passed:?}",
        share * 100.0
    );
    assert!(denials > total / 3, "{denials} denials of {total}");
    assert!(share >= 0.95, "{share}: passed {passed:#?}");
}

/// A query for www A with the given mutation applied to the DNS bytes.
fn mutated(f: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
    let mut q = query(
        &Name::from_ascii("www.example.com.").unwrap(),
        RecordType::A,
        None,
        77,
    );
    f(&mut q);
    q
}

#[test]
fn negative_corpus_passes_unchanged() {
    let r = rig(&zone_text());
    let www = Name::from_ascii("www.example.com.").unwrap();
    let mut v1 = edns(1232);
    v1.set_version(1);
    let long_name = long_label_name(255);
    let mut cases: Vec<(&str, Vec<u8>, Quirks)> = vec![
        ("QR=1", mutated(|q| q[2] |= 0x80), Quirks::default()),
        ("QDCOUNT 0", mutated(|q| q[5] = 0), Quirks::default()),
        ("QDCOUNT 2", mutated(|q| q[5] = 2), Quirks::default()),
        ("ANCOUNT 1", mutated(|q| q[7] = 1), Quirks::default()),
        ("NSCOUNT 1", mutated(|q| q[9] = 1), Quirks::default()),
        (
            "ARCOUNT 1 without OPT",
            mutated(|q| q[11] = 1),
            Quirks::default(),
        ),
        ("label > 63", mutated(|q| q[12] = 64), Quirks::default()),
        (
            "pointer in question",
            mutated(|q| {
                q.truncate(12);
                q.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]);
            }),
            Quirks::default(),
        ),
        (
            "pointer after a label",
            mutated(|q| {
                q.truncate(16);
                q.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]);
            }),
            Quirks::default(),
        ),
        (
            "name > 255",
            mutated(|q| {
                q.truncate(12);
                for _ in 0..5 {
                    q.push(60);
                    q.extend_from_slice(&[b'a'; 60]);
                }
                q.extend_from_slice(&[0, 0, 1, 0, 1]);
            }),
            Quirks::default(),
        ),
        (
            "truncated name",
            mutated(|q| q.truncate(18)),
            Quirks::default(),
        ),
        (
            "no type/class",
            mutated(|q| q.truncate(q.len() - 4)),
            Quirks::default(),
        ),
        (
            "trailing garbage",
            mutated(|q| q.push(0)),
            Quirks::default(),
        ),
        (
            "EDNS version 1",
            query(&www, RecordType::A, Some(v1), 1),
            Quirks::default(),
        ),
        // A data type the name lacks is NODATA in the kernel (the front-
        // line tests); RRSIG and DS are the full handler's.
        (
            "type RRSIG",
            query(&www, RecordType::RRSIG, None, 1),
            Quirks::default(),
        ),
        // The apex's DS is its parent's, which this server may serve.
        (
            "DS at the apex",
            query(
                &Name::from_ascii("example.com.").unwrap(),
                RecordType::DS,
                None,
                1,
            ),
            Quirks::default(),
        ),
        (
            "type ANY",
            query(&www, RecordType::ANY, None, 1),
            Quirks::default(),
        ),
        // A type a CNAME's owner is not compiled for (neither an
        // address type nor HTTPS nor one its target has).
        (
            "type TXT at a CNAME",
            query(
                &Name::from_ascii("alias.example.com.").unwrap(),
                RecordType::TXT,
                None,
                1,
            ),
            Quirks::default(),
        ),
        (
            "miss: a zone not served",
            query(
                &Name::from_ascii("nope.example.net.").unwrap(),
                RecordType::A,
                None,
                1,
            ),
            Quirks::default(),
        ),
        (
            "NODATA",
            query(
                &Name::from_ascii("ns1.example.com.").unwrap(),
                RecordType::AAAA,
                None,
                1,
            ),
            Quirks::default(),
        ),
        (
            "wildcard",
            query(
                &Name::from_ascii("a.wild.example.com.").unwrap(),
                RecordType::A,
                None,
                1,
            ),
            Quirks::default(),
        ),
        (
            "below a cut",
            query(
                &Name::from_ascii("ns.sub.example.com.").unwrap(),
                RecordType::A,
                None,
                1,
            ),
            Quirks::default(),
        ),
        (
            "oversize without EDNS",
            query(
                &Name::from_ascii(&long_name).unwrap(),
                RecordType::A,
                None,
                1,
            ),
            Quirks::default(),
        ),
        (
            "IPv4 more fragments",
            mutated(|_| {}),
            Quirks {
                more_fragments: true,
                ..Quirks::default()
            },
        ),
        (
            "IPv4 fragment offset",
            mutated(|_| {}),
            Quirks {
                fragment_offset: true,
                ..Quirks::default()
            },
        ),
        (
            "UDP length too long",
            mutated(|_| {}),
            Quirks {
                udp_len_delta: 2,
                ..Quirks::default()
            },
        ),
        (
            "UDP length too short",
            mutated(|_| {}),
            Quirks {
                udp_len_delta: -2,
                ..Quirks::default()
            },
        ),
        (
            "other port",
            mutated(|_| {}),
            Quirks {
                dst_port: Some(5353),
                ..Quirks::default()
            },
        ),
        (
            "TCP",
            mutated(|_| {}),
            Quirks {
                ip_proto: Some(6),
                ..Quirks::default()
            },
        ),
    ];
    for opcode in 1..16u8 {
        let q = mutated(|q| q[2] = (q[2] & 0x87) | (opcode << 3));
        cases.push(("opcode != 0", q, Quirks::default()));
    }
    for len in 0..12 {
        cases.push((
            "truncated header",
            mutated(|q| q.truncate(len)),
            Quirks::default(),
        ));
    }
    let mut ch = mutated(|_| {});
    let n = ch.len();
    ch[n - 1] = 3; // class CH
    cases.push(("class CH", ch, Quirks::default()));
    // Sources no answer may go to (reflection toward a broadcast domain):
    // a hit from each is passed, never answered. IPv4: unspecified,
    // broadcast, multicast; IPv6 (each row): multicast; and a group
    // source MAC for both. (Loopback sources are passed only off `lo`;
    // BPF_PROG_TEST_RUN runs the program as on `lo`, see below.)
    let v6_multicast = [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    for (what, v4) in [
        ("unspecified source", [0, 0, 0, 0]),
        ("broadcast source", [255, 255, 255, 255]),
        ("multicast source", [224, 0, 0, 251]),
    ] {
        let quirks = Quirks {
            src_v4: Some(v4),
            src_v6: Some(v6_multicast),
            ..Quirks::default()
        };
        cases.push((what, mutated(|_| {}), quirks));
    }
    cases.push((
        "broadcast source MAC",
        mutated(|_| {}),
        Quirks {
            src_mac: Some([0xff; 6]),
            ..Quirks::default()
        },
    ));

    // On `lo` (where BPF_PROG_TEST_RUN runs it), a loopback source is a
    // real local client and is answered.
    let local = frame(
        Family::V4,
        0,
        &mutated(|_| {}),
        Quirks {
            src_v4: Some([127, 0, 0, 1]),
            ..Quirks::default()
        },
    );
    assert_eq!(
        test_run(r.fast.program_fd(), &local, 1).unwrap().action,
        XDP_TX
    );

    let before = r.fast.counters().unwrap();
    for (what, dns, quirks) in &cases {
        let v4_only = quirks.more_fragments || quirks.fragment_offset;
        for family in [Family::V4, Family::V6] {
            if v4_only && family == Family::V6 {
                continue;
            }
            for vlans in [0, 2] {
                let f = frame(family, vlans, dns, *quirks);
                let out = test_run(r.fast.program_fd(), &f, 1).unwrap();
                assert_eq!(out.action, XDP_PASS, "{what} {family:?} vlans={vlans}");
                assert_eq!(out.frame, f, "{what}: frame unchanged");
            }
        }
    }
    // IPv6 sources that are not IPv6 hosts: unspecified, loopback, and
    // IPv4-mapped.
    let mut mapped = [0u8; 16];
    mapped[10] = 0xff;
    mapped[11] = 0xff;
    mapped[12..].copy_from_slice(&CLIENT_V4);
    let mut loopback = [0u8; 16];
    loopback[15] = 1;
    for src in [[0u8; 16], loopback, mapped] {
        let quirks = Quirks {
            src_v6: Some(src),
            ..Quirks::default()
        };
        let f = frame(Family::V6, 0, &mutated(|_| {}), quirks);
        let out = test_run(r.fast.program_fd(), &f, 1).unwrap();
        assert_eq!(
            (out.action, &out.frame),
            (XDP_PASS, &f),
            "IPv6 source {src:?}"
        );
    }
    // IPv6 extension header, and a non-IP frame.
    let f = frame(
        Family::V6,
        0,
        &mutated(|_| {}),
        Quirks {
            ipv6_hop_by_hop: true,
            ..Quirks::default()
        },
    );
    let out = test_run(r.fast.program_fd(), &f, 1).unwrap();
    assert_eq!(
        (out.action, &out.frame),
        (XDP_PASS, &f),
        "IPv6 extension header"
    );
    let mut arp = f.clone();
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    let out = test_run(r.fast.program_fd(), &arp, 1).unwrap();
    assert_eq!((out.action, &out.frame), (XDP_PASS, &arp), "ARP");

    let after = r.fast.counters().unwrap();
    assert_eq!(after.answered_a, before.answered_a, "nothing answered");
    // The control: the same www query, unmutated, is answered.
    let f = frame(Family::V4, 0, &mutated(|_| {}), Quirks::default());
    assert_eq!(test_run(r.fast.program_fd(), &f, 1).unwrap().action, XDP_TX);
    let _ = DNSClass::IN;
}

#[test]
fn table_changes_under_a_query_stream_never_mix_versions() {
    let version = |n: u8| {
        let mut z = String::from(
            "$ORIGIN example.com.\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ 300 NS ns1\nns1 300 A 192.0.2.1\n",
        );
        for name in ["www", "api", "db"] {
            // Version 1: two records, TTL 60; version 2: three, TTL 120.
            for i in 0..(n + 1) {
                z += &format!("{name} {} A 10.{n}.0.{i}\n", 60 * n as u32);
            }
        }
        // A name only version 1 has (version 2's answer is its NXDOMAIN,
        // from the kernel too: the change deletes its entries) and one
        // only version 2 has.
        z += if n == 1 {
            "gone A 10.9.9.1\n"
        } else {
            "new A 10.9.9.2\n"
        };
        z
    };
    let (v1, v2) = (version(1), version(2));
    let mut r = rig(&v1);
    let other = rig_store(&v2);
    let names = [
        "www.example.com.",
        "api.example.com.",
        "db.example.com.",
        "gone.example.com.",
        "new.example.com.",
    ];
    let expect = |store: &ZoneStore, name: &str| {
        let dns = query(&Name::from_ascii(name).unwrap(), RecordType::A, None, 9);
        r.expected(&store.snapshot(), &dns, Family::V4)
    };
    let want: Vec<[Vec<u8>; 2]> = names
        .iter()
        .map(|n| [expect(&r.store, n), expect(&other, n)])
        .collect();
    let tables = [compile(&r.store.snapshot()).0, compile(&other.snapshot()).0];

    let fd = r.fast.program_fd();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Replies of each version so far, for the swaps to wait on.
    let live: std::sync::Arc<[std::sync::atomic::AtomicU32; 2]> = Default::default();
    let stream = {
        let stop = stop.clone();
        let want = want.clone();
        let live = live.clone();
        std::thread::spawn(move || {
            let mut seen = [0u32; 2];
            // Bounded: at most 200 000 queries.
            for i in 0..200_000usize {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let n = i % names.len();
                let dns = query(&Name::from_ascii(names[n]).unwrap(), RecordType::A, None, 9);
                let f = frame(Family::V4, 0, &dns, Quirks::default());
                let out = test_run(fd, &f, 1).unwrap();
                assert_eq!(
                    out.action, XDP_TX,
                    "a name in both versions is always answered"
                );
                let got = check_reply(Family::V4, 0, &f, &out.frame);
                match want[n].iter().position(|w| *w == got) {
                    Some(v) => {
                        seen[v] += 1;
                        live[v].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    None => panic!("reply {i} for {} matches neither version", names[n]),
                }
            }
            seen
        })
    };
    // Alternate whole-table installs with changes of every entry; each
    // name must flip atomically either way (through the overlay), and no
    // overlay entry stays behind: the kernel holds one copy of the table.
    for swap in 0..60 {
        let target = &tables[(swap + 1) % 2];
        if swap % 4 < 2 {
            r.fast.install(target.clone()).unwrap();
        } else {
            let upsert = target.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            r.fast
                .apply(&xdpdns::answers::TableDelta {
                    upsert,
                    ..Default::default()
                })
                .unwrap();
        }
        // Let the stream see the version just made live (bounded), so
        // both are served however the writes' durations fall.
        let version = (swap + 1) % 2;
        let before = live[version].load(std::sync::atomic::Ordering::Relaxed);
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(100);
        while live[version].load(std::sync::atomic::Ordering::Relaxed) == before
            && std::time::Instant::now() < deadline
        {
            std::thread::yield_now();
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = stream.join().unwrap();
    // Once the grace periods have passed, the overlay is folded in.
    r.fast.fold_all().unwrap();
    assert_eq!(
        r.fast.kernel_elements().unwrap(),
        r.fast.entries(),
        "no overlay entry is left behind"
    );
    println!(
        "table swaps: 60; replies from version 1: {}, version 2: {}",
        seen[0], seen[1]
    );
    assert!(
        seen[0] > 0 && seen[1] > 0,
        "both versions were served during the swaps: {seen:?}"
    );
}

/// A store serving `text` as example.com.
fn rig_store(text: &str) -> ZoneStore {
    let origin = Name::from_str("example.com.").unwrap();
    let zone = load_zone_str(text, &origin, Path::new("other.zone")).unwrap();
    ZoneStore::with_zones(vec![zone])
}

/// An OPT record with the given DO bit and raw options (code, payload).
fn opt(payload: u16, dnssec_ok: bool, options: &[(u16, Vec<u8>)]) -> Edns {
    let mut e = edns(payload);
    e.set_dnssec_ok(dnssec_ok);
    for (code, data) in options {
        e.options_mut()
            .insert(EdnsOption::Unknown(*code, data.clone()));
    }
    e
}

const COOKIE: u16 = 10;
const CLIENT_COOKIE: [u8; 8] = [0x24, 0x64, 0xc4, 0xab, 0xcf, 0x10, 0xc9, 0x57];

fn cookie_ip(family: Family) -> ClientIp {
    match family {
        Family::V4 => ClientIp::V4(CLIENT_V4),
        Family::V6 => ClientIp::V6(CLIENT_V6),
    }
}

/// A COOKIE option: our client cookie and a server cookie minted with
/// `secret` (0 current, 1 previous) at `at`, or `tamper`ed.
fn server_cookie_option(r: &Rig, family: Family, secret: usize, at: u64, tamper: bool) -> Vec<u8> {
    let keys = r.handler.edns.cookies.key_words();
    let mut server = cookie::mint(keys[secret], CLIENT_COOKIE, at as u32, &cookie_ip(family));
    if tamper {
        server[15] ^= 1;
    }
    [&CLIENT_COOKIE[..], &server[..]].concat()
}

/// The COOKIE option's payload in a reply, if any.
fn reply_cookie(reply: &[u8]) -> Option<Vec<u8>> {
    let m = Message::from_vec(reply).unwrap();
    match m
        .edns?
        .option(hickory_proto::rr::rdata::opt::EdnsCode::Cookie)
    {
        Some(EdnsOption::Unknown(_, data)) => Some(data.clone()),
        _ => None,
    }
}

#[test]
fn resolver_shaped_queries_are_answered_in_kernel_byte_identical() {
    let mut r = rig(&zone_text());
    let snap = r.store.snapshot();
    let ecs4 = vec![0, 1, 24, 0, 198, 51, 100];
    let ecs6 = vec![0, 2, 56, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0];
    let padding = vec![0u8; 20];
    let names = [
        "www.example.com.",
        "mail.example.com.",
        "ab.example.com.",
        "sixteen.example.com.",
        &long_label_name(100),
    ];
    let mut answered = 0;
    for family in [Family::V4, Family::V6] {
        let client_only = (COOKIE, CLIENT_COOKIE.to_vec());
        let fresh = (COOKIE, server_cookie_option(&r, family, 0, NOW - 10, false));
        let cases: Vec<(&str, Edns)> = vec![
            ("DO=1", opt(1232, true, &[])),
            (
                "client cookie",
                opt(1232, false, std::slice::from_ref(&client_only)),
            ),
            (
                "DO + client cookie",
                opt(1232, true, std::slice::from_ref(&client_only)),
            ),
            (
                "fresh server cookie",
                opt(1232, true, std::slice::from_ref(&fresh)),
            ),
            (
                "server cookie older than 30 min",
                opt(
                    4096,
                    true,
                    &[(
                        COOKIE,
                        server_cookie_option(&r, family, 0, NOW - 2000, false),
                    )],
                ),
            ),
            (
                "expired server cookie",
                opt(
                    1232,
                    true,
                    &[(
                        COOKIE,
                        server_cookie_option(&r, family, 0, NOW - 4000, false),
                    )],
                ),
            ),
            (
                "future server cookie",
                opt(
                    1232,
                    true,
                    &[(
                        COOKIE,
                        server_cookie_option(&r, family, 0, NOW + 400, false),
                    )],
                ),
            ),
            (
                "wrong server cookie",
                opt(
                    1232,
                    true,
                    &[(COOKIE, server_cookie_option(&r, family, 0, NOW - 10, true))],
                ),
            ),
            (
                "server cookie of the previous secret",
                opt(
                    1232,
                    true,
                    &[(COOKIE, server_cookie_option(&r, family, 1, NOW - 10, false))],
                ),
            ),
            (
                "another server's 8-byte server cookie",
                opt(1232, false, &[(COOKIE, [CLIENT_COOKIE, [1; 8]].concat())]),
            ),
            ("NSID", opt(1232, false, &[(3, vec![])])),
            ("ECS v4", opt(1232, true, &[(8, ecs4.clone())])),
            ("ECS v6", opt(1232, true, &[(8, ecs6.clone())])),
            ("padding", opt(1232, false, &[(12, padding.clone())])),
            (
                "unknown option",
                opt(1232, false, &[(65001, vec![1, 2, 3])]),
            ),
            (
                "everything at once",
                opt(
                    1232,
                    true,
                    &[
                        (8, ecs4.clone()),
                        (3, vec![]),
                        fresh.clone(),
                        (12, padding.clone()),
                        (65001, vec![]),
                    ],
                ),
            ),
            (
                "payload 512 with a cookie",
                opt(512, true, std::slice::from_ref(&client_only)),
            ),
        ];
        for name in &names {
            for qtype in [RecordType::A, RecordType::AAAA] {
                let qname = Name::from_ascii(name).unwrap();
                for (what, e) in &cases {
                    let dns = query(&qname, qtype, Some(e.clone()), 4242);
                    let expected = r.expected(&snap, &dns, family);
                    r.pin_clock(NOW);
                    let f = frame(family, 1, &dns, Quirks::default());
                    let out = test_run(r.fast.program_fd(), &f, 1).unwrap();
                    let hit = is_direct_hit(&snap, &expected, &qname, qtype);
                    match out.action {
                        XDP_TX => {
                            let got = check_reply(family, 1, &f, &out.frame);
                            assert_eq!(got, expected, "{what}: {qname} {qtype} {family:?}");
                            answered += 1;
                        }
                        XDP_PASS => {
                            assert!(!hit, "{what}: {qname} {qtype} {family:?} was passed up");
                            assert_eq!(out.frame, f);
                        }
                        other => panic!("XDP action {other}"),
                    }
                }
            }
        }
        // The cookie semantics themselves (the fallback's, so the
        // kernel's too): fresh ones echoed, the rest replaced.
        let www = Name::from_ascii("www.example.com.").unwrap();
        let reply_to = |e: Edns| r.expected(&snap, &query(&www, RecordType::A, Some(e), 1), family);
        assert_eq!(
            reply_cookie(&reply_to(opt(1232, true, std::slice::from_ref(&fresh)))),
            Some(fresh.1.clone())
        );
        let old = server_cookie_option(&r, family, 0, NOW - 2000, false);
        let renewed = reply_cookie(&reply_to(opt(1232, true, &[(COOKIE, old.clone())]))).unwrap();
        assert_ne!(renewed, old);
        assert_eq!(renewed, fresh_cookie_at(&r, family, NOW));
    }
    println!("resolver-shaped: {answered} answered in the kernel");
    assert!(answered > 0);
}

fn fresh_cookie_at(r: &Rig, family: Family, at: u64) -> Vec<u8> {
    server_cookie_option(r, family, 0, at, false)
}

#[test]
fn malformed_or_unusual_edns_passes_unchanged() {
    let r = rig(&zone_text());
    let www = Name::from_ascii("www.example.com.").unwrap();
    let mut cases: Vec<(String, Edns)> = Vec::new();
    for len in [0usize, 1, 7, 9, 15, 41] {
        cases.push((
            format!("COOKIE of {len} bytes"),
            opt(1232, false, &[(COOKIE, vec![7; len])]),
        ));
    }
    cases.push((
        "two COOKIE options".into(),
        opt(1232, false, &[(COOKIE, vec![7; 8]), (COOKIE, vec![7; 8])]),
    ));
    cases.push((
        "ECS family 3".into(),
        opt(1232, false, &[(8, vec![0, 3, 0, 0])]),
    ));
    cases.push((
        "ECS /33 for IPv4".into(),
        opt(1232, false, &[(8, vec![0, 1, 33, 0, 1, 2, 3, 4, 5])]),
    ));
    cases.push((
        "ECS address too short".into(),
        opt(1232, false, &[(8, vec![0, 1, 24, 0, 1, 2])]),
    ));
    cases.push((
        "NSID with a payload".into(),
        opt(1232, false, &[(3, vec![1])]),
    ));
    cases.push((
        "nine options".into(),
        opt(1232, false, &vec![(65001, vec![]); 9]),
    ));
    let mut v1 = edns(1232);
    v1.set_version(1);
    cases.push(("EDNS version 1".into(), v1));
    for (what, e) in &cases {
        for family in [Family::V4, Family::V6] {
            let dns = query(&www, RecordType::A, Some(e.clone()), 5);
            let f = frame(family, 0, &dns, Quirks::default());
            let out = test_run(r.fast.program_fd(), &f, 1).unwrap();
            assert_eq!(
                (out.action, &out.frame),
                (XDP_PASS, &f),
                "{what} {family:?}"
            );
        }
    }
    // An option whose length runs past the OPT record.
    let mut dns = query(
        &www,
        RecordType::A,
        Some(opt(1232, false, &[(65001, vec![0; 4])])),
        5,
    );
    let n = dns.len();
    dns[n - 5] = 9; // option length 9, only 4 bytes follow
    let f = frame(Family::V4, 0, &dns, Quirks::default());
    let out = test_run(r.fast.program_fd(), &f, 1).unwrap();
    assert_eq!(
        (out.action, &out.frame),
        (XDP_PASS, &f),
        "overrunning option"
    );
}

/// The kernel's SipHash against RFC 9018 Appendix A.1: the same secret,
/// client cookie, client address and second give the published cookie.
#[test]
fn kernel_cookies_match_the_rfc9018_test_vector() {
    let mut r = rig(&zone_text());
    r.pin_clock(1_559_731_985);
    let www = Name::from_ascii("www.example.com.").unwrap();
    let dns = query(
        &www,
        RecordType::A,
        Some(opt(1232, false, &[(COOKIE, CLIENT_COOKIE.to_vec())])),
        1,
    );
    let f = frame(
        Family::V4,
        0,
        &dns,
        Quirks {
            src_v4: Some([198, 51, 100, 100]),
            ..Quirks::default()
        },
    );
    let out = test_run(r.fast.program_fd(), &f, 1).unwrap();
    assert_eq!(out.action, XDP_TX);
    let want = [
        0x24, 0x64, 0xc4, 0xab, 0xcf, 0x10, 0xc9, 0x57, 0x01, 0x00, 0x00, 0x00, 0x5c, 0xf7, 0x9f,
        0x11, 0x1f, 0x81, 0x30, 0xc3, 0xee, 0xe2, 0x94, 0x80,
    ];
    assert!(
        out.frame.windows(24).any(|w| w == want),
        "the reply carries the RFC 9018 A.1 cookie"
    );
}

#[test]
fn nsid_modes_and_signed_zones() {
    // A zone holding a DNSKEY but no RRSIG over www: no signed variant,
    // so DO=1 queries go up; DO=0 queries are answered here.
    let signed =
        "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\n\
        @ DNSKEY \\# 6 0101030daabb\n\
        ns1 A 192.0.2.1\nwww A 192.0.2.80\n";
    let mut r = rig(signed);
    let www = Name::from_ascii("www.example.com.").unwrap();
    let run = |r: &Rig, e: Edns| {
        let f = frame(
            Family::V4,
            0,
            &query(&www, RecordType::A, Some(e), 3),
            Quirks::default(),
        );
        test_run(r.fast.program_fd(), &f, 1).unwrap().action
    };
    assert_eq!(run(&r, opt(1232, true, &[])), XDP_PASS, "signed, DO=1");
    assert_eq!(run(&r, opt(1232, false, &[])), XDP_TX, "signed, DO=0");

    // NSID too long for the kernel: NSID queries go up, others not.
    let long = vec![b'n'; 100];
    r.handler.edns.nsid = Some(long);
    r.fast.set_edns(&r.handler.edns).unwrap();
    r.pin_clock(NOW);
    assert_eq!(
        run(&r, opt(1232, false, &[(3, vec![])])),
        XDP_PASS,
        "long NSID"
    );
    assert_eq!(run(&r, opt(1232, false, &[])), XDP_TX);
    // No NSID configured: the request is ignored, in both paths.
    r.handler.edns.nsid = None;
    r.fast.set_edns(&r.handler.edns).unwrap();
    r.pin_clock(NOW);
    let dns = query(
        &www,
        RecordType::A,
        Some(opt(1232, false, &[(3, vec![])])),
        3,
    );
    let f = frame(Family::V6, 0, &dns, Quirks::default());
    let out = test_run(r.fast.program_fd(), &f, 1).unwrap();
    assert_eq!(out.action, XDP_TX);
    let snap = r.store.snapshot();
    assert_eq!(
        check_reply(Family::V6, 0, &f, &out.frame),
        r.expected(&snap, &dns, Family::V6)
    );
}

#[test]
fn large_sections_are_stored_once_and_freed_with_their_last_entry() {
    let members: String = (1..=30)
        .map(|i| format!("a A 10.0.4.{i}\nb A 10.0.4.{i}\n"))
        .collect();
    let base = "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n";
    let mut r = rig(&format!("{base}{members}"));
    assert_eq!(
        r.fast.blocks_in_use(),
        4,
        "a and b answer with one block (the SOA template, the apex's SOA and NS answers have one each)"
    );
    let dns = query(
        &Name::from_ascii("b.example.com.").unwrap(),
        RecordType::A,
        Some(edns(1232)),
        1,
    );
    let f = frame(Family::V4, 0, &dns, Quirks::default());
    let out = test_run(r.fast.program_fd(), &f, 1).unwrap();
    assert_eq!(out.action, XDP_TX);
    let snap = r.store.snapshot();
    assert_eq!(
        check_reply(Family::V4, 0, &f, &out.frame),
        r.expected(&snap, &dns, Family::V4)
    );
    // Without them, the block goes too.
    let empty = rig_store(base);
    r.fast.install(compile(&empty.snapshot()).0).unwrap();
    assert_eq!(r.fast.blocks_in_use(), 3, "the apex's");
    let out = test_run(r.fast.program_fd(), &f, 1).unwrap();
    assert_eq!(out.action, XDP_TX, "b is gone: NXDOMAIN");
    let snap = r.store.snapshot();
    let expected = r
        .handler
        .handle(
            &empty.snapshot(),
            &dns,
            Transport::Udp,
            client_ip(Family::V4),
            NOW,
        )
        .unwrap();
    assert_eq!(check_reply(Family::V4, 0, &f, &out.frame), expected);
    assert_eq!(expected[3] & 0xf, 3);
    drop(snap);
}

/// Every A/AAAA question for the snapshot's names, with and without
/// EDNS: what the kernel answers is byte-identical to the fallback, and
/// every direct hit is answered. Returns the kernel's answers.
fn assert_kernel_answers_like_the_fallback(r: &Rig) -> usize {
    let snap = r.store.snapshot();
    let mut names: Vec<Name> = snap
        .zones()
        .flat_map(|z| z.nodes().map(|(k, _)| Name::from(k)).collect::<Vec<_>>())
        .collect();
    names.push(Name::from_ascii("gone.example.com.").unwrap());
    let mut tx = 0;
    for (i, name) in names.iter().enumerate() {
        for qtype in [RecordType::A, RecordType::AAAA] {
            for payload in [None, Some(1232)] {
                let dns = query(name, qtype, payload.map(edns), i as u16);
                let expected = r.expected(&snap, &dns, Family::V4);
                let f = frame(Family::V4, 0, &dns, Quirks::default());
                let out = test_run(r.fast.program_fd(), &f, 1).unwrap();
                match out.action {
                    XDP_TX => {
                        let got = check_reply(Family::V4, 0, &f, &out.frame);
                        assert_eq!(got, expected, "{name} {qtype} {payload:?}");
                        // Answers counted; negative answers are checked too.
                        tx += (got[6..8] != [0, 0]) as usize;
                    }
                    _ => assert!(
                        !is_direct_hit(&snap, &expected, name, qtype),
                        "{name} {qtype} {payload:?}: a hit the kernel passed"
                    ),
                }
            }
        }
    }
    tx
}

/// A table pinned by one controller is adopted by the next without a
/// write: it answers byte-identically to the fallback, its blocks keep
/// their ids, and changes made after the adoption (a shared block losing
/// a user, one freed, a new one) keep it so. A controller with another
/// capacity does not adopt it.
#[test]
fn a_pinned_table_is_adopted_as_it_is_and_takes_changes() {
    let bpffs = crate::support::Bpffs::mount();
    let pins = PinDir::open(&bpffs.0 .0.join("xdpdns")).unwrap();
    let base = "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n";
    let shared: String = (1..=5)
        .map(|i| format!("a A 10.0.4.{i}\nb A 10.0.4.{i}\n"))
        .collect();
    let own: String = (1..=4)
        .map(|i| format!("c A 10.0.6.{i}\nc AAAA 2001:db8::6:{i}\n"))
        .collect();
    let mut r = rig(&format!("{base}{shared}{own}"));
    let snap = r.store.snapshot();
    let mut first = FastPath::load_pinned(1024, 53, &r.handler.edns, pins.clone()).unwrap();
    first
        .install_tagged(compile(&snap).0, table_tag(&snap))
        .unwrap();
    let blocks = first.blocks_in_use();
    assert_eq!(
        blocks, 6,
        "a+b share one; c has an A and an AAAA block; the SOA template, the SOA and NS answers"
    );
    drop(first);
    // The table lost an entry (as a write its table had no room for
    // does): the adoption finds it and writes it again.
    {
        use aya::maps::{Array, Map, MapData};
        use xdpdns_common::slots::TinySlot;
        use xdpdns_common::{key_lead, key_tail, layer, qtype_slot, TinyKey, TINY_NAME_MAX};
        // Tiny names live in the slot table.
        let data = MapData::from_pin(pins.map("TINY_SLOTS")).unwrap();
        let mut slots: Array<MapData, TinySlot> = Array::try_from(Map::Array(data)).unwrap();
        let wire = b"\x03ns1\x07example\x03com\x00";
        let mut k = TinyKey {
            name: [0; TINY_NAME_MAX],
        };
        k.name[..wire.len()].copy_from_slice(wire);
        k.name[0] = key_lead(wire[0], qtype_slot::A, layer::BASE);
        k.name[TINY_NAME_MAX - 1] = key_tail(qtype_slot::A);
        let at = (0..slots.len())
            .find(|&i| {
                slots.get(&i, 0).unwrap().in_use() && slots.get(&i, 0).unwrap().base_key() == k
            })
            .expect("ns1's A entry has a slot");
        slots.set(at, TinySlot::EMPTY, 0).unwrap();
    }

    let refused = FastPath::adopt(2048, 53, &r.handler.edns, pins.clone());
    assert!(
        matches!(refused, Err(XdpError::NotAdoptable(_))),
        "capacity changed"
    );
    let mut fast = FastPath::adopt(1024, 53, &r.handler.edns, pins.clone()).unwrap();
    assert!(fast.table_unknown() && fast.healthy());
    assert_eq!(fast.pinned_table_tag(), table_tag(&snap));
    fast.adopt_table(&compile(&snap).0).unwrap();
    assert_eq!(fast.blocks_in_use(), blocks);
    r.fast = fast;
    r.pin_clock(NOW);
    assert_eq!(
        assert_kernel_answers_like_the_fallback(&r),
        2 * 5,
        "A of ns1, a, b, c and AAAA of c, each with and without EDNS"
    );

    // a goes (b keeps the shared block), c's AAAA set goes (its block is
    // freed), d brings a new block.
    let newer: String = (1..=3).map(|i| format!("d A 10.0.7.{i}\n")).collect();
    let text = format!(
        "{}{}{}{newer}",
        base.replace(" 1 3600", " 2 3600"),
        shared
            .lines()
            .filter(|l| l.starts_with('b'))
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
        own.lines()
            .filter(|l| l.contains(" A "))
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
    );
    let origin = Name::from_ascii("example.com.").unwrap();
    let zone = load_zone_str(&text, &origin, Path::new("other.zone")).unwrap();
    let diffs = r.store.replace_zones(vec![zone], &[], 0);
    let snap = r.store.snapshot();
    let delta = compile_diffs(&snap, &diffs, &**r.fast.installed());
    r.fast.apply_tagged(&delta, table_tag(&snap)).unwrap();
    assert_eq!(
        r.fast.blocks_in_use(),
        6,
        "b's, c's A, d's, the SOA template's, the apex's SOA and NS answers"
    );
    assert_kernel_answers_like_the_fallback(&r);
    // The tag is recorded once the change is folded into the base and the
    // overlay is off (a grace period after it went live).
    assert_eq!(r.fast.pinned_table_tag(), 0, "the overlay is on");
    r.fast.fold_all().unwrap();
    assert_eq!(r.fast.pinned_table_tag(), table_tag(&snap));
    assert_eq!(
        assert_kernel_answers_like_the_fallback(&r),
        2 * 4,
        "A of ns1, b, c, d"
    );
    drop(r);
    pins.clear().unwrap();
}

/// Tiny names fill the two buckets each has in the slot table and the
/// rest go to its overflow map; changes made live through the overlay and
/// folded in while the kernel answers (a deleted entry left absent in its
/// slot, the slot then taken by a new name) keep every answer
/// byte-identical to the fallback, and leave no element behind.
#[test]
fn tiny_names_past_their_buckets_overflow_and_changes_stay_exact() {
    let bpffs = crate::support::Bpffs::mount();
    let pins = PinDir::open(&bpffs.0 .0.join("xdpdns")).unwrap();
    let text = |round: u32| -> String {
        let names: String = (round * 2..round * 2 + 26)
            .map(|j| {
                // One name's address changes each round.
                let third = if j == round * 2 + 10 { round } else { 0 };
                let mut n = format!("n{j} A 10.0.{third}.{}\n", j % 250);
                if j % 2 == 0 {
                    n += &format!("n{j} AAAA 2001:db8::{j:x}\n");
                }
                n
            })
            .collect();
        format!(
            "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 hostmaster {} 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n{names}",
            round + 1
        )
    };
    let overflow = || {
        use aya::maps::{HashMap as BpfMap, Map, MapData};
        use xdpdns_common::{Answer, TinyKey};
        let data = MapData::from_pin(pins.map("TINY_NAMES")).unwrap();
        let map: BpfMap<MapData, TinyKey, Answer> = BpfMap::try_from(Map::HashMap(data)).unwrap();
        map.keys().count()
    };
    // Whether a name overflows depends on the table's random hash seed
    // (each name has two buckets): a fresh table, and seed, until one
    // does, every answer checked on the way.
    let mut overflowed = 0;
    for _attempt in 0..5 {
        let mut r = rig(&text(0));
        // 48 entries: 56 slots in 14 buckets, an overflow of 16, an overlay
        // of 16 (each round's change fits it).
        r.fast = FastPath::load_pinned(48, 53, &r.handler.edns, pins.clone()).unwrap();
        r.fast.install(compile(&r.store.snapshot()).0).unwrap();
        r.pin_clock(NOW);
        assert_eq!(r.fast.entries_left_out(), 0);
        assert_kernel_answers_like_the_fallback(&r);
        overflowed = overflowed.max(overflow());
        let origin = Name::from_ascii("example.com.").unwrap();
        for round in 1..=12 {
            let zone = load_zone_str(&text(round), &origin, Path::new("round.zone")).unwrap();
            let diffs = r.store.replace_zones(vec![zone], &[], 0);
            let snap = r.store.snapshot();
            let delta = compile_diffs(&snap, &diffs, &**r.fast.installed());
            r.fast.apply(&delta).unwrap();
            assert_kernel_answers_like_the_fallback(&r);
            if round % 2 == 0 {
                r.fast.fold_all().unwrap();
                assert_kernel_answers_like_the_fallback(&r);
                assert_eq!(r.fast.kernel_elements().unwrap(), r.fast.entries());
            }
            overflowed = overflowed.max(overflow());
        }
        assert_eq!(r.fast.entries_left_out(), 0, "nothing refused");
        drop(r);
        if overflowed > 0 {
            break;
        }
    }
    assert!(overflowed > 0, "some names went to the overflow map");
    pins.clear().unwrap();
}

#[test]
fn a_full_table_leaves_the_rest_to_the_fallback() {
    let names: String = (0..40).map(|i| format!("n{i} A 10.0.5.{i}\n")).collect();
    let store = rig_store(&format!(
        "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n{names}"
    ));
    // Room for 16 entries (and the overlay's 4): the rest are left out, the
    // table still serves what it holds, and nothing answers wrongly.
    let mut fast = FastPath::load(16, 53, &ServerEdns::default()).unwrap();
    fast.install(compile(&store.snapshot()).0).unwrap();
    assert!(fast.healthy());
    assert!(fast.entries_left_out() > 0);
    let mut answered = 0;
    for i in 0..40 {
        let dns = query(
            &Name::from_ascii(format!("n{i}.example.com.")).unwrap(),
            RecordType::A,
            None,
            1,
        );
        let f = frame(Family::V4, 0, &dns, Quirks::default());
        let out = test_run(fast.program_fd(), &f, 1).unwrap();
        if out.action == XDP_TX {
            answered += 1;
            let m = Message::from_vec(&check_reply(Family::V4, 0, &f, &out.frame)).unwrap();
            assert_eq!(m.answers[0].data.to_string(), format!("10.0.5.{i}"));
        } else {
            assert_eq!(out.frame, f);
        }
    }
    assert!(answered > 0 && answered < 40, "{answered} answered");
}

/// Sections that find the small-block table full are left to the
/// fallback with their entries; the kernel stays healthy and answers the
/// rest exactly.
#[test]
fn a_full_block_table_leaves_its_entries_to_the_fallback() {
    // 200 names of three A records (48 bytes each: small blocks, all
    // different, each entry holding its name's EXIST facts) and 150 of
    // one; capacity 360 gives the small-block table 112 slots.
    let names: String = (0..200)
        .map(|i| format!("n{i} A 10.1.{i}.1\nn{i} A 10.1.{i}.2\nn{i} A 10.1.{i}.3\n"))
        .collect();
    let singles: String = (0..150).map(|i| format!("m{i} A 10.2.{i}.1\n")).collect();
    let store = rig_store(&format!(
        "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n{names}{singles}"
    ));
    let handler = Handler::default();
    let mut fast = FastPath::load(360, 53, &handler.edns).unwrap();
    fast.install(compile(&store.snapshot()).0).unwrap();
    assert!(fast.healthy());
    let left_out = fast.entries_left_out();
    assert!(left_out > 0, "the table filled up");
    let snap = store.snapshot();
    // The compiled table (the hot path's) holds every entry all the same;
    // the kernel's lacks those left out.
    assert_eq!(fast.installed().to_table(), compile(&snap).0);
    // Entries saying names exist were left out too (A entries holding
    // their names' EXIST facts, whose blocks found no room): the kernel
    // cannot tell a missing name from one left out, so it answers no
    // negative at all, and no name that exists is ever NXDOMAIN.
    for i in 0..200 {
        let aaaa = query(
            &Name::from_ascii(format!("n{i}.example.com.")).unwrap(),
            RecordType::AAAA,
            None,
            1,
        );
        let f = frame(Family::V4, 0, &aaaa, Quirks::default());
        let out = test_run(fast.program_fd(), &f, 1).unwrap();
        assert_eq!(out.action, XDP_PASS, "n{i} AAAA goes to the fallback");
    }
    let nope = query(
        &Name::from_ascii("nope.example.com.").unwrap(),
        RecordType::A,
        None,
        1,
    );
    let f = frame(Family::V4, 0, &nope, Quirks::default());
    assert_eq!(test_run(fast.program_fd(), &f, 1).unwrap().action, XDP_PASS);
    let mut answered = 0;
    for i in 0..200 {
        let dns = query(
            &Name::from_ascii(format!("n{i}.example.com.")).unwrap(),
            RecordType::A,
            None,
            1,
        );
        let f = frame(Family::V4, 0, &dns, Quirks::default());
        let out = test_run(fast.program_fd(), &f, 1).unwrap();
        if out.action == XDP_TX {
            answered += 1;
            let expected = handler
                .handle(&snap, &dns, Transport::Udp, client_ip(Family::V4), NOW)
                .unwrap();
            assert_eq!(check_reply(Family::V4, 0, &f, &out.frame), expected);
        } else {
            assert_eq!(out.action, XDP_PASS);
            assert_eq!(out.frame, f);
        }
    }
    // Left out: entries of both kinds (blocks, and names whose table
    // filled).
    assert!(
        answered > 0 && answered < 200,
        "{answered} answered, {left_out} left out"
    );

    // With half the names gone (and the single ones) there is room: the
    // entries left out before
    // are written now (they were not taken as installed; those the change
    // itself found no room for are retried once its old blocks are freed)
    // and every name left is answered, exactly.
    let half: String = (100..200)
        .map(|i| format!("n{i} A 10.1.{i}.1\nn{i} A 10.1.{i}.2\nn{i} A 10.1.{i}.3\n"))
        .collect();
    let store = rig_store(&format!(
        "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 hostmaster 2 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n{half}"
    ));
    fast.install(compile(&store.snapshot()).0).unwrap();
    assert!(fast.healthy());
    let snap = store.snapshot();
    assert_eq!(
        fast.entries(),
        compile(&snap).0.len(),
        "ns1 and n100..n199, and the EXIST and SOA entries, all in the kernel"
    );
    for i in 0..200 {
        let dns = query(
            &Name::from_ascii(format!("n{i}.example.com.")).unwrap(),
            RecordType::A,
            None,
            2,
        );
        let f = frame(Family::V4, 0, &dns, Quirks::default());
        let out = test_run(fast.program_fd(), &f, 1).unwrap();
        // Every name is in the kernel again, EXIST entries included: the
        // names that are gone get their NXDOMAIN there too.
        assert_eq!(out.action, XDP_TX, "n{i} answered in the kernel");
        let expected = handler
            .handle(&snap, &dns, Transport::Udp, client_ip(Family::V4), NOW)
            .unwrap();
        assert_eq!(check_reply(Family::V4, 0, &f, &out.frame), expected);
        let rcode = expected[3] & 0xf;
        assert_eq!(rcode, if i < 100 { 3 } else { 0 }, "n{i}");
    }
}

#[test]
fn ipv4_options_are_dropped_and_unserved_destinations_pass() {
    let mut r = rig(&zone_text());
    let snap = r.store.snapshot();
    let www = Name::from_ascii("www.example.com.").unwrap();
    for (words, vlans) in [(1u8, 0usize), (2, 1), (10, 2)] {
        for e in [
            None,
            Some(opt(1232, true, &[(COOKIE, CLIENT_COOKIE.to_vec())])),
        ] {
            let dns = query(&www, RecordType::A, e, 7);
            let quirks = Quirks {
                ipv4_option_words: words,
                ..Quirks::default()
            };
            let f = frame(Family::V4, vlans, &dns, quirks);
            let out = test_run(r.fast.program_fd(), &f, 1).unwrap();
            assert_eq!(out.action, XDP_TX, "{words} option words");
            // The reply is an ordinary IHL 5 packet, byte-identical to
            // the fallback's answer.
            let got = check_reply(Family::V4, vlans, &f, &out.frame);
            assert_eq!(got, r.expected(&snap, &dns, Family::V4));
        }
    }

    // Only the configured addresses are answered.
    let served: Vec<IpAddr> = vec![IpAddr::from(SERVER_V4), IpAddr::from(SERVER_V6)];
    r.fast.set_destinations(Some(&served)).unwrap();
    let dns = query(&www, RecordType::A, None, 8);
    for family in [Family::V4, Family::V6] {
        let f = frame(family, 0, &dns, Quirks::default());
        assert_eq!(test_run(r.fast.program_fd(), &f, 1).unwrap().action, XDP_TX);
    }
    let other = frame(
        Family::V4,
        0,
        &dns,
        Quirks {
            dst_v4: Some([192, 0, 2, 99]),
            ..Quirks::default()
        },
    );
    let out = test_run(r.fast.program_fd(), &other, 1).unwrap();
    assert_eq!((out.action, &out.frame), (XDP_PASS, &other), "not served");
    r.fast.set_destinations(Some(&served[1..])).unwrap();
    let f = frame(Family::V4, 0, &dns, Quirks::default());
    assert_eq!(
        test_run(r.fast.program_fd(), &f, 1).unwrap().action,
        XDP_PASS,
        "v4 removed"
    );
    r.fast.set_destinations(None).unwrap();
    assert_eq!(
        test_run(r.fast.program_fd(), &other, 1).unwrap().action,
        XDP_TX,
        "filter off"
    );
    let c = r.fast.counters().unwrap();
    assert_eq!(c.passed(xdpdns_common::PassReason::Destination), 2);
}

/// The kernel fuzzer: resolver-shaped queries (EDNS sizes, DO, cookies,
/// NSID, other options) with their DNS bytes mutated, in consistent
/// Ethernet/IP/UDP frames of both families, through BPF_PROG_TEST_RUN.
/// Every `XDP_TX` must be a well-formed reply byte-identical to the
/// fallback's for the same bytes at the same second; every other frame
/// must pass unchanged. `XDPDNS_FUZZ_EXECS` sets the executions.
#[test]
fn fuzzed_queries_are_answered_exactly_or_passed_unchanged() {
    use crate::support::mutate::{executions, mutate, rng};

    let mut r = rig(&zone_text());
    let snap = r.store.snapshot();
    let names = [
        "www.example.com.",
        "example.com.",
        "mail.example.com.",
        "sixteen.example.com.",
        "sixty.example.com.",
        "twenty.example.com.",
        "ab.example.com.",
        "nope.example.com.",
        "x.wild.example.com.",
        "alias.example.com.",
        "txt.example.com.",
        "sub.example.com.",
        "www.sub.example.com.",
        "b.ent.example.com.",
    ];
    // Every type the kernel answers (positive, NODATA, referral, DS at
    // the cut, chains) and some it passes up.
    let types = [
        RecordType::A,
        RecordType::AAAA,
        RecordType::MX,
        RecordType::TXT,
        RecordType::HTTPS,
        RecordType::SVCB,
        RecordType::SRV,
        RecordType::NS,
        RecordType::SOA,
        RecordType::DS,
        RecordType::CNAME,
        RecordType::CAA,
        RecordType::ANY,
    ];
    let mut seeds = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let name = Name::from_ascii(name).unwrap();
        for rtype in types {
            let id = i as u16 * 7 + 1;
            seeds.push(query(&name, rtype, None, id));
            seeds.push(query(&name, rtype, Some(edns(512)), id + 1));
            seeds.push(query(
                &name,
                rtype,
                Some(opt(1232, true, &[(COOKIE, CLIENT_COOKIE.to_vec())])),
                id + 2,
            ));
            let valid = server_cookie_option(&r, Family::V4, 0, NOW - 10, false);
            seeds.push(query(
                &name,
                rtype,
                Some(opt(4096, true, &[(3, Vec::new()), (COOKIE, valid)])),
                id + 3,
            ));
            seeds.push(query(
                &name,
                rtype,
                Some(opt(
                    1232,
                    false,
                    &[(8, vec![0, 1, 24, 0, 192, 0, 2]), (12, vec![0; 5])],
                )),
                id + 4,
            ));
        }
    }
    let runs = executions(20_000);
    let mut rng = rng(0xb9f_f022);
    let (mut tx, mut passed) = (0u64, 0u64);
    for n in 0..runs {
        let seed = &seeds[rng.below(seeds.len())];
        let other = &seeds[rng.below(seeds.len())];
        // Now and then the seed itself, so hits stay in the mix.
        let dns = if n % 8 == 0 {
            seed.clone()
        } else {
            mutate(&mut rng, seed, other, 1400)
        };
        let family = if n % 2 == 0 { Family::V4 } else { Family::V6 };
        let vlans = rng.below(2);
        let f = frame(family, vlans, &dns, Quirks::default());
        // The kernel's clock runs: keep it in second NOW, as the fallback is
        // told (a long run crosses into the next second otherwise).
        if n % 64 == 0 {
            r.pin_clock(NOW);
        }
        let out = test_run(r.fast.program_fd(), &f, 1).unwrap();
        match out.action {
            XDP_TX => {
                tx += 1;
                let got = check_reply(family, vlans, &f, &out.frame);
                let want = r
                    .handler
                    .handle(&snap, &dns, Transport::Udp, client_ip(family), NOW);
                assert_eq!(Some(got), want, "execution {n}: {dns:02x?}");
            }
            XDP_PASS => {
                passed += 1;
                assert_eq!(out.frame, f, "execution {n}: passed frames are unchanged");
            }
            other => panic!("execution {n}: XDP action {other}"),
        }
    }
    println!(
        "fuzz kernel: {runs} executions, {tx} answered in the kernel, {passed} passed, no mismatch"
    );
    assert!(tx > runs / 20, "hits stay in the mix");
}

/// A scripted primary for example.com.: SOA queries get serial 12; an
/// IXFR from 10 gets diff 10→11 (adds x) and then 11→12, which adds an
/// out-of-zone record unless `valid` is set (then it adds y).
struct ScriptedPrimary {
    addr: std::net::SocketAddr,
    valid: Arc<std::sync::atomic::AtomicBool>,
    ixfrs: Arc<std::sync::atomic::AtomicUsize>,
}

fn soa_record(serial: u32) -> hickory_proto::rr::Record {
    use hickory_proto::rr::rdata::SOA;
    let origin = Name::from_ascii("example.com.").unwrap();
    let ns = Name::from_ascii("ns1.example.com.").unwrap();
    hickory_proto::rr::Record::from_rdata(
        origin,
        300,
        hickory_proto::rr::RData::SOA(SOA::new(ns.clone(), ns, serial, 3600, 600, 86400, 60)),
    )
}

fn a_record(name: &str, last: u8) -> hickory_proto::rr::Record {
    hickory_proto::rr::Record::from_rdata(
        Name::from_ascii(name).unwrap(),
        300,
        hickory_proto::rr::RData::A(hickory_proto::rr::rdata::A::new(192, 0, 2, last)),
    )
}

impl ScriptedPrimary {
    fn start() -> ScriptedPrimary {
        use std::io::{Read, Write};
        use std::sync::atomic::Ordering;
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = tcp.local_addr().unwrap();
        let udp = std::net::UdpSocket::bind(addr).unwrap();
        let valid = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ixfrs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let reply_to = |q: &Message| {
            let mut m = Message::new(q.id, hickory_proto::op::MessageType::Response, q.op_code);
            m.metadata.authoritative = true;
            m.add_query(q.queries[0].clone());
            m
        };
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while let Ok((n, peer)) = udp.recv_from(&mut buf) {
                let Ok(q) = Message::from_vec(&buf[..n]) else {
                    continue;
                };
                let mut m = reply_to(&q);
                m.add_answer(soa_record(12));
                let _ = udp.send_to(&m.to_vec().unwrap(), peer);
            }
        });
        let (v, count) = (valid.clone(), ixfrs.clone());
        std::thread::spawn(move || {
            for conn in tcp.incoming() {
                let Ok(mut c) = conn else { continue };
                let mut len = [0u8; 2];
                if c.read_exact(&mut len).is_err() {
                    continue;
                }
                let mut q = vec![0u8; u16::from_be_bytes(len) as usize];
                if c.read_exact(&mut q).is_err() {
                    continue;
                }
                let q = Message::from_vec(&q).unwrap();
                let mut m = reply_to(&q);
                if q.queries[0].query_type() == RecordType::IXFR {
                    count.fetch_add(1, Ordering::SeqCst);
                    let second = if v.load(Ordering::SeqCst) {
                        a_record("y.example.com.", 12)
                    } else {
                        a_record("www.example.org.", 12)
                    };
                    for r in [
                        soa_record(12),
                        soa_record(10),
                        soa_record(11),
                        a_record("x.example.com.", 11),
                        soa_record(11),
                        soa_record(12),
                        second,
                        soa_record(12),
                    ] {
                        m.add_answer(r);
                    }
                } else {
                    m.metadata.response_code = hickory_proto::op::ResponseCode::Refused;
                }
                let bytes = m.to_vec().unwrap();
                let mut framed = (bytes.len() as u16).to_be_bytes().to_vec();
                framed.extend_from_slice(&bytes);
                let _ = c.write_all(&framed);
            }
        });
        ScriptedPrimary { addr, valid, ixfrs }
    }
}

/// An IXFR whose later diff does not apply leaves the store and the
/// kernel table at the old serial (nothing of its first diff either); the
/// same IXFR made valid moves both, the kernel answering the new names.
#[test]
fn an_ixfr_with_a_bad_later_diff_leaves_store_and_kernel_at_the_old_serial() {
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};
    use xdpdns::router::Router;
    use xdpdns::transfer::secondary::{self, Secondaries, SecondaryZone};
    use xdpdns::xdp::KernelTable;

    let primary = ScriptedPrimary::start();
    let origin = Name::from_ascii("example.com.").unwrap();
    let zone = load_zone_str(
        "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 ns1 10 3600 600 86400 60\n@ NS ns1\n\
         ns1 A 192.0.2.1\nwww A 192.0.2.80\n",
        &origin,
        Path::new("sec.zone"),
    )
    .unwrap();
    let store = Arc::new(ZoneStore::with_zones(vec![zone]));
    let router = Arc::new(Router::new(store.reader(), Handler::default()));
    let mut fast = FastPath::load(1024, 53, &Handler::default().edns).expect("load");
    // The loader keeps its record in the hot path's table, which the
    // subscriber then settles at each version it reaches.
    fast.use_table(router.hot.clone());
    let (snapshot, feed) = store.subscribe();
    fast.install(compile(&snapshot).0).unwrap();
    router.hot.settle(snapshot.version());
    let prog = fast.program_fd();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let _in_rt = rt.enter();
    let (kernel, _task) = KernelTable::start(fast, snapshot, feed);
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    // The copy at serial 10 was refreshed just now (as after an AXFR), so
    // a failed refresh is not an expiry.
    let state = crate::support::TempDir::new("ixfr-state");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    state.write("example.com.refreshed", &now.to_string());
    let set = secondary::SecondarySet::new(
        Secondaries {
            store: store.clone(),
            state_dir: Some(state.0.clone()),
            timeout: Duration::from_secs(5),
            max_transfers: 1,
            max_records: 1000,
            log: Default::default(),
        },
        stop,
    );
    set.add(SecondaryZone {
        zone: origin.clone(),
        primaries: vec![primary.addr],
        key: None,
    });
    // What the kernel does with an A query for `name`: the answer's last
    // address byte, or None when it has no answer (it passes the query
    // up, or answers NXDOMAIN).
    let kernel_answer = |name: &str| -> Option<u8> {
        let dns = query(&Name::from_ascii(name).unwrap(), RecordType::A, None, 9);
        let f = frame(Family::V4, 0, &dns, Quirks::default());
        let out = test_run(prog, &f, 1).unwrap();
        (out.action == XDP_TX)
            .then(|| check_reply(Family::V4, 0, &f, &out.frame))
            .filter(|reply| reply[6..8] != [0, 0])
            .map(|reply| *reply.last().unwrap())
    };
    let serial = || {
        store
            .snapshot()
            .zone(&LowerName::new(&origin))
            .unwrap()
            .serial()
    };
    let wait = |what: &str, cond: &dyn Fn() -> bool| {
        let end = Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(Instant::now() < end, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };

    wait("the IXFR", &|| primary.ixfrs.load(Ordering::SeqCst) >= 1);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(serial(), Some(10), "the store stays at the old serial");
    assert!(
        !store
            .snapshot()
            .zone(&LowerName::new(&origin))
            .unwrap()
            .is_expired(),
        "and keeps serving it"
    );
    assert!(
        store
            .snapshot()
            .zone(&LowerName::new(&origin))
            .unwrap()
            .node(&LowerName::from(
                Name::from_ascii("x.example.com.").unwrap()
            ))
            .is_none(),
        "nothing of the first diff is applied"
    );
    assert_eq!(kernel_answer("www.example.com."), Some(80));
    assert_eq!(
        kernel_answer("x.example.com."),
        None,
        "the kernel never saw x"
    );

    primary.valid.store(true, Ordering::SeqCst);
    use xdpdns::router::NotifySink;
    set.notified(&origin);
    wait("serial 12", &|| serial() == Some(12));
    wait("the kernel table to follow", &|| {
        kernel_answer("y.example.com.") == Some(12)
    });
    assert_eq!(
        kernel_answer("x.example.com."),
        Some(11),
        "both diffs, one commit"
    );
    let now = store.snapshot();
    wait("the hot table to settle", &|| {
        router.hot.version() == Some(now.version())
    });
    assert_eq!(
        router.hot.to_table(),
        compile(&now).0,
        "the hot path answers from exactly what the kernel was given"
    );
    drop(kernel);
}
