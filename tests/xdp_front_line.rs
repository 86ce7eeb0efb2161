//! The kernel as a front line under attack, run through BPF_PROG_TEST_RUN
//! beside the fallback's router: response rate limiting decides a
//! scripted sequence alike in both. Needs root (CAP_BPF); CI runs as root.

use crate::support::frames;

use std::net::IpAddr;
use std::path::Path;
use std::str::FromStr;

use frames::*;
use hickory_proto::op::{Edns, Message, Query};
use hickory_proto::rr::rdata::opt::EdnsOption;
use hickory_proto::rr::{Name, RecordType};
use xdpdns::answers::compile;
use xdpdns::cookies::CookieSecrets;
use xdpdns::handler::{Handler, Transport};
use xdpdns::router::{Response, Router};
use xdpdns::rrl::{Limiter, RrlConfig};
use xdpdns::wire::ServerEdns;
use xdpdns::xdp::sys::test_run;
use xdpdns::xdp::{Capacity, FastPath};
use xdpdns::zone::{load_zone_str, ZoneStore};
use xdpdns_common::cookie::{self, ClientIp};

const XDP_DROP: u32 = 1;
const XDP_PASS: u32 = 2;
const XDP_TX: u32 = 3;

/// The unix second both paths answer at (cookies are minted at it).
const NOW: u64 = 1_767_225_600;
const SECRET: &str = "e5e973e5a6b2a43f48e7dc849e37bfcf\n445536bcd2513298075a5d379663c962\n";
const CLIENT_COOKIE: [u8; 8] = [0x24, 0x64, 0xc4, 0xab, 0xcf, 0x10, 0xc9, 0x57];

const ZONE: &str = "$ORIGIN example.com.\n$TTL 300\n\
    @ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n\
    www A 192.0.2.80\nwww A 192.0.2.81\nwww AAAA 2001:db8::80\n";

fn store() -> ZoneStore {
    ZoneStore::with_zones(vec![zone("example.com.", ZONE)])
}

fn zone(origin: &str, text: &str) -> xdpdns::zone::Zone {
    let origin = Name::from_str(origin).unwrap();
    load_zone_str(text, &origin, Path::new("front.zone")).unwrap()
}

fn handler() -> Handler {
    Handler {
        edns: ServerEdns {
            udp_payload: 1232,
            nsid: None,
            cookies: CookieSecrets::parse(SECRET, Path::new("secret")).unwrap(),
        },
        ..Handler::default()
    }
}

/// The kernel and the fallback's router over the same zone, both with
/// `rrl`, and the kernel's wall clock pinned to the middle of `NOW`.
struct Pair {
    fast: FastPath,
    router: Router,
    rrl: RrlConfig,
}

fn pair(rrl: RrlConfig) -> Pair {
    pair_with(rrl, store())
}

fn pair_with(rrl: RrlConfig, store: ZoneStore) -> Pair {
    pair_sized(rrl, store, 1024)
}

fn pair_sized(rrl: RrlConfig, store: ZoneStore, entries: u32) -> Pair {
    assert!(
        unsafe { libc::geteuid() } == 0,
        "the XDP tests load BPF programs and need root (CI runs as root)"
    );
    let h = handler();
    let capacity = Capacity {
        entries,
        rrl_slots: rrl.kernel_slots(),
        served: None,
    };
    let mut fast = FastPath::load(capacity, 53, &h.edns).expect("load the XDP program");
    fast.install(compile(&store.snapshot()).0).unwrap();
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    let mono = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    fast.set_clock((NOW * 1_000_000_000 + 500_000_000).wrapping_sub(mono))
        .unwrap();
    let router = Router::new(store.reader(), h);
    if rrl.enabled {
        assert!(router.rrl.set(Limiter::new(rrl.clone())).is_ok());
    }
    Pair { fast, router, rrl }
}

impl Pair {
    /// Both clocks at `ms` (the rate limiter's milliseconds).
    fn at(&mut self, ms: u32) {
        let mut settings = self.rrl.kernel_settings();
        settings.fixed_now_ms = ms;
        self.fast.set_rrl(settings).unwrap();
        if let Some(l) = self.router.rrl.get() {
            l.fix_clock(ms);
        }
    }

    /// What each path does with `dns` from `source`: the reply's DNS
    /// bytes, or `None` when it sends nothing. The kernel must answer.
    fn both(&self, source: Source, dns: &[u8]) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
        let kernel = match self.kernel(source, dns) {
            Kernel::Sent(bytes) => Some(bytes),
            Kernel::Dropped => None,
            Kernel::Passed => panic!("the kernel passed a query it answers"),
        };
        (kernel, self.fallback(source, dns))
    }

    fn kernel(&self, source: Source, dns: &[u8]) -> Kernel {
        let quirks = match source.addr {
            IpAddr::V4(a) => Quirks {
                src_v4: Some(a.octets()),
                ..Quirks::default()
            },
            IpAddr::V6(a) => Quirks {
                src_v6: Some(a.octets()),
                ..Quirks::default()
            },
        };
        let f = frame(source.family(), 0, dns, quirks);
        let out = test_run(self.fast.program_fd(), &f, 1).unwrap();
        match out.action {
            XDP_PASS => {
                assert_eq!(out.frame, f, "a passed frame is unchanged");
                Kernel::Passed
            }
            XDP_TX => Kernel::Sent(check_reply_to(
                source.family(),
                0,
                &f,
                &out.frame,
                &source.octets(),
            )),
            XDP_DROP => Kernel::Dropped,
            other => panic!("kernel: unexpected XDP action {other}"),
        }
    }

    fn fallback(&self, source: Source, dns: &[u8]) -> Option<Vec<u8>> {
        match self.router.respond(dns, Transport::Udp, source.addr, NOW) {
            Response::One(bytes) => Some(bytes),
            Response::Drop => None,
            Response::Transfer(_) => panic!("a transfer for a query"),
            Response::Update(_) => panic!("an update for a query"),
        }
    }
}

/// What the XDP program did with a query.
#[derive(Debug, PartialEq)]
enum Kernel {
    Passed,
    Sent(Vec<u8>),
    Dropped,
}

#[derive(Clone, Copy, Debug)]
struct Source {
    addr: IpAddr,
}

impl Source {
    fn new(s: &str) -> Source {
        Source {
            addr: s.parse().unwrap(),
        }
    }

    fn family(&self) -> Family {
        match self.addr {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }

    fn octets(&self) -> Vec<u8> {
        match self.addr {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        }
    }

    /// A COOKIE option with a server cookie minted for this source at
    /// `NOW` (`tamper`ed: one bit flipped, so invalid).
    fn cookie(&self, tamper: bool) -> Vec<u8> {
        let secrets = CookieSecrets::parse(SECRET, Path::new("secret")).unwrap();
        let ip = match self.addr {
            IpAddr::V4(a) => ClientIp::V4(a.octets()),
            IpAddr::V6(a) => ClientIp::V6(a.octets()),
        };
        let mut server = cookie::mint(secrets.key_words()[0], CLIENT_COOKIE, NOW as u32, &ip);
        if tamper {
            server[15] ^= 1;
        }
        [&CLIENT_COOKIE[..], &server[..]].concat()
    }
}

/// What a query carries besides its question.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Extra {
    Plain,
    Edns,
    ValidCookie,
    BadCookie,
}

fn query(name: &str, rtype: RecordType, id: u16, extra: Extra, source: Source) -> Vec<u8> {
    query_do(name, rtype, id, extra, source, false)
}

/// [`query`], with DO set in its OPT record when `dnssec_ok`.
fn query_do(
    name: &str,
    rtype: RecordType,
    id: u16,
    extra: Extra,
    source: Source,
    dnssec_ok: bool,
) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.id = id;
    m.metadata.recursion_desired = id.is_multiple_of(2);
    // `from_ascii` keeps the case (0x20), `from_str` would not.
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), rtype));
    if extra != Extra::Plain {
        let mut e = Edns::new();
        e.set_max_payload(1232).set_dnssec_ok(dnssec_ok);
        let cookie = match extra {
            Extra::ValidCookie => Some(source.cookie(false)),
            Extra::BadCookie => Some(source.cookie(true)),
            _ => None,
        };
        if let Some(c) = cookie {
            e.options_mut().insert(EdnsOption::Unknown(10, c));
        }
        m.edns = Some(e);
    }
    m.to_vec().unwrap()
}

/// What a path did with one response.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tally {
    sent: u32,
    slipped: u32,
    dropped: u32,
}

impl Tally {
    fn add(&mut self, reply: &Option<Vec<u8>>) {
        match reply {
            None => self.dropped += 1,
            Some(r) if r[2] & 0x02 != 0 => self.slipped += 1,
            Some(_) => self.sent += 1,
        }
    }
}

/// A scripted sequence of queries from several prefixes, with time passed
/// in: every response is answered, slipped (TC=1) or dropped alike in
/// the kernel and the fallback, byte for byte; a valid server cookie is
/// exempt in both; the counters agree.
#[test]
fn rate_limiting_decides_a_scripted_sequence_alike_in_kernel_and_fallback() {
    let rrl = RrlConfig {
        enabled: true,
        responses_per_second: 5,
        slip: 2,
        table_size: 1024,
        ..RrlConfig::default()
    };
    let mut p = pair(rrl);
    let a1 = Source::new("198.51.100.7");
    let a2 = Source::new("198.51.100.200"); // a1's /24
    let b = Source::new("203.0.113.9");
    let v6a = Source::new("2001:db8::7");
    let v6b = Source::new("2001:db8:0:ff::1"); // v6a's /56
    let v6c = Source::new("2001:db8:0:100::1"); // another /56
                                                // (milliseconds, source, queries, what they carry)
    let script: &[(u32, Source, u32, Extra)] = &[
        (1_000, a1, 8, Extra::Plain),
        (1_000, a2, 3, Extra::Edns),
        (1_000, a2, 4, Extra::ValidCookie),
        (1_000, a1, 2, Extra::BadCookie),
        (1_000, b, 5, Extra::Plain),
        (1_000, v6a, 6, Extra::Edns),
        (1_000, v6b, 3, Extra::Plain),
        (1_000, v6c, 5, Extra::Plain),
        (1_200, a1, 3, Extra::Plain), // one second's fifth: one credit
        (1_200, b, 2, Extra::Edns),
        (1_600, v6b, 4, Extra::ValidCookie),
        (1_600, v6a, 4, Extra::Plain),
        (3_000, a2, 7, Extra::Edns), // a full second's worth, not more
        (3_000, v6c, 7, Extra::BadCookie),
    ];
    let (mut kernel, mut fallback) = (Tally::default(), Tally::default());
    let mut id = 0u16;
    for &(ms, source, n, extra) in script {
        p.at(ms);
        for i in 0..n {
            id = id.wrapping_add(1);
            let qtype = match i % 2 {
                0 => RecordType::A,
                _ => RecordType::AAAA,
            };
            let dns = query("www.example.com.", qtype, id, extra, source);
            let (k, f) = p.both(source, &dns);
            assert_eq!(
                k, f,
                "at {ms} ms, query {i} from {source:?} with {extra:?}: kernel vs fallback"
            );
            kernel.add(&k);
            fallback.add(&f);
        }
    }
    assert_eq!(kernel, fallback);
    // The script's arithmetic: what a 5-a-second bucket gives each prefix.
    assert_eq!(
        kernel,
        Tally {
            sent: 43,
            slipped: 9,
            dropped: 11,
        }
    );
    let c = p.fast.counters().unwrap();
    let l = &p.router.rrl.get().unwrap().counts;
    use std::sync::atomic::Ordering::Relaxed;
    let ours = [&l.limited, &l.slipped, &l.dropped, &l.exempt].map(|v| v.load(Relaxed));
    assert_eq!(
        c.rrl, ours,
        "kernel counters [limited, slipped, dropped, exempt]"
    );
    assert_eq!(c.rrl[3], 8, "the valid cookies were exempt");
}

/// `log_only` counts what it would limit and sends everything, in both.
#[test]
fn log_only_counts_and_sends_everything_in_both_paths() {
    let rrl = RrlConfig {
        enabled: true,
        responses_per_second: 2,
        log_only: true,
        table_size: 1024,
        ..RrlConfig::default()
    };
    let mut p = pair(rrl);
    let s = Source::new("192.0.2.77");
    p.at(5_000);
    for id in 0..10 {
        let dns = query("www.example.com.", RecordType::A, id, Extra::Plain, s);
        let (k, f) = p.both(s, &dns);
        assert_eq!(k, f);
        let reply = k.expect("sent");
        assert_eq!(reply[2] & 0x02, 0, "not truncated");
        assert_eq!(u16::from_be_bytes([reply[6], reply[7]]), 2, "the answer");
    }
    let c = p.fast.counters().unwrap();
    assert_eq!(c.rrl[0], 8, "8 of 10 over a rate of 2");
    assert_eq!(c.answered_a, 10, "every answer went out of the kernel: {c}");
}

/// The example zone of the negative tests: names that exist, an empty
/// non-terminal, a wildcard, a cut with glue, a CNAME, a TXT-only name,
/// and MNAME/RNAME below the apex.
const NEGATIVE_ZONE: &str = "$ORIGIN example.com.\n$TTL 300\n\
    @ SOA ns1 hostmaster 7 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n\
    www A 192.0.2.80\nwww AAAA 2001:db8::80\nmail A 192.0.2.25\n\
    a.b.ent A 192.0.2.7\n*.wild A 192.0.2.9\nsub NS ns.sub\nns.sub A 192.0.2.53\n\
    alias CNAME www\ntxt TXT hello\nto-ns1 CNAME ns1\n\
    far NS ns.provider.net.\nfar NS ns1\n\
    two NS a.two\ntwo NS b.two\na.two A 192.0.2.61\na.two AAAA 2001:db8::61\nb.two A 192.0.2.62\n";

/// A zone whose SOA names are written in upper case: the fallback still
/// compresses a query name's labels against them.
const CASED_ZONE: &str = "$ORIGIN cased.test.\n$TTL 60\n\
    @ SOA NS1.Cased.Test. HostMaster.CASED.test. 1 3600 600 86400 30\n@ NS NS1\n\
    ns1 A 192.0.2.10\nwww A 192.0.2.11\n";

const CHILD_ZONE: &str = "$ORIGIN child.example.com.\n$TTL 120\n\
    @ SOA ns.elsewhere.net. admin.elsewhere.net. 3 3600 600 86400 30\n@ NS ns.elsewhere.net.\n\
    host A 192.0.2.44\n";

/// NXDOMAIN and NODATA, to A, AAAA and every other plain type, are
/// answered in the kernel byte for byte as the fallback answers them
/// (beside positive answers at the same names: a CNAME chain, SOA, NS
/// with its glue, TXT; DS denied at a delegation)
/// (with and without EDNS, DO, cookies), and
/// everything the kernel cannot answer exactly goes up unchanged: names
/// a wildcard could match, names at or below a cut, names in no served
/// zone. A signed zone's denials under DO=1 come from the kernel too,
/// with their NSEC records. Names are asked in lower
/// case and 0x20 mixed case alike.
#[test]
fn negative_answers_are_byte_identical_to_the_fallback_or_passed() {
    let signed = crate::support::signing::small_signed_zone();
    let store = ZoneStore::with_zones(vec![
        zone("example.com.", NEGATIVE_ZONE),
        zone("child.example.com.", CHILD_ZONE),
        zone("signed.test.", &signed),
        zone("cased.test.", CASED_ZONE),
    ]);
    let p = pair_with(RrlConfig::default(), store);
    // (name, type, what the kernel does: a negative answer unless DO=1
    // in a signed zone, a positive one, or nothing)
    const NEG: u8 = 1;
    const POS: u8 = 2;
    const REF: u8 = 3;
    const UP: u8 = 0;
    // NODATA and NXDOMAIN in the signed zone: DO=1 too (NSECs prove them).
    const NEG_SIGNED: u8 = 4;
    let cases: &[(&str, RecordType, u8)] = &[
        ("nope.example.com.", RecordType::A, NEG),
        ("nope.example.com.", RecordType::AAAA, NEG),
        ("x.nope.example.com.", RecordType::A, NEG),
        ("a.b.nope.example.com.", RecordType::A, UP), // three labels below
        ("mail.example.com.", RecordType::AAAA, NEG),
        ("example.com.", RecordType::AAAA, NEG),
        ("ent.example.com.", RecordType::A, NEG),
        ("b.ent.example.com.", RecordType::AAAA, NEG),
        ("x.ent.example.com.", RecordType::A, NEG),
        ("x.a.b.ent.example.com.", RecordType::AAAA, NEG),
        ("txt.example.com.", RecordType::A, NEG),
        ("x.alias.example.com.", RecordType::A, NEG),
        ("alias.example.com.", RecordType::A, POS), // CNAME in the zone
        ("wild.example.com.", RecordType::A, NEG),
        ("x.wild.example.com.", RecordType::AAAA, UP), // wildcard
        ("x.y.wild.example.com.", RecordType::A, UP),
        ("sub.example.com.", RecordType::A, REF), // cut
        ("x.sub.example.com.", RecordType::A, REF),
        ("y.x.sub.example.com.", RecordType::MX, REF),
        ("z.y.x.sub.example.com.", RecordType::A, UP), // three labels below
        ("ns.sub.example.com.", RecordType::AAAA, UP), // glue
        ("far.example.com.", RecordType::A, REF),      // out-of-zone and sibling NS
        ("www.far.example.com.", RecordType::HTTPS, REF),
        ("two.example.com.", RecordType::AAAA, REF), // two NS, three glue
        ("x.two.example.com.", RecordType::A, REF),
        ("a.two.example.com.", RecordType::A, UP),
        ("x.a.two.example.com.", RecordType::A, UP),
        ("x.ns.sub.example.com.", RecordType::A, UP),
        ("hostmaster.example.com.", RecordType::A, UP), // RNAME's label
        ("ns1.example.com.", RecordType::AAAA, UP),     // MNAME's label
        ("x.ns1.example.com.", RecordType::A, UP),
        ("nope.child.example.com.", RecordType::A, NEG),
        ("host.child.example.com.", RecordType::AAAA, NEG),
        ("child.example.com.", RecordType::A, NEG),
        ("nope.other.test.", RecordType::A, UP), // no zone
        ("test.", RecordType::A, UP),
        ("nope.signed.test.", RecordType::A, NEG_SIGNED),
        ("signed.test.", RecordType::AAAA, NEG_SIGNED),
        // Every other plain type: NXDOMAIN, and NODATA where the name
        // lacks it; its own types, CNAMEs, cuts, wildcards, DS, RRSIG and
        // ANY go up.
        ("nope.example.com.", RecordType::HTTPS, NEG),
        ("x.nope.example.com.", RecordType::TXT, NEG),
        ("www.example.com.", RecordType::HTTPS, NEG),
        ("www.example.com.", RecordType::SVCB, NEG),
        ("www.example.com.", RecordType::MX, NEG),
        ("www.example.com.", RecordType::CAA, NEG),
        ("example.com.", RecordType::HTTPS, NEG),
        ("example.com.", RecordType::SOA, POS),
        ("example.com.", RecordType::NS, POS),
        ("txt.example.com.", RecordType::TXT, POS),
        ("txt.example.com.", RecordType::HTTPS, NEG),
        ("ent.example.com.", RecordType::HTTPS, NEG),
        ("alias.example.com.", RecordType::HTTPS, POS), // NODATA at the chain's end
        ("alias.example.com.", RecordType::TXT, UP),
        ("to-ns1.example.com.", RecordType::HTTPS, UP), // MNAME compresses into the chain
        ("x.wild.example.com.", RecordType::HTTPS, UP),
        ("sub.example.com.", RecordType::DS, NEG), // the parent denies it
        ("www.example.com.", RecordType::DS, NEG),
        ("example.com.", RecordType::DS, UP), // the apex's is its parent's
        ("x.sub.example.com.", RecordType::DS, REF),
        ("ns.sub.example.com.", RecordType::DS, UP),
        ("nope.example.com.", RecordType::DS, NEG),
        ("sub.example.com.", RecordType::HTTPS, REF),
        ("sub.example.com.", RecordType::NS, REF),
        ("www.example.com.", RecordType::ANY, UP),
        ("www.example.com.", RecordType::RRSIG, UP),
        ("nope.signed.test.", RecordType::HTTPS, NEG_SIGNED),
        ("signed.test.", RecordType::HTTPS, NEG_SIGNED),
        ("host.child.example.com.", RecordType::TXT, NEG),
        ("nope.cased.test.", RecordType::A, NEG),
        ("www.cased.test.", RecordType::HTTPS, NEG),
        ("hostmaster.cased.test.", RecordType::A, UP), // RNAME's label
        ("ns1.cased.test.", RecordType::AAAA, UP),     // MNAME's label
    ];
    let sources = [Source::new("198.51.100.7"), Source::new("2001:db8::7")];
    let (mut total, mut in_kernel, mut id) = (0u32, 0u32, 0u16);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for &(name, qtype, kind) in cases {
        for source in sources {
            for extra in [
                Extra::Plain,
                Extra::Edns,
                Extra::ValidCookie,
                Extra::BadCookie,
            ] {
                for dnssec_ok in [false, true] {
                    for mixed in [false, true] {
                        if extra == Extra::Plain && dnssec_ok {
                            continue;
                        }
                        id = id.wrapping_add(1);
                        let qname = if mixed {
                            upper_some(name, &mut seed)
                        } else {
                            name.to_string()
                        };
                        let dns = query_do(&qname, qtype, id, extra, source, dnssec_ok);
                        total += 1;
                        let what = format!("{qname} {qtype} {extra:?} do={dnssec_ok} {source:?}");
                        let signed_do = dnssec_ok && name.ends_with("signed.test.");
                        let must = match kind {
                            NEG | POS | REF => !signed_do,
                            NEG_SIGNED => true,
                            _ => false,
                        };
                        match p.kernel(source, &dns) {
                            Kernel::Sent(k) => {
                                in_kernel += 1;
                                assert!(must, "{what}: answered in the kernel, must go up");
                                let f = p.fallback(source, &dns);
                                assert_eq!(Some(&k), f.as_ref(), "{what}: kernel vs fallback");
                                let rcode = k[3] & 0xf;
                                if kind == POS {
                                    assert_eq!(rcode, 0, "{what}");
                                    assert_ne!(&k[6..8], &[0, 0], "{what}: an answer");
                                    continue;
                                }
                                if kind == REF {
                                    assert_eq!((rcode, k[2] & 0x04), (0, 0), "{what}: not AA");
                                    assert_eq!(&k[6..8], &[0, 0], "{what}: no answer");
                                    assert_ne!(&k[8..10], &[0, 0], "{what}: NS records");
                                    continue;
                                }
                                assert!(rcode == 0 || rcode == 3, "{what}: rcode {rcode}");
                                // The SOA; signed, its RRSIG, and one or two NSECs,
                                // each with its RRSIG.
                                let authority = u16::from_be_bytes([k[8], k[9]]);
                                let want: &[u16] = if signed_do { &[4, 6] } else { &[1] };
                                assert_eq!(&k[6..8], &[0, 0], "{what}: no answer");
                                assert!(want.contains(&authority), "{what}: authority {authority}");
                            }
                            Kernel::Passed => {
                                assert!(!must, "{what}: passed up, but the kernel must answer it");
                            }
                            Kernel::Dropped => panic!("{what}: dropped without rate limiting"),
                        }
                    }
                }
            }
        }
    }
    let c = p.fast.counters().unwrap();
    println!("negative differential: {total} queries, {in_kernel} answered in the kernel ({c})");
    let (nxdomain, nodata) = (c.nxdomain.iter().sum::<u64>(), c.nodata.iter().sum::<u64>());
    let positive = c.answered_a + c.answered_aaaa + c.answered_other;
    let referrals = c.referrals.iter().sum::<u64>();
    assert!(referrals > 0, "{c}");
    assert_eq!(
        (nxdomain + nodata + positive + referrals) as u32,
        in_kernel,
        "counters agree"
    );
    assert!(c.nxdomain.iter().all(|&n| n > 0) && c.nodata.iter().all(|&n| n > 0));
}

/// `name` with some letters upper-cased (0x20), at least one.
fn upper_some(name: &str, seed: &mut u64) -> String {
    let out = crate::support::randomise_case(name, seed);
    if out == name {
        return name.to_ascii_uppercase();
    }
    out
}

/// A zone whose answers rotate: RRsets inline (two A), in a small block
/// (five A, three AAAA), in a block (60 A), too large to rotate in the
/// kernel (70 A); signed variants whose RRSIGs stay after the rotated
/// RRset, in a small block and in a block.
fn rotating_zone() -> String {
    let mut text = String::from(
        "$ORIGIN pool.test.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\n\
         @ DNSKEY \\# 6 0101030daabb\nns1 A 192.0.2.1\n\
         two A 192.0.2.2\ntwo A 192.0.2.3\n\
         five6 AAAA 2001:db8::1\nfive6 AAAA 2001:db8::2\nfive6 AAAA 2001:db8::3\n",
    );
    let sig = |ty: &str, tag: u32| {
        format!("RRSIG {ty} 13 3 300 20300101000000 20200101000000 {tag} pool.test. c2lnbmF0dXJlLW9uZQ==\n")
    };
    for i in 1..=5 {
        text += &format!("five A 198.51.100.{i}\n");
    }
    for i in 0..60 {
        text += &format!("sixty A 10.0.0.{i}\n");
    }
    for i in 0..70 {
        text += &format!("seventy A 10.1.0.{i}\n");
    }
    text += &format!("five {}five {}", sig("A", 1), sig("A", 2));
    text += &format!("two {}", sig("A", 1));
    text += &format!("five6 {}", sig("AAAA", 1));
    text += &format!("sixty {}", sig("A", 1));
    text
}

/// The addresses of a reply's answer section, in order.
fn addresses(reply: &[u8]) -> Vec<String> {
    let m = Message::from_vec(reply).unwrap();
    m.answers
        .iter()
        .filter_map(|r| match &r.data {
            hickory_proto::rr::RData::A(a) => Some(a.to_string()),
            hickory_proto::rr::RData::AAAA(a) => Some(a.to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn rotated_rrsets_are_byte_identical_to_the_fallback_for_every_query_id() {
    let store = ZoneStore::new();
    let origin = Name::from_str("pool.test.").unwrap();
    store.set_rotation(xdpdns::zone::RotationPolicy::new(&[origin]));
    store.replace_zones(vec![zone("pool.test.", &rotating_zone())], &[], NOW);
    let p = pair_with(RrlConfig::default(), store);
    let range =
        |prefix: &str, n: u32| -> Vec<String> { (0..n).map(|i| format!("{prefix}{i}")).collect() };
    // (name, type, the RRset in stored order, answered in the kernel)
    let cases: Vec<(&str, RecordType, Vec<String>, bool)> = vec![
        (
            "two.pool.test.",
            RecordType::A,
            range("192.0.2.", 4).split_off(2),
            true,
        ),
        (
            "five.pool.test.",
            RecordType::A,
            (1..=5).map(|i| format!("198.51.100.{i}")).collect(),
            true,
        ),
        (
            "five6.pool.test.",
            RecordType::AAAA,
            (1..=3).map(|i| format!("2001:db8::{i}")).collect(),
            true,
        ),
        (
            "sixty.pool.test.",
            RecordType::A,
            range("10.0.0.", 60),
            true,
        ),
        (
            "seventy.pool.test.",
            RecordType::A,
            range("10.1.0.", 70),
            false,
        ),
    ];
    let sources = [Source::new("198.51.100.7"), Source::new("2001:db8::7")];
    let ids = [0u16, 1, 2, 3, 4, 5, 59, 60, 61, 69, 0x8000, 0xfffe, 0xffff];
    let (mut total, mut in_kernel, mut expected) = (0, 0, 0);
    for (name, qtype, stored, kernel_answers) in &cases {
        let mut firsts = std::collections::BTreeSet::new();
        for &id in &ids {
            for source in sources {
                for (extra, dnssec_ok) in [
                    (Extra::Plain, false),
                    (Extra::Edns, false),
                    (Extra::Edns, true),
                    (Extra::ValidCookie, true),
                ] {
                    let dns = query_do(name, *qtype, id, extra, source, dnssec_ok);
                    let what =
                        format!("{name} {qtype} id {id} {extra:?} do={dnssec_ok} {source:?}");
                    total += 1;
                    let f = p.fallback(source, &dns).unwrap();
                    if f[2] & 0x02 != 0 {
                        // Sixty addresses do not fit 512 bytes: TC, in
                        // the fallback only.
                        assert_eq!(p.kernel(source, &dns), Kernel::Passed, "{what}");
                        continue;
                    }
                    expected += usize::from(*kernel_answers);
                    let k = id as usize % stored.len();
                    let expect = [&stored[k..], &stored[..k]].concat();
                    assert_eq!(addresses(&f), expect, "{what}: the fallback rotates");
                    firsts.insert(expect[0].clone());
                    match p.kernel(source, &dns) {
                        Kernel::Sent(kernel) => {
                            assert!(kernel_answers, "{what}: answered in the kernel");
                            assert_eq!(kernel, f, "{what}: kernel vs fallback");
                            in_kernel += 1;
                        }
                        Kernel::Passed => assert!(!kernel_answers, "{what}: passed up"),
                        Kernel::Dropped => panic!("{what}: dropped"),
                    }
                }
            }
        }
        assert!(
            firsts.len() >= stored.len().min(ids.len()) / 2,
            "{name}: {firsts:?}"
        );
    }
    println!("rotation differential: {total} queries, {in_kernel} answered in the kernel");
    assert_eq!(in_kernel, expected);
    assert!(in_kernel > total / 2, "{in_kernel} of {total}");
}

/// Referrals and NODATA after a CNAME chain are rate limited alike in the
/// kernel and the fallback: the same verdicts, and the same slipped
/// replies (a referral's not authoritative, as its header says).
#[test]
fn referrals_and_chain_nodata_are_limited_and_slipped_alike() {
    let rrl = RrlConfig {
        enabled: true,
        responses_per_second: 2,
        slip: 1,
        table_size: 1024,
        ..RrlConfig::default()
    };
    let text = format!("{ZONE}sub NS ns.sub\nns.sub A 192.0.2.53\nweb CNAME www\n");
    let mut p = pair_with(
        rrl,
        ZoneStore::with_zones(vec![zone("example.com.", &text)]),
    );
    let source = Source::new("198.51.100.7");
    p.at(1_000);
    let (mut kernel, mut fallback, mut id) = (Tally::default(), Tally::default(), 0u16);
    for (name, qtype) in [
        ("www.sub.example.com.", RecordType::A),
        ("web.example.com.", RecordType::HTTPS),
    ] {
        for _ in 0..6 {
            id = id.wrapping_add(1);
            let dns = query(name, qtype, id, Extra::Plain, source);
            let (k, f) = p.both(source, &dns);
            assert_eq!(k, f, "{name} {qtype} query {id}: kernel vs fallback");
            kernel.add(&k);
            fallback.add(&f);
        }
    }
    assert_eq!(kernel, fallback);
    // Two a second per class, and every limited one slipped.
    assert!(
        kernel.sent >= 2 && kernel.slipped >= 2 && kernel.dropped == 0,
        "{kernel:?}"
    );
    let c = p.fast.counters().unwrap();
    assert!(c.referrals[0] >= 1, "{c}");
}
