//! The status page, served by the API listener at `/`: zones, services
//! and their members with their hysteresis state, instances and leases,
//! answers by path as a live chart, rate limiting, attack counters and
//! anycast. Read-only, with the API's read rule: anonymous readers
//! (`public_reads`) see only what DNS shows, the token shows everything.
//!
//! A browser cannot send a bearer header when it opens a page, so the
//! page (and only its own routes: `/`, `/ui/tables`, `/ui/counters`)
//! also takes the token as `/?token=…`: it answers with a cookie that
//! holds a hash of the token, not the token, and sends the browser back
//! to `/` so the token leaves the address bar. `/?token=` (empty)
//! forgets it. Writes never take the cookie.
//!
//! The HTML is rendered whole on the server (`render`), so the tables
//! work without JavaScript; `assets/app.js` polls `ui/tables` and
//! `ui/counters` and draws the chart. `/v1/status` is the counters as
//! JSON for API clients (bearer token, or public reads).

pub(super) mod model;

mod collect;
mod counters;
mod html;
mod render;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::state::{authorize, same_secret, ApiError, ApiState};
use super::views::Reader;

const APP_JS: &str = include_str!("assets/app.js");
const STYLE_CSS: &str = include_str!("assets/style.css");

/// The page's cookie: a hash of the token (see the module comment).
const COOKIE: &str = "xdpdns_status";

/// What the page and its fragments may load: only themselves.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

#[derive(Deserialize)]
pub(super) struct PageQuery {
    token: Option<String>,
}

/// `GET /`: the page, or the way to give it the token.
pub(super) async fn page(
    State(s): State<ApiState>,
    headers: HeaderMap,
    query: Result<Query<PageQuery>, QueryRejection>,
) -> Response {
    if let Ok(Query(PageQuery { token: Some(token) })) = query {
        return take_token(&s, &token);
    }
    match page_reader(&s, &headers) {
        Some(reader) => {
            let tables = collect::tables(&s, reader, s.status.read().await);
            html(StatusCode::OK, render::page(&tables))
        }
        None => html(StatusCode::UNAUTHORIZED, render::token_needed(false)),
    }
}

/// `GET /ui/tables`: the inside of the page's `<main>`, for the script.
pub(super) async fn tables(State(s): State<ApiState>, headers: HeaderMap) -> Response {
    match page_reader(&s, &headers) {
        Some(reader) => {
            let tables = collect::tables(&s, reader, s.status.read().await);
            html(StatusCode::OK, render::main_inner(&tables))
        }
        None => html(
            StatusCode::UNAUTHORIZED,
            "<p class=\"bad\" id=\"token-needed\">The token is needed again: reload the page.</p>"
                .into(),
        ),
    }
}

/// `GET /ui/counters`: `/v1/status` for the page (its cookie counts).
pub(super) async fn page_counters(State(s): State<ApiState>, headers: HeaderMap) -> Response {
    match page_reader(&s, &headers) {
        Some(_) => no_store(Json(s.status.read().await).into_response()),
        None => ApiError::Unauthorized.into_response(),
    }
}

/// `GET /v1/status`: the server's counters as JSON.
pub(super) async fn counters(
    State(s): State<ApiState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    authorize(&s, &headers, false)?;
    Ok(no_store(Json(s.status.read().await).into_response()))
}

pub(super) async fn script() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

pub(super) async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE_CSS)
}

/// The page's reader: the bearer token or the page's cookie show
/// everything; without either, public reads show what DNS shows;
/// `None`: the token is needed.
fn page_reader(s: &ApiState, headers: &HeaderMap) -> Option<Reader> {
    let cookie = cookie_value(&s.token);
    let has_cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .any(|(name, value)| name == COOKIE && same_secret(cookie.as_bytes(), value.as_bytes()));
    if has_cookie || authorize(s, headers, true).is_ok() {
        Some(Reader::Token)
    } else if s.public_reads {
        Some(Reader::Public)
    } else {
        None
    }
}

/// `/?token=…`: a right token becomes the page's cookie, an empty one
/// clears it; either way back to `/` (the token out of the address
/// bar and the history). A wrong one is told so.
fn take_token(s: &ApiState, token: &str) -> Response {
    let cookie = if token.is_empty() {
        format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
    } else if same_secret(s.token.as_bytes(), token.as_bytes()) {
        format!(
            "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict",
            cookie_value(&s.token)
        )
    } else {
        return html(StatusCode::UNAUTHORIZED, render::token_needed(true));
    };
    let mut resp = StatusCode::SEE_OTHER.into_response();
    let h = resp.headers_mut();
    h.insert(header::LOCATION, HeaderValue::from_static("./"));
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        h.insert(header::SET_COOKIE, v);
    }
    no_store(resp)
}

/// The cookie that stands for `token`: it opens the page's reads only,
/// and does not give the token away.
fn cookie_value(token: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"xdpdns status page\0");
    h.update(token.as_bytes());
    data_encoding::HEXLOWER.encode(&h.finalize())
}

fn html(status: StatusCode, body: String) -> Response {
    let mut resp = (status, body).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    no_store(resp)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// What the registry holds is not kept by caches or the browser.
fn no_store(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_stands_for_the_token_without_holding_it() {
        let c = cookie_value("s3cret");
        assert_eq!(c.len(), 64);
        assert!(!c.contains("s3cret"));
        assert_eq!(c, cookie_value("s3cret"));
        assert_ne!(c, cookie_value("s3creT"));
    }

    #[test]
    fn the_assets_load_nothing_from_elsewhere() {
        for text in [APP_JS, STYLE_CSS] {
            assert!(!text.contains("http://") && !text.contains("https://"));
            assert!(!text.contains("@import"));
        }
        // The script fetches relative paths only (the page may sit
        // behind a proxy under a prefix).
        assert!(APP_JS.contains("'ui/tables'") && APP_JS.contains("'ui/counters'"));
    }
}
