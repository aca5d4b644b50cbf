//! The subset of JSON Schema holdmap publishes and enforces, read from the catalog's own schemas
//! (one source for what `tools/list` shows and what a call is held to): `type` (a name or a list;
//! "integer" takes 3000.0 but never 3000.5), `enum`, `const`, `minimum`/`maximum`,
//! `minLength`/`maxLength` (characters), `required`, `properties`, `additionalProperties`,
//! `items`, `minItems`/`maxItems`, `anyOf` and `if`/`then`/`else`; `default`, `description` and
//! `title` are annotations and constrain nothing.
//!
//! Must never: ignore a keyword it does not implement (a schema that uses one refuses every value,
//! as a bug, and a unit test walks the catalog so none ships); round a number or read a string as
//! another type (`"true"` is not a boolean); echo a caller's text unescaped into a message.

use std::cmp::Ordering;

use serde_json::{Map, Number, Value};

/// The names `type` may use.
const TYPES: &[&str] = &[
    "object", "array", "string", "integer", "number", "boolean", "null",
];

/// The longest piece of a caller's text (a key, a string value) repeated in a message, in
/// characters: enough to recognise it, never enough to carry a payload.
const ECHO_CHARS_MAX: usize = 40;

/// The most unknown keys one message names; the rest are counted.
const ECHO_KEYS_MAX: usize = 5;

/// Why a value was refused.
enum Fail {
    /// The value does not match: the words the caller reads.
    Value(String),
    /// The schema itself is outside the subset (a holdmap bug): refused, never ignored.
    Bug(String),
}

/// Checks `value` against `schema`; the error says which value and why, in words the model can
/// act on ("`arguments.force` must be boolean, not the string \"false\""). `path` names the
/// value ("arguments"). A schema outside the subset refuses every value (see `check_schema`, which the catalog's tests run).
pub(crate) fn validate(schema: &Value, value: &Value, path: &str) -> Result<(), String> {
    match check(schema, value, path) {
        Ok(()) => Ok(()),
        Err(Fail::Value(message)) => Err(message),
        Err(Fail::Bug(message)) => Err(format!(
            "holdmap cannot check `{path}`: {message}. This is a bug in holdmap, not in the \
             request; nothing was run."
        )),
    }
}

/// Checks that `schema` and every schema inside it use only the keywords [`validate`]
/// implements, each with a well-formed value: what is published is exactly what is enforced.
#[cfg(test)]
pub(crate) fn check_schema(schema: &Value) -> Result<(), String> {
    walk(schema, "#")
}

/// A schema object's keys in `schema`, recursively: the catalog's test reads them.
#[cfg(test)]
fn walk(schema: &Value, at: &str) -> Result<(), String> {
    let map = match schema {
        Value::Bool(_) => return Ok(()),
        Value::Object(map) => map,
        _ => return Err(format!("{at}: a schema must be an object or a boolean")),
    };
    shape(map).map_err(|message| format!("{at}: {message}"))?;
    for (keyword, inner) in map {
        match keyword.as_str() {
            "properties" => {
                for (name, sub) in inner.as_object().into_iter().flatten() {
                    walk(sub, &format!("{at}/properties/{name}"))?;
                }
            }
            "anyOf" => {
                for (i, sub) in inner.as_array().into_iter().flatten().enumerate() {
                    walk(sub, &format!("{at}/anyOf/{i}"))?;
                }
            }
            "items" | "additionalProperties" | "if" | "then" | "else" => {
                walk(inner, &format!("{at}/{keyword}"))?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Checks one schema object's own keywords (not the schemas inside it): each is implemented and
/// its value has the form this validator reads.
fn shape(map: &Map<String, Value>) -> Result<(), String> {
    for (keyword, inner) in map {
        let ok = match keyword.as_str() {
            "type" => match inner {
                Value::String(name) => TYPES.contains(&name.as_str()),
                Value::Array(names) => {
                    !names.is_empty()
                        && names
                            .iter()
                            .all(|n| n.as_str().is_some_and(|n| TYPES.contains(&n)))
                }
                _ => false,
            },
            "enum" | "anyOf" => inner.as_array().is_some_and(|a| !a.is_empty()),
            "minimum" | "maximum" => inner.is_number(),
            "minLength" | "maxLength" | "minItems" | "maxItems" => inner.is_u64(),
            "required" => inner
                .as_array()
                .is_some_and(|a| a.iter().all(Value::is_string)),
            "properties" => inner.is_object(),
            "additionalProperties" | "items" | "if" | "then" | "else" => {
                inner.is_object() || inner.is_boolean()
            }
            "description" | "title" => inner.is_string(),
            "const" | "default" => true,
            other => return Err(format!("`{other}` is not a keyword holdmap enforces")),
        };
        if !ok {
            return Err(format!(
                "the value of `{keyword}` has a form holdmap does not read"
            ));
        }
    }
    Ok(())
}

fn check(schema: &Value, value: &Value, path: &str) -> Result<(), Fail> {
    let map = match schema {
        Value::Bool(true) => return Ok(()),
        Value::Bool(false) => return Err(Fail::Value(format!("`{path}` is not allowed here"))),
        Value::Object(map) => map,
        _ => {
            return Err(Fail::Bug(
                "a schema must be an object or a boolean".to_owned(),
            ));
        }
    };
    shape(map).map_err(Fail::Bug)?;
    if let Some(types) = map.get("type") {
        check_type(types, value, path)?;
    }
    if let Some(options) = map.get("enum").and_then(Value::as_array)
        && !options.iter().any(|option| same(option, value))
    {
        let listed: Vec<String> = options.iter().map(Value::to_string).collect();
        return Err(Fail::Value(format!(
            "`{path}` must be one of: {}",
            listed.join(", ")
        )));
    }
    if let Some(wanted) = map.get("const")
        && !same(wanted, value)
    {
        return Err(Fail::Value(format!("`{path}` must be {wanted}")));
    }
    match value {
        Value::Number(n) => check_number(map, n, path)?,
        Value::String(s) => check_string(map, s, path)?,
        Value::Object(object) => check_object(map, object, path)?,
        Value::Array(items) => check_array(map, items, path)?,
        Value::Null | Value::Bool(_) => {}
    }
    if let Some(branches) = map.get("anyOf").and_then(Value::as_array) {
        check_any_of(branches, value, path)?;
    }
    if let Some(condition) = map.get("if") {
        check_if(map, condition, value, path)?;
    }
    Ok(())
}

fn check_type(types: &Value, value: &Value, path: &str) -> Result<(), Fail> {
    let names: Vec<&str> = match types {
        Value::String(name) => vec![name.as_str()],
        Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if names.iter().any(|name| is_type(name, value)) {
        return Ok(());
    }
    let wants_integer = names.contains(&"integer") && !names.contains(&"number");
    Err(Fail::Value(format!(
        "`{path}` must be {}, not {}",
        names.join(" or "),
        describe(value, wants_integer)
    )))
}

fn is_type(name: &str, value: &Value) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        // A whole number written with a fraction part (3000.0) is an integer; 3000.5 is not, and
        // is refused rather than rounded to a port nobody asked for.
        "integer" => match value {
            Value::Number(n) => {
                n.is_i64()
                    || n.is_u64()
                    || n.as_f64()
                        .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
            }
            _ => false,
        },
        _ => false,
    }
}

/// What the caller sent, in a few words, for "must be X, not Y".
fn describe(value: &Value, wants_integer: bool) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) if wants_integer => format!("the fraction {n} (it is never rounded)"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {}", echo(s)),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

/// A caller's text, quoted, cut to [`ECHO_CHARS_MAX`] characters, every hidden character
/// escaped: recognisable, never a carrier.
fn echo(text: &str) -> String {
    format!("\"{}\"", shown(text))
}

/// A caller's text cut to [`ECHO_CHARS_MAX`] characters, every hidden character escaped.
fn shown(text: &str) -> String {
    let mut cut: String = text.chars().take(ECHO_CHARS_MAX).collect();
    if text.chars().nth(ECHO_CHARS_MAX).is_some() {
        cut.push('…');
    }
    crate::text::visible(&cut)
}

/// JSON equality with numbers compared by value (1 and 1.0 are the same number).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare(x, y) == Some(Ordering::Equal),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// Numbers compared exactly when both are integers, as floats otherwise.
fn compare(x: &Number, y: &Number) -> Option<Ordering> {
    if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
        return Some(x.cmp(&y));
    }
    if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
        return Some(x.cmp(&y));
    }
    x.as_f64()?.partial_cmp(&y.as_f64()?)
}

fn check_number(map: &Map<String, Value>, n: &Number, path: &str) -> Result<(), Fail> {
    if let Some(Value::Number(min)) = map.get("minimum")
        && !matches!(compare(n, min), Some(Ordering::Equal | Ordering::Greater))
    {
        return Err(Fail::Value(format!("`{path}` must be at least {min}")));
    }
    if let Some(Value::Number(max)) = map.get("maximum")
        && !matches!(compare(n, max), Some(Ordering::Equal | Ordering::Less))
    {
        return Err(Fail::Value(format!("`{path}` must be at most {max}")));
    }
    Ok(())
}

fn characters(n: u64) -> &'static str {
    if n == 1 { "character" } else { "characters" }
}

fn check_string(map: &Map<String, Value>, s: &str, path: &str) -> Result<(), Fail> {
    let length = u64::try_from(s.chars().count()).unwrap_or(u64::MAX);
    if let Some(min) = map.get("minLength").and_then(Value::as_u64)
        && length < min
    {
        return Err(Fail::Value(if min == 1 {
            format!("`{path}` must not be empty")
        } else {
            format!("`{path}` must be at least {min} {} long", characters(min))
        }));
    }
    if let Some(max) = map.get("maxLength").and_then(Value::as_u64)
        && length > max
    {
        return Err(Fail::Value(format!(
            "`{path}` must be at most {max} {} long (it has {length})",
            characters(max)
        )));
    }
    Ok(())
}

fn join(path: &str, key: &str) -> String {
    format!("{path}.{key}")
}

fn check_object(
    map: &Map<String, Value>,
    object: &Map<String, Value>,
    path: &str,
) -> Result<(), Fail> {
    let properties = map.get("properties").and_then(Value::as_object);
    let declared = |key: &str| properties.is_some_and(|p| p.contains_key(key));
    match map.get("additionalProperties") {
        None | Some(Value::Bool(true)) => {}
        Some(Value::Bool(false)) => {
            let unknown: Vec<&str> = object
                .keys()
                .map(String::as_str)
                .filter(|k| !declared(k))
                .collect();
            if !unknown.is_empty() {
                return Err(Fail::Value(unknown_keys(path, &unknown, properties)));
            }
        }
        Some(extra) => {
            for (key, inner) in object.iter().filter(|(k, _)| !declared(k)) {
                check(extra, inner, &join(path, key))?;
            }
        }
    }
    for name in map
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !object.contains_key(name) {
            return Err(Fail::Value(format!("`{}` is required", join(path, name))));
        }
    }
    for (name, sub) in properties.into_iter().flatten() {
        if let Some(inner) = object.get(name) {
            check(sub, inner, &join(path, name))?;
        }
    }
    Ok(())
}

/// "Unknown argument `allow_protected`; accepted arguments: port, dry_run, …" at the top of a
/// tool's arguments, "Unknown key `x` in `arguments.y`; accepted keys: …" below it.
fn unknown_keys(path: &str, unknown: &[&str], properties: Option<&Map<String, Value>>) -> String {
    let top = path == "arguments";
    let (one, many) = if top {
        ("argument", "arguments")
    } else {
        ("key", "keys")
    };
    let mut named: Vec<String> = unknown
        .iter()
        .take(ECHO_KEYS_MAX)
        .map(|k| format!("`{}`", shown(k)))
        .collect();
    if unknown.len() > ECHO_KEYS_MAX {
        named.push(format!("and {} more", unknown.len() - ECHO_KEYS_MAX));
    }
    let noun = if unknown.len() == 1 { one } else { many };
    let place = if top {
        String::new()
    } else {
        format!(" in `{path}`")
    };
    let accepted: Vec<&str> = properties
        .into_iter()
        .flatten()
        .map(|(k, _)| k.as_str())
        .collect();
    let tail = if accepted.is_empty() {
        format!("no {many} are accepted here")
    } else {
        format!("accepted {many}: {}", accepted.join(", "))
    };
    format!("Unknown {noun} {}{place}; {tail}", named.join(", "))
}

fn check_array(map: &Map<String, Value>, items: &[Value], path: &str) -> Result<(), Fail> {
    let count = u64::try_from(items.len()).unwrap_or(u64::MAX);
    if let Some(min) = map.get("minItems").and_then(Value::as_u64)
        && count < min
    {
        return Err(Fail::Value(format!(
            "`{path}` must have at least {min} item{}",
            if min == 1 { "" } else { "s" }
        )));
    }
    if let Some(max) = map.get("maxItems").and_then(Value::as_u64)
        && count > max
    {
        return Err(Fail::Value(format!(
            "`{path}` must have at most {max} item{} (it has {count})",
            if max == 1 { "" } else { "s" }
        )));
    }
    if let Some(each) = map.get("items") {
        for (i, item) in items.iter().enumerate() {
            check(each, item, &format!("{path}[{i}]"))?;
        }
    }
    Ok(())
}

/// The value must match one branch. When every branch refuses it, the message gives each
/// branch's reason, so the caller can aim at the form it meant.
fn check_any_of(branches: &[Value], value: &Value, path: &str) -> Result<(), Fail> {
    let mut reasons = Vec::new();
    for branch in branches {
        match check(branch, value, path) {
            Ok(()) => return Ok(()),
            Err(Fail::Value(reason)) => reasons.push(reason),
            Err(bug) => return Err(bug),
        }
    }
    if let [only] = reasons.as_slice() {
        return Err(Fail::Value(only.clone()));
    }
    Err(Fail::Value(format!(
        "`{path}` matches none of its accepted forms: {}",
        reasons.join("; or ")
    )))
}

/// `if`/`then`/`else`: a value the `if` schema accepts is held to `then`, any other to `else`.
/// A `then` refusal says under which condition it applies ("… is required when `dry_run` is
/// false"), read from the `if` schema's `const` properties.
fn check_if(
    map: &Map<String, Value>,
    condition: &Value,
    value: &Value,
    path: &str,
) -> Result<(), Fail> {
    let holds = match check(condition, value, path) {
        Ok(()) => true,
        Err(Fail::Value(_)) => false,
        Err(bug) => return Err(bug),
    };
    let branch = if holds {
        map.get("then")
    } else {
        map.get("else")
    };
    let Some(branch) = branch else {
        return Ok(());
    };
    match check(branch, value, path) {
        Err(Fail::Value(reason)) if holds => match when(condition) {
            Some(when) => Err(Fail::Value(format!("{reason} when {when}"))),
            None => Err(Fail::Value(reason)),
        },
        other => other,
    }
}

/// "`dry_run` is false" for `{"properties": {"dry_run": {"const": false}}}`; None when the
/// condition is not a plain list of constants.
fn when(condition: &Value) -> Option<String> {
    let properties = condition.get("properties")?.as_object()?;
    let parts: Option<Vec<String>> = properties
        .iter()
        .map(|(name, sub)| Some(format!("`{name}` is {}", sub.get("const")?)))
        .collect();
    let parts = parts?;
    if parts.is_empty() {
        return None;
    }
    Some(parts.join(" and "))
}

/// The whole number `value` holds, as the schema's "integer" reads it: 3000 and 3000.0 both give
/// 3000 (a client may send either), 3000.5 gives None. Tools read integer arguments with this,
/// never with `as_u64` alone, which would miss 3000.0 after the schema accepted it.
pub(crate) fn integer(value: &Value) -> Option<i64> {
    if let Some(n) = value.as_i64() {
        return Some(n);
    }
    let f = value.as_f64()?;
    // Only whole floats inside i64's exact range; 2^63 itself is out of range.
    let exact = f.is_finite() && f.fract() == 0.0 && f.abs() < 9_223_372_036_854_775_808.0;
    // Checked whole and in range just above: the cast loses nothing.
    exact.then_some(f as i64)
}

/// The port argument `key` (1–65535, read as `integer` reads it), for a tool whose schema
/// already checked it; `None` when it is absent.
pub(crate) fn port_argument(args: &Map<String, Value>, key: &str) -> Option<u16> {
    integer(args.get(key)?)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)
}

/// The `if`/`then` pair that makes `field` required when the flag `flag` is `value`, for a
/// tool's input schema to merge in. The flag is required inside the `if`: a call that leaves
/// the flag out takes its default, and must not be held to the `then`.
#[cfg(test)]
pub(crate) fn required_when(flag: &str, value: Value, field: &str) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert(
        "if".to_owned(),
        serde_json::json!({ "properties": { flag: { "const": value } }, "required": [flag] }),
    );
    out.insert(
        "then".to_owned(),
        serde_json::json!({ "required": [field] }),
    );
    out
}

#[cfg(test)]
mod tests;
