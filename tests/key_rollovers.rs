//! Key rollovers with short timers, watched by a validating resolver: a
//! child zone signed by xdpdns rolls its ZSK (pre-publication) and its
//! KSK (double-DS: CDS published, the parent's DS checked by query before
//! the swap and before the old key goes) while Unbound, trusting only the
//! parent's key, resolves through the chain of trust every 100 ms. The
//! parent is another xdpdns, signed online too; a helper plays the
//! parent's CDS scanner (RFC 7344), copying the child's CDS into the
//! parent's DS by UPDATE. Not one answer may fail to validate. Another
//! test has the child change its policy's algorithm across a restart and
//! roll to it (signatures first, then keys, then DS, then the old keys
//! out) under the same watch. At every new stage DNSViz probes the child
//! through Unbound and must report no error.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::online_signing::Unbound;
use crate::support::peers::SECRET;
use crate::support::process::free_port;
use crate::support::{Server, TempDir};

const PARENT: &str = "$ORIGIN example.\n$TTL 2\n@ SOA ns1 hostmaster 1 3600 600 86400 2\n\
                      @ NS ns1\nns1 A 192.0.2.53\nchild NS ns.child\nns.child A 192.0.2.54\n";
const CHILD: &str = "$ORIGIN child.example.\n$TTL 2\n@ SOA ns hostmaster 1 3600 600 86400 2\n\
                     @ NS ns\nns A 192.0.2.54\nwww A 192.0.2.80\n";

fn server(tag: &str, port: u16, origin: &str, zone: &str, policy: &str) -> Server {
    let dir = TempDir::new(tag);
    dir.write("zone.db", zone);
    let config = dir.write(
        "xdpdns.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\n[log]\nlevel = \"info\"\n\
             [transfer]\ndata_dir = \"data\"\n{policy}\
             [[tsig_key]]\nname = \"ddns\"\nsecret = \"{SECRET}\"\n\
             [[update_grant]]\nkey = \"ddns\"\n\
             [[zone]]\norigin = \"{origin}\"\nfile = \"zone.db\"\ndnssec_policy = \"fast\"\n"
        ),
    );
    Server::start_with_config(dir, config)
}

/// The RRset `name rtype` at `srv`, as presentation lines (TTL dropped).
fn rrset(srv: &Server, name: &str, rtype: &str) -> BTreeSet<String> {
    srv.dig(&[name, rtype, "+noall", "+answer", "+tcp"])
        .lines()
        .filter(|l| l.split_whitespace().nth(3) == Some(rtype))
        .map(|l| l.split_whitespace().skip(4).collect::<Vec<_>>().join(" "))
        .collect()
}

/// Makes the parent's DS for child.example. what the child's CDS says.
fn copy_cds_to_parent(parent: &Server, cds: &BTreeSet<String>) {
    let mut script = format!(
        "server 127.0.0.1 {}\nzone example.\nupdate delete child.example. DS\n",
        parent.addr.port()
    );
    for ds in cds {
        script.push_str(&format!("update add child.example. 2 DS {ds}\n"));
    }
    script.push_str("send\nquit\n");
    let mut child = Command::new("nsupdate")
        .args(["-y", &format!("hmac-sha256:ddns:{SECRET}")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("nsupdate");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Key tags with their flags, from a DNSKEY RRset.
fn key_tags(srv: &Server) -> BTreeSet<String> {
    let out = Command::new(crate::support::process::BIN)
        .args(["ctl", "--config"])
        .arg(&srv.config)
        .args(["keys", "child.example.", "--json"])
        .output()
        .unwrap();
    let keys: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    keys.as_array()
        .into_iter()
        .flatten()
        .map(|k| format!("{} {} {}", k["role"], k["tag"], k["state"]))
        .collect()
}

/// Resolves the child's names through Unbound until `done` says so (40 s
/// at most), copying the child's CDS to the parent's DS as it changes;
/// returns the key states seen, each once, and the answers that did not
/// validate.
/// Debian 12's DNSViz asks pygraphviz for a `release` module that its
/// pygraphviz (1.7) no longer has; this stands in for it.
const PYGRAPHVIZ_RELEASE: &str = "import sys, types\n\
    try:\n    import pygraphviz\n    m = types.ModuleType('pygraphviz.release')\n\
    \x20   m.version = pygraphviz.__version__\n    sys.modules['pygraphviz.release'] = m\n\
    \x20   pygraphviz.release = m\nexcept Exception:\n    pass\n";

/// What DNSViz finds wrong with the child, probed through Unbound (which
/// asks only the loopback servers: the analysis stops at the child) and
/// judged with the child's key-signing keys as its trust anchors: the
/// errors it reports, each with where.
fn dnsviz_errors(unbound: &Unbound, child: &Server) -> Vec<String> {
    let dir = crate::support::TempDir::new("dnsviz");
    dir.write("sitecustomize.py", PYGRAPHVIZ_RELEASE);
    let probe = dir.0.join("probe.json");
    let out = Command::new("dnsviz")
        .args(["probe", "-s", unbound.addr(), "-a", "child.example."])
        .arg("-o")
        .arg(&probe)
        .args([
            "child.example.",
            "www.child.example.",
            "nope.child.example.",
        ])
        .output()
        .expect("dnsviz (cargo xtask deps installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let anchors: String = rrset(child, "child.example.", "DNSKEY")
        .into_iter()
        .filter(|k| k.starts_with("257 "))
        .map(|k| format!("child.example. IN DNSKEY {k}\n"))
        .collect();
    let anchors = dir.write("anchors", &anchors);
    let grok = Command::new("dnsviz")
        .env("PYTHONPATH", &dir.0)
        .args(["grok", "-r"])
        .arg(&probe)
        .arg("-t")
        .arg(&anchors)
        .output()
        .unwrap();
    assert!(
        grok.status.success(),
        "{}",
        String::from_utf8_lossy(&grok.stderr)
    );
    let found: serde_json::Value = serde_json::from_slice(&grok.stdout).expect("grok's JSON");
    assert!(
        found.get("child.example.").is_some(),
        "no analysis of the child: {found}"
    );
    let mut errors = Vec::new();
    let mut statuses = BTreeSet::new();
    collect_errors(&found, "", &mut errors, &mut statuses);
    assert!(
        statuses.contains("SECURE"),
        "DNSViz saw no secure chain: {statuses:?}"
    );
    errors
}

/// Every `error` list below `v`, as "where: description", and every
/// status a BOGUS or INVALID one is an error too.
fn collect_errors(
    v: &serde_json::Value,
    at: &str,
    out: &mut Vec<String>,
    statuses: &mut BTreeSet<String>,
) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                if k == "error" {
                    for e in v.as_array().into_iter().flatten() {
                        out.push(format!("{at}: {}", e["description"]));
                    }
                } else if k == "status" {
                    if let Some(status) = v.as_str() {
                        if matches!(status, "BOGUS" | "INVALID") {
                            out.push(format!("{at}: {status}"));
                        }
                        statuses.insert(status.to_string());
                    }
                } else {
                    collect_errors(v, &format!("{at}/{k}"), out, statuses);
                }
            }
        }
        serde_json::Value::Array(items) => {
            for i in items {
                collect_errors(i, at, out, statuses);
            }
        }
        _ => {}
    }
}

fn watch(
    unbound: &Unbound,
    parent: &Server,
    child: &Server,
    mut parent_ds: BTreeSet<String>,
    done: impl Fn(&BTreeSet<String>) -> bool,
) -> (Vec<BTreeSet<String>>, Vec<String>, usize) {
    let started = Instant::now();
    let (mut bogus, mut states, mut queries) = (Vec::new(), Vec::<BTreeSet<String>>::new(), 0);
    // Bounded: 40 s at most, 10 checks a second.
    while started.elapsed() < Duration::from_secs(40) {
        for (name, rtype, status) in [
            ("www.child.example.", "A", "NOERROR"),
            ("nope.child.example.", "A", "NXDOMAIN"),
            ("www.child.example.", "TXT", "NOERROR"),
        ] {
            queries += 1;
            if let Err(e) = unbound.secure(name, rtype, status) {
                bogus.push(format!("after {:?}: {e}", started.elapsed()));
            }
        }
        let cds = rrset(child, "child.example.", "CDS");
        if !cds.is_empty() && cds != parent_ds {
            copy_cds_to_parent(parent, &cds);
            parent_ds = cds;
        }
        let now = key_tags(child);
        if states.last() != Some(&now) {
            // A new stage: DNSViz finds nothing wrong with it either.
            for e in dnsviz_errors(unbound, child) {
                bogus.push(format!("DNSViz, keys {now:?}: {e}"));
            }
            states.push(now);
        }
        if states.last().is_some_and(&done) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    (states, bogus, queries)
}

/// A policy of `algorithm` with KSK and ZSK, no lifetimes: the only
/// rollover is the algorithm's.
fn algorithm_policy(algorithm: &str, pport: u16) -> String {
    format!(
        "[[dnssec_policy]]\nname = \"fast\"\nalgorithm = \"{algorithm}\"\nkeys = \"ksk+zsk\"\n\
         zsk_lifetime_s = 0\nksk_lifetime_s = 0\npropagation_delay_s = 1\n\
         parent = [\"127.0.0.1:{pport}\"]\nparent_ds_ttl_s = 1\nparent_check_interval_s = 1\n"
    )
}

/// A parent (signed online) and a child with `child_policy` on
/// loopback, the parent holding the child's DS from the start (as a
/// registrar would), and Unbound trusting only the parent's key; with
/// the child's CDS as the parent now has it.
fn chain(
    tag: &str,
    child_policy: impl Fn(u16) -> String,
) -> (Server, Server, Unbound, BTreeSet<String>) {
    let (pport, cport) = (free_port(), free_port());
    let parent = server(
        &format!("{tag}-parent"),
        pport,
        "example.",
        PARENT,
        "[[dnssec_policy]]\nname = \"fast\"\n",
    );
    let child = server(
        &format!("{tag}-child"),
        cport,
        "child.example.",
        CHILD,
        &child_policy(pport),
    );
    let cds = rrset(&child, "child.example.", "CDS");
    assert_eq!(cds.len(), 1, "the active KSK's CDS: {cds:?}");
    copy_cds_to_parent(&parent, &cds);
    let anchor: Vec<String> = rrset(&parent, "example.", "DNSKEY")
        .into_iter()
        .filter(|k| k.starts_with("257 "))
        .map(|k| format!("example. DNSKEY {k}"))
        .collect();
    let unbound = Unbound::start_with(
        &[("example", pport), ("child.example", cport)],
        &anchor,
        true,
    );
    (parent, child, unbound, cds)
}

/// The key states seen, one line each; fails the test on any answer
/// that did not validate.
fn timeline_without_bogus(
    (states, bogus, queries): &(Vec<BTreeSet<String>>, Vec<String>, usize),
    unbound: &Unbound,
) -> String {
    let timeline = states
        .iter()
        .map(|s| s.iter().cloned().collect::<Vec<_>>().join(", "))
        .collect::<Vec<_>>()
        .join("\n");
    eprintln!("{queries} validated queries; key states:\n{timeline}");
    assert!(
        bogus.is_empty(),
        "{} of {queries} answers did not validate, e.g.:\n{}\nkeys:\n{timeline}\nunbound:\n{}",
        bogus.len(),
        bogus.iter().take(3).cloned().collect::<Vec<_>>().join("\n"),
        unbound.log()
    );
    timeline
}

#[test]
fn an_algorithm_rollover_keeps_every_answer_valid() {
    let (parent, mut child, unbound, cds) = chain("algorithm", |pport| {
        algorithm_policy("ecdsap256sha256", pport)
    });
    unbound
        .secure("www.child.example.", "A", "NOERROR")
        .expect("secure before the rollover");
    // The policy moves to Ed25519: the child restarts with it.
    let config = std::fs::read_to_string(&child.config)
        .unwrap()
        .replace("algorithm = \"ecdsap256sha256\"", "algorithm = \"ed25519\"");
    std::fs::write(&child.config, config).unwrap();
    child.restart_after("TERM");
    let active_only = |s: &BTreeSet<String>| {
        s.iter().filter(|k| !k.ends_with("\"removed\"")).count() == 2
            && s.iter().any(|k| k.ends_with("\"removed\""))
    };
    let watched = watch(&unbound, &parent, &child, cds, active_only);
    let timeline = timeline_without_bogus(&watched, &unbound);
    let states = watched.0;
    // Every stage was passed through, and it ended with the new keys.
    for stage in ["introducing", "withdrawing", "removed"] {
        assert!(
            states
                .iter()
                .flatten()
                .any(|k| k.ends_with(&format!("\"{stage}\""))),
            "no key was {stage}:\n{timeline}\n{}",
            child.log()
        );
    }
    assert!(states.last().is_some_and(active_only), "{timeline}");
    let dnskeys = rrset(&child, "child.example.", "DNSKEY");
    assert!(
        dnskeys.len() == 2
            && dnskeys
                .iter()
                .all(|k| k.split_whitespace().nth(2) == Some("15")),
        "only Ed25519 keys left: {dnskeys:?}"
    );
    let ds = rrset(&parent, "child.example.", "DS");
    assert!(
        ds.len() == 1 && ds.iter().all(|d| d.split_whitespace().nth(1) == Some("15")),
        "the parent's DS is the new KSK's: {ds:?}"
    );
}

#[test]
fn a_zsk_and_a_ksk_roll_over_while_unbound_validates_every_answer() {
    let (parent, child, unbound, cds) = chain("rollover", |pport| {
        format!(
            "[[dnssec_policy]]\nname = \"fast\"\nkeys = \"ksk+zsk\"\nzsk_lifetime_s = 5\n\
             ksk_lifetime_s = 8\npropagation_delay_s = 1\nparent = [\"127.0.0.1:{pport}\"]\n\
             parent_ds_ttl_s = 1\nparent_check_interval_s = 1\n"
        )
    });
    let removed = |s: &BTreeSet<String>, role: &str| {
        s.iter()
            .any(|k| k.starts_with(&format!("\"{role}\"")) && k.ends_with("\"removed\""))
    };
    let watched = watch(&unbound, &parent, &child, cds, |s| {
        removed(s, "zsk") && removed(s, "ksk")
    });
    let timeline = timeline_without_bogus(&watched, &unbound);
    let states = watched.0;
    let last = states.last().cloned().unwrap_or_default();
    for role in ["zsk", "ksk"] {
        assert!(
            removed(&last, role),
            "no complete {role} rollover within 40 s:\n{timeline}\n{}",
            child.log()
        );
    }
}

/// Without a parent to ask, a submitted KSK waits until the operator
/// says its DS is published (`ctl keys ZONE --ds-published TAG`); then
/// the rollover goes on at once (the task is woken, not left to its next
/// hourly check) once the DS TTL has passed. A tag that is not a
/// submitted key is refused.
#[test]
fn a_ksk_rollover_without_a_parent_goes_on_when_the_operator_confirms_the_ds() {
    let child = server(
        "confirm-child",
        free_port(),
        "child.example.",
        CHILD,
        "[[dnssec_policy]]\nname = \"fast\"\nkeys = \"ksk+zsk\"\nzsk_lifetime_s = 0\n\
         ksk_lifetime_s = 2\npropagation_delay_s = 1\nparent_ds_ttl_s = 1\n\
         parent_check_interval_s = 3600\n",
    );
    let ctl = |extra: &[&str]| {
        Command::new(crate::support::process::BIN)
            .args(["ctl", "--config"])
            .arg(&child.config)
            .args(["keys", "child.example.", "--json"])
            .args(extra)
            .output()
            .unwrap()
    };
    let keys = || -> Vec<serde_json::Value> {
        serde_json::from_slice(&ctl(&[]).stdout).unwrap_or_default()
    };
    let submitted_successor = || {
        keys()
            .into_iter()
            .find(|k| k["role"] == "ksk" && k["state"] == "published" && k["submitted"] == true)
    };
    let started = Instant::now();
    let mut successor = None;
    // Bounded: 20 s for the successor to be submitted.
    while started.elapsed() < Duration::from_secs(20) {
        successor = submitted_successor();
        if successor.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let successor = successor.unwrap_or_else(|| panic!("no submitted KSK: {:?}", keys()));
    let tag = successor["tag"].as_u64().unwrap().to_string();
    // It waits: nobody has said the parent serves its DS.
    std::thread::sleep(Duration::from_secs(3));
    assert!(submitted_successor().is_some(), "{:?}", keys());
    let refused = ctl(&["--ds-published", "1"]);
    assert!(
        !refused.status.success()
            && String::from_utf8_lossy(&refused.stderr).contains("no submitted key 1"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let confirmed = ctl(&["--ds-published", &tag]);
    assert!(
        confirmed.status.success(),
        "{}",
        String::from_utf8_lossy(&confirmed.stderr)
    );
    let confirmed_at = Instant::now();
    let active = || {
        keys().iter().any(|k| {
            k["tag"].as_u64().map(|t| t.to_string()) == Some(tag.clone()) && k["state"] == "active"
        })
    };
    while !active() && confirmed_at.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        active(),
        "the confirmed KSK is active: {:?}\n{}",
        keys(),
        child.log()
    );
    assert!(
        confirmed_at.elapsed() < Duration::from_secs(8),
        "woken at once, not at the next hourly check"
    );
}
