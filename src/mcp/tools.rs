//! Tool definitions as a `tools/list` result states them: each tool's canonical definition (the
//! members a model is shown: `name`, `title`, `description`, `inputSchema`, `outputSchema`,
//! `annotations`) and its SHA-256, read with the strict scanner from the bytes of the answer.
//!
//! Canonical means: objects with their keys sorted by their decoded bytes, strings decoded and
//! written again with [`push_json_string`], numbers and literals as written, no whitespace. So a
//! server that reorders keys, re-indents or re-escapes a string keeps its hash; any change a
//! client could read differently (a word, a parameter, a number's text) changes it.
//!
//! Owns: reading a listing and the canonical form; splicing a listing without some tools (the
//! one rewrite of a forwarded line anywhere, used only by the relay's opt-in hide-denied).
//! Must never: hand out a parsed copy as the forwarded line (the canonical text is for hashing
//! and journaling); accept a tool object that repeats a key (two clients could read two
//! definitions: it is counted unreadable instead). No I/O.

pub(crate) mod diff;

use crate::mcp::envelope::{elements, members, unique_members};
use crate::mcp::json::escape::{decode_str, decode_wtf8, push_json_string};
use crate::mcp::json::scan::{Keys, scan_value};

/// The members of a tool object that make its definition, in canonical (sorted) order.
const DEFINITION_KEYS: [&str; 6] = [
    "annotations",
    "description",
    "inputSchema",
    "name",
    "outputSchema",
    "title",
];

/// One tool as a listing defines it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct ToolDefinition {
    pub(crate) name: String,
    /// The canonical JSON of the definition's members.
    pub(crate) canonical: String,
    /// SHA-256 of `canonical`, lowercase hex.
    pub(crate) hash: String,
}

/// What one `tools/list` result holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Listing {
    pub(crate) tools: Vec<ToolDefinition>,
    /// Entries that are not a readable tool (not an object, a repeated key, no string name, a
    /// name listed twice).
    pub(crate) unreadable: usize,
    /// Whether this page is the whole listing (no `nextCursor`): only then does a tool missing
    /// from it count as gone.
    pub(crate) complete: bool,
}

/// The listing a `tools/list` result states, or `None` when `result` is not one (not an object,
/// a repeated key, no `tools` array, or a 2026-07-28 `resultType` other than `complete`).
pub(crate) fn read_listing(result: &[u8]) -> Option<Listing> {
    let top = unique_members(result)?;
    let exact = |key: &str| top.iter().find(|m| m.key.as_ref() == key.as_bytes());
    if let Some(kind) = exact("resultType")
        && decode_str(kind.value).as_deref() != Some("complete")
    {
        return None;
    }
    let tools = exact("tools")?.value;
    let complete = exact("nextCursor").is_none_or(|m| m.value == b"null");
    let mut listing = Listing {
        complete,
        ..Listing::default()
    };
    for raw in elements(tools)? {
        match definition(raw) {
            Some(d) if !listing.tools.iter().any(|t| t.name == d.name) => listing.tools.push(d),
            _ => listing.unreadable += 1,
        }
    }
    Some(listing)
}

/// One tool object's definition; `None` when it is not an object with unique keys and a string
/// `name`.
pub(crate) fn definition(raw: &[u8]) -> Option<ToolDefinition> {
    // Strictly: a key repeated anywhere inside (even only after case folding) is unreadable.
    if scan_value(raw, 0, Keys::Check).ok()? != raw.len() {
        return None;
    }
    let ms = members(raw)?;
    let name_raw = ms.iter().find(|m| m.key.as_ref() == b"name")?.value;
    if name_raw.first() != Some(&b'"') {
        return None;
    }
    let name = decode_str(name_raw)?.into_owned();
    let mut out = Vec::with_capacity(raw.len());
    out.push(b'{');
    let mut first = true;
    for key in DEFINITION_KEYS {
        if let Some(m) = ms.iter().find(|m| m.key.as_ref() == key.as_bytes()) {
            if !first {
                out.push(b',');
            }
            first = false;
            push_json_string(&mut out, key);
            out.push(b':');
            canonical_into(m.value, &mut out)?;
        }
    }
    out.push(b'}');
    let canonical = String::from_utf8(out).ok()?;
    let hash = crate::ids::sha256_hex(canonical.as_bytes());
    Some(ToolDefinition {
        name,
        canonical,
        hash,
    })
}

/// The canonical JSON of one value the caller scanned strictly. Recursion is bounded: the
/// scanner refuses nesting past `limits::JSON_DEPTH_MAX`.
fn canonical_into(raw: &[u8], out: &mut Vec<u8>) -> Option<()> {
    match raw.first()? {
        b'{' => {
            let mut ms = members(raw)?;
            ms.sort_by(|a, b| a.key.cmp(&b.key));
            out.push(b'{');
            for (i, m) in ms.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                push_key(out, &m.key)?;
                out.push(b':');
                canonical_into(m.value, out)?;
            }
            out.push(b'}');
        }
        b'[' => {
            out.push(b'[');
            for (i, e) in elements(raw)?.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical_into(e, out)?;
            }
            out.push(b']');
        }
        b'"' => match decode_str(raw) {
            Some(s) => push_json_string(out, &s),
            // A lone surrogate: no text to write again, so the token as written.
            None => out.extend_from_slice(raw),
        },
        _ => out.extend_from_slice(raw),
    }
    Some(())
}

/// A decoded key written again; a key holding a lone surrogate has no text, so the value is
/// unreadable (`None`).
fn push_key(out: &mut Vec<u8>, key: &[u8]) -> Option<()> {
    push_json_string(out, std::str::from_utf8(key).ok()?);
    Some(())
}

/// The line with the tools named in `drop` taken out of its `result.tools` array, every other
/// byte as it was; `None` when the line is not such a result (then nothing is rewritten).
pub(crate) fn without_tools(line: &[u8], drop: &[String]) -> Option<Vec<u8>> {
    let value = crate::mcp::envelope::one_value(line).ok()??;
    let result = crate::mcp::envelope::object_member(value, "result")?;
    let top = unique_members(result)?;
    let tools = top.iter().find(|m| m.key.as_ref() == b"tools")?.value;
    let start = offset_in(line, tools)?;
    let end = start.checked_add(tools.len())?;
    let mut out = Vec::with_capacity(line.len());
    out.extend_from_slice(line.get(..start)?);
    out.push(b'[');
    let mut first = true;
    for raw in elements(tools)? {
        let name = members(raw).and_then(|ms| {
            ms.iter()
                .find(|m| m.key.as_ref() == b"name")
                .and_then(|m| decode_wtf8(m.value).map(|n| n.into_owned()))
        });
        if name.is_some_and(|n| drop.iter().any(|d| d.as_bytes() == n.as_slice())) {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(raw);
    }
    out.push(b']');
    out.extend_from_slice(line.get(end..)?);
    Some(out)
}

/// The lint flags of a canonical definition: every text in it (descriptions, titles, parameter
/// names and their descriptions…) holding characters a person would not see
/// (`text::lint`), named by where it is.
pub(crate) fn lint(canonical: &str) -> Vec<String> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(canonical) else {
        return vec!["the definition cannot be read".into()];
    };
    let mut out = Vec::new();
    walk(&v, String::new(), &mut out);
    out
}

fn walk(v: &serde_json::Value, at: String, out: &mut Vec<String>) {
    let visible = crate::text::visible;
    match v {
        serde_json::Value::String(s) => {
            let flags = crate::text::lint(s);
            if !flags.is_empty() {
                out.push(format!("{}: {}", visible(&at), flags.join(", ")));
            }
        }
        serde_json::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, format!("{at}[{i}]"), out);
            }
        }
        serde_json::Value::Object(members) => {
            for (k, item) in members {
                let at = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                let flags = crate::text::lint(k);
                if !flags.is_empty() {
                    out.push(format!("{} (the key): {}", visible(&at), flags.join(", ")));
                }
                walk(item, at, out);
            }
        }
        _ => {}
    }
}

/// Where `part` (a sub-slice of `whole`) starts in `whole`.
fn offset_in(whole: &[u8], part: &[u8]) -> Option<usize> {
    let offset = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    (offset.checked_add(part.len())? <= whole.len()).then_some(offset)
}

#[cfg(test)]
mod tests;
