//! The published shape of a stop plan (`plan::to_json`): a closed object, in the schema subset
//! holdmap publishes and enforces. Other tools' output schemas embed it.

use serde_json::{Value, json};

fn nullable(schema: Value) -> Value {
    json!({"anyOf": [schema, {"type": "null"}]})
}

fn member_schema() -> Value {
    json!({
        "type": "object",
        "description": "A process the plan names, identified by pid and start time.",
        "properties": {
            "pid": {"type": "integer", "minimum": 0},
            "ppid": {"type": "integer", "minimum": 0},
            "start_ticks": {"type": "integer", "minimum": 0,
                "description": "Start time in clock ticks after boot: with the pid, the process's identity."},
            "uid": nullable(json!({"type": "integer", "minimum": 0})),
            "name": {"type": "string"},
            "command": {"type": "string",
                "description": "The command line, with credential-looking values redacted (heuristic)."},
            "role": {"type": "string", "enum": ["owner", "descendant", "launcher"]},
            "is_dev": {"type": "boolean"},
            "protected": nullable(json!({"type": "string"}))
        },
        "required": ["pid", "ppid", "start_ticks", "uid", "name", "command", "role", "is_dev", "protected"],
        "additionalProperties": false
    })
}

fn step_schema() -> Value {
    json!({
        "type": "object",
        "description": "One step of an execution, in order.",
        "properties": {
            "action": {"type": "string", "enum": ["signal", "wait", "verify"]},
            "pid": {"type": "integer", "minimum": 0},
            "start_ticks": {"type": "integer", "minimum": 0},
            "signal": {"type": "string", "enum": ["SIGTERM", "SIGKILL"]},
            "timeout_ms": {"type": "integer", "minimum": 0},
            "then_kill": {"type": "boolean"},
            "port": {"type": "integer", "minimum": 1, "maximum": 65535},
            "protocol": {"type": "string", "enum": ["tcp", "udp", "any"]}
        },
        "required": ["action"],
        "additionalProperties": false
    })
}

/// The schema of one plan as `plan::to_json` writes it.
pub(crate) fn plan_schema() -> Value {
    json!({
        "type": "object",
        "title": "Stop plan",
        "description": "What stopping the owner of one port would do, its risk and whether holdmap permits it over MCP.",
        "properties": {
            "port": {"type": "integer", "minimum": 1, "maximum": 65535},
            "protocol": {"type": "string", "enum": ["tcp", "udp", "any"]},
            "force": {"type": "boolean"},
            "allow_non_dev": {"type": "boolean"},
            "allow_protected": {"type": "boolean", "const": false,
                "description": "Protected processes are always refused over MCP."},
            "owners": {"type": "array", "items": member_schema()},
            "hidden_owners": {"type": "integer", "minimum": 0,
                "description": "Sockets on the port held by processes holdmap cannot see."},
            "tree": {"type": "array", "items": member_schema(),
                "description": "Every process an execution signals, deepest first."},
            "steps": {"type": "array", "items": step_schema()},
            "verify": {
                "type": "object",
                "properties": {
                    "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                    "protocol": {"type": "string", "enum": ["tcp", "udp", "any"]}
                },
                "required": ["port", "protocol"],
                "additionalProperties": false
            },
            "risk": {"type": "string", "enum": ["low", "medium", "high"]},
            "risk_reason": {"type": "string"},
            "permitted": {"type": "boolean"},
            "refusal": nullable(json!({"type": "string"}))
        },
        "required": ["port", "protocol", "force", "allow_non_dev", "allow_protected", "owners",
            "hidden_owners", "tree", "steps", "verify", "risk", "risk_reason", "permitted", "refusal"],
        "additionalProperties": false
    })
}
