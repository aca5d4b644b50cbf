//! `holdcall connector set|remove|list`: registering a connector's command and its secret, sent
//! only to a verified daemon of this build after the secret is read.

use std::ffi::OsString;

use super::args::ConnectorCmd;
use super::prompt::read_secret;
use super::render::{list, local_time};
use super::{CliError, ask_daemon_within, home_and_config};
use crate::ipc::{self, ManageRequest, ManageResponse, WireError};
use crate::limits;
use crate::text::visible;

pub(super) fn connector_cmd(action: ConnectorCmd) -> Result<i32, CliError> {
    match action {
        ConnectorCmd::Set {
            name,
            env_key,
            pass_env,
            command,
        } => connector_set(name, env_key, pass_env, command),
        ConnectorCmd::Remove { name } => {
            crate::policy::validate_scope_name("connector", &name)?;
            connector_changed(ask_daemon_within(
                ManageRequest::ConnectorRemove { name },
                limits::STORE_REQUEST_TIMEOUT,
            )?)
        }
        ConnectorCmd::List { json } => connector_list(json),
        ConnectorCmd::HideDenied { name, state } => super::tools::hide_denied(name, state),
    }
}

fn connector_changed(resp: ManageResponse) -> Result<i32, CliError> {
    match resp {
        ManageResponse::ConnectorChanged { message, .. } => {
            println!("{message}");
            Ok(0)
        }
        _ => Err(CliError::Unexpected),
    }
}

/// `connector set`: everything is checked and the command resolved before the daemon is dialed;
/// the daemon is verified before the secret is even read; only then is it sent.
fn connector_set(
    name: String,
    env_key: String,
    pass_env: Vec<String>,
    command: Vec<OsString>,
) -> Result<i32, CliError> {
    use crate::connector::{self, ConnectorError};
    crate::policy::validate_scope_name("connector", &name)?;
    if env_key.contains('=') {
        return Err(ConnectorError::EnvKey(
            "--env takes only the variable's name (KEY, not KEY=value): the secret is read from \
             stdin or a prompt, never from the command line"
                .into(),
        )
        .into());
    }
    let words = command
        .iter()
        .map(|w| {
            w.to_str().map(str::to_string).ok_or_else(|| {
                ConnectorError::Command(format!("the command word {w:?} is not UTF-8"))
            })
        })
        .collect::<Result<Vec<String>, _>>()?;
    let Some((program, args)) = words.split_first() else {
        return Err(ConnectorError::Command("no command after `--`".into()).into());
    };
    let cwd = std::env::current_dir()?;
    let resolved = connector::resolve_program(program, std::env::var_os("PATH").as_ref(), &cwd)?;
    let resolved = resolved.to_str().map(str::to_string).ok_or_else(|| {
        ConnectorError::Command(format!("{} is not a UTF-8 path", resolved.display()))
    })?;
    let mut full = vec![resolved];
    full.extend(args.iter().cloned());
    let mut req = connector::SetRequest {
        name,
        env_key,
        command: full,
        pass_env,
        // Checked with a placeholder now, so a bad key or command fails before the prompt.
        secret: crate::vault::Secret::new("x".into()),
        // The server runs here, with PATH, HOME… as they are now, whatever the relay's are.
        cwd: cwd.to_str().map(str::to_string).ok_or_else(|| {
            ConnectorError::Command(format!("{} is not a UTF-8 path", cwd.display()))
        })?,
        pinned_env: connector::pinned_now(),
    };
    connector::validate(&req)?;
    if let Some(notice) = connector::runtime_resolver_notice(&req.command) {
        eprintln!("holdcall: note: {notice}");
    }

    let (home, _) = home_and_config()?;
    let rt = ipc::current_thread()?;
    let mut conn = rt
        .block_on(ipc::connect_or_start(
            &home,
            crate::limits::DAEMON_READY_TIMEOUT,
        ))
        .map_err(|e| match e {
            WireError::NotVerified { socket, why } => CliError::SecretNotSent { socket, why },
            other => CliError::Wire(other),
        })?
        .manage();
    req.secret = read_secret()?;
    connector::validate_secret(req.secret.expose())?;
    let short = req.secret.len() < limits::LEAK_SECRET_BYTES_MIN;
    let resp = rt.block_on(async {
        match conn
            .call(
                &ManageRequest::ConnectorSet(req),
                limits::STORE_REQUEST_TIMEOUT,
            )
            .await?
        {
            ManageResponse::Error { message } => Err(CliError::Refused(message)),
            other => Ok(other),
        }
    })?;
    if short {
        eprintln!(
            "holdcall: warning: the secret is under {} bytes, so answers are not checked for it              (a string this short turns up in ordinary text by chance); see docs/security.md",
            limits::LEAK_SECRET_BYTES_MIN
        );
    }
    connector_changed(resp)
}

fn connector_list(json: bool) -> Result<i32, CliError> {
    list(
        ManageRequest::ConnectorList,
        |r| match r {
            ManageResponse::ConnectorList { connectors } => Some(connectors),
            _ => None,
        },
        json,
        "(no connectors registered: every server runs as its client's configuration says, with no secret from Holdcall)",
        |out, c| {
            let pass = if c.pass_env.is_empty() {
                String::new()
            } else {
                format!("; passes {}", c.pass_env.join(", "))
            };
            writeln!(
                out,
                "{}  secret in {}  runs {}  (since {}{pass})",
                c.name,
                c.env_key,
                visible(&c.command.join(" ")),
                local_time(&c.updated_at)
            )
        },
    )
}
