//! Every bound on input, time and memory that Holdcall enforces, with its unit and the reason
//! for its size, so a reviewer can see them in one place. Internal queue sizes (group commit,
//! the relay's queues) are named constants beside the queue they size. It imports
//! nothing of the crate (it is the foundation every floor reads) and never holds a value that is
//! not a bound.

use std::time::Duration;

/// Largest single JSON-RPC line (bytes, newline included) the relay reads from the client or the
/// server. Large enough for any realistic tool payload (MCP servers return files and images
/// inline); a line over it is dropped whole, never partly forwarded.
pub const FRAME_BYTES_MAX: usize = 64 * 1024 * 1024;

/// How long the relay waits for the daemon's decision on one `tools/call`, queueing included.
/// Past it the call is refused: a decision that comes late is no decision.
pub const DECISION_TIMEOUT: Duration = Duration::from_secs(2);

/// How many times (attempts) the daemon decides one call when the policy in force keeps
/// changing under it (each change, or a reload after another process changed the database,
/// makes the decision stale before it is recorded). One change meanwhile is ordinary; three in a
/// row within one call means something keeps rewriting the database, and the call is refused
/// rather than decided against a moving target. Each attempt is a decision plus at most one
/// reload, well inside `DECISION_TIMEOUT`.
pub(crate) const STALE_DECISION_ATTEMPTS_MAX: u32 = 3;

/// Largest line either end accepts on the daemon socket (bytes). Bounds what an unverified or
/// misbehaving peer can make the daemon buffer.
pub(crate) const SOCKET_LINE_BYTES_MAX: usize = 2 * 1024 * 1024;

/// Largest `params.arguments` (raw bytes) the relay sends to the daemon with a call request.
/// Larger arguments are digested but not sent; the request says so.
pub(crate) const ARGUMENTS_BYTES_MAX: usize = 1024 * 1024;

/// Most bytes of canonical tool definitions one `tools/list` answer sends the daemon to pin.
/// A listing past it is forwarded without being pinned (anomaly `listing_too_large`): its
/// tools keep the pins they had, and a tool never pinned is `unknown` to the rules. Escaped
/// inside the socket line, the definitions at most double.
pub(crate) const TOOLS_LISTING_BYTES_MAX: usize = 768 * 1024;

/// Longest tool name a rule may name or a call may carry (bytes of UTF-8).
pub(crate) const TOOL_NAME_BYTES_MAX: usize = 256;

/// Longest agent or connector name (characters, ASCII only).
pub(crate) const SCOPE_NAME_CHARS_MAX: usize = 128;

/// Longest `--client` label (bytes). It is a label only, never identity.
pub(crate) const CLIENT_LABEL_BYTES_MAX: usize = 128;

/// Most characters of what a relay without `--connector` says it derived the name from
/// (`the npm package …`, `the script /…/index.js`), as journaled: enough for a long path, and
/// a bound on what a relay can make the journal hold.
pub(crate) const CONNECTOR_FROM_CHARS_MAX: usize = 512;

/// Deepest JSON nesting the strict reader follows before calling a line unreadable. serde_json
/// itself stops at 128; a deeper line is an attack, not a tool call.
pub(crate) const JSON_DEPTH_MAX: usize = 128;

/// How long a relay or CLI waits for a daemon to take this home's lock after none held it (a
/// daemon it started, or one starting beside it), and how long `daemon stop` waits for one to
/// let go of it.
pub const DAEMON_START_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a CLI command (and `tools/bench`) waits for a daemon that holds this home's lock to
/// listen: a daemon compiling 10,000 rules takes 1–2 s on 2 loaded cores, and a long journal
/// on a busy disk adds to it (the crash harness saw 5.7 s). The holder's death ends the wait at
/// once, with its log's last line.
pub const DAEMON_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The same bound for a relay, which waits before its server starts: the client times that
/// start (Codex gives an MCP server 10 s by default, `startup_timeout_sec`), so the relay must
/// start its server, refusing every call, before the client gives up on it.
pub const RELAY_DAEMON_READY_TIMEOUT: Duration = Duration::from_secs(8);

/// How often the daemon checks that its socket path still names the socket it bound (issue 12,
/// item 4: a removed or replaced socket left a daemon nobody could reach or stop). One `lstat`
/// a second costs nothing, and a relay started meanwhile waits up to `DAEMON_START_TIMEOUT`
/// for the socket to come back, so the check must come round well within that.
pub const SOCKET_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// How long a relay or CLI waits for a verified daemon to say which home it serves
/// (`daemon.hello`, answered from memory): past it the daemon is taken as not answering. No
/// longer than a decision may take: a relay facing a stopped daemon must still answer its
/// client within the decision timeout (issue 12, item 9).
pub(crate) const DAEMON_HELLO_TIMEOUT: Duration = DECISION_TIMEOUT;

/// How long a CLI command waits for the daemon's answer to one request.
pub(crate) const CLI_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Grace the relay gives the server after closing its stdin, then again after SIGTERM, before
/// SIGKILL.
pub(crate) const SERVER_STOP_GRACE: Duration = Duration::from_secs(2);

/// After SIGTERM, SIGHUP or SIGINT, how long the relay waits for the server to exit after
/// SIGTERM before SIGKILL, and for its last output. The client that sent the signal kills the
/// relay soon after (the MCP SDKs wait 2 s), and the session must be ended before that.
pub(crate) const SERVER_STOP_AFTER_SIGNAL: Duration = Duration::from_millis(500);

const _: () = assert!(SERVER_STOP_AFTER_SIGNAL.as_millis() < SERVER_STOP_GRACE.as_millis());

/// Longest socket path (bytes). `sun_path` holds 108 on Linux and 104 on macOS; leave room.
pub(crate) const SOCKET_PATH_BYTES_MAX: usize = 100;

/// Most entries `holdcall log` prints when no `--limit` is given.
pub const LOG_DEFAULT_LIMIT: usize = 50;

const _: () = assert!(ARGUMENTS_BYTES_MAX <= SOCKET_LINE_BYTES_MAX / 2);
const _: () = assert!(TOOLS_LISTING_BYTES_MAX * 2 + 64 * 1024 < SOCKET_LINE_BYTES_MAX);
const _: () = assert!(SOCKET_CHECK_INTERVAL.as_millis() * 3 <= DAEMON_START_TIMEOUT.as_millis());
const _: () = assert!(DAEMON_START_TIMEOUT.as_millis() <= RELAY_DAEMON_READY_TIMEOUT.as_millis());
const _: () = assert!(RELAY_DAEMON_READY_TIMEOUT.as_millis() <= DAEMON_READY_TIMEOUT.as_millis());
const _: () = assert!(ARGUMENTS_BYTES_MAX < FRAME_BYTES_MAX);
const _: () = assert!(TOOL_NAME_BYTES_MAX < ARGUMENTS_BYTES_MAX);

/// Deepest nesting of a call's arguments (objects and arrays, the arguments object itself is
/// depth 1) that the daemon turns into Cedar values. Real tool arguments nest a few levels; a
/// deeper call is not evaluated half-blind but refused or held when a rule reads its arguments.
pub(crate) const ARGUMENTS_DEPTH_MAX: usize = 32;

/// Most JSON values (every scalar, array and object counts one) in a call's arguments that the
/// daemon turns into Cedar values. Bounds the work and memory of one decision.
pub(crate) const ARGUMENTS_VALUES_MAX: usize = 10_000;

/// Largest policy file (bytes) `holdcall policy import|validate|diff` accepts. The CLI sends the
/// text to the daemon inside one socket line, where JSON escaping can double some bytes.
pub(crate) const POLICY_FILE_BYTES_MAX: usize = 512 * 1024;

/// Largest MCP client config file (bytes) `init`, `doctor` and `inventory` read. `~/.claude.json`
/// keeps per-project history and grows to megabytes; a file past this is refused, never read
/// in part.
pub(crate) const CLIENT_CONFIG_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Most names `init` tries for one backup file when earlier ones exist (the timestamp has
/// nanoseconds, so a second try is already rare); past it the write is refused, never an
/// existing backup overwritten.
pub(crate) const BACKUP_NAME_ATTEMPTS_MAX: u32 = 1000;

const _: () = assert!(ARGUMENTS_DEPTH_MAX < JSON_DEPTH_MAX);
const _: () = assert!(ARGUMENTS_VALUES_MAX < ARGUMENTS_BYTES_MAX);
// A policy file escaped into JSON is at most twice its size (plus room for the envelope).
const _: () = assert!(POLICY_FILE_BYTES_MAX * 2 < SOCKET_LINE_BYTES_MAX);

/// Largest cap a budget may set (calls per relay session). A budget is a brake on a runaway
/// agent, not a meter; a cap beyond a million is no brake, and the bound keeps every count and
/// its arithmetic far from overflow.
pub(crate) const BUDGET_CALLS_MAX: u32 = 1_000_000;

/// Most distinct tool names one session keeps an allowed-call count for (the daemon, per
/// session). Each allowed call of a new name adds one; a session past this is refused further
/// calls of new names rather than letting its counts grow without bound.
pub(crate) const SESSION_TOOL_COUNTS_MAX: usize = 4096;

/// Most `input_required` answers one relay remembers at once, each waiting for the client's
/// retry (`requestState` → the original call). Past it the oldest is forgotten, so its retry is
/// charged as a new call: forgetting can only over-count, never let a call through free.
pub(crate) const RETRY_STATES_MAX: usize = 1024;

/// Largest `requestState` (bytes, as written) the relay remembers; a larger one is not kept,
/// so its retry is charged as a new call.
pub(crate) const REQUEST_STATE_BYTES_MAX: usize = 64 * 1024;

const _: () = assert!(REQUEST_STATE_BYTES_MAX < FRAME_BYTES_MAX);
/// How long a held call waits for a person when `config.toml` does not say (`[approval]
/// timeout`). Long enough to read the arguments; short enough that a client does not give up
/// first (many clients time a tool call out after a few minutes).
pub(crate) const APPROVAL_TIMEOUT_DEFAULT: Duration = Duration::from_secs(120);

/// Shortest approval timeout `config.toml` may set. One second is too short for a person, but
/// lets the tests watch a timeout happen without waiting minutes.
pub(crate) const APPROVAL_TIMEOUT_MIN: Duration = Duration::from_secs(1);

/// Longest approval timeout `config.toml` may set: a held call keeps its arguments in the
/// daemon's memory and its client waiting, so neither may last without end.
pub(crate) const APPROVAL_TIMEOUT_MAX: Duration = Duration::from_secs(60 * 60);

/// How much longer than the approval timeout a relay waits for the daemon's word on a held
/// call before refusing it itself: the daemon's timer fires first, and its journal commit and
/// the pushed line need a moment.
pub(crate) const APPROVAL_RELAY_MARGIN: Duration = Duration::from_secs(10);

/// Most calls held for a person at once, over all sessions. Each keeps up to
/// `ARGUMENTS_BYTES_MAX` of arguments in memory; past it a call the rules hold is refused.
pub(crate) const HELD_CALLS_MAX: usize = 256;

/// Most reports (outcomes, anomalies, leaks) of one daemon connection in the journal writer's
/// queue at once: a report is not answered, so the relay does not wait on it and the daemon
/// reads on before its commit (issue 18). Past it the daemon reads the connection's next line
/// only after the report's commit, so a relay that reports without end cannot grow the queue.
pub(crate) const REPORTS_IN_FLIGHT_MAX: usize = 256;

/// Most calls one relay session may have held at once: a session (a model in a loop) cannot
/// fill the registry and starve every other session's `ask` rules. Past it the call is refused
/// (journaled with cause `capacity`).
pub const HELD_CALLS_PER_SESSION_MAX: usize = 32;

const _: () = assert!(HELD_CALLS_PER_SESSION_MAX < HELD_CALLS_MAX);

/// Longest `holdcall reject --reason` text (bytes). The reason is journaled and shown to the
/// client's model, so it is a sentence, not a document.
pub(crate) const APPROVAL_REASON_BYTES_MAX: usize = 500;

const _: () = assert!(APPROVAL_TIMEOUT_MIN.as_secs() <= APPROVAL_TIMEOUT_DEFAULT.as_secs());
const _: () = assert!(APPROVAL_TIMEOUT_DEFAULT.as_secs() <= APPROVAL_TIMEOUT_MAX.as_secs());
// The relay's own bound must outlast the daemon's decision round trip.
const _: () = assert!(APPROVAL_RELAY_MARGIN.as_secs() > DECISION_TIMEOUT.as_secs());
/// Longest the daemon spends judging a new connection's peer and finding its parent's image
/// (stats under `/proc`, off the async threads). They take microseconds; only a file system that
/// never answers reaches this, and such a peer is refused.
pub(crate) const PEER_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// Longest executable path `holdcall agent add` accepts (bytes): Linux's PATH_MAX.
pub(crate) const AGENT_PATH_BYTES_MAX: usize = 4096;

/// Largest executable `holdcall agent add` hashes (bytes). Client programs and their launchers
/// are well under it (an Electron app's binary is a few hundred MiB); it bounds the daemon's work.
pub(crate) const AGENT_FILE_BYTES_MAX: u64 = 2 * 1024 * 1024 * 1024;

/// Most enrolled agents. Each connection's parent is matched against all of them at accept.
pub(crate) const AGENTS_MAX: usize = 1024;

/// How long a policy change from the command line (`policy allow|ask|deny|remove|import`) waits
/// for the daemon: it compiles and strictly validates the whole proposed set and diffs its
/// text, which takes seconds with thousands of rules (2,000 imported into 8,000 took 12–13 s on
/// 2 loaded cores, and the CLI, giving up at `CLI_REQUEST_TIMEOUT`, said it failed although the
/// change was recorded).
pub(crate) const POLICY_CHANGE_TIMEOUT: Duration = Duration::from_secs(120);

/// How long `holdcall agent add` waits for the daemon: it reads and hashes the whole file, up to
/// `AGENT_FILE_BYTES_MAX`, which takes seconds, not milliseconds.
pub(crate) const AGENT_ADD_TIMEOUT: Duration = Duration::from_secs(120);

/// Most bytes of `/proc/<pid>/status` read when finding a relay's parent; the file is about
/// 1.5 KiB, and a process cannot make it grow without bound.
pub(crate) const PROC_STATUS_BYTES_MAX: u64 = 64 * 1024;

const _: () = assert!(CLI_REQUEST_TIMEOUT.as_secs() < AGENT_ADD_TIMEOUT.as_secs());
const _: () = assert!(CLI_REQUEST_TIMEOUT.as_secs() < POLICY_CHANGE_TIMEOUT.as_secs());
/// Longest one call to the OS credential store may take (a D-Bus round trip, or a keyring
/// waiting on an unlock prompt) before the daemon gives up and says the store did not answer.
pub(crate) const VAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a relay waits for the answer to `session.start`, and `connector set|remove` for
/// theirs: the daemon may read (or write, then delete again) a secret in the credential store
/// before it answers, so two store calls must fit.
pub(crate) const STORE_REQUEST_TIMEOUT: Duration = Duration::from_secs(25);

/// Largest connector secret (bytes of UTF-8). API tokens are well under 1 KiB; 32 KiB leaves
/// room for a certificate or a JSON credential on one line.
pub(crate) const SECRET_BYTES_MAX: usize = 32 * 1024;

/// Shortest connector secret (bytes) the secret-leak check looks for (`leak`). A shorter
/// secret is still injected, but its answers are not checked: a string this short turns up in
/// ordinary text by chance, so the check would withhold answers that never held it, and its
/// fingerprint is cheap to guess back from the relay's memory. `holdcall connector set` says so
/// when it stores one, and the relay says so on stderr at every session start.
pub const LEAK_SECRET_BYTES_MIN: usize = 12;

/// Bytes in the rolling window the leak scanner hashes at every position of a line: the first
/// this many bytes of each encoded form are its cheap first test. No form is shorter than the
/// secret itself, so the window fits every form.
pub(crate) const LEAK_WINDOW_BYTES: usize = 12;

/// How many times the scanner decodes JSON escapes inside escapes (a JSON text inside a JSON
/// string, inside another): each pass is scanned again. Past it, deeper nesting is not looked
/// into (docs/security.md says so).
pub(crate) const LEAK_UNESCAPE_PASSES_MAX: usize = 3;

const _: () = assert!(LEAK_WINDOW_BYTES <= LEAK_SECRET_BYTES_MIN);
const _: () = assert!(LEAK_WINDOW_BYTES > 0 && LEAK_WINDOW_BYTES < 64);
const _: () = assert!(LEAK_SECRET_BYTES_MIN <= SECRET_BYTES_MAX);

/// Longest environment variable name a connector may use for its secret or pass through (bytes).
pub(crate) const ENV_KEY_BYTES_MAX: usize = 128;

/// Most words (program and arguments) in a registered connector command.
pub(crate) const CONNECTOR_ARGS_MAX: usize = 64;

/// Longest word of a registered connector command (bytes).
pub(crate) const CONNECTOR_ARG_BYTES_MAX: usize = 4096;

/// Most `--pass-env` names one connector may list.
pub(crate) const CONNECTOR_PASS_ENV_MAX: usize = 64;

const _: () = assert!(STORE_REQUEST_TIMEOUT.as_secs() > 2 * VAULT_TIMEOUT.as_secs());
const _: () = assert!(STORE_REQUEST_TIMEOUT.as_secs() >= CLI_REQUEST_TIMEOUT.as_secs());
// A registration (the secret escaped into JSON, the command, the names) fits one socket line.
const _: () = assert!(
    SECRET_BYTES_MAX * 6
        + CONNECTOR_ARGS_MAX * CONNECTOR_ARG_BYTES_MAX * 6
        + CONNECTOR_PASS_ENV_MAX * ENV_KEY_BYTES_MAX * 2
        < SOCKET_LINE_BYTES_MAX
);

/// Longest query string (bytes, percent-encoded) the console reads; a longer one is answered
/// 400. The longest legitimate one is an explain form with `CONSOLE_EXPLAIN_ARGUMENTS_BYTES_MAX`
/// of arguments, each byte encoded as up to three.
pub(crate) const CONSOLE_QUERY_BYTES_MAX: usize = 32 * 1024;

/// Largest arguments text (bytes, decoded) the console's explain form sends to the daemon. The
/// form is for a person typing a call to try, not for replaying large payloads.
pub(crate) const CONSOLE_EXPLAIN_ARGUMENTS_BYTES_MAX: usize = 8 * 1024;

const _: () = assert!(CONSOLE_EXPLAIN_ARGUMENTS_BYTES_MAX * 3 < CONSOLE_QUERY_BYTES_MAX);
const _: () = assert!(CONSOLE_EXPLAIN_ARGUMENTS_BYTES_MAX < ARGUMENTS_BYTES_MAX);

/// Most entries one `/api/events` answer carries (the page asks again with the new cursor); also
/// the answer when the page names no limit.
pub(crate) const CONSOLE_EVENTS_MAX: usize = 1000;

/// Newest journal entries the console reads into its projection for the overview, sessions and
/// call states. Bounds the work of one snapshot; older calls are still in the journal view.
pub(crate) const CONSOLE_PROJECTION_ENTRIES_MAX: usize = 100_000;

/// Most sessions the overview lists (newest first).
pub(crate) const CONSOLE_SESSIONS_MAX: usize = 200;

/// How long the console waits for the daemon's answer to one read request (held calls,
/// explain, agents). The page asks again on its next poll.
pub(crate) const CONSOLE_DAEMON_TIMEOUT: Duration = Duration::from_secs(2);

/// Entries `holdcall verify` hands a hashing thread at once, and how many such batches may
/// wait: enough to keep the hashers busy while the walk reads, bounded so that a long journal is
/// never all in memory (about 4096 × 2 × 1 KiB per typical entry).
pub(crate) const VERIFY_BATCH: usize = 4096;
pub(crate) const VERIFY_BATCHES_IN_FLIGHT: usize = 2;

/// Longest the console reuses one check of the whole chain (`Reader::verify`, which reads every
/// entry) before running it again when the page asks. The page polls every 1.5 s; checking the
/// chain on each poll would compete with the daemon for the CPU. The page says when it checked.
pub(crate) const CONSOLE_VERIFY_INTERVAL: Duration = Duration::from_secs(30);

/// Most connections the console holds open at once. Every connection is accepted at once; when
/// this many are open, the one that has waited longest for a request head is closed to make room
/// (one still being answered only when none waits), so a flood of idle or dribbling connections
/// costs a real request nothing. A browser opens about six per origin; the rest is room for
/// `curl`, the tests, and an attacker's sockets to be shed. Each costs one file descriptor and a
/// few KiB of buffers; fewer are held when the open-files limit is too low for this many.
pub const CONSOLE_CONNECTIONS_MAX: usize = 256;

/// File descriptors the console keeps free for its own work beside its connections: the
/// journal's database files (opened per request), one daemon connection per request, the
/// listener, the runtime's own, stdio. The connection cap is lowered to leave these free.
pub(crate) const CONSOLE_FILES_RESERVED: usize = 64;

/// Longest a connection may take to send a whole request head (request line and headers), from
/// the moment it opens or from the end of its last answer. A fixed deadline: bytes arriving do
/// not extend it, so a client dribbling one header line at a time (slowloris) is closed when it
/// runs out, and an idle keep-alive connection too. A browser or `curl` sends its head in one
/// write, within milliseconds; the page polls every 1.5 s, so a kept-alive connection is reused.
pub const CONSOLE_HEAD_TIMEOUT: Duration = Duration::from_secs(2);

/// Largest request head (bytes) the console reads; a longer one is answered 431. The longest
/// legitimate head is a request line with `CONSOLE_QUERY_BYTES_MAX` of query plus a browser's
/// headers (a few KiB). hyper refuses a buffer under 8 KiB.
pub(crate) const CONSOLE_HEAD_BYTES_MAX: usize = 64 * 1024;

const _: () = assert!(CONSOLE_HEAD_BYTES_MAX >= 8 * 1024);
const _: () = assert!(CONSOLE_QUERY_BYTES_MAX + 16 * 1024 <= CONSOLE_HEAD_BYTES_MAX);

/// Connections the kernel completes and queues for the console before it accepts them. When
/// the queue is full the kernel drops a new connection's handshake and the client tries again
/// a second later, so a flood of connections opened faster than the console accepts them would
/// delay a real one by whole seconds; this holds a burst of them instead. Linux cuts it to
/// `net.core.somaxconn` (4096 by default since 5.4).
pub(crate) const CONSOLE_LISTEN_BACKLOG: u32 = 1024;

/// How long the console's accept loop pauses when the kernel refuses it a connection for want of
/// file descriptors (after closing the oldest waiting connection to free one), so a full table
/// never spins the loop.
pub(crate) const CONSOLE_ACCEPT_RETRY: Duration = Duration::from_millis(10);

/// Longest a console connection may go without the console writing to it: from the moment it
/// opens, or from the last bytes of an answer it wrote. A client that stops reading an answer is
/// closed after this. Longer than a head deadline and a request timeout together, so a slow
/// answer to a request that arrived late is still written.
pub const CONSOLE_IDLE_TIMEOUT: Duration = Duration::from_secs(12);

/// Longest one console request may take before it is answered 503. Shorter than the idle
/// timeout, so a slow answer is still written before its connection is closed.
pub(crate) const CONSOLE_REQUEST_TIMEOUT: Duration = Duration::from_secs(8);

const _: () = assert!(
    CONSOLE_HEAD_TIMEOUT.as_secs() + CONSOLE_REQUEST_TIMEOUT.as_secs()
        < CONSOLE_IDLE_TIMEOUT.as_secs()
);
const _: () = assert!(CONSOLE_DAEMON_TIMEOUT.as_secs() < CONSOLE_REQUEST_TIMEOUT.as_secs());

/// Most entries `/api/session` returns for one session (the newest); the answer says how many
/// more there are.
pub(crate) const CONSOLE_SESSION_EVENTS_MAX: usize = 1000;

/// Most policy changes the console's policy view lists (the newest); the answer says how many
/// more there are.
pub(crate) const CONSOLE_POLICY_HISTORY_MAX: usize = 100;

/// How long the journal's writer or a reader waits for another connection's lock before giving
/// up. Long enough to ride out a checkpoint or a `verify` scan, short enough that a stuck peer
/// surfaces as an error well inside the relay's decision budget on the next call.
pub(crate) const DB_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

// holdmap (src/holdmap/): the `holdmap mcp` server's bounds.

/// Largest request line `holdmap mcp` reads (bytes of JSON, the newline not counted). A larger
/// line is read through its newline and dropped whole, answered -32600, never split into a second
/// request. Far above any request a client sends to a port tool.
pub const HOLDMAP_FRAME_BYTES_MAX: usize = 1024 * 1024;

/// Most messages in one legacy JSON-RPC batch (2025-03-26 and older); a larger batch is refused
/// whole before any of its messages runs.
pub const HOLDMAP_BATCH_MAX: usize = 64;

/// How long a stop preview's confirmation handle stays usable (seconds): long enough for a person
/// to read the plan, short enough that the machine has not moved on.
pub const HOLDMAP_HANDLE_TTL: Duration = Duration::from_secs(300);

/// Most previews (handles) one session keeps; a new preview evicts the oldest.
pub const HOLDMAP_HANDLES_MAX: usize = 32;

/// Most ports (or selected agents) one preview may cover; a larger selection gets no handle and
/// is told to narrow its filter.
pub const HOLDMAP_PREVIEW_TARGETS_MAX: usize = 128;

/// Most bytes of retained plan one preview may hold (its serialised form); over it, no handle.
pub const HOLDMAP_PREVIEW_BYTES_MAX: usize = 1024 * 1024;

/// Longest `confirmation_id` accepted (characters); ours are far shorter.
pub const HOLDMAP_HANDLE_CHARS_MAX: usize = 128;

/// How many ports `find_free_port` tries at and after `near` before it gives up.
pub const HOLDMAP_FREE_PORT_PROBES_MAX: u16 = 500;

/// Longest and default wait of `wait_for_port` (seconds); the shortest is 0.1 s.
pub const HOLDMAP_WAIT_MAX: Duration = Duration::from_secs(600);
pub const HOLDMAP_WAIT_DEFAULT: Duration = Duration::from_secs(30);

/// How often `wait_for_port` looks again while it waits.
pub const HOLDMAP_WAIT_POLL: Duration = Duration::from_millis(100);

/// The bounded HTTP probe of `explain_port` / `inspect_port`: one GET / on loopback, given up
/// after this long, reading at most this many bytes of the answer.
pub const HOLDMAP_PROBE_TIMEOUT: Duration = Duration::from_millis(800);
pub const HOLDMAP_PROBE_BYTES_MAX: usize = 16 * 1024;

/// How long a stop waits after SIGTERM for the tree to exit before SIGKILL, and after SIGKILL
/// for the port to be released.
pub const HOLDMAP_STOP_GRACE: Duration = Duration::from_secs(5);
pub const HOLDMAP_STOP_KILL_WAIT: Duration = Duration::from_secs(2);

/// Longest prompt argument value (characters) and prompt name (bytes).
pub const HOLDMAP_PROMPT_VALUE_CHARS_MAX: usize = 512;
pub const HOLDMAP_PROMPT_NAME_BYTES_MAX: usize = 64;

/// Most concurrently running slow requests (`wait_for_port`, stop executions) one session runs;
/// past it a new one is answered with a tool error saying so.
pub const HOLDMAP_PENDING_MAX: usize = 64;

const _: () = assert!(HOLDMAP_FRAME_BYTES_MAX < FRAME_BYTES_MAX);
const _: () = assert!(HOLDMAP_PREVIEW_BYTES_MAX <= HOLDMAP_FRAME_BYTES_MAX);
const _: () = assert!(HOLDMAP_WAIT_DEFAULT.as_secs() < HOLDMAP_WAIT_MAX.as_secs());
const _: () = assert!(HOLDMAP_WAIT_POLL.as_millis() < HOLDMAP_PROBE_TIMEOUT.as_millis());
const _: () = assert!(HOLDMAP_STOP_KILL_WAIT.as_secs() < HOLDMAP_STOP_GRACE.as_secs());

// added by os
/// Most bytes of one socket table (`/proc/net/tcp` …) read per scan. A row is about 150 bytes,
/// so this is some 400,000 sockets; past it the rest of the table is left out with a warning.
pub const HOLDMAP_SOCKET_TABLE_BYTES_MAX: u64 = 64 * 1024 * 1024;

/// Most bytes of `/proc/<pid>/stat` read: the line is a few hundred bytes (`comm` is at most
/// 64), so anything longer is not a stat line.
pub const HOLDMAP_PROC_STAT_BYTES_MAX: u64 = 4 * 1024;

/// Most bytes of a command line (`/proc/<pid>/cmdline`) read; a longer one is cut there (a
/// process can set a huge argv, and only its start matters to a reader).
pub const HOLDMAP_CMDLINE_BYTES_MAX: u64 = 64 * 1024;

/// Most open files looked at per process when finding socket owners; far above a normal
/// process, it bounds the walk of a process that opened millions of descriptors.
pub const HOLDMAP_FDS_PER_PROCESS_MAX: usize = 256 * 1024;

/// Most processes read per scan (the kernel's default `pid_max` on 64-bit is 4,194,304, but a
/// machine with more than this many live processes is not one holdmap can summarise).
pub const HOLDMAP_PROCS_MAX: usize = 1024 * 1024;

// added by judge
/// Most folders `project_of` climbs from a working directory looking for a project marker (and
/// for the enclosing `.git`): deeper than any real checkout, bounded so a deep path costs little.
pub const HOLDMAP_PROJECT_LEVELS_MAX: usize = 32;

/// Most bytes of a `package.json` read for its `name`; a larger one is named after its folder.
pub const HOLDMAP_PACKAGE_JSON_BYTES_MAX: u64 = 256 * 1024;

/// Most bytes read of a `.git/HEAD` or a `.git` file (`gitdir: …`): both are one short line.
pub const HOLDMAP_GIT_HEAD_BYTES_MAX: u64 = 4096;

/// Largest inline JSON argument (bytes) redaction parses to mask values by key; a larger one is
/// masked whole, since it cannot be checked within the bound.
pub const HOLDMAP_INLINE_JSON_BYTES_MAX: usize = 64 * 1024;

/// Deepest nesting of an inline JSON argument redaction walks; a deeper one is masked whole.
pub const HOLDMAP_INLINE_JSON_DEPTH_MAX: usize = 32;

const _: () = assert!(HOLDMAP_INLINE_JSON_BYTES_MAX < HOLDMAP_FRAME_BYTES_MAX);
// added by stops
/// How often a stop looks again whether its signalled processes have exited and whether the
/// port is free: often enough that a stop ends soon after the tree does.
pub const HOLDMAP_STOP_POLL: Duration = Duration::from_millis(50);
const _: () = assert!(HOLDMAP_STOP_POLL.as_millis() < HOLDMAP_STOP_KILL_WAIT.as_millis());

// added by topo
/// Longest cluster name `get_topology` gives (characters, before a `-2`-style suffix that makes
/// it unique): a project or process name shown as is, shortened so that it stays well inside
/// `plan_cluster_stop`'s 256-character argument.
pub const HOLDMAP_CLUSTER_NAME_CHARS_MAX: usize = 128;
/// Longest `cluster` argument `plan_cluster_stop` accepts (characters).
pub const HOLDMAP_CLUSTER_ARG_CHARS_MAX: usize = 256;
/// Most cluster names an unknown-cluster error lists before "and N more".
pub const HOLDMAP_CLUSTER_NAMES_LISTED_MAX: usize = 50;

const _: () = assert!(HOLDMAP_CLUSTER_NAME_CHARS_MAX + 16 <= HOLDMAP_CLUSTER_ARG_CHARS_MAX);

// added by ports
/// Most connections and most process-tree rows one `explain_port` / `inspect_port` result lists;
/// past it the rest are counted (`connections_omitted`, `process_tree_omitted`), never dropped
/// silently.
pub const HOLDMAP_INSPECT_ROWS_MAX: usize = 256;

/// Longest page title or `Server` header the HTTP probe keeps (characters).
pub const HOLDMAP_PROBE_TEXT_CHARS_MAX: usize = 200;

/// How many ephemeral ports `find_free_port` (without `near`) asks the OS for before giving up,
/// when the one it got is held on another address or not bindable on ::1.
pub const HOLDMAP_EPHEMERAL_TRIES: usize = 8;

const _: () = assert!(HOLDMAP_PROBE_TEXT_CHARS_MAX < HOLDMAP_PROBE_BYTES_MAX);

// holdmap part 2 (issue 15). Each block is one area's; add to yours only.

// --- added by agents (detection, list_agents) ---
/// Agents one `list_agents` answer lists (the rest are counted in `more_agents`).
pub const HOLDMAP_AGENTS_MAX: usize = 64;
/// Per agent: owned pids listed in `process_ids` (the rest counted in `more_processes`).
pub const HOLDMAP_AGENT_PROCESSES_MAX: usize = 40;
/// Per agent: child tools listed (`more_tools`).
pub const HOLDMAP_AGENT_TOOLS_MAX: usize = 24;
/// Per agent: folders listed (`more_folders`).
pub const HOLDMAP_AGENT_FOLDERS_MAX: usize = 12;
/// Per agent: listening ports listed (`more_ports`).
pub const HOLDMAP_AGENT_PORTS_MAX: usize = 32;
/// Per agent: established TCP links listed (`more_links`).
pub const HOLDMAP_AGENT_LINKS_MAX: usize = 16;
/// Longest name, package or filter word a child tool is recognised or matched by.
pub const HOLDMAP_TOOL_NAME_CHARS_MAX: usize = 96;
const _: () = assert!(HOLDMAP_AGENT_TOOLS_MAX <= HOLDMAP_AGENT_PROCESSES_MAX);

// --- added by capabilities (include_capabilities) ---
/// Largest client settings file (bytes) holdmap reads for permission rules and safety settings
/// (`~/.claude/settings.json`, VS Code's `settings.json`, …): these are hand-written and small;
/// a file past this is refused, never read in part.
pub(crate) const CLIENT_SETTINGS_BYTES_MAX: usize = 1024 * 1024;
/// Most permission rules kept per settings file (the rest are counted).
pub(crate) const CLIENT_RULES_PER_FILE_MAX: usize = 256;
/// Longest permission rule returned (characters, after cleaning).
pub(crate) const CLIENT_RULE_CHARS_MAX: usize = 200;
/// Longest setting value returned (characters, after cleaning).
pub(crate) const CLIENT_SETTING_CHARS_MAX: usize = 200;
/// Most skill folders read per skills directory (the rest are counted).
pub(crate) const CLIENT_SKILLS_PER_DIR_MAX: usize = 128;
/// Most bytes of a SKILL.md read for its YAML header: a header that does not close within it
/// is refused.
pub(crate) const CLIENT_SKILL_HEADER_BYTES_MAX: usize = 4096;
/// Most lines of a SKILL.md's YAML header read.
pub(crate) const CLIENT_SKILL_HEADER_LINES_MAX: usize = 40;
/// Longest skill name or purpose returned (characters, after cleaning).
pub(crate) const CLIENT_SKILL_TEXT_CHARS_MAX: usize = 200;
/// Most files listed per instruction-rules folder (`.cursor/rules/`; the rest are counted).
pub(crate) const CLIENT_INSTRUCTION_FILES_MAX: usize = 64;

const _: () = assert!(CLIENT_SETTINGS_BYTES_MAX <= CLIENT_CONFIG_BYTES_MAX);
const _: () = assert!(CLIENT_SKILL_HEADER_BYTES_MAX < CLIENT_SETTINGS_BYTES_MAX);

// --- added by flow (get_agent_flow) ---
/// Most nodes one `get_agent_flow` result holds when the caller does not say (`max_nodes`), and
/// the most it may ask for: past it the rest are counted in `limits.more`, never dropped
/// silently. With the relationships cap it keeps a result (shown twice: structured and as
/// text) well inside `HOLDMAP_FRAME_BYTES_MAX`.
pub const HOLDMAP_FLOW_NODES_DEFAULT: usize = 200;
pub const HOLDMAP_FLOW_NODES_MAX: usize = 300;
/// Most relationships one `get_agent_flow` result holds; the rest are counted.
pub const HOLDMAP_FLOW_RELATIONSHIPS_MAX: usize = 600;
/// How many ancestors of an agent's own process the flow follows up (its launcher, shell,
/// terminal …): a torn or very deep table cannot grow the result.
pub const HOLDMAP_FLOW_ANCESTORS_MAX: usize = 16;
/// Longest redacted command line a flow's process node shows (characters, then `…`).
pub const HOLDMAP_FLOW_COMMAND_CHARS_MAX: usize = 200;
/// Most unreadable processes a flow's limits name by pid; the rest are counted.
pub const HOLDMAP_FLOW_UNREADABLE_LISTED_MAX: usize = 32;
const _: () = assert!(HOLDMAP_FLOW_NODES_DEFAULT <= HOLDMAP_FLOW_NODES_MAX);
// A node is at most about 600 bytes with its command; a relationship about 400 with its facts.
const _: () = assert!(
    2 * (HOLDMAP_FLOW_NODES_MAX * 600 + HOLDMAP_FLOW_RELATIONSHIPS_MAX * 400)
        < HOLDMAP_FRAME_BYTES_MAX
);

// --- added by needs (list_needs) ---
/// Most needs one `list_needs` result lists, most severe first; past it the rest are counted in
/// `omitted` and said in `limits`, never dropped silently. Keeps a result well under a frame
/// (a need is under 2 KiB).
pub const HOLDMAP_NEEDS_LISTED_MAX: usize = 200;
const _: () = assert!(HOLDMAP_NEEDS_LISTED_MAX * 2048 < HOLDMAP_FRAME_BYTES_MAX);

// --- added by analyzers (catalog, store, list_analyzers, list_insights) ---
/// Largest analyzer catalog file holdmap reads (`<data dir>/analyzers.json`): a hand-written
/// list of a few analyzers is a few KiB; anything near this is not one.
pub const HOLDMAP_ANALYZER_CATALOG_BYTES_MAX: u64 = 256 * 1024;

/// Most analyzers a catalog may list (the built-in one not counted): also bounds how many store
/// files `list_insights` opens.
pub const HOLDMAP_ANALYZERS_MAX: usize = 64;

/// Longest text field of a catalog entry (title, purpose, source, sandbox), in characters.
pub const HOLDMAP_ANALYZER_TEXT_CHARS_MAX: usize = 1000;

/// Largest store file of one analyzer's findings (`<data dir>/insights/NAME.json`).
pub const HOLDMAP_INSIGHTS_FILE_BYTES_MAX: u64 = 4 * 1024 * 1024;

/// Most findings one run stores; past it the run says how many it left out.
pub const HOLDMAP_INSIGHTS_PER_RUN_MAX: usize = 2000;

/// How many findings `list_insights` returns by default, and at most in one call (the rest are
/// counted in `more`).
pub const HOLDMAP_INSIGHTS_LIST_DEFAULT: usize = 50;
pub const HOLDMAP_INSIGHTS_LIST_MAX: usize = 500;

const _: () = assert!(HOLDMAP_INSIGHTS_LIST_DEFAULT <= HOLDMAP_INSIGHTS_LIST_MAX);
const _: () = assert!(HOLDMAP_ANALYZER_CATALOG_BYTES_MAX < HOLDMAP_INSIGHTS_FILE_BYTES_MAX);

// --- added by activity (collector, recorder) ---
/// Most records `holdmap activity serve` keeps in memory; past it the oldest are dropped and
/// counted (`dropped_oldest`), so a long recording cannot grow without bound.
pub const HOLDMAP_ACTIVITY_RECORDS_MAX: usize = 4096;
/// Most records `holdmap mcp --record-activity` holds for delivery; past it new ones are dropped
/// and counted (`dropped_before`), never waited for: a slow collector never slows a tool.
pub const HOLDMAP_ACTIVITY_QUEUE_MAX: usize = 256;
/// Longest request head (request line and headers, bytes) the collector reads.
pub const HOLDMAP_ACTIVITY_HEAD_BYTES_MAX: usize = 8 * 1024;
/// Most header lines in one request to the collector.
pub const HOLDMAP_ACTIVITY_HEADERS_MAX: usize = 32;
/// Largest request body (bytes) the collector accepts: one record is about 200 bytes.
pub const HOLDMAP_ACTIVITY_BODY_BYTES_MAX: usize = 1024;
/// Longest request target (path, bytes) the collector or an endpoint may name.
pub const HOLDMAP_ACTIVITY_PATH_BYTES_MAX: usize = 256;
/// Most connections the collector serves at once; more are closed unanswered.
pub const HOLDMAP_ACTIVITY_CONNECTIONS_MAX: usize = 32;
/// How long one exchange with the collector may take, on either side (connect, request,
/// answer): loopback answers in well under a millisecond, so this only bounds a stuck peer.
pub const HOLDMAP_ACTIVITY_EXCHANGE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one record's delivery may take before it is dropped and counted.
pub const HOLDMAP_ACTIVITY_SEND_TIMEOUT: Duration = Duration::from_millis(500);
/// How long the collector pauses after a failed accept (out of file descriptors, most often)
/// before it tries again, so a lasting failure never spins the loop.
pub const HOLDMAP_ACTIVITY_ACCEPT_RETRY: Duration = Duration::from_millis(100);
/// How long `holdmap mcp` waits, once its input has closed, for queued records to be delivered.
pub const HOLDMAP_ACTIVITY_FLUSH_WAIT: Duration = Duration::from_millis(300);
/// Most bytes of a snapshot `holdmap activity snapshot` reads.
pub const HOLDMAP_ACTIVITY_SNAPSHOT_BYTES_MAX: usize = 4 * 1024 * 1024;
/// The most bytes one stored record takes in a snapshot (its keys, a tool name and seven numbers
/// of at most 16 digits each), for the assertion below.
pub const HOLDMAP_ACTIVITY_RECORD_JSON_BYTES_MAX: usize = 512;

const _: () = assert!(
    HOLDMAP_ACTIVITY_RECORDS_MAX * HOLDMAP_ACTIVITY_RECORD_JSON_BYTES_MAX
        < HOLDMAP_ACTIVITY_SNAPSHOT_BYTES_MAX
);
const _: () = assert!(HOLDMAP_ACTIVITY_RECORD_JSON_BYTES_MAX <= HOLDMAP_ACTIVITY_BODY_BYTES_MAX);
const _: () = assert!(HOLDMAP_ACTIVITY_PATH_BYTES_MAX < HOLDMAP_ACTIVITY_HEAD_BYTES_MAX);
const _: () = assert!(
    HOLDMAP_ACTIVITY_SEND_TIMEOUT.as_millis() < HOLDMAP_ACTIVITY_EXCHANGE_TIMEOUT.as_millis()
);

/// Calls a compiled policy set keeps the Cedar parts of (its `CallPlan`: the entities, and the
/// policies that could apply as one Cedar set), keyed by agent, connector and tool: building
/// the entities costs Cedar a transitive closure (about 7 µs, most of a decision), and neither
/// depends on anything else. Measured: four entities take 4.7 KiB, a set of
/// `CALL_PLAN_POLICIES_MAX` policies 21 KiB, so the cache stays under 7 MiB; when full it
/// starts over, which costs only the next calls' rebuilding.
pub const CALL_PLANS_CACHED: usize = 256;

/// Most policies that could apply to one call for a set to keep them as one Cedar set (one
/// Cedar call decides most calls); a call with more is asked group by group from the index.
pub const CALL_PLAN_POLICIES_MAX: usize = 16;
