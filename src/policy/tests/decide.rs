//! Deciding: the precedence wrapper, failing closed, explain, the precedence table, and the scope
//! index against evaluating every policy.

use super::super::explain::Considered;
use super::*;

#[test]
fn no_rules_allow_every_call() {
    for set in [PolicySet::empty(), compile(&[])] {
        let d = set.decide(&call(Some("claude"), "github", "delete_file"));
        assert_eq!(d.effect, Effect::Allow);
        assert_eq!(d.policy_id, None);
        assert_eq!(d.reason, "no rule matches this call, so it is allowed");
        assert_eq!(set.text(), "");
    }
}

#[test]
fn a_deny_rule_refuses_its_tool_and_nothing_else() {
    let set = compile(&[rule(
        1,
        Effect::Deny,
        &scope(Some("delete_file"), None, None),
    )]);
    let d = set.decide(&call(Some("claude"), "github", "delete_file"));
    assert_eq!(d.effect, Effect::Deny);
    assert_eq!(d.policy_id.as_deref(), Some("rule-1"));
    assert_eq!(
        d.reason,
        "rule rule-1 (deny tool delete_file for every agent on every connector) is the only matching rule"
    );
    assert_eq!(
        set.decide(&call(None, "", "delete_file")).effect,
        Effect::Deny
    );
    for tool in ["read_file", "delete_file2", "Delete_file", "delete", ""] {
        let d = set.decide(&call(Some("claude"), "github", tool));
        assert_eq!(d.effect, Effect::Allow, "tool {tool:?}");
        assert_eq!(d.policy_id, None);
    }
}

#[test]
fn an_agent_named_rule_never_matches_the_unenrolled_principal() {
    let set = compile(&[
        rule(1, Effect::Deny, &scope(None, Some("claude"), None)),
        rule(
            2,
            Effect::Deny,
            &scope(Some("t"), Some("claude"), Some("c")),
        ),
    ]);
    assert_eq!(
        set.decide(&call(Some("claude"), "c", "t")).effect,
        Effect::Deny
    );
    assert_eq!(set.decide(&call(None, "c", "t")).effect, Effect::Allow);
    assert_eq!(set.decide(&call(Some(""), "c", "t")).effect, Effect::Allow);
    assert_eq!(
        set.decide(&call(Some("other"), "c", "t")).effect,
        Effect::Allow
    );
    // And a rule can't name the empty agent to target unenrolled sessions by the back door.
    let text = "@id(\"r\")\nforbid (principal == Agent::\"\", action, resource);";
    assert!(matches!(
        compile_err("r", text),
        PolicyError::InvalidScopeEntity { ref kind, .. } if kind == "agent"
    ));
}

#[test]
fn ask_is_a_forbid_with_the_annotation_and_evaluates_as_ask() {
    let text = cli_rule_text("rule-1", Effect::Ask, &scope(Some("push"), None, None));
    assert!(
        text.contains("@holdcall_effect(\"ask\")\nforbid ("),
        "{text}"
    );
    let set = compile(&[raw(1, "rule-1", &text)]);
    let d = set.decide(&call(Some("claude"), "git", "push"));
    assert_eq!(d.effect, Effect::Ask);
    assert_eq!(d.policy_id.as_deref(), Some("rule-1"));
    // Cedar itself sees a forbid: anything reading the raw Cedar fails closed.
    let e = set.explain(&call(Some("claude"), "git", "push"));
    assert_eq!(e.cedar.forbid_reasons, vec!["rule-1".to_string()]);
    assert_eq!(e.cedar.permit_reasons, Vec::<String>::new());
    assert_eq!(e.cedar.permit_decision, "Deny");
    // A hand-written ask policy is the same thing.
    let hand = "@id(\"h\") @holdcall_effect(\"ask\") forbid (principal, action, resource in ToolName::\"push\");";
    assert_eq!(
        parse_effect_and_specificity("h", hand),
        Ok((Effect::Ask, 4))
    );
}

#[test]
fn a_connector_scoped_rule_stops_at_its_connector() {
    let set = compile(&[
        rule(1, Effect::Deny, &scope(None, None, Some("github"))),
        rule(2, Effect::Ask, &scope(Some("push"), None, Some("gitlab"))),
    ]);
    assert_eq!(
        set.decide(&call(Some("a"), "github", "anything")).effect,
        Effect::Deny
    );
    assert_eq!(
        set.decide(&call(Some("a"), "github2", "anything")).effect,
        Effect::Allow
    );
    assert_eq!(
        set.decide(&call(Some("a"), "", "anything")).effect,
        Effect::Allow
    );
    assert_eq!(
        set.decide(&call(Some("a"), "gitlab", "push")).effect,
        Effect::Ask
    );
    assert_eq!(
        set.decide(&call(Some("a"), "gitlab", "pull")).effect,
        Effect::Allow
    );
    assert_eq!(
        set.decide(&call(Some("a"), "github", "push")).effect,
        Effect::Deny
    );
    assert_eq!(
        set.decide(&call(Some("a"), "other", "push")).effect,
        Effect::Allow
    );
}

#[test]
fn insertion_order_does_not_matter_only_seq_does() {
    let policies = vec![
        rule(1, Effect::Allow, &scope(None, None, Some("c"))),
        rule(2, Effect::Deny, &scope(None, Some("a"), None)),
        rule(3, Effect::Ask, &scope(Some("t"), None, None)),
        rule(4, Effect::Allow, &scope(Some("t"), Some("a"), Some("c"))),
        rule(5, Effect::Deny, &scope(None, None, None)),
        rule(6, Effect::Allow, &scope(Some("t"), None, None)),
    ];
    let reference = compile(&policies);
    let requests = [
        call(Some("a"), "c", "t"),
        call(Some("a"), "c", "u"),
        call(Some("b"), "c", "t"),
        call(Some("b"), "d", "t"),
        call(None, "d", "u"),
        call(Some("a"), "d", "u"),
    ];
    // Every rotation and its reverse: enough orders to catch input-order dependence.
    for k in 0..policies.len() {
        let mut shuffled = policies.clone();
        shuffled.rotate_left(k);
        for order in [shuffled.clone(), shuffled.into_iter().rev().collect()] {
            let set = compile(&order);
            assert_eq!(set.info(), reference.info());
            assert_eq!(set.text(), reference.text());
            for r in &requests {
                assert_eq!(set.decide(r), reference.decide(r), "{r:?}");
            }
        }
    }
    // And the same scope, same effect twice: the lower seq wins wherever it sits.
    let older = rule(1, Effect::Deny, &scope(Some("t"), None, None));
    let newer = rule(2, Effect::Deny, &scope(Some("t"), None, None));
    for order in [vec![older.clone(), newer.clone()], vec![newer, older]] {
        let d = compile(&order).decide(&call(Some("a"), "c", "t"));
        assert_eq!(d.policy_id.as_deref(), Some("rule-1"));
    }
}

#[test]
fn the_oldest_rule_is_the_lowest_seq_not_the_smallest_id() {
    let s = scope(Some("t"), None, None);
    let set = compile(&[
        raw(2, "rule-9", &cli_rule_text("rule-9", Effect::Deny, &s)),
        raw(1, "rule-10", &cli_rule_text("rule-10", Effect::Deny, &s)),
    ]);
    let e = set.explain(&call(Some("a"), "c", "t"));
    assert_eq!(e.decision.policy_id.as_deref(), Some("rule-10"));
    assert_eq!(
        e.tie_break,
        "tie at specificity 4 and deny went to the oldest rule"
    );
    let ids: Vec<&str> = set.info().iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, ["rule-10", "rule-9"]);
}

/// Type-checks (so strict validation accepts it) but overflows when evaluated.
const OVERFLOW: &str = "when { 9223372036854775807 + 1 > 0 }";

#[test]
fn a_forbid_whose_evaluation_errors_never_yields_allow() {
    let broken_deny = raw(
        2,
        "broken-deny",
        &format!("@id(\"broken-deny\")\nforbid (principal, action, resource) {OVERFLOW};"),
    );
    let broken_ask = raw(
        3,
        "broken-ask",
        &format!(
            "@id(\"broken-ask\")\n@holdcall_effect(\"ask\")\nforbid (principal, action, resource) {OVERFLOW};"
        ),
    );
    // The most specific possible allow matches; without the escalation it would win.
    let allow = rule(1, Effect::Allow, &scope(Some("t"), Some("a"), Some("c")));
    let req = call(Some("a"), "c", "t");

    let set = compile(&[allow.clone(), broken_deny.clone()]);
    let e = set.explain(&req);
    assert_eq!(e.decision.effect, Effect::Deny);
    assert_eq!(e.decision.policy_id.as_deref(), Some("broken-deny"));
    assert!(
        e.decision
            .reason
            .starts_with("rule broken-deny could not be evaluated ("),
        "{}",
        e.decision.reason
    );
    assert!(
        e.decision
            .reason
            .ends_with("and a deny rule that cannot be evaluated denies"),
        "{}",
        e.decision.reason
    );
    assert_eq!(
        e.winner.as_ref().map(|w| w.id.as_str()),
        Some("broken-deny")
    );
    assert_eq!(e.cedar.errors.len(), 1);
    assert!(e.cedar.errors.iter().all(|m| m.contains("broken-deny")));
    // The erroring forbid does not match (Cedar skips it); only the allow does.
    let matching: Vec<&str> = e.matching.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(matching, ["rule-1"]);

    let set = compile(&[allow.clone(), broken_ask.clone()]);
    let d = set.decide(&req);
    assert_eq!(d.effect, Effect::Ask);
    assert_eq!(d.policy_id.as_deref(), Some("broken-ask"));
    assert!(
        d.reason
            .ends_with("and an ask rule that cannot be evaluated asks"),
        "{}",
        d.reason
    );

    // Nothing else matching: still not allow.
    assert_eq!(
        compile(std::slice::from_ref(&broken_ask))
            .decide(&req)
            .effect,
        Effect::Ask
    );
    assert_eq!(
        compile(std::slice::from_ref(&broken_deny))
            .decide(&req)
            .effect,
        Effect::Deny
    );

    // A deny winner stays the decider next to an errored ask (the reason says both), and
    // an errored deny wins over an errored ask.
    let deny = rule(4, Effect::Deny, &scope(Some("t"), Some("a"), Some("c")));
    let d = compile(&[broken_ask.clone(), deny]).decide(&req);
    assert_eq!(d.effect, Effect::Deny);
    assert_eq!(d.policy_id.as_deref(), Some("rule-4"));
    assert!(
        d.reason.contains("rule broken-ask could not be evaluated"),
        "{}",
        d.reason
    );
    let d = compile(&[allow, broken_ask, broken_deny]).decide(&req);
    assert_eq!(d.effect, Effect::Deny);
    assert_eq!(d.policy_id.as_deref(), Some("broken-deny"));
}

#[test]
fn a_permit_whose_evaluation_errors_is_only_skipped() {
    let broken_allow = raw(
        1,
        "broken-allow",
        &format!(
            "@id(\"broken-allow\")\npermit (principal, action, resource in ToolName::\"t\") {OVERFLOW};"
        ),
    );
    let ask = rule(2, Effect::Ask, &scope(None, None, None));
    let e = compile(&[broken_allow, ask]).explain(&call(Some("a"), "c", "t"));
    assert_eq!(e.decision.effect, Effect::Ask);
    assert_eq!(e.decision.policy_id.as_deref(), Some("rule-2"));
    assert_eq!(e.cedar.errors.len(), 1);
}

#[test]
fn explain_lists_every_matching_policy_even_when_a_forbid_fires() {
    let set = compile(&[
        rule(1, Effect::Allow, &scope(Some("t"), None, None)),
        rule(2, Effect::Deny, &scope(Some("t"), Some("a"), Some("c"))),
        rule(3, Effect::Allow, &scope(None, Some("a"), None)),
        rule(4, Effect::Ask, &scope(None, None, None)),
        rule(5, Effect::Deny, &scope(Some("u"), None, None)),
    ]);
    let e = set.explain(&call(Some("a"), "c", "t"));
    let ids: Vec<&str> = e.matching.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, ["rule-2", "rule-1", "rule-3", "rule-4"]);
    assert_eq!(e.decision.effect, Effect::Deny);
    assert_eq!(
        e.decision.reason,
        "rule rule-2 (deny tool t for agent a on connector c) is the most specific of 4 matching rules"
    );
    assert_eq!(e.winner.as_ref().map(|w| w.specificity), Some(6));
    assert_eq!(e.tie_break, "highest specificity (6)");
    assert_eq!(e.cedar.permit_decision, "Allow");
    assert_eq!(e.cedar.permit_reasons, ["rule-1", "rule-3"]);
    assert_eq!(e.cedar.forbid_decision, "Deny");
    assert_eq!(e.cedar.forbid_reasons, ["rule-2", "rule-4"]);
    assert!(e.cedar.errors.is_empty());
    assert_eq!(
        (e.agent.as_deref(), e.connector.as_str(), e.tool.as_str()),
        (Some("a"), "c", "t")
    );
    assert_eq!(set.decide(&call(Some("a"), "c", "t")), e.decision);

    // Tie-break wording.
    let tie = compile(&[
        rule(1, Effect::Allow, &scope(Some("t"), None, Some("c"))),
        rule(2, Effect::Deny, &scope(Some("t"), Some("a"), None)),
        rule(3, Effect::Ask, &scope(Some("t"), None, Some("c"))),
    ])
    .explain(&call(Some("a"), "c", "t"));
    assert_eq!(
        tie.tie_break,
        "tie at specificity 5 went to deny over ask and allow"
    );
    assert_eq!(tie.decision.policy_id.as_deref(), Some("rule-2"));
    let none = compile(&[rule(1, Effect::Deny, &scope(Some("u"), None, None))]).explain(&call(
        Some("b"),
        "d",
        "v",
    ));
    assert_eq!(none.tie_break, "no rule matches: allow");
    assert!(none.winner.is_none() && none.matching.is_empty());
    assert_eq!(none.cedar.forbid_reasons, Vec::<String>::new());
    let ask = set.explain(&call(Some("b"), "d", "v"));
    assert_eq!(ask.decision.effect, Effect::Ask);
    assert_eq!(ask.tie_break, "only one rule matches");
    // Explain serializes for `--json`.
    let json = serde_json::to_value(&e).map_err(|e| e.to_string());
    assert!(json.is_ok_and(|j| j["decision"]["effect"] == "deny"));
}

#[test]
fn the_precedence_table_holds() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/policy/precedence.txt");
    let table = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(table.lines().any(|l| l.trim() == "request A C T"));
    let mut cases = 0;
    for (n, line) in table.lines().enumerate() {
        let Some(case) = parse_precedence_case(line) else {
            continue;
        };
        let case = case.unwrap_or_else(|e| panic!("line {}: {e}", n + 1));
        let stored: Vec<StoredPolicy> = case
            .rules
            .iter()
            .enumerate()
            .map(|(i, (effect, s))| {
                let id = format!("rule-{}", i + 1);
                StoredPolicy {
                    // Gaps in seq, as after deletions; only the order matters.
                    seq: 10 * (i as i64 + 1),
                    text: cli_rule_text(&id, *effect, s),
                    id,
                }
            })
            .collect();
        let want_id = (case.winner > 0).then(|| format!("rule-{}", case.winner));
        let mut reversed = stored.clone();
        reversed.reverse();
        for order in [stored, reversed] {
            let d = compile(&order).decide(&PrecedenceCase::REQUEST);
            assert_eq!(
                (d.effect, d.policy_id.as_deref()),
                (case.expected, want_id.as_deref()),
                "line {}: {line}\n{}",
                n + 1,
                d.reason
            );
        }
        cases += 1;
    }
    assert!(cases >= 252 + 9 * 2, "only {cases} cases");
}

/// Every rule form a bucket can hold, for the index tests: exact tools (one with a `/` in
/// its tool name), tool names, connectors, defaults, agent-scoped ones, and `when` rules
/// that hold, fail, or cannot be evaluated.
fn index_universe() -> Vec<StoredPolicy> {
    let tools = ["t", "u", "x/y"];
    let connectors = ["c", "d"];
    let mut scopes = vec![scope(None, None, None), scope(None, Some("a"), None)];
    for c in connectors {
        scopes.push(scope(None, None, Some(c)));
        scopes.push(scope(None, Some("b"), Some(c)));
        for t in tools {
            scopes.push(scope(Some(t), None, Some(c)));
            scopes.push(scope(Some(t), Some("a"), Some(c)));
        }
    }
    for t in tools {
        scopes.push(scope(Some(t), None, None));
        scopes.push(scope(Some(t), Some("b"), None));
    }
    let mut out = Vec::new();
    for (n, s) in scopes.iter().enumerate() {
        let effect = [Effect::Allow, Effect::Deny, Effect::Ask][n % 3];
        out.push(rule(n as i64 + 1, effect, s));
    }
    let seq = out.len() as i64;
    let resources = [
        "resource",
        "resource == Tool::\"c/t\"",
        "resource in ToolName::\"u\"",
        "resource in Connector::\"d\"",
    ];
    let conditions = [
        OVERFLOW,
        "when { true }",
        "unless { principal == Agent::\"a\" }",
    ];
    // Conditional rules for every agent and for agent `a` alone: the index must neither
    // evaluate nor report the errors of a rule for another agent, and flat Cedar never
    // evaluates the conditions of a rule whose principal does not match.
    let principals = ["principal", "principal == Agent::\"a\""];
    for (p, principal) in principals.iter().enumerate() {
        for (r, resource) in resources.iter().enumerate() {
            for (k, condition) in conditions.iter().enumerate() {
                for (e, (keyword, effect)) in
                    [("permit", "allow"), ("forbid", "deny"), ("forbid", "ask")]
                        .iter()
                        .enumerate()
                {
                    let n = seq + 1 + (p * 36 + r * 9 + k * 3 + e) as i64;
                    let id = format!("cond-{n}");
                    out.push(raw(
                        n,
                        &id,
                        &format!(
                            "@id(\"{id}\")\n@holdcall_effect(\"{effect}\")\n{keyword} ({principal}, action, {resource}) {condition};"
                        ),
                    ));
                }
            }
        }
    }
    out
}

/// A small deterministic generator (no dependency, same cases every run).
struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n
    }
}

#[test]
fn the_scope_index_decides_exactly_as_evaluating_every_policy() {
    let universe = index_universe();
    let agents = [None, Some("a"), Some("b")];
    let connectors = ["c", "d", "e", ""];
    let tools = ["t", "u", "x/y", "y", "v"];
    let mut rng = Lcg(7);
    let mut compared = 0;
    // Calls with few policies that could apply are asked as one merged Cedar set, the others
    // group by group: both ways are compared.
    let (mut merged, mut unmerged) = (0, 0);
    for round in 0..60 {
        // A random subset of the universe, in a random order (seq still decides age).
        let mut chosen: Vec<StoredPolicy> = universe
            .iter()
            .filter(|_| rng.below(4) == 0 || round == 0)
            .cloned()
            .collect();
        for k in (1..chosen.len()).rev() {
            chosen.swap(k, rng.below(k + 1));
        }
        let indexed = compile(&chosen);
        let flat = PolicySet::build(&chosen, false, None).unwrap();
        for agent in agents {
            for connector in connectors {
                for tool in tools {
                    let req = call(agent, connector, tool);
                    // `considered` lists what the buckets hold, so the flat set also lists
                    // rules whose scope cannot match; what matched or erred must agree.
                    let strip = |e: Explanation| {
                        let decided: Vec<Considered> = e
                            .considered
                            .iter()
                            .filter(|c| c.outcome != "not matched")
                            .cloned()
                            .collect();
                        let mut v = serde_json::to_value(Explanation {
                            considered: Vec::new(),
                            ..e
                        })
                        .unwrap();
                        v["decided"] = serde_json::to_value(decided).unwrap();
                        v
                    };
                    let got = strip(indexed.explain(&req));
                    let want = strip(flat.explain(&req));
                    assert_eq!(got, want, "round {round}, request {req:?}");
                    compared += 1;
                    match indexed.plans.merged(&req) {
                        Some(true) => merged += 1,
                        Some(false) => unmerged += 1,
                        None => panic!("no plan kept for {req:?}"),
                    }
                }
            }
        }
    }
    assert_eq!(compared, 60 * 3 * 4 * 5);
    assert!(
        merged > 100 && unmerged > 100,
        "{merged} merged, {unmerged} not"
    );
}

#[test]
fn a_call_evaluates_only_the_groups_its_tool_name_connector_and_agent_can_hit() {
    let set = compile(&index_universe());
    for agent in [None, Some("a"), Some("b")] {
        // Exact tool c/t, tool name t, connector c, and the global bucket; in each, the rules
        // for every agent and those for this agent: nothing else.
        let hit: usize = set
            .index
            .groups("c/t", &call(agent, "c", "t"))
            .map(|g| g.permits.num_of_policies() + g.forbids.num_of_policies())
            .sum();
        let wanted = set
            .scopes
            .iter()
            .filter(|(s, _)| {
                let resource = match (s.tool.as_deref(), s.connector.as_deref()) {
                    (Some(t), Some(c)) => (c, t) == ("c", "t"),
                    (Some(t), None) => t == "t",
                    (None, Some(c)) => c == "c",
                    (None, None) => true,
                };
                resource && (s.agent.is_none() || s.agent.as_deref() == agent)
            })
            .count();
        assert_eq!(hit, wanted, "agent {agent:?}");
        assert!(hit < set.info().len() / 2, "{hit} of {}", set.info().len());
    }
    // A tool name with a `/` lands in its exact-tool bucket, split at the connector's end.
    assert!(set.index.tools.contains_key("c/x/y"));
    assert!(set.index.tool_names.contains_key("x/y"));
}
