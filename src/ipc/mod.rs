//! The daemon socket: its messages (NDJSON, one request line, one response line), bounded line
//! reading, and dialing the daemon — verified, and started on demand.
//!
//! Owns: what relays and CLI commands may say to the daemon and what it answers. Must never:
//! send a byte to a daemon whose identity it has not verified, or buffer more than a named limit
//! of a peer's line.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;

use crate::config::Home;
use crate::limits;
use crate::os::peer;
use crate::policy::{Effect, Explanation, Scope};

/// Something a relay or a CLI command asks of the daemon. Every request gets exactly one
/// response, in order.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum Request {
    /// A relay opens a session; the connection then speaks only for the sessions it opened.
    #[serde(rename = "session.start")]
    SessionStart {
        session_id: String,
        connector: String,
        client: Option<String>,
        /// When the relay was given no `--connector`: what it derived the name from, in words
        /// (journaled with the session's start).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        connector_from: Option<String>,
    },
    /// A readable tools/call. The relay never states a verdict; it only describes the call.
    #[serde(rename = "call.request")]
    CallRequest {
        session_id: String,
        seq: i64,
        tool: String,
        args_digest: String,
        /// The raw `params.arguments` text, when small enough to send.
        arguments: Option<String>,
        arguments_omitted: bool,
        /// The seq of the call this one retries with `inputResponses` (same tool and arguments,
        /// carrying the `requestState` the server answered that call with): the same call, so
        /// a budget does not charge it again.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_of: Option<i64>,
    },
    #[serde(rename = "call.outcome")]
    CallOutcome {
        session_id: String,
        seq: i64,
        ok: bool,
        duration_ms: i64,
    },
    #[serde(rename = "anomaly")]
    Anomaly { session_id: String, anomaly: String },
    #[serde(rename = "session.end")]
    SessionEnd {
        session_id: String,
        protocol_version: Option<String>,
        /// Why the session ended, as the relay saw it; journaled as the entry's reason.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ended: Option<SessionEnded>,
    },
    #[serde(rename = "policy.set")]
    PolicySet { effect: Effect, scope: Scope },
    #[serde(rename = "policy.remove")]
    PolicyRemove { scope: Scope },
    #[serde(rename = "policy.list")]
    PolicyList,
    /// Set a budget (`holdcall policy budget N`).
    #[serde(rename = "budget.set")]
    BudgetSet {
        calls: i64,
        scope: crate::policy::budget::BudgetScope,
    },
    #[serde(rename = "budget.remove")]
    BudgetRemove {
        scope: crate::policy::budget::BudgetScope,
    },
    #[serde(rename = "policy.explain")]
    PolicyExplain {
        agent: Option<String>,
        connector: Option<String>,
        tool: String,
        /// The call's arguments as JSON text, to explain argument conditions.
        #[serde(default)]
        arguments: Option<String>,
    },
    /// Import a policy file's text (the daemon is the only writer); `dry_run` only diffs.
    #[serde(rename = "policy.import")]
    PolicyImport {
        file: String,
        text: String,
        dry_run: bool,
    },
    /// The whole policy set in force as Cedar text.
    #[serde(rename = "policy.export")]
    PolicyExport,
    #[serde(rename = "daemon.status")]
    Status,
    #[serde(rename = "daemon.shutdown")]
    Shutdown,
    /// The calls held for a person, with their arguments (`holdcall approve`).
    #[serde(rename = "approval.list")]
    ApprovalList,
    /// The held calls now, then one pushed `approval.held` line per call held later, until the
    /// connection closes (`holdcall approve --watch`).
    #[serde(rename = "approval.watch")]
    ApprovalWatch,
    /// A person's word on one held call: approve it, or reject it with an optional reason.
    #[serde(rename = "approval.decide")]
    ApprovalDecide {
        id: String,
        approve: bool,
        reason: Option<String>,
    },
    /// Enrol (or re-enrol) the executable at `path` (absolute) as agent `name`. The daemon
    /// reads the file itself.
    #[serde(rename = "agent.add")]
    AgentAdd { name: String, path: String },
    #[serde(rename = "agent.list")]
    AgentList,
    #[serde(rename = "agent.remove")]
    AgentRemove { name: String },
    /// Register (or replace) a connector's command and secret. Sent only to a verified daemon;
    /// its `Debug` never shows the secret.
    #[serde(rename = "connector.set")]
    ConnectorSet(crate::connector::SetRequest),
    #[serde(rename = "connector.remove")]
    ConnectorRemove { name: String },
    #[serde(rename = "connector.list")]
    ConnectorList,
    /// Whether the daemon reaches the credential store (`holdcall doctor`): it looks up a name no
    /// connector can have, so nothing is read or written.
    #[serde(rename = "vault.probe")]
    VaultProbe,
    /// Which home the daemon serves: asked on every connection before anything else, on
    /// management and session connections alike (it gives a connection no role).
    #[serde(rename = "daemon.hello")]
    Hello,
}

impl Request {
    /// Requests only a relay's session may make; a connection that made one may make no other kind.
    pub fn is_session(&self) -> bool {
        matches!(
            self,
            Request::SessionStart { .. }
                | Request::CallRequest { .. }
                | Request::CallOutcome { .. }
                | Request::Anomaly { .. }
                | Request::SessionEnd { .. }
        )
    }
}

/// Why a relay ended its session: each is an ordinary end, unlike a connection that closes
/// before `session.end` (which the daemon journals as an alarm).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SessionEnded {
    /// The client closed the relay's input (a client that quits, or a health check that
    /// connects, initializes and closes).
    ClientClosed,
    /// The server exited or stopped reading.
    ServerExited,
    /// The relay got SIGTERM, SIGHUP or SIGINT (a client stopping its servers).
    Stopped,
}

impl SessionEnded {
    /// The journal's reason for the session's end.
    pub fn describe(self) -> &'static str {
        match self {
            SessionEnded::ClientClosed => "the client closed the connection",
            SessionEnded::ServerExited => "the server exited",
            SessionEnded::Stopped => "the client stopped the relay (SIGTERM, SIGHUP or SIGINT)",
        }
    }
}

/// The daemon's verdict on one call, as the relay receives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Allow,
    Deny,
    /// A rule says a person decides: the call is held in the daemon, and its final word comes
    /// later as a pushed [`Response::Released`]. The relay keeps pumping meanwhile.
    Held,
    /// The daemon could not decide (for example, the journal could not be written).
    Undecided,
    /// The rules allowed the call, but a budget had no room left.
    #[serde(rename = "over-budget")]
    OverBudget,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum Response {
    #[serde(rename = "ok")]
    Ok,
    /// The answer to `session.start`: the session is open; `launch` is set when the connector is
    /// registered, and then the relay runs that command with that secret and nothing else.
    #[serde(rename = "session.opened")]
    SessionOpened {
        launch: Option<crate::connector::Launch>,
    },
    /// The connector is registered but its secret cannot be read: the relay must not start a
    /// server. `message` says which and why (never the secret).
    #[serde(rename = "credential.unavailable")]
    CredentialUnavailable { connector: String, message: String },
    #[serde(rename = "connector.changed")]
    ConnectorChanged {
        message: String,
        chain_seq: Option<i64>,
    },
    #[serde(rename = "vault.status")]
    VaultStatus { reachable: bool, message: String },
    #[serde(rename = "connector.list")]
    ConnectorList {
        connectors: Vec<crate::connector::ListedConnector>,
    },
    #[serde(rename = "error")]
    Error { message: String },
    #[serde(rename = "decision")]
    Decision {
        session_id: String,
        seq: i64,
        decision: Verdict,
        policy_id: Option<String>,
        reason: String,
        /// Present exactly when `decision` is `held`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hold: Option<HoldTicket>,
    },
    /// Pushed, unasked, on a relay's connection: the final word on a held call. It names the
    /// call by session, seq and argument digest, all three of which the relay checks.
    #[serde(rename = "call.released")]
    Released {
        session_id: String,
        seq: i64,
        args_digest: String,
        verdict: Release,
        /// Why: `person`, `timeout`, `session-ended`, `connection-dropped`,
        /// `arguments-unknown` (see `approval::Cause`).
        cause: String,
        /// The person's reason for a rejection, if they gave one.
        reason: Option<String>,
    },
    #[serde(rename = "approval.list")]
    HeldCalls { calls: Vec<HeldCall> },
    /// Pushed to a watching management connection when a call is held.
    #[serde(rename = "approval.held")]
    HeldNew { call: HeldCall },
    #[serde(rename = "approval.decided")]
    Decided { message: String, chain_seq: i64 },
    #[serde(rename = "policy.changed")]
    PolicyChanged {
        message: String,
        changed: bool,
        chain_seq: Option<i64>,
    },
    #[serde(rename = "policy.list")]
    PolicyList {
        policies: Vec<ListedPolicy>,
        #[serde(default)]
        budgets: Vec<crate::policy::budget::BudgetRow>,
    },
    #[serde(rename = "policy.imported")]
    PolicyImported {
        message: String,
        diff: String,
        changed: bool,
        chain_seq: Option<i64>,
    },
    #[serde(rename = "policy.text")]
    PolicyText { text: String },
    #[serde(rename = "policy.explain")]
    Explain {
        explanation: Box<Explanation>,
        /// The budgets whose scope the explained call falls in, oldest first.
        #[serde(default)]
        budgets: Vec<crate::policy::budget::BudgetRow>,
    },
    #[serde(rename = "agent.changed")]
    AgentChanged { message: String, chain_seq: i64 },
    #[serde(rename = "agent.list")]
    AgentList { agents: Vec<ListedAgent> },
    /// The answer to `daemon.hello`: the home this daemon serves, as it proves it.
    #[serde(rename = "daemon.hello")]
    Hello(Serves),
    #[serde(rename = "daemon.status")]
    Status {
        pid: u32,
        version: String,
        sessions: usize,
        policies: usize,
        head: Option<String>,
        entries: Option<i64>,
        durability: String,
        /// Why this daemon decides nothing right now (every call is refused), if so: the
        /// journal cannot be written (a full disk…), or the tables do not match the journal.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cannot_decide: Option<String>,
    },
}

/// Which home a daemon serves: the database it opened (its device and inode when it opened it)
/// and the machine id it read. A client compares both with its own reading of its home, so a
/// daemon of another home moved onto this home's socket path is refused (issue 12, item 5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Serves {
    /// The home directory, as the daemon was given it (for messages only: never compared).
    pub home: String,
    pub db_dev: u64,
    pub db_ino: u64,
    pub machine_id: String,
}

impl Serves {
    /// What `home` holds now: its database's device and inode and its machine id; None for
    /// what is missing or unreadable.
    fn of(home: &Home) -> (Option<(u64, u64)>, Option<String>) {
        use std::os::unix::fs::MetadataExt as _;
        let db = std::fs::metadata(home.db_path())
            .ok()
            .map(|m| (m.dev(), m.ino()));
        let id = std::fs::read_to_string(home.machine_id_path())
            .ok()
            .map(|t| t.trim().to_string());
        (db, id)
    }

    /// None when this daemon serves `home`; else why not, in words that name both homes.
    pub fn mismatch(&self, home: &Home) -> Option<String> {
        let (db, id) = Serves::of(home);
        let theirs = format!(
            "it serves the home {} (database device {}, inode {})",
            crate::text::visible(&self.home),
            self.db_dev,
            self.db_ino
        );
        let ours = home.db_path();
        let ours = crate::text::visible(&ours.to_string_lossy());
        let why = match (db, id) {
            (None, _) => format!("{theirs}, and this home has no database at {ours}"),
            (Some((dev, ino)), _) if (dev, ino) != (self.db_dev, self.db_ino) => {
                format!("{theirs}, not {ours} (device {dev}, inode {ino})")
            }
            (Some(_), None) => format!("{theirs}, and this home has no machine id"),
            (Some(_), Some(id)) if id != self.machine_id => {
                format!("{theirs}, whose machine id is not this home's")
            }
            (Some(_), Some(_)) => return None,
        };
        Some(why)
    }
}

/// What the relay learns when its call is held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldTicket {
    pub id: String,
    /// How long the daemon will wait for a person before rejecting the call (milliseconds).
    pub timeout_ms: u64,
}

/// The final word on a held call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Release {
    Approved,
    Rejected,
    /// The word could not be recorded in the journal, so it is no word: refused.
    Undecided,
}

/// One held call as `holdcall approve` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeldCall {
    pub id: String,
    pub session_id: String,
    pub seq: i64,
    pub agent: Option<String>,
    pub connector: String,
    pub tool: String,
    pub args_digest: String,
    /// The exact `params.arguments` text (None when the call had none).
    pub arguments: Option<String>,
    pub policy_id: Option<String>,
    pub reason: String,
    pub age_ms: u64,
    pub left_ms: u64,
}

/// One policy in force, as `holdcall policy list` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ListedPolicy {
    pub id: String,
    pub seq: i64,
    /// `cli` for rules made on the command line.
    pub source: String,
    pub effect: String,
    pub specificity: i64,
    /// The scope of a rule made on the command line, in words.
    pub scope: Option<String>,
    pub text: String,
    pub created_at: String,
}

/// One enrolled agent, as `holdcall agent list` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ListedAgent {
    pub name: String,
    pub path: String,
    /// `current`, or `stale` when the file is missing or its identity changed.
    pub state: String,
    /// Why it is stale.
    pub stale_because: Option<String>,
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    /// SHA-256 of the content when it was enrolled (not checked again when matching).
    pub sha256: String,
    pub enrolled_at: String,
}

/// Errors talking to the daemon. Each one means: no decision.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum WireError {
    #[error("no daemon is listening on {socket}")]
    #[diagnostic(
        code(holdcall::wire::no_daemon),
        help("start it with `holdcall daemon start`, and read {log} if it does not stay up")
    )]
    NoDaemon { socket: String, log: String },
    #[error("refusing the process on {socket}: {why}")]
    #[diagnostic(
        code(holdcall::wire::impostor),
        help("only this Holdcall build, running as you, is trusted with decisions")
    )]
    NotVerified { socket: String, why: String },
    #[error("refusing the daemon on {socket}: {why}")]
    #[diagnostic(
        code(holdcall::wire::other_home),
        help(
            "the daemon on this home's socket did not prove it serves this home (its database and machine id), so nothing it decides is this home's word; if it is another home's daemon, stop it (`holdcall --home <its home> daemon stop`, or end that pid) and run `holdcall daemon start` here; if it is stuck, end that pid"
        )
    )]
    OtherHome { socket: String, why: String },
    #[error("the daemon did not answer within {0:?}")]
    #[diagnostic(code(holdcall::wire::timeout), help("see `holdcall daemon status`"))]
    Timeout(Duration),
    #[error("the connection to the daemon failed: {0}")]
    #[diagnostic(code(holdcall::wire::io), help("see `holdcall daemon status`"))]
    Io(#[from] std::io::Error),
    #[error("the daemon sent a line that is not a valid answer: {0}")]
    #[diagnostic(
        code(holdcall::wire::protocol),
        help("run `holdcall daemon restart` so both ends are the same build")
    )]
    Protocol(String),
    #[error("the daemon closed the connection")]
    #[diagnostic(
        code(holdcall::wire::closed),
        help("read the daemon's log (`holdcall daemon status` names it)")
    )]
    Closed,
    #[error("the daemon refused: {0}")]
    #[diagnostic(code(holdcall::wire::refused))]
    Refused(String),
    #[error("cannot start the daemon: {0}")]
    #[diagnostic(
        code(holdcall::wire::start),
        help("run `holdcall daemon run` in a terminal to see why it stops")
    )]
    Start(String),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Config(#[from] crate::config::ConfigError),
}

/// A verified connection to the daemon.
pub struct Conn {
    reader: peer::CheckedReader,
    writer: OwnedWriteHalf,
}

impl Conn {
    /// Sends one request and reads its one response, within `timeout`.
    pub async fn call(&mut self, req: &Request, timeout: Duration) -> Result<Response, WireError> {
        tokio::time::timeout(timeout, self.call_inner(req))
            .await
            .map_err(|_| WireError::Timeout(timeout))?
    }

    async fn call_inner(&mut self, req: &Request) -> Result<Response, WireError> {
        let line = request_line(req)?;
        self.writer.write_all(&line).await?;
        match self.reader.read_line(limits::SOCKET_LINE_BYTES_MAX).await? {
            None => Err(WireError::Closed),
            Some(l) => serde_json::from_slice(&l).map_err(|e| WireError::Protocol(e.to_string())),
        }
    }
}

impl Conn {
    /// Reads the next line the daemon sends, however long it takes (pushed lines arrive
    /// unasked). Closed when the daemon closes the connection.
    pub async fn recv(&mut self) -> Result<Response, WireError> {
        match self.reader.read_line(limits::SOCKET_LINE_BYTES_MAX).await? {
            None => Err(WireError::Closed),
            Some(l) => serde_json::from_slice(&l).map_err(|e| WireError::Protocol(e.to_string())),
        }
    }

    /// Splits the connection so one task can read every line (answers and pushed words) while
    /// another writes requests.
    pub fn into_split(self) -> (ConnReader, ConnWriter) {
        (
            ConnReader {
                reader: self.reader,
            },
            ConnWriter {
                writer: self.writer,
            },
        )
    }
}

/// The reading half of a split [`Conn`].
pub struct ConnReader {
    reader: peer::CheckedReader,
}

impl ConnReader {
    /// The next line from the daemon; Closed at end of stream.
    pub async fn recv(&mut self) -> Result<Response, WireError> {
        match self.reader.read_line(limits::SOCKET_LINE_BYTES_MAX).await? {
            None => Err(WireError::Closed),
            Some(l) => serde_json::from_slice(&l).map_err(|e| WireError::Protocol(e.to_string())),
        }
    }
}

/// The writing half of a split [`Conn`].
pub struct ConnWriter {
    writer: OwnedWriteHalf,
}

impl ConnWriter {
    pub async fn send(&mut self, req: &Request) -> Result<(), WireError> {
        let line = request_line(req)?;
        self.writer.write_all(&line).await?;
        Ok(())
    }
}

fn request_line(req: &Request) -> Result<Vec<u8>, WireError> {
    let mut line = serde_json::to_vec(req).map_err(|e| WireError::Protocol(e.to_string()))?;
    line.push(b'\n');
    if line.len() > limits::SOCKET_LINE_BYTES_MAX {
        return Err(WireError::Protocol(format!(
            "request of {} bytes is over the {} byte socket limit",
            line.len(),
            limits::SOCKET_LINE_BYTES_MAX
        )));
    }
    Ok(line)
}

/// What is listening on a home's socket, found without starting anything and without sending
/// a byte to a process that is not verified.
pub enum Probe {
    NotRunning,
    Ours(Conn),
    Other(crate::agents::PeerCheck),
    /// This Holdcall build, running as us, but it does not serve this home (or would not say
    /// which it serves): nothing it decides may be taken as this home's word.
    OtherHome {
        pid: i32,
        why: String,
    },
    /// This Holdcall build, running as us, that did not say which home it serves within
    /// `limits::DAEMON_HELLO_TIMEOUT`: stopped (SIGSTOP), hung or overloaded. Never taken as
    /// this home's daemon, and never reported as another home's.
    Silent {
        pid: i32,
    },
}

/// Looks at the socket of `home` without starting a daemon.
pub async fn probe(home: &Home) -> Probe {
    let Ok(stream) = peer::connect_passing_credentials(&home.socket_path()) else {
        return Probe::NotRunning;
    };
    let verdict = crate::agents::check_peer(&stream);
    let crate::agents::PeerCheck::Same { pid } = verdict else {
        return Probe::Other(verdict);
    };
    let (r, w) = stream.into_split();
    let conn = Conn {
        reader: peer::CheckedReader::new(r, pid),
        writer: w,
    };
    match serves(conn, home, pid).await {
        Ok(conn) => Probe::Ours(conn),
        Err(None) => Probe::Silent { pid },
        Err(Some(why)) => Probe::OtherHome { pid, why },
    }
}

/// Asks a verified daemon which home it serves and compares with this process's own reading of
/// `home` (its database's device and inode, its machine id), read after the daemon answered,
/// so a database the daemon has just created is there to compare. Err(Some): why it is not
/// ours; Err(None): it did not answer in time.
async fn serves(mut conn: Conn, home: &Home, pid: i32) -> Result<Conn, Option<String>> {
    let why = match conn
        .call(&Request::Hello, limits::DAEMON_HELLO_TIMEOUT)
        .await
    {
        Ok(Response::Hello(s)) => match s.mismatch(home) {
            None => return Ok(conn),
            Some(why) => why,
        },
        Ok(other) => {
            return Err(Some(format!(
                "it did not say which home it serves (it answered {other:?})"
            )));
        }
        Err(WireError::Timeout(_)) => return Err(None),
        Err(e) => return Err(Some(format!("it did not say which home it serves: {e}"))),
    };
    let own = match lock_holder(home) {
        None => "this home has no daemon of its own running",
        // This home's daemon, whose database was replaced (or removed) after it opened it: it
        // decides on a database this home no longer holds.
        Some(holder) if holder == pid => {
            "yet it holds this home's lock: the database was replaced after it opened it (`holdcall daemon restart`)"
        }
        Some(_) => "this home's own daemon holds its lock but is not on this socket",
    };
    Err(Some(format!("{why}; {own}")))
}

/// Connects to the daemon of `home` if one is listening, and verifies it before sending a byte.
pub async fn connect(home: &Home) -> Result<Conn, WireError> {
    let socket = home.socket_path();
    match probe(home).await {
        Probe::Ours(conn) => Ok(conn),
        Probe::NotRunning => Err(WireError::NoDaemon {
            socket: socket.display().to_string(),
            log: home.daemon_log_path().display().to_string(),
        }),
        Probe::Other(verdict) => Err(WireError::NotVerified {
            socket: socket.display().to_string(),
            why: verdict.describe("the process listening there"),
        }),
        Probe::OtherHome { pid, why } => Err(WireError::OtherHome {
            socket: socket.display().to_string(),
            why: format!("pid {pid} is this Holdcall build, but {why}"),
        }),
        Probe::Silent { .. } => Err(WireError::Timeout(limits::DAEMON_HELLO_TIMEOUT)),
    }
}

/// Connects to the daemon, starting one (detached) if none is listening.
///
/// A daemon that holds the home's lock but is not (yet, or for the moment) listening is never
/// doubled: nothing is started while the lock is held, and its socket is waited for — it
/// listens once it has opened the journal, and puts back a socket removed behind its back
/// within `limits::SOCKET_CHECK_INTERVAL`.
pub async fn connect_or_start(home: &Home) -> Result<Conn, WireError> {
    match connect(home).await {
        Err(WireError::NoDaemon { .. }) => {}
        other => return other,
    }
    let mut child: Option<std::process::Child> = None;
    let deadline = Instant::now() + limits::DAEMON_START_TIMEOUT;
    let result = loop {
        match connect(home).await {
            Err(WireError::NoDaemon { socket, .. }) => {
                if let Some(c) = child.as_mut()
                    && let Ok(Some(status)) = c.try_wait()
                {
                    child = None;
                    // Exit 0 means another daemon held the lock (one still stopping, or one
                    // starting); anything else is ours failing: say why, in its own words.
                    if !status.success() {
                        if let Ok(c) = connect(home).await {
                            break Ok(c);
                        }
                        break Err(WireError::Start(format!(
                            "it exited at once ({status}): {}",
                            last_log_line(&home.daemon_log_path())
                        )));
                    }
                }
                let holder = lock_holder(home);
                if child.is_none() && holder.is_none() {
                    child = Some(start_daemon(home)?);
                }
                if Instant::now() >= deadline {
                    break Err(WireError::Start(match holder {
                        Some(pid) => format!(
                            "the daemon of this home (pid {pid}, holder of {}) did not answer on {socket} within {:?}; see {}",
                            home.lock_path().display(),
                            limits::DAEMON_START_TIMEOUT,
                            home.daemon_log_path().display()
                        ),
                        None => format!(
                            "it did not start listening on {socket} within {:?}; see {}",
                            limits::DAEMON_START_TIMEOUT,
                            home.daemon_log_path().display()
                        ),
                    }));
                }
                // Polling for a socket that does not exist yet: there is nothing to wait on.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => break other,
        }
    };
    // Reap the daemon's supervisor when it eventually exits, so it never lingers as a zombie of
    // a long-lived relay.
    if let Some(mut child) = child {
        std::thread::spawn(move || {
            let _ = child.wait();
        });
    }
    result
}

/// The runtime a one-shot command runs its async work on (a daemon call, a probe, the console's
/// server): one thread, I/O and timers on.
pub fn current_thread() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// The lock the daemon of a home holds for its whole life: a POSIX record lock (`fcntl`
/// F_SETLK, a write lock over the whole of `<home>/daemon.lock`), so any process can ask the
/// kernel who holds it (F_GETLK names the holder's pid) and the kernel drops it the moment the
/// holder dies, however it dies. See decision 0010.
///
/// A POSIX lock belongs to the process, and the kernel releases it when the process closes ANY
/// descriptor of that file. So nothing in the daemon may ever open `daemon.lock` besides this
/// one `File` — not [`lock_holder`], not [`daemon_lock_free`], not a log reader: each of those
/// is for other processes only.
pub struct DaemonLock {
    /// Kept open (and never cloned) for as long as the daemon runs.
    _file: std::fs::File,
}

impl DaemonLock {
    /// The device and inode of the locked file, read from the open descriptor (fstat: nothing
    /// is opened, so the lock is safe).
    pub fn identity(&self) -> Option<(u64, u64)> {
        use std::os::unix::fs::MetadataExt as _;
        self._file.metadata().ok().map(|m| (m.dev(), m.ino()))
    }
}

/// The device and inode of the file now at `<home>/daemon.lock`, by `lstat` (nothing is opened,
/// so the daemon may call it: see [`DaemonLock`]); None when nothing is there.
pub fn lock_file_identity(home: &Home) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::symlink_metadata(home.lock_path())
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// `l_type` and friends as `libc::flock` spells them (`c_short` on every platform).
fn whole_file(kind: nix::libc::c_int) -> nix::libc::flock {
    nix::libc::flock {
        l_type: kind as nix::libc::c_short,
        l_whence: nix::libc::SEEK_SET as nix::libc::c_short,
        l_start: 0,
        // 0: to the end of the file, however long it grows.
        l_len: 0,
        l_pid: 0,
    }
}

/// Who holds a write lock on `file` by the kernel's word: Some(pid) when another process does.
/// The pid is 0 when the holder lives in another pid namespace.
fn holder_of(file: &std::fs::File) -> std::io::Result<Option<i32>> {
    let mut probe = whole_file(nix::libc::F_WRLCK);
    nix::fcntl::fcntl(file, nix::fcntl::FcntlArg::F_GETLK(&mut probe))
        .map_err(std::io::Error::from)?;
    Ok((i32::from(probe.l_type) != nix::libc::F_UNLCK).then_some(probe.l_pid))
}

/// Takes the daemon lock of `home`, or says who holds it: `Err(Some(pid))` (or `Err(None)`
/// when the holder let go in between). The pid and socket path are then written into the file
/// for a person reading it; only the kernel's F_GETLK is ever trusted.
pub fn take_daemon_lock(home: &Home) -> std::io::Result<Result<DaemonLock, Option<i32>>> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        // The lock is this very file in the home, never wherever a symlink planted there points;
        // and a FIFO planted there must not block the open (it is refused below).
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(home.lock_path())?;
    let lock = whole_file(nix::libc::F_WRLCK);
    match nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_SETLK(&lock)) {
        Ok(_) => {}
        Err(nix::errno::Errno::EAGAIN) | Err(nix::errno::Errno::EACCES) => {
            return Ok(Err(holder_of(&file).ok().flatten()));
        }
        Err(e) => return Err(e.into()),
    }
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file; remove it",
            home.lock_path().display()
        )));
    }
    // For a person only, so best effort: a full disk must not stop a daemon from starting.
    let noted = file.set_len(0).and_then(|()| {
        write!(
            file,
            "pid {}\nsocket {}\n(for reading only: the daemon is whoever holds the fcntl lock on this file)\n",
            std::process::id(),
            home.socket_path().display()
        )
    });
    if let Err(e) = noted {
        tracing::warn!(
            "could not note the pid in {}: {e}",
            home.lock_path().display()
        );
    }
    Ok(Ok(DaemonLock { _file: file }))
}

/// The pid of the process holding the daemon lock of `home` (the kernel's word, F_GETLK), or
/// None when no daemon of this home runs, not even one still stopping. Never call it inside
/// the daemon: closing the file it opens would release the daemon's own lock (see
/// [`DaemonLock`]).
pub fn lock_holder(home: &Home) -> Option<i32> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        // A FIFO planted as the lock would block a read-only open until a writer came: every
        // relay and `status` would hang, saying nothing.
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(home.lock_path())
        .ok()?;
    holder_of(&file).ok().flatten()
}

/// True when no daemon of `home` holds its lock: none is running, not even one still stopping.
/// Never call it inside the daemon (see [`lock_holder`]).
pub fn daemon_lock_free(home: &Home) -> bool {
    lock_holder(home).is_none()
}

/// The daemon's last error in its log (`holdcall: …`, as `main` renders errors).
fn last_log_line(path: &Path) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| {
            t.lines()
                .rev()
                .find_map(|l| l.strip_prefix("holdcall: ").map(str::to_string))
        })
        .unwrap_or_else(|| format!("see {}", path.display()))
}

/// Starts `holdcall daemon run` for `home` in the background, logging to `daemon.log`. The
/// daemon makes itself a session leader, out of reach of the terminal's signals.
pub fn start_daemon(home: &Home) -> Result<std::process::Child, WireError> {
    home.prepare()?;
    let exe = std::env::current_exe().map_err(|e| WireError::Start(e.to_string()))?;
    let log = open_log(&home.daemon_log_path()).map_err(|e| WireError::Start(e.to_string()))?;
    let log2 = log
        .try_clone()
        .map_err(|e| WireError::Start(e.to_string()))?;
    std::process::Command::new(exe)
        .args(["daemon", "run"])
        .env("HOLDCALL_HOME", home.dir())
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(log2)
        .spawn()
        .map_err(|e| WireError::Start(e.to_string()))
}

fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_start_cannot_carry_an_agent() {
        // A relay that names an agent is not heard: the field does not exist, so it is dropped.
        let line =
            r#"{"kind":"session.start","session_id":"s","connector":"c","client":"a","agent":"a"}"#;
        let req: Request = serde_json::from_str(line).unwrap();
        let back = serde_json::to_string(&req).unwrap();
        assert!(!back.contains("agent"), "{back}");
    }

    #[test]
    fn a_launch_travels_whole_but_no_debug_of_a_message_shows_its_secret() {
        let launch = crate::connector::Launch {
            command: vec!["/usr/bin/node".into()],
            env_key: "K".into(),
            secret: crate::vault::Secret::new("canary-7f3a".into()),
            pass_env: vec![],
            cwd: "/".into(),
            pinned_env: vec![],
        };
        let r = Response::SessionOpened {
            launch: Some(launch),
        };
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.starts_with("{\"kind\":\"session.opened\""));
        assert!(
            text.contains("canary-7f3a"),
            "the secret travels to the relay"
        );
        assert!(!format!("{r:?}").contains("canary"));
        let back: Response = serde_json::from_str(&text).unwrap();
        assert!(!format!("{back:#?}").contains("canary"));
        let set = Request::ConnectorSet(crate::connector::SetRequest {
            name: "gh".into(),
            env_key: "K".into(),
            command: vec!["/usr/bin/node".into()],
            pass_env: vec![],
            secret: crate::vault::Secret::new("canary-7f3a".into()),
            cwd: "/".into(),
            pinned_env: vec![],
        });
        let text = serde_json::to_string(&set).unwrap();
        assert!(
            text.starts_with("{\"kind\":\"connector.set\""),
            "{}",
            text.len()
        );
        let back: Request = serde_json::from_str(&text).unwrap();
        assert!(!back.is_session());
        assert!(!format!("{set:?}{back:?}").contains("canary"));
    }

    #[test]
    fn requests_round_trip_through_json() {
        let r = Request::CallRequest {
            session_id: "s".into(),
            seq: 1,
            tool: "t".into(),
            args_digest: "d".into(),
            arguments: Some("{\"a\":1}".into()),
            arguments_omitted: false,
            retry_of: None,
        };
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.starts_with("{\"kind\":\"call.request\""));
        let back: Request = serde_json::from_str(&text).unwrap();
        assert!(back.is_session());
    }
}
