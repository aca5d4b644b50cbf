//! The journal writer thread: the one owner of the database connection after start. It
//! folds queued appends into one commit, records a decision only under the generation of the
//! set it was made with (and only while no other connection changed the database), survives
//! every write error, and takes the process down if the thread itself dies.
//!
//! Must never: record a decision made with a set no longer in force, or stop on an I/O error.

use super::*;
use crate::ipc::SessionResponse;

/// Where a change's answer goes: its entry, the rows now stored, and the generation its commit
/// started.
pub(super) type Changed<T> = oneshot::Sender<Result<(Entry, Vec<T>, u64), String>>;

/// Where `Op::AcceptPins` answers: the pins accepted and the connector's pins now.
pub(super) type AcceptReply =
    oneshot::Sender<Result<(Vec<journal::Accepted>, Vec<journal::PinRow>), String>>;

/// One append as the writer queues it.
pub(super) struct Append {
    kind: Kind,
    fields: Fields,
    /// `Some(gen)`: a decision made with the set in force at generation `gen`, recorded only if
    /// that set is still the one in force (see `WriterCore`).
    generation: Option<u64>,
    reply: oneshot::Sender<Result<Entry, AppendError>>,
    then: Option<Then>,
}

/// What the writer sends the peer itself right after the commit, before anyone else hears of
/// it: the answer crosses no other thread (issue 18).
pub(super) enum Then {
    /// A decision's answer, sent once its entry is committed; nothing is sent when it was not
    /// recorded (the asking task answers then, after putting its counts right).
    Answer(ipc::Outgoing, Vec<u8>),
    /// A report, which is not answered: once it is committed nothing is sent; if it cannot be
    /// recorded, its relay is told (`report.unrecorded`, pushed). Counted in flight on its
    /// connection until then (`Outgoing::report_queued`).
    Report(ipc::Outgoing),
}

impl Then {
    /// Sends what the outcome of the append calls for.
    fn send(self, recorded: Result<&Entry, &AppendError>) {
        match self {
            Then::Answer(out, line) => {
                if recorded.is_ok() {
                    let _ = out.send(line);
                }
            }
            Then::Report(out) => {
                if let Err(e) = recorded {
                    let word = SessionResponse::ReportUnrecorded {
                        message: format!("not recorded: {e}"),
                    };
                    if let Some(line) = ipc::answer_line(&word) {
                        let _ = out.send(line);
                    }
                }
                out.report_done();
            }
        }
    }
}

impl Append {
    /// Its peer's answer first (if the writer sends it), then the asking task's.
    fn answer(self, recorded: Result<Entry, AppendError>) {
        if let Some(then) = self.then {
            then.send(recorded.as_ref());
        }
        let _ = self.reply.send(recorded);
    }
}

/// One operation for the journal writer thread, with where to send its result.
pub(super) enum Op {
    /// One entry (see `Append`).
    Append(Append),
    /// Each change below answers with the generation its commit started.
    ChangePolicies {
        add: Vec<NewPolicy>,
        remove: Vec<String>,
        fields: Fields,
        /// The validation key of the set the change makes, strictly validated by its compile.
        validated: String,
        reply: Changed<PolicyRow>,
    },
    ChangeAgent {
        change: AgentChange,
        fields: Fields,
        reply: Changed<Enrolment>,
    },
    NextPolicySeq(oneshot::Sender<Result<i64, String>>),
    /// Set or remove a budget and journal it, in one transaction.
    ChangeBudget(BudgetChange, Changed<BudgetRow>),
    /// Reads what is in force from the tables, checked against the journal, and starts a new
    /// generation with it.
    Reload(oneshot::Sender<Result<(u64, journal::InForce), String>>),
    SessionStarted(String, oneshot::Sender<Result<bool, String>>),
    Head(oneshot::Sender<Option<(i64, String)>>),
    /// A connector's row and its `connector.change` entry, in one transaction.
    ChangeConnector {
        change: journal::ConnectorChange,
        fields: Fields,
        reply: oneshot::Sender<Result<Entry, String>>,
    },
    Connectors(oneshot::Sender<Result<Vec<journal::ConnectorRow>, String>>),
    /// One listing's tools, pinned or compared with their pins, in one transaction.
    RecordListing {
        connector: String,
        session_id: String,
        tools: Vec<crate::mcp::tools::ToolDefinition>,
        complete: bool,
        reply: oneshot::Sender<Result<journal::ListingRecorded, String>>,
    },
    /// Re-pins a connector's changed tools (or one) after a person looked.
    AcceptPins {
        connector: String,
        tool: Option<String>,
        reply: AcceptReply,
    },
    /// Sets a setting with its `setting.change` entry; a new generation, as for a rule.
    ChangeSetting {
        key: String,
        value: String,
        reason: String,
        reply: Changed<(String, String)>,
    },
    Connector(
        String,
        oneshot::Sender<Result<Option<journal::ConnectorRow>, String>>,
    ),
}

/// Most appends the writer folds into one transaction (one commit, one fsync).
pub(super) const GROUP_COMMIT_MAX: usize = 256;

/// Why an entry was not appended.
#[derive(Debug, Clone)]
pub(super) enum AppendError {
    /// The write failed and was rolled back (a full disk, an I/O error…); the next one tries
    /// again.
    Failed(String),
    /// A decision made with a set that is no longer the one in force (a change committed since,
    /// or another connection changed the database), so it is not recorded and must be made
    /// again once the daemon has the set in force.
    Stale,
}

impl std::fmt::Display for AppendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AppendError::Failed(e) => f.write_str(e),
            AppendError::Stale => f.write_str(
                "the policy in force changed while the call was decided, so it was not recorded",
            ),
        }
    }
}

/// The writer's own state. `gen` names the policy set, budgets and enrolments in force: it
/// moves on with every change the writer commits and every reload, and a decision is recorded
/// only under the generation it was made with. `seen` is the `PRAGMA data_version` at the last
/// reload: a different one inside an append's transaction means someone else changed the
/// database, and no decision is recorded until the daemon has reloaded.
pub(super) struct WriterCore {
    pub(super) j: Journal,
    pub(super) generation: u64,
    pub(super) seen: i64,
    /// Why the last write failed, until one succeeds (`daemon status` shows it).
    pub(super) fault: Arc<Mutex<Option<String>>>,
}

impl WriterCore {
    pub(super) fn note(&self, fault: Option<String>) {
        if let Ok(mut f) = self.fault.lock() {
            *f = fault;
        }
    }

    /// One append and those queued right behind it (up to `GROUP_COMMIT_MAX`), in one commit;
    /// a decision made under an older generation is answered `Stale` and not recorded. Returns
    /// an op of another kind it read past the batch.
    fn append_batch(&mut self, first: Append, rx: &std_mpsc::Receiver<Op>) -> Option<Op> {
        let mut next = None;
        let mut batch = vec![first];
        while batch.len() < GROUP_COMMIT_MAX {
            match rx.try_recv() {
                Ok(Op::Append(a)) => batch.push(a),
                Ok(other) => {
                    next = Some(other);
                    break;
                }
                Err(_) => break,
            }
        }
        let generation = self.generation;
        let (stale, batch): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .partition(|a| a.generation.is_some_and(|g| g != generation));
        for a in stale {
            a.answer(Err(AppendError::Stale));
        }
        if batch.is_empty() {
            return next;
        }
        let items: Vec<(Kind, Fields, bool)> = batch
            .iter()
            .map(|a| (a.kind, a.fields.clone(), a.generation.is_some()))
            .collect();
        match self.j.append_fresh(items, self.seen) {
            Ok((version, entries)) => {
                if version != self.seen {
                    tracing::warn!(
                        "the database was changed by another connection; decisions wait \
                         for the daemon to reload what is in force"
                    );
                }
                for (a, e) in batch.into_iter().zip(entries) {
                    a.answer(e.ok_or(AppendError::Stale));
                }
                self.note(None);
            }
            Err(e) => {
                tracing::error!("journal append failed: {e}");
                let msg = e.to_string();
                self.note(Some(msg.clone()));
                for a in batch {
                    a.answer(Err(AppendError::Failed(msg.clone())));
                }
            }
        }
        next
    }

    /// Handles one op (and the appends queued behind it); returns an op it read past the batch.
    pub(super) fn handle(&mut self, op: Op, rx: &std_mpsc::Receiver<Op>) -> Option<Op> {
        let j = &mut self.j;
        match op {
            Op::Append(a) => return self.append_batch(a, rx),
            Op::ChangePolicies {
                add,
                remove,
                fields,
                validated,
                reply,
            } => {
                let r = j
                    .change_policies(add, remove, fields)
                    .and_then(|e| j.policies().map(|rows| (e, rows)));
                // After the change's own commit: losing the key to a crash costs a validation.
                if r.is_ok()
                    && let Err(e) = j.set_validated_policies(&validated)
                {
                    tracing::warn!("the validated policy set could not be noted: {e}");
                }
                let r = r.map(|(e, rows)| {
                    self.generation += 1;
                    self.note(None);
                    (e, rows, self.generation)
                });
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
            Op::ChangeBudget(change, reply) => {
                let r = j.change_budget(change).map(|(e, rows)| {
                    self.generation += 1;
                    self.note(None);
                    (e, rows, self.generation)
                });
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
            Op::ChangeAgent {
                change,
                fields,
                reply,
            } => {
                let r = j
                    .change_agent(change, fields)
                    .and_then(|e| j.agents().map(|rows| (e, rows)));
                let r = r.map(|(e, rows)| {
                    self.generation += 1;
                    self.note(None);
                    (e, rows, self.generation)
                });
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
            Op::Reload(reply) => {
                let r = j.load_in_force().map(|loaded| {
                    self.seen = loaded.data_version;
                    self.generation += 1;
                    (self.generation, loaded)
                });
                let _ = reply.send(r.map_err(|e| e.to_string()));
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
            Op::RecordListing {
                connector,
                session_id,
                tools,
                complete,
                reply,
            } => {
                let r = j.record_listing(&connector, &session_id, &tools, complete);
                if r.is_ok() {
                    self.note(None);
                }
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
            Op::AcceptPins {
                connector,
                tool,
                reply,
            } => {
                let _ = reply.send(
                    j.accept_pins(&connector, tool.as_deref())
                        .map_err(|e| e.to_string()),
                );
            }
            Op::ChangeSetting {
                key,
                value,
                reason,
                reply,
            } => {
                let r = j.change_setting(&key, &value, reason).map(|(e, all)| {
                    self.generation += 1;
                    self.note(None);
                    (e, all.into_iter().collect(), self.generation)
                });
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
        }
        None
    }
}

/// Ends the process if the writer thread unwinds past its own guard: a daemon that can record
/// nothing must not linger as "running"; the next relay starts a fresh one.
pub(super) struct ExitIfUnwound;

impl Drop for ExitIfUnwound {
    fn drop(&mut self) {
        if std::thread::panicking() {
            tracing::error!("the journal writer thread died; the daemon exits");
            std::process::exit(70);
        }
    }
}

/// Runs the single writer: it owns the database connection; everything else sends it `Op`s.
/// Appends that queue up while a commit is in flight share the next commit. No error ends it:
/// a failed write is rolled back and answered, and the next op tries again; even a panic while
/// handling one op only drops that op's answers (its callers refuse) and rolls back.
pub(super) fn writer_thread(core: WriterCore, rx: std_mpsc::Receiver<Op>) {
    let _exit = ExitIfUnwound;
    let mut core = core;
    let mut next: Option<Op> = None;
    loop {
        let op = match next.take() {
            Some(op) => op,
            None => match rx.recv() {
                Ok(op) => op,
                Err(_) => return,
            },
        };
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| core.handle(op, &rx))) {
            Ok(n) => next = n,
            Err(_) => {
                core.j.recover();
                tracing::error!("the journal writer survived a panic; the op was not recorded");
                core.note(Some("the journal writer hit an internal error".into()));
            }
        }
    }
}

/// The handle the async side uses to reach the writer.
#[derive(Clone)]
pub(super) struct Writer(pub(super) std_mpsc::Sender<Op>);

impl Writer {
    pub(super) async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Op,
    ) -> Result<T, DaemonError> {
        let (tx, rx) = oneshot::channel();
        self.0.send(make(tx)).map_err(|_| DaemonError::WriterGone)?;
        rx.await.map_err(|_| DaemonError::WriterGone)
    }

    fn queue(
        &self,
        kind: Kind,
        fields: Fields,
        generation: Option<u64>,
        then: Option<Then>,
    ) -> Result<oneshot::Receiver<Result<Entry, AppendError>>, DaemonError> {
        let (reply, rx) = oneshot::channel();
        let a = Append {
            kind,
            fields,
            generation,
            reply,
            then,
        };
        self.0
            .send(Op::Append(a))
            .map_err(|_| DaemonError::WriterGone)?;
        Ok(rx)
    }

    /// Queues one append and waits for its commit.
    async fn appended(
        &self,
        kind: Kind,
        fields: Fields,
        generation: Option<u64>,
        then: Option<Then>,
    ) -> Result<Entry, AppendError> {
        let gone = || AppendError::Failed(DaemonError::WriterGone.to_string());
        match self.queue(kind, fields, generation, then) {
            Ok(rx) => rx.await.unwrap_or_else(|_| Err(gone())),
            Err(_) => Err(gone()),
        }
    }

    /// Appends an entry that depends on no policy (a session's end, an outcome…).
    pub(super) async fn append(&self, kind: Kind, fields: Fields) -> Result<Entry, String> {
        self.appended(kind, fields, None, None)
            .await
            .map_err(|e| e.to_string())
    }

    /// Queues a report, in flight on `out` until it is committed (or its relay told it was
    /// not); the caller does not wait. With `wait`, the caller waits for the commit first.
    /// False when the writer is gone.
    pub(super) async fn report(
        &self,
        kind: Kind,
        fields: Fields,
        out: &ipc::Outgoing,
        wait: bool,
    ) -> bool {
        out.report_queued();
        match self.queue(kind, fields, None, Some(Then::Report(out.clone()))) {
            Ok(rx) if wait => {
                let _ = rx.await;
                true
            }
            Ok(_) => true,
            Err(_) => {
                out.report_done();
                false
            }
        }
    }

    /// Appends a decision made with the set in force at generation `gen`: refused as stale if
    /// that is no longer the set in force, or if someone else changed the database since. With
    /// `answer`, the writer sends that line to the peer itself once the entry is committed.
    pub(super) async fn append_decided(
        &self,
        kind: Kind,
        fields: Fields,
        generation: u64,
        answer: Option<(ipc::Outgoing, Vec<u8>)>,
    ) -> Result<Entry, AppendError> {
        let then = answer.map(|(out, line)| Then::Answer(out, line));
        self.appended(kind, fields, Some(generation), then).await
    }
}
