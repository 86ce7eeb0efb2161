//! `[registry.zookeeper]`: the ensemble, the session, the DNS domains
//! mirrored from it and how vanished service members leave.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// `[registry.zookeeper]`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ZooKeeperConfig {
    /// Ensemble members, `host:port` each.
    pub servers: Vec<String>,
    /// A chroot every path is below (as in `host:port/chroot`).
    #[serde(default)]
    pub chroot: Option<String>,
    /// This node's session timeout; only what ZooKeeper's `minSessionTimeout`
    /// and `maxSessionTimeout` allow is granted.
    #[serde(default = "default_session_timeout_ms")]
    pub session_timeout_ms: u64,
    /// DNS domains to mirror, each from the node its labels reversed name
    /// (`emy-10.joyent.us` is `/us/joyent/emy-10`); each must be inside a
    /// `[[registry.zone]]`.
    pub domains: Vec<String>,
    /// Digest authentication, `user:password` (or in `digest_file`).
    #[serde(default)]
    pub digest: Option<String>,
    #[serde(default)]
    pub digest_file: Option<PathBuf>,
    /// Service members whose node vanishes leave through `[registry.health]`
    /// hysteresis (at most a third of a service per window, the last one
    /// late) instead of at once: an accidental deletion of a whole service
    /// does not empty it.
    #[serde(default)]
    pub hysteresis: bool,
    /// How changes are followed: `persistent` recursive watches
    /// (ZooKeeper 3.6 and later), `oneshot` child and data watches on
    /// every node (older servers), or `auto`: persistent unless the
    /// servers do not implement them.
    #[serde(default)]
    pub watches: WatchMode,
}

/// `registry.zookeeper.watches`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum WatchMode {
    #[default]
    Auto,
    Persistent,
    Oneshot,
}

fn default_session_timeout_ms() -> u64 {
    10_000
}

impl ZooKeeperConfig {
    pub fn session_timeout(&self) -> Duration {
        Duration::from_millis(self.session_timeout_ms.max(1))
    }

    /// The connect string: the servers, then the chroot.
    pub fn connect_string(&self) -> String {
        let chroot = self
            .chroot
            .as_deref()
            .map(|c| c.trim_end_matches('/'))
            .unwrap_or_default();
        format!("{}{chroot}", self.servers.join(","))
    }

    /// What is wrong with the table, as (key, message).
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.servers.is_empty() {
            return Err((
                "registry.zookeeper.servers",
                "at least one host:port is required".into(),
            ));
        }
        if let Some(s) = self.servers.iter().find(|s| !s.contains(':')) {
            return Err((
                "registry.zookeeper.servers",
                format!("{s:?} is not host:port"),
            ));
        }
        if let Some(c) = &self.chroot {
            if !c.starts_with('/') {
                return Err((
                    "registry.zookeeper.chroot",
                    format!("{c:?} must start with '/'"),
                ));
            }
        }
        if self.domains.is_empty() {
            return Err((
                "registry.zookeeper.domains",
                "at least one DNS domain to mirror is required".into(),
            ));
        }
        for d in &self.domains {
            if xdpdns_core::registry::model::domain("registry.zookeeper.domains", d).is_err() {
                return Err((
                    "registry.zookeeper.domains",
                    format!("{d:?} is not a domain name"),
                ));
            }
        }
        if self.digest.is_some() && self.digest_file.is_some() {
            return Err((
                "registry.zookeeper.digest",
                "give digest or digest_file, not both".into(),
            ));
        }
        if let Some(d) = &self.digest {
            if !d.contains(':') {
                return Err(("registry.zookeeper.digest", "must be user:password".into()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> ZooKeeperConfig {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn the_connect_string_carries_the_chroot() {
        let c = parse(
            r#"servers = ["127.0.0.1:2181", "[::1]:2182"]
               chroot = "/binder/"
               domains = ["emy-10.joyent.us"]"#,
        );
        assert_eq!(c.connect_string(), "127.0.0.1:2181,[::1]:2182/binder");
        assert_eq!(c.session_timeout(), Duration::from_secs(10));
        assert!(c.check().is_ok());
    }

    #[test]
    fn bad_tables_name_their_key() {
        for (text, key) in [
            (
                r#"servers = []
                domains = ["a.b"]"#,
                "registry.zookeeper.servers",
            ),
            (
                r#"servers = ["zk"]
                domains = ["a.b"]"#,
                "registry.zookeeper.servers",
            ),
            (
                r#"servers = ["zk:2181"]
                domains = []"#,
                "registry.zookeeper.domains",
            ),
            (
                r#"servers = ["zk:2181"]
                domains = ["a_b.c"]"#,
                "registry.zookeeper.domains",
            ),
            (
                r#"servers = ["zk:2181"]
                chroot = "x"
                domains = ["a.b"]"#,
                "registry.zookeeper.chroot",
            ),
            (
                r#"servers = ["zk:2181"]
                digest = "nopassword"
                domains = ["a.b"]"#,
                "registry.zookeeper.digest",
            ),
        ] {
            assert_eq!(parse(text).check().unwrap_err().0, key, "{text}");
        }
    }
}
