//! An etcd cluster on loopback for the benchmarks (Debian's `etcd-server`,
//! installed by `cargo xtask deps`).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::process::KillOnDrop;

/// An etcd cluster of `members` on loopback, killed on drop.
pub struct EtcdCluster {
    /// Killed on drop.
    _members: Vec<KillOnDrop>,
    pub endpoints: Vec<String>,
}

impl EtcdCluster {
    pub fn start(dir: &Path, members: usize) -> EtcdCluster {
        // Ports the kernel handed out just now and that are free again.
        let port = || {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let ports: Vec<(u16, u16)> = (0..members).map(|_| (port(), port())).collect();
        let initial: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{i}=http://127.0.0.1:{peer}"))
            .collect();
        let mut children = Vec::new();
        for (i, (client, peer)) in ports.iter().enumerate() {
            let data = dir.join(format!("m{i}"));
            std::fs::create_dir_all(&data).unwrap();
            let child = Command::new("etcd")
                .args([
                    format!("--name=m{i}"),
                    format!("--data-dir={}", data.display()),
                    format!("--listen-client-urls=http://127.0.0.1:{client}"),
                    format!("--advertise-client-urls=http://127.0.0.1:{client}"),
                    format!("--listen-peer-urls=http://127.0.0.1:{peer}"),
                    format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer}"),
                    format!("--initial-cluster={}", initial.join(",")),
                    "--initial-cluster-state=new".into(),
                    "--heartbeat-interval=50".into(),
                    "--election-timeout=500".into(),
                ])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("etcd (cargo xtask deps installs it)");
            children.push(KillOnDrop(child));
        }
        let endpoints: Vec<String> = ports
            .iter()
            .map(|(c, _)| format!("http://127.0.0.1:{c}"))
            .collect();
        let deadline = Instant::now() + Duration::from_secs(30);
        for e in &endpoints {
            while !Command::new("etcdctl")
                .env("ETCDCTL_API", "3")
                .args([
                    &format!("--endpoints={e}"),
                    "--command-timeout=2s",
                    "get",
                    "probe",
                ])
                .output()
                .is_ok_and(|o| o.status.success())
            {
                assert!(Instant::now() < deadline, "etcd never healthy");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        EtcdCluster {
            _members: children,
            endpoints,
        }
    }
}

impl EtcdCluster {
    /// The config of an xdpdns node on this cluster: one UDP socket,
    /// the registry under `prefix`, `extra` TOML after the etcd table.
    pub fn node_config(&self, prefix: &str, level: &str, extra: &str) -> String {
        format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nudp_sockets = 1\n[log]\nlevel = \"{level}\"\n\
             [registry]\nlisten = \"127.0.0.1:0\"\ntoken = \"t\"\ndata_dir = \"reg\"\nrequire_opt_in = false\n\
             backend = \"etcd\"\nns = [\"ns1.example.com.\"]\nhostmaster = \"h.example.com.\"\n\
             [registry.etcd]\nendpoints = {}\nprefix = \"{prefix}\"\n{extra}\
             [[registry.zone]]\nname = \"sd.example.\"\nnetworks = [\"*\"]\n",
            self.toml_endpoints()
        )
    }

    /// The endpoints as a TOML array.
    pub fn toml_endpoints(&self) -> String {
        let quoted: Vec<String> = self.endpoints.iter().map(|e| format!("\"{e}\"")).collect();
        format!("[{}]", quoted.join(", "))
    }
}
