//! `include_capabilities: true`: what an agent's MCP configuration files define, read through
//! the same `crate::clients` readers `holdcall init` and `inventory` use, judged for pinning
//! (`clients::inspect::pin`) and routing (`clients::routed`, against the holdcall installed
//! beside this holdmap), plus permission rules, documented safety settings, instruction-file
//! names and skills. The built-in analyzer reads the same [`configured_servers`].
//!
//! Must never: return an environment value (a `holdcall serve` entry's home-choosing variables
//! are kept only to tell the home its relay uses, and shown only as that home), a header value, a URL's path, userinfo or query, an
//! argument list, or an instruction file's body; start, connect to or signal an MCP server; read
//! a file of another account's agent; call anything "loaded" or "used" (definitions prove
//! neither).

mod render;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::clients::routed::{self, Judge, Routing, ServeArgs};
use crate::clients::settings::{self, SettingsState, clean};
use crate::clients::{
    self, ClientId, FileState, Places, ServerEntry, inspect, instructions, skills,
};
use crate::holdmap::agents::model::{
    AgentReport, Capabilities, ConfiguredServer, PermissionRule, SafetySetting, Skill, SourceFile,
};
use crate::holdmap::model::Snapshot;
use crate::limits;

/// The `holdcall` installed in the same directory as this `holdmap` (one package, one install),
/// when there is a file there: the one whose routing counts, and the one the `holdcall init`
/// lines of `list_needs` name.
pub(crate) fn holdcall_beside() -> Option<PathBuf> {
    std::env::current_exe()
        .ok()
        .and_then(|exe| std::fs::canonicalize(exe).ok())
        .and_then(|exe| exe.parent().map(|d| d.join("holdcall")))
        .filter(|p| p.is_file())
}

/// The judge of "routed through Holdcall" for holdmap: the [`holdcall_beside`] this holdmap
/// (by device and inode). None found: nothing is routed, and [`NO_HOLDCALL_LIMIT`] says so.
pub(crate) fn holdcall_judge() -> Judge {
    Judge::binary_at(&holdcall_beside().unwrap_or_default())
}

/// Said when no `holdcall` is installed beside holdmap.
pub(crate) const NO_HOLDCALL_LIMIT: &str = "no holdcall is installed beside this holdmap, so no server counts as routed through Holdcall; the holdcall init lines name the `holdcall` on holdmap's PATH, which may be another install";

/// Every MCP server `client`'s files define under `places`, with each file's state: metadata
/// only (see the module's rules).
pub(crate) fn configured_servers(
    places: &Places,
    client: ClientId,
    judge: &Judge,
) -> (Vec<SourceFile>, Vec<ConfiguredServer>) {
    servers_with(places, client, judge, |_, _| Vec::new())
}

/// [`configured_servers`], each server's `running_pids` from `running` (its entry and routing).
fn servers_with(
    places: &Places,
    client: ClientId,
    judge: &Judge,
    running: impl Fn(&ServerEntry, &Routing) -> Vec<i32>,
) -> (Vec<SourceFile>, Vec<ConfiguredServer>) {
    let mut sources = Vec::new();
    let mut servers = Vec::new();
    for spec in places.files().into_iter().filter(|s| s.client == client) {
        // The home-choosing variables' values are kept, to tell the home a relay uses.
        let (state, reason) = match clients::read_file(&spec, &routed::HOME_VARS) {
            FileState::Missing => ("missing", None),
            FileState::Refused(why) => ("refused", Some(why)),
            FileState::Read(loaded) => {
                for e in &loaded.entries {
                    let (routing, serve) = routed::classify(e, judge);
                    let mut server = configured(client, &spec.path, e, &routing, judge);
                    relay_home_into(&mut server, e, serve.as_ref(), &places.home);
                    server.running_pids = running(e, &routing);
                    servers.push(server);
                }
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
fn configured(
    client: ClientId,
    source: &Path,
    e: &ServerEntry,
    routing: &Routing,
    judge: &Judge,
) -> ConfiguredServer {
    let upstream = routed::upstream(e, routing);
    let (runner, package, pin) = match &upstream {
        Some((cmd, args)) => {
            let runner =
                Some(clean(base(cmd), limits::CLIENT_SETTING_CHARS_MAX)).filter(|r| !r.is_empty());
            (runner, package_of(cmd, args), inspect::pin(cmd, args))
        }
        None if e.url.is_some() => (None, None, inspect::Pin::Unknown("a remote server".into())),
        None => (
            None,
            None,
            inspect::Pin::Unknown("no command to read".into()),
        ),
    };
    let routing_detail = match routing {
        Routing::OtherHoldcall(o) if !judge.has_binary() => Some(format!(
            "{}; but no holdcall is installed beside holdmap, so holdmap counts no entry as routed",
            o.reason()
        )),
        Routing::OtherHoldcall(o) => Some(o.reason()),
        Routing::Unrecognized(why) => Some(why.clone()),
        _ => None,
    };
    ConfiguredServer {
        client: client.id(),
        alias: crate::text::visible(&e.name),
        scope: crate::text::visible(&e.scope),
        source: source.to_path_buf(),
        transport: e.transport.clone(),
        enabled: e.enabled,
        runner,
        package,
        pin: pin.label(),
        pin_detail: clean(pin.detail(), limits::CLIENT_SETTING_CHARS_MAX),
        remote_host: e.url.as_deref().and_then(url_host),
        env_names: e
            .env_names
            .iter()
            .map(|n| crate::text::visible(n))
            .collect(),
        header_names: e
            .header_names
            .iter()
            .map(|n| crate::text::visible(n))
            .collect(),
        routing: routing.label(),
        routing_detail,
        holdcall_home: None,
        holdcall_home_state: None,
        running_pids: Vec::new(),
    }
}

/// The Holdcall home a `holdcall serve` entry's relay uses, when the entry names one
/// (`routed::named_home`, its client's HOME taken as `user_home`), judged against the home
/// holdcall uses in holdmap's own environment; a routed entry's detail then says where it lands
/// unless that is the usual home.
fn relay_home_into(
    server: &mut ConfiguredServer,
    e: &ServerEntry,
    serve: Option<&ServeArgs>,
    user_home: &Path,
) {
    let Some(serve) = serve else { return };
    let client_env = |name: &str| (name == "HOME").then(|| user_home.as_os_str().to_owned());
    let Some(named) = routed::named_home(serve, &e.kept_env, client_env) else {
        return;
    };
    let shown = crate::text::visible(&named.to_string_lossy());
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let usual = routed::home_dir(None, |n| std::env::var_os(n));
    let state = if named.is_relative() {
        "relative"
    } else if usual.is_some_and(|u| real(&u) == real(&named)) {
        "usual"
    } else {
        "other"
    };
    if server.routing == "routed" {
        server.routing_detail = match state {
            "relative" => Some(format!(
                "routed through Holdcall into the relative home {shown}, which depends on the client's working directory: the rules there may not be yours"
            )),
            "other" => Some(format!(
                "routed through Holdcall into the home {shown}, not the one holdcall uses in holdmap's environment: the rules there apply"
            )),
            _ => None,
        };
    }
    server.holdcall_home = Some(shown);
    server.holdcall_home_state = Some(state);
}

/// The host (and port) of a URL, as `clients::settings::url_host` reads it: None when it has
/// no `scheme://` or what stands there is not plainly a host (it may hold userinfo).
pub(crate) fn url_host(url: &str) -> Option<String> {
    settings::url_host(url)
}

/// The package a server command runs, without its version: from `inspect::server_name`'s
/// reading of an npm or Python runner or a container image (scope kept: `@scope/pkg`). None
/// for a script or a binary (its runner says what it is), and None when the spec is not a
/// plain registry name (a git or tarball URL, a path, `github:o/r`): such a spec may carry a
/// credential (`git+https://user:TOKEN@host/…`), so no part of it is ever the package.
fn package_of(cmd: &str, args: &[String]) -> Option<String> {
    let (_, from) = inspect::server_name(cmd, args);
    let package = if let Some(spec) = from.strip_prefix("the npm package ") {
        let (scope, rest) = match spec.strip_prefix('@') {
            Some(rest) => {
                let (scope, rest) = rest.split_once('/')?;
                (Some(scope), rest)
            }
            None => (None, spec),
        };
        let name = rest.split_once('@').map_or(rest, |(n, _)| n);
        if !npm_word(name) || scope.is_some_and(|s| !npm_word(s)) {
            return None;
        }
        match scope {
            Some(s) => format!("@{s}/{name}"),
            None => name.to_string(),
        }
    } else if let Some(spec) = from.strip_prefix("the Python package ") {
        let name = spec
            .split(['=', '<', '>', '~', '!', '@', '[', ';', ' '])
            .next()
            .unwrap_or(spec);
        // PEP 508 names: letters, digits, `.`, `_`, `-`, starting and ending alphanumeric.
        let ends_ok = name.starts_with(|c: char| c.is_ascii_alphanumeric())
            && name.ends_with(|c: char| c.is_ascii_alphanumeric());
        if !ends_ok
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            return None;
        }
        name.to_string()
    } else if let Some(image) = from.strip_prefix("the image ") {
        // `[host[:port]/]path[:tag][@algo:hex]`: an `@` may only start a digest.
        let (no_digest, digest) = match image.split_once('@') {
            Some((n, d)) => (n, Some(d)),
            None => (image, None),
        };
        let digest_ok = digest.is_none_or(|d| {
            d.split_once(':').is_some_and(|(algo, hex)| {
                !algo.is_empty()
                    && algo.chars().all(|c| c.is_ascii_alphanumeric())
                    && !hex.is_empty()
                    && hex.chars().all(|c| c.is_ascii_hexdigit())
            })
        });
        let chars_ok = !no_digest.is_empty()
            && no_digest
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | ':'));
        if !digest_ok || !chars_ok || no_digest.contains("//") {
            return None;
        }
        // A tag follows the last `:` after the last `/` (`host:5000/img:tag`).
        let slash = no_digest.rfind('/').map_or(0, |i| i + 1);
        match no_digest.get(slash..).and_then(|last| last.rfind(':')) {
            Some(colon) => no_digest
                .get(..slash + colon)
                .unwrap_or(no_digest)
                .to_string(),
            None => no_digest.to_string(),
        }
    } else {
        return None;
    };
    let package = clean(&package, limits::CLIENT_SETTING_CHARS_MAX);
    (!package.is_empty()).then_some(package)
}

/// One word of an npm name (the scope or the name): URL-safe characters npm accepts, not
/// starting with `.` or `_`.
fn npm_word(w: &str) -> bool {
    !w.is_empty()
        && !w.starts_with(['.', '_'])
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '~'))
}

/// The base name of a program path.
fn base(path: &str) -> &str {
    Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(path)
}

/// Interpreters a launcher script runs under: `node …/npx -y pkg`, `python3 …/bin/npx …`.
const INTERPRETERS: &[&str] = &[
    "node", "nodejs", "bun", "deno", "python", "python3", "sh", "bash", "dash", "zsh",
];

/// A launcher's file name as it may show in a process: itself, or its script (`npx-cli.js`).
fn same_launcher(shown: &str, configured: &str) -> bool {
    let strip = |s: &'static str, x: &str| x.strip_suffix(s).map(str::to_string);
    let stem = |x: &str| {
        let x = [".js", ".cjs", ".mjs", ".py"]
            .iter()
            .find_map(|s| strip(s, x))
            .unwrap_or_else(|| x.to_string());
        x.strip_suffix("-cli").map(str::to_string).unwrap_or(x)
    };
    shown == configured || stem(shown) == configured
}

/// Whether `argv` runs `cmd` with exactly `args`. The rule: the launcher's base name is the
/// process's first word, or its second when the first is an interpreter (a script with a
/// `#!` line shows as `node /usr/bin/npx -y pkg`), and the words after it are exactly `args`.
/// Base names, because a client resolves a bare `npx` on its own PATH.
pub(crate) fn runs(argv: &[String], cmd: &str, args: &[String]) -> bool {
    let want = base(cmd);
    if want.is_empty() {
        return false;
    }
    let at = |i: usize| {
        argv.get(i).is_some_and(|w| same_launcher(base(w), want))
            && argv.get(i + 1..).is_some_and(|rest| rest == args)
    };
    if at(0) {
        return true;
    }
    let first = argv.first().map(|w| base(w)).unwrap_or("");
    let interpreter = INTERPRETERS.contains(&first)
        || first
            .strip_prefix("python")
            .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'));
    interpreter && at(1)
}

/// The agent's member processes in `snap` that run `server` now: the entry's own command line,
/// or (routed) the upstream after `holdcall serve … --`.
fn running_pids(
    report: &AgentReport,
    snap: &Snapshot,
    entry: &ServerEntry,
    routing: &Routing,
) -> Vec<i32> {
    let mut forms: Vec<(String, Vec<String>)> = Vec::new();
    if let Some(cmd) = &entry.command {
        forms.push((cmd.clone(), entry.args.clone()));
    }
    if let Some(up) = routed::upstream(entry, routing) {
        forms.push(up);
    }
    report
        .process_ids
        .iter()
        .copied()
        .filter(|pid| {
            snap.proc(*pid)
                .is_some_and(|p| !p.is_zombie() && forms.iter().any(|(c, a)| runs(&p.argv, c, a)))
        })
        .collect()
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

/// The project an agent works in: its first folder, else its own working directory.
fn project_of(report: &AgentReport, snap: &Snapshot) -> Option<PathBuf> {
    report
        .folders
        .first()
        .map(|f| f.project.clone().unwrap_or_else(|| f.path.clone()))
        .or_else(|| snap.proc(report.pid).and_then(|p| p.cwd.clone()))
}

/// What `report`'s client's files define, for `list_agents` with `include_capabilities`: its
/// servers (each marked running when one of the agent's processes in `snap` runs it), permission
/// rules, safety settings, instruction files and skills. `list` calls it only for an agent of
/// holdmap's own account.
pub(crate) fn of(report: &AgentReport, snap: &Snapshot) -> Capabilities {
    let project = project_of(report, snap);
    match places_for(project.as_ref()) {
        Some(places) => {
            let judge = holdcall_judge();
            let mut caps = of_at(report, snap, &places, &judge);
            if !judge.has_binary() {
                caps.limits.push(NO_HOLDCALL_LIMIT.to_string());
            }
            caps
        }
        None => {
            let mut caps = Capabilities::default();
            caps.limits.push(DEFINITIONS_LIMIT.to_string());
            caps.limits.push(
                "HOME is not set for holdmap or the working directory cannot be read: no configuration file was read"
                    .to_string(),
            );
            caps
        }
    }
}

/// Said in every capabilities object.
pub(crate) const DEFINITIONS_LIMIT: &str = "definitions in files do not prove the server was loaded, connected or used; files are read under holdmap's own HOME, which may differ from the agent's environment";

/// [`of`] with its places and judge given (the unit tests' entry point).
pub(crate) fn of_at(
    report: &AgentReport,
    snap: &Snapshot,
    places: &Places,
    judge: &Judge,
) -> Capabilities {
    let mut caps = Capabilities::default();
    caps.limits.push(DEFINITIONS_LIMIT.to_string());
    caps.limits.push(
        "running_pids matches the command lines of the agent's own processes; a server started by anything else, renamed or wrapped is not seen as running"
            .to_string(),
    );
    let found = instructions::existing(&instructions::places_of(
        places,
        report.client,
        report.product,
    ));
    caps.instructions = found.files;
    if found.omitted > 0 {
        caps.limits.push(format!(
            "{} more entries of rule folders were not looked at: instruction files among them are not listed",
            found.omitted
        ));
    }
    for (folder, why) in &found.unread {
        caps.limits.push(format!(
            "the rules folder {} was not read ({why}): instruction files in it are not listed",
            crate::text::visible(&folder.to_string_lossy())
        ));
    }
    let Some(client) = report.client else {
        caps.limits.push(format!(
            "holdmap has no reader for {}'s MCP configuration, permission or skill files",
            crate::text::visible(report.name)
        ));
        return caps;
    };
    let (sources, servers) = servers_with(places, client, judge, |e, routing| {
        running_pids(report, snap, e, routing)
    });
    caps.sources = sources;
    caps.servers = servers;
    settings_into(&mut caps, places, client);
    skills_into(&mut caps, places, client);
    for s in &caps.sources {
        if let Some(why) = &s.reason {
            caps.limits.push(format!(
                "{} was not read: {why}",
                crate::text::visible(&s.path.to_string_lossy())
            ));
        }
    }
    caps
}

fn settings_into(caps: &mut Capabilities, places: &Places, client: ClientId) {
    let files = settings::files(places, client);
    if files.is_empty() {
        caps.limits.push(format!(
            "holdmap reads no permission or safety settings of {}",
            client.id()
        ));
    }
    for spec in files {
        let (state, reason) = match settings::read(&spec) {
            SettingsState::Missing => ("missing", None),
            SettingsState::Refused(why) => ("refused", Some(why)),
            SettingsState::Read(said) => {
                caps.permissions
                    .extend(said.rules.into_iter().map(|r| PermissionRule {
                        client: spec.client.id(),
                        effect: r.effect,
                        rule: r.rule,
                        source: spec.path.clone(),
                    }));
                caps.settings
                    .extend(said.settings.into_iter().map(|s| SafetySetting {
                        client: spec.client.id(),
                        name: s.name,
                        value: s.value,
                        risky: s.risky,
                        source: spec.path.clone(),
                    }));
                if said.rules_omitted > 0 {
                    caps.limits.push(format!(
                        "{} more permission rules in {} are not listed",
                        said.rules_omitted,
                        crate::text::visible(&spec.path.to_string_lossy())
                    ));
                }
                ("read", None)
            }
        };
        caps.sources.push(SourceFile {
            path: spec.path.clone(),
            scope: spec.scope.to_string(),
            state,
            reason,
        });
    }
}

fn skills_into(caps: &mut Capabilities, places: &Places, client: ClientId) {
    for dir in skills::dirs(places, client) {
        let listing = skills::list(&dir.path);
        let where_ = crate::text::visible(&dir.path.to_string_lossy());
        if let Some(why) = &listing.refused {
            caps.limits
                .push(format!("the skills folder {where_} was not read: {why}"));
        }
        if listing.omitted > 0 {
            caps.limits.push(format!(
                "{} more entries of {where_} were not looked at: skills among them are not listed",
                listing.omitted
            ));
        }
        for s in listing.skills {
            if let Some(why) = &s.refused {
                caps.limits.push(format!(
                    "the header of {} was not read: {why}",
                    crate::text::visible(&s.path.to_string_lossy())
                ));
            }
            caps.skills.push(Skill {
                client: client.id(),
                folder: s.folder,
                path: s.path,
                scope: dir.scope.to_string(),
                name: s.name,
                purpose: s.description,
            });
        }
    }
}

/// `capabilities` as `list_agents` returns it (a JSON object matching [`output_schema`]).
pub(crate) fn to_json(caps: &Capabilities) -> Value {
    render::to_json(caps)
}

/// The JSON schema of one agent's `capabilities` object, for `list_agents`' output schema.
pub(crate) fn output_schema() -> Value {
    render::output_schema()
}

#[cfg(test)]
mod tests;
