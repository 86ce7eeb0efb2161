//! Real traffic through the XDP program: a client and a server network
//! namespace joined by a veth pair, xdpdns attached in generic and in
//! native mode, `dig` as the client. The kernel counters show which
//! answers came from XDP and which from the fallback. Needs root.

use crate::support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::*;

const ZONE: &str = "$ORIGIN example.com.\n$TTL 300\n\
    @ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n\
    www A 192.0.2.80\nwww AAAA 2001:db8::80\n";

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("ip (iproute2)");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Two namespaces and a veth pair between them; removed on drop.
pub(crate) struct Link {
    pub(crate) server_ns: String,
    pub(crate) client_ns: String,
    pub(crate) server_if: String,
    client_if: String,
}

impl Link {
    pub(crate) fn new(tag: &str) -> Link {
        assert!(
            unsafe { libc::geteuid() } == 0,
            "network namespaces need root (CI runs as root)"
        );
        let id = std::process::id() % 100_000;
        let l = Link {
            server_ns: format!("xdpdns-{tag}-s-{id}"),
            client_ns: format!("xdpdns-{tag}-c-{id}"),
            server_if: format!("xs{tag}{id}"),
            client_if: format!("xc{tag}{id}"),
        };
        let _ = Command::new("ip")
            .args(["netns", "del", &l.server_ns])
            .output();
        let _ = Command::new("ip")
            .args(["netns", "del", &l.client_ns])
            .output();
        ip(&["netns", "add", &l.server_ns]);
        ip(&["netns", "add", &l.client_ns]);
        ip(&[
            "link",
            "add",
            &l.server_if,
            "type",
            "veth",
            "peer",
            "name",
            &l.client_if,
        ]);
        ip(&["link", "set", &l.server_if, "netns", &l.server_ns]);
        ip(&["link", "set", &l.client_if, "netns", &l.client_ns]);
        ip(&[
            "-n",
            &l.server_ns,
            "addr",
            "add",
            "10.211.0.1/24",
            "dev",
            &l.server_if,
        ]);
        ip(&[
            "-n",
            &l.client_ns,
            "addr",
            "add",
            "10.211.0.2/24",
            "dev",
            &l.client_if,
        ]);
        for (ns, dev) in [(&l.server_ns, &l.server_if), (&l.client_ns, &l.client_if)] {
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        l
    }

    pub(crate) fn dig(&self, args: &[&str]) -> String {
        self.client(
            "dig",
            &["@10.211.0.1", "+norec", "+time=2", "+tries=2"],
            args,
        )
    }

    /// `ip link show` of the server's end (its XDP attachment).
    fn server_link(&self) -> String {
        let out = Command::new("ip")
            .args([
                "-n",
                &self.server_ns,
                "link",
                "show",
                "dev",
                &self.server_if,
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs a client program in the client namespace; its stdout.
    fn client(&self, program: &str, fixed: &[&str], args: &[&str]) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.client_ns, program])
            .args(fixed)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.server_ns])
            .output();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.client_ns])
            .output();
    }
}

/// Reads the counters the server logs on SIGUSR1.
pub(crate) fn counters(srv: &Server) -> std::collections::HashMap<String, u64> {
    let before = srv.log().matches("xdp counters").count();
    srv.signal("USR1");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while srv.log().matches("xdp counters").count() <= before {
        assert!(
            std::time::Instant::now() < deadline,
            "no counters logged: {}",
            srv.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = srv.log();
    let line = log
        .lines()
        .rfind(|l| l.contains("xdp counters"))
        .unwrap()
        .to_string();
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect()
}

/// Kills a helper process on drop (also when an assertion fails).
struct KillOnDrop(Option<Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// xdpdns in the server namespace serving `zone` as example.com., XDP
/// attached to the link in `mode`.
fn serve_on(link: &Link, mode: &str, tag: &str, zone: &str) -> Server {
    serve_zone_with(link, mode, tag, zone, "")
}

/// [`serve_on`] with more keys for the zone's `[[zone]]` table.
fn serve_zone_with(link: &Link, mode: &str, tag: &str, zone: &str, zone_keys: &str) -> Server {
    let dir = TempDir::new(tag);
    dir.write("zone.db", zone);
    let config = dir.write(
        "xdpdns.toml",
        &format!(
            "[server]\nlisten = [\"10.211.0.1:53\"]\n\
             [xdp]\ninterfaces = [\"{}\"]\nmode = \"{mode}\"\n\
             [[zone]]\norigin = \"example.com.\"\nfile = \"zone.db\"\n{zone_keys}",
            link.server_if
        ),
    );
    Server::start_in(dir, config, &["ip", "netns", "exec", &link.server_ns])
}

fn run(tag: &str, mode: &str) {
    let link = Link::new(tag);
    let pass_prog = (mode == "driver").then(|| attach_pass(&link));
    let srv = serve_on(&link, mode, "veth", ZONE);
    assert!(
        srv.log().contains(&format!(
            "XDP fast path attached interface={} mode={mode}",
            link.server_if
        )),
        "{}",
        srv.log()
    );
    let c0 = counters(&srv);

    let out = link.dig(&["wWw.example.com", "A"]);
    assert!(
        out.contains("status: NOERROR") && out.contains("flags: qr aa"),
        "{out}"
    );
    assert!(out.contains("192.0.2.80"), "{out}");
    let out = link.dig(&["+noedns", "www.example.com", "AAAA"]);
    assert!(out.contains("2001:db8::80"), "{out}");
    let c1 = counters(&srv);
    assert_eq!(
        c1["answered_a"] - c0["answered_a"],
        1,
        "A answered by XDP: {c1:?}"
    );
    assert_eq!(
        c1["answered_aaaa"] - c0["answered_aaaa"],
        1,
        "AAAA answered by XDP"
    );

    let out = link.dig(&["nope.example.com", "A"]);
    assert!(out.contains("status: NXDOMAIN"), "{out}");
    let c2 = counters(&srv);
    assert_eq!(
        c2["nxdomain"] - c1["nxdomain"],
        1,
        "NXDOMAIN from the kernel"
    );
    // Mixed case (0x20): compression ignores case, so the kernel
    // answers it too; a name three labels below what exists goes up.
    let out = link.dig(&["NoPe.example.com", "A"]);
    assert!(out.contains("status: NXDOMAIN"), "{out}");
    let cased = counters(&srv);
    assert_eq!(
        cased["nxdomain"] - c2["nxdomain"],
        1,
        "the 0x20 miss in the kernel"
    );
    let out = link.dig(&["a.b.nope.example.com", "A"]);
    assert!(out.contains("status: NXDOMAIN"), "{out}");
    let c2 = counters(&srv);
    assert!(
        c2["pass_miss"] > cased["pass_miss"],
        "the deep miss went to the fallback"
    );
    assert_eq!(c2["answered_a"], c1["answered_a"]);

    let out = link.dig(&["+tcp", "www.example.com", "A"]);
    assert!(out.contains("192.0.2.80") && out.contains("(TCP)"), "{out}");
    let c3 = counters(&srv);
    assert!(
        c3["pass_not_dns"] > c2["pass_not_dns"],
        "TCP segments passed up"
    );
    assert_eq!(
        c3["answered_a"], c2["answered_a"],
        "the TCP query was the fallback's"
    );

    // A reload reaches the kernel table: the new address comes from XDP.
    srv.dir.write(
        "zone.db",
        &ZONE
            .replace(" 1 3600", " 2 3600")
            .replace("192.0.2.80", "192.0.2.81"),
    );
    srv.signal("HUP");
    assert!(
        srv.wait_log("reload done", Duration::from_secs(10)),
        "{}",
        srv.log()
    );
    let out = link.dig(&["www.example.com", "A"]);
    assert!(
        out.contains("192.0.2.81") && !out.contains("192.0.2.80"),
        "{out}"
    );
    let c4 = counters(&srv);
    assert_eq!(
        c4["answered_a"] - c3["answered_a"],
        1,
        "answered by XDP after the reload"
    );

    // SIGTERM detaches the program before exiting.
    let attached = ["prog/xdp", "xdpgeneric", "xdpdrv", "xdp/id"];
    let link_state = || link.server_link();
    let before = link_state();
    assert!(attached.iter().any(|a| before.contains(a)), "{before}");
    let mut srv = srv;
    srv.signal("TERM");
    let status = srv.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(srv.log().contains("XDP program detached"), "{}", srv.log());
    let after = link_state();
    assert!(
        !attached.iter().any(|a| after.contains(a)),
        "still attached: {after}"
    );
    drop(pass_prog);
}

/// Queries shaped the way real resolvers send them — dig's default DNS
/// cookie, the cookie echoed back, `+dnssec`, kdig, and Unbound resolving
/// through a stub zone — are answered in the kernel, as is a service with
/// 60 members; in `mode`.
fn resolvers(tag: &str, mode: &str) {
    let link = Link::new(tag);
    let _pass = (mode == "driver").then(|| attach_pass(&link));
    let members: String = (1..=60)
        .map(|i| format!("svc A 10.9.0.{i}\n"))
        .chain((1..=8).map(|i| format!("eight A 10.8.0.{i}\n")))
        .collect();
    let srv = serve_on(&link, mode, "veth-resolvers", &format!("{ZONE}{members}"));
    let answered =
        |c: &std::collections::HashMap<String, u64>| c["answered_a"] + c["answered_aaaa"];

    // dig with its default client cookie: answered in the kernel with a
    // server cookie; the server cookie sent back is answered there too.
    // Each step's queries must all have been answered in the kernel.
    let mut last = counters(&srv);
    let mut in_kernel = |n: u64, what: &str| {
        let now = counters(&srv);
        assert_eq!(
            answered(&now) - answered(&last),
            n,
            "{what}: {last:?} -> {now:?}"
        );
        last = now;
    };
    let out = link.dig(&["www.example.com", "A"]);
    assert!(out.contains("192.0.2.80"), "{out}");
    let cookie = out
        .lines()
        .find_map(|l| l.strip_prefix("; COOKIE: "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no cookie in the reply: {out}"))
        .to_string();
    assert_eq!(cookie.len(), 48, "client + 16-byte server cookie: {cookie}");
    assert!(out.contains("(good)"), "{out}");
    in_kernel(1, "cookie query");
    let again = link.dig(&[&format!("+cookie={cookie}"), "www.example.com", "A"]);
    assert!(again.contains("192.0.2.80"), "{again}");
    assert!(
        again.contains(&format!("; COOKIE: {cookie}")),
        "fresh: echoed\n{again}"
    );
    in_kernel(1, "server cookie");

    // DO set (+dnssec), and kdig's defaults.
    let out = link.dig(&["+dnssec", "www.example.com", "AAAA"]);
    assert!(
        out.contains("2001:db8::80") && out.contains("flags: do"),
        "{out}"
    );
    let out = link.client(
        "kdig",
        &["@10.211.0.1", "+norec", "+cookie", "+dnssec"],
        &["www.example.com", "A"],
    );
    assert!(out.contains("192.0.2.80"), "{out}");
    in_kernel(2, "+dnssec and kdig");

    // An 8-member service is answered in the kernel. A 60-member one
    // (960 bytes of answers) is answered correctly, but on veth its reply
    // outgrows the buffer the query came in (tailroom plus ~200 bytes of
    // headroom), so it goes to the fallback (`pass_size`); in
    // BPF_PROG_TEST_RUN, as with NIC drivers' page-sized buffers, it is
    // answered in the kernel (see xdp_differential).
    let out = link.dig(&["eight.example.com", "A"]);
    assert!(
        out.contains("ANSWER: 8,") && out.contains("10.8.0.8"),
        "{out}"
    );
    in_kernel(1, "8 members");
    let c4 = last;
    let out = link.dig(&["svc.example.com", "A"]);
    assert!(
        out.contains("ANSWER: 60,") && out.contains("10.9.0.60"),
        "{out}"
    );
    let c5 = counters(&srv);
    assert_eq!(
        c5["pass_size"] - c4["pass_size"],
        1 - (answered(&c5) - answered(&c4)),
        "the 60-member reply: in the kernel or passed for its size"
    );

    // Unbound, a real recursive resolver, with a stub zone for
    // example.com pointing at xdpdns: what it sends upstream is answered
    // in the kernel.
    let unbound_dir = TempDir::new("unbound");
    let conf = unbound_dir.write(
        "unbound.conf",
        &format!(
            "server:\n  interface: 127.0.0.1\n  port: 5353\n  do-daemonize: no\n  username: \"\"\n\
             chroot: \"\"\n  directory: \"{}\"\n  pidfile: \"\"\n  use-syslog: no\n  verbosity: 0\n\
             module-config: \"iterator\"\n  do-not-query-localhost: no\n  do-ip6: no\n\
             access-control: 127.0.0.0/8 allow\n  qname-minimisation: no\n\
             stub-zone:\n  name: \"example.com\"\n  stub-addr: 10.211.0.1\n",
            unbound_dir.0.display()
        ),
    );
    let _unbound = KillOnDrop(Some(
        Command::new("ip")
            .args(["netns", "exec", &link.client_ns, "unbound", "-d", "-c"])
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("unbound"),
    ));
    let ask = |name: &str| {
        link.client(
            "dig",
            &["@127.0.0.1", "-p", "5353", "+time=2", "+tries=1"],
            &[name, "A"],
        )
    };
    assert!(
        eventually(Duration::from_secs(10), || ask("ns1.example.com")
            .contains("192.0.2.1")),
        "unbound did not answer"
    );
    let c5 = counters(&srv);
    let out = ask("eight.example.com");
    assert!(out.contains("ANSWER: 8,"), "{out}");
    let out = ask("www.example.com");
    assert!(out.contains("192.0.2.80"), "{out}");
    let c6 = counters(&srv);
    assert!(
        answered(&c6) - answered(&c5) >= 2,
        "Unbound's queries answered in the kernel: {c5:?} -> {c6:?}"
    );
    assert_eq!(c6["pass_edns"], 0, "no resolver query passed for its EDNS");
}

#[test]
fn resolvers_through_xdp_in_generic_mode() {
    resolvers("rg", "generic");
}

#[test]
fn resolvers_through_xdp_in_native_mode() {
    resolvers("rn", "driver");
}

/// Native XDP_TX on veth needs an XDP program on the peer too.
fn attach_pass(link: &Link) -> KillOnDrop {
    let mut child = Command::new("ip")
        .args([
            "netns",
            "exec",
            &link.client_ns,
            BIN,
            "xdp-pass",
            &link.client_if,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("attached"), "{line}");
    KillOnDrop(Some(child))
}

/// With `[xdp] pin_dir` the kernel keeps answering while the server is
/// down (`kill -9`, and after a clean stop), a restarted server adopts
/// the pinned table instead of loading the program and table again, and
/// changes made after the adoption reach the kernel: a reload, and a
/// zone file edited while the server was down. Removing the pins
/// detaches the program.
#[test]
fn a_pinned_table_answers_through_restarts_and_is_adopted() {
    let link = Link::new("k");
    let bpffs = Bpffs::mount();
    let pins = bpffs.0 .0.join("xdpdns");
    let dir = TempDir::new("pinned");
    dir.write("zone.db", ZONE);
    let config = dir.write(
        "xdpdns.toml",
        &format!(
            "[server]\nlisten = [\"10.211.0.1:53\"]\n[log]\nlevel = \"info\"\n\
             [xdp]\ninterfaces = [\"{}\"]\nmode = \"generic\"\npin_dir = \"{}\"\n\
             [transfer]\ndata_dir = \"{}\"\n\
             [[zone]]\norigin = \"example.com.\"\nfile = \"zone.db\"\n",
            link.server_if,
            pins.display(),
            dir.0.join("data").display()
        ),
    );
    let image = dir.0.join("data/images/example.com.zimg");
    let netns = ["ip", "netns", "exec", link.server_ns.as_str()];
    let start = |dir: TempDir| Server::start_in(dir, config.clone(), &netns);
    let a_of = |name: &str| link.dig(&["+short", name, "A"]).trim().to_string();
    let attached = || link.server_link().contains("xdpgeneric");

    let mut srv = start(dir);
    assert!(
        srv.log().contains("nothing pinned; loading the program"),
        "{}",
        srv.log()
    );
    assert_eq!(a_of("www.example.com"), "192.0.2.80");
    assert!(eventually(Duration::from_secs(10), || image.exists()));

    // Killed: the kernel still answers what its table holds; the rest
    // finds no server.
    srv.signal("KILL");
    let _ = srv.child.wait();
    assert!(attached(), "{}", link.server_link());
    let out = link.dig(&["www.example.com", "A"]);
    assert!(
        out.contains("flags: qr aa") && out.contains("192.0.2.80"),
        "{out}"
    );
    assert!(!link.dig(&["a.b.nope.example.com", "A"]).contains("status:"));

    // Restarted: the table is adopted as it is.
    let dir = std::mem::replace(&mut srv.dir, TempDir(std::path::PathBuf::new()));
    drop(srv);
    let srv = start(dir);
    let log = srv.log();
    assert!(log.contains("XDP table adopted as pinned"), "{log}");
    assert!(!log.contains("XDP answer table compiled"), "{log}");
    assert!(srv.wait_log("adopted table's entries are known", Duration::from_secs(10)));
    let c0 = counters(&srv);
    assert_eq!(a_of("www.example.com"), "192.0.2.80");
    assert!(link
        .dig(&["nope.example.com", "A"])
        .contains("status: NXDOMAIN"));

    // A change after the adoption: an address moves, a name comes, the
    // AAAA goes; each as the kernel answers it.
    srv.dir.write(
        "zone.db",
        &ZONE
            .replace(" 1 3600", " 2 3600")
            .replace("192.0.2.80", "192.0.2.81")
            .replace("www AAAA 2001:db8::80\n", "new A 192.0.2.9\n"),
    );
    srv.signal("HUP");
    assert!(
        srv.wait_log("reload done", Duration::from_secs(10)),
        "{}",
        srv.log()
    );
    assert_eq!(a_of("www.example.com"), "192.0.2.81");
    assert_eq!(a_of("new.example.com"), "192.0.2.9");
    let out = link.dig(&["www.example.com", "AAAA"]);
    assert!(out.contains("ANSWER: 0"), "{out}");
    let c1 = counters(&srv);
    assert_eq!(c1["answered_a"] - c0["answered_a"], 3, "{c1:?}");
    assert_eq!(
        c1["answered_aaaa"], c0["answered_aaaa"],
        "the AAAA is gone from the kernel"
    );

    // A clean stop leaves the program answering too.
    let mut srv = srv;
    srv.signal("TERM");
    assert!(srv.child.wait().unwrap().success());
    assert!(
        srv.log().contains("left attached and answering"),
        "{}",
        srv.log()
    );
    assert_eq!(a_of("www.example.com"), "192.0.2.81");

    // Edited while the server was down: served from the image (adopted
    // with it), then reloaded from the file, in the kernel as well.
    srv.dir.write(
        "zone.db",
        &ZONE
            .replace(" 1 3600", " 3 3600")
            .replace("192.0.2.80", "192.0.2.82"),
    );
    let dir = std::mem::replace(&mut srv.dir, TempDir(std::path::PathBuf::new()));
    drop(srv);
    let srv = start(dir);
    assert!(
        srv.log().contains("XDP table adopted as pinned"),
        "{}",
        srv.log()
    );
    assert!(eventually(Duration::from_secs(10), || a_of(
        "www.example.com"
    ) == "192.0.2.82"));
    let c2 = counters(&srv);
    assert_eq!(
        a_of("new.example.com"),
        "",
        "deleted from the kernel as well"
    );
    assert_eq!(a_of("www.example.com"), "192.0.2.82");
    let c3 = counters(&srv);
    assert_eq!(c3["answered_a"] - c2["answered_a"], 1, "{c3:?}");

    // Unpinned: detached.
    drop(srv);
    for e in std::fs::read_dir(&pins).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    assert!(
        eventually(Duration::from_secs(5), || !attached()),
        "{}",
        link.server_link()
    );
}

#[test]
fn dig_through_xdp_in_generic_mode() {
    run("g", "generic");
}

#[test]
fn dig_through_xdp_in_native_mode() {
    run("n", "driver");
}

#[test]
fn without_xdp_the_server_says_why_once_and_keeps_answering() {
    let srv = Server::start(
        "example.com.",
        ZONE,
        "",
        "[xdp]\ninterfaces = [\"nosuchif0\"]\n",
    );
    let log = srv.log();
    let lines: Vec<_> = log
        .lines()
        .filter(|l| l.contains("XDP fast path unavailable"))
        .collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(lines[0].contains("nosuchif0"), "{}", lines[0]);
    let m = srv.udp("www.example.com.", hickory_proto::rr::RecordType::A);
    assert_eq!(m.answers.len(), 1);
}

/// Runs `f` on a thread that has entered network namespace `ns` (setns
/// affects only the calling thread).
pub(crate) fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(&path).expect("netns file");
        assert_eq!(
            unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) },
            0,
            "setns {path}"
        );
        f()
    })
    .join()
    .expect("netns thread")
}

/// A registration reaches the kernel table: the new service name is
/// answered by XDP, not by the fallback.
#[test]
fn registered_name_is_answered_in_kernel() {
    let link = Link::new("r");
    let dir = TempDir::new("veth-reg");
    dir.write("zone.db", ZONE);
    let config = dir.write(
        "xdpdns.toml",
        &format!(
            "[server]\nlisten = [\"10.211.0.1:53\"]\n\
             [xdp]\ninterfaces = [\"{}\"]\nmode = \"generic\"\n\
             [[zone]]\norigin = \"example.com.\"\nfile = \"zone.db\"\n\
             [registry]\nlisten = \"10.211.0.1:8053\"\ntoken = \"t\"\ndata_dir = \"reg\"\n\
             require_opt_in = false\nns = [\"ns1.example.com.\"]\nhostmaster = \"h.example.com.\"\n\
             [[registry.zone]]\nname = \"sd.example.\"\nnetworks = [\"*\"]\n",
            link.server_if
        ),
    );
    let srv = Server::start_in(dir, config, &["ip", "netns", "exec", &link.server_ns]);
    let c0 = counters(&srv);
    let (code, body) = in_netns(&link.client_ns, || {
        http(
            "PUT",
            "http://10.211.0.1:8053/v1/instances/web-1",
            Some("t"),
            Some(
                r#"{"owner":"acme","addresses":["10.5.0.1","fd00::5"],"services":["web"],"lease_secs":60}"#,
            ),
        )
    });
    assert_eq!(code, 200, "{body}");
    assert!(
        srv.wait_log("XDP table updated", Duration::from_secs(5)),
        "{}",
        srv.log()
    );
    let out = link.dig(&["web.svc.acme.sd.example", "A"]);
    assert!(
        out.contains("10.5.0.1") && out.contains("flags: qr aa"),
        "{out}"
    );
    let out = link.dig(&["web-1.inst.acme.sd.example", "AAAA"]);
    assert!(out.contains("fd00::5"), "{out}");
    let c1 = counters(&srv);
    assert_eq!(
        c1["answered_a"] - c0["answered_a"],
        1,
        "service A answered by XDP: {c1:?}"
    );
    assert_eq!(
        c1["answered_aaaa"] - c0["answered_aaaa"],
        1,
        "instance AAAA answered by XDP"
    );
}

/// A secondary zone reaches the kernel table: xdpdns (XDP attached) pulls
/// example.net from another xdpdns by AXFR, answers it in the kernel, and
/// after a change at the primary (NOTIFY, IXFR) answers the new address in
/// the kernel too.
#[test]
fn transferred_zone_is_answered_in_kernel() {
    let link = Link::new("x");
    let primary_dir = TempDir::new("veth-xfr-primary");
    let net_zone = |addr: &str| {
        format!(
            "$ORIGIN example.net.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n\
             @ NS ns1\nns1 A 192.0.2.1\nwww A {addr}\n"
        )
    };
    let zone_path = primary_dir.write("net.zone", &net_zone("192.0.2.80"));
    let primary_config = primary_dir.write(
        "xdpdns.toml",
        "[server]\nlisten = [\"10.211.0.1:5300\"]\n\
         [transfer]\nallow_transfer = [{ from = [\"10.211.0.0/24\"] }]\n\
         [[zone]]\norigin = \"example.net.\"\nfile = \"net.zone\"\nnotify = [\"10.211.0.1:53\"]\n",
    );
    let primary = Server::start_in(
        primary_dir,
        primary_config,
        &["ip", "netns", "exec", &link.server_ns],
    );
    let dir = TempDir::new("veth-xfr-secondary");
    let config = dir.write(
        "xdpdns.toml",
        &format!(
            "[server]\nlisten = [\"10.211.0.1:53\"]\n\
             [xdp]\ninterfaces = [\"{}\"]\nmode = \"generic\"\n\
             [transfer]\ndata_dir = \"data\"\n\
             [[zone]]\norigin = \"example.net.\"\nprimaries = [\"10.211.0.1:5300\"]\n",
            link.server_if
        ),
    );
    let srv = Server::start_in(dir, config, &["ip", "netns", "exec", &link.server_ns]);
    assert!(
        srv.wait_log("AXFR received", Duration::from_secs(10)),
        "{}",
        srv.log()
    );
    assert!(
        srv.wait_log("XDP table updated", Duration::from_secs(5)),
        "{}",
        srv.log()
    );
    let c0 = counters(&srv);
    let out = link.dig(&["www.example.net", "A"]);
    assert!(out.contains("192.0.2.80"), "{out}");
    let c1 = counters(&srv);
    assert_eq!(
        c1["answered_a"] - c0["answered_a"],
        1,
        "answered by XDP: {c1:?}"
    );

    std::fs::write(&zone_path, net_zone("192.0.2.81")).unwrap();
    primary.signal("HUP");
    assert!(
        eventually(Duration::from_secs(10), || srv
            .log()
            .contains("IXFR received")),
        "{}",
        srv.log()
    );
    assert!(
        eventually(Duration::from_secs(5), || link
            .dig(&["www.example.net", "A"])
            .contains("192.0.2.81")),
        "{}",
        srv.log()
    );
    let c2 = counters(&srv);
    let out = link.dig(&["www.example.net", "A"]);
    assert!(
        out.contains("192.0.2.81") && !out.contains("192.0.2.80"),
        "{out}"
    );
    let c3 = counters(&srv);
    assert_eq!(
        c3["answered_a"] - c2["answered_a"],
        1,
        "new data answered by XDP: {c3:?}"
    );
}

/// The value of `name{labels}` in a scrape (0 when absent); `labels` is
/// the exact label text, "" for none.
fn metric(scrape: &str, name: &str, labels: &str) -> f64 {
    let key = if labels.is_empty() {
        format!("{name} ")
    } else {
        format!("{name}{{{labels}}} ")
    };
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(&key))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

/// A field of `/proc/PID/status` (or of one thread's).
fn proc_field(status: &str, field: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

/// Started as root with `[server] user = "nobody"`: once attached, every
/// thread runs as nobody with CAP_BPF alone; the kernel still answers,
/// a SIGHUP reload reaches the kernel table, and the program detaches at
/// the stop. The same run scrapes `/metrics` around known traffic —
/// kernel and fallback answers, TCP, NXDOMAIN, an AXFR, a registration —
/// checks the exact increments and runs `promtool check metrics`. The
/// allocator's background threads are asked for from the environment,
/// as an operator may: they block every signal, so the drop must stop
/// them first, and they come back as nobody.
#[test]
fn a_server_dropped_to_nobody_answers_in_the_kernel_and_counts_every_answer() {
    let link = Link::new("p");
    let dir = TempDir::new("priv");
    let zone = dir.write("zone.db", ZONE);
    let config = dir.write(
        "xdpdns.toml",
        &format!(
            "[server]\nlisten = [\"10.211.0.1:53\"]\nuser = \"nobody\"\n\
             [metrics]\nlisten = \"10.211.0.1:9153\"\n[control]\ngroup = \"nogroup\"\n\
             [transfer]\ndata_dir = \"data\"\nallow_transfer = [{{ from = [\"10.211.0.0/24\"] }}]\n\
             [xdp]\ninterfaces = [\"{}\"]\nmode = \"generic\"\n\
             [[zone]]\norigin = \"example.com.\"\nfile = \"zone.db\"\n\
             [registry]\nlisten = \"10.211.0.1:8053\"\ntoken = \"t0ken\"\ndata_dir = \"registry\"\n\
             require_opt_in = false\nns = [\"ns1.example.com.\"]\nhostmaster = \"hostmaster.example.com.\"\n\
             [[registry.zone]]\nname = \"sd.example.\"\nnetworks = [\"*\"]\n",
            link.server_if
        ),
    );
    let mut srv = Server::start_in(
        dir,
        config.clone(),
        &[
            "env",
            "_RJEM_MALLOC_CONF=background_thread:true",
            "ip",
            "netns",
            "exec",
            &link.server_ns,
        ],
    );
    assert!(
        srv.wait_log("dropped privileges", Duration::from_secs(10)),
        "{}",
        srv.log()
    );

    // Every thread: nobody, and CAP_BPF (39) as the only capability.
    let pid = srv.child.id();
    let cap_bpf = format!("{:016x}", 1u64 << 39);
    let tasks: Vec<_> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(tasks.len() > 3, "threads: {tasks:?}");
    let named = |name: &str| {
        tasks
            .iter()
            .any(|t| std::fs::read_to_string(t.join("comm")).is_ok_and(|c| c.trim() == name))
    };
    assert!(named("jemalloc_bg_thd"), "the allocator's threads are back");
    for task in &tasks {
        let status = std::fs::read_to_string(task.join("status")).unwrap();
        assert_eq!(
            proc_field(&status, "Uid:"),
            "65534\t65534\t65534\t65534",
            "{task:?}"
        );
        for field in ["CapEff:", "CapPrm:", "CapBnd:"] {
            assert_eq!(proc_field(&status, field), cap_bpf, "{field} of {task:?}");
        }
        assert_eq!(proc_field(&status, "CapAmb:"), "0000000000000000");
        assert_eq!(proc_field(&status, "CapInh:"), "0000000000000000");
    }

    let url = "http://10.211.0.1:9153/metrics";
    // The classic text format by default (curl), OpenMetrics on request.
    let scrape = || link.client("curl", &["-s", "--max-time", "5"], &[url]);
    let openmetrics = "Accept: application/openmetrics-text; version=1.0.0";
    let before = link.client(
        "curl",
        &["-s", "--max-time", "5", "-H", openmetrics],
        &[url],
    );
    assert!(before.ends_with("# EOF\n"), "{before}");
    for _ in 0..3 {
        assert!(link.dig(&["www.example.com", "A"]).contains("192.0.2.80"));
    }
    // NXDOMAIN in the kernel, and (three labels below what exists) in
    // the fallback.
    for name in ["nope.example.com", "a.b.nope.example.com"] {
        assert!(link.dig(&[name, "A"]).contains("NXDOMAIN"));
    }
    assert!(link
        .dig(&["+tcp", "www.example.com", "AAAA"])
        .contains("2001:db8::80"));
    let axfr = link.dig(&["example.com", "AXFR"]);
    assert!(
        axfr.contains("192.0.2.80") && axfr.contains("XFR size"),
        "{axfr}"
    );
    let put = link.client(
        "curl",
        &[
            "-s",
            "--max-time",
            "5",
            "-X",
            "PUT",
            "-H",
            "Authorization: Bearer t0ken",
        ],
        &[
            "-d",
            r#"{"owner":"acme","addresses":["10.0.0.1"],"services":["web"],"lease_secs":60}"#,
            "http://10.211.0.1:8053/v1/instances/web-1",
        ],
    );
    assert!(put.contains("web-1"), "{put}");
    let after = scrape();
    let delta =
        |name: &str, labels: &str| metric(&after, name, labels) - metric(&before, name, labels);
    let q = |path: &str, transport: &str, t: &str, rcode: &str| {
        format!("path=\"{path}\",transport=\"{transport}\",type=\"{t}\",rcode=\"{rcode}\"")
    };
    let queries = "xdpdns_queries_total";
    assert_eq!(
        delta(queries, &q("kernel", "udp", "A", "NOERROR")),
        3.0,
        "{after}"
    );
    assert_eq!(
        delta(queries, &q("kernel", "udp", "A", "NXDOMAIN")),
        1.0,
        "{after}"
    );
    assert_eq!(
        delta(queries, &q("fallback", "udp", "A", "NXDOMAIN")),
        1.0,
        "{after}"
    );
    assert_eq!(
        delta(queries, &q("fallback", "tcp", "AAAA", "NOERROR")),
        1.0,
        "{after}"
    );
    assert_eq!(
        delta(queries, &q("fallback", "tcp", "AXFR", "NOERROR")),
        1.0,
        "{after}"
    );
    let total = |s: &str| -> f64 {
        s.lines()
            .filter(|l| l.starts_with("xdpdns_queries_total{"))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum()
    };
    assert_eq!(
        total(&after) - total(&before),
        7.0,
        "every answer counted once:\n{after}"
    );
    assert_eq!(
        delta("xdpdns_kernel_passed_total", "reason=\"miss\""),
        1.0,
        "{after}"
    );
    // Per zone: the 3 kernel hits and an NXDOMAIN; the other NXDOMAIN
    // and the TCP query (the AXFR is a transfer, not a query answer).
    let in_zone = |path: &str| format!("zone=\"example.com.\",path=\"{path}\"");
    assert_eq!(
        delta("xdpdns_zone_queries_total", &in_zone("kernel")),
        4.0,
        "{after}"
    );
    assert_eq!(
        delta("xdpdns_zone_queries_total", &in_zone("fallback")),
        2.0,
        "{after}"
    );
    assert_eq!(
        delta("xdpdns_tcp_connections_accepted_total", ""),
        2.0,
        "{after}"
    );
    assert_eq!(
        delta("xdpdns_answer_duration_seconds_count", "transport=\"udp\""),
        1.0,
        "{after}"
    );
    assert_eq!(
        delta("xdpdns_registry_instances", "status=\"up\""),
        1.0,
        "{after}"
    );
    assert_eq!(
        delta("xdpdns_registry_write_duration_seconds_count", ""),
        1.0,
        "{after}"
    );
    assert!(
        delta("xdpdns_zone_serial", "zone=\"sd.example.\"") != 0.0,
        "{after}"
    );
    assert_eq!(
        metric(
            &after,
            "xdpdns_xdp_attached",
            &format!("interface=\"{}\",mode=\"generic\"", link.server_if)
        ),
        1.0
    );
    assert!(
        metric(&after, "xdpdns_kernel_table_entries", "") >= 3.0,
        "{after}"
    );
    assert_eq!(
        metric(
            &after,
            "xdpdns_zone_last_load_success",
            "zone=\"example.com.\""
        ),
        1.0
    );
    let file = srv.dir.write("scrape.txt", &after);
    let check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&file).unwrap())
        .output()
        .expect("promtool (Debian package prometheus, installed by cargo xtask deps)");
    assert!(
        check.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );

    // Every series the shipped dashboard graphs is exported (but those of
    // secondary zones and secondaries, which this server has none of).
    let dashboard = include_str!("../dist/grafana/xdpdns.json");
    let graphed: std::collections::BTreeSet<&str> = dashboard
        .match_indices("xdpdns_")
        .map(|(i, _)| {
            let rest = &dashboard[i..];
            let end = rest
                .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .collect();
    assert!(graphed.len() > 20, "{graphed:?}");
    let absent_here = [
        "xdpdns_secondary_",
        "xdpdns_transfers_in_",
        "xdpdns_zone_expires_in_",
    ];
    for name in graphed {
        if absent_here.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let exported = after.lines().any(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with(['{', ' ']))
        });
        assert!(
            exported,
            "the dashboard graphs {name}, which is not exported:\n{after}"
        );
    }

    // ctl, as root, from outside the namespace: the kernel share.
    let out = Command::new(BIN)
        .args(["ctl", "status", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("XDP: attached to {} (generic)", link.server_if)),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The state directory was handed to nobody; the control socket in it
    // kept control.group, so a member (not the server's user) may ask.
    let member = Command::new("setpriv")
        .args([
            "--reuid=daemon",
            "--regid=nogroup",
            "--clear-groups",
            BIN,
            "ctl",
            "status",
            "--config",
        ])
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        member.status.success()
            && String::from_utf8_lossy(&member.stdout).contains("XDP: attached"),
        "{}",
        String::from_utf8_lossy(&member.stderr)
    );

    // SIGHUP after the drop: the new zone reaches the kernel table.
    std::fs::write(
        &zone,
        ZONE.replace(" 1 3600", " 2 3600")
            .replace("192.0.2.80", "192.0.2.81"),
    )
    .unwrap();
    srv.signal("HUP");
    assert!(
        srv.wait_log("reload done", Duration::from_secs(10)),
        "{}",
        srv.log()
    );
    assert!(
        eventually(Duration::from_secs(5), || link
            .dig(&["www.example.com", "A"])
            .contains("192.0.2.81")),
        "{}",
        srv.log()
    );
    let kernel_a = |s: &str| metric(s, queries, &q("kernel", "udp", "A", "NOERROR"));
    let before_reloaded = scrape();
    assert!(link.dig(&["www.example.com", "A"]).contains("192.0.2.81"));
    assert_eq!(
        kernel_a(&scrape()) - kernel_a(&before_reloaded),
        1.0,
        "answered in the kernel after the reload"
    );

    // The stop detaches the program, unprivileged as it is by then.
    srv.signal("TERM");
    let stopped = eventually(Duration::from_secs(20), || {
        srv.child.try_wait().unwrap().is_some()
    });
    assert!(stopped, "still running after SIGTERM:\n{}", srv.log());
    assert!(srv.child.wait().unwrap().success(), "{}", srv.log());
    let state = link.server_link();
    assert!(
        !state.contains("xdpgeneric") && !state.contains("prog/xdp"),
        "still attached: {state}"
    );
}

/// Unbound, validating with the zone's key-signing key as its trust
/// anchor, in the client namespace with a stub zone pointing at xdpdns
/// behind XDP: every name and type of a zone signed by `dnssec-signzone`
/// resolves as secure (the AD bit) or as a validated denial; none is
/// bogus. The kernel answers its DO=1 A/AAAA hits from the signed
/// variants.
fn validated(tag: &str, denial: super::dnssec::Denial) {
    use super::dnssec::{sign_zone, NAMES, ZONE};
    // A pool whose answers rotate (signed variants with their RRSIG).
    let pool = "pool A 192.0.2.31\npool A 192.0.2.32\npool A 192.0.2.33\n\
                pool AAAA 2001:db8::31\npool AAAA 2001:db8::32\n";
    let text = ZONE.replace("signed.test.", "example.com.") + pool;
    let signed = sign_zone("example.com.", &text, "ECDSAP256SHA256", denial);
    let link = Link::new(tag);
    let srv = serve_zone_with(
        &link,
        "generic",
        "veth-dnssec",
        &std::fs::read_to_string(&signed.file).unwrap(),
        "rotate = true\n",
    );
    let unbound_dir = TempDir::new("unbound-validator");
    let conf = unbound_dir.write(
        "unbound.conf",
        &format!(
            "server:\n  interface: 127.0.0.1\n  port: 5353\n  do-daemonize: no\n  username: \"\"\n\
             chroot: \"\"\n  directory: \"{}\"\n  pidfile: \"\"\n  use-syslog: no\n  verbosity: 1\n\
             module-config: \"validator iterator\"\n  val-log-level: 2\n  aggressive-nsec: no\n\
             do-not-query-localhost: no\n  do-ip6: no\n  access-control: 127.0.0.0/8 allow\n\
             qname-minimisation: no\n  trust-anchor: \"{}\"\n\
             stub-zone:\n  name: \"example.com\"\n  stub-addr: 10.211.0.1\n",
            unbound_dir.0.display(),
            signed.trust_anchor
        ),
    );
    let log = std::fs::File::create(unbound_dir.0.join("unbound.log")).unwrap();
    let _unbound = KillOnDrop(Some(
        Command::new("ip")
            .args(["netns", "exec", &link.client_ns, "unbound", "-d", "-c"])
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("unbound"),
    ));
    let ask = |name: &str, rtype: &str| {
        link.client(
            "dig",
            &["@127.0.0.1", "-p", "5353", "+dnssec", "+time=3", "+tries=1"],
            &[name, rtype],
        )
    };
    assert!(
        eventually(Duration::from_secs(10), || ask("example.com", "SOA")
            .contains("status: NOERROR")),
        "unbound did not answer: {}",
        std::fs::read_to_string(unbound_dir.0.join("unbound.log")).unwrap_or_default()
    );
    let before = counters(&srv);
    let (mut secure, mut failures) = (0, Vec::new());
    let names = NAMES.iter().copied().chain(["pool.signed.test."]);
    for name in names {
        let name = name
            .to_ascii_lowercase()
            .replace("signed.test.", "example.com.");
        // Below a delegation the child's servers (unreachable here) answer;
        // at one only DS is ours; out of the zone nothing is.
        let delegated = ["sec.example.com.", "insec.example.com."]
            .iter()
            .any(|cut| name.ends_with(&format!(".{cut}")));
        let at_cut = ["sec.example.com.", "insec.example.com."].contains(&name.as_str());
        if delegated {
            continue;
        }
        let types: &[&str] = if at_cut {
            &["DS"]
        } else if name == "example.com." {
            // DS at the apex is the parent's (the root's, here).
            &[
                "A", "AAAA", "TXT", "MX", "NS", "SOA", "DNSKEY", "SRV", "CNAME",
            ]
        } else if name.starts_with("outside.") {
            &["CNAME"]
        } else if name.ends_with(".old.example.com.") {
            // Not CNAME: for it Unbound 1.17 also asks DS at the name, and
            // below a DNAME that too is redirected (RFC 6672 §2.2; NSD
            // answers it byte for byte the same, tests/dnssec.rs), which
            // Unbound takes as a broken chain of trust.
            &["A", "AAAA", "TXT", "MX", "NS", "SOA", "DS", "DNSKEY", "SRV"]
        } else {
            &[
                "A", "AAAA", "TXT", "MX", "NS", "SOA", "DS", "DNSKEY", "SRV", "CNAME",
            ]
        };
        for rtype in types {
            let out = ask(&name, rtype);
            let status_ok = out.contains("status: NOERROR") || out.contains("status: NXDOMAIN");
            let ad = out
                .lines()
                .find(|l| l.starts_with(";; flags:"))
                .is_some_and(|l| l.split(';').nth(2).unwrap_or("").contains(" ad"));
            if status_ok && ad {
                secure += 1;
            } else {
                failures.push(format!("{name} {rtype}:\n{out}"));
            }
        }
    }
    let after = counters(&srv);
    assert!(
        failures.is_empty(),
        "{denial:?}: {} answers not validated as secure ({}), e.g.:\n{}\nunbound log:\n{}",
        failures.len(),
        failures
            .iter()
            .filter_map(|f| f.lines().next())
            .collect::<Vec<_>>()
            .join(" "),
        failures
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n"),
        std::fs::read_to_string(unbound_dir.0.join("unbound.log")).unwrap_or_default()
    );
    assert!(secure > 150, "{secure} secure answers");
    assert!(
        after["answered_signed"] > before["answered_signed"],
        "DO=1 hits answered in the kernel: {before:?} -> {after:?}"
    );
}

#[test]
fn a_validating_resolver_trusts_an_nsec_zone_through_xdp() {
    validated("vn", super::dnssec::Denial::Nsec);
}

#[test]
fn a_validating_resolver_trusts_an_nsec3_zone_through_xdp() {
    validated("v3", super::dnssec::Denial::Nsec3);
}

/// `zone` (example.com.) served on a new link, taking UPDATEs signed
/// with the `ddns` key; the kernel answers queries to 10.211.0.3 only,
/// where nothing else listens, so a reply from there is the kernel's.
fn serve_updates_kernel_only(tag: &str, dir_tag: &str, zone: &str) -> (Link, Server) {
    use crate::dynamic_updates::grant_config;
    let link = Link::new(tag);
    ip(&[
        "-n",
        &link.server_ns,
        "addr",
        "add",
        "10.211.0.3/24",
        "dev",
        &link.server_if,
    ]);
    let dir = TempDir::new(dir_tag);
    dir.write("zone.db", zone);
    let config = dir.write(
        "xdpdns.toml",
        &format!(
            "[server]\nlisten = [\"10.211.0.1:53\"]\n\
             [xdp]\ninterfaces = [\"{}\"]\nmode = \"generic\"\naddresses = [\"10.211.0.3\"]\n\
             {}\n[[zone]]\norigin = \"example.com.\"\nfile = \"zone.db\"\n",
            link.server_if,
            grant_config()
        ),
    );
    let srv = Server::start_in(dir, config, &["ip", "netns", "exec", &link.server_ns]);
    (link, srv)
}

/// An UPDATE's name is answered by the kernel, not only by the fallback,
/// right after its acknowledgement: each of 200 back-to-back updates is
/// written as an overlay generation without waiting for the previous
/// one's grace periods. The kernel answers queries to 10.211.0.3 only and
/// nothing else listens there, so a reply from that address is the
/// kernel's: a miss goes up and is refused with an ICMP error. (The time
/// it takes is printed; `cargo bench --bench updates` measures it.)
#[test]
fn updated_names_are_answered_in_the_kernel_right_after_their_acknowledgement() {
    use crate::dynamic_updates::{send_update, signed_add};
    let (link, srv) = serve_updates_kernel_only("u", "veth-update", ZONE);
    let lags = in_netns(&link.client_ns, || {
        let udp = std::net::UdpSocket::bind("10.211.0.2:0").unwrap();
        udp.connect("10.211.0.3:53").unwrap();
        udp.set_read_timeout(Some(Duration::from_millis(2)))
            .unwrap();
        let mut lags = Vec::new();
        for i in 0..200 {
            let owner = format!("u{i}");
            let rcode = send_update(
                "10.211.0.1:53".parse().unwrap(),
                &signed_add(&owner, "192.0.2.9"),
            );
            assert_eq!(rcode, hickory_proto::op::ResponseCode::NoError);
            let acked = std::time::Instant::now();
            let q = query(
                &format!("{owner}.example.com."),
                hickory_proto::rr::RecordType::A,
                None,
            );
            let mut buf = [0u8; 512];
            loop {
                let _ = udp.send(&q);
                if let Ok(n) = udp.recv(&mut buf) {
                    let m = hickory_proto::op::Message::from_vec(&buf[..n]).unwrap();
                    if !m.answers.is_empty() {
                        break;
                    }
                }
                if acked.elapsed() > Duration::from_secs(2) {
                    return Err(owner);
                }
            }
            lags.push(acked.elapsed());
        }
        lags.sort();
        Ok(lags)
    });
    let lags =
        lags.unwrap_or_else(|owner| panic!("{owner} never answered by the kernel:\n{}", srv.log()));
    let p =
        |q: f64| lags[((lags.len() as f64 * q) as usize).min(lags.len() - 1)].as_secs_f64() * 1e3;
    eprintln!(
        "update acknowledged -> answered by the kernel: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        p(0.5),
        p(0.99),
        p(1.0)
    );
    assert_eq!(lags.len(), 200);
}

/// An SRV answer carries its target's addresses as additional records,
/// so a change of the target's address changes the SRV's entry too: the
/// compiler finds it through the index of names whose entries hold other
/// names' records, which the first table of a cold start must carry. The
/// kernel answers on 10.211.0.3 only (a reply from there is the kernel's);
/// the fallback is asked over TCP.
#[test]
fn an_srv_answer_follows_its_targets_address_changed_after_a_cold_start() {
    use crate::dynamic_updates::{send_update, signed_add};
    let zone = "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n\
         @ NS ns1\nns1 A 192.0.2.1\n_http._tcp SRV 0 10 80 web\nweb A 192.0.2.80\n\
         @ MX 10 mail\nmail A 192.0.2.25\n";
    let (link, srv) = serve_updates_kernel_only("t", "veth-srv-target", zone);
    let ask = |server: &str, transport: &str, name: &str, rtype: &str| {
        link.client(
            "dig",
            &[server, "+norec", "+time=1", "+tries=1", transport],
            &[name, rtype, "+noall", "+answer", "+additional"],
        )
    };
    let kernel = |name: &str, rtype: &str| ask("@10.211.0.3", "+notcp", name, rtype);
    let fallback = |name: &str, rtype: &str| ask("@10.211.0.1", "+tcp", name, rtype);
    let srv_name = "_http._tcp.example.com.";
    assert!(
        eventually(Duration::from_secs(5), || kernel(srv_name, "SRV")
            .contains("192.0.2.80")),
        "the kernel answers the SRV with its target's address:\n{}",
        srv.log()
    );
    let rcodes = in_netns(&link.client_ns, || {
        [("web", "192.0.2.98"), ("mail", "192.0.2.99")].map(|(owner, address)| {
            send_update(
                "10.211.0.1:53".parse().unwrap(),
                &signed_add(owner, address),
            )
        })
    });
    assert_eq!(rcodes, [hickory_proto::op::ResponseCode::NoError; 2]);
    for (name, rtype, address) in [
        (srv_name, "SRV", "192.0.2.98"),
        ("example.com.", "MX", "192.0.2.99"),
    ] {
        for (path, answer) in [
            ("kernel", &kernel as &dyn Fn(&str, &str) -> String),
            ("fallback", &fallback),
        ] {
            let mut last = String::new();
            let followed = eventually(Duration::from_secs(3), || {
                last = answer(name, rtype);
                last.contains(address)
            });
            assert!(
                followed,
                "the {path}'s {rtype} answer lacks the target's new address {address}:\n{last}\n{}",
                srv.log()
            );
        }
    }
}

/// A zone xdpdns signs itself: its DO=1 answers come from the kernel's
/// signed variants (with the RRSIG the fallback would send), an UPDATE's
/// name included once acknowledged.
#[test]
fn an_online_signed_zone_is_answered_signed_in_the_kernel() {
    let link = Link::new("vsign");
    let keys = format!(
        "dnssec_policy = \"default\"\n[transfer]\ndata_dir = \"data\"\n\
         [[tsig_key]]\nname = \"ddns\"\nsecret = \"{}\"\n[[update_grant]]\nkey = \"ddns\"\n",
        crate::support::peers::SECRET
    );
    let srv = serve_zone_with(&link, "generic", "veth-online-signed", ZONE, &keys);
    let before = counters(&srv);
    let out = link.dig(&["+dnssec", "www.example.com", "A"]);
    assert!(
        out.contains("192.0.2.80") && out.contains("RRSIG\tA 13 3"),
        "{out}"
    );
    let update = crate::dynamic_updates::signed_update("example.com.", "fresh", "192.0.2.77");
    let addr: std::net::SocketAddr = "10.211.0.1:53".parse().unwrap();
    let rcode = in_netns(&link.client_ns, move || {
        crate::dynamic_updates::send_update(addr, &update)
    });
    assert_eq!(rcode, hickory_proto::op::ResponseCode::NoError);
    let out = link.dig(&["+dnssec", "fresh.example.com", "A"]);
    assert!(
        out.contains("192.0.2.77") && out.contains("RRSIG\tA 13 3"),
        "{out}"
    );
    // A type the fresh name lacks: the signed NODATA (its NSEC and the
    // zone's SOA, each with its RRSIG) comes from the kernel too.
    let out = link.dig(&["+dnssec", "fresh.example.com", "TXT"]);
    assert!(
        out.contains("NOERROR") && out.contains("NSEC\t") && out.contains("RRSIG\tNSEC 13"),
        "{out}"
    );
    // A name that does not exist: the signed NXDOMAIN (the NSECs that
    // cover it and the wildcard) is the kernel's as well.
    let out = link.dig(&["+dnssec", "no-such-name-7f3a.example.com", "A"]);
    assert!(
        out.contains("NXDOMAIN") && out.contains("RRSIG\tNSEC 13"),
        "{out}"
    );
    let after = counters(&srv);
    assert!(
        after["nxdomain"] > before["nxdomain"],
        "signed NXDOMAIN from the kernel: {before:?} -> {after:?}"
    );
    assert!(
        after["answered_signed"] >= before["answered_signed"] + 4,
        "signed answers from the kernel: {before:?} -> {after:?}"
    );
    assert!(
        after["nodata"] > before["nodata"],
        "signed NODATA from the kernel: {before:?} -> {after:?}"
    );
}
