//! The needs of configured MCP servers: not routed through Holdcall (with the `holdcall init`
//! lines that route it), not pinned, pin or routing unknown.
//!
//! Must never: name an environment or header value or any part of a package URL (only aliases,
//! registry package names, files); offer `holdcall init` for an entry it does not rewrite
//! (remote or unrecognised).

use std::path::{Path, PathBuf};

use super::rules::{HoldcallInit, Kind, Need, Severity, Subject, need};
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
            let init = holdcall_init(s);
            n.action = text::visible(&format!(
                "Route it through Holdcall: review `{}`, then run `{}`",
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

/// `holdcall init` for the file that defines `s`: run in the project folder for a project-scope
/// file (holdcall reads those from the current directory), anywhere otherwise.
pub(crate) fn holdcall_init(s: &ConfiguredServer) -> HoldcallInit {
    let directory = (s.scope == "project")
        .then(|| project_dir(&s.source))
        .flatten();
    let (preview, write) = match &directory {
        Some(d) => {
            let cd = format!("cd {} && ", shell_quote(&d.to_string_lossy()));
            (
                format!("{cd}holdcall init"),
                format!("{cd}holdcall init --write"),
            )
        }
        None => (
            "holdcall init".to_owned(),
            "holdcall init --write".to_owned(),
        ),
    };
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
