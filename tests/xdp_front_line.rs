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
use xdpdns::cookies::CookieSecrets;
use xdpdns::handler::{Handler, Transport};
use xdpdns::router::{Response, Router};
use xdpdns::rrl::{Limiter, RrlConfig};
use xdpdns::wire::ServerEdns;
use xdpdns::xdp::sys::test_run;
use xdpdns::xdp::{compile, Capacity, FastPath};
use xdpdns::zone::{load_zone_str, ZoneStore};
use xdpdns_common::cookie::{self, ClientIp};

const XDP_DROP: u32 = 1;
const XDP_TX: u32 = 3;

/// The unix second both paths answer at (cookies are minted at it).
const NOW: u64 = 1_767_225_600;
const SECRET: &str = "e5e973e5a6b2a43f48e7dc849e37bfcf\n445536bcd2513298075a5d379663c962\n";
const CLIENT_COOKIE: [u8; 8] = [0x24, 0x64, 0xc4, 0xab, 0xcf, 0x10, 0xc9, 0x57];

const ZONE: &str = "$ORIGIN example.com.\n$TTL 300\n\
    @ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n\
    www A 192.0.2.80\nwww A 192.0.2.81\nwww AAAA 2001:db8::80\n";

fn store() -> ZoneStore {
    let origin = Name::from_str("example.com.").unwrap();
    ZoneStore::with_zones(vec![
        load_zone_str(ZONE, &origin, Path::new("front.zone")).unwrap()
    ])
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
    assert!(
        unsafe { libc::geteuid() } == 0,
        "the XDP tests load BPF programs and need root (CI runs as root)"
    );
    let h = handler();
    let capacity = Capacity {
        entries: 1024,
        rrl_slots: rrl.kernel_slots(),
    };
    let mut fast = FastPath::load(capacity, 53, &h.edns).expect("load the XDP program");
    let store = store();
    fast.install(compile(&store.snapshot()).0).unwrap();
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    let mono = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    fast.set_clock((NOW * 1_000_000_000 + 500_000_000).wrapping_sub(mono))
        .unwrap();
    let router = Router::new(store, h);
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
    /// bytes, or `None` when it sends nothing.
    fn both(&self, source: Source, dns: &[u8]) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
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
        let kernel = match out.action {
            XDP_TX => Some(check_reply_to(
                source.family(),
                0,
                &f,
                &out.frame,
                &source.octets(),
            )),
            XDP_DROP => None,
            other => panic!("kernel: unexpected XDP action {other} for a hit"),
        };
        let fallback = match self.router.respond(dns, Transport::Udp, source.addr, NOW) {
            Response::One(bytes) => Some(bytes),
            Response::Drop => None,
            Response::Transfer(_) => panic!("a transfer for a query"),
        };
        (kernel, fallback)
    }
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
    let mut m = Message::query();
    m.metadata.id = id;
    m.metadata.recursion_desired = id % 2 == 0;
    m.add_query(Query::query(Name::from_str(name).unwrap(), rtype));
    if extra != Extra::Plain {
        let mut e = Edns::new();
        e.set_max_payload(1232);
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
