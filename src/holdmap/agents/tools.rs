//! What each process an agent started is: a likely MCP server (always inferred, from its name,
//! `argv[0]`, runtime entry, or the package an `npx`/`bunx`/`pnpm dlx`/`uvx` launcher runs), a
//! dev server (it holds a listener part 1 judged a dev server), a shell, or another command.
//! `holdcall [--home DIR] serve …` whose executable is the holdcall beside holdmap (the same
//! file, `capabilities::holdcall_judge`) is an MCP server routed through Holdcall, and so is
//! what runs below it; a program merely named holdcall only claims to be one.
//!
//! Must never: search a launcher's other arguments for a package name (past an unknown option
//! they may be user input or secrets: the launcher reading of `clients::inspect` gives up
//! there, and so does this); call a process "an MCP server" as observed fact.

use std::collections::BTreeSet;

use crate::clients::inspect;
use crate::clients::routed::{self, Judge};
use crate::holdmap::agents::entry::{Entry, entry};
use crate::holdmap::agents::model::{ChildTool, Evidence, ToolKind};
use crate::holdmap::framework::{basename, script_name};
use crate::holdmap::model::Snapshot;
use crate::holdmap::redact::redact_argv;
use crate::limits::HOLDMAP_TOOL_NAME_CHARS_MAX;
use crate::os::procs::Proc;

const SHELLS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "fish",
    "dash",
    "ksh",
    "mksh",
    "tcsh",
    "csh",
    "pwsh",
    "powershell",
    "cmd",
    "nu",
];

/// Package runners whose package spec names the server.
const LAUNCHERS: &[&str] = &["npx", "bunx", "pnpm", "yarn", "uvx", "uv", "pipx"];

/// The program's name as its executable says (its `argv[0]` only when unreadable).
fn image_name(p: &Proc) -> &str {
    let image = p
        .exe
        .as_deref()
        .and_then(|e| e.to_str())
        .or_else(|| p.argv.first().map(String::as_str))
        .unwrap_or_default();
    basename(image.strip_suffix(" (deleted)").unwrap_or(image))
}

/// The command a launcher-shaped process runs, as (command, args): `node /usr/bin/npx -y pkg`
/// is (`npx`, [`-y`, `pkg`]); anything else is (argv[0], the rest).
fn command_of(p: &Proc) -> Option<(&str, &[String])> {
    let runtime = script_name(image_name(p));
    if let Some(Entry::Script(script)) = entry(&p.argv, runtime) {
        let at = p
            .argv
            .iter()
            .position(|a| std::ptr::eq(a.as_str(), script))?;
        let name = script_name(script);
        if LAUNCHERS.contains(&name) {
            return Some((name, p.argv.get(at + 1..).unwrap_or(&[])));
        }
    }
    let first = p.argv.first()?;
    Some((first.as_str(), p.argv.get(1..).unwrap_or(&[])))
}

/// The package spec `inspect::server_name` read a launcher's package from (`the npm package
/// @scope/pkg@1.2.3`), when it read one.
fn launcher_spec(command: &str, args: &[String]) -> Option<String> {
    if !LAUNCHERS.contains(&basename(command)) {
        return None;
    }
    let (_, from) = inspect::server_name(command, args);
    from.strip_prefix("the npm package ")
        .or_else(|| from.strip_prefix("the Python package "))
        .map(str::to_owned)
}

/// A candidate's name without a version (`@x/y@1.2`, `pkg==1.0`), extras or script
/// extension; None when it is not a plain package-like word.
fn normalised(candidate: &str) -> Option<String> {
    let c = candidate.trim();
    let c = match c.strip_prefix('@') {
        Some(rest) => {
            let (scope, name) = rest.split_once('/')?;
            let name = name.split('@').next().unwrap_or(name);
            format!("@{scope}/{name}")
        }
        None => {
            let c = script_name(c);
            c.split(['@', '=', '<', '>', '~', '!', '[', ';'])
                .next()
                .unwrap_or(c)
                .to_owned()
        }
    };
    let ok = !c.is_empty()
        && c.len() <= HOLDMAP_TOOL_NAME_CHARS_MAX
        && c.chars()
            .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '@' | '/' | '.' | '_' | '-'));
    ok.then_some(c)
}

/// Whether a normalised package or program name looks like an MCP server.
pub(crate) fn looks_like_mcp(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let last = match lower.strip_prefix('@') {
        Some(rest) => rest.split_once('/').map_or(rest, |(_, n)| n),
        None => lower.as_str(),
    };
    let scoped = lower.starts_with('@');
    lower.starts_with("@modelcontextprotocol/server-")
        || last.starts_with("mcp-server-")
        || last.starts_with("mcp_server_")
        || last.ends_with("-mcp")
        || last.ends_with("_mcp")
        || last.ends_with("-mcp-server")
        || last.ends_with("_mcp_server")
        || (scoped && matches!(last, "mcp" | "mcp-server"))
}

/// The MCP server name `p` is recognised by, if any: its name, `argv[0]`, runtime entry, or a
/// launcher's package spec.
fn mcp_package(p: &Proc) -> Option<String> {
    if let Some((command, args)) = command_of(p)
        && let Some(spec) = launcher_spec(command, args)
    {
        // A launcher: only its package counts (never its other arguments).
        return normalised(&spec).filter(|n| looks_like_mcp(n));
    }
    let runtime = script_name(image_name(p));
    let from_entry = match entry(&p.argv, runtime) {
        Some(Entry::Script(s)) => Some(s),
        Some(Entry::Module(m)) => Some(m.split('.').next().unwrap_or(m)),
        None => None,
    };
    [
        Some(p.name.as_str()),
        p.argv.first().map(String::as_str),
        from_entry,
    ]
    .into_iter()
    .flatten()
    .filter_map(normalised)
    .find(|n| looks_like_mcp(n))
}

/// Which of holdmap's and holdcall's own MCP servers a process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Own {
    /// `holdmap mcp`.
    Holdmap,
    /// `holdcall [--home DIR] serve …` run from the holdcall the judge counts.
    Holdcall,
    /// `… serve …` from a program named holdcall that is not that one: it claims to route.
    ClaimsHoldcall,
}

/// Whether `p` is holdmap's or holdcall's own MCP server: `holdmap mcp`, or `holdcall serve`
/// judged by its executable (device and inode, through `judge`) and read with
/// `routed::serve_args`, so `holdcall --home X serve` counts and a file merely named holdcall
/// does not.
fn own_server(p: &Proc, judge: &Judge) -> Option<Own> {
    let args = p.argv.get(1..).unwrap_or(&[]);
    let name = image_name(p);
    if name == "holdmap" && args.first().map(String::as_str) == Some("mcp") {
        return Some(Own::Holdmap);
    }
    routed::serve_args(args)?;
    let exe = p.exe.as_deref().and_then(|e| e.to_str());
    let exe = exe.map(|e| e.strip_suffix(" (deleted)").unwrap_or(e));
    if exe.is_some_and(|e| e.starts_with('/') && judge.check(e).is_ok()) {
        Some(Own::Holdcall)
    } else if routed::is_holdcall(name) {
        Some(Own::ClaimsHoldcall)
    } else {
        None
    }
}

/// What the upstream of a `holdcall serve … -- CMD ARGS` runs, as a package name.
fn routed_package(p: &Proc) -> Option<String> {
    let at = p.argv.iter().position(|a| a == "--")?;
    let cmd = p.argv.get(at + 1)?;
    let args = p.argv.get(at + 2..).unwrap_or(&[]);
    launcher_spec(cmd, args)
        .and_then(|s| normalised(&s))
        .or_else(|| normalised(basename(cmd)))
}

/// One process the agent started, classified. `dev` is the set of pids holding a dev-server
/// listener; `routed` whether it runs below a `holdcall serve` ([`below_holdcall`]); `judge`
/// which holdcall counts (`capabilities::holdcall_judge`, made once per collection).
pub(crate) fn classify(p: &Proc, dev: &BTreeSet<i32>, routed: bool, judge: &Judge) -> ChildTool {
    let name = crate::holdmap::framework::shown_name(p);
    let mut tool = ChildTool {
        pid: p.pid,
        ppid: p.ppid,
        name: crate::text::visible(&name),
        kind: ToolKind::Command,
        evidence: Evidence::Observed,
        package: None,
        command: redact_argv(&p.argv),
        via_holdcall: routed,
    };
    match own_server(p, judge) {
        Some(own @ (Own::Holdcall | Own::ClaimsHoldcall)) => {
            tool.kind = ToolKind::McpServer;
            tool.evidence = Evidence::Inferred;
            tool.via_holdcall = routed || own == Own::Holdcall;
            tool.package = routed_package(p).or(Some("holdcall".into()));
            return tool;
        }
        Some(Own::Holdmap) => {
            tool.kind = ToolKind::McpServer;
            tool.evidence = Evidence::Inferred;
            tool.package = Some("holdmap".into());
            return tool;
        }
        None => {}
    }
    if let Some(pkg) = mcp_package(p) {
        tool.kind = ToolKind::McpServer;
        tool.evidence = Evidence::Inferred;
        tool.package = Some(pkg);
    } else if dev.contains(&p.pid) {
        tool.kind = ToolKind::DevServer;
    } else if SHELLS.contains(&image_name(p)) {
        tool.kind = ToolKind::Shell;
    }
    tool
}

/// Whether `pid` runs below (or is) a `holdcall serve` of the holdcall `judge` counts among
/// `snap`'s processes, up to `stop`.
pub(crate) fn below_holdcall(snap: &Snapshot, pid: i32, stop: i32, judge: &Judge) -> bool {
    std::iter::once(pid)
        .chain(snap.ancestors(pid))
        .take_while(|&a| a != stop)
        .any(|a| snap.proc(a).and_then(|p| own_server(p, judge)) == Some(Own::Holdcall))
}

/// Whether a filter word names `t`: its name or package (or a package's part after the scope),
/// case-insensitive.
pub(crate) fn named(t: &ChildTool, word: &str) -> bool {
    let w = word.trim().to_lowercase();
    let pkg = t.package.as_deref().map(str::to_lowercase);
    t.name.to_lowercase() == w
        || pkg.as_deref() == Some(w.as_str())
        || pkg
            .as_deref()
            .and_then(|p| p.rsplit('/').next())
            .is_some_and(|last| last == w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::holdmap::model::fixture::{add, machine, process};

    /// A temp dir with `holdcall` (the one the judge counts) and `other/holdcall` (a copy).
    fn binaries() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().join("holdcall");
        let copy = t.path().join("other/holdcall");
        std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
        std::fs::write(&real, "#!/bin/sh\n").unwrap();
        std::fs::copy(&real, &copy).unwrap();
        (t, real, copy)
    }

    fn serve(pid: i32, ppid: i32, exe: &std::path::Path, argv: &[&str]) -> Proc {
        let mut p = process(pid, ppid, 1000, "holdcall", argv, "/p");
        p.exe = Some(exe.to_path_buf());
        p
    }

    #[test]
    fn holdcall_with_home_before_serve_from_the_judged_binary_is_via_holdcall() {
        let (_t, real, _) = binaries();
        let judge = Judge::binary_at(&real);
        let argv = [
            "holdcall",
            "--home",
            "/h",
            "serve",
            "--",
            "npx",
            "-y",
            "some-mcp@1.0.0",
        ];
        let t = classify(
            &serve(3000, 2000, &real, &argv),
            &BTreeSet::new(),
            false,
            &judge,
        );
        assert!(t.via_holdcall);
        assert_eq!(t.kind, ToolKind::McpServer);
        assert_eq!(t.package.as_deref(), Some("some-mcp"));
    }

    #[test]
    fn a_copy_merely_named_holdcall_claims_to_route_but_is_not_via_holdcall() {
        let (_t, real, copy) = binaries();
        let judge = Judge::binary_at(&real);
        let argv = ["holdcall", "serve", "--", "npx", "-y", "some-mcp@1.0.0"];
        let t = classify(
            &serve(3000, 2000, &copy, &argv),
            &BTreeSet::new(),
            false,
            &judge,
        );
        assert!(!t.via_holdcall);
        assert_eq!(t.kind, ToolKind::McpServer);
        let mut snap = machine();
        add(&mut snap, serve(3000, 2000, &copy, &argv));
        add(&mut snap, process(3001, 3000, 1000, "npx", &["npx"], "/p"));
        assert!(!below_holdcall(&snap, 3001, 2000, &judge));
    }

    #[test]
    fn what_runs_below_the_judged_holdcall_is_via_holdcall_and_nothing_is_when_none_is_judged() {
        let (_t, real, _) = binaries();
        let argv = [
            "holdcall",
            "serve",
            "--connector",
            "fs",
            "--",
            "npx",
            "-y",
            "x-mcp",
        ];
        let mut snap = machine();
        add(&mut snap, serve(3000, 2000, &real, &argv));
        add(&mut snap, process(3001, 3000, 1000, "npx", &["npx"], "/p"));
        assert!(below_holdcall(&snap, 3001, 2000, &Judge::binary_at(&real)));
        let nobody = Judge::binary_at(std::path::Path::new("/nonexistent/holdcall"));
        assert!(!below_holdcall(&snap, 3001, 2000, &nobody));
    }
}
