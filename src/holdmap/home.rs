//! holdmap's data directory: where the analyzer catalog and stored findings live.
//! `HOLDMAP_HOME` when set (absolute), else `$XDG_DATA_HOME/holdmap`, else
//! `~/.local/share/holdmap`, so an MCP client's minimal environment (HOME only) finds the same
//! directory as the person's shell.
//!
//! Must never: fall back to a relative path or the current directory.

use std::path::PathBuf;

/// The data directory, or why there is none (in words the user can act on).
pub(crate) fn data_dir() -> Result<PathBuf, String> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    if let Some(h) = var("HOLDMAP_HOME") {
        return Ok(h);
    }
    if let Some(x) = var("XDG_DATA_HOME") {
        return Ok(x.join("holdmap"));
    }
    var("HOME")
        .map(|h| h.join(".local/share/holdmap"))
        .ok_or_else(|| {
            "holdmap cannot tell where its data directory is: neither HOLDMAP_HOME, XDG_DATA_HOME \
             nor HOME is set to an absolute path; set HOME (or HOLDMAP_HOME) and run it again"
                .to_string()
        })
}
