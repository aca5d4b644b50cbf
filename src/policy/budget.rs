//! Budgets: caps on how many calls one relay session may have allowed within a scope, and the
//! per-session counts they are checked against (also the counts a hand-written policy reads as
//! `context.session`).
//!
//! Owns: what a budget's scope matches (the same matching as a rule's: an exact tool or every
//! tool, an agent or every agent, a connector or every connector), the order budgets are checked
//! in, the words of a budget refusal, and the session's counters. A budget only narrows: it is
//! asked after the rules allowed a call, and it can turn that allow into a refusal, never a
//! refusal into an allow. Refused calls are never charged; a retry of a call the server asked
//! input for is never charged twice (the daemon decides which calls are retries).
//!
//! Must never: do I/O, or count anything but what the daemon tells it happened.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::limits;

/// One budget in force: at most `calls` allowed calls per relay session within its scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Budget {
    /// `budget-<seq>`.
    pub id: String,
    /// Insertion order: budgets are checked oldest first.
    pub seq: i64,
    pub calls: i64,
    /// `None` = every tool.
    pub tool: Option<String>,
    pub agent: Option<String>,
    pub connector: Option<String>,
}

/// The scope of a budget, as given on the command line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BudgetScope {
    /// `None` = every tool (`--all-tools`).
    pub tool: Option<String>,
    pub agent: Option<String>,
    pub connector: Option<String>,
}

/// Who calls which tool where: what a budget's scope is matched against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallScope<'a> {
    pub agent: Option<&'a str>,
    pub connector: &'a str,
    pub tool: &'a str,
}

impl BudgetScope {
    /// Whether a call falls in this scope: the same matching as a rule's scope.
    pub(crate) fn applies(&self, call: &CallScope<'_>) -> bool {
        self.tool.as_deref().is_none_or(|t| t == call.tool)
            && self.agent.as_deref().is_none_or(|a| Some(a) == call.agent)
            && self
                .connector
                .as_deref()
                .is_none_or(|c| c == call.connector)
    }

    /// "tool delete_file" or "every tool".
    pub(crate) fn what(&self) -> String {
        match &self.tool {
            Some(t) => format!("tool {}", crate::policy::display_name(t)),
            None => "every tool".to_string(),
        }
    }

    /// "tool echo for every agent on connector fs".
    pub(crate) fn describe(&self) -> String {
        let agent = match &self.agent {
            Some(a) => format!("agent {}", crate::policy::display_name(a)),
            None => "every agent".to_string(),
        };
        let connector = match &self.connector {
            Some(c) => format!("connector {}", crate::policy::display_name(c)),
            None => "every connector".to_string(),
        };
        format!("{} for {agent} on {connector}", self.what())
    }
}

impl Budget {
    pub(crate) fn scope(&self) -> BudgetScope {
        BudgetScope {
            tool: self.tool.clone(),
            agent: self.agent.clone(),
            connector: self.connector.clone(),
        }
    }

    /// "at most 2 calls of tool echo per relay session, for every agent on every connector".
    pub(crate) fn describe(&self) -> String {
        let scope = self.scope();
        format!(
            "at most {} {} of {} per relay session, {}",
            self.calls,
            if self.calls == 1 { "call" } else { "calls" },
            scope.what(),
            scope
                .describe()
                .split_once(" for ")
                .map_or(String::new(), |(_, rest)| format!("for {rest}"))
        )
    }
}

/// A cap given on the command line that no budget may hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("a budget is 1 to {max} calls per session; {given} is not")]
#[diagnostic(
    code(holdcall::budget::calls),
    help(
        "give a whole number of calls from 1 to {max}; to lift a budget, remove it with `holdcall policy budget remove`"
    )
)]
pub struct BadCap {
    pub given: String,
    pub max: u32,
}

/// Checks a cap: a whole number from 1 to `limits::BUDGET_CALLS_MAX`.
pub(crate) fn check_cap(calls: i64) -> Result<i64, BadCap> {
    if (1..=i64::from(limits::BUDGET_CALLS_MAX)).contains(&calls) {
        Ok(calls)
    } else {
        Err(BadCap {
            given: calls.to_string(),
            max: limits::BUDGET_CALLS_MAX,
        })
    }
}

/// Why an allowed call was refused by a budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BudgetRefusal {
    /// The first matching budget (oldest first) without room.
    Exhausted {
        budget_id: String,
        used: i64,
        cap: i64,
        what: String,
    },
    /// The session already counts `limits::SESSION_TOOL_COUNTS_MAX` distinct tools.
    TooManyTools,
}

impl BudgetRefusal {
    /// The journal's `reason` for the refusal.
    pub(crate) fn reason(&self) -> String {
        match self {
            BudgetRefusal::Exhausted {
                budget_id,
                used,
                cap,
                what,
            } => {
                format!("budget {budget_id}: {used} of {cap} calls of {what} used in this session")
            }
            BudgetRefusal::TooManyTools => format!(
                "this session already had calls of {} different tools allowed, the most one session may count",
                limits::SESSION_TOOL_COUNTS_MAX
            ),
        }
    }

    /// The journal's `policy_id`: the budget's id.
    pub(crate) fn policy_id(&self) -> Option<String> {
        match self {
            BudgetRefusal::Exhausted { budget_id, .. } => Some(budget_id.clone()),
            BudgetRefusal::TooManyTools => None,
        }
    }
}

/// The counts of one session, before the call being decided: what a policy reads as
/// `context.session`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SessionCounts {
    /// Tool calls decided so far in this session (retries included, whatever the decision).
    pub calls: i64,
    /// Calls allowed and charged so far (a retry of an input_required call is not charged again).
    pub allowed: i64,
    /// Calls refused so far (by a rule, a budget, or for want of a decision).
    pub refused: i64,
    /// Allowed (charged) calls of this call's tool so far.
    pub tool_calls: i64,
}

/// One session's counters. Counts saturate rather than wrap.
#[derive(Debug, Clone, Default)]
pub(crate) struct Counters {
    calls: i64,
    allowed: i64,
    refused: i64,
    per_tool: HashMap<String, i64>,
}

impl Counters {
    /// The counts before a call of `tool`.
    pub(crate) fn snapshot(&self, tool: &str) -> SessionCounts {
        SessionCounts {
            calls: self.calls,
            allowed: self.allowed,
            refused: self.refused,
            tool_calls: self.per_tool.get(tool).copied().unwrap_or(0),
        }
    }

    /// Calls within `budget`'s tool scope charged so far. The session has one agent and one
    /// connector, so whether the budget binds the session at all is `applies`'s question.
    fn used(&self, budget: &Budget) -> i64 {
        match &budget.tool {
            Some(t) => self.per_tool.get(t).copied().unwrap_or(0),
            None => self.allowed,
        }
    }

    /// The first budget (oldest first) that applies to `call` and has no room left.
    pub(crate) fn check<'a>(
        &self,
        budgets: impl IntoIterator<Item = &'a Budget>,
        call: &CallScope<'_>,
    ) -> Result<(), BudgetRefusal> {
        let mut ordered: Vec<&Budget> = budgets
            .into_iter()
            .filter(|b| b.scope().applies(call))
            .collect();
        ordered.sort_by_key(|b| b.seq);
        for b in ordered {
            let used = self.used(b);
            if used >= b.calls {
                return Err(BudgetRefusal::Exhausted {
                    budget_id: b.id.clone(),
                    used,
                    cap: b.calls,
                    what: b.scope().what(),
                });
            }
        }
        if !self.per_tool.contains_key(call.tool)
            && self.per_tool.len() >= limits::SESSION_TOOL_COUNTS_MAX
        {
            return Err(BudgetRefusal::TooManyTools);
        }
        Ok(())
    }

    /// Charges one allowed (or approved) call, if every budget that applies has room; a refusal
    /// charges nothing. This is the one way a call is counted as allowed.
    pub(crate) fn charge<'a>(
        &mut self,
        budgets: impl IntoIterator<Item = &'a Budget>,
        call: &CallScope<'_>,
    ) -> Result<(), BudgetRefusal> {
        self.check(budgets, call)?;
        self.allowed = self.allowed.saturating_add(1);
        let n = self.per_tool.entry(call.tool.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        Ok(())
    }

    /// Takes back a charge whose decision could not be recorded (so the call did not run).
    pub(crate) fn refund(&mut self, tool: &str) {
        self.allowed = self.allowed.saturating_sub(1).max(0);
        if let Some(n) = self.per_tool.get_mut(tool) {
            *n = n.saturating_sub(1).max(0);
        }
    }

    /// One more call decided (whatever the decision).
    pub(crate) fn note_decided(&mut self) {
        self.calls = self.calls.saturating_add(1);
    }

    /// One more call refused.
    pub(crate) fn note_refused(&mut self) {
        self.refused = self.refused.saturating_add(1);
    }

    /// Takes back `note_decided` for a decision that was not recorded because the policy in
    /// force changed meanwhile (the call is decided again).
    pub(crate) fn forget_decided(&mut self) {
        self.calls = self.calls.saturating_sub(1).max(0);
    }

    /// Takes back `note_refused`, for the same reason.
    pub(crate) fn forget_refused(&mut self) {
        self.refused = self.refused.saturating_sub(1).max(0);
    }
}

/// A budget as stored.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct BudgetRow {
    #[serde(flatten)]
    pub budget: Budget,
    pub created_at: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(seq: i64, calls: i64, tool: Option<&str>) -> Budget {
        Budget {
            id: format!("budget-{seq}"),
            seq,
            calls,
            tool: tool.map(str::to_string),
            agent: None,
            connector: None,
        }
    }

    fn call<'a>(tool: &'a str) -> CallScope<'a> {
        CallScope {
            agent: None,
            connector: "fs",
            tool,
        }
    }

    #[test]
    fn a_budget_of_two_refuses_the_third_charge_and_names_itself() {
        let budgets = [budget(1, 2, Some("echo"))];
        let mut c = Counters::default();
        assert!(c.charge(&budgets, &call("echo")).is_ok());
        assert!(c.charge(&budgets, &call("echo")).is_ok());
        let refused = c.charge(&budgets, &call("echo")).unwrap_err();
        assert_eq!(
            refused.reason(),
            "budget budget-1: 2 of 2 calls of tool echo used in this session"
        );
        assert_eq!(refused.policy_id().as_deref(), Some("budget-1"));
        assert_eq!(
            c.snapshot("echo").tool_calls,
            2,
            "a refusal charges nothing"
        );
    }

    #[test]
    fn a_one_tool_budget_does_not_count_other_tools_and_an_all_tools_budget_counts_every_tool() {
        let one = [budget(1, 1, Some("echo"))];
        let mut c = Counters::default();
        assert!(c.charge(&one, &call("other")).is_ok());
        assert!(c.charge(&one, &call("other")).is_ok());
        assert!(c.charge(&one, &call("echo")).is_ok());
        let all = [budget(2, 3, None)];
        let refused = c.check(&all, &call("third")).unwrap_err();
        assert_eq!(
            refused.reason(),
            "budget budget-2: 3 of 3 calls of every tool used in this session"
        );
    }

    #[test]
    fn the_oldest_budget_without_room_is_the_one_named() {
        let budgets = [budget(5, 1, None), budget(3, 1, Some("echo"))];
        let mut c = Counters::default();
        assert!(c.charge(&budgets, &call("echo")).is_ok());
        assert_eq!(
            c.check(&budgets, &call("echo"))
                .unwrap_err()
                .policy_id()
                .as_deref(),
            Some("budget-3")
        );
    }

    #[test]
    fn an_agent_or_connector_budget_binds_only_its_scope() {
        let mut b = budget(1, 1, None);
        b.agent = Some("claude".into());
        let other_conn = Budget {
            connector: Some("git".into()),
            ..budget(2, 1, None)
        };
        let budgets = [b, other_conn];
        let mut c = Counters::default();
        for _ in 0..3 {
            assert!(c.charge(&budgets, &call("echo")).is_ok());
        }
        let claude = CallScope {
            agent: Some("claude"),
            ..call("echo")
        };
        assert!(c.check(&budgets, &claude).is_err());
    }

    #[test]
    fn a_refund_takes_back_exactly_one_charge() {
        let budgets = [budget(1, 1, Some("echo"))];
        let mut c = Counters::default();
        assert!(c.charge(&budgets, &call("echo")).is_ok());
        c.refund("echo");
        assert_eq!(c.snapshot("echo"), SessionCounts::default());
        assert!(c.charge(&budgets, &call("echo")).is_ok());
    }

    #[test]
    fn caps_are_one_to_the_limit() {
        assert!(check_cap(0).is_err());
        assert!(check_cap(-1).is_err());
        assert!(check_cap(1).is_ok());
        assert!(check_cap(i64::from(limits::BUDGET_CALLS_MAX)).is_ok());
        assert!(check_cap(i64::from(limits::BUDGET_CALLS_MAX) + 1).is_err());
    }

    #[test]
    fn a_session_counts_at_most_the_limit_of_distinct_tools() {
        let mut c = Counters::default();
        for i in 0..limits::SESSION_TOOL_COUNTS_MAX {
            assert!(c.charge(&[], &call(&format!("t{i}"))).is_ok());
        }
        assert_eq!(
            c.charge(&[], &call("one-more")),
            Err(BudgetRefusal::TooManyTools)
        );
        assert!(
            c.charge(&[], &call("t0")).is_ok(),
            "known tools still count"
        );
    }

    #[test]
    fn names_that_are_not_plain_words_are_quoted_in_reasons() {
        let b = budget(1, 1, Some("a\nb"));
        assert_eq!(b.scope().what(), "tool \"a\\nb\"");
        assert_eq!(
            budget(1, 1, None).describe(),
            "at most 1 call of every tool per relay session, for every agent on every connector"
        );
    }
}
