//! The check every planned rewrite passes before it is offered: the new text re-read (by the
//! same readers, and by serde for the values) says exactly what the old one said, but for the
//! command and args of the entries it routes, and each of those now reads as routed.
//!
//! Owns: that comparison. Must never: let a plan through whose re-reading differs in any other
//! value, or quote the file in its refusal.

use super::RoutingError;
use super::{Judge, RoutedEntry, Routing, Target, entries_judged, serve_prefix};
use crate::clients::{FileSpec, Format, Loaded, json};

/// The rewritten entries: the key path of their group, their name and their connector.
type Rewritten = [(Vec<String>, String, String)];

/// The args a rewritten entry (group, name, connector) must read back with.
type ExpectedArgs<'a> = dyn Fn(&[String], &str, &str) -> Vec<String> + 'a;

/// Re-reads the rewritten text and checks that it says exactly what the original said, except
/// that each rewritten entry's command is holdcall and its args are the serve prefix, the
/// original command and the original args (or, for an entry routed through another holdcall,
/// its args unchanged).
pub(super) fn check_edit(
    spec: &FileSpec,
    loaded: &Loaded<RoutedEntry>,
    after: &str,
    holdcall: &str,
    target: Target,
    routed: &Rewritten,
) -> Result<(), RoutingError> {
    let fail = |why: String| RoutingError::EditCheck {
        path: spec.path.clone(),
        why,
    };
    let expected = |group: &[String], name: &str, connector: &str| {
        expected_args(spec, loaded, target, group, name, connector)
    };
    match spec.format {
        Format::Json(flavour) => {
            same_json_but_routed(flavour, &loaded.text, after, holdcall, routed, &expected)
                .map_err(fail)?
        }
        Format::Toml => {
            same_toml_but_routed(&loaded.text, after, holdcall, routed, &expected).map_err(fail)?
        }
    }
    let entries =
        entries_judged(spec, after, &Judge::Spelled(holdcall.to_string())).map_err(fail)?;
    for (group, name, connector) in routed {
        let ok = entries.iter().any(|e| {
            &e.group == group
                && &e.name == name
                && e.state == Routing::Routed
                && &e.connector == connector
        });
        if !ok {
            return Err(fail(format!("{name} does not read as routed")));
        }
    }
    Ok(())
}

/// The args a rewritten entry must read back with: `--home` in front of its own for one that is
/// re-homed, its own for one routed through another holdcall, else the serve prefix, the
/// original command and the original args.
fn expected_args(
    spec: &FileSpec,
    loaded: &Loaded<RoutedEntry>,
    target: Target,
    group: &[String],
    name: &str,
    connector: &str,
) -> Vec<String> {
    let e = loaded
        .entries
        .iter()
        .find(|e| e.group == group && e.name == name);
    if let Some(e) = e.filter(|e| e.needs_home(&target)) {
        let mut v = vec!["--home".to_string(), target.home.to_string()];
        v.extend(e.args.iter().cloned());
        return v;
    }
    if let Some(e) = e.filter(|e| matches!(e.state, Routing::OtherHoldcall(_))) {
        return e.args.clone();
    }
    let mut v = serve_prefix(spec.client, connector, target.home);
    if let Some(e) = e {
        v.extend(e.command.clone());
        v.extend(e.args.iter().cloned());
    }
    v
}

/// The JSON half of [`check_edit`]: the old value with each rewritten entry's command and args
/// replaced must equal the new value. Err: why not, in words.
fn same_json_but_routed(
    flavour: json::Flavour,
    before: &str,
    after: &str,
    holdcall: &str,
    routed: &Rewritten,
    expected: &ExpectedArgs<'_>,
) -> Result<(), String> {
    let old = json::parse(before, flavour)
        .map_err(|e| e.to_string())?
        .to_value(before);
    let new = json::parse(after, flavour)
        .map_err(|e| format!("it no longer parses: {e}"))?
        .to_value(after);
    let mut want = old;
    for (group, name, connector) in routed {
        let mut cur = &mut want;
        for k in group.iter().chain(std::iter::once(name)) {
            cur = cur.get_mut(k).ok_or_else(|| format!("{k} vanished"))?;
        }
        let obj = cur
            .as_object_mut()
            .ok_or_else(|| "entry is not an object".to_string())?;
        obj.insert("command".into(), serde_json::Value::from(holdcall));
        obj.insert(
            "args".into(),
            serde_json::Value::from(expected(group, name, connector)),
        );
    }
    if want != new {
        return Err("other values changed too".into());
    }
    Ok(())
}

/// The TOML half of [`check_edit`], the same comparison on `toml::Table`s.
fn same_toml_but_routed(
    before: &str,
    after: &str,
    holdcall: &str,
    routed: &Rewritten,
    expected: &ExpectedArgs<'_>,
) -> Result<(), String> {
    let old: toml::Table = toml::from_str(before).map_err(|e| e.message().to_string())?;
    let new: toml::Table =
        toml::from_str(after).map_err(|e| format!("it no longer parses: {}", e.message()))?;
    let mut want = old;
    for (group, name, connector) in routed {
        let entry = group
            .iter()
            .chain(std::iter::once(name))
            .try_fold(&mut want, |t, k| {
                t.get_mut(k).and_then(toml::Value::as_table_mut)
            })
            .ok_or_else(|| format!("{name} vanished"))?;
        entry.insert("command".into(), toml::Value::from(holdcall));
        entry.insert(
            "args".into(),
            toml::Value::Array(
                expected(group, name, connector)
                    .into_iter()
                    .map(toml::Value::from)
                    .collect(),
            ),
        );
    }
    if want != new {
        return Err("other values changed too".into());
    }
    Ok(())
}
