//! The policy engine's own tests, by job (compiling, deciding, text), and the helpers they share.

mod compile;
mod decide;
mod request;
mod text;

use super::context::CallContext;
use super::*;

impl PolicySet {
    /// The same evaluation as `decide`, with every matching policy, the tie-break and Cedar's
    /// own diagnostics per half.
    fn explain(&self, req: &CallRequest<'_>) -> Explanation {
        let evaluation = self.evaluate(req, &CallContext::empty(), super::decide::Detail::Explain);
        self.explanation(req, evaluation)
    }
}

fn scope(tool: Option<&str>, agent: Option<&str>, connector: Option<&str>) -> Scope {
    Scope {
        tool: tool.map(str::to_string),
        agent: agent.map(str::to_string),
        connector: connector.map(str::to_string),
    }
}

fn rule(seq: i64, effect: Effect, s: &Scope) -> StoredPolicy {
    let id = format!("rule-{seq}");
    StoredPolicy {
        seq,
        text: cli_rule_text(&id, effect, s),
        id,
    }
}

fn raw(seq: i64, id: &str, text: &str) -> StoredPolicy {
    StoredPolicy {
        seq,
        id: id.to_string(),
        text: text.to_string(),
    }
}

fn call<'a>(agent: Option<&'a str>, connector: &'a str, tool: &'a str) -> CallRequest<'a> {
    CallRequest {
        agent,
        connector,
        tool,
    }
}

fn compile(policies: &[StoredPolicy]) -> PolicySet {
    match PolicySet::compile(policies) {
        Ok(set) => set,
        Err(e) => panic!("compile failed: {e}"),
    }
}

fn compile_err(id: &str, text: &str) -> PolicyError {
    match PolicySet::compile(&[raw(1, id, text)]) {
        Ok(_) => panic!("policy {id} compiled but should not have:\n{text}"),
        Err(e) => e,
    }
}
