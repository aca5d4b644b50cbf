//! Budget changes: one budget per scope, set or removed, in force once journaled.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::daemon::{
    Shared,
    dispatch::{ManageNext, Next, error},
    in_force::current_budgets,
    manage::agent::{is_enrolled, not_enrolled},
    manage::policy::{check_scope, not_recorded, policy_changed},
    writer::Op,
};
use crate::ipc::ManageResponse;
use crate::journal::BudgetChange;
use crate::policy::Scope;
use crate::policy::budget::{self, BudgetScope};

pub(crate) fn budget_scope_check(scope: &BudgetScope) -> Result<(), String> {
    check_scope(&Scope {
        tool: scope.tool.clone(),
        agent: scope.agent.clone(),
        connector: scope.connector.clone(),
    })
}

/// Sets a budget: one per scope. The same cap again changes nothing; another cap is refused
/// (remove the budget first), exactly as a scope holds one rule.
pub(crate) async fn budget_set(state: &Shared, calls: i64, scope: BudgetScope) -> ManageNext {
    if let Err(e) = budget::check_cap(calls) {
        return error(e.to_string());
    }
    if let Err(e) = budget_scope_check(&scope) {
        return error(e);
    }
    // Changes serialise with policy and agent changes.
    let _rows = state.rows.lock().await;
    // As for a rule: a budget may name only an enrolled agent.
    if let Some(a) = &scope.agent
        && !is_enrolled(state, a)
    {
        return error(not_enrolled(a));
    }
    if let Some(existing) = current_budgets(state)
        .iter()
        .find(|r| r.budget.scope() == scope)
    {
        if existing.budget.calls == calls {
            return Next::Reply(ManageResponse::PolicyChanged {
                message: format!(
                    "budget {} already allows {}; nothing changed",
                    existing.budget.id,
                    existing.budget.describe()
                ),
                changed: false,
                chain_seq: None,
            });
        }
        return error(format!(
            "budget {} already covers {} ({}); a scope holds one budget: remove it first with `holdcall policy budget remove`",
            existing.budget.id,
            scope.describe(),
            existing.budget.describe()
        ));
    }
    change_budget(state, BudgetChange::Set { calls, scope }).await
}

pub(crate) async fn budget_remove(state: &Shared, scope: BudgetScope) -> ManageNext {
    if let Err(e) = budget_scope_check(&scope) {
        return error(e);
    }
    let _rows = state.rows.lock().await;
    let Some(existing) = current_budgets(state)
        .iter()
        .find(|r| r.budget.scope() == scope)
        .cloned()
    else {
        return error(format!(
            "no budget covers {}; `holdcall policy list` shows the budgets",
            scope.describe()
        ));
    };
    change_budget(
        state,
        BudgetChange::Remove {
            id: existing.budget.id,
        },
    )
    .await
}

/// Stores the change and its journal entry in one transaction; only after the commit do the
/// new budgets apply.
pub(crate) async fn change_budget(state: &Shared, change: BudgetChange) -> ManageNext {
    match state.writer.ask(|r| Op::ChangeBudget(change, r)).await {
        Ok(Ok((entry, rows, generation))) => {
            if let Ok(mut b) = state.budgets.write() {
                *b = Arc::new(rows);
            }
            state.generation.store(generation, Ordering::Release);
            policy_changed(
                entry.fields.reason.as_deref().unwrap_or("budget changed"),
                &entry,
            )
        }
        Ok(Err(e)) => not_recorded(e),
        Err(e) => error(e.to_string()),
    }
}
