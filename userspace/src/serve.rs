//! `xdpdns serve`: load config and zones, bind sockets, answer until
//! SIGTERM, reload on SIGHUP.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use hickory_proto::rr::{LowerName, Name};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;
use tracing::{error, info, warn};

use std::sync::Mutex;

use crate::config::{Config, ZoneConfig};
use crate::handler::Handler;
use crate::server::{bind_address, run_udp, Shared, TcpServer};
use crate::transfer::notify::{self, Notifier, NotifySettings};
use crate::transfer::{secondary, IxfrJournal};
use crate::xdp::{compile, compile_diffs, FastPath, XdpError};
use crate::zone::{load_zone_file, LoadError, Zone, ZoneStore};

pub fn handler_for(config: &Config) -> Handler {
    Handler {
        edns: config.server_edns(),
        identity: config.identity(),
    }
}

/// Loads every configured zone, in parallel-free order; returns the zones
/// that loaded and the errors of those that did not.
pub fn load_zones(zones: &[ZoneConfig]) -> (Vec<Zone>, Vec<(Name, LoadError)>) {
    let mut ok = Vec::new();
    let mut failed = Vec::new();
    // Secondary zones (no file) come from their primaries.
    for z in zones {
        let origin = z.origin_name();
        let Some(file) = &z.file else { continue };
        match load_zone_file(file, &origin) {
            Ok(zone) => ok.push(zone),
            Err(e) => failed.push((origin, e)),
        }
    }
    (ok, failed)
}

pub async fn serve(config_path: PathBuf) -> anyhow::Result<()> {
    // Handlers first: a signal that arrives while zones load must not take
    // its default action (which ends the process).
    let mut hup = signal(SignalKind::hangup())?;
    let mut usr1 = signal(SignalKind::user_defined1())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let config = Config::load(&config_path)?;
    let (zones, failed) = load_zones(&config.zones);
    if let Some((_, e)) = failed.first() {
        bail!("{e}");
    }
    for z in &zones {
        info!(zone = %z.origin(), serial = z.serial(), records = z.record_count(), "zone loaded");
    }
    let (journal, recovered) = open_journal(&config)?;
    let store = ZoneStore::new();
    store.set_serial_policy(config.transfer.serial_policy);
    // What was served before a restart comes back first: secondary zones
    // are served before their primaries answer, and the journal's history
    // continues from it.
    store.restore_zones(recovered);
    secondary::expire_stale_copies(
        &store,
        &config.secondary_zones(),
        secondary_dir(&config).as_deref(),
    );
    let shared = Arc::new(Shared {
        journal: Arc::new(journal),
        ..Shared::new(store, handler_for(&config))
    });
    shared.transfer.store(Arc::new(config.transfer_policy()?));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = Vec::new();
    let notifier = start_notify(&config, &shared, stop_rx.clone(), &mut tasks);
    shared.store.replace_zones(zones, &[]);
    let mut bound_addrs = Vec::new();
    for &addr in &config.server.listen {
        let (udp, listener, bound) = bind_address(addr, &config.server).with_context(|| {
            format!(
                "{}: server.listen: cannot bind {addr}",
                config.file.display()
            )
        })?;
        info!(addr = %bound, udp_sockets = udp.len(), "listening (udp+tcp)");
        bound_addrs.push(bound);
        for sock in udp {
            tasks.push(tokio::spawn(run_udp(sock, shared.clone(), stop_rx.clone())));
        }
        let tcp = TcpServer {
            listener,
            max_connections: config.server.tcp_max_connections,
            idle_timeout: config.server.tcp_idle_timeout(),
            max_pipelined: config.server.tcp_max_pipelined,
            shutdown_grace: config.server.shutdown_grace(),
        };
        tasks.push(tokio::spawn(tcp.run(shared.clone(), stop_rx.clone())));
    }
    let port = shared_port(&bound_addrs);
    let fast = Arc::new(Mutex::new(start_fast_path(&config, port, &shared)));
    if let Some(rc) = &config.registry {
        let api = start_registry(&config, rc, &shared, &fast, stop_rx.clone()).await?;
        tasks.extend(api);
    }
    start_secondaries(&config, &shared, &fast, stop_rx.clone(), &mut tasks);
    notifier.announce_all(&shared.store.snapshot());
    info!("ready");

    let mut current = config;
    loop {
        tokio::select! {
            _ = hup.recv() => {
                let path = config_path.clone();
                let old = current.clone();
                let sh = shared.clone();
                let fp = fast.clone();
                match tokio::task::spawn_blocking(move || reload(&path, &old, &sh, &fp)).await? {
                    Some(next) => current = next,
                    None => warn!("reload failed; still serving the previous configuration"),
                }
            }
            _ = usr1.recv() => log_counters(&fast),
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    log_counters(&fast);
    if fast
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .is_some()
    {
        info!("XDP program detached");
    }
    info!("shutting down: draining connections");
    let _ = stop_tx.send(true);
    for t in tasks {
        let _ = t.await;
    }
    info!("stopped");
    Ok(())
}

/// The IXFR journal: on disk under `transfer.data_dir`, with every zone it
/// recovered that is still configured.
fn open_journal(config: &Config) -> anyhow::Result<(IxfrJournal, Vec<Zone>)> {
    let limits = config.transfer.journal;
    let Some(dir) = &config.transfer.data_dir else {
        info!(
            "transfer.data_dir not set: the IXFR journal and secondary zones live in memory only"
        );
        return Ok((IxfrJournal::in_memory(limits), Vec::new()));
    };
    let (journal, recovered) = IxfrJournal::open(&dir.join("journal"), limits)
        .with_context(|| format!("{}: transfer.data_dir", config.file.display()))?;
    let known = configured_origins(config);
    let keep = recovered
        .into_iter()
        .filter(|z| known.contains_key(z.origin_key()))
        .collect();
    Ok((journal, keep))
}

/// Every zone the config serves: files, secondaries and registry zones.
fn configured_origins(config: &Config) -> HashMap<LowerName, ()> {
    let registry_zones = config
        .naming()
        .ok()
        .flatten()
        .map(|n| n.zones.into_iter().map(|z| z.name).collect::<Vec<_>>())
        .unwrap_or_default();
    config
        .zones
        .iter()
        .map(|z| z.origin_name())
        .chain(registry_zones)
        .map(|n| (LowerName::new(&n), ()))
        .collect()
}

/// Starts NOTIFY out and hooks the journal and the notifier to every
/// publish of the store.
fn start_notify(
    config: &Config,
    shared: &Arc<Shared>,
    stop: watch::Receiver<bool>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Arc<Notifier> {
    let t = &config.transfer;
    let settings = NotifySettings {
        retries: t.notify_retries,
        timeout: t.notify_timeout(),
        poll_interval: t.poll_interval(),
        poll_timeout: t.poll_timeout(),
    };
    let status_file = t.data_dir.as_ref().map(|d| d.join(STATUS_FILE));
    if let Some(d) = &t.data_dir {
        let _ = std::fs::create_dir_all(d);
    }
    let (notifier, _propagation, started) =
        notify::start(config.notify_targets(), settings, status_file, stop);
    tasks.extend(started);
    let notifier = Arc::new(notifier);
    let (journal, n) = (shared.journal.clone(), notifier.clone());
    shared.store.set_observer(Box::new(move |snapshot, diffs| {
        journal.record(snapshot, diffs, crate::clock::unix_secs());
        n.published(snapshot, diffs);
    }));
    notifier
}

/// Where the propagation state is written, under `transfer.data_dir`.
pub const STATUS_FILE: &str = "transfer-status.json";

fn secondary_dir(config: &Config) -> Option<std::path::PathBuf> {
    config
        .transfer
        .data_dir
        .as_ref()
        .map(|d| d.join("secondary"))
}

/// Starts the refresh task of every secondary zone.
fn start_secondaries(
    config: &Config,
    shared: &Arc<Shared>,
    fast: &Arc<Mutex<Option<FastPath>>>,
    stop: watch::Receiver<bool>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) {
    let zones = config.secondary_zones();
    if zones.is_empty() {
        return;
    }
    let state_dir = secondary_dir(config);
    if let Some(d) = &state_dir {
        let _ = std::fs::create_dir_all(d);
    }
    let (sh, fp) = (shared.clone(), fast.clone());
    let on_change: secondary::OnChange = Arc::new(move |diffs| {
        if let Some(f) = fp.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            let result = match diffs {
                Some(d) => sync_table(f, &sh, d),
                None => rebuild_table(f, &sh),
            };
            if let Err(e) = result {
                error!("secondary: XDP table update failed ({e}); the kernel passes every query to the fallback until the next update succeeds");
            }
        }
    });
    let store: Arc<dyn AsRef<ZoneStore> + Send + Sync> = shared.clone();
    let (tx, started) = secondary::start(
        secondary::Secondaries {
            zones,
            store,
            on_change,
            state_dir,
            timeout: config.transfer.primary_timeout(),
        },
        stop,
    );
    let _ = shared.notify_tx.set(tx);
    tasks.extend(started);
}

/// Starts the registry (recovering it from disk and publishing its zones)
/// and its HTTP API. Registry changes reach the XDP table like reloads do.
async fn start_registry(
    config: &Config,
    rc: &crate::config::RegistryConfig,
    shared: &Arc<Shared>,
    fast: &Arc<Mutex<Option<FastPath>>>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let token = crate::config::read_token(&rc.token, &rc.token_file, "registry.token")
        .map_err(|e| anyhow::anyhow!("{}: {e}", config.file.display()))?;
    let naming = config.naming()?.expect("registry configured");
    let (sh, fp) = (shared.clone(), fast.clone());
    let on_publish = Box::new(move |diffs: &[crate::zone::ZoneDiff]| {
        if let Some(f) = fp.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            if let Err(e) = sync_table(f, &sh, diffs) {
                error!("registry: XDP table update failed ({e}); the kernel passes every query to the fallback until the next update succeeds");
            }
        }
    });
    let store: Arc<dyn AsRef<ZoneStore> + Send + Sync> = shared.clone();
    let started = crate::registry::service::start(
        &rc.data_dir,
        naming,
        rc.health,
        std::time::Duration::from_millis(rc.batch_delay_ms),
        store.clone(),
        on_publish,
        stop.clone(),
    )
    .with_context(|| format!("{}: registry.data_dir", config.file.display()))?;
    let listener = crate::api::bind(rc.listen).await.with_context(|| {
        format!(
            "{}: registry.listen: cannot bind {}",
            config.file.display(),
            rc.listen
        )
    })?;
    let api_addr = listener.local_addr()?;
    info!(%api_addr, instances = started.recovered_instances, "registry API listening");
    let state = crate::api::ApiState {
        registry: started.handle,
        store,
        token: token.into(),
        public_reads: rc.public_reads,
    };
    let api = tokio::spawn(async move {
        if let Err(e) = crate::api::serve(listener, state, stop).await {
            error!("registry API stopped: {e}");
        }
    });
    Ok(vec![api, started.task])
}

/// SIGHUP: re-read the config and every zone into one new snapshot. A zone
/// that fails to load keeps serving its previous version; a config that
/// fails to parse changes nothing. Returns the config now in force.
pub fn reload(
    path: &Path,
    old: &Config,
    shared: &Shared,
    fast: &Mutex<Option<FastPath>>,
) -> Option<Config> {
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => {
            error!("reload: {e}");
            return None;
        }
    };
    if config.server.listen != old.server.listen {
        warn!("reload: server.listen changed; restart to apply it");
    }
    let (zones, failed) = load_zones(&config.zones);
    for (origin, e) in &failed {
        error!(zone = %origin, "reload: {e}; keeping the previous version");
    }
    // Registry zones are the registry's; a reload leaves them alone (their
    // set changes with a restart).
    let registry_zones = old
        .naming()
        .ok()
        .flatten()
        .map(|n| n.zones.into_iter().map(|z| z.name).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut configured = configured_origins(&config);
    configured.extend(registry_zones.iter().map(|n| (LowerName::new(n), ())));
    match config.transfer_policy() {
        Ok(p) => shared.transfer.store(Arc::new(p)),
        Err(e) => error!("reload: {e}"),
    }
    let removed: Vec<Name> = shared
        .store
        .snapshot()
        .zones()
        .filter(|z| !configured.contains_key(z.origin_key()))
        .map(|z| z.origin().clone())
        .collect();
    shared.handler.store(Arc::new(handler_for(&config)));
    let diffs = shared.store.replace_zones(zones, &removed);
    for d in &diffs {
        info!(zone = %d.origin, old_serial = d.old_serial, new_serial = d.new_serial,
              removed = d.removed.len(), added = d.added.len(), "zone changed");
    }
    if let Some(fp) = fast.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        // The payload size is config, set here once; the registry's and the
        // secondaries' syncs leave it alone.
        let result = fp
            .set_udp_payload(config.server.udp_payload)
            .and_then(|()| sync_table(fp, shared, &diffs));
        if let Err(e) = result {
            error!("reload: XDP table update failed ({e}); the kernel passes every query to the fallback until a reload succeeds");
        }
    }
    info!(changed = diffs.len(), failed = failed.len(), "reload done");
    Some(config)
}

/// Changes up to this many records are compiled from the diff alone;
/// larger ones recompile the whole table (either way the kernel switches
/// generations once).
const SMALL_DIFF: usize = 1_000;

fn shared_port(addrs: &[std::net::SocketAddr]) -> u16 {
    addrs.first().map_or(0, |a| a.port())
}

/// Loads, fills and attaches the XDP program, or says in one line why the
/// server runs on the fallback alone.
fn start_fast_path(config: &Config, port: u16, shared: &Shared) -> Option<FastPath> {
    let x = &config.xdp;
    if x.interfaces.is_empty() {
        info!("XDP fast path off (no [xdp] interfaces configured): every query is answered by the fallback server");
        return None;
    }
    let attempt = || -> Result<FastPath, XdpError> {
        let mut fp = FastPath::load(x.capacity, port, config.server.udp_payload)?;
        let (table, skipped) = compile(&shared.store.snapshot());
        info!(entries = table.len(), ?skipped, "XDP answer table compiled");
        fp.install(table)?;
        for iface in &x.interfaces {
            let mode = fp.attach(iface, x.mode)?;
            info!(interface = %iface, mode = %mode, port, "XDP fast path attached");
        }
        Ok(fp)
    };
    match attempt() {
        Ok(fp) => Some(fp),
        Err(e) => {
            warn!("XDP fast path unavailable, serving through the fallback only: {e}");
            None
        }
    }
}

/// Brings the kernel table in line with the store after `diffs`.
fn sync_table(
    fp: &mut FastPath,
    shared: &Shared,
    diffs: &[crate::zone::ZoneDiff],
) -> Result<(), XdpError> {
    let snapshot = shared.store.snapshot();
    let changed: usize = diffs.iter().map(|d| d.added.len() + d.removed.len()).sum();
    if changed <= SMALL_DIFF {
        let delta = compile_diffs(&snapshot, diffs, fp.installed());
        info!(
            upserts = delta.upsert.len(),
            deletes = delta.delete.len(),
            "XDP table updated in place"
        );
        fp.apply(&delta)
    } else {
        let (table, _) = compile(&snapshot);
        let entries = table.len();
        fp.install(table)?;
        info!(
            entries,
            generation = fp.generation(),
            "XDP table generation installed"
        );
        Ok(())
    }
}

/// Recompiles the whole kernel table (a zone expired or came back).
fn rebuild_table(fp: &mut FastPath, shared: &Shared) -> Result<(), XdpError> {
    let (table, _) = compile(&shared.store.snapshot());
    let entries = table.len();
    fp.install(table)?;
    info!(entries, generation = fp.generation(), "XDP table rebuilt");
    Ok(())
}

fn log_counters(fast: &Mutex<Option<FastPath>>) {
    if let Some(fp) = fast.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
        match fp.counters() {
            Ok(c) => info!("xdp counters {c}"),
            Err(e) => warn!("xdp counters unreadable: {e}"),
        }
    }
}
