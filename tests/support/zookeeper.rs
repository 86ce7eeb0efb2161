//! A real ZooKeeper for the tests (Debian's `zookeeper`): a standalone
//! server or a three-member ensemble on loopback ports, each member with
//! a data directory of its own, and a blocking client that writes nodes
//! the way Registrar does.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use zookeeper_client::{Acls, Client, CreateMode};

use super::peers::Proc;
use super::process::free_port;
use super::{eventually, TempDir};

const JAR: &str = "/usr/share/java/zookeeper.jar";

pub struct ZkEnsemble {
    pub members: Vec<Proc>,
    pub client_ports: Vec<u16>,
    conf: Vec<String>,
}

impl ZkEnsemble {
    /// `n` members (1: standalone); waits until every one serves.
    pub fn start(n: usize) -> ZkEnsemble {
        let ports: Vec<(u16, u16, u16)> = (0..n)
            .map(|_| (free_port(), free_port(), free_port()))
            .collect();
        let mut e = ZkEnsemble {
            members: Vec::new(),
            client_ports: ports.iter().map(|p| p.0).collect(),
            conf: Vec::new(),
        };
        for (i, (client, _, _)) in ports.iter().enumerate() {
            // Loopback: short ticks, sessions from 400 ms.
            let mut conf = format!(
                "tickTime=200\ninitLimit=20\nsyncLimit=5\ndataDir=data\nclientPort={client}\n\
                 clientPortAddress=127.0.0.1\nadmin.enableServer=false\n\
                 minSessionTimeout=400\nmaxSessionTimeout=60000\n\
                 4lw.commands.whitelist=srvr,ruok\n"
            );
            if n > 1 {
                for (j, (_, peer, election)) in ports.iter().enumerate() {
                    conf += &format!("server.{}=127.0.0.1:{peer}:{election}\n", j + 1);
                }
            }
            e.conf.push(conf);
            let dir = TempDir::new("zookeeper");
            e.members
                .push(Self::spawn_member(i, dir, &e.conf[i], n > 1));
        }
        e.wait_serving();
        e
    }

    /// One standalone member inside network namespace `ns`, on its
    /// loopback; not waited for (the host cannot reach it).
    pub fn start_in_netns(ns: &str) -> ZkEnsemble {
        let port = free_port();
        let conf = format!(
            "tickTime=200\ndataDir=data\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
             admin.enableServer=false\nminSessionTimeout=400\nmaxSessionTimeout=60000\n"
        );
        let dir = TempDir::new("zookeeper");
        std::fs::create_dir_all(dir.0.join("data")).unwrap();
        std::fs::write(dir.0.join("zoo.cfg"), &conf).unwrap();
        let conf_path = dir.0.join("zoo.cfg");
        let member = Proc::spawn(
            "zookeeper-1",
            dir,
            conf_path.clone(),
            "ip",
            &[
                "netns",
                "exec",
                ns,
                "java",
                "-Xmx256m",
                "-cp",
                JAR,
                "org.apache.zookeeper.server.ZooKeeperServerMain",
                conf_path.to_str().unwrap(),
            ],
        );
        ZkEnsemble {
            members: vec![member],
            client_ports: vec![port],
            conf: vec![conf],
        }
    }

    fn spawn_member(i: usize, dir: TempDir, conf: &str, quorum: bool) -> Proc {
        std::fs::create_dir_all(dir.0.join("data")).unwrap();
        if quorum {
            std::fs::write(dir.0.join("data/myid"), format!("{}\n", i + 1)).unwrap();
        }
        std::fs::write(dir.0.join("zoo.cfg"), conf).unwrap();
        let main = if quorum {
            "org.apache.zookeeper.server.quorum.QuorumPeerMain"
        } else {
            "org.apache.zookeeper.server.ZooKeeperServerMain"
        };
        let conf_path = dir.0.join("zoo.cfg");
        let mut p = Proc::spawn(
            "zookeeper",
            dir,
            conf_path.clone(),
            "java",
            &["-Xmx256m", "-cp", JAR, main, conf_path.to_str().unwrap()],
        );
        p.name = ["zookeeper-1", "zookeeper-2", "zookeeper-3"][i.min(2)];
        p
    }

    /// `host:port,...` of every member.
    pub fn connect_string(&self) -> String {
        self.client_ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// As TOML: `["127.0.0.1:p", ...]`.
    pub fn toml_servers(&self) -> String {
        let list: Vec<String> = self
            .client_ports
            .iter()
            .map(|p| format!("\"127.0.0.1:{p}\""))
            .collect();
        format!("[{}]", list.join(", "))
    }

    /// The four-letter `srvr` reply of member `i` (`None`: not serving).
    pub fn srvr(&self, i: usize) -> Option<String> {
        use std::io::{Read, Write};
        let mut s = TcpStream::connect(("127.0.0.1", self.client_ports[i])).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        s.write_all(b"srvr").ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        out.contains("Mode:").then_some(out)
    }

    /// The member that leads the ensemble now.
    pub fn leader(&self) -> Option<usize> {
        (0..self.members.len()).find(|&i| {
            !self.members[i].stopped && self.srvr(i).is_some_and(|s| s.contains("Mode: leader"))
        })
    }

    pub fn wait_serving(&mut self) {
        for i in 0..self.members.len() {
            if self.members[i].stopped {
                continue;
            }
            let ok = eventually(Duration::from_secs(60), || {
                self.members[i].assert_running();
                self.srvr(i).is_some()
            });
            assert!(
                ok,
                "zookeeper member {i} never served:\n{}",
                self.members[i].log()
            );
        }
    }

    pub fn stop(&mut self, i: usize) {
        self.members[i].stop(libc::SIGKILL);
    }

    /// Starts member `i` again on its data.
    pub fn restart(&mut self, i: usize) {
        self.members[i].stop(libc::SIGKILL);
        let dir = std::mem::replace(&mut self.members[i].dir, TempDir(PathBuf::new()));
        let quorum = self.members.len() > 1;
        self.members[i] = Self::spawn_member(i, dir, &self.conf[i], quorum);
        self.wait_serving();
    }
}

/// A blocking ZooKeeper client for the tests, on a runtime of its own.
pub struct Zk {
    rt: tokio::runtime::Runtime,
    pub client: Client,
}

impl Zk {
    pub fn connect(connect: &str) -> Zk {
        Self::connect_with(connect, Duration::from_secs(10))
    }

    /// Connects once the server accepts (bounded), for a server the test
    /// cannot ask otherwise.
    pub fn connect_when_up(connect: &str, timeout: Duration) -> Zk {
        let first = connect.split(',').next().unwrap().to_string();
        let up = eventually(timeout, || TcpStream::connect(&first).is_ok());
        assert!(up, "zookeeper at {connect} never accepted");
        Self::connect(connect)
    }

    /// A client authenticated as `user:password` (digest).
    pub fn connect_digest(connect: &str, digest: &str) -> Zk {
        Self::with(
            connect,
            Client::connector().with_auth("digest", digest.as_bytes()),
        )
    }

    /// A node only this client's identity may read or change.
    pub fn put_private(&self, path: &str, data: &str) {
        let options = CreateMode::Persistent.with_acls(Acls::creator_all());
        self.rt
            .block_on(self.client.create(path, data.as_bytes(), &options))
            .unwrap_or_else(|e| panic!("create {path}: {e}"));
    }

    pub fn connect_with(connect: &str, session_timeout: Duration) -> Zk {
        Self::with(
            connect,
            Client::connector().with_session_timeout(session_timeout),
        )
    }

    fn with(connect: &str, connector: zookeeper_client::Connector) -> Zk {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let client = rt
            .block_on(connector.connect(connect))
            .unwrap_or_else(|e| panic!("cannot connect to zookeeper {connect}: {e}"));
        Zk { rt, client }
    }

    pub fn block_on<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        self.rt.block_on(f)
    }

    fn create_mode(&self, path: &str, data: &str, mode: CreateMode) {
        let options = mode.with_acls(Acls::anyone_all());
        let result = self
            .rt
            .block_on(self.client.create(path, data.as_bytes(), &options));
        match result {
            Ok(_) => {}
            Err(zookeeper_client::Error::NodeExists) => {
                self.rt
                    .block_on(self.client.set_data(path, data.as_bytes(), None))
                    .unwrap();
            }
            Err(zookeeper_client::Error::NoNode) => {
                let parent = &path[..path.rfind('/').unwrap()];
                self.mkdirs(parent);
                self.create_mode(path, data, mode);
            }
            Err(e) => panic!("create {path}: {e}"),
        }
    }

    /// Persistent nodes down to `path`, without data.
    pub fn mkdirs(&self, path: &str) {
        let mut at = String::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            at = format!("{at}/{part}");
            let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
            match self.rt.block_on(self.client.create(&at, b"", &options)) {
                Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
                Err(e) => panic!("mkdir {at}: {e}"),
            }
        }
    }

    /// A persistent node (a service record), its parents made as needed.
    pub fn put(&self, path: &str, data: &str) {
        self.create_mode(path, data, CreateMode::Persistent);
    }

    /// An ephemeral node (a host record), gone with this client's session.
    pub fn put_ephemeral(&self, path: &str, data: &str) {
        self.create_mode(path, data, CreateMode::Ephemeral);
    }

    pub fn delete(&self, path: &str) {
        match self.rt.block_on(self.client.delete(path, None)) {
            Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
            Err(e) => panic!("delete {path}: {e}"),
        }
    }

    /// Waits until node `path` is deleted; when it saw the deletion.
    pub fn wait_deleted(&self, path: &str, timeout: Duration) -> Option<std::time::Instant> {
        self.rt.block_on(async {
            let end = tokio::time::Instant::now() + timeout;
            loop {
                let (stat, watcher) = self.client.check_and_watch_stat(path).await.ok()?;
                if stat.is_none() {
                    return Some(std::time::Instant::now());
                }
                tokio::time::timeout_at(end, watcher.changed()).await.ok()?;
            }
        })
    }
}

/// A TCP relay between xdpdns and one ZooKeeper member that the test can
/// cut: while cut, it closes every relayed connection and refuses new
/// ones (the node is partitioned from ZooKeeper).
pub struct Partition {
    pub addr: SocketAddr,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Partition {
    pub fn relay(to_port: u16) -> Partition {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (c, o) = (cut.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if c.load(Ordering::SeqCst) {
                    continue; // dropped: the connection is closed at once
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", to_port)) else {
                    continue;
                };
                let mut list = o.lock().unwrap();
                list.push(client.try_clone().unwrap());
                list.push(server.try_clone().unwrap());
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Partition { addr, cut, open }
    }

    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    pub fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}
