//! The catalog's contract, walked tool by tool: every schema uses only what `schema::validate`
//! enforces, every input is a closed object whose defaults pass their own schemas, every output is
//! an object, names are unique; and the instructions agree with the limits and the tool list.

use serde_json::{Value, json};

use super::{INSTRUCTIONS, ISSUE_TOOLS, catalog, check_names_only_known_tools, find, named_tools};
use crate::holdmap::schema::{check_schema, validate};
use crate::holdmap::tool::{Annotations, ToolDef};
use crate::limits;

/// What is wrong with one tool's definition; empty when nothing is.
fn problems(def: &ToolDef) -> Vec<String> {
    let mut out = Vec::new();
    let name = def.name;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
        out.push(format!("`{name}`: a tool name is snake_case"));
    }
    if def.title.trim().is_empty() || def.description.trim().is_empty() {
        out.push(format!(
            "`{name}`: title and description must say something"
        ));
    }
    for (which, schema) in [("input", &def.input_schema), ("output", &def.output_schema)] {
        if let Err(message) = check_schema(schema) {
            out.push(format!("`{name}` {which} schema: {message}"));
        }
        if schema.get("type") != Some(&json!("object")) {
            out.push(format!("`{name}` {which} schema: must be of type object"));
        }
    }
    if def.input_schema.get("additionalProperties") != Some(&json!(false)) {
        out.push(format!(
            "`{name}` input schema: must be closed (additionalProperties false)"
        ));
    }
    defaults(&def.input_schema, &format!("`{name}` input"), &mut out);
    out
}

/// Every `default` inside `schema` must pass the schema it sits in.
fn defaults(schema: &Value, at: &str, out: &mut Vec<String>) {
    let Some(map) = schema.as_object() else {
        return;
    };
    if let Some(default) = map.get("default")
        && let Err(message) = validate(schema, default, "default")
    {
        out.push(format!("{at}: its default fails its own schema: {message}"));
    }
    for (key, inner) in map {
        match (key.as_str(), inner) {
            ("properties", Value::Object(properties)) => {
                for (name, sub) in properties {
                    defaults(sub, &format!("{at}.{name}"), out);
                }
            }
            ("anyOf", Value::Array(branches)) => {
                for sub in branches {
                    defaults(sub, at, out);
                }
            }
            ("items" | "if" | "then" | "else" | "additionalProperties", sub) => {
                defaults(sub, &format!("{at}/{key}"), out);
            }
            _ => {}
        }
    }
}

fn fixture(input: Value, output: Value) -> ToolDef {
    ToolDef {
        name: "stop_port",
        title: "Stop a port",
        description: "Preview, then stop, the owner of a port.",
        input_schema: input,
        output_schema: output,
        annotations: Annotations::STOPS,
    }
}

#[test]
fn every_tool_in_the_catalog_publishes_only_what_the_server_enforces() {
    let found: Vec<String> = catalog()
        .iter()
        .flat_map(|(def, _)| problems(def))
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn tool_names_are_unique_and_in_the_issues_order() {
    let names: Vec<&str> = catalog().iter().map(|(def, _)| def.name).collect();
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "duplicate names in {names:?}");
    let known: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| ISSUE_TOOLS.contains(n))
        .collect();
    let expected: Vec<&str> = ISSUE_TOOLS
        .iter()
        .copied()
        .filter(|n| names.contains(n))
        .collect();
    assert_eq!(known, expected);
}

#[test]
fn every_catalog_name_is_found_by_name() {
    for (def, _) in catalog() {
        assert_eq!(find(def.name).map(|(d, _)| d.name), Some(def.name));
    }
    assert!(find("allow_protected").is_none());
    assert!(find("").is_none());
}

#[test]
fn the_catalog_check_passes_a_closed_tool_with_sound_defaults() {
    let def = fixture(
        json!({
            "type": "object",
            "properties": {
                "port": { "type": "integer", "minimum": 1, "maximum": 65535 },
                "dry_run": { "type": "boolean", "default": true }
            },
            "required": ["port"],
            "additionalProperties": false
        }),
        json!({ "type": "object", "properties": { "port": { "type": "integer" } } }),
    );
    assert_eq!(problems(&def), Vec::<String>::new());
}

#[test]
fn the_catalog_check_catches_each_broken_contract() {
    let closed = |properties: Value| json!({ "type": "object", "properties": properties, "additionalProperties": false });
    let object = json!({ "type": "object" });
    let cases = [
        (
            fixture(
                json!({ "type": "object", "properties": {} }),
                object.clone(),
            ),
            "must be closed",
        ),
        (
            fixture(
                closed(json!({ "near": { "type": "string", "pattern": "^[0-9]+$" } })),
                object.clone(),
            ),
            "`pattern` is not a keyword holdmap enforces",
        ),
        (
            fixture(
                closed(json!({ "dry_run": { "type": "boolean", "default": "true" } })),
                object.clone(),
            ),
            "`stop_port` input.dry_run: its default fails its own schema",
        ),
        (
            fixture(closed(json!({})), json!({ "type": "array" })),
            "output schema: must be of type object",
        ),
        (
            fixture(
                closed(json!({})),
                json!({ "type": "object", "format": "x" }),
            ),
            "output schema: #: `format` is not a keyword",
        ),
    ];
    for (def, expected) in &cases {
        let found = problems(def).join("\n");
        assert!(found.contains(expected), "wanted {expected:?} in {found:?}");
    }
}

#[test]
#[should_panic(expected = "no tool `no_such_tool` in the catalog")]
fn check_output_refuses_a_tool_the_catalog_does_not_have() {
    super::check_output("no_such_tool", &json!({}));
}

#[test]
fn the_instructions_are_one_paragraph_naming_only_real_tools() {
    assert!(!INSTRUCTIONS.contains('\n'));
    check_names_only_known_tools(INSTRUCTIONS, "INSTRUCTIONS");
    for tool in ISSUE_TOOLS {
        assert!(
            INSTRUCTIONS.contains(&format!("`{tool}`")),
            "{tool} is not mentioned"
        );
    }
    assert!(INSTRUCTIONS.contains(crate::holdmap::guide::GUIDE_URI));
}

#[test]
fn the_instructions_quote_the_limits_the_server_enforces() {
    let mib = |bytes: usize| format!("{} MiB", bytes / (1024 * 1024));
    let expected = [
        format!("{} s", limits::HOLDMAP_HANDLE_TTL.as_secs()),
        format!("at most {} previews", limits::HOLDMAP_HANDLES_MAX),
        format!("at most {} ports", limits::HOLDMAP_PREVIEW_TARGETS_MAX),
        format!("{} of plan", mib(limits::HOLDMAP_PREVIEW_BYTES_MAX)),
        format!("limited to {}", mib(limits::HOLDMAP_FRAME_BYTES_MAX)),
        format!("{} messages", limits::HOLDMAP_BATCH_MAX),
        "defaults to true".to_owned(),
        "candidate, not a reservation".to_owned(),
        "authorization".to_owned(),
        "re-initialising".to_owned(),
        "once".to_owned(),
        "this session only".to_owned(),
    ];
    for words in &expected {
        assert!(INSTRUCTIONS.contains(words.as_str()), "missing {words:?}");
    }
}

#[test]
fn tool_names_are_read_from_verbs_and_backticks_but_not_from_arguments() {
    let text = "Call `explain_port`, then stop_port with `dry_run` and `confirmation_id`; \
                never `list_agents` or `rm_rf`; the `inspect_agents` prompt.";
    assert_eq!(
        named_tools(text),
        vec!["explain_port", "list_agents", "rm_rf", "stop_port"]
    );
}

#[test]
fn a_tool_module_that_has_landed_publishes_all_of_its_issue_tools() {
    let modules: [(&[crate::holdmap::tool::Tool], &[&str]); 6] = [
        (
            crate::holdmap::ports::TOOLS,
            &[
                "list_ports",
                "explain_port",
                "inspect_port",
                "find_free_port",
                "wait_for_port",
            ],
        ),
        (
            crate::holdmap::topology::TOOLS,
            &["get_topology", "plan_cluster_stop"],
        ),
        (
            crate::holdmap::agents::TOOLS,
            &["list_agents", "get_agent_flow"],
        ),
        (crate::holdmap::needs::TOOLS, &["list_needs"]),
        (
            crate::holdmap::analyzers::TOOLS,
            &["list_analyzers", "list_insights"],
        ),
        (
            crate::holdmap::stop::TOOLS,
            &["stop_port", "stop_agent_ports"],
        ),
    ];
    let mut missing: Vec<&str> = Vec::new();
    for (tools, names) in modules {
        if !tools.is_empty() {
            missing.extend(names.iter().copied().filter(|n| find(n).is_none()));
        }
    }
    assert!(missing.is_empty(), "not in the catalog: {missing:?}");
    // Parts 1 and 2 have exactly the issues' fourteen; another belongs to this list.
    assert!(catalog().len() <= ISSUE_TOOLS.len());
}
