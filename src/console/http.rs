//! The console's HTTP rules and plumbing: the routes, the guard every request passes (loopback
//! Host, GET/HEAD only, the bearer token for `/api/`), the headers of every answer, the page's
//! static files.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::Value;

use super::api::{api_events, api_explain, api_held, api_policy, api_session, api_snapshot};
use super::{CSP, Shared};
use crate::limits;

const PAGE: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/app.js");
const STYLE: &str = include_str!("page/style.css");
const ICON: &str = include_str!("page/icon.svg");

pub(super) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/app.js", get(script))
        .route("/style.css", get(style))
        .route("/icon.svg", get(icon))
        .route("/api/snapshot", get(api_snapshot))
        .route("/api/events", get(api_events))
        .route("/api/session", get(api_session))
        .route("/api/policy", get(api_policy))
        .route("/api/held", get(api_held))
        .route("/api/explain", get(api_explain))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(shared.clone(), guard))
        .with_state(shared)
}

// ---------------------------------------------------------------------------------------------
// The rules every request passes, in order
// ---------------------------------------------------------------------------------------------

/// Paths served without the token: the page shell and its static files, which hold nothing
/// recorded.
const PUBLIC_PATHS: [&str; 4] = ["/", "/app.js", "/style.css", "/icon.svg"];

async fn guard(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let mut res = match check(&shared, &req) {
        Some(refusal) => refusal,
        None => match tokio::time::timeout(limits::CONSOLE_REQUEST_TIMEOUT, next.run(req)).await {
            Ok(res) => res,
            Err(_) => plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "the console took too long to read the journal; the page asks again",
            ),
        },
    };
    let h = res.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
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
    res
}

/// The refusal a request gets before any route sees it, or None to let it through.
fn check(shared: &Shared, req: &Request) -> Option<Response> {
    // An absolute-form request line names a host too; it must agree.
    let authority_ok = req
        .uri()
        .authority()
        .is_none_or(|a| loopback_name(a.as_str()));
    if !loopback_host(req.headers()) || !authority_ok {
        return Some(plain(
            StatusCode::MISDIRECTED_REQUEST,
            "the console answers only to a loopback name (127.0.0.1, localhost or [::1])",
        ));
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "the console only reads: GET and HEAD",
        );
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return Some(r);
    }
    if !PUBLIC_PATHS.contains(&req.uri().path()) && !bearer_ok(req.headers(), &shared.token) {
        let mut r = plain(
            StatusCode::UNAUTHORIZED,
            "this needs the console's token as `Authorization: Bearer <token>` (open the address `holdcall console` printed)",
        );
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"holdcall console\""),
        );
        return Some(r);
    }
    None
}

/// Whether the request's one `Host` header names this machine's loopback: `127.0.0.1`,
/// `localhost` or `[::1]`, each with or without a port. A page on another name that resolves
/// here (DNS rebinding) is turned away.
pub(super) fn loopback_host(headers: &HeaderMap) -> bool {
    let mut hosts = headers.get_all(header::HOST).iter();
    let (Some(host), None) = (hosts.next(), hosts.next()) else {
        return false;
    };
    let Ok(host) = host.to_str() else {
        return false;
    };
    loopback_name(host)
}

/// Whether `host` (a `Host` header or a URI's authority) is `127.0.0.1`, `localhost` or
/// `[::1]`, with or without a port.
fn loopback_name(host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        Some((name, port))
            if !name.is_empty()
                && (!name.contains(':') || name.ends_with(']'))
                && !port.is_empty()
                && port.len() <= 5
                && port.bytes().all(|b| b.is_ascii_digit()) =>
        {
            name
        }
        _ => host,
    };
    matches!(
        name.to_ascii_lowercase().as_str(),
        "127.0.0.1" | "localhost" | "[::1]"
    )
}

/// Whether the request carries exactly one `Authorization: Bearer <token>` with this launch's
/// token. The token is read from nowhere else (not a query, a cookie or another header).
pub(super) fn bearer_ok(headers: &HeaderMap, token: &str) -> bool {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return false;
    };
    match value.as_bytes().strip_prefix(b"Bearer ") {
        Some(given) => same_bytes(given, token.as_bytes()),
        None => false,
    }
}

/// Compares two byte strings in time that depends only on their lengths, never on where they
/// first differ, so a wrong token's answer time says nothing about the right one.
pub(super) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

pub(super) fn plain(status: StatusCode, text: &str) -> Response {
    let mut r = (status, format!("{text}\n")).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut r = Response::new(Body::from(body));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

pub(super) fn json_response(v: &Value) -> Response {
    let mut r = Response::new(Body::from(v.to_string()));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

async fn page() -> Response {
    asset("text/html; charset=utf-8", PAGE)
}
async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}
async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}
async fn icon() -> Response {
    asset("image/svg+xml", ICON)
}
async fn not_found() -> Response {
    plain(StatusCode::NOT_FOUND, "no such page")
}

pub(super) fn bad_request(why: &str) -> Response {
    plain(StatusCode::BAD_REQUEST, why)
}

pub(super) fn failed(e: impl std::fmt::Display) -> Response {
    plain(
        StatusCode::INTERNAL_SERVER_ERROR,
        &format!("could not read the journal: {e}"),
    )
}
