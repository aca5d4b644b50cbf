//! What changed between two canonical tool definitions, in words a person reads before
//! `holdcall tools accept`: the description and title texts, parameters added, removed or
//! changed, the required list, annotations, the output schema. Pure.

use serde_json::Value;

use crate::text::visible;

fn quoted(v: Option<&Value>) -> String {
    match v {
        None => "(none)".to_string(),
        Some(Value::String(s)) => format!("\"{}\"", visible(s)),
        Some(other) => visible(&other.to_string()),
    }
}

fn object(v: Option<&Value>) -> serde_json::Map<String, Value> {
    v.and_then(Value::as_object).cloned().unwrap_or_default()
}

/// Each change from `old` to `new` (canonical definitions, as `definition` writes them), one
/// line each; empty when they are the same. Text that cannot be read as JSON is reported as a
/// change of the whole definition.
pub(crate) fn describe(old: &str, new: &str) -> Vec<String> {
    let (Ok(a), Ok(b)) = (
        serde_json::from_str::<Value>(old),
        serde_json::from_str::<Value>(new),
    ) else {
        return vec!["the definition changed (it could not be compared member by member)".into()];
    };
    if a == b {
        return Vec::new();
    }
    let mut out = Vec::new();
    for key in ["description", "title"] {
        if a.get(key) != b.get(key) {
            out.push(format!(
                "{key}: {} -> {}",
                quoted(a.get(key)),
                quoted(b.get(key))
            ));
        }
    }
    let (sa, sb) = (a.get("inputSchema"), b.get("inputSchema"));
    if sa != sb {
        let (pa, pb) = (
            object(sa.and_then(|s| s.get("properties"))),
            object(sb.and_then(|s| s.get("properties"))),
        );
        for (name, schema) in &pb {
            match pa.get(name) {
                None => out.push(format!(
                    "parameter added: {} {}",
                    visible(name),
                    visible(&schema.to_string())
                )),
                Some(old) if old != schema => out.push(format!(
                    "parameter changed: {} {} -> {}",
                    visible(name),
                    visible(&old.to_string()),
                    visible(&schema.to_string())
                )),
                Some(_) => {}
            }
        }
        for name in pa.keys().filter(|n| !pb.contains_key(*n)) {
            out.push(format!("parameter removed: {}", visible(name)));
        }
        let required = |s: Option<&Value>| s.and_then(|s| s.get("required")).cloned();
        if required(sa) != required(sb) {
            out.push(format!(
                "required: {} -> {}",
                quoted(required(sa).as_ref()),
                quoted(required(sb).as_ref())
            ));
        }
        let rest = |s: Option<&Value>| {
            let mut o = object(s);
            o.remove("properties");
            o.remove("required");
            o
        };
        if rest(sa) != rest(sb) {
            out.push(format!(
                "inputSchema (besides its properties): {} -> {}",
                quoted(sa),
                quoted(sb)
            ));
        }
    }
    let (aa, ab) = (object(a.get("annotations")), object(b.get("annotations")));
    for key in ab.keys().chain(aa.keys().filter(|k| !ab.contains_key(*k))) {
        if aa.get(key) != ab.get(key) {
            out.push(format!(
                "annotations.{}: {} -> {}",
                visible(key),
                quoted(aa.get(key)),
                quoted(ab.get(key))
            ));
        }
    }
    if a.get("outputSchema") != b.get("outputSchema") {
        out.push(format!(
            "outputSchema: {} -> {}",
            quoted(a.get("outputSchema")),
            quoted(b.get("outputSchema"))
        ));
    }
    if out.is_empty() {
        out.push("the definition changed".into());
    }
    out
}
