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

fn put(s: &Server, id: &str, last: u8, lease_secs: u32) -> u16 {
    let body = format!(
        r#"{{"owner":"acme","addresses":["10.0.0.{last}"],"services":["web:8080"],"lease_secs":{lease_secs}}}"#
    );
    let (code, reply) = http(
        "PUT",
        &format!("{}/v1/instances/{id}", s.api()),
        Some(TOKEN),
        Some(&body),
    );
    assert!(code == 200 || code == 503, "{code} {reply}");
    code
}

fn addresses(s: &Server, name: &str) -> Vec<String> {
    let mut v: Vec<String> = s
        .udp(name, RecordType::A)
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
    let (code, body) = http(
        "DELETE",
        &format!("{}/v1/instances/web-4", nodes[1].api()),
        Some(TOKEN),
        None,
    );
    assert!(code == 200 || code == 204, "{code} {body}");
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
