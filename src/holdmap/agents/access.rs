//! An agent's access facts, from what the process table shows: `user` (its account; root is
//! elevated), `sandbox` (a wrapper process around it or its commands, or a sandbox flag),
//! `approvals` (a flag that turns approval prompts off) and `network` (a listener beyond
//! loopback). A flag seen on its command line is observed; nothing seen is unknown, because
//! settings files are not read here (`include_capabilities` reads the documented ones).
//!
//! Must never: call a fact "normal" because nothing was seen; read a settings file; show a
//! flag's value other than the few documented mode words it compares against.

use crate::holdmap::agents::model::{AccessFact, AgentPort, Evidence, Level};
use crate::holdmap::framework::basename;
use crate::holdmap::model::Snapshot;
use crate::os::procs::Proc;

/// Sandbox wrapper programs.
const WRAPPERS: &[&str] = &[
    "bwrap",
    "firejail",
    "nsjail",
    "codex-linux-sandbox",
    "sandbox-exec",
    "landrun",
];

const NOT_READ: &str = "settings aren't read here; include_capabilities reads documented settings";

fn fact(kind: &'static str, level: Level, evidence: Evidence, detail: String) -> AccessFact {
    AccessFact {
        kind,
        level,
        evidence,
        detail,
    }
}

/// The value of `flag` in `argv` (`--flag v` or `--flag=v`).
fn value<'a>(argv: &'a [String], flags: &[&str]) -> Option<&'a str> {
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        for f in flags {
            if a == f {
                return it.next().map(String::as_str);
            }
            if let Some(v) = a.strip_prefix(f).and_then(|r| r.strip_prefix('=')) {
                return Some(v);
            }
        }
    }
    None
}

fn has(argv: &[String], flag: &str) -> bool {
    argv.iter().any(|a| a == flag)
}

/// The approval-disabling flag seen on `argv` for `product`, in words.
fn approvals_flag(product: &str, argv: &[String]) -> Option<(Level, String)> {
    let on = |f: &str| format!("{f} on its command line");
    let elevated = |f: &str| Some((Level::Elevated, on(f)));
    match product {
        "claude-code" => {
            if has(argv, "--dangerously-skip-permissions") {
                return elevated("--dangerously-skip-permissions");
            }
            return match value(argv, &["--permission-mode"]) {
                Some(m @ ("bypassPermissions" | "acceptEdits")) => {
                    Some((Level::Elevated, on(&format!("--permission-mode {m}"))))
                }
                Some(m @ ("plan" | "default")) => {
                    Some((Level::Normal, on(&format!("--permission-mode {m}"))))
                }
                _ => None,
            };
        }
        "codex" => {
            for f in [
                "--dangerously-bypass-approvals-and-sandbox",
                "--yolo",
                "--full-auto",
            ] {
                if has(argv, f) {
                    return elevated(f);
                }
            }
            return match value(argv, &["-a", "--ask-for-approval"]) {
                Some("never") => elevated("--ask-for-approval never"),
                Some(m @ ("untrusted" | "on-request" | "on-failure")) => {
                    Some((Level::Normal, on(&format!("--ask-for-approval {m}"))))
                }
                _ => None,
            };
        }
        "gemini" | "qwen" => {
            if has(argv, "--yolo") || has(argv, "-y") {
                return elevated("--yolo");
            }
            return match value(argv, &["--approval-mode"]) {
                Some("yolo") => elevated("--approval-mode yolo"),
                Some("auto_edit") => elevated("--approval-mode auto_edit"),
                Some("default") => Some((Level::Normal, on("--approval-mode default"))),
                _ => None,
            };
        }
        "aider" => {
            if has(argv, "--yes-always") {
                return elevated("--yes-always");
            }
            return None;
        }
        "copilot-cli" => {
            if has(argv, "--allow-all-tools") {
                return elevated("--allow-all-tools");
            }
            return None;
        }
        _ => {}
    }
    [
        "--yolo",
        "--yes",
        "--auto-approve",
        "--dangerously-skip-permissions",
    ]
    .into_iter()
    .find(|f| has(argv, f))
    .and_then(elevated)
}

/// A sandbox flag seen on `argv` for `product`.
fn sandbox_flag(product: &str, argv: &[String]) -> Option<(Level, String)> {
    match product {
        "codex" => {
            if has(argv, "--dangerously-bypass-approvals-and-sandbox") || has(argv, "--yolo") {
                return Some((
                    Level::Elevated,
                    "the sandbox is turned off on its command line".into(),
                ));
            }
            match value(argv, &["-s", "--sandbox"]) {
                Some("danger-full-access") => Some((
                    Level::Elevated,
                    "--sandbox danger-full-access on its command line".into(),
                )),
                Some(m @ ("read-only" | "workspace-write")) => {
                    Some((Level::Normal, format!("--sandbox {m} on its command line")))
                }
                _ if has(argv, "--full-auto") => Some((
                    Level::Normal,
                    "--full-auto on its command line (workspace-write sandbox)".into(),
                )),
                _ => None,
            }
        }
        "gemini" | "qwen" => (has(argv, "--sandbox") || has(argv, "-s"))
            .then(|| (Level::Normal, "--sandbox on its command line".into())),
        _ => None,
    }
}

/// A sandbox wrapper around the agent (an ancestor) or around its commands (a member).
fn wrapper(snap: &Snapshot, agent: i32, members: &[i32]) -> Option<String> {
    let name = |p: &Proc| {
        let exe = p.exe.as_deref().and_then(|e| e.to_str());
        let image = exe.or_else(|| p.argv.first().map(String::as_str))?;
        let b = basename(image);
        (WRAPPERS.contains(&b) || b.starts_with("containerd-shim")).then(|| b.to_owned())
    };
    if let Some((pid, w)) = snap
        .ancestors(agent)
        .into_iter()
        .find_map(|a| snap.proc(a).and_then(|p| name(p).map(|w| (a, w))))
    {
        return Some(format!("it runs inside {w} (pid {pid})"));
    }
    members
        .iter()
        .find_map(|&m| snap.proc(m).and_then(name))
        .map(|w| format!("its commands run through {w}"))
}

/// Every access fact of an agent: user, sandbox, approvals, network, in that order.
pub(crate) fn facts(
    snap: &Snapshot,
    root: &Proc,
    product: &str,
    members: &[i32],
    ports: &[AgentPort],
) -> Vec<AccessFact> {
    let user = match root.uid {
        Some(0) => fact(
            "user",
            Level::Elevated,
            Evidence::Observed,
            "runs as root".into(),
        ),
        Some(u) if u == snap.me.uid => fact(
            "user",
            Level::Normal,
            Evidence::Observed,
            format!("runs as uid {u}, holdmap's own account"),
        ),
        Some(u) => fact(
            "user",
            Level::Normal,
            Evidence::Observed,
            format!("runs as uid {u}, another account than holdmap's"),
        ),
        None => fact(
            "user",
            Level::Unknown,
            Evidence::Unknown,
            "its account could not be read".into(),
        ),
    };
    let argv = &root.argv;
    let sandbox = match (
        wrapper(snap, root.pid, members),
        sandbox_flag(product, argv),
    ) {
        (_, Some((Level::Elevated, d))) => fact("sandbox", Level::Elevated, Evidence::Observed, d),
        (Some(w), _) => fact("sandbox", Level::Normal, Evidence::Observed, w),
        (None, Some((level, d))) => fact("sandbox", level, Evidence::Observed, d),
        (None, None) => fact(
            "sandbox",
            Level::Unknown,
            Evidence::Unknown,
            format!("no sandbox wrapper or flag seen; {NOT_READ}"),
        ),
    };
    let approvals = match approvals_flag(product, argv) {
        Some((level, d)) => fact("approvals", level, Evidence::Observed, d),
        None => fact(
            "approvals",
            Level::Unknown,
            Evidence::Unknown,
            format!("no approval flag seen on its command line; {NOT_READ}"),
        ),
    };
    let exposed: Vec<String> = ports
        .iter()
        .filter(|p| p.exposed)
        .map(|p| format!("{}/{} on {}", p.port, p.protocol.as_str(), p.address))
        .collect();
    let network = if exposed.is_empty() {
        fact(
            "network",
            Level::Normal,
            Evidence::Observed,
            "none of its processes listens beyond loopback; outgoing access is not judged".into(),
        )
    } else {
        fact(
            "network",
            Level::Elevated,
            Evidence::Observed,
            format!("listens beyond loopback: {}", exposed.join(", ")),
        )
    };
    vec![user, sandbox, approvals, network]
}
