//! The per-user daemon: verified connections, sessions, the decision service and the single
//! writer of the database.
//!
//! Owns: accepting connections (only this Holdcall build, running as this user), which sessions
//! each connection may speak for, the compiled policy in force, and the journal writer thread.
//! Must never: answer a decision before its journal entry is committed, read a byte from an
//! unverified peer, or block the accept loop on one slow client.

#![deny(clippy::print_stdout)]

use std::collections::{HashMap, HashSet};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, RwLock};

use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Notify, oneshot};

use crate::config::{Config, Home};
use crate::context::{CallContext, Clock};
use crate::journal::{self, Durability, Entry, Fields, Journal, Kind, NewPolicy, PolicyRow};
use crate::limits;
use crate::peer;
use crate::policy::{self, CallRequest, Effect, PolicySet, Scope, StoredPolicy};
use crate::vault::{self, Keyring, SecretStore};
use crate::wire::{self, Request, Response, Verdict};

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum DaemonError {
    #[error("a daemon is already running for {0}")]
    #[diagnostic(
        code(holdcall::daemon::running),
        help("`holdcall daemon status` shows it; `holdcall daemon restart` replaces it")
    )]
    AlreadyRunning(String),
    #[error("cannot listen on {path}: {source}")]
    #[diagnostic(
        code(holdcall::daemon::listen),
        help("check that the socket directory belongs to you")
    )]
    Listen {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the policy stored in the database does not compile, so no call could be decided")]
    #[diagnostic(
        code(holdcall::daemon::policy),
        help("`holdcall policy list` may still read it; restore the database from a backup")
    )]
    Policy(#[source] policy::PolicyError),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Journal(#[from] journal::JournalError),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("the journal writer stopped")]
    #[diagnostic(code(holdcall::daemon::writer), help("read the daemon's log"))]
    WriterGone,
}

/// One operation for the journal writer thread, with where to send its result.
enum Op {
    Append(Kind, Fields, oneshot::Sender<Result<Entry, String>>),
    ChangePolicies {
        add: Vec<NewPolicy>,
        remove: Vec<String>,
        fields: Fields,
        reply: oneshot::Sender<Result<(Entry, Vec<PolicyRow>), String>>,
    },
    NextPolicySeq(oneshot::Sender<Result<i64, String>>),
    SessionStarted(String, oneshot::Sender<Result<bool, String>>),
    Head(oneshot::Sender<Option<(i64, String)>>),
    /// A connector's row and its `connector.change` entry, in one transaction.
    ChangeConnector {
        change: journal::ConnectorChange,
        fields: Fields,
        reply: oneshot::Sender<Result<Entry, String>>,
    },
    Connectors(oneshot::Sender<Result<Vec<journal::ConnectorRow>, String>>),
    Connector(
        String,
        oneshot::Sender<Result<Option<journal::ConnectorRow>, String>>,
    ),
}

/// Most appends the writer folds into one transaction (one commit, one fsync).
const GROUP_COMMIT_MAX: usize = 256;

/// Runs the single writer: it owns the database connection; everything else sends it `Op`s.
/// Appends that queue up while a commit is in flight share the next commit.
fn writer_thread(mut j: Journal, rx: std_mpsc::Receiver<Op>) {
    let mut next: Option<Op> = None;
    loop {
        let op = match next.take() {
            Some(op) => op,
            None => match rx.recv() {
                Ok(op) => op,
                Err(_) => return,
            },
        };
        match op {
            Op::Append(kind, fields, reply) => {
                let mut batch = vec![(kind, fields, reply)];
                while batch.len() < GROUP_COMMIT_MAX {
                    match rx.try_recv() {
                        Ok(Op::Append(k, f, r)) => batch.push((k, f, r)),
                        Ok(other) => {
                            next = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                let items: Vec<(Kind, Fields)> =
                    batch.iter().map(|(k, f, _)| (*k, f.clone())).collect();
                match j.append_many(items) {
                    Ok(entries) => {
                        for ((_, _, reply), e) in batch.into_iter().zip(entries) {
                            let _ = reply.send(Ok(e));
                        }
                    }
                    Err(e) => {
                        tracing::error!("journal append failed: {e}");
                        let msg = e.to_string();
                        for (_, _, reply) in batch {
                            let _ = reply.send(Err(msg.clone()));
                        }
                    }
                }
            }
            Op::ChangePolicies {
                add,
                remove,
                fields,
                reply,
            } => {
                let r = j
                    .change_policies(add, remove, fields)
                    .and_then(|e| j.policies().map(|rows| (e, rows)))
                    .map_err(|e| e.to_string());
                let _ = reply.send(r);
            }
            Op::NextPolicySeq(reply) => {
                let _ = reply.send(j.next_policy_seq().map_err(|e| e.to_string()));
            }
            Op::SessionStarted(id, reply) => {
                let _ = reply.send(j.session_started(&id).map_err(|e| e.to_string()));
            }
            Op::Head(reply) => {
                let _ = reply.send(j.head());
            }
            Op::ChangeConnector {
                change,
                fields,
                reply,
            } => {
                let _ = reply.send(
                    j.change_connector(change, fields)
                        .map_err(|e| e.to_string()),
                );
            }
            Op::Connectors(reply) => {
                let _ = reply.send(j.connectors().map_err(|e| e.to_string()));
            }
            Op::Connector(name, reply) => {
                let _ = reply.send(j.connector(&name).map_err(|e| e.to_string()));
            }
        }
    }
}

/// The handle the async side uses to reach the writer.
#[derive(Clone)]
struct Writer(std_mpsc::Sender<Op>);

impl Writer {
    async fn ask<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Op) -> Result<T, DaemonError> {
        let (tx, rx) = oneshot::channel();
        self.0.send(make(tx)).map_err(|_| DaemonError::WriterGone)?;
        rx.await.map_err(|_| DaemonError::WriterGone)
    }

    async fn append(&self, kind: Kind, fields: Fields) -> Result<Entry, String> {
        match self.ask(|r| Op::Append(kind, fields, r)).await {
            Ok(r) => r,
            Err(e) => Err(e.to_string()),
        }
    }
}

struct Session {
    connector: String,
    agent: Option<String>,
    last_seq: i64,
}

struct State {
    writer: Writer,
    policy: RwLock<Arc<PolicySet>>,
    /// Serialises policy changes; holds the rows the compiled set was built from.
    rows: tokio::sync::Mutex<Vec<PolicyRow>>,
    sessions: Mutex<HashMap<String, Session>>,
    shutdown: Notify,
    durability: Durability,
    /// A fixed clock for the tests of time conditions (`fixed_clock`); `None`, the system clock.
    fixed_clock: Option<Clock>,
    /// Where connectors' secrets live: the OS credential store, only ever reached from here.
    vault: Arc<dyn SecretStore>,
    /// Serialises connector changes and credentialed session starts, so a session never pairs
    /// one registration's key with another's secret.
    connectors: tokio::sync::Mutex<()>,
}

impl State {
    fn clock(&self) -> Clock {
        self.fixed_clock.unwrap_or_else(Clock::system)
    }
}

/// `HOLDCALL_CLOCK` (an RFC 3339 instant) fixes the clock policies see, so tests of time
/// conditions are deterministic. Time conditions are security rules, so only a debug build
/// (what the tests run) honours it; a release build ignores it and says so in the daemon log.
fn fixed_clock(var: Option<String>, debug_build: bool) -> Option<Clock> {
    let raw = var?;
    if !debug_build {
        tracing::warn!(
            "HOLDCALL_CLOCK is set and ignored: a release build takes the time policies see only \
             from the system clock"
        );
        return None;
    }
    match Clock::parse(&raw) {
        Some(c) => {
            tracing::warn!("debug build: policies see the fixed time {raw} (HOLDCALL_CLOCK)");
            Some(c)
        }
        None => {
            tracing::warn!("HOLDCALL_CLOCK {raw:?} is not an RFC 3339 time; ignored");
            None
        }
    }
}

fn stored(rows: &[PolicyRow]) -> Vec<StoredPolicy> {
    rows.iter()
        .map(|r| StoredPolicy {
            seq: r.seq,
            id: r.id.clone(),
            text: r.text.clone(),
        })
        .collect()
}

/// Runs the daemon for `home` until SIGTERM, SIGINT or `holdcall daemon stop`.
pub async fn run(home: Home, config: Config) -> Result<(), DaemonError> {
    home.prepare()?;
    let socket = home.socket_path();
    let lock_path = home.lock_path();
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|source| DaemonError::Listen {
            path: lock_path.display().to_string(),
            source,
        })?;
    // Held for the daemon's whole life: while we hold it, no other daemon for this home runs,
    // so any socket file left behind is stale and safe to remove.
    let _lock = nix::fcntl::Flock::lock(lock_file, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|_| DaemonError::AlreadyRunning(home.dir().display().to_string()))?;

    let db = home.db_path();
    let has_entries = journal::journal_has_entries(&db)?;
    let machine_id = journal::load_or_create_machine_id(&home.machine_id_path(), !has_entries)?;
    let durability = config.journal.durability;
    let j = Journal::open(&db, &machine_id, durability)?;
    let rows = j.policies()?;
    let set = PolicySet::compile(&stored(&rows)).map_err(DaemonError::Policy)?;
    let open_sessions = j.open_sessions()?;
    let pragmas = j.pragmas().to_detail();

    let (tx, rx) = std_mpsc::channel();
    std::thread::Builder::new()
        .name("journal-writer".into())
        .spawn(move || writer_thread(j, rx))
        .map_err(|source| DaemonError::Listen {
            path: db.display().to_string(),
            source,
        })?;
    let writer = Writer(tx);

    for id in open_sessions {
        let _ = writer
            .append(
                Kind::SessionEnd,
                Fields {
                    session_id: Some(id),
                    reason: Some("the daemon stopped before the session ended".into()),
                    ..Fields::default()
                },
            )
            .await;
    }
    writer
        .append(
            Kind::DaemonStart,
            Fields {
                reason: Some(format!(
                    "holdcall {} started (pid {})",
                    crate::VERSION,
                    std::process::id()
                )),
                detail: Some(pragmas),
                ..Fields::default()
            },
        )
        .await
        .map_err(|e| DaemonError::Listen {
            path: db.display().to_string(),
            source: std::io::Error::other(e),
        })?;

    let _ = std::fs::remove_file(&socket);
    // The socket is created inside a 0700 directory with a 077 umask, so there is no moment at
    // which another user could connect; then it is narrowed to 0600 explicitly.
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    let listener = UnixListener::bind(&socket);
    nix::sys::stat::umask(old);
    let listener = listener.map_err(|source| DaemonError::Listen {
        path: socket.display().to_string(),
        source,
    })?;
    // Every accepted connection inherits credential passing, so every byte a client sends
    // names the process that wrote it (see `peer::CheckedReader`).
    peer::pass_credentials(&listener).map_err(|source| DaemonError::Listen {
        path: socket.display().to_string(),
        source,
    })?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600)).map_err(
            |source| DaemonError::Listen {
                path: socket.display().to_string(),
                source,
            },
        )?;
    }
    tracing::info!(
        "holdcall daemon {} listening on {} (pid {})",
        crate::VERSION,
        socket.display(),
        std::process::id()
    );

    let state = Arc::new(State {
        writer,
        policy: RwLock::new(Arc::new(set)),
        rows: tokio::sync::Mutex::new(rows),
        sessions: Mutex::new(HashMap::new()),
        shutdown: Notify::new(),
        durability,
        fixed_clock: fixed_clock(std::env::var("HOLDCALL_CLOCK").ok(), cfg!(debug_assertions)),
        vault: Arc::new(Keyring::for_home(home.dir())),
        connectors: tokio::sync::Mutex::new(()),
    });

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|source| DaemonError::Listen {
            path: "SIGTERM".into(),
            source,
        })?;
    let mut next_conn: u64 = 0;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                match accepted {
                    Ok((stream, _)) => {
                        next_conn += 1;
                        let st = Arc::clone(&state);
                        tokio::spawn(serve_conn(st, stream, next_conn));
                    }
                    Err(e) => tracing::warn!("accept failed: {e}"),
                }
            }
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
            _ = state.shutdown.notified() => break,
        }
    }
    tracing::info!("holdcall daemon stopping");
    let _ = std::fs::remove_file(&socket);
    let live: Vec<String> = state
        .sessions
        .lock()
        .map(|s| s.keys().cloned().collect())
        .unwrap_or_default();
    for id in live {
        let _ = state
            .writer
            .append(
                Kind::SessionEnd,
                Fields {
                    session_id: Some(id),
                    reason: Some("the daemon stopped while the session was open".into()),
                    ..Fields::default()
                },
            )
            .await;
    }
    Ok(())
}

/// What a handled request asks the connection to do next.
enum Next {
    Reply(Response),
    /// Answer, then close: the peer broke the protocol.
    ReplyAndClose(Response),
}

async fn serve_conn(state: Arc<State>, stream: UnixStream, conn: u64) {
    let verdict = peer::judge(&stream);
    let peer::Verdict::Same { pid } = verdict else {
        // Nothing is read from, or written to, a peer that is not this build running as us.
        tracing::warn!("refused a connection: {}", verdict.describe("the peer"));
        return;
    };
    let (r, mut w) = stream.into_split();
    let mut r = peer::CheckedReader::new(r, pid);
    let mut session_role: Option<bool> = None;
    let mut owned: HashSet<String> = HashSet::new();
    loop {
        let line = match r.read_line(limits::SOCKET_LINE_BYTES_MAX).await {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!("closing connection {conn} (pid {pid}): {e}");
                break;
            }
        };
        let next = match serde_json::from_slice::<Request>(&line) {
            Err(e) => Next::ReplyAndClose(Response::Error {
                message: format!("unreadable request: {e}"),
            }),
            Ok(req) => {
                let is_session = req.is_session();
                if *session_role.get_or_insert(is_session) != is_session {
                    Next::ReplyAndClose(Response::Error {
                        message: "a connection either carries one relay's sessions or management requests, never both".into(),
                    })
                } else {
                    handle(&state, &mut owned, req).await
                }
            }
        };
        let (resp, close) = match next {
            Next::Reply(r) => (r, false),
            Next::ReplyAndClose(r) => (r, true),
        };
        let mut out = match serde_json::to_vec(&resp) {
            Ok(v) => v,
            Err(_) => break,
        };
        out.push(b'\n');
        if w.write_all(&out).await.is_err() || close {
            break;
        }
    }
    end_sessions(
        &state,
        owned,
        "the relay's connection closed before it ended the session",
    )
    .await;
}

async fn end_sessions(state: &State, ids: HashSet<String>, reason: &str) {
    for id in ids {
        let was_open = state
            .sessions
            .lock()
            .map(|mut s| s.remove(&id).is_some())
            .unwrap_or(false);
        if was_open {
            let _ = state
                .writer
                .append(
                    Kind::SessionEnd,
                    Fields {
                        session_id: Some(id),
                        reason: Some(reason.to_string()),
                        ..Fields::default()
                    },
                )
                .await;
        }
    }
}

fn error(message: impl Into<String>) -> Next {
    Next::Reply(Response::Error {
        message: message.into(),
    })
}

fn violation(message: impl Into<String>) -> Next {
    Next::ReplyAndClose(Response::Error {
        message: message.into(),
    })
}

async fn handle(state: &State, owned: &mut HashSet<String>, req: Request) -> Next {
    match req {
        Request::SessionStart {
            session_id,
            connector,
            client,
        } => session_start(state, owned, session_id, connector, client).await,
        Request::CallRequest {
            session_id,
            seq,
            tool,
            args_digest,
            arguments,
            arguments_omitted,
        } => {
            // The arguments a rule reads must be the bytes the journal's digest names.
            if arguments
                .as_deref()
                .is_some_and(|a| crate::frame::sha256_hex(a.as_bytes()) != args_digest)
            {
                return violation("the arguments sent do not match their digest");
            }
            let ctx =
                CallContext::from_call(arguments.as_deref(), arguments_omitted, state.clock());
            call_request(state, owned, session_id, seq, tool, args_digest, ctx).await
        }
        Request::CallOutcome {
            session_id,
            seq,
            ok,
            duration_ms,
        } => {
            report(
                state,
                owned,
                Kind::CallOutcome,
                Fields {
                    session_id: Some(session_id),
                    seq: Some(seq),
                    ok: Some(ok),
                    duration_ms: Some(duration_ms),
                    ..Fields::default()
                },
            )
            .await
        }
        Request::Anomaly {
            session_id,
            anomaly,
        } => {
            report(
                state,
                owned,
                Kind::Anomaly,
                Fields {
                    session_id: Some(session_id),
                    anomaly: Some(anomaly),
                    ..Fields::default()
                },
            )
            .await
        }
        Request::SessionEnd {
            session_id,
            protocol_version,
        } => {
            if !owned.remove(&session_id) {
                return violation("this connection did not open that session");
            }
            if let Ok(mut s) = state.sessions.lock() {
                s.remove(&session_id);
            }
            one_way(
                state,
                Kind::SessionEnd,
                Fields {
                    session_id: Some(session_id),
                    protocol_version: protocol_version.filter(|v| !v.is_empty()),
                    ..Fields::default()
                },
            )
            .await
        }
        Request::PolicySet { effect, scope } => policy_set(state, effect, scope).await,
        Request::PolicyRemove { scope } => policy_remove(state, scope).await,
        Request::PolicyList => {
            let rows = state.rows.lock().await;
            Next::Reply(Response::PolicyList {
                policies: rows.iter().map(listed).collect(),
            })
        }
        Request::PolicyExplain {
            agent,
            connector,
            tool,
            arguments,
        } => {
            if let Err(e) = policy::validate_tool_name(&tool) {
                return error(e.to_string());
            }
            for (kind, name) in [("agent", &agent), ("connector", &connector)] {
                if let Some(n) = name
                    && let Err(e) = policy::validate_scope_name(kind, n)
                {
                    return error(e.to_string());
                }
            }
            let set = current_policy(state);
            let ctx = CallContext::from_call(arguments.as_deref(), false, state.clock());
            let explanation = set.explain_with(
                &CallRequest {
                    agent: agent.as_deref(),
                    connector: connector.as_deref().unwrap_or(""),
                    tool: &tool,
                },
                &ctx,
            );
            Next::Reply(Response::Explain {
                explanation: Box::new(explanation),
            })
        }
        Request::PolicyImport {
            file,
            text,
            dry_run,
        } => policy_import(state, file, text, dry_run).await,
        Request::PolicyExport => Next::Reply(Response::PolicyText {
            text: current_policy(state).text(),
        }),
        Request::Status => {
            let head = state.writer.ask(Op::Head).await.ok().flatten();
            let sessions = state.sessions.lock().map(|s| s.len()).unwrap_or(0);
            Next::Reply(Response::Status {
                pid: std::process::id(),
                version: crate::VERSION.to_string(),
                sessions,
                policies: current_policy(state).info().len(),
                entries: head.as_ref().map(|h| h.0),
                head: head.map(|h| h.1),
                durability: match state.durability {
                    Durability::Power => "power".into(),
                    Durability::Process => "process".into(),
                },
            })
        }
        Request::Shutdown => {
            state.shutdown.notify_one();
            Next::Reply(Response::Ok)
        }
        Request::ConnectorSet(req) => connector_set(state, req).await,
        Request::ConnectorRemove { name } => connector_remove(state, name).await,
        Request::ConnectorList => match state.writer.ask(Op::Connectors).await {
            Ok(Ok(connectors)) => Next::Reply(Response::ConnectorList { connectors }),
            Ok(Err(e)) => error(format!("the connectors cannot be read: {e}")),
            Err(e) => error(e.to_string()),
        },
    }
}

fn listed(r: &PolicyRow) -> wire::ListedPolicy {
    wire::ListedPolicy {
        id: r.id.clone(),
        seq: r.seq,
        source: r.source.clone(),
        effect: r.effect.clone(),
        specificity: r.specificity,
        scope: (r.source == "cli").then(|| {
            Scope {
                tool: r.tool.clone(),
                agent: r.agent.clone(),
                connector: r.connector.clone(),
            }
            .describe()
        }),
        text: r.text.clone(),
        created_at: r.created_at.clone(),
    }
}

fn current_policy(state: &State) -> Arc<PolicySet> {
    match state.policy.read() {
        Ok(p) => Arc::clone(&p),
        // A poisoned lock means a writer panicked mid-swap; deciding on nothing is safer than
        // guessing, and an empty set that errors is not available, so keep the last value.
        Err(poisoned) => Arc::clone(&poisoned.into_inner()),
    }
}

/// Journals a relay's report about a session this connection opened (and no other).
async fn report(state: &State, owned: &HashSet<String>, kind: Kind, fields: Fields) -> Next {
    if !fields
        .session_id
        .as_ref()
        .is_some_and(|id| owned.contains(id))
    {
        return violation("this connection did not open that session");
    }
    one_way(state, kind, fields).await
}

async fn one_way(state: &State, kind: Kind, fields: Fields) -> Next {
    match state.writer.append(kind, fields).await {
        Ok(_) => Next::Reply(Response::Ok),
        Err(e) => error(format!("not recorded: {e}")),
    }
}

fn valid_session_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

async fn session_start(
    state: &State,
    owned: &mut HashSet<String>,
    session_id: String,
    connector: String,
    client: Option<String>,
) -> Next {
    if !valid_session_id(&session_id) {
        return violation("a session id is 32 hexadecimal characters");
    }
    if let Err(e) = policy::validate_scope_name("connector", &connector) {
        return violation(e.to_string());
    }
    if let Some(c) = &client
        && (c.len() > limits::CLIENT_LABEL_BYTES_MAX || c.chars().any(char::is_control))
    {
        return violation("the client label is too long or has control characters");
    }
    // Reserve the id before any await, so two connections starting the same id at once cannot
    // both pass the check.
    let reserved = match state.sessions.lock() {
        Ok(mut s) if !s.contains_key(&session_id) => {
            s.insert(
                session_id.clone(),
                Session {
                    connector: connector.clone(),
                    agent: None,
                    last_seq: 0,
                },
            );
            true
        }
        _ => false,
    };
    if !reserved {
        return violation("that session id is in use; a session starts once");
    }
    let unreserve = |state: &State| {
        if let Ok(mut s) = state.sessions.lock() {
            s.remove(&session_id);
        }
    };
    let recorded = match state
        .writer
        .ask(|r| Op::SessionStarted(session_id.clone(), r))
        .await
    {
        Ok(Ok(b)) => b,
        _ => true,
    };
    if recorded {
        unreserve(state);
        return violation("that session id was used before; a session starts once");
    }
    // Who is calling is the kernel's word, never the relay's: agent derivation from the
    // relay's parent process comes with enrolment. Until then every session is unenrolled.
    let agent: Option<String> = None;
    // A registered connector's secret is read before the session is recorded: a relay that
    // cannot have it starts no server, and the journal says a session ran only if it did.
    let launch = match launch_for(state, &connector).await {
        Ok(l) => l,
        Err(message) => {
            unreserve(state);
            tracing::warn!("connector {connector}: no credential for a session: {message}");
            return Next::Reply(Response::CredentialUnavailable { connector, message });
        }
    };
    let detail = launch.as_ref().map(|l| {
        serde_json::json!({
            "credentialed": true,
            "command": l.command,
            "env_key": l.env_key,
            "pass_env": l.pass_env,
        })
        .to_string()
    });
    let entry = state
        .writer
        .append(
            Kind::SessionStart,
            Fields {
                session_id: Some(session_id.clone()),
                connector: Some(connector),
                client,
                agent,
                detail,
                ..Fields::default()
            },
        )
        .await;
    if let Err(e) = entry {
        unreserve(state);
        return error(format!("the session could not be recorded: {e}"));
    }
    owned.insert(session_id);
    Next::Reply(Response::SessionOpened { launch })
}

/// What the relay of a session on `connector` is handed: nothing for a connector nobody
/// registered; the registered command and its secret for one that is; an error (which the relay
/// turns into not starting the server) when the registration cannot be read or its secret
/// cannot be had. Called only for a verified relay's own new session.
async fn launch_for(
    state: &State,
    connector: &str,
) -> Result<Option<crate::connector::Launch>, String> {
    let _serial = state.connectors.lock().await;
    let row = match state
        .writer
        .ask(|r| Op::Connector(connector.to_string(), r))
        .await
    {
        Ok(Ok(row)) => row,
        Ok(Err(e)) => return Err(format!("the connector registry cannot be read: {e}")),
        Err(e) => return Err(e.to_string()),
    };
    let Some(row) = row else {
        return Ok(None);
    };
    let name = connector.to_string();
    let where_ = state.vault.describe();
    match vault::run_blocking(&state.vault, move |s| s.get(&name)).await {
        Ok(Some(secret)) => Ok(Some(crate::connector::Launch {
            command: row.command,
            env_key: row.env_key,
            secret,
            pass_env: row.pass_env,
        })),
        Ok(None) => Err(format!(
            "connector {connector} is registered, but its secret is missing from {where_}: it \
             was removed outside Holdcall; set it again with `holdcall connector set {connector} \
             --env {} -- …`",
            row.env_key
        )),
        Err(e) => Err(format!(
            "connector {connector} is registered, but its secret cannot be read: {e}"
        )),
    }
}

/// Registers a connector: the secret goes to the OS store first, then the row and its
/// `connector.change` entry in one transaction; if that fails the secret is deleted again.
async fn connector_set(state: &State, req: crate::connector::SetRequest) -> Next {
    if let Err(e) = policy::validate_scope_name("connector", &req.name) {
        return error(e.to_string());
    }
    if let Err(e) = crate::connector::validate(&req) {
        return error(e.to_string());
    }
    let _serial = state.connectors.lock().await;
    let crate::connector::SetRequest {
        name,
        env_key,
        command,
        pass_env,
        secret,
    } = req;
    let summary = format!(
        "connector {name} registered: runs {} with its secret in {env_key}",
        command.join(" ")
    );
    let fields = Fields {
        connector: Some(name.clone()),
        reason: Some(summary.clone()),
        detail: Some(
            serde_json::json!({
                "action": "set",
                "env_key": env_key,
                "command": command,
                "pass_env": pass_env,
                "store": state.vault.describe(),
            })
            .to_string(),
        ),
        ..Fields::default()
    };
    let change = journal::ConnectorChange::Set {
        name: name.clone(),
        env_key,
        command,
        pass_env,
    };
    let record = async {
        match state
            .writer
            .ask(|reply| Op::ChangeConnector {
                change,
                fields,
                reply,
            })
            .await
        {
            Ok(r) => r,
            Err(e) => Err(e.to_string()),
        }
    };
    match vault::store_then_record(&state.vault, &name, secret, record).await {
        Ok(entry) => Next::Reply(Response::ConnectorChanged {
            message: format!(
                "{summary}; the secret is in {} (recorded in the journal as entry {})",
                state.vault.describe(),
                entry.chain_seq
            ),
            chain_seq: Some(entry.chain_seq),
        }),
        Err(vault::StoreThenRecordError::Store(e)) => error(format!("{e}; nothing was registered")),
        Err(vault::StoreThenRecordError::Record {
            why,
            secret_deleted,
        }) => error(if secret_deleted {
            format!(
                "the registration could not be recorded, so the secret was deleted again: {why}"
            )
        } else {
            format!(
                "the registration could not be recorded, and the secret could not be deleted \
                 again from {}: {why}",
                state.vault.describe()
            )
        }),
    }
}

/// Removes a connector: its secret first, then the row and its `connector.change` entry.
async fn connector_remove(state: &State, name: String) -> Next {
    if let Err(e) = policy::validate_scope_name("connector", &name) {
        return error(e.to_string());
    }
    let _serial = state.connectors.lock().await;
    let row = match state.writer.ask(|r| Op::Connector(name.clone(), r)).await {
        Ok(Ok(row)) => row,
        Ok(Err(e)) => return error(format!("the connectors cannot be read: {e}")),
        Err(e) => return error(e.to_string()),
    };
    let Some(row) = row else {
        return error(format!(
            "no connector named {name} is registered; `holdcall connector list` shows them"
        ));
    };
    let account = name.clone();
    if let Err(e) = vault::run_blocking(&state.vault, move |s| s.delete(&account)).await {
        return error(format!("{e}; nothing was removed"));
    }
    let summary = format!("connector {name} removed; its secret was deleted");
    let fields = Fields {
        connector: Some(name.clone()),
        reason: Some(summary.clone()),
        detail: Some(
            serde_json::json!({
                "action": "remove",
                "env_key": row.env_key,
                "command": row.command,
                "pass_env": row.pass_env,
            })
            .to_string(),
        ),
        ..Fields::default()
    };
    let change = journal::ConnectorChange::Remove { name: name.clone() };
    match state
        .writer
        .ask(|reply| Op::ChangeConnector {
            change,
            fields,
            reply,
        })
        .await
    {
        Ok(Ok(entry)) => Next::Reply(Response::ConnectorChanged {
            message: format!(
                "{summary} (recorded in the journal as entry {})",
                entry.chain_seq
            ),
            chain_seq: Some(entry.chain_seq),
        }),
        Ok(Err(e)) => error(format!(
            "the secret was deleted, but the registration could not be removed: {e}; sessions of \
             {name} now refuse to start; run `holdcall connector remove {name}` again"
        )),
        Err(e) => error(e.to_string()),
    }
}

async fn call_request(
    state: &State,
    owned: &HashSet<String>,
    session_id: String,
    seq: i64,
    tool: String,
    args_digest: String,
    ctx: CallContext,
) -> Next {
    if !owned.contains(&session_id) {
        return violation("this connection did not open that session");
    }
    let (connector, agent) = {
        let Ok(mut sessions) = state.sessions.lock() else {
            return violation("the session table is unavailable");
        };
        let Some(s) = sessions.get_mut(&session_id) else {
            return violation("that session has ended");
        };
        if seq < 1 || seq <= s.last_seq {
            return violation(format!(
                "call numbers start at 1 and only increase; got {seq} after {}",
                s.last_seq
            ));
        }
        s.last_seq = seq;
        (s.connector.clone(), s.agent.clone())
    };
    let undecided = |reason: String| {
        Next::Reply(Response::Decision {
            session_id: session_id.clone(),
            seq,
            decision: Verdict::Undecided,
            policy_id: None,
            reason,
        })
    };
    if let Err(e) = policy::validate_tool_name(&tool) {
        return undecided(format!("the tool name cannot be decided: {e}"));
    }
    if args_digest.len() != 64 || !args_digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        return violation("args_digest is a SHA-256 in hex");
    }
    let set = current_policy(state);
    let decision = set.decide_with(
        &CallRequest {
            agent: agent.as_deref(),
            connector: &connector,
            tool: &tool,
        },
        &ctx,
    );
    let verdict = match decision.effect {
        Effect::Allow => Verdict::Allow,
        Effect::Ask => Verdict::Ask,
        Effect::Deny => Verdict::Deny,
    };
    let recorded = state
        .writer
        .append(
            Kind::CallRequest,
            Fields {
                session_id: Some(session_id.clone()),
                seq: Some(seq),
                connector: Some(connector),
                tool: Some(tool),
                agent,
                args_digest: Some(args_digest),
                decision: Some(decision.effect.as_str().to_string()),
                policy_id: decision.policy_id.clone(),
                reason: Some(decision.reason.clone()),
                ..Fields::default()
            },
        )
        .await;
    // The answer goes out only after the entry is committed; a call that was not recorded is
    // not decided.
    match recorded {
        Ok(_) => Next::Reply(Response::Decision {
            session_id,
            seq,
            decision: verdict,
            policy_id: decision.policy_id,
            reason: decision.reason,
        }),
        Err(e) => undecided(format!("the call could not be recorded: {e}")),
    }
}

fn check_scope(scope: &Scope) -> Result<(), String> {
    if let Some(t) = &scope.tool {
        policy::validate_tool_name(t).map_err(|e| e.to_string())?;
    }
    if let Some(a) = &scope.agent {
        policy::validate_scope_name("agent", a).map_err(|e| e.to_string())?;
    }
    if let Some(c) = &scope.connector {
        policy::validate_scope_name("connector", c).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn same_scope(row: &PolicyRow, scope: &Scope) -> bool {
    row.source == "cli"
        && row.tool == scope.tool
        && row.agent == scope.agent
        && row.connector == scope.connector
}

fn effect_verb(effect: Effect) -> &'static str {
    match effect {
        Effect::Allow => "allowed",
        Effect::Ask => "set to ask",
        Effect::Deny => "denied",
    }
}

async fn policy_set(state: &State, effect: Effect, scope: Scope) -> Next {
    if let Err(e) = check_scope(&scope) {
        return error(e);
    }
    let mut rows = state.rows.lock().await;
    if let Some(existing) = rows.iter().find(|r| same_scope(r, &scope)) {
        if existing.effect == effect.as_str() {
            return Next::Reply(Response::PolicyChanged {
                message: format!(
                    "{} is already {} by rule {}; nothing changed",
                    scope.describe(),
                    effect_verb(effect),
                    existing.id
                ),
                changed: false,
                chain_seq: None,
            });
        }
        return error(format!(
            "rule {} already covers {} ({}); a scope holds one rule: remove it first with `holdcall policy remove`",
            existing.id,
            scope.describe(),
            existing.effect
        ));
    }
    let seq = match state.writer.ask(Op::NextPolicySeq).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return error(format!("the policy table cannot be read: {e}")),
        Err(e) => return error(e.to_string()),
    };
    let id = format!("rule-{seq}");
    let text = policy::cli_rule_text(&id, effect, &scope);
    let new = NewPolicy {
        seq,
        id: id.clone(),
        source: "cli".into(),
        text: text.clone(),
        effect: effect.as_str().into(),
        specificity: policy::specificity_of_scope(&scope),
        tool: scope.tool.clone(),
        agent: scope.agent.clone(),
        connector: scope.connector.clone(),
    };
    let mut proposed = stored(&rows);
    proposed.push(StoredPolicy {
        seq,
        id: id.clone(),
        text,
    });
    let summary = format!("{} {}", effect_verb(effect), scope.describe());
    apply_change(
        state,
        &mut rows,
        proposed,
        vec![new],
        vec![],
        id,
        summary,
        &scope,
    )
    .await
}

async fn policy_remove(state: &State, scope: Scope) -> Next {
    if let Err(e) = check_scope(&scope) {
        return error(e);
    }
    let mut rows = state.rows.lock().await;
    let Some(existing) = rows.iter().find(|r| same_scope(r, &scope)).cloned() else {
        return error(format!(
            "no rule made on the command line covers {}; `holdcall policy list` shows the rules",
            scope.describe()
        ));
    };
    let proposed: Vec<StoredPolicy> = stored(&rows)
        .into_iter()
        .filter(|p| p.id != existing.id)
        .collect();
    let was = Effect::parse(&existing.effect)
        .map(effect_verb)
        .unwrap_or("covered");
    let summary = format!("{} no longer {was}", scope.describe());
    apply_change(
        state,
        &mut rows,
        proposed,
        vec![],
        vec![existing.id.clone()],
        existing.id,
        summary,
        &scope,
    )
    .await
}

/// Compiles the proposed set, journals the change with the diff of the whole policy text, and
/// only then puts the new set in force. A change that does not compile, or cannot be recorded,
/// is not made.
#[allow(clippy::too_many_arguments)]
async fn apply_change(
    state: &State,
    rows: &mut Vec<PolicyRow>,
    proposed: Vec<StoredPolicy>,
    add: Vec<NewPolicy>,
    remove: Vec<String>,
    policy_id: String,
    summary: String,
    scope: &Scope,
) -> Next {
    let new_set = match PolicySet::compile(&proposed) {
        Ok(s) => s,
        Err(e) => return error(format!("the change does not compile: {e}")),
    };
    let before = current_policy(state).text();
    let diff = policy::unified_diff(&before, &new_set.text(), "policy before", "policy after");
    let fields = Fields {
        tool: scope.tool.clone(),
        agent: scope.agent.clone(),
        connector: scope.connector.clone(),
        policy_id: Some(policy_id),
        reason: Some(summary.clone()),
        detail: Some(diff),
        ..Fields::default()
    };
    let result = state
        .writer
        .ask(|reply| Op::ChangePolicies {
            add,
            remove,
            fields,
            reply,
        })
        .await;
    match result {
        Ok(Ok((entry, new_rows))) => {
            *rows = new_rows;
            if let Ok(mut p) = state.policy.write() {
                *p = Arc::new(new_set);
            }
            Next::Reply(Response::PolicyChanged {
                message: format!(
                    "{summary} (recorded in the journal as entry {})",
                    entry.chain_seq
                ),
                changed: true,
                chain_seq: Some(entry.chain_seq),
            })
        }
        Ok(Err(e)) => error(format!(
            "the change could not be recorded, so it was not made: {e}"
        )),
        Err(e) => error(e.to_string()),
    }
}

/// The `source` of every policy a file contributed: re-importing the file replaces them.
fn file_source(file: &str) -> String {
    format!("file:{file}")
}

/// Imports a policy file: every policy in it is added, changed (same id, different canonical
/// text) or unchanged; what the same file contributed last time and no longer holds is removed.
/// One transaction, one `policy.change` entry with the file's name and SHA-256, the ids and the
/// diff of the whole set's text. A file with any error changes nothing.
async fn policy_import(state: &State, file: String, text: String, dry_run: bool) -> Next {
    let checked = match crate::policyfile::check(&file, &text) {
        Ok(c) => c,
        Err(refused) => return error(refused.plain()),
    };
    let mut rows = state.rows.lock().await;
    let source = file_source(&file);
    let mut added = Vec::new();
    let mut changed = Vec::new();
    let mut keep_ids = HashSet::new();
    for p in &checked.policies {
        keep_ids.insert(p.id.clone());
        match rows.iter().find(|r| r.id == p.id) {
            Some(r) if crate::policyfile::canonical(&r.text) == p.text => {}
            Some(_) => changed.push(p.clone()),
            None => added.push(p.clone()),
        }
    }
    let removed: Vec<String> = rows
        .iter()
        .filter(|r| r.source == source && !keep_ids.contains(&r.id))
        .map(|r| r.id.clone())
        .collect();
    let summary = |verb: &str| {
        let ids = |v: Vec<String>| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        format!(
            "{verb} {file} (sha256 {}): added {}; changed {}; removed {}",
            crate::frame::sha256_hex(text.as_bytes()),
            ids(added.iter().map(|p| p.id.clone()).collect()),
            ids(changed.iter().map(|p| p.id.clone()).collect()),
            ids(removed.clone()),
        )
    };
    let mut next = match state.writer.ask(Op::NextPolicySeq).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return error(format!("the policy table cannot be read: {e}")),
        Err(e) => return error(e.to_string()),
    };
    let mut proposed: Vec<StoredPolicy> = stored(&rows)
        .into_iter()
        .filter(|p| !removed.contains(&p.id) && !changed.iter().any(|c| c.id == p.id))
        .collect();
    let mut add = Vec::new();
    for p in added.iter().chain(&changed) {
        let (effect, specificity) = match policy::parse_effect_and_specificity(&p.id, &p.text) {
            Ok(x) => x,
            Err(e) => return error(format!("the import does not compile: {e}")),
        };
        proposed.push(StoredPolicy {
            seq: next,
            id: p.id.clone(),
            text: p.text.clone(),
        });
        add.push(NewPolicy {
            seq: next,
            id: p.id.clone(),
            source: source.clone(),
            text: p.text.clone(),
            effect: effect.as_str().into(),
            specificity,
            tool: None,
            agent: None,
            connector: None,
        });
        next += 1;
    }
    let new_set = match PolicySet::compile(&proposed) {
        Ok(s) => s,
        Err(e) => {
            return error(format!(
                "the import does not compile with the policies in force: {e}"
            ));
        }
    };
    let diff = policy::unified_diff(
        &current_policy(state).text(),
        &new_set.text(),
        "policy before",
        "policy after",
    );
    let mut remove = removed.clone();
    remove.extend(changed.iter().map(|p| p.id.clone()));
    if dry_run || diff.is_empty() && remove.is_empty() && add.is_empty() {
        let message = if diff.is_empty() && add.is_empty() && remove.is_empty() {
            format!("{file}: nothing to change")
        } else {
            summary("would import")
        };
        return Next::Reply(Response::PolicyImported {
            message,
            diff,
            changed: false,
            chain_seq: None,
        });
    }
    let message = summary("imported");
    let fields = Fields {
        client: Some(file.clone()),
        reason: Some(message.clone()),
        detail: Some(diff.clone()),
        ..Fields::default()
    };
    match state
        .writer
        .ask(|reply| Op::ChangePolicies {
            add,
            remove,
            fields,
            reply,
        })
        .await
    {
        Ok(Ok((entry, new_rows))) => {
            *rows = new_rows;
            if let Ok(mut p) = state.policy.write() {
                *p = Arc::new(new_set);
            }
            Next::Reply(Response::PolicyImported {
                message: format!(
                    "{message} (recorded in the journal as entry {})",
                    entry.chain_seq
                ),
                diff,
                changed: true,
                chain_seq: Some(entry.chain_seq),
            })
        }
        Ok(Err(e)) => error(format!(
            "the import could not be recorded, so nothing changed: {e}"
        )),
        Err(e) => error(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_debug_build_takes_its_clock_from_holdcall_clock() {
        let t = Some("2026-01-03T20:00:00+00:00".to_string());
        assert_eq!(fixed_clock(t.clone(), true).map(|c| c.hour()), Some(20));
        assert_eq!(fixed_clock(t, false), None);
        assert_eq!(fixed_clock(Some("soon".into()), true), None);
        assert_eq!(fixed_clock(None, true), None);
    }

    #[test]
    fn session_ids_are_32_hex_characters() {
        assert!(valid_session_id("0123456789abcdef0123456789abcdef"));
        assert!(!valid_session_id("0123456789abcdef"));
        assert!(!valid_session_id("0123456789abcdef0123456789abcdeg"));
    }
}
