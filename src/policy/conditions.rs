//! Reading a policy's conditions in Cedar's JSON form (EST): whether and how safely it reads the
//! call's arguments, the import lints, and the agents it names.

use std::collections::{BTreeSet, HashSet};

use cedar_policy::{Policy, PolicyId};

use crate::policy::compile::is_type;

/// A policy's JSON form. Cedar makes it by parsing the policy's text again (one lexer per
/// call), so a caller that asks several questions of one policy reads it once and asks the
/// `_in` forms below.
pub(super) fn est_of(policy: &Policy) -> Option<serde_json::Value> {
    policy.to_json().ok()
}

fn est_bodies(policy: &Policy) -> Vec<serde_json::Value> {
    est_of(policy).map(|e| bodies_in(&e)).unwrap_or_default()
}

fn bodies_in(est: &serde_json::Value) -> Vec<serde_json::Value> {
    est.get("conditions")
        .and_then(|c| c.as_array())
        .map(|cs| cs.iter().filter_map(|c| c.get("body").cloned()).collect())
        .unwrap_or_default()
}

/// The attribute path a `context.a.b…` expression reads (`[]` for `context` itself).
fn context_path(e: &serde_json::Value) -> Option<Vec<String>> {
    if e.get("Var").and_then(|v| v.as_str()) == Some("context") {
        return Some(Vec::new());
    }
    let dot = e.get(".")?;
    let mut p = context_path(dot.get("left")?)?;
    p.push(dot.get("attr")?.as_str()?.to_string());
    Some(p)
}

/// The path a `has` node tests: `left` then `attr`, which Cedar's JSON gives as one name, or
/// as a list of names for an extended `has` (`context has arguments.branch`).
fn has_path(node: &serde_json::Value) -> Option<Vec<String>> {
    let mut p = context_path(node.get("left")?)?;
    match node.get("attr")? {
        serde_json::Value::String(a) => p.push(a.clone()),
        serde_json::Value::Array(a) => {
            for x in a {
                p.push(x.as_str()?.to_string());
            }
        }
        _ => return None,
    }
    Some(p)
}

fn is_args_path(p: &[String]) -> bool {
    p.first().is_some_and(|a| a == "arguments")
}

/// The top-level `context` attributes a policy's conditions name (`context.a…`, `context has
/// a…`), or `None` when one uses `context` any other way (compares it, or passes it whole), so
/// that every attribute must be given. Anything this reader does not recognise counts as the
/// whole context: the error is only ever to give a rule more than it needs.
pub(super) fn context_attributes_in(est: &serde_json::Value) -> Option<BTreeSet<String>> {
    fn is_context(e: &serde_json::Value) -> bool {
        e.as_object().is_some_and(|m| {
            m.len() == 1 && m.get("Var").and_then(|v| v.as_str()) == Some("context")
        })
    }
    /// The attribute a `.` or `has` node takes directly from `context`.
    fn direct(node: &serde_json::Value) -> Option<String> {
        if !is_context(node.get("left")?) {
            return None;
        }
        match node.get("attr")? {
            serde_json::Value::String(a) => Some(a.clone()),
            serde_json::Value::Array(a) => a.first()?.as_str().map(str::to_string),
            _ => None,
        }
    }
    fn walk(e: &serde_json::Value, out: &mut BTreeSet<String>) -> bool {
        match e {
            serde_json::Value::Object(m) => {
                if m.get("Var").and_then(|v| v.as_str()) == Some("context") {
                    return false;
                }
                m.iter().all(|(k, v)| {
                    if (k == "." || k == "has")
                        && let Some(attr) = direct(v)
                    {
                        out.insert(attr);
                        return true;
                    }
                    walk(v, out)
                })
            }
            serde_json::Value::Array(a) => a.iter().all(|x| walk(x, out)),
            _ => true,
        }
    }
    let mut out = BTreeSet::new();
    walk(est, &mut out).then_some(out)
}

/// Whether any condition reads `context.arguments` (by access or `has`).
pub(super) fn reads_arguments(policy: &Policy) -> bool {
    est_of(policy).is_some_and(|e| reads_arguments_in(&e))
}

/// [`reads_arguments`] of a policy whose JSON form is `est`.
pub(super) fn reads_arguments_in(est: &serde_json::Value) -> bool {
    fn walk(e: &serde_json::Value) -> bool {
        for key in [".", "has"] {
            if let Some(node) = e.get(key)
                && let Some(p) = has_path(node)
                && is_args_path(&p)
            {
                return true;
            }
        }
        match e {
            serde_json::Value::Object(m) => m.values().any(walk),
            serde_json::Value::Array(a) => a.iter().any(walk),
            _ => false,
        }
    }
    bodies_in(est).iter().any(walk)
}

/// Paths known present when `e` is true: its `has` tests, through `&&`.
fn facts(e: &serde_json::Value, out: &mut HashSet<Vec<String>>) {
    if let Some(node) = e.get("has")
        && let Some(p) = has_path(node)
    {
        // `has a.b` makes `a` and `a.b` present.
        for n in 1..=p.len() {
            out.insert(p.iter().take(n).cloned().collect());
        }
    }
    if let Some(node) = e.get("&&") {
        if let Some(l) = node.get("left") {
            facts(l, out);
        }
        if let Some(r) = node.get("right") {
            facts(r, out);
        }
    }
}

/// The first `context.arguments.X…` access not guarded by a `has` that is true wherever it is
/// evaluated (the left of an `&&`, or the condition of an `if`).
fn unguarded(e: &serde_json::Value, guards: &HashSet<Vec<String>>) -> Option<Vec<String>> {
    if let Some(node) = e.get(".")
        && let (Some(left), Some(attr)) =
            (node.get("left"), node.get("attr").and_then(|a| a.as_str()))
    {
        if let Some(mut p) = context_path(left) {
            p.push(attr.to_string());
            if is_args_path(&p) && p.len() > 1 && !guards.contains(&p) {
                return Some(p);
            }
        }
        return unguarded(left, guards);
    }
    if let Some(node) = e.get("has") {
        return node.get("left").and_then(|l| unguarded(l, guards));
    }
    if let Some(node) = e.get("&&") {
        let left = node.get("left")?;
        if let Some(p) = unguarded(left, guards) {
            return Some(p);
        }
        let mut more = guards.clone();
        facts(left, &mut more);
        return node.get("right").and_then(|r| unguarded(r, &more));
    }
    if let Some(node) = e.get("if-then-else") {
        let cond = node.get("if")?;
        if let Some(p) = unguarded(cond, guards) {
            return Some(p);
        }
        let mut more = guards.clone();
        facts(cond, &mut more);
        if let Some(p) = node.get("then").and_then(|t| unguarded(t, &more)) {
            return Some(p);
        }
        return node.get("else").and_then(|x| unguarded(x, guards));
    }
    match e {
        serde_json::Value::Object(m) => m.values().find_map(|v| unguarded(v, guards)),
        serde_json::Value::Array(a) => a.iter().find_map(|v| unguarded(v, guards)),
        _ => None,
    }
}

/// The first unguarded argument access of a policy, as `arguments.x.y`.
pub(super) fn unguarded_argument_in(est: &serde_json::Value) -> Option<String> {
    bodies_in(est)
        .iter()
        .find_map(|b| unguarded(b, &HashSet::new()))
        .map(|p| p.join("."))
}

/// A copy of the policy whose `has` tests on arguments are the literal `true`: validation only.
pub(super) fn argument_guards_as_true(id: &str, policy: &Policy) -> Option<Policy> {
    argument_guards_as_true_in(id, est_of(policy)?)
}

/// [`argument_guards_as_true`] of a policy whose JSON form is `est`.
pub(super) fn argument_guards_as_true_in(id: &str, mut est: serde_json::Value) -> Option<Policy> {
    fn rewrite(e: &mut serde_json::Value) {
        let is_args_has = e
            .get("has")
            .and_then(has_path)
            .is_some_and(|p| is_args_path(&p));
        if is_args_has {
            *e = serde_json::json!({ "Value": true });
            return;
        }
        match e {
            serde_json::Value::Object(m) => m.values_mut().for_each(rewrite),
            serde_json::Value::Array(a) => a.iter_mut().for_each(rewrite),
            _ => {}
        }
    }
    if let Some(conds) = est.get_mut("conditions") {
        rewrite(conds);
    }
    Policy::from_json(Some(PolicyId::new(id)), est).ok()
}

/// Import warnings for one policy (they never refuse it): conditions that test the principal or
/// the resource like a scope would (they add no specificity). Whether a named agent is enrolled
/// is the daemon's check at import, not a lint.
pub(crate) fn lint_warnings(policy: &Policy) -> Vec<String> {
    fn scope_like(e: &serde_json::Value) -> bool {
        for key in ["==", "in", "is"] {
            if let Some(node) = e.get(key)
                && let Some(left) = node.get("left")
                && matches!(
                    left.get("Var").and_then(|v| v.as_str()),
                    Some("principal" | "resource")
                )
            {
                return true;
            }
        }
        match e {
            serde_json::Value::Object(m) => m.values().any(scope_like),
            serde_json::Value::Array(a) => a.iter().any(scope_like),
            _ => false,
        }
    }
    let mut out = Vec::new();
    if est_bodies(policy).iter().any(scope_like) {
        out.push(
            "a condition tests `principal` or `resource` like a scope would, but conditions add no \
             specificity: move the test into the scope (`principal == Agent::\"A\"`, `resource in \
             Connector::\"C\"`, …) if the rule should outrank less specific ones"
                .to_string(),
        );
    }
    out
}

/// Every agent a policy names as an entity literal, in its scope or its conditions
/// (`Agent::"X"` anywhere Cedar sees an entity), sorted and without repeats. `Agent::""`, the
/// unenrolled principal, is not a name and is left out: it can never be enrolled.
pub(crate) fn agents_named(policy: &Policy) -> Vec<String> {
    let mut out: Vec<String> = policy
        .entity_literals()
        .into_iter()
        .filter(|u| is_type(u, "Agent"))
        .map(|u| u.id().unescaped().to_string())
        .filter(|n| !n.is_empty())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// [`agents_named`] for the text of a stored policy; a text that does not parse names none.
pub(crate) fn agents_named_in_text(text: &str) -> Vec<String> {
    Policy::parse(None, text)
        .map(|p| agents_named(&p))
        .unwrap_or_default()
}
