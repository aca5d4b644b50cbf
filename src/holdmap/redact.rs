//! Command lines as holdmap shows them: credential-looking flags, headers, URL user-info and
//! query fields, and inline JSON values under secret-looking keys masked with `••••`.
//!
//! Owns: recognising what looks like a secret in an argument vector, and the one shown form of
//! a command line (control and invisible characters made visible, arguments with spaces
//! quoted). Must never: return a command line that skipped it, or show an inline JSON argument
//! it could not check (unparseable, larger than `HOLDMAP_INLINE_JSON_BYTES_MAX` or deeper than
//! `HOLDMAP_INLINE_JSON_DEPTH_MAX`: masked whole).
//!
//! Heuristic, by design: it recognises secrets by the key, flag, header or URL part they sit
//! in. A secret passed as a bare positional argument (`mysql -pSECRET`, `tool s3cr3t`) or
//! under an unremarkable name cannot be recognised and is shown (docs/holdmap.md says so).

use serde_json::Value;

use crate::limits::{HOLDMAP_INLINE_JSON_BYTES_MAX, HOLDMAP_INLINE_JSON_DEPTH_MAX};
use crate::text;

/// What replaces a secret: the shared layer's, so both programs mask alike.
pub(crate) use crate::clients::inspect::MASK;

/// Whether a key (a flag, an environment name, a JSON key, a header name) names a secret: the
/// shared layer's one judgement (`clients::inspect::secret_key`).
pub(crate) fn is_secret_key(raw: &str) -> bool {
    crate::clients::inspect::secret_key(raw)
}

/// Query parameter names that hold a secret beyond the secret keys: API keys and signatures.
fn is_secret_query_key(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    is_secret_key(key)
        || matches!(
            lower.as_str(),
            "key" | "sig" | "signature" | "x-amz-signature"
        )
}

/// The command line as one shown string, redacted, control characters made visible, each
/// argument with a space in it (or empty) single-quoted.
///
/// A process that rewrote its command line into one string with spaces (`nginx: master
/// process …`, a `setproctitle` title) is read as words, so a `--password x` inside it is still
/// seen, and shown unquoted.
pub(crate) fn redact_argv(argv: &[String]) -> String {
    if let [title] = argv
        && title.contains(' ')
    {
        let words: Vec<String> = title.split(' ').map(str::to_owned).collect();
        return redact_args(&words)
            .iter()
            .map(|w| text::visible(w))
            .collect::<Vec<_>>()
            .join(" ");
    }
    redact_args(argv)
        .iter()
        .map(|a| shown(a))
        .collect::<Vec<_>>()
        .join(" ")
}

fn shown(arg: &str) -> String {
    let visible = text::visible(arg);
    if visible.is_empty() || visible.contains(' ') {
        format!("'{}'", visible.replace('\'', r"'\''"))
    } else {
        visible
    }
}

/// What the previous argument says about the next one.
#[derive(Clone, Copy)]
enum Next {
    Plain,
    /// The value of a secret flag (`--token VALUE`): masked whole.
    Secret,
    /// The value of `-u` / `--user` (`user:password`): the password masked.
    UserPassword,
}

/// Each argument redacted, unquoted.
fn redact_args(argv: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut next = Next::Plain;
    for arg in argv {
        let this = next;
        next = Next::Plain;
        match this {
            Next::Secret if !arg.starts_with("--") => {
                out.push(MASK.to_owned());
                continue;
            }
            Next::UserPassword => {
                if let Some((user, _)) = arg.split_once(':') {
                    out.push(format!("{user}:{MASK}"));
                    continue;
                }
            }
            _ => {}
        }
        if arg.starts_with('-') && !arg.contains('=') {
            if is_secret_key(arg) {
                next = Next::Secret;
            } else if matches!(arg.as_str(), "-u" | "--user" | "--proxy-user") {
                next = Next::UserPassword;
            }
        }
        out.push(redact_arg(arg));
    }
    out
}

/// One argument (or value) redacted: inline JSON, a header, `key=value`, URLs inside it.
fn redact_arg(arg: &str) -> String {
    if looks_like_json(arg) {
        return redact_json_text(arg);
    }
    if let Some(header) = redact_header(arg) {
        return header;
    }
    if let Some((key, value)) = arg.split_once('=')
        && is_key_like(key)
    {
        return if is_secret_key(key) {
            format!("{key}={MASK}")
        } else {
            format!("{key}={}", redact_arg(value))
        };
    }
    redact_urls(arg)
}

/// A flag or a name: letters, digits, `-`, `_`, `.`, with at least one letter or digit.
fn is_key_like(key: &str) -> bool {
    key.chars().any(|c| c.is_ascii_alphanumeric())
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// `Authorization: Bearer x` → `Authorization: Bearer ••••`; any header with a secret name
/// (`X-Api-Key: …`, `Cookie: …`) has its value masked. `None` when `arg` is not such a header.
fn redact_header(arg: &str) -> Option<String> {
    let (name, value) = arg.split_once(':')?;
    if value.starts_with("//") || !is_key_like(name) || !is_secret_key(name) {
        return None;
    }
    let value = value.trim_start();
    let scheme = value.split_whitespace().next().filter(|w| {
        value.trim().len() > w.len()
            && matches!(
                w.to_ascii_lowercase().as_str(),
                "bearer" | "basic" | "token" | "digest" | "negotiate" | "apikey"
            )
    });
    Some(match scheme {
        Some(scheme) => format!("{name}: {scheme} {MASK}"),
        None => format!("{name}: {MASK}"),
    })
}

fn looks_like_json(arg: &str) -> bool {
    let t = arg.trim_start();
    t.starts_with('{') || (t.starts_with('[') && (t.contains('"') || t.contains('{')))
}

/// Inline JSON with every value under a secret key masked (recursively), strings redacted as
/// arguments, arrays of strings as argument vectors; masked whole when it cannot be checked.
fn redact_json_text(arg: &str) -> String {
    if arg.len() > HOLDMAP_INLINE_JSON_BYTES_MAX {
        return MASK.to_owned();
    }
    match serde_json::from_str::<Value>(arg) {
        Ok(mut value @ (Value::Object(_) | Value::Array(_))) => {
            if redact_value(&mut value, 0) {
                serde_json::to_string(&value).unwrap_or_else(|_| MASK.to_owned())
            } else {
                MASK.to_owned()
            }
        }
        _ => MASK.to_owned(),
    }
}

/// Redacts `value` in place; false when it is nested deeper than the bound.
fn redact_value(value: &mut Value, depth: usize) -> bool {
    if depth > HOLDMAP_INLINE_JSON_DEPTH_MAX {
        return false;
    }
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if is_secret_key(key) {
                    *v = Value::String(MASK.to_owned());
                } else if !redact_value(v, depth + 1) {
                    return false;
                }
            }
        }
        Value::Array(items) => {
            let strings: Option<Vec<String>> = items
                .iter()
                .map(|i| i.as_str().map(str::to_owned))
                .collect();
            match strings {
                Some(argv) if !argv.is_empty() => {
                    *items = redact_args(&argv).into_iter().map(Value::String).collect();
                }
                _ => {
                    for item in items.iter_mut() {
                        if !redact_value(item, depth + 1) {
                            return false;
                        }
                    }
                }
            }
        }
        Value::String(s) => *s = redact_arg(s),
        _ => {}
    }
    true
}

/// `text` with every URL's user-info password and secret query values masked.
fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>'))
            .unwrap_or(tail.len());
        let (url, after) = tail.split_at(end);
        out.push_str(&redact_url_rest(url));
        rest = after;
    }
    out.push_str(rest);
    out
}

/// A URL after its `scheme://`: `user:password@host/path?query#fragment`, redacted.
fn redact_url_rest(url: &str) -> String {
    let authority_end = url.find(['/', '?', '#']).unwrap_or(url.len());
    let (authority, path) = url.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:{MASK}@{host}"),
            // A long user name with no password is a token used as one (`https://TOKEN@host`).
            None if userinfo.len() >= 20 => format!("{MASK}@{host}"),
            None => format!("{userinfo}@{host}"),
        },
        None => authority.to_owned(),
    };
    let Some(q) = path.find('?') else {
        return authority + path;
    };
    let (before, query) = path.split_at(q);
    let (query, fragment) = match query.find('#') {
        Some(h) => query.split_at(h),
        None => (query, ""),
    };
    let params = query
        .trim_start_matches('?')
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((key, _))
                if is_secret_query_key(&crate::clients::inspect::percent_decoded(
                    &key.replace('+', " "),
                )) =>
            {
                format!("{key}={MASK}")
            }
            _ => param.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("&");
    format!("{authority}{before}?{params}{fragment}")
}

#[cfg(test)]
mod tests;
