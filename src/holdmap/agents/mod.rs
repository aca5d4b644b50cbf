//! Which running processes are AI coding agents, what each runs and may do, and the tools that
//! show it: `list_agents` (`list`, with `capabilities` for `include_capabilities`) and
//! `get_agent_flow` (`flow`). `stop_agent_ports` selects agents through [`matching`]. The data
//! every part reads and fills is in `model`.
//!
//! Until part 2's agent detection replaces this module, an agent is a process whose executable
//! is a known agent program, by its basename or an install path (`/@anthropic-ai/claude-code/`
//! …), or whose runtime (node, bun, deno, python) runs a known agent entry script or module
//! (`node /usr/local/bin/claude`, `python3 -m aider`). What an agent started is its process
//! tree below it; its ports are the listeners its descendants hold.
//!
//! Must never: recognise an agent by the name a process chose for itself (its `comm`, its
//! `argv[0]`) when its executable path says otherwise; treat a flag's value or free text as an
//! entry script (an unknown runtime flag means "not recognised"); count the agent's own
//! listeners or protected processes' as ports it started.

pub(crate) mod capabilities;
pub(crate) mod detect;
mod flow;
pub(crate) mod list;
pub(crate) mod model;

use std::collections::BTreeSet;
use std::path::Path;

use crate::holdmap::framework::script_name;
use crate::holdmap::model::Snapshot;
use crate::holdmap::plan::{is_listening_on, protected_reason};
use crate::holdmap::redact::redact_argv;
use crate::holdmap::tool::Tool;
use crate::os::procs::Proc;
use crate::os::sockets::Protocol;

/// `list_agents` and `get_agent_flow`, in the order `tools/list` shows them.
pub(crate) const TOOLS: &[Tool] = &[list::TOOL, flow::TOOL];

/// A known agent program: its id, executable and entry names, and install-path fragments.
struct Program {
    id: &'static str,
    names: &'static [&'static str],
    paths: &'static [&'static str],
}

const PROGRAMS: &[Program] = &[
    Program {
        id: "claude",
        names: &["claude"],
        paths: &["/@anthropic-ai/claude-code/", "/.local/share/claude/"],
    },
    Program {
        id: "codex",
        names: &["codex"],
        paths: &["/@openai/codex/"],
    },
    Program {
        id: "cursor-agent",
        names: &["cursor-agent"],
        paths: &[],
    },
    Program {
        id: "gemini",
        names: &["gemini"],
        paths: &["/@google/gemini-cli/"],
    },
    Program {
        id: "aider",
        names: &["aider"],
        paths: &[],
    },
    Program {
        id: "goose",
        names: &["goose", "goosed"],
        paths: &[],
    },
    Program {
        id: "opencode",
        names: &["opencode"],
        paths: &[],
    },
    Program {
        id: "copilot",
        names: &["copilot"],
        paths: &["/@github/copilot/"],
    },
    Program {
        id: "amp",
        names: &["amp"],
        paths: &["/@sourcegraph/amp/"],
    },
    Program {
        id: "crush",
        names: &["crush"],
        paths: &[],
    },
    Program {
        id: "qwen",
        names: &["qwen"],
        paths: &["/@qwen-code/"],
    },
];

/// A running agent and the ports its descendants hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Agent {
    pub(crate) pid: i32,
    pub(crate) start_ticks: u64,
    /// The program's id (`claude`, `codex` …).
    pub(crate) program: &'static str,
    pub(crate) name: String,
    /// Redacted command line (display only).
    pub(crate) command: String,
    /// (port, protocol) of every unprotected listener its descendants hold, sorted.
    pub(crate) ports: Vec<(u16, Protocol)>,
}

/// The running agents `query` names: a program (case-insensitive: `claude`, `Codex`) or
/// `pid:N`. Nested runs of the same program count once (the topmost).
pub(crate) fn matching(snap: &Snapshot, query: &str) -> Vec<Agent> {
    let q = query.trim().to_lowercase();
    let by_pid = q.strip_prefix("pid:").map(|n| n.trim().parse::<i32>().ok());
    let found: Vec<(i32, &'static Program)> = snap
        .procs
        .values()
        .filter(|p| !p.is_zombie())
        .filter_map(|p| program_of(p).map(|prog| (p.pid, prog)))
        .collect();
    found
        .iter()
        .filter(|(pid, prog)| {
            !snap.ancestors(*pid).iter().any(|a| {
                found
                    .iter()
                    .any(|(fp, fprog)| fp == a && fprog.id == prog.id)
            })
        })
        .filter(|(pid, prog)| match by_pid {
            Some(Some(n)) => *pid == n,
            Some(None) => false,
            None => prog.id == q || prog.names.contains(&q.as_str()),
        })
        .filter_map(|(pid, prog)| {
            let p = snap.proc(*pid)?;
            Some(Agent {
                pid: p.pid,
                start_ticks: p.start_ticks,
                program: prog.id,
                name: p.name.clone(),
                command: redact_argv(&p.argv),
                ports: ports_of(snap, p.pid),
            })
        })
        .collect()
}

/// The listeners `agent`'s descendants hold (never the agent's own, never a protected
/// holder's).
fn ports_of(snap: &Snapshot, agent: i32) -> Vec<(u16, Protocol)> {
    let below: BTreeSet<i32> = snap.descendants(agent).into_iter().collect();
    let mut out = BTreeSet::new();
    for s in &snap.sockets {
        let port = s.row.local.port();
        if !is_listening_on(&s.row, port, Some(s.row.protocol)) || s.pids.contains(&agent) {
            continue;
        }
        let started = s.pids.iter().any(|p| below.contains(p));
        let protected = s.pids.iter().any(|&p| protected_reason(snap, p).is_some());
        if started && !protected {
            out.insert((port, s.row.protocol));
        }
    }
    out.into_iter().collect()
}

fn by_path(s: &str) -> Option<&'static Program> {
    PROGRAMS
        .iter()
        .find(|prog| prog.paths.iter().any(|frag| s.contains(frag)))
}

fn by_name(s: &str) -> Option<&'static Program> {
    let b = script_name(s);
    PROGRAMS.iter().find(|prog| prog.names.contains(&b))
}

/// The agent program `p` runs, if any. The executable decides when it can be read; only when it
/// cannot (another account's process) does `argv[0]` stand in for it.
fn program_of(p: &Proc) -> Option<&'static Program> {
    let exe = p.exe.as_deref().and_then(Path::to_str);
    let image = match exe {
        Some(e) => e,
        None => p.argv.first()?.as_str(),
    };
    if let Some(prog) = by_path(image).or_else(|| by_name(image)) {
        return Some(prog);
    }
    match entry(&p.argv, script_name(image))? {
        Entry::Script(script) => by_path(script).or_else(|| by_name(script)),
        Entry::Module(module) => {
            let top = module.split('.').next().unwrap_or(module);
            PROGRAMS.iter().find(|prog| prog.names.contains(&top))
        }
    }
}

/// What a runtime was asked to run.
#[derive(Debug, PartialEq, Eq)]
enum Entry<'a> {
    Script(&'a str),
    Module(&'a str),
}

fn is_python(runtime: &str) -> bool {
    runtime == "py"
        || runtime
            .strip_prefix("python")
            .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// Node's flags that take the next argument as their value.
const NODE_VALUE_FLAGS: &[&str] = &[
    "-r",
    "--require",
    "--import",
    "--loader",
    "--experimental-loader",
    "-C",
    "--conditions",
    "--title",
    "--inspect-port",
    "--env-file",
    "--max-old-space-size",
    "--stack-size",
];
/// Flags after which the arguments are code, not a script path.
const CODE_FLAGS: &[&str] = &["-e", "--eval", "-p", "--print", "-c", "--check", "-i"];
const PYTHON_VALUE_FLAGS: &[&str] = &["-X", "-W", "-Q"];
const PYTHON_BOOL_FLAGS: &[&str] = &[
    "-u", "-B", "-O", "-OO", "-E", "-s", "-S", "-I", "-b", "-bb", "-q", "-v", "-d", "-P",
];

/// The script or module a runtime's command line runs. `None` for code given inline, for an
/// unknown flag (its value could be mistaken for a script), or when `runtime` is not one.
fn entry<'a>(argv: &'a [String], runtime: &str) -> Option<Entry<'a>> {
    let mut args = argv.iter().skip(1).map(String::as_str).peekable();
    let python = is_python(runtime);
    match runtime {
        "node" | "nodejs" => {}
        "bun" | "deno" => {
            if args.peek().is_some_and(|a| *a == "run") {
                args.next();
            }
        }
        _ if python => {}
        _ => return None,
    }
    while let Some(a) = args.next() {
        if a == "--" {
            return args.next().map(Entry::Script);
        }
        if !a.starts_with('-') {
            return Some(Entry::Script(a));
        }
        if CODE_FLAGS.contains(&a) {
            return None;
        }
        if python {
            if a == "-m" {
                return args.next().map(Entry::Module);
            }
            if PYTHON_VALUE_FLAGS.contains(&a) {
                args.next();
            } else if !PYTHON_BOOL_FLAGS.contains(&a) {
                return None;
            }
            continue;
        }
        if a.starts_with("--") && a.contains('=') {
            continue;
        }
        if NODE_VALUE_FLAGS.contains(&a) {
            args.next();
        } else if !known_boolean_flag(runtime, a) {
            return None;
        }
    }
    None
}

fn known_boolean_flag(runtime: &str, a: &str) -> bool {
    const NODE: &[&str] = &[
        "--no-warnings",
        "--enable-source-maps",
        "--inspect",
        "--inspect-brk",
        "--trace-warnings",
        "--experimental-modules",
        "--no-deprecation",
        "--watch",
        "--preserve-symlinks",
    ];
    match runtime {
        "deno" => {
            a == "-A"
                || a.starts_with("--allow-")
                || a.starts_with("--deny-")
                || a.starts_with("--unstable")
                || a == "-q"
                || a == "--quiet"
        }
        "bun" => matches!(a, "--bun" | "--watch" | "--hot" | "--smol" | "--silent"),
        _ => NODE.contains(&a),
    }
}

#[cfg(test)]
mod tests;
