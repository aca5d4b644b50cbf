//! `holdcall agent add|list|remove`: enrolling client programs that rules can name.

use super::args::AgentCmd;
use super::render::{list, local_time, visible_lines};
use super::{CliError, ask_daemon_within};
use crate::ipc::{ManageRequest, ManageResponse};
use crate::limits;
use crate::text::visible;

pub(super) fn agent_cmd(action: AgentCmd) -> Result<i32, CliError> {
    let req = match action {
        AgentCmd::Add { name, path } => {
            crate::policy::validate_scope_name("agent", &name)?;
            // Absolute, symlinks resolved: the daemon stats exactly this file.
            let abs = std::fs::canonicalize(&path).map_err(|e| {
                CliError::Refused(format!(
                    "cannot resolve {}: {e}",
                    visible(&path.display().to_string())
                ))
            })?;
            let Some(abs) = abs.to_str().map(str::to_string) else {
                return Err(CliError::Refused(format!(
                    "{} is not valid UTF-8; Holdcall stores paths as text",
                    abs.display()
                )));
            };
            ManageRequest::AgentAdd { name, path: abs }
        }
        AgentCmd::Remove { name } => {
            crate::policy::validate_scope_name("agent", &name)?;
            ManageRequest::AgentRemove { name }
        }
        AgentCmd::List { json } => return agent_list(json),
    };
    let timeout = match req {
        ManageRequest::AgentAdd { .. } => limits::AGENT_ADD_TIMEOUT,
        _ => limits::CLI_REQUEST_TIMEOUT,
    };
    match ask_daemon_within(req, timeout)? {
        ManageResponse::AgentChanged { message, .. } => {
            println!("{}", visible_lines(&message));
            Ok(0)
        }
        _ => Err(CliError::Unexpected),
    }
}

fn agent_list(json: bool) -> Result<i32, CliError> {
    list(
        ManageRequest::AgentList,
        |r| match r {
            ManageResponse::AgentList { agents } => Some(agents),
            _ => None,
        },
        json,
        "(no agents enrolled: every session is unenrolled, bound only by rules naming no agent)",
        |out, a| {
            let state = if a.state == "current" {
                "current"
            } else {
                "STALE"
            };
            writeln!(
                out,
                "{}  {}  {}  (enrolled {})",
                visible(&a.name),
                state,
                visible(&a.path),
                local_time(&a.enrolled_at)
            )?;
            if let Some(why) = &a.stale_because {
                writeln!(
                    out,
                    "    {}; it matches no process until `holdcall agent add {} {}` again",
                    visible(why),
                    visible(&a.name),
                    visible(&a.path)
                )?;
            }
            Ok(())
        },
    )
}
