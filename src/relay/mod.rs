//! The relay (`holdcall serve`): one per MCP server a client spawns. It pumps newline-delimited
//! JSON-RPC between the client (our stdin/stdout) and the server (a child process), forwarding
//! every line as the bytes that arrived, and asks the daemon about every `tools/call` first.
//!
//! Owns: the child process, the per-session protocol version, the link to the daemon, and the
//! only writer of stdout. Must never: decide a call itself (only an explicit allow from the
//! daemon forwards it), write anything but protocol to stdout, or forward part of a line.
//!
//! Files, one job each: `client` (the client pump: client lines in, decisions asked, refusals
//! written), `server` (the server child and the pump that relays its lines), `link` (the daemon
//! link: asking, reading, a lost or silent daemon), `held` (held calls waiting for the
//! daemon's final word), `in_flight` (forwarded calls awaiting answers, retry states), `leak`
//! (the screen that keeps an injected secret from reaching the client). This
//! file starts them in order (`serve`) and owns the one stdout writer.

#![deny(clippy::print_stdout)]

pub mod classify;
mod client;
mod held;
mod in_flight;
mod leak;
mod link;
mod listing;
mod refusal;
mod server;
mod stdio;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdout};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::config::Home;
use crate::ipc::{self, SessionEnded, SessionRequest, SessionResponse, WireError};
use crate::limits;
use crate::mcp::line::{LineRead, read_line_capped};
use crate::mcp::version::Negotiation;
use client::ClientPump;
use in_flight::{InFlight, Retries, RetryStates};
use link::{Link, refuse_all_held};
use server::ServerInput;

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum RelayError {
    #[error("no server command: give one after `--`")]
    #[diagnostic(
        code(holdcall::relay::no_command),
        help("holdcall serve [--connector NAME] -- COMMAND [ARGS...]")
    )]
    NoCommand,
    #[error("cannot start the server command {command:?}: {source}")]
    #[diagnostic(
        code(holdcall::relay::spawn),
        help("check that the command exists and is executable; the client config names it")
    )]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    #[diagnostic(
        code(holdcall::relay::bad_argument),
        help("connector names are 1-128 letters, digits, '.', '_' or '-'")
    )]
    BadArgument(String),
    #[error("the relay's own input or output failed: {0}")]
    #[diagnostic(code(holdcall::relay::io))]
    Io(#[from] std::io::Error),
    #[error("not starting the server of connector {connector}: {message}")]
    #[diagnostic(
        code(holdcall::relay::no_credential),
        help(
            "a registered connector's server runs only with its secret; make the credential store \
             reachable (unlock the keyring, start the daemon from your desktop session) or set the \
             secret again with `holdcall connector set`; `holdcall connector remove` unregisters it"
        )
    )]
    NoCredential { connector: String, message: String },
    #[error("the daemon did not open this session ({why}), so no server was started")]
    #[diagnostic(
        code(holdcall::relay::session_not_opened),
        help(
            "see daemon.log in the holdcall home; `holdcall doctor` checks the daemon and the credential store"
        )
    )]
    SessionNotOpened { why: String },
    #[error("the daemon handed over a launch that is not valid: {0}")]
    #[diagnostic(
        code(holdcall::relay::bad_launch),
        help("run `holdcall daemon restart` so both ends are the same build")
    )]
    BadLaunch(String),
}

/// What `holdcall serve` was asked to do.
#[derive(Debug, Clone)]
pub(crate) struct ServeOptions {
    pub connector: String,
    /// When no `--connector` was given: what `connector` was derived from, in words.
    pub connector_from: Option<String>,
    pub client: Option<String>,
    pub command: Vec<OsString>,
}

/// Most lines queued for stdout before readers wait (backpressure, not loss).
const STDOUT_QUEUE: usize = 64;

fn new_session_id() -> String {
    crate::ids::random_hex(16).unwrap_or_else(|_| {
        // Without the kernel's randomness, fall back to time and pid: a session id must be
        // unique, not secret.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let seed = format!("{t}-{}", std::process::id());
        crate::ids::sha256_hex(seed.as_bytes())
            .chars()
            .take(32)
            .collect()
    })
}

/// Runs the relay until the client closes its input, the server exits, or a signal arrives.
pub(crate) async fn serve(home: Home, opts: ServeOptions) -> Result<i32, RelayError> {
    check_options(&opts)?;
    // Before anything else: a client that stops the relay during the session's start must not
    // kill it before it ends the session (the default action of these signals).
    let mut signals = Signals::install()?;
    let session_id = new_session_id();
    let link = connect(&home, &session_id).await;
    let launch = open_session(&home, &link, &opts, &session_id).await?;
    let screen = leak::Screen::for_launch(launch.as_ref(), &opts.connector, &link, &session_id)?;
    let (mut child, child_in, child_out) = server::start(launch, &opts)?;

    let dialect = Arc::new(Mutex::new(Negotiation::default()));
    let in_flight: InFlight = Arc::new(Mutex::new(HashMap::new()));
    let retries: Retries = Arc::new(Mutex::new(RetryStates::default()));
    let listings: listing::Listings = Arc::default();
    let (out_tx, writer) = spawn_stdout_writer();
    let (server_task, mut server_done) = spawn_server_pump(
        child_out,
        out_tx.clone(),
        Arc::clone(&dialect),
        Arc::clone(&in_flight),
        Arc::clone(&retries),
        link.clone(),
        session_id.clone(),
        screen,
        Arc::clone(&listings),
    );

    let child_in: ServerInput = Arc::new(tokio::sync::Mutex::new(Some(child_in)));
    let mut pump = ClientPump {
        child_in: Arc::clone(&child_in),
        out_tx,
        dialect: Arc::clone(&dialect),
        in_flight,
        retries,
        held_ids: Arc::new(Mutex::new(HashSet::new())),
        held_tasks: Vec::new(),
        link: link.clone(),
        session_id: session_id.clone(),
        seq: 0,
        said: HashSet::new(),
        listings,
    };
    let ended = pump_client(&mut pump, &mut server_done, &mut signals).await;

    stop_server(&child_in, &mut child, ended, &mut signals, server_task).await;
    end_session(&link, session_id, &dialect, ended).await;
    wait_for_held(std::mem::take(&mut pump.held_tasks)).await;
    drop(pump);
    let _ = tokio::time::timeout(limits::SERVER_STOP_GRACE, writer).await;
    let lost = link.lost.load(Ordering::SeqCst);
    if lost > 0 {
        eprintln!(
            "holdcall: {lost} report(s) about this session (outcomes, anomalies) could not be recorded in the journal"
        );
    }
    Ok(0)
}

/// The connector name and the `--client` label, checked before anything starts.
fn check_options(opts: &ServeOptions) -> Result<(), RelayError> {
    crate::policy::validate_scope_name("connector", &opts.connector)
        .map_err(|e| RelayError::BadArgument(e.to_string()))?;
    if let Some(c) = &opts.client
        && (c.is_empty()
            || c.len() > limits::CLIENT_LABEL_BYTES_MAX
            || c.chars().any(char::is_control))
    {
        return Err(RelayError::BadArgument(format!(
            "--client is a label of 1 to {} bytes without control characters",
            limits::CLIENT_LABEL_BYTES_MAX
        )));
    }
    Ok(())
}

/// The signals that stop the relay (SIGTERM, SIGHUP, SIGINT), caught instead of killing it.
struct Signals {
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> std::io::Result<Signals> {
        Ok(Signals {
            term: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?,
            hup: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?,
            int: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?,
        })
    }

    /// Returns once any of them arrives.
    async fn any(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.hup.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

/// The link to the home's daemon, started if need be. Without one the link is dead from the
/// start, and says why in every refusal.
async fn connect(home: &Home, session_id: &str) -> Link {
    let (conn, no_daemon) = match ipc::connect_or_start(
        home,
        crate::limits::RELAY_DAEMON_READY_TIMEOUT,
    )
    .await
    {
        Ok(c) => (Some(c.session()), None),
        Err(e) => {
            eprintln!("holdcall: no daemon to decide calls: {e}");
            eprintln!(
                "holdcall: the server will start, but every tool call in this session will be refused"
            );
            (None, Some(e.to_string()))
        }
    };
    Link::start(conn, session_id.to_string(), no_daemon)
}

/// Asks the daemon to open the session; its answer may hand over a registered connector's
/// launch. A daemon that does not answer at all leaves the link dead (every call refused) and
/// the server still starts; a daemon that answers anything but an opened session starts nothing.
async fn open_session(
    home: &Home,
    link: &Link,
    opts: &ServeOptions,
    session_id: &str,
) -> Result<Option<crate::connector::Launch>, RelayError> {
    if link.dead.load(Ordering::SeqCst) {
        return Ok(None);
    }
    let start = link.ask_in_order(SessionRequest::SessionStart {
        session_id: session_id.to_string(),
        connector: opts.connector.clone(),
        client: opts.client.clone(),
        connector_from: opts.connector_from.clone(),
    });
    tokio::pin!(start);
    // The answer may take a store read or two (`limits::STORE_REQUEST_TIMEOUT`); a daemon
    // that does not answer at all (stopped, hung) must not keep the client in silence that
    // long. Asked beside it: does the daemon answer anything within the decision timeout?
    let unresponsive = link::daemon_unresponsive(home);
    tokio::pin!(unresponsive);
    let first = tokio::select! {
        answer = &mut start => Ok(answer),
        unresponsive = &mut unresponsive => Err(unresponsive),
    };
    let started = match first {
        Ok(answer) => Some(answer),
        Err(true) => None,
        Err(false) => Some((&mut start).await),
    };
    match started {
        // As with no daemon at all: the server starts, so the client is answered, and every
        // call is refused, never forwarded undecided.
        None => {
            link.dead.store(true, Ordering::SeqCst);
            eprintln!(
                "holdcall: the daemon did not answer within {:?}; the server will start, but every tool call in this session will be refused",
                limits::DECISION_TIMEOUT
            );
            Ok(None)
        }
        Some(Ok(SessionResponse::SessionOpened { launch })) => Ok(launch),
        Some(Ok(SessionResponse::CredentialUnavailable { connector, message })) => {
            Err(RelayError::NoCredential { connector, message })
        }
        // A verified daemon that did not open the session may be the one that holds this
        // connector's registration: running the command given after `--` instead could run
        // a server its registration was meant to replace. Nothing starts.
        Some(other) => Err(RelayError::SessionNotOpened {
            why: describe(&other),
        }),
    }
}

/// The only writer of stdout: every line, relayed or our own refusal, goes through here, so
/// no two messages ever interleave.
fn spawn_stdout_writer() -> (mpsc::Sender<Vec<u8>>, JoinHandle<()>) {
    let (out_tx, mut out_rx) = mpsc::channel::<Vec<u8>>(STDOUT_QUEUE);
    let writer = tokio::spawn(async move {
        let mut stdout = stdio::client_output();
        while let Some(line) = out_rx.recv().await {
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    (out_tx, writer)
}

/// Starts the server pump; the receiver fires once the server's output has ended.
// Each pump owns its share of the session; a struct of them would only rename the list.
#[allow(clippy::too_many_arguments)]
fn spawn_server_pump(
    child_out: ChildStdout,
    out_tx: mpsc::Sender<Vec<u8>>,
    dialect: Arc<Mutex<Negotiation>>,
    in_flight: InFlight,
    retries: Retries,
    link: Link,
    session_id: String,
    screen: leak::Screen,
    listings: listing::Listings,
) -> (JoinHandle<()>, oneshot::Receiver<()>) {
    let (server_done_tx, server_done) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        server::pump_server(
            child_out, out_tx, dialect, in_flight, retries, link, session_id, screen, listings,
        )
        .await;
        let _ = server_done_tx.send(());
    });
    (task, server_done)
}

/// Feeds the client's lines to the pump until the client closes its input, the server exits,
/// or a signal arrives; says which.
async fn pump_client(
    pump: &mut ClientPump,
    server_done: &mut oneshot::Receiver<()>,
    signals: &mut Signals,
) -> SessionEnded {
    let mut stdin = BufReader::with_capacity(64 * 1024, stdio::client_input());
    loop {
        tokio::select! {
            line = read_line_capped(&mut stdin, limits::FRAME_BYTES_MAX) => {
                match line {
                    Ok(LineRead::Line(l)) => {
                        if !pump.client_line(l).await {
                            break SessionEnded::ServerExited;
                        }
                    }
                    Ok(LineRead::TooLong(n)) => pump.oversized(n),
                    Ok(LineRead::Eof) | Err(_) => break SessionEnded::ClientClosed,
                }
            }
            _ = &mut *server_done => break SessionEnded::ServerExited,
            _ = signals.any() => break SessionEnded::Stopped,
        }
    }
}

/// Closing the server's stdin is the polite stop; signals follow for a server that ignores it.
/// A client that signals the relay wants it gone soon (and kills it next): the server then
/// gets a short grace only, so the session is ended before the relay is killed.
/// A held call approved from now on has no server to go to, and is refused.
async fn stop_server(
    child_in: &ServerInput,
    child: &mut Child,
    ended: SessionEnded,
    signals: &mut Signals,
    server_task: JoinHandle<()>,
) {
    *child_in.lock().await = None;
    let hurried = ended == SessionEnded::Stopped || {
        let signalled = tokio::select! {
            _ = crate::os::child::stop_group(child, limits::SERVER_STOP_GRACE) => false,
            _ = signals.any() => true,
        };
        signalled
    };
    let grace = if hurried {
        crate::os::child::stop_group_now(child, limits::SERVER_STOP_AFTER_SIGNAL).await;
        limits::SERVER_STOP_AFTER_SIGNAL
    } else {
        limits::SERVER_STOP_GRACE
    };
    let _ = tokio::time::timeout(grace, server_task).await;
}

/// Ending the session rejects the calls still held; the daemon journals each and pushes its
/// word before it answers, so their refusals reach the client before stdout closes.
async fn end_session(
    link: &Link,
    session_id: String,
    dialect: &Mutex<Negotiation>,
    ended: SessionEnded,
) {
    let version = dialect
        .lock()
        .map(|d| d.version().to_string())
        .unwrap_or_default();
    if !link.dead.load(Ordering::SeqCst) {
        let _ = link
            .ask_in_order(SessionRequest::SessionEnd {
                session_id,
                protocol_version: Some(version),
                ended: Some(ended),
            })
            .await;
    } else {
        refuse_all_held(&link.held);
    }
}

/// Gives each held call's task a grace to write its refusal, then stops it.
async fn wait_for_held(held_tasks: Vec<JoinHandle<()>>) {
    for t in held_tasks {
        let abort = t.abort_handle();
        if tokio::time::timeout(limits::SERVER_STOP_GRACE, t)
            .await
            .is_err()
        {
            abort.abort();
        }
    }
}

fn describe(r: &Result<SessionResponse, WireError>) -> String {
    match r {
        Ok(SessionResponse::Error { message }) => message.clone(),
        Ok(other) => format!("unexpected answer {other:?}"),
        Err(e) => e.to_string(),
    }
}
