//! `holdcall console`: a read-only web page on a loopback address over the journal, the held
//! calls, the sessions and the policy in force (axum routing; its connections, accepted, shed and
//! timed by `connections`, on hyper).
//!
//! Owns: the HTTP rules (loopback Host, GET/HEAD only, a per-launch bearer token for every
//! `/api/` path, strict headers on every answer), the page's JSON, and the console's daemon
//! client. Must never: write the database (it opens it with SQLite's read-only flag), start the
//! daemon (it dials with `ipc::connect`, never `connect_or_start`), send the daemon anything but
//! a read request ([`daemon::is_read_request`]), or offer a route that decides: approving stays
//! on the command line, because any page in the person's browser can reach a loopback port.
//!
//! Files: `http` (routes, the guard, headers, the token, the static page), `query` (strict query
//! strings), `api` (the JSON answers), `view` (what is kept of the journal between requests),
//! `daemon` (the read-only daemon client), `connections` (accepting, timing and shedding
//! connections on hyper). The page itself is `page/`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

mod api;
mod connections;
mod daemon;
mod http;
mod query;
#[cfg(test)]
mod tests;
mod view;

use crate::config::Home;
use crate::journal::Reader;
use view::View;

/// The port `holdcall console` listens on when `--port` is not given.
pub(crate) const DEFAULT_PORT: u16 = 7717;

/// The Content-Security-Policy of every answer: the page's own script and style only, no inline
/// code, no other origin, no framing, no forms, no base changes.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

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
pub(crate) struct Options {
    pub bind: Option<String>,
    pub port: u16,
}

/// The loopback address to listen on: 127.0.0.1 unless `bind` names `::1` (or `localhost`).
/// Anything else is refused.
pub(crate) fn bind_addr(bind: Option<&str>) -> Result<IpAddr, ConsoleError> {
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

/// Runs the console until the process is stopped. Prints the address (with the token in its
/// fragment) on stdout once it listens.
pub(crate) fn run(opts: Options) -> Result<i32, ConsoleError> {
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
        connections::serve(listener, http::router(shared), cap, stop_signal()).await;
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
