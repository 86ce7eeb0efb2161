//! What the API's status page and `/v1/status` read from the running
//! server: the same counters as `/metrics` and `xdpdns ctl`, from the
//! same [`Live`].

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use hickory_proto::rr::LowerName;
use xdpdns_common::PassReason;

use super::live::Live;
use crate::api::{
    Answers, AnycastState, Attached, Attacks, KernelPath, RrlCounts, ServerStatus, StatusSource,
    ZoneExtra,
};
use crate::clock::{unix_ms, unix_secs};
use crate::xdp::KernelState;

pub(super) struct LiveStatus(pub Arc<Live>);

impl StatusSource for LiveStatus {
    fn status(&self) -> Pin<Box<dyn Future<Output = ServerStatus> + Send + '_>> {
        Box::pin(async move {
            let live = &self.0;
            let kernel = live.kernel_state().await;
            status(live, kernel.as_ref())
        })
    }
}

fn status(live: &Live, kernel: Option<&KernelState>) -> ServerStatus {
    let c = live.counters(kernel);
    let m = &live.router.metrics;
    let rcode = |name: &str| c.by_rcode.get(name).copied().unwrap_or(0);
    let passed = |r: PassReason| kernel.map_or(0, |k| k.counters.passed(r));
    let config = live.config.load();
    ServerStatus {
        available: true,
        at_ms: unix_ms(),
        uptime_secs: live.started.elapsed().as_secs(),
        answers: Answers {
            kernel: c.kernel,
            fallback_udp: c.fallback_udp,
            fallback_tcp: c.fallback_tcp,
        },
        kernel: kernel.map(|k| KernelPath {
            attached: k
                .attached
                .iter()
                .map(|(interface, mode)| Attached {
                    interface: interface.clone(),
                    mode: (*mode).to_string(),
                })
                .collect(),
            entries: k.entries,
            generation: k.generation,
            healthy: k.healthy,
            passed: c.kernel_passed,
        }),
        xdp_off_reason: live.xdp_off_reason.clone(),
        rrl_fallback: live.router.rrl.get().map(|l| {
            let n = &l.counts;
            RrlCounts {
                limited: n.limited.load(Ordering::Relaxed),
                slipped: n.slipped.load(Ordering::Relaxed),
                dropped: n.dropped.load(Ordering::Relaxed),
                exempt: n.exempt.load(Ordering::Relaxed),
            }
        }),
        rrl_kernel: kernel.filter(|_| live.router.rrl.get().is_some()).map(|k| {
            let [limited, slipped, dropped, exempt] = k.counters.rrl;
            RrlCounts {
                limited,
                slipped,
                dropped,
                exempt,
            }
        }),
        attacks: Attacks {
            udp_receive_drops: c.udp_receive_drops,
            tcp_refused: m.tcp.refused.load(Ordering::Relaxed),
            tcp_idle_closed: m.tcp.idle_closed.load(Ordering::Relaxed),
            formerr: rcode("FORMERR"),
            refused: rcode("REFUSED"),
            kernel_parse_errors: passed(PassReason::ParseError),
            kernel_bad_sources: passed(PassReason::Source),
        },
        anycast: config.anycast.as_ref().map(|a| AnycastState {
            interface: a.interface.clone(),
            addresses: a.addresses.iter().map(|n| n.to_string()).collect(),
            announced: live.anycast.get().is_some_and(|h| *h.announced.borrow()),
        }),
        zones: zones(live, kernel),
    }
}

/// Each zone's source, answers and freshness, by origin in lower case.
fn zones(live: &Live, kernel: Option<&KernelState>) -> HashMap<String, ZoneExtra> {
    let config = live.config.load();
    let mut kinds: HashMap<LowerName, &str> = config
        .registry_zone_names()
        .map(|n| (LowerName::new(&n), "registry"))
        .collect();
    for z in &config.zones {
        let kind = if z.file.is_some() {
            "file"
        } else {
            "secondary"
        };
        kinds.insert(LowerName::new(&z.origin_name()), kind);
    }
    if let Some(c) = config.catalog_origin() {
        kinds.insert(LowerName::new(&c), "catalog");
    }
    let followed = live.router.transfer.load();
    let snapshot = live.store.snapshot();
    let fallback = crate::metrics::zones::fallback_counts();
    let ids: HashMap<&LowerName, usize> = snapshot
        .zone_ids()
        .names()
        .iter()
        .enumerate()
        .map(|(i, n)| (n, i + 1))
        .collect();
    let now = unix_secs();
    snapshot
        .zones()
        .map(|z| {
            let key = z.origin_key();
            let source = match kinds.get(key) {
                Some(kind) => *kind,
                None if live.runtime.as_ref().is_some_and(|r| r.contains(key)) => "runtime",
                None if followed.notify_acl.contains_key(key) => "catalog member",
                None => "journal",
            };
            let load = live.loads.get(key);
            let id = ids.get(key).copied();
            let extra = ZoneExtra {
                source: source.to_string(),
                kernel_answers: kernel
                    .map(|k| id.and_then(|i| k.zone_queries.get(i)).copied().unwrap_or(0)),
                fallback_answers: id.and_then(|i| fallback.get(i)).copied().unwrap_or(0),
                expires_in_secs: load
                    .as_ref()
                    .and_then(|l| l.expires_at)
                    .map(|t| t as i64 - now as i64),
                load_failed: load.is_some_and(|l| !l.ok),
            };
            (z.origin().to_string().to_ascii_lowercase(), extra)
        })
        .collect()
}
