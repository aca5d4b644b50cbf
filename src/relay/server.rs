//! The server side: the child process the relay starts (its command, its stdin shared by the
//! client pump and released held calls) and the pump that relays its lines to the client.

use std::sync::{Arc, Mutex};

use std::process::Stdio;
use tokio::io::{AsyncWriteExt, BufReader};

use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc;

use super::classify::Anomaly;
use super::in_flight::{InFlight, Retries};
use super::link::Link;
use super::{RelayError, ServeOptions};
use crate::ipc::SessionRequest;
use crate::limits;
use crate::mcp::envelope;
use crate::mcp::line::{LineRead, read_line_capped};
use crate::mcp::version::Negotiation;

/// The server's stdin, shared by the client pump and held calls released later; a line is
/// written whole under the lock, so two lines never interleave. None once closed.
pub(super) type ServerInput = Arc<tokio::sync::Mutex<Option<ChildStdin>>>;

/// Writes one whole line to the server; false when it can no longer be written to.
pub(super) async fn write_server(input: &ServerInput, line: &[u8]) -> bool {
    match input.lock().await.as_mut() {
        Some(w) => w.write_all(line).await.is_ok() && w.flush().await.is_ok(),
        None => false,
    }
}

/// Starts the server: the registered command of a connector the daemon handed a launch for,
/// else the command given after `--`; in its own process group, stopped if the relay dies.
pub(super) fn start(
    launch: Option<crate::connector::Launch>,
    opts: &ServeOptions,
) -> Result<(Child, ChildStdin, ChildStdout), RelayError> {
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
    crate::os::child::die_with_parent(&mut cmd, "the relay exited before the server started")?;
    let mut child = cmd.spawn().map_err(|source| RelayError::Spawn {
        command: program,
        source,
    })?;
    let (Some(child_in), Some(child_out)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(RelayError::Io(std::io::Error::other(
            "the server's pipes were not created",
        )));
    };
    Ok((child, child_in, child_out))
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

/// Relays every server line to the client unchanged, watching answers for the negotiated
/// protocol version and for the outcome of calls in flight.
// Each pump owns its share of the session; a struct of them would only rename the list.
#[allow(clippy::too_many_arguments)]
pub(super) async fn pump_server(
    child_out: tokio::process::ChildStdout,
    out_tx: mpsc::Sender<Vec<u8>>,
    dialect: Arc<Mutex<Negotiation>>,
    in_flight: InFlight,
    retries: Retries,
    link: Link,
    session_id: String,
    listings: super::listing::Listings,
) {
    let mut r = BufReader::with_capacity(64 * 1024, child_out);
    loop {
        match read_line_capped(&mut r, limits::FRAME_BYTES_MAX).await {
            Ok(LineRead::Line(line)) => {
                let msg = envelope::inspect_server_line(&line);
                if let Ok(mut d) = dialect.lock() {
                    d.on_server(&msg);
                }
                if let (Some(id), None) = (msg.id, msg.method.as_ref()) {
                    let started = in_flight.lock().ok().and_then(|mut m| m.remove(id));
                    if let Some(f) = started {
                        let ok = msg.error.is_none()
                            && !msg.result.map(envelope::result_is_error).unwrap_or(false);
                        // The server asks for input: the client's retry carrying this state
                        // is the same call (2026-07-28 multi round-trip).
                        if let Some(state) = msg.result.and_then(envelope::input_required_state)
                            && let Ok(mut r) = retries.lock()
                        {
                            r.remember(state, f.call);
                        }
                        link.report(SessionRequest::CallOutcome {
                            session_id: session_id.clone(),
                            seq: f.seq,
                            ok,
                            duration_ms: i64::try_from(f.started.elapsed().as_millis())
                                .unwrap_or(i64::MAX),
                        });
                    }
                }
                // A tools/list answer is pinned, and forwarded as it came unless hide-denied
                // names tools to take out (`listing`).
                let hidden =
                    super::listing::on_answer(&listings, &link, &session_id, &msg, &line).await;
                let line = hidden.unwrap_or(line);
                if out_tx.send(line).await.is_err() {
                    return;
                }
            }
            Ok(LineRead::TooLong(n)) => {
                eprintln!(
                    "holdcall: not relaying a line of {n} bytes from the server: it is over the {} byte limit",
                    limits::FRAME_BYTES_MAX
                );
                link.report(SessionRequest::Anomaly {
                    session_id: session_id.clone(),
                    anomaly: Anomaly::Oversized.as_str().to_string(),
                });
            }
            Ok(LineRead::Eof) | Err(_) => return,
        }
    }
}
