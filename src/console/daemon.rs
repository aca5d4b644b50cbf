//! The console's daemon client, for what only the daemon knows (held calls, explain, agents'
//! state): read requests only, on a verified connection, never starting a daemon.

use super::ConsoleError;
use crate::config::Home;
use crate::ipc::{self, ManageRequest, ManageResponse, WireError};
use crate::limits;

/// The only requests the console sends the daemon: each one reads. Anything else (a decision, a
/// policy change, shutdown) is refused before a connection is made.
pub(super) fn is_read_request(req: &ManageRequest) -> bool {
    matches!(
        req,
        ManageRequest::ApprovalList
            | ManageRequest::PolicyList
            | ManageRequest::PolicyExplain { .. }
            | ManageRequest::AgentList
            | ManageRequest::Status
    )
}

/// Asks the daemon one read request on a fresh verified connection; never starts a daemon.
pub(super) async fn ask_daemon(
    home: &Home,
    req: &ManageRequest,
) -> Result<ManageResponse, ConsoleDaemon> {
    if !is_read_request(req) {
        return Err(ConsoleDaemon::Refused(
            ConsoleError::NotARead("a request that changes something").to_string(),
        ));
    }
    let mut conn = match ipc::connect(home).await {
        Ok(c) => c.manage(),
        Err(WireError::NoDaemon { .. }) => return Err(ConsoleDaemon::NotRunning),
        Err(e) => return Err(ConsoleDaemon::Failed(e.to_string())),
    };
    match conn.call(req, limits::CONSOLE_DAEMON_TIMEOUT).await {
        Ok(ManageResponse::Error { message }) => Err(ConsoleDaemon::Refused(message)),
        Ok(r) => Ok(r),
        Err(e) => Err(ConsoleDaemon::Failed(e.to_string())),
    }
}

/// Why the daemon gave the console no answer.
#[derive(Debug)]
pub(super) enum ConsoleDaemon {
    NotRunning,
    Refused(String),
    Failed(String),
}

impl ConsoleDaemon {
    pub(super) fn say(&self) -> String {
        match self {
            ConsoleDaemon::NotRunning => {
                "the daemon is not running (the console never starts it; `holdcall daemon start` does)".into()
            }
            ConsoleDaemon::Refused(m) => format!("the daemon refused: {m}"),
            ConsoleDaemon::Failed(m) => format!("the daemon did not answer: {m}"),
        }
    }
}
