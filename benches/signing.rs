//! Signing speed beside Knot DNS, in one run: a zone of about 1M records
//! (500,000 names with an A and an AAAA each) signed from scratch (ECDSA
//! P-256, one combined key, NSEC), then signed again after 1,000 of its
//! RRsets changed in the zone file, each timed end to end until the
//! server answers the new serial's SOA with its RRSIG:
//!
//! * xdpdns: from `serve` with `dnssec_policy = "default"` (parse, load,
//!   sign), then the file edited and `ctl zone reload`;
//! * Knot: `knotd` with automatic signing (`dnssec-signing: on`,
//!   `single-type-signing: on`), then the file edited and
//!   `knotc zone-reload` (`zonefile-load: difference-no-serial`).
//!
//! Both use every core (two background workers for Knot); each server is
//! left to finish what it does after its first signed answer before the
//! zone is changed. `cargo bench
//! --bench signing`; under `cargo test` it runs on a 5,000-name zone as a
//! smoke test.

use std::io::Write;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hickory_proto::op::{Edns, Message, Query};
use hickory_proto::rr::{Name, RData, RecordType};

#[path = "../tests/support/process.rs"]
#[allow(dead_code)]
mod process;

const ORIGIN: &str = "sign.test.";

/// The zone: `names` names with an A and an AAAA each; with `changed`,
/// the first 1,000 names' A records differ (1,000 RRsets).
fn write_zone(path: &Path, names: usize, serial: u32, changed: bool) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(
        f,
        "$ORIGIN {ORIGIN}\n$TTL 300\n@ SOA ns1 h {serial} 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1"
    )
    .unwrap();
    for i in 0..names {
        let last = if changed && i < 1000 {
            255
        } else {
            (i & 255) as u8
        };
        writeln!(
            f,
            "h{i} A 10.{}.{}.{last}\nh{i} AAAA 2001:db8::{:x}:{:x}",
            i >> 16 & 255,
            i >> 8 & 255,
            i >> 16,
            i & 0xffff
        )
        .unwrap();
    }
}

/// The serial `dns` answers for the zone's SOA, when it comes signed.
fn signed_serial(sock: &UdpSocket, dns: SocketAddr) -> Option<u32> {
    let mut q = Message::query();
    q.add_query(Query::query(
        Name::from_ascii(ORIGIN).unwrap(),
        RecordType::SOA,
    ));
    let mut e = Edns::new();
    e.set_max_payload(1232).set_dnssec_ok(true);
    q.edns = Some(e);
    q.metadata.id = rand_id();
    sock.send_to(&q.to_vec().unwrap(), dns).ok()?;
    let mut buf = [0u8; 4096];
    loop {
        let (n, _) = sock.recv_from(&mut buf).ok()?;
        let Ok(m) = Message::from_vec(&buf[..n]) else {
            continue;
        };
        if m.metadata.id != q.metadata.id {
            continue;
        }
        let signed = m
            .answers
            .iter()
            .any(|r| r.record_type() == RecordType::RRSIG);
        let serial = m.answers.iter().find_map(|r| match &r.data {
            RData::SOA(s) => Some(s.serial),
            _ => None,
        });
        return serial.filter(|_| signed);
    }
}

fn rand_id() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish() as u16
}

/// Waits (bounded) until `dns` serves a signed SOA with a serial other
/// than `old`; the time it took from `since`.
fn until_signed(dns: SocketAddr, old: Option<u32>, since: Instant) -> Duration {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let deadline = since + Duration::from_secs(600);
    loop {
        if let Some(s) = signed_serial(&sock, dns) {
            if Some(s) != old {
                return since.elapsed();
            }
        }
        assert!(Instant::now() < deadline, "never signed");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (at most two minutes) until process `pid` has been idle for a
/// second (under 5 % of a core): what it does in the background after
/// answering (a hot-answer table, a zone image) is not the change timed
/// next.
fn wait_idle(pid: u32) {
    let ticks = || -> Option<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let fields: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
        Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut last = ticks();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_secs(1));
        let now = ticks();
        match (last, now) {
            // 100 ticks a second: under 5 of them busy.
            (Some(a), Some(b)) if b - a < 5 => return,
            _ => last = now,
        }
    }
}

fn free_port() -> u16 {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.local_addr().unwrap().port()
}

fn xdpdns(dir: &Path, names: usize) -> (Duration, Duration) {
    let port = free_port();
    write_zone(&dir.join("zone.db"), names, 1, false);
    let config = dir.join("xdpdns.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\n[log]\nlevel = \"warn\"\n\
             [transfer]\ndata_dir = \"data\"\n\
             [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"zone.db\"\ndnssec_policy = \"default\"\n"
        ),
    )
    .unwrap();
    let dns: SocketAddr = ([127, 0, 0, 1], port).into();
    let started = Instant::now();
    let launched = process::launch(
        &[],
        &config,
        process::bench_stderr(),
        Duration::from_secs(600),
    )
    .expect("xdpdns starts");
    let child = process::KillOnDrop(launched.child);
    let scratch = until_signed(dns, None, started);
    let bin = std::env::var("XDPDNS_BIN").unwrap_or_else(|_| process::BIN.to_string());
    let mut reload = Command::new(bin);
    reload
        .args(["ctl", "--config"])
        .arg(&config)
        .args(["zone", "reload", ORIGIN]);
    let again = change_and_reload(&child, dns, dir, names, reload);
    (scratch, again)
}

/// Once the server is idle: 1,000 RRsets changed in the file, `reload`
/// run, and the time until the new serial is answered signed.
fn change_and_reload(
    server: &process::KillOnDrop,
    dns: SocketAddr,
    dir: &Path,
    names: usize,
    mut reload: Command,
) -> Duration {
    wait_idle(server.0.id());
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let old = signed_serial(&sock, dns);
    write_zone(&dir.join("zone.db"), names, 1, true);
    let t0 = Instant::now();
    let out = reload.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    until_signed(dns, old, t0)
}

fn knot(dir: &Path, names: usize) -> (Duration, Duration) {
    let port = free_port();
    write_zone(&dir.join("zone.db"), names, 1, false);
    let d = dir.display();
    let conf = dir.join("knot.conf");
    std::fs::write(
        &conf,
        format!(
            "server:\n    rundir: \"{d}\"\n    listen: 127.0.0.1@{port}\n    background-workers: 2\n\
             log:\n  - target: stderr\n    any: warning\n\
             database:\n    storage: \"{d}\"\n\
             policy:\n  - id: p\n    algorithm: ecdsap256sha256\n    single-type-signing: on\n\
             \x20   nsec3: off\n\
             template:\n  - id: default\n    storage: \"{d}\"\n\
             zone:\n  - domain: {ORIGIN}\n    file: zone.db\n    dnssec-signing: on\n\
             \x20   dnssec-policy: p\n    zonefile-sync: -1\n    zonefile-load: difference-no-serial\n\
             \x20   journal-content: all\n    journal-max-usage: 4G\n"
        ),
    )
    .unwrap();
    let dns: SocketAddr = ([127, 0, 0, 1], port).into();
    let started = Instant::now();
    let child = Command::new("knotd")
        .args(["-c"])
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(process::bench_stderr())
        .spawn()
        .expect("knotd (cargo xtask deps installs it)");
    let child = process::KillOnDrop(child);
    let scratch = until_signed(dns, None, started);
    let mut reload = Command::new("knotc");
    reload.args(["-c"]).arg(&conf).args(["zone-reload", ORIGIN]);
    let again = change_and_reload(&child, dns, dir, names, reload);
    (scratch, again)
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let names = if full { 500_000 } else { 5_000 };
    let root: PathBuf =
        std::env::temp_dir().join(format!("xdpdns-bench-sign-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let runs = if full { 2 } else { 1 };
    println!(
        "signing bench: {} records ({names} names), ECDSA P-256 CSK, NSEC",
        names * 2 + 3
    );
    for run in 0..runs {
        for (who, f) in [("xdpdns", xdpdns as fn(&Path, usize) -> _), ("Knot", knot)] {
            let dir = root.join(format!("{who}-{run}"));
            std::fs::create_dir_all(&dir).unwrap();
            let (scratch, again) = f(&dir, names);
            println!(
                "run {run} {who}: start to signed answer {:.2} s; 1,000 RRsets changed: reload to signed answer {:.2} s",
                scratch.as_secs_f64(),
                again.as_secs_f64()
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}
