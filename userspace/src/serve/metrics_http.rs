//! `GET /metrics` in the text exposition format (prometheus-client),
//! built at each scrape from the live counters.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use xdpdns_common::PassReason;

use crate::metrics::{rcode_name, Metrics};
use crate::server::ShutdownRx;
use crate::xdp::KernelTable;
use crate::zone::ZoneStore;

type Labels = Vec<(&'static str, String)>;

#[derive(Clone)]
pub(super) struct Scrape {
    pub metrics: Arc<Metrics>,
    pub router: Arc<crate::router::Router>,
    pub kernel: Option<KernelTable>,
}

/// Serves `/metrics` on `listener` until `stop`.
pub(super) async fn serve(
    listener: tokio::net::TcpListener,
    scrape: Scrape,
    mut stop: ShutdownRx,
) -> std::io::Result<()> {
    let app = axum::Router::new()
        .route("/metrics", axum::routing::get(metrics))
        .with_state(scrape);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await
}

async fn metrics(State(s): State<Scrape>) -> impl IntoResponse {
    let kernel = match &s.kernel {
        Some(k) => k.counters().await.and_then(Result::ok),
        None => None,
    };
    let text = render(&s.metrics, &s.router.store, kernel.as_ref());
    (
        [(
            CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
}

fn render(m: &Metrics, store: &ZoneStore, kernel: Option<&crate::xdp::Counters>) -> String {
    let mut reg = Registry::default();
    let queries = Family::<Labels, Counter>::default();
    for q in m.queries() {
        queries
            .get_or_create(&vec![
                ("path", "fallback".into()),
                ("transport", q.transport.into()),
                ("type", q.qtype.into()),
                ("rcode", rcode_name(q.rcode)),
            ])
            .inc_by(q.count);
    }
    let passed = Family::<Labels, Counter>::default();
    if let Some(k) = kernel {
        for (qtype, n) in [("A", k.answered_a), ("AAAA", k.answered_aaaa)] {
            queries
                .get_or_create(&vec![
                    ("path", "kernel".into()),
                    ("transport", "udp".into()),
                    ("type", qtype.into()),
                    ("rcode", "NOERROR".into()),
                ])
                .inc_by(n);
        }
        for (i, reason) in PASS_REASONS.iter().enumerate() {
            passed
                .get_or_create(&vec![("reason", (*reason).into())])
                .inc_by(k.passed[i]);
        }
    }
    reg.register(
        "xdpdns_queries",
        "Queries answered, by where (kernel or fallback), transport, type and RCODE",
        queries,
    );
    if kernel.is_some() {
        reg.register(
            "xdpdns_kernel_passed",
            "Queries the XDP program passed to the fallback, by reason",
            passed,
        );
    }
    let drops = Counter::<u64>::default();
    drops.inc_by(crate::server::udp_receive_drops());
    reg.register(
        "xdpdns_udp_receive_drops",
        "Queries dropped because a UDP socket's receive queue was full",
        drops,
    );
    let serial = Family::<Labels, Gauge>::default();
    let records = Family::<Labels, Gauge>::default();
    for zone in store.snapshot().zones() {
        let label = vec![("zone", zone.origin().to_string())];
        if let Some(n) = zone.serial() {
            serial.get_or_create(&label).set(i64::from(n));
        }
        records
            .get_or_create(&label)
            .set(zone.record_count() as i64);
    }
    reg.register(
        "xdpdns_zone_serial",
        "The SOA serial served, per zone",
        serial,
    );
    reg.register("xdpdns_zone_records", "Records served, per zone", records);
    let mut out = String::new();
    encode(&mut out, &reg).expect("writing to a String");
    out
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
