//! The configuration file's tables as serde reads them: plain data with
//! defaults. What they mean (validation, derived settings) is in `mod.rs`
//! and beside each area's tables (`anycast`, `transfer`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use std::str::FromStr;

use hickory_proto::rr::Name;
use ipnet::IpNet;
use serde::Deserialize;

use crate::transfer::{AclRule, JournalLimits, SerialPolicy};
use crate::wire::DEFAULT_UDP_PAYLOAD;
use crate::xdp::AttachMode;
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
    /// Who may change which zones by RFC 2136 UPDATE; none: no updates.
    #[serde(default, rename = "update_grant")]
    pub update_grants: Vec<UpdateGrantConfig>,
    /// How zones that take updates keep their files.
    #[serde(default)]
    pub update: UpdateConfig,
    /// The catalog zone of the zones served here as primary (RFC 9432).
    #[serde(default)]
    pub catalog: Option<CatalogConfig>,
    /// Signing policies zones refer to by `dnssec_policy` (`default`
    /// exists without being declared).
    #[serde(default, rename = "dnssec_policy")]
    pub dnssec_policies: Vec<DnssecPolicyConfig>,
    /// DNS cookies (RFC 7873/9018), in both paths.
    #[serde(default)]
    pub cookies: CookiesConfig,
    /// Response rate limiting (the fallback's UDP answers; off by default).
    #[serde(default)]
    pub rrl: crate::rrl::RrlConfig,
    /// Anycast health coupling; absent = off.
    #[serde(default)]
    pub anycast: Option<AnycastConfig>,
    /// dnstap from both paths; absent = off.
    #[serde(default)]
    pub dnstap: Option<super::dnstap::DnstapConfig>,
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
    /// The secondary zones whose members are followed (`consume_catalog`).
    pub followed_catalogs: Vec<crate::transfer::secondary::SecondaryZone>,
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
    /// How the fallback's hot path gets its compiled answers when no
    /// kernel table keeps them.
    pub answer_table: AnswerTableMode,
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
            answer_table: AnswerTableMode::Auto,
            user: None,
            group: None,
        }
    }
}

/// Long enough to gather several queries at tens of thousands per second,
/// short against any network round trip. On a VM each wake-up of a worker
/// costs more than the datagrams it takes: at 30k q/s per socket a 200 µs
/// wait costs a quarter less server CPU per answer than 100 µs, for
/// 80 µs more latency (docs: Benchmarks, The fallback, step by step).
pub const DEFAULT_UDP_COALESCE_US: u64 = 200;

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
pub(super) fn socket_path(
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

/// `server.answer_table`: every name's answers compiled ahead and kept
/// (`whole`: about 130 bytes a name), a name's compiled when a query asks
/// for them and cached per thread (`on-demand`), or whole up to half a
/// million served records and on demand above (`auto`).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum AnswerTableMode {
    #[default]
    Auto,
    Whole,
    OnDemand,
}

impl AnswerTableMode {
    pub fn compiling(self) -> xdpdns_core::answers::on_demand::Compiling {
        use xdpdns_core::answers::on_demand::Compiling;
        match self {
            AnswerTableMode::Auto => Compiling::Auto,
            AnswerTableMode::Whole => Compiling::Whole,
            AnswerTableMode::OnDemand => Compiling::OnDemand,
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
    /// (name, type) entries the kernel table holds (the maps have a
    /// quarter more room, for the overlay of a change).
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
    /// Secondary zone: forward UPDATEs to the primaries and relay their
    /// answer (RFC 2136 §6); off: REFUSED.
    #[serde(default)]
    pub forward_updates: bool,
    /// Secondary zone read as a catalog (RFC 9432): its member zones are
    /// served as secondary zones, transferred from the same primaries with
    /// the same key, NOTIFYs accepted as for this zone.
    #[serde(default)]
    pub consume_catalog: bool,
    /// Sign this primary zone online with the named `[[dnssec_policy]]`.
    #[serde(default)]
    pub dnssec_policy: Option<String>,
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
    /// Mirror Registrar's records from ZooKeeper (a Binder drop-in), beside
    /// the API's registrations; with the local backend.
    #[serde(default)]
    pub zookeeper: Option<crate::registry::zookeeper::ZooKeeperConfig>,
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
    /// Sign this zone online with the named `[[dnssec_policy]]`.
    #[serde(default)]
    pub dnssec_policy: Option<String>,
}

/// `[[dnssec_policy]]`: how a zone signed online is signed.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DnssecPolicyConfig {
    pub name: String,
    /// `ecdsap256sha256` (13) or `ed25519` (15).
    #[serde(default = "default_signing_algorithm")]
    pub algorithm: String,
    /// `csk` (one key) or `ksk+zsk`.
    #[serde(default = "default_keys")]
    pub keys: String,
    /// How long a signature is valid (Knot's `rrsig-lifetime`).
    #[serde(default = "default_validity")]
    pub signature_validity_s: u32,
    /// A signature with less than this left is replaced.
    #[serde(default = "default_refresh")]
    pub signature_refresh_s: u32,
    /// Denial of existence: only `nsec` (see the manual for why).
    #[serde(default = "default_denial")]
    pub denial: String,
    /// A ZSK older than this is rolled over (0: never).
    #[serde(default = "default_zsk_lifetime")]
    pub zsk_lifetime_s: u64,
    /// A KSK (or CSK) older than this is rolled over (0: never).
    #[serde(default)]
    pub ksk_lifetime_s: u64,
    /// How long a change takes to reach every server of the zone.
    #[serde(default = "default_propagation")]
    pub propagation_delay_s: u64,
    /// Servers of the parent zone, asked for the zone's DS records during
    /// a KSK rollover; none: a submitted key waits (confirming by hand is not built yet).
    #[serde(default)]
    pub parent: Vec<std::net::SocketAddr>,
    /// The parent's DS TTL (waited after the new DS appears).
    #[serde(default = "default_ds_ttl")]
    pub parent_ds_ttl_s: u64,
    /// How often the parent is asked while a DS change is pending.
    #[serde(default = "default_check_interval")]
    pub parent_check_interval_s: u64,
}

fn default_zsk_lifetime() -> u64 {
    30 * 86_400
}
fn default_propagation() -> u64 {
    3_600
}
fn default_ds_ttl() -> u64 {
    86_400
}
fn default_check_interval() -> u64 {
    3_600
}

fn default_signing_algorithm() -> String {
    "ecdsap256sha256".into()
}
fn default_keys() -> String {
    "csk".into()
}
fn default_validity() -> u32 {
    14 * 86_400
}
fn default_refresh() -> u32 {
    7 * 86_400
}
fn default_denial() -> String {
    "nsec".into()
}

impl DnssecPolicyConfig {
    /// The policy every zone may name without declaring it.
    pub fn builtin_default() -> DnssecPolicyConfig {
        DnssecPolicyConfig {
            name: "default".into(),
            algorithm: default_signing_algorithm(),
            keys: default_keys(),
            signature_validity_s: default_validity(),
            signature_refresh_s: default_refresh(),
            denial: default_denial(),
            zsk_lifetime_s: default_zsk_lifetime(),
            ksk_lifetime_s: 0,
            propagation_delay_s: default_propagation(),
            parent: Vec::new(),
            parent_ds_ttl_s: default_ds_ttl(),
            parent_check_interval_s: default_check_interval(),
        }
    }
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

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AnycastConfig {
    /// The TUN device xdpdns creates and holds; the routing daemon
    /// exports its addresses (BIRD: `protocol direct`).
    pub interface: String,
    /// The service addresses, announced as these prefixes.
    pub addresses: Vec<IpNet>,
    /// A name and type in a served zone, e.g. `"example.com. SOA"`.
    pub check_name: String,
    #[serde(default = "default_interval")]
    pub check_interval_ms: u64,
    /// Failing checks in a row before withdrawing.
    #[serde(default = "default_count")]
    pub fall: u32,
    /// Passing checks in a row before announcing.
    #[serde(default = "default_count")]
    pub rise: u32,
    /// SIGTERM: withdrawn this long before the server stops.
    #[serde(default = "default_drain")]
    pub drain_ms: u64,
    /// Hold-down after a second withdrawal in a row of flaps, doubling
    /// with each further one up to `hold_down_max_ms`.
    #[serde(default = "default_hold")]
    pub hold_down_ms: u64,
    #[serde(default = "default_hold_max")]
    pub hold_down_max_ms: u64,
    /// Announced this long, a node's flap count starts again.
    #[serde(default = "default_hold_max")]
    pub flap_reset_ms: u64,
    /// Run (by `sh -c`) after announcing / withdrawing, for routing
    /// daemons that do not watch interfaces (FRR, ExaBGP, GoBGP).
    #[serde(default)]
    pub announce_command: Option<String>,
    #[serde(default)]
    pub withdraw_command: Option<String>,
}

fn default_interval() -> u64 {
    1000
}
fn default_count() -> u32 {
    3
}
fn default_drain() -> u64 {
    2000
}
fn default_hold() -> u64 {
    10_000
}
fn default_hold_max() -> u64 {
    300_000
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TransferConfig {
    /// IXFR journal and secondary zone copies; relative to the config
    /// file. Absent = kept in memory only (IXFR history and secondary
    /// zones are lost on restart).
    pub data_dir: Option<PathBuf>,
    /// Serials of zones xdpdns owns: "increment" or "unixtime".
    pub serial_policy: SerialPolicy,
    /// Default transfer ACL (zones may override with `allow_transfer`).
    pub allow_transfer: Vec<AclRule>,
    pub journal: JournalLimits,
    /// NOTIFY: attempts per serial and the first retry delay (doubling).
    pub notify_retries: u32,
    pub notify_timeout_ms: u64,
    /// After a NOTIFY, how often and how long each secondary's SOA is
    /// polled until it serves the new serial.
    pub poll_interval_ms: u64,
    pub poll_timeout_secs: u64,
    /// Secondary zones: timeout of each query/transfer to a primary.
    pub primary_timeout_ms: u64,
    /// Outgoing transfers (AXFR/IXFR served) at once; more are REFUSED
    /// (BIND's `transfers-out`).
    pub max_transfers_out: usize,
    /// Incoming transfers (secondary zones refreshing) at once; more wait
    /// (BIND's `transfers-in`).
    pub max_transfers_in: usize,
    /// Records one incoming transfer may carry; a larger one is abandoned
    /// and the zone keeps what it served (BIND's `max-records`).
    pub max_transfer_in_records: usize,
}

impl Default for TransferConfig {
    fn default() -> Self {
        TransferConfig {
            data_dir: None,
            serial_policy: SerialPolicy::default(),
            allow_transfer: vec![AclRule {
                from: vec![
                    "127.0.0.0/8".parse().expect("prefix"),
                    "::1/128".parse().expect("prefix"),
                ],
                key: None,
            }],
            journal: JournalLimits::default(),
            notify_retries: 5,
            notify_timeout_ms: 1_000,
            poll_interval_ms: 500,
            poll_timeout_secs: 300,
            primary_timeout_ms: 10_000,
            max_transfers_out: crate::transfer::MAX_TRANSFERS_OUT,
            max_transfers_in: 10,
            max_transfer_in_records: 10_000_000,
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TsigKeyConfig {
    pub name: String,
    #[serde(default = "default_algorithm")]
    pub algorithm: String,
    /// Base64 secret (as `tsig-keygen` and `keymgr` print it).
    pub secret: String,
}

fn default_algorithm() -> String {
    "hmac-sha256".into()
}

/// One `[[update_grant]]`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct UpdateGrantConfig {
    /// The `[[tsig_key]]` requests must be signed with; absent: unsigned
    /// requests, from `from` only.
    #[serde(default)]
    pub key: Option<String>,
    /// Source prefixes; empty: any (then `key` is required).
    #[serde(default)]
    pub from: Vec<IpNet>,
    /// Zones (file zones); empty: every file zone.
    #[serde(default)]
    pub zones: Vec<String>,
    /// Which names: `zone` (all), `name` (exactly `name`), `subdomain`
    /// (`name` and below), `wildcard` (`name` is a pattern whose `*`
    /// labels match any one label).
    #[serde(default, rename = "match")]
    pub match_kind: MatchKind,
    #[serde(default)]
    pub name: Option<String>,
    /// Types (`ANY`, or absent: every type but SOA).
    #[serde(default)]
    pub types: Vec<String>,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum MatchKind {
    #[default]
    Zone,
    Name,
    Subdomain,
    Wildcard,
}

/// `[update]`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct UpdateConfig {
    /// Write a zone's updates back to its file once it has been quiet this
    /// long (and at a clean stop); 0: never (the journal keeps them, and
    /// edits of the file are applied as differences).
    pub file_sync_ms: u64,
}

impl Default for UpdateConfig {
    fn default() -> Self {
        UpdateConfig {
            file_sync_ms: 10_000,
        }
    }
}

/// `[catalog]`: the catalog zone xdpdns produces.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CatalogConfig {
    /// The catalog zone's name (e.g. `catalog.invalid`).
    pub zone: String,
    /// The `group` property of every member (RFC 9432 §4.4.2).
    #[serde(default)]
    pub group: Option<String>,
    /// The catalog's consumers: NOTIFYed for the catalog and for every
    /// member zone.
    #[serde(default)]
    pub notify: Vec<SocketAddr>,
    #[serde(default)]
    pub notify_key: Option<String>,
    /// Who may transfer the catalog; default: `transfer.allow_transfer`.
    #[serde(default)]
    pub allow_transfer: Option<Vec<AclRule>>,
}
