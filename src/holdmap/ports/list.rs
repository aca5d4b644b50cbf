//! `list_ports`: every listening TCP port and bound UDP port with its owner, filtered by the
//! query grammar of `listeners::matches`, by dev servers only, or by protocol; the snapshot's
//! warnings and hidden-socket count always go with it, in the structure and in the summary.

use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use crate::holdmap::listeners::{self, Exposure, Listener};
use crate::holdmap::model::Snapshot;
use crate::holdmap::probe::clean;
use crate::holdmap::tool::{Annotations, Cx, Outcome, Reply, ToolDef};
use crate::os::sockets::Protocol;

pub(super) fn def() -> ToolDef {
    ToolDef {
        name: "list_ports",
        title: "List listening ports",
        description: "Lists the TCP ports listening and the UDP ports bound on this machine, each with \
            its process and PID, its project folder and git branch, the framework it runs, whether it \
            is a dev server, and who can reach it (loopback, all interfaces, a specific address). \
            Filter with `query` (a name such as `vite`, a port `:3000`, a range `3000-3999`, \
            `proto:udp`, `pid:1234`), `dev_only` or `protocol`. Sockets of other accounts that could \
            not be attributed are counted in `hidden_sockets`, never dropped silently: read \
            `warnings` before treating an empty result as a complete scan. Read-only.",
        input_schema: json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "maxLength": 256,
                    "description": "A filter: a process or framework name (`vite`), a port (`:3000`), a range (`3000-3999`), `proto:udp` or `pid:1234`."
                },
                "dev_only": {
                    "type": "boolean",
                    "default": false,
                    "description": "Only dev servers."
                },
                "protocol": {
                    "type": "string",
                    "enum": ["tcp", "udp"],
                    "description": "Only this protocol."
                }
            },
            "additionalProperties": false,
        }),
        output_schema: json!({
            "type": "object",
            "properties": {
                "ports": {"type": "array", "items": listeners::listener_schema()},
                "hidden_sockets": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Sockets held by processes holdmap cannot see (other accounts); not in `ports`."
                },
                "warnings": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "What the scan could not see or read."
                },
                "platform": {"type": "string", "description": "The system scanned."},
                "taken_at_ms": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "When the scan was taken (Unix epoch, milliseconds)."
                }
            },
            "required": ["ports", "hidden_sockets", "warnings", "platform", "taken_at_ms"],
            "additionalProperties": false,
        }),
        annotations: Annotations::READ_ONLY,
    }
}

/// The filters of one call.
#[derive(Debug, Default)]
pub(super) struct Filter {
    pub(super) query: Option<String>,
    pub(super) dev_only: bool,
    pub(super) protocol: Option<Protocol>,
}

impl Filter {
    pub(super) fn from_args(args: &Map<String, Value>) -> Filter {
        Filter {
            query: args
                .get("query")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|q| !q.is_empty())
                .map(str::to_owned),
            dev_only: super::bool_arg(args, "dev_only"),
            protocol: match args.get("protocol").and_then(Value::as_str) {
                Some("tcp") => Some(Protocol::Tcp),
                Some("udp") => Some(Protocol::Udp),
                _ => None,
            },
        }
    }

    fn keeps(&self, l: &Listener) -> bool {
        (!self.dev_only || l.is_dev)
            && self.protocol.is_none_or(|p| l.protocol == p)
            && self
                .query
                .as_deref()
                .is_none_or(|q| listeners::matches(l, q))
    }
}

pub(super) fn run(args: &Map<String, Value>, cx: &mut Cx<'_>) -> Reply {
    let filter = Filter::from_args(args);
    // A malformed query would match nothing; say why instead of answering "no ports".
    if let Some(Err(e)) = filter.query.as_deref().map(listeners::Query::parse) {
        return Reply::Now(Outcome::Failed(format!("`query`: {e}")));
    }
    Reply::Now(match super::observe(cx) {
        Ok(snap) => list(&snap, &filter),
        Err(e) => Outcome::Failed(e),
    })
}

pub(super) fn list(snap: &Snapshot, filter: &Filter) -> Outcome {
    let kept: Vec<Listener> = listeners::listeners(snap)
        .into_iter()
        .filter(|l| filter.keeps(l))
        .collect();
    let structured = json!({
        "ports": kept.iter().map(listeners::to_json).collect::<Vec<_>>(),
        "hidden_sockets": snap.hidden_sockets,
        "warnings": snap.warnings.iter().map(|w| clean(w)).collect::<Vec<_>>(),
        "platform": snap.platform,
        "taken_at_ms": snap.taken_at_ms,
    });
    Outcome::Done {
        summary: summary(snap, &kept, filter),
        structured,
    }
}

fn summary(snap: &Snapshot, kept: &[Listener], filter: &Filter) -> String {
    let filtered = filter.query.is_some() || filter.dev_only || filter.protocol.is_some();
    let mut out = match (kept.len(), filtered) {
        (0, true) => "No listening port matches the filter.".to_owned(),
        (0, false) => "No listening ports found.".to_owned(),
        (1, _) => "1 listening port:".to_owned(),
        (n, _) => format!("{n} listening ports:"),
    };
    for l in kept {
        let _ = write!(out, "\n{}", line(l));
    }
    for w in &snap.warnings {
        let _ = write!(out, "\nWarnings: {}", clean(w));
    }
    // The collection usually words its own warning about hidden sockets; one line either way.
    if snap.hidden_sockets > 0 && !snap.warnings.iter().any(|w| w.contains("hidden_sockets")) {
        let _ = write!(
            out,
            "\nWarnings: {} socket(s) are held by processes holdmap could not read; they are \
             counted in hidden_sockets, not listed.",
            snap.hidden_sockets
        );
    }
    if !snap.warnings.is_empty() || snap.hidden_sockets > 0 {
        out.push_str("\nCheck warnings before treating an empty result as complete.");
    }
    out
}

/// One port as one line: `3000/tcp  vite  pid 4242  shop-web (main)  loopback`.
pub(super) fn line(l: &Listener) -> String {
    let mut cols = vec![
        format!("{}/{}", l.port, l.protocol.as_str()),
        owner_name(l),
        l.pid
            .map_or_else(|| "pid hidden".to_owned(), |p| format!("pid {p}")),
    ];
    if let Some(p) = &l.project {
        cols.push(match &p.branch {
            Some(b) => format!("{} ({})", p.name, b),
            None => p.name.clone(),
        });
    }
    cols.push(exposure_words(l.exposure).to_owned());
    if l.protected.is_some() {
        cols.push("protected".to_owned());
    }
    clean(&cols.join("  "))
}

/// What to call a listener's owner: its framework, else its process name.
pub(super) fn owner_name(l: &Listener) -> String {
    l.framework
        .map(|f| f.name.to_owned())
        .or_else(|| l.process.clone())
        .unwrap_or_else(|| "an unseen process".to_owned())
}

pub(super) fn exposure_words(e: Exposure) -> &'static str {
    match e {
        Exposure::Loopback => "loopback",
        Exposure::AllInterfaces => "all interfaces",
        Exposure::Specific => "specific address",
    }
}
