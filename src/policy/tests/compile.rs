//! Compiling: the checks every stored policy passes, the errors and their help, names, and
//! specificity.

use std::collections::HashSet;

use super::*;

#[test]
fn the_embedded_schema_loads() {
    assert!(load_validator().is_ok());
}

#[test]
fn every_agent_a_policy_names_is_found_in_its_scope_and_its_conditions() {
    let text = "@id(\"r\")\nforbid (principal == Agent::\"a\", action, resource)\n\
                when { principal == Agent::\"c\" || [Agent::\"b\", Agent::\"\"].contains(principal) \
                || resource == Tool::\"x/y\" };";
    assert_eq!(agents_named_in_text(text), vec!["a", "b", "c"]);
    assert!(agents_named_in_text("@id(\"r\") permit (principal, action, resource);").is_empty());
}

#[test]
fn unsupported_scope_forms_are_refused() {
    let cases = [
        ("principal in Agent::\"x\", action, resource", "principal"),
        ("principal is Agent, action, resource", "principal"),
        (
            "principal is Agent in Agent::\"x\", action, resource",
            "principal",
        ),
        (
            "principal, action in [Action::\"call\"], resource",
            "action",
        ),
        ("principal, action in Action::\"call\"", "action"),
        ("principal, action, resource is Tool", "resource"),
        (
            "principal, action, resource is Tool in Connector::\"c\"",
            "resource",
        ),
        ("principal, action, resource in Tool::\"c/t\"", "resource"),
    ];
    for (scope_text, part) in cases {
        let text = if scope_text.matches(',').count() == 1 {
            format!("@id(\"x\") permit ({scope_text}, resource);")
        } else {
            format!("@id(\"x\") permit ({scope_text});")
        };
        match compile_err("x", &text) {
            PolicyError::UnsupportedScope { id, part: p, found } => {
                assert_eq!((id.as_str(), p.as_str()), ("x", part), "{text}");
                assert!(!found.is_empty());
            }
            other => panic!("{text}: expected an unsupported scope, got {other:?}"),
        }
    }
    // An action other than call does not even validate.
    let e = compile_err(
        "x",
        "@id(\"x\") permit (principal, action == Action::\"list\", resource);",
    );
    assert!(
        matches!(e, PolicyError::Validation { ref id, .. } if id == "x"),
        "{e:?}"
    );
    // Templates.
    let e = compile_err(
        "x",
        "@id(\"x\") permit (principal == ?principal, action, resource);",
    );
    assert_eq!(
        e,
        PolicyError::Template {
            id: "x".to_string()
        }
    );
    // Exact tools must be written connector/tool.
    let e = compile_err(
        "x",
        "@id(\"x\") permit (principal, action, resource == Tool::\"t\");",
    );
    assert!(matches!(e, PolicyError::InvalidScopeEntity { .. }), "{e:?}");
    let e = compile_err(
        "x",
        "@id(\"x\") forbid (principal, action, resource in ToolName::\"*\");",
    );
    assert!(matches!(e, PolicyError::InvalidScopeEntity { .. }), "{e:?}");
    let help = miette::Diagnostic::help(&PolicyError::UnsupportedScope {
        id: "x".into(),
        part: "principal".into(),
        found: "principal in Agent::\"x\"".into(),
    })
    .map(|h| h.to_string());
    assert!(help.is_some_and(|h| h.contains("resource in Connector::\"C\"")));
}

#[test]
fn the_id_annotation_must_be_present_first_and_equal_to_the_stored_id() {
    let e = compile_err(
        "rule-1",
        "@id(\"rule-2\") permit (principal, action, resource);",
    );
    assert_eq!(
        e,
        PolicyError::IdMismatch {
            id: "rule-1".into(),
            annotated: "rule-2".into()
        }
    );
    let e = compile_err("rule-1", "permit (principal, action, resource);");
    assert_eq!(
        e,
        PolicyError::MissingId {
            id: "rule-1".into()
        }
    );
    let e = compile_err(
        "rule-1",
        "@holdcall_effect(\"allow\")\n@id(\"rule-1\")\npermit (principal, action, resource);",
    );
    assert_eq!(
        e,
        PolicyError::IdNotFirst {
            id: "rule-1".into()
        }
    );
    let e = compile_err(
        "rule-1",
        "@identity(\"x\") @id(\"rule-1\") permit (principal, action, resource);",
    );
    assert_eq!(
        e,
        PolicyError::IdNotFirst {
            id: "rule-1".into()
        }
    );
    // Comments and whitespace before it are fine.
    let ok = "// why this rule exists\n  @id(\"rule-1\")\npermit (principal, action, resource);";
    assert_eq!(
        parse_effect_and_specificity("rule-1", ok),
        Ok((Effect::Allow, 0))
    );
    // Duplicates across rows.
    let p = rule(1, Effect::Deny, &Scope::default());
    let q = StoredPolicy {
        seq: 2,
        ..p.clone()
    };
    assert_eq!(
        PolicySet::compile(&[p, q]).err(),
        Some(PolicyError::DuplicateId {
            id: "rule-1".into()
        })
    );
}

#[test]
fn effect_annotations_must_fit_the_cedar_effect() {
    for (text, ok) in [
        (
            "@id(\"x\") @holdcall_effect(\"ask\") permit (principal, action, resource);",
            None,
        ),
        (
            "@id(\"x\") @holdcall_effect(\"deny\") permit (principal, action, resource);",
            None,
        ),
        (
            "@id(\"x\") @holdcall_effect(\"allow\") forbid (principal, action, resource);",
            None,
        ),
        (
            "@id(\"x\") @holdcall_effect(\"Ask\") forbid (principal, action, resource);",
            None,
        ),
        (
            "@id(\"x\") @holdcall_effect forbid (principal, action, resource);",
            None,
        ),
        (
            "@id(\"x\") @holdcall_effect(\"allow\") permit (principal, action, resource);",
            Some(Effect::Allow),
        ),
        (
            "@id(\"x\") permit (principal, action, resource);",
            Some(Effect::Allow),
        ),
        (
            "@id(\"x\") forbid (principal, action, resource);",
            Some(Effect::Deny),
        ),
        (
            "@id(\"x\") @holdcall_effect(\"deny\") forbid (principal, action, resource);",
            Some(Effect::Deny),
        ),
        (
            "@id(\"x\") @holdcall_effect(\"ask\") forbid (principal, action, resource);",
            Some(Effect::Ask),
        ),
    ] {
        match (parse_effect_and_specificity("x", text), ok) {
            (Ok((effect, 0)), Some(want)) => assert_eq!(effect, want, "{text}"),
            (Err(PolicyError::EffectAnnotation { id, .. }), None) => assert_eq!(id, "x"),
            (got, _) => panic!("{text}: got {got:?}"),
        }
    }
    let e = compile_err(
        "x",
        "@id(\"x\") @holdcall_efect(\"ask\") forbid (principal, action, resource);",
    );
    assert_eq!(
        e,
        PolicyError::UnknownAnnotation {
            id: "x".into(),
            key: "holdcall_efect".into()
        }
    );
    // Annotations outside Holdcall's prefix are the author's business.
    let text = "@id(\"x\") @reviewed(\"2026-01-01\") forbid (principal, action, resource);";
    assert_eq!(
        parse_effect_and_specificity("x", text),
        Ok((Effect::Deny, 0))
    );
}

#[test]
fn a_policy_that_fails_validation_is_refused_with_its_id() {
    let good = rule(1, Effect::Allow, &Scope::default());
    for text in [
        "@id(\"bad\") forbid (principal, action, resource == ToolName::\"x\");",
        "@id(\"bad\") forbid (principal == Tool::\"c/t\", action, resource);",
        "@id(\"bad\") forbid (principal, action, resource) when { context.nosuch == 1 };",
        "@id(\"bad\") forbid (principal, action, resource) when { resource.owner == \"x\" };",
    ] {
        match PolicySet::compile(&[good.clone(), raw(2, "bad", text)]) {
            Err(PolicyError::Validation { id, message }) => {
                assert_eq!(id, "bad");
                assert!(!message.is_empty());
                let shown = PolicyError::Validation { id, message }.to_string();
                assert!(shown.starts_with("policy bad does not validate"), "{shown}");
            }
            other => panic!("{text}: expected a validation error, got {:?}", other.err()),
        }
    }
    let e = compile_err("bad", "@id(\"bad\") forbid (principal, action, resource)");
    assert!(
        matches!(e, PolicyError::Syntax { ref id, .. } if id == "bad"),
        "{e:?}"
    );
    let two =
        "@id(\"bad\") forbid (principal, action, resource); permit (principal, action, resource);";
    assert!(matches!(
        compile_err("bad", two),
        PolicyError::Syntax { .. }
    ));
}

#[test]
fn specificity_comes_from_the_scope_alone() {
    let cases = [
        (scope(Some("t"), Some("a"), Some("c")), 6),
        (scope(Some("t"), None, Some("c")), 5),
        (scope(Some("t"), Some("a"), None), 5),
        (scope(Some("t"), None, None), 4),
        (scope(None, Some("a"), Some("c")), 2),
        (scope(None, Some("a"), None), 1),
        (scope(None, None, Some("c")), 1),
        (scope(None, None, None), 0),
    ];
    for (s, want) in cases {
        assert_eq!(specificity_of_scope(&s), want, "{s:?}");
        let text = cli_rule_text("r", Effect::Deny, &s);
        assert_eq!(
            parse_effect_and_specificity("r", &text),
            Ok((Effect::Deny, want))
        );
    }
    // A condition that reads like a scope adds nothing.
    let text = "@id(\"r\") forbid (principal, action, resource) when { resource in Connector::\"c\" && principal == Agent::\"a\" };";
    assert_eq!(
        parse_effect_and_specificity("r", text),
        Ok((Effect::Deny, 0))
    );
    // So an agent-named default (1) beats it even for its own connector.
    let set = compile(&[
        raw(1, "r", text),
        rule(2, Effect::Allow, &scope(None, Some("a"), None)),
    ]);
    assert_eq!(set.decide(&call(Some("a"), "c", "t")).effect, Effect::Allow);
    let d = set.decide(&call(Some("b"), "c", "t"));
    assert_eq!(d.effect, Effect::Allow, "{d:?}");
    let d = compile(&[raw(1, "r", text)]).decide(&call(Some("a"), "c", "t"));
    assert!(
        d.reason.contains("when its conditions hold"),
        "{}",
        d.reason
    );
}

#[test]
fn validate_tool_name_rejects_empty_star_control_characters_and_long_names() {
    assert!(validate_tool_name("delete_file").is_ok());
    assert!(validate_tool_name("a\"b\\c ツール/x").is_ok());
    assert!(validate_tool_name(&"x".repeat(256)).is_ok());
    assert!(validate_tool_name(&"é".repeat(128)).is_ok());
    for bad in ["", "*", "a\nb", "tab\t", "nul\0", "del\u{7f}", "c1\u{85}"] {
        assert!(
            matches!(
                validate_tool_name(bad),
                Err(PolicyError::InvalidToolName { .. })
            ),
            "{bad:?}"
        );
    }
    assert!(validate_tool_name(&"x".repeat(257)).is_err());
    assert!(validate_tool_name(&format!("{}é", "x".repeat(255))).is_err());
    let star = validate_tool_name("*").err();
    let help = star
        .as_ref()
        .and_then(miette::Diagnostic::help)
        .map(|h| h.to_string());
    assert!(help.is_some_and(|h| h.contains("holdcall policy default")));
}

#[test]
fn validate_scope_name_rejects_bad_agent_and_connector_names() {
    for good in ["a", "claude", "A1", "my-agent.v2_x", "0", &"a".repeat(128)] {
        assert!(validate_scope_name("agent", good).is_ok(), "{good:?}");
    }
    for bad in [
        "",
        "-a",
        "a-",
        ".a",
        "a.",
        "_a",
        "a_",
        "a b",
        "a/b",
        "a:b",
        "é",
        "a\n",
        "*",
        &"a".repeat(129),
    ] {
        match validate_scope_name("agent", bad) {
            Err(PolicyError::InvalidScopeName { kind, name, .. }) => {
                assert_eq!((kind.as_str(), name.as_str()), ("agent", bad));
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    let e = validate_scope_name("connector", "git hub").err();
    let shown = e.as_ref().map(ToString::to_string);
    assert_eq!(
        shown.as_deref(),
        Some("invalid connector name \"git hub\": it contains ' '")
    );
    let help = e
        .as_ref()
        .and_then(miette::Diagnostic::help)
        .map(|h| h.to_string());
    assert!(help.is_some_and(|h| h.starts_with("connector names are 1 to 128")));
}

#[test]
fn every_error_has_help() {
    let errors = [
        validate_tool_name("").err(),
        validate_scope_name("agent", "").err(),
        Some(compile_err("x", "nonsense")),
        Some(compile_err(
            "x",
            "@id(\"x\") permit (principal == ?principal, action, resource);",
        )),
        Some(compile_err("x", "permit (principal, action, resource);")),
        Some(compile_err(
            "x",
            "@id(\"y\") permit (principal, action, resource);",
        )),
        Some(compile_err(
            "x",
            "@a(\"\") @id(\"x\") permit (principal, action, resource);",
        )),
        Some(compile_err(
            "x",
            "@id(\"x\") @holdcall_x forbid (principal, action, resource);",
        )),
        Some(compile_err(
            "x",
            "@id(\"x\") @holdcall_effect(\"ask\") permit (principal, action, resource);",
        )),
        Some(compile_err(
            "x",
            "@id(\"x\") permit (principal in Agent::\"a\", action, resource);",
        )),
        Some(compile_err(
            "x",
            "@id(\"x\") permit (principal == Agent::\"-\", action, resource);",
        )),
        Some(compile_err(
            "x",
            "@id(\"x\") permit (principal, action, resource == ToolName::\"t\");",
        )),
        Some(PolicyError::DuplicateId { id: "x".into() }),
        Some(PolicyError::Schema {
            message: "m".into(),
        }),
    ];
    let mut seen = HashSet::new();
    for e in errors.into_iter().flatten() {
        let help = miette::Diagnostic::help(&e).map(|h| h.to_string());
        assert!(help.is_some_and(|h| !h.is_empty()), "{e:?}");
        seen.insert(std::mem::discriminant(&e));
    }
    assert_eq!(seen.len(), 14, "one case per variant");
}

/// The texts the one-pass parse is checked on: the CLI's rules, conditions on arguments,
/// comments inside a policy, and every scope form.
fn varied_texts() -> Vec<String> {
    let mut texts: Vec<String> = (1..=6)
        .map(|k| {
            let s = scope(
                (k % 2 == 0).then_some("write_file"),
                (k % 3 == 0).then_some("cursor"),
                (k > 3).then_some("files"),
            );
            rule(
                k,
                [Effect::Allow, Effect::Ask, Effect::Deny][k as usize % 3],
                &s,
            )
            .text
        })
        .collect();
    texts.push(
        "@id(\"cond\")\n@holdcall_effect(\"deny\")\nforbid (principal, action, resource)\n\
         // a comment inside\nwhen { context.arguments has path && context.arguments.path like \"*.env\" };"
            .to_string(),
    );
    texts
}

/// Each text stored under its own `@id`, in the order given.
fn stored_in_order(texts: &[String]) -> Vec<StoredPolicy> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let id = match cedar_policy::Policy::parse(None, t)
                .ok()
                .and_then(|p| p.annotation("id").map(str::to_string))
            {
                Some(id) => id,
                None => panic!("{t} has no id"),
            };
            raw(i as i64 + 1, &id, t)
        })
        .collect()
}

#[test]
fn parsing_a_set_in_one_pass_gives_each_policy_its_text_alone_gives() {
    let texts = varied_texts();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let Some(together) = crate::policy::compile::parse_together(&refs) else {
        panic!("the one-pass parse fell back on texts it should read");
    };
    assert_eq!(together.len(), texts.len());
    for (p, text) in together.iter().zip(&texts) {
        let alone = match cedar_policy::Policy::parse(None, text) {
            Ok(p) => p,
            Err(e) => panic!("{text}: {e}"),
        };
        assert_eq!(p.to_json().ok(), alone.to_json().ok(), "{text}");
    }
}

#[test]
fn texts_that_parse_only_when_joined_are_refused_as_each_alone_would_be() {
    // Alone, neither is a policy; joined, they are exactly one.
    let first = "@id(\"a\")\n@holdcall_effect(\"deny\")\nforbid (principal, action, resource)\nwhen { true &&";
    let second = "true };";
    assert!(crate::policy::compile::parse_together(&[first, second]).is_none());
    match PolicySet::compile(&[raw(1, "a", first), raw(2, "b", second)]) {
        Err(PolicyError::Syntax { id, .. }) => assert_eq!(id, "a"),
        other => panic!("expected a syntax error naming policy a, got {other:?}"),
    }
    // Two texts whose policies only line up by count are not taken for one another either:
    // one text holding two policies beside one holding half of one.
    let two = "@id(\"c\")\n@holdcall_effect(\"deny\")\nforbid (principal, action, resource);\n\
               @id(\"d\")\n@holdcall_effect(\"deny\")\nforbid (principal, action, resource);";
    assert!(crate::policy::compile::parse_together(&[two, first, second]).is_none());
    assert!(
        PolicySet::compile(&[raw(1, "c", two), raw(2, "a", first), raw(3, "b", second)]).is_err()
    );
}

#[test]
fn a_policy_ending_in_a_comment_still_compiles_in_a_set() {
    let mut texts = varied_texts();
    texts.push(
        "@id(\"late\")\n@holdcall_effect(\"deny\")\nforbid (principal, action, resource);\n// why\n"
            .to_string(),
    );
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    // The one-pass parse cannot vouch for this text, so each is parsed alone.
    assert!(crate::policy::compile::parse_together(&refs).is_none());
    let set = compile(&stored_in_order(&texts));
    assert_eq!(set.info().len(), texts.len());
}

#[test]
fn validating_a_set_at_once_refuses_exactly_what_validating_each_alone_refuses() {
    // What an argument test guards is type-checked too (on the copy with the test as true);
    // the rest of the set is clean, so only the exact check of the one policy can word it.
    let guarded = "@id(\"guarded\")\n@holdcall_effect(\"deny\")\nforbid (principal, action, resource)\n\
                   when { context.arguments has path && context.nosuch == 1 };";
    let mut set = stored_in_order(&varied_texts());
    // The clean set compiles, every policy cleared by the one validation of the whole set.
    assert_eq!(compile(&set).info().len(), set.len());
    set.push(raw(100, "guarded", guarded));
    let alone = compile_err("guarded", guarded);
    match PolicySet::compile(&set) {
        Err(e) => assert_eq!(e.to_string(), alone.to_string()),
        Ok(_) => panic!("a set holding {guarded} compiled"),
    }
}

#[test]
fn a_set_is_not_validated_again_only_under_its_own_validation_key() {
    // Only Cedar's strict validation refuses a type error; every other check passes.
    let invalid = vec![
        raw(1, "ok", "@id(\"ok\") permit (principal, action, resource);"),
        raw(
            2,
            "x",
            "@id(\"x\") permit (principal, action, resource) when { 1 + \"a\" == 2 };",
        ),
    ];
    assert!(matches!(
        PolicySet::compile(&invalid),
        Err(PolicyError::Validation { .. })
    ));
    let key = crate::policy::compile::validation_key(&invalid);
    // Under its own key the set compiles without validation (the key says it was validated).
    let set = PolicySet::compile_validated(&invalid, Some(&key)).unwrap();
    assert_eq!(set.validation_key(), key);
    // Any other key, or none, and it is validated, and refused.
    for other in [None, Some("0".repeat(64)), Some(key.to_uppercase())] {
        assert!(
            matches!(
                PolicySet::compile_validated(&invalid, other.as_deref()),
                Err(PolicyError::Validation { .. })
            ),
            "{other:?}"
        );
    }
    // The key is the set's: another text, id or seq, or a policy more or less, changes it.
    let mut edited = invalid.clone();
    edited[1].text = edited[1].text.replace("== 2", "== 3");
    let mut renumbered = invalid.clone();
    renumbered[1].seq = 3;
    let mut renamed = invalid.clone();
    renamed[0].id = "ok2".into();
    for other in [edited, renumbered, renamed, invalid[..1].to_vec()] {
        assert_ne!(crate::policy::compile::validation_key(&other), key);
    }
    // Input order does not matter; seq does.
    let reversed: Vec<StoredPolicy> = invalid.iter().rev().cloned().collect();
    assert_eq!(crate::policy::compile::validation_key(&reversed), key);
    // Every other check is still made under a matching key.
    let no_id = vec![raw(1, "y", "permit (principal, action, resource);")];
    let key = crate::policy::compile::validation_key(&no_id);
    assert!(matches!(
        PolicySet::compile_validated(&no_id, Some(&key)),
        Err(PolicyError::MissingId { .. })
    ));
}

#[test]
fn a_text_opens_with_its_id_only_when_written_as_holdcall_writes_it() {
    let rule = " permit (principal, action, resource);";
    let claims = [
        ("@id(\"a\")", "a", true),
        ("  \n@id(\"a\")", "a", true),
        ("@id(\"a\\\"b\\\\c\")", "a\"b\\c", true),
        ("@id(\"ab\")", "a", false),
        ("@id(\"a\")", "ab", false),
        ("@id( \"a\" )", "a", false),
        ("@id(\"\\u{61}\")", "a", false),
        ("@holdcall_effect(\"ask\") @id(\"a\")", "a", false),
    ];
    for (head, id, opens) in claims {
        let text = format!("{head}{rule}");
        assert_eq!(crate::policy::opens_with_id(&text, id), opens, "{text}");
        // What it claims, a parse agrees with; what it does not claim, it leaves to a parse.
        if opens {
            assert_eq!(
                crate::policy::diff::id_of(&text).as_deref(),
                Some(id),
                "{text}"
            );
        }
    }
}
