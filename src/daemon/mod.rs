//! The per-user daemon: verified connections, sessions, the decision service and the single
//! writer of the database.
//!
//! Owns: accepting connections (only this Holdcall build, running as this user), which sessions
//! each connection may speak for, the compiled policy in force, and the journal writer thread.
//! Must never: answer a decision before its journal entry is committed, read a byte from an
//! unverified peer, or block the accept loop on one slow client.

#![deny(clippy::print_stdout)]

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, RwLock};

use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};
use tokio::sync::{Notify, oneshot};

use crate::agents::{self, Enrolment};
use crate::approval::{self, Cause, Hold};
use crate::config::Durability;
use crate::config::{Config, Home};
use crate::ipc::{self, Release, Request, Response, Verdict};
use crate::journal::{
    self, AgentChange, BudgetChange, Entry, Fields, Journal, Kind, NewPolicy, PolicyRow,
};
use crate::limits;
use crate::os::peer;
use crate::policy::budget::BudgetRow;
use crate::policy::budget::{self, Budget, BudgetScope, CallScope, Counters};
use crate::policy::context::{CallContext, Clock};
use crate::policy::{self, CallRequest, Effect, PolicySet, Scope, StoredPolicy};
use crate::vault::{self, Keyring, SecretStore};

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

pub mod supervise;
mod writer;
use writer::{AppendError, Op, Writer, WriterCore, writer_thread};

struct Session {
    connector: String,
    agent: Option<String>,
    last_seq: i64,
    /// What budgets are checked against, and what policies read as `context.session`.
    counters: Counters,
    /// Recently charged calls (seq → tool), so a retry the relay names is checked to be one;
    /// at most `limits::RETRY_STATES_MAX`, oldest forgotten first (its retry is then charged).
    charged: std::collections::BTreeMap<i64, String>,
}

impl Session {
    fn new(connector: String, agent: Option<String>) -> Session {
        Session {
            connector,
            agent,
            last_seq: 0,
            counters: Counters::default(),
            charged: std::collections::BTreeMap::new(),
        }
    }

    fn remember_charged(&mut self, seq: i64, tool: &str) {
        self.charged.insert(seq, tool.to_string());
        while self.charged.len() > limits::RETRY_STATES_MAX {
            self.charged.pop_first();
        }
    }

    /// Charges an allowed (or approved) call of this session against every budget in force
    /// whose scope it falls in. The approval path calls this when a person approves a held call.
    fn charge<'a>(
        &mut self,
        budgets: impl IntoIterator<Item = &'a Budget>,
        seq: i64,
        tool: &str,
    ) -> Result<(), budget::BudgetRefusal> {
        let call = CallScope {
            agent: self.agent.as_deref(),
            connector: &self.connector,
            tool,
        };
        self.counters.charge(budgets, &call)?;
        self.remember_charged(seq, tool);
        Ok(())
    }
}

struct State {
    writer: Writer,
    /// The generation of the set in force (`WriterCore::gen`), stored after the set, its
    /// budgets and enrolments are in place: a decision carries the generation it read first.
    generation: AtomicU64,
    /// Why no call may be decided, when the tables do not match the journal (or the stored
    /// policy does not compile after a reload): every call is refused with this reason.
    refusal: RwLock<Option<String>>,
    /// Why the writer's last write failed, until one succeeds.
    writer_fault: Arc<Mutex<Option<String>>>,
    policy: RwLock<Arc<PolicySet>>,
    /// Serialises policy changes; holds the rows the compiled set was built from.
    rows: tokio::sync::Mutex<Vec<PolicyRow>>,
    /// The budgets in force, replaced whole on each change (changes serialise on `rows`).
    budgets: RwLock<Arc<Vec<BudgetRow>>>,
    sessions: Mutex<HashMap<String, Session>>,
    /// The enrolled agents, matched at every accept. Changed only while `rows` is held, so a
    /// policy change and an agent change never interleave.
    agents: RwLock<Arc<Vec<Enrolment>>>,
    shutdown: Notify,
    durability: Durability,
    /// A fixed clock for the tests of time conditions (`fixed_clock`); `None`, the system clock.
    fixed_clock: Option<Clock>,
    /// Calls held for a person (module `approval`).
    approvals: approval::Registry,
    /// How long a held call waits for a person (`[approval] timeout`).
    approval_timeout: std::time::Duration,
    /// Where connectors' secrets live: the OS credential store, only ever reached from here.
    vault: Arc<dyn SecretStore>,
    /// Serialises connector changes and credentialed session starts, so a session never pairs
    /// one registration's key with another's secret.
    connectors: tokio::sync::Mutex<()>,
    /// The home this daemon serves, as `daemon.hello` proves it: the database it opened and
    /// the machine id it read.
    serves: ipc::Serves,
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
    // Held for the daemon's whole life, taken before anything else: while we hold it no other
    // daemon serves this home's database, so any socket file at our path is stale (or an
    // impostor's) and ours to replace. A POSIX record lock: the kernel releases it when this
    // process closes ANY descriptor of daemon.lock, so nothing in the daemon opens that file
    // again (see `ipc::DaemonLock`).
    let lock = match ipc::take_daemon_lock(&home) {
        Ok(Ok(lock)) => lock,
        Ok(Err(holder)) => {
            return Err(DaemonError::AlreadyRunning(format!(
                "{}: {} holds {}",
                home.dir().display(),
                holder
                    .map(|p| format!("pid {p}"))
                    .unwrap_or_else(|| "another process".into()),
                lock_path.display()
            )));
        }
        Err(source) => {
            return Err(DaemonError::Listen {
                path: lock_path.display().to_string(),
                source,
            });
        }
    };
    // A daemon of this home runs again: how the last one ended is history.
    crate::daemon::supervise::clear_exit(&home);
    // The locked file, to notice one removed or replaced behind our back (`rm daemon.*`): a
    // new daemon would lock the new file and serve this home beside us.
    let mut lock_identity = lock.identity();

    let db = home.db_path();
    let has_entries = journal::journal_has_entries(&db)?;
    let machine_id = journal::load_or_create_machine_id(&home.machine_id_path(), !has_entries)?;
    let durability = config.journal.durability;
    let mut j = Journal::open(&db, &machine_id, durability)?;
    // The database as opened, for `daemon.hello`: read once, now, so a file put in its place
    // later is not this daemon's database.
    let serves = {
        use std::os::unix::fs::MetadataExt as _;
        let m = std::fs::metadata(&db).map_err(|source| DaemonError::Listen {
            path: db.display().to_string(),
            source,
        })?;
        ipc::Serves {
            home: home.dir().display().to_string(),
            db_dev: m.dev(),
            db_ino: m.ino(),
            machine_id: machine_id.trim().to_string(),
        }
    };
    // What is in force is read with its `data_version` and checked against the journal's own
    // record of every change; a mismatch starts a daemon that refuses every call.
    let loaded = j.load_in_force()?;
    let refusal = mismatch_refusal(&loaded.mismatches);
    let set = PolicySet::compile(&stored(&loaded.policies)).map_err(DaemonError::Policy)?;
    let seen = loaded.data_version;
    let journal::InForce {
        policies: rows,
        budgets: budget_rows,
        agents: enrolled,
        ..
    } = loaded;
    let open_sessions = j.open_sessions()?;
    let pragmas = j.pragmas().to_detail();

    let (tx, rx) = std_mpsc::channel();
    let writer_fault = Arc::new(Mutex::new(None));
    let fault_for_writer = Arc::clone(&writer_fault);
    std::thread::Builder::new()
        .name("journal-writer".into())
        .spawn(move || {
            writer_thread(
                WriterCore {
                    j,
                    generation: 1,
                    seen,
                    fault: fault_for_writer,
                },
                rx,
            );
            // The lock goes last, with the journal closed (SQLite checkpoints at close): a
            // daemon that may still write holds it, so `daemon stop`, which waits for the lock,
            // returns only once nothing more will be written.
            drop(lock);
        })
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

    let (mut listener, mut bound) = listen(&socket)?;
    tracing::info!(
        "holdcall daemon {} listening on {} (pid {})",
        crate::VERSION,
        socket.display(),
        std::process::id()
    );

    let state = Arc::new(State {
        writer,
        generation: AtomicU64::new(1),
        refusal: RwLock::new(refusal),
        writer_fault,
        policy: RwLock::new(Arc::new(set)),
        rows: tokio::sync::Mutex::new(rows),
        budgets: RwLock::new(Arc::new(budget_rows)),
        sessions: Mutex::new(HashMap::new()),
        agents: RwLock::new(Arc::new(enrolled)),
        shutdown: Notify::new(),
        durability,
        fixed_clock: fixed_clock(std::env::var("HOLDCALL_CLOCK").ok(), cfg!(debug_assertions)),
        approvals: approval::Registry::default(),
        approval_timeout: config.approval.timeout,
        vault: Arc::new(Keyring::for_home(home.dir())),
        connectors: tokio::sync::Mutex::new(()),
        serves,
    });

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|source| DaemonError::Listen {
            path: "SIGTERM".into(),
            source,
        })?;
    let mut next_conn: u64 = 0;
    let mut watch = tokio::time::interval(limits::SOCKET_CHECK_INTERVAL);
    watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let check = tokio::select! {
            accepted = listener.accept() => {
                match accepted {
                    Ok((stream, _)) => {
                        next_conn += 1;
                        let st = Arc::clone(&state);
                        tokio::spawn(serve_conn(st, stream, next_conn));
                    }
                    Err(e) => tracing::warn!("accept failed: {e}"),
                }
                false
            }
            _ = watch.tick() => true,
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
            _ = state.shutdown.notified() => break,
        };
        // (Only with our own file's identity known: opening our own lock file and closing it
        // again would release the lock.)
        if check && lock_identity.is_some() && ipc::lock_file_identity(&home) != lock_identity {
            // Our lock is on a file no longer at the lock's path: take the lock on what is there
            // now, or, if another daemon already holds it, leave this home to that one.
            match ipc::take_daemon_lock(&home) {
                Ok(Ok(again)) => {
                    lock_identity = again.identity();
                    // Held until the process ends, like the first (never closed: see
                    // `ipc::DaemonLock`).
                    std::mem::forget(again);
                    tracing::warn!(
                        "the daemon's lock {} was removed or replaced; it holds the lock there again",
                        lock_path.display()
                    );
                }
                Ok(Err(holder)) => {
                    tracing::error!(
                        "the daemon's lock {} was removed or replaced, and {} holds it now: this daemon stops, so only one serves this home",
                        lock_path.display(),
                        holder
                            .map(|p| format!("pid {p}"))
                            .unwrap_or_else(|| "another process".into())
                    );
                    break;
                }
                Err(e) => tracing::warn!(
                    "the daemon's lock {} was removed or replaced, and cannot be taken again (tried again in {:?}): {e}",
                    lock_path.display(),
                    limits::SOCKET_CHECK_INTERVAL
                ),
            }
        }
        // A socket removed or replaced behind our back would leave this daemon unreachable (and
        // a relay would start nothing while we hold the lock): put ours back the same way it was
        // first placed. Connections already accepted are untouched.
        let now = peer::SocketFile::at(&socket);
        if !check || now == Some(bound) {
            continue;
        }
        let what = match now {
            None => "was removed",
            Some(_) => "was replaced by another file",
        };
        match listen(&socket) {
            Ok((l, b)) => {
                listener = l;
                bound = b;
                tracing::warn!(
                    "the daemon's socket {} {what}; listening on a new one there",
                    socket.display()
                );
                let _ = state
                    .writer
                    .append(
                        Kind::Anomaly,
                        Fields {
                            anomaly: Some("socket-replaced".into()),
                            reason: Some(format!(
                                "the daemon's socket {} {what} while it ran; it listens on a new one",
                                socket.display()
                            )),
                            ..Fields::default()
                        },
                    )
                    .await;
            }
            Err(e) => tracing::warn!(
                "the daemon's socket {} {what}, and a new one could not be made (tried again in {:?}): {e}",
                socket.display(),
                limits::SOCKET_CHECK_INTERVAL
            ),
        }
    }
    tracing::info!("holdcall daemon stopping");
    // Only our own socket: a file put there since is not ours to remove.
    if peer::SocketFile::at(&socket) == Some(bound) {
        let _ = std::fs::remove_file(&socket);
    }
    // A stopping daemon ends every session, so every call still held ends with it.
    for hold in state.approvals.take_where(|_| true) {
        let _ = settle(&state, hold, Release::Rejected, Cause::SessionEnded, None).await;
    }
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

/// Listens on `socket` with credential passing on before anyone can connect, put in place by
/// an atomic rename (see `peer::listen_passing_credentials`); the file it is at, to watch.
fn listen(socket: &std::path::Path) -> Result<(UnixListener, peer::SocketFile), DaemonError> {
    let err = |source| DaemonError::Listen {
        path: socket.display().to_string(),
        source,
    };
    let (std_listener, file) = peer::listen_passing_credentials(socket).map_err(err)?;
    std_listener.set_nonblocking(true).map_err(err)?;
    let listener = UnixListener::from_std(std_listener).map_err(err)?;
    Ok((listener, file))
}

/// What a handled request asks the connection to do next.
enum Next {
    Reply(Response),
    /// Answer, then close: the peer broke the protocol.
    ReplyAndClose(Response),
    /// The answer has already been queued on the connection (a held call's answer must go out
    /// before its hold can be seen, and so before any pushed word about it).
    Sent,
}

/// One connection as the handlers see it: its number, and its queue of outgoing lines. Every
/// line to the peer, answer or pushed word, goes through that one queue, so lines never
/// interleave and an answer always precedes a word pushed after it. The queue holds at most one
/// answer (a peer asks one thing at a time) plus one pushed line per held call or new hold
/// watched, each bounded by `limits::HELD_CALLS_MAX`.
struct ConnCtx {
    id: u64,
    out: UnboundedSender<Vec<u8>>,
}

async fn serve_conn(state: Arc<State>, stream: UnixStream, conn: u64) {
    // Judging the peer and finding its parent stat files under /proc, which reach the file
    // system of the peer's executable; one that never answers (a hung FUSE mount) must stall
    // only this connection, never the daemon's few async threads. So both run on the blocking
    // pool under a bound; past it the connection is refused.
    let Ok(fd) = std::os::fd::AsFd::as_fd(&stream).try_clone_to_owned() else {
        tracing::warn!("refused a connection: its socket could not be duplicated");
        return;
    };
    let checked = tokio::time::timeout(
        limits::PEER_CHECK_TIMEOUT,
        tokio::task::spawn_blocking(move || {
            let verdict = agents::check_peer(&fd);
            // Who is calling is the kernel's word: the executable of the relay's parent, read
            // now and matched against the enrolments in force when its session starts. Nothing
            // a relay or client sends can name it; a failure is unenrolled.
            let image = match verdict {
                agents::PeerCheck::Same { pid } => match agents::parent_image(&fd, pid) {
                    Ok(image) => Some(image),
                    Err(why) => {
                        tracing::info!("relay pid {pid}: no agent derived ({why}); unenrolled");
                        None
                    }
                },
                _ => None,
            };
            (verdict, image)
        }),
    )
    .await;
    let (verdict, image) = match checked {
        Ok(Ok(v)) => v,
        Ok(Err(_)) | Err(_) => {
            tracing::warn!(
                "refused a connection: its peer could not be judged within {:?}",
                limits::PEER_CHECK_TIMEOUT
            );
            return;
        }
    };
    let agents::PeerCheck::Same { pid } = verdict else {
        // Nothing is read from, or written to, a peer that is not this build running as us.
        tracing::warn!("refused a connection: {}", verdict.describe("the peer"));
        return;
    };
    let (r, mut w) = stream.into_split();
    let mut r = peer::CheckedReader::new(r, pid);
    let (out, mut out_rx) = unbounded_channel::<Vec<u8>>();
    let st = Arc::clone(&state);
    let writer = tokio::spawn(async move {
        while let Some(line) = out_rx.recv().await {
            if line.is_empty() {
                // The shutdown mark (see `Request::Shutdown`): everything queued before it,
                // the answer to `daemon stop` included, is written; now the daemon may stop.
                st.shutdown.notify_one();
                continue;
            }
            if w.write_all(&line).await.is_err() {
                break;
            }
        }
        // Dropping the write half shuts the socket down for writing: the peer sees the end.
    });
    let ctx = ConnCtx { id: conn, out };
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
            // Which home this daemon serves: asked first on every connection, and giving it no
            // role.
            Ok(Request::Hello) => Next::Reply(Response::Hello(state.serves.clone())),
            Ok(req) => {
                let is_session = req.is_session();
                if *session_role.get_or_insert(is_session) != is_session {
                    Next::ReplyAndClose(Response::Error {
                        message: "a connection either carries one relay's sessions or management requests, never both".into(),
                    })
                } else {
                    handle(&state, &ctx, &mut owned, image.as_ref(), req).await
                }
            }
        };
        let (resp, close) = match next {
            Next::Reply(r) => (r, false),
            Next::ReplyAndClose(r) => (r, true),
            Next::Sent => continue,
        };
        let Some(line) = approval::pushed_line(&resp) else {
            break;
        };
        if ctx.out.send(line).is_err() || close {
            break;
        }
    }
    // Calls this connection's relay was waiting on can no longer be forwarded: each is
    // rejected and journaled with the reason.
    for hold in state.approvals.take_where(|h| h.conn == conn) {
        let _ = settle(
            &state,
            hold,
            Release::Rejected,
            Cause::ConnectionDropped,
            None,
        )
        .await;
    }
    drop(ctx);
    // A watching connection's queue is also held by the registry's list of watchers; its writer
    // is stopped here rather than left until the next hold finds the socket closed.
    let stop = writer.abort_handle();
    if tokio::time::timeout(limits::SERVER_STOP_GRACE, writer)
        .await
        .is_err()
    {
        stop.abort();
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

/// `image` is the executable of the relay's parent, read at accept (None: unenrolled).
async fn handle(
    state: &Arc<State>,
    conn: &ConnCtx,
    owned: &mut HashSet<String>,
    image: Option<&crate::os::process::FileIdentity>,
    req: Request,
) -> Next {
    let changes_what_is_in_force = matches!(
        &req,
        Request::PolicySet { .. }
            | Request::PolicyRemove { .. }
            | Request::BudgetSet { .. }
            | Request::BudgetRemove { .. }
            | Request::AgentAdd { .. }
            | Request::AgentRemove { .. }
            | Request::PolicyImport { dry_run: false, .. }
    );
    if changes_what_is_in_force && let Some(refused) = changes_refused(state) {
        return refused;
    }
    match req {
        Request::SessionStart {
            session_id,
            connector,
            client,
            connector_from,
        } => {
            session_start(
                state,
                owned,
                session_id,
                (connector, connector_from),
                client,
                image,
            )
            .await
        }
        Request::CallRequest {
            session_id,
            seq,
            tool,
            args_digest,
            arguments,
            arguments_omitted,
            retry_of,
        } => {
            // The arguments a rule reads must be the bytes the journal's digest names.
            if arguments
                .as_deref()
                .is_some_and(|a| crate::ids::sha256_hex(a.as_bytes()) != args_digest)
            {
                return violation("the arguments sent do not match their digest");
            }
            let ctx =
                CallContext::from_call(arguments.as_deref(), arguments_omitted, state.clock());
            let call = AskedCall {
                session_id,
                seq,
                tool,
                args_digest,
                arguments,
                arguments_omitted,
                retry_of,
            };
            call_request(state, conn, owned, call, ctx).await
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
            ended,
        } => {
            if !owned.remove(&session_id) {
                return violation("this connection did not open that session");
            }
            if let Ok(mut s) = state.sessions.lock() {
                s.remove(&session_id);
            }
            // The relay still listens: each held call's word is pushed before this answer.
            for hold in state.approvals.take_where(|h| h.session_id == session_id) {
                let _ = settle(state, hold, Release::Rejected, Cause::SessionEnded, None).await;
            }
            one_way(
                state,
                Kind::SessionEnd,
                Fields {
                    session_id: Some(session_id),
                    protocol_version: protocol_version.filter(|v| !v.is_empty()),
                    reason: ended.map(|e| e.describe().to_string()),
                    ..Fields::default()
                },
            )
            .await
        }
        Request::PolicySet { effect, scope } => policy_set(state, effect, scope).await,
        Request::PolicyRemove { scope } => policy_remove(state, scope).await,
        Request::BudgetSet { calls, scope } => budget_set(state, calls, scope).await,
        Request::BudgetRemove { scope } => budget_remove(state, scope).await,
        Request::AgentAdd { name, path } => agent_add(state, name, path).await,
        Request::AgentList => agent_list(state),
        Request::AgentRemove { name } => agent_remove(state, name).await,
        Request::ConnectorSet(req) => connector_set(state, req).await,
        Request::ConnectorRemove { name } => connector_remove(state, name).await,
        Request::ConnectorList => match state.writer.ask(Op::Connectors).await {
            Ok(Ok(connectors)) => Next::Reply(Response::ConnectorList { connectors }),
            Ok(Err(e)) => error(format!("the connectors cannot be read: {e}")),
            Err(e) => error(e.to_string()),
        },
        Request::PolicyList => {
            let rows = state.rows.lock().await;
            Next::Reply(Response::PolicyList {
                policies: rows.iter().map(listed).collect(),
                budgets: current_budgets(state).to_vec(),
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
            let call = CallScope {
                agent: agent.as_deref(),
                connector: connector.as_deref().unwrap_or(""),
                tool: &tool,
            };
            let budgets = current_budgets(state)
                .iter()
                .filter(|b| b.budget.scope().applies(&call))
                .cloned()
                .collect();
            Next::Reply(Response::Explain {
                explanation: Box::new(explanation),
                budgets,
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
        Request::Hello => Next::Reply(Response::Hello(state.serves.clone())),
        Request::VaultProbe => {
            // A name no connector can have (a space is not allowed in one): a reachable store
            // answers "no such entry", and nothing is read or written.
            let probe = vault::run_blocking(&state.vault, |s| s.get("holdcall probe")).await;
            let where_ = state.vault.describe();
            Next::Reply(match probe {
                Ok(_) => Response::VaultStatus {
                    reachable: true,
                    message: format!("{where_} answers"),
                },
                Err(e) => Response::VaultStatus {
                    reachable: false,
                    message: format!("{where_}: {e}"),
                },
            })
        }
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
                cannot_decide: current_refusal(state).or_else(|| {
                    state
                        .writer_fault
                        .lock()
                        .ok()
                        .and_then(|f| f.clone())
                        .map(|e| {
                            format!("the journal cannot be written, so every call is refused: {e}")
                        })
                }),
            })
        }
        Request::Shutdown => {
            // The answer must reach the CLI before the daemon stops: it is queued, then an
            // empty line (never a real one: every line ends in a newline) that the connection's
            // writer turns into the stop once everything before it is written.
            let queued = approval::pushed_line(&Response::Ok)
                .is_some_and(|line| conn.out.send(line).is_ok())
                && conn.out.send(Vec::new()).is_ok();
            if !queued {
                state.shutdown.notify_one();
            }
            Next::Sent
        }
        Request::ApprovalList => Next::Reply(Response::HeldCalls {
            calls: state.approvals.list(),
        }),
        Request::ApprovalWatch => {
            // Subscribed before the list is taken, so no call held in between is missed (one
            // may be shown twice; the CLI skips ids it has shown).
            state.approvals.watch(conn.out.clone());
            Next::Reply(Response::HeldCalls {
                calls: state.approvals.list(),
            })
        }
        Request::ApprovalDecide {
            id,
            approve,
            reason,
        } => decide_held(state, id, approve, reason).await,
    }
}

/// One call as the relay described it.
struct AskedCall {
    session_id: String,
    seq: i64,
    tool: String,
    args_digest: String,
    arguments: Option<String>,
    arguments_omitted: bool,
    /// The call this one retries (2026-07-28 `inputResponses`), as the relay saw it.
    retry_of: Option<i64>,
}

/// A person's word from `holdcall approve ID` / `holdcall reject ID`. Only the first word on a
/// hold counts: the hold is taken out of the registry before anything else happens.
async fn decide_held(state: &State, id: String, approve: bool, reason: Option<String>) -> Next {
    if let Some(r) = &reason
        && let Err(e) = approval::check_reason(r)
    {
        return error(e);
    }
    if approve && reason.is_some() {
        return error("a reason goes with a rejection: `holdcall reject ID --reason TEXT`");
    }
    let Some(hold) = state.approvals.take(&id) else {
        return error(format!(
            "no call is held with id {:?}: it was decided already, timed out, ended with its session, or never existed; `holdcall approve` lists the calls held now",
            crate::text::visible(&id)
        ));
    };
    let what = format!(
        "call {} to {} (connector {}, seq {})",
        hold.id,
        crate::text::visible(&hold.tool),
        hold.connector,
        hold.seq
    );
    let recorded = if approve {
        release_approved(state, hold).await
    } else {
        settle(state, hold, Release::Rejected, Cause::Person, reason).await
    };
    match recorded {
        Ok(entry) if approve && entry.fields.decision.as_deref() != Some("approved") => {
            Next::Reply(Response::Decided {
                message: format!(
                    "approved {what}, but it was refused: {} (recorded in the journal as entry {})",
                    entry
                        .fields
                        .detail
                        .as_deref()
                        .unwrap_or("a budget has no room left"),
                    entry.chain_seq
                ),
                chain_seq: entry.chain_seq,
            })
        }
        Ok(entry) => Next::Reply(Response::Decided {
            message: format!(
                "{} {what} (recorded in the journal as entry {})",
                if approve { "approved" } else { "rejected" },
                entry.chain_seq
            ),
            chain_seq: entry.chain_seq,
        }),
        Err(e) => error(format!(
            "the decision on {what} could not be recorded in the journal, so the call was refused: {e}"
        )),
    }
}

/// Where a person's approval turns into a forward. Everything that must hold before an approved
/// call runs belongs here, before `settle`.
async fn release_approved(state: &State, hold: Hold) -> Result<journal::Entry, String> {
    let mut hold = hold;
    let mut attempt: u32 = 0;
    loop {
        attempt += 1;
        // The rules are asked again with the session's counts and the policy as they are now: a
        // deny added while the call was held, or a `context.session` limit other approved calls
        // have used up meanwhile, refuses it (cause `policy`). An approval never overrides a
        // deny, and it is recorded only while that policy is still the one in force.
        let now = in_force(state);
        if let Some(why) = now.refusal {
            return settle(state, hold, Release::Rejected, Cause::Policy, Some(why)).await;
        }
        let counts = match state.sessions.lock() {
            Ok(sessions) => sessions
                .get(&hold.session_id)
                .map(|s| s.counters.snapshot(&hold.tool)),
            Err(_) => None,
        };
        let Some(counts) = counts else {
            // The session ended while the person was deciding: the relay will not forward it.
            return settle(state, hold, Release::Rejected, Cause::SessionEnded, None).await;
        };
        let ctx = CallContext::from_call(hold.arguments.as_deref(), false, state.clock())
            .with_session(counts);
        let decided = now.set.decide_with(
            &CallRequest {
                agent: hold.agent.as_deref(),
                connector: &hold.connector,
                tool: &hold.tool,
            },
            &ctx,
        );
        if decided.effect == Effect::Deny {
            let why = format!(
                "the rules in force now refuse it: {}{}",
                decided.reason,
                decided
                    .policy_id
                    .map(|p| format!(" (policy {p})"))
                    .unwrap_or_default()
            );
            return settle(state, hold, Release::Rejected, Cause::Policy, Some(why)).await;
        }
        // An approved call is charged to its session's budgets like an allowed one; a budget
        // with no room left by now refuses it, and the journal says so (cause `over-budget`).
        let charged = match state.sessions.lock() {
            Ok(mut sessions) => match sessions.get_mut(&hold.session_id) {
                Some(s) => s
                    .charge(now.budgets.iter().map(|r| &r.budget), hold.seq, &hold.tool)
                    .map_err(|r| (Cause::OverBudget, r.reason())),
                None => Err((Cause::SessionEnded, String::new())),
            },
            Err(_) => Err((Cause::SessionEnded, String::new())),
        };
        if let Err((cause, why)) = charged {
            let why = (!why.is_empty()).then_some(why);
            return settle(state, hold, Release::Rejected, cause, why).await;
        }
        let (session_id, seq, tool) = (hold.session_id.clone(), hold.seq, hold.tool.clone());
        let recorded = settle_guarded(
            state,
            hold,
            Release::Approved,
            Cause::Person,
            None,
            Some(now.generation),
        )
        .await;
        let refund = || {
            if let Ok(mut sessions) = state.sessions.lock()
                && let Some(s) = sessions.get_mut(&session_id)
            {
                // Not recorded, so not run: the charge is taken back.
                s.counters.refund(&tool);
                s.charged.remove(&seq);
            }
        };
        match recorded {
            Ok(entry) => return Ok(entry),
            Err(Unsettled::Stale(back)) if attempt < limits::STALE_DECISION_ATTEMPTS_MAX => {
                refund();
                hold = *back;
                refresh(state, now.generation).await;
            }
            Err(Unsettled::Stale(back)) => {
                refund();
                let why = "the policy kept changing while the approval was checked".to_string();
                return settle(state, *back, Release::Rejected, Cause::Policy, Some(why)).await;
            }
            Err(Unsettled::Failed(e)) => {
                refund();
                return Err(e);
            }
        }
    }
}

/// Why a word on a held call was not settled.
enum Unsettled {
    /// The approval was checked against a set no longer in force: nothing was recorded or
    /// pushed, and the hold comes back to be checked again.
    Stale(Box<Hold>),
    /// It could not be recorded; the relay was told `undecided`.
    Failed(String),
}

/// Resolves a hold taken out of the registry: journals `call.approval` and only after the
/// commit pushes the word to the relay that asked. A word that cannot be journaled is pushed as
/// `undecided`, which the relay refuses.
async fn settle(
    state: &State,
    hold: Hold,
    verdict: Release,
    cause: Cause,
    reason: Option<String>,
) -> Result<journal::Entry, String> {
    match settle_guarded(state, hold, verdict, cause, reason, None).await {
        Ok(entry) => Ok(entry),
        Err(Unsettled::Failed(e)) => Err(e),
        Err(Unsettled::Stale(_)) => Err("the policy in force changed".into()),
    }
}

/// `settle`, where `guard` is the generation an approval was checked under: if that set is no
/// longer in force, nothing is recorded or pushed and the hold comes back.
async fn settle_guarded(
    state: &State,
    hold: Hold,
    verdict: Release,
    cause: Cause,
    reason: Option<String>,
    guard: Option<u64>,
) -> Result<journal::Entry, Unsettled> {
    let decision = match verdict {
        Release::Approved => "approved",
        _ => "rejected",
    };
    let fields = Fields {
        session_id: Some(hold.session_id.clone()),
        seq: Some(hold.seq),
        connector: Some(hold.connector.clone()),
        tool: Some(hold.tool.clone()),
        agent: hold.agent.clone(),
        args_digest: Some(hold.args_digest.clone()),
        decision: Some(decision.into()),
        policy_id: Some(hold.id.clone()),
        reason: Some(cause.as_str().into()),
        detail: reason.clone(),
        ..Fields::default()
    };
    let recorded = match guard {
        Some(generation) => {
            state
                .writer
                .append_decided(Kind::CallApproval, fields, generation)
                .await
        }
        None => state
            .writer
            .append(Kind::CallApproval, fields)
            .await
            .map_err(AppendError::Failed),
    };
    let recorded = match recorded {
        Ok(entry) => Ok(entry),
        Err(AppendError::Stale) => return Err(Unsettled::Stale(Box::new(hold))),
        Err(AppendError::Failed(e)) => Err(e),
    };
    let verdict = if recorded.is_ok() {
        verdict
    } else {
        Release::Undecided
    };
    if verdict != Release::Approved
        && let Ok(mut sessions) = state.sessions.lock()
        && let Some(s) = sessions.get_mut(&hold.session_id)
    {
        s.counters.note_refused();
    }
    if let Err(e) = &recorded {
        tracing::error!("the word on held call {} was not recorded: {e}", hold.id);
    }
    let word = Response::Released {
        session_id: hold.session_id,
        seq: hold.seq,
        args_digest: hold.args_digest,
        verdict,
        cause: cause.as_str().into(),
        reason,
    };
    if let Some(line) = approval::pushed_line(&word) {
        // A relay that is gone refuses the call itself.
        let _ = hold.push.send(line);
    }
    recorded.map_err(Unsettled::Failed)
}

/// Holds a call the rules sent to a person: the `held` answer goes out first, then the hold
/// becomes visible to `holdcall approve` and its timer starts. Arguments that were not sent
/// cannot be shown, so such a call is rejected at once.
async fn hold_call(
    state: &Arc<State>,
    conn: &ConnCtx,
    call: AskedCall,
    connector: String,
    agent: Option<String>,
    policy_id: Option<String>,
    reason: String,
) -> Next {
    let undecided = |reason: String| {
        Next::Reply(Response::Decision {
            session_id: call.session_id.clone(),
            seq: call.seq,
            decision: Verdict::Undecided,
            policy_id: None,
            reason,
            hold: None,
        })
    };
    if state.approvals.is_full(&call.session_id) {
        let why = format!(
            "{} calls are held for a person already ({} at most for one session); this one cannot be held too",
            limits::HELD_CALLS_MAX,
            limits::HELD_CALLS_PER_SESSION_MAX
        );
        // The journal gets the end of this `ask` too, so no held call is left without a word.
        let _ = state
            .writer
            .append(
                Kind::CallApproval,
                Fields {
                    session_id: Some(call.session_id.clone()),
                    seq: Some(call.seq),
                    connector: Some(connector.clone()),
                    tool: Some(call.tool.clone()),
                    agent: agent.clone(),
                    args_digest: Some(call.args_digest.clone()),
                    decision: Some("rejected".into()),
                    reason: Some(Cause::Capacity.as_str().into()),
                    detail: Some(why.clone()),
                    ..Fields::default()
                },
            )
            .await;
        if let Ok(mut sessions) = state.sessions.lock()
            && let Some(s) = sessions.get_mut(&call.session_id)
        {
            s.counters.note_refused();
        }
        return undecided(why);
    }
    let Ok(id) = approval::new_hold_id() else {
        return undecided("no random hold id could be drawn".into());
    };
    let timeout = state.approval_timeout;
    let answer = Response::Decision {
        session_id: call.session_id.clone(),
        seq: call.seq,
        decision: Verdict::Held,
        policy_id: policy_id.clone(),
        reason: reason.clone(),
        hold: Some(ipc::HoldTicket {
            id: id.clone(),
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        }),
    };
    let Some(line) = approval::pushed_line(&answer) else {
        return undecided("the answer could not be written".into());
    };
    if conn.out.send(line).is_err() {
        return Next::Sent;
    }
    let now = std::time::Instant::now();
    let hold = Hold {
        id: id.clone(),
        conn: conn.id,
        session_id: call.session_id,
        seq: call.seq,
        agent,
        connector,
        tool: call.tool,
        args_digest: call.args_digest,
        arguments: call.arguments,
        policy_id,
        reason,
        held_at: now,
        deadline: now + timeout,
        push: conn.out.clone(),
        timer: None,
    };
    if call.arguments_omitted {
        let _ = settle(
            state,
            hold,
            Release::Rejected,
            Cause::ArgumentsUnknown,
            None,
        )
        .await;
        return Next::Sent;
    }
    let (session_id, seq, digest, push) = (
        hold.session_id.clone(),
        hold.seq,
        hold.args_digest.clone(),
        hold.push.clone(),
    );
    if state.approvals.insert(hold).is_err() {
        // Filled up since the check above (another connection held a call meanwhile): no word
        // can be given, so the call is refused as undecided.
        let word = Response::Released {
            session_id,
            seq,
            args_digest: digest,
            verdict: Release::Undecided,
            cause: Cause::Timeout.as_str().into(),
            reason: Some(format!(
                "more than {} calls are held already",
                limits::HELD_CALLS_MAX
            )),
        };
        if let Some(line) = approval::pushed_line(&word) {
            let _ = push.send(line);
        }
        return Next::Sent;
    }
    let st = Arc::clone(state);
    let timer_id = id.clone();
    let timer = tokio::spawn(async move {
        tokio::time::sleep(timeout).await;
        if let Some(hold) = st.approvals.take_expired(&timer_id) {
            let _ = settle(&st, hold, Release::Rejected, Cause::Timeout, None).await;
        }
    });
    state.approvals.set_timer(&id, timer.abort_handle());
    Next::Sent
}

fn listed(r: &PolicyRow) -> ipc::ListedPolicy {
    ipc::ListedPolicy {
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

fn current_budgets(state: &State) -> Arc<Vec<BudgetRow>> {
    match state.budgets.read() {
        Ok(b) => Arc::clone(&b),
        Err(poisoned) => Arc::clone(&poisoned.into_inner()),
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

/// The set in force as one decision reads it: its generation first, then the set and budgets
/// (installed before the generation is stored, so a decision can only ever be made with a set
/// at least as new as its generation says; the writer refuses it otherwise).
struct InForceNow {
    generation: u64,
    set: Arc<PolicySet>,
    budgets: Arc<Vec<BudgetRow>>,
    refusal: Option<String>,
}

fn in_force(state: &State) -> InForceNow {
    let generation = state.generation.load(Ordering::Acquire);
    InForceNow {
        generation,
        set: current_policy(state),
        budgets: current_budgets(state),
        refusal: current_refusal(state),
    }
}

fn current_refusal(state: &State) -> Option<String> {
    match state.refusal.read() {
        Ok(r) => r.clone(),
        Err(_) => Some("the daemon's state is damaged; run `holdcall daemon restart`".into()),
    }
}

/// The reason every call is refused while the tables do not match the journal.
fn mismatch_refusal(mismatches: &[String]) -> Option<String> {
    let first = mismatches.first()?;
    for m in mismatches {
        tracing::error!("the tables do not match the journal: {m}");
    }
    let more = match mismatches.len() {
        1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    Some(format!(
        "the policies, budgets or agents tables do not match the journal: {first}{more}; \
         every call is refused until they do: run `holdcall verify`"
    ))
}

/// After a decision came back stale: once no change is in flight (`rows` is held by every
/// change until its set is in force), a set newer than the one the decision used is in force,
/// or, when there is none, what is in force is reloaded from the database.
async fn refresh(state: &State, used_gen: u64) {
    let mut rows = state.rows.lock().await;
    if state.generation.load(Ordering::Acquire) != used_gen {
        return;
    }
    if let Err(e) = reload_locked(state, &mut rows).await {
        tracing::error!("what is in force could not be reloaded: {e}");
    }
}

/// Reloads the policies, budgets and enrolments from the tables, checked against the journal
/// (a mismatch, or a stored policy that does not compile, refuses every call), and puts them in
/// force under a new generation. Called with `rows` held.
async fn reload_locked(state: &State, rows: &mut Vec<PolicyRow>) -> Result<(), String> {
    let (generation, loaded) = match state.writer.ask(Op::Reload).await {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => return Err(e),
        Err(e) => return Err(e.to_string()),
    };
    tracing::info!("reloaded the policy, budgets and enrolments from the database");
    let mut refusal = mismatch_refusal(&loaded.mismatches);
    match PolicySet::compile(&stored(&loaded.policies)) {
        Ok(set) => {
            if let Ok(mut p) = state.policy.write() {
                *p = Arc::new(set);
            }
        }
        Err(e) => {
            tracing::error!("the stored policy does not compile: {e}");
            refusal.get_or_insert_with(|| {
                format!(
                    "the policy stored in the database does not compile ({e}); every call is \
                     refused: run `holdcall verify`"
                )
            });
        }
    }
    if let Ok(mut b) = state.budgets.write() {
        *b = Arc::new(loaded.budgets);
    }
    if let Ok(mut a) = state.agents.write() {
        *a = Arc::new(loaded.agents);
    }
    if let Ok(mut r) = state.refusal.write() {
        *r = refusal;
    }
    *rows = loaded.policies;
    state.generation.store(generation, Ordering::Release);
    Ok(())
}

/// A change to the policy, budgets or enrolments is refused while the tables do not match the
/// journal: its diff would be taken over text the journal never recorded.
fn changes_refused(state: &State) -> Option<Next> {
    current_refusal(state).map(|why| error(format!("nothing was changed: {why}")))
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
    (connector, connector_from): (String, Option<String>),
    client: Option<String>,
    image: Option<&crate::os::process::FileIdentity>,
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
    // Said in the journal as the relay words it, made printable and bounded like a label.
    let reason = connector_from.map(|from| {
        let from: String = crate::text::visible(&from)
            .chars()
            .take(limits::CONNECTOR_FROM_CHARS_MAX)
            .collect();
        format!("no --connector was given: connector {connector} was derived from {from}")
    });
    // Reserve the id before any await, so two connections starting the same id at once cannot
    // both pass the check.
    let reserved = match state.sessions.lock() {
        Ok(mut s) if !s.contains_key(&session_id) => {
            // The agent is bound below, once, with the enrolments in force when the start is
            // recorded; a later enrolment change does not touch a started session.
            s.insert(session_id.clone(), Session::new(connector.clone(), None));
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
    // Only a journaled `session.start` uses an id up; a journal that cannot be read says so
    // (and the id stays free for when it can).
    let recorded = match state
        .writer
        .ask(|r| Op::SessionStarted(session_id.clone(), r))
        .await
    {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => {
            unreserve(state);
            return error(format!(
                "the session cannot start: the journal cannot be read: {e}"
            ));
        }
        Err(e) => {
            unreserve(state);
            return error(format!("the session cannot start: {e}"));
        }
    };
    if recorded {
        unreserve(state);
        return violation("that session id was used before; a session starts once");
    }
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
    let mut attempt: u32 = 0;
    let entry = loop {
        attempt += 1;
        // The relay's parent image (read at accept from the kernel, never from the request:
        // `session.start` has no agent field, and unknown fields are ignored), matched against
        // the enrolments in force now, and recorded only while they still are.
        let generation = state.generation.load(Ordering::Acquire);
        let agent =
            image.and_then(|i| agents::matching(i, &current_agents(state)).map(|e| e.name.clone()));
        if let Ok(mut s) = state.sessions.lock()
            && let Some(s) = s.get_mut(&session_id)
        {
            s.agent.clone_from(&agent);
        }
        let recorded = state
            .writer
            .append_decided(
                Kind::SessionStart,
                Fields {
                    session_id: Some(session_id.clone()),
                    connector: Some(connector.clone()),
                    client: client.clone(),
                    agent,
                    detail: detail.clone(),
                    reason: reason.clone(),
                    ..Fields::default()
                },
                generation,
            )
            .await;
        match recorded {
            Err(AppendError::Stale) if attempt < limits::STALE_DECISION_ATTEMPTS_MAX => {
                refresh(state, generation).await;
            }
            other => break other,
        }
    };
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
    let read = || async {
        match state
            .writer
            .ask(|r| Op::Connector(connector.to_string(), r))
            .await
        {
            Ok(Ok(row)) => Ok(row),
            Ok(Err(e)) => Err(format!("the connector registry cannot be read: {e}")),
            Err(e) => Err(e.to_string()),
        }
    };
    // A connector nobody registered never waits behind a store call of another connector's.
    if read().await?.is_none() {
        return Ok(None);
    }
    let _serial = state.connectors.lock().await;
    let Some(row) = read().await? else {
        return Ok(None);
    };
    let account = row.account();
    let where_ = state.vault.describe();
    match vault::run_blocking(&state.vault, move |s| s.get(&account)).await {
        Ok(Some(secret)) => {
            // What comes back from the store is checked as what went in: something edited
            // outside Holdcall (a line break, a NUL, a huge value) is refused with a reason.
            crate::connector::validate_secret(secret.expose()).map_err(|e| {
                format!("connector {connector}'s secret in {where_} is not usable: {e}")
            })?;
            Ok(Some(crate::connector::Launch {
                command: row.command,
                env_key: row.env_key,
                secret,
                pass_env: row.pass_env,
                cwd: row.cwd,
                pinned_env: row.pinned_env,
            }))
        }
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
    // The registration it replaces, if any: its secret stays until the new one is recorded.
    let replaced = match state
        .writer
        .ask(|r| Op::Connector(req.name.clone(), r))
        .await
    {
        Ok(Ok(row)) => row,
        Ok(Err(e)) => return error(format!("the connectors cannot be read: {e}")),
        Err(e) => return error(e.to_string()),
    };
    // A fresh store entry per registration: a store call that times out and completes later
    // can only ever touch its own entry, never a newer registration's secret.
    let Ok(secret_id) = crate::ids::random_hex(8) else {
        return error("no random id could be drawn for the secret's store entry");
    };
    let crate::connector::SetRequest {
        name,
        env_key,
        command,
        pass_env,
        secret,
        cwd,
        pinned_env,
    } = req;
    let summary = format!(
        "connector {name} registered: runs {} in {} with its secret in {env_key}",
        crate::text::visible(&command.join(" ")),
        crate::text::visible(&cwd)
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
                "cwd": cwd,
                "pinned_env": pinned_env.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                "store": state.vault.describe(),
                "secret_id": secret_id,
            })
            .to_string(),
        ),
        ..Fields::default()
    };
    let account = crate::connector::account(&name, &secret_id);
    let change = journal::ConnectorChange::Set {
        name: name.clone(),
        env_key,
        command,
        pass_env,
        cwd,
        pinned_env,
        secret_id,
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
    match vault::store_then_record(&state.vault, &account, secret, record).await {
        Ok(entry) => {
            // The replaced registration's secret is no one's now.
            let mut left = String::new();
            if let Some(old) = replaced {
                let old_account = old.account();
                if let Err(e) =
                    vault::run_blocking(&state.vault, move |s| s.delete(&old_account)).await
                {
                    left = format!(
                        "; the replaced secret could not be deleted from {} ({e}): remove the \
                         entry {} there by hand",
                        state.vault.describe(),
                        old.account()
                    );
                }
            }
            Next::Reply(Response::ConnectorChanged {
                message: format!(
                    "{summary}; the secret is in {} (recorded in the journal as entry {}){left}",
                    state.vault.describe(),
                    entry.chain_seq
                ),
                chain_seq: Some(entry.chain_seq),
            })
        }
        Err(vault::StoreThenRecordError::Store(e)) => error(format!(
            "{e}; nothing was registered{}",
            if matches!(e, vault::VaultError::TimedOut(..)) {
                format!(
                    " (if the store finishes later, an unused entry {account} may be left in \
                     {}; no registration will ever use it)",
                    state.vault.describe()
                )
            } else {
                String::new()
            }
        )),
        Err(vault::StoreThenRecordError::Record {
            why,
            secret_deleted,
        }) => error(if secret_deleted {
            format!(
                "the registration could not be recorded, so the new secret was deleted again \
                 (the previous registration, if any, is unchanged): {why}"
            )
        } else {
            format!(
                "the registration could not be recorded, and the new secret could not be \
                 deleted again from {} (entry {account}; no registration uses it): {why}",
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
    let account = row.account();
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

/// The decision on one call once the budgets have had their say.
struct Verdicts {
    verdict: Verdict,
    word: String,
    policy_id: Option<String>,
    reason: String,
    /// Whether the call was charged (so a failed journal write must refund it).
    charged: bool,
}

async fn call_request(
    state: &Arc<State>,
    conn: &ConnCtx,
    owned: &HashSet<String>,
    call: AskedCall,
    ctx: CallContext,
) -> Next {
    let (session_id, seq) = (call.session_id.clone(), call.seq);
    let (tool, args_digest) = (call.tool.clone(), call.args_digest.clone());
    let retry_of = call.retry_of;
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
            hold: None,
        })
    };
    if let Err(e) = policy::validate_tool_name(&tool) {
        return undecided(format!("the tool name cannot be decided: {e}"));
    }
    if args_digest.len() != 64 || !args_digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        return violation("args_digest is a SHA-256 in hex");
    }
    let mut ctx = ctx;
    let mut attempt: u32 = 0;
    loop {
        attempt += 1;
        // The set in force, its budgets (borrowed, never copied, on the decision path) and the
        // generation they belong to: the writer records the decision only under that generation.
        let now = in_force(state);
        let v = {
            let Ok(mut sessions) = state.sessions.lock() else {
                return violation("the session table is unavailable");
            };
            let Some(s) = sessions.get_mut(&session_id) else {
                return violation("that session has ended");
            };
            if let Some(why) = &now.refusal {
                s.counters.note_decided();
                s.counters.note_refused();
                Verdicts {
                    verdict: Verdict::Undecided,
                    word: "undecided".into(),
                    policy_id: None,
                    reason: why.clone(),
                    charged: false,
                }
            } else {
                ctx = ctx.with_session(s.counters.snapshot(&tool));
                let decision = now.set.decide_with(
                    &CallRequest {
                        agent: agent.as_deref(),
                        connector: &connector,
                        tool: &tool,
                    },
                    &ctx,
                );
                budget_verdict(
                    s,
                    now.budgets.iter().map(|r| &r.budget),
                    seq,
                    &tool,
                    retry_of,
                    decision.effect,
                    decision.policy_id,
                    decision.reason,
                )
            }
        };
        let recorded = state
            .writer
            .append_decided(
                Kind::CallRequest,
                Fields {
                    session_id: Some(session_id.clone()),
                    seq: Some(seq),
                    connector: Some(connector.clone()),
                    tool: Some(tool.clone()),
                    agent: agent.clone(),
                    args_digest: Some(args_digest.clone()),
                    decision: Some(v.word.clone()),
                    policy_id: v.policy_id.clone(),
                    reason: Some(v.reason.clone()),
                    ..Fields::default()
                },
                now.generation,
            )
            .await;
        // The answer goes out only after the entry is committed; a call that was not recorded is
        // not decided, and not charged.
        return match recorded {
            Ok(_) if v.verdict == Verdict::Held => {
                hold_call(state, conn, call, connector, agent, v.policy_id, v.reason).await
            }
            Ok(_) => Next::Reply(Response::Decision {
                session_id,
                seq,
                decision: v.verdict,
                policy_id: v.policy_id,
                reason: v.reason,
                hold: None,
            }),
            Err(AppendError::Stale) if attempt < limits::STALE_DECISION_ATTEMPTS_MAX => {
                // Decided with a set that is no longer in force: forgotten, and decided again
                // with the one that is.
                if let Ok(mut sessions) = state.sessions.lock()
                    && let Some(s) = sessions.get_mut(&session_id)
                {
                    s.counters.forget_decided();
                    if v.charged {
                        s.counters.refund(&tool);
                        s.charged.remove(&seq);
                    }
                    if matches!(
                        v.verdict,
                        Verdict::Deny | Verdict::OverBudget | Verdict::Undecided
                    ) {
                        s.counters.forget_refused();
                    }
                }
                refresh(state, now.generation).await;
                continue;
            }
            Err(e) => {
                if let Ok(mut sessions) = state.sessions.lock()
                    && let Some(s) = sessions.get_mut(&session_id)
                {
                    if v.charged {
                        s.counters.refund(&tool);
                        s.charged.remove(&seq);
                    }
                    if v.verdict == Verdict::Allow {
                        s.counters.note_refused();
                    }
                }
                undecided(format!("the call could not be recorded: {e}"))
            }
        };
    }
}

/// The rules' decision, narrowed by the budgets: an allow is charged (or refused `over-budget`
/// if a budget has no room), a retry of an allowed call is allowed without a second charge, and
/// everything else is counted as refused. Every call counts as decided.
#[allow(clippy::too_many_arguments)]
fn budget_verdict<'a>(
    s: &mut Session,
    budgets: impl IntoIterator<Item = &'a Budget>,
    seq: i64,
    tool: &str,
    retry_of: Option<i64>,
    effect: Effect,
    policy_id: Option<String>,
    reason: String,
) -> Verdicts {
    s.counters.note_decided();
    let refused = |s: &mut Session, verdict: Verdict, word: &str, policy_id, reason| {
        s.counters.note_refused();
        Verdicts {
            verdict,
            word: word.to_string(),
            policy_id,
            reason,
            charged: false,
        }
    };
    match effect {
        // A held call is neither charged nor refused yet: `release_approved` charges it, and a
        // rejection counts it as refused.
        Effect::Ask => Verdicts {
            verdict: Verdict::Held,
            word: "ask".into(),
            policy_id,
            reason,
            charged: false,
        },
        Effect::Deny => refused(s, Verdict::Deny, "deny", policy_id, reason),
        Effect::Allow => {
            // A retry is the same call only if the session did charge that call, for this tool.
            let retry = retry_of
                .filter(|orig| *orig < seq && s.charged.get(orig).is_some_and(|t| t == tool));
            if let Some(orig) = retry {
                return Verdicts {
                    verdict: Verdict::Allow,
                    word: "allow".into(),
                    policy_id,
                    reason: format!("{reason}; retry of call {orig}, not charged again"),
                    charged: false,
                };
            }
            match s.charge(budgets, seq, tool) {
                Ok(()) => Verdicts {
                    verdict: Verdict::Allow,
                    word: "allow".into(),
                    policy_id,
                    reason,
                    charged: true,
                },
                Err(r) => refused(
                    s,
                    Verdict::OverBudget,
                    OVER_BUDGET,
                    r.policy_id(),
                    r.reason(),
                ),
            }
        }
    }
}

/// The journal's decision word for a call the rules allowed and a budget refused.
pub const OVER_BUDGET: &str = "over-budget";

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
    if let Some(a) = &scope.agent
        && !is_enrolled(state, a)
    {
        return error(not_enrolled(a));
    }
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
    match commit_policies(state, rows, new_set, add, remove, fields).await {
        Ok(Ok(entry)) => policy_changed(&summary, &entry),
        Ok(Err(e)) => not_recorded(e),
        Err(e) => error(e.to_string()),
    }
}

/// Hands a policy change (rows and its journal entry, one transaction) to the writer, and only
/// once it is committed puts `new_set` in force, with the rows now stored and the generation
/// the commit started. Ok(Err): why it was not recorded (nothing changed).
async fn commit_policies(
    state: &State,
    rows: &mut Vec<PolicyRow>,
    new_set: PolicySet,
    add: Vec<NewPolicy>,
    remove: Vec<String>,
    fields: Fields,
) -> Result<Result<Entry, String>, DaemonError> {
    let result = state
        .writer
        .ask(|reply| Op::ChangePolicies {
            add,
            remove,
            fields,
            reply,
        })
        .await?;
    let (entry, new_rows, generation) = match result {
        Ok(r) => r,
        Err(e) => return Ok(Err(e)),
    };
    *rows = new_rows;
    if let Ok(mut p) = state.policy.write() {
        *p = Arc::new(new_set);
    }
    state.generation.store(generation, Ordering::Release);
    Ok(Ok(entry))
}

/// The reply to a policy or budget change once its entry is committed.
fn policy_changed(summary: &str, entry: &Entry) -> Next {
    Next::Reply(Response::PolicyChanged {
        message: format!(
            "{summary} (recorded in the journal as entry {})",
            entry.chain_seq
        ),
        changed: true,
        chain_seq: Some(entry.chain_seq),
    })
}

/// The reply to a policy or budget change its journal entry could not record (nothing changed).
fn not_recorded(e: impl std::fmt::Display) -> Next {
    error(format!(
        "the change could not be recorded, so it was not made: {e}"
    ))
}

fn budget_scope_check(scope: &BudgetScope) -> Result<(), String> {
    check_scope(&Scope {
        tool: scope.tool.clone(),
        agent: scope.agent.clone(),
        connector: scope.connector.clone(),
    })
}

/// Sets a budget: one per scope. The same cap again changes nothing; another cap is refused
/// (remove the budget first), exactly as a scope holds one rule.
async fn budget_set(state: &State, calls: i64, scope: BudgetScope) -> Next {
    if let Err(e) = budget::check_cap(calls) {
        return error(e.to_string());
    }
    if let Err(e) = budget_scope_check(&scope) {
        return error(e);
    }
    // Changes serialise with policy and agent changes.
    let _rows = state.rows.lock().await;
    // As for a rule: a budget may name only an enrolled agent.
    if let Some(a) = &scope.agent
        && !is_enrolled(state, a)
    {
        return error(not_enrolled(a));
    }
    if let Some(existing) = current_budgets(state)
        .iter()
        .find(|r| r.budget.scope() == scope)
    {
        if existing.budget.calls == calls {
            return Next::Reply(Response::PolicyChanged {
                message: format!(
                    "budget {} already allows {}; nothing changed",
                    existing.budget.id,
                    existing.budget.describe()
                ),
                changed: false,
                chain_seq: None,
            });
        }
        return error(format!(
            "budget {} already covers {} ({}); a scope holds one budget: remove it first with `holdcall policy budget remove`",
            existing.budget.id,
            scope.describe(),
            existing.budget.describe()
        ));
    }
    change_budget(state, BudgetChange::Set { calls, scope }).await
}

async fn budget_remove(state: &State, scope: BudgetScope) -> Next {
    if let Err(e) = budget_scope_check(&scope) {
        return error(e);
    }
    let _rows = state.rows.lock().await;
    let Some(existing) = current_budgets(state)
        .iter()
        .find(|r| r.budget.scope() == scope)
        .cloned()
    else {
        return error(format!(
            "no budget covers {}; `holdcall policy list` shows the budgets",
            scope.describe()
        ));
    };
    change_budget(
        state,
        BudgetChange::Remove {
            id: existing.budget.id,
        },
    )
    .await
}

/// Stores the change and its journal entry in one transaction; only after the commit do the
/// new budgets apply.
async fn change_budget(state: &State, change: BudgetChange) -> Next {
    match state.writer.ask(|r| Op::ChangeBudget(change, r)).await {
        Ok(Ok((entry, rows, generation))) => {
            if let Ok(mut b) = state.budgets.write() {
                *b = Arc::new(rows);
            }
            state.generation.store(generation, Ordering::Release);
            policy_changed(
                entry.fields.reason.as_deref().unwrap_or("budget changed"),
                &entry,
            )
        }
        Ok(Err(e)) => not_recorded(e),
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
    let checked = match crate::policy::file::check(&file, &text) {
        Ok(c) => c,
        Err(refused) => return error(refused.plain()),
    };
    let mut rows = state.rows.lock().await;
    let unenrolled: Vec<String> = checked
        .policies
        .iter()
        .flat_map(|p| {
            p.agents
                .iter()
                .filter(|a| !is_enrolled(state, a))
                .map(move |a| format!("\n{}: policy {}: {}", p.at, p.id, not_enrolled(a)))
        })
        .collect();
    if !unenrolled.is_empty() {
        return error(format!(
            "{file} names agents that are not enrolled; nothing was changed:{}",
            unenrolled.concat()
        ));
    }
    let source = file_source(&file);
    let mut added = Vec::new();
    let mut changed = Vec::new();
    let mut keep_ids = HashSet::new();
    for p in &checked.policies {
        keep_ids.insert(p.id.clone());
        match rows.iter().find(|r| r.id == p.id) {
            Some(r) if crate::policy::file::canonical(&r.text) == p.text => {}
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
            crate::ids::sha256_hex(text.as_bytes()),
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
    match commit_policies(state, &mut rows, new_set, add, remove, fields).await {
        Ok(Ok(entry)) => Next::Reply(Response::PolicyImported {
            message: format!(
                "{message} (recorded in the journal as entry {})",
                entry.chain_seq
            ),
            diff,
            changed: true,
            chain_seq: Some(entry.chain_seq),
        }),
        Ok(Err(e)) => error(format!(
            "the import could not be recorded, so nothing changed: {e}"
        )),
        Err(e) => error(e.to_string()),
    }
}

// ---------------------------------------------------------------------------------------------
// Agents: enrolment (the identity itself, and deriving it, live in `agents`)
// ---------------------------------------------------------------------------------------------

fn current_agents(state: &State) -> Arc<Vec<Enrolment>> {
    match state.agents.read() {
        Ok(a) => Arc::clone(&a),
        Err(poisoned) => Arc::clone(&poisoned.into_inner()),
    }
}

fn is_enrolled(state: &State, name: &str) -> bool {
    current_agents(state).iter().any(|e| e.name == name)
}

fn not_enrolled(name: &str) -> String {
    format!("agent {name} is not enrolled; run `holdcall agent add {name} PATH` first")
}

/// An error's text with its help, for an answer the CLI prints as is.
fn with_help(e: &(dyn miette::Diagnostic + Send + Sync)) -> String {
    match e.help() {
        Some(h) => format!("{e} ({h})"),
        None => e.to_string(),
    }
}

/// The `agent.change` entry's `detail`: the enrolment as JSON, and the one it replaced.
fn agent_detail(
    path: &str,
    id: &crate::os::process::FileIdentity,
    sha256: &str,
    was: Option<&Enrolment>,
) -> String {
    let one = |path: &str, id: &crate::os::process::FileIdentity, sha256: &str| {
        serde_json::json!({
            "path": path,
            "dev": id.dev,
            "ino": id.ino,
            "size": id.size,
            "mtime_ns": id.mtime_ns,
            "ctime_ns": id.ctime_ns,
            "sha256": sha256,
        })
    };
    let mut v = one(path, id, sha256);
    if let (Some(w), Some(obj)) = (was, v.as_object_mut()) {
        obj.insert("replaced".into(), one(&w.path, &w.identity, &w.sha256));
    }
    v.to_string()
}

async fn change_agent(state: &State, change: AgentChange, fields: Fields) -> Result<i64, String> {
    match state
        .writer
        .ask(|reply| Op::ChangeAgent {
            change,
            fields,
            reply,
        })
        .await
    {
        Ok(Ok((entry, enrolled, generation))) => {
            if let Ok(mut a) = state.agents.write() {
                *a = Arc::new(enrolled);
            }
            state.generation.store(generation, Ordering::Release);
            Ok(entry.chain_seq)
        }
        Ok(Err(e)) => Err(e),
        Err(e) => Err(e.to_string()),
    }
}

async fn agent_add(state: &State, name: String, path: String) -> Next {
    if let Err(e) = policy::validate_scope_name("agent", &name) {
        return error(e.to_string());
    }
    let file = path.clone();
    // Reading and hashing a large executable takes a while: off the async threads.
    let read = match tokio::task::spawn_blocking(move || agents::enrol_file(&file)).await {
        Ok(r) => r,
        Err(e) => return error(format!("reading {path} failed: {e}")),
    };
    let (identity, sha256) = match read {
        Ok(x) => x,
        Err(e) => return error(with_help(&e)),
    };
    let _rows = state.rows.lock().await;
    let enrolled = current_agents(state);
    if let Some(holder) = enrolled.iter().find(|e| {
        e.name != name && (e.identity.dev, e.identity.ino) == (identity.dev, identity.ino)
    }) {
        return error(format!(
            "{path} is already enrolled as agent {}; one executable has one name (`holdcall agent remove {}` first); nothing was changed",
            holder.name, holder.name
        ));
    }
    let was = enrolled.iter().find(|e| e.name == name);
    if was.is_none() && enrolled.len() >= limits::AGENTS_MAX {
        return error(format!(
            "{} agents are enrolled, the most Holdcall keeps; remove one first",
            limits::AGENTS_MAX
        ));
    }
    let reason = match was {
        Some(w) => format!(
            "replaced the enrolment of agent {name}: {path} (was {})",
            w.path
        ),
        None => format!("enrolled agent {name}: {path}"),
    };
    let fields = Fields {
        agent: Some(name.clone()),
        reason: Some(reason.clone()),
        detail: Some(agent_detail(&path, &identity, &sha256, was)),
        ..Fields::default()
    };
    let change = AgentChange::Put {
        name,
        path,
        identity,
        sha256,
    };
    match change_agent(state, change, fields).await {
        Ok(seq) => Next::Reply(Response::AgentChanged {
            message: format!("{reason} (recorded in the journal as entry {seq})"),
            chain_seq: seq,
        }),
        Err(e) => error(format!("the enrolment was not made: {e}")),
    }
}

fn agent_list(state: &State) -> Next {
    let listed = current_agents(state)
        .iter()
        .map(|e| {
            let stale = agents::staleness(e).err();
            ipc::ListedAgent {
                name: e.name.clone(),
                path: e.path.clone(),
                state: if stale.is_some() { "stale" } else { "current" }.into(),
                stale_because: stale,
                dev: e.identity.dev,
                ino: e.identity.ino,
                size: e.identity.size,
                mtime_ns: e.identity.mtime_ns,
                ctime_ns: e.identity.ctime_ns,
                sha256: e.sha256.clone(),
                enrolled_at: e.enrolled_at.clone(),
            }
        })
        .collect();
    Next::Reply(Response::AgentList { agents: listed })
}

async fn agent_remove(state: &State, name: String) -> Next {
    if let Err(e) = policy::validate_scope_name("agent", &name) {
        return error(e.to_string());
    }
    let rows = state.rows.lock().await;
    let enrolled = current_agents(state);
    let Some(e) = enrolled.iter().find(|e| e.name == name) else {
        return error(format!(
            "there is no agent named {name}; `holdcall agent list` shows the enrolled agents"
        ));
    };
    let naming: Vec<String> = rows
        .iter()
        .filter(|r| {
            r.agent.as_deref() == Some(name.as_str())
                || policy::agents_named_in_text(&r.text).contains(&name)
        })
        .map(|r| r.id.clone())
        .chain(
            current_budgets(state)
                .iter()
                .filter(|b| b.budget.agent.as_deref() == Some(name.as_str()))
                .map(|b| b.budget.id.clone()),
        )
        .collect();
    if !naming.is_empty() {
        return error(format!(
            "agent {name} is named by {}; remove them first (`holdcall policy remove … --agent {name}`, or edit the policy file and import it again)",
            naming.join(", ")
        ));
    }
    let reason = format!("removed agent {name}: {}", e.path);
    let fields = Fields {
        agent: Some(name.clone()),
        reason: Some(reason.clone()),
        detail: Some(agent_detail(&e.path, &e.identity, &e.sha256, None)),
        ..Fields::default()
    };
    match change_agent(state, AgentChange::Remove { name }, fields).await {
        Ok(seq) => Next::Reply(Response::AgentChanged {
            message: format!("{reason} (recorded in the journal as entry {seq})"),
            chain_seq: seq,
        }),
        Err(e) => error(format!("the agent was not removed: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo_budget(calls: i64) -> Vec<Budget> {
        vec![Budget {
            id: "budget-1".into(),
            seq: 1,
            calls,
            tool: Some("echo".into()),
            agent: None,
            connector: None,
        }]
    }

    fn allow(s: &mut Session, budgets: &[Budget], seq: i64, retry_of: Option<i64>) -> Verdicts {
        budget_verdict(
            s,
            budgets,
            seq,
            "echo",
            retry_of,
            Effect::Allow,
            None,
            "r".into(),
        )
    }

    #[test]
    fn a_retry_of_a_charged_call_is_allowed_without_a_second_charge() {
        let mut s = Session::new("c".into(), None);
        let b = echo_budget(1);
        assert!(allow(&mut s, &b, 1, None).charged);
        let v = allow(&mut s, &b, 2, Some(1));
        assert_eq!((v.verdict, v.charged), (Verdict::Allow, false));
        assert_eq!(v.reason, "r; retry of call 1, not charged again");
        assert_eq!(s.counters.snapshot("echo").tool_calls, 1);
        assert_eq!(s.counters.snapshot("echo").calls, 2);
    }

    #[test]
    fn a_retry_naming_a_call_that_was_never_charged_is_charged_as_a_new_call() {
        let mut s = Session::new("c".into(), None);
        let b = echo_budget(1);
        // Refused by a rule: never charged, so it cannot be retried for free.
        let v = budget_verdict(&mut s, &b, 1, "echo", None, Effect::Deny, None, "r".into());
        assert_eq!((v.verdict, v.word.as_str()), (Verdict::Deny, "deny"));
        assert!(allow(&mut s, &b, 2, Some(1)).charged);
        let v = allow(&mut s, &b, 3, Some(7));
        assert_eq!(
            (v.verdict, v.word.as_str()),
            (Verdict::OverBudget, OVER_BUDGET)
        );
        assert_eq!(v.policy_id.as_deref(), Some("budget-1"));
        let c = s.counters.snapshot("echo");
        assert_eq!((c.calls, c.allowed, c.refused), (3, 1, 2));
    }

    #[test]
    fn a_retry_of_a_call_to_another_tool_is_not_a_retry() {
        let mut s = Session::new("c".into(), None);
        let b = echo_budget(1);
        let v = budget_verdict(&mut s, &b, 1, "add", None, Effect::Allow, None, "r".into());
        assert!(v.charged);
        assert!(allow(&mut s, &b, 2, Some(1)).charged);
        assert_eq!(allow(&mut s, &b, 3, Some(1)).verdict, Verdict::OverBudget);
    }

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
