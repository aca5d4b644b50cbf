//! `explain_port`: one port's inspection read out as prose — the root cause, the fix, the bind
//! risk, who is connected, the process tree and what the loopback HTTP probe saw.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::inspection::{self, Inspection};
use crate::holdmap::probe::Probe;
use crate::holdmap::tool::{Annotations, Cx, Reply, ToolDef};

pub(super) fn def() -> ToolDef {
    ToolDef {
        name: "explain_port",
        title: "Explain a port",
        description: "Says in plain English why a port is busy (which process holds it, its \
            project and branch, whether it is a dev server) or that it is free, and what to do: use \
            another port (find_free_port) or preview a stop (stop_port). Also gives who is connected, \
            the owner's process tree, the bind risk (loopback only or reachable from the network), \
            the stop plan stop_port would preview (nothing is executed), and one short HTTP GET / to \
            the port on loopback. Read-only; inspect_port returns the same structure.",
        input_schema: super::port_input_schema("The port to explain (1-65535)."),
        output_schema: inspection::output_schema(),
        annotations: Annotations::READ_ONLY,
    }
}

pub(super) fn run(args: &Map<String, Value>, cx: &mut Cx<'_>) -> Reply {
    inspection::run(args, cx, prose)
}

/// The prose summary.
pub(super) fn prose(ins: &Inspection, http: Option<&Probe>) -> String {
    let mut out = format!("{}.\n{}", ins.headline, ins.recommendation);
    if ins.owners.is_empty() {
        return out;
    }
    let _ = write!(out, "\nBind risk: {}.", ins.risk_words);
    let conns = ins.connections.len() + ins.connections_omitted;
    if conns == 0 {
        out.push_str("\nNo established connections to or from it.");
    } else {
        let mut peers: Vec<String> = ins
            .connections
            .iter()
            .filter_map(|c| {
                let pid = c["pid"].as_i64()?;
                let name = c["process"].as_str().unwrap_or("?");
                Some(format!("{name} (pid {pid})"))
            })
            .collect();
        peers.dedup();
        let _ = write!(out, "\n{conns} established connection(s)");
        if !peers.is_empty() {
            let _ = write!(out, ", held by {}", peers.join(", "));
        }
        out.push('.');
    }
    let chain: Vec<String> = ins
        .tree
        .iter()
        .filter(|r| r["role"] != "descendant")
        .filter_map(|r| Some(format!("{} ({})", r["name"].as_str()?, r["pid"])))
        .collect();
    let below = ins
        .tree
        .iter()
        .filter(|r| r["role"] == "descendant")
        .count()
        + ins.tree_omitted;
    if !chain.is_empty() {
        let _ = write!(out, "\nProcess tree: {}", chain.join(" > "));
        if below > 0 {
            let _ = write!(out, ", with {below} process(es) below it");
        }
        out.push('.');
    }
    if let Some(p) = http {
        let _ = write!(out, "\nHTTP: {}.", probe_words(p));
    }
    out
}

/// "GET http://127.0.0.1:3000/ answered 200 (server SimpleHTTP/0.6, title \"Shop\")".
pub(super) fn probe_words(p: &Probe) -> String {
    match p.status {
        Some(status) => {
            let mut extra = Vec::new();
            if let Some(s) = &p.server {
                extra.push(format!("server {s}"));
            }
            if let Some(t) = &p.title {
                extra.push(format!("title \"{t}\""));
            }
            let mut out = format!("GET {} answered {status}", p.url);
            if !extra.is_empty() {
                let _ = write!(out, " ({})", extra.join(", "));
            }
            out
        }
        None => format!(
            "GET {} got no HTTP answer: {}",
            p.url,
            p.error.as_deref().unwrap_or("unknown reason")
        ),
    }
}
