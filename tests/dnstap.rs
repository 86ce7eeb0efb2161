//! dnstap read by the real tools: `fstrm_capture` (Debian fstrm-bin)
//! takes the stream on a Unix socket and `dnstap-ldns` reads the capture.
//! The fallback's queries and responses arrive whole, with their
//! addresses, transports and times; the kernel's answers arrive sampled
//! at the configured rate with the exact bytes the client received; and a
//! collector that stops reading costs dropped messages, not answers.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant, SystemTime};

use hickory_proto::op::Message;
use hickory_proto::rr::RecordType;
use xdpdns_core::dnstap::frames::{control, take_frame, ControlType, Frame};
use xdpdns_core::dnstap::message::Dnstap;

use super::xdp_veth::{in_netns, Link};
use crate::support::peers::Proc;
use crate::support::process::free_port;
use crate::support::{eventually, query, udp_raw, Server, TempDir};

const ZONE: &str = "$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\n\
                    ns1 A 10.211.0.1\nwww A 192.0.2.80\nwww AAAA 2001:db8::80\n";

/// `dnstap-ldns -y`'s documents, each as its `key: value` lines (the
/// message's text under `query_message`/`response_message` left out).
fn ldns_documents(file: &std::path::Path) -> Vec<HashMap<String, String>> {
    let out = std::process::Command::new("dnstap-ldns")
        .arg("-y")
        .arg("-r")
        .arg(file)
        .output()
        .expect("dnstap-ldns (Debian dnstap-ldns) runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .split("\n---")
        .map(|doc| {
            doc.lines()
                .filter_map(|l| l.trim().split_once(": "))
                .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
                .collect::<HashMap<_, _>>()
        })
        .filter(|d| d.contains_key("type"))
        .collect()
}

/// The capture's dnstap messages, decoded here (for their bytes).
fn capture_messages(file: &std::path::Path) -> Vec<Dnstap> {
    let mut buf = std::fs::read(file).unwrap();
    let mut out = Vec::new();
    while let Ok(Some(f)) = take_frame(&mut buf) {
        if let Frame::Data(d) = f {
            out.push(Dnstap::decode_frame(&d).expect("a dnstap message"));
        }
    }
    out
}

/// `fstrm_capture` taking dnstap where `listen` says, into `file`.
fn fstrm_capture(listen: &[&str], file: &std::path::Path) -> Proc {
    let dir = TempDir::new("fstrm");
    let conf = dir.0.join("none");
    let mut args = vec!["-t", "protobuf:dnstap.Dnstap", "-w", file.to_str().unwrap()];
    args.extend_from_slice(listen);
    Proc::spawn("fstrm_capture", dir, conf, "fstrm_capture", &args)
}

fn with_id(mut packet: Vec<u8>, id: u16) -> Vec<u8> {
    packet[..2].copy_from_slice(&id.to_be_bytes());
    packet
}

/// `dnstap-ldns`'s `!!timestamp 2026-11-26 22:50:43.558313` as Unix seconds.
fn timestamp(v: &str) -> f64 {
    let v = v.trim_start_matches("!!timestamp ").trim();
    let out = std::process::Command::new("date")
        .args(["-u", "-d", v, "+%s.%N"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[test]
fn both_paths_reach_fstrm_capture_and_dnstap_ldns_reads_them() {
    let link = Link::new("t");
    let dir = TempDir::new("dnstap");
    dir.write("zone.db", ZONE);
    let socket = dir.0.join("tap.sock");
    let capture = dir.0.join("capture.fstrm");
    let mut collector = fstrm_capture(&["-u", socket.to_str().unwrap()], &capture);
    assert!(
        eventually(Duration::from_secs(5), || socket.exists()),
        "{}",
        collector.log()
    );
    let config = dir.write(
        "xdpdns.toml",
        &format!(
            "[server]\nlisten = [\"10.211.0.1:53\"]\n[identity]\nserver_id = \"tap-test\"\n\
             [xdp]\ninterfaces = [\"{}\"]\nmode = \"generic\"\n\
             [dnstap]\nsocket = \"tap.sock\"\nkernel_answers = 4\nkernel_passed = 1\n\
             [[zone]]\norigin = \"example.com.\"\nfile = \"zone.db\"\n\
             allow_transfer = [{{ from = [\"10.211.0.0/24\"] }}]\n",
            link.server_if
        ),
    );
    let server = Server::start_in(dir, config, &["ip", "netns", "exec", &link.server_ns]);
    assert!(
        server.wait_log("dnstap: collector connected", Duration::from_secs(10)),
        "{}",
        server.log()
    );
    assert!(
        server.wait_log("XDP fast path attached", Duration::from_secs(10)),
        "{}",
        server.log()
    );
    let t0 = unix_now();

    // Hits the kernel answers, each with its own id: the replies kept.
    const HITS: u16 = 400;
    let hit = query("www.example.com.", RecordType::A, None);
    let replies: HashMap<u16, Vec<u8>> = in_netns(&link.client_ns, move || {
        let s = UdpSocket::bind("10.211.0.2:0").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let server: SocketAddr = "10.211.0.1:53".parse().unwrap();
        let mut got = HashMap::new();
        let mut buf = [0u8; 2048];
        for id in 0..HITS {
            s.send_to(&with_id(hit.clone(), id), server).unwrap();
            if let Ok(n) = s.recv(&mut buf) {
                got.insert(u16::from_be_bytes([buf[0], buf[1]]), buf[..n].to_vec());
            }
        }
        got
    });
    assert!(
        replies.len() as u16 >= HITS - 5,
        "{} replies",
        replies.len()
    );
    // Misses (a type the zone does not have at a name it does not have
    // either is NXDOMAIN in the kernel; CH TXT goes up), TCP, an AXFR.
    let misses = 5;
    for _ in 0..misses {
        let out = link.dig(&["id.server", "TXT", "CH"]);
        assert!(out.contains("tap-test"), "{out}");
    }
    let tcp = 3;
    for _ in 0..tcp {
        assert!(link
            .dig(&["+tcp", "www.example.com", "AAAA"])
            .contains("2001:db8::80"));
    }
    let axfr = link.dig(&["example.com", "AXFR"]);
    assert!(axfr.contains("XFR size"), "{axfr}");
    // Everything written, then the capture closed.
    std::thread::sleep(Duration::from_millis(500));
    collector.stop(libc::SIGINT);
    let _ = collector.child.wait();
    let t1 = unix_now();

    // dnstap-ldns prints every message, in the capture's order, but not
    // `extra` (what tells the kernel's apart): that is read here.
    let docs = ldns_documents(&capture);
    let messages = capture_messages(&capture);
    assert_eq!(docs.len(), messages.len());
    let fallback: Vec<_> = docs
        .iter()
        .zip(&messages)
        .filter(|(_, m)| m.extra.is_none())
        .map(|(d, _)| d)
        .collect();
    // Every fallback exchange: query and response, UDP and TCP, with the
    // client's and the server's addresses and times inside the run.
    let count = |t: &str, proto: &str| {
        fallback
            .iter()
            .filter(|d| d["type"] == t && d["socket_protocol"] == proto)
            .count()
    };
    assert_eq!(count("AUTH_QUERY", "UDP"), misses, "{fallback:#?}");
    assert_eq!(count("AUTH_RESPONSE", "UDP"), misses);
    assert_eq!(
        count("AUTH_QUERY", "TCP"),
        tcp + 1,
        "TCP queries and the AXFR"
    );
    assert!(count("AUTH_RESPONSE", "TCP") > tcp);
    for d in &fallback {
        assert_eq!(d["identity"], "tap-test");
        assert_eq!(d["query_address"], "10.211.0.2", "{d:?}");
        assert_eq!(d["response_address"], "10.211.0.1");
        assert_eq!(d["response_port"], "53");
        let q = timestamp(&d["query_time"]);
        assert!(
            q >= t0 - 1.0 && q <= t1 + 1.0,
            "query_time {q} outside {t0}..{t1}"
        );
        if let Some(r) = d.get("response_time") {
            assert!(timestamp(r) >= q);
        }
    }

    // The kernel's samples: one answer in four, within binomial bounds
    // (mean 100, sd 8.7: five sd either side), each response the very
    // bytes the client got for that id.
    let kernel: Vec<_> = messages
        .iter()
        .filter(|d| d.extra.as_deref() == Some(&b"xdp: answered"[..]))
        .filter_map(|d| d.message.clone())
        .collect();
    let responses: Vec<_> = kernel.iter().filter(|m| m.r#type == 2).collect();
    let queries = kernel.iter().filter(|m| m.r#type == 1).count();
    assert!(
        (57..=143).contains(&responses.len()),
        "{} kernel answers sampled of {HITS} at one in four",
        responses.len()
    );
    assert_eq!(
        queries,
        responses.len(),
        "each sample: its query and its answer"
    );
    for m in &responses {
        let bytes = m.response_message.as_ref().unwrap();
        let id = u16::from_be_bytes([bytes[0], bytes[1]]);
        assert_eq!(
            Some(bytes),
            replies.get(&id),
            "the answer the client got for id {id}"
        );
        assert_eq!(m.socket_protocol, Some(1));
        assert_eq!(m.query_address.as_deref(), Some(&[10u8, 211, 0, 2][..]));
        assert_eq!(m.response_port, Some(53));
    }
    // Passed queries, sampled one in one: the CH TXT ones, with why.
    let passed = messages
        .iter()
        .filter(|d| {
            d.extra
                .as_deref()
                .is_some_and(|e| e.starts_with(b"xdp: passed"))
        })
        .count();
    assert_eq!(passed, misses);
    let m = Message::from_vec(responses[0].response_message.as_ref().unwrap()).unwrap();
    assert_eq!(m.answers.len(), 1);
}

/// A collector that takes the handshake, then never reads, until `done`
/// says so.
fn stalled_collector(
    path: &std::path::Path,
    done: std::sync::mpsc::Receiver<()>,
) -> std::thread::JoinHandle<()> {
    let listener = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 256];
        // READY, then ACCEPT, then START.
        for expected in [ControlType::Ready, ControlType::Start] {
            loop {
                if let Ok(Some(Frame::Control(c))) = take_frame(&mut buf) {
                    assert_eq!(c.kind, expected);
                    break;
                }
                let n = s.read(&mut chunk).unwrap();
                assert!(n > 0, "the writer hung up during the handshake");
                buf.extend_from_slice(&chunk[..n]);
            }
            if expected == ControlType::Ready {
                s.write_all(&control(ControlType::Accept, true)).unwrap();
            }
        }
        // Holds the connection open without reading.
        let _ = done.recv_timeout(Duration::from_secs(60));
        drop(s);
    })
}

fn p99(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() * 99 / 100]
}

/// `n` queries one after another; each one's time.
fn timed_queries(addr: SocketAddr, n: usize) -> Vec<Duration> {
    let q = query("www.example.com.", RecordType::A, None);
    (0..n)
        .map(|_| {
            let t = Instant::now();
            assert!(udp_raw(addr, &q).is_some(), "a query went unanswered");
            t.elapsed()
        })
        .collect()
}

fn metric(addr: SocketAddr, line_start: &str) -> f64 {
    let text = ureq::get(&format!("http://{addr}/metrics"))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(line_start))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

#[test]
fn a_collector_that_stops_reading_costs_dropped_messages_not_answers() {
    let dir = TempDir::new("dnstap-stall");
    dir.write("zone.db", ZONE);
    let (port, metrics) = (free_port(), free_port());
    let config = dir.write(
        "xdpdns.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\n[metrics]\nlisten = \"127.0.0.1:{metrics}\"\n\
             [[zone]]\norigin = \"example.com.\"\nfile = \"zone.db\"\n"
        ),
    );
    let server = Server::start_with_config(dir, config.clone());
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let metrics: SocketAddr = format!("127.0.0.1:{metrics}").parse().unwrap();
    let n = 3000;
    let without = p99(timed_queries(addr, n));
    // Now tapped, into a collector that never reads: its socket buffer
    // fills, then the queue (kept small), then messages are dropped.
    let socket = server.dir.0.join("stalled.sock");
    let (done, stop) = std::sync::mpsc::channel();
    let collector = stalled_collector(&socket, stop);
    let text = std::fs::read_to_string(&config).unwrap()
        + "[dnstap]\nsocket = \"stalled.sock\"\nqueue = 64\n";
    std::fs::write(&config, text).unwrap();
    server.signal("HUP");
    assert!(
        server.wait_log("dnstap: collector connected", Duration::from_secs(10)),
        "{}",
        server.log()
    );
    let stalled = p99(timed_queries(addr, n));
    let dropped = metric(
        metrics,
        "xdpdns_dnstap_dropped_total{reason=\"queue_full\"} ",
    );
    let written = metric(metrics, "xdpdns_dnstap_written_total ");
    eprintln!("p99 without dnstap {without:?}, with a stalled collector {stalled:?}; {dropped} dropped, {written} written");
    assert!(dropped > 1000.0, "{dropped} dropped ({written} written)");
    assert!(
        stalled <= without * 2 + Duration::from_millis(2),
        "p99 {stalled:?} with a stalled collector, {without:?} without"
    );
    // And serving goes on past it; `ctl status` says so.
    assert!(udp_raw(addr, &query("www.example.com.", RecordType::A, None)).is_some());
    let status = std::process::Command::new(crate::support::process::BIN)
        .args(["ctl", "--config"])
        .arg(&config)
        .arg("status")
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    let line = status
        .lines()
        .find(|l| l.starts_with("dnstap: "))
        .unwrap_or_default();
    assert!(
        line.contains("stalled.sock (connected)") && !line.contains(" 0 dropped"),
        "{status}"
    );
    drop(server);
    let _ = done.send(());
    let _ = collector.join();
}

/// Over TCP, to a collector that starts after the server: the writer
/// retries with its back-off, and what is tapped once it is up arrives.
#[test]
fn a_collector_over_tcp_that_starts_late_is_reached_by_the_back_off() {
    let dir = TempDir::new("dnstap-tcp");
    dir.write("zone.db", ZONE);
    let (port, tap_port) = (free_port(), free_port());
    let config = dir.write(
        "xdpdns.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\n\
             [dnstap]\naddress = \"127.0.0.1:{tap_port}\"\nresponses = false\n\
             zones = [\"example.com.\"]\n\
             [[zone]]\norigin = \"example.com.\"\nfile = \"zone.db\"\n"
        ),
    );
    let server = Server::start_with_config(dir, config);
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // Nobody listens yet: the server answers all the same.
    assert!(udp_raw(addr, &query("www.example.com.", RecordType::A, None)).is_some());
    assert!(
        server.wait_log("cannot reach the collector", Duration::from_secs(5)),
        "{}",
        server.log()
    );
    let capture = server.dir.0.join("tcp.fstrm");
    let port_arg = tap_port.to_string();
    let mut collector = fstrm_capture(&["-a", "127.0.0.1", "-p", &port_arg], &capture);
    assert!(
        server.wait_log("dnstap: collector connected", Duration::from_secs(15)),
        "{}\n{}",
        server.log(),
        collector.log()
    );
    // Queries only (responses = false), and only for the zone listed.
    for name in ["www.example.com.", "www.example.org.", "example.com."] {
        assert!(udp_raw(addr, &query(name, RecordType::A, None)).is_some());
    }
    std::thread::sleep(Duration::from_millis(300));
    collector.stop(libc::SIGINT);
    let _ = collector.child.wait();
    let docs = ldns_documents(&capture);
    let kinds: Vec<&str> = docs.iter().map(|d| d["type"].as_str()).collect();
    assert!(kinds.iter().all(|k| *k == "AUTH_QUERY"), "{docs:#?}");
    let names: Vec<Message> = capture_messages(&capture)
        .iter()
        .map(|d| {
            Message::from_vec(d.message.as_ref().unwrap().query_message.as_ref().unwrap()).unwrap()
        })
        .collect();
    let asked: Vec<String> = names
        .iter()
        .map(|m| m.queries[0].name().to_string())
        .collect();
    assert!(
        asked.contains(&"www.example.com.".to_string())
            && asked.contains(&"example.com.".to_string()),
        "{asked:?}"
    );
    assert!(
        !asked.iter().any(|n| n.ends_with("example.org.")),
        "{asked:?}"
    );
}
