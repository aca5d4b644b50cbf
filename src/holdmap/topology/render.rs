//! The graph as text: a Mermaid flowchart, a Graphviz digraph, or an ASCII tree of who depends
//! on whom, cluster by cluster. Warnings go in as comments of each format, so the text stays
//! valid and still says them.
//!
//! Must never: show a process or project name as it is when it holds a character that draws
//! nothing or moves other text (`text::visible`), or let a name close a quoted label.

use std::collections::HashSet;
use std::fmt::Write as _;

use crate::holdmap::topology::graph::{Graph, Kind, Node};

/// Which text `get_topology` renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Json,
    Mermaid,
    Dot,
    Tree,
}

impl Format {
    pub(crate) const NAMES: [&'static str; 4] = ["json", "mermaid", "dot", "tree"];

    pub(crate) fn parse(s: &str) -> Option<Format> {
        match s {
            "json" => Some(Format::Json),
            "mermaid" => Some(Format::Mermaid),
            "dot" => Some(Format::Dot),
            "tree" => Some(Format::Tree),
            _ => None,
        }
    }
}

/// What the view shows, with the words around it.
pub(crate) struct View<'a> {
    pub(crate) graph: &'a Graph,
    pub(crate) shown: &'a [bool],
    pub(crate) all: bool,
    pub(crate) warnings: &'a [String],
}

impl View<'_> {
    fn shows(&self, i: usize) -> bool {
        self.shown.get(i).copied().unwrap_or(false)
    }

    fn node(&self, i: usize) -> Option<&Node> {
        self.graph.nodes.get(i)
    }

    /// The services the default view leaves out.
    fn hidden_services(&self) -> usize {
        self.graph
            .nodes
            .iter()
            .enumerate()
            .filter(|(i, n)| n.kind == Kind::Service && !self.shows(*i))
            .count()
    }

    /// The closing words: what the view left out, and how to see it.
    fn footer(&self) -> Option<String> {
        let hidden = self.hidden_services();
        (!self.all && hidden > 0).then(|| {
            format!(
                "{hidden} system or application service{} not shown; get_topology with all: true \
                 shows every service.",
                if hidden == 1 { " is" } else { "s are" }
            )
        })
    }
}

pub(crate) fn render(view: &View<'_>, format: Format) -> String {
    match format {
        Format::Json | Format::Tree => tree(view),
        Format::Mermaid => mermaid(view),
        Format::Dot => dot(view),
    }
}

/// One line's worth of what a node is: `svc:3000/tcp python3 (pid 42), dev, project shop`.
pub(crate) fn label(n: &Node) -> String {
    let mut out = crate::text::visible(&n.id);
    let mut parts: Vec<String> = Vec::new();
    let who = match (&n.process, n.pid) {
        (Some(p), Some(pid)) => format!("{} (pid {pid})", crate::text::visible(p)),
        (None, Some(pid)) => format!("pid {pid}"),
        (Some(p), None) => crate::text::visible(p),
        (None, None) => "owner not visible".to_owned(),
    };
    parts.push(who);
    if n.is_dev {
        parts.push("dev".to_owned());
    } else if let Some(c) = n.category {
        parts.push(crate::holdmap::topology::graph::category_str(c).to_owned());
    }
    if n.kind == Kind::Client {
        parts.push("client".to_owned());
    }
    if let Some(p) = &n.project {
        parts.push(format!("project {}", crate::text::visible(p)));
    }
    let _ = write!(out, " {}", parts.join(", "));
    out
}

fn connections(n: u64) -> String {
    format!("{n} connection{}", if n == 1 { "" } else { "s" })
}

/// The ASCII tree: per cluster, every node nobody depends on at the top, what it depends on
/// below it. A node already drawn is named again with "(see above)" and not expanded, so a
/// cycle or a shared dependency ends the branch. Linear in nodes and edges.
fn tree(view: &View<'_>) -> String {
    let g = view.graph;
    // What each shown node depends on (shown edges only), in edge order.
    let mut below: Vec<Vec<(usize, u64)>> = vec![Vec::new(); g.nodes.len()];
    let mut depended_on = vec![false; g.nodes.len()];
    for e in &g.edges {
        if view.shows(e.from) && view.shows(e.to) {
            if let Some(list) = below.get_mut(e.from) {
                list.push((e.to, e.connections));
            }
            if let Some(d) = depended_on.get_mut(e.to) {
                *d = true;
            }
        }
    }
    let mut out = String::new();
    let mut any = false;
    let mut drawn: HashSet<usize> = HashSet::new();
    for c in &g.clusters {
        let members: Vec<usize> = c.nodes.iter().copied().filter(|i| view.shows(*i)).collect();
        if members.is_empty() {
            continue;
        }
        any = true;
        let _ = writeln!(
            out,
            "{} ({} node{})",
            c.name,
            members.len(),
            if members.len() == 1 { "" } else { "s" }
        );
        // Roots: nobody depends on them. Then any node none of them reaches (a cycle nobody
        // outside it enters) starts a branch of its own.
        let mut roots: Vec<usize> = Vec::new();
        let mut reached: HashSet<usize> = HashSet::new();
        let tops = members
            .iter()
            .copied()
            .filter(|i| !depended_on.get(*i).copied().unwrap_or(false));
        for start in tops.chain(members.iter().copied()) {
            if reached.contains(&start) {
                continue;
            }
            roots.push(start);
            let mut next = vec![start];
            while let Some(i) = next.pop() {
                if reached.insert(i) {
                    next.extend(below.get(i).into_iter().flatten().map(|(to, _)| *to));
                }
            }
        }
        let count = roots.len();
        for (k, r) in roots.iter().enumerate() {
            let t = Tree {
                view,
                below: &below,
            };
            t.branch(*r, None, "", k + 1 == count, &mut drawn, &mut out);
        }
    }
    if !any {
        out.push_str(if view.all {
            "No listening services were seen.\n"
        } else {
            "No development services are listening.\n"
        });
    }
    if let Some(f) = view.footer() {
        let _ = writeln!(out, "{f}");
    }
    for w in view.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

struct Tree<'a> {
    view: &'a View<'a>,
    below: &'a [Vec<(usize, u64)>],
}

impl Tree<'_> {
    fn branch(
        &self,
        i: usize,
        via: Option<u64>,
        prefix: &str,
        last: bool,
        drawn: &mut HashSet<usize>,
        out: &mut String,
    ) {
        let Some(n) = self.view.node(i) else { return };
        let mut line = label(n);
        if let Some(c) = via {
            let _ = write!(line, " [{}]", connections(c));
        }
        let again = !drawn.insert(i);
        if again {
            line.push_str(" (see above)");
        }
        let _ = writeln!(out, "{prefix}{}{line}", if last { "`-- " } else { "|-- " });
        if again {
            return;
        }
        let below = self.below.get(i).map(Vec::as_slice).unwrap_or_default();
        let inner = format!("{prefix}{}", if last { "    " } else { "|   " });
        let count = below.len();
        for (k, (to, c)) in below.iter().enumerate() {
            self.branch(*to, Some(*c), &inner, k + 1 == count, drawn, out);
        }
    }
}

/// A Mermaid label: inside `["…"]`, where a quote would end it and `<` starts markup.
fn mermaid_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("#quot;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '#' => out.push_str("#35;"),
            _ => out.push(c),
        }
    }
    out
}

fn mermaid(view: &View<'_>) -> String {
    let g = view.graph;
    let mut out = String::from("graph LR\n");
    for (k, c) in g.clusters.iter().enumerate() {
        let members: Vec<usize> = c.nodes.iter().copied().filter(|i| view.shows(*i)).collect();
        if members.is_empty() {
            continue;
        }
        let _ = writeln!(out, "  subgraph c{k}[\"{}\"]", mermaid_text(&c.name));
        for i in members {
            if let Some(n) = view.node(i) {
                let _ = writeln!(out, "    n{i}[\"{}\"]", mermaid_text(&label(n)));
            }
        }
        out.push_str("  end\n");
    }
    for e in &g.edges {
        if view.shows(e.from) && view.shows(e.to) {
            let _ = writeln!(
                out,
                "  n{} -->|{}| n{}",
                e.from,
                connections(e.connections),
                e.to
            );
        }
    }
    for line in view.footer().iter().chain(view.warnings.iter()) {
        let _ = writeln!(out, "%% {}", one_line(line));
    }
    out
}

/// A DOT quoted string's inside.
fn dot_text(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn dot(view: &View<'_>) -> String {
    let g = view.graph;
    let mut out = String::from("digraph topology {\n  rankdir=LR;\n  node [shape=box];\n");
    for (k, c) in g.clusters.iter().enumerate() {
        let members: Vec<usize> = c.nodes.iter().copied().filter(|i| view.shows(*i)).collect();
        if members.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "  subgraph \"cluster_{k}\" {{\n    label=\"{}\";",
            dot_text(&c.name)
        );
        for i in members {
            if let Some(n) = view.node(i) {
                let _ = writeln!(
                    out,
                    "    \"{}\" [label=\"{}\"];",
                    dot_text(&n.id),
                    dot_text(&label(n))
                );
            }
        }
        out.push_str("  }\n");
    }
    for e in &g.edges {
        if !(view.shows(e.from) && view.shows(e.to)) {
            continue;
        }
        if let (Some(a), Some(b)) = (view.node(e.from), view.node(e.to)) {
            let _ = writeln!(
                out,
                "  \"{}\" -> \"{}\" [label=\"{}\"];",
                dot_text(&a.id),
                dot_text(&b.id),
                connections(e.connections)
            );
        }
    }
    for line in view.footer().iter().chain(view.warnings.iter()) {
        let _ = writeln!(out, "  // {}", one_line(line));
    }
    out.push_str("}\n");
    out
}

/// A warning as one comment line: a line break inside it would end the comment.
fn one_line(s: &str) -> String {
    crate::text::visible(s)
}
