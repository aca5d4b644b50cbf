//! The needs of configured MCP servers: not routed through Holdcall (with the `holdcall init`
//! lines that route it, naming the holdcall installed beside holdmap), routed into a Holdcall
//! home other than the usual one, not pinned, pin or routing unknown.
//!
//! Must never: name an environment or header value or any part of a package URL (only aliases,
//! registry package names, files); offer `holdcall init` for an entry it does not rewrite
//! (remote or unrecognised).

use std::path::{Path, PathBuf};

use super::rules::{HoldcallInit, Kind, Need, Severity, Subject, need};
use crate::holdmap::agents::capabilities::holdcall_beside;
use crate::holdmap::agents::model::{AgentReport, ConfiguredServer, Evidence};
use crate::text;

fn server_subject(s: &ConfiguredServer) -> (Subject, String) {
    let source = s.source.display().to_string();
    let subject = Subject {
        what: "server",
        text: format!(
            "{} server {} ({} scope) in {source}",
            s.client, s.alias, s.scope
        ),
        client: Some(s.client.to_owned()),
        alias: Some(s.alias.clone()),
        scope: Some(s.scope.clone()),
        source: Some(s.source.clone()),
        ..Subject::default()
    };
    let key = format!("{}\0{}\0{}\0{source}", s.client, s.alias, s.scope);
    (subject, key)
}

/// Lowered to `info` when the file turns the server off: it is not loaded until turned on.
fn unless_disabled(s: &ConfiguredServer, severity: Severity) -> Severity {
    if s.enabled == Some(false) {
        Severity::Info
    } else {
        severity
    }
}

pub(super) fn server_needs(r: &AgentReport, s: &ConfiguredServer) -> Vec<Need> {
    let (subject, key) = server_subject(s);
    // No package means the spec was no plain registry name (a git or tarball URL, a path):
    // `capabilities` never keeps any part of such a spec, since it may hold a credential.
    let what = match (&s.package, &s.runner) {
        (Some(p), _) => p.clone(),
        (None, Some(r)) if PACKAGE_RUNNERS.contains(&r.as_str()) => {
            format!("a URL or path with {r}")
        }
        (None, Some(r)) => r.clone(),
        (None, None) => "its command".to_owned(),
    };
    let off = if s.enabled == Some(false) {
        " (turned off in the file)"
    } else {
        ""
    };
    let mut out = Vec::new();
    match s.routing {
        "not routed" => {
            let mut n = need(
                Kind::ServerNotRouted,
                &key,
                unless_disabled(s, Severity::Medium),
                Evidence::Observed,
                subject.clone(),
                vec![r.id.clone()],
                format!(
                    "MCP server {} ({what}) of {} is not routed through Holdcall{off}: {}",
                    s.alias,
                    s.client,
                    s.routing_detail
                        .as_deref()
                        .unwrap_or("its calls reach it unchecked")
                ),
                String::new(),
            );
            let beside = holdcall_beside();
            let init = holdcall_init_with(s, beside.as_deref());
            let caveat = if beside.is_none() {
                "No holdcall is installed beside holdmap, so holdmap counts no server as routed, \
                 and `holdcall` here is whichever one your shell finds on PATH (check it with \
                 `holdcall doctor`). "
            } else {
                ""
            };
            n.action = text::visible(&format!(
                "{caveat}Route it through Holdcall: review `{}`, then run `{}`",
                init.preview, init.write
            ));
            n.holdcall_init = Some(init);
            out.push(n);
        }
        "remote" | "unrecognized" => out.push(need(
            Kind::ServerRoutingUnknown,
            &key,
            Severity::Info,
            Evidence::Unknown,
            subject.clone(),
            vec![r.id.clone()],
            format!(
                "MCP server {} of {} {}{off}: holdmap cannot tell whether its calls are checked",
                s.alias,
                s.client,
                match (s.routing, &s.remote_host) {
                    ("remote", Some(h)) => format!("is remote ({h})"),
                    ("remote", None) => "is remote".to_owned(),
                    _ => format!(
                        "has an entry holdcall does not rewrite ({})",
                        s.routing_detail.as_deref().unwrap_or("unrecognized shape")
                    ),
                }
            ),
            "Check that it is a server you trust; holdcall init does not rewrite it".to_owned(),
        )),
        "routed" => out.extend(home_need(r, s, &subject, &key, off)),
        _ => {}
    }
    match s.pin {
        "unpinned" => out.push(need(
            Kind::ServerUnpinned,
            &key,
            unless_disabled(s, Severity::Medium),
            Evidence::Observed,
            subject,
            vec![r.id.clone()],
            format!(
                "MCP server {} runs {what} without an exact version{off}: {}",
                s.alias, s.pin_detail
            ),
            match &s.package {
                Some(p) => format!(
                    "Pin an exact version (for example {}) in {}",
                    pinned_example(s.runner.as_deref(), p),
                    s.source.display()
                ),
                None => format!(
                    "Pin it in {} to an exact version, or a URL or commit that does not move",
                    s.source.display()
                ),
            },
        )),
        // A remote server has no package to pin: its routing need says enough.
        "unknown" if s.remote_host.is_none() && s.transport == "stdio" => out.push(need(
            Kind::ServerPinUnknown,
            &key,
            unless_disabled(s, Severity::Low),
            Evidence::Unknown,
            subject,
            vec![r.id.clone()],
            format!(
                "holdmap cannot tell whether MCP server {} is pinned{off}: {}",
                s.alias, s.pin_detail
            ),
            format!(
                "Check what {} runs and pin it to an exact version if it is a package",
                s.alias
            ),
        )),
        _ => {}
    }
    out
}

/// A routed server whose relay uses a Holdcall home the entry names, other than the usual one
/// (`other`) or relative to the client's working directory (`relative`): the rules of that
/// home apply, which may not be the user's.
fn home_need(
    r: &AgentReport,
    s: &ConfiguredServer,
    subject: &Subject,
    key: &str,
    off: &str,
) -> Option<Need> {
    let home = s.holdcall_home.as_deref()?;
    let (severity, evidence, why) = match s.holdcall_home_state? {
        "relative" => (
            Severity::Medium,
            Evidence::Observed,
            format!(
                "into the relative home {home}, which depends on the working directory its client starts it in"
            ),
        ),
        "other" => (
            Severity::Info,
            Evidence::Unknown,
            format!("into the home {home}, not the one holdcall uses in holdmap's environment"),
        ),
        _ => return None,
    };
    Some(need(
        Kind::ServerRoutingUnknown,
        key,
        unless_disabled(s, severity),
        evidence,
        subject.clone(),
        vec![r.id.clone()],
        format!(
            "MCP server {} of {} is routed through Holdcall {why}{off}: the rules of that home check its calls",
            s.alias, s.client
        ),
        format!(
            "Check that {home} is the Holdcall home your rules are in; if not, route the entry again with `holdcall init --write` (it writes your home as an absolute --home) or edit --home in {}",
            s.source.display()
        ),
    ))
}

/// `holdcall init` for the file that defines `s`, through the [`holdcall_beside`] holdmap.
pub(crate) fn holdcall_init(s: &ConfiguredServer) -> HoldcallInit {
    holdcall_init_with(s, holdcall_beside().as_deref())
}

/// `holdcall init` for the file that defines `s`, run as `holdcall` (its absolute path, quoted,
/// when given: the one whose routing holdmap counts; else the bare name, which the shell
/// resolves on its PATH): in the project folder for a project-scope file (holdcall reads those
/// from the current directory), anywhere otherwise.
pub(crate) fn holdcall_init_with(s: &ConfiguredServer, holdcall: Option<&Path>) -> HoldcallInit {
    let directory = (s.scope == "project")
        .then(|| project_dir(&s.source))
        .flatten();
    let program = holdcall.map_or_else(
        || "holdcall".to_owned(),
        |p| shell_quote(&p.to_string_lossy()),
    );
    let cd = directory.as_ref().map_or_else(String::new, |d| {
        format!("cd {} && ", shell_quote(&d.to_string_lossy()))
    });
    let (preview, write) = (
        format!("{cd}{program} init"),
        format!("{cd}{program} init --write"),
    );
    HoldcallInit {
        directory,
        preview,
        write,
    }
}

/// The project folder a project-scope file belongs to: `.mcp.json`'s folder, or the folder
/// above `.cursor/`, `.vscode/`, `.gemini/`.
fn project_dir(source: &Path) -> Option<PathBuf> {
    let parent = source.parent()?;
    let dotted = parent
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.'));
    Some(if dotted { parent.parent()? } else { parent }.to_path_buf())
}

/// `text` as one shell word: as it is when it holds only safe characters, else single-quoted.
pub(crate) fn shell_quote(text: &str) -> String {
    let safe = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c));
    if safe {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// Runners whose argument is a package: without a package, what they run is a URL or path.
const PACKAGE_RUNNERS: &[&str] = &[
    "npx", "bunx", "pnpm", "yarn", "uvx", "uv", "pipx", "docker", "podman",
];

/// How an exact version is written for `runner`: `pkg==1.2.3` for Python launchers, an image
/// digest for containers, `pkg@1.2.3` otherwise (npx, bunx, pnpm dlx …).
fn pinned_example(runner: Option<&str>, what: &str) -> String {
    match runner {
        Some("uvx" | "uv" | "pipx" | "pip") => format!("{what}==1.2.3"),
        Some("docker" | "podman") => format!("{what}@sha256:<digest>"),
        _ => format!("{what}@1.2.3"),
    }
}
