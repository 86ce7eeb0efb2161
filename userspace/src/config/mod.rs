//! TOML configuration, validated on load. Every error names the file and
//! the key (and, for syntax errors, the line).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use hickory_proto::rr::Name;
use serde::Deserialize;

pub mod anycast;
pub mod transfer;

pub use anycast::AnycastConfig;
pub use transfer::{TransferConfig, TsigKeyConfig};

use crate::handler::Identity;
use crate::wire::{ServerEdns, DEFAULT_UDP_PAYLOAD};
use crate::xdp::AttachMode;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: cannot read: {source}", file.display())]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Syntax, type or unknown-key errors; the message carries line,
    /// column and key from the TOML parser.
    #[error("{}: {message}", file.display())]
    Parse { file: PathBuf, message: String },
    #[error("{}: {key}: {message}", file.display())]
    Invalid {
        file: PathBuf,
        key: String,
        message: String,
    },
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default)]
    pub identity: IdentityConfig,
    #[serde(default)]
    pub log: LogConfig,
    #[serde(default)]
    pub metrics: MetricsConfig,
    #[serde(default)]
    pub control: ControlConfig,
    #[serde(default)]
    pub xdp: XdpConfig,
    #[serde(default, rename = "zone")]
    pub zones: Vec<ZoneConfig>,
    /// Service registry and its HTTP API; absent = off.
    #[serde(default)]
    pub registry: Option<RegistryConfig>,
    /// Zone transfers, NOTIFY and the IXFR journal.
    #[serde(default)]
    pub transfer: TransferConfig,
    #[serde(default, rename = "tsig_key")]
    pub tsig_keys: Vec<TsigKeyConfig>,
    /// DNS cookies (RFC 7873/9018), in both paths.
    #[serde(default)]
    pub cookies: CookiesConfig,
    /// Response rate limiting (the fallback's UDP answers; off by default).
    #[serde(default)]
    pub rrl: crate::rrl::RrlConfig,
    /// Anycast health coupling; absent = off.
    #[serde(default)]
    pub anycast: Option<AnycastConfig>,
    /// Directory relative paths in this file are resolved against.
    #[serde(skip)]
    pub base_dir: PathBuf,
    #[serde(skip)]
    pub file: PathBuf,
    /// What the sections above turn into, built once when the file is
    /// validated (the rest of the server takes these, not the sections).
    #[serde(skip)]
    pub settings: Settings,
}

/// Validated domain objects built from the config.
#[derive(Clone, Default)]
pub struct Settings {
    /// CNS/Binder naming of the registry's zones (`None`: no registry).
    pub naming: Option<crate::registry::Naming>,
    pub transfer: crate::transfer::TransferPolicy,
    pub notify_targets: Vec<crate::transfer::notify::NotifyTargets>,
    pub secondary_zones: Vec<crate::transfer::secondary::SecondaryZone>,
    /// Read from (or created at) `cookies.secret_file`; `None` when no
    /// file is configured (a random secret lives as long as the process).
    pub cookie_secrets: Option<crate::cookies::CookieSecrets>,
    /// The zones whose A/AAAA answers rotate (`rotate`).
    pub rotation: crate::zone::RotationPolicy,
}

// Settings are a function of the sections, which are compared and printed.
impl PartialEq for Settings {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Settings { .. }")
    }
}

/// `[cookies]`: where the server secret lives. Without a file the secret
/// is random per process, so cookies do not survive a restart and are
/// not shared with other nodes.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CookiesConfig {
    /// One or two lines of 32 hex digits (current, then previous);
    /// created with a random secret if absent. Reloaded on SIGHUP.
    pub secret_file: Option<PathBuf>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Addresses served over both UDP and TCP. Port 0 picks a free port
    /// (shared by UDP and TCP), reported in the log.
    pub listen: Vec<SocketAddr>,
    /// UDP sockets per address (SO_REUSEPORT); 0 = one per CPU core.
    pub udp_sockets: usize,
    /// EDNS UDP payload size advertised and honoured.
    pub udp_payload: u16,
    pub tcp_idle_timeout_ms: u64,
    pub tcp_max_connections: usize,
    /// Replies queued per TCP connection before reading pauses.
    pub tcp_max_pipelined: usize,
    /// How long SIGTERM waits for open TCP connections.
    pub shutdown_grace_ms: u64,
    /// Receive and send buffer of each UDP socket, in bytes (set past the
    /// system maximum when running privileged): a burst of queries waits
    /// here instead of being dropped.
    pub udp_receive_buffer: usize,
    pub udp_send_buffer: usize,
    /// While queries arrive faster than one per this many microseconds, a
    /// UDP worker waits this long after each batch so the next wake-up
    /// takes several queries at once (0 = never wait).
    pub udp_coalesce_us: u64,
    /// Started as root, the server drops to this user (and `group`, or
    /// the user's primary group) once its sockets are bound and the XDP
    /// program attached, keeping only the capabilities it still needs.
    pub user: Option<String>,
    pub group: Option<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: vec![SocketAddr::from(([127, 0, 0, 1], 5353))],
            udp_sockets: 0,
            udp_payload: DEFAULT_UDP_PAYLOAD,
            tcp_idle_timeout_ms: 10_000,
            tcp_max_connections: 1024,
            tcp_max_pipelined: 32,
            shutdown_grace_ms: 5_000,
            udp_receive_buffer: 4 << 20,
            udp_send_buffer: 1 << 20,
            udp_coalesce_us: DEFAULT_UDP_COALESCE_US,
            user: None,
            group: None,
        }
    }
}

/// Long enough to gather a few queries at tens of thousands per second,
/// short against any network round trip (README, Benchmarks).
pub const DEFAULT_UDP_COALESCE_US: u64 = 100;

impl ServerConfig {
    pub fn udp_coalesce(&self) -> Duration {
        Duration::from_micros(self.udp_coalesce_us)
    }

    pub fn tcp_idle_timeout(&self) -> Duration {
        Duration::from_millis(self.tcp_idle_timeout_ms)
    }

    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_millis(self.shutdown_grace_ms)
    }

    pub fn udp_socket_count(&self) -> usize {
        match self.udp_sockets {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }
}

/// Identity answers. Absent = default (host name, package version); an
/// empty string hides the answer (REFUSED).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct IdentityConfig {
    /// Answer to CH TXT `id.server` / `hostname.bind`.
    pub server_id: Option<String>,
    /// Answer to CH TXT `version.bind` / `version.server`.
    pub version: Option<String>,
    /// EDNS NSID (RFC 5001) payload; absent = NSID off.
    pub nsid: Option<String>,
}

/// `[control]`: the Unix socket `xdpdns ctl` talks to.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ControlConfig {
    /// Default: `xdpdns.sock` in `transfer.data_dir`, else in
    /// `registry.data_dir`, else `/run/xdpdns/xdpdns.sock`.
    pub socket: Option<PathBuf>,
    /// Members of this group may use the socket besides root and the
    /// server's own user.
    pub group: Option<String>,
}

/// `[control] socket`, else `xdpdns.sock` in the transfer data directory,
/// else in the registry's, else in `/run/xdpdns`.
fn socket_path(
    socket: Option<PathBuf>,
    transfer_dir: Option<PathBuf>,
    registry_dir: Option<PathBuf>,
) -> PathBuf {
    socket.unwrap_or_else(|| {
        transfer_dir
            .or(registry_dir)
            .unwrap_or_else(|| PathBuf::from("/run/xdpdns"))
            .join("xdpdns.sock")
    })
}

/// `[metrics]`: Prometheus metrics over HTTP (`GET /metrics`); off
/// without `listen`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    pub listen: Option<SocketAddr>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// tracing filter, e.g. "info" or "xdpdns=debug"; RUST_LOG overrides.
    pub level: String,
    /// `text` (colour only on a terminal) or `json` (one event per line).
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".into(),
            format: LogFormat::Text,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// The XDP fast path. With no interfaces the server answers everything
/// through the fallback.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct XdpConfig {
    /// Interfaces to attach to; the program answers UDP queries to the
    /// port of the first `server.listen` address.
    pub interfaces: Vec<String>,
    pub mode: AttachMode,
    /// (name, type) entries per table generation (the maps hold two).
    pub capacity: u32,
    /// Destination addresses the kernel answers for. Empty: the
    /// `server.listen` addresses, or every address of the interfaces when
    /// one of those is a wildcard (0.0.0.0 or ::).
    pub addresses: Vec<std::net::IpAddr>,
    /// A directory on a bpf filesystem (e.g. `/sys/fs/bpf/xdpdns`) where
    /// the program, its maps and its attachments are pinned: the kernel
    /// keeps answering while the process is down, and a restart adopts
    /// the table instead of loading it again. Unset: the program is
    /// detached when the server stops.
    pub pin_dir: Option<PathBuf>,
}

impl Default for XdpConfig {
    fn default() -> Self {
        XdpConfig {
            interfaces: Vec::new(),
            mode: AttachMode::Auto,
            capacity: 131_072,
            addresses: Vec::new(),
            pin_dir: None,
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ZoneConfig {
    pub origin: String,
    /// Master file; relative to the config file's directory. A zone has a
    /// file (it is ours) or `primaries` (a secondary zone).
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// Secondary zone: primaries to transfer it from, in order of preference.
    #[serde(default)]
    pub primaries: Vec<SocketAddr>,
    /// TSIG key (a `[[tsig_key]]` name) for SOA queries and transfers to
    /// the primaries.
    #[serde(default)]
    pub primary_key: Option<String>,
    /// Who may NOTIFY this secondary zone; default: the primaries'
    /// addresses (signed with `primary_key` when there is one).
    #[serde(default)]
    pub allow_notify: Option<Vec<crate::transfer::AclRule>>,
    /// Secondaries to NOTIFY on every serial change (and then poll).
    #[serde(default)]
    pub notify: Vec<SocketAddr>,
    /// TSIG key to sign NOTIFYs and SOA polls with.
    #[serde(default)]
    pub notify_key: Option<String>,
    /// Who may AXFR/IXFR this zone; default: `transfer.allow_transfer`.
    #[serde(default)]
    pub allow_transfer: Option<Vec<crate::transfer::AclRule>>,
    /// Rotate A/AAAA answers by the query ID, so clients that take the
    /// first address spread over every member. Off for file and secondary
    /// zones unless set.
    #[serde(default)]
    pub rotate: bool,
}

/// `[registry]`: the service registry, its HTTP API and the zones it
/// generates.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RegistryConfig {
    /// HTTP API address.
    #[serde(default = "default_api_listen")]
    pub listen: SocketAddr,
    /// Bearer token for writes (or `token_file`); one is required.
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Whether reads (listings) need the token too.
    #[serde(default = "yes")]
    pub public_reads: bool,
    /// Journal and snapshot directory; relative to the config file.
    pub data_dir: PathBuf,
    /// Least time between two publishes of registry changes. 0: a change
    /// that finds the writer idle goes out at once, and what arrives while
    /// it is busy goes out together next (adaptive batching).
    #[serde(default = "default_batch_delay")]
    pub batch_delay_ms: u64,
    #[serde(default = "default_ttl")]
    pub ttl: u32,
    #[serde(default = "default_srv_ttl")]
    pub srv_ttl: u32,
    /// CNS: owners must opt in (`PUT /v1/owners/{owner}`) to be listed.
    #[serde(default = "yes")]
    pub require_opt_in: bool,
    /// Name servers for the generated zones' NS records; the first is the
    /// SOA MNAME.
    pub ns: Vec<String>,
    pub hostmaster: String,
    /// SOA refresh, retry, expire, minimum.
    #[serde(default = "default_soa_timers")]
    pub soa_timers: [u32; 4],
    #[serde(default)]
    pub health: crate::registry::HealthPolicy,
    /// Per-registration limits and the API body size.
    #[serde(default)]
    pub limits: crate::registry::model::Limits,
    #[serde(rename = "zone")]
    pub zones: Vec<RegistryZoneConfig>,
    /// Where the registry lives: `local` (the journal in `data_dir`, the
    /// default) or `etcd` (shared by several nodes; `[registry.etcd]`).
    #[serde(default)]
    pub backend: RegistryBackend,
    #[serde(default)]
    pub etcd: Option<crate::registry::etcd::EtcdConfig>,
}

/// `registry.backend`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RegistryBackend {
    #[default]
    Local,
    Etcd,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RegistryZoneConfig {
    pub name: String,
    /// CNS: address prefixes whose instance and service names go here;
    /// `["*"]` marks the one catch-all zone; absent = no CNS forward names
    /// (Binder domains and reverse zones).
    #[serde(default)]
    pub networks: Option<Vec<String>>,
    /// As for `[[zone]]`: secondaries to NOTIFY, the key, the transfer ACL.
    #[serde(default)]
    pub notify: Vec<SocketAddr>,
    #[serde(default)]
    pub notify_key: Option<String>,
    #[serde(default)]
    pub allow_transfer: Option<Vec<crate::transfer::AclRule>>,
    /// As for `[[zone]]`, but on unless set: a service name's addresses
    /// are its instances.
    #[serde(default = "yes")]
    pub rotate: bool,
}

fn default_api_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8053))
}
fn yes() -> bool {
    true
}
fn default_batch_delay() -> u64 {
    0
}
fn default_ttl() -> u32 {
    30
}
fn default_srv_ttl() -> u32 {
    60
}
fn default_soa_timers() -> [u32; 4] {
    [3600, 600, 86400, 30]
}

impl ZoneConfig {
    pub fn origin_name(&self) -> Name {
        let mut n = Name::from_str(&self.origin).expect("validated on load");
        n.set_fqdn(true);
        n
    }
}

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
        }
        config.validate()?;
        config.settings = Settings {
            naming: config.naming()?,
            transfer: config.transfer_policy()?,
            notify_targets: config.notify_targets(),
            secondary_zones: config.secondary_zones(),
            rotation: config.rotation_policy(),
            cookie_secrets: match &config.cookies.secret_file {
                Some(f) => Some(
                    crate::cookies::CookieSecrets::load_or_create(f)
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
        self.naming()?;
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
            (None, None) => crate::cookies::CookieSecrets::random(),
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
            transfer::TransferConfig::default().max_transfers_out
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
