//! Test support: start the real `xdpdns` binary on a loopback ephemeral
//! port with a given zone and config, and talk DNS to it.
#![allow(dead_code)]

pub mod browser;
pub mod frames;
pub mod mutate;
pub mod peers;
pub mod process;
pub mod signing;
pub mod zookeeper;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hickory_proto::op::{Edns, Message, Query};
use hickory_proto::rr::{DNSClass, Name, RecordType};

pub use process::BIN;

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let p = std::env::temp_dir().join(format!("xdpdns-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running server; killed on drop.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub dir: TempDir,
    pub config: PathBuf,
    /// The registry API address, when one is configured.
    pub api_addr: Option<SocketAddr>,
    log: Arc<Mutex<String>>,
}

impl Server {
    /// `dig @server -p port +norec +time=2 +tries=1 ARGS`: its output
    /// (dig is installed by `cargo xtask deps`, Debian's dnsutils).
    pub fn dig(&self, args: &[&str]) -> String {
        let out = Command::new("dig")
            .args([
                &format!("@{}", self.addr.ip()),
                "-p",
                &self.addr.port().to_string(),
            ])
            .args(["+norec", "+time=2", "+tries=1"])
            .args(args)
            .output()
            .expect("dig is installed by `cargo xtask deps` (Debian package dnsutils)");
        assert!(out.status.success(), "dig failed: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// Starts a server for zone `origin` with `zone_text`; `extra` is
    /// appended to the generated TOML (e.g. an `[identity]` table).
    pub fn start(origin: &str, zone_text: &str, server_extra: &str, extra: &str) -> Server {
        Self::start_files(origin, &[("zone.db", zone_text)], server_extra, extra)
    }

    /// The shared test zone (tests/support/example.com.zone and its include).
    pub fn start_example(server_extra: &str, extra: &str) -> Server {
        let files = [
            ("zone.db", include_str!("example.com.zone")),
            ("big.inc", include_str!("big.inc")),
        ];
        Self::start_files("example.com.", &files, server_extra, extra)
    }

    /// Writes `files` (the first is the zone file) and starts a server.
    pub fn start_files(
        origin: &str,
        files: &[(&str, &str)],
        server_extra: &str,
        extra: &str,
    ) -> Server {
        let dir = TempDir::new("srv");
        for (name, text) in files {
            dir.write(name, text);
        }
        let config = dir.write(
            "xdpdns.toml",
            &format!(
                "[server]\nlisten = [\"127.0.0.1:0\"]\nudp_sockets = 2\n{server_extra}\n\
                 [log]\nlevel = \"info\"\n{extra}\n\
                 [[zone]]\norigin = \"{origin}\"\nfile = \"zone.db\"\n"
            ),
        );
        Self::start_with_config(dir, config)
    }

    pub fn start_with_config(dir: TempDir, config: PathBuf) -> Server {
        Self::start_in(dir, config, &[])
    }

    /// Starts the server under a command prefix (e.g. `ip netns exec NS`)
    /// and waits for its ready file; its log is captured for `wait_log`.
    pub fn start_in(dir: TempDir, config: PathBuf, prefix: &[&str]) -> Server {
        let started = process::launch(prefix, &config, Stdio::piped(), Duration::from_secs(20));
        let mut launched = match started {
            Ok(l) => l,
            Err(e) => panic!(
                "{e}; config:\n{}",
                std::fs::read_to_string(&config).unwrap_or_default()
            ),
        };
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = launched.child.stderr.take().unwrap();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut log = sink.lock().unwrap();
                log.push_str(&strip_ansi(&line));
                log.push('\n');
            }
        });
        let server = Server {
            child: launched.child,
            addr: launched.dns[0],
            api_addr: launched.api,
            dir,
            config,
            log,
        };
        // Tests read what was logged up to readiness: let the capture
        // catch up with the line that follows the ready file.
        assert!(
            server.wait_log(" ready", Duration::from_secs(10)),
            "no ready line in the log:\n{}",
            server.log()
        );
        server
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits until the log contains `needle` (bounded).
    pub fn wait_log(&self, needle: &str, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            if self.log().contains(needle) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig} failed");
    }

    /// The registry API address, from the `api_addr=` log field.
    pub fn api(&self) -> String {
        let addr = self.api_addr.expect("a registry API (from the ready file)");
        format!("http://{addr}")
    }

    /// Stops the server with `sig` (e.g. "KILL") and starts it again on
    /// the same directory and config (ports are new).
    pub fn restart_after(&mut self, sig: &str) {
        self.signal(sig);
        self.start_again();
    }

    /// Starts the server again on the same directory and config once its
    /// process has ended (ports are new).
    pub fn start_again(&mut self) {
        let _ = self.child.wait();
        let dir = std::mem::replace(&mut self.dir, TempDir(PathBuf::new()));
        *self = Server::start_in(dir, self.config.clone(), &[]);
    }

    /// One query over UDP, retried as a stub resolver would (a loaded
    /// 2-core machine can hold a datagram past one timeout).
    pub fn udp(&self, name: &str, rtype: RecordType) -> Message {
        let q = query(name, rtype, None);
        (0..3)
            .find_map(|_| udp_query(self.addr, &q))
            .expect("UDP reply within three tries")
    }

    pub fn tcp(&self, name: &str, rtype: RecordType) -> Message {
        let mut s = self.tcp_connect();
        tcp_send(&mut s, &query(name, rtype, None));
        Message::from_vec(&tcp_recv(&mut s).expect("TCP reply")).unwrap()
    }

    pub fn tcp_connect(&self) -> TcpStream {
        let s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(2)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s
    }
}

/// A bpf filesystem mounted on a temporary directory; unmounted on drop,
/// which unpins (detaches and frees) whatever is still pinned in it.
pub struct Bpffs(pub TempDir);

impl Bpffs {
    pub fn mount() -> Bpffs {
        let dir = TempDir::new("bpffs");
        let ok = Command::new("mount")
            .args(["-t", "bpf", "bpf"])
            .arg(&dir.0)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount -t bpf");
        Bpffs(dir)
    }
}

impl Drop for Bpffs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0 .0).status();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Query bytes with ID 0x1234 and RD set.
pub fn query(name: &str, rtype: RecordType, edns: Option<Edns>) -> Vec<u8> {
    query_class(name, rtype, DNSClass::IN, edns)
}

pub fn query_class(name: &str, rtype: RecordType, class: DNSClass, edns: Option<Edns>) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.id = 0x1234;
    m.metadata.recursion_desired = true;
    let mut q = Query::query(Name::from_str(name).unwrap(), rtype);
    q.set_query_class(class);
    m.add_query(q);
    m.edns = edns;
    m.to_vec().unwrap()
}

/// `name` with letters upper-cased at random (0x20, as resolvers send
/// it), from an xorshift `seed`.
pub fn randomise_case(name: &str, seed: &mut u64) -> String {
    name.chars()
        .map(|c| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            if *seed & 1 == 1 {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect()
}

pub fn edns(payload: u16) -> Edns {
    let mut e = Edns::new();
    e.set_max_payload(payload);
    e
}

/// Sends raw bytes over UDP; `None` if no reply within 1 s.
pub fn udp_raw(addr: SocketAddr, packet: &[u8]) -> Option<Vec<u8>> {
    udp_raw_timeout(addr, packet, Duration::from_secs(1))
}

pub fn udp_raw_timeout(addr: SocketAddr, packet: &[u8], timeout: Duration) -> Option<Vec<u8>> {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    s.send_to(packet, addr).unwrap();
    let mut buf = vec![0u8; 65535];
    match s.recv(&mut buf) {
        Ok(n) => Some(buf[..n].to_vec()),
        Err(_) => None,
    }
}

pub fn udp_query(addr: SocketAddr, packet: &[u8]) -> Option<Message> {
    udp_raw(addr, packet).map(|b| Message::from_vec(&b).expect("reply parses"))
}

pub fn tcp_send(s: &mut TcpStream, msg: &[u8]) {
    let mut framed = (msg.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(msg);
    s.write_all(&framed).unwrap();
}

/// Reads one framed message; `None` on EOF/timeout.
pub fn tcp_recv(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 2];
    s.read_exact(&mut len).ok()?;
    let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact(&mut buf).ok()?;
    Some(buf)
}

/// True when the peer has closed the connection (read returns 0).
pub fn tcp_closed_within(s: &mut TcpStream, timeout: Duration) -> bool {
    s.set_read_timeout(Some(timeout)).unwrap();
    let mut b = [0u8; 1];
    // One read: closed is EOF or a reset (a connection never accepted
    // before the listener closed gets a reset; a second read would then
    // see EOF, not the reset).
    match s.read(&mut b) {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    }
}

pub fn path_str(p: &Path) -> String {
    p.display().to_string()
}

/// One HTTP call to the registry API: (status, JSON body or null).
pub fn http(
    method: &str,
    url: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, serde_json::Value) {
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(10))
        .build();
    let mut req = agent.request(method, url);
    if let Some(t) = token {
        req = req.set("Authorization", &format!("Bearer {t}"));
    }
    let res = match body {
        Some(b) => req.set("Content-Type", "application/json").send_string(b),
        None => req.call(),
    };
    let resp = match res {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{method} {url}: {e}"),
    };
    let status = resp.status();
    let text = resp.into_string().unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
    )
}

/// Polls until `cond` holds (bounded); returns whether it did.
pub fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
