//! The `xdpdns` binary: one program, several subcommands.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};
use hickory_proto::rr::Name;
use std::str::FromStr;

mod cli;

use cli::{Cli, Command, CtlCommand, ZoneAction};
use xdpdns::config::{Config, LogConfig, LogFormat};
use xdpdns::serve::{load_zones, serve};
use xdpdns::zone::load_zone_file_with_warnings;

/// What `--version` prints: the package version, the git commit it was
/// built from, and the SHA-256 of the embedded XDP object (which two
/// builds share exactly when they load the same kernel program).
fn long_version() -> String {
    format!(
        "{} (commit {}, eBPF object sha256 {})",
        env!("CARGO_PKG_VERSION"),
        env!("XDPDNS_GIT_COMMIT"),
        xdpdns::xdp::object_sha256()
    )
}

/// The heap (see `xdpdns::memory`).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read at its first allocation: freed pages go
/// back to the system after a second (`dirty_decay_ms`), at once when
/// merely lazily freed (`muzzy_decay_ms`). A server purges from
/// background threads, started once it runs as its own user
/// (`xdpdns::memory::purge_in_background`).
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: &[u8; 37] = b"dirty_decay_ms:1000,muzzy_decay_ms:0\0";

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
        Command::Ctl {
            config,
            json,
            command,
        } => ctl(config, json, command),
        Command::RegistryRepair { config } => registry_repair(config),
        Command::Register { config } => run_agent(config),
        Command::XdpPass { interface } => hold(&interface, "xdp_pass", "driver"),
        Command::XdpReflect { interface, mode } => hold(&interface, "xdp_reflect", &mode),
        Command::UdpReflect {
            listen,
            coalesce_us,
        } => udp_reflect(listen, coalesce_us),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xdpdns: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// One reflecting worker per core on SO_REUSEPORT sockets at `listen`,
/// with the fallback's default buffers, until the process is stopped.
fn udp_reflect(listen: std::net::SocketAddr, coalesce_us: Option<u64>) -> anyhow::Result<()> {
    let defaults = xdpdns::config::ServerConfig::default();
    let buffers = xdpdns::sockets::Buffers::of(&defaults);
    let sockets = xdpdns::sockets::bind_udp(listen, defaults.udp_socket_count(), buffers)?;
    let coalesce = coalesce_us.map_or(defaults.udp_coalesce(), std::time::Duration::from_micros);
    let workers: Vec<_> = sockets
        .into_iter()
        .map(|s| std::thread::spawn(move || xdpdns::sockets::reflect_udp(s, coalesce)))
        .collect();
    for w in workers {
        w.join().expect("a reflecting worker panicked")?;
    }
    Ok(())
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

fn ctl(config: PathBuf, json: bool, command: CtlCommand) -> anyhow::Result<()> {
    use xdpdns::control::client::{self, Client};
    use xdpdns::control::protocol as p;
    use xdpdns::control::Request;
    let client = Client::new(&Config::control_socket_of(&config)?);
    let show = |request: &Request, text: &dyn Fn(serde_json::Value) -> anyhow::Result<String>| {
        let reply = client.raw(request)?;
        if json {
            println!("{reply}");
        } else {
            print!("{}", text(reply)?);
        }
        anyhow::Ok(())
    };
    fn parse<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> anyhow::Result<T> {
        Ok(serde_json::from_value(v)?)
    }
    match command {
        CtlCommand::Status => show(&Request::Status, &|v| Ok(client::status_text(&parse(v)?))),
        CtlCommand::Zones => show(&Request::Zones, &|v| {
            let zones: Vec<p::ZoneInfo> = parse(v)?;
            Ok(client::zones_text(&zones, xdpdns::clock::unix_secs()))
        }),
        CtlCommand::Zone {
            action: ZoneAction::Reload { zone },
        } => show(&Request::ZoneReload { zone }, &|v| {
            Ok(client::reloaded_text(&parse(v)?))
        }),
        CtlCommand::Zone {
            action:
                ZoneAction::Add {
                    zone,
                    ns,
                    hostmaster,
                    file,
                    dnssec_policy,
                },
        } => {
            let text = match &file {
                Some(f) => Some(
                    std::fs::read_to_string(f)
                        .map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?,
                ),
                None => None,
            };
            let request = Request::ZoneAdd {
                name: zone,
                ns,
                hostmaster,
                zone: text,
                dnssec_policy,
            };
            show(&request, &|v| {
                let z: xdpdns::dynamic::runtime::RuntimeZone = parse(v)?;
                Ok(format!("{} added\n", z.name))
            })
        }
        CtlCommand::Zone {
            action: ZoneAction::Remove { zone },
        } => show(&Request::ZoneRemove { zone }, &|v| {
            Ok(format!("{}\n", parse::<String>(v)?))
        }),
        CtlCommand::Keys { zone, ds_published } => {
            show(&Request::Keys { zone, ds_published }, &|v| {
                Ok(client::keys_text(&parse::<Vec<xdpdns::signing::KeyInfo>>(
                    v,
                )?))
            })
        }
        CtlCommand::Registry => show(&Request::Registry, &|v| {
            Ok(client::registry_text(&parse(v)?))
        }),
        CtlCommand::Drain => show(&Request::Drain, &|v| {
            Ok(format!("{}\n", parse::<String>(v)?))
        }),
        CtlCommand::Resume => show(&Request::Resume, &|v| {
            Ok(format!("{}\n", parse::<String>(v)?))
        }),
        CtlCommand::Secondaries => {
            let peers: p::Secondaries = client.get(&Request::Secondaries)?;
            if json {
                println!("{}", serde_json::to_string(&peers)?);
            } else {
                print!("{}", client::secondaries_text(&peers));
            }
            if peers.iter().any(|p| !p.in_sync) {
                anyhow::bail!("some secondaries are not in sync");
            }
            Ok(())
        }
        CtlCommand::Top { interval, count } => {
            let interval = std::time::Duration::from_secs_f64(interval.max(0.1));
            let mut before: p::Counters = client.get(&Request::Counters)?;
            let mut at = std::time::Instant::now();
            let mut lines = 0;
            while count.is_none_or(|c| lines < c) {
                std::thread::sleep(interval);
                let now: p::Counters = client.get(&Request::Counters)?;
                let rates = client::rates(&before, &now, at.elapsed().as_secs_f64());
                at = std::time::Instant::now();
                before = now;
                if json {
                    println!("{}", serde_json::to_string(&rates)?);
                } else {
                    print!("{}", client::rates_text(&rates));
                }
                use std::io::Write;
                std::io::stdout().flush()?;
                lines += 1;
            }
            Ok(())
        }
    }
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
    let (zone, warnings) = load_zone_file_with_warnings(&file, &origin)?;
    for w in &warnings {
        eprintln!("warning: {w}");
    }
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
