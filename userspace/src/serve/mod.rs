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

mod handler;
pub mod images;
mod live;
mod metrics_http;
mod start;
mod status_page;
mod systemd;
mod zone_files;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use hickory_proto::rr::LowerName;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;
use tracing::{error, info, warn};

pub use handler::handler_for;
pub use zone_files::{configured_origins, load_zones, reload};

use crate::background::in_background;
pub use start::STATUS_FILE;
use start::{
    dnstap_kernel_every, dnstap_origin, dnstap_settings, drain_journal, drop_privileges,
    images_dir, log_counters, open_journal, secondary_dir, start_anycast, start_control,
    start_fast_path, start_journal, start_metrics, start_notify, start_registry, start_secondaries,
    wait_for,
};

use crate::clock::unix_secs;
use crate::config::Config;
use crate::router::Router;
use crate::sockets::{bind_address, spawn_udp_worker, TcpServer};
use crate::transfer::secondary;
use crate::zone::serial::is_newer;
use crate::zone::{LoadLog, Zone, ZoneStore};
use live::Live;

/// Worker threads of the control runtime (API, NOTIFY, transfers in).
/// One: in interleaved runs of `cargo bench --bench registration` (4
/// each) two workers raised registration→answer p99 (median of runs:
/// sequential 1.8 → 4.5 ms, 8 writers 4.5 → 5.9 ms, during reloads
/// 8.3 → 9.7 ms); the second worker's wake-ups and steals cost more
/// than the API's parsing, which is small.
const CONTROL_THREADS: usize = 1;

/// How long the zone image writer waits after writing before it writes
/// the newest versions of what changed meanwhile.
const IMAGE_PAUSE: std::time::Duration = std::time::Duration::from_secs(1);

/// How long a stop waits for the last zone images to be written.
const IMAGE_FLUSH: std::time::Duration = std::time::Duration::from_secs(10);

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
        mut parsed,
        imaged,
        failed,
        mut stale,
    } = zone_files::load_zones_at_start(&config, images_dir.as_deref());
    // Zones that take updates read their files last, as a difference
    // against what the journal kept (`dynamic::files`).
    let dynamic_files = crate::dynamic::ZoneFiles::new(&config);
    let dynamic = |origin: &LowerName| dynamic_files.as_ref().is_some_and(|f| f.takes(origin));
    parsed.retain(|z| !dynamic(z.origin_key()));
    let failed: Vec<_> = failed
        .into_iter()
        .filter(|(o, _)| !dynamic(&LowerName::new(o)))
        .collect();
    if let Some((_, e)) = failed.first() {
        bail!("{e}");
    }
    let loads = Arc::new(LoadLog::default());
    for z in parsed.iter().chain(&imaged) {
        info!(zone = %z.origin(), serial = z.serial(), records = z.record_count(), "zone loaded");
        zone_files::record_loaded(&loads, z);
    }
    // The journal decodes only the zones it has other versions of than
    // the images just read, and brings images that lag it forward.
    let mut held: std::collections::HashMap<LowerName, Zone> = imaged
        .into_iter()
        .map(|z| (z.origin_key().clone(), z))
        .collect();
    // Zones added at runtime come back from the journal too.
    let runtime_dir = config.transfer.data_dir.as_ref().map(|d| d.join("dynamic"));
    let runtime_names: Vec<hickory_proto::rr::Name> = runtime_dir
        .as_deref()
        .map(crate::dynamic::runtime::read_list)
        .unwrap_or_default()
        .iter()
        .filter_map(|z| hickory_proto::rr::Name::from_ascii(&z.name).ok())
        .collect();
    // So do the members of followed catalogs.
    let kept_members = crate::dynamic::following::kept_members(
        runtime_dir.as_deref(),
        &config.settings.followed_catalogs,
    );
    let runtime_names: Vec<hickory_proto::rr::Name> = runtime_names
        .into_iter()
        .chain(kept_members.iter().map(|m| m.zone.clone()))
        .collect();
    let secondaries: Vec<_> = config
        .settings
        .secondary_zones
        .iter()
        .cloned()
        .chain(kept_members)
        .collect();
    let (journal, mut recovered) = open_journal(&config, &mut held, &runtime_names)?;
    if let (Some(_), Some(naming)) = (&config.registry, &config.settings.naming) {
        journal.rebuilt_by_source(naming.zones.iter().map(|z| LowerName::new(&z.name)));
    }
    let imaged: Vec<Zone> = held.into_values().collect();
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
    stale.retain(|z| !dynamic(&LowerName::new(&z.origin_name())));
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
    // Serving owns the store (the one commit path); the router only
    // reads it.
    let store = Arc::new(ZoneStore::new());
    store.set_serial_policy(config.transfer.serial_policy);
    store.set_rotation(config.settings.rotation.clone());
    // What was served before a restart comes back first: secondary zones
    // are served before their primaries answer, and the journal's history
    // continues from it.
    store.restore_zones(recovered.into_iter().chain(restored).collect());
    secondary::expire_stale_copies(&store, &secondaries, secondary_dir(&config).as_deref());
    let journal = Arc::new(journal);
    let router = Arc::new(
        Router::new(store.reader(), handler_for(&config, None)).with_history(journal.clone()),
    );
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
    let journaled = start_journal(&store, &journal);
    let in_control = control.enter();
    let catalog = config.catalog_origin().map(|origin| {
        let secondaries: Vec<_> = config
            .settings
            .secondary_zones
            .iter()
            .map(|z| z.zone.clone())
            .collect();
        let group = config.catalog.as_ref().and_then(|c| c.group.clone());
        Arc::new(crate::dynamic::Catalog::new(origin, group, &secondaries))
    });
    let (notifier, propagation) = start_notify(
        &config,
        &store,
        journaled.clone(),
        catalog.as_ref(),
        stop_rx.clone(),
        &mut tasks,
    );
    drop(in_control);
    // Signed zones are signed on every commit from here on (the journal
    // has subscribed); what it restored is signed by their keys already.
    if let Some(dir) = &config.transfer.data_dir {
        crate::signing::install(&store, dir, &config.signed_zones(), unix_secs())
            .context("signing keys")?;
    }
    store.replace_zones(
        parsed.into_iter().chain(unjournaled).collect(),
        &[],
        unix_secs(),
    );
    if let Some(files) = &dynamic_files {
        zone_files::load_dynamic(files, &store, &loads, true)?;
    }
    // Image-only zones committed just now: their SOA timers as well.
    secondary::expire_stale_copies(&store, &secondaries, secondary_dir(&config).as_deref());
    crate::memory::release_freed();
    // The image writer subscribes once every zone is in the store, so its
    // first pass sees them all (and removes only images of zones gone).
    let mut images = None;
    if let Some(dir) = images_dir {
        let snapshot = store.snapshot();
        let loaded: Vec<&Zone> = imaged_keys
            .iter()
            .filter_map(|k| snapshot.zone(k).map(|z| &**z))
            .collect();
        // The journal keeps the diffs since each image, so the next start
        // brings an image forward however long ago it was written.
        journal.images_written();
        let keeping = journal.clone();
        let writer =
            images::ImageWriter::new(dir, &loaded).on_written(Box::new(move |origin, serial| {
                keeping.keep_from(origin, serial)
            }));
        let (snapshot, feed) = store.subscribe();
        let configured: Vec<hickory_proto::rr::Name> = configured_origins(&config)
            .iter()
            .map(hickory_proto::rr::Name::from)
            .chain(runtime_names.iter().cloned())
            .collect();
        images = Some(images::start(
            writer,
            snapshot,
            feed,
            IMAGE_PAUSE,
            &configured,
        ));
    }
    // dnstap's writer runs on the control runtime; the sockets and the
    // kernel's sample reader hand it what they tap.
    let tap = Arc::new(crate::dnstap::Tap::default());
    tap.configure(
        dnstap_settings(&config),
        dnstap_origin(&config),
        control.handle(),
    );
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
                tap.clone(),
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
        tasks.push(tokio::spawn(tcp.run(
            router.clone(),
            tap.clone(),
            stop_rx.clone(),
        )));
    }
    let port = bound_addrs.first().map_or(0, |a| a.port());
    // The compiled answer table follows the store on the control runtime
    // (kept by the kernel table's subscriber when XDP is on); the UDP
    // workers answer from it once it has caught up.
    router
        .hot
        .set_compiling(config.server.answer_table.compiling());
    let (mut kernel, xdp_off_reason, _answers) = {
        let _in_control = control.enter();
        match start_fast_path(&config, port, &store, &router, &tap) {
            Ok(k) => (Some(k), None, None),
            Err(why) => {
                let answers = crate::answers::follow::start(router.hot.clone(), &store);
                (None, Some(why), Some(answers))
            }
        }
    };
    // UPDATEs are applied on the control runtime, answered once journaled.
    let updater = crate::dynamic::Updater::new(
        store.clone(),
        journaled.clone(),
        &router,
        control.handle().clone(),
    );
    let _ = router.update_sink.set(Box::new(updater));
    let runtime = runtime_dir.as_deref().map(|dir| {
        Arc::new(crate::dynamic::RuntimeZones::new(
            dir,
            store.clone(),
            journaled.clone(),
            catalog.clone(),
            &router,
        ))
    });
    if let (Some(r), Some(dir)) = (&runtime, &config.transfer.data_dir) {
        start_runtime_signing(r, dir, &config, &store, &stop_rx, control);
    }
    let mut dynamic = crate::dynamic::Dynamic {
        files: dynamic_files.clone(),
        runtime: runtime.clone(),
        catalog: catalog.clone(),
        following: None,
    };
    let mut registry_task = None;
    let mut api_addr = None;
    let mut registry = None;
    let mut status_hook = None;
    if let Some(rc) = &config.registry {
        let (addr, api, writer, handle, hook) = start_registry(
            &config,
            rc,
            &store,
            runtime.clone(),
            propagation.clone(),
            stop_rx.clone(),
            control.handle(),
        )
        .await?;
        tasks.push(api);
        registry_task = Some(writer);
        api_addr = Some(addr);
        registry = Some(handle);
        status_hook = Some(hook);
        // Recovering the registry builds and drops a lot on the way.
        crate::memory::release_freed();
    }
    {
        let _in_control = control.enter();
        let set = start_secondaries(&config, &store, &router, &loads, stop_rx.clone());
        let followed = &config.settings.followed_catalogs;
        if !followed.is_empty() || runtime_dir.is_some() {
            let following = crate::dynamic::following::Following::new(
                followed.clone(),
                runtime_dir.as_deref(),
                set,
                store.clone(),
                &router,
                catalog.clone(),
            );
            let (snapshot, feed) = store.subscribe();
            tasks.push(tokio::spawn(following.clone().follow(
                snapshot,
                feed,
                stop_rx.clone(),
            )));
            dynamic.following = Some(following);
        }
    }
    if let (false, Some(dir)) = (config.signed_zones().is_empty(), &config.transfer.data_dir) {
        let _in_control = control.enter();
        tasks.push(crate::signing::start_refresh(
            store.clone(),
            stop_rx.clone(),
        ));
        tasks.extend(crate::signing::start_rollovers(
            &store,
            dir,
            &config.signed_zones(),
            &stop_rx,
        ));
    }
    if let (Some(files), Some(quiet)) = (&dynamic_files, config.update.file_sync()) {
        let _in_control = control.enter();
        let (files, store) = (files.clone(), store.clone());
        tasks.push(crate::dynamic::files::start_write_back(
            files,
            store,
            quiet,
            stop_rx.clone(),
        ));
    }
    // The catalog lists every zone served as primary, registry zones
    // included: committed once they all are.
    if let Some(c) = &catalog {
        let registry: Vec<_> = config.registry_zone_names().collect();
        let zone = c.for_zones(&store.snapshot(), registry.iter(), &[]);
        store.replace_zones(vec![zone], &[], unix_secs());
    }
    // Every zone's secondaries hear of its serial at start-up, once the
    // journal holds it (so their IXFR can be answered from it).
    let version = store.snapshot().version();
    let (zones, n, mut j) = (store.reader(), notifier.clone(), journaled.clone());
    tasks.push(control.spawn(async move {
        if j.reached(version).await {
            n.announce_all(&zones.snapshot());
        }
    }));
    let live = Arc::new(Live {
        started: std::time::Instant::now(),
        start_unix: unix_secs(),
        store: store.clone(),
        router: router.clone(),
        kernel: kernel.as_ref().map(|(k, _)| k.downgrade()),
        xdp_off_reason,
        registry,
        propagation,
        loads: loads.clone(),
        config: arc_swap::ArcSwap::from_pointee(config.clone()),
        listen: bound_addrs.clone(),
        anycast: std::sync::OnceLock::new(),
        runtime: runtime.clone(),
        tap: tap.clone(),
    });
    // The API's status page reads the counters from here on.
    if let Some(hook) = &status_hook {
        hook.set(Arc::new(status_page::LiveStatus(live.clone())));
    }
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
        Some(user) => {
            // The allocator's threads, if started at load, cannot be
            // reached by the drop (see `memory`): they start again below.
            crate::memory::purge_in_background(false);
            drop_privileges(&config, user, kernel.is_some())
                .with_context(|| format!("{}: server.user = {user:?}", config.file.display()))?
        }
        // SAFETY: geteuid cannot fail.
        None if unsafe { libc::geteuid() } == 0 => warn!(
            "running as root with every capability it was started with; set [server] user to drop them once started"
        ),
        None => {}
    }
    if !crate::memory::purge_in_background(true) {
        warn!("cannot start the allocator's background threads: freed memory goes back to the system only while the server allocates");
    }
    info!("ready");
    systemd::notify(&format!("READY=1\nMAINPID={}", std::process::id()));
    if !stale.is_empty() {
        let (st, log) = (store.clone(), loads.clone());
        tasks.push(tokio::spawn(async move {
            let work = move || zone_files::reload_stale(&stale, &st, &log);
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
                let (st, sh, log) = (store.clone(), router.clone(), loads.clone());
                let dy = dynamic.clone();
                let work = move || reload(&path, &old, &st, &sh, &log, &dy);
                match in_background("reload", work).await? {
                    Some(next) => {
                        live.config.store(Arc::new(next.clone()));
                        if let Some((k, _)) = &kernel {
                            // Payload size, NSID and cookie secrets: the
                            // kernel answers with the fallback's settings.
                            k.set_edns(router.handler.load().edns.clone()).await;
                            k.set_destinations(next.xdp_destinations()).await;
                            k.set_tap(dnstap_kernel_every(&next)).await;
                        }
                        tap.configure(dnstap_settings(&next), dnstap_origin(&next), control.handle());
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
    live.propagation.flush();
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
    drain_journal(&store, journaled).await;
    if let Some(images) = images {
        // What changed since the last image write (the writer pauses
        // between writes), so the next start finds every image current.
        // A thread of its own, waited for at most IMAGE_FLUSH: a stop is
        // never held up by a slow disk (the process ends without it).
        let snapshot = store.snapshot();
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
    crate::durable::replace_with(path, 0o644, |w| w.write_all(body.to_string().as_bytes()))
}

/// Lets zones added at runtime be signed online, and signs again those
/// that were (their signed versions came back from the journal; their
/// keys and rollovers go on).
fn start_runtime_signing(
    runtime: &Arc<crate::dynamic::RuntimeZones>,
    data_dir: &std::path::Path,
    config: &Config,
    store: &Arc<ZoneStore>,
    stop: &watch::Receiver<bool>,
    control: &tokio::runtime::Runtime,
) {
    use crate::dynamic::runtime::RuntimeSigning;
    let _in_control = control.enter();
    let signer = Arc::new(crate::signing::RuntimeSigner::new(
        store.clone(),
        data_dir,
        Arc::new(config.clone()),
        stop.clone(),
    ));
    for z in runtime.list() {
        let name = hickory_proto::rr::Name::from_ascii(&z.name);
        let (Some(policy), Ok(name)) = (&z.dnssec_policy, name) else {
            continue;
        };
        if let Err(e) = signer.start(&name, policy) {
            warn!(zone = %z.name, "signing a zone added at runtime: {e}");
        }
    }
    runtime.set_signing(signer);
}
