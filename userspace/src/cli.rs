//! The command line, as clap derives it: nothing but clap and std, so the
//! man page generator (`cargo xtask docs`) includes this same file and
//! `xdpdns(8)` cannot drift from `--help`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "xdpdns",
    version,
    about = "Authoritative DNS server for service discovery",
    long_about = "Authoritative DNS server for service discovery. Answers from zone files \
                  and live service registrations (HTTP API) over UDP and TCP; hot A/AAAA \
                  queries are answered in the kernel by an XDP program when one is attached."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Serve the configured zones until SIGTERM; SIGHUP reloads config and zones.
    Serve {
        /// TOML configuration file (see examples/xdpdns.toml).
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
        /// Once serving, write the bound addresses here as JSON
        /// (`{"dns":["ADDR:PORT",…],"api":"ADDR:PORT"|null}`, written whole
        /// by rename): a readiness signal for supervisors and tests.
        #[arg(long, value_name = "FILE")]
        ready_file: Option<PathBuf>,
    },
    /// Validate a configuration file and every zone it names; exit 1 on error.
    CheckConfig {
        #[arg(value_name = "FILE")]
        config: PathBuf,
    },
    /// Attach a pass-everything XDP program to INTERFACE (native mode) until
    /// SIGINT/SIGTERM. The peer of a veth pair needs one for native-mode
    /// XDP_TX replies to arrive (tests and benchmarks use it).
    XdpPass {
        #[arg(value_name = "INTERFACE")]
        interface: String,
    },
    /// Attach the benchmark floor to INTERFACE until SIGINT/SIGTERM: an XDP
    /// program that bounces every IPv4 UDP/53 packet back with QR set and no
    /// lookup (the least any in-kernel responder can cost).
    XdpReflect {
        #[arg(value_name = "INTERFACE")]
        interface: String,
        /// driver or generic
        #[arg(long, default_value = "generic")]
        mode: String,
    },
    /// Answer every UDP datagram at ADDR with itself, QR set, through the
    /// fallback's own sockets and worker loop and no DNS work (the least
    /// any socket server can cost on this host; benchmarks use it).
    UdpReflect {
        #[arg(value_name = "ADDR")]
        listen: std::net::SocketAddr,
        /// As the fallback's `server.udp_coalesce_us` (default: its default).
        #[arg(long, value_name = "MICROSECONDS")]
        coalesce_us: Option<u64>,
    },
    /// Register this instance with a registry API and keep it registered
    /// (the Registrar role): heartbeats, an optional health-check command
    /// (down after `fall` failures, up after `rise` successes), and
    /// deregistration on SIGTERM. See examples/agent.toml.
    Register {
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
    },
    /// Repair a registry journal that the server refuses to start with
    /// (damage before its end): keep every batch before the damaged record,
    /// move the rest aside to `registry.journal.damaged-OFFSET`, and say
    /// what was kept and set aside. Run it with the server stopped.
    RegistryRepair {
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
    },
    /// Ask the running server what it is doing, over its control socket
    /// (`[control] socket`; root, the server's user or `control.group`).
    Ctl {
        /// The server's configuration (for the socket's path).
        #[arg(
            short,
            long,
            value_name = "FILE",
            global = true,
            default_value = "/etc/xdpdns/xdpdns.toml"
        )]
        config: PathBuf,
        /// Print the reply as JSON (one object per line for `top`).
        #[arg(long, global = true)]
        json: bool,
        #[command(subcommand)]
        command: CtlCommand,
    },
    /// Parse and check one zone file, like named-checkzone; exit 1 on error.
    CheckZone {
        /// Master file (RFC 1035 format).
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Zone origin, e.g. example.com.
        #[arg(value_name = "ORIGIN")]
        origin: String,
    },
}

#[derive(Subcommand)]
pub enum CtlCommand {
    /// Version, uptime, XDP attachment and table, answers so far, zones.
    Status,
    /// Every zone: serial, records, source, signed, expiry, last load.
    Zones,
    /// Zone actions.
    Zone {
        #[command(subcommand)]
        action: ZoneAction,
    },
    /// Each secondary's propagation state (NOTIFY, polls, lag); exit 1 if
    /// any is out of sync.
    Secondaries,
    /// Registered instances by status, services, pending withdrawals.
    Registry,
    /// The keys of a zone signed online, with the DS for its parent.
    Keys {
        #[arg(value_name = "ZONE")]
        zone: String,
        /// Say that the parent now serves the DS of the submitted key
        /// TAG (for a zone whose policy names no `parent` to ask): its
        /// rollover goes on once the DS TTL has passed.
        #[arg(long, value_name = "TAG")]
        ds_published: Option<u16>,
    },
    /// Withdraw the anycast addresses ([anycast]); returns once the drain
    /// time has passed.
    Drain,
    /// Announce them again after `rise` passing self-checks.
    Resume,
    /// Live answers per second (kernel, fallback, by RCODE), one line per
    /// interval until interrupted or `--count` lines.
    Top {
        /// Seconds between lines.
        #[arg(long, default_value_t = 1.0)]
        interval: f64,
        #[arg(long)]
        count: Option<u64>,
    },
}

#[derive(Subcommand)]
pub enum ZoneAction {
    /// Read a zone file again (a secondary zone: ask its primaries now).
    Reload {
        #[arg(value_name = "ZONE")]
        zone: String,
    },
    /// Add a primary zone at runtime: with an SOA and NS records from
    /// `--ns` (and `--hostmaster`), or from a zone file (`--file`).
    /// Returns once it is served and durable.
    Add {
        #[arg(value_name = "ZONE")]
        zone: String,
        /// Its name servers (the first is the SOA's MNAME).
        #[arg(long)]
        ns: Vec<String>,
        /// The SOA's RNAME (default hostmaster.ZONE).
        #[arg(long)]
        hostmaster: Option<String>,
        /// A zone file to create it from.
        #[arg(long, value_name = "PATH")]
        file: Option<std::path::PathBuf>,
        /// Sign it online with this `[[dnssec_policy]]` ("default": the
        /// built-in one).
        #[arg(long, value_name = "POLICY")]
        dnssec_policy: Option<String>,
    },
    /// Remove a zone added at runtime.
    Remove {
        #[arg(value_name = "ZONE")]
        zone: String,
    },
}
