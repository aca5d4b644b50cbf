//! Dialing the daemon: a verified connection (this build, running as us, serving this home),
//! one request and its one answer at a time, and starting a daemon on demand.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;

use crate::config::Home;
use crate::ipc::{
    HelloRequest, HelloResponse, ManageRequest, ManageResponse, SessionRequest, SessionResponse,
    lock_holder,
};
use crate::limits;
use crate::os::peer;

/// A request of one protocol and the answer it gets: what `Conn::call` sends and reads back.
trait Ask: Serialize {
    type Answer: DeserializeOwned;
}

impl Ask for SessionRequest {
    type Answer = SessionResponse;
}

impl Ask for ManageRequest {
    type Answer = ManageResponse;
}

impl Ask for HelloRequest {
    type Answer = HelloResponse;
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

/// A verified connection to the daemon, which has said it serves this home (`daemon.hello`),
/// and speaks no protocol yet: [`Conn::manage`] or [`Conn::session`] makes it one protocol's
/// for good, so "a connection carries either one relay's sessions or management requests, never
/// both" is a type here as well as the daemon's rule (which refuses a request of the other
/// protocol and closes the connection).
pub(crate) struct Conn {
    reader: peer::CheckedReader,
    writer: OwnedWriteHalf,
}

impl Conn {
    /// This connection as a management connection (the CLI's, the console's, doctor's), for good.
    pub(crate) fn manage(self) -> ManageConn {
        ManageConn(self)
    }

    /// This connection as a relay's session connection, for good.
    pub(crate) fn session(self) -> SessionConn {
        SessionConn(self)
    }

    /// Sends one request and reads its one response, within `timeout`.
    async fn call<Q: Ask>(&mut self, req: &Q, timeout: Duration) -> Result<Q::Answer, WireError> {
        tokio::time::timeout(timeout, self.call_inner(req))
            .await
            .map_err(|_| WireError::Timeout(timeout))?
    }

    async fn call_inner<Q: Ask>(&mut self, req: &Q) -> Result<Q::Answer, WireError> {
        let line = request_line(req)?;
        self.writer.write_all(&line).await?;
        read_answer(&mut self.reader).await
    }
}

/// A connection that speaks the management protocol only.
pub(crate) struct ManageConn(Conn);

impl ManageConn {
    /// Sends one management request and reads its one answer, within `timeout`.
    pub(crate) async fn call(
        &mut self,
        req: &ManageRequest,
        timeout: Duration,
    ) -> Result<ManageResponse, WireError> {
        self.0.call(req, timeout).await
    }

    /// Reads the next line the daemon sends on a management connection, however long it takes
    /// (pushed lines arrive unasked). Closed when the daemon closes the connection.
    pub(crate) async fn recv(&mut self) -> Result<ManageResponse, WireError> {
        read_answer(&mut self.0.reader).await
    }
}

/// A connection that speaks the relay-session protocol only.
pub(crate) struct SessionConn(Conn);

impl SessionConn {
    /// Sends one session request and reads its one answer, within `timeout`.
    pub(crate) async fn call(
        &mut self,
        req: &SessionRequest,
        timeout: Duration,
    ) -> Result<SessionResponse, WireError> {
        self.0.call(req, timeout).await
    }

    /// Splits the connection so one task can read every line (answers and pushed words) while
    /// another writes requests: a relay's session link, so both halves speak its protocol.
    pub(crate) fn into_split(self) -> (ConnReader, ConnWriter) {
        (
            ConnReader {
                reader: self.0.reader,
            },
            ConnWriter {
                writer: self.0.writer,
            },
        )
    }
}

/// The reading half of a split [`SessionConn`]: a relay's, so it reads the session protocol.
pub(crate) struct ConnReader {
    reader: peer::CheckedReader,
}

impl ConnReader {
    /// The next line from the daemon; Closed at end of stream.
    pub(crate) async fn recv(&mut self) -> Result<SessionResponse, WireError> {
        read_answer(&mut self.reader).await
    }
}

/// The writing half of a split [`SessionConn`]: a relay's, so it sends the session protocol.
pub(crate) struct ConnWriter {
    writer: OwnedWriteHalf,
}

impl ConnWriter {
    pub(crate) async fn send(&mut self, req: &SessionRequest) -> Result<(), WireError> {
        let line = request_line(req)?;
        self.writer.write_all(&line).await?;
        Ok(())
    }
}

/// The next line the daemon sends, read as an answer of type `T`; Closed at end of stream.
async fn read_answer<T: DeserializeOwned>(
    reader: &mut peer::CheckedReader,
) -> Result<T, WireError> {
    match reader.read_line(limits::SOCKET_LINE_BYTES_MAX).await? {
        None => Err(WireError::Closed),
        Some(l) => serde_json::from_slice(&l).map_err(|e| WireError::Protocol(e.to_string())),
    }
}

fn request_line(req: &impl Serialize) -> Result<Vec<u8>, WireError> {
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
pub(crate) enum Probe {
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
pub(crate) async fn probe(home: &Home) -> Probe {
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
        .call(&HelloRequest::Hello, limits::DAEMON_HELLO_TIMEOUT)
        .await
    {
        Ok(HelloResponse::Hello(s)) => match s.mismatch(home) {
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
pub(crate) async fn connect(home: &Home) -> Result<Conn, WireError> {
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
/// within `limits::SOCKET_CHECK_INTERVAL`. Its readiness is its socket answering; while a
/// process holds the lock it is waited for up to `ready_within` (`limits::DAEMON_READY_TIMEOUT`
/// for a command a person runs, `limits::RELAY_DAEMON_READY_TIMEOUT` for a relay, whose client
/// times its start), so a daemon compiling many rules is not given up on while it starts.
pub(crate) async fn connect_or_start(
    home: &Home,
    ready_within: Duration,
) -> Result<Conn, WireError> {
    match connect(home).await {
        Err(WireError::NoDaemon { .. }) => {}
        other => return other,
    }
    let mut child: Option<std::process::Child> = None;
    let began = Instant::now();
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
                // A live holder of this home's lock is a daemon on its way to listening (the
                // kernel drops the lock with its holder): it is waited for up to the caller's
                // bound. With no holder, nothing is starting; that is given up on sooner.
                let bound = if holder.is_some() {
                    ready_within
                } else {
                    ready_within.min(limits::DAEMON_START_TIMEOUT)
                };
                if began.elapsed() >= bound {
                    break Err(WireError::Start(match holder {
                        Some(pid) => format!(
                            "the daemon of this home (pid {pid}, holder of {}) did not listen on {socket} within {:?}, the longest this waits for a daemon to start; see {}",
                            home.lock_path().display(),
                            bound,
                            home.daemon_log_path().display()
                        ),
                        None => format!(
                            "no daemon took this home's lock or listened on {socket} within {:?}; see {}",
                            bound,
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
pub(crate) fn current_thread() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
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
pub(crate) fn start_daemon(home: &Home) -> Result<std::process::Child, WireError> {
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
