//! The one way tests and benchmarks start the real binary: `xdpdns serve
//! --ready-file`, optionally under a command prefix (`ip netns exec NS`),
//! then wait (bounded) for the ready file, which names the bound
//! addresses. An early exit fails at once with the process's status.
//! `XDPDNS_BIN` overrides the binary (to compare two builds).

use std::collections::HashSet;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_xdpdns");

/// A started server and what its ready file said.
pub struct Launched {
    pub child: Child,
    /// The DNS addresses bound (UDP and TCP), in `server.listen` order.
    pub dns: Vec<SocketAddr>,
    /// The registry API address, when the registry is configured.
    pub api: Option<SocketAddr>,
}

/// Starts `xdpdns serve --config CONFIG` under `prefix` with stderr going
/// to `stderr`, and waits up to `timeout` for it to be ready. The ready
/// file is written next to the config.
pub fn launch(
    prefix: &[&str],
    config: &Path,
    stderr: Stdio,
    timeout: Duration,
) -> Result<Launched, String> {
    let ready = config.with_extension("ready.json");
    let _ = std::fs::remove_file(&ready);
    // XDPDNS_BIN runs another build (benchmarks compare two side by side).
    let bin = std::env::var("XDPDNS_BIN").unwrap_or_else(|_| BIN.to_string());
    let (program, args): (&str, Vec<&str>) = match prefix.split_first() {
        Some((p, rest)) => (p, rest.iter().copied().chain([bin.as_str()]).collect()),
        None => (bin.as_str(), Vec::new()),
    };
    let mut child = Command::new(program)
        .args(args)
        .args(["serve", "--config"])
        .arg(config)
        .arg("--ready-file")
        .arg(&ready)
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(text) = std::fs::read_to_string(&ready) {
            let info: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| format!("ready file: {e}"))?;
            let addr = |v: &serde_json::Value| v.as_str().and_then(|s| s.parse().ok());
            let dns = info["dns"]
                .as_array()
                .map(|a| a.iter().filter_map(addr).collect())
                .unwrap_or_default();
            return Ok(Launched {
                child,
                dns,
                api: addr(&info["api"]),
            });
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("xdpdns exited before it was ready ({status})"));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("xdpdns was not ready within {timeout:?}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A server process killed (and reaped) when dropped: for benchmarks,
/// which keep no log.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Where a benchmark's server logs: shown with `XDPDNS_BENCH_LOG` set.
pub fn bench_stderr() -> Stdio {
    if std::env::var_os("XDPDNS_BENCH_LOG").is_some() {
        Stdio::inherit()
    } else {
        Stdio::null()
    }
}

/// A loopback port free for both UDP and TCP, outside the ephemeral range
/// (so no client socket grabs it before the server binds it), never handed
/// out twice in this process.
pub fn free_port() -> u16 {
    static USED: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    let mut used = USED.lock().unwrap();
    let used = used.get_or_insert_with(HashSet::new);
    let start = 20_000 + (std::process::id() % 500) as u16 * 20;
    for i in 0..12_000u16 {
        let port = 20_000 + (start - 20_000 + i) % 12_000;
        if used.contains(&port) {
            continue;
        }
        let udp = UdpSocket::bind(("127.0.0.1", port));
        let tcp = TcpListener::bind(("127.0.0.1", port));
        if udp.is_ok() && tcp.is_ok() {
            used.insert(port);
            return port;
        }
    }
    panic!("no free loopback port");
}

/// The proportional set size of process `pid`, in KiB (0 if gone).
pub fn pss_kb(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with("Pss:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
