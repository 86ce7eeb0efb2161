//! Zones added and removed at runtime through the API: `POST /v1/zones`
//! creates a primary zone (an SOA and NS records, or a zone file in the
//! request), `DELETE /v1/zones/{name}` removes one, `GET
//! /v1/zones/{name}` shows any served zone. Writes need the token; each
//! returns once the change is served and durable.

use std::collections::HashMap;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use hickory_proto::rr::{LowerName, Name};
use serde::Serialize;
use serde_json::json;

use super::state::{authorize, parse, ApiError, ApiState, TimedBody};
use crate::dynamic::runtime::{NewZone, RuntimeError};

pub(super) async fn add_zone(
    State(s): State<ApiState>,
    headers: HeaderMap,
    TimedBody(body): TimedBody,
) -> Result<Response, ApiError> {
    authorize(&s, &headers, true)?;
    let req: NewZone = parse(&body?)?;
    let runtime = s.runtime.as_ref().ok_or_else(no_runtime)?;
    let added = runtime.add(req).await.map_err(ApiError::Zone)?;
    let view = zone_view(&s, &added.name, "runtime");
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

pub(super) async fn remove_zone(
    State(s): State<ApiState>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    authorize(&s, &headers, true)?;
    let runtime = s.runtime.as_ref().ok_or_else(no_runtime)?;
    runtime.remove(&name).await.map_err(ApiError::Zone)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub(super) async fn get_zone(
    State(s): State<ApiState>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    authorize(&s, &headers, false)?;
    let origin = Name::from_ascii(&name)
        .map(|mut n| {
            n.set_fqdn(true);
            n
        })
        .map_err(|e| ApiError::BadRequest {
            field: Some("name".into()),
            message: format!("{name:?}: {e}"),
        })?;
    let key = LowerName::new(&origin);
    if s.store.snapshot().zone(&key).is_none() {
        return Err(ApiError::Zone(RuntimeError::NotFound(origin.to_string())));
    }
    let source = match &s.runtime {
        Some(r) if r.contains(&key) => "runtime",
        _ => "configured",
    };
    Ok(Json(zone_view(&s, &origin.to_string(), source)).into_response())
}

fn no_runtime() -> ApiError {
    ApiError::Zone(RuntimeError::Invalid {
        field: "name",
        message: "zones added at runtime need [transfer] data_dir".into(),
    })
}

/// One secondary of a zone: the serial it serves and whether the change
/// is live there (Designate's worker model).
#[derive(Clone, Debug, Serialize)]
pub(super) struct SecondaryView {
    pub(super) secondary: String,
    #[serde(rename = "serial")]
    pub(super) serial_seen: Option<u32>,
    /// `live`, `pending` or `error`.
    pub(super) state: &'static str,
    pub(super) lag_ms: Option<u64>,
    pub(super) error: Option<String>,
}

/// The secondaries of every zone, by origin in lower case.
pub(super) fn secondaries(s: &ApiState) -> HashMap<LowerName, Vec<SecondaryView>> {
    let mut out: HashMap<LowerName, Vec<SecondaryView>> = HashMap::new();
    for p in s.propagation.iter().flat_map(|p| p.statuses()) {
        let Ok(zone) = Name::from_ascii(&p.zone) else {
            continue;
        };
        let state = match (p.in_sync, p.failures) {
            (true, _) => "live",
            (false, 0) => "pending",
            (false, _) => "error",
        };
        out.entry(LowerName::new(&zone))
            .or_default()
            .push(SecondaryView {
                secondary: p.secondary,
                serial_seen: p.serial_seen,
                state,
                lag_ms: p.lag_ms,
                error: p.last_error,
            });
    }
    out
}

fn zone_view(s: &ApiState, name: &str, source: &str) -> serde_json::Value {
    let snapshot = s.store.snapshot();
    let origin = Name::from_ascii(name).ok().map(|n| LowerName::new(&n));
    let zone = origin.as_ref().and_then(|n| snapshot.zone(n).cloned());
    let secondaries = origin
        .and_then(|o| secondaries(s).remove(&o))
        .unwrap_or_default();
    json!({
        "name": name,
        "source": source,
        "serial": zone.as_ref().and_then(|z| z.serial()),
        "records": zone.as_ref().map_or(0, |z| z.record_count()),
        "secondaries": secondaries,
    })
}
