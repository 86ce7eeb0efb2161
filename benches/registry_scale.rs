//! The registry at scale: 100,000 instances, first in one node with the
//! local backend (its journal), then in a three-member etcd cluster on
//! loopback, shared by two xdpdns nodes.
//!
//! 0. **Local backend**: one node takes the first 1,000 registrations,
//!    then times single registrations until each is answered (register
//!    -> answered at 1,000 instances); takes the rest from 32 writers at
//!    once, each acknowledged once its journal entry is synced; its PSS
//!    from 4 s after it answers the last one, once it holds still;
//!    register -> answered again at
//!    full size; then 20,000 heartbeats a second for 60 s (paced, from 64
//!    connections, to random instances, each acknowledged once synced)
//!    while DNS queries for random instances are timed beside them; then
//!    NSD becomes its secondary (one AXFR of the whole zone, timed) and
//!    follows fresh registrations by NOTIFY and IXFR (each timed until
//!    NSD answers it, and the transfers the node sent read from its
//!    log); then it is killed (SIGKILL) and started again on its
//!    journal, timed until it answers the last instance.
//! 1. **Fill**: node 1 takes the registrations through its API from 32
//!    writers at once (each instance with its own etcd lease; 1,000
//!    services of 100 members).
//! 2. **Start**: node 2 starts on an empty data directory, so everything
//!    comes from one range read of etcd: time from spawn until it answers
//!    the last instance registered.
//! 3. **Memory**: PSS of each node, 4 s after node 2 answered.
//! 4. **Under heartbeats**: 1,000 heartbeats a second (lease keep-alives,
//!    paced, to random instances, half through each node) while one
//!    writer registers fresh instances through node 2, each timed until
//!    both nodes answer it.
//!
//! `cargo bench --bench registry_scale` (`XDPDNS_SCALE_INSTANCES=N` for
//! another size; `XDPDNS_SCALE_STOP=memory` stops after the local node's
//! fill and memory reading, for profiling it, `killed` after a restart
//! killed right after the fill (the image furthest behind), `answered`
//! after its register -> answered at full size (listing the slowest), and `local`
//! after the local node's steps; `XDPDNS_SCALE_XDP=1`, as root, runs the local node
//! with XDP, see [`XdpNamespace`]); under `cargo test` (CI) it
//! runs the same steps with 2,000 instances and a shorter load.

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};

#[path = "../tests/support/process.rs"]
#[allow(dead_code)] // free_port: this bench binds port 0 and reads the ready file
mod process;

#[path = "support/servers.rs"]
#[allow(dead_code)] // the start-up benches' helpers: this one reads memory
mod servers;

#[path = "support/etcd.rs"]
mod etcd;
use etcd::EtcdCluster;

#[path = "support/samples.rs"]
mod samples;

#[path = "support/http.rs"]
mod http;
use http::Connection;
use samples::report;

const WRITERS: usize = 32;
/// The registry's size for the small figure of register -> answered.
const FIRST_INSTANCES: usize = 1_000;
/// Registrations timed one at a time until answered, at each size.
const PROBES: usize = 1_000;
/// Registrations NSD follows by NOTIFY and IXFR, each timed.
const FOLLOWED: usize = 50;
const HEARTBEATS_PER_SEC: usize = 1000;
const HEARTBEAT_THREADS: usize = 8;

struct Node {
    child: process::KillOnDrop,
    dns: SocketAddr,
    api: String,
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let sustained = match full {
        true => Sustained {
            rate: 20_000,
            secs: 60,
        },
        false => Sustained {
            rate: 2_000,
            secs: 2,
        },
    };
    let (mut instances, registrations) = if full { (100_000, 1000) } else { (2_000, 50) };
    if let Some(n) = std::env::var("XDPDNS_SCALE_INSTANCES")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        instances = n;
    }
    let dir = std::env::temp_dir().join(format!("xdpdns-bench-scale-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let stop = std::env::var("XDPDNS_SCALE_STOP").unwrap_or_default();
    let xdp = std::env::var("XDPDNS_SCALE_XDP").is_ok_and(|v| v == "1");
    let namespace = xdp.then(XdpNamespace::enter);
    if !local_backend(&dir, instances, sustained, &stop, namespace.is_some()) || stop == "local" {
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let etcd = EtcdCluster::start(&dir.join("etcd"), 3);
    println!("registry scale bench: {instances} instances, 3 etcd members, 2 nodes");

    let node1 = start_node(&dir, &etcd, 1, instances);
    let started = Instant::now();
    fill(&node1, 0..instances);
    let filled = started.elapsed();
    println!(
        "fill through node 1: {instances} registrations from {WRITERS} writers in {:.1} s ({:.0}/s)",
        filled.as_secs_f64(),
        instances as f64 / filled.as_secs_f64()
    );

    // Node 2 from nothing but etcd.
    let started = Instant::now();
    let node2 = start_node(&dir, &etcd, 2, instances);
    let ready = started.elapsed();
    let last = instance_name(instances - 1);
    let sock = udp();
    let mut id = 0u16;
    let (since, limit, poll) = (
        Instant::now(),
        Duration::from_secs(300),
        Duration::from_millis(5),
    );
    await_answer(&sock, &mut id, node2.dns, &last, since, limit, poll);
    let serving = started.elapsed();
    println!(
        "start of node 2 (range read -> serving): ready file {:.2} s, answers the last instance {:.2} s",
        ready.as_secs_f64(),
        serving.as_secs_f64()
    );
    std::thread::sleep(Duration::from_secs(4));
    for (k, node) in [&node1, &node2].into_iter().enumerate() {
        println!(
            "memory of node {}: PSS {} MB ({:.1} KB per instance)",
            k + 1,
            process::pss_kb(node.child.0.id()) / 1024,
            process::pss_kb(node.child.0.id()) as f64 / instances as f64
        );
    }

    // Heartbeats at a paced rate, while fresh registrations are timed.
    let beating = Arc::new(AtomicBool::new(true));
    let sent = Arc::new(AtomicUsize::new(0));
    let unavailable = Arc::new(AtomicUsize::new(0));
    let beat_latency = Arc::new(Mutex::new(Vec::new()));
    let apis = [node1.api.clone(), node2.api.clone()];
    let beaters: Vec<_> = (0..HEARTBEAT_THREADS)
        .map(|t| {
            let (beating, sent, latency) = (beating.clone(), sent.clone(), beat_latency.clone());
            let unavailable = unavailable.clone();
            let api = apis[t % 2].clone();
            std::thread::spawn(move || {
                heartbeats(t, &api, instances, &beating, &sent, &unavailable, &latency)
            })
        })
        .collect();
    let started = Instant::now();
    let mut conn = Connection::open(&node2.api);
    let mut answered: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    for i in 0..registrations {
        let t = Instant::now();
        register(&mut conn, &format!("fresh{i}"), i);
        let name = Name::from_ascii(format!("fresh{i}.inst.acme.sd.example.")).unwrap();
        let mut waiting = vec![0usize, 1];
        let deadline = t + Duration::from_secs(10);
        while !waiting.is_empty() {
            waiting.retain(|&k| {
                let dns = [node1.dns, node2.dns][k];
                if answers(&sock, dns, &name, &mut id) {
                    answered[k].push(t.elapsed());
                    return false;
                }
                true
            });
            assert!(Instant::now() < deadline, "fresh{i} never answered");
            if !waiting.is_empty() {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        // About 50 registrations a second beside the heartbeats.
        std::thread::sleep(Duration::from_millis(20).saturating_sub(t.elapsed()));
    }
    let spent = started.elapsed();
    beating.store(false, Ordering::Relaxed);
    for b in beaters {
        b.join().unwrap();
    }
    println!(
        "heartbeats: {} in {:.1} s ({:.0}/s), {} answered 503 (etcd keep-alive failed)",
        sent.load(Ordering::Relaxed),
        spent.as_secs_f64(),
        sent.load(Ordering::Relaxed) as f64 / spent.as_secs_f64(),
        unavailable.load(Ordering::Relaxed)
    );
    report("heartbeat acknowledged", &mut beat_latency.lock().unwrap());
    for (k, samples) in answered.iter_mut().enumerate() {
        report(
            &format!(
                "under heartbeats: registration via node 2 -> UDP answer on node {}",
                k + 1
            ),
            samples,
        );
    }
    drop(node2);
    drop(node1);
    drop(etcd);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Step 0: the fill, the memory and sustained heartbeats of one node
/// with the local backend. False when `stop` says to stop after the
/// memory.
fn local_backend(
    dir: &Path,
    instances: usize,
    sustained: Sustained,
    stop: &str,
    xdp: bool,
) -> bool {
    let node_dir = dir.join("local");
    std::fs::create_dir_all(&node_dir).unwrap();
    let config = node_dir.join("xdpdns.toml");
    let nsd_port = process::free_port();
    std::fs::write(
        &config,
        format!(
            "{}[server]\nlisten = [\"127.0.0.1:{}\"]\nudp_sockets = 1\n\
             [log]\nlevel = \"warn,xdpdns_core::router=info,xdpdns::transfer::journal=info,xdpdns::registry::start=info\"\n\
             [registry]\nlisten = \"127.0.0.1:0\"\ntoken = \"t\"\ndata_dir = \"reg\"\n\
             require_opt_in = false\nns = [\"ns1.example.com.\"]\nhostmaster = \"h.example.com.\"\n\
             {}[[registry.zone]]\nname = \"sd.example.\"\nnetworks = [\"*\"]\n\
             notify = [\"127.0.0.1:{nsd_port}\"]\n\
             [transfer]\ndata_dir = \"state\"\n",
            match xdp {
                true => XdpNamespace::config(&node_dir, instances),
                false => String::new(),
            },
            // The kernel answers on a fixed port; the namespace has it free.
            if xdp { 53 } else { 0 },
            limits(instances)
        ),
    )
    .unwrap();
    // Its log holds the transfers it sends (the NSD step reads them).
    let log = node_dir.join("xdpdns.log");
    let node = launch_logged(&config, &log);
    let first = FIRST_INSTANCES.min(instances);
    fill(&node, 0..first);
    let mut small = register_to_answer(&node, "small", PROBES);
    let cpu_before = cpu_time(node.child.0.id());
    let started = Instant::now();
    fill(&node, first..instances);
    let filled = started.elapsed();
    let cpu = cpu_time(node.child.0.id()) - cpu_before;
    let (sock, mut id) = (udp(), 0u16);
    let (limit, poll) = (Duration::from_secs(600), Duration::from_millis(5));
    let last = instance_name(instances - 1);
    await_answer(&sock, &mut id, node.dns, &last, started, limit, poll);
    println!(
        "local backend: {} registrations from {WRITERS} writers in {:.1} s ({:.0}/s), \
         the server's CPU {:.0} µs a registration ({:.2} cores)",
        instances - first,
        filled.as_secs_f64(),
        (instances - first) as f64 / filled.as_secs_f64(),
        cpu.as_secs_f64() * 1e6 / (instances - first) as f64,
        cpu.as_secs_f64() / filled.as_secs_f64(),
    );
    if stop == "killed" {
        // The hardest restart: the image and the IXFR journal's snapshot
        // lag the fill by whatever the last seconds changed.
        restart_after_kill(node, &config, &node_dir, instances, "right after the fill");
        return false;
    }
    std::thread::sleep(Duration::from_secs(4));
    // Once it holds still: at a million instances the zone image, the
    // IXFR journal's snapshot and the registry's compaction are still
    // being written 4 s after the last answer.
    let pss = servers::steady_memory(node.child.0.id()).0;
    println!(
        "memory of the local node: PSS {} MB ({:.2} KB per instance){}",
        pss / 1024,
        pss as f64 / instances as f64,
        match xdp {
            true => ", with XDP on",
            false => "",
        }
    );
    if xdp {
        let status = servers::wait_table_current(&config);
        let bytes = status["xdp"]["bytes"].as_f64().unwrap_or(0.0);
        println!(
            "kernel table of the local node: {} entries, {} MB by the kernel's accounting \
             ({:.2} KB per instance; with the PSS, {:.2} KB)",
            status["xdp"]["entries"],
            (bytes / f64::from(1 << 20)) as u64,
            bytes / 1024.0 / instances as f64,
            (bytes / 1024.0 + pss as f64) / instances as f64
        );
    }
    if stop == "memory" {
        return false;
    }
    let started = Instant::now();
    if stop == "answered" {
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        println!(
            "  timed registrations at full size from unix {:.3} s",
            unix.as_secs_f64()
        );
    }
    let mut large = register_to_answer(&node, "large", PROBES);
    if stop == "answered" {
        // For profiling the tail: when the slowest were sent.
        let mut at = Duration::ZERO;
        let mut sent: Vec<(Duration, usize, Duration)> = Vec::new();
        for (i, took) in large.iter().enumerate() {
            sent.push((*took, i, at));
            at += *took + Duration::from_millis(5);
        }
        sent.sort();
        for (took, i, at) in sent.iter().rev().take(15) {
            println!(
                "  slow: probe {i} sent at +{:.0} ms (of {:.0} ms): {:.2} ms",
                at.as_secs_f64() * 1e3,
                started.elapsed().as_secs_f64() * 1e3,
                took.as_secs_f64() * 1e3
            );
        }
    }
    let (p99_small, p99_large) = (p99(&mut small), p99(&mut large));
    report(
        &format!("register -> answered, one writer, at {first} instances"),
        &mut small,
    );
    report(
        &format!("register -> answered, one writer, at {instances} instances"),
        &mut large,
    );
    println!(
        "  p99 at {instances} instances / p99 at {first}: {:.2}x",
        p99_large.as_secs_f64() / p99_small.as_secs_f64()
    );
    if stop == "answered" {
        return false;
    }
    sustained_heartbeats(&node, instances, sustained);
    nsd_follows(&node, &node_dir, nsd_port, instances, &log);
    restart_after_kill(node, &config, &node_dir, instances, "after SIGKILL");
    true
}

/// Kills `node` (SIGKILL) and starts it again on its journal and zone
/// image, on the same addresses: DNS is timed while the start goes on.
fn restart_after_kill(node: Node, config: &Path, node_dir: &Path, instances: usize, when: &str) {
    let (dns, api) = (node.dns, node.api.clone());
    drop(node);
    let config = config.to_path_buf();
    let text = std::fs::read_to_string(&config).unwrap();
    let text = text
        .replacen(
            "listen = [\"127.0.0.1:0\"]",
            &format!("listen = [\"{dns}\"]"),
            1,
        )
        .replacen(
            "listen = \"127.0.0.1:0\"",
            &format!("listen = \"{}\"", api.trim_start_matches("http://")),
            1,
        );
    std::fs::write(&config, text).unwrap();
    let started = Instant::now();
    let restart_log = node_dir.join("restart.log");
    let starting = std::thread::spawn(move || {
        let node = launch_logged(&config, &restart_log);
        (node, started.elapsed())
    });
    let (sock, mut id) = (udp(), 0u16);
    let (limit, poll) = (Duration::from_secs(600), Duration::from_millis(2));
    let last = instance_name(instances - 1);
    await_answer(&sock, &mut id, dns, &last, started, limit, poll);
    let serving = started.elapsed();
    let (node, ready) = starting.join().expect("the restarted node starts");
    let mut rng = 0x1234_5678u64;
    for _ in 0..1000 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let name = instance_name(rng as usize % instances);
        assert!(
            answers(&sock, node.dns, &name, &mut id),
            "{name} lost in the restart"
        );
    }
    println!(
        "restart of the local node, killed {when}: answers the last instance {:.2} s (1,000 random instances answered after it; its zone from its image), ready file (API taking writes) {:.2} s",
        serving.as_secs_f64(),
        ready.as_secs_f64()
    );
    // What the start read of the IXFR journal: how far the image lagged.
    let log = std::fs::read_to_string(node_dir.join("restart.log")).unwrap_or_default();
    // And what the registry's start published ahead of its full derivation.
    let ahead = |l: &&str| l.contains("brought forward") || l.contains("published ahead");
    for line in log.lines().filter(ahead) {
        println!("  {}", line.trim());
    }
}

/// A paced heartbeat load: `rate` a second for `secs`.
#[derive(Clone, Copy)]
struct Sustained {
    rate: usize,
    secs: u64,
}

const SUSTAINED_CONNECTIONS: usize = 64;

/// Heartbeats at `load.rate` from [`SUSTAINED_CONNECTIONS`] threads, each
/// paced to its share (sent at once when behind, so the rate reached is
/// printed beside the target), while one thread asks for random
/// instances' A records 1,000 times a second.
fn sustained_heartbeats(node: &Node, instances: usize, load: Sustained) {
    let running = AtomicBool::new(true);
    let sent = AtomicUsize::new(0);
    let beats = Mutex::new(Vec::new());
    let mut dns = Vec::new();
    let started = Instant::now();
    let until = started + Duration::from_secs(load.secs);
    std::thread::scope(|scope| {
        for t in 0..SUSTAINED_CONNECTIONS {
            let (running, sent, beats) = (&running, &sent, &beats);
            scope.spawn(move || {
                let mut conn = Connection::open(&node.api);
                let every =
                    Duration::from_secs(1) * SUSTAINED_CONNECTIONS as u32 / load.rate as u32;
                let mut rng = 0x2545_f491_4f6c_dd1du64 ^ (t as u64) << 17;
                let mut next = Instant::now() + every * t as u32 / SUSTAINED_CONNECTIONS as u32;
                let mut mine = Vec::new();
                while running.load(Ordering::Relaxed) {
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let i = rng as usize % instances;
                    let t0 = Instant::now();
                    heartbeat(&mut conn, i);
                    mine.push(t0.elapsed());
                    sent.fetch_add(1, Ordering::Relaxed);
                    next += every;
                }
                beats.lock().unwrap().extend(mine);
            });
        }
        let (sock, mut id, mut rng) = (udp(), 0u16, 0x9e37_79b9u64);
        while Instant::now() < until {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let t0 = Instant::now();
            assert!(
                answers(
                    &sock,
                    node.dns,
                    &instance_name(rng as usize % instances),
                    &mut id
                ),
                "an instance went unanswered during heartbeats"
            );
            dns.push(t0.elapsed());
            std::thread::sleep(Duration::from_millis(1).saturating_sub(t0.elapsed()));
        }
        running.store(false, Ordering::Relaxed);
    });
    let spent = started.elapsed().as_secs_f64();
    let sent = sent.load(Ordering::Relaxed);
    println!(
        "local backend, sustained heartbeats: {sent} in {spent:.1} s ({:.0}/s, target {}/s, {SUSTAINED_CONNECTIONS} connections)",
        sent as f64 / spent,
        load.rate
    );
    report(
        "  heartbeat acknowledged (synced)",
        &mut beats.lock().unwrap(),
    );
    report("  DNS answer during heartbeats", &mut dns);
}

/// Room for the full-scale run in every node, the timed registrations
/// beside it included.
fn limits(instances: usize) -> String {
    let most = (instances + 2 * PROBES + FOLLOWED).max(200_000);
    format!("[registry.limits]\nmax_instances = {most}\nmax_instances_per_owner = {most}\n")
}

fn start_node(dir: &Path, etcd: &EtcdCluster, k: usize, instances: usize) -> Node {
    let node_dir: PathBuf = dir.join(format!("node{k}"));
    std::fs::create_dir_all(&node_dir).unwrap();
    let config = node_dir.join("xdpdns.toml");
    std::fs::write(
        &config,
        etcd.node_config("/scale/", "info", &limits(instances)),
    )
    .unwrap();
    launch(&config)
}

fn launch(config: &Path) -> Node {
    started(config, process::bench_stderr())
}

/// Starts the node of `config` with its log written to `log`.
fn launch_logged(config: &Path, log: &Path) -> Node {
    started(config, std::fs::File::create(log).unwrap().into())
}

fn started(config: &Path, stderr: std::process::Stdio) -> Node {
    let l = process::launch(&[], config, stderr, Duration::from_secs(300)).expect("xdpdns starts");
    Node {
        child: process::KillOnDrop(l.child),
        dns: l.dns[0],
        api: format!("http://{}", l.api.expect("registry API")),
    }
}

/// `n` registrations (`probe-{tag}-N`) through `node`, one at a time,
/// each timed from its request until `node` answers its name.
fn register_to_answer(node: &Node, tag: &str, n: usize) -> Vec<Duration> {
    let mut conn = Connection::open(&node.api);
    let (sock, mut id) = (udp(), 0u16);
    (0..n)
        .map(|i| {
            let id_text = format!("probe-{tag}-{i}");
            let name = Name::from_ascii(format!("{id_text}.inst.acme.sd.example.")).unwrap();
            let t = Instant::now();
            register(&mut conn, &id_text, i);
            while !answers(&sock, node.dns, &name, &mut id) {
                assert!(
                    t.elapsed() < Duration::from_secs(10),
                    "{name} never answered"
                );
                std::thread::sleep(Duration::from_micros(100));
            }
            let took = t.elapsed();
            // Apart, so each is the only change in flight.
            std::thread::sleep(Duration::from_millis(5));
            took
        })
        .collect()
}

fn p99(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[(samples.len() * 99).div_ceil(100) - 1]
}

/// NSD as the node's secondary (NOTIFY is already aimed at `port`): the
/// first AXFR of the whole zone timed until NSD answers the last
/// instance, then [`FOLLOWED`] registrations each timed until NSD
/// answers them, and the transfers the node logged.
fn nsd_follows(node: &Node, dir: &Path, port: u16, instances: usize, log: &Path) {
    let started = Instant::now();
    let _nsd = nsd_secondary(&dir.join("nsd"), port, node.dns);
    let nsd = SocketAddr::from(([127, 0, 0, 1], port));
    let (sock, mut id) = (udp(), 0u16);
    let (limit, poll) = (Duration::from_secs(900), Duration::from_millis(20));
    let last = instance_name(instances - 1);
    await_answer(&sock, &mut id, nsd, &last, started, limit, poll);
    println!(
        "NSD secondary: the first transfer of the zone ({instances} instances) answered in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let mut followed = Vec::new();
    for i in 0..FOLLOWED {
        let id_text = format!("followed-{i}");
        let name = Name::from_ascii(format!("{id_text}.inst.acme.sd.example.")).unwrap();
        // A connection for each: waiting for NSD can outlast the API's
        // 30 s for an idle connection's next request, when the NOTIFY
        // to a secondary that was down during the fill is backing off.
        let mut conn = Connection::open(&node.api);
        let t = Instant::now();
        register(&mut conn, &id_text, i);
        let (limit, poll) = (Duration::from_secs(60), Duration::from_millis(1));
        await_answer(&sock, &mut id, nsd, &name, t, limit, poll);
        followed.push(t.elapsed());
    }
    let text = std::fs::read_to_string(log).unwrap();
    let sent = |kind: &str| {
        text.lines()
            .filter(|l| l.contains("outgoing transfer") && l.contains(kind))
            .count()
    };
    let (axfr, ixfr) = (sent("kind=\"AXFR\""), sent("kind=\"IXFR\""));
    println!("  transfers the node sent NSD: {axfr} AXFR, {ixfr} IXFR");
    report(
        "  registration -> answered by NSD (NOTIFY, IXFR)",
        &mut followed,
    );
    assert!(
        ixfr > 0 && axfr == 1,
        "NSD did not follow by IXFR after its one AXFR ({axfr} AXFR, {ixfr} IXFR)"
    );
}

/// NSD as secondary of `sd.example.` from `primary`, on loopback `port`.
fn nsd_secondary(dir: &Path, port: u16, primary: SocketAddr) -> process::KillOnDrop {
    std::fs::create_dir_all(dir).unwrap();
    let d = dir.display();
    let conf = dir.join("nsd.conf");
    // xfrd-reload-timeout 0: NSD otherwise serves a transfer at most once
    // a second, which would hide the primary's own latency.
    std::fs::write(
        &conf,
        format!(
            "server:\n    ip-address: 127.0.0.1@{port}\n    do-ip6: no\n    username: \"\"\n\
             \x20   chroot: \"\"\n    zonesdir: \"{d}\"\n    database: \"\"\n\
             \x20   pidfile: \"{d}/nsd.pid\"\n    xfrdfile: \"{d}/xfrd.state\"\n    xfrdir: \"{d}\"\n\
             \x20   zonelistfile: \"{d}/zone.list\"\n    server-count: 1\n    verbosity: 1\n\
             \x20   xfrd-reload-timeout: 0\n\
             remote-control:\n    control-enable: no\n\
             zone:\n    name: sd.example.\n    zonefile: sd.example.zone\n\
             \x20   request-xfr: {}@{} NOKEY\n    allow-notify: 127.0.0.1 NOKEY\n",
            primary.ip(),
            primary.port()
        ),
    )
    .unwrap();
    // Debian installs it in /usr/sbin, which a user's PATH may lack.
    let nsd = ["/usr/sbin/nsd", "nsd"]
        .into_iter()
        .find(|p| !p.starts_with('/') || Path::new(p).is_file())
        .unwrap();
    let child = std::process::Command::new(nsd)
        .args(["-d", "-c"])
        .arg(&conf)
        .stdout(std::process::Stdio::null())
        .stderr(process::bench_stderr())
        .spawn()
        .expect("nsd (installed by cargo xtask test) starts");
    process::KillOnDrop(child)
}

/// Registrations of instances `range` through `node`, from [`WRITERS`]
/// threads at once.
fn fill(node: &Node, range: std::ops::Range<usize>) {
    let n = range.end;
    let next = Arc::new(AtomicUsize::new(range.start));
    std::thread::scope(|scope| {
        for _ in 0..WRITERS {
            let next = next.clone();
            scope.spawn(move || {
                let mut conn = Connection::open(&node.api);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    register(&mut conn, &format!("i{i}"), i);
                }
            });
        }
    });
}

/// Paced heartbeats from thread `t` to random instances through `api`.
fn heartbeats(
    t: usize,
    api: &str,
    instances: usize,
    beating: &AtomicBool,
    sent: &AtomicUsize,
    unavailable: &AtomicUsize,
    latency: &Mutex<Vec<Duration>>,
) {
    let mut conn = Connection::open(api);
    let every = Duration::from_secs(1) * HEARTBEAT_THREADS as u32 / HEARTBEATS_PER_SEC as u32;
    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ t as u64;
    let mut next = Instant::now();
    let mut mine = Vec::new();
    while beating.load(Ordering::Relaxed) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let i = rng as usize % instances;
        let start = Instant::now();
        // With etcd a renewal can time out (503): counted, not fatal.
        match beat(&mut conn, i) {
            200 => mine.push(start.elapsed()),
            503 => {
                unavailable.fetch_add(1, Ordering::Relaxed);
            }
            other => panic!("heartbeat of i{i}: status {other}"),
        }
        sent.fetch_add(1, Ordering::Relaxed);
        next += every;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    latency.lock().unwrap().extend(mine);
}

/// Renews instance `i`'s lease through `conn`.
fn heartbeat(conn: &mut Connection, i: usize) {
    assert_eq!(beat(conn, i), 200, "heartbeat of i{i}");
}

/// Renews instance `i`'s lease through `conn`: the status.
fn beat(conn: &mut Connection, i: usize) -> u16 {
    conn.call("POST", &format!("/v1/instances/i{i}/heartbeat"), "t", "")
}

/// With `XDPDNS_SCALE_XDP=1` (root), the local node runs with XDP in
/// generic mode on a veth pair in a network namespace of the bench's own,
/// so its memory is read with the kernel table compiled and installed.
/// The bench's main thread enters the namespace first: the threads it
/// starts and the servers it spawns inherit it, and all their traffic
/// stays on its loopback (the kernel table answers on the veth, which
/// no query of the bench crosses: what it measures is memory).
struct XdpNamespace(String);

impl XdpNamespace {
    fn enter() -> XdpNamespace {
        use std::os::fd::AsRawFd;
        // SAFETY: geteuid cannot fail.
        assert_eq!(
            unsafe { libc::geteuid() },
            0,
            "XDPDNS_SCALE_XDP=1 needs root"
        );
        let name = format!("xdpdns-scale-{}", std::process::id());
        let ip = |args: &str| {
            let ok = std::process::Command::new("sh")
                .args(["-c", &format!("ip {args}")])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "ip {args}");
        };
        ip(&format!("netns add {name}"));
        let ns = XdpNamespace(name.clone());
        ip(&format!("-n {name} link add xs0 type veth peer name xs1"));
        for dev in ["xs0", "xs1", "lo"] {
            ip(&format!("-n {name} link set dev {dev} up"));
        }
        let file = std::fs::File::open(format!("/run/netns/{name}")).unwrap();
        // SAFETY: setns on this thread only, with a namespace fd we hold.
        let entered = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(entered, 0, "setns {name}");
        ns
    }

    /// The node's configuration for XDP on the pair's first end, its
    /// table sized for every instance's two entries (its address, its
    /// NODATA for other types), with room for the timed registrations.
    fn config(node_dir: &Path, instances: usize) -> String {
        let capacity = 2 * instances + 100_000;
        format!(
            "[control]\nsocket = \"{}\"\n\
             [xdp]\ninterfaces = [\"xs0\"]\nmode = \"generic\"\ncapacity = {capacity}\n",
            node_dir.join("ctl.sock").display()
        )
    }
}

impl Drop for XdpNamespace {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.0])
            .status();
    }
}

fn instance_name(i: usize) -> Name {
    Name::from_ascii(format!("i{i}.inst.acme.sd.example.")).unwrap()
}

/// Registers instance `id` (address from `i`, one of 1,000 services of
/// 100 members each at full scale) through `conn`.
fn register(conn: &mut Connection, id: &str, i: usize) {
    let body = format!(
        r#"{{"owner":"acme","addresses":["10.{}.{}.{}"],"services":["s{}"],"lease_secs":3600}}"#,
        i >> 16 & 255,
        i >> 8 & 255,
        i & 255,
        i % 1000
    );
    let status = conn.call("PUT", &format!("/v1/instances/{id}"), "t", &body);
    assert_eq!(status, 200, "registration of {id}");
}

/// CPU time (user and system) process `pid` has used, its threads'
/// included: what a fill costs the server, steadier than its rate on a
/// shared host.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the node's stat");
    // Fields after the command's closing parenthesis: utime and stime are
    // the 14th and 15th of the line, the 12th and 13th after it.
    let after = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_millis(ticks * 1000 / hz)
}

fn udp() -> UdpSocket {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    sock
}

/// Asks `dns` for `name` every `poll` until it answers; fails once
/// `limit` has passed since `since`.
fn await_answer(
    sock: &UdpSocket,
    id: &mut u16,
    dns: SocketAddr,
    name: &Name,
    since: Instant,
    limit: Duration,
    poll: Duration,
) {
    while !answers(sock, dns, name, id) {
        assert!(since.elapsed() < limit, "{dns} never answered {name}");
        std::thread::sleep(poll);
    }
}

/// Whether `dns` answers an A query for `name` with a record.
fn answers(sock: &UdpSocket, dns: SocketAddr, name: &Name, id: &mut u16) -> bool {
    *id = id.wrapping_add(1);
    let mut q = Message::query();
    q.add_query(Query::query(name.clone(), RecordType::A));
    q.metadata.id = *id;
    sock.send_to(&q.to_vec().unwrap(), dns).unwrap();
    let mut buf = [0u8; 1500];
    loop {
        match sock.recv_from(&mut buf) {
            Ok((len, _)) => match Message::from_vec(&buf[..len]) {
                Ok(m) if m.metadata.id == *id => return !m.answers.is_empty(),
                _ => continue,
            },
            Err(_) => return false,
        }
    }
}
