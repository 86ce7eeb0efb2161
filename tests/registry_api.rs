//! Service registry end to end, through the real binary: HTTP API in, DNS
//! out over UDP; leases, status, bad input, `kill -9`, and the agent.

use crate::support;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{RData, RecordType};
use serde_json::Value;

use support::{eventually, http, path_str, Server, TempDir, BIN};

const TOKEN: &str = "test-token-1";

fn registry_config(health: &str) -> String {
    format!(
        r#"
[registry]
listen = "127.0.0.1:0"
token = "{TOKEN}"
data_dir = "registry"
batch_delay_ms = 2
require_opt_in = false
ns = ["ns1.example.com."]
hostmaster = "hostmaster.example.com."
health = {{ {health} }}

[[registry.zone]]
name = "sd.example."
networks = ["*"]

[[registry.zone]]
name = "binder.example."

[[registry.zone]]
name = "10.in-addr.arpa."
"#
    )
}

fn start(health: &str) -> Server {
    Server::start_example("", &registry_config(health))
}

fn addresses(m: &hickory_proto::op::Message) -> Vec<String> {
    let mut v: Vec<String> = m
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(a.to_string()),
            RData::AAAA(a) => Some(a.to_string()),
            _ => None,
        })
        .collect();
    v.sort();
    v
}

fn put(s: &Server, id: &str, body: &str) -> (u16, Value) {
    http(
        "PUT",
        &format!("{}/v1/instances/{id}", s.api()),
        Some(TOKEN),
        Some(body),
    )
}

#[test]
fn registration_lease_and_status_drive_dns() {
    let s = start("");
    let api = s.api();
    let svc = "web.svc.acme.sd.example.";

    // Register: the service, instance and reverse names answer over UDP.
    let started = Instant::now();
    let (code, body) = put(
        &s,
        "web-1",
        r#"{"owner":"acme","addresses":["10.0.0.1"],"services":["web:8080"],"lease_secs":2}"#,
    );
    assert_eq!(code, 200, "{body}");
    assert!(
        eventually(Duration::from_secs(2), || addresses(
            &s.udp(svc, RecordType::A)
        ) == ["10.0.0.1"]),
        "service name never answered"
    );
    eprintln!("registration to UDP answer: {:?}", started.elapsed());
    let names: Vec<&str> = body["dns_names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        names.contains(&svc) && names.contains(&"web-1.inst.acme.sd.example."),
        "{names:?}"
    );
    let ptr = s.udp("1.0.0.10.in-addr.arpa.", RecordType::PTR);
    assert_eq!(ptr.answers.len(), 1);
    let srv = s.udp("_web._tcp.web.svc.acme.sd.example.", RecordType::SRV);
    assert_eq!(srv.answers.len(), 1);
    assert_eq!(
        addresses(&s.udp("web-1.inst.acme.sd.example.", RecordType::A)),
        ["10.0.0.1"]
    );

    // A second member; one reports down: it leaves the service at once
    // (budget max(2/3,1) = 1), its instance name stays.
    let (code, _) = put(
        &s,
        "web-2",
        r#"{"owner":"acme","addresses":["10.0.0.2"],"services":["web:8080"],"lease_secs":30}"#,
    );
    assert_eq!(code, 200);
    assert!(eventually(Duration::from_secs(2), || addresses(
        &s.udp(svc, RecordType::A)
    )
    .len()
        == 2));
    // Registry zones rotate by default: the first address follows the
    // query ID (even IDs one member first, odd IDs the other).
    let first = |id: u16| {
        let mut q = support::query(svc, RecordType::A, None);
        q[..2].copy_from_slice(&id.to_be_bytes());
        let m = support::udp_query(s.addr, &q).expect("UDP reply");
        match &m.answers[0].data {
            RData::A(a) => a.to_string(),
            other => panic!("{other:?}"),
        }
    };
    let (even, odd) = (first(0x1000), first(0x1001));
    assert_ne!(even, odd, "the service's answers rotate with the query ID");
    assert_eq!((first(0x2000), first(0x2001)), (even, odd), "one rule");
    let (code, body) = http(
        "PUT",
        &format!("{api}/v1/instances/web-2/status"),
        Some(TOKEN),
        Some(r#"{"status":"down"}"#),
    );
    assert_eq!(code, 200, "{body}");
    assert!(
        eventually(Duration::from_secs(2), || addresses(
            &s.udp(svc, RecordType::A)
        ) == ["10.0.0.1"]),
        "down member still listed"
    );
    assert_eq!(
        addresses(&s.udp("web-2.inst.acme.sd.example.", RecordType::A)),
        ["10.0.0.2"]
    );

    // Heartbeats keep web-1 past its 2 s lease ...
    for _ in 0..6 {
        std::thread::sleep(Duration::from_millis(500));
        let (code, _) = http(
            "POST",
            &format!("{api}/v1/instances/web-1/heartbeat"),
            Some(TOKEN),
            None,
        );
        assert_eq!(code, 200);
    }
    assert_eq!(
        addresses(&s.udp("web-1.inst.acme.sd.example.", RecordType::A)),
        ["10.0.0.1"]
    );
    // ... and without them it is gone once the lease runs out.
    let stopped = Instant::now();
    assert!(
        eventually(Duration::from_secs(4), || s
            .udp("web-1.inst.acme.sd.example.", RecordType::A)
            .response_code
            == ResponseCode::NXDomain),
        "lease never expired"
    );
    assert!(
        stopped.elapsed() >= Duration::from_millis(1400),
        "expired early: {:?}",
        stopped.elapsed()
    );
    assert!(s.log().contains("LeaseExpired"));

    // Deregistration is immediate.
    let (code, _) = http(
        "DELETE",
        &format!("{api}/v1/instances/web-2"),
        Some(TOKEN),
        None,
    );
    assert_eq!(code, 204);
    assert!(eventually(Duration::from_secs(2), || s
        .udp("web-2.inst.acme.sd.example.", RecordType::A)
        .response_code
        == ResponseCode::NXDomain));

    // The zone list (for configuring secondaries) and the API description.
    let (code, zones) = http("GET", &format!("{api}/v1/zones"), None, None);
    assert_eq!(code, 200);
    let zones = zones.as_array().unwrap();
    assert_eq!(zones.len(), 3);
    assert_eq!(zones[0]["name"], "sd.example.");
    assert!(zones[0]["serial"].as_u64().unwrap() > 0);
    let (code, doc) = http("GET", &format!("{api}/v1/openapi.json"), None, None);
    assert_eq!(code, 200);
    assert!(doc["paths"]["/v1/instances/{id}"]["put"].is_object());
}

/// (method, path, token, body, expected status, expected field)
type Case<'a> = (
    &'a str,
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
    u16,
    Option<&'a str>,
);

#[test]
fn bad_input_gets_a_4xx_naming_the_field() {
    let s = start("");
    let api = s.api();
    let ok = r#"{"owner":"acme","addresses":["10.0.0.1"],"lease_secs":30}"#;
    let cases: &[Case] = &[
        ("PUT", "/v1/instances/a", None, Some(ok), 401, None),
        ("PUT", "/v1/instances/a", Some("wrong"), Some(ok), 401, None),
        ("DELETE", "/v1/instances/a", None, None, 401, None),
        ("POST", "/v1/instances/a/heartbeat", None, None, 401, None),
        (
            "PUT",
            "/v1/owners/acme",
            None,
            Some(r#"{"enabled":true}"#),
            401,
            None,
        ),
        (
            "PUT",
            "/v1/instances/a",
            Some(TOKEN),
            Some("{not json"),
            400,
            None,
        ),
        ("PUT", "/v1/instances/a", Some(TOKEN), Some(""), 400, None),
        (
            "PUT",
            "/v1/instances/a",
            Some(TOKEN),
            Some(r#"{"owner":"acme","addresses":["10.0.0.1"],"lease_secs":30,"colour":"red"}"#),
            400,
            None,
        ),
        (
            "PUT",
            "/v1/instances/a",
            Some(TOKEN),
            Some(r#"{"owner":"acme","addresses":["10.0.0.999"],"lease_secs":30}"#),
            400,
            Some("addresses[0]"),
        ),
        (
            "PUT",
            "/v1/instances/a",
            Some(TOKEN),
            Some(r#"{"owner":"acme","addresses":"10.0.0.1","lease_secs":30}"#),
            400,
            Some("addresses"),
        ),
        (
            "PUT",
            "/v1/instances/a",
            Some(TOKEN),
            Some(r#"{"owner":"acme","addresses":["10.0.0.1"],"lease_secs":-1}"#),
            400,
            Some("lease_secs"),
        ),
        (
            "PUT",
            "/v1/instances/a",
            Some(TOKEN),
            Some(r#"{"owner":"acme","addresses":["10.0.0.1"]}"#),
            422,
            Some("lease_secs"),
        ),
        (
            "PUT",
            "/v1/instances/a",
            Some(TOKEN),
            Some(r#"{"owner":"acme","addresses":["10.0.0.1"],"lease_secs":0}"#),
            422,
            Some("lease_secs"),
        ),
        (
            "PUT",
            "/v1/instances/a",
            Some(TOKEN),
            Some(r#"{"owner":"ac me","addresses":["10.0.0.1"],"lease_secs":30}"#),
            422,
            Some("owner"),
        ),
        (
            "PUT",
            "/v1/instances/a",
            Some(TOKEN),
            Some(r#"{"owner":"acme","addresses":[],"lease_secs":30}"#),
            422,
            Some("addresses"),
        ),
        (
            "PUT",
            "/v1/instances/a",
            Some(TOKEN),
            Some(
                r#"{"owner":"acme","addresses":["10.0.0.1"],"services":["web:http"],"lease_secs":30}"#,
            ),
            422,
            Some("services[0]"),
        ),
        (
            "PUT",
            "/v1/instances/a",
            Some(TOKEN),
            Some(
                r#"{"owner":"acme","addresses":["10.0.0.1"],"services":["-web"],"lease_secs":30}"#,
            ),
            422,
            Some("services[0].name"),
        ),
        (
            "PUT",
            "/v1/instances/a",
            Some(TOKEN),
            Some(
                r#"{"owner":"acme","addresses":["10.0.0.1"],"status":"sideways","lease_secs":30}"#,
            ),
            400,
            Some("status"),
        ),
        (
            "PUT",
            "/v1/instances/a",
            Some(TOKEN),
            Some(
                r#"{"addresses":["10.0.0.1"],"lease_secs":30,"binder":{"domain":"x.elsewhere.org","type":"host"}}"#,
            ),
            422,
            Some("binder.domain"),
        ),
        (
            "PUT",
            "/v1/instances/a",
            Some(TOKEN),
            Some(
                r#"{"addresses":["10.0.0.1"],"lease_secs":30,"binder":{"domain":"x.binder.example","type":"mainframe"}}"#,
            ),
            400,
            Some("binder.type"),
        ),
        (
            "PUT",
            "/v1/instances/bad_id",
            Some(TOKEN),
            Some(ok),
            422,
            Some("id"),
        ),
        (
            "POST",
            "/v1/instances/nobody/heartbeat",
            Some(TOKEN),
            None,
            404,
            Some("id"),
        ),
        (
            "PUT",
            "/v1/instances/nobody/status",
            Some(TOKEN),
            Some(r#"{"status":"down"}"#),
            404,
            Some("id"),
        ),
        (
            "PUT",
            "/v1/owners/acme",
            Some(TOKEN),
            Some(r#"{"enabled":"yes"}"#),
            400,
            Some("enabled"),
        ),
        ("GET", "/v1/instances/nobody", None, None, 404, Some("id")),
    ];
    for &(method, path, token, body, status, field) in cases {
        let (code, json) = http(method, &format!("{api}{path}"), token, body);
        let what = format!("{method} {path} {body:?}");
        assert_eq!(code, status, "{what}: {json}");
        let message = json["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: no error message: {json}"));
        assert!(!message.is_empty());
        if let Some(f) = field {
            assert_eq!(json["field"], f, "{what}: {json}");
            assert!(
                message.contains(f.split('.').next().unwrap().split('[').next().unwrap()),
                "{what}: {message}"
            );
        }
    }
    // Unknown fields are named in the message.
    let (_, json) = put(
        &s,
        "a",
        r#"{"owner":"acme","addresses":["10.0.0.1"],"lease_secs":30,"colour":"red"}"#,
    );
    assert!(json["error"].as_str().unwrap().contains("colour"), "{json}");
    // Nothing bad was stored, and a good write still works.
    let (_, list) = http("GET", &format!("{api}/v1/instances"), None, None);
    assert_eq!(list.as_array().unwrap().len(), 0);
    assert_eq!(put(&s, "a", ok).0, 200);
}

/// Registers instances as fast as it can from two client threads while
/// the server is `kill -9`ed; after the restart every acknowledged
/// registration is present and exactly as sent, and nothing is half-applied.
#[test]
fn kill_9_loses_no_acknowledged_registration() {
    let mut s = start("");
    let api = s.api();
    let acked: Arc<Mutex<Vec<u32>>> = Arc::default();
    let spec = |i: u32| {
        format!(
            r#"{{"owner":"acme","addresses":["10.1.{}.{}","fd00::{:x}"],"services":["svc{}:{}"],"lease_secs":600}}"#,
            i / 250,
            i % 250 + 1,
            i + 1,
            i % 7,
            1000 + i
        )
    };
    let workers: Vec<_> = (0..2u32)
        .map(|w| {
            let acked = acked.clone();
            let api = api.clone();
            std::thread::spawn(move || {
                let agent = ureq::AgentBuilder::new()
                    .timeout(Duration::from_secs(5))
                    .build();
                for i in (w..1000).step_by(2) {
                    let res = agent
                        .put(&format!("{api}/v1/instances/i{i}"))
                        .set("Authorization", &format!("Bearer {TOKEN}"))
                        .send_string(&spec(i));
                    match res {
                        Ok(r) if r.status() == 200 => acked.lock().unwrap().push(i),
                        _ => return, // the server is gone
                    }
                }
            })
        })
        .collect();
    assert!(eventually(Duration::from_secs(60), || acked
        .lock()
        .unwrap()
        .len()
        >= 300));
    s.signal("KILL");
    for w in workers {
        w.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() >= 300 && acked.len() < 1000,
        "kill landed mid-stream: {}",
        acked.len()
    );
    s.restart_after("KILL");
    assert!(s.log().contains("registry recovered"));

    let (code, list) = http("GET", &format!("{}/v1/instances", s.api()), None, None);
    assert_eq!(code, 200);
    let stored: BTreeMap<String, Value> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["id"].as_str().unwrap().to_string(), v.clone()))
        .collect();
    for i in &acked {
        assert!(
            stored.contains_key(&format!("i{i}")),
            "acknowledged i{i} lost"
        );
    }
    // Whatever is stored is whole: every field as sent.
    for (id, v) in &stored {
        let i: u32 = id[1..].parse().unwrap();
        let sent: Value = serde_json::from_str(&spec(i)).unwrap();
        let mut addrs: Vec<String> = sent["addresses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        addrs.sort();
        let mut got: Vec<String> = v["addresses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        got.sort();
        assert_eq!(got, addrs, "{id}");
        assert_eq!(v["services"][0]["port"], 1000 + i, "{id}");
        assert_eq!(v["lease_secs"], 600);
        assert!(
            v["expires_in_ms"].as_u64().unwrap() > 500_000,
            "{id}: the lease resumed with its remaining time"
        );
    }
    // And DNS serves them before anything heartbeats.
    for i in acked.iter().step_by(25) {
        let name = format!("i{i}.inst.acme.sd.example.");
        assert_eq!(addresses(&s.udp(&name, RecordType::A)).len(), 1, "{name}");
    }
    eprintln!(
        "acknowledged before kill -9: {}, stored after restart: {}",
        acked.len(),
        stored.len()
    );
}

/// A crash can leave the zone images and the IXFR journal behind the
/// registry's journal: they record a commit just after the registry
/// acknowledged it. A start then serves the instances put last at once,
/// ahead of deriving every instance (seconds at a million), with serials
/// past every one published before. Here the served state is set back by
/// hand to before the last registrations.
#[test]
fn a_start_behind_the_registry_serves_the_instances_put_last_ahead_of_the_rest() {
    let mut s = Server::start_example(
        "",
        &format!("[transfer]\ndata_dir = \"state\"\n{}", registry_config("")),
    );
    let spec = |i: u32| {
        format!(
            r#"{{"owner":"acme","addresses":["10.2.0.{i}"],"services":["web:80"],"lease_secs":600}}"#
        )
    };
    let answered = |s: &Server, i: u32| {
        addresses(&s.udp(&format!("r{i}.inst.acme.sd.example."), RecordType::A))
            == vec![format!("10.2.0.{i}")]
    };
    for i in 1..=10 {
        assert_eq!(put(&s, &format!("r{i}"), &spec(i)).0, 200);
    }
    assert!(eventually(Duration::from_secs(10), || answered(&s, 10)));
    let journal = s.dir.0.join("state/journal/sd.example.ixfr");
    assert!(eventually(Duration::from_secs(10), || journal.exists()));
    // The served state as it was, copied while the server holds still.
    let state = s.dir.0.join("state");
    let behind = s.dir.0.join("state-behind");
    s.signal("STOP");
    let copied = Command::new("cp")
        .arg("-a")
        .arg(&state)
        .arg(&behind)
        .status();
    s.signal("CONT");
    assert!(copied.unwrap().success());

    for i in 11..=15 {
        assert_eq!(put(&s, &format!("r{i}"), &spec(i)).0, 200);
    }
    assert!(eventually(Duration::from_secs(10), || answered(&s, 15)));
    let serial = |s: &Server| match &s.udp("sd.example.", RecordType::SOA).answers[0].data {
        RData::SOA(soa) => soa.serial,
        other => panic!("SOA expected, got {other:?}"),
    };
    let before = serial(&s);
    s.signal("KILL");
    let _ = s.child.wait();
    std::fs::remove_dir_all(&state).unwrap();
    std::fs::rename(&behind, &state).unwrap();
    s.start_again();

    let log = s.log();
    let line = log
        .lines()
        .find(|l| l.contains("published ahead of the full derivation"))
        .expect("the start published the instances put last");
    // r11–r15, each an A and a TXT record at its own name and an SRV in
    // the service: at least those the set-back state lacked.
    let added: usize = line
        .split("added=")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("the count of records added");
    assert!(added >= 15, "{line}");
    for i in 1..=15 {
        assert!(answered(&s, i), "r{i} after the restart");
    }
    let after = serial(&s);
    assert!(
        after > before,
        "serial {after} after the restart, {before} before: a serial is never reused"
    );
    // Killed again with nothing behind: nothing to add, no new serial.
    s.restart_after("KILL");
    assert_eq!(serial(&s), after, "a start with nothing to add");
}

/// A secondary that is down (its port closed) is sent NOTIFY at the pace
/// of the back-off, with the newest serial, not once for every change: 40
/// registrations in quick succession make 40 new serials.
#[test]
fn a_secondary_that_is_down_is_not_sent_a_notify_for_every_change() {
    let closed = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let config = registry_config("").replacen(
        "name = \"sd.example.\"\n",
        &format!("name = \"sd.example.\"\nnotify = [\"127.0.0.1:{port}\"]\n"),
        1,
    );
    let s = Server::start_example("", &config);
    let started = Instant::now();
    for i in 1..=40 {
        let body = format!(r#"{{"owner":"acme","addresses":["10.3.0.{i}"],"lease_secs":600}}"#);
        assert_eq!(put(&s, &format!("n{i}"), &body).0, 200);
        // Each its own commit (the registry publishes every 2 ms at most).
        std::thread::sleep(Duration::from_millis(3));
    }
    let serial = match &s.udp("sd.example.", RecordType::SOA).answers[0].data {
        RData::SOA(soa) => soa.serial,
        other => panic!("SOA expected, got {other:?}"),
    };
    // Attempts at 0 and 1 s; the third is due at 3 s.
    std::thread::sleep(Duration::from_millis(2500).saturating_sub(started.elapsed()));
    let log = s.log();
    let failed: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("NOTIFY failed") && l.contains("sd.example."))
        .collect();
    assert!(
        !failed.is_empty() && failed.len() <= 3,
        "{} NOTIFYs to a closed port in 2.5 s:\n{}",
        failed.len(),
        failed.join("\n")
    );
    // The retry carries the newest serial.
    let last = failed.last().unwrap();
    if failed.len() > 1 {
        assert!(
            last.contains(&format!("serial={serial}")),
            "{last}, newest {serial}"
        );
    }
}

/// `xdpdns register`: health command failing → down, passing → up after
/// `rise`, SIGTERM → deregistered.
#[test]
fn agent_follows_its_health_check() {
    let s = start("window_ms = 1000, last_member_delay_ms = 300");
    let dir = TempDir::new("agent");
    let flag = dir.0.join("healthy");
    let config = dir.write(
        "agent.toml",
        &format!(
            r#"
api = "{api}"
token = "{TOKEN}"
id = "agent-1"
heartbeat_ms = 300

[instance]
owner = "acme"
addresses = ["10.9.0.1"]
services = ["api:443"]
lease_secs = 2

[health]
command = "test -f {flag}"
interval_ms = 100
fall = 2
rise = 2
"#,
            api = s.api(),
            flag = path_str(&flag)
        ),
    );
    let mut agent = Command::new(BIN)
        .args(["register", "--config"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let svc = "api.svc.acme.sd.example.";
    let inst = "agent-1.inst.acme.sd.example.";
    let result = std::panic::catch_unwind(|| {
        assert!(eventually(Duration::from_secs(5), || addresses(
            &s.udp(inst, RecordType::A)
        ) == ["10.9.0.1"]));
        assert!(
            addresses(&s.udp(svc, RecordType::A)).is_empty(),
            "listed before its check passed"
        );
        std::fs::write(&flag, "").unwrap();
        assert!(
            eventually(Duration::from_secs(5), || addresses(
                &s.udp(svc, RecordType::A)
            ) == ["10.9.0.1"]),
            "never came up"
        );
        // Heartbeats outlive the 2 s lease.
        std::thread::sleep(Duration::from_secs(3));
        assert_eq!(addresses(&s.udp(svc, RecordType::A)), ["10.9.0.1"]);
        std::fs::remove_file(&flag).unwrap();
        assert!(
            eventually(Duration::from_secs(5), || addresses(
                &s.udp(svc, RecordType::A)
            )
            .is_empty()),
            "never went down"
        );
        assert_eq!(
            addresses(&s.udp(inst, RecordType::A)),
            ["10.9.0.1"],
            "instance name stays while down"
        );
    });
    let _ = Command::new("kill")
        .args(["-TERM", &agent.id().to_string()])
        .status();
    let status = agent.wait().unwrap();
    result.unwrap();
    assert!(status.success());
    assert!(
        eventually(Duration::from_secs(2), || s
            .udp(inst, RecordType::A)
            .response_code
            == ResponseCode::NXDomain),
        "not deregistered on SIGTERM"
    );
}

/// A registration over the per-instance limits is refused fast, naming the
/// limit, and one far over the body limit gets 413 without being read,
/// while DNS keeps answering (the 50,000-address PUT that once stopped
/// every answer).
#[test]
fn registrations_at_the_limits_are_accepted_and_one_over_is_refused() {
    let s = start("");
    let addrs = |n: usize| {
        (0..n)
            .map(|i| format!("\"10.{}.{}.{}\"", i >> 16 & 255, i >> 8 & 255, i & 255))
            .collect::<Vec<_>>()
            .join(",")
    };
    let body = |n: usize| {
        format!(
            r#"{{"owner":"acme","addresses":[{}],"services":["web:80"],"lease_secs":60}}"#,
            addrs(n)
        )
    };
    // At the limit: accepted and answered (64 A records: over TCP).
    let (code, _) = put(&s, "max", &body(64));
    assert_eq!(code, 200);
    assert!(eventually(Duration::from_secs(5), || {
        addresses(&s.tcp("max.inst.acme.sd.example.", RecordType::A)).len() == 64
    }));
    // One over: 422 naming the field and the limit's key.
    let (code, err) = put(&s, "over", &body(65));
    assert_eq!(code, 422, "{err}");
    assert_eq!(err["field"], "addresses");
    assert!(
        err["error"]
            .as_str()
            .unwrap()
            .contains("registry.limits.max_addresses"),
        "{err}"
    );
    // 50,000 addresses: `hostile_input::an_oversized_registration_is_refused_at_once_while_dns_answers`.
}

/// A damaged record before the end of the registry journal stops start-up
/// with the file and the offset (acknowledged batches follow it, so none
/// is dropped silently); `xdpdns registry-repair` keeps what precedes it.
#[test]
fn mid_journal_damage_stops_start_up_and_repair_keeps_what_precedes_it() {
    let mut s = start("");
    for id in ["r1", "r2", "r3"] {
        let body = r#"{"owner":"acme","addresses":["10.9.0.1"],"lease_secs":600}"#;
        assert_eq!(put(&s, id, body).0, 200);
    }
    s.signal("KILL");
    let _ = s.child.wait();
    let journal = s.dir.0.join("registry/registry.journal");
    let mut bytes = std::fs::read(&journal).unwrap();
    // The first record is the lease renewal batch or r1: damage the middle.
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&journal, &bytes).unwrap();

    let out = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&s.config)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started on a damaged journal: {err}");
    assert!(
        err.contains("registry.journal") && err.contains("byte offset"),
        "{err}"
    );

    let out = Command::new(BIN)
        .args(["registry-repair", "--config"])
        .arg(&s.config)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("set aside"), "{said}");
    let dir = std::mem::replace(&mut s.dir, TempDir(std::path::PathBuf::new()));
    let s = Server::start_in(dir, s.config.clone(), &[]);
    let (code, r1) = http(
        "GET",
        &format!("{}/v1/instances/r1", s.api()),
        Some(TOKEN),
        None,
    );
    assert_eq!(code, 200, "the batch before the damage is kept: {r1}");
}

/// Anonymous readers (public reads) see what DNS shows, nothing more: a
/// disabled instance is absent from listings and answers 404, as an
/// unknown one does; with the token it is there.
#[test]
fn public_reads_hide_what_dns_hides() {
    let s = start("");
    let body = |disabled: bool| {
        format!(
            r#"{{"owner":"acme","addresses":["10.7.0.1"],"services":["web"],"lease_secs":600,"disabled":{disabled}}}"#
        )
    };
    assert_eq!(put(&s, "shown", &body(false)).0, 200);
    assert_eq!(put(&s, "hidden", &body(true)).0, 200);
    let ids = |token: Option<&str>| -> Vec<String> {
        let (code, list) = http("GET", &format!("{}/v1/instances", s.api()), token, None);
        assert_eq!(code, 200);
        list.as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(None), ["shown"]);
    assert_eq!(ids(Some(TOKEN)), ["hidden", "shown"]);
    let get = |token| {
        http(
            "GET",
            &format!("{}/v1/instances/hidden", s.api()),
            token,
            None,
        )
        .0
    };
    assert_eq!(get(None), 404);
    assert_eq!(get(Some(TOKEN)), 200);
    let (_, services) = http("GET", &format!("{}/v1/services", s.api()), None, None);
    let text = services.to_string();
    assert!(text.contains("shown") && !text.contains("hidden"), "{text}");
}

/// Listings come a page at a time, in id order, with a `Link` to the next.
#[test]
fn instance_listings_are_paged() {
    let s = start("");
    for i in 0..5 {
        let body = r#"{"owner":"acme","addresses":["10.8.0.1"],"lease_secs":600}"#;
        assert_eq!(put(&s, &format!("p{i}"), body).0, 200);
    }
    let agent = ureq::AgentBuilder::new().build();
    let mut seen = Vec::new();
    let mut url = format!("{}/v1/instances?limit=2", s.api());
    for _ in 0..10 {
        let resp = agent.get(&url).call().unwrap();
        let link = resp.header("link").map(str::to_string);
        let page: Value = serde_json::from_str(&resp.into_string().unwrap()).unwrap();
        let ids: Vec<String> = page
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap().to_string())
            .collect();
        assert!(ids.len() <= 2);
        seen.extend(ids);
        let Some(link) = link else { break };
        let path = link.trim_start_matches('<').split('>').next().unwrap();
        url = format!("{}{path}", s.api());
    }
    assert_eq!(seen, ["p0", "p1", "p2", "p3", "p4"]);
    let (code, err) = http(
        "GET",
        &format!("{}/v1/instances?limit=0", s.api()),
        None,
        None,
    );
    assert_eq!((code, err["field"].as_str()), (400, Some("limit")));
}
