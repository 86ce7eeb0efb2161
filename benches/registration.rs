//! Registration-to-answer latency, end to end through the real binary:
//! `PUT /v1/instances/{id}` on the HTTP API, then UDP queries for the new
//! instance name until it answers. Three loads, each reported as
//! p50/p99/max (the acknowledgement alone, which includes the journal
//! fdatasync, is reported too):
//!
//! * (a) sequential: fresh registrations one after another;
//! * (b) concurrent: 8 writers at once, each registering its own names;
//! * (c) under reload: sequential registrations for as long as it takes
//!   SIGHUP reloads of a large zone file (1M records; each reload changes
//!   its serial and one record) to complete three times back to back
//!   (a reload counts once the new serial is served);
//! * (d) etcd: three nodes sharing a three-member etcd cluster on
//!   loopback (`[registry] backend = "etcd"`), sequential registrations
//!   through node 1, each timed until every node answers it;
//! * (e) signed: (a) and (b) with the registry zone signed online, each
//!   timed until the answer to a DO=1 query carries its RRSIG.
//!
//! `cargo bench --bench registration`; under `cargo test` it runs a few
//! registrations of each kind against a small zone as a smoke test.

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};

/// Starting the binary: the same code as the end-to-end tests.
#[path = "../tests/support/process.rs"]
#[allow(dead_code)] // free_port: this bench binds port 0 and reads the ready file
mod process;

#[path = "support/etcd.rs"]
mod etcd;
use etcd::EtcdCluster;

#[path = "support/samples.rs"]
mod samples;
use samples::report;

struct Server {
    child: process::KillOnDrop,
    /// Its registry zone is signed online: answers are asked for with DO
    /// and count once they carry an RRSIG.
    signed: bool,
    dns: SocketAddr,
    api: String,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start(dir: PathBuf, config: &Path) -> Server {
    let stderr = process::bench_stderr();
    let l = process::launch(&[], config, stderr, Duration::from_secs(120)).expect("xdpdns starts");
    Server {
        child: process::KillOnDrop(l.child),
        signed: std::fs::read_to_string(config).is_ok_and(|c| c.contains("dnssec_policy")),
        dns: l.dns[0],
        api: format!("http://{}", l.api.expect("registry API")),
        dir,
    }
}

/// A zone of `names` names with an A and an AAAA each, at `serial`.
fn write_zone(path: &Path, names: usize, serial: u32) {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(f, "$ORIGIN big.example.\n$TTL 300\n@ SOA ns1 h {serial} 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1").unwrap();
    for i in 0..names {
        // One record differs between serials, so each reload is a change.
        let last = if i == 0 {
            serial as u8
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

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (n, big_names) = if full { (1000, 500_000) } else { (16, 2_000) };
    let dir = std::env::temp_dir().join(format!("xdpdns-bench-reg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Two versions of the big zone; `big.zone` is a link flipped between them.
    write_zone(&dir.join("big1.zone"), big_names, 1);
    write_zone(&dir.join("big2.zone"), big_names, 2);
    std::os::unix::fs::symlink(dir.join("big1.zone"), dir.join("big.zone")).unwrap();
    let config = dir.join("xdpdns.toml");
    std::fs::write(
        &config,
        "[server]\nlisten = [\"127.0.0.1:0\"]\nudp_sockets = 1\n[log]\nlevel = \"warn\"\n\
         [[zone]]\norigin = \"big.example.\"\nfile = \"big.zone\"\n\
         [registry]\nlisten = \"127.0.0.1:0\"\ntoken = \"t\"\ndata_dir = \"reg\"\nrequire_opt_in = false\n\
         ns = [\"ns1.example.com.\"]\nhostmaster = \"h.example.com.\"\n\
         [[registry.zone]]\nname = \"sd.example.\"\nnetworks = [\"*\"]\n",
    )
    .unwrap();
    let server = Arc::new(start(dir.clone(), &config));
    println!(
        "registry bench: {n} registrations per load; reload zone {} records",
        big_names * 2 + 3
    );

    // The floor under every acknowledgement: one small append and
    // fdatasync on the same file system, as the registry journal does.
    let mut floor = fsync_floor(&dir, n);
    report(
        "fdatasync of a 120-byte append (the durability floor)",
        &mut floor,
    );

    let (mut acked, mut answered) = register_all(&server, "a", n, 1);
    report(
        "(a) sequential: acknowledged (fdatasync included)",
        &mut acked,
    );
    report("(a) sequential: registration -> UDP answer", &mut answered);

    let (mut acked, mut answered) = register_all(&server, "b", n, 8);
    report("(b) 8 concurrent writers: acknowledged", &mut acked);
    report(
        "(b) 8 concurrent writers: registration -> UDP answer",
        &mut answered,
    );

    let reloading = Arc::new(AtomicBool::new(true));
    let reloads = Arc::new(AtomicUsize::new(0));
    let reloader = {
        let (reloading, reloads) = (reloading.clone(), reloads.clone());
        let pid = server.child.0.id().to_string();
        let (dir, dns) = (dir.clone(), server.dns);
        std::thread::spawn(move || {
            let mut version = 1;
            while reloading.load(Ordering::Relaxed) {
                version = 3 - version;
                let tmp = dir.join("big.zone.tmp");
                let _ = std::fs::remove_file(&tmp);
                std::os::unix::fs::symlink(dir.join(format!("big{version}.zone")), &tmp).unwrap();
                std::fs::rename(&tmp, dir.join("big.zone")).unwrap();
                let before = soa_serial(dns, "big.example.");
                Command::new("kill").args(["-HUP", &pid]).status().unwrap();
                // Done once a new serial is served (the store gives a file
                // whose serial went back the next one): bounded wait.
                let deadline = Instant::now() + Duration::from_secs(120);
                while soa_serial(dns, "big.example.") == before {
                    assert!(Instant::now() < deadline, "reload never finished");
                    std::thread::sleep(Duration::from_millis(20));
                }
                reloads.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let wanted = 3;
    let started = Instant::now();
    let (mut acked, mut answered) = (Vec::new(), Vec::new());
    // Bounded: at most 100 rounds of n/10 registrations.
    for round in 0..100 {
        if reloads.load(Ordering::Relaxed) >= wanted {
            break;
        }
        let (a, b) = register_all(&server, &format!("c{round}r"), n.div_ceil(10), 1);
        acked.extend(a);
        answered.extend(b);
    }
    let spent = started.elapsed();
    reloading.store(false, Ordering::Relaxed);
    reloader.join().unwrap();
    println!(
        "(c) {} reloads of the big zone completed during {:.1} s of registrations",
        reloads.load(Ordering::Relaxed),
        spent.as_secs_f64()
    );
    report("(c) during reloads: acknowledged", &mut acked);
    report(
        "(c) during reloads: registration -> UDP answer",
        &mut answered,
    );
    drop(server);
    signed_case(&dir, n);
    etcd_case(&dir, n);
    // The etcd cluster's data (its WAL preallocates tens of MB a member).
    let _ = std::fs::remove_dir_all(&dir);
}

/// (e): the registry zone signed online (a KSK and a ZSK): registration
/// to a DO=1 answer with its RRSIG, sequential and with 8 writers.
fn signed_case(dir: &Path, n: usize) {
    let dir = dir.join("signed");
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("xdpdns.toml");
    std::fs::write(
        &config,
        "[server]\nlisten = [\"127.0.0.1:0\"]\nudp_sockets = 1\n[log]\nlevel = \"warn\"\n\
         [transfer]\ndata_dir = \"data\"\n\
         [[dnssec_policy]]\nname = \"split\"\nkeys = \"ksk+zsk\"\n\
         [registry]\nlisten = \"127.0.0.1:0\"\ntoken = \"t\"\ndata_dir = \"reg\"\nrequire_opt_in = false\n\
         ns = [\"ns1.example.com.\"]\nhostmaster = \"h.example.com.\"\n\
         [[registry.zone]]\nname = \"sd.example.\"\nnetworks = [\"*\"]\ndnssec_policy = \"split\"\n",
    )
    .unwrap();
    let server = Arc::new(start(dir, &config));
    let (mut acked, mut answered) = register_all(&server, "s", n, 1);
    report("(e) signed, sequential: acknowledged", &mut acked);
    report(
        "(e) signed, sequential: registration -> signed UDP answer",
        &mut answered,
    );
    let (mut acked, mut answered) = register_all(&server, "t", n, 8);
    report("(e) signed, 8 concurrent writers: acknowledged", &mut acked);
    report(
        "(e) signed, 8 concurrent writers: registration -> signed UDP answer",
        &mut answered,
    );
}

/// (d): three nodes on a three-member etcd cluster.
fn etcd_case(dir: &Path, n: usize) {
    let etcd = EtcdCluster::start(&dir.join("etcd"), 3);
    let nodes: Vec<Server> = (0..3)
        .map(|i| {
            let node_dir = dir.join(format!("node{i}"));
            std::fs::create_dir_all(&node_dir).unwrap();
            let config = node_dir.join("xdpdns.toml");
            std::fs::write(&config, etcd.node_config("/bench/", "warn", "")).unwrap();
            start(node_dir, &config)
        })
        .collect();
    let http = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(5))
        .build();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut acked = Vec::with_capacity(n);
    let mut answered: Vec<Vec<Duration>> = vec![Vec::with_capacity(n); nodes.len()];
    let mut id: u16 = 0;
    for i in 0..n {
        let start = Instant::now();
        register(&http, &nodes[0].api, &format!("e{i}"), i);
        acked.push(start.elapsed());
        let name = Name::from_ascii(format!("e{i}.inst.acme.sd.example.")).unwrap();
        let mut waiting: Vec<usize> = (0..nodes.len()).collect();
        let deadline = start + Duration::from_secs(5);
        while !waiting.is_empty() {
            waiting.retain(|&k| {
                id = id.wrapping_add(1);
                if answers(&sock, nodes[k].dns, &name, id) {
                    answered[k].push(start.elapsed());
                    return false;
                }
                true
            });
            assert!(Instant::now() < deadline, "e{i} never answered everywhere");
            if !waiting.is_empty() {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }
    report("(d) etcd, 3 nodes: acknowledged by node 1", &mut acked);
    for (k, samples) in answered.iter_mut().enumerate() {
        report(
            &format!(
                "(d) etcd, 3 nodes: registration -> UDP answer on node {}",
                k + 1
            ),
            samples,
        );
    }
    drop(nodes);
    drop(etcd);
}

/// Whether `dns` answers an A query for `name` with a record.
fn answers(sock: &UdpSocket, dns: SocketAddr, name: &Name, id: u16) -> bool {
    let mut q = Message::query();
    q.add_query(Query::query(name.clone(), RecordType::A));
    q.metadata.id = id;
    sock.send_to(&q.to_vec().unwrap(), dns).unwrap();
    let mut buf = [0u8; 1500];
    loop {
        match sock.recv_from(&mut buf) {
            Ok((len, _)) => match Message::from_vec(&buf[..len]) {
                Ok(m) if m.metadata.id == id => return !m.answers.is_empty(),
                _ => continue,
            },
            Err(_) => return false,
        }
    }
}

/// Registers `n` fresh instances from `writers` threads at once; returns
/// the acknowledgement and answer latencies of every registration.
fn register_all(
    server: &Arc<Server>,
    tag: &str,
    n: usize,
    writers: usize,
) -> (Vec<Duration>, Vec<Duration>) {
    let threads: Vec<_> = (0..writers)
        .map(|w| {
            let server = server.clone();
            let tag = format!("{tag}{w}x");
            let count = n / writers;
            std::thread::spawn(move || register_some(&server, &tag, count))
        })
        .collect();
    let (mut acked, mut answered) = (Vec::new(), Vec::new());
    for t in threads {
        let (a, b) = t.join().unwrap();
        acked.extend(a);
        answered.extend(b);
    }
    (acked, answered)
}

fn register_some(server: &Server, tag: &str, n: usize) -> (Vec<Duration>, Vec<Duration>) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let http = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(5))
        .build();
    let mut acked = Vec::with_capacity(n);
    let mut answered = Vec::with_capacity(n);
    let mut buf = [0u8; 1500];
    let mut id: u16 = 0;
    for i in 0..n {
        let name = Name::from_ascii(format!("{tag}{i}.inst.acme.sd.example.")).unwrap();
        let mut q = Message::query();
        q.add_query(Query::query(name, RecordType::A));
        if server.signed {
            let mut e = hickory_proto::op::Edns::new();
            e.set_max_payload(1232).set_dnssec_ok(true);
            q.edns = Some(e);
        }
        let start = Instant::now();
        register(&http, &server.api, &format!("{tag}{i}"), i);
        acked.push(start.elapsed());
        let deadline = start + Duration::from_secs(5);
        loop {
            id = id.wrapping_add(1);
            q.metadata.id = id;
            sock.send_to(&q.to_vec().unwrap(), server.dns).unwrap();
            // Skip late answers to earlier queries.
            let got = loop {
                match sock.recv_from(&mut buf) {
                    Ok((len, _)) => match Message::from_vec(&buf[..len]) {
                        Ok(m) if m.metadata.id == id => break Some(m),
                        _ => continue,
                    },
                    Err(_) => break None,
                }
            };
            let signed = |m: &Message| {
                !server.signed
                    || m.answers
                        .iter()
                        .any(|r| r.record_type() == RecordType::RRSIG)
            };
            if got.is_some_and(|m| !m.answers.is_empty() && signed(&m)) {
                answered.push(start.elapsed());
                break;
            }
            assert!(Instant::now() < deadline, "{tag}{i} never answered");
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    (acked, answered)
}

/// Registers instance `id` (address from `i`) through the API at `api`.
fn register(http: &ureq::Agent, api: &str, id: &str, i: usize) {
    http.put(&format!("{api}/v1/instances/{id}"))
        .set("Authorization", "Bearer t")
        .send_string(&format!(
            r#"{{"owner":"acme","addresses":["10.{}.{}.{}"],"services":["bench"],"lease_secs":600}}"#,
            i >> 16 & 255,
            i >> 8 & 255,
            i & 255
        ))
        .expect("registration");
}

/// `n` appends of 120 bytes to a fresh file in `dir`, each `fdatasync`ed.
fn fsync_floor(dir: &Path, n: usize) -> Vec<Duration> {
    use std::io::Write;
    let path = dir.join("fsync-floor");
    let mut f = std::fs::File::create(&path).unwrap();
    let samples = (0..n)
        .map(|_| {
            let start = Instant::now();
            f.write_all(&[0x5a; 120]).unwrap();
            f.sync_data().unwrap();
            start.elapsed()
        })
        .collect();
    let _ = std::fs::remove_file(&path);
    samples
}

/// The SOA serial `dns` serves for `zone`, if it answers.
fn soa_serial(dns: SocketAddr, zone: &str) -> Option<u32> {
    let sock = UdpSocket::bind("127.0.0.1:0").ok()?;
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    let mut q = Message::query();
    q.add_query(Query::query(Name::from_ascii(zone).ok()?, RecordType::SOA));
    sock.send_to(&q.to_vec().ok()?, dns).ok()?;
    let mut buf = [0u8; 1500];
    let (len, _) = sock.recv_from(&mut buf).ok()?;
    let m = Message::from_vec(&buf[..len]).ok()?;
    m.answers.iter().find_map(|r| match &r.data {
        hickory_proto::rr::RData::SOA(soa) => Some(soa.serial),
        _ => None,
    })
}
