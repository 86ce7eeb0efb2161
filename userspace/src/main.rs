//! The `xdpdns` binary: one program, several subcommands.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use hickory_proto::rr::Name;
use std::str::FromStr;

use xdpdns::config::{Config, LogConfig, LogFormat};
use xdpdns::serve::{load_zones, serve};
use xdpdns::zone::load_zone_file;

#[derive(Parser)]
#[command(
    name = "xdpdns",
    version,
    about = "Authoritative DNS server for service discovery",
    long_about = "Authoritative DNS server for service discovery. Answers from zone files \
                  and live service registrations (HTTP API) over UDP and TCP; hot A/AAAA \
                  queries are answered in the kernel by an XDP program when one is attached."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
    /// Print how far each secondary has got with each zone (NOTIFY out and
    /// SOA polling), as the running server last recorded it under
    /// `transfer.data_dir`. Exit 1 if any secondary is out of sync.
    TransferStatus {
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
        /// Print the raw JSON.
        #[arg(long)]
        json: bool,
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

/// What `--version` prints: the package version, the git commit it was
/// built from, and the SHA-256 of the embedded XDP object (which two
/// builds share exactly when they load the same kernel program).
fn long_version() -> String {
    format!(
        "{} (commit {}, eBPF object sha256 {})",
        env!("CARGO_PKG_VERSION"),
        env!("XDPDNS_GIT_COMMIT"),
        xdpdns::xdp::loader::object_sha256()
    )
}

fn main() -> ExitCode {
    // Computed at run time (the object's hash), once: leaked for clap.
    let version: &'static str = Box::leak(long_version().into_boxed_str());
    let command = Cli::command().version(version);
    let cli = match Cli::from_arg_matches(&command.get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let result = match cli.command {
        Command::Serve { config, ready_file } => run_serve(config, ready_file),
        Command::CheckConfig { config } => check_config(config),
        Command::CheckZone { file, origin } => check_zone(file, &origin),
        Command::TransferStatus { config, json } => transfer_status(config, json),
        Command::RegistryRepair { config } => registry_repair(config),
        Command::Register { config } => run_agent(config),
        Command::XdpPass { interface } => hold(&interface, "xdp_pass", "driver"),
        Command::XdpReflect { interface, mode } => hold(&interface, "xdp_reflect", &mode),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xdpdns: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr at `level`; RUST_LOG overrides. Text has colour only
/// on a terminal (a file or a journal gets plain lines); JSON is one
/// object per line (`timestamp`, `level`, `target`, `fields`).
fn init_logging(log: &LogConfig) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&log.level));
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match log.format {
        LogFormat::Text => fmt
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => fmt.json().with_ansi(false).init(),
    }
}

fn run_serve(config: PathBuf, ready_file: Option<PathBuf>) -> anyhow::Result<()> {
    // Parse once up front so logging uses the configured level.
    init_logging(&Config::load(&config)?.log);
    raise_open_file_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve(config, ready_file))
}

/// DNS over TCP, the API and transfers all hold sockets: the soft limit
/// on open files (often 1,024) goes up to the hard one, as NSD and Knot
/// do, so the configured connection caps are what limits them.
fn raise_open_file_limit() {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on a local struct.
    let raised = unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && {
            l.rlim_cur = if l.rlim_max == libc::RLIM_INFINITY {
                1 << 20
            } else {
                l.rlim_max
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &l) == 0
        }
    };
    if !raised {
        tracing::warn!(
            "cannot raise the open-file limit: {}",
            std::io::Error::last_os_error()
        );
    }
}

fn run_agent(config: PathBuf) -> anyhow::Result<()> {
    let config = xdpdns::agent::AgentConfig::load(&config)?;
    init_logging(&LogConfig::default());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(xdpdns::agent::run(config))
}

fn registry_repair(config: PathBuf) -> anyhow::Result<()> {
    let config = Config::load(&config)?;
    let Some(rc) = &config.registry else {
        anyhow::bail!("{}: no [registry] configured", config.file.display());
    };
    println!("{}", xdpdns::registry::journal::repair(&rc.data_dir)?);
    Ok(())
}

fn transfer_status(config: PathBuf, json: bool) -> anyhow::Result<()> {
    use xdpdns::transfer::notify::PeerStatus;
    let config = Config::load(&config)?;
    let Some(dir) = &config.transfer.data_dir else {
        anyhow::bail!(
            "{}: transfer.data_dir is not set, so no status is recorded",
            config.file.display()
        );
    };
    let path = dir.join(xdpdns::serve::STATUS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            println!(
                "no secondaries notified yet ({} does not exist)",
                path.display()
            );
            return Ok(());
        }
        Err(e) => anyhow::bail!("{}: {e}", path.display()),
    };
    let peers: Vec<PeerStatus> =
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if json {
        println!("{text}");
    } else {
        println!(
            "{:<28} {:<24} {:>10} {:>10} {:>10} {:>8} {:>9}  last error",
            "zone", "secondary", "serial", "notified", "seen", "in sync", "lag ms"
        );
        let opt = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
        for p in &peers {
            println!(
                "{:<28} {:<24} {:>10} {:>10} {:>10} {:>8} {:>9}  {}",
                p.zone,
                p.secondary,
                opt(p.serial),
                opt(p.notified),
                opt(p.serial_seen),
                if p.in_sync { "yes" } else { "NO" },
                p.lag_ms.map_or("-".into(), |l| l.to_string()),
                p.last_error.as_deref().unwrap_or(""),
            );
        }
    }
    if peers.iter().any(|p| !p.in_sync) {
        anyhow::bail!("some secondaries are not in sync");
    }
    Ok(())
}

fn check_config(path: PathBuf) -> anyhow::Result<()> {
    let config = Config::load(&path)?;
    let (zones, failed) = load_zones(&config.zones);
    for z in &zones {
        println!(
            "zone {}: serial {}, {} records",
            z.origin(),
            z.serial().unwrap_or(0),
            z.record_count()
        );
    }
    if let Some((_, e)) = failed.first() {
        for (_, e) in &failed[1..] {
            eprintln!("xdpdns: {e}");
        }
        anyhow::bail!("{e}");
    }
    println!("{}: OK", path.display());
    Ok(())
}

fn check_zone(file: PathBuf, origin: &str) -> anyhow::Result<()> {
    let mut origin = Name::from_str(origin)
        .map_err(|e| anyhow::anyhow!("ORIGIN {origin:?} is not a domain name: {e}"))?;
    origin.set_fqdn(true);
    let zone = load_zone_file(&file, &origin)?;
    println!(
        "zone {}: loaded serial {}, {} records",
        zone.origin(),
        zone.serial().unwrap_or(0),
        zone.record_count()
    );
    println!("OK");
    Ok(())
}

/// Holds a helper XDP program on `interface` until SIGTERM/SIGINT.
fn hold(interface: &str, program: &'static str, mode: &str) -> anyhow::Result<()> {
    let mode = match mode {
        "driver" => xdpdns::xdp::AttachMode::Driver,
        "generic" => xdpdns::xdp::AttachMode::Generic,
        other => anyhow::bail!("--mode {other:?}: expected driver or generic"),
    };
    let _attached = xdpdns::xdp::attach_helper_program(interface, program, mode)?;
    println!("{program} attached to {interface}");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        anyhow::Ok(())
    })
}
