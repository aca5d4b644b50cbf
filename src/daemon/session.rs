//! Starting a relay's session, and what the relay of a registered connector is handed to
//! launch its server.

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use crate::agents;
use crate::daemon::{
    Session, Shared,
    dispatch::{Next, SessionNext, error, violation},
    in_force::refresh,
    manage::agent::current_agents,
    writer::{AppendError, Op},
};
use crate::ipc::SessionResponse;
use crate::journal::{Entry, Fields, Kind};
use crate::limits;
use crate::policy::{self};
use crate::vault;

pub(crate) fn valid_session_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

pub(crate) async fn session_start(
    state: &Shared,
    owned: &mut HashSet<String>,
    session_id: String,
    (connector, connector_from): (String, Option<String>),
    client: Option<String>,
    image: Option<&crate::os::process::FileIdentity>,
) -> SessionNext {
    if let Err(why) = check_start(&session_id, &connector, client.as_deref()) {
        return violation(why);
    }
    // Said in the journal as the relay words it, made printable and bounded like a label.
    let reason = connector_from.map(|from| {
        let from: String = crate::text::visible(&from)
            .chars()
            .take(limits::CONNECTOR_FROM_CHARS_MAX)
            .collect();
        format!("no --connector was given: connector {connector} was derived from {from}")
    });
    // Reserve the id before any await, so two connections starting the same id at once cannot
    // both pass the check.
    let reserved = match state.sessions.lock() {
        Ok(mut s) if !s.contains_key(&session_id) => {
            // The agent is bound below, once, with the enrolments in force when the start is
            // recorded; a later enrolment change does not touch a started session.
            s.insert(session_id.clone(), Session::new(connector.clone(), None));
            true
        }
        _ => false,
    };
    if !reserved {
        return violation("that session id is in use; a session starts once");
    }
    let unreserve = |state: &Shared| {
        if let Ok(mut s) = state.sessions.lock() {
            s.remove(&session_id);
        }
    };
    // Only a journaled `session.start` uses an id up; a journal that cannot be read says so
    // (and the id stays free for when it can).
    let recorded = match state
        .writer
        .ask(|r| Op::SessionStarted(session_id.clone(), r))
        .await
    {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => {
            unreserve(state);
            return error(format!(
                "the session cannot start: the journal cannot be read: {e}"
            ));
        }
        Err(e) => {
            unreserve(state);
            return error(format!("the session cannot start: {e}"));
        }
    };
    if recorded {
        unreserve(state);
        return violation("that session id was used before; a session starts once");
    }
    // A registered connector's secret is read before the session is recorded: a relay that
    // cannot have it starts no server, and the journal says a session ran only if it did.
    let launch = match launch_for(state, &connector).await {
        Ok(l) => l,
        Err(message) => {
            unreserve(state);
            tracing::warn!("connector {connector}: no credential for a session: {message}");
            return Next::Reply(SessionResponse::CredentialUnavailable { connector, message });
        }
    };
    let detail = launch.as_ref().map(|l| {
        serde_json::json!({
            "credentialed": true,
            "command": l.command,
            "env_key": l.env_key,
            "pass_env": l.pass_env,
        })
        .to_string()
    });
    let start = Fields {
        session_id: Some(session_id.clone()),
        connector: Some(connector.clone()),
        client,
        detail,
        reason,
        ..Fields::default()
    };
    let entry = record_start(state, &session_id, start, image).await;
    if let Err(e) = entry {
        unreserve(state);
        return error(format!("the session could not be recorded: {e}"));
    }
    owned.insert(session_id);
    Next::Reply(SessionResponse::SessionOpened { launch })
}

/// What a `session.start` says, checked before anything is reserved: a well-formed id, a valid
/// connector name, a bounded printable client label.
fn check_start(session_id: &str, connector: &str, client: Option<&str>) -> Result<(), String> {
    if !valid_session_id(session_id) {
        return Err("a session id is 32 hexadecimal characters".into());
    }
    if let Err(e) = policy::validate_scope_name("connector", connector) {
        return Err(e.to_string());
    }
    if let Some(c) = client
        && (c.len() > limits::CLIENT_LABEL_BYTES_MAX || c.chars().any(char::is_control))
    {
        return Err("the client label is too long or has control characters".into());
    }
    Ok(())
}

/// Journals the session's start (`start`, with the agent bound now), retried while it comes
/// back stale.
async fn record_start(
    state: &Shared,
    session_id: &str,
    start: Fields,
    image: Option<&crate::os::process::FileIdentity>,
) -> Result<Entry, AppendError> {
    let mut attempt: u32 = 0;
    loop {
        attempt += 1;
        // The relay's parent image (read at accept from the kernel, never from the request:
        // `session.start` has no agent field, and unknown fields are ignored), matched against
        // the enrolments in force now, and recorded only while they still are.
        let generation = state.generation.load(Ordering::Acquire);
        let agent =
            image.and_then(|i| agents::matching(i, &current_agents(state)).map(|e| e.name.clone()));
        if let Ok(mut s) = state.sessions.lock()
            && let Some(s) = s.get_mut(session_id)
        {
            s.agent.clone_from(&agent);
        }
        let recorded = state
            .writer
            .append_decided(
                Kind::SessionStart,
                Fields {
                    agent,
                    ..start.clone()
                },
                generation,
                None,
            )
            .await;
        match recorded {
            Err(AppendError::Stale) if attempt < limits::STALE_DECISION_ATTEMPTS_MAX => {
                refresh(state, generation).await;
            }
            other => break other,
        }
    }
}

/// What the relay of a session on `connector` is handed: nothing for a connector nobody
/// registered; the registered command and its secret for one that is; an error (which the relay
/// turns into not starting the server) when the registration cannot be read or its secret
/// cannot be had. Called only for a verified relay's own new session.
pub(crate) async fn launch_for(
    state: &Shared,
    connector: &str,
) -> Result<Option<crate::connector::Launch>, String> {
    let read = || async {
        match state
            .writer
            .ask(|r| Op::Connector(connector.to_string(), r))
            .await
        {
            Ok(Ok(row)) => Ok(row),
            Ok(Err(e)) => Err(format!("the connector registry cannot be read: {e}")),
            Err(e) => Err(e.to_string()),
        }
    };
    // A connector nobody registered never waits behind a store call of another connector's.
    if read().await?.is_none() {
        return Ok(None);
    }
    let _serial = state.connectors.lock().await;
    let Some(row) = read().await? else {
        return Ok(None);
    };
    let account = row.account();
    let where_ = state.vault.describe();
    match vault::run_blocking(&state.vault, move |s| s.get(&account)).await {
        Ok(Some(secret)) => {
            // What comes back from the store is checked as what went in: something edited
            // outside Holdcall (a line break, a NUL, a huge value) is refused with a reason.
            crate::connector::validate_secret(secret.expose()).map_err(|e| {
                format!("connector {connector}'s secret in {where_} is not usable: {e}")
            })?;
            let leak = crate::daemon::leak::fingerprints_for(state, connector, &secret);
            Ok(Some(crate::connector::Launch {
                leak,
                command: row.command,
                env_key: row.env_key,
                secret,
                pass_env: row.pass_env,
                cwd: row.cwd,
                pinned_env: row.pinned_env,
            }))
        }
        Ok(None) => Err(format!(
            "connector {connector} is registered, but its secret is missing from {where_}: it \
             was removed outside Holdcall; set it again with `holdcall connector set {connector} \
             --env {} -- …`",
            row.env_key
        )),
        Err(e) => Err(format!(
            "connector {connector} is registered, but its secret cannot be read: {e}"
        )),
    }
}
