//! What is in force: the compiled policy set, budgets and refusal as one decision reads them,
//! and reloading them from the tables after a stale decision.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::daemon::{Shared, stored, writer::Op};
use crate::journal::PolicyRow;
use crate::policy::PolicySet;
use crate::policy::budget::BudgetRow;

pub(crate) fn current_budgets(state: &Shared) -> Arc<Vec<BudgetRow>> {
    match state.budgets.read() {
        Ok(b) => Arc::clone(&b),
        Err(poisoned) => Arc::clone(&poisoned.into_inner()),
    }
}

pub(crate) fn current_policy(state: &Shared) -> Arc<PolicySet> {
    match state.policy.read() {
        Ok(p) => Arc::clone(&p),
        // A poisoned lock means a writer panicked mid-swap; deciding on nothing is safer than
        // guessing, and an empty set that errors is not available, so keep the last value.
        Err(poisoned) => Arc::clone(&poisoned.into_inner()),
    }
}

/// The set in force as one decision reads it: its generation first, then the set and budgets
/// (installed before the generation is stored, so a decision can only ever be made with a set
/// at least as new as its generation says; the writer refuses it otherwise).
pub(crate) struct InForceNow {
    pub(crate) generation: u64,
    pub(crate) set: Arc<PolicySet>,
    pub(crate) budgets: Arc<Vec<BudgetRow>>,
    pub(crate) refusal: Option<String>,
}

pub(crate) fn in_force(state: &Shared) -> InForceNow {
    let generation = state.generation.load(Ordering::Acquire);
    InForceNow {
        generation,
        set: current_policy(state),
        budgets: current_budgets(state),
        refusal: current_refusal(state),
    }
}

pub(crate) fn current_refusal(state: &Shared) -> Option<String> {
    match state.refusal.read() {
        Ok(r) => r.clone(),
        Err(_) => Some("the daemon's state is damaged; run `holdcall daemon restart`".into()),
    }
}

/// The reason every call is refused while the tables do not match the journal.
pub(crate) fn mismatch_refusal(mismatches: &[String]) -> Option<String> {
    let first = mismatches.first()?;
    for m in mismatches {
        tracing::error!("the tables do not match the journal: {m}");
    }
    let more = match mismatches.len() {
        1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    Some(format!(
        "the policies, budgets or agents tables do not match the journal: {first}{more}; \
         every call is refused until they do: run `holdcall verify`"
    ))
}

/// After a decision came back stale: once no change is in flight (`rows` is held by every
/// change until its set is in force), a set newer than the one the decision used is in force,
/// or, when there is none, what is in force is reloaded from the database.
pub(crate) async fn refresh(state: &Shared, used_gen: u64) {
    let mut rows = state.rows.lock().await;
    if state.generation.load(Ordering::Acquire) != used_gen {
        return;
    }
    if let Err(e) = reload_locked(state, &mut rows).await {
        tracing::error!("what is in force could not be reloaded: {e}");
    }
}

/// Reloads the policies, budgets and enrolments from the tables, checked against the journal
/// (a mismatch, or a stored policy that does not compile, refuses every call), and puts them in
/// force under a new generation. Called with `rows` held.
pub(crate) async fn reload_locked(state: &Shared, rows: &mut Vec<PolicyRow>) -> Result<(), String> {
    let (generation, loaded) = match state.writer.ask(Op::Reload).await {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => return Err(e),
        Err(e) => return Err(e.to_string()),
    };
    tracing::info!("reloaded the policy, budgets and enrolments from the database");
    let mut refusal = mismatch_refusal(&loaded.mismatches);
    match PolicySet::compile(&stored(&loaded.policies)) {
        Ok(set) => {
            if let Ok(mut p) = state.policy.write() {
                *p = Arc::new(set);
            }
        }
        Err(e) => {
            tracing::error!("the stored policy does not compile: {e}");
            refusal.get_or_insert_with(|| {
                format!(
                    "the policy stored in the database does not compile ({e}); every call is \
                     refused: run `holdcall verify`"
                )
            });
        }
    }
    if let Ok(mut b) = state.budgets.write() {
        *b = Arc::new(loaded.budgets);
    }
    if let Ok(mut a) = state.agents.write() {
        *a = Arc::new(loaded.agents);
    }
    if let Ok(mut p) = state.pins.write() {
        *p = crate::daemon::pins::pins_by_connector(loaded.pins);
    }
    if let Ok(mut s) = state.settings.write() {
        *s = loaded.settings;
    }
    if let Ok(mut r) = state.refusal.write() {
        *r = refusal;
    }
    *rows = loaded.policies;
    state.generation.store(generation, Ordering::Release);
    Ok(())
}
