//! The layers of src/, checked by reading the source (issue 13): no top-level module is in an
//! import circle; the shared layers (`mcp`, `os`, `clients`) and `holdmap` import only shared
//! layers and the foundation (`limits`, `ids`, `text`), which imports only itself; and no
//! production source file is over 800 lines. A reference is any `crate::x` path in code (a
//! `use` line, a grouped `use crate::{x, y::z}`, a path in an expression or a type) or
//! `super::x` climbing to the crate root; comments, strings, `tests.rs` files and
//! `#[cfg(test)]` items do not count. The checker is tested on fixture trees of its own below.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Imported by every layer, importing only each other.
const FOUNDATION: [&str; 3] = ["limits", "ids", "text"];
/// Shared with other products: they may import each other and the foundation, nothing else.
const SHARED: [&str; 3] = ["mcp", "os", "clients"];
/// The second product built on the shared layers: it may import them and the foundation only.
const HOLDMAP: &str = "holdmap";
/// The longest a production source file may be, `#[cfg(test)]` items left out.
const MAX_LINES: usize = 800;

/// One reference from a file of src/ to a top-level module.
#[derive(Debug, Clone)]
struct Reference {
    /// The file, relative to src/, and the 1-based line of the reference.
    file: String,
    line: usize,
    /// The top-level module the file belongs to, and the one it names.
    from: String,
    to: String,
}

impl std::fmt::Display for Reference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "src/{}:{} uses crate::{}", self.file, self.line, self.to)
    }
}

/// The source with every comment, string and character literal blanked to spaces (newlines
/// kept, so line numbers and brace structure stay): what is left is code.
fn code_only(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if let Some(hashes) = raw_string_start(&b, i) {
            // r"…", r#"…"#, br#"…"# (and c"" forms): no escapes; ends at a quote and the hashes.
            let open = b[i..].iter().position(|&c| c == '"').unwrap() + i;
            for &c in &b[i..=open] {
                out.push(blank(c));
            }
            i = open + 1;
            while i < b.len() {
                if b[i] == '"' && (0..hashes).all(|h| b.get(i + 1 + h) == Some(&'#')) {
                    out.push_str(&" ".repeat(hashes + 1));
                    i += hashes + 1;
                    break;
                }
                out.push(blank(b[i]));
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && char_literal_len(&b, i).is_some() {
            let n = char_literal_len(&b, i).unwrap();
            out.push_str(&" ".repeat(n));
            i += n;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// At `i`, the start of a raw string (`r`, `br` or `cr`, then hashes, then a quote) not inside
/// an identifier: the number of hashes.
fn raw_string_start(b: &[char], i: usize) -> Option<usize> {
    if i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_') {
        return None;
    }
    let mut j = i;
    if matches!(b.get(j), Some('b' | 'c')) {
        j += 1;
    }
    if b.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = b[j..].iter().take_while(|&&c| c == '#').count();
    (b.get(j + hashes) == Some(&'"')).then_some(hashes)
}

/// At a `'`, the length of the character literal it opens (`'a'`, `'\n'`, `'\u{1F600}'`), or
/// None for a lifetime or a label.
fn char_literal_len(b: &[char], i: usize) -> Option<usize> {
    match b.get(i + 1)? {
        '\\' => {
            let close = b[i + 2..].iter().take(12).position(|&c| c == '\'')?;
            Some(close + 3)
        }
        _ => (b.get(i + 2) == Some(&'\'')).then_some(3),
    }
}

/// The spans (start and end index, inclusive) of the `#[cfg(test)]` items of `code` (from
/// `code_only`): an inline `mod tests { … }`, a `mod tests;` line, a test-only function or `use`.
fn test_items(code: &str) -> Vec<(usize, usize)> {
    let b: Vec<char> = code.chars().collect();
    let marker: Vec<char> = "#[cfg(test)]".chars().collect();
    let mut spans = Vec::new();
    let mut i = 0;
    while i + marker.len() <= b.len() {
        if b[i..i + marker.len()] != marker[..] {
            i += 1;
            continue;
        }
        // The item ends at the `;` or the `}` closing its first brace, whichever comes first.
        let mut j = i + marker.len();
        let mut depth = 0usize;
        while j < b.len() {
            match b[j] {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        break;
                    }
                }
                ';' if depth == 0 => break,
                _ => {}
            }
            j += 1;
        }
        let end = j.min(b.len() - 1);
        spans.push((i, end));
        i = end + 1;
    }
    spans
}

/// `code` with its `#[cfg(test)]` items blanked, newlines kept.
fn without_test_items(code: &str) -> String {
    let mut b: Vec<char> = code.chars().collect();
    for (start, end) in test_items(code) {
        for c in &mut b[start..=end] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    }
    b.into_iter().collect()
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifier starting at `i` (after spaces), and the index after it.
fn ident_at(b: &[char], mut i: usize) -> (String, usize) {
    while i < b.len() && b[i].is_whitespace() {
        i += 1;
    }
    let start = i;
    while i < b.len() && is_ident(b[i]) {
        i += 1;
    }
    (b[start..i].iter().collect(), i)
}

/// After spaces at `i`, whether `::` follows; the index after it.
fn path_sep_at(b: &[char], mut i: usize) -> Option<usize> {
    while i < b.len() && b[i].is_whitespace() {
        i += 1;
    }
    (b.get(i) == Some(&':') && b.get(i + 1) == Some(&':')).then_some(i + 2)
}

/// The first identifier of each item of the group opening at `b[open]` (`{`):
/// `{a, b::c, d::{e}}` gives a, b and d, each with its index.
fn group_heads(b: &[char], open: usize) -> Vec<(String, usize)> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut expect_head = true;
    let mut i = open;
    while i < b.len() {
        match b[i] {
            '{' => {
                depth += 1;
                expect_head = depth == 1;
                i += 1;
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
                i += 1;
            }
            ',' => {
                expect_head = depth == 1;
                i += 1;
            }
            c if is_ident(c) && expect_head => {
                let (name, end) = ident_at(b, i);
                heads.push((name, i));
                expect_head = false;
                i = end;
            }
            _ => i += 1,
        }
    }
    heads
}

/// The top-level modules `code` names through `crate::` (or, from a file `depth` modules below
/// the root, `super::` that many times), each with its index in the code.
fn crate_paths(code: &str, depth: usize) -> Vec<(String, usize)> {
    let b: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !is_ident(b[i]) || (i > 0 && is_ident(b[i - 1])) {
            i += 1;
            continue;
        }
        let (word, end) = ident_at(&b, i);
        let root_end = match word.as_str() {
            "crate" => path_sep_at(&b, end),
            "super" => {
                // super::super::…::x, climbing `depth` modules, reaches the root.
                let mut climbed = 1;
                let mut at = path_sep_at(&b, end);
                while let Some(after) = at {
                    let (next, next_end) = ident_at(&b, after);
                    if next != "super" {
                        break;
                    }
                    climbed += 1;
                    at = path_sep_at(&b, next_end);
                }
                at.filter(|_| climbed == depth)
            }
            _ => None,
        };
        let Some(after) = root_end else {
            i = end.max(i + 1);
            continue;
        };
        let mut k = after;
        while k < b.len() && b[k].is_whitespace() {
            k += 1;
        }
        if b.get(k) == Some(&'{') {
            found.extend(group_heads(&b, k));
        } else {
            let (name, _) = ident_at(&b, k);
            if !name.is_empty() {
                found.push((name, k));
            }
        }
        i = after;
    }
    found
}

/// The 1-based line of index `at` of `code`.
fn line_of(code: &str, at: usize) -> usize {
    code.chars().take(at).filter(|&c| c == '\n').count() + 1
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A file's module path under src/: `x.rs` and `x/mod.rs` are [x], `x/y.rs` is [x, y]; the
/// crate roots (`lib.rs`, `main.rs`) are [].
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    }
    parts
}

fn is_tests_file(rel: &Path) -> bool {
    rel.file_name().is_some_and(|n| n == "tests.rs")
}

/// Every reference from a production file of `src` to another top-level module of `src`.
fn references(src: &Path) -> Vec<Reference> {
    let files = rust_files(src);
    let rels: Vec<PathBuf> = files
        .iter()
        .map(|f| f.strip_prefix(src).unwrap().to_path_buf())
        .collect();
    let modules: BTreeSet<String> = rels
        .iter()
        .filter_map(|r| module_path(r).first().cloned())
        .collect();
    let mut out = Vec::new();
    for (file, rel) in files.iter().zip(&rels) {
        let path = module_path(rel);
        let Some(from) = path.first() else { continue };
        if is_tests_file(rel) {
            continue;
        }
        let code = without_test_items(&code_only(&std::fs::read_to_string(file).unwrap()));
        for (to, at) in crate_paths(&code, path.len()) {
            if &to != from && modules.contains(&to) {
                out.push(Reference {
                    file: rel.to_string_lossy().into_owned(),
                    line: line_of(&code, at),
                    from: from.clone(),
                    to,
                });
            }
        }
    }
    out
}

/// Each import circle among the top-level modules of `src`, as `a -> b -> a` followed by one
/// reference per step.
fn circles(src: &Path) -> Vec<String> {
    let refs = references(src);
    let mut edges: BTreeMap<&str, BTreeMap<&str, &Reference>> = BTreeMap::new();
    for r in &refs {
        edges
            .entry(r.from.as_str())
            .or_default()
            .entry(r.to.as_str())
            .or_insert(r);
    }
    // A shortest path back to each module from each module it imports: one circle per module
    // found on one, reported once for its smallest member.
    let mut seen: BTreeSet<Vec<&str>> = BTreeSet::new();
    let mut out = Vec::new();
    for &start in edges.keys() {
        let Some(cycle) = shortest_cycle(&edges, start) else {
            continue;
        };
        let mut key = cycle.clone();
        key.sort();
        if !seen.insert(key) {
            continue;
        }
        let steps: Vec<String> = cycle
            .iter()
            .zip(cycle.iter().cycle().skip(1))
            .map(|(a, b)| format!("  {}", edges[a][b]))
            .collect();
        let mut names = cycle.clone();
        names.push(start);
        out.push(format!("{}\n{}", names.join(" -> "), steps.join("\n")));
    }
    out
}

/// The shortest circle through `start` (its modules in order, `start` first), by breadth-first
/// search.
fn shortest_cycle<'a>(
    edges: &BTreeMap<&'a str, BTreeMap<&'a str, &Reference>>,
    start: &'a str,
) -> Option<Vec<&'a str>> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(m) = queue.pop_front() {
        for &next in edges.get(m).map(|e| e.keys()).into_iter().flatten() {
            if next == start {
                let mut path = vec![m];
                while let Some(&p) = came_from.get(path.last().unwrap()) {
                    path.push(p);
                }
                path.reverse();
                return Some(path);
            }
            if !came_from.contains_key(next) {
                came_from.insert(next, m);
                queue.push_back(next);
            }
        }
    }
    None
}

/// The layers a module may import, or None when it may import anything (Holdcall's own).
fn may_import(module: &str) -> Option<Vec<&'static str>> {
    if FOUNDATION.contains(&module) {
        Some(FOUNDATION.to_vec())
    } else if SHARED.contains(&module) || module == HOLDMAP {
        Some([SHARED, FOUNDATION].concat())
    } else {
        None
    }
}

/// Each reference from a layered module (`layers`) to a module its layer may not import.
fn layer_breaches(src: &Path, layers: &[&str]) -> Vec<String> {
    references(src)
        .into_iter()
        .filter(|r| layers.contains(&r.from.as_str()))
        .filter(|r| may_import(&r.from).is_some_and(|ok| !ok.contains(&r.to.as_str())))
        .map(|r| {
            let ok = may_import(&r.from).unwrap().join(", ");
            format!("{r}, but `{}` may import only {ok}", r.from)
        })
        .collect()
}

/// Each production file of `src` over `max` lines, its `#[cfg(test)]` items left out (every
/// line one of them touches, from its attribute to its end).
fn long_files(src: &Path, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    for file in rust_files(src) {
        let rel = file.strip_prefix(src).unwrap();
        if is_tests_file(rel) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let code = code_only(&text);
        let mut test_lines = BTreeSet::new();
        for (start, end) in test_items(&code) {
            test_lines.extend(line_of(&code, start)..=line_of(&code, end));
        }
        let lines = text.lines().count() - test_lines.len();
        if lines > max {
            out.push(format!(
                "src/{} has {lines} lines without its tests (at most {max}): split it, or move \
                 its inline #[cfg(test)] module to a tests.rs beside it",
                rel.display()
            ));
        }
    }
    out
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_top_level_module_of_src_is_in_an_import_circle() {
    let found = circles(&src_dir());
    assert!(
        found.is_empty(),
        "import circles between top-level modules of src/:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_shared_layers_import_nothing_holdcall_specific() {
    let layered: Vec<&str> = [SHARED, FOUNDATION].concat();
    let found = layer_breaches(&src_dir(), &layered);
    assert!(
        found.is_empty(),
        "shared or foundation modules import Holdcall modules:\n{}",
        found.join("\n")
    );
}

#[test]
fn holdmap_imports_only_the_shared_layers_and_the_foundation() {
    let found = layer_breaches(&src_dir(), &[HOLDMAP]);
    assert!(
        found.is_empty(),
        "holdmap imports Holdcall modules:\n{}",
        found.join("\n")
    );
}

/// The `holdmap` binary's own source reaches into the library only through `holdcall::holdmap`.
#[test]
fn the_holdmap_binary_uses_only_the_holdmap_module_of_the_library() {
    let path = src_dir().join("bin").join("holdmap.rs");
    let code = code_only(&std::fs::read_to_string(&path).unwrap());
    let mut breaches = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("holdcall::") {
            let after = &rest[at + "holdcall::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if name != HOLDMAP {
                breaches.push(format!(
                    "src/bin/holdmap.rs:{} uses holdcall::{name}",
                    n + 1
                ));
            }
            rest = after;
        }
    }
    assert!(breaches.is_empty(), "{}", breaches.join("\n"));
}

#[test]
fn no_production_source_file_is_over_800_lines() {
    let found = long_files(&src_dir(), MAX_LINES);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// A fake src/ of `files` (path, text) in a temporary directory.
fn fixture_tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

#[test]
fn the_checker_names_a_circle_and_each_reference_in_it() {
    let tree = fixture_tree(&[
        (
            "lib.rs",
            "pub mod relay;\npub mod journal;\npub mod config;\n",
        ),
        (
            "relay/mod.rs",
            "//! The relay.\nuse crate::journal::Writer;\n",
        ),
        (
            "journal/mod.rs",
            "fn f() {\n    let _ = crate::config::load();\n}\n",
        ),
        ("config.rs", "use crate::{limits, relay::Relay};\n"),
    ]);
    let found = circles(tree.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        found[0],
        "config -> relay -> journal -> config\n  \
         src/config.rs:1 uses crate::relay\n  \
         src/relay/mod.rs:2 uses crate::journal\n  \
         src/journal/mod.rs:2 uses crate::config"
    );
}

#[test]
fn the_checker_names_the_shared_file_and_the_holdcall_module_it_imports() {
    let tree = fixture_tree(&[
        (
            "lib.rs",
            "pub mod clients;\npub mod os;\npub mod text;\npub mod policy;\n",
        ),
        ("os/mod.rs", "use crate::text::visible;\n"),
        (
            "clients/inspect.rs",
            "use crate::os;\n\nfn f() -> crate::policy::Scope {\n    todo!()\n}\n",
        ),
        ("text.rs", "pub fn visible() {}\n"),
        ("policy/mod.rs", "use crate::clients::Entry;\n"),
    ]);
    assert_eq!(
        layer_breaches(tree.path(), &[SHARED, FOUNDATION].concat()),
        vec![
            "src/clients/inspect.rs:3 uses crate::policy, but `clients` may import only mcp, \
             os, clients, limits, ids, text"
        ]
    );
    assert_eq!(circles(tree.path()).len(), 1, "policy <-> clients");
}

#[test]
fn the_checker_reads_grouped_imports_paths_in_code_and_super_but_not_comments_strings_or_tests() {
    let tree = fixture_tree(&[
        ("lib.rs", ""),
        (
            "mcp/mod.rs",
            r##"//! Uses crate::daemon in a doc comment only.
// crate::daemon in a comment
/* crate::daemon /* nested */ crate::daemon */
const S: &str = "crate::daemon";
const R: &str = r#"crate::daemon " still"#;
const C: char = '"';
fn f<'a>(x: &'a str) -> &'a str { x }
use crate::{ids, os::{self, peer}, journal::{Reader, Writer}};
fn g() { let _ = super::approval::hold(); }
#[cfg(test)]
mod tests {
    use crate::daemon;
}
#[cfg(test)]
mod more;
"##,
        ),
        ("mcp/frame.rs", "fn h() { super::super::vault::get(); }\n"),
        ("mcp/tests.rs", "use crate::daemon;\n"),
        ("ids.rs", ""),
        ("os/mod.rs", ""),
        ("journal/mod.rs", ""),
        ("approval.rs", ""),
        ("vault.rs", ""),
        ("daemon/mod.rs", ""),
    ]);
    let named: Vec<String> = references(tree.path())
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        named,
        vec![
            "src/mcp/frame.rs:1 uses crate::vault",
            "src/mcp/mod.rs:8 uses crate::ids",
            "src/mcp/mod.rs:8 uses crate::os",
            "src/mcp/mod.rs:8 uses crate::journal",
            "src/mcp/mod.rs:9 uses crate::approval",
        ]
    );
}

#[test]
fn the_checker_passes_a_tree_that_keeps_the_layers() {
    let tree = fixture_tree(&[
        ("lib.rs", ""),
        ("mcp/mod.rs", "use crate::{limits, text};\n"),
        (
            "clients/mod.rs",
            "use crate::mcp::Frame;\nuse crate::os::peer;\n",
        ),
        ("os/mod.rs", "use crate::ids::sha256_hex;\n"),
        ("holdmap/mod.rs", "use crate::{clients, mcp};\n"),
        ("relay/mod.rs", "use crate::{mcp, journal, holdmap};\n"),
        ("journal/mod.rs", "use crate::ids;\n"),
        ("limits.rs", ""),
        ("ids.rs", "use crate::limits::MAX;\n"),
        ("text.rs", ""),
    ]);
    assert!(circles(tree.path()).is_empty());
    assert!(layer_breaches(tree.path(), &[SHARED, FOUNDATION].concat()).is_empty());
    assert!(layer_breaches(tree.path(), &[HOLDMAP]).is_empty());
    let bad = fixture_tree(&[
        ("lib.rs", ""),
        ("holdmap/mod.rs", "use crate::policy;\n"),
        ("ids.rs", "fn f() { crate::config::load() }\n"),
        ("policy/mod.rs", ""),
        ("config.rs", ""),
    ]);
    assert_eq!(layer_breaches(bad.path(), &[HOLDMAP]).len(), 1);
    assert_eq!(layer_breaches(bad.path(), &FOUNDATION).len(), 1);
}

#[test]
fn the_line_count_leaves_out_tests_files_and_cfg_test_items() {
    let body = "fn f() {}\n".repeat(10);
    let tests = format!(
        "#[cfg(test)]\nmod tests {{\n{}}}\n",
        "    // }\n".repeat(20)
    );
    let tree = fixture_tree(&[
        ("short.rs", &format!("{body}{tests}")),
        ("long.rs", &format!("{body}{body}{tests}")),
        ("x/tests.rs", &"fn t() {}\n".repeat(50)),
        ("split.rs", &format!("{body}#[cfg(test)]\nmod tests;\n")),
    ]);
    assert_eq!(
        long_files(tree.path(), 15),
        vec![
            "src/long.rs has 20 lines without its tests (at most 15): split it, or move its \
             inline #[cfg(test)] module to a tests.rs beside it"
        ]
    );
    assert!(long_files(tree.path(), 20).is_empty());
}
