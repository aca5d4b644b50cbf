//! One agent's `capabilities` as `list_agents` returns it, and its closed JSON schema.
//!
//! Must never: add a field the schema does not declare, or render a value the model does not
//! already hold (the model holds metadata only: see `agents::model`). Paths and names go through
//! `text::visible`, so a control character in a file name cannot reach a terminal.

use std::path::Path;

use serde_json::{Value, json};

use crate::holdmap::agents::model::Capabilities;

fn path(p: &Path) -> Value {
    Value::String(crate::text::visible(&p.to_string_lossy()))
}

fn text(s: &str) -> Value {
    Value::String(crate::text::visible(s))
}

fn opt(s: Option<&str>) -> Value {
    s.map_or(Value::Null, text)
}

/// The capabilities object: every fact read from files now (`observed`), a server's running
/// state `observed` when a member process runs it and `unknown` otherwise (holdmap sees only
/// the agent's own processes).
pub(crate) fn to_json(caps: &Capabilities) -> Value {
    let sources: Vec<Value> = caps
        .sources
        .iter()
        .map(|s| {
            json!({
                "path": path(&s.path),
                "scope": text(&s.scope),
                "state": s.state,
                "reason": opt(s.reason.as_deref()),
            })
        })
        .collect();
    let servers: Vec<Value> = caps
        .servers
        .iter()
        .map(|s| {
            json!({
                "client": s.client,
                "alias": text(&s.alias),
                "scope": text(&s.scope),
                "source": path(&s.source),
                "transport": text(&s.transport),
                "enabled": s.enabled,
                "runner": opt(s.runner.as_deref()),
                "package": opt(s.package.as_deref()),
                "pin": s.pin,
                "pin_detail": text(&s.pin_detail),
                "remote_host": opt(s.remote_host.as_deref()),
                "env_names": s.env_names.iter().map(|n| text(n)).collect::<Vec<_>>(),
                "header_names": s.header_names.iter().map(|n| text(n)).collect::<Vec<_>>(),
                "routing": s.routing,
                "routing_detail": opt(s.routing_detail.as_deref()),
                "holdcall_home": opt(s.holdcall_home.as_deref()),
                "holdcall_home_state": s.holdcall_home_state,
                "running": !s.running_pids.is_empty(),
                "running_pids": s.running_pids,
                "running_evidence": if s.running_pids.is_empty() { "unknown" } else { "observed" },
                "evidence": "observed",
            })
        })
        .collect();
    let permissions: Vec<Value> = caps
        .permissions
        .iter()
        .map(|r| {
            json!({
                "client": r.client,
                "effect": r.effect,
                "rule": text(&r.rule),
                "source": path(&r.source),
            })
        })
        .collect();
    let settings: Vec<Value> = caps
        .settings
        .iter()
        .map(|s| {
            json!({
                "client": s.client,
                "name": text(&s.name),
                "value": text(&s.value),
                "risky": s.risky,
                "source": path(&s.source),
            })
        })
        .collect();
    let instructions: Vec<Value> = caps
        .instructions
        .iter()
        .map(|p| {
            json!({
                "name": p.file_name().map_or(Value::Null, |n| text(&n.to_string_lossy())),
                "path": path(p),
            })
        })
        .collect();
    let skills: Vec<Value> = caps
        .skills
        .iter()
        .map(|s| {
            json!({
                "client": s.client,
                "folder": text(&s.folder),
                "path": path(&s.path),
                "scope": text(&s.scope),
                "name": opt(s.name.as_deref()),
                "purpose": opt(s.purpose.as_deref()),
            })
        })
        .collect();
    json!({
        "evidence": "observed",
        "sources": sources,
        "servers": servers,
        "permissions": permissions,
        "settings": settings,
        "instructions": instructions,
        "skills": skills,
        "limits": caps.limits.iter().map(|l| text(l)).collect::<Vec<_>>(),
    })
}

fn closed(required: &[&str], properties: Value) -> Value {
    json!({
        "type": "object",
        "required": required,
        "properties": properties,
        "additionalProperties": false,
    })
}

fn list_of(item: Value) -> Value {
    json!({"type": "array", "items": item})
}

/// The closed schema of [`to_json`]'s object.
pub(crate) fn output_schema() -> Value {
    let s = json!({"type": "string"});
    let s_or_null = json!({"type": ["string", "null"]});
    let names = list_of(s.clone());
    let source = closed(
        &["path", "scope", "state", "reason"],
        json!({
            "path": s, "scope": s,
            "state": {"type": "string", "enum": ["read", "missing", "refused"]},
            "reason": s_or_null,
        }),
    );
    let server_fields = [
        "client",
        "alias",
        "scope",
        "source",
        "transport",
        "enabled",
        "runner",
        "package",
        "pin",
        "pin_detail",
        "remote_host",
        "env_names",
        "header_names",
        "routing",
        "routing_detail",
        "holdcall_home",
        "holdcall_home_state",
        "running",
        "running_pids",
        "running_evidence",
        "evidence",
    ];
    let server = closed(
        &server_fields,
        json!({
            "client": s, "alias": s, "scope": s, "source": s,
            "transport": s,
            "enabled": {"type": ["boolean", "null"]},
            "runner": s_or_null, "package": s_or_null,
            "pin": {"type": "string", "enum": ["pinned", "unpinned", "unknown"]},
            "pin_detail": s,
            "remote_host": s_or_null,
            "env_names": names, "header_names": names,
            "routing": {"type": "string", "enum": ["routed", "not routed", "remote", "unrecognized"]},
            "routing_detail": s_or_null,
            "holdcall_home": s_or_null,
            "holdcall_home_state": {"type": ["string", "null"], "enum": ["usual", "other", "relative", null]},
            "running": {"type": "boolean"},
            "running_pids": list_of(json!({"type": "integer"})),
            "running_evidence": {"type": "string", "enum": ["observed", "unknown"]},
            "evidence": {"type": "string", "enum": ["observed"]},
        }),
    );
    let rule = closed(
        &["client", "effect", "rule", "source"],
        json!({
            "client": s,
            "effect": {"type": "string", "enum": ["allow", "ask", "deny"]},
            "rule": s, "source": s,
        }),
    );
    let setting = closed(
        &["client", "name", "value", "risky", "source"],
        json!({"client": s, "name": s, "value": s, "risky": {"type": "boolean"}, "source": s}),
    );
    let instruction = closed(&["name", "path"], json!({"name": s_or_null, "path": s}));
    let skill = closed(
        &["client", "folder", "path", "scope", "name", "purpose"],
        json!({
            "client": s, "folder": s, "path": s, "scope": s,
            "name": s_or_null, "purpose": s_or_null,
        }),
    );
    closed(
        &[
            "evidence",
            "sources",
            "servers",
            "permissions",
            "settings",
            "instructions",
            "skills",
            "limits",
        ],
        json!({
            "evidence": {"type": "string", "enum": ["observed"]},
            "sources": list_of(source),
            "servers": list_of(server),
            "permissions": list_of(rule),
            "settings": list_of(setting),
            "instructions": list_of(instruction),
            "skills": list_of(skill),
            "limits": names,
        }),
    )
}
