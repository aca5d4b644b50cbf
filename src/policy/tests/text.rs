//! Policies as text: CLI rule text, scope sentences, effects' words, set text and diffs, and the
//! precedence-table parser.

use super::*;

#[test]
fn a_tool_name_with_quotes_and_backslashes_round_trips() {
    for tool in [
        "a\"b\\c",
        "naïve ツール 🚀",
        "\"); permit (principal, action, resource); //",
        "x/y",
    ] {
        for s in [
            scope(Some(tool), None, None),
            scope(Some(tool), Some("agent"), Some("conn")),
        ] {
            let text = cli_rule_text("rule-1", Effect::Deny, &s);
            let set = compile(&[raw(1, "rule-1", &text)]);
            assert_eq!(set.info().len(), 1);
            let d = set.decide(&call(Some("agent"), "conn", tool));
            assert_eq!(d.effect, Effect::Deny, "{tool:?}\n{text}");
            assert_eq!(d.policy_id.as_deref(), Some("rule-1"));
            // A near miss does not match, so the text named exactly this tool.
            let other = format!("{tool}x");
            assert_eq!(
                set.decide(&call(Some("agent"), "conn", &other)).effect,
                Effect::Allow
            );
            assert_eq!(
                parse_effect_and_specificity("rule-1", &text),
                Ok((Effect::Deny, specificity_of_scope(&s)))
            );
        }
    }
    let text = cli_rule_text("rule-1", Effect::Deny, &scope(Some("a\"b\\c"), None, None));
    assert!(
        text.contains(r#"resource in ToolName::"a\"b\\c""#),
        "{text}"
    );
    // A newline is escaped too, so it can't end the literal; such a rule parses, but
    // compile refuses it because no rule may name a tool with a control character.
    let text = cli_rule_text(
        "rule-1",
        Effect::Deny,
        &scope(Some("line\nbreak"), None, None),
    );
    assert!(
        text.contains(r#"resource in ToolName::"line\nbreak""#),
        "{text}"
    );
    assert!(matches!(
        PolicySet::compile(&[raw(1, "rule-1", &text)]),
        Err(PolicyError::InvalidScopeEntity { .. })
    ));
    // Ids are escaped too.
    let text = cli_rule_text("odd \"id\"", Effect::Allow, &Scope::default());
    assert_eq!(
        parse_effect_and_specificity("odd \"id\"", &text),
        Ok((Effect::Allow, 0))
    );
}

#[test]
fn cli_rule_text_renders_each_scope_form() {
    assert_eq!(
        cli_rule_text(
            "rule-7",
            Effect::Deny,
            &scope(Some("delete_file"), None, None)
        ),
        "@id(\"rule-7\")\n@holdcall_effect(\"deny\")\nforbid (\n  principal,\n  action == Action::\"call\",\n  resource in ToolName::\"delete_file\"\n);\n"
    );
    assert_eq!(
        cli_rule_text("r", Effect::Allow, &scope(Some("t"), Some("a"), Some("c"))),
        "@id(\"r\")\n@holdcall_effect(\"allow\")\npermit (\n  principal == Agent::\"a\",\n  action == Action::\"call\",\n  resource == Tool::\"c/t\"\n);\n"
    );
    assert!(cli_rule_text("r", Effect::Ask, &scope(None, None, Some("c")))
        .ends_with("forbid (\n  principal,\n  action == Action::\"call\",\n  resource in Connector::\"c\"\n);\n"));
    assert!(
        cli_rule_text("r", Effect::Ask, &Scope::default())
            .ends_with("  action == Action::\"call\",\n  resource\n);\n")
    );
}

#[test]
fn the_set_text_is_every_policy_in_seq_order() {
    let a = raw(
        2,
        "b",
        "@id(\"b\")\nforbid (principal, action, resource);\n\n",
    );
    let b = raw(1, "a", "  @id(\"a\") permit (principal, action, resource);");
    let set = compile(&[a, b]);
    assert_eq!(
        set.text(),
        "@id(\"a\") permit (principal, action, resource);\n\n@id(\"b\")\nforbid (principal, action, resource);\n"
    );
    let info: Vec<(&str, i64, Effect, i64)> = set
        .info()
        .iter()
        .map(|i| (i.id.as_str(), i.seq, i.effect, i.specificity))
        .collect();
    assert_eq!(
        info,
        [("a", 1, Effect::Allow, 0), ("b", 2, Effect::Deny, 0)]
    );
}

#[test]
fn unified_diff_shows_changed_lines_and_is_empty_for_equal_text() {
    let before = cli_rule_text("rule-1", Effect::Deny, &scope(Some("t"), None, None));
    let after = cli_rule_text("rule-1", Effect::Ask, &scope(Some("t"), None, None));
    let diff = unified_diff(&before, &after, "rule-1 (deny, 4)", "rule-1 (ask, 4)");
    assert!(
        diff.starts_with("--- rule-1 (deny, 4)\n+++ rule-1 (ask, 4)\n@@"),
        "{diff}"
    );
    assert!(
        diff.contains("\n-@holdcall_effect(\"deny\")\n+@holdcall_effect(\"ask\")\n"),
        "{diff}"
    );
    assert!(diff.contains("\n @id(\"rule-1\")\n"), "{diff}");
    assert_eq!(unified_diff(&before, &before, "a", "b"), "");
    assert_eq!(unified_diff("", "", "a", "b"), "");
    assert!(unified_diff("", "x\n", "a", "b").contains("\n+x\n"));
}

#[test]
fn scope_describe_reads_as_a_sentence() {
    assert_eq!(
        scope(Some("delete_file"), None, Some("github")).describe(),
        "tool delete_file for every agent on connector github"
    );
    assert_eq!(
        scope(None, Some("claude"), None).describe(),
        "every tool (the default) for agent claude on every connector"
    );
    assert_eq!(
        scope(Some("a \"b\"\nc"), None, None).describe(),
        "tool \"a \\\"b\\\"\\nc\" for every agent on every connector"
    );
}

#[test]
fn effects_parse_print_and_rank() {
    for e in [Effect::Allow, Effect::Ask, Effect::Deny] {
        assert_eq!(Effect::parse(e.as_str()), Some(e));
        assert_eq!(
            serde_json::to_string(&e).ok(),
            Some(format!("\"{}\"", e.as_str()))
        );
    }
    assert_eq!(Effect::parse("Deny"), None);
    assert!(Effect::Allow < Effect::Ask && Effect::Ask < Effect::Deny);
}

#[test]
fn the_precedence_parser_reads_cases_and_skips_the_rest() {
    assert_eq!(parse_precedence_case(""), None);
    assert_eq!(parse_precedence_case("  # comment"), None);
    assert_eq!(parse_precedence_case("request A C T"), None);
    assert!(matches!(
        parse_precedence_case("request B C T"),
        Some(Err(_))
    ));
    assert_eq!(
        parse_precedence_case("deny A:*@C ; allow T@C => allow 2"),
        Some(Ok(PrecedenceCase {
            rules: vec![
                (Effect::Deny, scope(None, Some("A"), Some("C"))),
                (Effect::Allow, scope(Some("T"), None, Some("C"))),
            ],
            expected: Effect::Allow,
            winner: 2,
        }))
    );
    for bad in [
        "deny T",
        "deny T => deny",
        "deny T => deny 2",
        "nope T => deny 1",
        "deny => deny 1",
        "deny A: => deny 1",
    ] {
        assert!(matches!(parse_precedence_case(bad), Some(Err(_))), "{bad}");
    }
}
