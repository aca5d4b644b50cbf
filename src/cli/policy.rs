//! `holdcall policy …`: rules set and removed through the daemon, files validated, imported and
//! tested, the set exported, its history replayed, a call explained.

use std::io::Write;
use std::path::PathBuf;

use super::args::{PolicyCmd, ScopeArgs};
use super::budget::{policy_budget, write_budgets};
use super::log::open_reader;
use super::render::{local_time, visible_lines};
use super::{CliError, ask_daemon, ask_daemon_within};
use crate::config::Home;
use crate::ipc::{ManageRequest, ManageResponse};
use crate::journal::{Entry, LogFilter};
use crate::policy::{Effect, Explanation, Scope};
use crate::text::visible;

pub(super) fn scope(tool: Option<String>, s: ScopeArgs) -> Scope {
    Scope {
        tool,
        agent: s.agent,
        connector: s.connector,
    }
}

pub(super) fn policy_cmd(action: PolicyCmd) -> Result<i32, CliError> {
    let (effect, sc) = match action {
        PolicyCmd::Deny { tool, scope: s } => (Effect::Deny, scope(Some(tool), s)),
        PolicyCmd::Allow { tool, scope: s } => (Effect::Allow, scope(Some(tool), s)),
        PolicyCmd::Ask { tool, scope: s } => (Effect::Ask, scope(Some(tool), s)),
        PolicyCmd::Default { effect, scope: s } => (effect.into(), scope(None, s)),
        PolicyCmd::Remove { tool, scope: s, .. } => {
            let sc = scope(tool, s);
            check_scope_locally(&sc)?;
            return changed(ask_daemon_for_change(ManageRequest::PolicyRemove {
                scope: sc,
            })?);
        }
        PolicyCmd::List { json } => return policy_list(json),
        PolicyCmd::Explain {
            tool,
            scope: s,
            arguments,
            json,
        } => return policy_explain(tool, s, arguments, json),
        PolicyCmd::Import { file, dry_run } => return policy_import(&file, dry_run),
        PolicyCmd::Export { output } => return policy_export(output),
        PolicyCmd::Validate { file } => return policy_validate(&file),
        PolicyCmd::Diff { file } => return policy_import(&file, true),
        PolicyCmd::History => return policy_history(),
        PolicyCmd::Show { at } => return policy_show(at),
        PolicyCmd::Test { cases, policy } => return policy_test(&cases, policy.as_deref()),
        PolicyCmd::Budget {
            action,
            calls,
            which,
            scope,
        } => return policy_budget(action, calls, which, scope),
    };
    check_scope_locally(&sc)?;
    changed(ask_daemon_for_change(ManageRequest::PolicySet {
        effect,
        scope: sc,
    })?)
}

/// Bad names are refused before anything is sent, with the same words the daemon would use.
pub(super) fn check_scope_locally(sc: &Scope) -> Result<(), CliError> {
    if let Some(t) = &sc.tool {
        crate::policy::validate_tool_name(t)?;
    }
    if let Some(a) = &sc.agent {
        crate::policy::validate_scope_name("agent", a)?;
    }
    if let Some(c) = &sc.connector {
        crate::policy::validate_scope_name("connector", c)?;
    }
    Ok(())
}

pub(super) fn changed(resp: ManageResponse) -> Result<i32, CliError> {
    match resp {
        ManageResponse::PolicyChanged { message, .. } => {
            println!("{}", visible_lines(&message));
            Ok(0)
        }
        _ => Err(CliError::Unexpected),
    }
}

fn policy_list(json: bool) -> Result<i32, CliError> {
    let ManageResponse::PolicyList {
        policies,
        budgets,
        drift_guard,
    } = ask_daemon(ManageRequest::PolicyList)?
    else {
        return Err(CliError::Unexpected);
    };
    let mut out = std::io::stdout().lock();
    if json {
        // One array: the policies as before, then each budget as an object with
        // `"kind": "budget"` (policies carry no `kind`).
        let mut items: Vec<serde_json::Value> = policies
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()
            .map_err(std::io::Error::other)?;
        for b in &budgets {
            let mut v = serde_json::to_value(b).map_err(std::io::Error::other)?;
            if let Some(o) = v.as_object_mut() {
                o.insert("kind".into(), "budget".into());
                o.insert("scope".into(), b.budget.scope().describe().into());
            }
            items.push(v);
        }
        // Last, the drift guard (decision 0016), with an id as every other object has.
        items.push(
            serde_json::json!({"kind": "drift-guard", "id": "drift-guard", "effect": drift_guard}),
        );
        serde_json::to_writer_pretty(&mut out, &items).map_err(std::io::Error::other)?;
        writeln!(out)?;
        return Ok(0);
    }
    write_budgets(&mut out, &budgets)?;
    writeln!(
        out,
        "Drift guard: {drift_guard} (a call to a tool whose definition changed since it was pinned is {}; `holdcall tools drift ask|deny|allow`)",
        match drift_guard.as_str() {
            "deny" => "refused",
            "allow" => "decided by the rules alone",
            _ => "held for a person",
        }
    )?;
    if policies.is_empty() {
        writeln!(
            out,
            "(no rules: every call is allowed, and every call is still journaled)"
        )?;
        return Ok(0);
    }
    for p in &policies {
        writeln!(
            out,
            "{}  {}  {}  (specificity {}, since {})",
            visible(&p.id),
            p.effect,
            visible(p.scope.as_deref().unwrap_or("(imported)")),
            p.specificity,
            local_time(&p.created_at)
        )?;
        for line in p.text.lines() {
            writeln!(out, "    {}", visible(line))?;
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        "Precedence: an exact tool beats a default; naming the agent, and naming the connector, each beat not naming it; a tie goes to deny, then ask, then allow, then the oldest rule; no matching rule allows."
    )?;
    Ok(0)
}

/// Reads a policy file and checks it locally, so errors show with their source; the daemon
/// checks again before it changes anything.
fn read_policy_file(path: &std::path::Path) -> Result<(String, String, Vec<String>), CliError> {
    let text = std::fs::read_to_string(path)?;
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let checked = crate::policy::file::check(&name, &text)?;
    Ok((name, text, checked.warnings))
}

fn policy_validate(path: &std::path::Path) -> Result<i32, CliError> {
    let (name, text, warnings) = read_policy_file(path)?;
    for w in &warnings {
        eprintln!("{w}");
    }
    let n = crate::policy::file::split(&text).len();
    println!("{name}: {n} policies, valid ({} warnings)", warnings.len());
    Ok(0)
}

/// A policy change: the daemon compiles and validates the whole proposed set before it
/// answers, so it is waited for longer than a question (`limits::POLICY_CHANGE_TIMEOUT`).
fn ask_daemon_for_change(req: ManageRequest) -> Result<ManageResponse, CliError> {
    ask_daemon_within(req, crate::limits::POLICY_CHANGE_TIMEOUT)
}

fn policy_import(path: &std::path::Path, dry_run: bool) -> Result<i32, CliError> {
    let (file, text, warnings) = read_policy_file(path)?;
    for w in &warnings {
        eprintln!("{w}");
    }
    let ManageResponse::PolicyImported { message, diff, .. } =
        ask_daemon_for_change(ManageRequest::PolicyImport {
            file,
            text,
            dry_run,
        })?
    else {
        return Err(CliError::Unexpected);
    };
    let mut out = std::io::stdout().lock();
    if dry_run {
        write!(out, "{diff}")?;
    }
    writeln!(out, "{}", visible_lines(&message))?;
    Ok(0)
}

/// The policy a `policy test` runs against: FILE alone, or the set in force (as exported).
fn policy_under_test(
    policy: Option<&std::path::Path>,
) -> Result<(String, crate::policy::PolicySet), CliError> {
    let (name, text) = match policy {
        Some(path) => {
            let (name, text, _) = read_policy_file(path)?;
            (name, text)
        }
        None => {
            let ManageResponse::PolicyText { text } = ask_daemon(ManageRequest::PolicyExport)?
            else {
                return Err(CliError::Unexpected);
            };
            ("the policy in force".to_string(), text)
        }
    };
    let checked = crate::policy::file::check(&name, &text)?;
    let stored: Vec<crate::policy::StoredPolicy> = checked
        .policies
        .into_iter()
        .zip(1..)
        .map(|(p, seq)| crate::policy::StoredPolicy {
            seq,
            id: p.id,
            text: p.text,
        })
        .collect();
    Ok((name, crate::policy::PolicySet::compile(&stored)?))
}

fn policy_test(cases: &std::path::Path, policy: Option<&std::path::Path>) -> Result<i32, CliError> {
    let text = std::fs::read_to_string(cases)?;
    let cases = crate::policy::cases::parse(&cases.display().to_string(), &text)?;
    let (name, set) = policy_under_test(policy)?;
    let results = crate::policy::cases::run(&set, &cases);
    let mut out = std::io::stdout().lock();
    let mut failed = 0usize;
    for r in &results {
        if r.passed() {
            writeln!(out, "pass  {}", visible(&r.case.name))?;
        } else {
            failed += 1;
            writeln!(
                out,
                "FAIL  {} ({}): expected {}, got {}{}: {}",
                visible(&r.case.name),
                r.case.at,
                r.case.expect.as_str(),
                r.decision.effect.as_str(),
                r.decision
                    .policy_id
                    .as_deref()
                    .map_or_else(String::new, |id| format!(" by {id}")),
                visible(&r.decision.reason)
            )?;
        }
    }
    writeln!(
        out,
        "{} of {} cases passed against {name}",
        results.len() - failed,
        results.len()
    )?;
    Ok(if failed == 0 { 0 } else { 1 })
}

fn policy_export(output: Option<PathBuf>) -> Result<i32, CliError> {
    let ManageResponse::PolicyText { text } = ask_daemon(ManageRequest::PolicyExport)? else {
        return Err(CliError::Unexpected);
    };
    match output {
        Some(path) => std::fs::write(path, text)?,
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
    }
    Ok(0)
}

fn policy_changes() -> Result<Vec<Entry>, CliError> {
    let home = Home::from_env()?;
    let reader = open_reader(&home)?;
    Ok(reader.entries(&LogFilter {
        kind: Some("policy.change".into()),
        ..LogFilter::default()
    })?)
}

fn policy_history() -> Result<i32, CliError> {
    let mut out = std::io::stdout().lock();
    for e in policy_changes()? {
        writeln!(
            out,
            "entry {}  {}  {}",
            e.chain_seq,
            local_time(&e.occurred_at),
            visible(e.fields.reason.as_deref().unwrap_or(""))
        )?;
        write!(out, "{}", e.fields.detail.as_deref().unwrap_or(""))?;
        writeln!(out)?;
    }
    Ok(0)
}

fn policy_show(at: i64) -> Result<i32, CliError> {
    let mut text = String::new();
    for e in policy_changes()?.into_iter().filter(|e| e.chain_seq <= at) {
        text = crate::policy::apply_unified_diff(&text, e.fields.detail.as_deref().unwrap_or(""))
            .map_err(|why| {
            CliError::Refused(format!(
                "the diff of entry {} does not apply: {why}",
                e.chain_seq
            ))
        })?;
    }
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(0)
}

fn policy_explain(
    tool: String,
    s: ScopeArgs,
    arguments: Option<String>,
    json: bool,
) -> Result<i32, CliError> {
    crate::policy::validate_tool_name(&tool)?;
    let ManageResponse::Explain {
        explanation,
        budgets,
    } = ask_daemon(ManageRequest::PolicyExplain {
        agent: s.agent,
        connector: s.connector,
        tool,
        arguments,
    })?
    else {
        return Err(CliError::Unexpected);
    };
    let mut out = std::io::stdout().lock();
    if json {
        let mut v = serde_json::to_value(&explanation).map_err(std::io::Error::other)?;
        if let Some(o) = v.as_object_mut() {
            o.insert(
                "budgets".into(),
                serde_json::to_value(&budgets).map_err(std::io::Error::other)?,
            );
        }
        serde_json::to_writer_pretty(&mut out, &v).map_err(std::io::Error::other)?;
        writeln!(out)?;
    } else {
        write_explanation(&mut out, &explanation)?;
        if budgets.is_empty() {
            writeln!(out, "  budgets: none applies")?;
        } else {
            writeln!(
                out,
                "  budgets that apply if the rules allow it (per relay session, oldest checked first):"
            )?;
            for b in &budgets {
                writeln!(
                    out,
                    "    {}  {}",
                    b.budget.id,
                    visible(&b.budget.describe())
                )?;
            }
        }
    }
    Ok(0)
}

fn write_explanation(out: &mut impl Write, e: &Explanation) -> std::io::Result<()> {
    writeln!(
        out,
        "tool {} for {} on {}: {}",
        visible(&e.tool),
        e.agent
            .as_deref()
            .map(|a| format!("agent {}", visible(a)))
            .unwrap_or_else(|| "an unenrolled agent".into()),
        if e.connector.is_empty() {
            "an unnamed connector".to_string()
        } else {
            format!("connector {}", visible(&e.connector))
        },
        e.decision.effect.as_str().to_uppercase()
    )?;
    writeln!(out, "  why: {}", visible(&e.decision.reason))?;
    writeln!(out, "  decided by: {}", e.tie_break)?;
    if let Some(w) = &e.winner {
        writeln!(
            out,
            "  winning rule {} (specificity {}):",
            visible(&w.id),
            w.specificity
        )?;
        for line in w.text.lines() {
            writeln!(out, "    {}", visible(line))?;
        }
    }
    if !e.considered.is_empty() {
        writeln!(out, "  every rule that could apply:")?;
        for c in &e.considered {
            write!(
                out,
                "    {}  {}  specificity {}: {}",
                visible(&c.id),
                c.effect.as_str(),
                c.specificity,
                c.outcome
            )?;
            match &c.detail {
                Some(d) => writeln!(out, " ({})", visible(d))?,
                None => writeln!(out)?,
            }
        }
    }
    if e.matching.len() > 1 {
        writeln!(out, "  every matching rule, most specific first:")?;
        for m in &e.matching {
            writeln!(
                out,
                "    {}  {}  specificity {}",
                visible(&m.id),
                m.effect.as_str(),
                m.specificity
            )?;
        }
    }
    let ids = |v: &[String]| {
        if v.is_empty() {
            "no policy satisfied".to_string()
        } else {
            format!("satisfied: {}", visible(&v.join(", ")))
        }
    };
    writeln!(
        out,
        "  Cedar's own answers (permits and forbids are asked separately):"
    )?;
    writeln!(
        out,
        "    permits: {} ({})",
        e.cedar.permit_decision,
        ids(&e.cedar.permit_reasons)
    )?;
    writeln!(
        out,
        "    forbids: {} ({})",
        e.cedar.forbid_decision,
        ids(&e.cedar.forbid_reasons)
    )?;
    if e.cedar.errors.is_empty() {
        writeln!(out, "    errors: none")?;
    } else {
        for err in &e.cedar.errors {
            writeln!(out, "    error: {err}")?;
        }
    }
    Ok(())
}
