//! `holdcall approve [ID] [--watch]` and `holdcall reject ID`: the held calls, shown with their
//! exact arguments, and a person's decision sent to the daemon.

use std::io::Write;

use super::render::visible_lines;
use super::{CliError, ask_daemon, home_and_config};
use crate::ipc::{self, ManageRequest, ManageResponse, WireError};
use crate::limits;

/// `holdcall approve ID` / `holdcall reject ID [--reason TEXT]`.
pub(super) fn decide_cmd(
    id: String,
    approve: bool,
    reason: Option<String>,
) -> Result<i32, CliError> {
    if !crate::approval::valid_hold_id(&id) {
        return Err(CliError::Refused(format!(
            "{:?} is not a hold id (12 lowercase hex characters); `holdcall approve` lists the held calls",
            crate::text::visible(&id)
        )));
    }
    if let Some(r) = &reason {
        crate::approval::check_reason(r).map_err(CliError::Refused)?;
    }
    match ask_daemon(ManageRequest::ApprovalDecide {
        id,
        approve,
        reason,
    })? {
        ManageResponse::Decided { message, .. } => {
            println!("{}", visible_lines(&message));
            Ok(0)
        }
        _ => Err(CliError::Unexpected),
    }
}

/// `holdcall approve [--watch]`: the held calls, each with its exact arguments. With `--watch`
/// the daemon pushes each call held later on the same connection (no polling: a call shows the
/// moment it is held, and an idle watch costs nothing), until interrupted.
pub(super) fn approve_list(watch: bool, json: bool) -> Result<i32, CliError> {
    let (home, _) = home_and_config()?;
    let rt = ipc::current_thread()?;
    rt.block_on(async {
        let mut conn = ipc::connect_or_start(&home, crate::limits::DAEMON_READY_TIMEOUT).await?.manage();
        let req = if watch {
            ManageRequest::ApprovalWatch
        } else {
            ManageRequest::ApprovalList
        };
        let calls = match conn.call(&req, limits::CLI_REQUEST_TIMEOUT).await? {
            ManageResponse::HeldCalls { calls } => calls,
            ManageResponse::Error { message } => return Err(CliError::Refused(message)),
            _ => return Err(CliError::Unexpected),
        };
        let mut shown: std::collections::HashSet<String> = std::collections::HashSet::new();
        if calls.is_empty() && !json {
            let mut out = std::io::stdout().lock();
            if watch {
                writeln!(out, "no calls are held; waiting for the next one (Ctrl-C stops)")?;
            } else {
                writeln!(out, "no calls are held")?;
            }
            out.flush()?;
        }
        for c in &calls {
            show_held(c, json)?;
            shown.insert(c.id.clone());
        }
        if !watch {
            if !calls.is_empty() && !json {
                println!(
                    "approve one with `holdcall approve ID`, reject it with `holdcall reject ID [--reason TEXT]`"
                );
            }
            return Ok(0);
        }
        loop {
            tokio::select! {
                next = conn.recv() => match next {
                    Ok(ManageResponse::HeldNew { call }) => {
                        if shown.insert(call.id.clone()) {
                            show_held(&call, json)?;
                        }
                    }
                    Ok(_) => return Err(CliError::Unexpected),
                    Err(WireError::Closed) => {
                        return Err(CliError::Refused(
                            "the daemon closed the connection (it stopped); nothing more will be shown".into(),
                        ));
                    }
                    Err(e) => return Err(e.into()),
                },
                _ = tokio::signal::ctrl_c() => return Ok(0),
            }
        }
    })
}

fn show_held(call: &ipc::HeldCall, json: bool) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer(&mut out, call).map_err(std::io::Error::other)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", crate::approval::render(call))?;
    }
    out.flush()?;
    Ok(())
}
