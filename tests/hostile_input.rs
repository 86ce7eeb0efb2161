//! Hostile and careless API clients through the real binary: an oversized
//! registration, the largest one the limits allow, a thousand slow
//! clients. DNS must keep answering throughout; each test prints the DNS
//! latency it saw (the figures the closing notes quote) and asserts bounds
//! loose enough for a shared VM.

use crate::support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hickory_proto::rr::{RData, RecordType};

use support::{eventually, http, query, udp_raw, Server};

const TOKEN: &str = "hostile-token";

fn start() -> Server {
    start_with_limits("")
}

/// With `limits` as the body of `[registry.limits]`.
fn start_with_limits(limits: &str) -> Server {
    Server::start_example(
        "",
        &format!(
            r#"
[registry]
listen = "127.0.0.1:0"
token = "{TOKEN}"
data_dir = "registry"
require_opt_in = false
ns = ["ns1.example.com."]
hostmaster = "hostmaster.example.com."

[registry.limits]
{limits}

[[registry.zone]]
name = "sd.example."
networks = ["*"]

[[registry.zone]]
name = "binder.example."
"#
        ),
    )
}

fn put(s: &Server, id: &str, body: &str) -> (u16, serde_json::Value) {
    http(
        "PUT",
        &format!("{}/v1/instances/{id}", s.api()),
        Some(TOKEN),
        Some(body),
    )
}

/// A PUT whose response is read while the body is still being sent, as
/// a client that watches for an early refusal does: the server answers
/// 413 from the length alone and closes without reading the body, so a
/// client that reads only after sending all of it may see its upload
/// reset first (a broken pipe) and never the refusal.
fn put_reading_early(s: &Server, id: &str, body: &str) -> (u16, serde_json::Value) {
    let addr = s.api_addr.expect("a registry API");
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reading = stream.try_clone().unwrap();
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        // Until the server closes (or resets) the connection.
        while let Ok(n) = reading.read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        got
    });
    let head = format!(
        "PUT /v1/instances/{id} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    // The upload may be cut short by the refusal: that is the point.
    let _ = stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body.as_bytes()));
    let reply = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
    let code = reply
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {reply:?}"));
    let json = reply
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b.trim()).ok())
        .unwrap_or(serde_json::Value::Null);
    (code, json)
}

fn addresses(n: usize) -> String {
    (0..n)
        .map(|i| format!("\"10.{}.{}.{}\"", i >> 16 & 255, i >> 8 & 255, i & 255))
        .collect::<Vec<_>>()
        .join(",")
}

/// UDP queries to the server every 2 ms, each timed, until stopped.
struct Probe {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<Duration>>,
}

impl Probe {
    fn start(addr: SocketAddr) -> Probe {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let q = query("www.example.com.", RecordType::A, None);
            let mut seen = Vec::new();
            // Bounded: at most 60 s of probing.
            let deadline = Instant::now() + Duration::from_secs(60);
            while !flag.load(Ordering::Relaxed) && Instant::now() < deadline {
                let t = Instant::now();
                assert!(udp_raw(addr, &q).is_some(), "DNS stopped answering");
                seen.push(t.elapsed());
                std::thread::sleep(Duration::from_millis(2));
            }
            seen
        });
        Probe { stop, thread }
    }

    /// (queries, p99, worst).
    fn finish(self, what: &str) -> (usize, Duration, Duration) {
        self.stop.store(true, Ordering::Relaxed);
        let mut seen = self.thread.join().expect("probe");
        seen.sort();
        let n = seen.len();
        assert!(n > 0, "no DNS query completed");
        let p99 = seen[(n * 99).div_ceil(100) - 1];
        let worst = seen[n - 1];
        eprintln!("{what}: {n} DNS queries, p99 {p99:?}, worst {worst:?}");
        (n, p99, worst)
    }
}

#[test]
fn an_oversized_registration_is_refused_at_once_while_dns_answers() {
    let s = start();
    let probe = Probe::start(s.addr);
    std::thread::sleep(Duration::from_millis(100));
    let body = format!(
        r#"{{"owner":"acme","addresses":[{}],"services":["web:80"],"lease_secs":60}}"#,
        addresses(50_000)
    );
    let started = Instant::now();
    let (code, err) = put_reading_early(&s, "huge", &body);
    let took = started.elapsed();
    std::thread::sleep(Duration::from_millis(100));
    let (_, p99, _) = probe.finish("50,000-address PUT");
    eprintln!("50,000-address PUT refused in {took:?}");
    assert_eq!(code, 413, "{err}");
    assert!(
        err["error"]
            .as_str()
            .unwrap()
            .contains("registry.limits.max_body_bytes"),
        "{err}"
    );
    assert!(took < Duration::from_secs(1), "refused after {took:?}");
    assert!(p99 < Duration::from_millis(250), "DNS p99 {p99:?}");
}

#[test]
fn the_largest_allowed_registration_is_accepted_and_answered() {
    let s = start();
    // Every per-registration limit at once: 64 addresses, 32 services,
    // 32 Binder aliases.
    let services = (0..32)
        .map(|i| format!("\"svc{i}:80\""))
        .collect::<Vec<_>>()
        .join(",");
    let aliases = (0..32)
        .map(|i| format!("\"alias{i}.big.binder.example\""))
        .collect::<Vec<_>>()
        .join(",");
    let body = format!(
        r#"{{"owner":"acme","addresses":[{}],"services":[{services}],"lease_secs":60,
            "binder":{{"domain":"big.binder.example","type":"host","aliases":[{aliases}]}}}}"#,
        addresses(64)
    );
    let probe = Probe::start(s.addr);
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    let (code, resp) = put(&s, "largest", &body);
    let took = started.elapsed();
    eprintln!("largest allowed registration acknowledged in {took:?}");
    assert_eq!(code, 200, "{resp}");
    // It held the writer 9.6 s (debug build) while record derivation
    // searched a list per record.
    assert!(took < Duration::from_secs(3), "acknowledged after {took:?}");
    let count_a = |name: &str| {
        s.tcp(name, RecordType::A)
            .answers
            .iter()
            .filter(|r| matches!(r.data, RData::A(_)))
            .count()
    };
    assert!(
        eventually(Duration::from_secs(10), || {
            count_a("largest.inst.acme.sd.example.") == 64
                && count_a("svc31.svc.acme.sd.example.") == 64
                && count_a("alias31.big.binder.example.") == 64
        }),
        "the instance, its last service and its last alias answer all 64 addresses"
    );
    eprintln!(
        "... and answered over TCP {:?} after it was sent",
        started.elapsed()
    );
    let (_, p99, _) = probe.finish("largest allowed registration");
    assert!(p99 < Duration::from_millis(250), "DNS p99 {p99:?}");
    // One over any limit is refused naming it.
    let (code, err) = put(
        &s,
        "over",
        &body.replace("\"svc0:80\"", "\"svc0:80\",\"svc32:80\""),
    );
    assert_eq!(
        (code, err["field"].as_str()),
        (422, Some("services")),
        "{err}"
    );
}

/// A connection from `source` (a loopback address of the test's choice).
fn connect_from(source: &str, to: SocketAddr) -> std::io::Result<TcpStream> {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    sock.bind(&format!("{source}:0").parse::<SocketAddr>().unwrap().into())?;
    sock.connect(&to.into())?;
    Ok(sock.into())
}

/// Raises this process's open-file limit to its hard limit (1,000 client
/// sockets do not fit the usual soft 1,024 beside everything else).
fn raise_nofile() {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain getrlimit/setrlimit on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 {
            l.rlim_cur = l.rlim_max.min(65_536);
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

#[test]
fn a_thousand_slow_api_clients_stop_neither_registrations_nor_dns_over_tcp() {
    raise_nofile();
    let s = start();
    let api: SocketAddr = s.api().trim_start_matches("http://").parse().unwrap();
    // 1,000 clients from four addresses, each sending one byte of a
    // request a second.
    let mut slow = Vec::new();
    for i in 0..1000 {
        let source = format!("127.0.0.{}", 2 + i % 4);
        if let Ok(c) = connect_from(&source, api) {
            slow.push(c);
        }
    }
    assert_eq!(slow.len(), 1000, "every slow client connected");
    let request = b"PUT /v1/instances/slow HTTP/1.1\r\nHost: x\r\n";
    let started = Instant::now();
    let mut registered = 0;
    let mut tcp_answers = 0;
    for round in 0..5 {
        for c in &mut slow {
            let _ = c.write(&request[round..round + 1]);
        }
        let body = format!(
            r#"{{"owner":"acme","addresses":["10.9.0.{round}"],"services":["web:80"],"lease_secs":60}}"#
        );
        let t = Instant::now();
        let (code, err) = put(&s, &format!("fast{round}"), &body);
        assert_eq!(
            code, 200,
            "registration {round} during the slow clients: {err}"
        );
        eprintln!(
            "registration {round} with 1,000 slow clients open: {:?}",
            t.elapsed()
        );
        registered += 1;
        // The write is acknowledged once durable; its publish follows
        // within milliseconds (the writer's loop), so ask a few times.
        let name = format!("fast{round}.inst.acme.sd.example.");
        let answered = (0..10).any(|_| {
            let found = !s.tcp(&name, RecordType::A).answers.is_empty();
            if !found {
                std::thread::sleep(Duration::from_millis(50));
            }
            found
        });
        if answered {
            tcp_answers += 1;
        }
        std::thread::sleep(Duration::from_secs(1).saturating_sub(t.elapsed()));
    }
    assert_eq!(registered, 5);
    assert!(tcp_answers >= 4, "DNS over TCP answered {tcp_answers} of 5");
    // Over the per-address cap, the rest were told so and closed.
    let mut refused = 0;
    for c in &mut slow {
        c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut buf = [0u8; 512];
        if let Ok(n) = c.read(&mut buf) {
            if buf[..n].starts_with(b"HTTP/1.1 503") {
                refused += 1;
            }
        }
    }
    eprintln!(
        "{refused} of 1,000 slow clients refused at the per-address cap; {:?} in all",
        started.elapsed()
    );
    assert!(refused >= 1000 - 4 * 64, "{refused} refused");
}

/// A client that sends its headers but not its body within
/// `body_timeout_ms` gets 408 in the JSON form; one that does not finish
/// its headers within `header_timeout_ms` is disconnected. Others are
/// served meanwhile.
#[test]
fn request_bodies_and_headers_have_deadlines() {
    let s = start_with_limits("header_timeout_ms = 500\nbody_timeout_ms = 500");
    let api: SocketAddr = s.api().trim_start_matches("http://").parse().unwrap();

    let mut body_late = TcpStream::connect(api).unwrap();
    body_late
        .write_all(
            format!(
                "PUT /v1/instances/late HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
                 Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"owner\":"
            )
            .as_bytes(),
        )
        .unwrap();
    let mut headers_late = TcpStream::connect(api).unwrap();
    headers_late
        .write_all(b"PUT /v1/instances/late HTTP/1.1\r\nHost: x\r\n")
        .unwrap();

    // Meanwhile a prompt client is served.
    let (code, _) = put(
        &s,
        "prompt",
        r#"{"owner":"acme","addresses":["10.0.0.9"],"lease_secs":60}"#,
    );
    assert_eq!(code, 200);

    let started = Instant::now();
    body_late
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut reply = String::new();
    let _ = body_late.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(reply.contains("registry.limits.body_timeout_ms"), "{reply}");

    headers_late
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut rest = Vec::new();
    let closed = headers_late.read_to_end(&mut rest).is_ok();
    assert!(closed, "closed by the server, not by our read timeout");
    assert!(started.elapsed() < Duration::from_secs(4));
    // Nothing was registered by the late clients.
    let (code, _) = http(
        "GET",
        &format!("{}/v1/instances/late", s.api()),
        Some(TOKEN),
        None,
    );
    assert_eq!(code, 404);
}

/// Instances in all and per owner are capped, through the API, with the
/// limit's key in the error; re-registering one held is not a new one.
#[test]
fn instance_counts_are_capped_in_all_and_per_owner() {
    let s = start_with_limits("max_instances = 3\nmax_instances_per_owner = 2");
    let body =
        |owner: &str| format!(r#"{{"owner":"{owner}","addresses":["10.0.0.1"],"lease_secs":60}}"#);
    assert_eq!(put(&s, "a1", &body("a")).0, 200);
    assert_eq!(put(&s, "a2", &body("a")).0, 200);
    let (code, err) = put(&s, "a3", &body("a"));
    assert_eq!((code, err["field"].as_str()), (422, Some("owner")), "{err}");
    assert!(err["error"]
        .as_str()
        .unwrap()
        .contains("registry.limits.max_instances_per_owner"));
    assert_eq!(put(&s, "a2", &body("a")).0, 200, "a renewal of one held");
    assert_eq!(put(&s, "b1", &body("b")).0, 200);
    let (code, err) = put(&s, "c1", &body("c"));
    assert_eq!((code, err["field"].as_str()), (422, Some("id")), "{err}");
    assert!(err["error"]
        .as_str()
        .unwrap()
        .contains("registry.limits.max_instances"));
    let del = http(
        "DELETE",
        &format!("{}/v1/instances/b1", s.api()),
        Some(TOKEN),
        None,
    );
    assert_eq!(del.0, 204);
    assert_eq!(put(&s, "c1", &body("c")).0, 200, "a place freed");
}
