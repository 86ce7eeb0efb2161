//! xdpdns following catalog zones (RFC 9432) from a Knot primary: member
//! zones start and stop being served as the catalog changes, keep being
//! served across a restart while the primary is down, are transferred
//! anew when their member id changes, and move between catalogs only by
//! a change of ownership (`coo`).

use std::time::{Duration, Instant};

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;

use crate::support::peers::{knot_reconfigure, knot_reload, knot_zones_primary, Proc};
use crate::support::process::{free_port, BIN};
use crate::support::{eventually, Server, TempDir};

/// A member zone whose `www` has `address`.
fn member_zone(serial: u32, address: &str) -> String {
    format!(
        "$TTL 60\n@ SOA ns1 hostmaster {serial} 3600 600 86400 60\n@ NS ns1\n\
         ns1 A 192.0.2.53\nwww A {address}\n"
    )
}

/// A hand-written catalog zone listing `members` (`id zone` lines of
/// Knot zone-file text after `version`).
fn catalog_zone(serial: u32, members: &str) -> String {
    format!(
        "$TTL 0\n@ SOA invalid. invalid. {serial} 3600 600 86400 0\n@ NS invalid.\n\
         version TXT \"2\"\n{members}"
    )
}

/// A Knot zone entry: `file` under its directory, NOTIFYing xdpdns.
fn knot_zone(domain: &str, extra: &str) -> String {
    format!(
        "  - domain: {domain}\n    file: {domain}.zone\n    acl: xfr_out\n    \
         notify: xdpdns\n    zonefile-sync: -1\n{extra}"
    )
}

/// xdpdns on `port` following `catalogs` from Knot on `kport`.
fn follower(tag: &str, port: u16, kport: u16, catalogs: &[&str]) -> Server {
    let dir = TempDir::new(tag);
    let mut body = format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\n[log]\nlevel = \"info\"\n\
         [transfer]\ndata_dir = \"data\"\nprimary_timeout_ms = 2000\n"
    );
    for c in catalogs {
        body.push_str(&format!(
            "[[zone]]\norigin = \"{c}\"\nprimaries = [\"127.0.0.1:{kport}\"]\nconsume_catalog = true\n"
        ));
    }
    let config = dir.write("xdpdns.toml", &body);
    Server::start_with_config(dir, config)
}

/// `www.<zone>`'s address as xdpdns answers it (None: not served).
fn www(srv: &Server, zone: &str) -> Option<String> {
    let m = srv.udp(&format!("www.{zone}"), RecordType::A);
    if m.metadata.response_code != ResponseCode::NoError || !m.metadata.authoritative {
        return None;
    }
    m.answers.first().map(|r| r.data.to_string())
}

fn refused(srv: &Server, zone: &str) -> bool {
    srv.udp(zone, RecordType::SOA).metadata.response_code == ResponseCode::Refused
}

fn diag(srv: &Server, knot: &Proc) -> String {
    format!("xdpdns:\n{}\nknot:\n{}", srv.log(), knot.log())
}

/// Waits up to 10 s for `done`; returns how long it took.
fn timed(done: impl Fn() -> bool) -> Option<Duration> {
    let t0 = Instant::now();
    eventually(Duration::from_secs(10), done).then(|| t0.elapsed())
}

/// `xdpdns ctl ARGS` against `srv`; its output, or a failed test.
fn ctl(srv: &Server, args: &[&str]) -> String {
    let out = std::process::Command::new(BIN)
        .arg("ctl")
        .arg("--config")
        .arg(&srv.config)
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "ctl {args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn xdpdns_follows_a_knot_generated_catalog_and_keeps_its_members_across_a_restart() {
    let (kport, xport) = (free_port(), free_port());
    let member = |d: &str| {
        knot_zone(
            d,
            "    catalog-role: member\n    catalog-zone: catalog.test\n",
        )
    };
    let catalog = "  - domain: catalog.test\n    catalog-role: generate\n    acl: xfr_out\n    \
                   notify: xdpdns\n    zonefile-sync: -1\n";
    let one = member_zone(1, "192.0.2.1");
    let two = member_zone(1, "192.0.2.2");
    let files = [
        ("one.test.zone", one.as_str()),
        ("two.test.zone", two.as_str()),
    ];
    let zones = |members: &[&str]| {
        let mut z = catalog.to_string();
        for m in members {
            z.push_str(&member(m));
        }
        z
    };
    let knot = knot_zones_primary(kport, xport, &zones(&["one.test"]), &files);
    let mut srv = follower("follow-knot", xport, kport, &["catalog.test."]);
    let first = timed(|| www(&srv, "one.test.").as_deref() == Some("192.0.2.1"));
    assert!(first.is_some(), "{}", diag(&srv, &knot));
    // A zone added on the primary is served here within a second.
    knot_reconfigure(&knot, kport, xport, &zones(&["one.test", "two.test"]), &[]);
    let added = timed(|| www(&srv, "two.test.").as_deref() == Some("192.0.2.2"));
    eprintln!("member added on Knot -> served by xdpdns: {added:?}");
    assert!(
        added.is_some_and(|t| t < Duration::from_secs(1)),
        "{added:?}\n{}",
        diag(&srv, &knot)
    );
    // And one removed there stops being served within a second.
    knot_reconfigure(&knot, kport, xport, &zones(&["two.test"]), &[]);
    let removed = timed(|| refused(&srv, "one.test."));
    eprintln!("member removed on Knot -> no longer served by xdpdns: {removed:?}");
    assert!(
        removed.is_some_and(|t| t < Duration::from_secs(1)),
        "{removed:?}\n{}",
        diag(&srv, &knot)
    );
    // Restarted (killed) while the primary is down: the members still
    // served come back from the journal before any primary answers.
    drop(knot);
    srv.restart_after("KILL");
    assert_eq!(
        www(&srv, "two.test.").as_deref(),
        Some("192.0.2.2"),
        "{}",
        srv.log()
    );
    assert!(refused(&srv, "one.test."), "a removed member stays removed");
    // The catalog itself is served too, as any secondary zone.
    assert_eq!(
        srv.udp("version.catalog.test.", RecordType::TXT)
            .answers
            .len(),
        1
    );
}

#[test]
fn a_changed_member_id_resets_the_zone_and_coo_moves_a_member_between_catalogs() {
    let (kport, xport) = (free_port(), free_port());
    let cat_a = |serial: u32, members: &str| catalog_zone(serial, members);
    let zones = format!(
        "{}{}{}{}",
        knot_zone("cat-a.test", ""),
        knot_zone("cat-b.test", ""),
        knot_zone("one.test", ""),
        knot_zone("two.test", "")
    );
    let a1 = cat_a(1, "first.zones PTR one.test.\nsecond.zones PTR two.test.\n");
    let b1 = catalog_zone(1, "");
    let one = member_zone(5, "192.0.2.1");
    let two = member_zone(5, "192.0.2.2");
    let files = [
        ("cat-a.test.zone", a1.as_str()),
        ("cat-b.test.zone", b1.as_str()),
        ("one.test.zone", one.as_str()),
        ("two.test.zone", two.as_str()),
    ];
    let knot = knot_zones_primary(kport, xport, &zones, &files);
    let mut srv = follower(
        "follow-reset",
        xport,
        kport,
        &["cat-a.test.", "cat-b.test."],
    );
    let both = timed(|| www(&srv, "one.test.").is_some() && www(&srv, "two.test.").is_some());
    assert!(both.is_some(), "{}", diag(&srv, &knot));

    // one.test changes on the primary under the same serial: a refresh
    // keeps the old copy, a reset (its member id changes) transfers anew.
    knot.dir
        .write("one.test.zone", &member_zone(5, "192.0.2.11"));
    knot_reload(&knot, "one.test");
    let out = ctl(&srv, &["zone", "reload", "one.test"]);
    assert!(out.contains("refresh"), "{out}");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        www(&srv, "one.test.").as_deref(),
        Some("192.0.2.1"),
        "same serial: nothing to transfer"
    );
    knot.dir.write(
        "cat-a.test.zone",
        &cat_a(
            2,
            "renewed.zones PTR one.test.\nsecond.zones PTR two.test.\n",
        ),
    );
    knot_reload(&knot, "cat-a.test");
    let reset = timed(|| www(&srv, "one.test.").as_deref() == Some("192.0.2.11"));
    assert!(reset.is_some(), "{}", diag(&srv, &knot));
    assert!(srv.log().contains("catalog member reset"), "{}", srv.log());

    // two.test listed by cat-b too: without coo it stays cat-a's ...
    knot.dir.write(
        "cat-b.test.zone",
        &catalog_zone(2, "second.zones PTR two.test.\n"),
    );
    knot_reload(&knot, "cat-b.test");
    assert!(
        srv.wait_log("without a change of ownership", Duration::from_secs(10)),
        "{}",
        diag(&srv, &knot)
    );
    // ... with coo in cat-a pointing at cat-b, it moves (same id: no
    // reset, served throughout), and cat-a dropping it no longer matters.
    knot.dir.write(
        "cat-a.test.zone",
        &cat_a(
            3,
            "renewed.zones PTR one.test.\nsecond.zones PTR two.test.\n\
             coo.second.zones PTR cat-b.test.\n",
        ),
    );
    knot_reload(&knot, "cat-a.test");
    assert!(
        srv.wait_log("changed owner", Duration::from_secs(10)),
        "{}",
        diag(&srv, &knot)
    );
    knot.dir.write(
        "cat-a.test.zone",
        &cat_a(4, "renewed.zones PTR one.test.\n"),
    );
    knot_reload(&knot, "cat-a.test");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        www(&srv, "two.test.").as_deref(),
        Some("192.0.2.2"),
        "{}",
        srv.log()
    );
    // Its new owner removing it is what stops it.
    knot.dir.write("cat-b.test.zone", &catalog_zone(3, ""));
    knot_reload(&knot, "cat-b.test");
    assert!(
        timed(|| refused(&srv, "two.test.")).is_some(),
        "{}",
        diag(&srv, &knot)
    );
    assert_eq!(www(&srv, "one.test.").as_deref(), Some("192.0.2.11"));
    // What is followed is kept where the next start finds it.
    let kept =
        std::fs::read_to_string(srv.dir.0.join("data/dynamic/catalog-members.json")).unwrap();
    assert!(
        kept.contains("one.test.") && kept.contains("renewed") && !kept.contains("two.test"),
        "{kept}"
    );
    drop(knot);
    srv.restart_after("TERM");
    assert_eq!(
        www(&srv, "one.test.").as_deref(),
        Some("192.0.2.11"),
        "{}",
        srv.log()
    );
}

#[test]
fn xdpdns_follows_the_catalog_of_another_xdpdns() {
    let xport = free_port();
    let primary = crate::catalog_zones::start(&format!(
        "[catalog]\nzone = \"catalog.test\"\nnotify = [\"127.0.0.1:{xport}\"]\n"
    ));
    let follower = follower(
        "follow-xdpdns",
        xport,
        primary.addr.port(),
        &["catalog.test."],
    );
    let configured =
        timed(|| www(&follower, "example.com.").is_some() || !refused(&follower, "example.com."));
    assert!(
        configured.is_some(),
        "{}\n{}",
        follower.log(),
        primary.log()
    );
    let api = primary.api();
    let zone =
        "$TTL 60\n@ SOA ns1 h 7 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.7\nwww A 192.0.2.8\n";
    let body = serde_json::json!({"name": "fresh.test", "zone": zone}).to_string();
    let (code, out) =
        crate::support::http("POST", &format!("{api}/v1/zones"), Some("t"), Some(&body));
    assert_eq!(code, 201, "{out}");
    let added = timed(|| www(&follower, "fresh.test.").as_deref() == Some("192.0.2.8"));
    eprintln!("zone added on xdpdns -> served by the following xdpdns: {added:?}");
    assert!(
        added.is_some_and(|t| t < Duration::from_secs(1)),
        "{added:?}\n{}",
        follower.log()
    );
    let (code, out) = crate::support::http(
        "DELETE",
        &format!("{api}/v1/zones/fresh.test"),
        Some("t"),
        None,
    );
    assert_eq!(code, 204, "{out}");
    let removed = timed(|| refused(&follower, "fresh.test."));
    assert!(
        removed.is_some_and(|t| t < Duration::from_secs(1)),
        "{removed:?}\n{}",
        follower.log()
    );
}
