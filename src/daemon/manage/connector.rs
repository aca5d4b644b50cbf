//! Connector registration: a connector's command and its secret in the OS store, set or
//! removed.

use crate::daemon::{
    Shared,
    dispatch::{ManageNext, Next, error},
    writer::Op,
};
use crate::ipc::ManageResponse;
use crate::journal::{self, Fields};
use crate::policy::{self};
use crate::vault;

/// Registers a connector: the secret goes to the OS store first, then the row and its
/// `connector.change` entry in one transaction; if that fails the secret is deleted again.
pub(crate) async fn connector_set(state: &Shared, req: crate::connector::SetRequest) -> ManageNext {
    if let Err(e) = policy::validate_scope_name("connector", &req.name) {
        return error(e.to_string());
    }
    if let Err(e) = crate::connector::validate(&req) {
        return error(e.to_string());
    }
    let _serial = state.connectors.lock().await;
    // The registration it replaces, if any: its secret stays until the new one is recorded.
    let replaced = match state
        .writer
        .ask(|r| Op::Connector(req.name.clone(), r))
        .await
    {
        Ok(Ok(row)) => row,
        Ok(Err(e)) => return error(format!("the connectors cannot be read: {e}")),
        Err(e) => return error(e.to_string()),
    };
    // A fresh store entry per registration: a store call that times out and completes later
    // can only ever touch its own entry, never a newer registration's secret.
    let Ok(secret_id) = crate::ids::random_hex(8) else {
        return error("no random id could be drawn for the secret's store entry");
    };
    // Known from now on to the check of other connectors' arguments (`daemon::leak`).
    let _ = crate::daemon::leak::fingerprints_for(state, &req.name, &req.secret);
    let crate::connector::SetRequest {
        name,
        env_key,
        command,
        pass_env,
        secret,
        cwd,
        pinned_env,
    } = req;
    let summary = format!(
        "connector {name} registered: runs {} in {} with its secret in {env_key}",
        crate::text::visible(&command.join(" ")),
        crate::text::visible(&cwd)
    );
    let fields = Fields {
        connector: Some(name.clone()),
        reason: Some(summary.clone()),
        detail: Some(
            serde_json::json!({
                "action": "set",
                "env_key": env_key,
                "command": command,
                "pass_env": pass_env,
                "cwd": cwd,
                "pinned_env": pinned_env.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                "store": state.vault.describe(),
                "secret_id": secret_id,
            })
            .to_string(),
        ),
        ..Fields::default()
    };
    let account = crate::connector::account(&name, &secret_id);
    let change = journal::ConnectorChange::Set {
        name: name.clone(),
        env_key,
        command,
        pass_env,
        cwd,
        pinned_env,
        secret_id,
    };
    let record = async {
        match state
            .writer
            .ask(|reply| Op::ChangeConnector {
                change,
                fields,
                reply,
            })
            .await
        {
            Ok(r) => r,
            Err(e) => Err(e.to_string()),
        }
    };
    match vault::store_then_record(&state.vault, &account, secret, record).await {
        Ok(entry) => {
            let left = delete_replaced(state, replaced).await;
            Next::Reply(ManageResponse::ConnectorChanged {
                message: format!(
                    "{summary}; the secret is in {} (recorded in the journal as entry {}){left}",
                    state.vault.describe(),
                    entry.chain_seq
                ),
                chain_seq: Some(entry.chain_seq),
            })
        }
        Err(e) => not_registered(state, &account, e),
    }
}

/// The secret of the registration a new one replaced is no one's now: deleted from the store.
/// What is left to say when it could not be.
async fn delete_replaced(state: &Shared, replaced: Option<journal::ConnectorRow>) -> String {
    let Some(old) = replaced else {
        return String::new();
    };
    let old_account = old.account();
    match vault::run_blocking(&state.vault, move |s| s.delete(&old_account)).await {
        Ok(_) => String::new(),
        Err(e) => format!(
            "; the replaced secret could not be deleted from {} ({e}): remove the \
             entry {} there by hand",
            state.vault.describe(),
            old.account()
        ),
    }
}

/// Why a registration was not made: the store refused its secret, or it could not be
/// recorded (and then whether the new secret, entry `account`, was deleted again).
fn not_registered(state: &Shared, account: &str, e: vault::StoreThenRecordError) -> ManageNext {
    match e {
        vault::StoreThenRecordError::Store(e) => error(format!(
            "{e}; nothing was registered{}",
            if matches!(e, vault::VaultError::TimedOut(..)) {
                format!(
                    " (if the store finishes later, an unused entry {account} may be left in \
                     {}; no registration will ever use it)",
                    state.vault.describe()
                )
            } else {
                String::new()
            }
        )),
        vault::StoreThenRecordError::Record {
            why,
            secret_deleted,
        } => error(if secret_deleted {
            format!(
                "the registration could not be recorded, so the new secret was deleted again \
                 (the previous registration, if any, is unchanged): {why}"
            )
        } else {
            format!(
                "the registration could not be recorded, and the new secret could not be \
                 deleted again from {} (entry {account}; no registration uses it): {why}",
                state.vault.describe()
            )
        }),
    }
}

/// Removes a connector: its secret first, then the row and its `connector.change` entry.
pub(crate) async fn connector_remove(state: &Shared, name: String) -> ManageNext {
    if let Err(e) = policy::validate_scope_name("connector", &name) {
        return error(e.to_string());
    }
    let _serial = state.connectors.lock().await;
    let row = match state.writer.ask(|r| Op::Connector(name.clone(), r)).await {
        Ok(Ok(row)) => row,
        Ok(Err(e)) => return error(format!("the connectors cannot be read: {e}")),
        Err(e) => return error(e.to_string()),
    };
    let Some(row) = row else {
        return error(format!(
            "no connector named {name} is registered; `holdcall connector list` shows them"
        ));
    };
    let account = row.account();
    if let Err(e) = vault::run_blocking(&state.vault, move |s| s.delete(&account)).await {
        return error(format!("{e}; nothing was removed"));
    }
    crate::daemon::leak::forget(state, &name);
    let summary = format!("connector {name} removed; its secret was deleted");
    let fields = Fields {
        connector: Some(name.clone()),
        reason: Some(summary.clone()),
        detail: Some(
            serde_json::json!({
                "action": "remove",
                "env_key": row.env_key,
                "command": row.command,
                "pass_env": row.pass_env,
            })
            .to_string(),
        ),
        ..Fields::default()
    };
    let change = journal::ConnectorChange::Remove { name: name.clone() };
    match state
        .writer
        .ask(|reply| Op::ChangeConnector {
            change,
            fields,
            reply,
        })
        .await
    {
        Ok(Ok(entry)) => Next::Reply(ManageResponse::ConnectorChanged {
            message: format!(
                "{summary} (recorded in the journal as entry {})",
                entry.chain_seq
            ),
            chain_seq: Some(entry.chain_seq),
        }),
        Ok(Err(e)) => error(format!(
            "the secret was deleted, but the registration could not be removed: {e}; sessions of \
             {name} now refuse to start; run `holdcall connector remove {name}` again"
        )),
        Err(e) => error(e.to_string()),
    }
}
