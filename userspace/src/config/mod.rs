//! TOML configuration, validated on load. Every error names the file and
//! the key (and, for syntax errors, the line).

use std::path::{Path, PathBuf};
use std::str::FromStr;

use hickory_proto::rr::Name;
use serde::Deserialize;

pub mod anycast;
pub mod dnstap;
mod error;
mod file;
pub mod signing;
pub mod transfer;
pub mod update;

pub use error::ConfigError;
use file::socket_path;
pub use file::{
    AnswerTableMode, AnycastConfig, Config, ControlConfig, CookiesConfig, DnssecPolicyConfig,
    IdentityConfig, LogConfig, LogFormat, MetricsConfig, RegistryBackend, RegistryConfig,
    RegistryZoneConfig, ServerConfig, Settings, TransferConfig, TsigKeyConfig, XdpConfig,
    ZoneConfig, DEFAULT_UDP_COALESCE_US,
};

use crate::handler::Identity;
use crate::wire::ServerEdns;

impl Config {
    pub fn load(file: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(file).map_err(|source| ConfigError::Io {
            file: file.to_path_buf(),
            source,
        })?;
        Self::parse(&text, file)
    }

    pub fn parse(text: &str, file: &Path) -> Result<Config, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            file: file.to_path_buf(),
            message: e.to_string().trim_end().replace('\n', " "),
        })?;
        config.file = file.to_path_buf();
        config.base_dir = file
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        for zone in &mut config.zones {
            if let Some(f) = zone.file.as_mut().filter(|f| f.is_relative()) {
                *f = config.base_dir.join(&*f);
            }
        }
        if let Some(d) = config
            .transfer
            .data_dir
            .as_mut()
            .filter(|d| d.is_relative())
        {
            *d = config.base_dir.join(&*d);
        }
        if let Some(f) = config
            .cookies
            .secret_file
            .as_mut()
            .filter(|f| f.is_relative())
        {
            *f = config.base_dir.join(&*f);
        }
        if let Some(f) = config.control.socket.as_mut().filter(|f| f.is_relative()) {
            *f = config.base_dir.join(&*f);
        }
        if let Some(r) = &mut config.registry {
            if r.data_dir.is_relative() {
                r.data_dir = config.base_dir.join(&r.data_dir);
            }
            if let Some(t) = &mut r.token_file {
                if t.is_relative() {
                    *t = config.base_dir.join(&*t);
                }
            }
            if let Some(e) = r.etcd.as_mut() {
                e.resolve_paths(&config.base_dir);
            }
            if let Some(f) = r
                .zookeeper
                .as_mut()
                .and_then(|z| z.digest_file.as_mut())
                .filter(|f| f.is_relative())
            {
                *f = config.base_dir.join(&*f);
            }
        }
        config.validate()?;
        config.settings = Settings {
            naming: config.naming()?,
            transfer: config.transfer_policy()?,
            notify_targets: config.notify_targets(),
            secondary_zones: config.secondary_zones(),
            followed_catalogs: config.followed_catalogs(),
            rotation: config.rotation_policy(),
            cookie_secrets: match &config.cookies.secret_file {
                Some(f) => Some(
                    crate::cookies::load_or_create(f)
                        .map_err(|e| config.invalid("cookies.secret_file", e.to_string()))?,
                ),
                None => None,
            },
        };
        Ok(config)
    }

    /// Where the control socket lives (see [`ControlConfig::socket`]).
    pub fn control_socket(&self) -> PathBuf {
        socket_path(
            self.control.socket.clone(),
            self.transfer.data_dir.clone(),
            self.registry.as_ref().map(|r| r.data_dir.clone()),
        )
    }

    /// The control socket of the configuration in `file`, read without
    /// validating the rest: `xdpdns ctl` may run as a user who cannot read
    /// the keys and secrets the file names, and must not create any.
    pub fn control_socket_of(file: &Path) -> Result<PathBuf, ConfigError> {
        #[derive(Deserialize, Default)]
        struct Dirs {
            data_dir: Option<PathBuf>,
        }
        #[derive(Deserialize)]
        struct Partial {
            #[serde(default)]
            control: ControlConfig,
            #[serde(default)]
            transfer: Dirs,
            registry: Option<Dirs>,
        }
        let text = std::fs::read_to_string(file).map_err(|source| ConfigError::Io {
            file: file.to_path_buf(),
            source,
        })?;
        let p: Partial = toml::from_str(&text).map_err(|e| ConfigError::Parse {
            file: file.to_path_buf(),
            message: e.to_string().trim_end().replace('\n', " "),
        })?;
        let base = file
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        Ok(base.join(socket_path(
            p.control.socket,
            p.transfer.data_dir,
            p.registry.and_then(|r| r.data_dir),
        )))
    }

    /// The zones with `rotate` on (their origins are validated).
    fn rotation_policy(&self) -> crate::zone::RotationPolicy {
        self.reloaded_rotation(self)
    }

    /// The rotation policy a reload from `old` to this config puts in
    /// force: this config's `[[zone]]`s, and `old`'s registry zones, which
    /// a reload leaves as they are (their set changes with a restart).
    pub fn reloaded_rotation(&self, old: &Config) -> crate::zone::RotationPolicy {
        let files = self
            .zones
            .iter()
            .filter(|z| z.rotate)
            .map(|z| z.origin_name());
        // Registry zone names are checked by `naming`, which runs first.
        let registry = old
            .registry
            .iter()
            .flat_map(|r| &r.zones)
            .filter(|z| z.rotate)
            .filter_map(|z| Name::from_str(&z.name).ok())
            .map(|mut n| {
                n.set_fqdn(true);
                n
            });
        let origins: Vec<Name> = files.chain(registry).collect();
        crate::zone::RotationPolicy::new(&origins)
    }

    /// The zones the registry generates.
    pub fn registry_zone_names(&self) -> impl Iterator<Item = Name> + '_ {
        self.settings
            .naming
            .iter()
            .flat_map(|n| n.zones.iter().map(|z| z.name.clone()))
    }

    fn invalid(&self, key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            file: self.file.clone(),
            key: key.into(),
            message: message.into(),
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.validate_anycast()?;
        if let Some(d) = &self.dnstap {
            if let Err((key, message)) = d.target(&self.base_dir).and(d.policy().map(drop)) {
                return Err(self.invalid(key, message));
            }
        }
        if let Err((key, message)) = self.rrl.check() {
            return Err(self.invalid(key, message));
        }
        let s = &self.server;
        if s.listen.is_empty() {
            return Err(self.invalid("server.listen", "at least one address is required"));
        }
        if s.udp_payload < 512 {
            return Err(self.invalid("server.udp_payload", "must be at least 512"));
        }
        if s.tcp_max_connections == 0 {
            return Err(self.invalid("server.tcp_max_connections", "must be at least 1"));
        }
        if s.tcp_max_pipelined == 0 {
            return Err(self.invalid("server.tcp_max_pipelined", "must be at least 1"));
        }
        if s.tcp_idle_timeout_ms == 0 {
            return Err(self.invalid("server.tcp_idle_timeout_ms", "must be at least 1"));
        }
        if !self.xdp.interfaces.is_empty() {
            if self.xdp.capacity == 0 {
                return Err(self.invalid("xdp.capacity", "must be at least 1"));
            }
            if self.xdp.pin_dir.as_ref().is_some_and(|d| !d.is_absolute()) {
                return Err(self.invalid(
                    "xdp.pin_dir",
                    "must be an absolute path (a directory on a bpf filesystem)",
                ));
            }
            let port = s.listen[0].port();
            if s.listen.iter().any(|a| a.port() != port) {
                return Err(self.invalid(
                    "server.listen",
                    "with [xdp] interfaces, every listen address must use the same port",
                ));
            }
        }
        if let Some(nsid) = &self.identity.nsid {
            if nsid.is_empty() || nsid.len() > 512 {
                return Err(self.invalid("identity.nsid", "must be 1 to 512 bytes"));
            }
        }
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&self.log.level) {
            return Err(self.invalid("log.level", e.to_string()));
        }
        let mut seen = std::collections::HashSet::new();
        for (i, z) in self.zones.iter().enumerate() {
            let key = |field: &str| format!("zone[{i}].{field}");
            let name = Name::from_str(&z.origin)
                .map_err(|e| self.invalid(key("origin"), format!("{:?}: {e}", z.origin)))?;
            if !seen.insert(
                name.to_lowercase()
                    .to_ascii()
                    .trim_end_matches('.')
                    .to_string(),
            ) {
                return Err(
                    self.invalid(key("origin"), format!("zone {} is listed twice", z.origin))
                );
            }
            match (&z.file, z.primaries.is_empty()) {
                (Some(f), _) if f.as_os_str().is_empty() => {
                    return Err(self.invalid(key("file"), "must name a zone file"))
                }
                (Some(_), false) => {
                    return Err(self.invalid(
                        key("primaries"),
                        "a zone has a file (primary) or primaries (secondary), not both",
                    ))
                }
                (_, true) if z.consume_catalog => {
                    return Err(self.invalid(
                        key("consume_catalog"),
                        "only a secondary zone (with primaries) is followed as a catalog",
                    ))
                }
                (None, true) => {
                    return Err(self.invalid(
                        key("file"),
                        "a zone needs a file, or primaries to transfer it from",
                    ))
                }
                _ => {}
            }
        }
        self.transfer_policy()?;
        self.validate_signing()?;
        if let Some(r) = &self.registry {
            self.validate_registry(r, &seen)?;
        }
        Ok(())
    }

    fn validate_registry(
        &self,
        r: &RegistryConfig,
        file_zones: &std::collections::HashSet<String>,
    ) -> Result<(), ConfigError> {
        if r.token.is_none() && r.token_file.is_none() {
            return Err(self.invalid(
                "registry.token",
                "a token (or token_file) is required: registry writes are authenticated",
            ));
        }
        if r.token.as_deref() == Some("") {
            return Err(self.invalid("registry.token", "must not be empty"));
        }
        if r.zones.is_empty() {
            return Err(self.invalid(
                "registry.zone",
                "at least one [[registry.zone]] is required",
            ));
        }
        if r.ns.is_empty() {
            return Err(self.invalid("registry.ns", "at least one name server is required"));
        }
        match (r.backend, &r.etcd) {
            (RegistryBackend::Etcd, None) => {
                return Err(self.invalid(
                    "registry.etcd",
                    "backend = \"etcd\" needs a [registry.etcd] table with its endpoints",
                ))
            }
            (RegistryBackend::Etcd, Some(e)) => {
                if let Err((key, message)) = e.check() {
                    return Err(self.invalid(key, message));
                }
            }
            (RegistryBackend::Local, Some(_)) => {
                return Err(self.invalid(
                    "registry.etcd",
                    "set only with backend = \"etcd\" (the backend is local)",
                ))
            }
            _ => {}
        }
        let naming = self.naming()?;
        if let Some(zk) = &r.zookeeper {
            if r.backend == RegistryBackend::Etcd {
                return Err(self.invalid(
                    "registry.zookeeper",
                    "mirrors into the local backend only (every node reads ZooKeeper itself)",
                ));
            }
            if let Err((key, message)) = zk.check() {
                return Err(self.invalid(key, message));
            }
            for d in &zk.domains {
                let inside = Name::from_ascii(d)
                    .ok()
                    .and_then(|mut n| {
                        n.set_fqdn(true);
                        naming.as_ref()?.zone_of(&n).cloned()
                    })
                    .is_some();
                if !inside {
                    return Err(self.invalid(
                        "registry.zookeeper.domains",
                        format!("{d:?} is not inside any [[registry.zone]]"),
                    ));
                }
            }
        }
        for (i, z) in r.zones.iter().enumerate() {
            let bare = z
                .name
                .to_ascii_lowercase()
                .trim_end_matches('.')
                .to_string();
            if file_zones.contains(&bare) {
                return Err(self.invalid(
                    format!("registry.zone[{i}].name"),
                    format!("{} is also a [[zone]] served from a file", z.name),
                ));
            }
        }
        Ok(())
    }

    /// The record generator's settings (validated).
    fn naming(&self) -> Result<Option<crate::registry::Naming>, ConfigError> {
        use crate::registry::naming::{Naming, Networks, RegistryZone};
        let Some(r) = &self.registry else {
            return Ok(None);
        };
        let fqdn = |key: String, s: &str| -> Result<Name, ConfigError> {
            let mut n = Name::from_str(s).map_err(|e| self.invalid(key, format!("{s:?}: {e}")))?;
            n.set_fqdn(true);
            Ok(n.to_lowercase())
        };
        let mut zones = Vec::new();
        let mut catch_all = None;
        for (i, z) in r.zones.iter().enumerate() {
            let name = fqdn(format!("registry.zone[{i}].name"), &z.name)?;
            if zones.iter().any(|o: &RegistryZone| o.name == name) {
                return Err(self.invalid(
                    format!("registry.zone[{i}].name"),
                    format!("{} is listed twice", z.name),
                ));
            }
            let networks = match &z.networks {
                None => None,
                Some(list) if list.iter().any(|n| n == "*") => {
                    if list.len() != 1 {
                        return Err(self.invalid(
                            format!("registry.zone[{i}].networks"),
                            "\"*\" must stand alone",
                        ));
                    }
                    if let Some(other) = catch_all.replace(i) {
                        return Err(self.invalid(
                            format!("registry.zone[{i}].networks"),
                            format!("only one catch-all zone is allowed (registry.zone[{other}] is one)"),
                        ));
                    }
                    Some(Networks::CatchAll)
                }
                Some(list) => Some(Networks::List(
                    list.iter()
                        .enumerate()
                        .map(|(j, n)| {
                            n.parse().map_err(|e| {
                                self.invalid(
                                    format!("registry.zone[{i}].networks[{j}]"),
                                    format!("{n:?}: {e}"),
                                )
                            })
                        })
                        .collect::<Result<_, _>>()?,
                )),
            };
            zones.push(RegistryZone { name, networks });
        }
        let ns =
            r.ns.iter()
                .enumerate()
                .map(|(i, n)| fqdn(format!("registry.ns[{i}]"), n))
                .collect::<Result<_, _>>()?;
        Ok(Some(Naming {
            zones,
            ttl: r.ttl,
            srv_ttl: r.srv_ttl,
            require_opt_in: r.require_opt_in,
            ns,
            hostmaster: fqdn("registry.hostmaster".into(), &r.hostmaster)?,
            soa_timers: r.soa_timers,
        }))
    }

    /// The handler settings this configuration asks for.
    pub fn identity(&self) -> Identity {
        let pick = |v: &Option<String>, default: String| match v.as_deref() {
            None => Some(default),
            Some("") => None,
            Some(s) => Some(s.to_string()),
        };
        Identity {
            server_id: pick(&self.identity.server_id, host_name()),
            version: pick(
                &self.identity.version,
                format!("xdpdns {}", env!("CARGO_PKG_VERSION")),
            ),
        }
    }

    /// The server's EDNS settings. Without a secret file the cookie
    /// secret of `running` (the settings being replaced on reload) is
    /// kept, or a random one made.
    /// The destination addresses the kernel answers for (`None`: any).
    pub fn xdp_destinations(&self) -> Option<Vec<std::net::IpAddr>> {
        if !self.xdp.addresses.is_empty() {
            return Some(self.xdp.addresses.clone());
        }
        let listen = &self.server.listen;
        if listen.iter().any(|a| a.ip().is_unspecified()) {
            return None;
        }
        // The anycast service addresses are served too.
        let anycast = self
            .anycast
            .iter()
            .flat_map(|a| a.addresses.iter().map(|n| n.addr()));
        Some(listen.iter().map(|a| a.ip()).chain(anycast).collect())
    }

    pub fn server_edns(&self, running: Option<&ServerEdns>) -> ServerEdns {
        let cookies = match (&self.settings.cookie_secrets, running) {
            (Some(s), _) => s.clone(),
            (None, Some(r)) => r.cookies.clone(),
            (None, None) => crate::cookies::os_random(),
        };
        ServerEdns {
            udp_payload: self.server.udp_payload,
            // An anycast node names itself in NSID by default, so an
            // operator sees which node answered.
            nsid: match (&self.identity.nsid, &self.anycast) {
                (Some(nsid), _) => Some(nsid.as_bytes().to_vec()),
                (None, Some(_)) => self.identity().server_id.map(String::into_bytes),
                (None, None) => None,
            },
            cookies,
        }
    }
}

/// Reads a bearer token given inline or in a file (trimmed; never empty).
pub fn read_token(
    token: &Option<String>,
    file: &Option<PathBuf>,
    key: &str,
) -> anyhow::Result<String> {
    let t = match (token, file) {
        (Some(t), _) => t.clone(),
        (None, Some(f)) => std::fs::read_to_string(f)
            .map_err(|e| anyhow::anyhow!("{key}_file: cannot read {}: {e}", f.display()))?
            .trim()
            .to_string(),
        (None, None) => anyhow::bail!("{key}: a token (or {key}_file) is required"),
    };
    if t.is_empty() {
        anyhow::bail!("{key}: the token is empty");
    }
    Ok(t)
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdp_destinations_follow_listen_unless_given() {
        let c = parse("[server]\nlisten = [\"192.0.2.53:53\", \"[2001:db8::53]:53\"]\n").unwrap();
        assert_eq!(
            c.xdp_destinations().unwrap(),
            vec![
                "192.0.2.53".parse::<std::net::IpAddr>().unwrap(),
                "2001:db8::53".parse().unwrap()
            ]
        );
        let any = parse("[server]\nlisten = [\"0.0.0.0:53\"]\n").unwrap();
        assert_eq!(
            any.xdp_destinations(),
            None,
            "a wildcard serves every address"
        );
        let given =
            parse("[server]\nlisten = [\"0.0.0.0:53\"]\n[xdp]\naddresses = [\"198.51.100.1\"]\n")
                .unwrap();
        assert_eq!(given.xdp_destinations().unwrap().len(), 1);
    }

    #[test]
    fn a_cookie_secret_file_is_created_and_a_bad_one_named() {
        let dir = std::env::temp_dir().join(format!("xdpdns-cfg-cookie-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("c.toml");
        std::fs::write(&file, "[cookies]\nsecret_file = \"cookie.secret\"\n").unwrap();
        let c = Config::load(&file).unwrap();
        assert!(
            dir.join("cookie.secret").exists(),
            "relative to the config file"
        );
        let again = Config::load(&file).unwrap();
        assert_eq!(
            c.server_edns(None).cookies,
            again.server_edns(None).cookies,
            "read back, not regenerated"
        );
        std::fs::write(dir.join("cookie.secret"), "not hex\n").unwrap();
        let e = Config::load(&file).unwrap_err().to_string();
        assert!(
            e.contains("cookies.secret_file") && e.contains("line 1"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("/etc/xdpdns/xdpdns.toml"))
    }

    #[test]
    fn ctl_finds_the_socket_the_server_binds_without_reading_the_rest() {
        let dir = std::env::temp_dir().join(format!("xdpdns-ctl-path-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("xdpdns.toml");
        let cases = [
            ("[transfer]\ndata_dir = \"xfr\"\n", dir.join("xfr/xdpdns.sock")),
            (
                "[registry]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"/var/lib/r\"\nns = [\"ns.example.\"]\n\
                 hostmaster = \"h.example.\"\ntoken = \"t\"\n[[registry.zone]]\nname = \"sd.example.\"\n",
                PathBuf::from("/var/lib/r/xdpdns.sock"),
            ),
            ("[control]\nsocket = \"c.sock\"\n", dir.join("c.sock")),
            ("", PathBuf::from("/run/xdpdns/xdpdns.sock")),
        ];
        for (text, want) in cases {
            std::fs::write(&file, text).unwrap();
            assert_eq!(Config::control_socket_of(&file).unwrap(), want, "{text}");
            assert_eq!(
                Config::load(&file).unwrap().control_socket(),
                want,
                "{text}"
            );
        }
        // A secret file ctl's user cannot read is not read at all.
        std::fs::write(
            &file,
            "[cookies]\nsecret_file = \"/nonexistent/dir/secret\"\n",
        )
        .unwrap();
        assert!(Config::load(&file).is_err());
        assert_eq!(
            Config::control_socket_of(&file).unwrap(),
            PathBuf::from("/run/xdpdns/xdpdns.sock")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The README's configuration reference is TOML this server reads:
    /// every key it shows exists (unknown keys are errors), with the
    /// defaults it states.
    #[test]
    fn the_reference_configuration_parses_with_its_stated_defaults() {
        // The file the manual's configuration reference includes.
        let text = include_str!("../../../examples/reference.toml");
        let c = match parse(text) {
            Ok(c) => c,
            Err(e) => panic!("examples/reference.toml: {e}"),
        };
        let limits = c.registry.as_ref().unwrap().limits;
        assert_eq!(limits, crate::registry::model::Limits::default());
        assert_eq!(c.server, ServerConfig::default());
        assert_eq!(c.rrl, crate::rrl::RrlConfig::default());
        assert_eq!(
            c.transfer.max_transfers_out,
            TransferConfig::default().max_transfers_out
        );
    }

    #[test]
    fn a_bad_etcd_table_is_named_by_its_key() {
        let registry =
            "[registry]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"r\"\nns = [\"ns.example.\"]\n\
                        hostmaster = \"h.example.\"\ntoken = \"t\"\nbackend = \"etcd\"\n\
                        [[registry.zone]]\nname = \"sd.example.\"\n[registry.etcd]\n";
        let cases = [
            ("endpoints = []\n", "registry.etcd.endpoints"),
            (
                "endpoints = [\"http://a:2379\", \"https://b:2379\"]\n",
                "registry.etcd.endpoints",
            ),
            (
                "endpoints = [\"http://a:2379\"]\nca_file = \"ca.pem\"\n",
                "registry.etcd.ca_file",
            ),
            (
                "endpoints = [\"https://a:2379\"]\ncert_file = \"c.pem\"\n",
                "registry.etcd.key_file",
            ),
            (
                "endpoints = [\"https://a:2379\"]\nprefix = \"/x\"\n",
                "registry.etcd.prefix",
            ),
        ];
        for (table, key) in cases {
            let e = parse(&format!("{registry}{table}"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(key), "{table}: {e}");
        }
        let c = parse(&format!(
            "{registry}endpoints = [\"https://a:2379\"]\nca_file = \"tls/ca.pem\"\n\
             cert_file = \"tls/c.pem\"\nkey_file = \"/k.pem\"\n"
        ))
        .unwrap();
        let etcd = c.registry.unwrap().etcd.unwrap();
        assert_eq!(
            etcd.ca_file.unwrap(),
            PathBuf::from("/etc/xdpdns/tls/ca.pem")
        );
        assert_eq!(etcd.key_file.unwrap(), PathBuf::from("/k.pem"));
    }

    #[test]
    fn a_bad_zookeeper_table_is_named_by_its_key() {
        let registry = |backend: &str| {
            format!(
                "[registry]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"r\"\nns = [\"ns.example.\"]\n\
                 hostmaster = \"h.example.\"\ntoken = \"t\"\n{backend}\
                 [[registry.zone]]\nname = \"joyent.us.\"\n[registry.zookeeper]\n"
            )
        };
        let cases = [
            (
                "servers = []\ndomains = [\"emy-10.joyent.us\"]\n",
                "registry.zookeeper.servers",
            ),
            (
                "servers = [\"zk:2181\"]\ndomains = [\"example.com\"]\n",
                "registry.zookeeper.domains",
            ),
            (
                "servers = [\"zk:2181\"]\ndomains = [\"a.joyent.us\"]\nwatches = \"sometimes\"\n",
                "watches",
            ),
        ];
        for (table, key) in cases {
            let e = parse(&format!("{}{table}", registry("")))
                .unwrap_err()
                .to_string();
            assert!(e.contains(key), "{table}: {e}");
        }
        let etcd =
            registry("backend = \"etcd\"\n[registry.etcd]\nendpoints = [\"http://a:2379\"]\n");
        // The etcd table ends where [registry.zookeeper] begins.
        let e = parse(&format!(
            "{etcd}servers = [\"zk:2181\"]\ndomains = [\"a.joyent.us\"]\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("registry.zookeeper"), "{e}");
        let c = parse(&format!(
            "{}servers = [\"zk:2181\"]\ndomains = [\"a.joyent.us\"]\ndigest_file = \"zk.digest\"\n",
            registry("")
        ))
        .unwrap();
        let zk = c.registry.unwrap().zookeeper.unwrap();
        assert_eq!(
            zk.digest_file.unwrap(),
            PathBuf::from("/etc/xdpdns/zk.digest")
        );
        assert_eq!(zk.watches, crate::registry::zookeeper::WatchMode::Auto);
    }

    #[test]
    fn defaults_and_relative_zone_paths() {
        let c = parse("[[zone]]\norigin = \"example.com\"\nfile = \"zones/example.com.zone\"\n")
            .unwrap();
        assert_eq!(c.server, ServerConfig::default());
        assert_eq!(
            c.zones[0].file.clone().unwrap(),
            PathBuf::from("/etc/xdpdns/zones/example.com.zone")
        );
        assert_eq!(c.zones[0].origin_name().to_string(), "example.com.");
    }

    #[test]
    fn unknown_key_is_named_with_its_line() {
        let err = parse("[server]\nlisten = [\"127.0.0.1:53\"]\nlisen = 1\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("/etc/xdpdns/xdpdns.toml: "), "{err}");
        assert!(err.contains("lisen"), "{err}");
        assert!(err.contains("line 3"), "{err}");
    }

    #[test]
    fn bad_values_name_their_key() {
        let err = parse("[server]\nlisten = [\"127.0.0.1\"]\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("listen") && err.contains("line 2"), "{err}");
        let err = parse("[server]\nudp_payload = 100\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "/etc/xdpdns/xdpdns.toml: server.udp_payload: must be at least 512"
        );
        let err = parse("[[zone]]\norigin = \"a..b\"\nfile = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("zone[0].origin"), "{err}");
        let err = parse(
            "[[zone]]\norigin = \"a.b\"\nfile = \"x\"\n[[zone]]\norigin = \"A.B.\"\nfile = \"y\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("zone[1].origin") && err.contains("twice"),
            "{err}"
        );
    }

    #[test]
    fn identity_defaults_and_hiding() {
        let c =
            parse("[identity]\nversion = \"\"\nserver_id = \"ns1\"\nnsid = \"ns1.fra\"\n").unwrap();
        let id = c.identity();
        assert_eq!(id.server_id.as_deref(), Some("ns1"));
        assert_eq!(id.version, None);
        assert_eq!(c.server_edns(None).nsid.as_deref(), Some(&b"ns1.fra"[..]));
        let c = parse("").unwrap();
        assert!(c.identity().version.unwrap().starts_with("xdpdns "));
        assert_eq!(c.server_edns(None).nsid, None);
    }

    #[test]
    fn registry_zone_acl_applies_to_names_written_without_the_final_dot() {
        let c = parse(
            "[registry]\ndata_dir = \"r\"\nns = [\"ns1.x.\"]\nhostmaster = \"h.x.\"\ntoken = \"t\"\n\
             [[registry.zone]]\nname = \"sd.x\"\nnetworks = [\"*\"]\n\
             allow_transfer = [{ from = [\"10.0.0.0/8\"] }]\n",
        )
        .unwrap();
        let policy = c.transfer_policy().unwrap();
        let zone = hickory_proto::rr::LowerName::from(Name::from_ascii("sd.x.").unwrap());
        let acl = policy.transfer_acl(&zone);
        assert!(acl.allows("10.1.2.3".parse().unwrap(), None));
        assert!(
            !acl.allows("127.0.0.1".parse().unwrap(), None),
            "the zone's own ACL, not the loopback default"
        );
    }

    #[test]
    fn registry_zones_rotate_unless_set_and_file_zones_only_when_set() {
        let c = parse(
            "[[zone]]\norigin = \"files.x\"\nfile = \"z\"\n\
             [[zone]]\norigin = \"Pool.X\"\nfile = \"p\"\nrotate = true\n\
             [registry]\ndata_dir = \"r\"\nns = [\"ns1.x.\"]\nhostmaster = \"h.x.\"\ntoken = \"t\"\n\
             [[registry.zone]]\nname = \"sd.x\"\nnetworks = [\"*\"]\n\
             [[registry.zone]]\nname = \"fixed.x.\"\nrotate = false\n",
        )
        .unwrap();
        let rotates = |origin: &str| {
            let key = hickory_proto::rr::LowerName::from(Name::from_ascii(origin).unwrap());
            c.settings.rotation.rotates(&key)
        };
        assert!(rotates("sd.x."), "registry zone, by default");
        assert!(rotates("pool.x."), "file zone with rotate = true");
        assert!(!rotates("files.x."), "file zone, by default");
        assert!(!rotates("fixed.x."), "registry zone with rotate = false");
    }

    #[test]
    fn registry_errors_name_their_key() {
        let base = "[registry]\ndata_dir = \"r\"\nns = [\"ns1.x.\"]\nhostmaster = \"h.x.\"\n";
        let cases = [
            ("[[registry.zone]]\nname = \"sd.x\"\n", "registry.token"),
            ("token = \"t\"\n[[registry.zone]]\nname = \"a.x\"\nnetworks = [\"*\"]\n[[registry.zone]]\nname = \"b.x\"\nnetworks = [\"*\"]\n", "registry.zone[1].networks"),
            ("token = \"t\"\n[[registry.zone]]\nname = \"a.x\"\nnetworks = [\"10.0.0.0/33\"]\n", "registry.zone[0].networks[0]"),
            ("token = \"t\"\n[[registry.zone]]\nname = \"a..x\"\n", "registry.zone[0].name"),
            ("token = \"t\"\n", "registry"),
        ];
        for (extra, key) in cases {
            let err = parse(&format!("{base}{extra}")).unwrap_err().to_string();
            assert!(err.contains(key), "{extra}: {err}");
        }
        let err = parse(&format!(
            "[[zone]]\norigin = \"sd.x\"\nfile = \"z\"\n{base}token = \"t\"\n[[registry.zone]]\nname = \"SD.x.\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("registry.zone[0].name") && err.contains("served from a file"),
            "{err}"
        );
        let ok = parse(&format!("{base}token = \"t\"\n[[registry.zone]]\nname = \"sd.x\"\nnetworks = [\"10.0.0.0/8\"]\n")).unwrap();
        let r = ok.registry.unwrap();
        assert_eq!(r.data_dir, PathBuf::from("/etc/xdpdns/r"));
        assert_eq!(r.health, crate::registry::HealthPolicy::default());
    }

    #[test]
    fn transfer_errors_name_their_key() {
        let key = "[[tsig_key]]\nname = \"xfr\"\nsecret = \"c2VjcmV0LWtleS1mb3ItdGVzdHMtMTIzNDU2Nzg5MA==\"\n";
        let zone = "[[zone]]\norigin = \"a.x\"\n";
        let cases = [
            (zone.to_string(), "zone[0].file"),
            (
                format!("{zone}file = \"z\"\nprimaries = [\"127.0.0.1:53\"]\n"),
                "zone[0].primaries",
            ),
            (
                format!("{zone}file = \"z\"\nallow_transfer = [{{ key = \"nope\" }}]\n"),
                "zone[0].allow_transfer[0].key",
            ),
            (
                format!("{zone}file = \"z\"\nallow_transfer = [{{}}]\n"),
                "zone[0].allow_transfer[0]",
            ),
            (
                format!("{zone}primaries = [\"127.0.0.1:53\"]\nprimary_key = \"nope\"\n"),
                "zone[0].primary_key",
            ),
            (
                format!("{zone}file = \"z\"\nnotify_key = \"nope\"\n"),
                "zone[0].notify_key",
            ),
            (
                "[[tsig_key]]\nname = \"k\"\nsecret = \"!!\"\n".to_string(),
                "tsig_key[0].secret",
            ),
            (
                "[[tsig_key]]\nname = \"k\"\nalgorithm = \"hmac-md5\"\nsecret = \"AAAA\"\n"
                    .to_string(),
                "tsig_key[0].algorithm",
            ),
            (format!("{key}{key}"), "tsig_key[1].name"),
            (
                "[transfer]\nserial_policy = \"random\"\n".to_string(),
                "serial_policy",
            ),
            (
                "[transfer]\nallow_transfer = [{ from = [\"10.0.0.0/33\"] }]\n".to_string(),
                "allow_transfer",
            ),
        ];
        for (text, want) in cases {
            let err = parse(&text).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
        let ok = parse(&format!(
            "{key}[transfer]\ndata_dir = \"xfr\"\n{zone}primaries = [\"127.0.0.1:5300\"]\nprimary_key = \"xfr\"\n"
        ))
        .unwrap();
        assert_eq!(ok.transfer.data_dir, Some(PathBuf::from("/etc/xdpdns/xfr")));
        let policy = ok.transfer_policy().unwrap();
        let notify = policy.notify_acl.values().next().unwrap();
        let primary = "127.0.0.1".parse().unwrap();
        let xfr = hickory_proto::rr::Name::from_ascii("xfr.").unwrap();
        assert!(
            notify.allows(primary, Some(&xfr)),
            "NOTIFY from the primary, signed"
        );
        assert!(
            !notify.allows(primary, None),
            "unsigned NOTIFY when the primary uses a key"
        );
        assert!(
            policy
                .transfer_acl(&hickory_proto::rr::LowerName::from(&xfr))
                .allows(primary, None),
            "default: loopback"
        );
    }
}
