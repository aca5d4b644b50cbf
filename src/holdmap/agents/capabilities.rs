//! `include_capabilities: true`: what an agent's MCP configuration files define, read through
//! the same `crate::clients` readers `holdcall init` and `inventory` use, judged for pinning
//! (`clients::inspect::pin`) and routing (`clients::routed`, against the holdcall installed
//! beside this holdmap), plus permission rules, documented safety settings, instruction-file
//! names and skills. The built-in analyzer reads the same [`configured_servers`].
//!
//! Must never: return an environment value, a header value, a URL's path, userinfo or query, an
//! argument list, or an instruction file's body; start, connect to or signal an MCP server; read
//! a file of another account's agent; call anything "loaded" or "used" (definitions prove
//! neither).

use std::path::{Path, PathBuf};

use crate::clients::routed::{self, Judge, Routing};
use crate::clients::{self, ClientId, FileState, Places, ServerEntry, inspect};
use crate::holdmap::agents::model::{ConfiguredServer, SourceFile};

/// The judge of "routed through Holdcall" for holdmap: the `holdcall` binary installed in the
/// same directory as this `holdmap` (one package, one install). None found: nothing is routed.
pub(crate) fn holdcall_judge() -> Judge {
    let sibling = std::env::current_exe()
        .ok()
        .and_then(|exe| std::fs::canonicalize(exe).ok())
        .and_then(|exe| exe.parent().map(|d| d.join("holdcall")))
        .unwrap_or_default();
    Judge::binary_at(&sibling)
}

/// Every MCP server `client`'s files define under `places`, with each file's state: metadata
/// only (see the module's rules).
pub(crate) fn configured_servers(
    places: &Places,
    client: ClientId,
    judge: &Judge,
) -> (Vec<SourceFile>, Vec<ConfiguredServer>) {
    let mut sources = Vec::new();
    let mut servers = Vec::new();
    for spec in places.files().into_iter().filter(|s| s.client == client) {
        let (state, reason) = match clients::read_file(&spec, &[]) {
            FileState::Missing => ("missing", None),
            FileState::Refused(why) => ("refused", Some(why)),
            FileState::Read(loaded) => {
                servers.extend(
                    loaded
                        .entries
                        .iter()
                        .map(|e| configured(client, &spec.path, e, judge)),
                );
                ("read", None)
            }
        };
        sources.push(SourceFile {
            path: spec.path.clone(),
            scope: spec.scope.to_string(),
            state,
            reason,
        });
    }
    (sources, servers)
}

/// One entry as metadata: its runner and package read from the command it really runs (after
/// `holdcall serve … --` when routed), never its arguments.
fn configured(client: ClientId, source: &Path, e: &ServerEntry, judge: &Judge) -> ConfiguredServer {
    let (routing, _) = routed::classify(e, judge);
    let upstream = routed::upstream(e, &routing);
    let (runner, package, pin) = match &upstream {
        Some((cmd, args)) => {
            let (name, _) = inspect::server_name(cmd, args);
            let runner = Path::new(cmd)
                .file_name()
                .and_then(|n| n.to_str())
                .map(str::to_string);
            (
                runner,
                Some(name).filter(|n| !n.is_empty()),
                inspect::pin(cmd, args),
            )
        }
        None if e.url.is_some() => (None, None, inspect::Pin::Unknown("a remote server".into())),
        None => (
            None,
            None,
            inspect::Pin::Unknown("no command to read".into()),
        ),
    };
    let routing_detail = match &routing {
        Routing::OtherHoldcall(o) => Some(o.reason()),
        Routing::Unrecognized(why) => Some(why.clone()),
        _ => None,
    };
    ConfiguredServer {
        client: client.id(),
        alias: e.name.clone(),
        scope: e.scope.clone(),
        source: source.to_path_buf(),
        transport: e.transport.clone(),
        enabled: e.enabled,
        runner,
        package,
        pin: pin.label(),
        pin_detail: pin.detail().to_string(),
        remote_host: e.url.as_deref().and_then(url_host),
        env_names: e.env_names.clone(),
        header_names: e.header_names.clone(),
        routing: routing.label(),
        routing_detail,
        running_pids: Vec::new(),
    }
}

/// The host (and port) of a URL: what is between `scheme://` (and any `userinfo@`) and the
/// first `/`, `?` or `#`. None when it has no `scheme://`.
pub(crate) fn url_host(url: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    (!host.is_empty()).then(|| host.to_string())
}

/// The places for an agent working in `project`: holdmap's own HOME (only same-account agents
/// get capabilities) with that project directory.
pub(crate) fn places_for(project: Option<&PathBuf>) -> Option<Places> {
    let places = Places::from_env().ok()?;
    Some(match project {
        Some(p) => places.with_project(p),
        None => places,
    })
}

/// What `report`'s client's files define, for `list_agents` with `include_capabilities`: its
/// servers (each marked running when one of the agent's processes in `snap` runs it), permission
/// rules, safety settings, instruction files and skills. `list` calls it only for an agent of
/// holdmap's own account. (Skeleton: servers only.)
pub(crate) fn of(
    report: &crate::holdmap::agents::model::AgentReport,
    _snap: &crate::holdmap::model::Snapshot,
) -> crate::holdmap::agents::model::Capabilities {
    let mut caps = crate::holdmap::agents::model::Capabilities::default();
    let Some(client) = report.client else {
        caps.limits.push(format!(
            "holdmap reads no MCP configuration files of {}",
            report.name
        ));
        return caps;
    };
    let project = report.folders.first().map(|f| f.path.clone());
    if let Some(places) = places_for(project.as_ref()) {
        let (sources, servers) = configured_servers(&places, client, &holdcall_judge());
        caps.sources = sources;
        caps.servers = servers;
    }
    caps
}

/// `capabilities` as `list_agents` returns it (a JSON object matching [`output_schema`]).
/// (Skeleton.)
pub(crate) fn to_json(_caps: &crate::holdmap::agents::model::Capabilities) -> serde_json::Value {
    serde_json::json!({})
}

/// The JSON schema of one agent's `capabilities` object, for `list_agents`' output schema.
/// (Skeleton.)
pub(crate) fn output_schema() -> serde_json::Value {
    serde_json::json!({"type": "object"})
}
