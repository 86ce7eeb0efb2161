//! End-to-end: the real binary on a loopback port, queried over UDP and
//! TCP, showing every authoritative behaviour of the fallback server.

use crate::support;

use std::net::Ipv4Addr;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption, NSIDPayload};
use hickory_proto::rr::{DNSClass, RData, RecordType};
use support::*;

fn a_addrs(m: &Message) -> Vec<Ipv4Addr> {
    m.answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(a.0),
            _ => None,
        })
        .collect()
}

/// Sends `name`/`rtype` and checks that the first answer's owner is a
/// compression pointer to the question, i.e. carries the client's case.
fn first_owner_is_the_question(srv: &Server, name: &str, rtype: RecordType) -> Message {
    let q = query(name, rtype, None);
    let raw = udp_raw(srv.addr, &q).unwrap();
    assert_eq!(&raw[12..q.len()], &q[12..], "question echoed byte for byte");
    assert_eq!(
        &raw[q.len()..q.len() + 2],
        &[0xc0, 0x0c],
        "owner points to the question"
    );
    Message::from_vec(&raw).unwrap()
}

fn assert_negative_soa(m: &Message) {
    assert!(m.answers.is_empty(), "{m}");
    assert_eq!(m.authorities.len(), 1, "{m}");
    let soa = &m.authorities[0];
    assert_eq!(soa.record_type(), RecordType::SOA);
    // min(SOA TTL 3600, MINIMUM 300)
    assert_eq!(soa.ttl, 300);
    assert!(m.metadata.authoritative);
}

#[test]
fn answers_keep_the_clients_case_and_compress_to_the_question() {
    let srv = Server::start_example("", "");
    let q = query("wWw.ExAmPlE.cOm.", RecordType::A, None);
    let raw = udp_raw(srv.addr, &q).unwrap();
    // Question echoed byte for byte (DNS 0x20).
    assert_eq!(&raw[12..q.len()], &q[12..]);
    // Answer owner is a pointer to the question name.
    assert_eq!(&raw[q.len()..q.len() + 2], &[0xc0, 0x0c]);
    let m = Message::from_vec(&raw).unwrap();
    assert_eq!(m.metadata.id, 0x1234);
    assert!(m.metadata.authoritative && m.metadata.recursion_desired);
    assert!(!m.metadata.recursion_available);
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert_eq!(a_addrs(&m), vec![Ipv4Addr::new(192, 0, 2, 80)]);
    assert_eq!(m.answers[0].ttl, 3600);
    // Minimal responses: no NS in authority, no additional.
    assert!(m.authorities.is_empty() && m.additionals.is_empty(), "{m}");
}

#[test]
fn nodata_and_nxdomain_carry_the_soa() {
    let srv = Server::start_example("", "");
    let m = srv.udp("www.example.com.", RecordType::AAAA);
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert_negative_soa(&m);
    let m = srv.tcp("nope.example.com.", RecordType::A);
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    assert_negative_soa(&m);
}

#[test]
fn cname_chains_are_followed_inside_the_zone_only() {
    let srv = Server::start_example("", "");
    let m = first_owner_is_the_question(&srv, "Alias.example.com.", RecordType::A);
    let types: Vec<_> = m.answers.iter().map(|r| r.record_type()).collect();
    assert_eq!(
        types,
        [RecordType::CNAME, RecordType::CNAME, RecordType::A],
        "{m}"
    );
    assert_eq!(a_addrs(&m), vec![Ipv4Addr::new(192, 0, 2, 80)]);
    assert!(m.metadata.authoritative);

    // Chain ending at a name without the type: NODATA with SOA.
    let m = srv.udp("alias.example.com.", RecordType::AAAA);
    assert_eq!(m.answers.len(), 2);
    assert_eq!(m.authorities[0].record_type(), RecordType::SOA);

    // Out of zone: stop at the CNAME, the resolver continues.
    let m = srv.udp("outside.example.com.", RecordType::A);
    assert_eq!(m.answers.len(), 1);
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert!(m.authorities.is_empty());

    // Asking for the CNAME itself does not chase.
    let m = srv.udp("alias.example.com.", RecordType::CNAME);
    assert_eq!(m.answers.len(), 1);
}

#[test]
fn wildcards_synthesise_and_empty_non_terminals_block_them() {
    let srv = Server::start_example("", "");
    let m = first_owner_is_the_question(&srv, "Foo.Wild.example.com.", RecordType::A);
    assert_eq!(a_addrs(&m), vec![Ipv4Addr::new(192, 0, 2, 99)]);
    assert!(m.metadata.authoritative);
    // Wildcard matches name but not type: NODATA.
    let m = srv.udp("foo.wild.example.com.", RecordType::AAAA);
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert_negative_soa(&m);

    // b.ent exists only as an empty non-terminal: NODATA, not NXDOMAIN.
    let m = srv.udp("b.ent.example.com.", RecordType::A);
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert_negative_soa(&m);
    // y.ent: closest encloser ent, *.ent exists -> synthesised.
    let m = srv.udp("y.ent.example.com.", RecordType::A);
    assert_eq!(a_addrs(&m), vec![Ipv4Addr::new(192, 0, 2, 98)]);
    // x.b.ent: closest encloser is the ENT b.ent, and *.b.ent does not
    // exist, so *.ent must NOT answer (RFC 4592 §2.2.2).
    let m = srv.udp("x.b.ent.example.com.", RecordType::A);
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    assert_negative_soa(&m);
}

#[test]
fn delegations_refer_with_glue_and_without_aa() {
    let srv = Server::start_example("", "");
    for name in ["host.sub.example.com.", "sub.example.com."] {
        let m = srv.udp(name, RecordType::A);
        assert_eq!(m.metadata.response_code, ResponseCode::NoError, "{m}");
        assert!(!m.metadata.authoritative, "{m}");
        assert!(m.answers.is_empty());
        assert_eq!(m.authorities.len(), 1);
        assert_eq!(m.authorities[0].record_type(), RecordType::NS);
        assert_eq!(m.authorities[0].name.to_string(), "sub.example.com.");
        assert_eq!(m.additionals.len(), 1, "{m}");
        assert_eq!(m.additionals[0].name.to_string(), "ns.sub.example.com.");
    }
    // The parent answers DS at the cut itself, authoritatively.
    let m = srv.udp("sub.example.com.", RecordType::DS);
    assert!(m.metadata.authoritative);
    assert_negative_soa(&m);
}

#[test]
fn additional_section_only_carries_target_addresses() {
    let srv = Server::start_example("", "");
    let m = srv.udp("example.com.", RecordType::MX);
    assert_eq!(m.answers.len(), 2);
    assert!(m.authorities.is_empty(), "no NS in authority: {m}");
    let extra: Vec<_> = m
        .additionals
        .iter()
        .map(|r| (r.name.to_string(), r.record_type()))
        .collect();
    assert_eq!(
        extra,
        [
            ("mail.example.com.".to_string(), RecordType::A),
            ("mail.example.com.".to_string(), RecordType::AAAA)
        ],
        "mail listed once even though two MX records point to it"
    );
    let m = srv.udp("_sip._udp.example.com.", RecordType::SRV);
    assert_eq!(m.additionals.len(), 1);
    assert_eq!(m.additionals[0].name.to_string(), "sip.example.com.");
    // Only the in-zone NS target gets an address.
    let m = srv.udp("example.com.", RecordType::NS);
    assert_eq!(m.answers.len(), 2);
    assert_eq!(m.additionals.len(), 1);
}

#[test]
fn any_is_minimal_and_foreign_names_are_refused() {
    let srv = Server::start_example("", "");
    let m = srv.udp("www.example.com.", RecordType::ANY);
    assert_eq!(m.answers.len(), 1, "RFC 8482: one RRset: {m}");
    let m = srv.udp("www.example.org.", RecordType::A);
    assert_eq!(m.metadata.response_code, ResponseCode::Refused);
    assert!(!m.metadata.authoritative && m.answers.is_empty());
    let m = srv.udp("example.com.", RecordType::AXFR);
    assert_eq!(
        m.metadata.response_code,
        ResponseCode::Refused,
        "transfers are closed"
    );
}

#[test]
fn oversized_udp_answer_is_truncated_and_tcp_carries_it_whole() {
    let srv = Server::start_example("", "");
    let raw = udp_raw(srv.addr, &query("big.example.com.", RecordType::A, None)).unwrap();
    assert!(raw.len() <= 512);
    let m = Message::from_vec(&raw).unwrap();
    assert!(m.metadata.truncation);
    assert!(m.answers.is_empty());
    assert_eq!(m.queries.len(), 1);
    // With a large EDNS buffer it fits in UDP.
    let m = udp_query(
        srv.addr,
        &query("big.example.com.", RecordType::A, Some(edns(4096))),
    )
    .unwrap();
    assert!(!m.metadata.truncation);
    assert_eq!(m.answers.len(), 60);
    let m = srv.tcp("big.example.com.", RecordType::A);
    assert!(!m.metadata.truncation);
    assert_eq!(m.answers.len(), 60);
    // RRset order is stable: zone file order.
    assert_eq!(a_addrs(&m)[0], Ipv4Addr::new(10, 0, 0, 1));
    assert_eq!(a_addrs(&m)[59], Ipv4Addr::new(10, 0, 0, 60));
}

#[test]
fn three_pipelined_tcp_queries_on_one_connection() {
    let srv = Server::start_example("", "");
    let mut s = srv.tcp_connect();
    let names = ["www.example.com.", "mail.example.com.", "nope.example.com."];
    let mut batch = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let mut q = query(n, RecordType::A, None);
        q[..2].copy_from_slice(&(100 + i as u16).to_be_bytes());
        batch.extend_from_slice(&(q.len() as u16).to_be_bytes());
        batch.extend_from_slice(&q);
    }
    use std::io::Write;
    s.write_all(&batch).unwrap(); // one write: all three in flight
    let mut seen = Vec::new();
    for _ in 0..3 {
        let m = Message::from_vec(&tcp_recv(&mut s).unwrap()).unwrap();
        let i = (m.metadata.id - 100) as usize;
        assert_eq!(m.queries[0].name().to_string(), names[i]);
        seen.push(i);
    }
    seen.sort();
    assert_eq!(seen, [0, 1, 2]);
}

#[test]
fn edns_is_echoed_and_version_1_gets_badvers() {
    let srv = Server::start_example("", "[identity]\nnsid = \"test-node\"\n");
    let mut e = edns(4096);
    e.set_dnssec_ok(true);
    e.options_mut()
        .insert(EdnsOption::Unknown(65001, vec![1, 2, 3]));
    let m = udp_query(srv.addr, &query("www.example.com.", RecordType::A, Some(e))).unwrap();
    let opt = m.edns.as_ref().expect("OPT echoed");
    assert_eq!(opt.max_payload(), 1232, "server's own size");
    assert!(opt.flags().dnssec_ok, "DO echoed");
    assert_eq!(opt.version(), 0);
    assert!(
        opt.options().as_ref().is_empty(),
        "unknown option not echoed"
    );

    // No OPT in, no OPT out.
    let m = srv.udp("www.example.com.", RecordType::A);
    assert!(m.edns.is_none());

    let mut e = edns(1232);
    e.set_version(1);
    let m = udp_query(srv.addr, &query("www.example.com.", RecordType::A, Some(e))).unwrap();
    // BADVERS is extended RCODE 16 (hickory decodes 16 as BADSIG).
    assert_eq!(u16::from(m.metadata.response_code), 16);
    assert!(m.answers.is_empty());
    assert_eq!(m.edns.as_ref().unwrap().version(), 0);

    // NSID when asked.
    let mut e = edns(1232);
    e.options_mut()
        .insert(EdnsOption::NSID(NSIDPayload::new(Vec::new()).unwrap()));
    let m = udp_query(srv.addr, &query("www.example.com.", RecordType::A, Some(e))).unwrap();
    match m.edns.unwrap().option(EdnsCode::NSID) {
        Some(EdnsOption::NSID(p)) => assert_eq!(p.as_ref(), b"test-node"),
        other => panic!("NSID missing: {other:?}"),
    }
}

#[test]
fn chaos_identity_is_configurable_and_hideable() {
    let srv = Server::start_example(
        "",
        "[identity]\nserver_id = \"ns-test-1\"\nversion = \"\"\n",
    );
    let txt = |name: &str| {
        let m = udp_query(
            srv.addr,
            &query_class(name, RecordType::TXT, DNSClass::CH, None),
        )
        .unwrap();
        (
            m.metadata.response_code,
            m.answers.first().map(|r| r.data.to_string()),
        )
    };
    assert_eq!(
        txt("id.server."),
        (ResponseCode::NoError, Some("ns-test-1".into()))
    );
    assert_eq!(
        txt("HOSTNAME.bind."),
        (ResponseCode::NoError, Some("ns-test-1".into()))
    );
    assert_eq!(txt("version.bind.").0, ResponseCode::Refused, "hidden");
    assert_eq!(txt("authors.bind.").0, ResponseCode::Refused);
}

#[test]
fn dig_is_a_client_too() {
    let srv = Server::start_example("", "");
    let dig = |args: &[&str]| srv.dig(args);
    let out = dig(&["www.EXAMPLE.com", "A"]);
    assert!(out.contains("status: NOERROR"), "{out}");
    assert!(out.contains("flags: qr aa;"), "{out}");
    let has_rr = |out: &str, rr: &str| {
        let want: Vec<&str> = rr.split_whitespace().collect();
        out.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == want)
    };
    assert!(
        has_rr(&out, "www.EXAMPLE.com. 3600 IN A 192.0.2.80"),
        "{out}"
    );
    let out = dig(&["+tcp", "nope.example.com", "A"]);
    assert!(out.contains("status: NXDOMAIN"), "{out}");
    // dig retries a truncated answer over TCP by itself.
    let out = dig(&["+noedns", "big.example.com", "A"]);
    assert!(out.contains("Truncated, retrying in TCP mode"), "{out}");
    let big = (1..=60).filter(|i| has_rr(&out, &format!("big.example.com. 60 IN A 10.0.0.{i}")));
    assert_eq!(big.count(), 60, "{out}");
    let out = dig(&["+tcp", "CH", "TXT", "id.server"]);
    assert!(out.contains("status: NOERROR"), "{out}");
    assert!(out.contains("udp: 1232"), "{out}");
}

/// Sends `n` queries back to back from one socket, then collects replies
/// for up to `wait`; returns how many distinct IDs were answered.
fn burst(srv: &Server, n: u16, wait: std::time::Duration) -> usize {
    use std::collections::HashSet;
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
    // Our side must hold every reply too (root: past rmem_max).
    let big: libc::c_int = 16 << 20;
    unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&sock),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&big as *const libc::c_int).cast(),
            4,
        );
    }
    sock.bind(
        &"127.0.0.1:0"
            .parse::<std::net::SocketAddr>()
            .unwrap()
            .into(),
    )
    .unwrap();
    let sock: std::net::UdpSocket = sock.into();
    let mut q = query("www.example.com.", RecordType::A, None);
    for id in 0..n {
        q[..2].copy_from_slice(&id.to_be_bytes());
        sock.send_to(&q, srv.addr).unwrap();
    }
    let mut seen = HashSet::new();
    let end = std::time::Instant::now() + wait;
    let mut buf = [0u8; 1500];
    while seen.len() < n as usize {
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        sock.set_read_timeout(Some(left)).unwrap();
        match sock.recv(&mut buf) {
            Ok(len) if len >= 2 => {
                seen.insert(u16::from_be_bytes([buf[0], buf[1]]));
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    seen.len()
}

#[test]
fn three_thousand_queries_back_to_back_are_all_answered_three_times() {
    let srv = Server::start_example("", "");
    for round in 0..3 {
        let answered = burst(&srv, 3000, std::time::Duration::from_secs(10));
        assert_eq!(
            answered, 3000,
            "round {round}: {answered} of 3,000 answered"
        );
    }
}

#[test]
fn receive_queue_drops_are_counted_and_logged() {
    // A receive buffer far too small for the burst: the kernel drops, and
    // the server says so.
    let srv = Server::start_example("udp_receive_buffer = 4096", "");
    let mut answered = 0;
    for _ in 0..5 {
        answered = burst(&srv, 3000, std::time::Duration::from_secs(2));
        if srv.log().contains("UDP receive queue full") {
            break;
        }
    }
    assert!(answered < 3000, "a 4 KiB buffer cannot hold the burst");
    assert!(
        srv.wait_log("UDP receive queue full", std::time::Duration::from_secs(5)),
        "{}",
        srv.log()
    );
}

/// The benchmarks' socket floor: the fallback's own sockets and loop,
/// each datagram sent back as it came with QR set, a runt dropped.
#[test]
fn the_socket_floor_reflects_each_query_with_qr_set() {
    let port = support::process::free_port();
    let child = std::process::Command::new(BIN)
        .args(["udp-reflect", &format!("127.0.0.1:{port}")])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("xdpdns starts");
    let _child = support::process::KillOnDrop(child);
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_millis(200)))
        .unwrap();
    let query = example_com_a_query();
    let mut buf = [0u8; 512];
    // The reflector binds a moment after it starts: ask until it answers.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let n = loop {
        sock.send_to(&[0u8; 5], ("127.0.0.1", port)).unwrap();
        sock.send_to(&query, ("127.0.0.1", port)).unwrap();
        if let Ok((n, _)) = sock.recv_from(&mut buf) {
            break n;
        }
        assert!(std::time::Instant::now() < deadline, "no reflection");
    };
    let mut expected = query.clone();
    expected[2] |= 0x80;
    assert_eq!(
        &buf[..n],
        &expected[..],
        "the query with QR set, nothing else"
    );
}

/// `example.com. A`, ID 0x1234, RD set.
fn example_com_a_query() -> Vec<u8> {
    let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in ["example", "com"] {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}
