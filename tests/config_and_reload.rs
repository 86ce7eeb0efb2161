//! End-to-end: zone and config errors name file and line; the server
//! refuses a bad start, reloads on SIGHUP without dropping queries, keeps
//! the old zone when a reload is bad, and exits cleanly on SIGTERM.

use crate::support;

use std::net::Ipv4Addr;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{RData, RecordType};
use support::*;

fn zone(serial: u32, www: &str) -> String {
    format!(
        "$ORIGIN example.com.\n$TTL 300\n\
         @ SOA ns1 hostmaster {serial} 3600 600 86400 60\n\
         @ NS ns1\nns1 A 192.0.2.1\nwww A {www}\n"
    )
}

fn xdpdns(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn www(srv: &Server) -> Ipv4Addr {
    let m = srv.udp("www.example.com.", RecordType::A);
    match &m.answers[..] {
        [r] => match &r.data {
            RData::A(a) => a.0,
            d => panic!("{d:?}"),
        },
        other => panic!("{other:?}"),
    }
}

#[test]
fn check_zone_errors_are_one_line_with_file_and_line() {
    let dir = TempDir::new("checkzone");
    let cases = [
        (
            "syntax.zone",
            zone(1, "192.0.2.80") + "bad A 300.1.1.1\n",
            ":7: bad IPv4 address \"300.1.1.1\"",
        ),
        (
            "nosoa.zone",
            "$ORIGIN example.com.\n$TTL 300\n@ NS ns1\nns1 A 192.0.2.1\n".to_string(),
            ":3: zone example.com. has no SOA record",
        ),
        (
            "cname.zone",
            zone(1, "192.0.2.80") + "www CNAME ns1\n",
            ":7: CNAME and other data at www.example.com. (A at line 6)",
        ),
        (
            "outside.zone",
            zone(1, "192.0.2.80") + "www.example.org. A 192.0.2.9\n",
            ":7: www.example.org. is outside zone example.com.",
        ),
        (
            "noglue.zone",
            zone(1, "192.0.2.80") + "sub NS ns.sub\n",
            ":7: NS target ns.sub.example.com. is inside the zone but has no A/AAAA record",
        ),
    ];
    for (file, text, want) in cases {
        let path = dir.write(file, &text);
        let out = xdpdns(&["check-zone", &path_str(&path), "example.com"]);
        assert_eq!(out.status.code(), Some(1), "{file}");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        let expected = format!("{}{want}", path.display());
        assert!(
            err.contains(&expected),
            "{file}: want {expected:?} in {err:?}"
        );
    }
    let good = dir.write("good.zone", &zone(2026, "192.0.2.80"));
    let out = xdpdns(&["check-zone", &path_str(&good), "example.com."]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("loaded serial 2026, 4 records"), "{stdout}");
}

#[test]
fn bad_initial_config_or_zone_refuses_to_start() {
    let dir = TempDir::new("badstart");
    dir.write("zone.db", &(zone(1, "192.0.2.80") + "www CNAME ns1\n"));
    let bad_zone = dir.write(
        "bad-zone.toml",
        "[server]\nlisten=[\"127.0.0.1:0\"]\n[[zone]]\norigin=\"example.com\"\nfile=\"zone.db\"\n",
    );
    let out = xdpdns(&["serve", "--config", &path_str(&bad_zone)]);
    assert!(!out.status.success());
    let want = format!(
        "{}:7: CNAME and other data",
        dir.0.join("zone.db").display()
    );
    assert!(stderr(&out).contains(&want), "{}", stderr(&out));

    let bad_key = dir.write(
        "bad-key.toml",
        "[server]\nlisten=[\"127.0.0.1:0\"]\nudp_paylod = 1232\n",
    );
    let out = xdpdns(&["serve", "--config", &path_str(&bad_key)]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(&path_str(&bad_key)) && err.contains("udp_paylod") && err.contains("line 3"),
        "{err}"
    );

    let out = xdpdns(&["check-config", &path_str(&bad_key)]);
    assert_eq!(out.status.code(), Some(1));

    dir.write("ok.db", &zone(7, "192.0.2.80"));
    let good = dir.write(
        "good.toml",
        "[[zone]]\norigin=\"example.com\"\nfile=\"ok.db\"\n",
    );
    let out = xdpdns(&["check-config", &path_str(&good)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("zone example.com.: serial 7, 4 records"));
}

#[test]
fn help_explains_every_subcommand() {
    for args in [
        &["--help"][..],
        &["serve", "--help"],
        &["check-config", "--help"],
        &["check-zone", "--help"],
    ] {
        let out = xdpdns(args);
        assert!(out.status.success(), "{args:?}");
        assert!(!out.stdout.is_empty());
    }
    let top = String::from_utf8(xdpdns(&["--help"]).stdout).unwrap();
    for sub in ["serve", "check-config", "check-zone"] {
        assert!(top.contains(sub), "{top}");
    }
}

#[test]
fn sighup_reloads_and_a_bad_reload_keeps_the_old_zone() {
    let srv = Server::start("example.com.", &zone(1, "192.0.2.80"), "", "");
    assert_eq!(www(&srv), Ipv4Addr::new(192, 0, 2, 80));

    srv.dir.write("zone.db", &zone(2, "192.0.2.81"));
    srv.signal("HUP");
    assert!(
        srv.wait_log("reload done", Duration::from_secs(10)),
        "{}",
        srv.log()
    );
    assert_eq!(www(&srv), Ipv4Addr::new(192, 0, 2, 81));
    assert!(
        srv.log().contains("old_serial=1 new_serial=2"),
        "{}",
        srv.log()
    );

    srv.dir
        .write("zone.db", &(zone(3, "192.0.2.82") + "www CNAME ns1\n"));
    srv.signal("HUP");
    let deadline = Instant::now() + Duration::from_secs(10);
    while srv.log().matches("reload done").count() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        www(&srv),
        Ipv4Addr::new(192, 0, 2, 81),
        "old version still served"
    );
    let want = format!(
        "{}:7: CNAME and other data",
        srv.dir.0.join("zone.db").display()
    );
    assert!(srv.log().contains(&want), "{}", srv.log());
    assert!(srv.log().contains("keeping the previous version"));

    // A broken config changes nothing either.
    std::fs::write(&srv.config, "[server\n").unwrap();
    srv.signal("HUP");
    assert!(srv.wait_log("reload failed", Duration::from_secs(10)));
    assert_eq!(www(&srv), Ipv4Addr::new(192, 0, 2, 81));
}

#[test]
fn reloads_drop_no_queries() {
    let srv = Arc::new(Server::start(
        "example.com.",
        &zone(1, "192.0.2.80"),
        "",
        "",
    ));
    let done = Arc::new(AtomicBool::new(false));
    let client = {
        let (srv, done) = (srv.clone(), done.clone());
        std::thread::spawn(move || {
            let q = query("www.example.com.", RecordType::A, None);
            let (mut sent, mut lost) = (0u32, 0u32);
            // Bounded: at most 20 000 queries or until the reloads finish.
            while !done.load(Ordering::Relaxed) && sent < 20_000 {
                sent += 1;
                match udp_query(srv.addr, &q) {
                    Some(m) => {
                        assert_eq!(m.metadata.response_code, ResponseCode::NoError);
                        assert_eq!(m.answers.len(), 1, "never a half-applied zone");
                    }
                    None => lost += 1,
                }
            }
            (sent, lost)
        })
    };
    for i in 0..6u32 {
        let addr = format!("192.0.2.{}", 80 + i % 2);
        srv.dir.write("zone.db", &zone(2 + i, &addr));
        srv.signal("HUP");
        let deadline = Instant::now() + Duration::from_secs(10);
        while srv.log().matches("reload done").count() < (i + 1) as usize
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    done.store(true, Ordering::Relaxed);
    let (sent, lost) = client.join().unwrap();
    assert!(
        sent > 50,
        "the client was running during the reloads ({sent})"
    );
    assert_eq!(lost, 0, "{lost} of {sent} queries unanswered");
    assert_eq!(srv.log().matches("reload done").count(), 6);
}

#[test]
fn sigterm_drains_and_exits_cleanly() {
    let mut srv = Server::start(
        "example.com.",
        &zone(1, "192.0.2.80"),
        "shutdown_grace_ms = 2000",
        "",
    );
    let mut open = srv.tcp_connect();
    srv.signal("TERM");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = srv.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "did not exit: {}", srv.log());
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    assert!(srv.log().contains("stopped"));
    assert!(tcp_closed_within(&mut open, Duration::from_secs(1)));
}

/// Every key the README lists as reloadable takes effect on SIGHUP:
/// `[identity]` (server id, NSID), `server.udp_payload`, the cookie
/// secret file, and the transfer ACL (zone files: the test above).
#[test]
fn sighup_applies_every_reloadable_key() {
    use hickory_proto::op::Message;
    use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption, NSIDPayload};
    use hickory_proto::rr::DNSClass;

    let config = |id: &str, nsid: &str, payload: u16, xfr_from: &str, rotate: bool| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nudp_payload = {payload}\n\
             [identity]\nserver_id = \"{id}\"\nnsid = \"{nsid}\"\n\
             [cookies]\nsecret_file = \"cookie.secret\"\n\
             [transfer]\nallow_transfer = [{{ from = [\"{xfr_from}\"] }}]\n\
             [[zone]]\norigin = \"example.com.\"\nfile = \"zone.db\"\nrotate = {rotate}\n"
        )
    };
    let dir = TempDir::new("reload-keys");
    let pool = "pool A 192.0.2.5\npool A 192.0.2.6\n";
    dir.write("zone.db", &(zone(1, "192.0.2.80") + pool));
    dir.write("cookie.secret", "000102030405060708090a0b0c0d0e0f\n");
    let path = dir.write(
        "xdpdns.toml",
        &config("one", "n-one", 1232, "192.0.2.0/24", false),
    );
    let srv = Server::start_with_config(dir, path.clone());

    let ask = |q: &[u8]| Message::from_vec(&udp_raw(srv.addr, q).expect("UDP reply")).unwrap();
    // What the server says now: id.server, NSID, payload, the COOKIE it
    // returns for `cookie`, and its answer to an AXFR from loopback.
    let observe = |cookie: &[u8]| {
        let id = match &ask(&query_class(
            "id.server.",
            RecordType::TXT,
            DNSClass::CH,
            None,
        ))
        .answers[..]
        {
            [r] => match &r.data {
                RData::TXT(t) => t.to_string(),
                d => panic!("{d:?}"),
            },
            other => panic!("{other:?}"),
        };
        let mut e = edns(1232);
        e.options_mut()
            .insert(EdnsOption::NSID(NSIDPayload::new(Vec::new()).unwrap()));
        e.options_mut()
            .insert(EdnsOption::Unknown(10, cookie.to_vec()));
        let opt = ask(&query("www.example.com.", RecordType::A, Some(e)))
            .edns
            .expect("OPT");
        let nsid = match opt.option(EdnsCode::NSID) {
            Some(EdnsOption::NSID(p)) => String::from_utf8(p.as_ref().to_vec()).unwrap(),
            other => panic!("NSID: {other:?}"),
        };
        let cookie = match opt.option(EdnsCode::Cookie) {
            Some(EdnsOption::Unknown(_, c)) => c.clone(),
            other => panic!("COOKIE: {other:?}"),
        };
        let mut tcp = srv.tcp_connect();
        tcp_send(&mut tcp, &query("example.com.", RecordType::AXFR, None));
        let axfr = Message::from_vec(&tcp_recv(&mut tcp).expect("AXFR reply")).unwrap();
        (
            id,
            nsid,
            opt.max_payload(),
            cookie,
            axfr.metadata.response_code,
        )
    };
    // Whether the pool's first address follows the query ID (`rotate`).
    let rotates = || {
        let first = |id: u16| {
            let mut q = query("pool.example.com.", RecordType::A, None);
            q[..2].copy_from_slice(&id.to_be_bytes());
            ask(&q).answers[0].data.clone()
        };
        first(2) != first(3)
    };
    assert!(!rotates(), "a file zone does not rotate unless set");
    let (id, nsid, payload, cookie, xfr) = observe(b"clientck");
    assert_eq!(
        (id.as_str(), nsid.as_str(), payload),
        ("one", "n-one", 1232)
    );
    assert_eq!(
        xfr,
        ResponseCode::Refused,
        "loopback not in the transfer ACL"
    );
    assert_eq!(cookie.len(), 24);
    // A valid server cookie comes back as it was sent.
    assert_eq!(observe(&cookie).3, cookie);

    std::fs::write(&path, config("two", "n-two", 1400, "127.0.0.0/8", true)).unwrap();
    // A new secret with no previous one: cookies made before are invalid.
    std::fs::write(
        srv.dir.0.join("cookie.secret"),
        "f0e0d0c0b0a090807060504030201000\n",
    )
    .unwrap();
    srv.signal("HUP");
    assert!(
        srv.wait_log("reload done", Duration::from_secs(10)),
        "{}",
        srv.log()
    );
    let (id2, nsid2, payload2, cookie2, xfr2) = observe(&cookie);
    assert_eq!(
        (id2.as_str(), nsid2.as_str(), payload2),
        ("two", "n-two", 1400)
    );
    assert_eq!(xfr2, ResponseCode::NoError, "loopback now allowed");
    assert_eq!(cookie2[..8], cookie[..8], "the client cookie is echoed");
    assert_ne!(cookie2, cookie, "the old server cookie no longer validates");
    assert!(rotates(), "rotate = true, reloaded");
    assert_eq!(observe(&cookie2).3, cookie2, "the new one does");
}
