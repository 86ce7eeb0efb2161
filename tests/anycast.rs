//! Anycast health coupling in a real routed topology built in network
//! namespaces: a client, a router running BIRD with BGP sessions to two
//! xdpdns nodes, each running its own BIRD that exports the node's anycast
//! interface (`protocol direct`). The client queries the anycast address
//! continuously (bounded), each answer naming its node by NSID; a node is
//! broken in several ways and the queries must move to the other node.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hickory_proto::op::{Edns, Message};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use hickory_proto::rr::RecordType;

use super::support::*;

const ANYCAST: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 53);
const ZONE: &str = "$ORIGIN example.com.\n$TTL 300\n\
    @ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n\
    www A 192.0.2.80\n";

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn ns_run(ns: &str, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .output()
        .expect("ip netns exec");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// A child process killed on drop.
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// client — router — node1 / node2, each in its own namespace, BIRD on
/// the router and on both nodes; all removed on drop.
struct Topology {
    tag: String,
    dir: TempDir,
    birds: Vec<Kill>,
}

impl Topology {
    fn ns(&self, which: &str) -> String {
        format!("xa{}-{which}", self.tag)
    }

    fn new() -> Topology {
        assert!(
            unsafe { libc::geteuid() } == 0,
            "network namespaces need root (CI runs as root)"
        );
        let tag = (std::process::id() % 10_000).to_string();
        let t = Topology {
            tag,
            dir: TempDir::new("anycast"),
            birds: Vec::new(),
        };
        for n in ["c", "r", "n1", "n2"] {
            let _ = Command::new("ip").args(["netns", "del", &t.ns(n)]).output();
            ip(&["netns", "add", &t.ns(n)]);
            ip(&["-n", &t.ns(n), "link", "set", "lo", "up"]);
        }
        // (namespace, interface, address) pairs of the three links.
        let links = [
            ("c", "r", "10.60.0.2", "10.60.0.1"),
            ("n1", "r", "10.61.1.2", "10.61.1.1"),
            ("n2", "r", "10.61.2.2", "10.61.2.1"),
        ];
        for (a, b, addr_a, addr_b) in links {
            let (ia, ib) = (format!("{a}{}", t.tag), format!("{a}r{}", t.tag));
            ip(&["link", "add", &ia, "type", "veth", "peer", "name", &ib]);
            ip(&["link", "set", &ia, "netns", &t.ns(a)]);
            ip(&["link", "set", &ib, "netns", &t.ns(b)]);
            ip(&[
                "-n",
                &t.ns(a),
                "addr",
                "add",
                &format!("{addr_a}/24"),
                "dev",
                &ia,
            ]);
            ip(&[
                "-n",
                &t.ns(b),
                "addr",
                "add",
                &format!("{addr_b}/24"),
                "dev",
                &ib,
            ]);
            ip(&["-n", &t.ns(a), "link", "set", &ia, "up"]);
            ip(&["-n", &t.ns(b), "link", "set", &ib, "up"]);
            ip(&["-n", &t.ns(a), "route", "add", "default", "via", addr_b]);
        }
        ns_run(&t.ns("r"), &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
        t
    }

    fn node_if(&self, node: &str) -> String {
        format!("{node}{}", self.tag)
    }

    /// BIRD in namespace `which` with `config`.
    fn bird(&mut self, which: &str, config: &str) {
        let conf = self.dir.write(&format!("bird-{which}.conf"), config);
        let sock = self.dir.0.join(format!("bird-{which}.ctl"));
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns(which), "bird", "-f", "-c"])
            .arg(&conf)
            .arg("-s")
            .arg(&sock)
            .arg("-P")
            .arg(self.dir.0.join(format!("bird-{which}.pid")))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("bird (bird2)");
        self.birds.push(Kill(child));
    }

    fn start_birds(&mut self) {
        let router = "router id 10.60.0.1;\n\
            protocol device { scan time 1; }\n\
            protocol kernel { ipv4 { export all; import none; }; }\n\
            protocol bgp n1 { local 10.61.1.1 as 65000; neighbor 10.61.1.2 as 65001;\n\
              hold time 3; keepalive time 1; connect retry time 1;\n\
              ipv4 { import all; export none; }; }\n\
            protocol bgp n2 { local 10.61.2.1 as 65000; neighbor 10.61.2.2 as 65002;\n\
              hold time 3; keepalive time 1; connect retry time 1;\n\
              ipv4 { import all; export none; }; }\n";
        self.bird("r", router);
        let nodes = [
            ("n1", "10.61.1.2", "10.61.1.1", 65001),
            ("n2", "10.61.2.2", "10.61.2.1", 65002),
        ];
        for (n, addr, peer, asn) in nodes {
            let conf = format!(
                "router id {addr};\n\
                 protocol device {{ scan time 1; }}\n\
                 protocol direct {{ ipv4; interface \"any0\"; }}\n\
                 protocol bgp up {{ local {addr} as {asn}; neighbor {peer} as 65000;\n\
                   hold time 3; keepalive time 1; connect retry time 1;\n\
                   ipv4 {{ import none; export where source = RTS_DEVICE; }}; }}\n"
            );
            self.bird(n, &conf);
        }
    }

    /// The router's route to the anycast address (empty: none).
    fn route(&self) -> String {
        ns_run(&self.ns("r"), &["ip", "route", "show", "192.0.2.53/32"])
    }

    /// xdpdns on `node`, XDP on its link, anycast interface any0.
    fn serve(&self, node: &str, extra: &str) -> Server {
        let dir = TempDir::new(&format!("anycast-{node}"));
        dir.write("zone.db", ZONE);
        let config = dir.write(
            "xdpdns.toml",
            &format!(
                "[server]\nlisten = [\"0.0.0.0:53\"]\n\
                 [identity]\nserver_id = \"{node}\"\n\
                 [control]\nsocket = \"ctl.sock\"\n\
                 [xdp]\ninterfaces = [\"{}\"]\nmode = \"generic\"\n\
                 [anycast]\ninterface = \"any0\"\naddresses = [\"192.0.2.53/32\"]\n\
                 check_name = \"example.com. SOA\"\ncheck_interval_ms = 100\nfall = 2\nrise = 2\n\
                 drain_ms = 1500\n{extra}\n\
                 [[zone]]\norigin = \"example.com.\"\nfile = \"zone.db\"\n",
                self.node_if(node)
            ),
        );
        Server::start_in(dir, config, &["ip", "netns", "exec", &self.ns(node)])
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        self.birds.clear();
        for n in ["c", "r", "n1", "n2"] {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(n)])
                .output();
        }
    }
}

/// Runs `f` on a thread inside network namespace `ns`.
fn in_netns<T: Send + 'static>(
    ns: String,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(format!("/run/netns/{ns}")).expect("netns file");
        assert_eq!(
            unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) },
            0,
            "setns {ns}"
        );
        f()
    })
}

/// What the client saw: answers per node, queries lost after one retry.
#[derive(Debug, Default)]
struct Seen {
    by_node: std::collections::BTreeMap<String, u32>,
    retried: u32,
    lost: u32,
}

/// `rate` queries a second for `secs` seconds to the anycast address, each
/// with NSID, one retry after 250 ms.
fn client(t: &Topology, rate: u32, secs: u32) -> std::thread::JoinHandle<Seen> {
    in_netns(t.ns("c"), move || {
        let s = UdpSocket::bind("10.60.0.2:0").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(250)))
            .unwrap();
        let to = SocketAddr::from((ANYCAST, 53));
        let mut seen = Seen::default();
        let start = Instant::now();
        let mut buf = [0u8; 1500];
        for i in 0..rate * secs {
            let due = start + Duration::from_secs_f64(f64::from(i) / f64::from(rate));
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let mut e = Edns::new();
            e.set_max_payload(1232);
            e.options_mut()
                .insert(EdnsOption::Unknown(u16::from(EdnsCode::NSID), vec![]));
            let mut node = None;
            for attempt in 0..2 {
                let id = (i * 2 + attempt) as u16;
                let mut q = query("www.example.com.", RecordType::A, Some(e.clone()));
                q[0..2].copy_from_slice(&id.to_be_bytes());
                let _ = s.send_to(&q, to);
                let deadline = Instant::now() + Duration::from_millis(250);
                while Instant::now() < deadline {
                    let Ok((n, _)) = s.recv_from(&mut buf) else {
                        break;
                    };
                    let Ok(m) = Message::from_vec(&buf[..n]) else {
                        continue;
                    };
                    if m.metadata.id != id {
                        continue;
                    }
                    // An answer without NSID counts as "?": every one
                    // must name its node.
                    node = Some(
                        m.edns
                            .as_ref()
                            .and_then(|e| {
                                e.options().as_ref().iter().find_map(|(_, o)| match o {
                                    EdnsOption::NSID(p) => {
                                        Some(String::from_utf8_lossy(p.as_ref()).into_owned())
                                    }
                                    _ => None,
                                })
                            })
                            .unwrap_or_else(|| "?".into()),
                    );
                    break;
                }
                if node.is_some() {
                    seen.retried += attempt;
                    break;
                }
            }
            match node {
                Some(n) => *seen.by_node.entry(n).or_default() += 1,
                None => seen.lost += 1,
            }
        }
        seen
    })
}

/// Waits until the router's route to the anycast address satisfies `f`.
fn wait_route(t: &Topology, what: &str, timeout: Duration, f: impl Fn(&str) -> bool) {
    let ok = eventually(timeout, || f(&t.route()));
    assert!(ok, "router: {what}; route now: {:?}", t.route());
}

#[test]
fn anycast_follows_the_health_of_both_answer_paths() {
    let mut t = Topology::new();
    t.start_birds();
    let n1 = t.serve("n1", "");
    let n2 = t.serve("n2", "");
    // Both announce after `rise` checks; the router learns both.
    wait_route(&t, "routes from both nodes", Duration::from_secs(30), |r| {
        r.contains("10.61.1.2") || r.contains("10.61.2.2")
    });
    assert!(
        n1.wait_log("anycast: announced", Duration::from_secs(10)),
        "{}",
        n1.log()
    );
    assert!(
        n2.wait_log("anycast: announced", Duration::from_secs(10)),
        "{}",
        n2.log()
    );

    // 1. The fallback stops answering while the kernel path still does:
    // n1's local listener is blocked (the queries that reach it over
    // loopback are dropped), its self-check fails, n1 withdraws.
    let first = client(&t, 100, 6);
    std::thread::sleep(Duration::from_secs(1));
    let nft = |args: &str| ns_run(&t.ns("n1"), &["nft", args]);
    nft("add table inet xdpdns_test");
    nft("add chain inet xdpdns_test input { type filter hook input priority 0; }");
    nft("add rule inet xdpdns_test input iif lo udp dport 53 drop");
    nft("add rule inet xdpdns_test input iif lo tcp dport 53 drop");
    assert!(
        n1.wait_log("anycast: withdrawn", Duration::from_secs(5)),
        "{}",
        n1.log()
    );
    wait_route(&t, "only n2's route", Duration::from_secs(10), |r| {
        r.contains("10.61.2.2") && !r.contains("10.61.1.2")
    });
    let seen = first.join().unwrap();
    println!("fallback blocked on n1: {seen:?}");
    assert!(
        seen.by_node.keys().all(|n| n == "n1" || n == "n2"),
        "every answer names its node: {seen:?}"
    );
    assert!(seen.by_node.get("n2").copied().unwrap_or(0) > 0, "{seen:?}");
    assert_eq!(seen.lost, 0, "no query lost beyond one retry: {seen:?}");
    // Recovered: n1 is announced again after `rise` passes.
    nft("delete table inet xdpdns_test");
    wait_route(&t, "n1 back", Duration::from_secs(10), |r| {
        r.contains("10.61.1.2")
    });

    // 2. The XDP program detached behind the server's back (as an
    // operator's `ip link set ... xdp off` does): the kernel check sees
    // the interface run no program of ours and n1 withdraws.
    let second = client(&t, 100, 5);
    std::thread::sleep(Duration::from_secs(1));
    // `ip link set ... xdp off` cannot: xdpdns attaches through a BPF link
    // ("Can't replace active BPF XDP link"); bpftool detaches the link.
    let shown = ns_run(
        &t.ns("n1"),
        &["ip", "-d", "link", "show", "dev", &t.node_if("n1")],
    );
    let prog_id = shown
        .split("prog/xdp id ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no XDP program on n1's link: {shown}"))
        .to_string();
    let links: serde_json::Value =
        serde_json::from_str(&ns_run(&t.ns("n1"), &["bpftool", "-j", "link", "show"])).unwrap();
    let link_id = links
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["prog_id"].as_u64().map(|v| v.to_string()) == Some(prog_id.clone()))
        .unwrap_or_else(|| panic!("no BPF link for program {prog_id}: {links}"))["id"]
        .to_string();
    let out = ns_run(&t.ns("n1"), &["bpftool", "link", "detach", "id", &link_id]);
    println!("detaching link {link_id} of program {prog_id}: {out:?}");
    assert!(
        n1.wait_log("no longer attached", Duration::from_secs(5)),
        "{}",
        n1.log()
    );
    wait_route(&t, "only n2's route", Duration::from_secs(10), |r| {
        r.contains("10.61.2.2") && !r.contains("10.61.1.2")
    });
    let seen = second.join().unwrap();
    println!("XDP detached on n1: {seen:?}");
    assert_eq!(seen.lost, 0, "no query lost beyond one retry: {seen:?}");
    // n1's fallback answers everything now, but its kernel path stays
    // broken: it stays withdrawn until restarted.
    std::thread::sleep(Duration::from_secs(1));
    assert!(!t.route().contains("10.61.1.2"), "{}", t.route());
    drop(n1);
    let mut n1 = t.serve("n1", "");
    wait_route(&t, "n1 announced again", Duration::from_secs(15), |r| {
        r.contains("10.61.1.2")
    });

    // 3. kill -9: the TUN device dies with the process, and with it the
    // route; the client moves to n2.
    let second = client(&t, 100, 5);
    std::thread::sleep(Duration::from_secs(1));
    n1.child.kill().unwrap();
    let _ = n1.child.wait();
    wait_route(
        &t,
        "n1's route gone with its process",
        Duration::from_secs(10),
        |r| !r.contains("10.61.1.2") && r.contains("10.61.2.2"),
    );
    let seen = second.join().unwrap();
    println!("kill -9: {seen:?}");
    assert!(seen.by_node.get("n1").copied().unwrap_or(0) > 0, "{seen:?}");
    assert_eq!(seen.lost, 0, "no query lost beyond one retry: {seen:?}");

    // 4. A graceful drain (SIGTERM) loses nothing, retries included:
    // withdrawn first, the node keeps answering while traffic moves.
    let n1 = t.serve("n1", "");
    wait_route(&t, "n1 announced again", Duration::from_secs(15), |r| {
        r.contains("10.61.1.2")
    });
    let third = client(&t, 100, 5);
    std::thread::sleep(Duration::from_secs(1));
    n1.signal("TERM");
    let seen = third.join().unwrap();
    println!("graceful drain: {seen:?}");
    assert_eq!(
        (seen.lost, seen.retried),
        (0, 0),
        "graceful drain: {seen:?}"
    );
    assert!(n1.log().contains("anycast: draining"), "{}", n1.log());
    drop(n1);

    // 5. A secondary zone expires (its primary, here a second xdpdns in
    // n1's namespace, is gone): stale data is not fresh, n1 withdraws.
    let primary_dir = TempDir::new("anycast-primary");
    primary_dir.write(
        "sec.zone",
        "$ORIGIN sec.test.\n$TTL 60\n@ SOA ns1 hostmaster 1 1 1 4 60\n@ NS ns1\n\
         ns1 A 192.0.2.1\n",
    );
    let primary_conf = primary_dir.write(
        "xdpdns.toml",
        "[server]\nlisten = [\"127.0.0.1:5300\"]\n\
         [[zone]]\norigin = \"sec.test.\"\nfile = \"sec.zone\"\n",
    );
    let primary = Server::start_in(
        primary_dir,
        primary_conf,
        &["ip", "netns", "exec", &t.ns("n1")],
    );
    let n1 = t.serve(
        "n1",
        "[[zone]]\norigin = \"sec.test.\"\nprimaries = [\"127.0.0.1:5300\"]\n",
    );
    wait_route(
        &t,
        "n1 announced with its secondary zone",
        Duration::from_secs(15),
        |r| r.contains("10.61.1.2"),
    );
    let fifth = client(&t, 100, 8);
    std::thread::sleep(Duration::from_secs(1));
    drop(primary);
    assert!(
        n1.wait_log("zone sec.test. has expired", Duration::from_secs(10)),
        "{}",
        n1.log()
    );
    wait_route(&t, "only n2's route", Duration::from_secs(10), |r| {
        r.contains("10.61.2.2") && !r.contains("10.61.1.2")
    });
    let seen = fifth.join().unwrap();
    println!("secondary expired on n1: {seen:?}");
    assert_eq!(seen.lost, 0, "no query lost beyond one retry: {seen:?}");
    drop(n1);

    // 6. A flapping node is held down: the second withdrawal in a row
    // holds n1 withdrawn for hold_down_ms although its checks pass.
    let n1 = t.serve("n1", "hold_down_ms = 4000\nflap_reset_ms = 60000");
    wait_route(&t, "n1 announced", Duration::from_secs(15), |r| {
        r.contains("10.61.1.2")
    });
    let block = |on: bool| {
        let nft = |args: &str| ns_run(&t.ns("n1"), &["nft", args]);
        if on {
            nft("add table inet xdpdns_test");
            nft("add chain inet xdpdns_test input { type filter hook input priority 0; }");
            nft("add rule inet xdpdns_test input iif lo udp dport 53 drop");
        } else {
            nft("delete table inet xdpdns_test");
        }
    };
    block(true);
    wait_route(&t, "first withdrawal", Duration::from_secs(10), |r| {
        !r.contains("10.61.1.2")
    });
    block(false);
    wait_route(&t, "back after rise", Duration::from_secs(10), |r| {
        r.contains("10.61.1.2")
    });
    block(true);
    wait_route(&t, "second withdrawal", Duration::from_secs(10), |r| {
        !r.contains("10.61.1.2")
    });
    block(false);
    let unblocked = Instant::now();
    assert!(
        n1.wait_log("held down for", Duration::from_secs(5)),
        "{}",
        n1.log()
    );
    // Passing checks, but held down: still withdrawn 2.5 s later...
    while unblocked.elapsed() < Duration::from_millis(2500) {
        assert!(
            !t.route().contains("10.61.1.2"),
            "announced during the hold-down"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // ... and back once the hold-down is over.
    wait_route(
        &t,
        "back after the hold-down",
        Duration::from_secs(10),
        |r| r.contains("10.61.1.2"),
    );

    // 7. `xdpdns ctl drain` withdraws by hand, `resume` brings it back.
    let ctl = |cmd: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_xdpdns"))
            .args(["ctl", "--config"])
            .arg(&n1.config)
            .arg(cmd)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ctl {cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(ctl("drain").contains("withdrawn"));
    wait_route(&t, "drained by ctl", Duration::from_secs(5), |r| {
        !r.contains("10.61.1.2")
    });
    std::thread::sleep(Duration::from_millis(1000));
    assert!(
        !t.route().contains("10.61.1.2"),
        "a drain holds although checks pass"
    );
    ctl("resume");
    wait_route(&t, "resumed by ctl", Duration::from_secs(10), |r| {
        r.contains("10.61.1.2")
    });
    drop(n2);
}
