//! `xdpdns serve`: composition only. It builds the store, starts the
//! feed's subscribers (IXFR journal, NOTIFY, kernel table), then the
//! sources (zone files, registry, secondary zones) and the sockets, and
//! turns signals into reloads and a clean stop.
//!
//! ```text
//! sources                 commit path            feed subscribers
//! zone files (reload) ─┐                      ┌─► IXFR journal (thread) ─► NOTIFY
//! registry writer ─────┼─► ZoneStore::commit ─┼─► kernel table (xdp/subscriber)
//! secondary zones ─────┤   (one snapshot,     └─► …
//! journal recovery ────┘    one Commit event)
//! ```

pub mod images;
mod live;
mod metrics_http;
mod systemd;
mod zone_files;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use hickory_proto::rr::LowerName;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

pub use zone_files::{configured_origins, load_zones, reload};

use crate::answers::{compile, table_tag};
use crate::clock::unix_secs;
use crate::config::Config;
use crate::control::ControlSocket;
use crate::handler::Handler;
use crate::registry::service::RegistryHandle;
use crate::router::Router;
use crate::server::{bind_address, spawn_udp_worker, TcpServer};
use crate::transfer::journal_subscriber::{self, Journaled};
use crate::transfer::notify::Propagation;
use crate::transfer::notify::{self, Notifier, NotifySettings};
use crate::transfer::{secondary, IxfrJournal};
use crate::xdp::{Capacity, FastPath, KernelTable, PinDir, XdpError};
use crate::zone::serial::is_newer;
use crate::zone::{LoadLog, Zone, ZoneStore};
use live::Live;

/// The handler `config` asks for; `running` is the one it replaces (its
/// cookie secret is kept when no secret file is configured).
pub fn handler_for(config: &Config, running: Option<&Handler>) -> Handler {
    Handler {
        edns: config.server_edns(running.map(|h| &h.edns)),
        identity: config.identity(),
    }
}

/// Worker threads of the control runtime (API, NOTIFY, transfers in).
/// One: in interleaved runs of `cargo bench --bench registration` (4
/// each) two workers raised registration→answer p99 (median of runs:
/// sequential 1.8 → 4.5 ms, 8 writers 4.5 → 5.9 ms, during reloads
/// 8.3 → 9.7 ms); the second worker's wake-ups and steals cost more
/// than the API's parsing, which is small.
const CONTROL_THREADS: usize = 1;

/// Where the propagation state is written, under `transfer.data_dir`.
pub const STATUS_FILE: &str = "transfer-status.json";

/// How long the zone image writer waits after writing before it writes
/// the newest versions of what changed meanwhile.
const IMAGE_PAUSE: std::time::Duration = std::time::Duration::from_secs(1);

/// How long a stop waits for the last zone images to be written.
const IMAGE_FLUSH: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a stop waits for the IXFR journal to catch up with the store.
const JOURNAL_DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

pub async fn serve(config_path: PathBuf, ready_file: Option<PathBuf>) -> anyhow::Result<()> {
    // Handlers first: a signal that arrives while zones load must not take
    // its default action (which ends the process).
    let mut hup = signal(SignalKind::hangup())?;
    let mut usr1 = signal(SignalKind::user_defined1())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let config = Config::load(&config_path)?;
    let images_dir = images_dir(&config);
    let zone_files::StartLoad {
        parsed,
        imaged,
        failed,
        mut stale,
    } = zone_files::load_zones_at_start(&config, images_dir.as_deref());
    if let Some((_, e)) = failed.first() {
        bail!("{e}");
    }
    let loads = Arc::new(LoadLog::default());
    for z in parsed.iter().chain(&imaged) {
        info!(zone = %z.origin(), serial = z.serial(), records = z.record_count(), "zone loaded");
        zone_files::record_loaded(&loads, z);
    }
    // The journal decodes only the zones it has other versions of than
    // the images just read.
    let held = imaged
        .iter()
        .filter_map(|z| Some((z.origin_key().clone(), z.serial()?)))
        .collect();
    let (journal, mut recovered) = open_journal(&config, &held)?;
    // A zone both in an image and (at another serial) in the journal: the
    // newer serial wins. Usually the journal's (written at every commit,
    // the image after a pause); its file is then read again.
    let journal_newer = |z: &Zone| {
        recovered.iter().any(|r| {
            r.origin_key() == z.origin_key()
                && matches!((r.serial(), z.serial()), (Some(j), Some(i)) if is_newer(j, i))
        })
    };
    let (superseded, imaged): (Vec<Zone>, Vec<Zone>) = imaged.into_iter().partition(journal_newer);
    recovered.retain(|r| !imaged.iter().any(|z| z.origin_key() == r.origin_key()));
    for z in &superseded {
        warn!(zone = %z.origin(), "zone image is older than the journal; serving the journal's version");
        if let Some(zc) = config
            .zones
            .iter()
            .find(|c| c.file.is_some() && LowerName::new(&c.origin_name()) == *z.origin_key())
        {
            if !stale.iter().any(|s| s.origin == zc.origin) {
                stale.push(zc.clone());
            }
        }
    }
    drop(superseded);
    // Images of zones the journal has no history of are committed as new
    // zones once it subscribes, so it starts one.
    let (restored, unjournaled): (Vec<Zone>, Vec<Zone>) = imaged
        .into_iter()
        .partition(|z| journal.has_zone(z.origin_key()));
    let imaged_keys: Vec<LowerName> = restored
        .iter()
        .chain(&unjournaled)
        .map(|z| z.origin_key().clone())
        .collect();
    let store = ZoneStore::new();
    store.set_serial_policy(config.transfer.serial_policy);
    store.set_rotation(config.settings.rotation.clone());
    // What was served before a restart comes back first: secondary zones
    // are served before their primaries answer, and the journal's history
    // continues from it.
    store.restore_zones(recovered.into_iter().chain(restored).collect());
    secondary::expire_stale_copies(
        &store,
        &config.settings.secondary_zones,
        secondary_dir(&config).as_deref(),
    );
    let router = Arc::new(Router::new(store, handler_for(&config, None)).with_journal(journal));
    router
        .transfer
        .store(Arc::new(config.settings.transfer.clone()));
    if config.rrl.enabled {
        let _ = router.rrl.set(crate::rrl::Limiter::new(config.rrl.clone()));
        info!(
            rate = config.rrl.responses_per_second,
            slip = config.rrl.slip,
            log_only = config.rrl.log_only,
            "response rate limiting on (UDP answers of the fallback)"
        );
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = Vec::new();
    // Control work (the registry API, NOTIFY, transfers in) runs on a
    // runtime of its own, so it never holds a thread that answers DNS.
    let control = ControlRuntime(Some(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(CONTROL_THREADS)
            .thread_name("xdpdns-control")
            .enable_all()
            .build()
            .context("starting the control runtime")?,
    ));
    let control = control.0.as_ref().expect("set above");

    // Subscribers before sources, so they see every commit from here on.
    let journaled = start_journal(&router);
    let in_control = control.enter();
    let (notifier, propagation) = start_notify(
        &config,
        &router,
        journaled.clone(),
        stop_rx.clone(),
        &mut tasks,
    );
    drop(in_control);
    router.store.replace_zones(
        parsed.into_iter().chain(unjournaled).collect(),
        &[],
        unix_secs(),
    );
    // Image-only zones committed just now: their SOA timers as well.
    secondary::expire_stale_copies(
        &router.store,
        &config.settings.secondary_zones,
        secondary_dir(&config).as_deref(),
    );
    crate::memory::release_freed();
    // The image writer subscribes once every zone is in the store, so its
    // first pass sees them all (and removes only images of zones gone).
    let mut images = None;
    if let Some(dir) = images_dir {
        let snapshot = router.store.snapshot();
        let loaded: Vec<&Zone> = imaged_keys
            .iter()
            .filter_map(|k| snapshot.zone(k).map(|z| &**z))
            .collect();
        let writer = images::ImageWriter::new(dir, &loaded);
        let (snapshot, feed) = router.store.subscribe();
        let configured: Vec<hickory_proto::rr::Name> = configured_origins(&config)
            .iter()
            .map(hickory_proto::rr::Name::from)
            .collect();
        images = Some(images::start(
            writer,
            snapshot,
            feed,
            IMAGE_PAUSE,
            &configured,
        ));
    }
    let mut bound_addrs = Vec::new();
    let mut udp_workers = Vec::new();
    for &addr in &config.server.listen {
        let (udp, listener, bound) = bind_address(addr, &config.server).with_context(|| {
            format!(
                "{}: server.listen: cannot bind {addr}",
                config.file.display()
            )
        })?;
        info!(addr = %bound, udp_sockets = udp.len(), "listening (udp+tcp)");
        bound_addrs.push(bound);
        for (i, sock) in udp.into_iter().enumerate() {
            let name = format!("udp-{}-{i}", bound.port());
            udp_workers.push(spawn_udp_worker(
                sock,
                router.clone(),
                stop_rx.clone(),
                name,
                config.server.udp_coalesce(),
            )?);
        }
        let tcp = TcpServer {
            listener,
            max_connections: config.server.tcp_max_connections,
            idle_timeout: config.server.tcp_idle_timeout(),
            max_pipelined: config.server.tcp_max_pipelined,
            shutdown_grace: config.server.shutdown_grace(),
        };
        tasks.push(tokio::spawn(tcp.run(router.clone(), stop_rx.clone())));
    }
    let port = bound_addrs.first().map_or(0, |a| a.port());
    // The compiled answer table follows the store on the control runtime
    // (kept by the kernel table's subscriber when XDP is on); the UDP
    // workers answer from it once it has caught up.
    let (mut kernel, xdp_off_reason, _answers) = {
        let _in_control = control.enter();
        match start_fast_path(&config, port, &router) {
            Ok(k) => (Some(k), None, None),
            Err(why) => {
                let answers = crate::answers::follow::start(router.hot.clone(), &router.store);
                (None, Some(why), Some(answers))
            }
        }
    };
    let mut registry_task = None;
    let mut api_addr = None;
    let mut registry = None;
    if let Some(rc) = &config.registry {
        let (addr, api, writer, handle) =
            start_registry(&config, rc, &router, stop_rx.clone(), control.handle()).await?;
        tasks.push(api);
        registry_task = Some(writer);
        api_addr = Some(addr);
        registry = Some(handle);
        // Recovering the registry builds and drops a lot on the way.
        crate::memory::release_freed();
    }
    {
        let _in_control = control.enter();
        start_secondaries(&config, &router, &loads, stop_rx.clone(), &mut tasks);
    }
    // Every zone's secondaries hear of its serial at start-up, once the
    // journal holds it (so their IXFR can be answered from it).
    let version = router.store.snapshot().version();
    let (r, n, mut j) = (router.clone(), notifier.clone(), journaled.clone());
    tasks.push(control.spawn(async move {
        if j.reached(version).await {
            n.announce_all(&r.store.snapshot());
        }
    }));
    let live = Arc::new(Live {
        started: std::time::Instant::now(),
        start_unix: unix_secs(),
        router: router.clone(),
        kernel: kernel.as_ref().map(|(k, _)| k.downgrade()),
        xdp_off_reason,
        registry,
        propagation,
        loads: loads.clone(),
        config: arc_swap::ArcSwap::from_pointee(config.clone()),
        listen: bound_addrs.clone(),
        anycast: std::sync::OnceLock::new(),
    });
    let metrics_addr = match config.metrics.listen {
        Some(addr) => Some(start_metrics(
            &config,
            addr,
            &live,
            control,
            stop_rx.clone(),
            &mut tasks,
        )?),
        None => None,
    };
    let control_socket = start_control(&config, &live, control, stop_rx.clone(), &mut tasks)?;
    // Last: the addresses are announced only once everything above serves
    // and the first `rise` self-checks pass.
    if let Some(a) = &config.anycast {
        let started = start_anycast(&config, a, &router, &live, &bound_addrs)?;
        let _ = live.anycast.set(started);
    }
    // Written while still privileged (its directory may be root's).
    if let Some(path) = &ready_file {
        write_ready_file(path, &bound_addrs, api_addr, metrics_addr)
            .with_context(|| format!("--ready-file {}", path.display()))?;
    }
    match &config.server.user {
        Some(user) => drop_privileges(&config, user, kernel.is_some())
            .with_context(|| format!("{}: server.user = {user:?}", config.file.display()))?,
        // SAFETY: geteuid cannot fail.
        None if unsafe { libc::geteuid() } == 0 => warn!(
            "running as root with every capability it was started with; set [server] user to drop them once started"
        ),
        None => {}
    }
    info!("ready");
    systemd::notify(&format!("READY=1\nMAINPID={}", std::process::id()));
    if !stale.is_empty() {
        let (r, log) = (router.clone(), loads.clone());
        tasks.push(tokio::spawn(async move {
            let work = move || zone_files::reload_stale(&stale, &r, &log);
            if let Err(e) = in_background("reload-stale", work).await {
                error!("reloading zone files changed since their images: {e}");
            }
        }));
    }

    let mut current = config;
    let mut failure = None;
    loop {
        tokio::select! {
            _ = hup.recv() => {
                systemd::notify("RELOADING=1");
                let path = config_path.clone();
                let old = current.clone();
                let (sh, log) = (router.clone(), loads.clone());
                match in_background("reload", move || reload(&path, &old, &sh, &log)).await? {
                    Some(next) => {
                        live.config.store(Arc::new(next.clone()));
                        if let Some((k, _)) = &kernel {
                            // Payload size, NSID and cookie secrets: the
                            // kernel answers with the fallback's settings.
                            k.set_edns(router.handler.load().edns.clone()).await;
                            k.set_destinations(next.xdp_destinations()).await;
                        }
                        current = next;
                    }
                    None => warn!("reload failed; still serving the previous configuration"),
                }
                systemd::notify("READY=1");
            }
            _ = usr1.recv() => log_counters(kernel.as_ref().map(|(k, _)| k)).await,
            result = wait_for(&mut registry_task) => {
                registry_task = None;
                match result {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => { failure = Some(anyhow::anyhow!("registry journal: {e}")); break }
                    Err(e) => { failure = Some(anyhow::anyhow!("registry writer: {e}")); break }
                }
            }
            _ = term.recv() => {
                // Withdrawn first, so traffic moves before anything stops.
                if let Some(a) = live.anycast.get() {
                    a.drain().await;
                }
                break
            }
            _ = int.recv() => break,
        }
    }
    systemd::notify("STOPPING=1");
    // The kernel table's task detaches the program once its handle is gone.
    if let Some((k, task)) = kernel.take() {
        drop(k);
        let _ = task.await;
    }
    info!("shutting down: draining connections");
    let _ = stop_tx.send(true);
    for t in tasks {
        let _ = t.await;
    }
    // UDP workers see the flag within their idle check.
    let _ = tokio::task::spawn_blocking(move || {
        for w in udp_workers {
            let _ = w.join();
        }
    })
    .await;
    if let Some(t) = registry_task {
        if let Ok(Err(e)) = t.await {
            failure.get_or_insert(anyhow::anyhow!("registry journal: {e}"));
        }
    }
    drain_journal(&router, journaled).await;
    if let Some(images) = images {
        // What changed since the last image write (the writer pauses
        // between writes), so the next start finds every image current.
        // A thread of its own, waited for at most IMAGE_FLUSH: a stop is
        // never held up by a slow disk (the process ends without it).
        let snapshot = router.store.snapshot();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let flusher = std::thread::Builder::new()
            .name("zone-images-stop".into())
            .spawn(move || {
                images.flush(&snapshot);
                let _ = done_tx.send(());
            });
        if flusher.is_ok() && tokio::time::timeout(IMAGE_FLUSH, done_rx).await.is_err() {
            warn!("zone images not all written before the stop; the next start reads those zones from their sources");
        }
    }
    drop(control_socket);
    info!("stopped");
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The control runtime, shut down without blocking when `serve` returns
/// (a runtime may not be dropped in place inside another one, and on an
/// error return its tasks are abandoned).
struct ControlRuntime(Option<tokio::runtime::Runtime>);

impl Drop for ControlRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// The machine-readable readiness signal: the addresses actually bound
/// (port 0 in the config picks one), written whole by rename.
fn write_ready_file(
    path: &Path,
    dns: &[SocketAddr],
    api: Option<SocketAddr>,
    metrics: Option<SocketAddr>,
) -> std::io::Result<()> {
    let body = serde_json::json!({
        "dns": dns.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        "api": api.map(|a| a.to_string()),
        "metrics": metrics.map(|a| a.to_string()),
    });
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, body.to_string())?;
    std::fs::rename(&tmp, path)
}

/// Runs `work` on a thread of its own in the idle scheduling class
/// (`SCHED_IDLE`): a reload parses and diffs whole zone files, seconds of
/// CPU for a large one, and must not delay answering queries and
/// publishing registrations. Any other thread that wakes takes the CPU
/// from it at once (a nice value does not: measured, a nice-10 spinner
/// raised registration p99 from 3 to 7 ms, a `SCHED_IDLE` one did not).
/// On a machine saturated by serving, the reload waits for spare CPU.
async fn in_background<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> anyhow::Result<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            lower_priority();
            let _ = tx.send(work());
        })?;
    Ok(rx.await?)
}

/// Moves the calling thread to the idle scheduling class (see
/// [`in_background`]).
pub(crate) fn lower_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: changes only this thread's scheduling class (pid 0 = the
    // calling thread); on failure it stays at normal priority.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
        warn!(
            "cannot lower a background thread's priority: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Where zone images live: `images/` under `transfer.data_dir` (none
/// without one: every start then loads from the sources).
fn images_dir(config: &Config) -> Option<PathBuf> {
    let dir = config.transfer.data_dir.as_ref()?.join("images");
    match std::fs::create_dir_all(&dir) {
        Ok(()) => Some(dir),
        Err(e) => {
            warn!(dir = %dir.display(), "cannot create the zone image directory ({e}); zones load from their sources at every start");
            None
        }
    }
}

/// Resolves when `task` ends (never when there is none).
async fn wait_for<T>(task: &mut Option<JoinHandle<T>>) -> Result<T, tokio::task::JoinError> {
    match task {
        Some(t) => t.await,
        None => std::future::pending().await,
    }
}

/// The IXFR journal: on disk under `transfer.data_dir`, with every zone it
/// recovered that is still configured.
fn open_journal(
    config: &Config,
    held: &HashMap<LowerName, u32>,
) -> anyhow::Result<(IxfrJournal, Vec<Zone>)> {
    let limits = config.transfer.journal;
    let Some(dir) = &config.transfer.data_dir else {
        info!(
            "transfer.data_dir not set: the IXFR journal and secondary zones live in memory only"
        );
        return Ok((IxfrJournal::in_memory(limits), Vec::new()));
    };
    let (journal, recovered) = IxfrJournal::open_holding(&dir.join("journal"), limits, held)
        .with_context(|| format!("{}: transfer.data_dir", config.file.display()))?;
    let known = configured_origins(config);
    let keep = recovered
        .into_iter()
        .filter(|z| known.contains(z.origin_key()))
        .collect();
    Ok((journal, keep))
}

/// The IXFR journal's subscriber thread.
fn start_journal(router: &Router) -> Journaled {
    let (snapshot, feed) = router.store.subscribe();
    journal_subscriber::start(router.journal.clone(), feed, snapshot.version())
}

/// On a clean stop, let the journal record what was committed last.
async fn drain_journal(router: &Router, mut journaled: Journaled) {
    let version = router.store.snapshot().version();
    if tokio::time::timeout(JOURNAL_DRAIN, journaled.reached(version))
        .await
        .is_err()
    {
        warn!(
            version,
            journaled = journaled.version(),
            "the IXFR journal did not catch up before the stop"
        );
    }
}

/// Starts NOTIFY out: one task per (zone, secondary), fed by the
/// notifier's subscription to the store.
fn start_notify(
    config: &Config,
    router: &Router,
    journaled: Journaled,
    stop: watch::Receiver<bool>,
    tasks: &mut Vec<JoinHandle<()>>,
) -> (Arc<Notifier>, Arc<Propagation>) {
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
    let (notifier, propagation, started) = notify::start(
        config.settings.notify_targets.clone(),
        settings,
        status_file,
        stop.clone(),
    );
    tasks.extend(started);
    let notifier = Arc::new(notifier);
    let (_, feed) = router.store.subscribe();
    let n = notifier.clone();
    let mut stop = stop;
    tasks.push(tokio::spawn(async move {
        tokio::select! {
            _ = n.follow(feed, journaled) => {}
            _ = stop.changed() => {}
        }
    }));
    (notifier, propagation)
}

fn secondary_dir(config: &Config) -> Option<PathBuf> {
    config
        .transfer
        .data_dir
        .as_ref()
        .map(|d| d.join("secondary"))
}

/// Starts the refresh task of every secondary zone.
fn start_secondaries(
    config: &Config,
    router: &Arc<Router>,
    loads: &Arc<LoadLog>,
    stop: watch::Receiver<bool>,
    tasks: &mut Vec<JoinHandle<()>>,
) {
    let zones = config.settings.secondary_zones.clone();
    if zones.is_empty() {
        return;
    }
    let state_dir = secondary_dir(config);
    if let Some(d) = &state_dir {
        let _ = std::fs::create_dir_all(d);
    }
    let store: Arc<dyn AsRef<ZoneStore> + Send + Sync> = router.clone();
    let (tx, started) = secondary::start(
        secondary::Secondaries {
            zones,
            store,
            state_dir,
            timeout: config.transfer.primary_timeout(),
            max_transfers: config.transfer.max_transfers_in,
            max_records: config.transfer.max_transfer_in_records,
            log: loads.clone(),
        },
        stop,
    );
    let _ = router.notify_sink.set(Box::new(tx));
    tasks.extend(started);
}

/// Starts the registry (recovering it from disk and publishing its zones)
/// and its HTTP API; returns the API task, the writer task and a handle.
async fn start_registry(
    config: &Config,
    rc: &crate::config::RegistryConfig,
    router: &Arc<Router>,
    stop: watch::Receiver<bool>,
    control: &tokio::runtime::Handle,
) -> anyhow::Result<(
    SocketAddr,
    JoinHandle<()>,
    JoinHandle<Result<(), crate::registry::service::WriterError>>,
    RegistryHandle,
)> {
    let token = crate::config::read_token(&rc.token, &rc.token_file, "registry.token")
        .map_err(|e| anyhow::anyhow!("{}: {e}", config.file.display()))?;
    let naming = config
        .settings
        .naming
        .clone()
        .context("registry configured without naming")?;
    let store: Arc<dyn AsRef<ZoneStore> + Send + Sync> = router.clone();
    let batch_delay = std::time::Duration::from_millis(rc.batch_delay_ms);
    let started = match (&rc.backend, &rc.etcd) {
        (crate::config::RegistryBackend::Etcd, Some(etcd)) => crate::registry::etcd::start(
            etcd,
            naming,
            rc.health,
            rc.limits,
            batch_delay,
            store.clone(),
            stop.clone(),
        )
        .await
        .with_context(|| format!("{}: registry.etcd", config.file.display()))?,
        _ => crate::registry::service::start(
            &rc.data_dir,
            naming,
            rc.health,
            rc.limits,
            batch_delay,
            store.clone(),
            stop.clone(),
        )
        .with_context(|| format!("{}: registry.data_dir", config.file.display()))?,
    };
    let listener = crate::api::bind(rc.listen).await.with_context(|| {
        format!(
            "{}: registry.listen: cannot bind {}",
            config.file.display(),
            rc.listen
        )
    })?;
    let api_addr = listener.local_addr()?;
    info!(%api_addr, instances = started.recovered_instances, "registry API listening");
    let handle = started.handle.clone();
    let state = crate::api::ApiState {
        registry: started.handle,
        store,
        token: token.into(),
        public_reads: rc.public_reads,
        limits: rc.limits,
    };
    // Moved to the control runtime's reactor, not served from the DNS one.
    let listener = listener.into_std()?;
    let api = control.spawn(async move {
        let served = match tokio::net::TcpListener::from_std(listener) {
            Ok(l) => crate::api::serve(l, state, stop).await,
            Err(e) => Err(e),
        };
        if let Err(e) = served {
            error!("registry API stopped: {e}");
        }
    });
    Ok((api_addr, api, started.task, handle))
}

/// Binds `[metrics] listen` and serves `/metrics` on the control runtime.
fn start_metrics(
    config: &Config,
    addr: SocketAddr,
    live: &Arc<Live>,
    control: &tokio::runtime::Runtime,
    stop: crate::server::ShutdownRx,
    tasks: &mut Vec<JoinHandle<()>>,
) -> anyhow::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind(addr).with_context(|| {
        format!(
            "{}: metrics.listen: cannot bind {addr}",
            config.file.display()
        )
    })?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    let live = live.clone();
    tasks.push(control.spawn(async move {
        let served = match tokio::net::TcpListener::from_std(listener) {
            Ok(l) => metrics_http::serve(l, live, stop).await,
            Err(e) => Err(e),
        };
        if let Err(e) = served {
            error!("metrics listener stopped: {e}");
        }
    }));
    info!(addr = %bound, "metrics listening (GET /metrics)");
    Ok(bound)
}

/// Becomes `[server] user` (and `group`) with only the capability still
/// needed: `CAP_BPF` for the kernel table's map updates, or without XDP
/// `CAP_NET_BIND_SERVICE`. The state directories the server writes
/// (created by root before this) are handed to that user first.
fn drop_privileges(config: &Config, user: &str, xdp: bool) -> anyhow::Result<()> {
    use crate::privileges::{self, CAP_BPF, CAP_NET_ADMIN, CAP_NET_BIND_SERVICE};
    let (uid, primary_gid) = privileges::user_ids(user)?;
    let gid = match &config.server.group {
        Some(g) => privileges::group_id(g).map_err(|e| anyhow::anyhow!("server.group: {e}"))?,
        None => primary_gid,
    };
    // SAFETY: geteuid cannot fail.
    let as_root = unsafe { libc::geteuid() } == 0;
    let state = [
        config.transfer.data_dir.clone(),
        config.registry.as_ref().map(|r| r.data_dir.clone()),
    ];
    for dir in state.into_iter().flatten().filter(|_| as_root) {
        privileges::hand_over(&dir, uid, gid)
            .with_context(|| format!("handing {} to {user}", dir.display()))?;
    }
    // Re-read on every reload, by then as the user.
    if let Some(f) = config.cookies.secret_file.as_ref().filter(|_| as_root) {
        if let Err(e) = privileges::hand_over_file(f, uid, gid) {
            warn!(file = %f.display(), "cannot hand the cookie secret file to {user} ({e}); reloads fail unless {user} can read it");
        }
    }
    let mut keep = if xdp {
        vec![CAP_BPF]
    } else {
        vec![CAP_NET_BIND_SERVICE]
    };
    // Announcing and withdrawing the anycast addresses changes them.
    if config.anycast.is_some() {
        keep.push(CAP_NET_ADMIN);
    }
    privileges::drop_to(uid, gid, &keep)?;
    info!(user, uid, gid, capabilities = ?privileges::names(&keep), "dropped privileges");
    Ok(())
}

/// Creates the anycast interface (withdrawn) and starts its self-checks.
fn start_anycast(
    config: &Config,
    anycast: &crate::config::AnycastConfig,
    router: &Arc<Router>,
    live: &Live,
    bound: &[std::net::SocketAddr],
) -> anyhow::Result<crate::anycast::Anycast> {
    let (name, rtype) = crate::anycast::parse_check_name(&anycast.check_name)
        .map_err(|e| anyhow::anyhow!("{}: anycast.check_name: {e}", config.file.display()))?;
    let listener = *bound.first().context("anycast needs a listener")?;
    let destination = anycast
        .addresses
        .iter()
        .find_map(|n| match n.addr() {
            std::net::IpAddr::V4(a) => Some(a),
            std::net::IpAddr::V6(_) => None,
        })
        .unwrap_or(std::net::Ipv4Addr::new(192, 0, 2, 53));
    let zones = config
        .zones
        .iter()
        .filter_map(|z| hickory_proto::rr::Name::from_ascii(&z.origin).ok())
        .map(|mut n| {
            n.set_fqdn(true);
            n
        })
        .collect::<Vec<_>>();
    let checks = crate::anycast::Checks {
        router: router.clone(),
        name,
        rtype,
        listener,
        destination,
        zones,
    };
    let kernel = (!config.xdp.interfaces.is_empty()).then(|| live.kernel.clone());
    crate::anycast::start(crate::anycast::Setup {
        config: anycast.settings(),
        checks,
        kernel,
    })
    .with_context(|| format!("{}: anycast.interface", config.file.display()))
}

/// Binds the control socket (`xdpdns ctl`) and answers it on the
/// control runtime; the socket file goes when the returned value does.
/// Without `[control] socket`, a default path that cannot be bound is
/// logged and skipped.
fn start_control(
    config: &Config,
    live: &Arc<Live>,
    control: &tokio::runtime::Runtime,
    stop: crate::server::ShutdownRx,
    tasks: &mut Vec<JoinHandle<()>>,
) -> anyhow::Result<Option<Arc<ControlSocket>>> {
    let path = config.control_socket();
    let group = match &config.control.group {
        Some(g) => Some(
            crate::privileges::group_id(g)
                .map_err(|e| anyhow::anyhow!("{}: control.group: {e}", config.file.display()))?,
        ),
        None => None,
    };
    let owner = match &config.server.user {
        Some(u) => Some(
            crate::privileges::user_ids(u)
                .map_err(|e| anyhow::anyhow!("{}: server.user: {e}", config.file.display()))?
                .0,
        ),
        None => None,
    };
    let bound = {
        let _in_control = control.enter();
        ControlSocket::bind(&path, owner, group)
    };
    let socket = match bound {
        Ok(s) => Arc::new(s),
        // A configured socket must work; the default one (another server
        // may hold it, or /run may be read-only) is not worth a failed start.
        Err(e) if config.control.socket.is_none() => {
            warn!("{e}; `xdpdns ctl` is unavailable (set [control] socket)");
            return Ok(None);
        }
        Err(e) => {
            return Err(
                anyhow::Error::new(e).context(format!("{}: control.socket", config.file.display()))
            )
        }
    };
    info!(socket = %path.display(), "control socket listening (xdpdns ctl)");
    let (s, backend) = (socket.clone(), Arc::new(live::Control(live.clone())));
    tasks.push(control.spawn(async move { s.serve(backend, stop).await }));
    Ok(Some(socket))
}

/// Loads, fills and attaches the XDP program and hands it to the kernel
/// table's subscriber, or says why the server runs on the fallback alone
/// (also logged, in one line).
fn start_fast_path(
    config: &Config,
    port: u16,
    router: &Router,
) -> Result<(KernelTable, JoinHandle<()>), String> {
    let x = &config.xdp;
    if x.interfaces.is_empty() {
        info!("XDP fast path off (no [xdp] interfaces configured): every query is answered by the fallback server");
        unpin_all(x.pin_dir.as_deref());
        return Err("no [xdp] interfaces configured".into());
    }
    let (snapshot, feed) = router.store.subscribe();
    let attempt = || -> Result<FastPath, XdpError> {
        let edns = &router.handler.load().edns;
        let pins = x
            .pin_dir
            .as_deref()
            .and_then(|dir| match PinDir::open(dir) {
                Ok(p) => Some(p),
                Err(e) => {
                    warn!("{e}; the XDP program is not pinned and stops with the server");
                    None
                }
            });
        let capacity = Capacity {
            entries: x.capacity,
            rrl_slots: config.rrl.kernel_slots(),
        };
        let mut fp = match pins {
            None => FastPath::load(capacity, port, edns)?,
            Some(p) => match FastPath::adopt(capacity, port, edns, p.clone()) {
                Ok(fp) => fp,
                Err(e) => {
                    info!(pin_dir = %p.path().display(), "XDP: {e}; loading the program");
                    FastPath::load_pinned(capacity, port, edns, p)?
                }
            },
        };
        fp.set_rrl(config.rrl.kernel_settings())?;
        // The hot path's table is the loader's record of the kernel's.
        fp.use_table(router.hot.clone());
        let tag = table_tag(&snapshot);
        if fp.table_unknown() && fp.healthy() && fp.pinned_table_tag() == tag {
            info!("XDP table adopted as pinned: it holds the zone versions served");
        } else {
            if fp.table_unknown() {
                info!("XDP: the pinned table holds other zone versions; rebuilding it");
            }
            let (table, skipped) = compile(&snapshot);
            info!(entries = table.len(), ?skipped, "XDP answer table compiled");
            fp.install_tagged(table, tag)?;
            router.hot.settle(snapshot.version());
            crate::memory::release_freed();
        }
        let destinations = config.xdp_destinations();
        fp.set_destinations(destinations.as_deref())?;
        match &destinations {
            Some(a) => info!(addresses = ?a, "XDP answers queries to these addresses only"),
            None => info!("XDP answers queries to any address of its interfaces (a listen address is a wildcard)"),
        }
        for iface in &x.interfaces {
            let mode = fp.attach(iface, x.mode)?;
            info!(interface = %iface, mode = %mode, port, "XDP fast path attached");
        }
        fp.drop_other_pinned_links(&x.interfaces)?;
        Ok(fp)
    };
    match attempt() {
        Ok(fp) => Ok(KernelTable::start(fp, snapshot, feed)),
        Err(e) => {
            warn!("XDP fast path unavailable, serving through the fallback only: {e}");
            // A pinned program adopted before the failure must not go on
            // answering from a table nothing keeps current.
            unpin_all(x.pin_dir.as_deref());
            Err(e.to_string())
        }
    }
}

/// Detaches and frees whatever is pinned in `dir` (best effort, logged).
fn unpin_all(dir: Option<&std::path::Path>) {
    let Some(dir) = dir.filter(|d| d.exists()) else {
        return;
    };
    match PinDir::open(dir).map(|p| p.clear()) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => warn!(pin_dir = %dir.display(), "XDP: cannot remove the pinned objects: {e}"),
        Err(e) => warn!("{e}"),
    }
}

async fn log_counters(kernel: Option<&KernelTable>) {
    info!(
        udp_receive_drops = crate::server::udp_receive_drops(),
        "fallback counters"
    );
    let Some(k) = kernel else { return };
    match k.counters().await {
        Some(Ok(c)) => info!("xdp counters {c}"),
        Some(Err(e)) => warn!("xdp counters unreadable: {e}"),
        None => {}
    }
}
