//! The built-in analyzer `mcp-pins`: every MCP server every supported client is configured with
//! (user-scope files, and the project files of the directory `holdmap analyze` runs in), judged
//! pinned / unpinned / unknown and routed through Holdcall or not — the same reading
//! `list_agents` uses (`agents::capabilities::configured_servers`). No network, no processes.
//!
//! Must never: put an environment value, a header value, a URL or an argument list in a finding
//! (only alias, client, file path, package, pin detail and routing); start or connect to a
//! server; write a client's file.

use crate::clients::Places;
use crate::clients::routed::Judge;
use crate::holdmap::agents::capabilities::configured_servers;
use crate::holdmap::agents::model::ConfiguredServer;
use crate::holdmap::analyzers::Insight;
use crate::holdmap::analyzers::catalog::BUILTIN;
use crate::holdmap::needs::servers::holdcall_init;
use crate::text::visible;

/// What one run checked and found.
#[derive(Debug, Default)]
pub(crate) struct Checked {
    pub(crate) findings: Vec<Insight>,
    pub(crate) servers: u64,
    pub(crate) files_read: u64,
    /// The clients whose files were looked at.
    pub(crate) clients: Vec<&'static str>,
}

/// The rule names, each a finding's `rule`.
pub(crate) const RULES: &[(&str, &str)] = &[
    (
        "unpinned",
        "medium: a package or image without an exact version",
    ),
    (
        "pin-unknown",
        "info: holdmap cannot tell the version (a remote server, an unknown launcher)",
    ),
    (
        "not-routed",
        "medium: a stdio server that does not run through this Holdcall",
    ),
    (
        "unrecognized",
        "low: an entry whose shape neither holdmap nor its client's reader understands",
    ),
    (
        "config-unreadable",
        "low: a client's config file that could not be read",
    ),
];

/// Runs the check over every client's files under `places`; `found_at_ms` dates each finding.
pub(crate) fn run(places: &Places, judge: &Judge, found_at_ms: u64) -> Checked {
    let mut out = Checked::default();
    let mut clients = Vec::new();
    for spec in places.files() {
        if !clients.contains(&spec.client) {
            clients.push(spec.client);
        }
    }
    for client in clients {
        out.clients.push(client.id());
        let (sources, servers) = configured_servers(places, client, judge);
        for source in &sources {
            match source.state {
                "read" => out.files_read += 1,
                "refused" => out.findings.push(finding(
                    Subject {
                        rule: "config-unreadable",
                        client: client.id(),
                        file: &source.path.display().to_string(),
                        alias: None,
                    },
                    "low",
                    format!(
                        "{} config file {} could not be read",
                        client.id(),
                        source.path.display()
                    ),
                    source.reason.clone().unwrap_or_default(),
                    Some("fix the file so its client can read it; holdmap checked none of its servers".into()),
                    found_at_ms,
                )),
                _ => {}
            }
        }
        for server in &servers {
            out.servers += 1;
            out.findings.extend(judge_server(server, found_at_ms));
        }
    }
    out
}

/// The findings about one server: none when it is pinned and routed.
fn judge_server(s: &ConfiguredServer, found_at_ms: u64) -> Vec<Insight> {
    let file = s.source.display().to_string();
    let alias = visible(&s.alias);
    let off = s.enabled == Some(false);
    // A server switched off in its file matters less: said, and ranked as information.
    let rank = |severity: &'static str| if off { "info" } else { severity };
    let where_ = format!(
        "{} server `{alias}` in {file}{}",
        s.client,
        if off { " (disabled there)" } else { "" }
    );
    let package = s.package.as_deref().map(visible);
    let what = package
        .as_deref()
        .map(|p| format!("package {p}"))
        .or_else(|| s.remote_host.as_ref().map(|h| format!("remote host {h}")))
        .unwrap_or_else(|| "no package holdmap could read".into());
    let subject = |rule: &'static str| Subject {
        rule,
        client: s.client,
        file: &file,
        alias: Some(&s.alias),
    };
    let mut out = Vec::new();
    match s.pin {
        "unpinned" => out.push(finding(
            subject("unpinned"),
            rank("medium"),
            format!("{where_} is not pinned to a version"),
            format!("{what}: {}", visible(&s.pin_detail)),
            Some(format!(
                "pin an exact version in {file}: npx `{p}@1.2.3`, uvx `{p}==1.2.3`, docker `image@sha256:…`",
                p = package.as_deref().unwrap_or("package")
            )),
            found_at_ms,
        )),
        "unknown" => out.push(finding(
            subject("pin-unknown"),
            "info",
            format!("holdmap cannot tell which version {where_} runs"),
            format!("{what}: {}", visible(&s.pin_detail)),
            None,
            found_at_ms,
        )),
        _ => {}
    }
    match s.routing {
        "not routed" => out.push(finding(
            subject("not-routed"),
            rank("medium"),
            format!("{where_} does not run through Holdcall"),
            s.routing_detail.as_deref().map(visible).unwrap_or_else(|| {
                "a stdio server started directly by its client: no Holdcall policy sees its calls"
                    .into()
            }),
            // The same lines list_needs offers (project folder, the holdcall beside holdmap).
            Some({
                let init = holdcall_init(s);
                format!(
                    "run `{}` to see the change, then `{}` to route it through Holdcall",
                    init.preview, init.write
                )
            }),
            found_at_ms,
        )),
        "unrecognized" => out.push(finding(
            subject("unrecognized"),
            rank("low"),
            format!("{where_} has a shape holdmap does not read"),
            s.routing_detail.as_deref().map(visible).unwrap_or_default(),
            Some(format!(
                "check the entry in {file} against its client's documentation"
            )),
            found_at_ms,
        )),
        _ => {}
    }
    for f in &mut out {
        f.package = s.package.clone();
        f.pin = Some(s.pin.to_string());
        f.routing = Some(s.routing.to_string());
    }
    out
}

/// What a finding is about: its stable id is a hash of these and the analyzer.
struct Subject<'a> {
    rule: &'static str,
    client: &'static str,
    file: &'a str,
    alias: Option<&'a str>,
}

/// `ins-` and the first 16 hex digits of SHA-256 over analyzer, rule, client, file and alias
/// (NUL-separated, so no two subjects run together).
pub(crate) fn finding_id(
    analyzer: &str,
    rule: &str,
    client: &str,
    file: &str,
    alias: &str,
) -> String {
    let key = [analyzer, rule, client, file, alias].join("\0");
    let hex = crate::ids::sha256_hex(key.as_bytes());
    format!("ins-{}", hex.get(..16).unwrap_or(&hex))
}

fn finding(
    s: Subject<'_>,
    severity: &'static str,
    title: String,
    detail: String,
    action: Option<String>,
    found_at_ms: u64,
) -> Insight {
    Insight {
        id: finding_id(BUILTIN, s.rule, s.client, s.file, s.alias.unwrap_or("")),
        analyzer: BUILTIN.to_string(),
        rule: s.rule.to_string(),
        agent: s.client.to_string(),
        severity: severity.to_string(),
        state: "open".to_string(),
        subject: match s.alias {
            Some(a) => format!("mcp server {} in {}", visible(a), s.file),
            None => format!("config file {}", s.file),
        },
        title,
        detail,
        action,
        found_at_ms,
        source: Some(s.file.to_string()),
        alias: s.alias.map(str::to_string),
        package: None,
        pin: None,
        routing: None,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::holdmap::needs::servers::holdcall_init;

    #[test]
    fn the_not_routed_action_is_list_needs_init_line_with_the_project_folder() {
        let s = ConfiguredServer {
            client: "claude-code",
            alias: "some".into(),
            scope: "project".into(),
            source: PathBuf::from("/home/u/shop/.mcp.json"),
            transport: "stdio".into(),
            enabled: None,
            runner: Some("npx".into()),
            package: Some("some-mcp".into()),
            pin: "pinned",
            pin_detail: String::new(),
            remote_host: None,
            env_names: Vec::new(),
            header_names: Vec::new(),
            routing: "not routed",
            routing_detail: None,
            holdcall_home: None,
            holdcall_home_state: None,
            running_pids: Vec::new(),
        };
        let found = judge_server(&s, 1);
        let action = found
            .iter()
            .find(|i| i.rule == "not-routed")
            .and_then(|i| i.action.clone())
            .unwrap();
        let init = holdcall_init(&s);
        assert!(
            init.write.starts_with("cd /home/u/shop && "),
            "{}",
            init.write
        );
        assert!(
            action.contains(&format!("`{}`", init.preview))
                && action.contains(&format!("`{}`", init.write)),
            "{action}"
        );
    }
}
