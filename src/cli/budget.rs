//! `holdcall policy budget …`: caps on the calls one relay session may have allowed, and their
//! lines in `policy list`.

use std::io::Write;

use super::args::{BudgetCmd, BudgetTools, ScopeArgs};
use super::policy::{changed, check_scope_locally, scope};
use super::render::local_time;
use super::{CliError, ask_daemon};
use crate::ipc::ManageRequest;
use crate::limits;
use crate::text::visible;

fn budget_scope(
    which: BudgetTools,
    s: ScopeArgs,
) -> Result<crate::policy::budget::BudgetScope, CliError> {
    let sc = crate::policy::budget::BudgetScope {
        tool: which.tool,
        agent: s.agent,
        connector: s.connector,
    };
    check_scope_locally(&scope(
        sc.tool.clone(),
        ScopeArgs {
            agent: sc.agent.clone(),
            connector: sc.connector.clone(),
        },
    ))?;
    Ok(sc)
}

pub(super) fn policy_budget(
    action: Option<BudgetCmd>,
    calls: Option<String>,
    which: BudgetTools,
    s: ScopeArgs,
) -> Result<i32, CliError> {
    if let Some(BudgetCmd::Remove { which, scope: s }) = action {
        let sc = budget_scope(which, s)?;
        return changed(ask_daemon(ManageRequest::BudgetRemove { scope: sc })?);
    }
    let given = calls.unwrap_or_default();
    let bad = || crate::policy::budget::BadCap {
        given: format!("{given:?}"),
        max: limits::BUDGET_CALLS_MAX,
    };
    let n = given.trim().parse::<i64>().map_err(|_| bad())?;
    let n = crate::policy::budget::check_cap(n)?;
    let sc = budget_scope(which, s)?;
    changed(ask_daemon(ManageRequest::BudgetSet {
        calls: n,
        scope: sc,
    })?)
}

pub(super) fn write_budgets(
    out: &mut impl Write,
    budgets: &[crate::policy::budget::BudgetRow],
) -> std::io::Result<()> {
    if budgets.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "Budgets (per relay session; only what the rules allow counts):"
    )?;
    for b in budgets {
        writeln!(
            out,
            "{}  {}  (since {})",
            b.budget.id,
            visible(&b.budget.describe()),
            local_time(&b.created_at)
        )?;
    }
    writeln!(out)?;
    Ok(())
}
