//! End-to-end: malformed input gets FORMERR or is dropped, never a crash
//! or a wrong answer, and the server answers a normal query right after.

use crate::support;

use std::io::Write;
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use support::*;

const IDLE_MS: u64 = 500;

fn server() -> Server {
    Server::start_example(
        &format!("tcp_idle_timeout_ms = {IDLE_MS}\ntcp_max_connections = 4\n"),
        "",
    )
}

/// The server still answers a normal query correctly.
fn still_answers(srv: &Server) {
    let m = srv.udp("www.example.com.", RecordType::A);
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert_eq!(m.answers.len(), 1);
}

/// Header: ID 0xabcd, RD, QDCOUNT=1 (and the given AR count).
fn header(qd: u16, ar: u16) -> Vec<u8> {
    let mut h = vec![0xab, 0xcd, 0x01, 0x00];
    for c in [qd, 0, 0, ar] {
        h.extend_from_slice(&c.to_be_bytes());
    }
    h
}

fn expect_formerr(srv: &Server, packet: &[u8], what: &str) {
    let reply = udp_raw(srv.addr, packet).unwrap_or_else(|| panic!("{what}: no reply"));
    assert!(reply.len() >= 12, "{what}");
    assert_eq!(&reply[..2], &packet[..2], "{what}: ID echoed");
    assert_eq!(reply[2] & 0x80, 0x80, "{what}: QR set");
    assert_eq!(reply[3] & 0x0f, 1, "{what}: FORMERR");
    still_answers(srv);
}

#[test]
fn every_header_length_from_0_to_16_bytes() {
    let srv = server();
    let full = query("www.example.com.", RecordType::A, None);
    for len in 0..=16 {
        let packet = &full[..len];
        let reply = udp_raw_timeout(srv.addr, packet, Duration::from_millis(300));
        if len < 12 {
            assert!(reply.is_none(), "{len}-byte packet must be dropped");
        } else {
            let r = reply.unwrap_or_else(|| panic!("{len}-byte packet: no FORMERR"));
            assert_eq!(&r[..2], &full[..2]);
            assert_eq!(r[3] & 0x0f, 1, "{len} bytes: FORMERR");
        }
        still_answers(&srv);
    }
    // All-zero header: QDCOUNT 0.
    expect_formerr(&srv, &[0u8; 12], "zero header");
}

#[test]
fn bad_names_are_formerr() {
    let srv = server();
    let tail = [0, 1, 0, 1]; // type A, class IN

    let mut p = header(1, 0);
    p.push(64);
    p.extend_from_slice(&[b'a'; 64]);
    p.push(0);
    p.extend_from_slice(&tail);
    expect_formerr(&srv, &p, "label of 64 bytes");

    let mut p = header(1, 0);
    p.extend_from_slice(&[0xc0, 12]); // points at itself
    p.extend_from_slice(&tail);
    expect_formerr(&srv, &p, "pointer loop to self");

    let mut p = header(1, 0);
    p.extend_from_slice(&[1, b'a', 0xc0, 12]); // a -> back to start
    p.extend_from_slice(&tail);
    expect_formerr(&srv, &p, "pointer loop via a label");

    let mut p = header(1, 0);
    for _ in 0..5 {
        p.push(60);
        p.extend_from_slice(&[b'x'; 60]);
    }
    p.push(0);
    p.extend_from_slice(&tail);
    expect_formerr(&srv, &p, "name over 255 bytes");

    let mut p = header(1, 0);
    p.extend_from_slice(&[3, b'w', b'w']); // label runs off the end
    expect_formerr(&srv, &p, "truncated label");
}

#[test]
fn question_counts_other_than_one_are_formerr() {
    let srv = server();
    let q = query("www.example.com.", RecordType::A, None);
    let mut zero = q.clone();
    zero[5] = 0;
    expect_formerr(&srv, &zero, "QDCOUNT 0");
    let mut two = q.clone();
    two[5] = 2;
    two.extend_from_slice(&q[12..]);
    expect_formerr(&srv, &two, "QDCOUNT 2");
}

#[test]
fn opt_with_wrong_rdlength_is_formerr() {
    let srv = server();
    let q = query("www.example.com.", RecordType::A, None);
    let opt = |rdlen: u16, data: &[u8]| {
        let mut p = q.clone();
        p[11] = 1; // ARCOUNT 1
        p.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0]);
        p.extend_from_slice(&rdlen.to_be_bytes());
        p.extend_from_slice(data);
        p
    };
    expect_formerr(&srv, &opt(16, &[0, 10, 0, 0]), "RDLEN past the end");
    expect_formerr(&srv, &opt(4, &[0, 3, 0, 8]), "option longer than RDLEN");
    // Control: a well-formed OPT is answered with an OPT.
    let m = Message::from_vec(&udp_raw(srv.addr, &opt(0, &[])).unwrap()).unwrap();
    assert!(m.edns.is_some());
    assert_eq!(m.answers.len(), 1);
}

#[test]
fn random_garbage_never_gets_a_wrong_reply() {
    let srv = server();
    // Deterministic xorshift so a failure reproduces.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let base = query("www.example.com.", RecordType::A, None);
    for i in 0..400 {
        let mut p = base.clone();
        // Mutate a few bytes, sometimes truncate or extend.
        for _ in 0..(1 + next() % 4) {
            let at = (next() as usize) % p.len();
            p[at] = next() as u8;
        }
        match next() % 4 {
            0 => p.truncate((next() as usize) % p.len()),
            1 => p.extend((0..next() % 40).map(|_| next() as u8)),
            _ => {}
        }
        if let Some(r) = udp_raw_timeout(srv.addr, &p, Duration::from_millis(200)) {
            assert!(r.len() >= 12, "case {i}");
            assert_eq!(&r[..2], &p[..2], "case {i}: ID echoed");
            assert_eq!(r[2] & 0x80, 0x80, "case {i}: QR");
            assert!(
                p[2] & 0x80 == 0,
                "case {i}: a response packet must never be answered"
            );
        }
    }
    still_answers(&srv);
}

#[test]
fn truncated_tcp_frames_and_idle_clients_are_closed() {
    let srv = server();
    let started = Instant::now();
    let mut idle = srv.tcp_connect();
    let mut partial = srv.tcp_connect();
    partial.write_all(&[0, 100]).unwrap();
    partial.write_all(&[0xab; 10]).unwrap();
    // While both hang, the server keeps answering on UDP and TCP.
    still_answers(&srv);
    assert_eq!(srv.tcp("www.example.com.", RecordType::A).answers.len(), 1);
    assert!(
        tcp_closed_within(&mut idle, Duration::from_secs(5)),
        "idle client closed"
    );
    assert!(
        tcp_closed_within(&mut partial, Duration::from_secs(5)),
        "partial frame closed"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(IDLE_MS),
        "not before the idle timeout"
    );
    // A zero-length frame cannot be a message: the connection ends.
    let mut zero = srv.tcp_connect();
    zero.write_all(&[0, 0]).unwrap();
    assert!(tcp_closed_within(&mut zero, Duration::from_secs(5)));
    still_answers(&srv);
}

#[test]
fn tcp_connections_over_the_cap_are_closed_at_once() {
    let srv = server(); // cap 4
    let mut held: Vec<_> = (0..4).map(|_| srv.tcp_connect()).collect();
    std::thread::sleep(Duration::from_millis(100));
    let mut over = srv.tcp_connect();
    let t = Instant::now();
    assert!(tcp_closed_within(
        &mut over,
        Duration::from_millis(IDLE_MS * 4)
    ));
    assert!(
        t.elapsed() < Duration::from_millis(IDLE_MS),
        "closed before any idle timeout"
    );
    // A held connection still works.
    tcp_send(
        &mut held[0],
        &query("www.example.com.", RecordType::A, None),
    );
    assert!(tcp_recv(&mut held[0]).is_some());
    drop(held);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(srv.tcp("www.example.com.", RecordType::A).answers.len(), 1);
}
