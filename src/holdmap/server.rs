//! The stdio loop of `holdmap mcp`: read capped lines, answer each request through `wire` and
//! `methods`, run tools, and write each answer as one flushed line. Slow tool work
//! (`Reply::Later`) runs as its own task, so a 30 s `wait_for_port` never holds up a `ping`.
//!
//! Owns: the session (the negotiated revision and the confirmation handles) and the pending
//! tool work (its cap, its cancellation).
//!
//! Must never: write anything but protocol lines to its output (logs go to stderr through
//! `tracing`); read a line without a cap; keep the process alive for pending work once its
//! input has closed.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::task::{AbortHandle, JoinHandle, JoinSet};

use crate::holdmap::activity::{self, Recorder, Started, Status};
use crate::holdmap::confirm::Handles;
use crate::holdmap::tool::{Cx, Outcome, Pending, Reply, Tool, ToolDef};
use crate::holdmap::wire::{
    self, Answer, Frame, Id, NEWEST_HANDSHAKE, Request, RpcError, known_revision,
};
use crate::holdmap::world::{Live, World};
use crate::holdmap::{catalog, methods, schema};
use crate::limits::{HOLDMAP_BATCH_MAX, HOLDMAP_FRAME_BYTES_MAX, HOLDMAP_PENDING_MAX};
use crate::mcp::envelope::object_member;
use crate::mcp::line::{LineRead, read_line_capped};
use crate::mcp::version::request_protocol_version;
use crate::text::visible;

/// The most bytes one read may hold: the frame limit counts JSON only, so a maximal frame's
/// `\r\n` must still fit.
const LINE_BYTES_MAX: usize = HOLDMAP_FRAME_BYTES_MAX + 2;

/// Runs `holdmap mcp` on this process's stdin and stdout until stdin closes; the exit code.
pub(crate) fn run_stdio(record_activity: bool) -> i32 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!(error = %e, "could not start the async runtime");
            return 1;
        }
    };
    let code = runtime.block_on(async {
        // Only with the flag: without it no recorder exists and no socket is ever opened.
        let recorder = if record_activity {
            Recorder::from_env()
        } else {
            None
        };
        serve_recording(
            tokio::io::stdin(),
            tokio::io::stdout(),
            Arc::new(Live),
            catalog::catalog(),
            recorder,
        )
        .await
    });
    // A blocking read of stdin, or a tool's blocking work (a port poll), may still be running
    // on the blocking pool; the process exits now rather than waiting for them.
    runtime.shutdown_background();
    code
}

/// Serves one session on `input`/`output` with `tools` until `input` ends (0), or until
/// `output` is closed (0: there is nobody left to answer) or `input` fails (1). Without
/// recording: the tests' way in.
#[cfg(test)]
pub(crate) async fn serve<R, W>(
    input: R,
    output: W,
    world: Arc<dyn World>,
    tools: &'static [(ToolDef, Tool)],
) -> i32
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    serve_recording(input, output, world, tools, None).await
}

/// `serve`, noting each tool call's metadata to `recorder` (if any) once its answer is written.
pub(crate) async fn serve_recording<R, W>(
    input: R,
    mut output: W,
    world: Arc<dyn World>,
    tools: &'static [(ToolDef, Tool)],
    recorder: Option<Recorder>,
) -> i32
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut reader = BufReader::new(input);
    let mut session = Session {
        world,
        tools,
        negotiated: None,
        handles: Handles::new(),
        recorder,
        owed: Vec::new(),
    };
    let mut work = Work::default();
    let code = loop {
        let read = {
            let next = read_line_capped(&mut reader, LINE_BYTES_MAX);
            tokio::pin!(next);
            // Finished tool work is written while the next line is awaited; the read itself is
            // never dropped half-way (it is not cancellation-safe).
            loop {
                tokio::select! {
                    biased;
                    joined = work.done.join_next(), if !work.done.is_empty() => {
                        let (line, records) = work.finish(joined);
                        if let Some(out) = line
                            && write(&mut output, &out).await.is_err()
                        {
                            work.wind_down(None::<&mut W>, session.recorder.as_ref()).await;
                            session.close_recorder().await;
                            return 0;
                        }
                        session.note(records);
                    }
                    read = &mut next => break read,
                }
            }
        };
        let out = match read {
            Ok(LineRead::Eof) => break 0,
            Err(e) => {
                tracing::warn!(error = %e, "reading the client's input failed; stopping");
                break 1;
            }
            Ok(LineRead::TooLong(n)) => {
                tracing::debug!(bytes = n, "discarded an oversized frame");
                Some(wire::line(&Answer::error(
                    None,
                    RpcError::oversized(),
                    session.revision(),
                )))
            }
            Ok(LineRead::Line(bytes)) => session.handle_line(&bytes, &mut work),
        };
        if let Some(out) = out
            && write(&mut output, &out).await.is_err()
        {
            break 0;
        }
        // Only now, with the answer written, is its metadata handed to the recorder.
        let owed = std::mem::take(&mut session.owed);
        session.note(owed);
    };
    // Nobody will ask anything more: pending work is dropped, but a stop that has begun runs to
    // its end and its answer is still written (the client may be reading until we exit).
    work.wind_down(Some(&mut output), session.recorder.as_ref())
        .await;
    session.close_recorder().await;
    code
}

/// The `holdmap` fuzz target's way in (feature `fuzz` only): the answers one session gives to
/// `lines` (split at `\n`, as the capped reader splits them), through the same `handle_line`,
/// with no tools (a tool's work runs as a task on the machine, which a fuzz run must not touch)
/// and a machine that cannot be read.
#[cfg(feature = "fuzz")]
pub(crate) fn answers_for_fuzzing(lines: &[u8]) -> Vec<Vec<u8>> {
    struct NoMachine;
    impl World for NoMachine {
        fn observe(&self) -> Result<crate::holdmap::model::Snapshot, String> {
            Err("a fuzz run reads no machine".to_owned())
        }
        fn signal(
            &self,
            pid: i32,
            _start_ticks: u64,
            _sig: crate::os::signal::Sig,
        ) -> Result<(), crate::os::signal::SignalError> {
            Err(crate::os::signal::SignalError::Replaced { pid })
        }
        fn alive(&self, _pid: i32, _start_ticks: u64) -> bool {
            false
        }
    }
    let mut session = Session {
        world: Arc::new(NoMachine),
        tools: &[],
        negotiated: None,
        handles: Handles::new(),
        recorder: None,
        owed: Vec::new(),
    };
    let mut work = Work::default();
    lines
        .split_inclusive(|b| *b == b'\n')
        .filter_map(|line| session.handle_line(line, &mut work))
        .collect()
}

/// Writes one line and flushes it. An error means the client closed our output.
async fn write<W: AsyncWrite + Unpin>(output: &mut W, line: &[u8]) -> std::io::Result<()> {
    let written = async {
        output.write_all(line).await?;
        output.flush().await
    }
    .await;
    if let Err(e) = &written {
        tracing::debug!(error = %e, "the client closed the server's output; stopping");
    }
    written
}

/// One session: what `initialize` negotiated and the confirmation handles. There is no
/// lifecycle gating (as in the reference server): a request before `initialize` is served at
/// the newest handshake revision, and 2026-07-28 clients never call `initialize` at all.
struct Session {
    world: Arc<dyn World>,
    tools: &'static [(ToolDef, Tool)],
    negotiated: Option<&'static str>,
    handles: Handles,
    /// `--record-activity`'s recorder; `None` records nothing.
    recorder: Option<Recorder>,
    /// Records of the line being answered, noted once that line is written.
    owed: Vec<activity::Record>,
}

/// What one message came to.
enum Step {
    /// A notification: no answer.
    Silent,
    Answer(Answer),
    /// A tool still running: its answer comes when it finishes.
    Wait(Waiting),
}

/// A tool call running as its own task.
struct Waiting {
    id: Id,
    revision: &'static str,
    serial: u64,
    task: JoinHandle<Outcome>,
    /// Set when recording: the call's record is finished when its answer is.
    started: Option<Started>,
}

impl Session {
    /// The session's revision: the negotiated one, else the newest handshake revision.
    fn revision(&self) -> &'static str {
        self.negotiated.unwrap_or(NEWEST_HANDSHAKE)
    }

    /// Hands records of written answers to the recorder (which only queues them).
    fn note(&self, records: Vec<activity::Record>) {
        if let Some(recorder) = &self.recorder {
            for record in records {
                recorder.note(record);
            }
        }
    }

    /// Gives queued records a moment to be delivered as the session ends.
    async fn close_recorder(&mut self) {
        if let Some(recorder) = self.recorder.take() {
            recorder.close().await;
        }
    }

    /// The line to write for `bytes`, if any (tool work may answer later through `work`).
    fn handle_line(&mut self, bytes: &[u8], work: &mut Work) -> Option<Vec<u8>> {
        let frame = match wire::read_frame(bytes) {
            Ok(frame) => frame,
            Err(e) => {
                tracing::debug!(error = %e, "refused a line");
                return Some(wire::line(&Answer::error(None, e, self.revision())));
            }
        };
        match frame {
            Frame::Blank => None,
            Frame::One(raw, value) => match self.handle_message(raw, value, work) {
                Step::Silent => None,
                Step::Answer(answer) => Some(wire::line(&answer)),
                Step::Wait(waiting) => {
                    work.assemble(vec![Step::Wait(waiting)], false, Vec::new());
                    None
                }
            },
            Frame::Batch(items) => self.handle_batch(items, work),
        }
    }

    /// A legacy JSON-RPC batch: refused whole unless the session's revision has batches and it
    /// holds 1 to `HOLDMAP_BATCH_MAX` messages; then each runs in order and the answers form
    /// one array line (none when every message was a notification).
    fn handle_batch(&mut self, items: Vec<(&[u8], Value)>, work: &mut Work) -> Option<Vec<u8>> {
        let revision = self.revision();
        let refusal = if items.is_empty() {
            Some("Invalid JSON-RPC request: an empty batch holds no request".to_owned())
        } else if !wire::batches_allowed(revision) {
            Some(format!(
                "Invalid JSON-RPC request: batches are not part of protocol revision \
                 {revision}; send one request per line"
            ))
        } else if items.len() > HOLDMAP_BATCH_MAX {
            Some(format!(
                "Invalid JSON-RPC request: a batch of {} messages is more than the \
                 {HOLDMAP_BATCH_MAX} this server accepts; none of them were executed",
                items.len()
            ))
        } else {
            None
        };
        if let Some(message) = refusal {
            let error = RpcError::invalid_request(message);
            return Some(wire::line(&Answer::error(None, error, revision)));
        }
        let steps: Vec<Step> = items
            .into_iter()
            .map(|(raw, value)| self.handle_message(raw, value, work))
            .filter(|step| !matches!(step, Step::Silent))
            .collect();
        if steps.iter().any(|step| matches!(step, Step::Wait(_))) {
            // The batch's answers are written together, later: so are their records.
            work.assemble(steps, true, std::mem::take(&mut self.owed));
            return None;
        }
        let answers: Vec<Answer> = steps
            .into_iter()
            .filter_map(|step| match step {
                Step::Answer(answer) => Some(answer),
                Step::Silent | Step::Wait(_) => None,
            })
            .collect();
        (!answers.is_empty()).then(|| wire::batch_line(&answers))
    }

    /// One message (a whole line, or one element of a batch).
    fn handle_message(&mut self, raw: &[u8], value: Value, work: &mut Work) -> Step {
        let request = match wire::envelope(raw, value) {
            Ok(request) => request,
            Err(rejection) => {
                let answer = Answer::error(rejection.id.as_ref(), rejection.error, self.revision());
                return Step::Answer(answer);
            }
        };
        let Some(id) = request.id.as_ref() else {
            // A notification gets no answer and changes nothing, except a cancellation.
            if request.method == "notifications/cancelled"
                && let Some(target) = request.params.get("requestId")
            {
                work.cancel(&wire::key_of(target));
            }
            return Step::Silent;
        };
        // The revision this request is under: the one it names (2026-07-28 clients name it on
        // every request), else the session's.
        let revision = match object_member(raw, "params").and_then(request_protocol_version) {
            None => self.revision(),
            Some(named) => match known_revision(&named) {
                Some(revision) => revision,
                None => {
                    let error = RpcError::unsupported_revision(&named);
                    return Step::Answer(Answer::error(Some(id), error, self.revision()));
                }
            },
        };
        tracing::debug!(method = %request.method, revision, "request");
        self.dispatch(&request, raw.len(), id, revision, work)
    }

    fn dispatch(
        &mut self,
        request: &Request,
        request_bytes: usize,
        id: &Id,
        revision: &'static str,
        work: &mut Work,
    ) -> Step {
        let params = &request.params;
        let method = request.method.as_str();
        let result = match method {
            "initialize" => match methods::initialize(params) {
                Ok((negotiated, result)) => {
                    self.negotiated = Some(negotiated);
                    // Handles belong to one session; a new handshake starts another.
                    self.handles.clear();
                    return Step::Answer(Answer::result(id, result, negotiated, method));
                }
                Err(e) => Err(e),
            },
            "server/discover" => Ok(methods::discover()),
            "ping" => Ok(json!({})),
            "tools/list" => Ok(methods::tools_list(self.tools)),
            "tools/call" => return self.recorded_call(params, request_bytes, id, revision, work),
            "resources/list" => Ok(methods::resources_list()),
            "resources/templates/list" => Ok(methods::resource_templates_list()),
            "resources/read" => methods::resources_read(params),
            "prompts/list" => Ok(methods::prompts_list()),
            "prompts/get" => methods::prompts_get(params),
            other => Err(RpcError::new(
                wire::METHOD_NOT_FOUND,
                format!("method not found: {}", visible(other)),
            )),
        };
        Step::Answer(match result {
            Ok(result) => Answer::result(id, result, revision, method),
            Err(e) => Answer::error(Some(id), e, revision),
        })
    }

    /// `call`, and when recording, its record: owed until the answer is written, or carried
    /// by the waiting work. Only a tool of this server's catalog is recorded, under the
    /// catalog's own name, never the caller's string.
    fn recorded_call(
        &mut self,
        params: &serde_json::Map<String, Value>,
        request_bytes: usize,
        id: &Id,
        revision: &'static str,
        work: &mut Work,
    ) -> Step {
        let known = self.recorder.as_ref().and_then(|_| {
            let name = params.get("name").and_then(Value::as_str)?;
            self.tools
                .iter()
                .find(|(def, _)| def.name == name)
                .map(|(def, _)| def.name)
        });
        let started = known.map(|tool| Started::now(tool, request_bytes));
        let (mut step, status) = self.call(params, id, revision, work);
        match (&mut step, started) {
            (Step::Answer(answer), Some(started)) => {
                let bytes = wire::line(answer).len().saturating_sub(1);
                self.owed.push(started.finish(status, bytes));
            }
            (Step::Wait(waiting), started) => waiting.started = started,
            _ => {}
        }
        step
    }

    /// `tools/call`: malformed params are JSON-RPC errors; arguments that fail the tool's
    /// published schema, a full queue and the tool's own failures are tool errors. With the
    /// step, how the call ended (for a `Step::Wait`, decided when its work ends).
    fn call(
        &mut self,
        params: &serde_json::Map<String, Value>,
        id: &Id,
        revision: &'static str,
        work: &mut Work,
    ) -> (Step, Status) {
        let tool_error = |text: &str| {
            let answer = Answer::result(id, methods::tool_error(text), revision, "tools/call");
            (Step::Answer(answer), Status::ToolError)
        };
        let protocol_error = |error: RpcError| {
            let answer = Answer::error(Some(id), error, revision);
            (Step::Answer(answer), Status::ProtocolError)
        };
        let ((def, tool), arguments) = match methods::call_target(params, self.tools) {
            Ok(target) => target,
            Err(e) => return protocol_error(e),
        };
        let checked = Value::Object(arguments.clone());
        if let Err(text) = schema::validate(&def.input_schema, &checked, "arguments") {
            return tool_error(&text);
        }
        if work.is_running(id.key()) {
            let error = RpcError::invalid_request(format!(
                "Invalid JSON-RPC request: id {} is already used by a tools/call that is still \
                 running; give each request its own id",
                visible(id.key())
            ));
            return protocol_error(error);
        }
        // Checked before the tool runs, so a refused call has no effect at all (no handle
        // consumed by a stop that would then not run).
        if work.running.len() >= HOLDMAP_PENDING_MAX {
            return tool_error(&format!(
                "{HOLDMAP_PENDING_MAX} tool calls are still running, the most this server runs \
                 at once; wait for one to finish (or cancel one) and call again"
            ));
        }
        let mut cx = Cx {
            world: &self.world,
            handles: &mut self.handles,
        };
        match (tool.run)(&arguments, &mut cx) {
            Reply::Now(outcome) => {
                let status = status_of(&outcome);
                let result = methods::tool_result(outcome);
                let answer = Answer::result(id, result, revision, "tools/call");
                (Step::Answer(answer), status)
            }
            // The status of waiting work is decided when it ends (`Work::assemble`).
            Reply::Later(pending) => (
                Step::Wait(work.start(id.clone(), revision, pending, false)),
                Status::Ok,
            ),
            Reply::Committed(pending) => (
                Step::Wait(work.start(id.clone(), revision, pending, true)),
                Status::Ok,
            ),
        }
    }
}

/// The recorded status of a tool's outcome.
fn status_of(outcome: &Outcome) -> Status {
    match outcome {
        Outcome::Done { .. } => Status::Ok,
        Outcome::Failed(_) => Status::ToolError,
    }
}

/// A running tool call, found by its request id's key (for `notifications/cancelled`).
struct Running {
    serial: u64,
    abort: AbortHandle,
    /// `Reply::Committed` work: never aborted.
    committed: bool,
}

/// Tool work in flight: each `Reply::Later` runs as its own task (`running`, which the cap
/// counts and cancellation aborts); each line still owed an answer is a task in `done` that
/// awaits them and gives the line.
#[derive(Default)]
struct Work {
    running: HashMap<String, Running>,
    done: JoinSet<Finished>,
    next_serial: u64,
}

/// A line's tool work, finished: which calls ended, and the line to write (none when every
/// call in it was cancelled).
struct Finished {
    ended: Vec<(String, u64)>,
    line: Option<Vec<u8>>,
    /// When recording: the records of the line's calls, noted once the line is written.
    records: Vec<activity::Record>,
}

impl Work {
    fn is_running(&self, key: &str) -> bool {
        self.running.contains_key(key)
    }

    /// Spawns a tool's pending work.
    fn start(
        &mut self,
        id: Id,
        revision: &'static str,
        pending: Pending,
        committed: bool,
    ) -> Waiting {
        let task = tokio::spawn(pending);
        self.next_serial = self.next_serial.wrapping_add(1);
        let serial = self.next_serial;
        self.running.insert(
            id.key().to_owned(),
            Running {
                serial,
                abort: task.abort_handle(),
                committed,
            },
        );
        Waiting {
            id,
            revision,
            serial,
            task,
            started: None,
        }
    }

    /// Awaits the line's waiting calls in order (as its own task) and gives its line: one
    /// answer, or (for a batch) the array of every answer in order, with `records` (those of
    /// the line's immediate answers) and the waiting calls' own.
    fn assemble(&mut self, steps: Vec<Step>, batch: bool, mut records: Vec<activity::Record>) {
        self.done.spawn(async move {
            let mut answers = Vec::new();
            let mut ended = Vec::new();
            for step in steps {
                match step {
                    Step::Silent => {}
                    Step::Answer(answer) => answers.push(answer),
                    Step::Wait(waiting) => {
                        ended.push((waiting.id.key().to_owned(), waiting.serial));
                        let outcome = match waiting.task.await {
                            Ok(outcome) => outcome,
                            // Cancelled by the client: no answer at all.
                            Err(e) if e.is_cancelled() => {
                                if let Some(started) = waiting.started {
                                    records.push(started.finish(Status::Cancelled, 0));
                                }
                                continue;
                            }
                            Err(_) => Outcome::Failed(
                                "the tool stopped unexpectedly; nothing more is known about \
                                 its effect, so look again before retrying"
                                    .to_owned(),
                            ),
                        };
                        let status = status_of(&outcome);
                        let answer = Answer::result(
                            &waiting.id,
                            methods::tool_result(outcome),
                            waiting.revision,
                            "tools/call",
                        );
                        if let Some(started) = waiting.started {
                            let bytes = wire::line(&answer).len().saturating_sub(1);
                            records.push(started.finish(status, bytes));
                        }
                        answers.push(answer);
                    }
                }
            }
            let line = if batch {
                (!answers.is_empty()).then(|| wire::batch_line(&answers))
            } else {
                answers.first().map(wire::line)
            };
            Finished {
                ended,
                line,
                records,
            }
        });
    }

    /// Books a finished line's calls as ended; the line to write, and its calls' records (to
    /// note once it is written).
    fn finish(
        &mut self,
        joined: Option<Result<Finished, tokio::task::JoinError>>,
    ) -> (Option<Vec<u8>>, Vec<activity::Record>) {
        let finished = match joined {
            None => return (None, Vec::new()),
            Some(Ok(finished)) => finished,
            Some(Err(e)) => {
                tracing::error!(error = %e, "a tool's answer was lost");
                return (None, Vec::new());
            }
        };
        for (key, serial) in finished.ended {
            // A cancelled call's id may already name a newer call: only its own entry goes.
            if self.running.get(&key).is_some_and(|r| r.serial == serial) {
                self.running.remove(&key);
            }
        }
        (finished.line, finished.records)
    }

    /// Aborts the running call with this id key, if any; its answer is never sent. Committed
    /// work (a stop under way) cannot be cancelled: it runs on and is answered (a receiver may
    /// ignore a cancellation it cannot honour).
    fn cancel(&mut self, key: &str) {
        if self.running.get(key).is_some_and(|r| r.committed) {
            tracing::info!(id = %key, "a stop that has begun cannot be cancelled; it runs to its end");
            return;
        }
        if let Some(running) = self.running.remove(key) {
            tracing::debug!(id = %key, "cancelled a running tool call");
            running.abort.abort();
        }
    }

    /// At the end of the session: aborts every call that may be abandoned, then waits for the
    /// committed ones (stops under way) to end, writing their answers to `output` while it can.
    async fn wind_down<W: AsyncWrite + Unpin>(
        &mut self,
        mut output: Option<&mut W>,
        recorder: Option<&Recorder>,
    ) {
        self.running.retain(|_, running| {
            if !running.committed {
                running.abort.abort();
            }
            running.committed
        });
        while let Some(joined) = self.done.join_next().await {
            let (line, records) = self.finish(Some(joined));
            let mut written = line.is_none();
            if let (Some(line), Some(out)) = (line, output.as_mut()) {
                written = write(out, &line).await.is_ok();
                if !written {
                    output = None;
                }
            }
            // Records only of answers that were written (or of calls cancelled unanswered).
            if let Some(recorder) = recorder.filter(|_| written) {
                for record in records {
                    recorder.note(record);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
