//! The stop tools' published schemas: closed input objects (the `if`/`then` on `dry_run: false`
//! is published for clients and enforced again in code), and output `anyOf(preview, report)`.

use serde_json::{Value, json};

use crate::holdmap::plan::plan_schema;
use crate::limits::{HOLDMAP_HANDLE_CHARS_MAX, HOLDMAP_HANDLE_TTL};

fn dry_run() -> Value {
    json!({"type": "boolean", "default": true,
        "description": "true (the default): preview only. false: execute the plan a preview returned, with its confirmation_id."})
}

fn confirmation_id() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": HOLDMAP_HANDLE_CHARS_MAX,
        "description": "The one-use handle a permitted preview of the same target and options returned."})
}

fn force() -> Value {
    json!({"type": "boolean", "default": false,
        "description": "Send SIGKILL at once instead of SIGTERM first."})
}

/// `confirmation_id` is required when `dry_run` is `false`.
fn needs_handle() -> (Value, Value) {
    (
        json!({"properties": {"dry_run": {"const": false}}, "required": ["dry_run"]}),
        json!({"required": ["confirmation_id"]}),
    )
}

pub(crate) fn stop_port_input() -> Value {
    let (cond, then) = needs_handle();
    json!({
        "type": "object",
        "properties": {
            "port": {"type": "integer", "minimum": 1, "maximum": 65535,
                "description": "The port whose owner to stop (TCP and UDP)."},
            "dry_run": dry_run(),
            "confirmation_id": confirmation_id(),
            "force": force(),
            "allow_non_dev": {"type": "boolean", "default": false,
                "description": "Also permit stopping your own process that is not a dev server. Protected, foreign and unknown owners stay refused."}
        },
        "required": ["port"],
        "additionalProperties": false,
        "if": cond,
        "then": then
    })
}

pub(crate) fn stop_agent_ports_input() -> Value {
    let (cond, then) = needs_handle();
    json!({
        "type": "object",
        "properties": {
            "agent": {"type": "string", "minLength": 1, "maxLength": 256,
                "description": "An agent program (claude, codex, gemini, aider …) or pid:N."},
            "dry_run": dry_run(),
            "confirmation_id": confirmation_id(),
            "force": force()
        },
        "required": ["agent"],
        "additionalProperties": false,
        "if": cond,
        "then": then
    })
}

fn agent_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "pid": {"type": "integer", "minimum": 0},
            "start_ticks": {"type": "integer", "minimum": 0},
            "program": {"type": "string"},
            "name": {"type": "string"},
            "command": {"type": "string"},
            "ports": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                    "protocol": {"type": "string", "enum": ["tcp", "udp"]}
                },
                "required": ["port", "protocol"],
                "additionalProperties": false
            }}
        },
        "required": ["pid", "start_ticks", "program", "name", "command", "ports"],
        "additionalProperties": false
    })
}

fn preview_schema(bulk: bool) -> Value {
    let mut properties = json!({
        "mode": {"type": "string", "const": "preview"},
        "dry_run": {"type": "boolean", "const": true},
        "plans": {"type": "array", "items": plan_schema()},
        "permitted": {"type": "boolean",
            "description": "Whether every plan is permitted; only then is a confirmation_id issued."},
        "refusals": {"type": "array", "items": {"type": "string"}},
        "confirmation_id": {"type": "string",
            "description": "One use, this session only; not proof that a person approved."},
        "confirmation_expires_in_s": {"type": "integer", "const": HOLDMAP_HANDLE_TTL.as_secs()}
    });
    let mut required = vec!["mode", "dry_run", "plans", "permitted", "refusals"];
    if bulk {
        if let Some(map) = properties.as_object_mut() {
            map.insert(
                "agents".to_owned(),
                json!({"type": "array", "items": agent_schema()}),
            );
        }
        required.push("agents");
    }
    json!({
        "type": "object",
        "title": "Stop preview",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

fn report_schema() -> Value {
    let process = |extra: &str| {
        json!({
            "type": "object",
            "properties": {
                "pid": {"type": "integer", "minimum": 0},
                "start_ticks": {"type": "integer", "minimum": 0},
                "name": {"type": "string"},
                extra: {"type": "string"}
            },
            "required": ["pid", "start_ticks", "name", extra],
            "additionalProperties": false
        })
    };
    json!({
        "type": "object",
        "title": "Stop report",
        "properties": {
            "mode": {"type": "string", "const": "execution"},
            "dry_run": {"type": "boolean", "const": false},
            "stopped": {"type": "array", "items": process("signal"),
                "description": "Processes that exited, with the last signal they were sent."},
            "skipped": {"type": "array", "items": process("reason"),
                "description": "Processes not signalled because they had already exited or been replaced."},
            "ports": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                    "protocol": {"type": "string", "enum": ["tcp", "udp", "any"]},
                    "free": {"type": "boolean"}
                },
                "required": ["port", "protocol", "free"],
                "additionalProperties": false
            }},
            "port_free": {"type": "boolean",
                "description": "Every verified port is free: a candidate to bind, not a reservation."},
            "failures": {"type": "array", "items": {"type": "string"}},
            "plans_completed": {"type": "integer", "minimum": 0},
            "plans_total": {"type": "integer", "minimum": 0}
        },
        "required": ["mode", "dry_run", "stopped", "skipped", "ports", "port_free", "failures",
            "plans_completed", "plans_total"],
        "additionalProperties": false
    })
}

pub(crate) fn output(bulk: bool) -> Value {
    json!({
        "type": "object",
        "anyOf": [preview_schema(bulk), report_schema()]
    })
}
