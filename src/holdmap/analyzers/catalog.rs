//! The analyzer catalog: `<data dir>/analyzers.json`, a local, hand-edited list of opt-in
//! analyzers (format 1, schema/holdmap-analyzers.schema.json). A missing file is the empty
//! catalog; holdmap ships none and never writes one.
//!
//! Owns: reading the file (capped, strict: a repeated key, an unknown field or format version
//! is refused) and checking each entry. Must never: write, add to or approve anything in the
//! catalog; treat a file it cannot read as empty; quote more of the file in an error than a field
//! name, a state word or an analyzer name (it says where, and what to do); block on a file that
//! is not a regular one (a named pipe in its place).

use std::io::Read as _;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::clients::json::{self, Flavour, Kind, Node};
use crate::limits;

/// The catalog format this holdmap reads.
pub(crate) const FORMAT: u64 = 1;

/// The name of the built-in analyzer; no catalog entry may take it.
pub(crate) const BUILTIN: &str = "mcp-pins";

/// The catalog file's name in the data directory.
pub(crate) const FILE_NAME: &str = "analyzers.json";

/// What an analyzer's entry says of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum State {
    /// A person approved it: `holdmap analyze NAME` may run it.
    Approved,
    /// Listed, not yet approved: never runs.
    Pending,
    /// Switched off: never runs.
    Disabled,
}

impl State {
    pub(crate) fn label(self) -> &'static str {
        match self {
            State::Approved => "approved",
            State::Pending => "pending",
            State::Disabled => "disabled",
        }
    }
}

/// One analyzer the catalog lists.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) title: String,
    /// What it looks at and why, in a sentence.
    pub(crate) purpose: String,
    /// Where it comes from (a repository and a release, a vendor, "written by me").
    pub(crate) source: String,
    /// What confines it when it runs.
    pub(crate) sandbox: String,
    /// The hosts it declares it talks to; empty: none.
    pub(crate) network: Vec<String>,
    pub(crate) state: State,
    /// The program and arguments that would run it (this version never runs it).
    #[serde(default)]
    pub(crate) command: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(rename = "$schema", default)]
    _schema: Option<String>,
    format: u64,
    catalog_version: String,
    analyzers: Vec<Entry>,
}

/// A catalog read from its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Catalog {
    pub(crate) version: String,
    pub(crate) analyzers: Vec<Entry>,
}

/// The catalog file, and what reading it gave.
#[derive(Debug)]
pub(crate) struct CatalogAt {
    pub(crate) path: PathBuf,
    pub(crate) read: Result<Option<Catalog>, CatalogError>,
}

impl CatalogAt {
    pub(crate) fn exists(&self) -> bool {
        !matches!(self.read, Ok(None))
    }
    /// The entries, or none when the file is missing or bad.
    pub(crate) fn entries(&self) -> &[Entry] {
        match &self.read {
            Ok(Some(c)) => &c.analyzers,
            _ => &[],
        }
    }
    pub(crate) fn version(&self) -> Option<&str> {
        match &self.read {
            Ok(Some(c)) => Some(&c.version),
            _ => None,
        }
    }
}

/// Why the catalog could not be read. Each says the file, where, and what to do.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum CatalogError {
    #[error(
        "the analyzer catalog {path} could not be read ({why}): make it readable by this account, or move it away to use only the built-in analyzer"
    )]
    Io { path: String, why: String },
    #[error(
        "the analyzer catalog {path} is {kind}, not a file: holdmap reads only a regular file there; remove it, or put a format-{FORMAT} catalog (schema/holdmap-analyzers.schema.json) in its place"
    )]
    NotAFile { path: String, kind: &'static str },
    #[error(
        "the analyzer catalog {path} is larger than {max} bytes: it is not a catalog holdmap reads; replace it with a format-{FORMAT} catalog (schema/holdmap-analyzers.schema.json) or move it away"
    )]
    TooBig { path: String, max: u64 },
    #[error(
        "the analyzer catalog {path} is not valid JSON at line {line}, column {col}: {what}; fix that line (schema/holdmap-analyzers.schema.json describes the format) or move the file away"
    )]
    Syntax {
        path: String,
        line: usize,
        col: usize,
        what: String,
    },
    #[error(
        "the analyzer catalog {path} is format {found}, which this holdmap does not read (it reads format {FORMAT}): use a holdmap that reads it, or rewrite the file as format {FORMAT}"
    )]
    Format { path: String, found: String },
    #[error(
        "the analyzer catalog {path} has a bad entry at line {line}: {what}; fix it (schema/holdmap-analyzers.schema.json describes the format) or move the file away"
    )]
    Invalid {
        path: String,
        line: usize,
        what: String,
    },
}

/// The catalog file in `data_dir`, read.
pub(crate) fn read_in(data_dir: &Path) -> CatalogAt {
    let path = data_dir.join(FILE_NAME);
    let read = read_file(&path);
    CatalogAt { path, read }
}

fn read_file(path: &Path) -> Result<Option<Catalog>, CatalogError> {
    let shown = path.display().to_string();
    let io = |e: std::io::Error| CatalogError::Io {
        path: shown.clone(),
        why: e.to_string(),
    };
    let max = limits::HOLDMAP_ANALYZER_CATALOG_BYTES_MAX;
    let bytes = match read_regular(path, max) {
        Ok(b) => b,
        Err(Unread::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(Unread::Io(e)) => return Err(io(e)),
        Err(Unread::NotAFile(kind)) => return Err(CatalogError::NotAFile { path: shown, kind }),
        Err(Unread::TooBig) => return Err(CatalogError::TooBig { path: shown, max }),
    };
    let text = String::from_utf8(bytes).map_err(|e| CatalogError::Syntax {
        path: shown.clone(),
        line: line_of(&[], 0),
        col: 0,
        what: format!("not UTF-8 after byte {}", e.utf8_error().valid_up_to()),
    })?;
    parse(&text, &shown).map(Some)
}

/// Why a file holdmap reads whole was not read.
#[derive(Debug)]
pub(crate) enum Unread {
    Io(std::io::Error),
    /// It is something else than a regular file: what, in words (`a named pipe (FIFO)`).
    NotAFile(&'static str),
    /// It is larger than the cap.
    TooBig,
}

/// The bytes of the regular file at `path`, at most `max` of them. The file is opened without
/// blocking (a named pipe or a device would otherwise hang holdmap in `open`) and judged by what
/// was opened, not by a look at the path beforehand that another process could race.
pub(crate) fn read_regular(path: &Path, max: u64) -> Result<Vec<u8>, Unread> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(Unread::Io)?;
    let kind = file.metadata().map_err(Unread::Io)?.file_type();
    if !kind.is_file() {
        return Err(Unread::NotAFile(if kind.is_fifo() {
            "a named pipe (FIFO)"
        } else if kind.is_dir() {
            "a directory"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        }));
    }
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(Unread::Io)?;
    if bytes.len() as u64 > max {
        return Err(Unread::TooBig);
    }
    Ok(bytes)
}

/// Parses a catalog's text; `path` is only for messages.
pub(crate) fn parse(text: &str, path: &str) -> Result<Catalog, CatalogError> {
    let root = json::parse(text, Flavour::STRICT).map_err(|e| CatalogError::Syntax {
        path: path.to_string(),
        line: e.line,
        col: e.col,
        what: e.what.clone(),
    })?;
    // The version is checked before anything else, so a newer format is refused as such rather
    // than as a list of unknown fields.
    let found = match root.get("format") {
        Some(n) => text.get(n.span.clone()).unwrap_or("?").to_string(),
        None => "missing (no `format` field)".to_string(),
    };
    if found != FORMAT.to_string() {
        return Err(CatalogError::Format {
            path: path.to_string(),
            found,
        });
    }
    // The shape is checked on the parsed tree first, so an error names the field and the type
    // it takes; serde's own messages quote the file's values (`invalid type: string "…"`) and
    // are never passed on.
    if let Err((at, what)) = check_shape(&root) {
        return Err(CatalogError::Invalid {
            path: path.to_string(),
            line: line_of(text.as_bytes(), at),
            what,
        });
    }
    let file: File = serde_json::from_str(text).map_err(|e| CatalogError::Invalid {
        path: path.to_string(),
        line: e.line(),
        what: "it does not match the format".into(),
    })?;
    debug_assert_eq!(file.format, FORMAT);
    let lines: Vec<usize> = root
        .get("analyzers")
        .and_then(Node::elements)
        .map(|els| {
            els.iter()
                .map(|n| line_of(text.as_bytes(), n.span.start))
                .collect()
        })
        .unwrap_or_default();
    let invalid = |at: usize, what: String| CatalogError::Invalid {
        path: path.to_string(),
        line: lines.get(at).copied().unwrap_or(1),
        what,
    };
    if file.catalog_version.trim().is_empty() || file.catalog_version.chars().count() > 64 {
        return Err(invalid(
            usize::MAX,
            "`catalog_version` must be 1 to 64 characters".into(),
        ));
    }
    if file.analyzers.len() > limits::HOLDMAP_ANALYZERS_MAX {
        return Err(invalid(
            limits::HOLDMAP_ANALYZERS_MAX,
            format!(
                "more than {} analyzers; holdmap reads at most that many",
                limits::HOLDMAP_ANALYZERS_MAX
            ),
        ));
    }
    for (at, e) in file.analyzers.iter().enumerate() {
        if let Err(what) = check_entry(e) {
            return Err(invalid(at, what));
        }
        if file.analyzers.iter().take(at).any(|o| o.name == e.name) {
            return Err(invalid(
                at,
                format!("`{}` is listed twice; keep one entry", e.name),
            ));
        }
    }
    Ok(Catalog {
        version: file.catalog_version,
        analyzers: file.analyzers,
    })
}

/// Whether `name` is an analyzer name: 1 to 64 of `a-z`, `0-9`, `-`, starting with a letter or
/// digit (it becomes a file name in the store, so nothing else is allowed).
pub(crate) fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
}

fn check_entry(e: &Entry) -> Result<(), String> {
    if !valid_name(&e.name) {
        // Not quoted: a value that is not a name could be anything pasted there.
        return Err(
            "its `name` is not an analyzer name: use 1 to 64 of a-z, 0-9 and -, not starting with -"
                .into(),
        );
    }
    if e.name == BUILTIN {
        return Err(format!(
            "`{BUILTIN}` is the built-in analyzer's name; give this one another"
        ));
    }
    for (field, value) in [
        ("title", &e.title),
        ("purpose", &e.purpose),
        ("source", &e.source),
        ("sandbox", &e.sandbox),
    ] {
        if value.trim().is_empty()
            || value.chars().count() > limits::HOLDMAP_ANALYZER_TEXT_CHARS_MAX
        {
            return Err(format!(
                "`{field}` of `{}` must be 1 to {} characters",
                e.name,
                limits::HOLDMAP_ANALYZER_TEXT_CHARS_MAX
            ));
        }
    }
    for host in &e.network {
        let ok = (1..=253).contains(&host.len())
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '*'));
        if !ok {
            return Err(format!(
                "`network` of `{}` lists something that is not a host name (write `api.osv.dev`, or `[]` for none)",
                e.name
            ));
        }
    }
    if let Some(cmd) = &e.command
        && cmd.first().is_none_or(|c| c.is_empty())
    {
        return Err(format!(
            "`command` of `{}` must start with a program",
            e.name
        ));
    }
    Ok(())
}

/// The 1-based line of byte `at`.
fn line_of(bytes: &[u8], at: usize) -> usize {
    bytes
        .get(..at)
        .unwrap_or(bytes)
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// What a field of the format holds.
#[derive(Clone, Copy)]
enum Shape {
    Text,
    Number,
    List,
    TextList,
    OptionalTextList,
    StateWord,
}

impl Shape {
    fn expected(self) -> &'static str {
        match self {
            Shape::Text => "a string",
            Shape::Number => "a number",
            Shape::List => "a list of analyzer entries",
            Shape::TextList => "a list of strings",
            Shape::OptionalTextList => "a list of strings (the program first), or null",
            Shape::StateWord => "one of \"approved\", \"pending\" or \"disabled\"",
        }
    }

    fn fits(self, n: &Node) -> bool {
        let texts = |n: &Node| {
            n.elements()
                .is_some_and(|els| els.iter().all(|e| e.as_str().is_some()))
        };
        match self {
            Shape::Text => n.as_str().is_some(),
            Shape::Number => matches!(n.kind, Kind::Number),
            Shape::List => n.elements().is_some(),
            Shape::TextList => texts(n),
            Shape::OptionalTextList => matches!(n.kind, Kind::Null) || texts(n),
            Shape::StateWord => n
                .as_str()
                .is_some_and(|s| ["approved", "pending", "disabled"].contains(&s)),
        }
    }
}

const TOP: &[(&str, Shape, bool)] = &[
    ("$schema", Shape::Text, false),
    ("format", Shape::Number, true),
    ("catalog_version", Shape::Text, true),
    ("analyzers", Shape::List, true),
];

const ENTRY: &[(&str, Shape, bool)] = &[
    ("name", Shape::Text, true),
    ("title", Shape::Text, true),
    ("purpose", Shape::Text, true),
    ("source", Shape::Text, true),
    ("sandbox", Shape::Text, true),
    ("network", Shape::TextList, true),
    ("state", Shape::StateWord, true),
    ("command", Shape::OptionalTextList, false),
];

/// The first place where the catalog's tree does not have the format's shape (its byte
/// offset), and what is wrong in words that name fields and types, never the file's values.
fn check_shape(root: &Node) -> Result<(), (usize, String)> {
    check_object(root, TOP, "the catalog")?;
    for (i, e) in root
        .get("analyzers")
        .and_then(Node::elements)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        check_object(e, ENTRY, &format!("analyzer entry {}", i + 1))?;
    }
    Ok(())
}

fn check_object(
    n: &Node,
    fields: &[(&str, Shape, bool)],
    what: &str,
) -> Result<(), (usize, String)> {
    let Some(members) = n.members() else {
        return Err((n.span.start, format!("{what} must be an object ({{ … }})")));
    };
    for m in members {
        match fields.iter().find(|(name, _, _)| *name == m.key) {
            None => {
                let allowed: Vec<&str> = fields.iter().map(|(name, _, _)| *name).collect();
                return Err((
                    m.key_span.start,
                    format!(
                        "{what} has a field the format does not have{}; remove it (the fields are {})",
                        shown_key(&m.key),
                        allowed.join(", ")
                    ),
                ));
            }
            Some((name, shape, _)) if !shape.fits(&m.value) => {
                return Err((
                    m.value.span.start,
                    format!("`{name}` of {what} must be {}", shape.expected()),
                ));
            }
            Some(_) => {}
        }
    }
    if let Some((name, _, _)) = fields
        .iter()
        .find(|(name, _, required)| *required && n.get(name).is_none())
    {
        return Err((n.span.start, format!("{what} has no `{name}`; add it")));
    }
    Ok(())
}

/// A key named back only when it looks like a field name (a key can be anything, a token
/// pasted by mistake too).
fn shown_key(key: &str) -> String {
    let plain = (1..=32).contains(&key.len())
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c == '_' || c == '$');
    if plain {
        format!(" (`{key}`)")
    } else {
        String::new()
    }
}
