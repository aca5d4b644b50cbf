//! The protocol's own methods: initialize, server/discover, tools/list, tools/call's parameters
//! and its result, resources and prompts. Each takes the request's `params` and gives a result
//! or a JSON-RPC error; `wire` shapes it for the revision.
//!
//! Must never: run a tool (the server does, after `call_target` and `schema::validate`), read
//! the machine, or decide what a revision shows (that is `wire`'s shaping step).

use serde_json::{Map, Value, json};

use crate::holdmap::tool::{Outcome, Tool, ToolDef};
use crate::holdmap::wire::{
    HANDSHAKE_REVISIONS, NEWEST_HANDSHAKE, RESOURCE_NOT_FOUND, REVISIONS, RpcError,
};
use crate::holdmap::{catalog, guide, prompts};
use crate::text::visible;

/// Where a 2026-07-28 result carries the server's identity (`server/discover` has no
/// `serverInfo` field).
const SERVER_INFO_META_KEY: &str = "io.modelcontextprotocol/serverInfo";

fn capabilities() -> Value {
    json!({
        "tools": {"listChanged": false},
        "resources": {"subscribe": false, "listChanged": false},
        "prompts": {"listChanged": false},
    })
}

fn server_info() -> Value {
    json!({"name": "holdmap", "title": "holdmap", "version": crate::VERSION})
}

/// `initialize`: the negotiated revision (the proposal when holdmap has it, else the newest)
/// and the result. The caller clears the session's handles.
pub(crate) fn initialize(params: &Map<String, Value>) -> Result<(&'static str, Value), RpcError> {
    let Some(proposal) = params.get("protocolVersion").and_then(Value::as_str) else {
        return Err(RpcError::invalid_params(
            "initialize requires a string protocolVersion",
        ));
    };
    let revision = HANDSHAKE_REVISIONS
        .into_iter()
        .find(|r| *r == proposal)
        .unwrap_or(NEWEST_HANDSHAKE);
    let result = json!({
        "protocolVersion": revision,
        "capabilities": capabilities(),
        "serverInfo": server_info(),
        "instructions": catalog::INSTRUCTIONS,
    });
    Ok((revision, result))
}

/// `server/discover` (2026-07-28): every revision holdmap serves, its capabilities and
/// instructions, its identity in `_meta`.
pub(crate) fn discover() -> Value {
    json!({
        "supportedVersions": REVISIONS,
        "capabilities": capabilities(),
        "instructions": catalog::INSTRUCTIONS,
        "_meta": {SERVER_INFO_META_KEY: server_info()},
    })
}

/// One `tools/list` item, in full (the shaping step removes what a revision lacks).
fn tool_item(def: &ToolDef) -> Value {
    let a = def.annotations;
    json!({
        "name": def.name,
        "title": def.title,
        "description": def.description,
        "inputSchema": def.input_schema,
        "outputSchema": def.output_schema,
        "annotations": {
            "readOnlyHint": a.read_only,
            "destructiveHint": a.destructive,
            "idempotentHint": a.idempotent,
            "openWorldHint": a.open_world,
        },
    })
}

/// `tools/list`: every tool in `tools`, in order.
pub(crate) fn tools_list(tools: &[(ToolDef, Tool)]) -> Value {
    let items: Vec<Value> = tools.iter().map(|(def, _)| tool_item(def)).collect();
    json!({ "tools": items })
}

/// The tool a `tools/call` names, and its arguments.
pub(crate) type Target<'t> = (&'t (ToolDef, Tool), Map<String, Value>);

/// The parameters `tools/call` accepts besides a task (which is refused on its own).
const CALL_PARAMS: [&str; 3] = ["name", "arguments", "_meta"];

/// Checks `tools/call`'s params (digest §3.4, in its order) and finds the tool: the tool and
/// its arguments (`{}` when absent). Every failure here is a malformed request (-32602); the
/// arguments' values are checked afterwards against the tool's schema, as a tool error.
pub(crate) fn call_target<'t>(
    params: &Map<String, Value>,
    tools: &'t [(ToolDef, Tool)],
) -> Result<Target<'t>, RpcError> {
    if params.contains_key("task") {
        return Err(RpcError::invalid_params(
            "Task-augmented execution is not supported by this server",
        ));
    }
    if let Some(extra) = params.keys().find(|k| !CALL_PARAMS.contains(&k.as_str())) {
        return Err(RpcError::invalid_params(format!(
            "Unknown tools/call parameter `{}`; tool inputs belong inside arguments",
            visible(extra)
        )));
    }
    match params.get("_meta") {
        None => {}
        Some(Value::Object(meta)) => match meta.get("progressToken") {
            None | Some(Value::String(_) | Value::Number(_)) => {}
            Some(_) => {
                return Err(RpcError::invalid_params(
                    "`_meta.progressToken` must be a string or a number",
                ));
            }
        },
        Some(_) => return Err(RpcError::invalid_params("`_meta` must be an object")),
    }
    let name = match params.get("name") {
        Some(Value::String(name)) if !name.is_empty() => name,
        _ => {
            return Err(RpcError::invalid_params(
                "tools/call requires a nonempty string name",
            ));
        }
    };
    let Some(entry) = tools.iter().find(|(def, _)| def.name == name) else {
        return Err(RpcError::invalid_params(format!(
            "unknown tool: {}",
            visible(name)
        )));
    };
    let arguments = match params.get("arguments") {
        None => Map::new(),
        Some(Value::Object(arguments)) => arguments.clone(),
        Some(other) => {
            return Err(RpcError::invalid_params(format!(
                "`arguments` must be an object of named tool inputs, not {}",
                kind(other)
            )));
        }
    };
    Ok((entry, arguments))
}

/// A JSON value's kind, for error messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A `tools/call` result: success is the summary and the pretty-printed JSON as two text
/// blocks (for clients that ignore `structuredContent`) plus `structuredContent`; a failure is
/// one text block with `isError`.
pub(crate) fn tool_result(outcome: Outcome) -> Value {
    match outcome {
        Outcome::Done {
            summary,
            structured,
        } => {
            let text = serde_json::to_string_pretty(&structured).unwrap_or_default();
            json!({
                "content": [
                    {"type": "text", "text": summary},
                    {"type": "text", "text": text},
                ],
                "structuredContent": structured,
                "isError": false,
            })
        }
        Outcome::Failed(text) => tool_error(&text),
    }
}

/// A tool error result (`isError: true`): one text block, no structured content.
pub(crate) fn tool_error(text: &str) -> Value {
    json!({
        "content": [{"type": "text", "text": text}],
        "isError": true,
    })
}

/// `resources/list`.
pub(crate) fn resources_list() -> Value {
    json!({ "resources": guide::list() })
}

/// `resources/templates/list`: holdmap has no templates.
pub(crate) fn resource_templates_list() -> Value {
    json!({ "resourceTemplates": [] })
}

/// `resources/read`: only a URI the guide names exactly (-32002 otherwise).
pub(crate) fn resources_read(params: &Map<String, Value>) -> Result<Value, RpcError> {
    let Some(uri) = params.get("uri").and_then(Value::as_str) else {
        return Err(RpcError::invalid_params(
            "resources/read requires a string uri",
        ));
    };
    match guide::read(uri) {
        Some(contents) => Ok(json!({ "contents": contents })),
        None => Err(RpcError::new(RESOURCE_NOT_FOUND, "Resource not found")
            .with_data(json!({ "uri": uri }))),
    }
}

/// `prompts/list`.
pub(crate) fn prompts_list() -> Value {
    json!({ "prompts": prompts::list() })
}

/// `prompts/get`: any failure is -32602 in the prompt module's words.
pub(crate) fn prompts_get(params: &Map<String, Value>) -> Result<Value, RpcError> {
    prompts::get(params).map_err(RpcError::invalid_params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::holdmap::tool::{Annotations, Cx, Reply};

    fn def() -> ToolDef {
        ToolDef {
            name: "probe",
            title: "Probe",
            description: "a fake",
            input_schema: json!({"type":"object","additionalProperties":false}),
            output_schema: json!({"type":"object"}),
            annotations: Annotations::READ_ONLY,
        }
    }

    fn run(_: &Map<String, Value>, _: &mut Cx<'_>) -> Reply {
        Reply::Now(Outcome::Failed("never run here".to_owned()))
    }

    fn tools() -> Vec<(ToolDef, Tool)> {
        vec![(def(), Tool { def, run })]
    }

    fn check(params: Value) -> Result<Map<String, Value>, RpcError> {
        let tools = tools();
        let Value::Object(params) = params else {
            panic!("params must be an object")
        };
        call_target(&params, &tools).map(|(_, args)| args)
    }

    #[test]
    fn a_task_is_refused_before_any_other_parameter_is_looked_at() {
        let e = check(json!({"task": {}, "bogus": 1})).unwrap_err();
        assert_eq!(e.code, -32602);
        assert_eq!(
            e.message,
            "Task-augmented execution is not supported by this server"
        );
    }

    #[test]
    fn each_malformed_call_parameter_is_invalid_params_with_its_own_words() {
        let cases = [
            (
                json!({"name":"probe","dry_run":true}),
                "Unknown tools/call parameter `dry_run`; tool inputs belong inside arguments",
            ),
            (
                json!({"name":"probe","_meta":[]}),
                "`_meta` must be an object",
            ),
            (
                json!({"name":"probe","_meta":{"progressToken":true}}),
                "`_meta.progressToken` must be a string or a number",
            ),
            (json!({}), "tools/call requires a nonempty string name"),
            (
                json!({"name":""}),
                "tools/call requires a nonempty string name",
            ),
            (
                json!({"name":7}),
                "tools/call requires a nonempty string name",
            ),
            (json!({"name":"nope"}), "unknown tool: nope"),
            (
                json!({"name":"probe","arguments":[]}),
                "`arguments` must be an object of named tool inputs, not an array",
            ),
            (
                json!({"name":"probe","arguments":null}),
                "`arguments` must be an object of named tool inputs, not null",
            ),
            (
                json!({"name":"probe","arguments":3}),
                "`arguments` must be an object of named tool inputs, not a number",
            ),
        ];
        for (params, words) in cases {
            let e = check(params.clone()).unwrap_err();
            assert_eq!((e.code, e.message.as_str()), (-32602, words), "{params}");
        }
    }

    #[test]
    fn absent_arguments_are_an_empty_object_and_a_progress_token_is_accepted() {
        assert_eq!(check(json!({"name":"probe"})).unwrap(), Map::new());
        let args = check(json!({"name":"probe","arguments":{"a":1},"_meta":{"progressToken":"t"}}))
            .unwrap();
        assert_eq!(Value::Object(args), json!({"a":1}));
    }

    #[test]
    fn a_success_carries_the_same_json_as_text_and_as_structured_content() {
        let structured = json!({"port": 3000, "ready": true});
        let r = tool_result(Outcome::Done {
            summary: "ready".to_owned(),
            structured: structured.clone(),
        });
        assert_eq!(r["isError"], json!(false));
        assert_eq!(r["content"][0]["text"], json!("ready"));
        assert_eq!(
            r["content"][1]["text"],
            json!(serde_json::to_string_pretty(&structured).unwrap())
        );
        assert_eq!(r["structuredContent"], structured);
        let f = tool_result(Outcome::Failed("no".to_owned()));
        assert_eq!(
            f,
            json!({"content":[{"type":"text","text":"no"}],"isError":true})
        );
    }

    #[test]
    fn initialize_echoes_a_known_revision_and_answers_the_newest_otherwise() {
        let params = |v: Value| match json!({ "protocolVersion": v }) {
            Value::Object(m) => m,
            _ => unreachable!(),
        };
        for known in HANDSHAKE_REVISIONS {
            assert_eq!(initialize(&params(json!(known))).unwrap().0, known);
        }
        assert_eq!(
            initialize(&params(json!("1999-01-01"))).unwrap().0,
            "2025-11-25"
        );
        assert_eq!(
            initialize(&params(json!("2026-07-28"))).unwrap().0,
            "2025-11-25"
        );
        assert_eq!(initialize(&params(json!(5))).unwrap_err().code, -32602);
        let (_, result) = initialize(&params(json!("2025-06-18"))).unwrap();
        assert_eq!(result["serverInfo"]["name"], json!("holdmap"));
        assert_eq!(result["instructions"], json!(catalog::INSTRUCTIONS));
        assert_eq!(
            result["capabilities"]["resources"]["subscribe"],
            json!(false)
        );
    }

    #[test]
    fn tools_list_publishes_the_definition_with_its_four_hints() {
        let list = tools_list(&tools());
        let item = &list["tools"][0];
        assert_eq!(item["name"], json!("probe"));
        assert_eq!(item["inputSchema"], def().input_schema);
        assert_eq!(
            item["annotations"],
            json!({"readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false})
        );
    }
}
