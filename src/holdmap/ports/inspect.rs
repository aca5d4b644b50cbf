//! `inspect_port`: the same structured inspection as `explain_port`, its summary a compact
//! table instead of prose.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::inspection::{self, Inspection};
use crate::holdmap::probe::Probe;
use crate::holdmap::tool::{Annotations, Cx, Reply, ToolDef};

pub(super) fn def() -> ToolDef {
    ToolDef {
        name: "inspect_port",
        title: "Inspect a port (structured)",
        description: "The structured inspection of one port, the same result as explain_port with a \
            compact table for its summary: owners, established connections, the owner's process tree, \
            the bind risk, the stop plan stop_port would preview (nothing is executed) and a bounded \
            HTTP GET / on loopback. Read-only.",
        input_schema: super::port_input_schema("The port to inspect (1-65535)."),
        output_schema: inspection::output_schema(),
        annotations: Annotations::READ_ONLY,
    }
}

pub(super) fn run(args: &Map<String, Value>, cx: &mut Cx<'_>) -> Reply {
    inspection::run(args, cx, table)
}

/// The table summary: one `key  value` row each.
pub(super) fn table(ins: &Inspection, http: Option<&Probe>) -> String {
    let mut rows: Vec<(&str, String)> = vec![
        ("port", ins.port.to_string()),
        ("status", ins.status().to_owned()),
    ];
    for l in &ins.owners {
        rows.push(("owner", super::list::line(l)));
    }
    rows.push((
        "bind risk",
        format!("{} ({})", ins.risk.as_str(), ins.risk_words),
    ));
    let conns = ins.connections.len() + ins.connections_omitted;
    rows.push(("connections", conns.to_string()));
    let count = |role: &str| ins.tree.iter().filter(|r| r["role"] == role).count();
    rows.push((
        "process tree",
        format!(
            "{} ancestor(s), {} owner(s), {} descendant(s)",
            count("ancestor"),
            count("owner"),
            count("descendant") + ins.tree_omitted
        ),
    ));
    rows.push((
        "plan",
        if ins.plan.is_null() {
            "none (the port is free)".to_owned()
        } else {
            "in the structured result (a preview; nothing executed)".to_owned()
        },
    ));
    rows.push((
        "http",
        http.map_or_else(
            || "not probed (no TCP listener on 127.0.0.1 or ::1)".to_owned(),
            super::explain::probe_words,
        ),
    ));
    rows.push(("headline", ins.headline.clone()));
    rows.push(("do", ins.recommendation.clone()));
    let mut out = String::new();
    for (k, v) in rows {
        let _ = writeln!(out, "{k:<13}{v}");
    }
    out.trim_end().to_owned()
}
