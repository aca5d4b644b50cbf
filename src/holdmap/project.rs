//! Which project a process works in: the nearest folder at or above its working directory with a
//! project marker (package.json, Cargo.toml, pyproject.toml, go.mod, Gemfile, .git …), its name,
//! and the git branch checked out there.
//!
//! Owns: the bounded walk up from a working directory and the bounded reads of `package.json`,
//! `.git/HEAD` and a `.git` file. Must never: write anything, read a file past its bound, climb
//! more than `HOLDMAP_PROJECT_LEVELS_MAX` folders, report `/` or the home folder itself as a
//! project, or return a name with control characters in it.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::limits::{
    HOLDMAP_GIT_HEAD_BYTES_MAX, HOLDMAP_PACKAGE_JSON_BYTES_MAX, HOLDMAP_PROJECT_LEVELS_MAX,
};
use crate::text;

/// A project folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Project {
    pub(crate) name: String,
    pub(crate) root: PathBuf,
    /// The branch `.git/HEAD` names; `None` when detached or not a git checkout.
    pub(crate) branch: Option<String>,
}

/// Files or folders whose presence makes a folder a project.
const MARKERS: &[&str] = &[
    "package.json",
    "Cargo.toml",
    "pyproject.toml",
    "go.mod",
    "Gemfile",
    "composer.json",
    "deno.json",
    "deno.jsonc",
    ".git",
];

/// The project `cwd` is in, if any (bounded walk up; never `/` or the home folder itself).
pub(crate) fn project_of(cwd: &Path) -> Option<Project> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    project_in(cwd, home.as_deref())
}

/// `project_of` with the home folder given, for tests.
pub(crate) fn project_in(cwd: &Path, home: Option<&Path>) -> Option<Project> {
    if !cwd.is_absolute() {
        return None;
    }
    let root = cwd
        .ancestors()
        .take(HOLDMAP_PROJECT_LEVELS_MAX)
        .filter(|dir| dir.parent().is_some() && Some(*dir) != home)
        .find(|dir| MARKERS.iter().any(|m| dir.join(m).exists()))?;
    let name = package_name(root).unwrap_or_else(|| {
        root.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    Some(Project {
        name: text::visible(&name),
        root: root.to_path_buf(),
        branch: branch_above(root, home).map(|b| text::visible(&b)),
    })
}

/// At most `max` bytes of `path`; `None` if it cannot be read or is longer.
fn read_bounded(path: &Path, max: u64) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    File::open(path)
        .ok()?
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .ok()?;
    (u64::try_from(bytes.len()).ok()? <= max).then_some(bytes)
}

/// The `name` of `root/package.json`, if it is small enough and parses.
fn package_name(root: &Path) -> Option<String> {
    let bytes = read_bounded(&root.join("package.json"), HOLDMAP_PACKAGE_JSON_BYTES_MAX)?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    let name = value.get("name")?.as_str()?.trim();
    (!name.is_empty()).then(|| name.to_owned())
}

/// The branch of the git checkout `root` is in: the nearest `.git` at or above it (a monorepo's
/// package sits below the checkout's root), within the same bound as the project walk, and
/// below the home folder (a dotfiles checkout of the home folder is not the project's).
fn branch_above(root: &Path, home: Option<&Path>) -> Option<String> {
    let dot_git = root
        .ancestors()
        .take(HOLDMAP_PROJECT_LEVELS_MAX)
        .take_while(|dir| dir.parent().is_some() && Some(*dir) != home)
        .map(|dir| dir.join(".git"))
        .find(|g| g.exists())?;
    let git_dir = if dot_git.is_file() {
        // A worktree or submodule: `.git` is a file naming the real git folder.
        let bytes = read_bounded(&dot_git, HOLDMAP_GIT_HEAD_BYTES_MAX)?;
        let text = String::from_utf8(bytes).ok()?;
        let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
        let target = Path::new(target);
        match dot_git.parent() {
            Some(parent) if target.is_relative() => parent.join(target),
            _ => target.to_path_buf(),
        }
    } else {
        dot_git
    };
    branch_of_head(&read_bounded(
        &git_dir.join("HEAD"),
        HOLDMAP_GIT_HEAD_BYTES_MAX,
    )?)
}

/// The branch a `HEAD` file names (`ref: refs/heads/X` → X); `None` when detached.
fn branch_of_head(head: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(head).ok()?;
    let branch = text.lines().next()?.strip_prefix("ref:")?.trim();
    let branch = branch.strip_prefix("refs/heads/")?;
    (!branch.is_empty()).then(|| branch.to_owned())
}

/// The project as the tools show it (matches `schema`).
pub(crate) fn to_json(p: &Project) -> Value {
    json!({
        "name": p.name,
        "root": text::visible(&p.root.to_string_lossy()),
        "branch": p.branch,
    })
}

/// A closed object schema of `to_json`.
pub(crate) fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": { "type": "string" },
            "root": { "type": "string" },
            "branch": { "anyOf": [{ "type": "string" }, { "type": "null" }] },
        },
        "required": ["name", "root", "branch"],
        "additionalProperties": false,
    })
}

#[cfg(test)]
mod tests;
