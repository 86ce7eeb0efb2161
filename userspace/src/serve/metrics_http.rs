//! `GET /metrics` in the text exposition format (prometheus-client),
//! built at each scrape from the live counters (see [`Live`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;
use xdpdns_common::PassReason;

use super::live::Live;
use crate::handler::Transport;
use crate::metrics::{rcode_name, HistogramSnapshot};
use crate::sockets::ShutdownRx;
use crate::xdp::KernelState;

type Labels = Vec<(&'static str, String)>;

/// Serves `/metrics` on `listener` until `stop`.
pub(super) async fn serve(
    listener: tokio::net::TcpListener,
    live: Arc<Live>,
    mut stop: ShutdownRx,
) -> std::io::Result<()> {
    let app = axum::Router::new()
        .route("/metrics", axum::routing::get(metrics))
        .with_state(live);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await
}

/// OpenMetrics to clients that ask for it (Prometheus does), the classic
/// text format (0.0.4) to the rest (curl, `promtool check metrics`), as
/// the Go client library does.
async fn metrics(State(live): State<Arc<Live>>, headers: HeaderMap) -> impl IntoResponse {
    let kernel = live.kernel_state().await;
    let text = render(&live, kernel.as_ref());
    let openmetrics = headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    if openmetrics {
        (
            [(
                CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
    } else {
        (
            [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
            classic_text(&text),
        )
    }
}

/// The classic text format of an OpenMetrics exposition: a counter's
/// HELP and TYPE name its `_total` series, and there is no `# EOF`.
fn classic_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        match meta {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let name = if counters.contains(name) {
                    format!("{name}_total")
                } else {
                    name.to_string()
                };
                out.push_str(&format!("{prefix}{name} {tail}\n"));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// A histogram read from counters kept elsewhere.
#[derive(Debug, Default)]
struct Histogram(std::sync::Mutex<Option<HistogramSnapshot>>);

impl Histogram {
    fn of(s: HistogramSnapshot) -> Self {
        Histogram(std::sync::Mutex::new(Some(s)))
    }
}

impl TypedMetric for Histogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Histogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let s = self.0.lock().expect("histogram lock");
        let s = s.clone().unwrap_or_default();
        encoder.encode_histogram::<NoLabelSet>(s.sum_secs, s.count, &s.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

fn gauge(reg: &mut Registry, name: &str, help: &str, value: i64) {
    let g = Gauge::<i64>::default();
    g.set(value);
    reg.register(name, help, g);
}

fn counter(reg: &mut Registry, name: &str, help: &str, value: u64) {
    let c = Counter::<u64>::default();
    c.inc_by(value);
    reg.register(name, help, c);
}

fn render(live: &Live, kernel: Option<&KernelState>) -> String {
    let mut reg = Registry::default();
    let info = Family::<Labels, Gauge>::default();
    info.get_or_create(&vec![
        ("version", env!("CARGO_PKG_VERSION").into()),
        ("commit", env!("XDPDNS_GIT_COMMIT").into()),
    ])
    .set(1);
    reg.register(
        "xdpdns_build_info",
        "Version and git commit of this build",
        info,
    );
    gauge(
        &mut reg,
        "xdpdns_start_time_seconds",
        "When the server started, in Unix seconds",
        live.start_unix as i64,
    );
    queries(&mut reg, live, kernel);
    if let Some(k) = kernel {
        kernel_table(&mut reg, k);
    }
    fallback(&mut reg, live);
    rate_limiting(&mut reg, live, kernel);
    zones(&mut reg, live, kernel);
    if let Some(r) = &live.registry {
        registry(&mut reg, live, r);
    }
    transfers(&mut reg, live);
    dnstap(&mut reg, live, kernel);
    let mut out = String::new();
    encode(&mut out, &reg).expect("writing to a String");
    out
}

fn queries(reg: &mut Registry, live: &Live, kernel: Option<&KernelState>) {
    let queries = Family::<Labels, Counter>::default();
    let series = |path: &str, transport: &str, qtype: &str, rcode: String| {
        vec![
            ("path", path.into()),
            ("transport", transport.into()),
            ("type", qtype.into()),
            ("rcode", rcode),
        ]
    };
    for q in live.router.metrics.queries() {
        queries
            .get_or_create(&series(
                "fallback",
                q.transport,
                q.qtype,
                rcode_name(q.rcode),
            ))
            .inc_by(q.count);
    }
    if let Some(k) = kernel {
        let c = &k.counters;
        // The kernel counts answers to types other than A and AAAA
        // together, as `other`.
        for (i, qtype) in ["A", "AAAA", "other"].into_iter().enumerate() {
            let answered =
                [c.answered_a, c.answered_aaaa, c.answered_other][i] + c.nodata[i] + c.referrals[i];
            if answered > 0 || i < 2 {
                queries
                    .get_or_create(&series("kernel", "udp", qtype, rcode_name(0)))
                    .inc_by(answered);
            }
            if c.nxdomain[i] > 0 {
                queries
                    .get_or_create(&series("kernel", "udp", qtype, rcode_name(3)))
                    .inc_by(c.nxdomain[i]);
            }
        }
    }
    reg.register(
        "xdpdns_queries",
        "Queries answered, by where (kernel or fallback), transport, type and RCODE",
        queries,
    );
    if let Some(k) = kernel {
        let passed = Family::<Labels, Counter>::default();
        for (i, reason) in PASS_REASONS.iter().enumerate() {
            passed
                .get_or_create(&vec![("reason", (*reason).into())])
                .inc_by(k.counters.passed[i]);
        }
        reg.register(
            "xdpdns_kernel_passed",
            "Queries the XDP program passed to the fallback, by reason",
            passed,
        );
        let signed = Counter::<u64>::default();
        signed.inc_by(k.counters.answered_signed);
        reg.register(
            "xdpdns_kernel_signed_answers",
            "Kernel answers with signatures (DO=1 in a signed zone), counted in queries too",
            signed,
        );
    }
}

/// dnstap: what was written, what was dropped and why, the kernel's
/// samples by kind and those its ring buffer lost.
fn dnstap(reg: &mut Registry, live: &Live, kernel: Option<&KernelState>) {
    use std::sync::atomic::Ordering::Relaxed;
    let s = &live.tap.stats;
    counter(
        reg,
        "xdpdns_dnstap_written",
        "dnstap messages written to the collector",
        s.written.load(Relaxed),
    );
    let dropped = Family::<Labels, Counter>::default();
    for (reason, v) in [
        ("queue_full", &s.dropped_queue),
        ("write_failed", &s.dropped_write),
    ] {
        dropped
            .get_or_create(&vec![("reason", reason.into())])
            .inc_by(v.load(Relaxed));
    }
    reg.register(
        "xdpdns_dnstap_dropped",
        "dnstap messages dropped: the queue was full (collector slow or gone), or the connection broke while they were written",
        dropped,
    );
    gauge(
        reg,
        "xdpdns_dnstap_connected",
        "1 while a dnstap collector is connected",
        i64::from(s.connected.load(Relaxed)),
    );
    let samples = Family::<Labels, Counter>::default();
    for (i, v) in s.kernel_samples.iter().enumerate() {
        let kind = xdpdns_core::dnstap::Kind::from_u32(i as u32).map_or("other", |k| k.label());
        samples
            .get_or_create(&vec![("kind", kind.into())])
            .inc_by(v.load(Relaxed));
    }
    reg.register(
        "xdpdns_dnstap_kernel_samples",
        "Samples of the kernel's outcomes read from its ring buffer, by kind",
        samples,
    );
    if let Some(k) = kernel {
        counter(
            reg,
            "xdpdns_dnstap_kernel_lost",
            "Kernel samples lost because the ring buffer was full",
            k.counters.tap_lost,
        );
    }
}

/// `[rrl]`'s counters, by path: the fallback's limiter and the kernel's.
fn rate_limiting(reg: &mut Registry, live: &Live, kernel: Option<&KernelState>) {
    let Some(fallback) = live.router.rrl.get() else {
        return;
    };
    let c = &fallback.counts;
    let ours = [&c.limited, &c.slipped, &c.dropped, &c.exempt].map(|v| v.load(Ordering::Relaxed));
    let names = [
        ("limited", "over their rate"),
        ("slipped", "limited, sent truncated (TC=1)"),
        ("dropped", "limited, dropped"),
        ("exempt", "exempt by a valid server cookie"),
    ];
    for (i, (name, help)) in names.into_iter().enumerate() {
        let family = Family::<Labels, Counter>::default();
        family
            .get_or_create(&vec![("path", "fallback".into())])
            .inc_by(ours[i]);
        if let Some(k) = kernel {
            family
                .get_or_create(&vec![("path", "kernel".into())])
                .inc_by(k.counters.rrl[i]);
        }
        reg.register(
            format!("xdpdns_rrl_{name}"),
            format!("UDP responses {help}, by path (kernel or fallback)"),
            family,
        );
    }
}

fn kernel_table(reg: &mut Registry, k: &KernelState) {
    gauge(
        reg,
        "xdpdns_kernel_table_generation",
        "Generation of the kernel answer table in service",
        i64::from(k.generation),
    );
    gauge(
        reg,
        "xdpdns_kernel_table_entries",
        "(name, type) entries in the kernel answer table",
        k.entries as i64,
    );
    gauge(
        reg,
        "xdpdns_kernel_table_bytes",
        "Kernel memory of the answer maps",
        k.bytes as i64,
    );
    let attached = Family::<Labels, Gauge>::default();
    for (iface, mode) in &k.attached {
        attached
            .get_or_create(&vec![
                ("interface", iface.clone()),
                ("mode", (*mode).into()),
            ])
            .set(1);
    }
    reg.register(
        "xdpdns_xdp_attached",
        "Interfaces the XDP program is attached to, with its mode",
        attached,
    );
}

fn fallback(reg: &mut Registry, live: &Live) {
    let m = &live.router.metrics;
    let (udp, tcp) = m.truncated();
    let truncated = Family::<Labels, Counter>::default();
    truncated
        .get_or_create(&vec![("transport", "udp".into())])
        .inc_by(udp);
    truncated
        .get_or_create(&vec![("transport", "tcp".into())])
        .inc_by(tcp);
    reg.register(
        "xdpdns_truncated",
        "Replies sent with TC set (the client retries over TCP)",
        truncated,
    );
    counter(
        reg,
        "xdpdns_udp_receive_drops",
        "Queries dropped because a UDP socket's receive queue was full",
        crate::sockets::udp_receive_drops(),
    );
    let t = &m.tcp;
    gauge(
        reg,
        "xdpdns_tcp_connections",
        "DNS over TCP connections open",
        t.open.load(Ordering::Relaxed),
    );
    for (name, help, v) in [
        ("accepted", "accepted", &t.accepted),
        (
            "refused",
            "closed at once at server.tcp_max_connections",
            &t.refused,
        ),
        (
            "idle_closed",
            "closed after server.tcp_idle_timeout_ms without a query",
            &t.idle_closed,
        ),
    ] {
        counter(
            reg,
            &format!("xdpdns_tcp_connections_{name}"),
            &format!("DNS over TCP connections {help}"),
            v.load(Ordering::Relaxed),
        );
    }
    let latency = Family::<Labels, Histogram>::new_with_constructor(Histogram::default);
    for (label, transport) in [("udp", Transport::Udp), ("tcp", Transport::Tcp)] {
        *latency
            .get_or_create(&vec![("transport", label.into())])
            .0
            .lock()
            .expect("histogram lock") = Some(m.latency(transport));
    }
    reg.register(
        "xdpdns_answer_duration_seconds",
        "Fallback: time from reading a query to handing its answer to the socket",
        latency,
    );
}

fn zones(reg: &mut Registry, live: &Live, kernel: Option<&KernelState>) {
    let serial = Family::<Labels, Gauge>::default();
    let records = Family::<Labels, Gauge>::default();
    let loaded_at = Family::<Labels, Gauge>::default();
    let loaded_ok = Family::<Labels, Gauge>::default();
    let expires = Family::<Labels, Gauge>::default();
    for z in live.zones() {
        let label = vec![("zone", z.origin.clone())];
        if let Some(n) = z.serial {
            serial.get_or_create(&label).set(i64::from(n));
        }
        records.get_or_create(&label).set(z.records as i64);
        if let Some(l) = &z.last_load {
            loaded_at.get_or_create(&label).set(l.at as i64);
            loaded_ok.get_or_create(&label).set(i64::from(l.ok));
        }
        if let Some(s) = z.expires_in_secs {
            expires.get_or_create(&label).set(s);
        }
    }
    let queries = Family::<Labels, Counter>::default();
    let fallback = crate::metrics::zones::fallback_counts();
    let snapshot = live.store.snapshot();
    for (i, zone) in snapshot.zone_ids().names().iter().enumerate() {
        let id = i + 1;
        let name = zone.to_string();
        let label = |path: &str| vec![("zone", name.clone()), ("path", path.into())];
        queries
            .get_or_create(&label("fallback"))
            .inc_by(fallback.get(id).copied().unwrap_or(0));
        if let Some(k) = kernel {
            queries
                .get_or_create(&label("kernel"))
                .inc_by(k.zone_queries.get(id).copied().unwrap_or(0));
        }
    }
    reg.register(
        "xdpdns_zone_queries",
        "Queries answered per zone (QUERY opcode; transfers and NOTIFY aside), kernel and fallback",
        queries,
    );
    reg.register(
        "xdpdns_zone_serial",
        "The SOA serial served, per zone",
        serial,
    );
    reg.register("xdpdns_zone_records", "Records served, per zone", records);
    reg.register(
        "xdpdns_zone_last_load_timestamp_seconds",
        "When the zone's file was last loaded or its primaries last asked (Unix seconds)",
        loaded_at,
    );
    reg.register(
        "xdpdns_zone_last_load_success",
        "1 if that last load or refresh succeeded, 0 if it failed (the old version serves)",
        loaded_ok,
    );
    reg.register(
        "xdpdns_zone_expires_in_seconds",
        "Secondary zones: time left before the copy expires without a refresh",
        expires,
    );
}

fn registry(reg: &mut Registry, live: &Live, handle: &crate::registry::service::RegistryHandle) {
    let Some(info) = live.registry_info() else {
        return;
    };
    let instances = Family::<Labels, Gauge>::default();
    for status in ["up", "down", "disabled"] {
        instances
            .get_or_create(&vec![("status", status.into())])
            .set(info.instances.get(status).copied().unwrap_or(0) as i64);
    }
    reg.register(
        "xdpdns_registry_instances",
        "Registered instances by status",
        instances,
    );
    gauge(
        reg,
        "xdpdns_registry_services",
        "Services with at least one instance",
        info.services as i64,
    );
    gauge(
        reg,
        "xdpdns_registry_pending_withdrawals",
        "Instances reported down that hysteresis still keeps in answers",
        info.pending_withdrawals as i64,
    );
    gauge(
        reg,
        "xdpdns_registry_journal_bytes",
        "Size of the registry journal",
        info.journal_bytes as i64,
    );
    counter(
        reg,
        "xdpdns_registry_lease_expiries",
        "Instances removed because their lease ran out",
        info.lease_expiries,
    );
    if let Some(zk) = &info.zookeeper {
        gauge(
            reg,
            "xdpdns_registry_zookeeper_stale",
            "1 while the ZooKeeper source has no session or has not read the tree in full (its instances are served as last read)",
            i64::from(zk.stale),
        );
        gauge(
            reg,
            "xdpdns_registry_zookeeper_nodes",
            "Nodes under the mirrored ZooKeeper domains at the last full read",
            zk.nodes as i64,
        );
        gauge(
            reg,
            "xdpdns_registry_zookeeper_mirrored",
            "Instances mirrored from ZooKeeper host records",
            zk.mirrored as i64,
        );
        counter(
            reg,
            "xdpdns_registry_zookeeper_skipped",
            "ZooKeeper records read that could not be served (bad JSON, unknown type, missing address, name outside the registry zones)",
            zk.skipped,
        );
        counter(
            reg,
            "xdpdns_registry_zookeeper_sessions",
            "ZooKeeper sessions established",
            zk.sessions,
        );
        counter(
            reg,
            "xdpdns_registry_zookeeper_writes",
            "Registry writes made from ZooKeeper changes",
            zk.writes,
        );
    }
    reg.register(
        "xdpdns_registry_write_duration_seconds",
        "Registry API writes: submission to acknowledgement (journal synced)",
        Histogram::of(handle.stats().write_latency.snapshot()),
    );
}

fn transfers(reg: &mut Registry, live: &Live) {
    let in_sync = Family::<Labels, Gauge>::default();
    let lag = Family::<
        Labels,
        prometheus_client::metrics::gauge::Gauge<f64, std::sync::atomic::AtomicU64>,
    >::default();
    let failures = Family::<Labels, Gauge>::default();
    let behind = Family::<Labels, Gauge>::default();
    for p in live.propagation.statuses() {
        let label = vec![("zone", p.zone.clone()), ("secondary", p.secondary.clone())];
        in_sync.get_or_create(&label).set(i64::from(p.in_sync));
        behind
            .get_or_create(&vec![("zone", p.zone.clone())])
            .inc_by(i64::from(!p.in_sync));
        if let Some(ms) = p.lag_ms {
            lag.get_or_create(&label).set(ms as f64 / 1e3);
        }
        failures.get_or_create(&label).set(i64::from(p.failures));
    }
    reg.register(
        "xdpdns_secondary_in_sync",
        "1 when the secondary serves our serial",
        in_sync,
    );
    reg.register(
        "xdpdns_secondary_lag_seconds",
        "Publish-to-served time of the last serial that reached the secondary",
        lag,
    );
    reg.register(
        "xdpdns_secondary_failures",
        "Failed NOTIFYs and polls since the last success",
        failures,
    );
    reg.register(
        "xdpdns_zone_secondaries_behind",
        "Secondaries of the zone not yet serving its serial",
        behind,
    );
    let p = &live.propagation;
    counter(
        reg,
        "xdpdns_notify_sent",
        "NOTIFY messages sent to secondaries, retries included",
        p.notifies_sent.load(Ordering::Relaxed),
    );
    counter(
        reg,
        "xdpdns_notify_acknowledged",
        "NOTIFY messages secondaries acknowledged",
        p.notifies_acknowledged.load(Ordering::Relaxed),
    );
    let incoming = Family::<Labels, Counter>::default();
    for (zone, outcome, n) in live.loads.transfers() {
        incoming
            .get_or_create(&vec![("zone", zone), ("outcome", outcome.label().into())])
            .inc_by(n);
    }
    reg.register(
        "xdpdns_transfers_in",
        "Secondary zones' refreshes from their primaries, by outcome",
        incoming,
    );
}

/// Label values of [`PassReason`], in its order.
const PASS_REASONS: [&str; PassReason::COUNT] = [
    "not_dns",
    "not_query",
    "miss",
    "query_type",
    "edns",
    "size",
    "parse_error",
    "source",
    "destination",
];

#[cfg(test)]
mod tests {
    use super::classic_text;

    #[test]
    fn the_classic_format_names_counters_by_their_total_series() {
        let om = "# HELP xdpdns_queries Queries answered.\n# TYPE xdpdns_queries counter\n\
                  xdpdns_queries_total{path=\"kernel\"} 3\n# HELP xdpdns_zone_serial Serial.\n\
                  # TYPE xdpdns_zone_serial gauge\nxdpdns_zone_serial 5\n# EOF\n";
        assert_eq!(
            classic_text(om),
            "# HELP xdpdns_queries_total Queries answered.\n# TYPE xdpdns_queries_total counter\n\
             xdpdns_queries_total{path=\"kernel\"} 3\n# HELP xdpdns_zone_serial Serial.\n\
             # TYPE xdpdns_zone_serial gauge\nxdpdns_zone_serial 5\n"
        );
    }
}
