//! The ZooKeeper source (a Binder drop-in) end to end: a standalone
//! ZooKeeper on loopback, Registrar's records written into it, and the
//! real binary mirroring them.
//!
//! 1. **Freshness**: one at a time, an ephemeral host node is created
//!    under a service node and timed until its own name answers over
//!    UDP, then deleted and timed until the name is NXDOMAIN (from
//!    ZooKeeper's acknowledgement of the write; the write itself, which
//!    ZooKeeper syncs to its log, is reported too).
//! 2. **Scale**: host records under service nodes (100,000 under 1,000
//!    services) written before xdpdns starts on an empty data directory:
//!    time from spawn until the last host answers, and PSS 4 s later.
//! 3. **Under changes**: 1,000 node changes a second (a host's address
//!    rewritten, paced) for 10 s; one change in ten is timed until the
//!    new address answers.
//!
//! `cargo bench --bench zookeeper` (`XDPDNS_ZK_HOSTS=N` for another
//! size, `XDPDNS_ZK_WATCHES=oneshot` for the child and data watches used
//! with ZooKeeper before 3.6); under `cargo test` (CI) the same steps run
//! small.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};
use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};
use zookeeper_client::{Acls, Client, CreateMode};

#[path = "../tests/support/process.rs"]
#[allow(dead_code)]
mod process;

#[path = "support/samples.rs"]
mod samples;
use samples::report;

const SERVICE: &str = r#"{"type":"service","service":{"type":"service",
  "service":{"srvce":"_redis","proto":"_tcp","port":6379,"ttl":60},"ttl":60}}"#;

fn host(addr: &str) -> String {
    format!(
        r#"{{"type":"redis_host","address":"{addr}","ttl":30,"redis_host":{{"address":"{addr}","ports":[6379]}}}}"#
    )
}

fn address(i: usize, generation: usize) -> String {
    format!("10.{}.{}.{}", 64 + generation % 64, (i >> 8) & 255, i & 255)
}

struct ZooKeeper(Child);

impl Drop for ZooKeeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_zookeeper(dir: &Path) -> (ZooKeeper, u16) {
    let port = process::free_port();
    std::fs::create_dir_all(dir.join("zk-data")).unwrap();
    let conf = dir.join("zoo.cfg");
    std::fs::write(
        &conf,
        format!(
            "tickTime=200\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
             admin.enableServer=false\nminSessionTimeout=400\nmaxSessionTimeout=60000\n",
            dir.join("zk-data").display()
        ),
    )
    .unwrap();
    let child = Command::new("java")
        .args(["-Xmx2g", "-cp", "/usr/share/java/zookeeper.jar"])
        .arg("org.apache.zookeeper.server.ZooKeeperServerMain")
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("java and Debian's zookeeper");
    let end = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < end, "zookeeper never listened");
        std::thread::sleep(Duration::from_millis(100));
    }
    (ZooKeeper(child), port)
}

struct Zk {
    rt: tokio::runtime::Runtime,
    client: Client,
}

impl Zk {
    fn connect(port: u16) -> Zk {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let client = rt
            .block_on(Client::connect(&format!("127.0.0.1:{port}")))
            .expect("zookeeper session");
        Zk { rt, client }
    }

    fn create(&self, path: &str, data: &str, mode: CreateMode) {
        let options = mode.with_acls(Acls::anyone_all());
        match self
            .rt
            .block_on(self.client.create(path, data.as_bytes(), &options))
        {
            Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
            Err(e) => panic!("create {path}: {e}"),
        }
    }

    /// Many persistent nodes at once, in order of the list (parents first
    /// when they come first), 512 in flight.
    fn create_many(&self, nodes: Vec<(String, String)>) {
        let client = &self.client;
        self.rt.block_on(async {
            let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
            let options = &options;
            stream::iter(nodes)
                .map(|(path, data)| async move {
                    match client.create(&path, data.as_bytes(), options).await {
                        Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
                        Err(e) => panic!("create {path}: {e}"),
                    }
                })
                .buffer_unordered(512)
                .collect::<Vec<()>>()
                .await;
        });
    }
}

struct Server {
    child: process::KillOnDrop,
    dns: SocketAddr,
}

fn start_server(dir: &Path, zk_port: u16) -> Server {
    std::fs::create_dir_all(dir).unwrap();
    let watches = std::env::var("XDPDNS_ZK_WATCHES").unwrap_or_else(|_| "auto".into());
    let config = dir.join("xdpdns.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nudp_sockets = 1\n[log]\nlevel = \"warn\"\n\
             [registry]\nlisten = \"127.0.0.1:0\"\ntoken = \"t\"\ndata_dir = \"reg\"\n\
             require_opt_in = false\nns = [\"ns1.example.com.\"]\nhostmaster = \"h.example.com.\"\n\
             [registry.limits]\nmax_instances = 2000000\n\
             [registry.zookeeper]\nservers = [\"127.0.0.1:{zk_port}\"]\ndomains = [\"joyent.us\"]\n\
             watches = \"{watches}\"\n\
             [[registry.zone]]\nname = \"joyent.us.\"\n"
        ),
    )
    .unwrap();
    let l = process::launch(
        &[],
        &config,
        process::bench_stderr(),
        Duration::from_secs(300),
    )
    .expect("xdpdns starts");
    Server {
        child: process::KillOnDrop(l.child),
        dns: l.dns[0],
    }
}

/// The A answer for `name` (empty: none), or NXDOMAIN as `None`.
fn lookup(sock: &UdpSocket, dns: SocketAddr, name: &Name, id: u16) -> Option<Vec<String>> {
    let mut q = Message::query();
    q.add_query(Query::query(name.clone(), RecordType::A));
    q.metadata.id = id;
    sock.send_to(&q.to_vec().unwrap(), dns).unwrap();
    let mut buf = [0u8; 1500];
    loop {
        let (len, _) = sock.recv_from(&mut buf).ok()?;
        let Ok(m) = Message::from_vec(&buf[..len]) else {
            continue;
        };
        if m.metadata.id != id {
            continue;
        }
        if m.response_code == ResponseCode::NXDomain {
            return None;
        }
        return Some(
            m.answers
                .iter()
                .filter_map(|r| match &r.data {
                    RData::A(a) => Some(a.0.to_string()),
                    _ => None,
                })
                .collect(),
        );
    }
}

/// Polls until `done` holds for the lookup of `name` (bounded).
fn until(
    sock: &UdpSocket,
    dns: SocketAddr,
    name: &Name,
    done: impl Fn(&Option<Vec<String>>) -> bool,
) -> Instant {
    let end = Instant::now() + Duration::from_secs(30);
    let mut id = 0u16;
    loop {
        id = id.wrapping_add(1);
        if done(&lookup(sock, dns, name, id)) {
            return Instant::now();
        }
        assert!(Instant::now() < end, "{name} never changed");
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn socket() -> UdpSocket {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    sock
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (fresh, mut hosts, change_secs) = if full {
        (1000, 100_000, 10)
    } else {
        (20, 2_000, 2)
    };
    if let Some(n) = std::env::var("XDPDNS_ZK_HOSTS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        hosts = n;
    }
    let services = (hosts / 100).max(1);
    let dir = std::env::temp_dir().join(format!("xdpdns-bench-zk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (_zookeeper, port) = start_zookeeper(&dir);
    let zk = Zk::connect(port);
    for p in ["/us", "/us/joyent"] {
        zk.create(p, "", CreateMode::Persistent);
    }
    zk.create("/us/joyent/fresh", SERVICE, CreateMode::Persistent);

    // 1. Freshness.
    let server = start_server(&dir.join("fresh"), port);
    let sock = socket();
    until(
        &sock,
        server.dns,
        &Name::from_ascii("fresh.joyent.us.").unwrap(),
        |_| true,
    );
    let (mut written, mut created, mut deleted) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..fresh {
        let path = format!("/us/joyent/fresh/h{i}");
        let name = Name::from_ascii(format!("h{i}.fresh.joyent.us.")).unwrap();
        let start = Instant::now();
        zk.create(&path, &host(&address(i, 0)), CreateMode::Ephemeral);
        let acked = Instant::now();
        written.push(acked - start);
        created.push(
            until(&sock, server.dns, &name, |a| {
                a.as_ref().is_some_and(|a| !a.is_empty())
            }) - acked,
        );
        zk.rt.block_on(zk.client.delete(&path, None)).unwrap();
        let acked = Instant::now();
        deleted.push(until(&sock, server.dns, &name, Option::is_none) - acked);
    }
    println!("zookeeper bench: {fresh} ephemeral hosts one at a time; {hosts} hosts under {services} services");
    report(
        "ZooKeeper create acknowledged (its log sync included)",
        &mut written,
    );
    report("(1) node created -> its name answered", &mut created);
    report("(1) node deleted -> its name NXDOMAIN", &mut deleted);
    drop(server);

    // 2. Scale: the tree first, then a node that reads it all.
    let mut nodes = Vec::with_capacity(hosts + services);
    for s in 0..services {
        nodes.push((format!("/us/joyent/s{s}"), SERVICE.to_string()));
    }
    zk.create_many(nodes);
    let nodes: Vec<(String, String)> = (0..hosts)
        .map(|i| {
            (
                format!("/us/joyent/s{}/h{i}", i % services),
                host(&address(i, 0)),
            )
        })
        .collect();
    let filled = Instant::now();
    zk.create_many(nodes);
    println!(
        "wrote {hosts} host nodes in {:.2} s",
        filled.elapsed().as_secs_f64()
    );
    let spawned = Instant::now();
    let server = start_server(&dir.join("scale"), port);
    let last = hosts - 1;
    let last_name = Name::from_ascii(format!("h{last}.s{}.joyent.us.", last % services)).unwrap();
    let answered = until(&sock, server.dns, &last_name, |a| {
        a.as_ref().is_some_and(|a| !a.is_empty())
    });
    println!(
        "(2) start with {hosts} hosts -> the last host answered: {:.2} s",
        (answered - spawned).as_secs_f64()
    );
    std::thread::sleep(Duration::from_secs(4));
    let pss = process::pss_kb(server.child.0.id());
    println!(
        "(2) PSS: {:.1} MB, {} bytes per host record",
        pss as f64 / 1024.0,
        pss * 1024 / hosts as u64
    );

    // 3. 1,000 changes a second; every tenth timed.
    let mut timed = Vec::new();
    let rate = 1000u32;
    let total = rate as usize * change_secs;
    let started = Instant::now();
    for k in 0..total {
        let due = started + Duration::from_secs_f64(k as f64 / rate as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let i = (k * 7919) % hosts;
        let new = address(i, k + 1);
        let path = format!("/us/joyent/s{}/h{i}", i % services);
        if k % 10 == 0 {
            zk.rt
                .block_on(zk.client.set_data(&path, host(&new).as_bytes(), None))
                .unwrap();
            let acked = Instant::now();
            let name = Name::from_ascii(format!("h{i}.s{}.joyent.us.", i % services)).unwrap();
            timed.push(
                until(&sock, server.dns, &name, |a| {
                    a.as_ref().is_some_and(|a| a == std::slice::from_ref(&new))
                }) - acked,
            );
        } else {
            let client = zk.client.clone();
            let data = host(&new).into_bytes();
            zk.rt.spawn(async move {
                let _ = client.set_data(&path, &data, None).await;
            });
        }
    }
    println!(
        "(3) {total} changes at {rate}/s took {:.2} s",
        started.elapsed().as_secs_f64()
    );
    report(
        "(3) under 1,000 changes/s: change acknowledged -> new address answered",
        &mut timed,
    );
    let _ = std::fs::remove_dir_all(&dir);
}
