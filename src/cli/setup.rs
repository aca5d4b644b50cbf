//! The output of `holdcall init`, `doctor` and `inventory` (the logic is in `clientconfig` and
//! `doctor`). Never prints an environment value: entries carry env names only, and arguments
//! and URLs pass through `clients::inspect` redaction first.

use std::io::Write;

use super::CliError;
use crate::clients::inspect::{self, show_command};
use crate::clients::{self, FileState, Places};
use crate::config::Home;
use crate::routing::{self, RoutedEntry, Routing, RoutingError, backup::Backups};
use crate::text::visible;

fn env_line(e: &RoutedEntry) -> Option<String> {
    (!e.env_names.is_empty()).then(|| {
        format!(
            "env: {} (values not shown)",
            e.env_names
                .iter()
                .map(|n| visible(n))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// A client file as `init` heads its lines: the path (made visible), the client and the scope.
fn file_heading(spec: &clients::FileSpec) -> String {
    format!(
        "{} ({}, {})",
        visible(&spec.path.display().to_string()),
        spec.client.id(),
        spec.scope
    )
}

/// `holdcall init [--write] | --undo BACKUP [--force]`.
pub(super) fn init(write: bool, undo: Option<String>, force: bool) -> Result<i32, CliError> {
    let home = Home::from_env()?;
    let backups = Backups::of(&home);
    let mut out = std::io::stdout().lock();
    if let Some(which) = undo {
        return undo_one(&mut out, &backups, &which, force);
    }
    let places = Places::from_env()?;
    let holdcall = routing::holdcall_command()?;
    let home_dir = home
        .dir()
        .to_str()
        .ok_or_else(|| RoutingError::HomeNotUtf8(home.dir().to_path_buf()))?
        .to_string();
    let target = routing::Target {
        home: &home_dir,
        user_home: &places.home,
    };
    let routing = Destination {
        holdcall: &holdcall,
        home_dir: &home_dir,
        home: &home,
        places: &places,
    };
    let mut plans = Vec::new();
    let mut refused = Vec::new();
    let mut found = 0usize;
    for spec in places.files() {
        let loaded = match routing::load(&spec) {
            FileState::Missing => continue,
            FileState::Refused(reason) => {
                found += 1;
                writeln!(out, "{}", file_heading(&spec))?;
                writeln!(out, "  REFUSED: {reason}")?;
                refused.push(RoutingError::Refused {
                    path: spec.path.clone(),
                    reason,
                });
                continue;
            }
            FileState::Read(l) => l,
        };
        found += 1;
        let plan = match routing::plan(&spec, &loaded, &holdcall, target) {
            Ok(p) => p,
            Err(e) => {
                writeln!(out, "{}", file_heading(&spec))?;
                writeln!(out, "  REFUSED: {e}")?;
                refused.push(e);
                continue;
            }
        };
        writeln!(out, "{}", file_heading(&spec))?;
        for e in &loaded.entries {
            entry_lines(&mut out, &spec, e, &plan, &routing)?;
        }
        if let Some(p) = plan {
            plans.push((spec, p));
        }
    }
    finish(&mut out, found, refused, &plans, write, &backups)
}

/// `holdcall init --undo BACKUP [--force]`: the file put back, and where what it held is saved.
fn undo_one(
    out: &mut impl Write,
    backups: &Backups,
    which: &str,
    force: bool,
) -> Result<i32, CliError> {
    let done = backups.undo(which, force)?;
    writeln!(
        out,
        "restored {} from {}",
        done.path.display(),
        done.backup.display()
    )?;
    writeln!(
        out,
        "  what it held before this undo is saved in {}",
        done.saved_as.display()
    )?;
    Ok(0)
}

/// What every entry's lines need: this holdcall's command, the home it routes to (as text and
/// as the home), and the user's places.
struct Destination<'a> {
    holdcall: &'a String,
    home_dir: &'a String,
    home: &'a Home,
    places: &'a Places,
}

/// One entry's lines in `init`'s report: routed, re-routed, re-homed (each with the command
/// before and after), or why it is left alone. It stays one match (about 100 lines): each arm
/// is one state's lines, read top to bottom as `init` prints them.
fn entry_lines(
    out: &mut impl Write,
    spec: &clients::FileSpec,
    e: &RoutedEntry,
    plan: &Option<routing::Plan>,
    routing: &Destination,
) -> std::io::Result<()> {
    let (holdcall, home_dir, home, places) = (
        routing.holdcall,
        routing.home_dir,
        routing.home,
        routing.places,
    );
    let name = visible(&e.name);
    let group = visible(&e.group_label());
    match &e.state {
        Routing::NotRouted
            if plan
                .as_ref()
                .is_some_and(|p| p.routed.contains(&(e.group.clone(), e.name.clone()))) =>
        {
            let connector = plan
                .as_ref()
                .and_then(|p| {
                    p.connectors
                        .iter()
                        .find(|(g, n, _)| g == &e.group && n == &e.name)
                })
                .map(|(_, _, c)| c.clone())
                .unwrap_or_else(|| e.connector.clone());
            if connector == e.name {
                writeln!(out, "  route {group} {name}")?;
            } else {
                writeln!(
                    out,
                    "  route {group} {name} as connector {connector} (its name is not a valid connector name)"
                )?;
            }
            let cmd = e.command.as_deref().unwrap_or("");
            writeln!(out, "    - {}", show_command(cmd, &e.args))?;
            let mut args = routing::serve_prefix(spec.client, &connector, home_dir);
            args.push(cmd.to_string());
            args.extend(e.args.iter().cloned());
            writeln!(out, "    + {}", show_command(holdcall, &args))?;
            if let Some(env) = env_line(e) {
                writeln!(out, "      {env}")?;
            }
        }
        Routing::OtherHoldcall(other)
            if plan
                .as_ref()
                .is_some_and(|p| p.routed.contains(&(e.group.clone(), e.name.clone()))) =>
        {
            writeln!(
                out,
                "  re-route {group} {name}: {}; this holdcall takes its place, its arguments stay",
                other.reason()
            )?;
            let cmd = e.command.as_deref().unwrap_or("");
            let mut args = Vec::new();
            if e.home_arg.is_none() && e.lands_elsewhere(home.dir(), &places.home).is_some() {
                args.extend(["--home".to_string(), home_dir.clone()]);
            }
            args.extend(e.args.iter().cloned());
            writeln!(out, "    - {}", show_command(cmd, &e.args))?;
            writeln!(out, "    + {}", show_command(holdcall, &args))?;
        }
        Routing::Routed
            if plan
                .as_ref()
                .is_some_and(|p| p.routed.contains(&(e.group.clone(), e.name.clone()))) =>
        {
            let theirs = e
                .relay_home(&places.home)
                .map(|p| visible(&p.display().to_string()))
                .unwrap_or_else(|| "no home at all".into());
            writeln!(
                out,
                "  re-home {group} {name}: a client that starts it with a minimal environment would reach the home {theirs}; it gets --home {}",
                visible(home_dir)
            )?;
            let cmd = e.command.as_deref().unwrap_or("");
            let mut args = vec!["--home".to_string(), home_dir.clone()];
            args.extend(e.args.iter().cloned());
            writeln!(out, "    - {}", show_command(cmd, &e.args))?;
            writeln!(out, "    + {}", show_command(holdcall, &args))?;
        }
        Routing::NotRouted | Routing::OtherHoldcall(_) => writeln!(
            out,
            "  left alone {group} {name}: holdcall cannot rewrite this layout; route it by hand"
        )?,
        Routing::Routed => writeln!(out, "  already routed {group} {name}")?,
        Routing::Remote => writeln!(
            out,
            "  remote, left alone {group} {name} ({} {})",
            e.transport,
            visible(&inspect::redact_url(e.url.as_deref().unwrap_or("")))
        )?,
        Routing::Unrecognized(why) => writeln!(out, "  left alone {group} {name}: {why}")?,
    }
    Ok(())
}

/// What `init` says and does once every file is read: nothing found, a refusal, nothing to
/// change, the dry run's last line, or each file written with its backup.
fn finish(
    out: &mut impl Write,
    found: usize,
    refused: Vec<RoutingError>,
    plans: &[(clients::FileSpec, routing::Plan)],
    write: bool,
    backups: &Backups,
) -> Result<i32, CliError> {
    if found == 0 {
        writeln!(
            out,
            "No MCP client config files found (see docs/clients.md for where holdcall looks)."
        )?;
        return Ok(0);
    }
    if let Some(first) = refused.into_iter().next() {
        writeln!(out, "Nothing was written: a file above could not be read.")?;
        out.flush()?;
        return Err(first.into());
    }
    if plans.is_empty() {
        writeln!(
            out,
            "Nothing to change: every stdio server holdcall can route already is."
        )?;
        return Ok(0);
    }
    if !write {
        writeln!(
            out,
            "Dry run: nothing was written. Run `holdcall init --write` to apply."
        )?;
        return Ok(0);
    }
    for (spec, plan) in plans {
        let backup = backups.write(spec.client, &spec.path, plan)?;
        writeln!(
            out,
            "wrote {} (backup: {})",
            visible(&spec.path.display().to_string()),
            backup.display()
        )?;
    }
    writeln!(
        out,
        "Restart the clients to pick up the change. To put a file back: holdcall init --undo BACKUP"
    )?;
    Ok(0)
}

/// `holdcall doctor [--json]`.
pub(super) fn doctor(json: bool) -> Result<i32, CliError> {
    let ctx = crate::doctor::Ctx::from_env();
    let checks = crate::doctor::run(&ctx);
    let code = crate::doctor::exit_code(&checks);
    let mut out = std::io::stdout().lock();
    if json {
        let v = serde_json::json!({ "ok": code == 0, "checks": checks });
        serde_json::to_writer_pretty(&mut out, &v).map_err(std::io::Error::other)?;
        writeln!(out)?;
        return Ok(code);
    }
    for c in &checks {
        match &c.remedy {
            Some(r) => writeln!(
                out,
                "[{}] {}: {} -- {}",
                c.status.tag(),
                c.check,
                c.message,
                r
            )?,
            None => writeln!(out, "[{}] {}: {}", c.status.tag(), c.check, c.message)?,
        }
    }
    Ok(code)
}

#[derive(serde::Serialize)]
struct Row {
    client: &'static str,
    scope: String,
    file: String,
    name: String,
    connector: String,
    /// For a routed entry without `--connector`: what its relay derives the name from.
    #[serde(skip_serializing_if = "Option::is_none")]
    connector_derived_from: Option<String>,
    transport: String,
    state: &'static str,
    routed: bool,
    /// Why a `holdcall serve` entry is not routed (another holdcall runs it); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    not_routed_because: Option<String>,
    pinned: &'static str,
    pin_detail: String,
    command: Option<String>,
    args: Vec<String>,
    url: Option<String>,
    env: Vec<String>,
}

impl Row {
    /// One configured server as `inventory` lists it (arguments and URL redacted).
    fn of(spec: &clients::FileSpec, e: &RoutedEntry) -> Row {
        let pin = match (&e.state, e.upstream()) {
            (Routing::Remote, _) => None,
            (_, Some((cmd, args))) => Some(inspect::pin(&cmd, &args)),
            _ => Some(inspect::Pin::Unknown("no command".into())),
        };
        Row {
            client: spec.client.id(),
            scope: e.scope.clone(),
            file: spec.path.display().to_string(),
            name: e.name.clone(),
            connector: e.connector.clone(),
            connector_derived_from: e.connector_from.clone(),
            transport: e.transport.clone(),
            state: e.state.label(),
            routed: e.state == Routing::Routed,
            not_routed_because: match &e.state {
                Routing::OtherHoldcall(o) => Some(o.reason()),
                _ => None,
            },
            pinned: pin.as_ref().map(|p| p.label()).unwrap_or("n/a"),
            pin_detail: pin
                .as_ref()
                .map(|p| p.detail().to_string())
                .unwrap_or_default(),
            command: e.command.clone(),
            args: inspect::redact_args(&e.args),
            url: e.url.as_deref().map(inspect::redact_url),
            env: e.env_names.clone(),
        }
    }
}

/// `holdcall inventory [--json]`.
pub(super) fn inventory(json: bool) -> Result<i32, CliError> {
    let places = Places::from_env()?;
    let mut rows = Vec::new();
    let mut unreadable = Vec::new();
    for spec in places.files() {
        match routing::load(&spec) {
            FileState::Missing => {}
            FileState::Refused(reason) => unreadable.push(serde_json::json!({
                "client": spec.client.id(),
                "file": spec.path.display().to_string(),
                "reason": reason,
            })),
            FileState::Read(l) => {
                for e in &l.entries {
                    rows.push(Row::of(&spec, e));
                }
            }
        }
    }
    let mut out = std::io::stdout().lock();
    if json {
        let v = serde_json::json!({ "servers": rows, "unreadable": unreadable });
        serde_json::to_writer_pretty(&mut out, &v).map_err(std::io::Error::other)?;
        writeln!(out)?;
        return Ok(0);
    }
    if rows.is_empty() && unreadable.is_empty() {
        writeln!(
            out,
            "No MCP servers configured in any client holdcall knows."
        )?;
        return Ok(0);
    }
    writeln!(
        out,
        "{:<14}  {:<10}  {:<20}  {:<9}  {:<12}  {:<8}  COMMAND / URL  [ENV NAMES]",
        "CLIENT", "SCOPE", "NAME", "TRANSPORT", "ROUTED", "PINNED"
    )?;
    for r in &rows {
        let what = match (&r.url, &r.command) {
            (Some(u), _) => visible(u),
            (None, Some(c)) => show_command(c, &r.args),
            (None, None) => String::new(),
        };
        let env = if r.env.is_empty() {
            String::new()
        } else {
            format!(
                "  [{}]",
                r.env
                    .iter()
                    .map(|n| visible(n))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let scope = if r.scope.starts_with("local ") {
            "local"
        } else {
            r.scope.as_str()
        };
        writeln!(
            out,
            "{:<14}  {:<10}  {:<20}  {:<9}  {:<12}  {:<8}  {}{}",
            r.client,
            scope,
            visible(&r.name),
            r.transport,
            r.state,
            r.pinned,
            what,
            env
        )?;
        if let Some(why) = &r.not_routed_because {
            writeln!(out, "{:<14}  not routed: {why}", "")?;
        }
        if let Some(from) = &r.connector_derived_from {
            writeln!(
                out,
                "{:<14}  connector {} (no --connector: derived from {from})",
                "",
                visible(&r.connector)
            )?;
        }
    }
    for u in &unreadable {
        writeln!(
            out,
            "unreadable: {} ({}): {}",
            visible(u["file"].as_str().unwrap_or("")),
            u["client"].as_str().unwrap_or(""),
            visible(u["reason"].as_str().unwrap_or(""))
        )?;
    }
    Ok(0)
}
