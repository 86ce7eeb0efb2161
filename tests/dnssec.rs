//! DNSSEC: zones signed by BIND's `dnssec-signzone` (NSEC, NSEC3, NSEC3
//! with opt-out) served by xdpdns from the file and as a secondary of NSD,
//! each query answered like NSD; a zone file of every type read and
//! transferred out unchanged (compared by dnspython, a second DNS library).

use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use hickory_proto::op::{Edns, Message};
use hickory_proto::rr::RecordType;
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};

use super::support::peers::{free_port, loopback, Proc};
use super::support::signing::{self, run_in, Signed};
use super::support::*;

/// The test zone: every shape a validator meets — apex data, a CNAME in
/// and out of the zone, a wildcard, empty non-terminals, a secure and an
/// insecure delegation with glue, a DNAME, SRV with additional data.
pub const ZONE: &str = "$ORIGIN signed.test.\n$TTL 3600\n\
@        SOA   ns1 hostmaster 2026112301 3600 900 1209600 300\n\
@        NS    ns1\n\
@        NS    ns2\n\
@        MX    10 mail\n\
@        A     192.0.2.1\n\
ns1      A     192.0.2.1\n\
ns2      A     192.0.2.2\n\
ns2      AAAA  2001:db8::2\n\
mail     A     192.0.2.25\n\
www      A     192.0.2.80\n\
www      AAAA  2001:db8::80\n\
www      TXT   \"hello\"\n\
alias    CNAME www\n\
outside  CNAME www.example.net.\n\
*.wild   A     192.0.2.99\n\
*.wild   TXT   \"wild\"\n\
a.b.ent  A     192.0.2.7\n\
_http._tcp SRV 0 5 80 www\n\
sec      NS    ns.sec\n\
sec      DS    12345 13 2 8B2F3D0B4C9E1A7F6D5E4C3B2A19087F6E5D4C3B2A190817263544536271809A\n\
ns.sec   A     192.0.2.53\n\
insec    NS    ns.insec\n\
ns.insec A     192.0.2.54\n\
old      DNAME new.signed.test.\n\
x.new    A     192.0.2.10\n";

/// Names asked about: every owner, names below the wildcard, the empty
/// non-terminals, names that do not exist (beside and below existing
/// ones), names below the delegations and the DNAME.
pub const NAMES: &[&str] = &[
    "signed.test.",
    "ns1.signed.test.",
    "ns2.signed.test.",
    "mail.signed.test.",
    "www.signed.test.",
    "WwW.Signed.Test.",
    "alias.signed.test.",
    "outside.signed.test.",
    "*.wild.signed.test.",
    "anything.wild.signed.test.",
    "deep.er.wild.signed.test.",
    "wild.signed.test.",
    "a.b.ent.signed.test.",
    "b.ent.signed.test.",
    "ent.signed.test.",
    "nx.b.ent.signed.test.",
    "_http._tcp.signed.test.",
    "_tcp.signed.test.",
    "sec.signed.test.",
    "host.sec.signed.test.",
    "insec.signed.test.",
    "host.insec.signed.test.",
    "old.signed.test.",
    "x.old.signed.test.",
    "y.old.signed.test.",
    "new.signed.test.",
    "x.new.signed.test.",
    "nonexistent.signed.test.",
    "zzzz.signed.test.",
    "a.signed.test.",
];

const TYPES: &[RecordType] = &[
    RecordType::A,
    RecordType::AAAA,
    RecordType::TXT,
    RecordType::MX,
    RecordType::NS,
    RecordType::SOA,
    RecordType::DS,
    RecordType::DNSKEY,
    RecordType::CNAME,
    RecordType::SRV,
    RecordType::NSEC,
    RecordType::NSEC3PARAM,
    RecordType::DNAME,
];

#[derive(Clone, Copy, Debug)]
pub enum Denial {
    Nsec,
    Nsec3,
    Nsec3OptOut,
}

/// Signs [`ZONE`] with a fresh ECDSA P-256 KSK and ZSK.
fn sign(denial: Denial) -> Signed {
    sign_zone("signed.test.", ZONE, "ECDSAP256SHA256", denial)
}

/// Signs `text` (zone `origin`) with a fresh KSK and ZSK of `algorithm`,
/// with `denial` records, valid for 30 days.
pub fn sign_zone(origin: &str, text: &str, algorithm: &str, denial: Denial) -> Signed {
    sign_zone_until(origin, text, algorithm, denial, "+2592000")
}

/// [`sign_zone`] with signatures ending at `end` (dnssec-signzone's `-e`).
pub fn sign_zone_until(
    origin: &str,
    text: &str,
    algorithm: &str,
    denial: Denial,
    end: &str,
) -> Signed {
    let mut args = vec!["-e", end];
    args.extend(match denial {
        Denial::Nsec => &[][..],
        Denial::Nsec3 => &["-3", "aabbccdd", "-H", "2"][..],
        Denial::Nsec3OptOut => &["-3", "-", "-H", "0", "-A"][..],
    });
    signing::sign(origin, text, algorithm, &args)
}

/// NSD serving `file` for signed.test on `port`, transfers allowed.
fn nsd_primary(file: &Path, port: u16) -> Proc {
    nsd_serving("signed.test.", file, port)
}

/// NSD serving `file` for `origin` on `port`, transfers allowed.
pub fn nsd_serving(origin: &str, file: &Path, port: u16) -> Proc {
    let zone = origin.trim_end_matches('.');
    let dir = TempDir::new("nsd-signed");
    let d = dir.0.display().to_string();
    std::fs::copy(file, dir.0.join(format!("{zone}.zone"))).unwrap();
    let conf = dir.write(
        "nsd.conf",
        &format!(
            "server:\n  ip-address: 127.0.0.1@{port}\n  port: {port}\n  do-ip6: no\n\
             \x20 username: \"\"\n  chroot: \"\"\n  zonesdir: \"{d}\"\n  database: \"\"\n\
             \x20 pidfile: \"{d}/nsd.pid\"\n  xfrdfile: \"{d}/xfrd.state\"\n  xfrdir: \"{d}\"\n\
             \x20 zonelistfile: \"{d}/zone.list\"\n  server-count: 1\n  verbosity: 1\n\
             \x20 rrl-ratelimit: 0\n\
             remote-control:\n  control-enable: no\n\
             zone:\n  name: {zone}\n  zonefile: {zone}.zone\n\
             \x20 provide-xfr: 127.0.0.0/8 NOKEY\n  notify: 127.0.0.1@1 NOKEY\n"
        ),
    );
    let c = conf.display().to_string();
    let mut p = Proc::spawn("nsd", dir, conf, "nsd", &["-d", "-c", &c]);
    let ok = eventually(Duration::from_secs(20), || {
        p.assert_running();
        udp_raw_timeout(
            loopback(port),
            &query(origin, RecordType::SOA, None),
            Duration::from_millis(200),
        )
        .is_some()
    });
    assert!(ok, "NSD does not answer; log:\n{}", p.log());
    p
}

fn xdpdns_secondary_of(port: u16) -> Server {
    let dir = TempDir::new("secondary");
    let config = dir.write(
        "xdpdns.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nudp_sockets = 1\n[log]\nlevel = \"info\"\n\
             [[zone]]\norigin = \"signed.test.\"\nprimaries = [\"127.0.0.1:{port}\"]\n"
        ),
    );
    let server = Server::start_with_config(dir, config);
    let loaded = eventually(Duration::from_secs(20), || {
        !server
            .udp("signed.test.", RecordType::SOA)
            .answers
            .is_empty()
    });
    assert!(loaded, "secondary never loaded:\n{}", server.log());
    server
}

/// How a query is sent.
#[derive(Clone, Copy, Debug)]
enum Via {
    Udp(u16),
    Tcp,
}

fn ask(addr: SocketAddr, name: &str, rtype: RecordType, dnssec: bool, via: Via) -> Message {
    let mut e = Edns::new();
    e.set_max_payload(match via {
        Via::Udp(size) => size,
        Via::Tcp => 1232,
    });
    e.set_dnssec_ok(dnssec);
    let packet = query(name, rtype, Some(e));
    let bytes = match via {
        Via::Udp(_) => udp_raw(addr, &packet)
            .unwrap_or_else(|| panic!("no reply from {addr} to {name} {rtype}")),
        Via::Tcp => {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            tcp_send(&mut s, &packet);
            tcp_recv(&mut s).unwrap()
        }
    };
    Message::from_vec(&bytes).unwrap()
}

/// A record as compared: owner (lower case), TTL, type, rdata bytes.
fn records(rs: &[hickory_proto::rr::Record]) -> BTreeSet<String> {
    rs.iter()
        .filter(|r| r.record_type() != RecordType::OPT)
        .map(|r| {
            let mut bytes = Vec::new();
            let mut enc = BinEncoder::new(&mut bytes);
            r.data.emit(&mut enc).unwrap();
            format!(
                "{} {} {} {}",
                r.name.to_lowercase(),
                r.ttl,
                r.record_type(),
                data_encoding::HEXLOWER.encode(&bytes)
            )
        })
        .collect()
}

/// The apex NS RRset (and its RRSIG) that NSD adds to the authority
/// section of positive answers: optional (RFC 2181 §6.1), xdpdns leaves
/// it out as Knot and BIND's minimal responses do.
fn optional_authority(section: &BTreeSet<String>, answered: bool) -> BTreeSet<String> {
    section
        .iter()
        .filter(|r| {
            !(answered
                && (r.starts_with("signed.test. 3600 NS ")
                    || r.starts_with("signed.test. 3600 RRSIG 0002")))
        })
        .cloned()
        .collect()
}

/// Where NSD's proofs knowingly differ from the RFCs' minimum, and which
/// side may carry more NSEC/NSEC3 records (each case checked by the
/// validator test instead).
#[derive(Clone, Copy, PartialEq)]
enum Leeway {
    None,
    /// A literal `*` name: NSD adds the closest encloser's NSEC3 to a
    /// NODATA proof that needs only the NSEC3 matching the name.
    NsdMore,
    /// Below a DNAME with NSEC: NSD leaves out the NSEC covering the
    /// synthesised target, which RFC 4035 §3.1.3.2 requires.
    OursMore,
}

fn leeway(name: &str, denial: Denial) -> Leeway {
    if name.starts_with("*.") {
        Leeway::NsdMore
    } else if name.ends_with(".old.signed.test.") && matches!(denial, Denial::Nsec) {
        Leeway::OursMore
    } else {
        Leeway::None
    }
}

/// True when `more` holds `less` plus only NSEC/NSEC3 records and their
/// RRSIGs.
fn only_more_denial(more: &BTreeSet<String>, less: &BTreeSet<String>) -> bool {
    less.is_subset(more)
        && more.difference(less).all(|r| {
            let t = r.split(' ').nth(2).unwrap_or("");
            t == "NSEC" || t == "NSEC3" || r.contains(" RRSIG 002f") || r.contains(" RRSIG 0032")
        })
}

/// What must be equal: header bits, answer and authority sections. The
/// additional section may differ (optional data, dropped when short of
/// room), but what xdpdns adds must be what NSD adds over TCP (`full`).
/// Two truncated replies are equal whatever part of the data each holds.
fn compare(
    ours: &Message,
    nsd: &Message,
    full: &Message,
    leeway: Leeway,
    what: &str,
) -> Result<(), String> {
    let header = |m: &Message| {
        (
            m.metadata.response_code,
            m.metadata.authoritative,
            m.metadata.truncation,
            m.edns.as_ref().map(|e| e.flags().dnssec_ok),
        )
    };
    let (h_ours, h_nsd) = (header(ours), header(nsd));
    // More proof records make a longer reply, truncated where the other
    // side's still fits.
    let bigger_truncated = match leeway {
        Leeway::NsdMore => h_nsd.2 && !h_ours.2,
        Leeway::OursMore => h_ours.2 && !h_nsd.2,
        Leeway::None => false,
    };
    if bigger_truncated && (h_ours.0, h_ours.1) == (h_nsd.0, h_nsd.1) {
        return Ok(());
    }
    if h_ours != h_nsd {
        return Err(format!(
            "{what}: header {h_ours:?} vs NSD {h_nsd:?}\nours: {ours}\nNSD: {nsd}"
        ));
    }
    if h_ours.2 {
        return Ok(());
    }
    let answered = !nsd.answers.is_empty();
    let authority = (
        optional_authority(&records(&ours.authorities), answered),
        optional_authority(&records(&nsd.authorities), answered),
    );
    let authority_ok = match leeway {
        Leeway::None => authority.0 == authority.1,
        Leeway::NsdMore => only_more_denial(&authority.1, &authority.0),
        Leeway::OursMore => only_more_denial(&authority.0, &authority.1),
    };
    for (section, a, b, ok) in [
        (
            "answer",
            records(&ours.answers),
            records(&nsd.answers),
            None,
        ),
        ("authority", authority.0, authority.1, Some(authority_ok)),
    ] {
        if !ok.unwrap_or(a == b) {
            return Err(format!(
                "{what}: {section} differs\nonly ours: {:#?}\nonly NSD: {:#?}",
                a.difference(&b).collect::<Vec<_>>(),
                b.difference(&a).collect::<Vec<_>>()
            ));
        }
    }
    let (a, b) = (records(&ours.additionals), records(&full.additionals));
    if !a.is_subset(&b) {
        return Err(format!(
            "{what}: additional records NSD would not send: {:#?}",
            a.difference(&b).collect::<Vec<_>>()
        ));
    }
    Ok(())
}

/// Every name × type × DO × transport against NSD; returns the failures.
fn differential(ours: SocketAddr, nsd: SocketAddr, denial: Denial, label: &str) -> Vec<String> {
    let mut failures = Vec::new();
    let mut asked = 0;
    for name in NAMES {
        for &rtype in TYPES {
            for dnssec in [false, true] {
                // What NSD adds when nothing is short of room.
                let full = ask(nsd, name, rtype, dnssec, Via::Tcp);
                for via in [Via::Udp(1232), Via::Udp(512), Via::Tcp] {
                    let a = ask(ours, name, rtype, dnssec, via);
                    let b = ask(nsd, name, rtype, dnssec, via);
                    asked += 1;
                    let what = format!("{label} {name} {rtype} DO={dnssec} {via:?}");
                    if let Err(e) = compare(&a, &b, &full, leeway(name, denial), &what) {
                        failures.push(e);
                    }
                }
            }
        }
    }
    assert_eq!(asked, NAMES.len() * TYPES.len() * 6);
    failures
}

fn check_against_nsd(denial: Denial) {
    let signed = sign(denial);
    let nsd_port = free_port();
    let nsd = nsd_primary(&signed.file, nsd_port);
    let text = std::fs::read_to_string(&signed.file).unwrap();
    let from_file = Server::start("signed.test.", &text, "", "");
    let secondary = xdpdns_secondary_of(nsd_port);
    let mut failures = differential(from_file.addr, loopback(nsd_port), denial, "file");
    failures.extend(differential(
        secondary.addr,
        loopback(nsd_port),
        denial,
        "secondary",
    ));
    drop(nsd);
    let headlines: Vec<&str> = failures.iter().filter_map(|f| f.lines().next()).collect();
    let report = std::env::temp_dir().join(format!("xdpdns-dnssec-{denial:?}.txt"));
    let _ = std::fs::write(&report, failures.join("\n\n"));
    assert!(
        failures.is_empty(),
        "{denial:?}: {} differences from NSD (all in {}):\n{}\nfirst ones in full:\n{}",
        failures.len(),
        report.display(),
        headlines.join("\n"),
        failures
            .iter()
            .take(6)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n\n")
    );
    let _ = signed.trust_anchor;
}

#[test]
fn nsec_signed_zone_answers_like_nsd() {
    check_against_nsd(Denial::Nsec);
}

#[test]
fn nsec3_signed_zone_answers_like_nsd() {
    check_against_nsd(Denial::Nsec3);
}

#[test]
fn nsec3_opt_out_zone_answers_like_nsd() {
    check_against_nsd(Denial::Nsec3OptOut);
}

#[test]
fn a_zone_of_every_type_loads_and_transfers_out_unchanged() {
    let text = include_str!("support/every-type.zone");
    let dir = TempDir::new("every");
    let file = dir.write("every.zone", text);
    let out = Command::new(env!("CARGO_BIN_EXE_xdpdns"))
        .args(["check-zone", &path_str(&file), "every.test."])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(", 49 records"), "{stdout}");
    let server = Server::start("every.test.", text, "", "");
    // dnspython reads the file and transfers the zone from the server;
    // the two record sets must be equal.
    let script = r#"
import sys, dns.zone, dns.query, dns.rdatatype
path, port = sys.argv[1], int(sys.argv[2])
def records(zone):
    out = set()
    for name, node in zone.nodes.items():
        for rds in node.rdatasets:
            for rd in rds:
                out.add((name.to_text().lower(), rds.ttl, dns.rdatatype.to_text(rds.rdtype), rd.to_wire()))
    return out
file = records(dns.zone.from_file(path, origin="every.test.", relativize=False))
axfr = records(dns.zone.from_xfr(dns.query.xfr("127.0.0.1", "every.test.", port=port, relativize=False), relativize=False))
print(len(file), len(axfr))
for r in sorted(file - axfr): print("only in file:", r)
for r in sorted(axfr - file): print("only in AXFR:", r)
sys.exit(0 if file == axfr else 1)
"#;
    let out = Command::new("/usr/bin/python3")
        .args([
            "-c",
            script,
            &path_str(&file),
            &server.addr.port().to_string(),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the transfer differs from the file:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("49 49"), "{stdout}");
}

#[test]
fn check_zone_warns_of_signatures_about_to_expire() {
    let check = |signed: &Signed| {
        let out = Command::new(env!("CARGO_BIN_EXE_xdpdns"))
            .args(["check-zone", &path_str(&signed.file), "signed.test."])
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert_eq!(
        check(&sign(Denial::Nsec3)),
        "",
        "a month of validity: no warning"
    );
    let soon = sign_zone_until(
        "signed.test.",
        ZONE,
        "ECDSAP256SHA256",
        Denial::Nsec,
        "+172800",
    );
    let warnings = check(&soon);
    let lines: Vec<&str> = warnings.lines().collect();
    assert_eq!(lines.len(), 1, "one line for all of them: {warnings}");
    let file = path_str(&soon.file);
    assert!(
        lines[0].starts_with(&format!("warning: {file}:"))
            && lines[0].contains("expires in 4")
            && lines[0].contains("more like it)"),
        "{warnings}"
    );
}

/// Re-signing after one change (dnssec-signzone keeps the signatures that
/// are still good) makes a small IXFR: the SOA, the changed RRset and their
/// new RRSIGs, not the zone.
#[test]
fn an_ixfr_of_a_re_signed_zone_carries_only_what_changed() {
    let first = sign(Denial::Nsec3);
    let text = std::fs::read_to_string(&first.file).unwrap();
    let srv = Server::start("signed.test.", &text, "", "");
    // The operator's edit, then dnssec-signzone again with -N increment.
    let edited = text.replace("192.0.2.80", "192.0.2.88");
    assert_ne!(edited, text);
    std::fs::write(first.dir.join("edited.zone"), &edited).unwrap();
    run_in(
        &first.dir,
        Command::new("dnssec-signzone")
            .args(["-S", "-K", ".", "-o", "signed.test.", "-N", "increment"])
            .args(["-3", "aabbccdd", "-H", "2", "-f", "resigned.zone"])
            .arg("edited.zone"),
    );
    let resigned = std::fs::read_to_string(first.dir.join("resigned.zone")).unwrap();
    srv.dir.write("zone.db", &resigned);
    srv.signal("HUP");
    assert!(
        srv.wait_log("reload done", Duration::from_secs(10)),
        "{}",
        srv.log()
    );
    let port = srv.addr.port().to_string();
    let out = run_in(
        &first.dir,
        Command::new("dig").args([
            "@127.0.0.1",
            "-p",
            &port,
            "signed.test.",
            "IXFR=2026112301",
            "+nocmd",
            "+noall",
            "+answer",
            "+onesoa",
        ]),
    );
    let records: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
    let soas = records.iter().filter(|l| l.contains("\tSOA\t")).count();
    assert!(
        soas >= 3,
        "an incremental transfer (SOA new, SOA old, ..., SOA new):\n{out}"
    );
    let zone_records = resigned
        .lines()
        .filter(|l| l.contains("\tIN ") || l.contains("\tRRSIG\t"))
        .count();
    assert!(
        records.len() < 16,
        "{} records for one changed address (the zone has ~{zone_records}):\n{out}",
        records.len()
    );
    assert!(
        out.contains("192.0.2.88") && out.contains("192.0.2.80"),
        "{out}"
    );
    assert!(
        out.contains("RRSIG\tA "),
        "the new signature over it:\n{out}"
    );
}
