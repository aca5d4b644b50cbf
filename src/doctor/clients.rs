//! The MCP clients' check: each client file's stdio servers routed through this holdcall, and to
//! this home. Client files are only read.

use std::path::Path;

use super::{Check, Ctx, Status, check};
use crate::clients::FileState;
use crate::routing::{self, RoutedEntry, Routing, backup::Backups};
use crate::text::visible;

/// Each client file: every stdio server routed, or which are not (and which holdcall routed
/// once and the client has since rewritten).
pub(super) fn clients(ctx: &Ctx) -> Vec<Check> {
    let places = match &ctx.places {
        Ok(p) => p,
        Err(e) => return vec![check("clients", Status::Warn, e.clone(), Some("set HOME"))],
    };
    let backups = ctx.home.as_ref().ok().map(Backups::of);
    let mut out = Vec::new();
    for spec in places.files() {
        let name = format!("{} {}", spec.client.id(), spec.scope);
        let path = visible(&spec.path.display().to_string());
        let loaded = match routing::load(&spec) {
            FileState::Missing => continue,
            FileState::Refused(reason) => {
                out.push(check(
                    &name,
                    Status::Warn,
                    format!("{path}: {}", visible(&reason)),
                    Some("fix the file so its client can read it, then run `holdcall init`"),
                ));
                continue;
            }
            FileState::Read(l) => l,
        };
        out.extend(client_lines(
            &name,
            &spec.path,
            &loaded.entries,
            backups.as_ref(),
        ));
        if let Ok(home) = &ctx.home {
            out.extend(elsewhere_lines(
                &name,
                &spec.path,
                &loaded.entries,
                home.dir(),
                &places.home,
            ));
        }
    }
    if out.is_empty() {
        out.push(check(
            "clients",
            Status::Ok,
            "no MCP client config files found in the usual places".into(),
            None,
        ));
    }
    out
}

/// Routed entries whose relay, started with the MCP SDKs' minimal environment (HOME, LOGNAME,
/// PATH, SHELL, TERM, USER and the entry's own `env`), would use another home than this one:
/// their calls would be decided by another home's rules, or by none.
fn elsewhere_lines(
    name: &str,
    path: &Path,
    entries: &[RoutedEntry],
    home: &Path,
    user_home: &Path,
) -> Vec<Check> {
    let shown = visible(&path.display().to_string());
    let here = visible(&home.display().to_string());
    let routed = entries
        .iter()
        .filter(|e| matches!(e.state, Routing::Routed));
    let (mut implicit, mut explicit) = (Vec::new(), Vec::new());
    for e in routed {
        if let Some(theirs) = e.lands_elsewhere(home, user_home) {
            let line = format!(
                "{} would use {}",
                visible(&e.name),
                visible(&theirs.display().to_string())
            );
            if e.home_arg.is_some() {
                explicit.push(line);
            } else {
                implicit.push(line);
            }
        }
    }
    let mut out = Vec::new();
    if !implicit.is_empty() {
        out.push(check(
            name,
            Status::Fail,
            format!(
                "{shown}: {} routed server(s) have no --home and, started by a client with a minimal environment, would reach another home than {here}, whose rules do not apply there ({})",
                implicit.len(),
                implicit.join("; ")
            ),
            Some("run `holdcall init --write` to write --home into them"),
        ));
    }
    if !explicit.is_empty() {
        out.push(check(
            name,
            Status::Warn,
            format!(
                "{shown}: {} routed server(s) name another home than {here} with --home ({})",
                explicit.len(),
                explicit.join("; ")
            ),
            Some("if that is not meant, edit its --home to this home's path"),
        ));
    }
    out
}

fn names(v: &[&RoutedEntry]) -> String {
    v.iter()
        .map(|e| visible(&e.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One client file's routing lines: servers holdcall routed that the client has since rewritten,
/// servers never routed, servers naming a holdcall that is gone, servers routed through another
/// holdcall, else one OK line. It stays one function (about 100 lines) because the four groups
/// are sorted out of the same entries and each is one `check` call; split, the groups would be
/// passed around only to be counted.
fn client_lines(
    name: &str,
    path: &Path,
    entries: &[RoutedEntry],
    backups: Option<&Backups>,
) -> Vec<Check> {
    let shown = visible(&path.display().to_string());
    let by =
        |s: &dyn Fn(&Routing) -> bool| entries.iter().filter(|e| s(&e.state)).collect::<Vec<_>>();
    let routed = by(&|s| *s == Routing::Routed);
    let unrouted = by(&|s| *s == Routing::NotRouted);
    let remote = by(&|s| *s == Routing::Remote);
    let other = by(&|s| matches!(s, Routing::OtherHoldcall(_)));
    let reason = |e: &RoutedEntry| match &e.state {
        Routing::OtherHoldcall(o) => o.reason(),
        _ => String::new(),
    };
    let ours = backups.map(|b| b.routed_by_us(path)).unwrap_or_default();
    let dropped: Vec<&RoutedEntry> = unrouted
        .iter()
        .copied()
        .filter(|e| ours.contains(&(e.group.clone(), e.name.clone())))
        .collect();
    // A `holdcall serve` entry whose holdcall is gone (moved, uninstalled) is told apart from
    // one that runs another holdcall: the remedy is the same, the cause is not.
    let (missing_binary, foreign): (Vec<&RoutedEntry>, Vec<&RoutedEntry>) =
        other.iter().copied().partition(|e| match &e.state {
            Routing::OtherHoldcall(o) => o.missing(),
            _ => false,
        });
    let mut out = Vec::new();
    if !dropped.is_empty() {
        out.push(check(
            name,
            Status::Warn,
            format!(
                "{shown}: {} server(s) holdcall routed are no longer routed ({}); the client rewrote the file",
                dropped.len(),
                names(&dropped)
            ),
            Some("run `holdcall init --write` again"),
        ));
    }
    let fresh: Vec<&RoutedEntry> = unrouted
        .iter()
        .copied()
        .filter(|e| !dropped.iter().any(|d| std::ptr::eq(*d, *e)))
        .collect();
    if !fresh.is_empty() {
        out.push(check(
            name,
            Status::Warn,
            format!(
                "{shown}: {} of {} stdio server(s) not routed ({})",
                fresh.len(),
                routed.len() + unrouted.len() + other.len(),
                names(&fresh)
            ),
            Some("run `holdcall init` to see the change, then `holdcall init --write`"),
        ));
    }
    if !missing_binary.is_empty() {
        out.push(check(
            name,
            Status::Warn,
            format!(
                "{shown}: {} server(s) name a holdcall that does not exist ({}), so they do not start",
                missing_binary.len(),
                names(&missing_binary)
            ),
            Some("run `holdcall init --write` to point them at this holdcall"),
        ));
    }
    if !foreign.is_empty() {
        let each: Vec<String> = foreign
            .iter()
            .map(|e| format!("{}: {}", visible(&e.name), reason(e)))
            .collect();
        out.push(check(
            name,
            Status::Warn,
            format!(
                "{shown}: {} server(s) NOT routed through this holdcall ({})",
                foreign.len(),
                each.join("; ")
            ),
            Some("run `holdcall init --write` to route them through this holdcall"),
        ));
    }
    if out.is_empty() {
        out.push(check(
            name,
            Status::Ok,
            format!(
                "{shown}: {} stdio server(s) routed, {} remote left alone",
                routed.len(),
                remote.len()
            ),
            None,
        ));
    }
    out
}
