//! The call's Cedar request: only the context attributes the rules name, and the entities kept
//! per call.

use std::collections::BTreeSet;

use super::super::budget::SessionCounts;
use super::super::conditions::context_attributes_in;
use super::super::context::{Clock, ContextReads};
use super::*;

fn reads_of(condition: &str) -> Option<BTreeSet<String>> {
    let text = format!("permit (principal, action, resource) {condition};");
    let policy: cedar_policy::Policy = text.parse().unwrap();
    context_attributes_in(&policy.to_json().unwrap())
}

fn names(list: &[&str]) -> Option<BTreeSet<String>> {
    Some(list.iter().map(|s| s.to_string()).collect())
}

#[test]
fn a_rule_reads_only_the_context_attributes_it_names_and_the_whole_context_when_it_uses_it_whole() {
    for (condition, want) in [
        ("when { true }", names(&[])),
        ("when { context.hour > 9 }", names(&["hour"])),
        ("when { context has now }", names(&["now"])),
        (
            "when { context has arguments.path && context.arguments.path like \"/etc/*\" }",
            names(&["arguments"]),
        ),
        (
            "unless { context.session.calls < 3 || context.weekday == \"Sun\" }",
            names(&["session", "weekday"]),
        ),
        (
            "when { context.definition.state == \"changed\" }",
            names(&["definition"]),
        ),
        (
            "when { context has nothing_we_give }",
            names(&["nothing_we_give"]),
        ),
        // Used whole: compared, put in a set or a record, passed to a method.
        ("when { context == {} }", None),
        ("when { [context].contains(context) }", None),
        ("when { {c: context}.c has now }", None),
        ("when { context.hour > 9 && context == {} }", None),
    ] {
        assert_eq!(reads_of(condition), want, "{condition}");
    }
}

/// Rules reading each attribute of the context in turn, and one that uses it whole.
fn reading_rules() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "hour",
            "forbid (principal, action, resource == Tool::\"c/t\") when { context.hour >= 12 };",
        ),
        (
            "now",
            "forbid (principal, action, resource in ToolName::\"t\") when { context.now > datetime(\"2026-01-01\") };",
        ),
        (
            "weekday",
            "forbid (principal, action, resource) when { context.weekday == \"Thu\" };",
        ),
        (
            "session",
            "forbid (principal, action, resource in Connector::\"c\") when { context.session.calls >= 2 };",
        ),
        (
            "definition",
            "forbid (principal, action, resource) when { context.definition.state == \"changed\" };",
        ),
        (
            "arguments",
            "forbid (principal, action, resource) when { context.arguments has path && context.arguments.path like \"/etc/*\" };",
        ),
        (
            "has",
            "forbid (principal, action, resource) when { context has now && context.hour == 23 };",
        ),
        (
            "whole",
            "forbid (principal, action, resource) when { context == context };",
        ),
    ]
}

fn stored_rules(chosen: &[(&str, &str)]) -> Vec<StoredPolicy> {
    let mut out = vec![rule(1, Effect::Allow, &scope(None, None, None))];
    for (n, (name, body)) in chosen.iter().enumerate() {
        let seq = n as i64 + 2;
        let id = format!("reads-{name}");
        out.push(raw(
            seq,
            &id,
            &format!("@id(\"{id}\")\n@holdcall_effect(\"deny\")\n{body}"),
        ));
    }
    out
}

#[test]
fn a_set_given_only_the_context_its_rules_name_decides_as_with_the_whole_context() {
    let all = reading_rules();
    let contexts = [
        CallContext::from_call(
            Some(r#"{"path":"/etc/passwd"}"#),
            false,
            Clock::parse("2026-12-03T14:00:00Z").unwrap(),
        ),
        CallContext::from_call(
            Some(r#"{"path":"/tmp/x"}"#),
            false,
            Clock::parse("2025-06-01T08:00:00Z").unwrap(),
        )
        .with_session(SessionCounts {
            calls: 5,
            allowed: 3,
            refused: 2,
            tool_calls: 1,
        }),
        CallContext::from_call(None, true, Clock::parse("2026-12-05T23:00:00Z").unwrap()),
    ];
    let mut compared = 0;
    // Every rule alone, every pair, and all of them.
    let mut subsets: Vec<Vec<(&str, &str)>> = all.iter().map(|r| vec![*r]).collect();
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            subsets.push(vec![*a, *b]);
        }
    }
    subsets.push(all.clone());
    for chosen in subsets {
        let given = compile(&stored_rules(&chosen));
        let mut whole = compile(&stored_rules(&chosen));
        whole.context_reads = ContextReads::whole();
        for ctx in &contexts {
            for req in [call(None, "c", "t"), call(Some("a"), "d", "u")] {
                let got = serde_json::to_value(given.explain_with(&req, ctx)).unwrap();
                let want = serde_json::to_value(whole.explain_with(&req, ctx)).unwrap();
                assert_eq!(got, want, "rules {chosen:?}, request {req:?}");
                compared += 1;
            }
        }
    }
    assert_eq!(compared, (8 + 28 + 1) * 3 * 2);
}

/// Every attribute of a call's context.
const ATTRIBUTES: [&str; 6] = [
    "arguments",
    "now",
    "hour",
    "weekday",
    "session",
    "definition",
];

#[test]
fn a_set_without_conditions_gives_cedar_no_context_and_one_that_uses_it_whole_gives_all_of_it() {
    let plain = compile(&stored_rules(&[]));
    for attr in ATTRIBUTES {
        assert!(!plain.context_reads.reads(attr), "{attr}");
    }
    let hour = compile(&stored_rules(&reading_rules()[..1]));
    assert!(hour.context_reads.reads("hour") && !hour.context_reads.reads("now"));
    let rules = reading_rules();
    let whole = compile(&stored_rules(&rules[rules.len() - 1..]));
    for attr in ATTRIBUTES {
        assert!(whole.context_reads.reads(attr), "{attr}");
    }
}

#[test]
fn the_entities_a_set_keeps_are_bounded_and_give_the_decision_building_them_gives() {
    let set = compile(&stored_rules(&reading_rules()[..2]));
    let ctx = CallContext::from_call(None, false, Clock::parse("2026-12-03T14:00:00Z").unwrap());
    let first = set.explain_with(&call(None, "c", "t"), &ctx);
    let again = set.explain_with(&call(None, "c", "t"), &ctx);
    assert_eq!(
        serde_json::to_value(&first).unwrap(),
        serde_json::to_value(&again).unwrap()
    );
    assert_eq!(first.decision.policy_id.as_deref(), Some("reads-hour"));
    // The same tool name on another connector, and another agent, are other entities.
    assert_eq!(
        set.decide_with(&call(None, "d", "t"), &ctx)
            .policy_id
            .as_deref(),
        Some("reads-now")
    );
    assert_eq!(set.plans.len(), 2);
    for n in 0..crate::limits::CALL_PLANS_CACHED + 10 {
        let tool = format!("tool{n}");
        let d = set.decide_with(&call(Some("a"), "c", &tool), &ctx);
        assert_eq!(d.effect, Effect::Allow, "{}", d.reason);
        assert!(set.plans.len() <= crate::limits::CALL_PLANS_CACHED);
    }
    assert_eq!(
        set.decide_with(&call(None, "c", "t"), &ctx)
            .policy_id
            .as_deref(),
        Some("reads-hour")
    );
}
