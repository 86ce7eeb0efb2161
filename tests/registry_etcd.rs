//! The registry in etcd, end to end: a real three-member etcd cluster on
//! loopback and three xdpdns nodes sharing it. A registration through any
//! node is answered by every node, with the same serial; a node killed
//! with `kill -9` loses nothing acknowledged; an instance whose heartbeats
//! stop leaves every node after its lease even when the node it
//! registered through is dead.

use crate::support;

use std::time::{Duration, Instant};

use hickory_proto::rr::{RData, RecordType};

use support::peers::{log_lines, EtcdCluster};
use support::{eventually, http, Server};

const TOKEN: &str = "etcd-test-token";
const SVC: &str = "web.svc.acme.sd.example.";

fn node_config(cluster: &EtcdCluster, prefix: &str) -> String {
    format!(
        r#"
[transfer]
allow_transfer = [{{ from = ["127.0.0.1/32"] }}]

[registry]
listen = "127.0.0.1:0"
token = "{TOKEN}"
data_dir = "registry"
backend = "etcd"
batch_delay_ms = 2
require_opt_in = false
ns = ["ns1.example.com."]
hostmaster = "hostmaster.example.com."

[registry.etcd]
endpoints = {endpoints}
prefix = "{prefix}"

[[registry.zone]]
name = "sd.example."
networks = ["*"]

[[registry.zone]]
name = "10.in-addr.arpa."
"#,
        endpoints = cluster.toml_endpoints()
    )
}

fn start_node(cluster: &EtcdCluster, prefix: &str) -> Server {
    Server::start_example("", &node_config(cluster, prefix))
}

/// Writes that arrive together go to etcd at once, yet never past a
/// limit: of 24 concurrent registrations for an owner allowed 5, exactly
/// 5 are taken, and a burst of distinct instances within the limits are
/// all taken and all served.
#[test]
fn concurrent_writes_go_together_but_never_past_a_limit() {
    let cluster = EtcdCluster::start(1);
    let config =
        node_config(&cluster, "/burst/") + "\n[registry.limits]\nmax_instances_per_owner = 5\n";
    let node = Server::start_example("", &config);
    let codes: Vec<u16> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..24u8)
            .map(|i| {
                let node = &node;
                scope.spawn(move || try_put(node, &format!("w{i}"), i + 1, 60).0)
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert_eq!(codes.iter().filter(|c| **c == 200).count(), 5, "{codes:?}");
    assert_eq!(codes.iter().filter(|c| **c == 422).count(), 19, "{codes:?}");
    let keys = cluster
        .etcdctl(0, &["get", "/burst/instances/", "--prefix", "--keys-only"])
        .unwrap();
    assert_eq!(keys.lines().filter(|l| !l.is_empty()).count(), 5, "{keys}");
    assert_eq!(addresses(&node, SVC).len(), 5);
}

/// Hysteresis runs on every node from the shared state: with members
/// reported down through one node, both nodes list the same members at
/// every step, and each withdrawal is written once (a compare-and-set that
/// one node wins), with the time it was made stored in etcd.
#[test]
fn both_nodes_list_the_same_members_through_hysteresis() {
    let cluster = EtcdCluster::start(1);
    let config = node_config(&cluster, "/hyst/").replace(
        "hostmaster = \"hostmaster.example.com.\"",
        "hostmaster = \"hostmaster.example.com.\"\n\
         health = { window_ms = 3000, last_member_delay_ms = 600000 }",
    );
    let nodes = [
        Server::start_example("", &config),
        Server::start_example("", &config),
    ];
    for i in 1..=3u8 {
        assert_eq!(put(&nodes[0], &format!("m{i}"), i, 60), 200);
    }
    let all = members(&["10.0.0.1", "10.0.0.2", "10.0.0.3"]);
    for n in &nodes {
        assert!(eventually(Duration::from_secs(5), || addresses(n, SVC) == all));
    }
    // Two of three report down through node 2: a third (one) may leave
    // per window, the other waits for the window to pass.
    for id in ["m1", "m2"] {
        let (code, body) = http(
            "PUT",
            &format!("{}/v1/instances/{id}/status", nodes[1].api()),
            Some(TOKEN),
            Some(r#"{"status":"down"}"#),
        );
        assert_eq!(code, 200, "{body}");
    }
    let listed = |n: &Server| addresses(n, SVC);
    assert!(eventually(Duration::from_secs(2), || listed(&nodes[0])
        .len()
        == 2));
    let first = listed(&nodes[0]);
    assert!(eventually(Duration::from_secs(2), || listed(&nodes[1]) == first));
    assert!(first.contains(&"10.0.0.3".to_string()), "{first:?}");
    // Within the window both still list two.
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(listed(&nodes[0]), first);
    assert_eq!(listed(&nodes[1]), first);
    // After it, the second leaves on both.
    let last = members(&["10.0.0.3"]);
    for n in &nodes {
        assert!(eventually(Duration::from_secs(6), || listed(n) == last));
    }
    // Each withdrawal is in etcd once, with its time.
    for id in ["m1", "m2"] {
        let value = cluster
            .etcdctl(
                0,
                &[
                    "get",
                    &format!("/hyst/instances/{id}"),
                    "--print-value-only",
                ],
            )
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(value.trim()).unwrap();
        let withdrawn = v["withdrawn"].as_object().expect("withdrawn map");
        assert_eq!(withdrawn.len(), 1, "{value}");
    }
    // Written by whichever node won each compare-and-set, and only once.
    let withdrawals: usize = nodes
        .iter()
        .map(|n| log_lines(&n.log(), &["withdrawn from service"]).len())
        .sum();
    assert_eq!(withdrawals, 2, "{}\n{}", nodes[0].log(), nodes[1].log());
}

/// etcd over TLS with client certificates: a node with the CA and a client
/// certificate registers and answers; one without the certificate is
/// refused by etcd (it serves what it has and answers writes with 503),
/// and one that does not trust the CA refuses etcd.
#[test]
fn a_node_reaches_etcd_over_tls_with_a_client_certificate() {
    let cluster = EtcdCluster::start_tls();
    let pki = cluster.tls.as_ref().unwrap();
    let with = |extra: &str| {
        let config = node_config(&cluster, "/tls/").replace(
            "prefix = \"/tls/\"",
            &format!("prefix = \"/tls/\"\ntimeout_ms = 500\n{extra}"),
        );
        Server::start_example("", &config)
    };
    let ca = format!("ca_file = \"{}\"", pki.file("ca.pem"));
    let identity = format!(
        "cert_file = \"{}\"\nkey_file = \"{}\"",
        pki.file("client.pem"),
        pki.file("client-key.pem")
    );
    let node = with(&format!("{ca}\n{identity}"));
    assert_eq!(put(&node, "web-1", 1, 60), 200);
    assert!(eventually(Duration::from_secs(5), || addresses(&node, SVC)
        == ["10.0.0.1"]));
    assert!(cluster
        .etcdctl(0, &["get", "/tls/instances/web-1", "--print-value-only"])
        .is_some_and(|v| v.contains("10.0.0.1")));

    let anonymous = with(&ca);
    assert_eq!(put(&anonymous, "web-2", 2, 60), 503);
    let trusting_nobody = with(&identity);
    assert_eq!(put(&trusting_nobody, "web-3", 3, 60), 503);
    for refused in [&anonymous, &trusting_nobody] {
        let log = refused.log();
        assert!(log.contains("etcd unreachable at start"), "{log}");
    }
    assert_eq!(addresses(&node, SVC), ["10.0.0.1"]);
}

fn put(s: &Server, id: &str, last: u8, lease_secs: u32) -> u16 {
    let (code, reply) = try_put(s, id, last, lease_secs);
    assert!(code == 200 || code == 503, "{code} {reply}");
    code
}

fn try_put(s: &Server, id: &str, last: u8, lease_secs: u32) -> (u16, serde_json::Value) {
    let body = format!(
        r#"{{"owner":"acme","addresses":["10.0.0.{last}"],"services":["web:8080"],"lease_secs":{lease_secs}}}"#
    );
    http(
        "PUT",
        &format!("{}/v1/instances/{id}", s.api()),
        Some(TOKEN),
        Some(&body),
    )
}

/// The A addresses of `name`, over TCP (40 members do not fit a plain
/// UDP answer).
fn addresses(s: &Server, name: &str) -> Vec<String> {
    a_records(&s.tcp(name, RecordType::A))
}

/// The A addresses in an answer, sorted.
fn a_records(m: &hickory_proto::op::Message) -> Vec<String> {
    let mut v: Vec<String> = m
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(a.to_string()),
            _ => None,
        })
        .collect();
    v.sort();
    v
}

fn serial(s: &Server) -> Option<u32> {
    s.udp("sd.example.", RecordType::SOA)
        .answers
        .iter()
        .find_map(|r| match &r.data {
            RData::SOA(soa) => Some(soa.serial),
            _ => None,
        })
}

fn members(list: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = list.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

#[test]
fn every_node_answers_every_registration_and_loses_nothing_to_kill_9() {
    let cluster = EtcdCluster::start(3);
    let prefix = "/xdpdns-test/";
    let mut nodes: Vec<Server> = (0..3).map(|_| start_node(&cluster, prefix)).collect();

    // Through node 0: answered by all three, each timed from the
    // acknowledgement.
    let began = Instant::now();
    assert_eq!(put(&nodes[0], "web-1", 1, 60), 200);
    for (i, n) in nodes.iter().enumerate() {
        assert!(
            eventually(Duration::from_secs(5), || addresses(n, SVC) == ["10.0.0.1"]),
            "node {i} never answered web-1:\n{}",
            n.log()
        );
        eprintln!("node {i}: registration to answer {:?}", began.elapsed());
    }
    // The same state has the same serial on every node.
    assert!(
        eventually(Duration::from_secs(5), || {
            let s: Vec<_> = nodes.iter().map(serial).collect();
            s[0].is_some() && s.iter().all(|x| *x == s[0])
        }),
        "serials differ: {:?}",
        nodes.iter().map(serial).collect::<Vec<_>>()
    );

    // Node 0 dies; writes go on through node 1, every acknowledged one
    // served by the survivors.
    nodes[0].signal("KILL");
    let _ = nodes[0].child.wait();
    for (k, id) in ["web-2", "web-3", "web-4"].iter().enumerate() {
        assert_eq!(put(&nodes[1], id, 2 + k as u8, 60), 200);
    }
    let want = members(&["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]);
    for i in [1, 2] {
        assert!(
            eventually(Duration::from_secs(5), || addresses(&nodes[i], SVC) == want),
            "node {i}: {:?}",
            addresses(&nodes[i], SVC)
        );
    }
    // Started again, the killed node reads them all.
    nodes[0].start_again();
    assert!(
        eventually(Duration::from_secs(10), || addresses(&nodes[0], SVC)
            == want),
        "restarted node: {:?}\n{}",
        addresses(&nodes[0], SVC),
        nodes[0].log()
    );

    // An instance registered through node 2 with a 2 s lease, then node 2
    // killed: no one heartbeats it, etcd expires it, every other node
    // drops it.
    assert_eq!(put(&nodes[2], "short", 9, 2), 200);
    let with_short = members(&["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.9"]);
    assert!(eventually(Duration::from_secs(5), || addresses(
        &nodes[0], SVC
    ) == with_short));
    nodes[2].signal("KILL");
    let _ = nodes[2].child.wait();
    let killed = Instant::now();
    for i in [0, 1] {
        assert!(
            eventually(Duration::from_secs(15), || addresses(&nodes[i], SVC)
                == want),
            "node {i} still lists the expired instance: {:?}",
            addresses(&nodes[i], SVC)
        );
    }
    eprintln!(
        "lease of 2 s: gone from the survivors {:?} after the kill",
        killed.elapsed()
    );

    // A deregistration through one node leaves every node.
    deregister(&nodes[1], "web-4");
    let three = members(&["10.0.0.1", "10.0.0.2", "10.0.0.3"]);
    for i in [0, 1] {
        assert!(eventually(Duration::from_secs(5), || addresses(
            &nodes[i], SVC
        ) == three));
    }
    // Node 0 saw both removals in its watch, and tells them apart.
    let log = nodes[0].log();
    assert_eq!(
        log_lines(
            &log,
            &["instance removed", "instance=short", "LeaseExpired"]
        )
        .len(),
        1,
        "{log}"
    );
    assert_eq!(
        log_lines(
            &log,
            &["instance removed", "instance=web-4", "Deregistered"]
        )
        .len(),
        1,
        "{log}"
    );
}

/// Without etcd a node serves what it has and refuses writes with 503;
/// once etcd is back it takes writes and follows again.
#[test]
fn a_node_cut_off_from_etcd_serves_what_it_has_and_refuses_writes() {
    let mut cluster = EtcdCluster::start(1);
    let node = start_node(&cluster, "/cutoff/");
    assert_eq!(put(&node, "web-1", 1, 60), 200);
    assert!(eventually(Duration::from_secs(5), || addresses(&node, SVC)
        == ["10.0.0.1"]));

    // Heartbeats (etcd lease keep-alives) hold a 2 s lease past its time.
    assert_eq!(put(&node, "beat", 7, 2), 200);
    for _ in 0..6 {
        std::thread::sleep(Duration::from_millis(500));
        let (code, body) = http(
            "POST",
            &format!("{}/v1/instances/beat/heartbeat", node.api()),
            Some(TOKEN),
            None,
        );
        assert_eq!(code, 200, "{body}");
    }
    assert_eq!(addresses(&node, SVC), ["10.0.0.1", "10.0.0.7"]);
    assert!(
        eventually(Duration::from_secs(10), || addresses(&node, SVC)
            == ["10.0.0.1"]),
        "the lease outlived its heartbeats"
    );

    cluster.members[0].stop(libc::SIGKILL);
    assert!(
        eventually(Duration::from_secs(15), || put(&node, "web-2", 2, 60)
            == 503),
        "writes still accepted without etcd"
    );
    assert_eq!(addresses(&node, SVC), ["10.0.0.1"], "still serving");

    cluster.restart(0);
    assert!(
        eventually(Duration::from_secs(20), || put(&node, "web-2", 2, 60)
            == 200),
        "writes never accepted again:\n{}",
        node.log()
    );
    assert!(eventually(Duration::from_secs(5), || addresses(&node, SVC)
        == members(&["10.0.0.1", "10.0.0.2"])));
}

/// Through `node` (which already holds `10.0.0.1`): registers n2..n11,
/// deregisters n2..n5, then compacts etcd at its revision. Returns the
/// members left.
fn churn_and_compact(node: &Server, cluster: &EtcdCluster) -> Vec<String> {
    for k in 2..12u8 {
        assert_eq!(put(node, &format!("n{k}"), k, 120), 200);
    }
    for k in 2..6u8 {
        deregister(node, &format!("n{k}"));
    }
    let revision = cluster.revision(0).to_string();
    cluster
        .etcdctl(0, &["compaction", &revision])
        .expect("etcdctl compaction");
    let mut want = vec!["10.0.0.1".to_string()];
    want.extend((6..12).map(|k| format!("10.0.0.{k}")));
    want.sort();
    want
}

/// Deregisters `id` through `node`.
fn deregister(node: &Server, id: &str) {
    let (code, body) = http(
        "DELETE",
        &format!("{}/v1/instances/{id}", node.api()),
        Some(TOKEN),
        None,
    );
    assert!(code == 200 || code == 204, "{code} {body}");
}

/// Registers `id` through `node`, retrying (bounded) while the cluster
/// refuses writes, as an agent does; whether it was acknowledged.
fn put_until_acknowledged(node: &Server, id: &str, last: u8) -> bool {
    eventually(Duration::from_secs(15), || put(node, id, last, 120) == 200)
}

/// The sorted AXFR of `zone` from `node` (dig; panics unless complete).
fn axfr(node: &Server, zone: &str) -> Vec<String> {
    let out = std::process::Command::new("dig")
        .args([
            "@127.0.0.1",
            "-p",
            &node.addr.port().to_string(),
            zone,
            "AXFR",
            "+nocmd",
            "+nostats",
            "+time=5",
            "+tries=1",
        ])
        .output()
        .expect("dig");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with(';'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    lines.sort();
    let soas = lines
        .iter()
        .filter(|l| l.split(' ').nth(3) == Some("SOA"))
        .count();
    assert_eq!(soas, 2, "AXFR of {zone} from {}:\n{text}", node.addr);
    lines
}

/// Both nodes transfer the same `sd.example.` (the lines that differ
/// are shown otherwise).
fn same_zone(a: &Server, b: &Server) {
    let (x, y) = (axfr(a, "sd.example."), axfr(b, "sd.example."));
    let only_a: Vec<_> = x.iter().filter(|l| !y.contains(l)).collect();
    let only_b: Vec<_> = y.iter().filter(|l| !x.contains(l)).collect();
    assert!(
        only_a.is_empty() && only_b.is_empty(),
        "zones differ:\n{only_a:#?}\n{only_b:#?}"
    );
}

/// The etcd leader killed in the middle of a stream of registrations:
/// writes pause and go on, nothing acknowledged is lost, and every node
/// ends with the same zone, serial included.
#[test]
fn the_etcd_leader_dies_during_a_stream_of_writes_and_nothing_is_lost() {
    let mut cluster = EtcdCluster::start(3);
    let nodes: Vec<Server> = (0..3).map(|_| start_node(&cluster, "/leader/")).collect();
    let mut acknowledged = Vec::new();
    for k in 0..40u8 {
        if k == 15 {
            let leader = cluster.leader();
            cluster.members[leader].stop(libc::SIGKILL);
        }
        let id = format!("w{k}");
        assert!(
            put_until_acknowledged(&nodes[usize::from(k) % 3], &id, 10 + k),
            "{id} never acknowledged"
        );
        acknowledged.push(format!("10.0.0.{}", 10 + k));
    }
    acknowledged.sort();
    for (i, n) in nodes.iter().enumerate() {
        assert!(
            eventually(Duration::from_secs(10), || addresses(n, SVC)
                == acknowledged),
            "node {i} lost acknowledged writes: {:?}\n{}",
            addresses(n, SVC),
            n.log()
        );
    }
    let first = axfr(&nodes[0], "sd.example.");
    for n in &nodes[1..] {
        assert!(
            eventually(Duration::from_secs(5), || axfr(n, "sd.example.") == first),
            "the nodes' zones differ"
        );
    }
    assert!(first.iter().any(|l| l.contains("10.0.0.49")));
}

/// A node paused across a compaction (and an etcd restart, so its watch
/// must be started again from a revision etcd no longer has) reads the
/// registry again and converges.
#[test]
fn a_node_paused_across_a_compaction_converges() {
    let mut cluster = EtcdCluster::start(1);
    let nodes: Vec<Server> = (0..2).map(|_| start_node(&cluster, "/compact/")).collect();
    assert_eq!(put(&nodes[0], "keep", 1, 120), 200);
    assert!(eventually(Duration::from_secs(5), || addresses(
        &nodes[1], SVC
    ) == ["10.0.0.1"]));

    nodes[1].signal("STOP");
    let want = churn_and_compact(&nodes[0], &cluster);
    cluster.restart(0);
    nodes[1].signal("CONT");

    for (i, n) in nodes.iter().enumerate() {
        assert!(
            eventually(Duration::from_secs(20), || addresses(n, SVC) == want),
            "node {i}: {:?}\n{}",
            addresses(n, SVC),
            n.log()
        );
    }
    same_zone(&nodes[0], &nodes[1]);
}

/// A node partitioned from etcd (its connections cut by a proxy) keeps
/// answering, refuses writes with 503, and after the partition heals
/// converges, here from a revision etcd compacted meanwhile: it reads
/// the registry again and applies the difference.
#[test]
fn a_partitioned_node_keeps_answering_refuses_writes_and_converges_after_compaction() {
    let cluster = EtcdCluster::start(1);
    let etcd: std::net::SocketAddr = cluster.endpoints[0]
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let proxy = support::peers::TcpProxy::start(etcd);
    let direct = start_node(&cluster, "/partition/");
    let proxied_config = node_config(&cluster, "/partition/").replace(
        &cluster.toml_endpoints(),
        &format!("[\"http://{}\"]", proxy.addr),
    );
    let cut_off = Server::start_example("", &proxied_config);
    assert_eq!(put(&direct, "keep", 1, 120), 200);
    assert!(eventually(Duration::from_secs(5), || addresses(
        &cut_off, SVC
    ) == ["10.0.0.1"]));

    proxy.cut();
    assert!(
        eventually(Duration::from_secs(15), || put(&cut_off, "mine", 99, 120)
            == 503),
        "a partitioned node still takes writes"
    );
    assert_eq!(addresses(&cut_off, SVC), ["10.0.0.1"], "and still answers");
    assert_eq!(zones_stale(&cut_off), Some(true), "and says it is stale");
    assert_eq!(zones_stale(&direct), Some(false));
    let want = churn_and_compact(&direct, &cluster);

    proxy.heal();
    assert!(
        eventually(Duration::from_secs(20), || addresses(&cut_off, SVC) == want),
        "{:?}\n{}",
        addresses(&cut_off, SVC),
        cut_off.log()
    );
    assert!(
        cut_off.wait_log(
            "compacted past the last revision applied",
            Duration::from_secs(5)
        ),
        "{}",
        cut_off.log()
    );
    same_zone(&direct, &cut_off);
    assert_eq!(serial(&direct), serial(&cut_off));
    assert!(
        eventually(Duration::from_secs(10), || put(&cut_off, "mine", 99, 120)
            == 200),
        "writes never accepted again"
    );
    assert_eq!(zones_stale(&cut_off), Some(false));
}

/// `stale` of `sd.example.` in `GET /v1/zones` (the backend is etcd).
fn zones_stale(node: &Server) -> Option<bool> {
    let (code, zones) = http(
        "GET",
        &format!("{}/v1/zones", node.api()),
        Some(TOKEN),
        None,
    );
    assert_eq!(code, 200);
    let zone = zones
        .as_array()?
        .iter()
        .find(|z| z["name"] == "sd.example.")?;
    assert_eq!(zone["backend"], "etcd");
    zone["stale"].as_bool()
}

/// An NSD secondary follows node 1 by IXFR, is switched to node 2, and
/// stays correct: the nodes serve the same serial for the same state, so
/// node 2 takes over where node 1 left off.
#[test]
fn an_nsd_secondary_switched_between_nodes_stays_correct() {
    use support::peers::{free_port, nsd_secondary, Proc};
    let cluster = EtcdCluster::start(1);
    // Short SOA refresh: NSD polls the node it follows.
    let config = node_config(&cluster, "/nsd/").replace(
        "hostmaster = \"hostmaster.example.com.\"",
        "hostmaster = \"hostmaster.example.com.\"\nsoa_timers = [1, 1, 86400, 30]",
    );
    let a = Server::start_example("", &config);
    let b = Server::start_example("", &config);
    assert_eq!(put(&a, "w1", 1, 120), 200);
    let port = free_port();
    let mut nsd = nsd_secondary("sd.example.", port, a.addr.port());
    let nsd_addresses = || -> Vec<String> {
        support::udp_query(
            support::peers::loopback(port),
            &support::query(SVC, RecordType::A, None),
        )
        .map_or_else(Vec::new, |m| a_records(&m))
    };
    assert!(
        eventually(Duration::from_secs(15), || nsd_addresses() == ["10.0.0.1"]),
        "NSD never followed node 1:\n{}",
        nsd.log()
    );
    assert_eq!(put(&a, "w2", 2, 120), 200);
    assert!(
        eventually(Duration::from_secs(15), || nsd_addresses()
            == ["10.0.0.1", "10.0.0.2"]),
        "NSD never took node 1's change:\n{}",
        nsd.log()
    );
    assert!(eventually(Duration::from_secs(5), || serial(&a) == serial(&b)));
    let before = serial(&a).unwrap();

    // Switched to node 2 (same directory: NSD keeps what it holds).
    nsd.stop(libc::SIGTERM);
    let dir = std::mem::replace(&mut nsd.dir, support::TempDir(std::path::PathBuf::new()));
    let conf = nsd.conf.clone();
    let text = std::fs::read_to_string(&conf).unwrap().replace(
        &format!("@{}", a.addr.port()),
        &format!("@{}", b.addr.port()),
    );
    std::fs::write(&conf, text).unwrap();
    let c = conf.display().to_string();
    let nsd = Proc::spawn("nsd", dir, conf, "nsd", &["-d", "-c", &c]);
    assert_eq!(put(&b, "w3", 3, 120), 200);
    assert!(
        eventually(Duration::from_secs(15), || nsd_addresses()
            == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]),
        "NSD never took node 2's change:\n{}",
        nsd.log()
    );
    let nsd_serial = support::udp_query(
        support::peers::loopback(port),
        &support::query("sd.example.", RecordType::SOA, None),
    )
    .and_then(|m| {
        m.answers.iter().find_map(|r| match &r.data {
            RData::SOA(soa) => Some(soa.serial),
            _ => None,
        })
    });
    assert_eq!(nsd_serial, serial(&b));
    // NSD went on from node 1's serial (its saved state), not from zero.
    let after = nsd_serial.unwrap();
    assert!(
        nsd.wait_log(
            &[&format!("serial {before} is updated to {after}")],
            Duration::from_secs(5)
        ),
        "{}",
        nsd.log()
    );
    assert_eq!(serial(&a), serial(&b));
}
