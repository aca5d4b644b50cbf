//! Query strings, read strictly: each name once, only the names a route expects, well-formed
//! percent-encoding of UTF-8 without control characters (docs/dependencies.md says why this is
//! not `serde_urlencoded`).

use std::collections::BTreeMap;

use crate::limits;
use crate::text::visible;

/// A query string read into names and values: each name once, only the names a route expects,
/// percent-decoding that is well formed and gives UTF-8 without control characters (except the
/// line breaks and tabs arguments may hold).
pub(super) fn parse_query(
    query: Option<&str>,
    allowed: &[&str],
) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    let Some(q) = query.filter(|q| !q.is_empty()) else {
        return Ok(out);
    };
    if q.len() > limits::CONSOLE_QUERY_BYTES_MAX {
        return Err(format!(
            "the query is {} bytes; the most the console reads is {}",
            q.len(),
            limits::CONSOLE_QUERY_BYTES_MAX
        ));
    }
    for pair in q.split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let name = decode(name)?;
        if !allowed.contains(&name.as_str()) {
            return Err(format!("unknown query parameter {:?}", visible(&name)));
        }
        let value = decode(value)?;
        if value
            .chars()
            .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
        {
            return Err(format!("{name} holds a control character"));
        }
        if out.insert(name.clone(), value).is_some() {
            return Err(format!("{name} is given twice"));
        }
    }
    Ok(out)
}

fn decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        match c {
            b'%' => {
                let hex = |j: usize| {
                    b.get(j)
                        .and_then(|&d| (d as char).to_digit(16))
                        .ok_or_else(|| {
                            "a % in the query is not followed by two hex digits".to_string()
                        })
                };
                let hi = hex(i + 1)?;
                let lo = hex(i + 2)?;
                out.push(u8::try_from(hi * 16 + lo).map_err(|e| e.to_string())?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| "the query is not UTF-8".to_string())
}

pub(super) fn number(q: &BTreeMap<String, String>, name: &str) -> Result<Option<i64>, String> {
    match q.get(name) {
        None => Ok(None),
        Some(v) if v.len() <= 19 && !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => v
            .parse()
            .map(Some)
            .map_err(|_| format!("{name} must be a whole number")),
        Some(_) => Err(format!("{name} must be a whole number")),
    }
}
