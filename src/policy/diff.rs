//! The text of a whole set, unified diffs of it (the `policy.change` journal entries), and the
//! applier that rebuilds a past set from those diffs (`policy show --at`).

use cedar_policy::Policy;

use crate::policy::compile::ID_ANNOTATION;

/// The text of a whole set from its policies' texts in seq order, as
/// [`PolicySet::text`](crate::policy::PolicySet::text) gives it (and as every `policy.change` diff
/// is taken over): trimmed, one blank line between them, a final newline; `""` when empty.
pub fn set_text<'a>(texts: impl IntoIterator<Item = &'a str>) -> String {
    let parts: Vec<&str> = texts.into_iter().map(str::trim).collect();
    if parts.is_empty() {
        return String::new();
    }
    let mut out = parts.join("\n\n");
    out.push('\n');
    out
}

/// The `@id` of one policy's text, if it parses and has one.
pub(crate) fn id_of(text: &str) -> Option<String> {
    Policy::parse(None, text)
        .ok()
        .and_then(|p| crate::policy::compile::annotation(&p, ID_ANNOTATION).map(str::to_string))
}

/// [`id_of`] for many texts at once: one parse for all of them when it can stand for each
/// alone (`compile::parse_together`), else each parsed alone.
pub(crate) fn ids_of(texts: &[&str]) -> Vec<Option<String>> {
    match super::compile::parse_together(texts) {
        Some(parsed) => parsed
            .iter()
            .map(|p| crate::policy::compile::annotation(p, ID_ANNOTATION).map(str::to_string))
            .collect(),
        None => texts.iter().map(|t| id_of(t)).collect(),
    }
}

/// Whether `text` opens with `@id("<id>")` written exactly as Holdcall writes it: then its
/// `@id` is `id` (Cedar refuses a second `@id`), which is what [`id_of`] would find without
/// parsing it. False says nothing: the text may still carry that id, spelled another way.
pub(crate) fn opens_with_id(text: &str, id: &str) -> bool {
    let head = format!(
        "@{ID_ANNOTATION}({})",
        crate::policy::render::string_literal(id)
    );
    text.trim_start().starts_with(&head)
}

/// A unified line diff with 3 lines of context and the given labels; `""` when equal.
pub fn unified_diff(before: &str, after: &str, before_label: &str, after_label: &str) -> String {
    if before == after {
        return String::new();
    }
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(before_label, after_label)
        .to_string()
}

/// Applies a unified diff made by `unified_diff` to `before` (the text it was made from).
/// `""` is no change. Used to rebuild past policy sets from the journal's diffs alone.
pub(crate) fn apply_unified_diff(before: &str, diff: &str) -> Result<String, String> {
    if diff.is_empty() {
        return Ok(before.to_string());
    }
    let old: Vec<&str> = before.split_inclusive('\n').collect();
    let mut out = String::new();
    let mut pos = 0usize; // next line of `old` not yet copied
    for line in diff.split_inclusive('\n') {
        if line.starts_with("--- ") || line.starts_with("+++ ") {
            continue;
        }
        if let Some(header) = line.strip_prefix("@@ -") {
            let start = header
                .split([',', ' '])
                .next()
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| format!("bad hunk header {line:?}"))?;
            let count_zero = header.split(' ').next().is_some_and(|r| r.ends_with(",0"));
            // `-0,0` and `-N,0` name the line before the hunk; otherwise the hunk starts at N.
            let target = if count_zero {
                start
            } else {
                start.saturating_sub(1)
            };
            if target < pos {
                return Err(format!("hunk {line:?} goes backwards"));
            }
            for l in old.get(pos..target).ok_or("a hunk starts past the end")? {
                out.push_str(l);
            }
            pos = target;
            continue;
        }
        if line.starts_with('\\') {
            continue;
        }
        let (tag, body) = line.split_at(line.chars().next().map_or(0, char::len_utf8));
        match tag {
            " " | "-" => {
                if old.get(pos).copied() != Some(body) {
                    return Err(format!("line {} does not match the diff", pos + 1));
                }
                if tag == " " {
                    out.push_str(body);
                }
                pos += 1;
            }
            "+" => out.push_str(body),
            _ => return Err(format!("unexpected diff line {line:?}")),
        }
    }
    for l in old.get(pos..).unwrap_or(&[]) {
        out.push_str(l);
    }
    Ok(out)
}
