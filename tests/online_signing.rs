//! Zones signed online: a registry zone and a file zone that takes
//! UPDATEs, signed by xdpdns with keys it made, validated by Unbound
//! (trusting only the keys xdpdns published) through registrations,
//! deregistrations, lease expiries, updates and a restart, and accepted whole by BIND's
//! `dnssec-verify`.

use std::process::{Command, Stdio};
use std::time::Duration;

use hickory_proto::dnssec::rdata::DNSSECRData;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{RData, RecordType};

use crate::support::peers::SECRET;
use crate::support::process::free_port;
use crate::support::{eventually, http, Server, TempDir};

const TOKEN: &str = "t";

const ZONE: &str = "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n\
                    @ NS ns1\nns1 A 192.0.2.53\nwww A 192.0.2.80\n*.wild TXT \"any\"\n";

/// xdpdns on `port` signing example.com (a CSK, takes UPDATEs with the
/// `ddns` key) and the registry zone sd.example (KSK and ZSK).
fn start(port: u16) -> Server {
    let dir = TempDir::new("online-signing");
    dir.write("zone.db", ZONE);
    let config = dir.write(
        "xdpdns.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\n[log]\nlevel = \"info\"\n\
             [transfer]\ndata_dir = \"data\"\n\
             [[dnssec_policy]]\nname = \"split\"\nkeys = \"ksk+zsk\"\n\
             [[tsig_key]]\nname = \"ddns\"\nsecret = \"{SECRET}\"\n\
             [[update_grant]]\nkey = \"ddns\"\n\
             [[zone]]\norigin = \"example.com.\"\nfile = \"zone.db\"\ndnssec_policy = \"default\"\n\
             [registry]\nlisten = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\ndata_dir = \"reg\"\n\
             batch_delay_ms = 2\nrequire_opt_in = false\n\
             ns = [\"ns1.example.com.\"]\nhostmaster = \"h.example.com.\"\n\
             [[registry.zone]]\nname = \"sd.example.\"\nnetworks = [\"*\"]\ndnssec_policy = \"split\"\n"
        ),
    );
    Server::start_with_config(dir, config)
}

/// The key-signing DNSKEYs `zone` publishes, as Unbound trust anchors.
fn trust_anchors(srv: &Server, zone: &str) -> Vec<String> {
    let m = srv.tcp(zone, RecordType::DNSKEY);
    m.answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::DNSSEC(DNSSECRData::DNSKEY(k)) if k.secure_entry_point() => {
                Some(format!("{} DNSKEY {}", r.name, r.data))
            }
            _ => None,
        })
        .collect()
}

pub(crate) struct Unbound {
    child: std::process::Child,
    /// Its own loopback address (port 53: DNSViz asks some of its
    /// questions there whatever port it is given).
    addr: String,
    dir: TempDir,
}

impl Drop for Unbound {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Unbound {
    /// A validating Unbound on loopback whose only way to the zones is
    /// xdpdns on `server`, trusting `anchors` and nothing else; nothing is
    /// cached, so every answer is validated afresh.
    /// The loopback address it answers on, at port 53.
    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    fn start(server: u16, zones: &[&str], anchors: &[String]) -> Unbound {
        let zones: Vec<(&str, u16)> = zones.iter().map(|z| (*z, server)).collect();
        Unbound::start_with(&zones, anchors, false)
    }

    /// The same with each zone at its own server, caching as it would
    /// (`cache`) or not.
    pub(crate) fn start_with(zones: &[(&str, u16)], anchors: &[String], cache: bool) -> Unbound {
        let dir = TempDir::new("unbound-online");
        // An address of its own, from a port no other test holds.
        let port = free_port();
        let addr = format!("127.{}.{}.53", port >> 8, port & 0xff);
        let mut conf = format!(
            "server:\n  interface: {addr}\n  port: 53\n  do-daemonize: no\n  username: \"\"\n\
             chroot: \"\"\n  directory: \"{}\"\n  pidfile: \"\"\n  use-syslog: no\n  verbosity: 1\n\
             module-config: \"validator iterator\"\n  val-log-level: 2\n  aggressive-nsec: no\n\
             do-not-query-localhost: no\n  do-ip6: no\n  access-control: 127.0.0.0/8 allow\n\
             qname-minimisation: no\n",
            dir.0.display()
        );
        // It asks only the servers of its stub zones, on loopback: never
        // another address (127.0.0.0/8 alone is left out).
        for block in [
            "0.0.0.0/2",
            "64.0.0.0/3",
            "96.0.0.0/4",
            "112.0.0.0/5",
            "120.0.0.0/6",
            "124.0.0.0/7",
            "126.0.0.0/8",
            "128.0.0.0/1",
        ] {
            conf.push_str(&format!("  do-not-query-address: {block}\n"));
        }
        if !cache {
            conf.push_str("  cache-max-ttl: 0\n  cache-max-negative-ttl: 0\n");
        }
        for a in anchors {
            conf.push_str(&format!("  trust-anchor: \"{a}\"\n"));
        }
        for (z, server) in zones {
            conf.push_str(&format!(
                "stub-zone:\n  name: \"{z}\"\n  stub-addr: 127.0.0.1@{server}\n"
            ));
        }
        let conf = dir.write("unbound.conf", &conf);
        let log = std::fs::File::create(dir.0.join("unbound.log")).unwrap();
        let child = Command::new("unbound")
            .args(["-d", "-c"])
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("unbound (installed by cargo xtask deps)");
        let u = Unbound { child, addr, dir };
        assert!(
            eventually(Duration::from_secs(10), || u
                .ask(zones[0].0, "SOA")
                .contains("status:")),
            "unbound did not start: {}",
            u.log()
        );
        u
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("unbound.log")).unwrap_or_default()
    }

    fn ask(&self, name: &str, rtype: &str) -> String {
        let out = Command::new("dig")
            .args([
                &format!("@{}", self.addr),
                "-p",
                "53",
                "+dnssec",
                "+time=3",
                "+tries=1",
            ])
            .args([name, rtype])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `name rtype` resolves as `status` with the AD bit (validated).
    pub(crate) fn secure(&self, name: &str, rtype: &str, status: &str) -> Result<(), String> {
        let out = self.ask(name, rtype);
        let ad = out
            .lines()
            .find(|l| l.starts_with(";; flags:"))
            .is_some_and(|l| l.split(';').nth(2).unwrap_or("").contains(" ad"));
        if ad && out.contains(&format!("status: {status}")) {
            Ok(())
        } else {
            Err(format!(
                "{name} {rtype} (wanted {status}, validated):\n{out}"
            ))
        }
    }
}

/// What `xdpdns ctl keys ZONE` prints.
fn ctl_keys(srv: &Server, zone: &str) -> String {
    let out = Command::new(crate::support::process::BIN)
        .args(["ctl", "--config"])
        .arg(&srv.config)
        .args(["keys", zone])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn deregister(srv: &Server, id: &str) {
    let (code, out) = http(
        "DELETE",
        &format!("{}/v1/instances/{id}", srv.api()),
        Some(TOKEN),
        None,
    );
    assert_eq!(code, 204, "{out}");
}

fn register(srv: &Server, id: &str, address: &str) {
    register_for(srv, id, address, 60);
}

fn register_for(srv: &Server, id: &str, address: &str, lease_secs: u32) {
    let body = format!(
        r#"{{"owner":"acme","addresses":["{address}"],"services":["web:8080"],"lease_secs":{lease_secs}}}"#
    );
    let (code, out) = http(
        "PUT",
        &format!("{}/v1/instances/{id}", srv.api()),
        Some(TOKEN),
        Some(&body),
    );
    assert_eq!(code, 200, "{out}");
}

/// Every answer and denial Unbound gets for the two zones validates.
fn all_secure(u: &Unbound, instances: &[&str], gone: &[&str]) -> Vec<String> {
    let mut checks: Vec<(String, &str, &str)> = vec![
        ("example.com.".into(), "SOA", "NOERROR"),
        ("www.example.com.".into(), "A", "NOERROR"),
        ("www.example.com.".into(), "TXT", "NOERROR"),
        ("nope.example.com.".into(), "A", "NXDOMAIN"),
        ("x.wild.example.com.".into(), "TXT", "NOERROR"),
        ("x.wild.example.com.".into(), "A", "NOERROR"),
    ];
    checks.extend(registry_checks(instances, gone));
    failed(u, &checks)
}

/// The registry zone's names (those of `instances`, with a type they
/// lack) and denials (`gone` instances, random names below the apex and
/// below the instances' parent), each with the status it should have.
fn registry_checks(instances: &[&str], gone: &[&str]) -> Vec<(String, &'static str, &'static str)> {
    let mut checks: Vec<(String, &str, &str)> = vec![
        ("sd.example.".into(), "SOA", "NOERROR"),
        ("web.svc.acme.sd.example.".into(), "A", "NOERROR"),
        ("web.svc.acme.sd.example.".into(), "AAAA", "NOERROR"),
        ("random-4711.sd.example.".into(), "A", "NXDOMAIN"),
        (
            "random-4711.inst.acme.sd.example.".into(),
            "AAAA",
            "NXDOMAIN",
        ),
    ];
    for id in instances {
        checks.push((format!("{id}.inst.acme.sd.example."), "A", "NOERROR"));
        checks.push((format!("{id}.inst.acme.sd.example."), "HTTPS", "NOERROR"));
    }
    for id in gone {
        checks.push((format!("{id}.inst.acme.sd.example."), "A", "NXDOMAIN"));
    }
    checks
}

/// The checks Unbound does not answer as validated with their status.
fn failed(u: &Unbound, checks: &[(String, &str, &str)]) -> Vec<String> {
    checks
        .iter()
        .filter_map(|(n, t, s)| u.secure(n, t, s).err())
        .collect()
}

/// `dnssec-verify` accepts an AXFR of `zone` from `srv` (`-z` for a CSK).
fn verify_axfr(srv: &Server, zone: &str, csk: bool) {
    let out = Command::new("dig")
        .args([
            "@127.0.0.1",
            "-p",
            &srv.addr.port().to_string(),
            zone,
            "AXFR",
        ])
        .args(["+nocmd", "+nostats", "+nocomments"])
        .output()
        .unwrap();
    let file = srv.dir.write(
        &format!("{zone}axfr"),
        &String::from_utf8_lossy(&out.stdout),
    );
    let mut cmd = Command::new("dnssec-verify");
    if csk {
        cmd.arg("-z");
    }
    let v = cmd
        .args(["-o", zone])
        .arg(&file)
        .output()
        .expect("dnssec-verify");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&v.stdout),
        String::from_utf8_lossy(&v.stderr)
    );
    assert!(
        v.status.success() && text.contains("Zone fully signed"),
        "{zone}: {text}"
    );
}

fn send_update(srv: &Server, name: &str, address: &str) {
    let update = crate::dynamic_updates::signed_update("example.com.", name, address);
    assert_eq!(
        crate::dynamic_updates::send_update(srv.addr, &update),
        ResponseCode::NoError
    );
}

#[test]
fn unbound_validates_signed_registry_and_updated_zones_through_changes_and_a_restart() {
    let port = free_port();
    let mut srv = start(port);
    register(&srv, "web-1", "10.0.0.1");
    register(&srv, "web-2", "10.0.0.2");
    let anchors: Vec<String> = ["example.com.", "sd.example."]
        .iter()
        .flat_map(|z| trust_anchors(&srv, z))
        .collect();
    assert_eq!(anchors.len(), 2, "one key-signing key each: {anchors:?}");
    // `ctl keys` prints the DS a parent needs, as BIND computes it.
    let listed = ctl_keys(&srv, "sd.example.");
    let mut dsfromkey = Command::new("dnssec-dsfromkey")
        .args(["-2", "-f", "-", "sd.example."])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("dnssec-dsfromkey");
    let keys = srv.dig(&["sd.example.", "DNSKEY", "+noall", "+answer"]);
    use std::io::Write as _;
    dsfromkey
        .stdin
        .take()
        .unwrap()
        .write_all(keys.as_bytes())
        .unwrap();
    let ds = String::from_utf8_lossy(&dsfromkey.wait_with_output().unwrap().stdout).into_owned();
    let ds = ds.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        !ds.is_empty()
            && listed
                .lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>().join(" ") == ds),
        "ctl keys:\n{listed}\ndnssec-dsfromkey: {ds}"
    );
    let u = Unbound::start(port, &["example.com", "sd.example"], &anchors);
    let failures = all_secure(&u, &["web-1", "web-2"], &[]);
    assert!(failures.is_empty(), "{}\n{}", failures.join("\n"), u.log());
    verify_axfr(&srv, "example.com.", true);
    verify_axfr(&srv, "sd.example.", false);

    // Changes: a registration, a deregistration, an UPDATE; each answer
    // right after them validates.
    register(&srv, "web-3", "10.0.0.3");
    deregister(&srv, "web-1");
    send_update(&srv, "added", "192.0.2.99");
    assert!(eventually(Duration::from_secs(2), || u
        .secure("web-3.inst.acme.sd.example.", "A", "NOERROR")
        .is_ok()));
    let mut failures = all_secure(&u, &["web-2", "web-3"], &["web-1"]);
    failures.extend(u.secure("added.example.com.", "A", "NOERROR").err());
    assert!(failures.is_empty(), "{}\n{}", failures.join("\n"), u.log());
    verify_axfr(&srv, "example.com.", true);
    verify_axfr(&srv, "sd.example.", false);

    // A lease that runs out: the name is signed while it lasts, and its
    // absence is a validated denial once it has expired.
    register_for(&srv, "web-4", "10.0.0.4", 1);
    assert!(eventually(Duration::from_secs(2), || u
        .secure("web-4.inst.acme.sd.example.", "A", "NOERROR")
        .is_ok()));
    assert!(
        eventually(Duration::from_secs(8), || u
            .secure("web-4.inst.acme.sd.example.", "A", "NXDOMAIN")
            .is_ok()),
        "the expired lease's name is denied, validated:\n{}",
        u.log()
    );
    let failures = all_secure(&u, &["web-2", "web-3"], &["web-1", "web-4"]);
    assert!(failures.is_empty(), "{}\n{}", failures.join("\n"), u.log());
    verify_axfr(&srv, "sd.example.", false);

    // Killed and started again: the same keys (the anchors still hold),
    // and what was signed is served as it was, not signed again.
    let before = srv.tcp("sd.example.", RecordType::SOA);
    srv.restart_after("KILL");
    let after = srv.tcp("sd.example.", RecordType::SOA);
    assert_eq!(before.answers, after.answers, "no new serial for a restart");
    let failures = all_secure(&u, &["web-2", "web-3"], &["web-1"]);
    assert!(failures.is_empty(), "{}\n{}", failures.join("\n"), u.log());
}

/// The registry zone under a signed parent served by NSD: the parent
/// (signed by BIND's `dnssec-signzone`) holds the DS `ctl keys` prints,
/// and Unbound, trusting only the parent's key, validates the registry's
/// names and denials through the chain, across a registration, a
/// deregistration and a lease that runs out.
#[test]
fn unbound_validates_the_registry_zone_through_a_parent_served_by_nsd() {
    let port = free_port();
    let srv = start(port);
    register(&srv, "web-1", "10.0.0.1");
    let ds: Vec<String> = ctl_keys(&srv, "sd.example.")
        .lines()
        .filter(|l| l.contains(" IN DS "))
        .map(|l| l.trim().to_string())
        .collect();
    assert_eq!(ds.len(), 1, "the KSK's DS: {ds:?}");
    let parent = format!(
        "$ORIGIN example.\n$TTL 60\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\n\
         ns1 A 192.0.2.53\nsd NS ns1.example.com.\n{}\n",
        ds[0]
    );
    let signed = crate::dnssec::sign_zone(
        "example.",
        &parent,
        "ECDSAP256SHA256",
        crate::dnssec::Denial::Nsec,
    );
    let nsd_port = free_port();
    let _nsd = crate::dnssec::nsd_serving("example.", &signed.file, nsd_port);
    let u = Unbound::start_with(
        &[("example", nsd_port), ("sd.example", port)],
        std::slice::from_ref(&signed.trust_anchor),
        false,
    );
    let registry =
        |u: &Unbound, present: &[&str], gone: &[&str]| failed(u, &registry_checks(present, gone));
    let failures = registry(&u, &["web-1"], &[]);
    assert!(failures.is_empty(), "{}\n{}", failures.join("\n"), u.log());
    register(&srv, "web-2", "10.0.0.2");
    register_for(&srv, "web-3", "10.0.0.3", 1);
    deregister(&srv, "web-1");
    assert!(
        eventually(Duration::from_secs(8), || registry(
            &u,
            &["web-2"],
            &["web-1", "web-3"]
        )
        .is_empty()),
        "{}\n{}",
        registry(&u, &["web-2"], &["web-1", "web-3"]).join("\n"),
        u.log()
    );
}

/// A zone added through the API with a `dnssec_policy` is signed from
/// its first answer, validates (with its own key as the anchor), keeps
/// its keys and signatures across a `kill -9`, is listed by `ctl keys`,
/// and an unknown policy is refused with the field named.
#[test]
fn a_zone_added_at_runtime_with_a_policy_is_signed_and_stays_signed() {
    let port = free_port();
    let mut srv = start(port);
    let api = srv.api();
    let (code, out) = http(
        "POST",
        &format!("{api}/v1/zones"),
        Some(TOKEN),
        Some(r#"{"name": "bad.example.net", "ns": ["ns1.example.com."], "dnssec_policy": "nope"}"#),
    );
    assert!(
        code == 422 && out["field"] == "dnssec_policy",
        "{code} {out}"
    );
    assert_eq!(
        srv.udp("bad.example.net.", RecordType::SOA)
            .metadata
            .response_code,
        ResponseCode::Refused,
        "not added"
    );
    let (code, out) = http(
        "POST",
        &format!("{api}/v1/zones"),
        Some(TOKEN),
        Some(r#"{"name": "rt.example.net", "ns": ["ns1.example.com."], "dnssec_policy": "split"}"#),
    );
    assert_eq!(code, 201, "{out}");
    let anchors = trust_anchors(&srv, "rt.example.net.");
    assert_eq!(anchors.len(), 1, "a KSK: {anchors:?}");
    let u = Unbound::start(port, &["rt.example.net"], &anchors);
    for (name, rtype, status) in [
        ("rt.example.net.", "SOA", "NOERROR"),
        ("rt.example.net.", "TXT", "NOERROR"),
        ("nope.rt.example.net.", "A", "NXDOMAIN"),
    ] {
        u.secure(name, rtype, status).unwrap();
    }
    let listed = ctl_keys(&srv, "rt.example.net.");
    assert!(
        listed.contains(" IN DS ") && listed.contains("Zsk"),
        "{listed}"
    );
    let before = srv.tcp("rt.example.net.", RecordType::DNSKEY);
    srv.restart_after("KILL");
    let after = srv.tcp("rt.example.net.", RecordType::DNSKEY);
    assert_eq!(
        before.answers, after.answers,
        "the same keys after a restart"
    );
    u.secure("nope.rt.example.net.", "A", "NXDOMAIN").unwrap();
}

#[test]
fn a_missing_key_file_stops_the_start_and_names_it() {
    let port = free_port();
    let mut srv = start(port);
    let keys = srv.dir.0.join("data/keys/example.com.");
    let file = std::fs::read_dir(&keys)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with(".pkcs8"))
        .expect("a private key file");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(keys.join(&file)).unwrap().permissions(),
    );
    assert_eq!(mode & 0o077, 0, "private keys are not readable by others");
    srv.signal("TERM");
    let _ = srv.child.wait();
    std::fs::remove_file(keys.join(&file)).unwrap();
    let out = Command::new(crate::support::process::BIN)
        .args(["serve", "--config"])
        .arg(&srv.config)
        .current_dir(&srv.dir.0)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains(&file), "the error names the key file: {err}");
}
