//! Which local services talk to which (`get_topology`), grouped into clusters, and a
//! dependency-ordered dry-run plan for stopping one (`plan_cluster_stop`).
//!
//! Owns: the two tools' definitions (their published and enforced schemas), the graph of one
//! snapshot (`graph`) and its text forms (`render`). Must never: signal, stop or change
//! anything — `plan_cluster_stop` only describes what `stop_port` would do, and issues no
//! confirmation handle; count a connection to another machine as a dependency; read `/proc`
//! itself (it reads `World::observe`'s snapshot).

mod graph;
mod render;
mod schemas;
#[cfg(test)]
mod tests;

use serde_json::{Map, Value, json};

use crate::holdmap::listeners::listeners;
use crate::holdmap::model::Snapshot;
use crate::holdmap::plan::{self, PlanOptions};
use crate::holdmap::tool::{Annotations, Cx, Outcome, Reply, Tool, ToolDef};
use crate::limits::HOLDMAP_CLUSTER_NAMES_LISTED_MAX;

pub(crate) use graph::{Graph, Service};
pub(crate) use render::Format;

pub(crate) const TOOLS: &[Tool] = &[
    Tool {
        def: get_topology_def,
        run: run_get_topology,
    },
    Tool {
        def: plan_cluster_stop_def,
        run: run_plan_cluster_stop,
    },
];

/// What every tool result says about a `plan_cluster_stop` result, word for word.
pub(crate) const DRY_RUN_NOTE: &str = "dry run only: nothing was stopped; stop each port in order \
with stop_port (preview, then execute with its confirmation_id)";

fn get_topology_def() -> ToolDef {
    ToolDef {
        name: "get_topology",
        title: "Local service topology",
        description: "Which local services talk to which: a node per listening service \
            (svc:PORT/PROTOCOL) and per process that only connects (proc:PID), an edge a -> b \
            when a process of a holds an established TCP connection to b's port on this machine \
            (a depends on b), and clusters of connected services. The default view shows \
            development services and their direct peers; all: true includes system and \
            application services. format picks the text form (mermaid, dot, or an ASCII tree; \
            json gives the tree beside the structured result). Reads only.",
        input_schema: schemas::get_topology_input(),
        output_schema: schemas::get_topology_output(),
        annotations: Annotations::READ_ONLY,
    }
}

fn plan_cluster_stop_def() -> ToolDef {
    ToolDef {
        name: "plan_cluster_stop",
        title: "Plan stopping a cluster (dry run)",
        description: "A dry-run plan for stopping one cluster of get_topology: its services in \
            dependency order (dependents first: for web -> api -> db, web, then api, then db), \
            each with the plan stop_port would follow. Never stops anything and issues no \
            confirmation handle: stop each port in order with stop_port (preview, then execute \
            with its confirmation_id).",
        input_schema: schemas::plan_cluster_stop_input(),
        output_schema: schemas::plan_cluster_stop_output(),
        annotations: Annotations::READ_ONLY,
    }
}

/// The machine's graph, or the tool error saying why there is none.
fn observe(cx: &Cx<'_>) -> Result<(Snapshot, Graph), Outcome> {
    let snap = cx
        .world
        .observe()
        .map_err(|e| Outcome::Failed(format!("holdmap could not read this machine: {e}")))?;
    let services: Vec<Service> = listeners(&snap).iter().map(Service::of).collect();
    let graph = Graph::build(&snap, &services);
    Ok((snap, graph))
}

fn run_get_topology(args: &Map<String, Value>, cx: &mut Cx<'_>) -> Reply {
    Reply::Now(match observe(cx) {
        Ok((snap, graph)) => get_topology(&snap, &graph, args),
        Err(failed) => failed,
    })
}

fn run_plan_cluster_stop(args: &Map<String, Value>, cx: &mut Cx<'_>) -> Reply {
    Reply::Now(match observe(cx) {
        Ok((snap, graph)) => plan_cluster_stop(&snap, &graph, args),
        Err(failed) => failed,
    })
}

/// The snapshot's warnings (which say why sockets are hidden), and what hidden sockets mean
/// for this graph.
fn warnings(snap: &Snapshot) -> Vec<String> {
    let mut out = snap.warnings.clone();
    if snap.hidden_sockets > 0 {
        out.push(format!(
            "a connection held through {} no edge here: its process cannot be seen",
            if snap.hidden_sockets == 1 {
                "the hidden socket has".to_owned()
            } else {
                format!("any of the {} hidden sockets has", snap.hidden_sockets)
            }
        ));
    }
    out
}

fn opt<T: Into<Value>>(v: Option<T>) -> Value {
    v.map_or(Value::Null, Into::into)
}

/// `get_topology` on a graph already built (arguments passed its input schema).
pub(crate) fn get_topology(snap: &Snapshot, graph: &Graph, args: &Map<String, Value>) -> Outcome {
    let all = args.get("all").and_then(Value::as_bool).unwrap_or(false);
    let format = args
        .get("format")
        .and_then(Value::as_str)
        .and_then(Format::parse)
        .unwrap_or(Format::Json);
    let shown = graph.visible(all);
    let shows = |i: usize| shown.get(i).copied().unwrap_or(false);
    let warnings = warnings(snap);
    let view = render::View {
        graph,
        shown: &shown,
        all,
        warnings: &warnings,
    };
    let rendered = render::render(&view, format);

    let nodes: Vec<Value> = graph
        .nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| shows(*i))
        .map(|(_, n)| {
            json!({
                "id": n.id,
                "kind": n.kind.as_str(),
                "port": opt(n.port),
                "protocol": opt(n.protocol.map(|p| p.as_str())),
                "pid": opt(n.pid),
                "process": opt(n.process.clone()),
                "project": opt(n.project.clone()),
                "is_dev": n.is_dev,
                "category": opt(n.category.map(graph::category_str)),
            })
        })
        .collect();
    let id = |i: usize| graph.nodes.get(i).map(|n| n.id.clone());
    let edges: Vec<Value> = graph
        .edges
        .iter()
        .filter(|e| shows(e.from) && shows(e.to))
        .filter_map(|e| {
            Some(json!({"from": id(e.from)?, "to": id(e.to)?, "connections": e.connections}))
        })
        .collect();
    let clusters: Vec<Value> = graph
        .clusters
        .iter()
        .filter_map(|c| {
            let members: Vec<String> = c
                .nodes
                .iter()
                .copied()
                .filter(|i| shows(*i))
                .filter_map(id)
                .collect();
            (!members.is_empty()).then(|| json!({"name": c.name, "nodes": members}))
        })
        .collect();
    let count = |kind: graph::Kind| {
        graph
            .nodes
            .iter()
            .enumerate()
            .filter(|(i, n)| n.kind == kind && shows(*i))
            .count()
    };
    let structured = json!({
        "nodes": nodes,
        "stats": {
            "services": count(graph::Kind::Service),
            "clients": count(graph::Kind::Client),
            "edges": edges.len(),
            "clusters": clusters.len(),
            "hidden_sockets": snap.hidden_sockets,
        },
        "edges": edges,
        "clusters": clusters,
        "rendered": rendered,
        "warnings": warnings,
        "taken_at_ms": snap.taken_at_ms,
    });
    Outcome::Done {
        summary: rendered,
        structured,
    }
}

/// `plan_cluster_stop` on a graph already built (arguments passed its input schema).
pub(crate) fn plan_cluster_stop(
    snap: &Snapshot,
    graph: &Graph,
    args: &Map<String, Value>,
) -> Outcome {
    let name = args.get("cluster").and_then(Value::as_str).unwrap_or("");
    let Some(cluster) = graph.cluster(name) else {
        return Outcome::Failed(unknown_cluster(graph, name));
    };
    let (order, mut warnings) = graph.stop_order(cluster);
    let mut steps: Vec<Value> = Vec::with_capacity(order.len());
    let mut lines: Vec<String> = Vec::new();
    let mut planned: Vec<(u16, crate::os::sockets::Protocol)> = Vec::new();
    for i in order {
        let Some(n) = graph.nodes.get(i) else {
            continue;
        };
        let (Some(port), Some(protocol)) = (n.port, n.protocol) else {
            continue;
        };
        if planned.contains(&(port, protocol)) {
            // Two owners of one port: one stop_port call plans for both.
            warnings.push(format!(
                "{} shares port {port}/{} with an earlier step; that step's stop_port covers it.",
                n.id,
                protocol.as_str()
            ));
            continue;
        }
        planned.push((port, protocol));
        let plan = plan::to_json(&plan::plan_port(
            snap,
            port,
            Some(protocol),
            PlanOptions::default(),
        ));
        steps.push(json!({
            "step": steps.len() + 1,
            "node": n.id,
            "port": port,
            "protocol": protocol.as_str(),
            "plan": plan.clone(),
        }));
        lines.push(format!(
            "{}. {}: {}",
            steps.len(),
            render::label(n),
            verdict(&plan)
        ));
    }
    for i in &cluster.nodes {
        if let Some(n) = graph.nodes.get(*i)
            && n.kind == graph::Kind::Client
        {
            warnings.push(format!(
                "{} is connected to this cluster but listens on no port, so stop_port cannot \
                 stop it; it will lose its connections when the services it uses stop.",
                render::label(n)
            ));
        }
    }
    let mut summary = format!(
        "Plan to stop cluster {} (dry run: nothing was stopped), dependents first:\n",
        cluster.name
    );
    for l in &lines {
        summary.push_str(l);
        summary.push('\n');
    }
    if lines.is_empty() {
        summary.push_str("(no listening service to stop)\n");
    }
    for w in &warnings {
        summary.push_str("warning: ");
        summary.push_str(w);
        summary.push('\n');
    }
    summary.push_str(DRY_RUN_NOTE);
    summary.push('\n');
    Outcome::Done {
        summary,
        structured: json!({
            "cluster": cluster.name,
            "order": steps,
            "warnings": warnings,
            "executes": false,
            "note": DRY_RUN_NOTE,
            "taken_at_ms": snap.taken_at_ms,
        }),
    }
}

/// What stop_port would say of a step's plan, in a few words for the summary.
fn verdict(plan: &Value) -> String {
    match plan.get("permitted").and_then(Value::as_bool) {
        Some(true) => "stop_port would stop it".to_owned(),
        Some(false) => match plan.get("refusal").and_then(Value::as_str) {
            Some(why) => format!("stop_port would refuse: {why}"),
            None => "stop_port would refuse it".to_owned(),
        },
        None => "see its plan".to_owned(),
    }
}

fn unknown_cluster(graph: &Graph, name: &str) -> String {
    let shown = crate::text::visible(name);
    if graph.clusters.is_empty() {
        return format!(
            "No cluster is named \"{shown}\": no listening service was seen on this machine, so \
             there are no clusters. Start the services, then call get_topology."
        );
    }
    let names: Vec<&str> = graph
        .clusters
        .iter()
        .take(HOLDMAP_CLUSTER_NAMES_LISTED_MAX)
        .map(|c| c.name.as_str())
        .collect();
    let more = graph.clusters.len().saturating_sub(names.len());
    format!(
        "No cluster is named \"{shown}\". The clusters now are: {}{}. Names are exact; call \
         get_topology with all: true to see each cluster's services.",
        names.join(", "),
        if more > 0 {
            format!(", and {more} more")
        } else {
            String::new()
        }
    )
}
