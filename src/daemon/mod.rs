//! The per-user daemon: verified connections, sessions, the decision service and the single
//! writer of the database.
//!
//! One file per job: `run` and the state every connection shares (`Shared`, with each
//! session's counts, `Session`) here; `accept` (listening, the lock and socket watch, judging
//! a peer, a connection's line loop), `dispatch` (one function per request of either protocol),
//! `session` (a session's start and its connector's launch), `decide` (the ruling on one call,
//! its budgets), `hold` (calls held for a person), `in_force` (the policy set, budgets and
//! refusal in force, and reloading them), `manage/` (policy, budget, agent and connector
//! changes), `writer` (the journal writer thread), `supervise` (`daemon start`'s supervisor).
//!
//! Owns: accepting connections (only this Holdcall build, running as this user), which sessions
//! each connection may speak for, the compiled policy in force, and the journal writer thread.
//! Must never: answer a decision before its journal entry is committed, read a byte from an
//! unverified peer, or block the accept loop on one slow client.

#![deny(clippy::print_stdout)]

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::{Notify, oneshot};

use crate::agents::Enrolment;
use crate::approval::{self, Cause};
use crate::config::Durability;
use crate::config::{Config, Home};
use crate::ipc::{self, Release};
use crate::journal::{
    self, AgentChange, BudgetChange, Entry, Fields, Journal, Kind, NewPolicy, PolicyRow,
};
use crate::limits;
use crate::os::peer;
use crate::policy::budget::BudgetRow;
use crate::policy::budget::{self, Budget, CallScope, Counters};
use crate::policy::context::Clock;
use crate::policy::{self, PolicySet, StoredPolicy};
use crate::vault::{Keyring, SecretStore};

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

mod accept;
mod decide;
mod dispatch;
mod hold;
mod in_force;
mod leak;
mod manage;
mod pins;
mod session;
pub(crate) use pins::{DRIFT_KEY, HIDE_PREFIX};
pub(crate) mod supervise;
#[cfg(test)]
mod tests;
mod writer;

use crate::daemon::{
    accept::{accept_until_stopped, listen},
    hold::settle,
    in_force::mismatch_refusal,
};
use writer::{Writer, WriterCore, writer_thread};

/// What the daemon keeps of one open session: its connector and agent, its last call number,
/// and its counts.
struct Session {
    connector: String,
    agent: Option<String>,
    last_seq: i64,
    /// What budgets are checked against, and what policies read as `context.session`.
    counters: Counters,
    /// Recently charged calls (seq → tool), so a retry the relay names is checked to be one;
    /// at most `limits::RETRY_STATES_MAX`, oldest forgotten first (its retry is then charged).
    charged: std::collections::BTreeMap<i64, String>,
    /// What this session's listings showed (`daemon::pins`).
    listed: pins::Listed,
}

impl Session {
    fn new(connector: String, agent: Option<String>) -> Session {
        Session {
            connector,
            agent,
            last_seq: 0,
            counters: Counters::default(),
            charged: std::collections::BTreeMap::new(),
            listed: pins::Listed::default(),
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

/// The daemon's state, shared by every connection: the writer, what is in force, the open
/// sessions, the held calls, the vault. One per daemon, behind an `Arc`.
struct Shared {
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
    /// The scanner of each connector's secret read this run, by connector (`daemon::leak`): the
    /// arguments of every call to another connector are checked against it. Never a secret.
    leaks: Mutex<HashMap<String, Arc<crate::leak::Matcher>>>,
    /// The tool pins in force (a cache of `tool_pins`, replaced per connector after each write).
    pins: RwLock<pins::Pins>,
    /// The settings in force (the drift guard, hide-denied per connector).
    settings: RwLock<std::collections::BTreeMap<String, String>>,
    /// The home this daemon serves, as `daemon.hello` proves it: the database it opened and
    /// the machine id it read.
    serves: ipc::Serves,
}

impl Shared {
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

/// Debug builds only: holds the daemon between taking its lock and listening for the given
/// milliseconds, as a start compiling many rules on a loaded machine is, so the tests of
/// those who wait for a starting daemon (`ipc::connect_or_start`) need no such machine.
async fn slow_start_for_tests(var: Option<String>) {
    let Some(raw) = var else {
        return;
    };
    if !cfg!(debug_assertions) {
        tracing::warn!("HOLDCALL_TEST_START_DELAY_MS is set and ignored: this is a release build");
        return;
    }
    match raw.parse::<u64>() {
        Ok(ms) => {
            tracing::warn!("debug build: listening {ms} ms late (HOLDCALL_TEST_START_DELAY_MS)");
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
        Err(_) => tracing::warn!("HOLDCALL_TEST_START_DELAY_MS {raw:?} is not a number; ignored"),
    }
}

/// Runs the daemon for `home` until SIGTERM, SIGINT or `holdcall daemon stop`.
pub(crate) async fn run(home: Home, config: Config) -> Result<(), DaemonError> {
    home.prepare()?;
    let socket = home.socket_path();
    // Held for the daemon's whole life, taken before anything else: while we hold it no other
    // daemon serves this home's database, so any socket file at our path is stale (or an
    // impostor's) and ours to replace. A POSIX record lock: the kernel releases it when this
    // process closes ANY descriptor of daemon.lock, so nothing in the daemon opens that file
    // again (see `ipc::DaemonLock`).
    let lock = take_lock(&home)?;
    // A daemon of this home runs again: how the last one ended is history.
    crate::daemon::supervise::clear_exit(&home);
    // The locked file, to notice one removed or replaced behind our back (`rm daemon.*`): a
    // new daemon would lock the new file and serve this home beside us.
    let lock_identity = lock.identity();
    slow_start_for_tests(std::env::var("HOLDCALL_TEST_START_DELAY_MS").ok()).await;

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
    // A set this daemon's build validated before (the key it kept) is not validated again;
    // with tables that do not match the journal, nothing kept is trusted.
    let kept = loaded
        .validated
        .as_deref()
        .filter(|_| loaded.mismatches.is_empty());
    let set = PolicySet::compile_validated(&stored(&loaded.policies), kept)
        .map_err(DaemonError::Policy)?;
    if kept == Some(set.validation_key()) {
        tracing::info!(
            "{} policies, validated before as this very set: not validated again",
            set.info().len()
        );
    } else {
        tracing::info!("{} policies, validated", set.info().len());
        if let Err(e) = j.set_validated_policies(set.validation_key()) {
            tracing::warn!("the validated policy set could not be noted: {e}");
        }
    }
    let seen = loaded.data_version;
    let journal::InForce {
        policies: rows,
        budgets: budget_rows,
        agents: enrolled,
        pins: pin_rows,
        settings,
        ..
    } = loaded;
    let open_sessions = j.open_sessions()?;
    let pragmas = j.pragmas().to_detail();

    let writer_fault = Arc::new(Mutex::new(None));
    let writer = start_writer(j, seen, Arc::clone(&writer_fault), lock, &db)?;
    record_start(&writer, open_sessions, pragmas, &db).await?;

    let (listener, bound) = listen(&socket)?;
    tracing::info!(
        "holdcall daemon {} listening on {} (pid {})",
        crate::VERSION,
        socket.display(),
        std::process::id()
    );

    let state = Arc::new(Shared {
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
        leaks: Mutex::new(HashMap::new()),
        pins: RwLock::new(pins::pins_by_connector(pin_rows)),
        settings: RwLock::new(settings),
        serves,
    });

    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).map_err(
        |source| DaemonError::Listen {
            path: "SIGTERM".into(),
            source,
        },
    )?;
    let bound = accept_until_stopped(&state, &home, term, listener, bound, lock_identity).await;
    stop(&state, &socket, bound).await;
    Ok(())
}

/// Takes this home's daemon lock, or says who holds it.
fn take_lock(home: &Home) -> Result<ipc::DaemonLock, DaemonError> {
    let lock_path = home.lock_path();
    match ipc::take_daemon_lock(home) {
        Ok(Ok(lock)) => Ok(lock),
        Ok(Err(holder)) => Err(DaemonError::AlreadyRunning(format!(
            "{}: {} holds {}",
            home.dir().display(),
            holder
                .map(|p| format!("pid {p}"))
                .unwrap_or_else(|| "another process".into()),
            lock_path.display()
        ))),
        Err(source) => Err(DaemonError::Listen {
            path: lock_path.display().to_string(),
            source,
        }),
    }
}

/// Starts the journal writer thread on `j`; it holds `lock` until it has closed the journal.
fn start_writer(
    j: Journal,
    seen: i64,
    fault: Arc<Mutex<Option<String>>>,
    lock: ipc::DaemonLock,
    db: &std::path::Path,
) -> Result<Writer, DaemonError> {
    let (tx, rx) = std_mpsc::channel();
    std::thread::Builder::new()
        .name("journal-writer".into())
        .spawn(move || {
            writer_thread(
                WriterCore {
                    j,
                    generation: 1,
                    seen,
                    fault,
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
    Ok(Writer(tx))
}

/// Journals the end of the sessions the last daemon left open, then this daemon's start.
async fn record_start(
    writer: &Writer,
    open_sessions: Vec<String>,
    pragmas: String,
    db: &std::path::Path,
) -> Result<(), DaemonError> {
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
    Ok(())
}

/// Stops: removes our socket (only ours), rejects every call still held, and journals the end
/// of every session still open.
async fn stop(state: &Shared, socket: &std::path::Path, bound: peer::SocketFile) {
    tracing::info!("holdcall daemon stopping");
    // Only our own socket: a file put there since is not ours to remove.
    if peer::SocketFile::at(socket) == Some(bound) {
        let _ = std::fs::remove_file(socket);
    }
    // A stopping daemon ends every session, so every call still held ends with it.
    for hold in state.approvals.take_where(|_| true) {
        let _ = settle(state, hold, Release::Rejected, Cause::SessionEnded, None).await;
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
}
