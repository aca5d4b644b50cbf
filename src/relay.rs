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

use crate::config::Home;
use crate::frame::{self, Anomaly, ClientFrame, Dialect};
use crate::limits;
use crate::wire::{self, LineRead, Request, Response, Verdict, WireError};

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum RelayError {
    #[error("no server command: give one after `--`")]
    #[diagnostic(
        code(holdcall::relay::no_command),
        help("holdcall serve --connector NAME -- COMMAND [ARGS...]")
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
    pub client: Option<String>,
    pub command: Vec<OsString>,
}

/// Most daemon messages the relay queues before it refuses calls and drops events.
const LINK_QUEUE: usize = 256;
/// Most lines queued for stdout before readers wait (backpressure, not loss).
const STDOUT_QUEUE: usize = 64;

type Reply = oneshot::Sender<Result<Response, WireError>>;

/// The relay's side of the daemon connection: one task owns it and answers jobs one at a time.
/// Call decisions have their own queue and go first, so reports (outcomes, anomalies) queued by
/// a chatty session never delay a decision toward its timeout. Once an exchange fails the link
/// is dead for the rest of the session, and every later call is refused at once instead of
/// waiting again.
#[derive(Clone)]
struct Link {
    decisions: mpsc::Sender<(Request, Reply)>,
    /// Reports, and the session's start and end, in the order they happened.
    in_order: mpsc::Sender<(Request, Option<Reply>)>,
    dead: Arc<AtomicBool>,
    lost: Arc<AtomicU64>,
}

/// Most decisions that can wait for the daemon at once (the relay asks one at a time).
const DECISION_QUEUE: usize = 16;

impl Link {
    fn start(conn: Option<wire::Conn>) -> Link {
        let (decisions, mut decision_rx) = mpsc::channel::<(Request, Reply)>(DECISION_QUEUE);
        let (in_order, mut order_rx) = mpsc::channel::<(Request, Option<Reply>)>(LINK_QUEUE);
        let dead = Arc::new(AtomicBool::new(conn.is_none()));
        let lost = Arc::new(AtomicU64::new(0));
        let (d, l) = (Arc::clone(&dead), Arc::clone(&lost));
        tokio::spawn(async move {
            let mut conn = conn;
            loop {
                let (req, reply) = tokio::select! {
                    biased;
                    Some((req, reply)) = decision_rx.recv() => (req, Some(reply)),
                    Some((req, reply)) = order_rx.recv() => (req, reply),
                    else => break,
                };
                let result = match conn.as_mut() {
                    Some(c) if !d.load(Ordering::SeqCst) => c.call(&req, within(&req)).await,
                    _ => Err(WireError::Closed),
                };
                if let Err(e) = &result {
                    if !d.swap(true, Ordering::SeqCst) {
                        eprintln!(
                            "holdcall: lost the daemon ({e}); every later tool call in this session will be refused"
                        );
                    }
                    conn = None;
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
                Err(WireError::Timeout(timeout))
            }
        }
    }
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
type InFlight = Arc<Mutex<HashMap<Vec<u8>, (i64, Instant)>>>;

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
    let session_id = new_session_id();
    let conn = match wire::connect_or_start(&home).await {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("holdcall: no daemon to decide calls: {e}");
            eprintln!(
                "holdcall: the server will start, but every tool call in this session will be refused"
            );
            None
        }
    };
    let link = Link::start(conn);
    let mut launch = None;
    if !link.dead.load(Ordering::SeqCst) {
        let started = link
            .ask_in_order(Request::SessionStart {
                session_id: session_id.clone(),
                connector: opts.connector.clone(),
                client: opts.client.clone(),
            })
            .await;
        match started {
            Ok(Response::SessionOpened { launch: l }) => launch = l,
            Ok(Response::CredentialUnavailable { connector, message }) => {
                return Err(RelayError::NoCredential { connector, message });
            }
            other => {
                link.dead.store(true, Ordering::SeqCst);
                eprintln!(
                    "holdcall: the daemon did not open this session ({}); every tool call will be refused",
                    describe(&other)
                );
            }
        }
    }

    let mut cmd = match &launch {
        Some(l) => {
            if !opts.command.is_empty() {
                eprintln!(
                    "holdcall: connector {} is registered: running its registered command {}, not the command given after `--`",
                    opts.connector,
                    l.command.join(" ")
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
        let link = link.clone();
        let session_id = session_id.clone();
        tokio::spawn(async move {
            pump_server(child_out, out_tx, dialect, in_flight, link, session_id).await;
            let _ = server_done_tx.send(());
        })
    };

    let mut pump = ClientPump {
        child_in: Some(child_in),
        out_tx,
        dialect: Arc::clone(&dialect),
        in_flight,
        link: link.clone(),
        session_id: session_id.clone(),
        seq: 0,
        said: HashSet::new(),
    };
    let mut stdin = BufReader::with_capacity(64 * 1024, tokio::io::stdin());
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    loop {
        tokio::select! {
            line = wire::read_line_capped(&mut stdin, limits::FRAME_BYTES_MAX) => {
                match line {
                    Ok(LineRead::Line(l)) => {
                        if !pump.client_line(l).await {
                            break;
                        }
                    }
                    Ok(LineRead::TooLong(n)) => pump.oversized(n),
                    Ok(LineRead::Eof) | Err(_) => break,
                }
            }
            _ = &mut server_done => break,
            _ = term.recv() => break,
            _ = hup.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        }
    }

    // Closing the server's stdin is the polite stop; signals follow for a server that ignores it.
    pump.child_in = None;
    stop_child(&mut child).await;
    let _ = tokio::time::timeout(limits::SERVER_STOP_GRACE, server_task).await;
    drop(pump);
    let _ = tokio::time::timeout(limits::SERVER_STOP_GRACE, writer).await;

    let version = dialect
        .lock()
        .map(|d| d.version().to_string())
        .unwrap_or_default();
    if !link.dead.load(Ordering::SeqCst) {
        let _ = link
            .ask_in_order(Request::SessionEnd {
                session_id,
                protocol_version: Some(version),
            })
            .await;
    }
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
    let (program, args) = l
        .command
        .split_first()
        .ok_or_else(|| RelayError::BadLaunch("no command".into()))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
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
    link: Link,
    session_id: String,
) {
    let mut r = BufReader::with_capacity(64 * 1024, child_out);
    loop {
        match wire::read_line_capped(&mut r, limits::FRAME_BYTES_MAX).await {
            Ok(LineRead::Line(line)) => {
                let msg = frame::inspect_server_line(&line);
                if let Ok(mut d) = dialect.lock() {
                    d.on_server(&msg);
                }
                if let (Some(id), None) = (msg.id, msg.method.as_ref()) {
                    let started = in_flight.lock().ok().and_then(|mut m| m.remove(id));
                    if let Some((seq, t0)) = started {
                        let ok = msg.error.is_none()
                            && !msg.result.map(frame::result_is_error).unwrap_or(false);
                        link.report(Request::CallOutcome {
                            session_id: session_id.clone(),
                            seq,
                            ok,
                            duration_ms: i64::try_from(t0.elapsed().as_millis())
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
/// counts; anything else is no decision, and an answer for another call poisons the link.
fn verdict_of(answer: Result<Response, WireError>, session: &str, seq: i64) -> (Verdict, bool) {
    match answer {
        Ok(Response::Decision {
            session_id,
            seq: s,
            decision,
            ..
        }) if session_id == session && s == seq => (decision, true),
        Ok(_) => (Verdict::Undecided, false),
        Err(_) => (Verdict::Undecided, false),
    }
}

/// The client→server direction: classify, ask, forward or refuse.
struct ClientPump {
    child_in: Option<ChildStdin>,
    out_tx: mpsc::Sender<Vec<u8>>,
    dialect: Arc<Mutex<Dialect>>,
    in_flight: InFlight,
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
                self.tool_call(&line, id, name, arguments, call.protocol_version)
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
        match self.child_in.as_mut() {
            Some(w) => w.write_all(line).await.is_ok() && w.flush().await.is_ok(),
            None => false,
        }
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
        let version = match requested {
            Some(v) => v.to_string(),
            None => self
                .dialect
                .lock()
                .map(|d| d.version().to_string())
                .unwrap_or_default(),
        };
        let _ = self.out_tx.send(frame::refusal(id, text, &version)).await;
    }

    async fn tool_call(
        &mut self,
        line: &[u8],
        id: Option<Vec<u8>>,
        name: String,
        arguments: Option<Vec<u8>>,
        requested_version: Option<String>,
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
            let duplicate = self
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
        let text = arguments.map(|a| String::from_utf8_lossy(&a).into_owned());
        // The limit applies to the arguments as they travel, escaped inside a JSON string
        // (quotes and backslashes double), so a large call never overflows the socket line.
        let (arguments, arguments_omitted) = match text {
            Some(t) if escaped_len(&t) <= limits::ARGUMENTS_BYTES_MAX => (Some(t), false),
            Some(_) => (None, true),
            None => (None, false),
        };
        let answer = self
            .link
            .decide(Request::CallRequest {
                session_id: self.session_id.clone(),
                seq,
                tool: name,
                args_digest: digest,
                arguments,
                arguments_omitted,
            })
            .await;
        let (verdict, trusted) = verdict_of(answer, &self.session_id, seq);
        if !trusted {
            self.link.dead.store(true, Ordering::SeqCst);
        }
        match verdict {
            Verdict::Allow => {
                if let Some(id) = id
                    && let Ok(mut m) = self.in_flight.lock()
                {
                    m.insert(id, (seq, Instant::now()));
                }
                self.forward(line).await
            }
            refused => {
                if let Some(id) = id {
                    let text = match refused {
                        Verdict::Deny => frame::DENIED_BY_POLICY,
                        Verdict::Ask => frame::DENIED_ASK_UNAVAILABLE,
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

    fn decision(session: &str, seq: i64, decision: Verdict) -> Result<Response, WireError> {
        Ok(Response::Decision {
            session_id: session.into(),
            seq,
            decision,
            policy_id: None,
            reason: String::new(),
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

    #[test]
    fn an_unknown_decision_word_does_not_parse_as_an_answer() {
        let line = r#"{"kind":"decision","session_id":"s","seq":3,"decision":"maybe","policy_id":null,"reason":""}"#;
        assert!(serde_json::from_str::<Response>(line).is_err());
    }
}
