//! What every handler shares: the API's state, its errors (JSON with
//! the status that fits), the token check, request bodies read within
//! their limits, and JSON parsing that names the offending field.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::status::model::StatusHook;
use crate::registry::model::Limits;
use crate::registry::service::RegistryHandle;
use crate::registry::RegistryError;
use crate::zone::ZoneStore;

#[derive(Clone)]
pub struct ApiState {
    pub registry: RegistryHandle,
    pub store: Arc<ZoneStore>,
    /// Zones added and removed at runtime (`None`: no data directory).
    pub runtime: Option<Arc<crate::dynamic::RuntimeZones>>,
    /// What each zone's secondaries serve (from NOTIFY answers and polls).
    pub propagation: Option<Arc<crate::transfer::notify::Propagation>>,
    pub token: Arc<str>,
    pub public_reads: bool,
    pub limits: Limits,
    /// The running server's counters and zone details, for `/v1/status`
    /// and the status page (filled in once the server has them).
    pub status: StatusHook,
}

#[derive(Debug)]
pub enum ApiError {
    Unauthorized,
    BadRequest {
        field: Option<String>,
        message: String,
    },
    Registry(RegistryError),
    /// The body could not be read: over `registry.limits.max_body_bytes`
    /// (413), or broken off.
    Body(BytesRejection),
    /// The body did not arrive within `registry.limits.body_timeout_ms`.
    BodyTimeout,
    /// A zone added or removed at runtime.
    Zone(crate::dynamic::runtime::RuntimeError),
}

impl From<BytesRejection> for ApiError {
    fn from(e: BytesRejection) -> Self {
        ApiError::Body(e)
    }
}

impl From<RegistryError> for ApiError {
    fn from(e: RegistryError) -> Self {
        ApiError::Registry(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, field, message) = match self {
            ApiError::Unauthorized => (
                StatusCode::UNAUTHORIZED,
                None,
                "missing or wrong bearer token (Authorization: Bearer <token>)".to_string(),
            ),
            ApiError::BadRequest { field, message } => (StatusCode::BAD_REQUEST, field, message),
            ApiError::Body(e) => {
                let status = e.status();
                let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
                    "request body too large (registry.limits.max_body_bytes)".to_string()
                } else {
                    format!("request body unreadable: {e}")
                };
                (status, None, message)
            }
            ApiError::BodyTimeout => (
                StatusCode::REQUEST_TIMEOUT,
                None,
                "request body not received in time (registry.limits.body_timeout_ms)".to_string(),
            ),
            ApiError::Zone(e) => {
                use crate::dynamic::runtime::RuntimeError as E;
                let message = e.to_string();
                match e {
                    E::Invalid { field, .. } => (
                        StatusCode::UNPROCESSABLE_ENTITY,
                        Some(field.to_string()),
                        message,
                    ),
                    E::TooMany(_) => (StatusCode::UNPROCESSABLE_ENTITY, None, message),
                    E::Exists(_) => (StatusCode::CONFLICT, Some("name".into()), message),
                    E::NotFound(_) => (StatusCode::NOT_FOUND, Some("name".into()), message),
                    E::NotDurable | E::Io { .. } => {
                        (StatusCode::SERVICE_UNAVAILABLE, None, message)
                    }
                }
            }
            ApiError::Registry(e) => {
                let message = e.to_string();
                match e {
                    RegistryError::Invalid { field, .. } => {
                        (StatusCode::UNPROCESSABLE_ENTITY, Some(field), message)
                    }
                    RegistryError::NotFound(_) => {
                        (StatusCode::NOT_FOUND, Some("id".into()), message)
                    }
                    RegistryError::Mirrored { .. } => {
                        (StatusCode::CONFLICT, Some("id".into()), message)
                    }
                    RegistryError::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, None, message),
                }
            }
        };
        let mut resp = (status, Json(json!({ "error": message, "field": field }))).into_response();
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, "Bearer".parse().expect("static"));
        }
        resp
    }
}

/// A request body read within `registry.limits.body_timeout_ms` and
/// `max_body_bytes`. It never rejects by itself, so a handler checks the
/// token before it looks at the body.
pub(super) struct TimedBody(pub(super) Result<Bytes, ApiError>);

impl FromRequest<ApiState> for TimedBody {
    type Rejection = std::convert::Infallible;

    async fn from_request(req: Request, state: &ApiState) -> Result<Self, Self::Rejection> {
        let deadline = Duration::from_millis(state.limits.body_timeout_ms);
        Ok(TimedBody(
            match tokio::time::timeout(deadline, Bytes::from_request(req, state)).await {
                Ok(read) => read.map_err(ApiError::Body),
                Err(_) => Err(ApiError::BodyTimeout),
            },
        ))
    }
}

pub(super) fn authorize(
    state: &ApiState,
    headers: &HeaderMap,
    write: bool,
) -> Result<(), ApiError> {
    if !write && state.public_reads {
        return Ok(());
    }
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if same_secret(state.token.as_bytes(), given.as_bytes()) {
        Ok(())
    } else {
        Err(ApiError::Unauthorized)
    }
}

/// Constant-time comparison: a secret must not leak by timing.
pub(super) fn same_secret(want: &[u8], got: &[u8]) -> bool {
    let diff = want
        .iter()
        .zip(got.iter().chain(std::iter::repeat(&0)))
        .fold((want.len() != got.len()) as u8, |acc, (a, b)| acc | (a ^ b));
    diff == 0
}

/// Parses a JSON body; errors name the offending field by its path.
pub(super) fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    // Parsed plainly first: following the path cost a third of the
    // parse, and only an error needs it (the same body is parsed again
    // for the message).
    let de = &mut serde_json::Deserializer::from_slice(body);
    if let Ok(value) = T::deserialize(de) {
        return Ok(value);
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let field = (path != ".").then_some(path);
        let message = match &field {
            Some(f) => format!("{f}: {}", e.inner()),
            None => format!("body: {}", e.inner()),
        };
        ApiError::BadRequest { field, message }
    })
}
