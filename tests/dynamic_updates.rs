//! RFC 2136 UPDATE end to end: `nsupdate` and `knsupdate` with TSIG and
//! the update policy, durability across `kill -9`, files written back and
//! read as differences, and a differential against Knot as an UPDATE
//! server (same rcodes, same zone after every step).

use std::collections::BTreeSet;
use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};

use crate::support::mutate::Rng;
use crate::support::peers::{knot_conf, start_knot, tool, SECRET};
use crate::support::process::free_port;
use crate::support::{eventually, tcp_recv, tcp_send, Server, TempDir};

const ZONE: &str = "\
$ORIGIN example.com.
$TTL 300
@ SOA ns1 hostmaster 1 3600 600 86400 60
@ NS ns1
@ NS ns2
ns1 A 192.0.2.53
ns2 A 192.0.2.54
www A 192.0.2.1
";

/// Keys, grants and the data directory: `ddns` may change anything,
/// `acme` only TXT records at `_acme-challenge` names.
fn update_config(extra: &str) -> String {
    format!(
        "[transfer]\ndata_dir = \"data\"\nserial_policy = \"increment\"\n\
         [[tsig_key]]\nname = \"ddns\"\nalgorithm = \"hmac-sha256\"\nsecret = \"{SECRET}\"\n\
         [[tsig_key]]\nname = \"acme\"\nalgorithm = \"hmac-sha256\"\nsecret = \"{SECRET}\"\n\
         [[update_grant]]\nkey = \"ddns\"\n\
         [[update_grant]]\nkey = \"acme\"\nmatch = \"wildcard\"\n\
         name = \"_acme-challenge.*.example.com\"\ntypes = [\"TXT\"]\n{extra}"
    )
}

fn start(extra: &str) -> Server {
    Server::start("example.com.", ZONE, "", &update_config(extra))
}

/// Runs `nsupdate` (BIND) or `knsupdate` (Knot) with `script`, signed with
/// `key` when given; its exit status and output.
fn run_tool(program: &str, srv: &Server, key: Option<&str>, script: &str) -> (bool, String) {
    let mut cmd = Command::new(tool(program));
    if let Some(k) = key {
        cmd.args(["-y", &format!("hmac-sha256:{k}:{SECRET}")]);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let full = format!(
        "server {} {}\nzone example.com.\n{script}\nsend\nquit\n",
        srv.addr.ip(),
        srv.addr.port()
    );
    child
        .stdin
        .take()
        .unwrap()
        .write_all(full.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    // knsupdate reports a refused update on stderr but exits 0.
    let failed = text.contains("update failed") || text.contains("failed to update");
    (out.status.success() && !failed, text)
}

fn answers(srv: &Server, name: &str, rtype: RecordType) -> Vec<String> {
    let mut v: Vec<String> = srv
        .udp(name, rtype)
        .answers
        .iter()
        .filter(|r| r.record_type() == rtype)
        .map(|r| r.data.to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn nsupdate_and_knsupdate_change_the_zone_within_their_grants() {
    let mut srv = start("");
    // nsupdate: an add, a delete and a replacement in one UPDATE.
    let (ok, out) = run_tool(
        "nsupdate",
        &srv,
        Some("ddns"),
        "update add new.example.com. 60 A 192.0.2.9\n\
         update add new.example.com. 60 AAAA 2001:db8::9\n\
         update delete www.example.com. A 192.0.2.1\n\
         update add www.example.com. 300 A 192.0.2.2",
    );
    assert!(ok, "{out}");
    assert_eq!(
        answers(&srv, "new.example.com.", RecordType::A),
        ["192.0.2.9"]
    );
    assert_eq!(
        answers(&srv, "www.example.com.", RecordType::A),
        ["192.0.2.2"]
    );
    assert_eq!(srv.tcp("www.example.com.", RecordType::A).answers.len(), 1);
    // knsupdate: a prerequisite that holds, then one that does not.
    let (ok, out) = run_tool(
        "knsupdate",
        &srv,
        Some("ddns"),
        "prereq yxrrset new.example.com. A\nupdate del new.example.com. AAAA\n\
         update add mail.example.com. 300 MX 10 www.example.com.",
    );
    assert!(ok, "{out}");
    assert!(answers(&srv, "new.example.com.", RecordType::AAAA).is_empty());
    assert_eq!(
        answers(&srv, "mail.example.com.", RecordType::MX),
        ["10 www.example.com."]
    );
    let (ok, out) = run_tool(
        "nsupdate",
        &srv,
        Some("ddns"),
        "prereq nxdomain www.example.com.\nupdate add never.example.com. 60 A 192.0.2.66",
    );
    assert!(!ok && out.contains("YXDOMAIN"), "{out}");
    // The ACME key: its TXT challenge, nothing else.
    let challenge = "_acme-challenge.www.example.com.";
    let (ok, out) = run_tool(
        "nsupdate",
        &srv,
        Some("acme"),
        &format!("update add {challenge} 60 TXT \"token-1\""),
    );
    assert!(ok, "{out}");
    assert_eq!(answers(&srv, challenge, RecordType::TXT), ["token-1"]);
    let (ok, out) = run_tool(
        "nsupdate",
        &srv,
        Some("acme"),
        &format!("update add {challenge} 60 TXT \"token-2\"\nupdate add www.example.com. 60 A 192.0.2.66"),
    );
    assert!(!ok && out.contains("REFUSED"), "{out}");
    assert_eq!(
        answers(&srv, challenge, RecordType::TXT),
        ["token-1"],
        "nothing of it applied"
    );
    // Unsigned: no grant covers it.
    let (ok, out) = run_tool(
        "nsupdate",
        &srv,
        None,
        "update add x.example.com. 60 A 192.0.2.66",
    );
    assert!(!ok && out.contains("REFUSED"), "{out}");
    assert!(answers(&srv, "x.example.com.", RecordType::A).is_empty());
    // Acknowledged is durable: a kill -9 right after loses nothing.
    srv.restart_after("KILL");
    assert_eq!(
        answers(&srv, "www.example.com.", RecordType::A),
        ["192.0.2.2"]
    );
    assert_eq!(answers(&srv, challenge, RecordType::TXT), ["token-1"]);
    assert_eq!(
        answers(&srv, "mail.example.com.", RecordType::MX),
        ["10 www.example.com."]
    );
}

#[test]
fn the_file_is_written_back_and_its_edits_are_merged_with_the_updates() {
    let srv = start("[update]\nfile_sync_ms = 200\n");
    let (ok, out) = run_tool(
        "nsupdate",
        &srv,
        Some("ddns"),
        "update add dyn.example.com. 60 A 192.0.2.9",
    );
    assert!(ok, "{out}");
    let file = srv.dir.0.join("zone.db");
    let written = eventually(Duration::from_secs(5), || {
        std::fs::read_to_string(&file)
            .is_ok_and(|t| t.contains("dyn.example.com. 60 IN A 192.0.2.9"))
    });
    assert!(
        written,
        "written back:\n{}",
        std::fs::read_to_string(&file).unwrap()
    );
    // An update the file does not have yet, then an operator's edit of
    // the file: the reload applies the edit and keeps the update.
    let (ok, out) = run_tool(
        "nsupdate",
        &srv,
        Some("ddns"),
        "update add later.example.com. 60 A 192.0.2.10",
    );
    assert!(ok, "{out}");
    let mut text = std::fs::read_to_string(&file).unwrap();
    text = text.replace("www.example.com. 300 IN A 192.0.2.1\n", "");
    text.push_str("edited.example.com. 300 IN A 192.0.2.77\n");
    std::fs::write(&file, text).unwrap();
    srv.signal("HUP");
    let merged = eventually(Duration::from_secs(5), || {
        answers(&srv, "edited.example.com.", RecordType::A) == ["192.0.2.77"]
    });
    assert!(merged, "{}", srv.log());
    assert!(answers(&srv, "www.example.com.", RecordType::A).is_empty());
    assert_eq!(
        answers(&srv, "later.example.com.", RecordType::A),
        ["192.0.2.10"]
    );
    assert_eq!(
        answers(&srv, "dyn.example.com.", RecordType::A),
        ["192.0.2.9"]
    );
}

/// An UPDATE adding an A record at `owner` (in example.com.), signed
/// with the `ddns` key.
pub(crate) fn signed_add(owner: &str, address: &str) -> Vec<u8> {
    let mut m = Message::new(1, MessageType::Query, OpCode::Update);
    m.add_query(Query::query(rel("@"), RecordType::SOA));
    m.add_authority(Record::from_rdata(
        rel(owner),
        60,
        RData::A(address.parse().unwrap()),
    ));
    signed(m)
}

/// An UPDATE of zone `zone` adding an A record at `owner` (relative),
/// signed with the `ddns` key.
pub(crate) fn signed_update(zone: &str, owner: &str, address: &str) -> Vec<u8> {
    let zone = Name::from_ascii(zone).unwrap();
    let mut m = Message::new(1, MessageType::Query, OpCode::Update);
    m.add_query(Query::query(zone.clone(), RecordType::SOA));
    let name = Name::from_ascii(owner)
        .unwrap()
        .append_domain(&zone)
        .unwrap();
    m.add_authority(Record::from_rdata(
        name,
        60,
        RData::A(address.parse().unwrap()),
    ));
    signed(m)
}

/// The `[transfer]`, key and grant tables for `signed_add`.
pub(crate) fn grant_config() -> String {
    update_config("")
}

/// Signs `m` with the `ddns` key.
fn signed(mut m: Message) -> Vec<u8> {
    let key = xdpdns::transfer::tsig::make_key("ddns", "hmac-sha256", SECRET).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    m.finalize(&key, now).unwrap();
    m.to_vec().unwrap()
}

/// Sends one UPDATE over TCP; its RCODE.
pub(crate) fn send_update(addr: SocketAddr, bytes: &[u8]) -> ResponseCode {
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    tcp_send(&mut s, bytes);
    let reply = tcp_recv(&mut s).expect("an UPDATE reply");
    Message::from_vec(&reply).unwrap().metadata.response_code
}

/// The zone by AXFR, one presentation line per record.
fn axfr(addr: SocketAddr) -> BTreeSet<String> {
    axfr_of(addr, "example.com.")
}

fn rel(name: &str) -> Name {
    match name {
        "@" => Name::from_ascii("example.com.").unwrap(),
        n if n.ends_with('.') => Name::from_ascii(n).unwrap(),
        n => Name::from_ascii(format!("{n}.example.com.")).unwrap(),
    }
}

/// A record from the small pools the differential draws from, so adds,
/// deletes and prerequisites meet the same data often.
fn pooled(rng: &mut Rng, owner: Name, ttl: u32) -> Record {
    let data = match rng.below(6) {
        0 => RData::A(format!("192.0.2.{}", 1 + rng.below(3)).parse().unwrap()),
        1 => RData::AAAA(format!("2001:db8::{}", 1 + rng.below(2)).parse().unwrap()),
        2 => RData::TXT(hickory_proto::rr::rdata::TXT::new(vec![format!(
            "t{}",
            rng.below(3)
        )])),
        3 => RData::MX(hickory_proto::rr::rdata::MX::new(10, rel("www"))),
        4 => RData::CNAME(hickory_proto::rr::rdata::CNAME(rel(
            ["www", "a", "b"][rng.below(3)]
        ))),
        _ => RData::NS(hickory_proto::rr::rdata::NS(rel(
            ["ns1", "ns2", "ns3"][rng.below(3)]
        ))),
    };
    Record::from_rdata(owner, ttl, data)
}

fn empty(owner: Name, rtype: RecordType, class: DNSClass) -> Record {
    let mut r = Record::update0(owner, 0, rtype);
    r.dns_class = class;
    r
}

const OWNERS: [&str; 7] = ["@", "a", "b", "www", "mail", "x.a", "_acme-challenge"];
const TYPES: [RecordType; 6] = [
    RecordType::A,
    RecordType::AAAA,
    RecordType::TXT,
    RecordType::MX,
    RecordType::CNAME,
    RecordType::NS,
];

/// One scripted UPDATE: mostly valid changes with prerequisites of every
/// form, sometimes malformed or outside the zone.
fn scripted_update(rng: &mut Rng, id: u16) -> Message {
    let mut m = Message::new(id, MessageType::Query, OpCode::Update);
    m.add_query(Query::query(rel("@"), RecordType::SOA));
    let owner = |rng: &mut Rng| rel(OWNERS[rng.below(OWNERS.len())]);
    if rng.below(3) == 0 {
        let o = owner(rng);
        let t = TYPES[rng.below(TYPES.len())];
        let prereq = match rng.below(5) {
            0 => empty(o, t, DNSClass::ANY),
            1 => empty(o, t, DNSClass::NONE),
            2 if rng.below(2) == 0 => empty(rel("nowhere"), RecordType::ANY, DNSClass::ANY),
            2 => empty(o, RecordType::ANY, DNSClass::ANY),
            3 => empty(o, RecordType::ANY, DNSClass::NONE),
            _ => {
                let mut r = pooled(rng, o, 0);
                r.ttl = 0;
                r
            }
        };
        m.add_answer(prereq);
    }
    for _ in 0..1 + rng.below(3) {
        let o = owner(rng);
        let r = match rng.below(12) {
            0..=5 => {
                let ttl = [60, 300][rng.below(2)];
                pooled(rng, o, ttl)
            }
            6 | 7 => {
                let mut r = pooled(rng, o, 0);
                r.dns_class = DNSClass::NONE;
                r
            }
            8 => empty(o, TYPES[rng.below(TYPES.len())], DNSClass::ANY),
            9 => empty(o, RecordType::ANY, DNSClass::ANY),
            10 => pooled(rng, Name::from_ascii("elsewhere.example.org.").unwrap(), 60),
            11 if rng.below(3) == 0 => {
                let soa = hickory_proto::rr::rdata::SOA::new(
                    rel("ns1"),
                    rel("hostmaster"),
                    rng.below(400) as u32,
                    3600,
                    600,
                    86400,
                    60,
                );
                Record::from_rdata(rel("@"), 300, RData::SOA(soa))
            }
            _ => match rng.below(3) {
                0 => empty(o, RecordType::AXFR, DNSClass::ANY),
                1 => {
                    let mut r = pooled(rng, o, 60);
                    r.dns_class = DNSClass::NONE;
                    r
                }
                _ => {
                    let mut r = pooled(rng, o, 60);
                    r.dns_class = DNSClass::CH;
                    r
                }
            },
        };
        m.add_authority(r);
    }
    m
}

#[test]
fn scripted_updates_match_knot_rcode_for_rcode_and_zone_for_zone() {
    let srv = start("");
    let kport = free_port();
    let kdir = TempDir::new("knot-ddns");
    kdir.write("example.com.zone", ZONE);
    let defs = format!(
        "key:\n  - id: ddns\n    algorithm: hmac-sha256\n    secret: {SECRET}\n\
         acl:\n  - id: ddns\n    key: ddns\n    action: update\n\
         \x20 - id: xfr\n    address: 127.0.0.0/8\n    action: transfer\n"
    );
    let zones = "  - domain: example.com\n    file: example.com.zone\n    acl: [ddns, xfr]\n    \
                 zonefile-sync: -1\n    serial-policy: increment\n";
    let conf = knot_conf(&kdir, kport, &defs, zones);
    let knot = start_knot(kdir, conf, kport);
    let kaddr: SocketAddr = ([127, 0, 0, 1], kport).into();
    assert_eq!(axfr(srv.addr), axfr(kaddr), "the same zone to start with");
    let mut rng = Rng::new(0x2136);
    let mut rcodes = std::collections::BTreeMap::<String, usize>::new();
    for step in 0..300u16 {
        let m = scripted_update(&mut rng, step);
        let (ours, theirs) = (
            send_update(srv.addr, &signed(m.clone())),
            send_update(kaddr, &signed(m.clone())),
        );
        assert_eq!(
            ours,
            theirs,
            "step {step}: rcode differs from Knot's for\n{m}\nknot log:\n{}",
            knot.log()
        );
        *rcodes.entry(ours.to_string()).or_default() += 1;
        let (a, b) = (axfr(srv.addr), axfr(kaddr));
        assert_eq!(a, b, "step {step}: zones differ after\n{m}");
    }
    eprintln!("rcodes over 300 scripted updates: {rcodes:?}");
    assert!(
        rcodes.len() >= 5,
        "the script reaches many rcodes: {rcodes:?}"
    );
}

/// One client's stream: UPDATEs of three records each (A, AAAA, TXT at a
/// name of its own), sequential over one TCP connection; the names whose
/// UPDATE was acknowledged, until the server goes away or `count` are
/// sent.
fn update_stream(
    addr: SocketAddr,
    client: usize,
    round: usize,
    count: usize,
    acked: &std::sync::atomic::AtomicUsize,
) -> Vec<String> {
    let mut done = Vec::new();
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else {
        return done;
    };
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for i in 0..count {
        let owner = format!("r{round}-c{client}-{i}");
        let mut m = Message::new(i as u16, MessageType::Query, OpCode::Update);
        m.add_query(Query::query(rel("@"), RecordType::SOA));
        let name = rel(&owner);
        m.add_authority(Record::from_rdata(
            name.clone(),
            60,
            RData::A("192.0.2.1".parse().unwrap()),
        ));
        m.add_authority(Record::from_rdata(
            name.clone(),
            60,
            RData::AAAA("2001:db8::1".parse().unwrap()),
        ));
        m.add_authority(Record::from_rdata(
            name,
            60,
            RData::TXT(hickory_proto::rr::rdata::TXT::new(vec![owner.clone()])),
        ));
        tcp_send(&mut s, &signed(m));
        let Some(reply) = tcp_recv(&mut s) else { break };
        if Message::from_vec(&reply)
            .map(|m| m.metadata.response_code)
            .ok()
            != Some(ResponseCode::NoError)
        {
            break;
        }
        done.push(owner);
        acked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    done
}

#[test]
fn acknowledged_updates_survive_kill_9_whole() {
    let mut srv = start("");
    let mut rng = Rng::new(0x9);
    for round in 0..3 {
        let acked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let kill_at = 150 + rng.below(350);
        let addr = srv.addr;
        let clients: Vec<_> = (0..4)
            .map(|c| {
                let acked = acked.clone();
                std::thread::spawn(move || update_stream(addr, c, round, 500, &acked))
            })
            .collect();
        let reached = eventually(Duration::from_secs(60), || {
            acked.load(std::sync::atomic::Ordering::Relaxed) >= kill_at
        });
        assert!(
            reached,
            "round {round}: {} acknowledged",
            acked.load(std::sync::atomic::Ordering::Relaxed)
        );
        srv.signal("KILL");
        let names: Vec<String> = clients
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .collect();
        srv.start_again();
        let zone = axfr(srv.addr);
        for owner in &names {
            for rtype in ["A", "AAAA", "TXT"] {
                let line = format!("{owner}.example.com. 60 {rtype} ");
                assert!(
                    zone.iter().any(|l| l.starts_with(&line)),
                    "round {round}: acknowledged {owner} {rtype} lost"
                );
            }
        }
        // None half-applied: a name is there with its three records or not at all.
        let mut per_name = std::collections::BTreeMap::<String, usize>::new();
        for l in zone.iter().filter(|l| l.starts_with(&format!("r{round}-"))) {
            *per_name
                .entry(l.split(' ').next().unwrap().to_string())
                .or_default() += 1;
        }
        assert!(
            per_name.values().all(|n| *n == 3),
            "round {round}: a partial update: {per_name:?}"
        );
        eprintln!(
            "round {round}: killed after {} acknowledged, {} names served after the restart",
            names.len(),
            per_name.len()
        );
    }
}

/// certbot with its RFC 2136 plugin obtains a certificate from a local
/// Pebble ACME server whose DNS-01 validation asks xdpdns: the challenge
/// TXT record is added and removed through signed UPDATEs under the
/// `acme` key's grant, and certbot finds the zone by signed SOA queries.
#[test]
fn certbot_obtains_a_certificate_through_dns01_updates() {
    use crate::support::peers::{Proc, TestPki};
    let srv = start("");
    let pki = TestPki::generate();
    let work = TempDir::new("acme");
    let (acme_port, mgmt_port) = (free_port(), free_port());
    let config = work.write(
        "pebble.json",
        &format!(
            r#"{{"pebble": {{"listenAddress": "127.0.0.1:{acme_port}",
                "managementListenAddress": "127.0.0.1:{mgmt_port}",
                "certificate": "{}", "privateKey": "{}",
                "httpPort": {}, "tlsPort": {},
                "ocspResponderURL": "", "externalAccountBindingRequired": false}}}}"#,
            pki.file("server.pem"),
            pki.file("server-key.pem"),
            free_port(),
            free_port()
        ),
    );
    // Validation asks xdpdns; no random sleeps or nonce rejections.
    let dns = srv.addr.to_string();
    let config_arg = config.display().to_string();
    let pebble_bin = tool("pebble").display().to_string();
    let mut pebble = Proc::spawn(
        "pebble",
        TempDir::new("pebble"),
        config.clone(),
        "env",
        &[
            "PEBBLE_VA_NOSLEEP=1",
            "PEBBLE_WFE_NONCEREJECT=0",
            &pebble_bin,
            "-config",
            &config_arg,
            "-dnsserver",
            &dns,
        ],
    );
    let up = eventually(Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", acme_port)).is_ok()
    });
    assert!(up, "pebble did not start: {}", pebble.log());
    let credentials = work.write(
        "rfc2136.ini",
        &format!(
            "dns_rfc2136_server = 127.0.0.1\ndns_rfc2136_port = {}\ndns_rfc2136_name = acme\n\
             dns_rfc2136_secret = {SECRET}\ndns_rfc2136_algorithm = HMAC-SHA256\n",
            srv.addr.port()
        ),
    );
    std::fs::set_permissions(
        &credentials,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let dir = |d: &str| work.0.join(d).display().to_string();
    let out = Command::new(tool("certbot"))
        .env("REQUESTS_CA_BUNDLE", pki.file("ca.pem"))
        .args(["certonly", "--non-interactive", "--agree-tos", "--email", "ops@example.com"])
        .args(["--server", &format!("https://127.0.0.1:{acme_port}/dir")])
        .args(["--config-dir", &dir("config"), "--work-dir", &dir("work"), "--logs-dir", &dir("logs")])
        .args(["--dns-rfc2136", "--dns-rfc2136-credentials", &credentials.display().to_string()])
        .args(["--dns-rfc2136-propagation-seconds", "1", "-d", "www.example.com"])
        .output()
        .expect("certbot (Debian packages certbot, python3-certbot-dns-rfc2136) is installed by `cargo xtask deps`");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "certbot failed:\n{text}\npebble:\n{}\nxdpdns:\n{}",
        pebble.log(),
        srv.log()
    );
    let cert = work.0.join("config/live/www.example.com/fullchain.pem");
    assert!(cert.is_file(), "no certificate: {text}");
    // The challenge was added, validated and removed again.
    let log = srv.log();
    let applied = log
        .lines()
        .filter(|l| l.contains("UPDATE applied") && l.contains("key=\"acme.\""))
        .count();
    assert!(
        applied >= 2,
        "challenge added and removed by UPDATE:\n{log}"
    );
    assert!(answers(&srv, "_acme-challenge.www.example.com.", RecordType::TXT).is_empty());
    pebble.assert_running();
}

/// A secondary zone that forwards UPDATEs (RFC 2136 §6) relays them to
/// its primary and the primary's answer back, signature and all; one
/// that does not forward refuses them.
#[test]
fn a_secondary_forwards_updates_to_its_primary() {
    let primary = start("");
    let dir = TempDir::new("fwd");
    let config = dir.write(
        "xdpdns.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\n[log]\nlevel = \"info\"\n\
             [[tsig_key]]\nname = \"ddns\"\nalgorithm = \"hmac-sha256\"\nsecret = \"{SECRET}\"\n\
             [[zone]]\norigin = \"example.com.\"\nprimaries = [\"{}\"]\nforward_updates = true\n",
            primary.addr
        ),
    );
    let secondary = Server::start_with_config(dir, config);
    let copied = eventually(Duration::from_secs(10), || {
        !answers(&secondary, "www.example.com.", RecordType::A).is_empty()
    });
    assert!(copied, "{}", secondary.log());
    let (ok, out) = run_tool(
        "nsupdate",
        &secondary,
        Some("ddns"),
        "update add relayed.example.com. 60 A 192.0.2.77",
    );
    assert!(ok, "{out}\n{}", secondary.log());
    assert_eq!(
        answers(&primary, "relayed.example.com.", RecordType::A),
        ["192.0.2.77"]
    );
    assert!(secondary.log().contains("UPDATE forwarded to the primary"));
    // Refused by the primary: the rcode comes back as the primary said.
    let (ok, out) = run_tool(
        "nsupdate",
        &secondary,
        Some("ddns"),
        "prereq nxdomain relayed.example.com.\nupdate add x.example.com. 60 A 192.0.2.78",
    );
    assert!(!ok && out.contains("YXDOMAIN"), "{out}");
    // Without forwarding, a secondary zone refuses UPDATEs.
    let dir = TempDir::new("nofwd");
    let config = dir.write(
        "xdpdns.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\n\
             [[tsig_key]]\nname = \"ddns\"\nalgorithm = \"hmac-sha256\"\nsecret = \"{SECRET}\"\n\
             [[zone]]\norigin = \"example.com.\"\nprimaries = [\"{}\"]\n",
            primary.addr
        ),
    );
    let plain = Server::start_with_config(dir, config);
    let copied = eventually(Duration::from_secs(10), || {
        !answers(&plain, "www.example.com.", RecordType::A).is_empty()
    });
    assert!(copied);
    let (ok, out) = run_tool(
        "nsupdate",
        &plain,
        Some("ddns"),
        "update add y.example.com. 60 A 192.0.2.79",
    );
    assert!(!ok && out.contains("REFUSED"), "{out}");
}

/// UPDATEs racing SIGHUP reloads, file write-backs and an operator's edit
/// of the file: every acknowledged update is served, the edit is merged,
/// and all of it is still there after `kill -9`.
#[test]
fn updates_racing_reloads_and_write_backs_lose_nothing() {
    let mut srv = start("[update]\nfile_sync_ms = 30\n");
    let addr = srv.addr;
    let stream = std::thread::spawn(move || {
        let mut acked = Vec::new();
        for i in 0..300 {
            let owner = format!("race{i}");
            if send_update(addr, &signed_add(&owner, "192.0.2.44")) == ResponseCode::NoError {
                acked.push(owner);
            }
        }
        acked
    });
    let file = srv.dir.0.join("zone.db");
    for round in 0..25 {
        std::thread::sleep(Duration::from_millis(20));
        if round == 10 {
            // The operator adds a record to the file meanwhile.
            let text = std::fs::read_to_string(&file).unwrap();
            std::fs::write(
                &file,
                format!("{text}operator.example.com. 300 IN A 192.0.2.99\n"),
            )
            .unwrap();
        }
        srv.signal("HUP");
    }
    let acked = stream.join().unwrap();
    assert_eq!(acked.len(), 300, "every UPDATE acknowledged");
    let merged = eventually(Duration::from_secs(5), || {
        answers(&srv, "operator.example.com.", RecordType::A) == ["192.0.2.99"]
    });
    assert!(merged, "{}", srv.log());
    let check = |srv: &Server| {
        let zone = axfr(srv.addr);
        for owner in &acked {
            let line = format!("{owner}.example.com. 60 A 192.0.2.44");
            assert!(zone.contains(&line), "acknowledged {owner} lost");
        }
        assert!(zone.contains("operator.example.com. 300 A 192.0.2.99"));
    };
    check(&srv);
    srv.restart_after("KILL");
    check(&srv);
}

/// UPDATEs to a zone racing incoming transfers of another: xdpdns B
/// serves `dyn.test` (taking updates) and `example.com` as a secondary
/// of xdpdns A, which NOTIFYs B of every change its own updates make.
/// Every update acknowledged by B is served, and B's copy of example.com
/// ends equal to A's.
#[test]
fn updates_racing_incoming_transfers_lose_nothing() {
    let (a_port, b_port) = (free_port(), free_port());
    let keys = format!(
        "[[tsig_key]]\nname = \"ddns\"\nalgorithm = \"hmac-sha256\"\nsecret = \"{SECRET}\"\n\
         [[update_grant]]\nkey = \"ddns\"\n"
    );
    let dir = TempDir::new("race-a");
    dir.write("zone.db", ZONE);
    let config = dir.write(
        "xdpdns.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:{a_port}\"]\n[transfer]\ndata_dir = \"data\"\n{keys}\
             [[zone]]\norigin = \"example.com.\"\nfile = \"zone.db\"\nnotify = [\"127.0.0.1:{b_port}\"]\n"
        ),
    );
    let a = Server::start_with_config(dir, config);
    let dir = TempDir::new("race-b");
    dir.write("dyn.db", &ZONE.replace("example.com.", "dyn.test."));
    let config = dir.write(
        "xdpdns.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:{b_port}\"]\n[transfer]\ndata_dir = \"data\"\n{keys}\
             [[zone]]\norigin = \"dyn.test.\"\nfile = \"dyn.db\"\n\
             [[zone]]\norigin = \"example.com.\"\nprimaries = [\"{}\"]\n",
            a.addr
        ),
    );
    let b = Server::start_with_config(dir, config);
    assert!(eventually(Duration::from_secs(10), || {
        !answers(&b, "www.example.com.", RecordType::A).is_empty()
    }));
    let (a_addr, b_addr) = (a.addr, b.addr);
    let upstream = std::thread::spawn(move || {
        for i in 0..100 {
            let rcode = send_update(a_addr, &signed_add(&format!("up{i}"), "192.0.2.61"));
            assert_eq!(rcode, ResponseCode::NoError);
        }
    });
    let mut acked = Vec::new();
    for i in 0..200 {
        let update = signed_update("dyn.test.", &format!("d{i}"), "192.0.2.62");
        if send_update(b_addr, &update) == ResponseCode::NoError {
            acked.push(i);
        }
    }
    upstream.join().unwrap();
    assert_eq!(acked.len(), 200);
    for i in acked {
        let name = format!("d{i}.dyn.test.");
        assert_eq!(answers(&b, &name, RecordType::A), ["192.0.2.62"], "{name}");
    }
    let same = eventually(Duration::from_secs(10), || {
        axfr(a.addr) == axfr_of(b.addr, "example.com.")
    });
    assert!(same, "B's copy of example.com follows A's:\n{}", b.log());
    let transfers =
        b.log().matches("IXFR received").count() + b.log().matches("AXFR received").count();
    assert!(transfers >= 2, "transfers came in meanwhile: {transfers}");
    eprintln!("{transfers} transfers in while 200 updates were applied");
}

/// [`axfr`] of any zone.
fn axfr_of(addr: SocketAddr, zone: &str) -> BTreeSet<String> {
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut q = Message::new(7, MessageType::Query, OpCode::Query);
    q.add_query(Query::query(
        Name::from_ascii(zone).unwrap(),
        RecordType::AXFR,
    ));
    tcp_send(&mut s, &q.to_vec().unwrap());
    let mut out = BTreeSet::new();
    let mut soas = 0;
    while soas < 2 {
        let msg = Message::from_vec(&tcp_recv(&mut s).expect("AXFR message")).unwrap();
        for r in msg.answers {
            soas += usize::from(r.record_type() == RecordType::SOA);
            out.insert(format!(
                "{} {} {} {}",
                r.name.to_lowercase(),
                r.ttl,
                r.record_type(),
                r.data
            ));
        }
    }
    out
}
