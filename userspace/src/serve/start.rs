//! Starting what `serve` composes: the feed's subscribers (IXFR journal,
//! NOTIFY, kernel table), the sources (registry, secondary zones), the
//! metrics and control listeners, the anycast coupling, privileges
//! dropped.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use hickory_proto::rr::LowerName;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use super::live::{self, Live};
use super::metrics_http;
use super::zone_files::configured_origins;
use crate::answers::compile::Dependents;
use crate::answers::{compile_all, table_tag, Table};
use crate::config::Config;
use crate::control::ControlSocket;
use crate::registry::service::RegistryHandle;
use crate::router::Router;
use crate::transfer::journal_subscriber::{self, Journaled};
use crate::transfer::notify::Propagation;
use crate::transfer::notify::{self, Notifier, NotifySettings};
use crate::transfer::{secondary, IxfrJournal};
use crate::xdp::{Capacity, FastPath, KernelTable, PinDir, Served, XdpError};
use crate::zone::{LoadLog, Zone, ZoneStore};

/// How long a stop waits for the IXFR journal to catch up with the store.
const JOURNAL_DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Where the propagation state is written, under `transfer.data_dir`.
pub const STATUS_FILE: &str = "transfer-status.json";

/// Where zone images live: `images/` under `transfer.data_dir` (none
/// without one: every start then loads from the sources).
pub(super) fn images_dir(config: &Config) -> Option<PathBuf> {
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
pub(super) async fn wait_for<T>(
    task: &mut Option<JoinHandle<T>>,
) -> Result<T, tokio::task::JoinError> {
    match task {
        Some(t) => t.await,
        None => std::future::pending().await,
    }
}

/// The IXFR journal: on disk under `transfer.data_dir`, with every zone it
/// recovered that is still configured.
pub(super) fn open_journal(
    config: &Config,
    held: &mut HashMap<LowerName, Zone>,
    runtime: &[hickory_proto::rr::Name],
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
    let mut known = configured_origins(config);
    known.extend(runtime.iter().map(LowerName::new));
    let keep = recovered
        .into_iter()
        .filter(|z| known.contains(z.origin_key()))
        .collect();
    Ok((journal, keep))
}

/// The IXFR journal's subscriber thread.
pub(super) fn start_journal(store: &ZoneStore, journal: &Arc<IxfrJournal>) -> Journaled {
    let (snapshot, feed) = store.subscribe();
    journal_subscriber::start(journal.clone(), feed, snapshot.version())
}

/// On a clean stop, let the journal record what was committed last.
pub(super) async fn drain_journal(store: &ZoneStore, mut journaled: Journaled) {
    let version = store.snapshot().version();
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
pub(super) fn start_notify(
    config: &Config,
    store: &ZoneStore,
    journaled: Journaled,
    catalog: Option<&Arc<crate::dynamic::Catalog>>,
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
    // The catalog's consumers hear of the catalog and of every member.
    let defaults = match (catalog, config.catalog_notify()) {
        (Some(c), Some((secondaries, key))) => {
            let c = c.clone();
            Some(notify::DefaultTargets {
                secondaries,
                key,
                covers: Box::new(move |snapshot, zone| c.covers(snapshot, zone)),
            })
        }
        _ => None,
    };
    let (notifier, propagation, started) = notify::start(
        config.settings.notify_targets.clone(),
        settings,
        status_file,
        stop.clone(),
        defaults,
    );
    tasks.extend(started);
    let notifier = Arc::new(notifier);
    let (_, feed) = store.subscribe();
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

pub(super) fn secondary_dir(config: &Config) -> Option<PathBuf> {
    config
        .transfer
        .data_dir
        .as_ref()
        .map(|d| d.join("secondary"))
}

/// Starts the refresh task of every configured secondary zone; the set
/// takes the zones a followed catalog adds later.
pub(super) fn start_secondaries(
    config: &Config,
    store: &Arc<ZoneStore>,
    router: &Router,
    loads: &Arc<LoadLog>,
    stop: watch::Receiver<bool>,
) -> Arc<secondary::SecondarySet> {
    let set = secondary::SecondarySet::new(
        secondary::Secondaries {
            store: store.clone(),
            state_dir: secondary_dir(config),
            timeout: config.transfer.primary_timeout(),
            max_transfers: config.transfer.max_transfers_in,
            max_records: config.transfer.max_transfer_in_records,
            log: loads.clone(),
        },
        stop,
    );
    for zone in &config.settings.secondary_zones {
        set.add(zone.clone());
    }
    let _ = router
        .notify_sink
        .set(Box::new(secondary::NotifyTo(set.clone())));
    set
}

/// Starts the registry (recovering it from disk and publishing its zones)
/// and its HTTP API; returns the API task, the writer task and a handle.
pub(super) async fn start_registry(
    config: &Config,
    rc: &crate::config::RegistryConfig,
    store: &Arc<ZoneStore>,
    runtime: Option<Arc<crate::dynamic::RuntimeZones>>,
    propagation: Arc<crate::transfer::notify::Propagation>,
    stop: watch::Receiver<bool>,
    control: &tokio::runtime::Handle,
) -> anyhow::Result<(
    SocketAddr,
    JoinHandle<()>,
    JoinHandle<Result<(), crate::registry::service::WriterError>>,
    RegistryHandle,
    crate::api::StatusHook,
)> {
    let token = crate::config::read_token(&rc.token, &rc.token_file, "registry.token")
        .map_err(|e| anyhow::anyhow!("{}: {e}", config.file.display()))?;
    let naming = config
        .settings
        .naming
        .clone()
        .context("registry configured without naming")?;
    let store = store.clone();
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
    if let Some(zk) = &rc.zookeeper {
        let digest = match (&zk.digest, &zk.digest_file) {
            (None, None) => None,
            _ => Some(
                crate::config::read_token(&zk.digest, &zk.digest_file, "registry.zookeeper.digest")
                    .map_err(|e| anyhow::anyhow!("{}: {e}", config.file.display()))?,
            ),
        };
        crate::registry::zookeeper::spawn(zk.clone(), digest, started.handle.clone(), stop.clone());
    } else {
        // Instances mirrored while a ZooKeeper source was configured have
        // no lease and no one left to remove them.
        tokio::spawn(crate::registry::zookeeper::forget_mirrored(
            started.handle.clone(),
        ));
    }
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
        runtime,
        propagation: Some(propagation),
        token: token.into(),
        public_reads: rc.public_reads,
        limits: rc.limits,
        // Filled in once the server's counters exist (after the API).
        status: crate::api::StatusHook::default(),
    };
    let status = state.status.clone();
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
    Ok((api_addr, api, started.task, handle, status))
}

/// Binds `[metrics] listen` and serves `/metrics` on the control runtime.
pub(super) fn start_metrics(
    config: &Config,
    addr: SocketAddr,
    live: &Arc<Live>,
    control: &tokio::runtime::Runtime,
    stop: crate::sockets::ShutdownRx,
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
pub(super) fn drop_privileges(config: &Config, user: &str, xdp: bool) -> anyhow::Result<()> {
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
pub(super) fn start_anycast(
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
pub(super) fn start_control(
    config: &Config,
    live: &Arc<Live>,
    control: &tokio::runtime::Runtime,
    stop: crate::sockets::ShutdownRx,
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
pub(super) fn start_fast_path(
    config: &Config,
    port: u16,
    store: &ZoneStore,
    router: &Router,
    tap: &Arc<crate::dnstap::Tap>,
) -> Result<(KernelTable, JoinHandle<()>), String> {
    let x = &config.xdp;
    if x.interfaces.is_empty() {
        info!("XDP fast path off (no [xdp] interfaces configured): every query is answered by the fallback server");
        unpin_all(x.pin_dir.as_deref());
        return Err("no [xdp] interfaces configured".into());
    }
    let (snapshot, feed) = store.subscribe();
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
            served: None,
        };
        let adopted = pins.as_ref().and_then(|p| {
            FastPath::adopt(capacity, port, edns, p.clone())
                .inspect_err(
                    |e| info!(pin_dir = %p.path().display(), "XDP: {e}; loading the program"),
                )
                .ok()
        });
        let tag = table_tag(&snapshot);
        // The first table, with the index of which names' entries hold
        // other names' records: a later change of an SRV target's address
        // recompiles the SRV's entry only through it. The hot path's
        // table is the loader's record of the kernel's.
        let settings = |fp: &mut FastPath| -> Result<(), XdpError> {
            fp.set_rrl(config.rrl.kernel_settings())?;
            fp.set_tap(dnstap_kernel_every(config))?;
            fp.use_table(router.hot.clone());
            Ok(())
        };
        let install = |fp: &mut FastPath, (table, dependents): (Table, Dependents)| {
            settings(fp)?;
            fp.installed().set_dependents(dependents);
            fp.install_tagged(table, tag)?;
            router.hot.settle(snapshot.version());
            Ok(())
        };
        let compiled = || {
            let (table, skipped, dependents) = compile_all(&snapshot);
            info!(entries = table.len(), ?skipped, "XDP answer table compiled");
            (table, dependents)
        };
        let mut fp = match adopted {
            Some(mut fp) if fp.table_unknown() && fp.healthy() && fp.pinned_table_tag() == tag => {
                settings(&mut fp)?;
                info!("XDP table adopted as pinned: it holds the zone versions served");
                fp
            }
            Some(mut fp) => {
                if fp.table_unknown() {
                    info!("XDP: the pinned table holds other zone versions; rebuilding it");
                }
                install(&mut fp, compiled())?;
                crate::memory::release_freed();
                fp
            }
            // A program loaded anew has its maps sized from the table it
            // will hold, so the table is compiled first; it is written
            // into the maps while the kernel verifies the program.
            None => {
                let first = compiled();
                let capacity = Capacity {
                    served: Some(Served::of(&first.0)),
                    ..capacity
                };
                let fp =
                    FastPath::load_with_table(capacity, port, edns, pins, |fp| install(fp, first))?;
                crate::memory::release_freed();
                fp
            }
        };
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
        Ok(mut fp) => {
            if let Some(ring) = fp.take_tap_ring() {
                crate::dnstap::kernel::start(ring, tap.clone());
            }
            Ok(KernelTable::start(fp, snapshot, feed))
        }
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

pub(super) async fn log_counters(kernel: Option<&KernelTable>) {
    info!(
        udp_receive_drops = crate::sockets::udp_receive_drops(),
        "fallback counters"
    );
    let Some(k) = kernel else { return };
    match k.counters().await {
        Some(Ok(c)) => info!("xdp counters {c}"),
        Some(Err(e)) => warn!("xdp counters unreadable: {e}"),
        None => {}
    }
}

/// What `[dnstap]` asks of the tap (`None`: off); a section that does
/// not validate never gets here.
pub(super) fn dnstap_settings(
    config: &Config,
) -> Option<(crate::dnstap::Target, xdpdns_core::dnstap::Policy, usize)> {
    let d = config.dnstap.as_ref()?;
    Some((d.target(&config.base_dir).ok()?, d.policy().ok()?, d.queue))
}

/// The kernel's sampling, one in N per kind, under `[dnstap]` (none
/// when off).
pub(super) fn dnstap_kernel_every(config: &Config) -> [u32; xdpdns_common::tap::kind::COUNT] {
    dnstap_settings(config).map_or([0; xdpdns_common::tap::kind::COUNT], |(_, p, _)| {
        p.kernel_every
    })
}

/// The writer's `identity` and `version`: those `[identity]` answers
/// CH TXT queries with.
pub(super) fn dnstap_origin(config: &Config) -> xdpdns_core::dnstap::Origin {
    let id = config.identity();
    xdpdns_core::dnstap::Origin {
        identity: id.server_id.map(String::into_bytes),
        version: id.version.map(String::into_bytes),
    }
}
