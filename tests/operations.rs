//! What an operator reads: logs written to a file carry no terminal
//! escapes, JSON logs parse line by line, `--version` names the build.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::process::BIN;
use hickory_proto::rr::RecordType;

use crate::support::{query, udp_query, TempDir};

/// A directory with the shared example zone and a config serving it on
/// an ephemeral port, `extra` appended (e.g. a `[log]` table).
fn example_config(tag: &str, extra: &str) -> (TempDir, std::path::PathBuf) {
    let dir = TempDir::new(tag);
    dir.write("zone.db", include_str!("support/example.com.zone"));
    dir.write("big.inc", include_str!("support/big.inc"));
    let config = dir.write(
        "xdpdns.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\n{extra}\n\
             [[zone]]\norigin = \"example.com.\"\nfile = \"zone.db\"\n"
        ),
    );
    (dir, config)
}

/// Serves the example zone with `log` as the `[log]` table, stderr to a
/// file (not a terminal, and without NO_COLOR: the server must decide by
/// itself), asks one query, stops it; returns what it logged.
fn logged(log: &str) -> String {
    let (dir, config) = example_config("logs", &format!("[log]\n{log}"));
    let log_path = dir.0.join("stderr.log");
    let ready = dir.0.join("ready.json");
    let mut child = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&config)
        .arg("--ready-file")
        .arg(&ready)
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let addr: std::net::SocketAddr = loop {
        if let Ok(text) = std::fs::read_to_string(&ready) {
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            break v["dns"][0].as_str().unwrap().parse().unwrap();
        }
        assert!(Instant::now() < deadline, "not ready");
        assert!(child.try_wait().unwrap().is_none(), "exited early");
        std::thread::sleep(Duration::from_millis(20));
    };
    let reply = udp_query(addr, &query("www.example.com.", RecordType::A, None));
    assert!(reply.is_some_and(|m| !m.answers.is_empty()));
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
    read(&log_path)
}

fn read(p: &Path) -> String {
    String::from_utf8(std::fs::read(p).unwrap()).unwrap()
}

#[test]
fn text_logs_in_a_file_have_no_escape_sequences() {
    let text = logged("level = \"info\"");
    assert!(text.contains("listening"), "{text}");
    assert!(!text.contains('\u{1b}'), "escape sequences in:\n{text}");
}

#[test]
fn json_logs_are_one_object_per_line() {
    let text = logged("level = \"info\"\nformat = \"json\"");
    let mut events = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        for key in ["timestamp", "level", "target", "fields"] {
            assert!(v.get(key).is_some(), "no {key}: {line}");
        }
        events += 1;
    }
    assert!(events >= 3, "{text}");
    assert!(text.contains("\"message\":\"listening"), "{text}");
    assert!(!text.contains('\u{1b}'));
}

#[test]
fn version_names_the_commit_and_the_kernel_object() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(env!("CARGO_PKG_VERSION")), "{text}");
    let commit = text
        .split("commit ")
        .nth(1)
        .and_then(|r| r.split(',').next());
    assert!(commit.is_some_and(|c| !c.is_empty()), "{text}");
    let hash = text
        .split("sha256 ")
        .nth(1)
        .map(|h| h.trim_end_matches([')', '\n']));
    assert!(
        hash.is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit())),
        "{text}"
    );
}

/// Receives the next notification (bounded).
fn next_state(sock: &std::os::unix::net::UnixDatagram) -> String {
    let mut buf = [0u8; 512];
    let n = sock
        .recv(&mut buf)
        .expect("a notification within the timeout");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn readiness_reload_and_stop_are_signalled_to_systemd() {
    let (dir, config) = example_config("notify", "");
    let socket_path = dir.0.join("notify.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&socket_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&config)
        .env("NOTIFY_SOCKET", &socket_path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let signal = |sig: &str| {
        let _ = Command::new("kill")
            .args([sig, &child.id().to_string()])
            .status();
    };
    assert_eq!(
        next_state(&sock),
        format!("READY=1\nMAINPID={}", child.id())
    );
    signal("-HUP");
    assert_eq!(next_state(&sock), "RELOADING=1");
    assert_eq!(next_state(&sock), "READY=1");
    signal("-TERM");
    assert_eq!(next_state(&sock), "STOPPING=1");
    assert!(child.wait().unwrap().success());
}

/// `systemd-analyze verify` on the shipped unit (with the binary path
/// pointed at this build, which verify requires to exist).
#[test]
fn the_systemd_unit_verifies() {
    let unit = include_str!("../dist/xdpdns.service").replace("/usr/bin/xdpdns", BIN);
    let dir = TempDir::new("unit");
    let path = dir.write("xdpdns.service", &unit);
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .expect("systemd-analyze (Debian package systemd, installed by cargo xtask deps)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        !stderr.contains("xdpdns.service"),
        "warnings about the unit:\n{stderr}"
    );
}

/// The value of the series `name{labels}` in a scrape, 0 when absent.
fn series(scrape: &str, name: &str, labels: &str) -> u64 {
    let key = format!("{name}{{{labels}}} ");
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(&key))
        .map_or(0, |v| v.trim().parse().unwrap())
}

fn scrape(addr: std::net::SocketAddr) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    out
}

#[test]
fn metrics_count_each_answer_once_by_transport_type_and_rcode() {
    use crate::support::{tcp_recv, tcp_send};
    let (_dir, config) = example_config("metrics", "[metrics]\nlisten = \"127.0.0.1:0\"");
    let launched =
        crate::support::process::launch(&[], &config, Stdio::null(), Duration::from_secs(20))
            .unwrap();
    let _server = crate::support::process::KillOnDrop(launched.child);
    let ready: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(config.with_extension("ready.json")).unwrap(),
    )
    .unwrap();
    let metrics: std::net::SocketAddr = ready["metrics"].as_str().unwrap().parse().unwrap();
    let dns = launched.dns[0];
    let before = scrape(metrics);
    for _ in 0..3 {
        udp_query(dns, &query("www.example.com.", RecordType::A, None)).unwrap();
    }
    for _ in 0..2 {
        udp_query(dns, &query("nope.example.com.", RecordType::AAAA, None)).unwrap();
    }
    udp_query(dns, &query("example.com.", RecordType::SOA, None)).unwrap();
    let mut tcp = std::net::TcpStream::connect(dns).unwrap();
    tcp_send(&mut tcp, &query("www.example.com.", RecordType::A, None));
    assert!(tcp_recv(&mut tcp).is_some());
    let after = scrape(metrics);
    let delta = |labels: &str| {
        series(&after, "xdpdns_queries_total", labels)
            - series(&before, "xdpdns_queries_total", labels)
    };
    let l = |transport: &str, t: &str, rcode: &str| {
        format!("path=\"fallback\",transport=\"{transport}\",type=\"{t}\",rcode=\"{rcode}\"")
    };
    assert_eq!(delta(&l("udp", "A", "NOERROR")), 3, "{after}");
    assert_eq!(delta(&l("udp", "AAAA", "NXDOMAIN")), 2, "{after}");
    assert_eq!(delta(&l("udp", "SOA", "NOERROR")), 1, "{after}");
    assert_eq!(delta(&l("tcp", "A", "NOERROR")), 1, "{after}");
    let total: u64 = after
        .lines()
        .filter(|l| l.starts_with("xdpdns_queries_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, 7, "every answer counted once:\n{after}");
    let zone = "zone=\"example.com.\"";
    assert!(series(&after, "xdpdns_zone_records", zone) > 0, "{after}");
    let soa = udp_query(dns, &query("example.com.", RecordType::SOA, None)).unwrap();
    let serial = match &soa.answers[0].data {
        hickory_proto::rr::RData::SOA(s) => u64::from(s.serial),
        other => panic!("{other:?}"),
    };
    assert_eq!(series(&after, "xdpdns_zone_serial", zone), serial);
    assert!(
        after.contains("xdpdns_udp_receive_drops_total 0"),
        "{after}"
    );
}

/// `xdpdns ctl CONFIG ARGS…` run as `as_user` (`setpriv` options) or
/// as root: (exit success, stdout, stderr).
fn ctl(config: &Path, as_user: &[&str], args: &[&str]) -> (bool, String, String) {
    let mut cmd = if as_user.is_empty() {
        Command::new(BIN)
    } else {
        let mut c = Command::new("setpriv");
        c.args(as_user).arg(BIN);
        c
    };
    let out = cmd
        .arg("ctl")
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ctl_json(config: &Path, args: &[&str]) -> serde_json::Value {
    let mut args = args.to_vec();
    args.push("--json");
    let (ok, out, err) = ctl(config, &[], &args);
    assert!(ok, "ctl {args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

const CTL_ZONE: &str = "$ORIGIN example.com.\n$TTL 300\n\
    @ SOA ns1 hostmaster 5 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\nwww A 192.0.2.80\n";

/// Every `xdpdns ctl` subcommand against a running server with a zone
/// file, a registry and a (silent) secondary, human and JSON output.
#[test]
fn ctl_answers_every_subcommand_from_the_running_server() {
    use crate::support::{http, Server};
    // A secondary that never answers: its propagation state is "not in sync".
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let dir = TempDir::new("ctl");
    let zone_file = dir.write("zone.db", CTL_ZONE);
    let config = dir.write(
        "xdpdns.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\n\
             [transfer]\ndata_dir = \"data\"\nnotify_retries = 1\nnotify_timeout_ms = 200\n\
             [control]\ngroup = \"nogroup\"\n\
             [[zone]]\norigin = \"example.com.\"\nfile = \"zone.db\"\nnotify = [\"{}\"]\n\
             [registry]\nlisten = \"127.0.0.1:0\"\ntoken = \"t0ken\"\ndata_dir = \"registry\"\n\
             require_opt_in = false\nns = [\"ns1.example.com.\"]\nhostmaster = \"hostmaster.example.com.\"\n\
             [[registry.zone]]\nname = \"sd.example.\"\nnetworks = [\"*\"]\n",
            silent.local_addr().unwrap()
        ),
    );
    let srv = Server::start_with_config(dir, config.clone());

    // status: text and JSON, and exact answer counts.
    let (ok, text, err) = ctl(&config, &[], &["status"]);
    assert!(ok, "{err}");
    assert!(
        text.contains("XDP: off (no [xdp] interfaces configured)"),
        "{text}"
    );
    assert!(text.contains("zones: 2"), "{text}");
    let before = ctl_json(&config, &["status"]);
    assert_eq!(before["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(before["pid"], srv.child.id());
    for _ in 0..3 {
        srv.udp("www.example.com.", RecordType::A);
    }
    srv.udp("nope.example.com.", RecordType::A);
    srv.tcp("www.example.com.", RecordType::A);
    let after = ctl_json(&config, &["status"]);
    let delta = |path: &str| {
        after["answers"]
            .pointer(path)
            .and_then(|v| v.as_u64())
            .unwrap_or(0)
            - before["answers"]
                .pointer(path)
                .and_then(|v| v.as_u64())
                .unwrap_or(0)
    };
    assert_eq!(delta("/fallback_udp"), 4, "{after}");
    assert_eq!(delta("/fallback_tcp"), 1, "{after}");
    assert_eq!(delta("/by_rcode/NXDOMAIN"), 1, "{after}");
    assert_eq!(after["kernel_share"], 0.0);
    // The answer table is compiled in the background after the start,
    // and says so once it holds the zones as served.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let table = loop {
        let status = ctl_json(&config, &["status"]);
        if status["answer_table"]["current"] == true || std::time::Instant::now() > deadline {
            break status["answer_table"].clone();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(table["current"], true, "{table}");
    assert!(table["entries"].as_u64().unwrap_or(0) > 0, "{table}");
    let (_, text, _) = ctl(&config, &[], &["status"]);
    assert!(text.contains("entries, current"), "{text}");

    // zones, then a reload of the file: a good one and a broken one.
    let (ok, text, _) = ctl(&config, &[], &["zones"]);
    assert!(ok);
    let row = text
        .lines()
        .find(|l| l.starts_with("example.com."))
        .unwrap();
    assert!(
        row.contains(" 5 ") && row.contains("file ") && row.contains("ok"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("sd.example.") && l.ends_with("registry")),
        "{text}"
    );
    std::fs::write(
        &zone_file,
        CTL_ZONE.replace(" 5 3600", " 6 3600") + "new A 192.0.2.66\n",
    )
    .unwrap();
    let (ok, text, err) = ctl(&config, &[], &["zone", "reload", "example.com."]);
    assert!(ok, "{err}");
    assert!(text.contains("reloaded: serial 6"), "{text}");
    assert!(!srv
        .udp("new.example.com.", RecordType::A)
        .answers
        .is_empty());
    std::fs::write(
        &zone_file,
        CTL_ZONE.replace(" 5 3600", " 7 3600") + "bad A 999.1.1.1\n",
    )
    .unwrap();
    let (ok, _, err) = ctl(&config, &[], &["zone", "reload", "example.com"]);
    assert!(!ok);
    assert!(
        err.contains("zone.db:7"),
        "the error names file and line: {err}"
    );
    let zones = ctl_json(&config, &["zones"]);
    let z = zones
        .as_array()
        .unwrap()
        .iter()
        .find(|z| z["origin"] == "example.com.")
        .unwrap();
    assert_eq!(z["serial"], 6, "the previous version keeps serving: {z}");
    assert_eq!(z["last_load"]["ok"], false, "{z}");
    assert!(
        z["last_load"]["detail"]
            .as_str()
            .unwrap()
            .contains("zone.db"),
        "{z}"
    );
    let (ok, _, err) = ctl(&config, &[], &["zone", "reload", "sd.example."]);
    assert!(!ok && err.contains("registry"), "{err}");

    // registry
    let (code, _) = http(
        "PUT",
        &format!("{}/v1/instances/web-1", srv.api()),
        Some("t0ken"),
        Some(r#"{"owner":"acme","addresses":["10.0.0.1"],"services":["web"],"lease_secs":60}"#),
    );
    assert_eq!(code, 200);
    let reg = ctl_json(&config, &["registry"]);
    assert_eq!(reg["instances"]["up"], 1, "{reg}");
    assert_eq!(reg["services"], 1, "{reg}");
    assert!(reg["journal_bytes"].as_u64().unwrap() > 0, "{reg}");
    let (ok, text, _) = ctl(&config, &[], &["registry"]);
    assert!(ok && text.contains("instances: 1 (1 up)"), "{text}");

    // secondaries: the silent one is not in sync, and ctl says so (exit 1).
    let peer = silent.local_addr().unwrap().to_string();
    assert!(crate::support::eventually(Duration::from_secs(10), || {
        let (_, out, _) = ctl(&config, &[], &["secondaries", "--json"]);
        out.contains(&peer) && out.contains("\"failures\":1")
    }));
    let (ok, text, err) = ctl(&config, &[], &["secondaries"]);
    assert!(!ok && err.contains("not in sync"), "{err}");
    let row = text.lines().find(|l| l.contains(&peer)).unwrap();
    assert!(
        row.starts_with("example.com.") && row.contains(" NO "),
        "{text}"
    );

    // top: rates while queries flow.
    let addr = srv.addr;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let load = std::thread::spawn(move || {
        let q = query("www.example.com.", RecordType::A, None);
        let mut n = 0;
        while !flag.load(std::sync::atomic::Ordering::Relaxed) && n < 20_000 {
            udp_query(addr, &q);
            n += 1;
        }
    });
    let (ok, text, err) = ctl(
        &config,
        &[],
        &["top", "--count", "2", "--interval", "0.5", "--json"],
    );
    let (_, human, _) = ctl(&config, &[], &["top", "--count", "1", "--interval", "0.5"]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    load.join().unwrap();
    assert!(ok, "{err}");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines
            .iter()
            .all(|r| r["fallback_udp"].as_f64().unwrap() > 0.0),
        "{text}"
    );
    assert!(
        human.contains("answers/s") && human.contains("NOERROR"),
        "{human}"
    );

    // Access: a member of control.group may ask; another user may not,
    // neither through the file's mode nor past it (the peer check).
    let member = ["--reuid=nobody", "--regid=nogroup", "--clear-groups"];
    let outsider = ["--reuid=nobody", "--regid=daemon", "--clear-groups"];
    let (ok, text, err) = ctl(&config, &member, &["status"]);
    assert!(ok && text.contains("xdpdns"), "{err}");
    let (ok, _, err) = ctl(&config, &outsider, &["status"]);
    assert!(!ok && err.contains("Permission denied"), "{err}");
    let socket = srv.dir.0.join("data/xdpdns.sock");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (ok, _, err) = ctl(&config, &outsider, &["status"]);
    assert!(!ok && err.contains("permission denied: uid 65534"), "{err}");
}

/// Purges the package (and the test's namespace) however the test ends.
struct Installed(&'static str);

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", self.0]).output();
        let _ = Command::new("dpkg").args(["--purge", "xdpdns"]).output();
    }
}

/// The package built from this build's binary installs (`dpkg -i`) the
/// binary, unit, configuration, man pages and system user; the unit verifies (or
/// the service runs, where systemd does); the packaged configuration
/// serves as the `xdpdns` user with CAP_NET_BIND_SERVICE alone (no XDP
/// configured); `dpkg --purge` removes it.
#[test]
fn the_debian_package_installs_and_its_configuration_serves() {
    let out_dir = TempDir::new("deb");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../dist/debian/build-deb.sh");
    // The pages `cargo xtask docs` generates (`cargo xtask test` runs it
    // first); written here too, so the test stands on its own.
    let man_dir = out_dir.0.join("man");
    let generated = Command::new(env!("CARGO"))
        .args(["xtask", "man-pages"])
        .arg(&man_dir)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .unwrap();
    assert!(
        generated.status.success(),
        "{}",
        String::from_utf8_lossy(&generated.stderr)
    );
    let built = Command::new("sh")
        .arg(script)
        .arg(BIN)
        .arg(&out_dir.0)
        .arg(&man_dir)
        .env("DEB_COMPRESSION", "-Znone")
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let deb = String::from_utf8(built.stdout).unwrap().trim().to_string();
    let ns = "xdpdns-deb-test";
    let _installed = Installed(ns);
    let install = Command::new("dpkg").args(["-i", &deb]).output().unwrap();
    assert!(
        install.status.success(),
        "{}{}",
        String::from_utf8_lossy(&install.stdout),
        String::from_utf8_lossy(&install.stderr)
    );
    let passwd = Command::new("getent")
        .args(["passwd", "xdpdns"])
        .output()
        .unwrap();
    let passwd = String::from_utf8(passwd.stdout).unwrap();
    let uid: u32 = passwd.split(':').nth(2).unwrap().parse().unwrap();
    assert!(uid > 0 && uid < 1000, "a system user: {passwd}");
    let version = Command::new("/usr/bin/xdpdns")
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&version.stdout).contains(env!("CARGO_PKG_VERSION")));
    // `man xdpdns`, `man xdpdns-serve` and `man xdpdns.toml` find the
    // installed pages and render them.
    for (page, section, says) in [
        ("xdpdns", "8", "check-config"),
        ("xdpdns-serve", "8", "ready-file"),
        ("xdpdns.toml", "5", "udp_payload"),
    ] {
        let shown = Command::new("man")
            .args([section, page])
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "200")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&shown.stdout).replace('\u{2010}', "-");
        assert!(
            shown.status.success() && text.contains(says),
            "man {section} {page}: {text}"
        );
    }
    let unit = "/lib/systemd/system/xdpdns.service";
    if Path::new("/run/systemd/system").exists() {
        let active = Command::new("systemctl")
            .args(["is-active", "xdpdns"])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&active.stdout).trim(), "active");
    } else {
        let verify = Command::new("systemd-analyze")
            .args(["verify", "--man=no", unit])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&verify.stderr);
        assert!(
            verify.status.success() && !stderr.contains("xdpdns.service"),
            "{stderr}"
        );
    }
    let check = Command::new("/usr/bin/xdpdns")
        .args(["check-config", "/etc/xdpdns/xdpdns.toml"])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );

    // The packaged configuration, as the unit starts it, in a namespace
    // of its own (port 53 on loopback there).
    let _ = Command::new("ip").args(["netns", "del", ns]).output();
    assert!(Command::new("ip")
        .args(["netns", "add", ns])
        .status()
        .unwrap()
        .success());
    assert!(Command::new("ip")
        .args(["-n", ns, "link", "set", "lo", "up"])
        .status()
        .unwrap()
        .success());
    let ready = out_dir.0.join("ready.json");
    let child = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "/usr/bin/xdpdns",
            "serve",
            "--config",
            "/etc/xdpdns/xdpdns.toml",
        ])
        .arg("--ready-file")
        .arg(&ready)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = crate::support::process::KillOnDrop(child);
    let pid = server.0.id();
    let dropped = crate::support::eventually(Duration::from_secs(20), || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .is_ok_and(|s| s.contains(&format!("Uid:\t{uid}\t{uid}\t{uid}\t{uid}")))
    });
    assert!(dropped, "not running as xdpdns");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let cap = |f: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(f))
            .unwrap()
            .trim()
            .to_string()
    };
    assert_eq!(
        cap("CapEff:"),
        format!("{:016x}", 1u64 << 10),
        "CAP_NET_BIND_SERVICE only"
    );
    let dig = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "dig",
            "@127.0.0.1",
            "+norec",
            "+time=2",
            "www.example.com",
            "A",
        ])
        .output()
        .unwrap();
    let answer = String::from_utf8_lossy(&dig.stdout);
    assert!(
        answer.contains("192.0.2.80") && answer.contains("flags: qr aa"),
        "{answer}"
    );
    let (ok, text, err) = ctl(Path::new("/etc/xdpdns/xdpdns.toml"), &[], &["status"]);
    assert!(ok && text.contains("zones: 1"), "{text}{err}");
    drop(server);
    let purge = Command::new("dpkg")
        .args(["--purge", "xdpdns"])
        .output()
        .unwrap();
    assert!(purge.status.success());
    assert!(!Path::new("/usr/bin/xdpdns").exists());
    assert!(!Path::new("/var/lib/xdpdns").exists());
}
