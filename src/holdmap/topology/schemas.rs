//! The published (and enforced) schemas of `get_topology` and `plan_cluster_stop`. Every object
//! is closed and lists every member it always has, so a client can rely on the shape.

use serde_json::{Value, json};

use crate::holdmap::plan::plan_schema;
use crate::holdmap::topology::render::Format;
use crate::limits::HOLDMAP_CLUSTER_ARG_CHARS_MAX;

fn nullable(schema: Value) -> Value {
    json!({"anyOf": [schema, {"type": "null"}]})
}

fn port() -> Value {
    json!({"type": "integer", "minimum": 1, "maximum": 65535})
}

fn protocol() -> Value {
    json!({"type": "string", "enum": ["tcp", "udp"]})
}

fn strings() -> Value {
    json!({"type": "array", "items": {"type": "string"}})
}

fn count() -> Value {
    json!({"type": "integer", "minimum": 0})
}

pub(crate) fn get_topology_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "all": {
                "type": "boolean",
                "default": false,
                "description": "Include system and application services, not only development \
                    services and their direct peers."
            },
            "format": {
                "type": "string",
                "enum": Format::NAMES,
                "default": "json",
                "description": "The text form of `rendered` and of the readable summary: a \
                    Mermaid graph, a Graphviz dot digraph, or an ASCII tree (json: the tree)."
            }
        },
        "additionalProperties": false
    })
}

fn node() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "svc:PORT/PROTOCOL for a listening \
                service (svc:PORT/PROTOCOL@PID for a second owner of the same port), \
                proc:PID for a process that only connects."},
            "kind": {"type": "string", "enum": ["service", "client"]},
            "port": nullable(port()),
            "protocol": nullable(protocol()),
            "pid": nullable(json!({"type": "integer", "minimum": 0})),
            "process": nullable(json!({"type": "string"})),
            "project": nullable(json!({"type": "string"})),
            "is_dev": {"type": "boolean"},
            "category": nullable(json!({"type": "string", "enum": ["dev", "app", "system"]}))
        },
        "required": ["id", "kind", "port", "protocol", "pid", "process", "project", "is_dev",
            "category"],
        "additionalProperties": false
    })
}

pub(crate) fn get_topology_output() -> Value {
    json!({
        "type": "object",
        "properties": {
            "nodes": {"type": "array", "items": node()},
            "edges": {
                "type": "array",
                "description": "from depends on to: a process of from holds established TCP \
                    connections to to's listening port on this machine.",
                "items": {
                    "type": "object",
                    "properties": {
                        "from": {"type": "string"},
                        "to": {"type": "string"},
                        "connections": {"type": "integer", "minimum": 1}
                    },
                    "required": ["from", "to", "connections"],
                    "additionalProperties": false
                }
            },
            "clusters": {
                "type": "array",
                "description": "Connected services, named after the development service's \
                    project (else its process); the name is what plan_cluster_stop takes.",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "minLength": 1},
                        "nodes": strings()
                    },
                    "required": ["name", "nodes"],
                    "additionalProperties": false
                }
            },
            "stats": {
                "type": "object",
                "properties": {
                    "services": count(),
                    "clients": count(),
                    "edges": count(),
                    "clusters": count(),
                    "hidden_sockets": count()
                },
                "required": ["services", "clients", "edges", "clusters", "hidden_sockets"],
                "additionalProperties": false
            },
            "rendered": {"type": "string"},
            "warnings": strings(),
            "taken_at_ms": count()
        },
        "required": ["nodes", "edges", "clusters", "stats", "rendered", "warnings",
            "taken_at_ms"],
        "additionalProperties": false
    })
}

pub(crate) fn plan_cluster_stop_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "cluster": {
                "type": "string",
                "minLength": 1,
                "maxLength": HOLDMAP_CLUSTER_ARG_CHARS_MAX,
                "description": "A cluster name exactly as get_topology gives it."
            }
        },
        "required": ["cluster"],
        "additionalProperties": false
    })
}

pub(crate) fn plan_cluster_stop_output() -> Value {
    json!({
        "type": "object",
        "properties": {
            "cluster": {"type": "string"},
            "order": {
                "type": "array",
                "description": "The services in the order to stop them: dependents first.",
                "items": {
                    "type": "object",
                    "properties": {
                        "step": {"type": "integer", "minimum": 1},
                        "node": {"type": "string"},
                        "port": port(),
                        "protocol": protocol(),
                        "plan": plan_schema()
                    },
                    "required": ["step", "node", "port", "protocol", "plan"],
                    "additionalProperties": false
                }
            },
            "warnings": {
                "type": "array",
                "description": "A dependency cycle and where it was broken; connected \
                    processes that listen on no port.",
                "items": {"type": "string"}
            },
            "executes": {"const": false},
            "note": {"type": "string"},
            "taken_at_ms": count()
        },
        "required": ["cluster", "order", "warnings", "executes", "note", "taken_at_ms"],
        "additionalProperties": false
    })
}
