//! The registry's HTTP/JSON API (axum): a thin shell over
//! [`RegistryHandle`]. Writes need `Authorization: Bearer <token>`; reads
//! too unless `public_reads`. Every error is JSON `{"error", "field"}` with
//! the status that fits: 400 unreadable or unknown input, 401 no or wrong
//! token, 404 unknown instance, 422 a field that parses but is not
//! acceptable, 503 shutting down. The API is described in `openapi.json`,
//! served at `/v1/openapi.json`. The same listener serves the status
//! page at `/` (`status`), which reads through the same filters
//! (`views`) as the JSON reads.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::watch;

mod listener;
mod state;
mod status;
mod views;
mod zones;

pub use listener::ConnectionLimits;
use state::{authorize, parse, TimedBody};
pub use state::{ApiError, ApiState};
pub use status::model::{
    Answers, AnycastState, Attached, Attacks, KernelPath, RrlCounts, ServerStatus, StatusHook,
    StatusSource, ZoneExtra,
};
use views::{instance_view, reader, shows, InstanceView};

use crate::registry::model::InstanceSpec;
use crate::registry::naming::Networks;
use crate::registry::service::Op;
use crate::registry::{RegistryError, Status};

/// The OpenAPI 3 description of this API.
pub const OPENAPI: &str = include_str!("../../openapi.json");

pub fn router(state: ApiState) -> Router {
    Router::new()
        .route("/v1/instances", get(list_instances))
        .route(
            "/v1/instances/{id}",
            put(register).get(get_instance).delete(deregister),
        )
        .route("/v1/instances/{id}/heartbeat", post(heartbeat))
        .route("/v1/instances/{id}/status", put(set_status))
        .route("/v1/owners/{owner}", put(set_owner))
        .route("/v1/services", get(list_services))
        .route("/v1/zones", get(list_zones).post(zones::add_zone))
        .route(
            "/v1/zones/{name}",
            get(zones::get_zone).delete(zones::remove_zone),
        )
        .route("/v1/openapi.json", get(openapi))
        .route("/v1/status", get(status::counters))
        // The status page (HTML, for browsers; see status/mod.rs).
        .route("/", get(status::page))
        .route("/ui/tables", get(status::tables))
        .route("/ui/counters", get(status::page_counters))
        .route("/ui/app.js", get(status::script))
        .route("/ui/style.css", get(status::style))
        .fallback(|| async {
            (
                StatusCode::NOT_FOUND,
                Json(json!({"error": "no such endpoint (see /v1/openapi.json)", "field": null})),
            )
        })
        .layer(DefaultBodyLimit::max(state.limits.max_body_bytes))
        .with_state(state)
}

/// Serves the API on `listener` until `stop` flips, within the
/// connection limits of `state.limits`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: ApiState,
    stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let l = state.limits;
    let limits = ConnectionLimits {
        max_connections: l.max_connections,
        max_connections_per_address: l.max_connections_per_address,
        header_timeout: Duration::from_millis(l.header_timeout_ms),
    };
    listener::serve(listener, router(state), limits, stop).await
}

pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

async fn written(state: &ApiState, op: Op) -> Result<Response, ApiError> {
    match state.registry.write(op).await? {
        Some(inst) => {
            let view = state.registry.view();
            Ok(Json(instance_view(&view, &inst)).into_response())
        }
        None => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}

async fn register(
    State(s): State<ApiState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    TimedBody(body): TimedBody,
) -> Result<Response, ApiError> {
    authorize(&s, &headers, true)?;
    let spec: InstanceSpec = parse(&body?)?;
    s.limits.check(&spec)?;
    written(
        &s,
        Op::Register {
            id,
            spec: Box::new(spec),
        },
    )
    .await
}

async fn deregister(
    State(s): State<ApiState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    authorize(&s, &headers, true)?;
    written(&s, Op::Deregister { id }).await
}

async fn heartbeat(
    State(s): State<ApiState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    authorize(&s, &headers, true)?;
    written(&s, Op::Heartbeat { id }).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StatusBody {
    status: Status,
}

async fn set_status(
    State(s): State<ApiState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    TimedBody(body): TimedBody,
) -> Result<Response, ApiError> {
    authorize(&s, &headers, true)?;
    let StatusBody { status } = parse(&body?)?;
    written(&s, Op::SetStatus { id, status }).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OwnerBody {
    enabled: bool,
}

async fn set_owner(
    State(s): State<ApiState>,
    Path(owner): Path<String>,
    headers: HeaderMap,
    TimedBody(body): TimedBody,
) -> Result<Response, ApiError> {
    authorize(&s, &headers, true)?;
    let OwnerBody { enabled } = parse(&body?)?;
    written(&s, Op::SetOwner { owner, enabled }).await
}

async fn get_instance(
    State(s): State<ApiState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let reader = reader(&s, &headers)?;
    let view = s.registry.view();
    // Hidden from anonymous readers exactly as an unknown id is.
    let inst = view
        .registry
        .get(&id)
        .filter(|i| shows(&view, reader, i))
        .ok_or_else(|| RegistryError::NotFound(id.to_ascii_lowercase()))?;
    Ok(Json(instance_view(&view, inst)).into_response())
}

/// Listing pages: at most `limit` instances (default and maximum
/// [`PAGE_MAX`]) with ids after `after`, in id order.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Page {
    limit: Option<usize>,
    after: Option<String>,
}

/// Most instances in one listing response.
pub const PAGE_MAX: usize = 1000;

async fn list_instances(
    State(s): State<ApiState>,
    headers: HeaderMap,
    page: Result<Query<Page>, QueryRejection>,
) -> Result<Response, ApiError> {
    let reader = reader(&s, &headers)?;
    let Query(page) = page.map_err(|e| ApiError::BadRequest {
        field: None,
        message: format!("query string: {}", e.body_text()),
    })?;
    let limit = match page.limit {
        Some(0) => {
            return Err(ApiError::BadRequest {
                field: Some("limit".into()),
                message: format!("must be 1 to {PAGE_MAX}"),
            })
        }
        Some(n) => n.min(PAGE_MAX),
        None => PAGE_MAX,
    };
    let view = s.registry.view();
    let after = page.after.map(|a| a.to_ascii_lowercase());
    let mut visible = view
        .registry
        .instances
        .after(after.as_deref())
        .filter(|i| shows(&view, reader, i));
    let page: Vec<InstanceView> = visible
        .by_ref()
        .take(limit)
        .map(|i| instance_view(&view, i))
        .collect();
    let mut resp = Json(&page).into_response();
    // More to come: RFC 8288 `Link` to the next page.
    if visible.next().is_some() {
        if let Some(last) = page.last() {
            let next = format!(
                "</v1/instances?after={}&limit={limit}>; rel=\"next\"",
                last.id
            );
            if let Ok(v) = next.parse() {
                resp.headers_mut().insert(header::LINK, v);
            }
        }
    }
    Ok(resp)
}

async fn list_services(
    State(s): State<ApiState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let reader = reader(&s, &headers)?;
    let view = s.registry.view();
    let services: Vec<_> = views::services(&view, reader)
        .into_iter()
        .map(|(key, members)| {
            let listed = members.iter().filter(|m| m.listed_in(&key)).count();
            json!({
                "service": key,
                "members": members.iter().map(|m| json!({
                    "id": m.id,
                    "status": m.status,
                    "listed": m.listed_in(&key),
                })).collect::<Vec<_>>(),
                "listed": listed,
            })
        })
        .collect();
    Ok(Json(services).into_response())
}

/// The generated zones, as JSON (RFD 1: so secondaries can be configured
/// from it).
async fn list_zones(State(s): State<ApiState>, headers: HeaderMap) -> Result<Response, ApiError> {
    authorize(&s, &headers, false)?;
    let view = s.registry.view();
    let stats = s.registry.stats();
    let snapshot = s.store.snapshot();
    let zones: Vec<_> = view
        .naming
        .zones
        .iter()
        .map(|z| {
            let served = snapshot.zone(&z.name.clone().into());
            let networks = match &z.networks {
                None => json!(null),
                Some(Networks::CatchAll) => json!(["*"]),
                Some(Networks::List(list)) => {
                    json!(list.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                }
            };
            json!({
                "name": z.name.to_string(),
                "serial": served.and_then(|z| z.serial()),
                "records": served.map_or(0, |z| z.record_count()),
                "networks": networks,
                "ns": view.naming.ns.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
                "backend": if stats.in_etcd.load(Ordering::Relaxed) { "etcd" } else { "local" },
                "zookeeper": stats.zookeeper.enabled.load(Ordering::Relaxed),
                // Cut off from etcd, or not in session with ZooKeeper:
                // served as of the last state read.
                "stale": stats.cut_off.load(Ordering::Relaxed)
                    || stats.zookeeper.stale.load(Ordering::Relaxed),
            })
        })
        .collect();
    Ok(Json(zones).into_response())
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every API route the router serves is described in openapi.json,
    /// and nothing else is (the status page's `/` and `/ui/…` are HTML
    /// for browsers, described in the manual).
    #[test]
    fn openapi_describes_every_route() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI).expect("openapi.json is JSON");
        let mut described: Vec<String> = Vec::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for method in item.as_object().unwrap().keys() {
                described.push(format!("{} {path}", method.to_uppercase()));
            }
        }
        described.sort();
        let mut served = vec![
            "GET /v1/instances",
            "PUT /v1/instances/{id}",
            "GET /v1/instances/{id}",
            "DELETE /v1/instances/{id}",
            "POST /v1/instances/{id}/heartbeat",
            "PUT /v1/instances/{id}/status",
            "PUT /v1/owners/{owner}",
            "GET /v1/services",
            "GET /v1/zones",
            "POST /v1/zones",
            "GET /v1/zones/{name}",
            "DELETE /v1/zones/{name}",
            "GET /v1/openapi.json",
            "GET /v1/status",
        ];
        served.sort();
        assert_eq!(described, served);
        // The router source registers exactly these paths.
        let src = include_str!("mod.rs");
        for path in doc["paths"].as_object().unwrap().keys() {
            assert!(
                src.contains(&format!(".route(\"{path}\""))
                    || src.contains(&format!("\"{path}\",")),
                "{path} not routed"
            );
        }
    }

    #[test]
    fn field_paths_in_errors() {
        let e = parse::<crate::registry::InstanceSpec>(
            br#"{"owner":"o","addresses":["10.0.0.300"],"lease_secs":5}"#,
        )
        .unwrap_err();
        let ApiError::BadRequest { field, message } = e else {
            panic!()
        };
        assert_eq!(field.as_deref(), Some("addresses[0]"));
        assert!(message.starts_with("addresses[0]: "), "{message}");
        let e = parse::<crate::registry::InstanceSpec>(
            br#"{"owner":"o","addresses":[],"lease_secs":"x"}"#,
        )
        .unwrap_err();
        let ApiError::BadRequest { field, .. } = e else {
            panic!()
        };
        assert_eq!(field.as_deref(), Some("lease_secs"));
    }
}
