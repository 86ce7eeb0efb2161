//! Starting DNS servers beside each other and measuring them, for the
//! start-up benches: time from spawn until a name is answered, memory
//! (PSS over the process tree), NSD and Knot configurations, and the
//! XDP rows in a network namespace of their own.

use std::io::Write;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::process;

/// How long a server serves before its memory is read (the hot table is
/// compiled in the background after the first answer) and it is stopped
/// (its zone images written by then).
pub fn settle() -> Duration {
    match std::env::args().any(|a| a == "--bench") {
        true => Duration::from_secs(4),
        false => Duration::from_millis(1500),
    }
}
/// Longest a start may take before the bench gives up.
pub const START_LIMIT: Duration = Duration::from_secs(120);

pub struct Row {
    pub what: String,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub pss_mb: u64,
    pub rss_mb: u64,
}

/// Starts a server `runs` times with `start` (after removing `clear`,
/// untimed), timing each start until `last` is answered on `port`.
pub fn measure(
    runs: usize,
    what: &str,
    last: &str,
    port: u16,
    clear: Option<&Path>,
    start: impl FnMut() -> Child,
) -> Row {
    measure_until(runs, what, last, port, clear, None, start)
}

/// [`measure`] for xdpdns with `config`; memory is read once its answer
/// table is current ([`wait_table_current`]).
pub fn measure_xdpdns(
    runs: usize,
    what: &str,
    last: &str,
    port: u16,
    clear: Option<&Path>,
    config: &Path,
) -> Row {
    measure_until(runs, what, last, port, clear, Some(config), || {
        start_xdpdns(config)
    })
}

fn measure_until(
    runs: usize,
    what: &str,
    last: &str,
    port: u16,
    clear: Option<&Path>,
    table_of: Option<&Path>,
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
        if let Some(config) = table_of {
            wait_table_current(config);
        }
        std::thread::sleep(settle());
        mem.push(steady_memory(child.0.id()));
        stop(child);
    }
    row(what, times, mem)
}

/// Waits until the xdpdns run with `config` says (`ctl status`) its
/// answer table is current, and returns that status. Until then a
/// compile runs, whose working memory is not what the server keeps:
/// at 10M records it held a plateau for 15 s that the steady reading
/// took for the server's own.
pub fn wait_table_current(config: &Path) -> serde_json::Value {
    let bin = std::env::var("XDPDNS_BIN").unwrap_or_else(|_| process::BIN.to_string());
    let began = Instant::now();
    loop {
        let status = Command::new(&bin)
            .args(["ctl", "--json", "--config"])
            .arg(config)
            .arg("status")
            .stderr(Stdio::null())
            .output()
            .ok()
            .and_then(|out| serde_json::from_slice::<serde_json::Value>(&out.stdout).ok());
        if let Some(status) = status.filter(|s| s["answer_table"]["current"] == true) {
            return status;
        }
        assert!(
            began.elapsed() < START_LIMIT,
            "the answer table was not current within {START_LIMIT:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The medians of a case's runs (times in seconds, memory in KiB), printed.
pub fn row(what: &str, mut times: Vec<f64>, mut mem: Vec<(u64, u64)>) -> Row {
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
        "{what}: {:.3} s (runs {:?}), PSS {} MB, largest RSS {} MB",
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
pub fn wait_answer(
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
pub fn memory(pid: u32) -> (u64, u64) {
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

/// [`memory`] once it holds still: a large zone's hot table and image
/// are still being built [`settle`] after its first answers, and what
/// they use meanwhile is not what the server keeps. Read every second
/// until four readings in a row are within 1 % of each other (two
/// minutes at most).
pub fn steady_memory(pid: u32) -> (u64, u64) {
    let mut last = memory(pid);
    let mut still = 0;
    let began = Instant::now();
    while still < 3 && began.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_secs(1));
        let now = memory(pid);
        match now.0.abs_diff(last.0) * 100 <= last.0 {
            true => still += 1,
            false => still = 0,
        }
        last = now;
    }
    last
}

/// SIGTERM, then a bounded wait (images are written by then: the server
/// served for [`settle`]).
pub fn stop(mut child: process::KillOnDrop) {
    let _ = Command::new("kill").arg(child.0.id().to_string()).status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.0.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn start_xdpdns(config: &Path) -> Child {
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

pub fn spawn(program: &str, args: &[&str]) -> Child {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(process::bench_stderr())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"))
}

pub fn which(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub fn xdpdns_config(
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

pub fn nsd_config(dir: &Path, origin: &str, zone: &Path, port: u16, provide_xfr: bool) -> PathBuf {
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
             \x20   verbosity: 0\nremote-control:\n    control-enable: no\nzone:\n    name: {origin}\n    zonefile: \"{}\"\n{xfr}",
            zone.display(),
            d = d.display()
        ),
    )
    .unwrap();
    path
}

/// The file zone served with XDP (generic mode) on a veth pair inside a
/// network namespace of its own: start -> ready, which with `[xdp]`
/// includes compiling and installing the kernel table. Root only.
pub fn xdp_case(dir: &Path, origin: &str, zone: &Path, runs: usize, capacity: usize) -> Vec<Row> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 || !which("ip") {
        println!("not root; XDP rows skipped");
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
                     [xdp]\ninterfaces = [\"xs0\"]\nmode = \"generic\"\ncapacity = {capacity}\n{pin}\
                     [[zone]]\norigin = \"{origin}\"\nfile = \"{}\"\n[transfer]\ndata_dir = \"{}\"\n",
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
                let status = wait_table_current(&cfg);
                println!(
                    "{what}: kernel table {} entries, {:.1} MiB by the kernel's accounting",
                    status["xdp"]["entries"],
                    status["xdp"]["bytes"].as_f64().unwrap_or(0.0) / f64::from(1 << 20)
                );
                std::thread::sleep(settle());
                // `ip netns exec` execs the server: the child is it.
                mem.push(steady_memory(child.0.id()));
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
        println!("cannot create a network namespace or mount a bpf filesystem; XDP rows skipped");
    }
    if mounted {
        // Unmounting unpins everything: the program is detached, the maps freed.
        let _ = Command::new("umount").arg(&bpffs).status();
    }
    let _ = ip(&format!("netns del {ns}"));
    rows
}

/// Writes the services `range` of a service-discovery zone (each with
/// three A and three AAAA, each of its three instances with an A and an
/// AAAA, an SRV set: 15 records) among `tenants` tenants; returns the
/// last instance's name, relative to the origin.
pub fn write_service(f: &mut impl Write, range: std::ops::Range<usize>, tenants: usize) -> String {
    let mut last = String::new();
    for s in range {
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
            last = inst;
        }
    }
    last
}
