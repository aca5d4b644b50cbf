//! `holdcall console`: a read-only web page on a loopback address over the journal, the held
//! calls, the sessions and the policy in force (axum routing; its connections, accepted, shed and
//! timed by `connections`, on hyper).
//!
//! Owns: the HTTP rules (loopback Host, GET/HEAD only, a per-launch bearer token for every
//! `/api/` path, strict headers on every answer), the page's JSON, and the console's daemon
//! client. Must never: write the database (it opens it with SQLite's read-only flag), start the
//! daemon (it dials with `ipc::connect`, never `connect_or_start`), send the daemon anything but
//! a read request ([`is_read_request`]), or offer a route that decides: approving stays on the
//! command line, because any page in the person's browser can reach a loopback port.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

mod connections;

use crate::config::Home;
use crate::ipc::{self, ManageRequest as WireRequest, ManageResponse as WireResponse, WireError};
use crate::journal::{Entry, LogFilter, Reader, VerifyReport};
use crate::limits;
use crate::projection::{self, Projection};
use crate::text::visible;

/// The port `holdcall console` listens on when `--port` is not given.
pub const DEFAULT_PORT: u16 = 7717;

/// The Content-Security-Policy of every answer: the page's own script and style only, no inline
/// code, no other origin, no framing, no forms, no base changes.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const PAGE: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/app.js");
const STYLE: &str = include_str!("page/style.css");
const ICON: &str = include_str!("page/icon.svg");

/// Why the console cannot start or answer.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ConsoleError {
    #[error("the console binds to loopback only; {0:?} is not a loopback address")]
    #[diagnostic(
        code(holdcall::console::not_loopback),
        help("leave out --bind, or give 127.0.0.1 or ::1")
    )]
    NotLoopback(String),
    #[error("cannot listen on {addr}: {source}")]
    #[diagnostic(
        code(holdcall::console::listen),
        help("another program may use that port; pick another with --port, or --port 0 for any")
    )]
    Listen {
        addr: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    #[diagnostic(transparent)]
    Journal(#[from] crate::journal::JournalError),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("cannot draw the console's token: {0}")]
    #[diagnostic(
        code(holdcall::console::token),
        help("the kernel's random source (/dev/urandom) must be readable")
    )]
    Token(std::io::Error),
    #[error("the console failed: {0}")]
    #[diagnostic(code(holdcall::console::serve), help("run `holdcall console` again"))]
    Serve(std::io::Error),
    #[error("the console does not send {0} to the daemon: it only reads")]
    #[diagnostic(
        code(holdcall::console::write_refused),
        help("changes are made on the command line")
    )]
    NotARead(&'static str),
}

/// What `holdcall console` was asked for.
#[derive(Debug, Clone)]
pub struct Options {
    pub bind: Option<String>,
    pub port: u16,
}

/// The loopback address to listen on: 127.0.0.1 unless `bind` names `::1` (or `localhost`).
/// Anything else is refused.
pub fn bind_addr(bind: Option<&str>) -> Result<IpAddr, ConsoleError> {
    match bind {
        None | Some("127.0.0.1") | Some("localhost") => Ok(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        Some("::1") | Some("[::1]") => Ok(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        Some(other) => Err(ConsoleError::NotLoopback(other.to_string())),
    }
}

struct Shared {
    home: Home,
    db: PathBuf,
    token: String,
    machine_id: Option<String>,
    /// The projection and chain check the page's requests share (one at a time).
    view: Mutex<View>,
}

impl Shared {
    fn view(&self) -> std::sync::MutexGuard<'_, View> {
        // A request that panicked left a view that is still whole: each change is one assignment.
        self.view
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What the console has read of the journal, kept between requests: a projection of the newest
/// entries that grows by the entries appended since (each read once), and the last check of the
/// whole chain, run again at most once per `limits::CONSOLE_VERIFY_INTERVAL`.
#[derive(Default)]
pub struct View {
    /// The chain_seq of the newest entry in `projection` (0: nothing read yet).
    head: i64,
    projection: Projection,
    /// The last chain check, with when it ran.
    verified: Option<Verified>,
    /// Journal rows read for this view and for the pages it answered (a measure of the work).
    rows_read: usize,
    /// How many times the whole chain was checked.
    verify_runs: usize,
}

struct Verified {
    at: std::time::Instant,
    /// When it ran, RFC 3339 UTC.
    at_text: String,
    report: VerifyReport,
}

impl View {
    /// Reads the entries appended since the last call into the projection. The first call (or
    /// one after more than `CONSOLE_PROJECTION_ENTRIES_MAX` new entries, or once the projection
    /// holds twice that many) reads the newest `CONSOLE_PROJECTION_ENTRIES_MAX` afresh.
    fn catch_up(&mut self, reader: &Reader) -> Result<(), crate::journal::JournalError> {
        let max = limits::CONSOLE_PROJECTION_ENTRIES_MAX;
        if self.head > 0 && self.projection.entries_read() < 2 * max {
            let mut added = 0;
            loop {
                let page = reader.entries_after(self.head, limits::CONSOLE_EVENTS_MAX)?;
                self.rows_read += page.len();
                for e in &page {
                    self.projection.add(e);
                    self.head = e.chain_seq;
                }
                added += page.len();
                if page.len() < limits::CONSOLE_EVENTS_MAX {
                    if added > 0 {
                        self.projection.settle();
                    }
                    return Ok(());
                }
                if added >= max {
                    break;
                }
            }
        }
        let entries = newest(reader)?;
        self.rows_read += entries.len();
        self.projection = Projection::build(&entries);
        self.head = entries.last().map_or(0, |e| e.chain_seq);
        Ok(())
    }

    /// The last chain check, run again when it is older than `CONSOLE_VERIFY_INTERVAL`.
    fn verified(
        &mut self,
        reader: &Reader,
        machine_id: Option<&str>,
    ) -> Result<&Verified, crate::journal::JournalError> {
        let stale = self
            .verified
            .as_ref()
            .is_none_or(|v| v.at.elapsed() >= limits::CONSOLE_VERIFY_INTERVAL);
        if stale {
            let report = reader.verify(machine_id, None)?;
            self.verify_runs += 1;
            self.rows_read += usize::try_from(report.entries).unwrap_or(0);
            self.verified = Some(Verified {
                at: std::time::Instant::now(),
                at_text: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                report,
            });
        }
        self.verified
            .as_ref()
            .ok_or(crate::journal::JournalError::NoJournalYet {
                path: reader.path().to_path_buf(),
            })
    }
}

/// Runs the console until the process is stopped. Prints the address (with the token in its
/// fragment) on stdout once it listens.
pub fn run(opts: Options) -> Result<i32, ConsoleError> {
    let ip = bind_addr(opts.bind.as_deref())?;
    let home = Home::from_env()?;
    let db = home.db_path();
    // Refuse to serve what cannot be opened read-only (no journal yet, not ours).
    drop(Reader::open(&db)?);
    let token = crate::ids::random_hex(32).map_err(ConsoleError::Token)?;
    let machine_id = std::fs::read_to_string(home.machine_id_path())
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let cap = connections::connections_cap();
    let rt = crate::ipc::current_thread().map_err(ConsoleError::Serve)?;
    rt.block_on(async move {
        let addr = SocketAddr::new(ip, opts.port);
        let listener = connections::listen(addr).map_err(|source| ConsoleError::Listen {
            addr: addr.to_string(),
            source,
        })?;
        let local = listener.local_addr().map_err(ConsoleError::Serve)?;
        {
            use std::io::Write as _;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "holdcall console on http://{local}/#token={token}");
            let _ = writeln!(out, "reading {}", db.display());
            let _ = writeln!(
                out,
                "read-only: this cannot change anything Holdcall recorded."
            );
            let _ = writeln!(
                out,
                "the address carries a token that works until this process stops; whoever has it can read the journal"
            );
            let _ = out.flush();
        }
        let shared = Arc::new(Shared {
            home,
            db,
            token,
            machine_id,
            view: Mutex::new(View::default()),
        });
        connections::serve(listener, router(shared), cap, stop_signal()).await;
        Ok::<(), ConsoleError>(())
    })?;
    Ok(0)
}

async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        // Without handlers the default dispositions stop the process, which is also a stop.
        _ => std::future::pending::<()>().await,
    }
}

fn router(shared: Arc<Shared>) -> Router {
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
pub fn loopback_host(headers: &HeaderMap) -> bool {
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
fn bearer_ok(headers: &HeaderMap, token: &str) -> bool {
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
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

fn plain(status: StatusCode, text: &str) -> Response {
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

fn json_response(v: &Value) -> Response {
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

// ---------------------------------------------------------------------------------------------
// Query strings, read strictly
// ---------------------------------------------------------------------------------------------

/// A query string read into names and values: each name once, only the names a route expects,
/// percent-decoding that is well formed and gives UTF-8 without control characters (except the
/// line breaks and tabs arguments may hold).
pub fn parse_query(
    query: Option<&str>,
    allowed: &[&str],
) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    let Some(q) = query.filter(|q| !q.is_empty()) else {
        return Ok(out);
    };
    if q.len() > limits::CONSOLE_QUERY_BYTES_MAX {
        return Err(format!(
            "the query is {} bytes; the most the console reads is {}",
            q.len(),
            limits::CONSOLE_QUERY_BYTES_MAX
        ));
    }
    for pair in q.split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let name = decode(name)?;
        if !allowed.contains(&name.as_str()) {
            return Err(format!("unknown query parameter {:?}", visible(&name)));
        }
        let value = decode(value)?;
        if value
            .chars()
            .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
        {
            return Err(format!("{name} holds a control character"));
        }
        if out.insert(name.clone(), value).is_some() {
            return Err(format!("{name} is given twice"));
        }
    }
    Ok(out)
}

fn decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        match c {
            b'%' => {
                let hex = |j: usize| {
                    b.get(j)
                        .and_then(|&d| (d as char).to_digit(16))
                        .ok_or_else(|| {
                            "a % in the query is not followed by two hex digits".to_string()
                        })
                };
                let hi = hex(i + 1)?;
                let lo = hex(i + 2)?;
                out.push(u8::try_from(hi * 16 + lo).map_err(|e| e.to_string())?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| "the query is not UTF-8".to_string())
}

fn bad_request(why: &str) -> Response {
    plain(StatusCode::BAD_REQUEST, why)
}

fn failed(e: impl std::fmt::Display) -> Response {
    plain(
        StatusCode::INTERNAL_SERVER_ERROR,
        &format!("could not read the journal: {e}"),
    )
}

fn number(q: &BTreeMap<String, String>, name: &str) -> Result<Option<i64>, String> {
    match q.get(name) {
        None => Ok(None),
        Some(v) if v.len() <= 19 && !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => v
            .parse()
            .map(Some)
            .map_err(|_| format!("{name} must be a whole number")),
        Some(_) => Err(format!("{name} must be a whole number")),
    }
}

// ---------------------------------------------------------------------------------------------
// The daemon, for what only it knows: held calls, explain, agents' state
// ---------------------------------------------------------------------------------------------

/// The only requests the console sends the daemon: each one reads. Anything else (a decision, a
/// policy change, shutdown) is refused before a connection is made.
pub fn is_read_request(req: &WireRequest) -> bool {
    matches!(
        req,
        WireRequest::ApprovalList
            | WireRequest::PolicyList
            | WireRequest::PolicyExplain { .. }
            | WireRequest::AgentList
            | WireRequest::Status
    )
}

/// Asks the daemon one read request on a fresh verified connection; never starts a daemon.
pub async fn ask_daemon(home: &Home, req: &WireRequest) -> Result<WireResponse, ConsoleDaemon> {
    if !is_read_request(req) {
        return Err(ConsoleDaemon::Refused(
            ConsoleError::NotARead("a request that changes something").to_string(),
        ));
    }
    let mut conn = match ipc::connect(home).await {
        Ok(c) => c,
        Err(WireError::NoDaemon { .. }) => return Err(ConsoleDaemon::NotRunning),
        Err(e) => return Err(ConsoleDaemon::Failed(e.to_string())),
    };
    match conn.call(req, limits::CONSOLE_DAEMON_TIMEOUT).await {
        Ok(WireResponse::Error { message }) => Err(ConsoleDaemon::Refused(message)),
        Ok(r) => Ok(r),
        Err(e) => Err(ConsoleDaemon::Failed(e.to_string())),
    }
}

/// Why the daemon gave the console no answer.
#[derive(Debug)]
pub enum ConsoleDaemon {
    NotRunning,
    Refused(String),
    Failed(String),
}

impl ConsoleDaemon {
    fn say(&self) -> String {
        match self {
            ConsoleDaemon::NotRunning => {
                "the daemon is not running (the console never starts it; `holdcall daemon start` does)".into()
            }
            ConsoleDaemon::Refused(m) => format!("the daemon refused: {m}"),
            ConsoleDaemon::Failed(m) => format!("the daemon did not answer: {m}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The JSON the page reads
// ---------------------------------------------------------------------------------------------

/// Runs a read of the journal on a blocking thread (SQLite is synchronous).
async fn read<T: Send + 'static>(
    shared: &Arc<Shared>,
    f: impl FnOnce(&Reader, &Shared) -> Result<T, crate::journal::JournalError> + Send + 'static,
) -> Result<T, Response> {
    let shared = shared.clone();
    tokio::task::spawn_blocking(move || {
        let reader = Reader::open(&shared.db)?;
        f(&reader, &shared)
    })
    .await
    .map_err(failed)?
    .map_err(failed)
}

fn opt(s: &Option<String>) -> Value {
    match s {
        Some(s) => Value::String(visible(s)),
        None => Value::Null,
    }
}

/// One entry as the page shows it: every text field made visible, its words, and its place in
/// the chain.
fn entry_json(e: &Entry, p: Option<&Projection>) -> Value {
    let f = &e.fields;
    let call = p.and_then(|p| p.call_at(e.chain_seq));
    json!({
        "chain_seq": e.chain_seq,
        "kind": e.kind,
        "occurred_at": e.occurred_at,
        "session_id": opt(&f.session_id),
        "seq": f.seq,
        "connector": opt(&f.connector),
        "tool": opt(&f.tool),
        "client": opt(&f.client),
        "agent": opt(&f.agent),
        "args_digest": opt(&f.args_digest),
        "decision": opt(&f.decision),
        "policy_id": opt(&f.policy_id),
        "reason": opt(&f.reason),
        "ok": f.ok,
        "duration_ms": f.duration_ms,
        "anomaly": opt(&f.anomaly),
        "protocol_version": opt(&f.protocol_version),
        "detail": f.detail.as_deref().map(projection::visible_lines),
        "why": visible(&projection::why(e, call)),
        "state": call.map(|c| c.state.as_str()),
        "prev_hash": e.prev_hash,
        "hash": e.hash,
    })
}

fn call_json(c: &projection::Call) -> Value {
    json!({
        "chain_seq": c.chain_seq,
        "occurred_at": c.occurred_at,
        "session_id": visible(&c.session_id),
        "seq": c.seq,
        "connector": opt(&c.connector),
        "tool": opt(&c.tool),
        "agent": opt(&c.agent),
        "decision": visible(&c.decision),
        "policy_id": opt(&c.policy_id),
        "reason": opt(&c.reason),
        "state": c.state.as_str(),
        "state_why": visible(&c.state_why),
        "hold": opt(&c.hold),
        "cause": opt(&c.cause),
        "outcome": c.outcome,
    })
}

fn session_json(s: &projection::Session) -> Value {
    json!({
        "id": visible(&s.id),
        "chain_seq": s.chain_seq,
        "state": s.state,
        "started_at": s.started_at,
        "ended_at": s.ended_at,
        "end_reason": opt(&s.end_reason),
        "connector": opt(&s.connector),
        "client": opt(&s.client),
        "agent": opt(&s.agent),
        "protocol_version": opt(&s.protocol_version),
        "calls": s.calls,
        "refused": s.refused,
        "anomalies": s.anomalies,
        "started": s.started,
    })
}

fn newest(reader: &Reader) -> Result<Vec<Entry>, crate::journal::JournalError> {
    reader.entries(&LogFilter {
        limit: Some(limits::CONSOLE_PROJECTION_ENTRIES_MAX),
        ..LogFilter::default()
    })
}

/// The overview: the last chain check, and the counts, sessions and gaps of the projection.
fn snapshot_json(
    reader: &Reader,
    path: String,
    machine_id: Option<&str>,
    view: &mut View,
) -> Result<Value, crate::journal::JournalError> {
    view.catch_up(reader)?;
    let checked = view.verified(reader, machine_id)?;
    let report = &checked.report;
    let journal = json!({
        "path": path,
        "entries": report.entries,
        "head": report.head,
        "chain": report.state,
        "problems": report.problems.iter().take(20).map(|pr| json!({"chain_seq": pr.chain_seq, "message": pr.message})).collect::<Vec<_>>(),
        "verified_at": checked.at_text,
        "verify_every_s": limits::CONSOLE_VERIFY_INTERVAL.as_secs(),
        "cursor": view.head,
    });
    let p = &view.projection;
    let policies = reader.policies()?.len();
    let budgets = reader.budgets()?.len();
    let mut sessions: Vec<Value> = p.sessions.iter().rev().map(session_json).collect();
    sessions.truncate(limits::CONSOLE_SESSIONS_MAX);
    let newest_calls: Vec<Value> = p.calls.iter().rev().take(20).map(call_json).collect();
    // Decisions per hour, for the overview's chart.
    let mut per_hour: BTreeMap<String, BTreeMap<&str, usize>> = BTreeMap::new();
    for c in &p.calls {
        let hour = c
            .occurred_at
            .get(..13)
            .unwrap_or(&c.occurred_at)
            .to_string();
        *per_hour
            .entry(hour)
            .or_default()
            .entry(c.state.as_str())
            .or_insert(0) += 1;
    }
    let gaps = &p.gaps;
    Ok(json!({
        "journal": journal,
        "counts": p.counts(),
        "per_hour": per_hour,
        "newest_calls": newest_calls,
        "sessions": sessions,
        "gaps": {
            "unfinished_sessions": gaps.unfinished_sessions.iter().map(|s| visible(s)).collect::<Vec<_>>(),
            "calls_without_outcome": gaps.calls_without_outcome.iter().map(|(s, seq, at)| json!({"session_id": visible(s), "seq": seq, "chain_seq": at})).collect::<Vec<_>>(),
            "entries_without_call": gaps.entries_without_call,
            "entries_without_session": gaps.entries_without_session,
            "anomalies": gaps.anomalies,
        },
        "policy": {"rules": policies, "budgets": budgets},
    }))
}

/// One page of entries after `after`, each with what became of its call (from the view).
fn events_json(
    reader: &Reader,
    view: &mut View,
    after: i64,
    limit: usize,
) -> Result<Value, crate::journal::JournalError> {
    let entries = reader.entries_after(after, limit)?;
    view.rows_read += entries.len();
    // Read after the page, so the projection holds every entry of it that is new enough.
    view.catch_up(reader)?;
    let cursor = entries.last().map_or(after, |e| e.chain_seq);
    Ok(json!({
        "events": entries.iter().map(|e| entry_json(e, Some(&view.projection))).collect::<Vec<_>>(),
        "cursor": cursor,
    }))
}

async fn api_snapshot(State(shared): State<Arc<Shared>>) -> Response {
    let snap = read(&shared, |reader, shared| {
        snapshot_json(
            reader,
            shared.db.display().to_string(),
            shared.machine_id.as_deref(),
            &mut shared.view(),
        )
    })
    .await;
    let mut snap = match snap {
        Ok(v) => v,
        Err(r) => return r,
    };
    let held = match ask_daemon(&shared.home, &WireRequest::ApprovalList).await {
        Ok(WireResponse::HeldCalls { calls }) => json!({"available": true, "count": calls.len()}),
        Ok(_) => json!({"available": false, "reason": "the daemon sent an unexpected answer"}),
        Err(e) => {
            json!({"available": false, "reason": e.say(), "running": !matches!(e, ConsoleDaemon::NotRunning)})
        }
    };
    if let Some(o) = snap.as_object_mut() {
        o.insert("held".into(), held);
    }
    json_response(&snap)
}

async fn api_events(State(shared): State<Arc<Shared>>, uri: Uri) -> Response {
    let q = match parse_query(uri.query(), &["after", "limit"]) {
        Ok(q) => q,
        Err(why) => return bad_request(&why),
    };
    let (after, limit) = match (number(&q, "after"), number(&q, "limit")) {
        (Ok(a), Ok(l)) => (a.unwrap_or(0), l),
        (Err(why), _) | (_, Err(why)) => return bad_request(&why),
    };
    let limit = match limit.and_then(|l| usize::try_from(l).ok()) {
        Some(l) if (1..=limits::CONSOLE_EVENTS_MAX).contains(&l) => l,
        _ => limits::CONSOLE_EVENTS_MAX,
    };
    let v = read(&shared, move |reader, shared| {
        events_json(reader, &mut shared.view(), after, limit)
    })
    .await;
    match v {
        Ok(v) => json_response(&v),
        Err(r) => r,
    }
}

/// One session's summary and its newest `CONSOLE_SESSION_EVENTS_MAX` entries, with how many
/// earlier ones are not shown; None when no entry names it.
fn session_page(reader: &Reader, id: &str) -> Result<Option<Value>, crate::journal::JournalError> {
    let entries: Vec<Entry> = reader
        .entries(&LogFilter {
            session: Some(id.to_string()),
            ..LogFilter::default()
        })?
        .into_iter()
        .filter(|e| e.fields.session_id.as_deref() == Some(id))
        .collect();
    let p = Projection::build(&entries);
    let more = entries
        .len()
        .saturating_sub(limits::CONSOLE_SESSION_EVENTS_MAX);
    Ok(p.sessions.first().map(|s| {
        json!({
            "session": session_json(s),
            "events": entries.iter().skip(more).map(|e| entry_json(e, Some(&p))).collect::<Vec<_>>(),
            "earlier_not_shown": more,
        })
    }))
}

/// The newest `CONSOLE_POLICY_HISTORY_MAX` policy changes, newest first, and how many older
/// ones are not shown.
fn policy_history(reader: &Reader) -> Result<(Vec<Value>, usize), crate::journal::JournalError> {
    let changes = reader.entries(&LogFilter {
        kind: Some("policy.change".into()),
        ..LogFilter::default()
    })?;
    let older = changes
        .len()
        .saturating_sub(limits::CONSOLE_POLICY_HISTORY_MAX);
    let history = changes
        .iter()
        .rev()
        .take(limits::CONSOLE_POLICY_HISTORY_MAX)
        .map(|e| {
            json!({
                "chain_seq": e.chain_seq,
                "occurred_at": e.occurred_at,
                "reason": opt(&e.fields.reason),
                "diff": e.fields.detail.as_deref().map(projection::visible_lines),
            })
        })
        .collect();
    Ok((history, older))
}

async fn api_session(State(shared): State<Arc<Shared>>, uri: Uri) -> Response {
    let q = match parse_query(uri.query(), &["id"]) {
        Ok(q) => q,
        Err(why) => return bad_request(&why),
    };
    let Some(id) = q.get("id").cloned() else {
        return bad_request("id is required");
    };
    if id.is_empty()
        || id.len() > 128
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return bad_request("id must be 1 to 128 letters, digits, - or _");
    }
    let v = read(&shared, move |reader, _| session_page(reader, &id)).await;
    match v {
        Ok(Some(v)) => json_response(&v),
        Ok(None) => plain(StatusCode::NOT_FOUND, "no entries for that session"),
        Err(r) => r,
    }
}

async fn api_policy(State(shared): State<Arc<Shared>>) -> Response {
    let v = read(&shared, |reader, _| {
        let rules: Vec<Value> = reader
            .policies()?
            .iter()
            .map(|r| {
                json!({
                    "id": visible(&r.id),
                    "seq": r.seq,
                    "source": visible(&r.source),
                    "effect": r.effect,
                    "specificity": r.specificity,
                    "text": projection::visible_lines(&r.text),
                    "created_at": r.created_at,
                })
            })
            .collect();
        let budgets = serde_json::to_value(reader.budgets()?).unwrap_or(Value::Null);
        let stored_agents: Vec<(String, String, String)> = reader
            .agents()?
            .into_iter()
            .map(|a| (a.name, a.path, a.enrolled_at))
            .collect();
        let connectors: Vec<Value> = reader
            .connectors()?
            .iter()
            .map(|c| {
                json!({
                    "name": visible(&c.name),
                    "env_key": visible(&c.env_key),
                    "command": visible(&c.command.join(" ")),
                    "pass_env": visible(&c.pass_env.join(" ")),
                    "updated_at": visible(&c.updated_at),
                })
            })
            .collect();
        let history = policy_history(reader)?;
        Ok((rules, budgets, stored_agents, connectors, history))
    })
    .await;
    let (rules, budgets, stored_agents, connectors, (history, older)) = match v {
        Ok(v) => v,
        Err(r) => return r,
    };
    // Whether each enrolment is still current is the daemon's check (it stats each file again).
    let (agents, agents_note) = match ask_daemon(&shared.home, &WireRequest::AgentList).await {
        Ok(WireResponse::AgentList { agents }) => (
            agents
                .iter()
                .map(|a| {
                    json!({
                        "name": visible(&a.name),
                        "path": visible(&a.path),
                        "state": a.state,
                        "stale_because": a.stale_because.as_deref().map(visible),
                        "enrolled_at": a.enrolled_at,
                    })
                })
                .collect::<Vec<_>>(),
            None,
        ),
        other => (
            stored_agents
                .iter()
                .map(|(name, path, at)| {
                    json!({
                        "name": visible(name),
                        "path": visible(path),
                        "state": "unknown",
                        "enrolled_at": at,
                    })
                })
                .collect(),
            Some(match other {
                Err(e) => e.say(),
                Ok(_) => "the daemon sent an unexpected answer".into(),
            }),
        ),
    };
    json_response(&json!({
        "rules": rules,
        "budgets": budgets,
        "agents": agents,
        "agents_note": agents_note,
        "connectors": connectors,
        "history": history,
        "history_not_shown": older,
    }))
}

async fn api_held(State(shared): State<Arc<Shared>>) -> Response {
    let v = match ask_daemon(&shared.home, &WireRequest::ApprovalList).await {
        Ok(WireResponse::HeldCalls { calls }) => json!({
            "available": true,
            "held": calls.iter().map(|c| {
                let args = c.arguments.as_deref().unwrap_or("");
                json!({
                    "id": visible(&c.id),
                    "session_id": visible(&c.session_id),
                    "seq": c.seq,
                    "agent": opt(&c.agent),
                    "connector": visible(&c.connector),
                    "tool": visible(&c.tool),
                    "args_digest": c.args_digest,
                    "arguments": c.arguments.as_ref().map(|_| visible(args)),
                    "non_ascii": crate::text::non_ascii_note(args),
                    "policy_id": opt(&c.policy_id),
                    "reason": visible(&c.reason),
                    "age_ms": c.age_ms,
                    "left_ms": c.left_ms,
                    "approve": format!("holdcall approve {}", visible(&c.id)),
                    "reject": format!("holdcall reject {}", visible(&c.id)),
                })
            }).collect::<Vec<_>>(),
        }),
        Ok(_) => {
            json!({"available": false, "reason": "the daemon sent an unexpected answer", "held": []})
        }
        Err(e) => json!({"available": false, "reason": e.say(), "held": []}),
    };
    json_response(&v)
}

async fn api_explain(State(shared): State<Arc<Shared>>, uri: Uri) -> Response {
    let q = match parse_query(uri.query(), &["tool", "agent", "connector", "arguments"]) {
        Ok(q) => q,
        Err(why) => return bad_request(&why),
    };
    let given = |name: &str| q.get(name).filter(|v| !v.is_empty()).cloned();
    let Some(tool) = given("tool") else {
        return bad_request("tool is required");
    };
    if tool.len() > limits::TOOL_NAME_BYTES_MAX {
        return bad_request(&format!(
            "tool is longer than {} bytes",
            limits::TOOL_NAME_BYTES_MAX
        ));
    }
    for name in ["agent", "connector"] {
        if given(name).is_some_and(|v| v.chars().count() > limits::SCOPE_NAME_CHARS_MAX) {
            return bad_request(&format!(
                "{name} is longer than {} characters",
                limits::SCOPE_NAME_CHARS_MAX
            ));
        }
    }
    let arguments = given("arguments");
    if let Some(a) = &arguments {
        if a.len() > limits::CONSOLE_EXPLAIN_ARGUMENTS_BYTES_MAX {
            return bad_request(&format!(
                "arguments are longer than {} bytes",
                limits::CONSOLE_EXPLAIN_ARGUMENTS_BYTES_MAX
            ));
        }
        if serde_json::from_str::<Value>(a).map_or(true, |v| !v.is_object()) {
            return bad_request("arguments must be a JSON object");
        }
    }
    let req = WireRequest::PolicyExplain {
        agent: given("agent"),
        connector: given("connector"),
        tool,
        arguments,
    };
    let v = match ask_daemon(&shared.home, &req).await {
        Ok(WireResponse::Explain {
            explanation,
            budgets,
        }) => json!({"available": true, "explanation": explanation, "budgets": budgets}),
        Ok(_) => json!({"available": false, "reason": "the daemon sent an unexpected answer"}),
        Err(e) => json!({"available": false, "reason": e.say()}),
    };
    json_response(&v)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::policy::{Effect, Scope};

    /// A journal of `sessions` sessions of `calls` allowed calls each (start, requests with
    /// outcomes, end): `sessions * (2 + 2 * calls)` entries.
    fn journal_of(db: &std::path::Path, name: &str, sessions: usize, calls: usize) {
        use crate::config::Durability;
        use crate::journal::{Fields, Journal, Kind};
        let mut j = Journal::open(db, "m", Durability::Process).unwrap();
        for s in 0..sessions {
            let sid = format!("{name}-{s}");
            let on = |seq: Option<i64>| Fields {
                session_id: Some(sid.clone()),
                seq,
                ..Fields::default()
            };
            let mut items = vec![(Kind::SessionStart, on(None))];
            for c in 0..calls {
                let seq = Some(i64::try_from(c).unwrap() + 1);
                items.push((
                    Kind::CallRequest,
                    Fields {
                        decision: Some("allow".into()),
                        tool: Some("echo".into()),
                        ..on(seq)
                    },
                ));
                items.push((
                    Kind::CallOutcome,
                    Fields {
                        ok: Some(true),
                        duration_ms: Some(1),
                        ..on(seq)
                    },
                ));
            }
            items.push((Kind::SessionEnd, on(None)));
            j.append_many(items).unwrap();
        }
    }

    /// What the page does on each poll: every page of events after its cursor, then the
    /// overview when something was new. Returns the cursor.
    fn poll(reader: &Reader, view: &mut View, mut cursor: i64) -> i64 {
        let mut fresh = false;
        loop {
            let page = events_json(reader, view, cursor, limits::CONSOLE_EVENTS_MAX).unwrap();
            let n = page["events"].as_array().unwrap().len();
            for e in page["events"].as_array().unwrap() {
                if e["kind"] == "call.request" {
                    assert_eq!(e["state"], "allowed", "{e}");
                }
            }
            cursor = page["cursor"].as_i64().unwrap();
            fresh |= n > 0;
            if n < limits::CONSOLE_EVENTS_MAX {
                break;
            }
        }
        if fresh {
            snapshot_json(reader, String::new(), Some("m"), view).unwrap();
        }
        cursor
    }

    #[test]
    fn catching_up_on_a_large_journal_reads_each_entry_a_bounded_number_of_times() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("journal.db");
        // 50 sessions of 49 calls: 5,000 entries.
        journal_of(&db, "a", 50, 49);
        let reader = Reader::open(&db).unwrap();
        let total = usize::try_from(reader.count().unwrap()).unwrap();
        assert_eq!(total, 5000);
        let mut view = View::default();
        let cursor = poll(&reader, &mut view, 0);
        assert_eq!(cursor, 5000);
        // Each entry once for its page, once into the projection, once for the chain check.
        eprintln!(
            "catching up on {total} entries read {} rows",
            view.rows_read
        );
        assert!(view.rows_read <= 3 * total, "{} rows read", view.rows_read);
        assert_eq!(view.verify_runs, 1);
        let after_catch_up = view.rows_read;
        // Polls with nothing new read nothing more and check the chain no more.
        for _ in 0..10 {
            assert_eq!(poll(&reader, &mut view, cursor), cursor);
        }
        assert_eq!(view.rows_read, after_catch_up);
        // New entries are read once for the page and once into the projection; the chain is
        // not checked again within CONSOLE_VERIFY_INTERVAL.
        journal_of(&db, "b", 1, 4);
        let cursor = poll(&reader, &mut view, cursor);
        assert_eq!(cursor, 5010);
        assert_eq!(view.rows_read, after_catch_up + 2 * 10);
        assert_eq!(view.verify_runs, 1);
        let overview = snapshot_json(&reader, String::new(), Some("m"), &mut view).unwrap();
        assert_eq!(overview["journal"]["chain"], "intact");
        assert_eq!(overview["journal"]["cursor"], 5010);
        assert!(overview["journal"]["verified_at"].is_string());
        assert_eq!(overview["counts"]["allowed"], 50 * 49 + 4);
        assert_eq!(overview["sessions"].as_array().unwrap().len(), 51);
    }

    #[test]
    fn the_projection_grown_entry_by_entry_says_what_one_built_at_once_says() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("journal.db");
        journal_of(&db, "a", 3, 5);
        let reader = Reader::open(&db).unwrap();
        let mut view = View::default();
        events_json(&reader, &mut view, 0, 10).unwrap();
        journal_of(&db, "b", 2, 2);
        events_json(&reader, &mut view, 10, 1000).unwrap();
        let all = reader.entries(&LogFilter::default()).unwrap();
        let whole = Projection::build(&all);
        assert_eq!(
            serde_json::to_value(&view.projection).unwrap(),
            serde_json::to_value(&whole).unwrap()
        );
    }

    #[test]
    fn a_long_session_and_a_long_policy_history_are_cut_and_say_how_many_more() {
        use crate::config::Durability;
        use crate::journal::{Fields, Journal, Kind};
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("journal.db");
        // One session of 600 calls: 1,202 entries.
        journal_of(&db, "long", 1, 600);
        let mut j = Journal::open(&db, "m", Durability::Process).unwrap();
        let changes = (0..limits::CONSOLE_POLICY_HISTORY_MAX + 7)
            .map(|i| {
                (
                    Kind::PolicyChange,
                    Fields {
                        reason: Some(format!("change {i}")),
                        ..Fields::default()
                    },
                )
            })
            .collect();
        j.append_many(changes).unwrap();
        let reader = Reader::open(&db).unwrap();
        let page = session_page(&reader, "long-0").unwrap().unwrap();
        let events = page["events"].as_array().unwrap();
        assert_eq!(events.len(), limits::CONSOLE_SESSION_EVENTS_MAX);
        assert_eq!(
            page["earlier_not_shown"],
            1202 - limits::CONSOLE_SESSION_EVENTS_MAX
        );
        // The newest are shown, ending with the session's end.
        assert_eq!(events.last().unwrap()["kind"], "session.end");
        assert_eq!(page["session"]["calls"], 600);
        let (history, older) = policy_history(&reader).unwrap();
        assert_eq!(history.len(), limits::CONSOLE_POLICY_HISTORY_MAX);
        assert_eq!(older, 7);
        let newest = format!("change {}", limits::CONSOLE_POLICY_HISTORY_MAX + 6);
        assert_eq!(history[0]["reason"], newest.as_str());
    }

    #[test]
    fn same_bytes_is_true_only_for_equal_strings_of_equal_length() {
        assert!(same_bytes(b"abc", b"abc"));
        assert!(same_bytes(b"", b""));
        assert!(!same_bytes(b"abc", b"abd"));
        assert!(!same_bytes(b"abc", b"ab"));
        assert!(!same_bytes(b"xbc", b"abc"));
    }

    fn host(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn only_loopback_names_with_or_without_a_port_are_loopback_hosts() {
        for ok in [
            "127.0.0.1",
            "127.0.0.1:7717",
            "localhost",
            "LOCALHOST:1",
            "[::1]",
            "[::1]:80",
        ] {
            assert!(loopback_host(&host(ok)), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:7717",
            "127.0.0.1.evil.example",
            "localhost.",
            "127.0.0.2",
            "::1",
            "[::1]:x",
            "localhost:",
            "0.0.0.0",
            "",
        ] {
            assert!(!loopback_host(&host(bad)), "{bad}");
        }
        assert!(!loopback_host(&HeaderMap::new()));
        let mut two = host("localhost");
        two.append(header::HOST, HeaderValue::from_static("localhost"));
        assert!(!loopback_host(&two));
    }

    #[test]
    fn the_token_is_read_only_from_one_bearer_authorization_header() {
        let t = "ab".repeat(32);
        let mut h = HeaderMap::new();
        assert!(!bearer_ok(&h, &t));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {t}")).unwrap(),
        );
        assert!(bearer_ok(&h, &t));
        h.append(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {t}")).unwrap(),
        );
        assert!(!bearer_ok(&h, &t));
        let mut basic = HeaderMap::new();
        basic.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Basic {t}")).unwrap(),
        );
        assert!(!bearer_ok(&basic, &t));
    }

    #[test]
    fn a_query_is_read_strictly() {
        let q = parse_query(Some("tool=a%20b&agent=x+y"), &["tool", "agent"]).unwrap();
        assert_eq!(q["tool"], "a b");
        assert_eq!(q["agent"], "x y");
        for bad in [
            "tool=%zz",
            "tool=%4",
            "tool=%ff",
            "tool=a&tool=b",
            "nope=1",
            "tool=%01",
        ] {
            assert!(parse_query(Some(bad), &["tool"]).is_err(), "{bad}");
        }
        let long = format!("tool={}", "a".repeat(limits::CONSOLE_QUERY_BYTES_MAX));
        assert!(parse_query(Some(&long), &["tool"]).is_err());
    }

    #[test]
    fn a_bind_address_other_than_loopback_is_refused() {
        assert!(bind_addr(None).unwrap().is_loopback());
        assert!(bind_addr(Some("::1")).unwrap().is_loopback());
        for bad in ["0.0.0.0", "::", "192.168.1.2", "example.com", "127.0.0.2"] {
            assert!(matches!(
                bind_addr(Some(bad)),
                Err(ConsoleError::NotLoopback(_))
            ));
        }
    }

    #[test]
    fn the_console_sends_the_daemon_only_read_requests() {
        let scope = Scope {
            tool: Some("t".into()),
            agent: None,
            connector: None,
        };
        let reads = [
            WireRequest::ApprovalList,
            WireRequest::PolicyList,
            WireRequest::AgentList,
            WireRequest::Status,
            WireRequest::PolicyExplain {
                agent: None,
                connector: None,
                tool: "t".into(),
                arguments: None,
            },
        ];
        let writes = [
            WireRequest::ApprovalDecide {
                id: "abcdefabcdef".into(),
                approve: true,
                reason: None,
            },
            WireRequest::ApprovalWatch,
            WireRequest::Shutdown,
            WireRequest::PolicySet {
                effect: Effect::Allow,
                scope: scope.clone(),
            },
            WireRequest::PolicyRemove { scope },
            WireRequest::PolicyImport {
                file: "f".into(),
                text: String::new(),
                dry_run: true,
            },
            WireRequest::PolicyExport,
            WireRequest::AgentAdd {
                name: "a".into(),
                path: "/bin/true".into(),
            },
            WireRequest::AgentRemove { name: "a".into() },
        ];
        assert!(reads.iter().all(is_read_request));
        assert!(!writes.iter().any(is_read_request));
    }

    #[tokio::test]
    async fn a_request_that_is_not_a_read_is_refused_before_any_connection() {
        // A home with no daemon: were a connection tried, the answer would be NotRunning.
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path().to_path_buf());
        let decide = WireRequest::ApprovalDecide {
            id: "abcdefabcdef".into(),
            approve: true,
            reason: None,
        };
        assert!(matches!(
            ask_daemon(&home, &decide).await,
            Err(ConsoleDaemon::Refused(_))
        ));
        assert!(matches!(
            ask_daemon(&home, &WireRequest::Status).await,
            Err(ConsoleDaemon::NotRunning) | Err(ConsoleDaemon::Failed(_))
        ));
    }
}
