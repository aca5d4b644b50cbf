//! The connectors' checks: the credential store answers the daemon (when a connector needs it),
//! and each registered connector's command can still run. Never reads or shows a secret.

use super::{Check, Ctx, Status, check};
use crate::config::Home;
use crate::ipc::{self, ManageRequest, ManageResponse, Probe};
use crate::journal::Reader;
use crate::limits;

/// The registered connectors, read-only from the database (never a secret).
fn registered_connectors(home: &Home) -> Result<Vec<crate::connector::ListedConnector>, String> {
    if !home.db_path().exists() {
        return Ok(Vec::new());
    }
    Reader::open(&home.db_path())
        .and_then(|r| r.connectors())
        .map_err(|e| e.to_string())
}

/// Whether the credential store answers, asked of the running daemon (the only process that
/// reads secrets, and the one whose session bus counts). Not needed while no connector is
/// registered; without a running daemon it cannot be checked, and doctor never starts one.
pub(super) fn credential_store(ctx: &Ctx) -> Vec<Check> {
    let name = "credential store";
    let Ok(home) = &ctx.home else {
        return Vec::new();
    };
    let registered = match registered_connectors(home) {
        Ok(c) => c.len(),
        Err(_) => 0,
    };
    let need = |status_if_needed: Status| {
        if registered == 0 {
            Status::Ok
        } else {
            status_if_needed
        }
    };
    let Ok(rt) = ipc::current_thread() else {
        return Vec::new();
    };
    let line = rt.block_on(async {
        match ipc::probe(home).await {
            Probe::Ours(conn) => {
                match conn
                    .manage()
                    .call(&ManageRequest::VaultProbe, limits::STORE_REQUEST_TIMEOUT)
                    .await
                {
                    Ok(ManageResponse::VaultStatus {
                        reachable: true,
                        message,
                    }) => check(name, Status::Ok, message, None),
                    // An unreachable store is an error only for a connector that has a secret
                    // in it: with none registered, nothing needs one (and an OK line never
                    // carries an error's text).
                    Ok(ManageResponse::VaultStatus { .. }) if registered == 0 => not_needed(name),
                    Ok(ManageResponse::VaultStatus { message, .. }) => check(
                        name,
                        Status::Fail,
                        format!("{message}; registered connectors' servers will not start"),
                        Some(STORE_REMEDY),
                    ),
                    _ if registered == 0 => not_needed(name),
                    _ => check(
                        name,
                        Status::Warn,
                        "the daemon did not say whether it reaches the credential store".into(),
                        Some("run `holdcall daemon restart`; see daemon.log in the holdcall home"),
                    ),
                }
            }
            _ => check(
                name,
                need(Status::Warn),
                if registered == 0 {
                    "not checked (no verified daemon is running; no connector needs it yet)".into()
                } else {
                    "not checked: the daemon reads the store, and no verified daemon is running"
                        .into()
                },
                (registered > 0)
                    .then_some("run `holdcall daemon start`, then `holdcall doctor` again"),
            ),
        }
    });
    vec![line]
}

/// What makes a credential store reachable to the daemon.
const STORE_REMEDY: &str = "start a Secret Service in your desktop session (gnome-keyring-daemon, \
     or KeePassXC with its Secret Service on) and unlock it, then start the daemon from that \
     session (`holdcall daemon restart` there) so it sees DBUS_SESSION_BUS_ADDRESS";

/// The line for a store nothing needs: no connector has a secret.
fn not_needed(name: &str) -> Check {
    check(
        name,
        Status::Ok,
        "none needed: no connector has a secret (`holdcall connector set` will need a reachable \
         Secret Service)"
            .into(),
        None,
    )
}

/// Each registered connector: its registered command still exists and is executable (else its
/// servers cannot start).
pub(super) fn connectors(ctx: &Ctx) -> Vec<Check> {
    use std::os::unix::fs::PermissionsExt as _;
    let Ok(home) = &ctx.home else {
        return Vec::new();
    };
    let list = match registered_connectors(home) {
        Ok(l) => l,
        Err(e) => {
            return vec![check(
                "connectors",
                Status::Fail,
                e,
                Some("run `holdcall verify`"),
            )];
        }
    };
    list.iter()
        .map(|c| {
            let what = format!("connector {}", crate::text::visible(&c.name));
            let program = c.command.first().map(String::as_str).unwrap_or_default();
            let runnable = std::fs::metadata(program)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false);
            if runnable {
                check(
                    &what,
                    Status::Ok,
                    format!(
                        "runs {} with its secret in {}",
                        crate::text::visible(&c.command.join(" ")),
                        c.env_key
                    ),
                    None,
                )
            } else {
                check(
                    &what,
                    Status::Fail,
                    format!(
                        "its registered command {} is missing or not executable, so its servers cannot start",
                        crate::text::visible(program)
                    ),
                    Some("register it again: `holdcall connector set NAME --env KEY -- COMMAND…`"),
                )
            }
        })
        .collect()
}
