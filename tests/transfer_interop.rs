//! End-to-end: zone transfers between xdpdns and real NSD, Knot and BIND
//! servers (started by `support::peers`; a failing test leaves no process
//! behind). The peers are not optional: a missing binary fails the test
//! (CI installs `nsd`, `knot`, `knot-dnsutils`, `bind9` and
//! `bind9-dnsutils`).

use crate::support;
use crate::support::peers::*;

use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, RecordType};
use serde_json::Value;
use support::*;

/// Same length, other bytes: signatures made with it must not verify.
const WRONG_SECRET: &str = "q0T8d7oX1cJf4mN2sV9wYzA3bE6hK5pL8rU1iO4tG7c=";
/// A second key xdpdns knows but no ACL names.
const OTHER_SECRET: &str = "Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGw=";

/// How long a peer may take to pick up a change (NOTIFY, SOA, transfer).
const PROPAGATION: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// Talking to servers

/// Runs a client tool; returns stdout and stderr together.
fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(tool(program))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[derive(Clone, Copy, Debug)]
enum Client {
    Dig,
    Kdig,
}

/// Raw AXFR output of `dig`/`kdig`, optionally TSIG-signed with `key`
/// (name, secret) and sent from `source`.
fn axfr_raw(
    client: Client,
    port: u16,
    zone: &str,
    key: Option<(&str, &str)>,
    source: Option<&str>,
) -> String {
    let port = port.to_string();
    let y = key.map(|(name, secret)| format!("hmac-sha256:{name}:{secret}"));
    let mut args = vec!["@127.0.0.1", "-p", &port, zone, "AXFR"];
    match client {
        Client::Dig => args.extend(["+nocmd", "+nostats", "+time=5", "+tries=1"]),
        Client::Kdig => args.extend(["+time=5", "+retry=0"]),
    }
    if let Some(y) = &y {
        args.extend(["-y", y]);
    }
    if let Some(s) = source {
        args.extend(["-b", s]);
    }
    let program = match client {
        Client::Dig => "dig",
        Client::Kdig => "kdig",
    };
    run(program, &args)
}

/// Comparable form of a transfer: comments, blank lines and TSIG records
/// dropped, whitespace collapsed, lowercased, sorted (the SOA stays twice).
fn normalise(out: &str) -> Vec<String> {
    let mut v: Vec<String> = out
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with(';'))
        .map(|l| {
            l.split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .to_ascii_lowercase()
        })
        .filter(|l| l.split(' ').nth(3) != Some("tsig"))
        .collect();
    v.sort();
    v
}

fn soa_count(records: &[String]) -> usize {
    records
        .iter()
        .filter(|l| l.split(' ').nth(3) == Some("soa"))
        .count()
}

/// The sorted AXFR of `zone` from the server on `port`; panics unless the
/// transfer completed (SOA first and last).
fn axfr_sorted(client: Client, port: u16, zone: &str, key: Option<(&str, &str)>) -> Vec<String> {
    let out = axfr_raw(client, port, zone, key, None);
    let records = normalise(&out);
    assert!(
        !out.contains("Transfer failed") && !out.contains(";; ERROR") && soa_count(&records) == 2,
        "{client:?} AXFR of {zone} from port {port} failed:\n{out}"
    );
    records
}

/// The serial the server on `port` serves for `zone` (None: no SOA answer).
fn soa_serial(port: u16, zone: &str) -> Option<u32> {
    let m = udp_query(loopback(port), &query(zone, RecordType::SOA, None))?;
    if m.response_code != ResponseCode::NoError {
        return None;
    }
    m.answers.iter().find_map(|r| match &r.data {
        RData::SOA(soa) => Some(soa.serial),
        _ => None,
    })
}

fn udp_at(addr: SocketAddr, name: &str, rtype: RecordType) -> Option<Message> {
    udp_query(addr, &query(name, rtype, None))
}

/// The A addresses in an answer, as strings.
fn a_records(m: &Message) -> Vec<String> {
    m.answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(a.0.to_string()),
            _ => None,
        })
        .collect()
}

/// The propagation status xdpdns writes under its data dir.
fn transfer_status(srv: &Server) -> Vec<Value> {
    std::fs::read_to_string(srv.dir.0.join("data").join("transfer-status.json"))
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default()
}

/// Whether the status says `secondary` serves `serial` of `zone` (and,
/// with `notified`, acknowledged its NOTIFY).
fn status_in_sync(srv: &Server, zone: &str, port: u16, serial: u32, notified: bool) -> bool {
    let secondary = loopback(port).to_string();
    transfer_status(srv).iter().any(|s| {
        s["zone"] == zone
            && s["secondary"] == secondary.as_str()
            && s["in_sync"] == true
            && s["serial"] == serial
            && s["serial_seen"] == serial
            && (!notified || s["notified"] == serial)
    })
}

/// Everyone's logs, for failure messages.
fn logs(srv: &Server, peers: &[&Proc]) -> String {
    let mut s = format!("--- xdpdns log:\n{}", srv.log());
    for p in peers {
        s += &format!("--- {} log:\n{}", p.name, p.log());
    }
    s
}

/// The value of `key` (e.g. "records=") in a log line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split(key).nth(1)?.split_whitespace().next()
}

fn start_xdpdns(dir: TempDir, body: &str) -> Server {
    let config = dir.write("xdpdns.toml", body);
    Server::start_with_config(dir, config)
}

// ---------------------------------------------------------------------------
// Zones

const SERIAL: u32 = 2024010101;

/// 46 records of every common type, with a delegation and its glue.
/// `changed`: www's address changed, host7 removed, `added` added -- with
/// the same serial (xdpdns assigns the next one).
fn primary_zone(changed: bool) -> String {
    let www = if changed { "192.0.2.81" } else { "192.0.2.80" };
    let mut z = format!(
        "$ORIGIN example.com.\n$TTL 300\n\
         @ 3600 SOA ns1 hostmaster {SERIAL} 3600 600 1209600 300\n\
         @ NS ns1\n@ NS ns2\n\
         ns1 A 192.0.2.1\nns2 A 192.0.2.2\nns2 AAAA 2001:db8::2\n\
         @ MX 10 mail\n@ MX 20 mail2\n\
         mail A 192.0.2.25\nmail AAAA 2001:db8::25\nmail2 A 192.0.2.26\n\
         @ TXT \"v=spf1 mx -all\"\n\
         txt TXT \"hello world\" \"with \\\"quotes\\\" and ; semicolon\"\n\
         www 600 A {www}\nwww AAAA 2001:db8::80\n\
         ftp CNAME www\nshop CNAME www.example.org.\n\
         _sip._tcp SRV 10 20 5060 sip\n_sip._udp SRV 10 20 5060 sip\nsip A 192.0.2.60\n\
         _xmpp-server._tcp SRV 5 0 5269 www\n\
         sub NS ns.sub\nsub NS ns2.sub\nns.sub A 192.0.2.53\nns2.sub AAAA 2001:db8::53\n\
         other NS ns.example.org.\n"
    );
    for i in 1..=20 {
        if !(changed && i == 7) {
            z += &format!("host{i} A 192.0.2.{}\n", 100 + i);
        }
    }
    if changed {
        z += "added A 192.0.2.200\nadded TXT \"new\"\n";
    }
    z
}

/// A Knot-served zone, with SOA timers `refresh retry expire`.
fn net_zone(serial: u32, www: &str, timers: &str, extra: &str) -> String {
    format!(
        "$ORIGIN example.net.\n$TTL 300\n\
         @ SOA ns1 hostmaster {serial} {timers} 60\n\
         @ NS ns1\nns1 A 192.0.2.1\nwww A {www}\n\
         mail A 192.0.2.25\n@ MX 10 mail\n{extra}"
    )
}

// ---------------------------------------------------------------------------
// xdpdns as a primary

/// xdpdns owning example.com (file `example.com.zone`), NOTIFYing the
/// secondaries on `notify`.
fn primary_config(xport: u16, notify: &[u16]) -> String {
    let notify: Vec<String> = notify
        .iter()
        .map(|p| format!("\"127.0.0.1:{p}\""))
        .collect();
    format!(
        "[server]\nlisten = [\"127.0.0.1:{xport}\"]\n[log]\nlevel = \"info\"\n\
         [transfer]\ndata_dir = \"data\"\nserial_policy = \"increment\"\n\
         poll_interval_ms = 200\nnotify_timeout_ms = 1000\nnotify_retries = 5\n\
         [[zone]]\norigin = \"example.com.\"\nfile = \"example.com.zone\"\nnotify = [{}]\n",
        notify.join(", ")
    )
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Nsd,
    Knot,
    Bind,
}

/// xdpdns serves example.com to `kinds` secondaries: the AXFR each pulls
/// when it starts, then a change without a serial bump, reloaded by
/// SIGHUP, which must reach every secondary by NOTIFY and IXFR with the
/// serial xdpdns chose, and show in the propagation status.
fn secondaries_follow_xdpdns(kinds: &[Kind]) {
    let zone = "example.com.";
    let xport = free_port();
    let ports: Vec<(Kind, u16)> = kinds.iter().map(|&k| (k, free_port())).collect();

    // xdpdns first: each secondary pulls the zone when it starts (BIND
    // ignores a NOTIFY while its first, failed, refresh is in progress).
    let dir = TempDir::new("primary");
    dir.write("example.com.zone", &primary_zone(false));
    let notify: Vec<u16> = ports.iter().map(|&(_, p)| p).collect();
    let srv = start_xdpdns(dir, &primary_config(xport, &notify));
    assert_eq!(srv.addr.port(), xport);
    let mut peers: Vec<(Kind, u16, Proc)> = ports
        .into_iter()
        .map(|(k, port)| {
            let p = match k {
                Kind::Nsd => nsd_secondary("example.com", port, xport),
                Kind::Knot => knot_secondary("example.com", port, xport, false, ""),
                Kind::Bind => bind_secondary("example.com", port, xport),
            };
            (k, port, p)
        })
        .collect();
    let diag = |peers: &[(Kind, u16, Proc)]| {
        logs(&srv, &peers.iter().map(|(_, _, p)| p).collect::<Vec<_>>())
    };

    // 1. Every secondary serves our serial and exactly our records.
    assert_eq!(soa_serial(xport, zone), Some(SERIAL));
    let ok = eventually(PROPAGATION, || {
        peers
            .iter()
            .all(|(_, port, _)| soa_serial(*port, zone) == Some(SERIAL))
    });
    assert!(
        ok,
        "secondaries did not load serial {SERIAL}\n{}",
        diag(&peers)
    );
    let ours = axfr_sorted(Client::Dig, xport, zone, None);
    assert_eq!(ours.len(), 47, "46 records + the closing SOA: {ours:#?}");
    for (kind, port, _) in &peers {
        assert_eq!(
            axfr_sorted(Client::Dig, *port, zone, None),
            ours,
            "{kind:?} differs after the AXFR"
        );
    }
    let ok = eventually(PROPAGATION, || {
        peers
            .iter()
            .all(|(_, port, _)| status_in_sync(&srv, zone, *port, SERIAL, false))
    });
    assert!(
        ok,
        "status not in sync at {SERIAL}: {:#?}\n{}",
        transfer_status(&srv),
        diag(&peers)
    );

    // 2. Change three records without touching the serial; reload.
    let ixfr_before = log_lines(&srv.log(), &["outgoing transfer", "kind=\"IXFR\""]).len();
    srv.dir.write("example.com.zone", &primary_zone(true));
    srv.signal("HUP");
    assert!(
        srv.wait_log("reload done", Duration::from_secs(10)),
        "{}",
        srv.log()
    );
    let next = SERIAL + 1;
    assert_eq!(
        soa_serial(xport, zone),
        Some(next),
        "increment policy: the next serial"
    );

    let ok = eventually(PROPAGATION, || {
        peers
            .iter()
            .all(|(_, port, _)| soa_serial(*port, zone) == Some(next))
    });
    assert!(
        ok,
        "secondaries did not reach serial {next}\n{}",
        diag(&peers)
    );
    let ours = axfr_sorted(Client::Dig, xport, zone, None);
    let has = |needle: &str| ours.iter().any(|l| l.starts_with(needle));
    assert!(has("added.example.com. 300 in a 192.0.2.200"), "{ours:#?}");
    assert!(has("www.example.com. 600 in a 192.0.2.81"), "{ours:#?}");
    assert!(!has("www.example.com. 600 in a 192.0.2.80"), "{ours:#?}");
    assert!(!has("host7.example.com."), "{ours:#?}");
    for (kind, port, _) in &peers {
        assert_eq!(
            axfr_sorted(Client::Dig, *port, zone, None),
            ours,
            "{kind:?} differs after the change"
        );
    }

    // 3. The change travelled as IXFR, to every secondary.
    let log = srv.log();
    let ixfrs = log_lines(&log, &["outgoing transfer", "kind=\"IXFR\""]).len() - ixfr_before;
    assert!(
        ixfrs >= peers.len(),
        "{ixfrs} IXFRs out for {} secondaries\n{}",
        peers.len(),
        diag(&peers)
    );
    let fallbacks = log_lines(&log, &["outgoing transfer", "asked=IXFR", "kind=\"AXFR\""]);
    assert!(
        fallbacks.is_empty(),
        "IXFR answered by AXFR: {fallbacks:#?}"
    );
    // (A peer may serve the new serial before it logs the transfer.)
    let done = format!("(serial {next})");
    for (kind, _, p) in &peers {
        let needles: &[&str] = match kind {
            Kind::Knot => &["IXFR, incoming", "finished"],
            Kind::Bind => &["Transfer completed", &done],
            Kind::Nsd => &["received update to serial"],
        };
        assert!(p.wait_log(needles, Duration::from_secs(5)), "{}", p.log());
        let plog = p.log();
        match kind {
            Kind::Knot => assert!(plog.contains("IXFR, incoming"), "{}", plog),
            // BIND does not name the kind; an IXFR is the short one.
            Kind::Bind => {
                let line = log_lines(&plog, &["Transfer completed", &done]);
                let records: Vec<usize> = line
                    .iter()
                    .filter_map(|l| {
                        l.split(" records,")
                            .next()?
                            .rsplit(' ')
                            .next()?
                            .parse()
                            .ok()
                    })
                    .collect();
                assert!(
                    matches!(records[..], [n] if n < 20),
                    "BIND should have received a 9-record IXFR: {line:?}"
                );
            }
            Kind::Nsd => {}
        }
    }

    // 4. The propagation status shows every secondary at the new serial.
    let ok = eventually(PROPAGATION, || {
        peers
            .iter()
            .all(|(_, port, _)| status_in_sync(&srv, zone, *port, next, true))
    });
    assert!(
        ok,
        "status not in sync at {next}: {:#?}\n{}",
        transfer_status(&srv),
        diag(&peers)
    );

    // 5. A reload without a change keeps the serial and sends nothing.
    let notifies = log_lines(&srv.log(), &["NOTIFY acknowledged"]).len();
    let reloads = log_lines(&srv.log(), &["reload done"]).len();
    srv.signal("HUP");
    let ok = eventually(Duration::from_secs(10), || {
        log_lines(&srv.log(), &["reload done"]).len() > reloads
    });
    assert!(ok, "{}", srv.log());
    assert!(srv.log().contains("reload done changed=0"), "{}", srv.log());
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        soa_serial(xport, zone),
        Some(next),
        "same content, same serial"
    );
    assert_eq!(
        log_lines(&srv.log(), &["NOTIFY acknowledged"]).len(),
        notifies,
        "{}",
        srv.log()
    );
    for (_, _, p) in peers.iter_mut() {
        p.assert_running();
    }
}

#[test]
fn nsd_and_knot_follow_xdpdns_by_axfr_then_notify_and_ixfr() {
    secondaries_follow_xdpdns(&[Kind::Nsd, Kind::Knot]);
}

#[test]
fn bind_follows_xdpdns_by_axfr_then_notify_and_ixfr() {
    secondaries_follow_xdpdns(&[Kind::Bind]);
}

// ---------------------------------------------------------------------------
// xdpdns as a secondary

fn secondary_config(xport: u16, zone: &str, primary: u16) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:{xport}\"]\n[log]\nlevel = \"info\"\n\
         [transfer]\ndata_dir = \"data\"\nprimary_timeout_ms = 2000\n\
         [[zone]]\norigin = \"{zone}\"\nprimaries = [\"127.0.0.1:{primary}\"]\n"
    )
}

/// A Knot primary serving example.net (SOA `serial`, `timers` = refresh
/// retry expire) and an xdpdns secondary of it that has done its first
/// AXFR. Returns both and Knot's port.
fn knot_fed_secondary(tag: &str, serial: u32, timers: &str) -> (Proc, Server, u16) {
    let kport = free_port();
    let text = net_zone(serial, "192.0.2.80", timers, "");
    let knot = knot_primary("example.net", &text, kport, None, false);
    let srv = start_xdpdns(
        TempDir::new(tag),
        &secondary_config(0, "example.net.", kport),
    );
    assert!(
        srv.wait_log("AXFR received", PROPAGATION),
        "{}",
        logs(&srv, &[&knot])
    );
    (knot, srv, kport)
}

#[test]
fn knot_primary_feeds_xdpdns_secondary_by_axfr_then_ixfr_on_notify() {
    let zone = "example.net.";
    let timers = "3600 600 86400"; // refresh 1 h: only NOTIFY triggers
    let (kport, xport) = (free_port(), free_port());
    let mut knot = knot_primary(
        "example.net",
        &net_zone(1, "192.0.2.80", timers, "old A 192.0.2.7\n"),
        kport,
        Some(xport),
        false,
    );
    assert_eq!(soa_serial(kport, zone), Some(1), "{}", knot.log());

    let srv = start_xdpdns(
        TempDir::new("secondary"),
        &secondary_config(xport, zone, kport),
    );
    let diag = |k: &Proc| logs(&srv, &[k]);
    assert!(
        srv.wait_log("AXFR received", PROPAGATION),
        "{}",
        diag(&knot)
    );
    let m = srv.udp("www.example.net.", RecordType::A);
    assert_eq!(m.response_code, ResponseCode::NoError);
    assert!(
        m.metadata.authoritative,
        "a secondary zone is authoritative"
    );
    assert_eq!(a_records(&m), ["192.0.2.80"]);
    assert_eq!(
        axfr_sorted(Client::Dig, xport, zone, None),
        axfr_sorted(Client::Dig, kport, zone, None)
    );

    // Two successive changes in Knot, each announced by NOTIFY and pulled
    // by IXFR (the second from the serial the first one left).
    let changes = [
        (2, "192.0.2.81", "new A 192.0.2.9\n"),
        (3, "192.0.2.82", "new A 192.0.2.9\nnewer TXT \"three\"\n"),
    ];
    for (i, (serial, www, extra)) in changes.into_iter().enumerate() {
        std::fs::write(
            knot.path("example.net.zone"),
            net_zone(serial, www, timers, extra),
        )
        .unwrap();
        let t0 = Instant::now();
        knot_reload(&knot, "example.net");
        let ok = eventually(Duration::from_secs(10), || {
            soa_serial(xport, zone) == Some(serial)
                && a_records(&srv.udp("www.example.net.", RecordType::A)) == [www]
        });
        assert!(
            ok,
            "xdpdns did not follow Knot to serial {serial}\n{}",
            diag(&knot)
        );
        assert!(t0.elapsed() < Duration::from_secs(10));
        // The log line follows the publish: wait for it.
        let ok = eventually(Duration::from_secs(5), || {
            log_lines(&srv.log(), &["IXFR received"]).len() > i
        });
        assert!(ok, "{}", diag(&knot));
        let received = log_lines(&srv.log(), &["IXFR received"]).len();
        assert_eq!(received, i + 1, "one IXFR per change\n{}", diag(&knot));
        assert_eq!(
            log_lines(&srv.log(), &["AXFR received"]).len(),
            1,
            "{}",
            diag(&knot)
        );
        assert_eq!(
            axfr_sorted(Client::Dig, xport, zone, None),
            axfr_sorted(Client::Dig, kport, zone, None),
            "xdpdns's copy differs from Knot's at serial {serial}"
        );
    }
    let m = srv.udp("old.example.net.", RecordType::A);
    assert_eq!(m.response_code, ResponseCode::NXDomain, "removed by IXFR");
    let log = srv.log();
    assert!(log.contains("NOTIFY received"), "{log}");
    let served = || log_lines(&knot.log(), &["IXFR, outgoing", "finished"]).len();
    let ok = eventually(Duration::from_secs(5), || served() >= 2);
    assert!(
        ok && served() == 2,
        "Knot served two IXFRs:\n{}",
        knot.log()
    );
    knot.assert_running();
}

#[test]
fn bind_primary_feeds_xdpdns_secondary_by_ixfr_on_notify() {
    let zone = "example.net.";
    let timers = "3600 600 86400";
    let (bport, xport) = (free_port(), free_port());
    let named = bind_primary(
        "example.net",
        &net_zone(1, "192.0.2.80", timers, "old A 192.0.2.7\n"),
        bport,
        xport,
    );
    assert_eq!(soa_serial(bport, zone), Some(1), "{}", named.log());
    let srv = start_xdpdns(
        TempDir::new("bindsec"),
        &secondary_config(xport, zone, bport),
    );
    assert!(
        srv.wait_log("AXFR received", PROPAGATION),
        "{}",
        logs(&srv, &[&named])
    );

    std::fs::write(
        named.path("example.net.zone"),
        net_zone(2, "192.0.2.81", timers, "new A 192.0.2.9\n"),
    )
    .unwrap();
    bind_reload(&named);
    let ok = eventually(Duration::from_secs(15), || {
        soa_serial(xport, zone) == Some(2)
    });
    assert!(
        ok,
        "xdpdns did not follow BIND to serial 2\n{}",
        logs(&srv, &[&named])
    );
    assert!(
        srv.wait_log("IXFR received", Duration::from_secs(5)),
        "{}",
        logs(&srv, &[&named])
    );
    let log = srv.log();
    assert!(log.contains("NOTIFY received"), "{}", logs(&srv, &[&named]));
    assert_eq!(
        a_records(&srv.udp("www.example.net.", RecordType::A)),
        ["192.0.2.81"]
    );
    assert_eq!(
        srv.udp("old.example.net.", RecordType::A).response_code,
        ResponseCode::NXDomain
    );
    assert_eq!(
        axfr_sorted(Client::Dig, xport, zone, None),
        axfr_sorted(Client::Dig, bport, zone, None)
    );
}

#[test]
fn secondary_serves_until_expire_then_servfail() {
    // refresh 1 s, retry 1 s, expire 4 s
    let (mut knot, srv, kport) = knot_fed_secondary("expire", 1, "1 1 4");
    let m = srv.udp("www.example.net.", RecordType::A);
    assert_eq!(
        (m.response_code, a_records(&m)),
        (ResponseCode::NoError, vec!["192.0.2.80".to_string()])
    );

    // The primary goes away: the copy is served until it expires.
    knot.stop(libc::SIGKILL);
    let killed = Instant::now();
    let m = srv.udp("www.example.net.", RecordType::A);
    assert_eq!(
        m.response_code,
        ResponseCode::NoError,
        "still fresh right after the primary died"
    );
    let ok = eventually(Duration::from_secs(15), || {
        srv.udp("www.example.net.", RecordType::A).response_code == ResponseCode::ServFail
    });
    let took = killed.elapsed();
    assert!(
        ok,
        "no SERVFAIL 15 s after the primary died (expire 4 s)\n{}",
        srv.log()
    );
    assert!(
        took >= Duration::from_millis(1500),
        "expired after {took:?}, before the 4 s expire"
    );
    assert!(
        srv.wait_log("secondary zone expired", Duration::from_secs(5)),
        "{}",
        srv.log()
    );
    let m = srv.udp("example.net.", RecordType::SOA);
    assert_eq!(
        m.response_code,
        ResponseCode::ServFail,
        "every name of an expired zone"
    );

    // The primary comes back (same port, same zone): fresh again.
    let _knot = restart_knot(knot, kport);
    let ok = eventually(Duration::from_secs(15), || {
        let m = srv.udp("www.example.net.", RecordType::A);
        m.response_code == ResponseCode::NoError && a_records(&m) == ["192.0.2.80"]
    });
    assert!(
        ok,
        "not fresh again after the primary came back\n{}",
        srv.log()
    );
    assert!(
        srv.wait_log("secondary zone is fresh again", Duration::from_secs(5)),
        "{}",
        srv.log()
    );
}

#[test]
fn expired_copy_stays_expired_across_a_restart() {
    let (knot, mut srv, kport) = knot_fed_secondary("expire2", 1, "1 1 4");
    drop(knot);
    // The primary's port now swallows queries: every refresh times out
    // (primary_timeout_ms = 2000) instead of failing at once.
    let _blackhole = UdpSocket::bind(("127.0.0.1", kport)).unwrap();
    let ok = eventually(Duration::from_secs(20), || {
        srv.udp("www.example.net.", RecordType::A).response_code == ResponseCode::ServFail
    });
    assert!(ok, "never expired\n{}", srv.log());

    // Restarted with the primary still silent: the copy on disk is past
    // its expire time and must not be served, not even until the first
    // refresh attempt gives up.
    srv.restart_after("KILL");
    let m = srv.udp("www.example.net.", RecordType::A);
    assert_eq!(
        m.response_code,
        ResponseCode::ServFail,
        "an expired copy served again after a restart: {:?}\n{}",
        a_records(&m),
        srv.log()
    );
}

#[test]
fn secondary_copy_survives_restart_while_primary_is_down() {
    let (knot, mut srv, _) = knot_fed_secondary("restart", 7, "3600 600 86400");
    drop(knot);

    // Crash, come back with the primary unreachable: served from disk.
    srv.restart_after("KILL");
    let m = srv.udp("www.example.net.", RecordType::A);
    assert_eq!(m.response_code, ResponseCode::NoError, "{}", srv.log());
    assert_eq!(a_records(&m), ["192.0.2.80"]);
    assert_eq!(soa_serial(srv.addr.port(), "example.net."), Some(7));
    assert!(
        srv.wait_log("secondary refresh failed", Duration::from_secs(10)),
        "the primary is down: {}",
        srv.log()
    );
    let m = srv.udp("www.example.net.", RecordType::A);
    assert_eq!(
        m.response_code,
        ResponseCode::NoError,
        "a failed refresh is not an expiry"
    );
}

/// A small zone xdpdns owns, always at serial 1000 in the file (xdpdns
/// numbers the changes); SOA refresh `refresh` seconds.
fn small_zone(refresh: u32, extra: &str) -> String {
    format!(
        "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 hostmaster 1000 {refresh} 600 86400 60\n\
         @ NS ns1\nns1 A 192.0.2.1\nwww A 192.0.2.80\n{extra}"
    )
}

/// Edits the zone file, reloads, and waits until xdpdns serves `serial`.
fn change_and_reload(srv: &Server, text: &str, serial: u32) {
    srv.dir.write("example.com.zone", text);
    srv.signal("HUP");
    let ok = eventually(Duration::from_secs(10), || {
        soa_serial(srv.addr.port(), "example.com.") == Some(serial)
    });
    assert!(
        ok,
        "xdpdns does not serve serial {serial} after the reload\n{}",
        srv.log()
    );
}

#[test]
fn lagging_knot_secondary_catches_up_two_serials_by_one_ixfr() {
    let zone = "example.com.";
    let (xport, kport) = (free_port(), free_port());
    let dir = TempDir::new("lag");
    dir.write("example.com.zone", &small_zone(2, "")); // refresh 2 s
    let srv = start_xdpdns(dir, &primary_config(xport, &[kport]));
    // Knot keeps the whole zone in its journal, so it restarts at 1000.
    let mut knot = knot_secondary(
        "example.com",
        kport,
        xport,
        false,
        "    zonefile-load: none\n    journal-content: all\n",
    );
    let ok = eventually(PROPAGATION, || soa_serial(kport, zone) == Some(1000));
    assert!(ok, "{}", logs(&srv, &[&knot]));

    // Two changes while Knot is down: it comes back two serials behind.
    knot.stop(libc::SIGTERM);
    change_and_reload(&srv, &small_zone(2, "a A 192.0.2.11\n"), 1001);
    change_and_reload(
        &srv,
        &small_zone(2, "a A 192.0.2.12\nb TXT \"two\"\n"),
        1002,
    );
    let knot = restart_knot(knot, kport);
    assert!(
        knot.log().contains("loaded, serial none -> 1000"),
        "restarted from its journal: {}",
        knot.log()
    );
    let ok = eventually(PROPAGATION, || soa_serial(kport, zone) == Some(1002));
    assert!(ok, "Knot did not catch up\n{}", logs(&srv, &[&knot]));
    let ixfr = log_lines(
        &srv.log(),
        &["outgoing transfer", "kind=\"IXFR\"", "from_serial=1000"],
    )
    .len();
    assert_eq!(
        ixfr,
        1,
        "one IXFR from 1000 to 1002\n{}",
        logs(&srv, &[&knot])
    );
    assert!(
        knot.wait_log(&["IXFR, incoming", "finished"], Duration::from_secs(5)),
        "{}",
        knot.log()
    );
    assert_eq!(
        axfr_sorted(Client::Dig, kport, zone, None),
        axfr_sorted(Client::Dig, xport, zone, None)
    );
}

#[test]
fn notify_is_retried_until_a_restarted_secondary_answers() {
    let zone = "example.com.";
    let (xport, kport) = (free_port(), free_port());
    let dir = TempDir::new("renotify");
    dir.write("example.com.zone", &small_zone(3600, "")); // only NOTIFY triggers
    let srv = start_xdpdns(dir, &primary_config(xport, &[kport]));
    let mut knot = knot_secondary(
        "example.com",
        kport,
        xport,
        false,
        "    zonefile-load: none\n    journal-content: all\n",
    );
    let ok = eventually(PROPAGATION, || soa_serial(kport, zone) == Some(1000));
    assert!(ok, "{}", logs(&srv, &[&knot]));

    // The secondary restarts just as the zone changes. notify_retries = 5
    // with notify_timeout_ms = 1000 doubling spreads the attempts over
    // about 15 s; Knot is back after 2 s.
    knot.stop(libc::SIGTERM);
    change_and_reload(&srv, &small_zone(3600, "a A 192.0.2.11\n"), 1001);
    std::thread::sleep(Duration::from_secs(2));
    let knot = restart_knot(knot, kport);
    let acked = format!("secondary=127.0.0.1:{kport} serial=1001");
    let ok = eventually(Duration::from_secs(20), || {
        log_lines(&srv.log(), &["NOTIFY acknowledged", &acked]).len() == 1
    });
    assert!(
        ok,
        "the NOTIFY for 1001 never reached the restarted secondary\n{}",
        logs(&srv, &[&knot])
    );
    let ok = eventually(PROPAGATION, || soa_serial(kport, zone) == Some(1001));
    assert!(ok, "Knot did not follow to 1001\n{}", logs(&srv, &[&knot]));
    let ok = eventually(PROPAGATION, || {
        status_in_sync(&srv, zone, kport, 1001, true)
    });
    assert!(ok, "{:#?}", transfer_status(&srv));
}

/// The rcode of an unsigned NOTIFY for `zone` sent to `addr`.
fn notify_rcode(addr: SocketAddr, zone: &str) -> ResponseCode {
    use hickory_proto::op::{MessageType, OpCode, Query};
    use std::str::FromStr;
    let mut m = Message::new(0x4242, MessageType::Query, OpCode::Notify);
    m.metadata.authoritative = true;
    m.add_query(Query::query(
        hickory_proto::rr::Name::from_str(zone).unwrap(),
        RecordType::SOA,
    ));
    let reply = udp_raw(addr, &m.to_vec().unwrap()).expect("a reply to NOTIFY");
    Message::from_vec(&reply).unwrap().response_code
}

#[test]
fn xdpdns_secondary_uses_tsig_with_a_knot_primary_that_requires_it() {
    let zone = "example.net.";
    let timers = "3600 600 86400";
    let (kport, xport) = (free_port(), free_port());
    let knot = knot_primary(
        "example.net",
        &net_zone(1, "192.0.2.80", timers, ""),
        kport,
        Some(xport),
        true,
    );
    let unsigned = axfr_raw(Client::Dig, kport, zone, None, None);
    assert!(
        unsigned.contains("Transfer failed"),
        "Knot must insist on the key: {unsigned}"
    );

    let srv = start_xdpdns(
        TempDir::new("tsig2"),
        &format!(
            "[server]\nlisten = [\"127.0.0.1:{xport}\"]\n[log]\nlevel = \"info\"\n\
             [transfer]\ndata_dir = \"data\"\n\
             [[tsig_key]]\nname = \"xfr-key\"\nalgorithm = \"hmac-sha256\"\nsecret = \"{SECRET}\"\n\
             [[zone]]\norigin = \"{zone}\"\nprimaries = [\"127.0.0.1:{kport}\"]\nprimary_key = \"xfr-key\"\n"
        ),
    );
    assert!(
        srv.wait_log("AXFR received", PROPAGATION),
        "{}",
        logs(&srv, &[&knot])
    );
    assert_eq!(
        a_records(&srv.udp("www.example.net.", RecordType::A)),
        ["192.0.2.80"]
    );

    // A signed NOTIFY from Knot is accepted; the IXFR is signed too.
    std::fs::write(
        knot.path("example.net.zone"),
        net_zone(2, "192.0.2.81", timers, ""),
    )
    .unwrap();
    knot_reload(&knot, "example.net");
    let ok = eventually(Duration::from_secs(10), || {
        soa_serial(xport, zone) == Some(2)
    });
    assert!(
        ok,
        "xdpdns did not follow Knot to 2 with TSIG\n{}",
        logs(&srv, &[&knot])
    );
    assert!(
        srv.wait_log("IXFR received", Duration::from_secs(5)),
        "{}",
        logs(&srv, &[&knot])
    );
    let log = srv.log();
    assert!(log.contains("NOTIFY received"), "{}", logs(&srv, &[&knot]));
    assert!(
        !log.contains("TSIG verification failed") && !log.contains("refused"),
        "{log}"
    );
    assert_eq!(
        axfr_sorted(Client::Dig, xport, zone, None),
        axfr_sorted(Client::Dig, kport, zone, Some(("xfr-key", SECRET)))
    );

    // An unsigned NOTIFY, even from the primary's address, is refused; a
    // NOTIFY for a zone that is not a secondary here is not ours.
    assert_eq!(notify_rcode(srv.addr, zone), ResponseCode::Refused);
    assert_eq!(
        notify_rcode(srv.addr, "example.org."),
        ResponseCode::NotAuth
    );
}

// ---------------------------------------------------------------------------
// TSIG and ACLs

/// A zone large enough that its AXFR spans several messages (each of which
/// carries its own TSIG, chained to the previous one).
/// `moved` hosts have another address (a change whose IXFR spans several
/// messages too).
fn signed_zone(origin: &str, serial: u32, hosts: usize, moved: usize, extra: &str) -> String {
    let mut z = format!(
        "$ORIGIN {origin}\n$TTL 300\n@ SOA ns1 hostmaster {serial} 3600 600 86400 60\n\
         @ NS ns1\nns1 A 192.0.2.1\nwww A 192.0.2.80\n{extra}"
    );
    for i in 0..hosts {
        let net = if i < moved { 200 } else { 10 };
        z += &format!(
            "host-{i:04} A {net}.{}.{}.{}\n",
            i / 65536,
            (i / 256) % 256,
            i % 256
        );
    }
    z
}

#[test]
fn tsig_and_acl_are_enforced_against_real_tools() {
    let key = Some(("xfr-key", SECRET));
    let (xport, kport) = (free_port(), free_port());
    let knot = knot_secondary("example.com", kport, xport, true, "");

    let dir = TempDir::new("tsig");
    dir.write(
        "example.com.zone",
        &signed_zone("example.com.", 100, 1000, 0, ""),
    );
    dir.write(
        "example.org.zone",
        &signed_zone("example.org.", 1, 3, 0, ""),
    );
    dir.write(
        "example.edu.zone",
        &signed_zone("example.edu.", 1, 3, 0, ""),
    );
    let srv = start_xdpdns(
        dir,
        &format!(
            "[server]\nlisten = [\"127.0.0.1:{xport}\"]\n[log]\nlevel = \"info\"\n\
             [transfer]\ndata_dir = \"data\"\npoll_interval_ms = 200\n\
             [[tsig_key]]\nname = \"xfr-key\"\nalgorithm = \"hmac-sha256\"\nsecret = \"{SECRET}\"\n\
             [[tsig_key]]\nname = \"other-key\"\nalgorithm = \"hmac-sha256\"\nsecret = \"{OTHER_SECRET}\"\n\
             [[zone]]\norigin = \"example.com.\"\nfile = \"example.com.zone\"\n\
             allow_transfer = [{{ key = \"xfr-key\" }}]\n\
             notify = [\"127.0.0.1:{kport}\"]\nnotify_key = \"xfr-key\"\n\
             [[zone]]\norigin = \"example.org.\"\nfile = \"example.org.zone\"\n\
             allow_transfer = [{{ from = [\"127.0.0.1/32\"] }}]\n\
             [[zone]]\norigin = \"example.edu.\"\nfile = \"example.edu.zone\"\n\
             allow_transfer = [{{ from = [\"127.0.0.1/32\"], key = \"xfr-key\" }}]\n"
        ),
    );

    // (a) dig with the key: the whole zone, several messages, every TSIG
    // verified (dig says so when one does not).
    let out = axfr_raw(Client::Dig, xport, "example.com.", key, None);
    let dig_records = normalise(&out);
    assert_eq!(soa_count(&dig_records), 2, "{out}");
    assert_eq!(dig_records.len(), 1005, "1004 records + the closing SOA");
    assert!(
        !out.contains("Transfer failed") && !out.contains("Couldn't verify"),
        "{out}"
    );
    let tsigs = out
        .lines()
        .filter(|l| l.contains("TSIG") && l.contains("NOERROR"))
        .count();
    assert!(
        tsigs >= 2,
        "a multi-message transfer, each message signed:\n{out}"
    );

    // (b) wrong secret: BADSIG; unknown key name: BADKEY.
    let out = axfr_raw(
        Client::Dig,
        xport,
        "example.com.",
        Some(("xfr-key", WRONG_SECRET)),
        None,
    );
    assert!(
        out.contains("Transfer failed") && out.contains("BADSIG"),
        "{out}"
    );
    assert_eq!(soa_count(&normalise(&out)), 0, "{out}");
    let out = axfr_raw(
        Client::Dig,
        xport,
        "example.com.",
        Some(("nokey", SECRET)),
        None,
    );
    assert!(
        out.contains("Transfer failed") && out.contains("BADKEY"),
        "{out}"
    );
    assert!(
        srv.log().contains("error=BadSig") && srv.log().contains("error=BadKey"),
        "{}",
        srv.log()
    );

    // (c) no key, or a valid key the ACL does not name: REFUSED.
    let out = axfr_raw(Client::Kdig, xport, "example.com.", None, None);
    assert!(
        out.contains("REFUSED") && soa_count(&normalise(&out)) == 0,
        "{out}"
    );
    let out = axfr_raw(Client::Dig, xport, "example.com.", None, None);
    assert!(out.contains("Transfer failed"), "{out}");
    let out = axfr_raw(
        Client::Kdig,
        xport,
        "example.com.",
        Some(("other-key", OTHER_SECRET)),
        None,
    );
    assert!(
        out.contains("REFUSED") && soa_count(&normalise(&out)) == 0,
        "{out}"
    );
    assert!(
        !out.contains("BADSIG") && !out.contains("TSIG"),
        "the refusal is signed and verifies: {out}"
    );

    // (d) kdig with the key agrees with dig.
    assert_eq!(
        axfr_sorted(Client::Kdig, xport, "example.com.", key),
        dig_records
    );

    // (e) Knot as a secondary with the key: signed NOTIFY, signed SOA
    // polls, signed AXFR, then a signed IXFR after a change.
    let ok = eventually(PROPAGATION, || {
        soa_serial(kport, "example.com.") == Some(100)
    });
    assert!(
        ok,
        "Knot did not get the zone with TSIG\n{}",
        logs(&srv, &[&knot])
    );
    assert_eq!(
        axfr_sorted(Client::Dig, kport, "example.com.", None),
        dig_records
    );
    let ok = eventually(PROPAGATION, || {
        status_in_sync(&srv, "example.com.", kport, 100, false)
    });
    assert!(ok, "{:#?}\n{}", transfer_status(&srv), logs(&srv, &[&knot]));
    srv.dir.write(
        "example.com.zone",
        &signed_zone("example.com.", 101, 1000, 600, "added A 192.0.2.200\n"),
    );
    srv.signal("HUP");
    let ok = eventually(PROPAGATION, || {
        soa_serial(kport, "example.com.") == Some(101)
    });
    assert!(ok, "Knot did not follow to 101\n{}", logs(&srv, &[&knot]));
    // 600 moved + 1 added: an IXFR of several messages, each signed.
    let log = srv.log();
    let ixfr = log_lines(
        &log,
        &["outgoing transfer", "kind=\"IXFR\"", "from_serial=100"],
    );
    let records: Vec<usize> = ixfr
        .iter()
        .filter_map(|l| field(l, "records=")?.parse().ok())
        .collect();
    assert!(
        matches!(records[..], [n] if n >= 1201),
        "{ixfr:#?}\n{}",
        logs(&srv, &[&knot])
    );
    assert!(knot.wait_log(&["IXFR, incoming", "finished"], Duration::from_secs(5)));
    let klog = knot.log();
    let done = log_lines(&klog, &["IXFR, incoming", "finished"]);
    let messages: Vec<usize> = done
        .iter()
        .filter_map(|l| {
            l.split(" messages")
                .next()?
                .rsplit(' ')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    assert!(
        matches!(messages[..], [n] if n >= 2),
        "Knot verified a multi-message IXFR: {done:#?}\n{klog}"
    );
    assert_eq!(
        axfr_sorted(Client::Dig, kport, "example.com.", None),
        axfr_sorted(Client::Dig, xport, "example.com.", key)
    );
    let ok = eventually(PROPAGATION, || {
        status_in_sync(&srv, "example.com.", kport, 101, true)
    });
    assert!(ok, "{:#?}\n{}", transfer_status(&srv), logs(&srv, &[&knot]));

    // (f) an address rule: 127.0.0.1 may, 127.0.0.2 may not.
    let out = axfr_raw(Client::Dig, xport, "example.org.", None, Some("127.0.0.1"));
    assert_eq!(soa_count(&normalise(&out)), 2, "{out}");
    let out = axfr_raw(Client::Dig, xport, "example.org.", None, Some("127.0.0.2"));
    assert!(out.contains("Transfer failed"), "{out}");
    let out = axfr_raw(Client::Kdig, xport, "example.org.", None, Some("127.0.0.2"));
    assert!(out.contains("REFUSED"), "{out}");
    assert!(
        srv.log()
            .contains("transfer refused by ACL peer=127.0.0.2 zone=example.org."),
        "{}",
        srv.log()
    );

    // (g) a rule with an address and a key needs both.
    let out = axfr_raw(Client::Dig, xport, "example.edu.", key, Some("127.0.0.1"));
    assert_eq!(soa_count(&normalise(&out)), 2, "{out}");
    assert!(!out.contains("Couldn't verify"), "{out}");
    let out = axfr_raw(Client::Kdig, xport, "example.edu.", None, Some("127.0.0.1"));
    assert!(out.contains("REFUSED"), "unsigned: {out}");
    let out = axfr_raw(Client::Kdig, xport, "example.edu.", key, Some("127.0.0.2"));
    assert!(out.contains("REFUSED"), "signed, wrong address: {out}");

    // AXFR over UDP is refused whatever the ACL says (RFC 5936 §4.2).
    let m = udp_at(srv.addr, "example.org.", RecordType::AXFR).expect("a UDP reply");
    assert_ne!(m.response_code, ResponseCode::NoError);
    assert!(m.answers.is_empty());
}

/// The CNS deployment: xdpdns as hidden primary of a registry-backed zone,
/// NSD as its secondary. Registrations reach NSD by NOTIFY and IXFR, and
/// NSD ends up serving exactly what xdpdns serves.
#[test]
fn nsd_follows_registrations_by_notify_and_ixfr() {
    let (xport, nport, api_port) = (free_port(), free_port(), free_port());
    let dir = TempDir::new("xfr-registry");
    let srv = start_xdpdns(
        dir,
        &format!(
            "[server]\nlisten = [\"127.0.0.1:{xport}\"]\n\
             [transfer]\ndata_dir = \"data\"\npoll_interval_ms = 200\n\
             [registry]\nlisten = \"127.0.0.1:{api_port}\"\ntoken = \"t\"\ndata_dir = \"reg\"\n\
             require_opt_in = false\nns = [\"ns1.sd.example.\"]\nhostmaster = \"h.sd.example.\"\n\
             [[registry.zone]]\nname = \"sd.example.\"\nnetworks = [\"*\"]\n\
             notify = [\"127.0.0.1:{nport}\"]\n"
        ),
    );
    let nsd = nsd_secondary("sd.example.", nport, xport);
    let api = format!("http://127.0.0.1:{api_port}");
    let register = |id: &str, addr: &str| {
        let (code, body) = http(
            "PUT",
            &format!("{api}/v1/instances/{id}"),
            Some("t"),
            Some(&format!(
                r#"{{"owner":"acme","addresses":["{addr}"],"services":["web:80"],"lease_secs":600}}"#
            )),
        );
        assert_eq!(code, 200, "{body}");
    };
    let nsd_has = |name: &str, addr: &str| {
        udp_at(loopback(nport), name, RecordType::A)
            .is_some_and(|m| a_records(&m).contains(&addr.to_string()))
    };

    register("web-1", "10.9.0.1");
    assert!(
        eventually(PROPAGATION, || nsd_has(
            "web-1.inst.acme.sd.example.",
            "10.9.0.1"
        )),
        "NSD never served the first registration\n{}",
        logs(&srv, &[&nsd])
    );
    register("web-2", "10.9.0.2");
    assert!(
        eventually(PROPAGATION, || nsd_has(
            "web.svc.acme.sd.example.",
            "10.9.0.2"
        )),
        "NSD never served the second registration\n{}",
        logs(&srv, &[&nsd])
    );
    let serial = soa_serial(xport, "sd.example.").expect("xdpdns serves the zone");
    assert!(
        eventually(PROPAGATION, || soa_serial(nport, "sd.example.")
            == Some(serial)),
        "{}",
        logs(&srv, &[&nsd])
    );
    assert!(
        eventually(Duration::from_secs(5), || !log_lines(
            &srv.log(),
            &["outgoing transfer", "kind=\"IXFR\""]
        )
        .is_empty()),
        "the second registration did not go out by IXFR\n{}",
        srv.log()
    );
    assert_eq!(
        axfr_sorted(Client::Dig, nport, "sd.example.", None),
        axfr_sorted(Client::Dig, xport, "sd.example.", None),
        "NSD's copy differs from xdpdns's"
    );
    assert!(
        eventually(Duration::from_secs(10), || status_in_sync(
            &srv,
            "sd.example.",
            nport,
            serial,
            false
        )),
        "{:?}",
        transfer_status(&srv)
    );
    // The operator's view of the same state, live from the server.
    let out = Command::new(env!("CARGO_BIN_EXE_xdpdns"))
        .args(["ctl", "secondaries", "--config"])
        .arg(srv.dir.0.join("xdpdns.toml"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row = text
        .lines()
        .find(|l| l.contains(&format!("127.0.0.1:{nport}")))
        .unwrap_or_else(|| panic!("no row for NSD:\n{text}"));
    assert!(
        row.contains("sd.example.") && row.contains(&serial.to_string()) && row.contains("yes"),
        "{row}"
    );
}
