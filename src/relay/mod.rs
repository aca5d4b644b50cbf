//! The relay (`holdcall serve`): one per MCP server a client spawns. It pumps newline-delimited
//! JSON-RPC between the client (our stdin/stdout) and the server (a child process), forwarding
//! every line as the bytes that arrived, and asks the daemon about every `tools/call` first.
//!
//! Owns: the child process, the per-session protocol version, the link to the daemon, and the
//! only writer of stdout. Must never: decide a call itself (only an explicit allow from the
//! daemon forwards it), write anything but protocol to stdout, or forward part of a line.

#![deny(clippy::print_stdout)]

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{mpsc, oneshot};

use crate::approval::Cause;
use crate::config::Home;
use crate::frame::{self, Anomaly, ClientFrame, Dialect};
use crate::ipc::{
    self, LineRead, Release, SessionEnded, SessionRequest as Request, SessionResponse as Response,
    Verdict, WireError,
};
use crate::limits;

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
pub struct ServeOptions {
    pub connector: String,
    /// When no `--connector` was given: what `connector` was derived from, in words.
    pub connector_from: Option<String>,
    pub client: Option<String>,
    pub command: Vec<OsString>,
}

/// Most daemon messages the relay queues before it refuses calls and drops events.
const LINK_QUEUE: usize = 256;
/// Most lines queued for stdout before readers wait (backpressure, not loss).
const STDOUT_QUEUE: usize = 64;

type Reply = oneshot::Sender<Result<Response, WireError>>;

/// The daemon's final word on a held call, as the relay routes it: approved, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Word {
    Approved,
    /// Refused, with the text the client reads.
    Refused(String),
}

/// A held call waiting for its word: the digest the word must name, and where to send it.
struct Waiting {
    digest: String,
    tx: oneshot::Sender<Word>,
}

/// Held calls by seq. Dropping an entry (its sender) refuses the call: that is how a lost
/// daemon, or a word that does not match, refuses every call it concerns.
type HeldWaits = Arc<Mutex<HashMap<i64, Waiting>>>;

/// The relay's side of the daemon connection. One task writes requests, one at a time, and waits
/// for each answer; another reads every line the daemon sends, passing answers to the first and
/// routing pushed words (`call.released`) to the held call they name. Call decisions have their
/// own queue and go first, so reports (outcomes, anomalies) queued by a chatty session never
/// delay a decision toward its timeout. Once an exchange fails the link is dead for the rest of
/// the session: every held call is refused, and every later call is refused at once instead of
/// waiting again.
#[derive(Clone)]
struct Link {
    decisions: mpsc::Sender<(Request, Reply)>,
    /// Reports, and the session's start and end, in the order they happened.
    in_order: mpsc::Sender<(Request, Option<Reply>)>,
    dead: Arc<AtomicBool>,
    lost: Arc<AtomicU64>,
    held: HeldWaits,
    /// Why the session has no daemon from its start (none could be reached, or the one on the
    /// socket is another home's): every refusal says it.
    no_daemon: Option<Arc<str>>,
}

/// Most decisions that can wait for the daemon at once (the relay asks one at a time).
const DECISION_QUEUE: usize = 16;

/// Answers read but not yet taken: one is expected at a time; a second is a broken daemon.
const ANSWER_QUEUE: usize = 4;

impl Link {
    fn start(conn: Option<ipc::Conn>, session_id: String, no_daemon: Option<String>) -> Link {
        let (decisions, mut decision_rx) = mpsc::channel::<(Request, Reply)>(DECISION_QUEUE);
        let (in_order, mut order_rx) = mpsc::channel::<(Request, Option<Reply>)>(LINK_QUEUE);
        let dead = Arc::new(AtomicBool::new(conn.is_none()));
        let lost = Arc::new(AtomicU64::new(0));
        let held: HeldWaits = Arc::new(Mutex::new(HashMap::new()));
        let (answer_tx, mut answer_rx) = mpsc::channel::<Response>(ANSWER_QUEUE);
        let (mut writer, reader_task) = match conn {
            Some(c) => {
                let (reader, writer) = c.into_split();
                let task = tokio::spawn(read_daemon(
                    reader,
                    answer_tx,
                    Arc::clone(&held),
                    Arc::clone(&dead),
                    session_id,
                ));
                (Some(writer), Some(task))
            }
            None => (None, None),
        };
        let (d, l, h) = (Arc::clone(&dead), Arc::clone(&lost), Arc::clone(&held));
        tokio::spawn(async move {
            loop {
                let (req, reply) = tokio::select! {
                    biased;
                    Some((req, reply)) = decision_rx.recv() => (req, Some(reply)),
                    Some((req, reply)) = order_rx.recv() => (req, reply),
                    else => break,
                };
                let result = match writer.as_mut() {
                    Some(w) if !d.load(Ordering::SeqCst) => exchange(w, &mut answer_rx, &req).await,
                    _ => Err(WireError::Closed),
                };
                if let Err(e) = &result {
                    if !d.swap(true, Ordering::SeqCst) {
                        eprintln!(
                            "holdcall: lost the daemon ({e}); every later tool call in this session will be refused"
                        );
                    }
                    writer = None;
                    if let Some(t) = &reader_task {
                        t.abort();
                    }
                    refuse_all_held(&h);
                    if reply.is_none() {
                        l.fetch_add(1, Ordering::SeqCst);
                    }
                }
                if let Some(reply) = reply {
                    let _ = reply.send(result);
                }
            }
        });
        Link {
            decisions,
            in_order,
            dead,
            lost,
            held,
            no_daemon: no_daemon.map(Arc::from),
        }
    }

    /// Sends a one-way report; a full queue or a dead link loses it (counted, said at exit).
    fn report(&self, req: Request) {
        if self.dead.load(Ordering::SeqCst) || self.in_order.try_send((req, None)).is_err() {
            self.lost.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Asks for a call's decision and waits at most `limits::DECISION_TIMEOUT`, queueing
    /// included.
    async fn decide(&self, req: Request) -> Result<Response, WireError> {
        if self.dead.load(Ordering::SeqCst) {
            return Err(WireError::Closed);
        }
        let (tx, rx) = oneshot::channel();
        if self.decisions.try_send((req, tx)).is_err() {
            self.dead.store(true, Ordering::SeqCst);
            return Err(WireError::Closed);
        }
        self.wait(rx).await
    }

    /// Asks after every report queued before it (the session's start and end).
    async fn ask_in_order(&self, req: Request) -> Result<Response, WireError> {
        if self.dead.load(Ordering::SeqCst) {
            return Err(WireError::Closed);
        }
        let timeout = within(&req);
        let (tx, rx) = oneshot::channel();
        if self.in_order.send((req, Some(tx))).await.is_err() {
            return Err(WireError::Closed);
        }
        self.wait_for(rx, timeout).await
    }

    async fn wait(
        &self,
        rx: oneshot::Receiver<Result<Response, WireError>>,
    ) -> Result<Response, WireError> {
        self.wait_for(rx, limits::DECISION_TIMEOUT).await
    }

    async fn wait_for(
        &self,
        rx: oneshot::Receiver<Result<Response, WireError>>,
        timeout: std::time::Duration,
    ) -> Result<Response, WireError> {
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(WireError::Closed),
            Err(_) => {
                if !self.dead.swap(true, Ordering::SeqCst) {
                    eprintln!(
                        "holdcall: the daemon did not answer within {timeout:?}; every later tool call in this session will be refused"
                    );
                }
                refuse_all_held(&self.held);
                Err(WireError::Timeout(timeout))
            }
        }
    }

    /// Makes ready for a word on call `seq` before asking about it, so a word pushed right after
    /// the `held` answer always finds its call.
    fn expect_word(&self, seq: i64, digest: &str) -> oneshot::Receiver<Word> {
        let (tx, rx) = oneshot::channel();
        if let Ok(mut h) = self.held.lock() {
            h.insert(
                seq,
                Waiting {
                    digest: digest.to_string(),
                    tx,
                },
            );
        }
        rx
    }

    /// The call was not held after all.
    fn forget_word(&self, seq: i64) {
        if let Ok(mut h) = self.held.lock() {
            h.remove(&seq);
        }
    }
}

/// Refuses every held call: their senders are dropped, which their waiters read as no word.
fn refuse_all_held(held: &HeldWaits) {
    if let Ok(mut h) = held.lock() {
        h.clear();
    }
}

/// Writes one request and waits for the one answer the reader passes on, within
/// `limits::DECISION_TIMEOUT`. An answer already waiting before the request was sent answers
/// nothing we asked: the link cannot be trusted.
async fn exchange(
    w: &mut ipc::ConnWriter,
    answers: &mut mpsc::Receiver<Response>,
    req: &Request,
) -> Result<Response, WireError> {
    if answers.try_recv().is_ok() {
        return Err(WireError::Protocol(
            "the daemon answered a question it was not asked".into(),
        ));
    }
    let asked = async {
        w.send(req).await?;
        answers.recv().await.ok_or(WireError::Closed)
    };
    let bound = within(req);
    tokio::time::timeout(bound, asked)
        .await
        .map_err(|_| WireError::Timeout(bound))?
}

/// Reads every line from the daemon: answers go to the asking task, words on held calls to the
/// call they name. When the connection ends, every held call is refused.
async fn read_daemon(
    mut reader: ipc::ConnReader,
    answers: mpsc::Sender<Response>,
    held: HeldWaits,
    dead: Arc<AtomicBool>,
    session_id: String,
) {
    let why = loop {
        let line = reader.recv().await;
        match line {
            Ok(Response::Released {
                session_id: s,
                seq,
                args_digest,
                verdict,
                cause,
                reason,
            }) => {
                if !route_word(
                    &held,
                    &session_id,
                    &s,
                    seq,
                    &args_digest,
                    verdict,
                    &cause,
                    reason,
                ) {
                    break "the daemon sent a word about a call this session did not hold"
                        .to_string();
                }
            }
            Ok(answer) => {
                if answers.send(answer).await.is_err() {
                    break "the relay stopped listening".to_string();
                }
            }
            Err(e) => break e.to_string(),
        }
    };
    refuse_all_held(&held);
    // Said once, by whichever side notices first; the asking side then finds the link dead.
    if !dead.swap(true, Ordering::SeqCst) {
        eprintln!(
            "holdcall: lost the daemon ({why}); every held and every later tool call in this session will be refused"
        );
    }
}

/// Hands a pushed word to the held call it names. Only a word naming this session, a held call
/// and that call's argument digest counts; a word with another digest refuses the call it
/// names, and a word for another session or a call that is not held means the link cannot be
/// trusted (false).
#[allow(clippy::too_many_arguments)]
fn route_word(
    held: &HeldWaits,
    session: &str,
    word_session: &str,
    seq: i64,
    digest: &str,
    verdict: Release,
    cause: &str,
    reason: Option<String>,
) -> bool {
    if word_session != session {
        return false;
    }
    let Some(waiting) = held.lock().ok().and_then(|mut h| h.remove(&seq)) else {
        return false;
    };
    if waiting.digest != digest {
        // Dropped: refused as no decision.
        return true;
    }
    let word = match (verdict, Cause::parse(cause)) {
        (Release::Approved, Some(Cause::Person)) => Word::Approved,
        (Release::Rejected, Some(Cause::Person)) => {
            Word::Refused(frame::person_rejected(reason.as_deref()))
        }
        (Release::Rejected, Some(Cause::Timeout)) => {
            Word::Refused(frame::DENIED_APPROVAL_TIMEOUT.into())
        }
        (Release::Rejected, Some(Cause::SessionEnded | Cause::ConnectionDropped)) => {
            Word::Refused(frame::DENIED_APPROVAL_ENDED.into())
        }
        (Release::Rejected, Some(Cause::ArgumentsUnknown)) => {
            Word::Refused(frame::DENIED_ARGUMENTS_UNKNOWN.into())
        }
        (Release::Rejected, Some(Cause::OverBudget)) => {
            Word::Refused(frame::DENIED_OVER_BUDGET.into())
        }
        (Release::Rejected, Some(Cause::Policy)) => Word::Refused(frame::DENIED_BY_POLICY.into()),
        _ => Word::Refused(frame::DENIED_NO_DECISION.into()),
    };
    let _ = waiting.tx.send(word);
    true
}

/// How long the relay waits for the answer to `req`: a session start may read the credential
/// store first; everything else is a decision or a report.
fn within(req: &Request) -> std::time::Duration {
    match req {
        Request::SessionStart { .. } => limits::STORE_REQUEST_TIMEOUT,
        _ => limits::DECISION_TIMEOUT,
    }
}

/// Calls allowed and forwarded, keyed by the raw bytes of their JSON-RPC id, awaiting the
/// server's answer so the outcome can be recorded.
type InFlight = Arc<Mutex<HashMap<Vec<u8>, Forwarded>>>;

/// One call forwarded to the server and not yet answered.
#[derive(Debug, Clone)]
struct Forwarded {
    seq: i64,
    started: Instant,
    /// What a retry must match to be the same call: the original call's seq (a retry's own
    /// answer can ask for input again), its tool, and the digest of its arguments.
    call: RetryOf,
}

/// The call a `requestState` belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RetryOf {
    origin: i64,
    tool: String,
    digest: String,
}

/// The `requestState`s of `input_required` answers, each waiting for the client's retry, oldest
/// first. Bounded (`limits::RETRY_STATES_MAX`): a forgotten state only makes its retry count as
/// a new call.
#[derive(Debug, Default)]
struct RetryStates {
    by_state: HashMap<Vec<u8>, RetryOf>,
    order: std::collections::VecDeque<Vec<u8>>,
}

impl RetryStates {
    fn remember(&mut self, state: Vec<u8>, call: RetryOf) {
        if state.len() > limits::REQUEST_STATE_BYTES_MAX {
            return;
        }
        if self.by_state.insert(state.clone(), call).is_none() {
            self.order.push_back(state);
        }
        while self.order.len() > limits::RETRY_STATES_MAX {
            if let Some(old) = self.order.pop_front() {
                self.by_state.remove(&old);
            }
        }
    }

    /// The original call, if `state` was given for a call of `tool` with these same arguments;
    /// the state is used up. Anything else is a new call (and the state stays for its retry).
    fn take(&mut self, state: &[u8], tool: &str, digest: &str) -> Option<i64> {
        let call = self.by_state.get(state)?;
        if call.tool != tool || call.digest != digest {
            return None;
        }
        let origin = call.origin;
        self.by_state.remove(state);
        self.order.retain(|s| s.as_slice() != state);
        Some(origin)
    }
}

type Retries = Arc<Mutex<RetryStates>>;

/// The server's stdin, shared by the client pump and held calls released later; a line is
/// written whole under the lock, so two lines never interleave. None once closed.
type ServerInput = Arc<tokio::sync::Mutex<Option<ChildStdin>>>;

/// The raw ids of held calls: another call with one of them is a duplicate.
type HeldIds = Arc<Mutex<HashSet<Vec<u8>>>>;

/// Writes one whole line to the server; false when it can no longer be written to.
async fn write_server(input: &ServerInput, line: &[u8]) -> bool {
    match input.lock().await.as_mut() {
        Some(w) => w.write_all(line).await.is_ok() && w.flush().await.is_ok(),
        None => false,
    }
}

fn new_session_id() -> String {
    crate::ids::random_hex(16).unwrap_or_else(|_| {
        // Without the kernel's randomness, fall back to time and pid: a session id must be
        // unique, not secret.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let seed = format!("{t}-{}", std::process::id());
        frame::sha256_hex(seed.as_bytes())
            .chars()
            .take(32)
            .collect()
    })
}

/// Runs the relay until the client closes its input, the server exits, or a signal arrives.
pub async fn serve(home: Home, opts: ServeOptions) -> Result<i32, RelayError> {
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
    // Before anything else: a client that stops the relay during the session's start must not
    // kill it before it ends the session (the default action of these signals).
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let session_id = new_session_id();
    let (conn, no_daemon) = match ipc::connect_or_start(&home).await {
        Ok(c) => (Some(c), None),
        Err(e) => {
            eprintln!("holdcall: no daemon to decide calls: {e}");
            eprintln!(
                "holdcall: the server will start, but every tool call in this session will be refused"
            );
            (None, Some(e.to_string()))
        }
    };
    let link = Link::start(conn, session_id.clone(), no_daemon);
    let mut launch = None;
    if !link.dead.load(Ordering::SeqCst) {
        let start = link.ask_in_order(Request::SessionStart {
            session_id: session_id.clone(),
            connector: opts.connector.clone(),
            client: opts.client.clone(),
            connector_from: opts.connector_from.clone(),
        });
        tokio::pin!(start);
        // The answer may take a store read or two (`limits::STORE_REQUEST_TIMEOUT`); a daemon
        // that does not answer at all (stopped, hung) must not keep the client in silence that
        // long. Asked beside it: does the daemon answer anything within the decision timeout?
        let unresponsive = daemon_unresponsive(&home);
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
            }
            Some(Ok(Response::SessionOpened { launch: l })) => launch = l,
            Some(Ok(Response::CredentialUnavailable { connector, message })) => {
                return Err(RelayError::NoCredential { connector, message });
            }
            // A verified daemon that did not open the session may be the one that holds this
            // connector's registration: running the command given after `--` instead could run
            // a server its registration was meant to replace. Nothing starts.
            Some(other) => {
                return Err(RelayError::SessionNotOpened {
                    why: describe(&other),
                });
            }
        }
    }

    let mut cmd = match &launch {
        Some(l) => {
            if !opts.command.is_empty() {
                eprintln!(
                    "holdcall: connector {} is registered: running its registered command {}, not the command given after `--`",
                    opts.connector,
                    crate::text::visible(&l.command.join(" "))
                );
            }
            credentialed_command(l)?
        }
        None => {
            let (program, args) = opts.command.split_first().ok_or(RelayError::NoCommand)?;
            let mut cmd = Command::new(program);
            cmd.args(args);
            cmd
        }
    };
    let program = cmd.as_std().get_program().to_string_lossy().into_owned();
    // The secret now lives only in the command's environment.
    drop(launch);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .process_group(0);
    die_with_parent(&mut cmd);
    let mut child = cmd.spawn().map_err(|source| RelayError::Spawn {
        command: program,
        source,
    })?;
    let (Some(child_in), Some(child_out)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(RelayError::Io(std::io::Error::other(
            "the server's pipes were not created",
        )));
    };

    let dialect = Arc::new(Mutex::new(Dialect::default()));
    let in_flight: InFlight = Arc::new(Mutex::new(HashMap::new()));
    let retries: Retries = Arc::new(Mutex::new(RetryStates::default()));

    // The only writer of stdout: every line, relayed or our own refusal, goes through here, so
    // no two messages ever interleave.
    let (out_tx, mut out_rx) = mpsc::channel::<Vec<u8>>(STDOUT_QUEUE);
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = out_rx.recv().await {
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });

    let (server_done_tx, mut server_done) = oneshot::channel::<()>();
    let server_task = {
        let out_tx = out_tx.clone();
        let dialect = Arc::clone(&dialect);
        let in_flight = Arc::clone(&in_flight);
        let retries = Arc::clone(&retries);
        let link = link.clone();
        let session_id = session_id.clone();
        tokio::spawn(async move {
            pump_server(
                child_out, out_tx, dialect, in_flight, retries, link, session_id,
            )
            .await;
            let _ = server_done_tx.send(());
        })
    };

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
    };
    let mut stdin = BufReader::with_capacity(64 * 1024, tokio::io::stdin());
    let ended = loop {
        tokio::select! {
            line = ipc::read_line_capped(&mut stdin, limits::FRAME_BYTES_MAX) => {
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
            _ = &mut server_done => break SessionEnded::ServerExited,
            _ = term.recv() => break SessionEnded::Stopped,
            _ = hup.recv() => break SessionEnded::Stopped,
            _ = int.recv() => break SessionEnded::Stopped,
        }
    };

    // Closing the server's stdin is the polite stop; signals follow for a server that ignores it.
    // A client that signals the relay wants it gone soon (and kills it next): the server then
    // gets a short grace only, so the session is ended before the relay is killed.
    // A held call approved from now on has no server to go to, and is refused.
    *child_in.lock().await = None;
    let hurried = ended == SessionEnded::Stopped || {
        let signalled = tokio::select! {
            _ = stop_child(&mut child) => false,
            _ = term.recv() => true,
            _ = hup.recv() => true,
            _ = int.recv() => true,
        };
        signalled
    };
    let grace = if hurried {
        stop_child_within(&mut child, limits::SERVER_STOP_AFTER_SIGNAL).await;
        limits::SERVER_STOP_AFTER_SIGNAL
    } else {
        limits::SERVER_STOP_GRACE
    };
    let _ = tokio::time::timeout(grace, server_task).await;

    let version = dialect
        .lock()
        .map(|d| d.version().to_string())
        .unwrap_or_default();
    // Ending the session rejects the calls still held; the daemon journals each and pushes its
    // word before it answers, so their refusals reach the client before stdout closes.
    if !link.dead.load(Ordering::SeqCst) {
        let _ = link
            .ask_in_order(Request::SessionEnd {
                session_id,
                protocol_version: Some(version),
                ended: Some(ended),
            })
            .await;
    } else {
        refuse_all_held(&link.held);
    }
    let held_tasks = std::mem::take(&mut pump.held_tasks);
    for t in held_tasks {
        let abort = t.abort_handle();
        if tokio::time::timeout(limits::SERVER_STOP_GRACE, t)
            .await
            .is_err()
        {
            abort.abort();
        }
    }
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

fn describe(r: &Result<Response, WireError>) -> String {
    match r {
        Ok(Response::Error { message }) => message.clone(),
        Ok(other) => format!("unexpected answer {other:?}"),
        Err(e) => e.to_string(),
    }
}

/// The registered command of a credentialed connector, by its absolute path (PATH is never
/// searched), with the minimal environment `connector::server_env` builds and nothing else.
fn credentialed_command(l: &crate::connector::Launch) -> Result<Command, RelayError> {
    crate::connector::validate_command(&l.command)
        .map_err(|e| RelayError::BadLaunch(e.to_string()))?;
    crate::connector::validate_env_name("the environment key", &l.env_key)
        .map_err(|e| RelayError::BadLaunch(e.to_string()))?;
    // Checked again here, as at set time: a row edited in the database must not pass a loader
    // or interpreter variable through.
    crate::connector::validate_pass_env(&l.env_key, &l.pass_env)
        .map_err(|e| RelayError::BadLaunch(e.to_string()))?;
    let (program, args) = l
        .command
        .split_first()
        .ok_or_else(|| RelayError::BadLaunch("no command".into()))?;
    let mut cmd = Command::new(program);
    // The directory `connector set` ran in, never the relay's: a client starts servers in a
    // project directory, whose files a launcher (npx, python -m) would otherwise pick up.
    cmd.args(args)
        .current_dir(&l.cwd)
        .env_clear()
        .envs(crate::connector::server_env(l, std::env::vars_os()));
    Ok(cmd)
}

/// Makes the server receive SIGTERM if the relay dies without stopping it (even by SIGKILL).
#[allow(unsafe_code)]
fn die_with_parent(cmd: &mut Command) {
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec. It calls only prctl and
    // getppid, both async-signal-safe, allocates nothing and touches no parent state. If the
    // relay already died before prctl took effect, the child refuses to exec.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)
                .map_err(std::io::Error::from)?;
            if nix::unistd::getppid() != parent {
                return Err(std::io::Error::other(
                    "the relay exited before the server started",
                ));
            }
            Ok(())
        });
    }
}

/// Waits for the server to leave after its stdin closed; then SIGTERM, then SIGKILL, each to
/// its whole process group.
/// Stops the server at once: SIGTERM to its group, `bound` to exit, then SIGKILL.
async fn stop_child_within(child: &mut Child, bound: std::time::Duration) {
    let group = child.id().map(|p| nix::unistd::Pid::from_raw(p as i32));
    if let Some(g) = group {
        let _ = nix::sys::signal::killpg(g, nix::sys::signal::Signal::SIGTERM);
    }
    if let Ok(Ok(_)) = tokio::time::timeout(bound, child.wait()).await {
        return;
    }
    if let Some(g) = group {
        let _ = nix::sys::signal::killpg(g, nix::sys::signal::Signal::SIGKILL);
    }
    let _ = child.kill().await;
}

/// True when the daemon of `home` answers nothing within `limits::DECISION_TIMEOUT` on a
/// connection of its own (a `daemon.status`, which reads no credential store). False when it
/// answers, or when no second connection can be had (then the session's own answer decides).
async fn daemon_unresponsive(home: &Home) -> bool {
    // Connecting is bounded too: a connection that is accepted late is no answer either, and
    // neither is one whose `daemon.hello` went unanswered (`connect` then says Timeout, its
    // bound being the same as this one's, so either may fire first).
    let asked = tokio::time::timeout(limits::DECISION_TIMEOUT, async {
        let mut conn = match ipc::connect(home).await {
            Ok(conn) => conn,
            Err(WireError::Timeout(t)) => return Some(Err(WireError::Timeout(t))),
            Err(_) => return None,
        };
        Some(
            conn.call(&ipc::ManageRequest::Status, limits::DECISION_TIMEOUT)
                .await,
        )
    })
    .await;
    matches!(asked, Err(_) | Ok(Some(Err(WireError::Timeout(_)))))
}

async fn stop_child(child: &mut Child) {
    if let Ok(Ok(_)) = tokio::time::timeout(limits::SERVER_STOP_GRACE, child.wait()).await {
        return;
    }
    let group = child.id().map(|p| nix::unistd::Pid::from_raw(p as i32));
    if let Some(g) = group {
        let _ = nix::sys::signal::killpg(g, nix::sys::signal::Signal::SIGTERM);
    }
    if let Ok(Ok(_)) = tokio::time::timeout(limits::SERVER_STOP_GRACE, child.wait()).await {
        return;
    }
    if let Some(g) = group {
        let _ = nix::sys::signal::killpg(g, nix::sys::signal::Signal::SIGKILL);
    }
    let _ = child.kill().await;
}

/// Relays every server line to the client unchanged, watching answers for the negotiated
/// protocol version and for the outcome of calls in flight.
async fn pump_server(
    child_out: tokio::process::ChildStdout,
    out_tx: mpsc::Sender<Vec<u8>>,
    dialect: Arc<Mutex<Dialect>>,
    in_flight: InFlight,
    retries: Retries,
    link: Link,
    session_id: String,
) {
    let mut r = BufReader::with_capacity(64 * 1024, child_out);
    loop {
        match ipc::read_line_capped(&mut r, limits::FRAME_BYTES_MAX).await {
            Ok(LineRead::Line(line)) => {
                let msg = frame::inspect_server_line(&line);
                if let Ok(mut d) = dialect.lock() {
                    d.on_server(&msg);
                }
                if let (Some(id), None) = (msg.id, msg.method.as_ref()) {
                    let started = in_flight.lock().ok().and_then(|mut m| m.remove(id));
                    if let Some(f) = started {
                        let ok = msg.error.is_none()
                            && !msg.result.map(frame::result_is_error).unwrap_or(false);
                        // The server asks for input: the client's retry carrying this state
                        // is the same call (2026-07-28 multi round-trip).
                        if let Some(state) = msg.result.and_then(frame::input_required_state)
                            && let Ok(mut r) = retries.lock()
                        {
                            r.remember(state, f.call);
                        }
                        link.report(Request::CallOutcome {
                            session_id: session_id.clone(),
                            seq: f.seq,
                            ok,
                            duration_ms: i64::try_from(f.started.elapsed().as_millis())
                                .unwrap_or(i64::MAX),
                        });
                    }
                }
                if out_tx.send(line).await.is_err() {
                    return;
                }
            }
            Ok(LineRead::TooLong(n)) => {
                eprintln!(
                    "holdcall: not relaying a line of {n} bytes from the server: it is over the {} byte limit",
                    limits::FRAME_BYTES_MAX
                );
                link.report(Request::Anomaly {
                    session_id: session_id.clone(),
                    anomaly: Anomaly::Oversized.as_str().to_string(),
                });
            }
            Ok(LineRead::Eof) | Err(_) => return,
        }
    }
}

/// The length of `s` once written as a JSON string.
fn escaped_len(s: &str) -> usize {
    s.chars()
        .map(|c| match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if c.is_control() => 6,
            c => c.len_utf8(),
        })
        .sum::<usize>()
        + 2
}

/// What the daemon's answer to call `seq` of `session` means, and whether the link can still be
/// trusted to pair questions with answers. Only a decision naming this session and this call
/// counts (and a `held` one only with its hold); anything else is no decision, and an answer
/// for another call poisons the link.
fn verdict_of(answer: Result<Response, WireError>, session: &str, seq: i64) -> (Verdict, bool) {
    match answer {
        Ok(Response::Decision {
            session_id,
            seq: s,
            decision,
            hold,
            ..
        }) if session_id == session && s == seq => match (decision, hold) {
            (Verdict::Held, None) => (Verdict::Undecided, false),
            (d, _) => (d, true),
        },
        Ok(_) => (Verdict::Undecided, false),
        Err(_) => (Verdict::Undecided, false),
    }
}

/// How long the relay waits for the word on a call the daemon holds for `timeout_ms`: that
/// long (never more than the longest timeout config allows) plus a margin.
fn word_wait(answer_hold_ms: Option<u64>) -> std::time::Duration {
    let t = std::time::Duration::from_millis(answer_hold_ms.unwrap_or(0))
        .min(limits::APPROVAL_TIMEOUT_MAX);
    t + limits::APPROVAL_RELAY_MARGIN
}

/// Writes the refusal of call `id` to the client through the one stdout writer.
async fn refuse_to(
    out_tx: &mpsc::Sender<Vec<u8>>,
    dialect: &Mutex<Dialect>,
    id: &[u8],
    text: &str,
    requested: Option<&str>,
) {
    let version = match requested {
        Some(v) => v.to_string(),
        None => dialect
            .lock()
            .map(|d| d.version().to_string())
            .unwrap_or_default(),
    };
    let _ = out_tx.send(frame::refusal(id, text, &version)).await;
}

/// The client→server direction: classify, ask, forward or refuse.
struct ClientPump {
    child_in: ServerInput,
    out_tx: mpsc::Sender<Vec<u8>>,
    dialect: Arc<Mutex<Dialect>>,
    in_flight: InFlight,
    retries: Retries,
    held_ids: HeldIds,
    /// One task per held call, waiting for its word.
    held_tasks: Vec<tokio::task::JoinHandle<()>>,
    link: Link,
    session_id: String,
    seq: i64,
    said: HashSet<&'static str>,
}

impl ClientPump {
    /// Handles one client line; false when the server can no longer be written to.
    async fn client_line(&mut self, line: Vec<u8>) -> bool {
        match frame::classify_client_line(&line) {
            ClientFrame::Blank => self.forward(&line).await,
            ClientFrame::Forward(msg) => {
                if let Ok(mut d) = self.dialect.lock() {
                    d.on_client(&msg);
                }
                self.forward(&line).await
            }
            ClientFrame::ToolCall(call) => {
                let id = call.id.map(<[u8]>::to_vec);
                let name = call.name.clone();
                let arguments = call.arguments.map(<[u8]>::to_vec);
                // Only a call that answers the server's questions can be a retry.
                let retry_state = call
                    .request_state
                    .filter(|_| call.input_responses)
                    .and_then(frame::request_state_key);
                self.tool_call(
                    &line,
                    id,
                    name,
                    arguments,
                    call.protocol_version,
                    retry_state,
                )
                .await
            }
            ClientFrame::UnreadableCall { id, anomaly } => {
                let id = id.map(<[u8]>::to_vec);
                self.anomaly(anomaly);
                if let Some(id) = id {
                    self.refuse(&id, frame::DENIED_UNREADABLE, None).await;
                }
                true
            }
            ClientFrame::DisguisedMethod { id } => {
                // Never forwarded: a server that folds case or trims would run it undecided.
                let reply = id.map(frame::disguised_method_refusal);
                self.anomaly(Anomaly::DisguisedMethod);
                if let Some(reply) = reply {
                    let _ = self.out_tx.send(reply).await;
                }
                true
            }
            ClientFrame::DisguisedKey { id } => {
                // Never forwarded: a server that trims keys would read a method or params the
                // relay did not see.
                let reply = id.map(frame::disguised_key_refusal);
                self.anomaly(Anomaly::DisguisedKey);
                if let Some(reply) = reply {
                    let _ = self.out_tx.send(reply).await;
                }
                true
            }
            ClientFrame::BatchWithCall { ids } => {
                let reply = frame::batch_refusal(&ids, frame::DENIED_BATCH);
                self.anomaly(Anomaly::Batch);
                if let Some(reply) = reply {
                    let _ = self.out_tx.send(reply).await;
                }
                true
            }
            ClientFrame::BatchForward => self.forward(&line).await,
            ClientFrame::Unreadable(anomaly) => {
                self.anomaly(anomaly);
                true
            }
        }
    }

    async fn forward(&mut self, line: &[u8]) -> bool {
        write_server(&self.child_in, line).await
    }

    fn anomaly(&mut self, anomaly: Anomaly) {
        if self.said.insert(anomaly.as_str()) {
            eprintln!(
                "holdcall: not relaying {} (recorded as anomaly {}; later ones are recorded without this note)",
                anomaly.describe(),
                anomaly.as_str()
            );
        }
        self.link.report(Request::Anomaly {
            session_id: self.session_id.clone(),
            anomaly: anomaly.as_str().to_string(),
        });
    }

    fn oversized(&mut self, n: usize) {
        eprintln!(
            "holdcall: not relaying a line of {n} bytes from the client: it is over the {} byte limit",
            limits::FRAME_BYTES_MAX
        );
        self.anomaly(Anomaly::Oversized);
    }

    /// Writes the refusal of call `id`, shaped for the revision the request names in its
    /// `_meta`, else for the one the session negotiated.
    async fn refuse(&mut self, id: &[u8], text: &str, requested: Option<&str>) {
        refuse_to(&self.out_tx, &self.dialect, id, text, requested).await;
    }

    /// Sends a held call to the background: its line waits, with its digest, for the daemon's
    /// word while the pump goes back to the client at once. Approved, the original bytes go to
    /// the server; anything else, or no word within the approval timeout and a margin, refuses
    /// it.
    #[allow(clippy::too_many_arguments)] // one held call's whole description, used once
    fn hold(
        &mut self,
        line: &[u8],
        id: Option<Vec<u8>>,
        word: oneshot::Receiver<Word>,
        timeout_ms: Option<u64>,
        requested: Option<String>,
        seq: i64,
        remembered: RetryOf,
    ) {
        if let (Some(id), Ok(mut ids)) = (&id, self.held_ids.lock()) {
            ids.insert(id.clone());
        }
        let line = line.to_vec();
        let (out_tx, dialect, in_flight, held_ids, child_in) = (
            self.out_tx.clone(),
            Arc::clone(&self.dialect),
            Arc::clone(&self.in_flight),
            Arc::clone(&self.held_ids),
            Arc::clone(&self.child_in),
        );
        let wait = word_wait(timeout_ms);
        self.held_tasks.retain(|t| !t.is_finished());
        self.held_tasks.push(tokio::spawn(async move {
            let word = match tokio::time::timeout(wait, word).await {
                Ok(Ok(w)) => w,
                _ => Word::Refused(frame::DENIED_NO_DECISION.into()),
            };
            if let (Some(id), Ok(mut ids)) = (&id, held_ids.lock()) {
                ids.remove(id);
            }
            let refusal = match word {
                Word::Approved => {
                    if let (Some(id), Ok(mut m)) = (&id, in_flight.lock()) {
                        m.insert(
                            id.clone(),
                            Forwarded {
                                seq,
                                started: Instant::now(),
                                call: remembered,
                            },
                        );
                    }
                    if write_server(&child_in, &line).await {
                        return;
                    }
                    if let (Some(id), Ok(mut m)) = (&id, in_flight.lock()) {
                        m.remove(id);
                    }
                    frame::DENIED_APPROVAL_ENDED.to_string()
                }
                Word::Refused(text) => text,
            };
            if let Some(id) = id {
                refuse_to(&out_tx, &dialect, &id, &refusal, requested.as_deref()).await;
            }
        }));
    }

    async fn tool_call(
        &mut self,
        line: &[u8],
        id: Option<Vec<u8>>,
        name: String,
        arguments: Option<Vec<u8>>,
        requested_version: Option<String>,
        retry_state: Option<Vec<u8>>,
    ) -> bool {
        if name.is_empty()
            || name.len() > limits::TOOL_NAME_BYTES_MAX
            || name.chars().any(char::is_control)
        {
            self.anomaly(Anomaly::UnreadableCall);
            if let Some(id) = id {
                self.refuse(&id, frame::DENIED_UNREADABLE, requested_version.as_deref())
                    .await;
            }
            return true;
        }
        if let Some(id) = &id {
            let held = self.held_ids.lock().map(|h| h.contains(id)).unwrap_or(true);
            let duplicate = held
                || self
                    .in_flight
                    .lock()
                    .map(|m| m.contains_key(id))
                    .unwrap_or(true);
            if duplicate {
                // Two calls with one id cannot be told apart in the answers, nor in the journal.
                self.anomaly(Anomaly::DuplicateId);
                self.refuse(id, frame::DENIED_DUPLICATE_ID, requested_version.as_deref())
                    .await;
                return true;
            }
        }
        self.seq += 1;
        let seq = self.seq;
        let digest = frame::args_digest(arguments.as_deref());
        let retry_of = retry_state.and_then(|state| {
            self.retries
                .lock()
                .ok()
                .and_then(|mut r| r.take(&state, &name, &digest))
        });
        let remembered = RetryOf {
            origin: retry_of.unwrap_or(seq),
            tool: name.clone(),
            digest: digest.clone(),
        };
        let text = arguments.map(|a| String::from_utf8_lossy(&a).into_owned());
        // The limit applies to the arguments as they travel, escaped inside a JSON string
        // (quotes and backslashes double), so a large call never overflows the socket line.
        let (arguments, arguments_omitted) = match text {
            Some(t) if escaped_len(&t) <= limits::ARGUMENTS_BYTES_MAX => (Some(t), false),
            Some(_) => (None, true),
            None => (None, false),
        };
        let word = self.link.expect_word(seq, &digest);
        let answer = self
            .link
            .decide(Request::CallRequest {
                session_id: self.session_id.clone(),
                seq,
                tool: name,
                args_digest: digest,
                arguments,
                arguments_omitted,
                retry_of,
            })
            .await;
        let timeout_ms = match &answer {
            Ok(Response::Decision { hold: Some(h), .. }) => Some(h.timeout_ms),
            _ => None,
        };
        let (verdict, trusted) = verdict_of(answer, &self.session_id, seq);
        if !trusted {
            self.link.dead.store(true, Ordering::SeqCst);
        }
        if verdict == Verdict::Held {
            self.hold(
                line,
                id,
                word,
                timeout_ms,
                requested_version,
                seq,
                remembered,
            );
            return true;
        }
        self.link.forget_word(seq);
        match verdict {
            Verdict::Allow => {
                if let Some(id) = id
                    && let Ok(mut m) = self.in_flight.lock()
                {
                    m.insert(
                        id,
                        Forwarded {
                            seq,
                            started: Instant::now(),
                            call: remembered,
                        },
                    );
                }
                self.forward(line).await
            }
            refused => {
                if let Some(id) = id {
                    let why;
                    let text = match (refused, &self.link.no_daemon) {
                        (Verdict::Deny, _) => frame::DENIED_BY_POLICY,
                        (Verdict::OverBudget, _) => frame::DENIED_OVER_BUDGET,
                        (_, Some(no_daemon)) => {
                            why = format!("{} ({no_daemon})", frame::DENIED_NO_DECISION);
                            why.as_str()
                        }
                        _ => frame::DENIED_NO_DECISION,
                    };
                    self.refuse(&id, text, requested_version.as_deref()).await;
                }
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(origin: i64, tool: &str) -> RetryOf {
        RetryOf {
            origin,
            tool: tool.into(),
            digest: "d".into(),
        }
    }

    #[test]
    fn a_daemon_that_never_says_which_home_it_serves_is_unresponsive() {
        // Found in review of issue 12, item 9: the liveness check gave up on a daemon that
        // accepted but never answered `daemon.hello` only if its own bound fired before the
        // hello's equal bound; when the hello's fired first the check said "answers", and the
        // relay waited out the session start's store bound in silence.
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path().to_path_buf());
        home.prepare().unwrap();
        // This very test binary listens, so the peer check passes; nothing is ever accepted.
        let (_listener, _) =
            crate::os::peer::listen_passing_credentials(&home.socket_path()).unwrap();
        let rt = ipc::current_thread().unwrap();
        let started = std::time::Instant::now();
        assert!(rt.block_on(daemon_unresponsive(&home)));
        assert!(started.elapsed() < limits::DECISION_TIMEOUT + std::time::Duration::from_secs(1));
    }

    #[test]
    fn a_request_state_is_used_once_and_only_for_the_same_tool_and_arguments() {
        let mut r = RetryStates::default();
        r.remember(b"s".to_vec(), of(3, "confirm"));
        assert_eq!(r.take(b"s", "other", "d"), None);
        assert_eq!(r.take(b"s", "confirm", "other-digest"), None);
        assert_eq!(r.take(b"s", "confirm", "d"), Some(3));
        assert_eq!(r.take(b"s", "confirm", "d"), None, "used up");
        assert_eq!(r.take(b"never", "confirm", "d"), None);
    }

    #[test]
    fn remembered_states_are_bounded_and_the_oldest_is_forgotten_first() {
        let mut r = RetryStates::default();
        for i in 0..=limits::RETRY_STATES_MAX {
            r.remember(i.to_string().into_bytes(), of(1, "t"));
        }
        assert_eq!(r.by_state.len(), limits::RETRY_STATES_MAX);
        assert_eq!(r.take(b"0", "t", "d"), None);
        assert_eq!(r.take(b"1", "t", "d"), Some(1));
        r.remember(vec![b'x'; limits::REQUEST_STATE_BYTES_MAX + 1], of(1, "t"));
        assert!(
            !r.by_state
                .keys()
                .any(|k| k.len() > limits::REQUEST_STATE_BYTES_MAX)
        );
    }

    fn decision(session: &str, seq: i64, decision: Verdict) -> Result<Response, WireError> {
        Ok(Response::Decision {
            session_id: session.into(),
            seq,
            decision,
            policy_id: None,
            reason: String::new(),
            hold: None,
        })
    }

    #[test]
    fn only_an_allow_for_this_session_and_call_allows() {
        assert_eq!(
            verdict_of(decision("s", 3, Verdict::Allow), "s", 3),
            (Verdict::Allow, true)
        );
    }

    #[test]
    fn an_answer_for_another_call_is_no_decision_and_poisons_the_link() {
        assert_eq!(
            verdict_of(decision("s", 2, Verdict::Allow), "s", 3),
            (Verdict::Undecided, false)
        );
    }

    #[test]
    fn an_answer_for_another_session_is_no_decision_and_poisons_the_link() {
        assert_eq!(
            verdict_of(decision("t", 3, Verdict::Allow), "s", 3),
            (Verdict::Undecided, false)
        );
    }

    #[test]
    fn an_answer_of_another_kind_is_no_decision() {
        assert_eq!(
            verdict_of(Ok(Response::Ok), "s", 3),
            (Verdict::Undecided, false)
        );
        assert_eq!(
            verdict_of(
                Ok(Response::Error {
                    message: "x".into()
                }),
                "s",
                3
            ),
            (Verdict::Undecided, false)
        );
    }

    #[test]
    fn a_failed_exchange_is_no_decision() {
        assert_eq!(
            verdict_of(Err(WireError::Closed), "s", 3),
            (Verdict::Undecided, false)
        );
        assert_eq!(
            verdict_of(Err(WireError::Protocol("bad".into())), "s", 3),
            (Verdict::Undecided, false)
        );
    }

    #[test]
    fn an_undecided_answer_is_a_refusal_but_keeps_the_link() {
        assert_eq!(
            verdict_of(decision("s", 3, Verdict::Undecided), "s", 3),
            (Verdict::Undecided, true)
        );
    }

    fn waiting(seq: i64, digest: &str) -> (HeldWaits, oneshot::Receiver<Word>) {
        let held: HeldWaits = Arc::new(Mutex::new(HashMap::new()));
        let (tx, rx) = oneshot::channel();
        held.lock().unwrap().insert(
            seq,
            Waiting {
                digest: digest.into(),
                tx,
            },
        );
        (held, rx)
    }

    #[test]
    fn a_word_naming_this_session_the_held_call_and_its_digest_releases_it() {
        let (held, mut rx) = waiting(2, "d");
        assert!(route_word(
            &held,
            "s",
            "s",
            2,
            "d",
            Release::Approved,
            "person",
            None
        ));
        assert_eq!(rx.try_recv().unwrap(), Word::Approved);
    }

    #[test]
    fn a_word_with_another_digest_refuses_the_call_it_names() {
        let (held, mut rx) = waiting(2, "d");
        assert!(route_word(
            &held,
            "s",
            "s",
            2,
            "e",
            Release::Approved,
            "person",
            None
        ));
        assert!(rx.try_recv().is_err(), "no word: the call is refused");
        assert!(held.lock().unwrap().is_empty());
    }

    #[test]
    fn a_word_for_another_session_or_a_call_not_held_poisons_the_link() {
        let (held, _rx) = waiting(2, "d");
        assert!(!route_word(
            &held,
            "s",
            "t",
            2,
            "d",
            Release::Approved,
            "person",
            None
        ));
        assert!(!route_word(
            &held,
            "s",
            "s",
            3,
            "d",
            Release::Approved,
            "person",
            None
        ));
    }

    #[test]
    fn each_cause_gets_its_own_refusal_and_an_approval_not_by_a_person_is_no_decision() {
        let cases = [
            (Release::Rejected, "person", Some("no"), "Their reason: no"),
            (Release::Rejected, "timeout", None, "nobody decided in time"),
            (Release::Rejected, "session-ended", None, "session ended"),
            (
                Release::Rejected,
                "connection-dropped",
                None,
                "session ended",
            ),
            (
                Release::Rejected,
                "arguments-unknown",
                None,
                "too large to show",
            ),
            (
                Release::Undecided,
                "person",
                None,
                "could not get a decision",
            ),
            (
                Release::Approved,
                "timeout",
                None,
                "could not get a decision",
            ),
            (Release::Rejected, "whim", None, "could not get a decision"),
        ];
        for (verdict, cause, reason, text) in cases {
            let (held, mut rx) = waiting(1, "d");
            assert!(route_word(
                &held,
                "s",
                "s",
                1,
                "d",
                verdict,
                cause,
                reason.map(String::from)
            ));
            match rx.try_recv().unwrap() {
                Word::Refused(t) => assert!(t.contains(text), "{cause}: {t}"),
                Word::Approved => panic!("{cause} approved"),
            }
        }
    }

    #[test]
    fn a_held_answer_without_its_hold_is_no_decision() {
        assert_eq!(
            verdict_of(decision("s", 3, Verdict::Held), "s", 3),
            (Verdict::Undecided, false)
        );
    }

    #[test]
    fn the_wait_for_a_word_is_bounded_by_the_longest_timeout_plus_the_margin() {
        assert_eq!(
            word_wait(Some(1000)),
            std::time::Duration::from_secs(1) + limits::APPROVAL_RELAY_MARGIN
        );
        assert_eq!(
            word_wait(Some(u64::MAX)),
            limits::APPROVAL_TIMEOUT_MAX + limits::APPROVAL_RELAY_MARGIN
        );
    }

    #[test]
    fn an_unknown_decision_word_does_not_parse_as_an_answer() {
        let line = r#"{"kind":"decision","session_id":"s","seq":3,"decision":"maybe","policy_id":null,"reason":""}"#;
        assert!(serde_json::from_str::<Response>(line).is_err());
    }
}
