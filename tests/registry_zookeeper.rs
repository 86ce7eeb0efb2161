//! The ZooKeeper source, end to end, against a real ZooKeeper (Debian's):
//! nodes written exactly as the Registrar README shows them are answered
//! as it says, over UDP and TCP; the same instances registered through
//! the HTTP API's Binder form give the same answers; a Registrar whose
//! process dies leaves DNS as soon as ZooKeeper expires its session; and
//! the faults (ZooKeeper down, at start too; a lost leader; a partition
//! longer than the session; malformed records; a whole service deleted
//! with hysteresis on) keep the last good state served.

use crate::support;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, Record, RecordType};

use support::zookeeper::{Partition, Zk, ZkEnsemble};
use support::{eventually, http, Server};

const TOKEN: &str = "zookeeper-test-token";

fn config(servers: &str, extra: &str) -> String {
    format!(
        r#"
[registry]
listen = "127.0.0.1:0"
token = "{TOKEN}"
data_dir = "registry"
require_opt_in = false
ns = ["ns1.example.com."]
hostmaster = "hostmaster.example.com."

[registry.health]
window_ms = 1500
last_member_delay_ms = 3000

[registry.zookeeper]
servers = {servers}
session_timeout_ms = 1000
domains = ["joyent.us"]
{extra}

[[registry.zone]]
name = "joyent.us."
"#
    )
}

/// The README's service record for authcache.
const AUTHCACHE_SERVICE: &str = r#"{"type":"service","service":{"type":"service",
  "service":{"srvce":"_redis","proto":"_tcp","port":6379,"ttl":60},"ttl":60}}"#;
const EXAMPLE_SERVICE: &str = r#"{"type":"service","service":{"type":"service",
  "service":{"srvce":"_http","proto":"_tcp","port":80}}}"#;
const TYPES_SERVICE: &str = r#"{"type":"service","service":{"type":"service",
  "service":{"srvce":"_x","proto":"_tcp","port":1000,"ttl":20}}}"#;

const AUTHCACHE: &str = "/us/joyent/emy-10/authcache";
const HOST_62: &str = "a2674d3b-a9c4-46bc-a835-b6ce21d522c2";
const HOST_67: &str = "a4ae094d-da07-4911-94f9-c982dc88f3cc";

const HOST_TYPES: [(&str, u8); 7] = [
    ("db_host", 1),
    ("host", 2),
    ("load_balancer", 3),
    ("moray_host", 4),
    ("ops_host", 5),
    ("redis_host", 6),
    ("rr_host", 7),
];

/// A host record as Registrar writes it (the redundant top-level address
/// and TTL included).
fn host_record(kind: &str, addr: &str, ports: &[u16], ttl: Option<u32>) -> String {
    let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
    let ttl = ttl.map(|t| format!(r#","ttl":{t}"#)).unwrap_or_default();
    format!(
        r#"{{"type":"{kind}","address":"{addr}"{ttl},"{kind}":{{"address":"{addr}","ports":[{}]}}}}"#,
        ports.join(",")
    )
}

/// The README's examples and every host type: authcache (redis hosts,
/// ephemeral), example (a load balancer), lb (a host and its aliases, no
/// service), types (one host of each type, and malformed records beside
/// them).
fn write_readme_tree(zk: &Zk) {
    zk.put(AUTHCACHE, AUTHCACHE_SERVICE);
    for (id, addr) in [(HOST_62, "172.27.10.62"), (HOST_67, "172.27.10.67")] {
        zk.put_ephemeral(
            &format!("{AUTHCACHE}/{id}"),
            &host_record("redis_host", addr, &[6379], Some(30)),
        );
    }
    zk.put("/us/joyent/example", EXAMPLE_SERVICE);
    zk.put_ephemeral(
        "/us/joyent/example/b44c74d6",
        &host_record("load_balancer", "172.27.10.72", &[80], None),
    );
    for name in ["b44c74d6", "host-1a", "host-1b"] {
        zk.put_ephemeral(
            &format!("/us/joyent/lb/{name}"),
            &host_record("load_balancer", "172.27.10.72", &[], None),
        );
    }
    zk.put("/us/joyent/types", TYPES_SERVICE);
    for (kind, n) in HOST_TYPES {
        zk.put_ephemeral(
            &format!("/us/joyent/types/{}", kind.replace('_', "-")),
            &host_record(kind, &format!("10.1.0.{n}"), &[], Some(40)),
        );
    }
    for (name, data) in [
        ("bad-json", "{\"type\": \"host\", "),
        (
            "vestigial",
            r#"{"type":"database","database":{"address":"10.1.0.8"}}"#,
        ),
        (
            "no-address",
            r#"{"type":"load_balancer","load_balancer":{"ports":[1]}}"#,
        ),
    ] {
        zk.put_ephemeral(&format!("/us/joyent/types/{name}"), data);
    }
}

/// Every name and type the README tree answers for (and some it must not).
fn readme_questions() -> Vec<(String, RecordType)> {
    let mut names: Vec<String> = vec![
        "authcache.emy-10.joyent.us.".into(),
        format!("{HOST_62}.authcache.emy-10.joyent.us."),
        format!("{HOST_67}.authcache.emy-10.joyent.us."),
        "_redis._tcp.authcache.emy-10.joyent.us.".into(),
        "example.joyent.us.".into(),
        "b44c74d6.example.joyent.us.".into(),
        "_http._tcp.example.joyent.us.".into(),
        "lb.joyent.us.".into(),
        "host-1a.lb.joyent.us.".into(),
        "b44c74d6.lb.joyent.us.".into(),
        "types.joyent.us.".into(),
        "_x._tcp.types.joyent.us.".into(),
        "bad-json.types.joyent.us.".into(),
        "nothing.joyent.us.".into(),
    ];
    names.extend(
        HOST_TYPES
            .iter()
            .map(|(k, _)| format!("{}.types.joyent.us.", k.replace('_', "-"))),
    );
    let mut out = Vec::new();
    for n in names {
        for t in [
            RecordType::A,
            RecordType::AAAA,
            RecordType::SRV,
            RecordType::TXT,
        ] {
            out.push((n.clone(), t));
        }
    }
    out
}

fn addresses(m: &Message) -> BTreeSet<IpAddr> {
    m.answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            RData::AAAA(a) => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .collect()
}

fn a(server: &Server, name: &str) -> BTreeSet<IpAddr> {
    addresses(&server.udp(name, RecordType::A))
}

fn ips(list: &[&str]) -> BTreeSet<IpAddr> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

fn zones(server: &Server) -> serde_json::Value {
    let (code, body) = http("GET", &format!("{}/v1/zones", server.api()), None, None);
    assert_eq!(code, 200);
    body[0].clone()
}

fn ctl_status(server: &Server) -> String {
    let out = Command::new(support::BIN)
        .args(["ctl", "--config"])
        .arg(&server.config)
        .arg("status")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Waits until the source is in session and has read everything.
fn wait_fresh(server: &Server) {
    assert!(
        eventually(Duration::from_secs(20), || zones(server)["stale"] == false),
        "the ZooKeeper source never read the tree; log:\n{}",
        server.log()
    );
}

#[test]
fn registrar_records_are_answered_as_the_readme_says() {
    let ensemble = ZkEnsemble::start(1);
    let zk = Zk::connect(&ensemble.connect_string());
    write_readme_tree(&zk);
    let server = Server::start_example("", &config(&ensemble.toml_servers(), ""));
    wait_fresh(&server);
    assert!(eventually(Duration::from_secs(10), || a(
        &server,
        "types.joyent.us."
    )
    .len()
        == 5));

    // authcache: the service's A is its members, TTL min(host 30, SRV 60).
    let m = server.udp("authcache.emy-10.joyent.us.", RecordType::A);
    assert_eq!(addresses(&m), ips(&["172.27.10.62", "172.27.10.67"]));
    assert!(m.answers.iter().all(|r| r.ttl == 30), "{m}");
    let host = server.udp(
        &format!("{HOST_62}.authcache.emy-10.joyent.us."),
        RecordType::A,
    );
    assert_eq!(addresses(&host), ips(&["172.27.10.62"]));
    assert_eq!(host.answers[0].ttl, 30);
    // SRV: one per member port, the service's TTL, the hosts' A additionals.
    for m in [
        server.udp("_redis._tcp.authcache.emy-10.joyent.us.", RecordType::SRV),
        server.tcp("_redis._tcp.authcache.emy-10.joyent.us.", RecordType::SRV),
    ] {
        let srv: BTreeSet<(u16, String, u32)> = m
            .answers
            .iter()
            .filter_map(|r| match &r.data {
                RData::SRV(s) => Some((s.port, s.target.to_string(), r.ttl)),
                _ => None,
            })
            .collect();
        let expect: BTreeSet<(u16, String, u32)> = [HOST_62, HOST_67]
            .iter()
            .map(|h| (6379, format!("{h}.authcache.emy-10.joyent.us."), 60))
            .collect();
        assert_eq!(srv, expect, "{m}");
        let glue: BTreeSet<(String, u32)> = m
            .additionals
            .iter()
            .filter(|r| r.record_type() == RecordType::A)
            .map(|r| (r.name.to_string(), r.ttl))
            .collect();
        assert_eq!(glue.len(), 2, "{m}");
        assert!(glue.iter().all(|(_, ttl)| *ttl == 30), "{m}");
    }
    // example: the README's dig, SRV 0 10 80 with default TTLs.
    let m = server.udp("_http._tcp.example.joyent.us.", RecordType::SRV);
    let RData::SRV(srv) = &m.answers[0].data else {
        panic!("{m}")
    };
    assert_eq!(
        (srv.priority, srv.weight, srv.port, srv.target.to_string()),
        (0, 10, 80, "b44c74d6.example.joyent.us.".to_string())
    );
    assert_eq!(a(&server, "example.joyent.us."), ips(&["172.27.10.72"]));
    // Aliases are host records of their own; without a service record the
    // domain has no addresses (Binder crashed here: MANTA-3058).
    for name in [
        "host-1a.lb.joyent.us.",
        "host-1b.lb.joyent.us.",
        "b44c74d6.lb.joyent.us.",
    ] {
        assert_eq!(a(&server, name), ips(&["172.27.10.72"]), "{name}");
    }
    let lb = server.udp("lb.joyent.us.", RecordType::A);
    assert_eq!(
        (lb.response_code, lb.answers.len()),
        (ResponseCode::NoError, 0)
    );
    // Host types: who may back a service, who may be asked directly.
    assert_eq!(
        a(&server, "types.joyent.us."),
        ips(&["10.1.0.3", "10.1.0.4", "10.1.0.5", "10.1.0.6", "10.1.0.7"])
    );
    let srv = server.udp("_x._tcp.types.joyent.us.", RecordType::SRV);
    assert_eq!(srv.answers.len(), 5, "{srv}");
    assert!(srv.answers.iter().all(|r| r.ttl == 20));
    for (kind, n) in HOST_TYPES {
        let name = format!("{}.types.joyent.us.", kind.replace('_', "-"));
        let m = server.udp(&name, RecordType::A);
        if matches!(kind, "ops_host" | "rr_host") {
            assert_eq!(m.response_code, ResponseCode::NXDomain, "{kind}: {m}");
        } else {
            assert_eq!(addresses(&m), ips(&[&format!("10.1.0.{n}")]), "{kind}");
            assert_eq!(m.answers[0].ttl, 40);
        }
    }
    // Malformed records are skipped and counted, and serve nothing.
    let bad = server.udp("bad-json.types.joyent.us.", RecordType::A);
    assert_eq!(bad.response_code, ResponseCode::NXDomain);
    let status = ctl_status(&server);
    assert!(status.contains("zookeeper: in session"), "{status}");
    assert!(status.contains("3 records skipped"), "{status}");
    assert!(server.wait_log("record skipped", Duration::from_secs(2)));
    // Mirrored instances change in ZooKeeper only.
    let (_, list) = http("GET", &format!("{}/v1/instances", server.api()), None, None);
    let mirrored = list
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["mirrors"] == format!("{AUTHCACHE}/{HOST_62}"))
        .unwrap_or_else(|| panic!("{list}"))
        .clone();
    let url = format!(
        "{}/v1/instances/{}",
        server.api(),
        mirrored["id"].as_str().unwrap()
    );
    let (code, body) = http("DELETE", &url, Some(TOKEN), None);
    assert_eq!(code, 409, "{body}");
    assert_eq!(zones(&server)["zookeeper"], true);
}

/// Canonical form of a reply for comparing two servers: rcode, flags,
/// and each section's records sorted (SOA serials aside: each server
/// numbers its own commits).
fn canonical(m: &Message) -> String {
    let section = |records: &[Record]| -> Vec<String> {
        let mut v: Vec<String> = records
            .iter()
            .map(|r| match &r.data {
                RData::SOA(soa) => {
                    format!("{} {} SOA {} {}", r.name, r.ttl, soa.mname, soa.minimum)
                }
                _ => r.to_string(),
            })
            .collect();
        v.sort();
        v
    };
    format!(
        "{:?} aa={} answers={:?} authority={:?} additional={:?}",
        m.response_code,
        m.authoritative,
        section(&m.answers),
        section(&m.authorities),
        section(&m.additionals),
    )
}

/// The same instances through ZooKeeper and through the HTTP API's
/// Binder form: every answer the same.
#[test]
fn zookeeper_and_the_api_give_the_same_answers() {
    let ensemble = ZkEnsemble::start(1);
    let zk = Zk::connect(&ensemble.connect_string());
    write_readme_tree(&zk);
    // Persistent recursive watches (ZooKeeper 3.6+), and the child and
    // data watches used with older servers.
    let from_zk = ["persistent", "oneshot"].map(|mode| {
        let extra = format!("watches = \"{mode}\"");
        Server::start_example("", &config(&ensemble.toml_servers(), &extra))
    });
    // The API server has no ZooKeeper: the same table without it.
    let api_config = config("[\"127.0.0.1:1\"]", "")
        .split("[registry.zookeeper]")
        .next()
        .unwrap()
        .to_string()
        + "\n[[registry.zone]]\nname = \"joyent.us.\"\n";
    let from_api = Server::start_example("", &api_config);
    let register = |id: &str, body: String| {
        let url = format!("{}/v1/instances/{id}", from_api.api());
        let (code, reply) = http("PUT", &url, Some(TOKEN), Some(&body));
        assert_eq!(code, 200, "{id}: {reply}");
    };
    let authcache_service = r#"{"srvce":"_redis","proto":"_tcp","port":6379,"ttl":60}"#;
    for (id, addr) in [(HOST_62, "172.27.10.62"), (HOST_67, "172.27.10.67")] {
        register(
            id,
            format!(
                r#"{{"addresses":["{addr}"],"lease_secs":3600,"binder":{{"domain":"authcache.emy-10.joyent.us","type":"redis_host","ports":[6379],"ttl":30,"service":{authcache_service}}}}}"#
            ),
        );
    }
    register("b44c74d6", r#"{"addresses":["172.27.10.72"],"lease_secs":3600,"binder":{"domain":"example.joyent.us","type":"load_balancer","ports":[80],"service":{"srvce":"_http","proto":"_tcp","port":80}}}"#.into());
    register("lb-host", r#"{"addresses":["172.27.10.72"],"lease_secs":3600,"binder":{"domain":"lb.joyent.us","type":"load_balancer","host":"b44c74d6","aliases":["host-1a.lb.joyent.us","host-1b.lb.joyent.us"]}}"#.into());
    for (kind, n) in HOST_TYPES {
        let label = kind.replace('_', "-");
        register(
            &label,
            format!(
                r#"{{"addresses":["10.1.0.{n}"],"lease_secs":3600,"binder":{{"domain":"types.joyent.us","type":"{kind}","ttl":40,"service":{{"srvce":"_x","proto":"_tcp","port":1000,"ttl":20}}}}}}"#
            ),
        );
    }
    let mut compared = 0;
    for from_zk in &from_zk {
        wait_fresh(from_zk);
        let loaded = || a(from_zk, "types.joyent.us.").len() == 5;
        assert!(eventually(Duration::from_secs(10), loaded));
        for (name, rtype) in readme_questions() {
            for (z, p) in [
                (from_zk.udp(&name, rtype), from_api.udp(&name, rtype)),
                (from_zk.tcp(&name, rtype), from_api.tcp(&name, rtype)),
            ] {
                assert_eq!(canonical(&z), canonical(&p), "{name} {rtype}");
                compared += 1;
            }
        }
    }
    assert_eq!(compared, readme_questions().len() * 4);
}

/// A Registrar-like client (kazoo, in a process of its own) registers an
/// ephemeral host; killed, its session expires and the host leaves DNS as
/// soon as ZooKeeper deletes its node.
#[test]
fn a_dead_registrar_leaves_dns_when_its_session_expires() {
    let ensemble = ZkEnsemble::start(1);
    let zk = Zk::connect(&ensemble.connect_string());
    zk.put(AUTHCACHE, AUTHCACHE_SERVICE);
    let server = Server::start_example("", &config(&ensemble.toml_servers(), ""));
    wait_fresh(&server);
    let node = format!("{AUTHCACHE}/{HOST_62}");
    let script = r#"
import sys, time
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], timeout=float(sys.argv[2]))
zk.start()
zk.create(sys.argv[3], sys.argv[4].encode(), ephemeral=True, makepath=True)
print("registered", flush=True)
time.sleep(600)
"#;
    let mut registrar = Command::new("/usr/bin/python3")
        .args(["-c", script, &ensemble.connect_string(), "1.0", &node])
        .arg(host_record("redis_host", "172.27.10.62", &[6379], Some(30)))
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 with kazoo (python3-kazoo)");
    let mut line = String::new();
    BufReader::new(registrar.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "registered");
    let registered = Instant::now();
    assert!(eventually(Duration::from_secs(5), || {
        a(&server, "authcache.emy-10.joyent.us.") == ips(&["172.27.10.62"])
    }));
    println!("registered -> answered within {:?}", registered.elapsed());
    registrar.kill().unwrap();
    let _ = registrar.wait();
    let expired = zk
        .wait_deleted(&node, Duration::from_secs(20))
        .expect("ZooKeeper expired the session");
    let mut gone = None;
    let end = expired + Duration::from_secs(5);
    while Instant::now() < end {
        let m = server.udp("authcache.emy-10.joyent.us.", RecordType::A);
        if m.answers.is_empty() {
            gone = Some(Instant::now());
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let after = gone.expect("the dead host never left DNS") - expired;
    println!("ZooKeeper expiry -> gone from DNS: {after:?}");
    assert!(after < Duration::from_secs(1), "{after:?}");
    let host = server.udp(
        &format!("{HOST_62}.authcache.emy-10.joyent.us."),
        RecordType::A,
    );
    assert_eq!(host.response_code, ResponseCode::NXDomain);
}

/// ZooKeeper stops: the last state keeps serving, marked stale; it comes
/// back: changes flow again. xdpdns restarted while ZooKeeper is down
/// serves what its journal kept, stale.
#[test]
fn zookeeper_down_and_back_and_down_at_start() {
    let mut ensemble = ZkEnsemble::start(1);
    let zk = Zk::connect(&ensemble.connect_string());
    zk.put(AUTHCACHE, AUTHCACHE_SERVICE);
    zk.put(
        &format!("{AUTHCACHE}/{HOST_62}"),
        &host_record("redis_host", "172.27.10.62", &[6379], None),
    );
    drop(zk);
    let mut server = Server::start_example("", &config(&ensemble.toml_servers(), ""));
    wait_fresh(&server);
    assert_eq!(
        a(&server, "authcache.emy-10.joyent.us."),
        ips(&["172.27.10.62"])
    );
    ensemble.stop(0);
    assert!(eventually(Duration::from_secs(10), || zones(&server)
        ["stale"]
        == true));
    assert!(ctl_status(&server).contains("zookeeper: STALE"));
    assert_eq!(
        a(&server, "authcache.emy-10.joyent.us."),
        ips(&["172.27.10.62"]),
        "still served"
    );
    ensemble.restart(0);
    wait_fresh(&server);
    let zk = Zk::connect(&ensemble.connect_string());
    zk.put(
        &format!("{AUTHCACHE}/{HOST_67}"),
        &host_record("redis_host", "172.27.10.67", &[6379], None),
    );
    assert!(
        eventually(Duration::from_secs(5), || {
            a(&server, "authcache.emy-10.joyent.us.") == ips(&["172.27.10.62", "172.27.10.67"])
        }),
        "log:\n{}",
        server.log()
    );
    drop(zk);
    // Down at start: the journal's instances are served, stale.
    ensemble.stop(0);
    server.restart_after("TERM");
    assert_eq!(
        a(&server, "authcache.emy-10.joyent.us."),
        ips(&["172.27.10.62", "172.27.10.67"])
    );
    assert_eq!(zones(&server)["stale"], true);
    assert!(ctl_status(&server).contains("zookeeper: STALE"));
}

/// A three-member ensemble loses its leader: the source follows the
/// ensemble to a surviving member and keeps mirroring.
#[test]
fn an_ensemble_that_loses_its_leader() {
    let mut ensemble = ZkEnsemble::start(3);
    assert!(eventually(Duration::from_secs(30), || ensemble
        .leader()
        .is_some()));
    let zk = Zk::connect(&ensemble.connect_string());
    zk.put(AUTHCACHE, AUTHCACHE_SERVICE);
    zk.put(
        &format!("{AUTHCACHE}/{HOST_62}"),
        &host_record("redis_host", "172.27.10.62", &[], None),
    );
    drop(zk);
    let server = Server::start_example("", &config(&ensemble.toml_servers(), ""));
    wait_fresh(&server);
    assert_eq!(
        a(&server, "authcache.emy-10.joyent.us."),
        ips(&["172.27.10.62"])
    );
    let leader = ensemble.leader().unwrap();
    ensemble.stop(leader);
    assert!(
        eventually(Duration::from_secs(30), || ensemble.leader().is_some()),
        "no new leader"
    );
    let survivors: Vec<String> = (0..3)
        .filter(|&i| i != leader)
        .map(|i| format!("127.0.0.1:{}", ensemble.client_ports[i]))
        .collect();
    let zk = Zk::connect(&survivors.join(","));
    zk.put(
        &format!("{AUTHCACHE}/{HOST_67}"),
        &host_record("redis_host", "172.27.10.67", &[], None),
    );
    zk.delete(&format!("{AUTHCACHE}/{HOST_62}"));
    assert!(
        eventually(Duration::from_secs(15), || {
            a(&server, "authcache.emy-10.joyent.us.") == ips(&["172.27.10.67"])
        }),
        "log:\n{}",
        server.log()
    );
    wait_fresh(&server);
}

/// Cut off from ZooKeeper for longer than its session: the last state
/// keeps serving (stale); healed, a new session reads everything and
/// only the difference is written.
#[test]
fn a_partition_longer_than_the_session() {
    let ensemble = ZkEnsemble::start(1);
    let relay = Partition::relay(ensemble.client_ports[0]);
    let zk = Zk::connect(&ensemble.connect_string());
    zk.put(AUTHCACHE, AUTHCACHE_SERVICE);
    for (id, addr) in [(HOST_62, "172.27.10.62"), (HOST_67, "172.27.10.67")] {
        zk.put(
            &format!("{AUTHCACHE}/{id}"),
            &host_record("redis_host", addr, &[], None),
        );
    }
    let servers = format!("[\"{}\"]", relay.addr);
    let server = Server::start_example("", &config(&servers, ""));
    wait_fresh(&server);
    assert_eq!(a(&server, "authcache.emy-10.joyent.us.").len(), 2);
    relay.cut();
    assert!(eventually(Duration::from_secs(10), || zones(&server)
        ["stale"]
        == true));
    // While cut off: one host goes, another comes; the session expires.
    zk.delete(&format!("{AUTHCACHE}/{HOST_67}"));
    zk.put(
        &format!("{AUTHCACHE}/c0ffee"),
        &host_record("redis_host", "172.27.10.99", &[], None),
    );
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        a(&server, "authcache.emy-10.joyent.us."),
        ips(&["172.27.10.62", "172.27.10.67"]),
        "the last state read is served while cut off"
    );
    relay.heal();
    assert!(
        eventually(Duration::from_secs(20), || {
            a(&server, "authcache.emy-10.joyent.us.") == ips(&["172.27.10.62", "172.27.10.99"])
        }),
        "log:\n{}",
        server.log()
    );
    wait_fresh(&server);
    assert!(
        server.wait_log("session expired", Duration::from_secs(1)),
        "{}",
        server.log()
    );
}

/// Every child of a service deleted at once, with hysteresis on: members
/// leave at most a third per window, the last one late.
#[test]
fn a_whole_service_deleted_by_accident_leaves_through_hysteresis() {
    let ensemble = ZkEnsemble::start(1);
    let zk = Zk::connect(&ensemble.connect_string());
    zk.put(AUTHCACHE, AUTHCACHE_SERVICE);
    let members: Vec<String> = (1..=6).map(|n| format!("{AUTHCACHE}/host-{n}")).collect();
    for (n, node) in members.iter().enumerate() {
        zk.put(
            node,
            &host_record("redis_host", &format!("10.2.0.{}", n + 1), &[], None),
        );
    }
    let server = Server::start_example("", &config(&ensemble.toml_servers(), "hysteresis = true"));
    wait_fresh(&server);
    assert!(eventually(Duration::from_secs(5), || a(
        &server,
        "authcache.emy-10.joyent.us."
    )
    .len()
        == 6));
    let deleted = Instant::now();
    for node in &members {
        zk.delete(node);
    }
    // Within the first window at most two of six may leave.
    std::thread::sleep(Duration::from_millis(700));
    let left = a(&server, "authcache.emy-10.joyent.us.").len();
    assert!(
        left >= 4,
        "{left} members left of 6 after {:?}",
        deleted.elapsed()
    );
    assert!(
        eventually(Duration::from_secs(20), || a(
            &server,
            "authcache.emy-10.joyent.us."
        )
        .is_empty()),
        "hysteresis never let the members go"
    );
    assert!(
        deleted.elapsed() >= Duration::from_millis(3000),
        "the last member leaves late"
    );
    let host = server.udp("host-1.authcache.emy-10.joyent.us.", RecordType::A);
    assert_eq!(
        host.response_code,
        ResponseCode::NXDomain,
        "released members are removed"
    );
}

/// Mirrored names through the kernel: xdpdns with XDP on a veth link
/// (generic mode) and ZooKeeper in the server's namespace; the README's
/// service and host names, asked from the client namespace, are answered
/// by XDP, and a node deleted in ZooKeeper is gone from the kernel's
/// answers too.
#[test]
fn mirrored_names_are_answered_in_the_kernel() {
    use super::xdp_veth::{counters, in_netns, Link};
    let link = Link::new("z");
    let ensemble = ZkEnsemble::start_in_netns(&link.server_ns);
    let connect = ensemble.connect_string();
    let zk = in_netns(&link.server_ns, move || {
        let zk = Zk::connect_when_up(&connect, Duration::from_secs(60));
        write_readme_tree(&zk);
        zk
    });
    let dir = support::TempDir::new("veth-zk");
    dir.write("zone.db", include_str!("support/example.com.zone"));
    dir.write("big.inc", include_str!("support/big.inc"));
    let config = dir.write(
        "xdpdns.toml",
        &format!(
            "[server]\nlisten = [\"10.211.0.1:53\"]\n\
             [xdp]\ninterfaces = [\"{}\"]\nmode = \"generic\"\n\
             [[zone]]\norigin = \"example.com.\"\nfile = \"zone.db\"\n{}",
            link.server_if,
            config(&ensemble.toml_servers(), "").replace("127.0.0.1:0", "10.211.0.1:8053")
        ),
    );
    let server = Server::start_in(dir, config, &["ip", "netns", "exec", &link.server_ns]);
    let fresh = || {
        in_netns(&link.client_ns, || {
            http("GET", "http://10.211.0.1:8053/v1/zones", None, None).1[0]["stale"] == false
        })
    };
    assert!(
        eventually(Duration::from_secs(20), fresh),
        "{}",
        server.log()
    );
    assert!(server.wait_log("XDP table updated", Duration::from_secs(5)));
    let answered = || {
        let out = link.dig(&["authcache.emy-10.joyent.us", "A"]);
        out.contains("172.27.10.62") && out.contains("172.27.10.67")
    };
    assert!(
        eventually(Duration::from_secs(10), answered),
        "{}",
        server.log()
    );
    let c0 = counters(&server);
    let service = link.dig(&["authcache.emy-10.joyent.us", "A"]);
    assert!(service.contains("flags: qr aa"), "{service}");
    let host = link.dig(&[&format!("{HOST_62}.authcache.emy-10.joyent.us"), "A"]);
    assert!(host.contains("172.27.10.62"), "{host}");
    let c1 = counters(&server);
    assert_eq!(
        c1["answered_a"] - c0["answered_a"],
        2,
        "answered by XDP: {c1:?}"
    );
    // A host deleted in ZooKeeper leaves the kernel's answers.
    let node = format!("{AUTHCACHE}/{HOST_67}");
    let zk = in_netns(&link.server_ns, move || {
        zk.delete(&node);
        zk
    });
    let gone = || {
        !link
            .dig(&["authcache.emy-10.joyent.us", "A"])
            .contains("172.27.10.67")
    };
    assert!(eventually(Duration::from_secs(5), gone), "{}", server.log());
    let c2 = counters(&server);
    let after = link.dig(&["authcache.emy-10.joyent.us", "A"]);
    assert!(after.contains("172.27.10.62"), "{after}");
    assert_eq!(
        counters(&server)["answered_a"] - c2["answered_a"],
        1,
        "still in the kernel"
    );
    drop(zk);
}

/// Nodes whose ACL admits only a digest identity: read by a node that
/// authenticates with it, skipped (counted, not fatal) by one that does
/// not, which serves everything else.
#[test]
fn digest_authentication_reads_what_the_acl_reserves() {
    let ensemble = ZkEnsemble::start(1);
    let zk = Zk::connect_digest(&ensemble.connect_string(), "binder:s3cret");
    zk.put(AUTHCACHE, AUTHCACHE_SERVICE);
    zk.put(
        &format!("{AUTHCACHE}/{HOST_62}"),
        &host_record("redis_host", "172.27.10.62", &[], None),
    );
    zk.put_private(
        &format!("{AUTHCACHE}/{HOST_67}"),
        &host_record("redis_host", "172.27.10.67", &[], None),
    );
    let with = Server::start_example(
        "",
        &config(&ensemble.toml_servers(), "digest = \"binder:s3cret\""),
    );
    let without = Server::start_example("", &config(&ensemble.toml_servers(), ""));
    wait_fresh(&with);
    wait_fresh(&without);
    assert!(eventually(Duration::from_secs(5), || {
        a(&with, "authcache.emy-10.joyent.us.") == ips(&["172.27.10.62", "172.27.10.67"])
    }));
    // (Fresh is the tree read; its commit is answered a moment later.)
    assert!(
        eventually(Duration::from_secs(5), || {
            a(&without, "authcache.emy-10.joyent.us.") == ips(&["172.27.10.62"])
        }),
        "without the digest: {:?}",
        a(&without, "authcache.emy-10.joyent.us.")
    );
    let status = ctl_status(&without);
    assert!(status.contains("1 records skipped"), "{status}");
    assert!(without.wait_log("ACL does not let this node read it", Duration::from_secs(2)));
}

/// With child and data watches (what servers before 3.6 offer), every
/// kind of change is followed: a host added, its address changed, a host
/// deleted, a whole service deleted, a new service with its hosts.
#[test]
fn child_and_data_watches_follow_every_change() {
    let ensemble = ZkEnsemble::start(1);
    let zk = Zk::connect(&ensemble.connect_string());
    write_readme_tree(&zk);
    let server = Server::start_example(
        "",
        &config(&ensemble.toml_servers(), "watches = \"oneshot\""),
    );
    wait_fresh(&server);
    let authcache = |s: &Server| a(s, "authcache.emy-10.joyent.us.");
    let follows = |what: &str, f: &dyn Fn() -> bool| {
        assert!(
            eventually(Duration::from_secs(5), f),
            "{what}; log:\n{}",
            server.log()
        );
    };
    // Fresh means the tree was read; its records reach the zone with the
    // registry's next publish.
    follows("the tree as written is served", &|| {
        authcache(&server) == ips(&["172.27.10.62", "172.27.10.67"])
    });
    zk.put_ephemeral(
        &format!("{AUTHCACHE}/added"),
        &host_record("redis_host", "172.27.10.70", &[], None),
    );
    follows("a host added", &|| authcache(&server).len() == 3);
    zk.put(
        &format!("{AUTHCACHE}/{HOST_62}"),
        &host_record("redis_host", "172.27.10.63", &[], None),
    );
    follows("an address changed", &|| {
        authcache(&server).contains(&"172.27.10.63".parse().unwrap())
    });
    zk.delete(&format!("{AUTHCACHE}/{HOST_67}"));
    follows("a host deleted", &|| {
        authcache(&server) == ips(&["172.27.10.63", "172.27.10.70"])
    });
    for (kind, _) in HOST_TYPES {
        zk.delete(&format!("/us/joyent/types/{}", kind.replace('_', "-")));
    }
    for name in ["bad-json", "vestigial", "no-address"] {
        zk.delete(&format!("/us/joyent/types/{name}"));
    }
    zk.delete("/us/joyent/types");
    follows("a whole service deleted", &|| {
        server.udp("types.joyent.us.", RecordType::A).response_code == ResponseCode::NXDomain
    });
    zk.put("/us/joyent/fresh", EXAMPLE_SERVICE);
    zk.put_ephemeral(
        "/us/joyent/fresh/f1",
        &host_record("load_balancer", "10.3.0.1", &[8080], None),
    );
    follows("a new service with a host", &|| {
        a(&server, "fresh.joyent.us.") == ips(&["10.3.0.1"])
    });
    let srv = server.udp("_http._tcp.fresh.joyent.us.", RecordType::SRV);
    assert_eq!(srv.answers.len(), 1, "{srv}");
}

/// Registrar agents that write below a chroot are read with the same
/// chroot; nodes outside it are not mirrored.
#[test]
fn a_chroot_confines_what_is_mirrored() {
    let ensemble = ZkEnsemble::start(1);
    let root = Zk::connect(&ensemble.connect_string());
    root.mkdirs("/binder");
    root.put(AUTHCACHE, AUTHCACHE_SERVICE);
    root.put(
        &format!("{AUTHCACHE}/outside"),
        &host_record("redis_host", "10.9.9.9", &[], None),
    );
    let zk = Zk::connect(&format!("{}/binder", ensemble.connect_string()));
    zk.put(AUTHCACHE, AUTHCACHE_SERVICE);
    zk.put(
        &format!("{AUTHCACHE}/{HOST_62}"),
        &host_record("redis_host", "172.27.10.62", &[], None),
    );
    let server = Server::start_example(
        "",
        &config(&ensemble.toml_servers(), "chroot = \"/binder\""),
    );
    wait_fresh(&server);
    assert!(eventually(Duration::from_secs(5), || {
        a(&server, "authcache.emy-10.joyent.us.") == ips(&["172.27.10.62"])
    }));
    let outside = server.udp("outside.authcache.emy-10.joyent.us.", RecordType::A);
    assert_eq!(outside.response_code, ResponseCode::NXDomain);
}

/// A ZooKeeper source removed from the configuration takes its mirrored
/// instances with it at the next start (they have no lease, and the API
/// may not remove them).
#[test]
fn removing_the_source_removes_what_it_mirrored() {
    let ensemble = ZkEnsemble::start(1);
    let zk = Zk::connect(&ensemble.connect_string());
    zk.put(AUTHCACHE, AUTHCACHE_SERVICE);
    zk.put(
        &format!("{AUTHCACHE}/{HOST_62}"),
        &host_record("redis_host", "172.27.10.62", &[], None),
    );
    let mut server = Server::start_example("", &config(&ensemble.toml_servers(), ""));
    wait_fresh(&server);
    assert!(eventually(Duration::from_secs(5), || !a(
        &server,
        "authcache.emy-10.joyent.us."
    )
    .is_empty()));
    let text = std::fs::read_to_string(&server.config).unwrap();
    let start = text.find("[registry.zookeeper]").unwrap();
    let end = start + text[start..].find("[[registry.zone]]").unwrap();
    std::fs::write(
        &server.config,
        format!("{}{}", &text[..start], &text[end..]),
    )
    .unwrap();
    server.restart_after("TERM");
    assert!(
        eventually(Duration::from_secs(5), || {
            server
                .udp("authcache.emy-10.joyent.us.", RecordType::A)
                .response_code
                == ResponseCode::NXDomain
        }),
        "{}",
        server.log()
    );
    assert!(server.wait_log("removing the instances it mirrored", Duration::from_secs(2)));
}
