//! Peer servers for interop tests: NSD, Knot DNS and BIND run in the
//! foreground as children of the test, on loopback ports of their own,
//! with their files in a temp dir, and are killed when their guard drops.
//! A missing binary fails the test (CI installs them).

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hickory_proto::rr::RecordType;

use super::*;

/// 32 random bytes, base64 (dig warns about shorter HMAC-SHA256 keys).
pub const SECRET: &str = "33iBP/xo44bwbcyIUsO9GZJ9PK1PS6yLkJd5cWBMub8=";

/// Log lines of `log` containing all of `needles`.
pub fn log_lines<'a>(log: &'a str, needles: &[&str]) -> Vec<&'a str> {
    log.lines()
        .filter(|l| needles.iter().all(|n| l.contains(n)))
        .collect()
}

/// Finds a server or client binary; a missing one fails the test.
pub fn tool(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let extra = [
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/usr/local/sbin",
        "/usr/local/bin",
    ];
    std::env::split_paths(&path)
        .chain(extra.iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "transfer_interop needs `{name}` but it is not installed (not in PATH or /usr/sbin); \
                 install it, e.g. `apt-get install nsd knot knot-dnsutils bind9 bind9-dnsutils`"
            )
        })
}

/// A peer server running in the foreground in its own process group, with
/// stdout+stderr going to a log file in its temp dir. Dropping it stops the
/// whole group (SIGTERM, then SIGKILL) before the directory is removed.
pub struct Proc {
    pub name: &'static str,
    pub child: Child,
    pub log: PathBuf,
    pub conf: PathBuf,
    pub dir: TempDir,
    pub stopped: bool,
}

impl Proc {
    pub fn spawn(
        name: &'static str,
        dir: TempDir,
        conf: PathBuf,
        program: &str,
        args: &[&str],
    ) -> Proc {
        let log = dir.0.join(format!("{name}.log"));
        let out = File::create(&log).unwrap();
        let child = Command::new(tool(program))
            .args(args)
            .current_dir(&dir.0)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
        Proc {
            name,
            child,
            log,
            conf,
            dir,
            stopped: false,
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits (bounded) until a log line contains all of `needles`.
    pub fn wait_log(&self, needles: &[&str], timeout: Duration) -> bool {
        eventually(timeout, || !log_lines(&self.log(), needles).is_empty())
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.0.join(file)
    }

    /// Panics (with its log) if the process has exited.
    pub fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("{} exited ({status}); log:\n{}", self.name, self.log());
        }
    }

    /// Stops the process group (once): `sig`, up to 5 s, then SIGKILL.
    pub fn stop(&mut self, sig: libc::c_int) {
        if std::mem::replace(&mut self.stopped, true) {
            return;
        }
        let pgid = self.child.id() as libc::pid_t;
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            // The leader is gone; children (NSD forks) may remain.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            return;
        }
        unsafe { libc::kill(-pgid, sig) };
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop(libc::SIGTERM);
    }
}

pub use super::process::free_port;

pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Waits until something answers DNS on `port` (any reply will do).
pub fn wait_answering(p: &mut Proc, port: u16) {
    let ok = eventually(Duration::from_secs(20), || {
        p.assert_running();
        udp_raw_timeout(
            loopback(port),
            &query("example.", RecordType::SOA, None),
            Duration::from_millis(200),
        )
        .is_some()
    });
    assert!(
        ok,
        "{} does not answer on port {port}; log:\n{}",
        p.name,
        p.log()
    );
}

pub fn nsd_secondary(zone: &str, port: u16, primary: u16) -> Proc {
    let dir = TempDir::new("nsd");
    let d = dir.0.display().to_string();
    let conf = dir.write(
        "nsd.conf",
        &format!(
            "server:\n\
             \x20   ip-address: 127.0.0.1@{port}\n\
             \x20   port: {port}\n\
             \x20   do-ip6: no\n\
             \x20   username: \"\"\n\
             \x20   chroot: \"\"\n\
             \x20   zonesdir: \"{d}\"\n\
             \x20   database: \"\"\n\
             \x20   pidfile: \"{d}/nsd.pid\"\n\
             \x20   xfrdfile: \"{d}/xfrd.state\"\n\
             \x20   xfrdir: \"{d}\"\n\
             \x20   zonelistfile: \"{d}/zone.list\"\n\
             \x20   server-count: 1\n\
             \x20   verbosity: 2\n\
             remote-control:\n\
             \x20   control-enable: no\n\
             zone:\n\
             \x20   name: {zone}\n\
             \x20   zonefile: {zone}.zone\n\
             \x20   request-xfr: 127.0.0.1@{primary} NOKEY\n\
             \x20   allow-notify: 127.0.0.1 NOKEY\n\
             \x20   provide-xfr: 127.0.0.0/8 NOKEY\n"
        ),
    );
    let c = conf.display().to_string();
    let mut p = Proc::spawn("nsd", dir, conf, "nsd", &["-d", "-c", &c]);
    wait_answering(&mut p, port);
    p
}

/// A Knot config: `defs` (key/remote/acl sections) must come before the
/// template and `zones` that refer to them.
pub fn knot_conf(dir: &TempDir, port: u16, defs: &str, zones: &str) -> PathBuf {
    let d = dir.0.display();
    dir.write(
        "knot.conf",
        &format!(
            "server:\n\
             \x20   rundir: \"{d}\"\n\
             \x20   listen: 127.0.0.1@{port}\n\
             \x20   udp-workers: 1\n\
             \x20   tcp-workers: 1\n\
             \x20   background-workers: 1\n\
             log:\n\
             \x20 - target: stderr\n\
             \x20   any: info\n\
             database:\n\
             \x20   storage: \"{d}\"\n\
             {defs}\
             template:\n\
             \x20 - id: default\n\
             \x20   storage: \"{d}\"\n\
             zone:\n\
             {zones}"
        ),
    )
}

pub fn knot_key_section() -> String {
    format!("key:\n  - id: xfr-key\n    algorithm: hmac-sha256\n    secret: {SECRET}\n")
}

pub fn start_knot(dir: TempDir, conf: PathBuf, port: u16) -> Proc {
    let c = conf.display().to_string();
    let mut p = Proc::spawn("knotd", dir, conf, "knotd", &["-c", &c]);
    wait_answering(&mut p, port);
    p
}

/// Knot as a secondary of `zone` from xdpdns on `primary`; with `key`,
/// the SOA queries and transfers are signed and NOTIFYs must be. `opts`
/// are extra zone options (e.g. `journal-content: all` to keep the zone
/// across restarts).
pub fn knot_secondary(zone: &str, port: u16, primary: u16, key: bool, opts: &str) -> Proc {
    let dir = TempDir::new("knot2");
    let (key_def, key_ref) = if key {
        (knot_key_section(), "    key: xfr-key\n")
    } else {
        (String::new(), "")
    };
    let defs = format!(
        "{key_def}\
         remote:\n  - id: primary\n    address: 127.0.0.1@{primary}\n{key_ref}\
         acl:\n  - id: notify_in\n    address: 127.0.0.1\n{key_ref}    action: notify\n\
         \x20 - id: xfr_out\n    address: 127.0.0.0/8\n    action: transfer\n"
    );
    let zones = format!(
        "  - domain: {zone}\n    master: primary\n    acl: [notify_in, xfr_out]\n    zonefile-sync: -1\n{opts}"
    );
    let conf = knot_conf(&dir, port, &defs, &zones);
    start_knot(dir, conf, port)
}

/// Starts a stopped Knot again on the same directory, config and port.
pub fn restart_knot(mut p: Proc, port: u16) -> Proc {
    p.stop(libc::SIGTERM);
    let conf = p.conf.clone();
    let dir = std::mem::replace(&mut p.dir, TempDir(PathBuf::new()));
    let old_log = p.log();
    drop(p);
    std::fs::write(dir.0.join("knotd.log.1"), old_log).unwrap();
    start_knot(dir, conf, port)
}

/// Knot as the primary of `zone` from `zone_text`: changes to the file are
/// turned into journal differences (so it serves IXFR) on `zone-reload`;
/// NOTIFYs go to `notify` (an xdpdns secondary) when given. With `key`,
/// transfers need the TSIG key and NOTIFYs are signed with it.
pub fn knot_primary(
    zone: &str,
    zone_text: &str,
    port: u16,
    notify: Option<u16>,
    key: bool,
) -> Proc {
    let dir = TempDir::new("knot1");
    dir.write(&format!("{zone}.zone"), zone_text);
    let (key_def, key_ref) = if key {
        (knot_key_section(), "    key: xfr-key\n")
    } else {
        (String::new(), "")
    };
    let (remote, notify_ref) = match notify {
        Some(p) => (
            format!("remote:\n  - id: xdpdns\n    address: 127.0.0.1@{p}\n{key_ref}"),
            "    notify: xdpdns\n",
        ),
        None => (String::new(), ""),
    };
    let defs = format!(
        "{key_def}{remote}acl:\n  - id: xfr_out\n    address: 127.0.0.0/8\n{key_ref}    action: transfer\n"
    );
    let zones = format!(
        "  - domain: {zone}\n    file: {zone}.zone\n    zonefile-load: difference\n    \
         journal-content: changes\n    zonefile-sync: -1\n    acl: xfr_out\n{notify_ref}"
    );
    let conf = knot_conf(&dir, port, &defs, &zones);
    start_knot(dir, conf, port)
}

/// `knotc zone-reload`: Knot re-reads the file and journals the difference.
pub fn knot_reload(p: &Proc, zone: &str) {
    knotc(p, &["zone-reload", zone]);
}

/// Knot as the primary of `zones` (Knot zone entries, `file:` relative
/// to its directory, written from `files`), transfers open to loopback
/// and NOTIFYs to an xdpdns on `notify`.
pub fn knot_zones_primary(port: u16, notify: u16, zones: &str, files: &[(&str, &str)]) -> Proc {
    let dir = TempDir::new("knot-zones");
    for (name, text) in files {
        dir.write(name, text);
    }
    let conf = knot_conf(&dir, port, &knot_zones_defs(notify), zones);
    start_knot(dir, conf, port)
}

fn knot_zones_defs(notify: u16) -> String {
    format!(
        "remote:\n  - id: xdpdns\n    address: 127.0.0.1@{notify}\n\
         acl:\n  - id: xfr_out\n    address: 127.0.0.0/8\n    action: transfer\n"
    )
}

/// A Knot started by `knot_zones_primary` serves `zones` instead, from
/// `files` written first (`knotc reload`: added zones load, removed ones
/// go, a generated catalog follows).
pub fn knot_reconfigure(p: &Proc, port: u16, notify: u16, zones: &str, files: &[(&str, &str)]) {
    for (name, text) in files {
        p.dir.write(name, text);
    }
    knot_conf(&p.dir, port, &knot_zones_defs(notify), zones);
    knotc(p, &["reload"]);
}

fn knotc(p: &Proc, args: &[&str]) {
    let out = Command::new(tool("knotc"))
        .args(["-c", &path_str(&p.conf), "-t", "10"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "knotc {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn bind_secondary(zone: &str, port: u16, primary: u16) -> Proc {
    let zone_block = format!(
        "zone \"{zone}\" {{\n\
         \x20   type secondary;\n\
         \x20   primaries {{ 127.0.0.1 port {primary}; }};\n\
         \x20   allow-notify {{ 127.0.0.1; }};\n\
         \x20   file \"{zone}.bk\";\n\
         }};\n"
    );
    start_named(TempDir::new("named"), port, "notify no;", &zone_block)
}

/// BIND following the catalog zone `catalog` from the primary on
/// `primary` (RFC 9432): member zones are added and removed as the
/// catalog says, transferred from the same primary.
pub fn bind_catalog_consumer(catalog: &str, port: u16, primary: u16) -> Proc {
    let options = format!(
        "allow-new-zones yes;\n\
         \x20   catalog-zones {{ zone \"{catalog}\" default-primaries {{ 127.0.0.1 port {primary}; }} in-memory yes min-update-interval 0; }};"
    );
    let zone_block = format!(
        "zone \"{catalog}\" {{\n\
         \x20   type secondary;\n\
         \x20   primaries {{ 127.0.0.1 port {primary}; }};\n\
         \x20   file \"catalog.bk\";\n\
         }};\n"
    );
    start_named(TempDir::new("named-cat"), port, &options, &zone_block)
}

/// Knot following the catalog zone `catalog` from the primary on
/// `primary` (`catalog-role: interpret`): member zones from a template
/// whose primary is the same server.
pub fn knot_catalog_consumer(catalog: &str, port: u16, primary: u16) -> Proc {
    let dir = TempDir::new("knot-cat");
    let d = dir.0.display();
    let conf = dir.write(
        "knot.conf",
        &format!(
            "server:\n    rundir: \"{d}\"\n    listen: 127.0.0.1@{port}\n\
             \x20   udp-workers: 1\n    tcp-workers: 1\n    background-workers: 1\n\
             log:\n  - target: stderr\n    any: info\n\
             database:\n    storage: \"{d}\"\n\
             remote:\n  - id: primary\n    address: 127.0.0.1@{primary}\n\
             acl:\n  - id: notify_in\n    address: 127.0.0.1\n    action: notify\n\
             template:\n  - id: default\n    storage: \"{d}\"\n\
             \x20 - id: member\n    storage: \"{d}\"\n    master: primary\n    acl: notify_in\n\
             \x20   zonefile-sync: -1\n\
             zone:\n  - domain: {catalog}\n    master: primary\n    acl: notify_in\n\
             \x20   zonefile-sync: -1\n    catalog-role: interpret\n    catalog-template: member\n"
        ),
    );
    start_knot(dir, conf, port)
}

/// BIND as the primary of `zone`, computing IXFR differences from file
/// changes (`ixfr-from-differences`) and NOTIFYing `notify` at once.
pub fn bind_primary(zone: &str, zone_text: &str, port: u16, notify: u16) -> Proc {
    let dir = TempDir::new("named1");
    dir.write(&format!("{zone}.zone"), zone_text);
    let options = format!(
        "notify explicit;\n\
         \x20   notify-delay 0;\n\
         \x20   also-notify {{ 127.0.0.1 port {notify}; }};\n\
         \x20   ixfr-from-differences yes;\n\
         \x20   max-ixfr-ratio unlimited;"
    );
    let zone_block = format!(
        "zone \"{zone}\" {{\n\
         \x20   type primary;\n\
         \x20   file \"{zone}.zone\";\n\
         }};\n"
    );
    start_named(dir, port, &options, &zone_block)
}

/// named in the foreground on loopback `port`, files in `dir`: the options
/// every test shares, then `options` and the `zones` blocks.
fn start_named(dir: TempDir, port: u16, options: &str, zones: &str) -> Proc {
    let d = dir.0.display();
    let conf = dir.write(
        "named.conf",
        &format!(
            "options {{\n\
             \x20   directory \"{d}\";\n\
             \x20   pid-file \"{d}/named.pid\";\n\
             \x20   session-keyfile \"{d}/session.key\";\n\
             \x20   managed-keys-directory \"{d}\";\n\
             \x20   listen-on port {port} {{ 127.0.0.1; }};\n\
             \x20   listen-on-v6 {{ none; }};\n\
             \x20   recursion no;\n\
             \x20   dnssec-validation no;\n\
             \x20   allow-transfer {{ 127.0.0.0/8; }};\n\
             \x20   {options}\n\
             }};\n\
             controls {{ }};\n\
             {zones}"
        ),
    );
    let c = conf.display().to_string();
    let mut p = Proc::spawn("named", dir, conf, "named", &["-g", "-n", "1", "-c", &c]);
    wait_answering(&mut p, port);
    p
}

/// SIGHUP: named re-reads its zone files.
pub fn bind_reload(p: &Proc) {
    assert_eq!(
        unsafe { libc::kill(p.child.id() as libc::pid_t, libc::SIGHUP) },
        0
    );
}

/// An etcd cluster of `n` members on loopback ports, each a [`Proc`] with
/// its data in a temp dir of its own.
pub struct EtcdCluster {
    pub members: Vec<Proc>,
    /// Client URLs, in member order.
    pub endpoints: Vec<String>,
    /// The arguments each member was started with (to start it again).
    args: Vec<Vec<String>>,
    /// Client TLS, when the members require it.
    pub tls: Option<TestPki>,
}

/// A CA, a certificate for the etcd members (127.0.0.1 and localhost) and
/// one for their clients, as PEM files in a temporary directory.
pub struct TestPki {
    pub dir: TempDir,
}

impl TestPki {
    pub fn generate() -> TestPki {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
            SanType,
        };
        let dir = TempDir::new("pki");
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "xdpdns test CA");
        let ca = ca.self_signed(&ca_key).unwrap();
        std::fs::write(dir.0.join("ca.pem"), ca.pem()).unwrap();
        for (name, purpose) in [
            ("server", ExtendedKeyUsagePurpose::ServerAuth),
            ("client", ExtendedKeyUsagePurpose::ClientAuth),
        ] {
            let key = KeyPair::generate().unwrap();
            let mut p = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
            p.subject_alt_names
                .push(SanType::IpAddress([127, 0, 0, 1].into()));
            p.distinguished_name.push(DnType::CommonName, name);
            p.extended_key_usages = vec![purpose];
            let cert = p.signed_by(&key, &ca, &ca_key).unwrap();
            std::fs::write(dir.0.join(format!("{name}.pem")), cert.pem()).unwrap();
            std::fs::write(dir.0.join(format!("{name}-key.pem")), key.serialize_pem()).unwrap();
        }
        TestPki { dir }
    }

    pub fn file(&self, name: &str) -> String {
        self.dir.0.join(name).display().to_string()
    }
}

impl EtcdCluster {
    pub fn start(n: usize) -> EtcdCluster {
        Self::start_with(n, None)
    }

    /// One member that serves clients over TLS only and requires a client
    /// certificate signed by the test CA (`--client-cert-auth`).
    pub fn start_tls() -> EtcdCluster {
        Self::start_with(1, Some(TestPki::generate()))
    }

    fn start_with(n: usize, tls: Option<TestPki>) -> EtcdCluster {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
        let initial: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{i}=http://127.0.0.1:{peer}"))
            .collect();
        let token = format!("xdpdns-test-{}", std::process::id());
        let mut cluster = EtcdCluster {
            members: Vec::new(),
            endpoints: ports
                .iter()
                .map(|(client, _)| format!("{scheme}://127.0.0.1:{client}"))
                .collect(),
            args: Vec::new(),
            tls: None,
        };
        for (i, (client, peer)) in ports.iter().enumerate() {
            let mut args = vec![
                format!("--name=m{i}"),
                "--data-dir=data".into(),
                format!("--listen-client-urls={scheme}://127.0.0.1:{client}"),
                format!("--advertise-client-urls={scheme}://127.0.0.1:{client}"),
                format!("--listen-peer-urls=http://127.0.0.1:{peer}"),
                format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer}"),
                format!("--initial-cluster={}", initial.join(",")),
                format!("--initial-cluster-token={token}"),
                "--initial-cluster-state=new".into(),
                // Loopback: short heartbeats, quick elections.
                "--heartbeat-interval=50".into(),
                "--election-timeout=500".into(),
            ];
            if let Some(pki) = &tls {
                args.extend([
                    format!("--cert-file={}", pki.file("server.pem")),
                    format!("--key-file={}", pki.file("server-key.pem")),
                    format!("--trusted-ca-file={}", pki.file("ca.pem")),
                    "--client-cert-auth".into(),
                ]);
            }
            cluster
                .members
                .push(Self::spawn_member(i, TempDir::new("etcd"), &args));
            cluster.args.push(args);
        }
        cluster.tls = tls;
        cluster.wait_healthy();
        cluster
    }

    fn spawn_member(i: usize, dir: TempDir, args: &[String]) -> Proc {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut p = Proc::spawn("etcd", dir, PathBuf::new(), "etcd", &args);
        p.name = ["etcd-0", "etcd-1", "etcd-2", "etcd-3", "etcd-4"][i.min(4)];
        p
    }

    /// Starts member `i` again on its data (after `members[i].stop`).
    pub fn restart(&mut self, i: usize) {
        self.members[i].stop(libc::SIGKILL);
        let dir = std::mem::replace(&mut self.members[i].dir, TempDir(PathBuf::new()));
        self.members[i] = Self::spawn_member(i, dir, &self.args[i]);
        self.wait_healthy();
    }

    /// Waits (bounded) until every member answers a linearizable read.
    pub fn wait_healthy(&mut self) {
        for i in 0..self.members.len() {
            let ok = eventually(Duration::from_secs(30), || {
                self.members[i].assert_running();
                self.etcdctl(i, &["get", "health-probe"]).is_some()
            });
            assert!(
                ok,
                "etcd member {i} never healthy:\n{}",
                self.members[i].log()
            );
        }
    }

    /// Runs `etcdctl` against member `i`; its stdout when it succeeded.
    pub fn etcdctl(&self, i: usize, args: &[&str]) -> Option<String> {
        let out = Command::new(tool("etcdctl"))
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.endpoints[i]))
            .args(self.tls.iter().flat_map(|pki| {
                [
                    format!("--cacert={}", pki.file("ca.pem")),
                    format!("--cert={}", pki.file("client.pem")),
                    format!("--key={}", pki.file("client-key.pem")),
                ]
            }))
            .arg("--command-timeout=2s")
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The member that leads (from `etcdctl endpoint status`).
    pub fn leader(&self) -> usize {
        for i in 0..self.members.len() {
            let Some(out) = self.etcdctl(i, &["endpoint", "status", "-w", "json"]) else {
                continue;
            };
            let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
            let status = &v[0]["Status"];
            if status["header"]["member_id"] == status["leader"] && !status["leader"].is_null() {
                return i;
            }
        }
        panic!("no etcd member leads");
    }

    /// The cluster's current revision.
    pub fn revision(&self, i: usize) -> i64 {
        let out = self
            .etcdctl(i, &["endpoint", "status", "-w", "json"])
            .expect("etcdctl endpoint status");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v[0]["Status"]["header"]["revision"].as_i64().unwrap()
    }

    /// The endpoints as a TOML array.
    pub fn toml_endpoints(&self) -> String {
        let quoted: Vec<String> = self.endpoints.iter().map(|e| format!("\"{e}\"")).collect();
        format!("[{}]", quoted.join(", "))
    }
}

/// A TCP forwarder on loopback to `target` that can cut every connection
/// it carries and refuse new ones (a network partition between a node and
/// etcd, without touching the host's firewall).
pub struct TcpProxy {
    pub addr: SocketAddr,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    live: std::sync::Arc<Mutex<Vec<std::net::TcpStream>>>,
}

impl TcpProxy {
    pub fn start(target: SocketAddr) -> TcpProxy {
        use std::sync::atomic::Ordering;
        use std::sync::Arc;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let live: Arc<Mutex<Vec<std::net::TcpStream>>> = Arc::default();
        let (c, l) = (cut.clone(), live.clone());
        std::thread::spawn(move || {
            for inbound in listener.incoming() {
                let Ok(inbound) = inbound else { break };
                if c.load(Ordering::SeqCst) {
                    continue;
                }
                let Ok(outbound) = std::net::TcpStream::connect(target) else {
                    continue;
                };
                let pairs = [
                    (inbound.try_clone().unwrap(), outbound.try_clone().unwrap()),
                    (outbound.try_clone().unwrap(), inbound.try_clone().unwrap()),
                ];
                l.lock().unwrap().extend([inbound, outbound]);
                for (mut from, mut to) in pairs {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        TcpProxy { addr, cut, live }
    }

    /// Cuts every connection and refuses new ones until [`heal`](Self::heal).
    pub fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        for s in self.live.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    pub fn heal(&self) {
        self.cut.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}
