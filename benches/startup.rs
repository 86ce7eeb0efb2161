//! Start-up: time from process start to the zone's last name answered
//! over UDP, and the memory of the serving process, for
//!
//! * a file zone of about 1M records (service discovery shaped: each
//!   service name with three A and three AAAA, each instance name with an
//!   A and an AAAA, an SRV set per service), beside NSD loading the same
//!   file in the same run;
//! * the same zone as a secondary of NSD (AXFR in);
//! * a registry of 100k instances (recovered from its own journal);
//!
//! each cold (no zone image: `transfer.data_dir` empty of images) and warm
//! (the images the previous run wrote). Memory is the proportional set
//! size (PSS) summed over the server's processes (NSD forks), read once
//! the server has served for a while (its hot table built), with the
//! largest single-process RSS beside it.
//!
//! `cargo bench --bench startup`; under `cargo test` it runs each case
//! once on small zones as a smoke test. `XDPDNS_STARTUP_RUNS` sets the
//! runs per case (default 3, medians reported).

use std::io::Write;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../tests/support/process.rs"]
#[allow(dead_code)]
mod process;

const ORIGIN: &str = "bench.test.";
/// How long a server serves before its memory is read (the hot table is
/// compiled in the background after the first answer) and it is stopped
/// (its zone images written by then).
fn settle() -> Duration {
    match std::env::args().any(|a| a == "--bench") {
        true => Duration::from_secs(4),
        false => Duration::from_millis(1500),
    }
}
/// Longest a start may take before the bench gives up.
const START_LIMIT: Duration = Duration::from_secs(120);

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (services, instances) = if full { (66_667, 100_000) } else { (300, 200) };
    let runs: usize = match full {
        true => std::env::var("XDPDNS_STARTUP_RUNS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3),
        false => 1,
    };
    let dir = std::env::temp_dir().join(format!("xdpdns-bench-startup-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let zone = dir.join("bench.zone");
    let (records, last) = write_zone(&zone, services);
    println!(
        "startup: file zone of {records} records ({} bytes), last name {last}; {runs} runs per case",
        std::fs::metadata(&zone).unwrap().len()
    );
    let mut rows = Vec::new();

    // NSD, the reference, in the same run.
    if which("nsd") {
        let port = process::free_port();
        let cfg = nsd_config(&dir, &zone, port, false);
        rows.push(measure(runs, "NSD, file zone", &last, port, None, || {
            spawn("nsd", &["-d", "-c", cfg.to_str().unwrap()])
        }));
    } else {
        println!("startup: nsd not installed; NSD rows skipped (cargo xtask deps installs it)");
    }

    // xdpdns, file zone: cold (images removed before each run), warm.
    let data = dir.join("file-data");
    let port = process::free_port();
    let cfg = xdpdns_config(
        &dir,
        "file",
        port,
        &format!(
            "[[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\n",
            zone.display()
        ),
        &data,
        "",
    );
    rows.push(measure(
        runs,
        "xdpdns, file zone, cold",
        &last,
        port,
        Some(&data),
        || start_xdpdns(&cfg),
    ));
    rows.push(measure(
        runs,
        "xdpdns, file zone, warm (image)",
        &last,
        port,
        None,
        || start_xdpdns(&cfg),
    ));

    // xdpdns as a secondary of NSD: cold is the transfer in, warm the image.
    if which("nsd") {
        let primary_port = process::free_port();
        let pcfg = nsd_config(&dir, &zone, primary_port, true);
        let primary = process::KillOnDrop(spawn("nsd", &["-d", "-c", pcfg.to_str().unwrap()]));
        wait_answer(primary_port, &last, START_LIMIT, None).expect("the primary serves");
        let data = dir.join("secondary-data");
        let port = process::free_port();
        let zones = format!(
            "[[zone]]\norigin = \"{ORIGIN}\"\nprimaries = [\"127.0.0.1:{primary_port}\"]\n"
        );
        let extra = "max_transfer_in_records = 5000000\n";
        let cfg = xdpdns_config(&dir, "secondary", port, &zones, &data, extra);
        let what = "xdpdns, secondary zone, cold (AXFR in)";
        rows.push(measure(runs, what, &last, port, Some(&data), || {
            start_xdpdns(&cfg)
        }));
        let what = "xdpdns, secondary zone, warm (image)";
        rows.push(measure(runs, what, &last, port, None, || {
            start_xdpdns(&cfg)
        }));
        drop(primary);
    }

    // With the XDP fast path: start -> ready (the ready file is written
    // once the kernel table is installed and the program attached).
    rows.extend(xdp_case(&dir, &zone, runs));

    // Registry: instances registered once, then restarts.
    let reg = registry_case(&dir, instances, runs);
    rows.extend(reg);

    println!();
    println!(
        "| case | start -> last name answered (median, min-max) | PSS (median) | largest RSS |"
    );
    println!("| --- | --- | --- | --- |");
    for r in &rows {
        let mb = |v: u64| match v {
            0 => "-".to_string(),
            v => format!("{v} MB"),
        };
        println!(
            "| {} | {:.3} s ({:.3}-{:.3}) | {} | {} |",
            r.what,
            r.median,
            r.min,
            r.max,
            mb(r.pss_mb),
            mb(r.rss_mb)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

struct Row {
    what: String,
    median: f64,
    min: f64,
    max: f64,
    pss_mb: u64,
    rss_mb: u64,
}

/// Starts a server `runs` times with `start` (after removing `clear`,
/// untimed), timing each start until `last` is answered on `port`.
fn measure(
    runs: usize,
    what: &str,
    last: &str,
    port: u16,
    clear: Option<&Path>,
    mut start: impl FnMut() -> Child,
) -> Row {
    let mut times = Vec::new();
    let mut mem = Vec::new();
    for _ in 0..runs {
        if let Some(dir) = clear {
            let _ = std::fs::remove_dir_all(dir);
        }
        let began = Instant::now();
        let mut child = process::KillOnDrop(start());
        wait_answer(port, last, START_LIMIT, Some(&mut child.0))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        times.push(began.elapsed().as_secs_f64());
        std::thread::sleep(settle());
        mem.push(memory(child.0.id()));
        stop(child);
    }
    row(what, times, mem)
}

/// The medians of a case's runs (times in seconds, memory in KiB), printed.
fn row(what: &str, mut times: Vec<f64>, mut mem: Vec<(u64, u64)>) -> Row {
    times.sort_by(f64::total_cmp);
    mem.sort();
    let row = Row {
        what: what.into(),
        median: times[times.len() / 2],
        min: times[0],
        max: times[times.len() - 1],
        pss_mb: mem[mem.len() / 2].0 / 1024,
        rss_mb: mem[mem.len() / 2].1 / 1024,
    };
    println!(
        "startup: {what}: {:.3} s (runs {:?}), PSS {} MB, largest RSS {} MB",
        row.median,
        times.iter().map(|t| format!("{t:.3}")).collect::<Vec<_>>(),
        row.pss_mb,
        row.rss_mb
    );
    row
}

/// Polls `port` with an A query for `name` until it is answered with
/// records; the time from the call.
/// Queries `name` on `port` until it is answered, `limit` passes or
/// `server` (when given) exits.
fn wait_answer(
    port: u16,
    name: &str,
    limit: Duration,
    mut server: Option<&mut Child>,
) -> Result<Duration, String> {
    let began = Instant::now();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(2)))
        .unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut buf = [0u8; 1500];
    let mut id: u16 = 0;
    while began.elapsed() < limit {
        if let Some(status) = server.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
            return Err(format!(
                "the server exited ({status}) before {name} was answered (XDPDNS_BENCH_LOG=1 shows its log)"
            ));
        }
        id = id.wrapping_add(1);
        let _ = sock.send_to(&query(id, name), addr);
        while let Ok((len, _)) = sock.recv_from(&mut buf) {
            let r = &buf[..len];
            let answered = len >= 12
                && r[..2] == id.to_be_bytes()
                && r[3] & 0x0f == 0
                && u16::from_be_bytes([r[6], r[7]]) > 0;
            if answered {
                return Ok(began.elapsed());
            }
        }
    }
    Err(format!("{name} not answered within {limit:?}"))
}

fn query(id: u16, name: &str) -> Vec<u8> {
    let mut q = Vec::with_capacity(64);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// (PSS, largest RSS) in KiB over `pid` and its descendants.
fn memory(pid: u32) -> (u64, u64) {
    let mut pids = vec![pid];
    let mut i = 0;
    while i < pids.len() {
        let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", pids[i]))
            .unwrap_or_default();
        pids.extend(
            children
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
        i += 1;
    }
    let (mut pss, mut rss) = (0, 0);
    for p in pids {
        let text = std::fs::read_to_string(format!("/proc/{p}/smaps_rollup")).unwrap_or_default();
        let field = |name: &str| {
            text.lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        pss += field("Pss:");
        rss = rss.max(field("Rss:"));
    }
    (pss, rss)
}

/// SIGTERM, then a bounded wait (images are written by then: the server
/// served for [`settle`]).
fn stop(mut child: process::KillOnDrop) {
    let _ = Command::new("kill").arg(child.0.id().to_string()).status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.0.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn start_xdpdns(config: &Path) -> Child {
    let bin = std::env::var("XDPDNS_BIN").unwrap_or_else(|_| process::BIN.to_string());
    Command::new(bin)
        .args(["serve", "--config"])
        .arg(config)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(process::bench_stderr())
        .spawn()
        .expect("start xdpdns")
}

fn spawn(program: &str, args: &[&str]) -> Child {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(process::bench_stderr())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"))
}

fn which(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn xdpdns_config(
    dir: &Path,
    tag: &str,
    port: u16,
    zones: &str,
    data: &Path,
    transfer: &str,
) -> PathBuf {
    let path = dir.join(format!("{tag}.toml"));
    std::fs::write(
        &path,
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\n[log]\nlevel = \"warn\"\n[control]\nsocket = \"{}\"\n{zones}\
             [transfer]\ndata_dir = \"{}\"\n{transfer}",
            dir.join(format!("{tag}.sock")).display(),
            data.display()
        ),
    )
    .unwrap();
    path
}

fn nsd_config(dir: &Path, zone: &Path, port: u16, provide_xfr: bool) -> PathBuf {
    let d = dir.join(format!("nsd-{port}"));
    std::fs::create_dir_all(&d).unwrap();
    let path = d.join("nsd.conf");
    let xfr = if provide_xfr {
        "    provide-xfr: 127.0.0.1 NOKEY\n"
    } else {
        ""
    };
    std::fs::write(
        &path,
        format!(
            "server:\n    ip-address: 127.0.0.1@{port}\n    database: \"\"\n    zonelistfile: \"{d}/zl\"\n\
             \x20   xfrdfile: \"{d}/xfrd\"\n    pidfile: \"{d}/nsd.pid\"\n    server-count: 1\n    username: \"\"\n\
             \x20   verbosity: 0\nremote-control:\n    control-enable: no\nzone:\n    name: {ORIGIN}\n    zonefile: \"{}\"\n{xfr}",
            zone.display(),
            d = d.display()
        ),
    )
    .unwrap();
    path
}

/// A service-discovery shaped zone of `services` services (15 records
/// each); returns the record count and the last instance name.
fn write_zone(path: &Path, services: usize) -> (usize, String) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(f, "$ORIGIN {ORIGIN}\n$TTL 60\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\nns1 A 10.77.0.1").unwrap();
    let tenants = (services / 50).max(1);
    let mut records = 3;
    let mut last = String::new();
    for s in 0..services {
        let tenant = format!("u{}", s % tenants);
        let svc = format!("svc{s}.svc.{tenant}");
        for i in 0..3 {
            let n = s * 3 + i;
            let v4 = format!("10.{}.{}.{}", (n >> 16) & 255, (n >> 8) & 255, n & 255);
            let v6 = format!("2001:db8::{:x}:{:x}", n >> 16, n & 0xffff);
            let inst = format!("i{n}.inst.{tenant}");
            writeln!(
                f,
                "{svc} A {v4}\n{svc} AAAA {v6}\n{inst} A {v4}\n{inst} AAAA {v6}"
            )
            .unwrap();
            writeln!(f, "_http._tcp.{svc} SRV 0 10 {} {inst}", 8000 + i).unwrap();
            records += 5;
            last = format!("{inst}.{ORIGIN}");
        }
    }
    (records, last)
}

/// The file zone served with XDP (generic mode) on a veth pair inside a
/// network namespace of its own: start -> ready, which with `[xdp]`
/// includes compiling and installing the kernel table. Root only.
fn xdp_case(dir: &Path, zone: &Path, runs: usize) -> Vec<Row> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 || !which("ip") {
        println!("startup: not root; XDP rows skipped");
        return Vec::new();
    }
    let ns = format!("xdpdns-startup-{}", std::process::id());
    let ip = |args: &str| {
        Command::new("sh")
            .args(["-c", &format!("ip {args}")])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let _ = ip(&format!("netns del {ns}"));
    let made = ip(&format!("netns add {ns}"))
        && ip(&format!("-n {ns} link add xs0 type veth peer name xs1"))
        && ip(&format!("-n {ns} addr add 10.99.0.1/24 dev xs0"))
        && ip(&format!("-n {ns} link set dev xs0 up"))
        && ip(&format!("-n {ns} link set dev xs1 up"))
        && ip(&format!("-n {ns} link set dev lo up"));
    // The pins live on a bpf filesystem mounted for the run (the server's
    // `ip netns exec` sees the mount) and go with it.
    let bpffs = dir.join("bpffs");
    let _ = std::fs::create_dir_all(&bpffs);
    let mounted = Command::new("mount")
        .args(["-t", "bpf", "bpf"])
        .arg(&bpffs)
        .status()
        .is_ok_and(|s| s.success());
    let pins = bpffs.join("xdpdns");
    let mut rows = Vec::new();
    if made && mounted {
        let data = dir.join("xdp-data");
        let ready = dir.join("xdp.ready");
        let config = |pinned: bool| {
            let cfg = dir.join(format!("xdp-{pinned}.toml"));
            let pin = match pinned {
                true => format!("pin_dir = \"{}\"\n", pins.display()),
                false => String::new(),
            };
            std::fs::write(
                &cfg,
                format!(
                    "[server]\nlisten = [\"10.99.0.1:53\"]\n[log]\nlevel = \"warn\"\n[control]\nsocket = \"{}\"\n\
                     [xdp]\ninterfaces = [\"xs0\"]\nmode = \"generic\"\ncapacity = 1048576\n{pin}\
                     [[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\n[transfer]\ndata_dir = \"{}\"\n",
                    dir.join("xdp.sock").display(),
                    zone.display(),
                    data.display()
                ),
            )
            .unwrap();
            cfg
        };
        let bin = std::env::var("XDPDNS_BIN").unwrap_or_else(|_| process::BIN.to_string());
        let clear_pins = || {
            for e in std::fs::read_dir(&pins).into_iter().flatten().flatten() {
                let _ = std::fs::remove_file(e.path());
            }
        };
        let case = |what: &str, clear: bool, pinned: bool| {
            let cfg = config(pinned);
            let mut times = Vec::new();
            let mut mem = Vec::new();
            for _ in 0..runs {
                if clear {
                    let _ = std::fs::remove_dir_all(&data);
                    clear_pins();
                }
                let _ = std::fs::remove_file(&ready);
                let began = Instant::now();
                let child = process::KillOnDrop(
                    Command::new("ip")
                        .args(["netns", "exec", &ns, &bin, "serve", "--config"])
                        .arg(&cfg)
                        .arg("--ready-file")
                        .arg(&ready)
                        .stdout(Stdio::null())
                        .stderr(process::bench_stderr())
                        .spawn()
                        .expect("start xdpdns in the namespace"),
                );
                while !ready.exists() {
                    assert!(began.elapsed() < START_LIMIT, "{what}: never ready");
                    std::thread::sleep(Duration::from_millis(1));
                }
                times.push(began.elapsed().as_secs_f64());
                std::thread::sleep(settle());
                // `ip netns exec` execs the server: the child is it.
                mem.push(memory(child.0.id()));
                stop(child);
            }
            row(what, times, mem)
        };
        rows.push(case(
            "xdpdns + XDP, file zone, cold: start -> ready (kernel table installed)",
            true,
            true,
        ));
        rows.push(case(
            "xdpdns + XDP, file zone, warm, pinned table adopted: start -> ready",
            false,
            true,
        ));
        clear_pins();
        rows.push(case(
            "xdpdns + XDP, file zone, warm, not pinned: start -> ready (kernel table installed)",
            false,
            false,
        ));
    } else {
        println!("startup: cannot create a network namespace or mount a bpf filesystem; XDP rows skipped");
    }
    if mounted {
        // Unmounting unpins everything: the program is detached, the maps freed.
        let _ = Command::new("umount").arg(&bpffs).status();
    }
    let _ = ip(&format!("netns del {ns}"));
    rows
}

/// The registry case: `instances` registered through the API once, then
/// restarts recovering them from the registry's journal (cold: no image)
/// or from the zone image (warm).
fn registry_case(dir: &Path, instances: usize, runs: usize) -> Vec<Row> {
    let data = dir.join("registry-data");
    let images = data.join("images");
    let port = process::free_port();
    let api_port = process::free_port();
    let cfg = dir.join("registry.toml");
    std::fs::write(
        &cfg,
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\n[log]\nlevel = \"warn\"\n[control]\nsocket = \"{}\"\n\
             [transfer]\ndata_dir = \"{}\"\n\
             [registry]\nlisten = \"127.0.0.1:{api_port}\"\ntoken = \"t\"\ndata_dir = \"{}\"\nrequire_opt_in = false\n\
             ns = [\"ns1.example.com.\"]\nhostmaster = \"h.example.com.\"\n\
             [[registry.zone]]\nname = \"sd.example.\"\nnetworks = [\"*\"]\n",
            dir.join("registry.sock").display(),
            data.display(),
            dir.join("registry-journal").display()
        ),
    )
    .unwrap();
    let last = format!("r{}.inst.acme.sd.example.", instances - 1);
    {
        let child = process::KillOnDrop(start_xdpdns(&cfg));
        wait_port(api_port);
        let began = Instant::now();
        register(api_port, instances);
        wait_answer(port, &last, START_LIMIT, None).expect("the last registration is answered");
        println!(
            "startup: registered {instances} instances in {:.1} s",
            began.elapsed().as_secs_f64()
        );
        std::thread::sleep(settle());
        stop(child);
    }
    let what = format!("xdpdns, registry of {instances} instances");
    vec![
        measure(
            runs,
            &format!("{what}, cold (journal replay)"),
            &last,
            port,
            Some(&images),
            || start_xdpdns(&cfg),
        ),
        measure(
            runs,
            &format!("{what}, warm (image)"),
            &last,
            port,
            None,
            || start_xdpdns(&cfg),
        ),
    ]
}

fn wait_port(port: u16) {
    let deadline = Instant::now() + START_LIMIT;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the registry API never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Registers `n` instances from 16 writers (the journal commits their
/// writes together).
fn register(port: u16, n: usize) {
    let writers = 16.min(n);
    std::thread::scope(|s| {
        for w in 0..writers {
            s.spawn(move || {
                let http = ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build();
                for i in (w..n).step_by(writers) {
                    http.put(&format!("http://127.0.0.1:{port}/v1/instances/r{i}"))
                        .set("Authorization", "Bearer t")
                        .send_string(&format!(
                            r#"{{"owner":"acme","addresses":["10.{}.{}.{}"],"services":["svc{}"],"lease_secs":86400}}"#,
                            i >> 16 & 255,
                            i >> 8 & 255,
                            i & 255,
                            i % 1000
                        ))
                        .expect("registration");
                }
            });
        }
    });
}
