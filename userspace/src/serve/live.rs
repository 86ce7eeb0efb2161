//! The running server's parts as the operator's views see them: the
//! control socket's answers (`xdpdns ctl`) and `/metrics` both read from
//! one [`Live`], so the two never disagree.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use hickory_proto::rr::{LowerName, Name, RecordType};
use tracing::info;

use crate::clock::unix_secs;
use crate::config::Config;
use crate::control::protocol::{
    AnswerTableStatus, Counters, KernelStatus, LoadOutcome, RegistryInfo, Reloaded, SourceInfo,
    Status, ZoneInfo,
};
use crate::control::{Backend, Reply, Request};
use crate::metrics::rcode_name;
use crate::registry::service::RegistryHandle;
use crate::router::Router;
use crate::transfer::notify::Propagation;
use crate::xdp::{KernelState, WeakKernelTable};
use crate::zone::{load_zone_file, LoadLog, ZoneStore};

pub(super) struct Live {
    pub started: Instant,
    pub start_unix: u64,
    /// The zone store: serving's own, the one commit path.
    pub store: Arc<ZoneStore>,
    pub router: Arc<Router>,
    /// Weak: the stop detaches the program while views still exist.
    pub kernel: Option<WeakKernelTable>,
    /// Why the kernel path is off, when it is.
    pub xdp_off_reason: Option<String>,
    pub registry: Option<RegistryHandle>,
    pub propagation: Arc<Propagation>,
    pub loads: Arc<LoadLog>,
    /// The configuration in force (replaced by a reload).
    pub config: ArcSwap<Config>,
    pub listen: Vec<SocketAddr>,
    /// The anycast coupling, once started (after the views).
    pub anycast: std::sync::OnceLock<crate::anycast::Anycast>,
    /// Zones added and removed at runtime (`None`: no data directory).
    pub runtime: Option<Arc<crate::dynamic::RuntimeZones>>,
    /// dnstap, on or off.
    pub tap: Arc<crate::dnstap::Tap>,
}

impl Live {
    pub(super) async fn kernel_state(&self) -> Option<KernelState> {
        let kernel = self.kernel.as_ref()?.upgrade()?;
        let zone_ids = self.store.snapshot().zone_ids().names().len();
        kernel.state(zone_ids).await.and_then(Result::ok)
    }

    /// Answers so far (both paths), for `ctl status` and `ctl top`.
    pub(super) fn counters(&self, kernel: Option<&KernelState>) -> Counters {
        let mut c = Counters::default();
        let mut by_rcode = BTreeMap::new();
        for q in self.router.metrics.queries() {
            match q.transport {
                "tcp" => c.fallback_tcp += q.count,
                _ => c.fallback_udp += q.count,
            }
            *by_rcode.entry(rcode_name(q.rcode)).or_insert(0) += q.count;
        }
        if let Some(k) = kernel {
            let k = &k.counters;
            let noerror = k.answered_a
                + k.answered_aaaa
                + k.answered_other
                + k.nodata.iter().sum::<u64>()
                + k.referrals.iter().sum::<u64>();
            let nxdomain = k.nxdomain.iter().sum::<u64>();
            c.kernel = noerror + nxdomain;
            c.kernel_passed = k.passed.iter().sum();
            for (rcode, n) in [(0, noerror), (3, nxdomain)] {
                if n > 0 {
                    *by_rcode.entry(rcode_name(rcode)).or_insert(0) += n;
                }
            }
        }
        c.by_rcode = by_rcode;
        c.udp_receive_drops = crate::sockets::udp_receive_drops();
        c
    }

    async fn status(&self) -> Status {
        let kernel = self.kernel_state().await;
        let answers = self.counters(kernel.as_ref());
        let total = answers.kernel + answers.fallback_udp + answers.fallback_tcp;
        let snapshot = self.store.snapshot();
        Status {
            version: env!("CARGO_PKG_VERSION").into(),
            commit: env!("XDPDNS_GIT_COMMIT").into(),
            pid: std::process::id(),
            uptime_secs: self.started.elapsed().as_secs(),
            listen: self.listen.iter().map(|a| a.to_string()).collect(),
            xdp: kernel.map(|k| KernelStatus {
                interfaces: k
                    .attached
                    .iter()
                    .map(|(i, m)| (i.clone(), (*m).to_string()))
                    .collect(),
                generation: k.generation,
                entries: k.entries,
                bytes: k.bytes,
                left_out: k.left_out,
                healthy: k.healthy,
            }),
            xdp_off_reason: self.xdp_off_reason.clone(),
            kernel_share: if total > 0 {
                answers.kernel as f64 / total as f64
            } else {
                0.0
            },
            answers,
            zones: snapshot.zones().count(),
            records: snapshot.zones().map(|z| z.record_count()).sum(),
            zookeeper: self.registry.as_ref().and_then(source_info),
            dnstap: self
                .tap
                .status()
                .map(|t| crate::control::protocol::DnstapStatus {
                    target: t.target,
                    connected: t.connected,
                    written: t.written,
                    dropped: t.dropped,
                    kernel_samples: t.kernel_samples,
                }),
            answer_table: AnswerTableStatus {
                entries: self.router.hot.len(),
                current: self.router.hot.on_demand()
                    || self.router.hot.version() == Some(snapshot.version()),
                on_demand: self.router.hot.on_demand(),
            },
        }
    }

    /// Where each configured zone comes from.
    fn sources(config: &Config) -> HashMap<LowerName, String> {
        let mut out: HashMap<LowerName, String> = config
            .registry_zone_names()
            .map(|n| (LowerName::new(&n), "registry".to_string()))
            .collect();
        for z in &config.zones {
            let source = match &z.file {
                Some(f) => format!("file {}", f.display()),
                None => {
                    let p: Vec<String> = z.primaries.iter().map(|a| a.to_string()).collect();
                    format!("secondary of {}", p.join(","))
                }
            };
            out.insert(LowerName::new(&z.origin_name()), source);
        }
        out
    }

    pub(super) fn zones(&self) -> Vec<ZoneInfo> {
        let sources = Self::sources(&self.config.load());
        let now = unix_secs();
        self.store
            .snapshot()
            .zones()
            .map(|z| {
                let load = self.loads.get(z.origin_key());
                ZoneInfo {
                    origin: z.origin().to_string(),
                    serial: z.serial(),
                    records: z.record_count(),
                    source: sources
                        .get(z.origin_key())
                        .cloned()
                        .unwrap_or_else(|| "journal (no longer configured)".into()),
                    signed: z.apex().rrset(RecordType::DNSKEY).is_some(),
                    expired: z.is_expired(),
                    expires_in_secs: load
                        .as_ref()
                        .and_then(|l| l.expires_at)
                        .map(|t| t as i64 - now as i64),
                    last_load: load.map(|l| LoadOutcome {
                        at: l.at,
                        ok: l.ok,
                        detail: l.detail,
                    }),
                }
            })
            .collect()
    }

    pub(super) fn registry_info(&self) -> Option<RegistryInfo> {
        let handle = self.registry.as_ref()?;
        let view = handle.view();
        let reg = &view.registry;
        let mut instances = BTreeMap::new();
        for i in reg.instances.values() {
            let status = if i.reg.disabled {
                "disabled".to_string()
            } else {
                format!("{:?}", i.status).to_lowercase()
            };
            *instances.entry(status).or_insert(0) += 1;
        }
        let stats = handle.stats();
        Some(RegistryInfo {
            instances,
            services: reg.services().len(),
            owners_disabled: reg.owners.values().filter(|e| !**e).count(),
            pending_withdrawals: crate::registry::health::held_down(reg),
            journal_bytes: stats.journal_bytes.load(Ordering::Relaxed),
            lease_expiries: stats.lease_expiries.load(Ordering::Relaxed),
            zookeeper: source_info(handle),
        })
    }

    /// `ctl zone reload NAME`: a zone file is read again and committed
    /// (its old version keeps serving if it fails); a secondary zone
    /// checks its primaries now.
    async fn reload_zone(self: &Arc<Self>, zone: &str) -> Result<Reloaded, String> {
        let name = Name::from_ascii(zone)
            .map(|mut n| {
                n.set_fqdn(true);
                n
            })
            .map_err(|e| format!("{zone:?} is not a domain name: {e}"))?;
        let key = LowerName::new(&name);
        let config = self.config.load_full();
        let Some(zc) = config
            .zones
            .iter()
            .find(|z| LowerName::new(&z.origin_name()) == key)
        else {
            if config
                .registry_zone_names()
                .any(|n| LowerName::new(&n) == key)
            {
                return Err(format!(
                    "{name} is generated by the registry; it follows registrations, nothing to reload"
                ));
            }
            // A followed catalog's member: a secondary zone not configured.
            if !self.router.transfer.load().notify_acl.contains_key(&key) {
                return Err(format!("{name} is not a configured zone"));
            }
            return self.refresh_secondary(name);
        };
        let Some(file) = zc.file.clone() else {
            return self.refresh_secondary(name);
        };
        let live = self.clone();
        let origin = name.clone();
        crate::background::in_background("zone-reload", move || live.load_file(&origin, &file))
            .await
            .map_err(|e| e.to_string())?
            .map(|detail| Reloaded {
                zone: name.to_string(),
                detail,
            })
    }

    /// `ctl keys ZONE`: the keys of a zone signed online; with
    /// `ds_published`, the operator's word that the parent serves that
    /// key's DS first.
    async fn keys(
        &self,
        zone: &str,
        ds_published: Option<u16>,
    ) -> Result<Vec<crate::signing::KeyInfo>, String> {
        let mut name =
            Name::from_ascii(zone).map_err(|e| format!("{zone:?} is not a domain name: {e}"))?;
        name.set_fqdn(true);
        let config = self.config.load_full();
        let key = LowerName::new(&name);
        let runtime_signed = self.runtime.as_ref().is_some_and(|r| {
            r.list().iter().any(|z| {
                z.dnssec_policy.is_some()
                    && Name::from_ascii(&z.name).is_ok_and(|n| LowerName::new(&n) == key)
            })
        });
        if !runtime_signed
            && !config
                .signed_zones()
                .iter()
                .any(|z| LowerName::new(&z.zone) == key)
        {
            return Err(format!("{name} is not signed online (no dnssec_policy)"));
        }
        let dir = config
            .transfer
            .data_dir
            .as_ref()
            .ok_or("no transfer.data_dir")?;
        if let Some(tag) = ds_published {
            let now = crate::clock::unix_secs();
            crate::signing::ds_published(dir, &name, tag, now)
                .await
                .map_err(|e| e.to_string())?;
        }
        crate::signing::key_info(dir, &name).map_err(|e| e.to_string())
    }

    /// A secondary zone checks its primaries now.
    fn refresh_secondary(&self, name: Name) -> Result<Reloaded, String> {
        let sink = self
            .router
            .notify_sink
            .get()
            .ok_or("secondary zones are not running yet")?;
        sink.notified(&name);
        Ok(Reloaded {
            zone: name.to_string(),
            detail: "refresh from the primaries started (see `ctl zones`)".into(),
        })
    }

    fn load_file(&self, origin: &Name, file: &Path) -> Result<String, String> {
        let now = unix_secs();
        match load_zone_file(file, origin) {
            Ok(zone) => {
                let diffs = self.store.replace_zones(vec![zone], &[], now);
                let serial = self
                    .store
                    .snapshot()
                    .zone(&LowerName::new(origin))
                    .and_then(|z| z.serial());
                let detail = match diffs.first() {
                    Some(d) => format!(
                        "reloaded: serial {} ({} records removed, {} added)",
                        serial.unwrap_or(0),
                        d.removed.len(),
                        d.added.len()
                    ),
                    None => format!("unchanged at serial {}", serial.unwrap_or(0)),
                };
                info!(zone = %origin, "{detail} (xdpdns ctl)");
                self.loads.record(origin, now, Ok(detail.clone()));
                Ok(detail)
            }
            Err(e) => {
                let e = format!("{e}; the previous version keeps serving");
                self.loads.record(origin, now, Err(e.clone()));
                Err(e)
            }
        }
    }
}

/// The control socket's answers.
pub(super) struct Control(pub Arc<Live>);

impl Backend for Control {
    async fn handle(&self, request: Request) -> Reply {
        let live = &self.0;
        match request {
            Request::Status => Reply::ok(&live.status().await),
            Request::Zones => Reply::ok(&live.zones()),
            Request::ZoneReload { zone } => match live.reload_zone(&zone).await {
                Ok(r) => Reply::ok(&r),
                Err(e) => Reply::Error(e),
            },
            Request::ZoneAdd {
                name,
                ns,
                hostmaster,
                zone,
                dnssec_policy,
            } => match &live.runtime {
                None => Reply::Error("zones added at runtime need [transfer] data_dir".into()),
                Some(r) => {
                    let req = crate::dynamic::runtime::NewZone {
                        name,
                        ns,
                        hostmaster,
                        zone,
                        dnssec_policy,
                    };
                    match r.add(req).await {
                        Ok(z) => Reply::ok(&z),
                        Err(e) => Reply::Error(e.to_string()),
                    }
                }
            },
            Request::ZoneRemove { zone } => match &live.runtime {
                None => Reply::Error("zones added at runtime need [transfer] data_dir".into()),
                Some(r) => match r.remove(&zone).await {
                    Ok(()) => Reply::ok(&format!("{zone} removed")),
                    Err(e) => Reply::Error(e.to_string()),
                },
            },
            Request::Secondaries => Reply::ok(&live.propagation.statuses()),
            Request::Keys { zone, ds_published } => match live.keys(&zone, ds_published).await {
                Ok(keys) => Reply::ok(&keys),
                Err(e) => Reply::Error(e),
            },
            Request::Registry => match live.registry_info() {
                Some(r) => Reply::ok(&r),
                None => Reply::Error("no [registry] configured".into()),
            },
            Request::Counters => {
                let kernel = live.kernel_state().await;
                Reply::ok(&live.counters(kernel.as_ref()))
            }
            Request::Drain | Request::Resume => match live.anycast.get() {
                None => Reply::Error("no [anycast] configured".into()),
                Some(a) if request == Request::Drain => {
                    a.drain().await;
                    Reply::ok(&"withdrawn")
                }
                Some(a) => {
                    a.resume().await;
                    Reply::ok(&"resumed: announced after rise passing self-checks")
                }
            },
        }
    }
}

/// The ZooKeeper source's state, when one is configured.
fn source_info(handle: &RegistryHandle) -> Option<SourceInfo> {
    let s = &handle.stats().zookeeper;
    let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    s.enabled.load(Ordering::Relaxed).then(|| SourceInfo {
        stale: s.stale.load(Ordering::Relaxed),
        nodes: n(&s.nodes),
        mirrored: n(&s.mirrored),
        skipped: n(&s.skipped),
        sessions: n(&s.sessions),
        writes: n(&s.writes),
        leaving: n(&s.leaving),
    })
}
