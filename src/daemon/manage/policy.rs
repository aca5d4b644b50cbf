//! Policy changes from the command line: a rule set or removed, a policy file imported; and the
//! policy list as the CLI shows it.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::daemon::{
    DaemonError, Shared,
    dispatch::{ManageNext, Next, error},
    in_force::current_policy,
    manage::agent::{is_enrolled, not_enrolled},
    stored,
    writer::Op,
};
use crate::ipc::{self, ManageResponse};
use crate::journal::{Entry, Fields, NewPolicy, PolicyRow};
use crate::policy::file::{CheckedFile, FilePolicy};
use crate::policy::{self, Effect, PolicySet, Scope, StoredPolicy};

pub(crate) fn listed(r: &PolicyRow) -> ipc::ListedPolicy {
    ipc::ListedPolicy {
        id: r.id.clone(),
        seq: r.seq,
        source: r.source.clone(),
        effect: r.effect.clone(),
        specificity: r.specificity,
        scope: (r.source == "cli").then(|| {
            Scope {
                tool: r.tool.clone(),
                agent: r.agent.clone(),
                connector: r.connector.clone(),
            }
            .describe()
        }),
        text: r.text.clone(),
        created_at: r.created_at.clone(),
    }
}

pub(crate) fn check_scope(scope: &Scope) -> Result<(), String> {
    if let Some(t) = &scope.tool {
        policy::validate_tool_name(t).map_err(|e| e.to_string())?;
    }
    if let Some(a) = &scope.agent {
        policy::validate_scope_name("agent", a).map_err(|e| e.to_string())?;
    }
    if let Some(c) = &scope.connector {
        policy::validate_scope_name("connector", c).map_err(|e| e.to_string())?;
    }
    Ok(())
}

pub(crate) fn same_scope(row: &PolicyRow, scope: &Scope) -> bool {
    row.source == "cli"
        && row.tool == scope.tool
        && row.agent == scope.agent
        && row.connector == scope.connector
}

pub(crate) fn effect_verb(effect: Effect) -> &'static str {
    match effect {
        Effect::Allow => "allowed",
        Effect::Ask => "set to ask",
        Effect::Deny => "denied",
    }
}

pub(crate) async fn policy_set(state: &Shared, effect: Effect, scope: Scope) -> ManageNext {
    if let Err(e) = check_scope(&scope) {
        return error(e);
    }
    let mut rows = state.rows.lock().await;
    if let Some(a) = &scope.agent
        && !is_enrolled(state, a)
    {
        return error(not_enrolled(a));
    }
    if let Some(existing) = rows.iter().find(|r| same_scope(r, &scope)) {
        if existing.effect == effect.as_str() {
            return Next::Reply(ManageResponse::PolicyChanged {
                message: format!(
                    "{} is already {} by rule {}; nothing changed",
                    scope.describe(),
                    effect_verb(effect),
                    existing.id
                ),
                changed: false,
                chain_seq: None,
            });
        }
        return error(format!(
            "rule {} already covers {} ({}); a scope holds one rule: remove it first with `holdcall policy remove`",
            existing.id,
            scope.describe(),
            existing.effect
        ));
    }
    let seq = match state.writer.ask(Op::NextPolicySeq).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return error(format!("the policy table cannot be read: {e}")),
        Err(e) => return error(e.to_string()),
    };
    let id = format!("rule-{seq}");
    let text = policy::cli_rule_text(&id, effect, &scope);
    let new = NewPolicy {
        seq,
        id: id.clone(),
        source: "cli".into(),
        text: text.clone(),
        effect: effect.as_str().into(),
        specificity: policy::specificity_of_scope(&scope),
        tool: scope.tool.clone(),
        agent: scope.agent.clone(),
        connector: scope.connector.clone(),
    };
    let mut proposed = stored(&rows);
    proposed.push(StoredPolicy {
        seq,
        id: id.clone(),
        text,
    });
    let summary = format!("{} {}", effect_verb(effect), scope.describe());
    apply_change(
        state,
        &mut rows,
        proposed,
        vec![new],
        vec![],
        id,
        summary,
        &scope,
    )
    .await
}

pub(crate) async fn policy_remove(state: &Shared, scope: Scope) -> ManageNext {
    if let Err(e) = check_scope(&scope) {
        return error(e);
    }
    let mut rows = state.rows.lock().await;
    let Some(existing) = rows.iter().find(|r| same_scope(r, &scope)).cloned() else {
        return error(format!(
            "no rule made on the command line covers {}; `holdcall policy list` shows the rules",
            scope.describe()
        ));
    };
    let proposed: Vec<StoredPolicy> = stored(&rows)
        .into_iter()
        .filter(|p| p.id != existing.id)
        .collect();
    let was = Effect::parse(&existing.effect)
        .map(effect_verb)
        .unwrap_or("covered");
    let summary = format!("{} no longer {was}", scope.describe());
    apply_change(
        state,
        &mut rows,
        proposed,
        vec![],
        vec![existing.id.clone()],
        existing.id,
        summary,
        &scope,
    )
    .await
}

/// Compiles the proposed set, journals the change with the diff of the whole policy text, and
/// only then puts the new set in force. A change that does not compile, or cannot be recorded,
/// is not made.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn apply_change(
    state: &Shared,
    rows: &mut Vec<PolicyRow>,
    proposed: Vec<StoredPolicy>,
    add: Vec<NewPolicy>,
    remove: Vec<String>,
    policy_id: String,
    summary: String,
    scope: &Scope,
) -> ManageNext {
    let new_set = match PolicySet::compile(&proposed) {
        Ok(s) => s,
        Err(e) => return error(format!("the change does not compile: {e}")),
    };
    let before = current_policy(state).text();
    let diff = policy::unified_diff(&before, &new_set.text(), "policy before", "policy after");
    let fields = Fields {
        tool: scope.tool.clone(),
        agent: scope.agent.clone(),
        connector: scope.connector.clone(),
        policy_id: Some(policy_id),
        reason: Some(summary.clone()),
        detail: Some(diff),
        ..Fields::default()
    };
    match commit_policies(state, rows, new_set, add, remove, fields).await {
        Ok(Ok(entry)) => policy_changed(&summary, &entry),
        Ok(Err(e)) => not_recorded(e),
        Err(e) => error(e.to_string()),
    }
}

/// Hands a policy change (rows and its journal entry, one transaction) to the writer, and only
/// once it is committed puts `new_set` in force, with the rows now stored and the generation
/// the commit started. Ok(Err): why it was not recorded (nothing changed).
pub(crate) async fn commit_policies(
    state: &Shared,
    rows: &mut Vec<PolicyRow>,
    new_set: PolicySet,
    add: Vec<NewPolicy>,
    remove: Vec<String>,
    fields: Fields,
) -> Result<Result<Entry, String>, DaemonError> {
    let result = state
        .writer
        .ask(|reply| Op::ChangePolicies {
            add,
            remove,
            fields,
            validated: new_set.validation_key().to_string(),
            reply,
        })
        .await?;
    let (entry, new_rows, generation) = match result {
        Ok(r) => r,
        Err(e) => return Ok(Err(e)),
    };
    *rows = new_rows;
    if let Ok(mut p) = state.policy.write() {
        *p = Arc::new(new_set);
    }
    state.generation.store(generation, Ordering::Release);
    Ok(Ok(entry))
}

/// The reply to a policy or budget change once its entry is committed.
pub(crate) fn policy_changed(summary: &str, entry: &Entry) -> ManageNext {
    Next::Reply(ManageResponse::PolicyChanged {
        message: format!(
            "{summary} (recorded in the journal as entry {})",
            entry.chain_seq
        ),
        changed: true,
        chain_seq: Some(entry.chain_seq),
    })
}

/// The reply to a policy or budget change its journal entry could not record (nothing changed).
pub(crate) fn not_recorded(e: impl std::fmt::Display) -> ManageNext {
    error(format!(
        "the change could not be recorded, so it was not made: {e}"
    ))
}

/// The `source` of every policy a file contributed: re-importing the file replaces them.
pub(crate) fn file_source(file: &str) -> String {
    format!("file:{file}")
}

/// Why an import is refused for the agents it names that are not enrolled, if it is.
fn unenrolled_in(state: &Shared, checked: &CheckedFile, file: &str) -> Option<String> {
    let unenrolled: Vec<String> = checked
        .policies
        .iter()
        .flat_map(|p| {
            p.agents
                .iter()
                .filter(|a| !is_enrolled(state, a))
                .map(move |a| format!("\n{}: policy {}: {}", p.at, p.id, not_enrolled(a)))
        })
        .collect();
    (!unenrolled.is_empty()).then(|| {
        format!(
            "{file} names agents that are not enrolled; nothing was changed:{}",
            unenrolled.concat()
        )
    })
}

/// A file's policies against the rows in force: those added, those changed (same id, another
/// canonical text), and the ids of what the same file contributed before and no longer holds.
fn compare(
    rows: &[PolicyRow],
    checked: &CheckedFile,
    source: &str,
) -> (Vec<FilePolicy>, Vec<FilePolicy>, Vec<String>) {
    let mut added = Vec::new();
    let mut changed = Vec::new();
    let mut keep_ids = HashSet::new();
    for p in &checked.policies {
        keep_ids.insert(p.id.clone());
        match rows.iter().find(|r| r.id == p.id) {
            Some(r) if crate::policy::file::canonical(&r.text) == p.text => {}
            Some(_) => changed.push(p.clone()),
            None => added.push(p.clone()),
        }
    }
    let removed: Vec<String> = rows
        .iter()
        .filter(|r| r.source == source && !keep_ids.contains(&r.id))
        .map(|r| r.id.clone())
        .collect();
    (added, changed, removed)
}

/// An import in one line: what it did (`verb`) with which file, and the ids it touched.
fn import_summary(
    verb: &str,
    file: &str,
    text: &str,
    added: &[FilePolicy],
    changed: &[FilePolicy],
    removed: &[String],
) -> String {
    let ids = |v: Vec<String>| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    format!(
        "{verb} {file} (sha256 {}): added {}; changed {}; removed {}",
        crate::ids::sha256_hex(text.as_bytes()),
        ids(added.iter().map(|p| p.id.clone()).collect()),
        ids(changed.iter().map(|p| p.id.clone()).collect()),
        ids(removed.to_vec()),
    )
}

/// Imports a policy file: every policy in it is added, changed (same id, different canonical
/// text) or unchanged; what the same file contributed last time and no longer holds is removed.
/// One transaction, one `policy.change` entry with the file's name and SHA-256, the ids and the
/// diff of the whole set's text. A file with any error changes nothing. About 100 lines, kept
/// whole because it runs under the `rows` lock from first read to commit, and its steps (check,
/// compare, build the proposed set, compile, diff, journal and put in force) are already calls;
/// what is left is handing their results from one to the next.
pub(crate) async fn policy_import(
    state: &Shared,
    file: String,
    text: String,
    dry_run: bool,
) -> ManageNext {
    let checked = match crate::policy::file::check(&file, &text) {
        Ok(c) => c,
        Err(refused) => return error(refused.plain()),
    };
    let mut rows = state.rows.lock().await;
    if let Some(refused) = unenrolled_in(state, &checked, &file) {
        return error(refused);
    }
    let source = file_source(&file);
    let (added, changed, removed) = compare(&rows, &checked, &source);
    let summary = |verb: &str| import_summary(verb, &file, &text, &added, &changed, &removed);
    let mut next = match state.writer.ask(Op::NextPolicySeq).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return error(format!("the policy table cannot be read: {e}")),
        Err(e) => return error(e.to_string()),
    };
    let mut proposed: Vec<StoredPolicy> = stored(&rows)
        .into_iter()
        .filter(|p| !removed.contains(&p.id) && !changed.iter().any(|c| c.id == p.id))
        .collect();
    let mut add = Vec::new();
    for p in added.iter().chain(&changed) {
        let (effect, specificity) = match policy::parse_effect_and_specificity(&p.id, &p.text) {
            Ok(x) => x,
            Err(e) => return error(format!("the import does not compile: {e}")),
        };
        proposed.push(StoredPolicy {
            seq: next,
            id: p.id.clone(),
            text: p.text.clone(),
        });
        add.push(NewPolicy {
            seq: next,
            id: p.id.clone(),
            source: source.clone(),
            text: p.text.clone(),
            effect: effect.as_str().into(),
            specificity,
            tool: None,
            agent: None,
            connector: None,
        });
        next += 1;
    }
    let new_set = match PolicySet::compile(&proposed) {
        Ok(s) => s,
        Err(e) => {
            return error(format!(
                "the import does not compile with the policies in force: {e}"
            ));
        }
    };
    let diff = policy::unified_diff(
        &current_policy(state).text(),
        &new_set.text(),
        "policy before",
        "policy after",
    );
    let mut remove = removed.clone();
    remove.extend(changed.iter().map(|p| p.id.clone()));
    if dry_run || diff.is_empty() && remove.is_empty() && add.is_empty() {
        let message = if diff.is_empty() && add.is_empty() && remove.is_empty() {
            format!("{file}: nothing to change")
        } else {
            summary("would import")
        };
        return Next::Reply(ManageResponse::PolicyImported {
            message,
            diff,
            changed: false,
            chain_seq: None,
        });
    }
    let message = summary("imported");
    let fields = Fields {
        client: Some(file.clone()),
        reason: Some(message.clone()),
        detail: Some(diff.clone()),
        ..Fields::default()
    };
    match commit_policies(state, &mut rows, new_set, add, remove, fields).await {
        Ok(Ok(entry)) => Next::Reply(ManageResponse::PolicyImported {
            message: format!(
                "{message} (recorded in the journal as entry {})",
                entry.chain_seq
            ),
            diff,
            changed: true,
            chain_seq: Some(entry.chain_seq),
        }),
        Ok(Err(e)) => error(format!(
            "the import could not be recorded, so nothing changed: {e}"
        )),
        Err(e) => error(e.to_string()),
    }
}
