//! The findings store: one file per analyzer, `<data dir>/insights/NAME.json` (format 1), holding
//! its last run's record and that run's findings. A run replaces the analyzer's file whole
//! (temporary file, fsync, rename, fsync of the directory), so a reader sees the old run or the
//! new one, never half of one.
//!
//! Owns: writing and reading those files. Must never: keep findings of an earlier run beside a
//! newer one's; skip a file it cannot read without saying so; follow a name that is not an
//! analyzer name into a path; block on a file that is not a regular one (a named pipe); hand on
//! a finding whose enum fields hold words `list_insights` does not publish.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::clients::json::{self, Flavour};
use crate::holdmap::analyzers::Insight;
use crate::holdmap::analyzers::catalog::{Unread, read_regular, valid_name};
use crate::limits;

/// The store format this holdmap writes and reads.
pub(crate) const FORMAT: u64 = 1;

/// The store's folder in the data directory.
pub(crate) const DIR_NAME: &str = "insights";

/// The record of one analyzer's last run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Run {
    pub(crate) analyzer: String,
    /// Unix epoch, milliseconds.
    pub(crate) started_at_ms: u64,
    pub(crate) finished_at_ms: u64,
    /// Findings stored, and found beyond `limits::HOLDMAP_INSIGHTS_PER_RUN_MAX` and not stored.
    pub(crate) findings: u64,
    pub(crate) findings_left_out: u64,
    /// What the run looked at: MCP server entries, and config files read.
    pub(crate) servers_checked: u64,
    pub(crate) files_read: u64,
    pub(crate) holdmap_version: String,
    /// The catalog's version when the run started; None when there was no catalog (or it could
    /// not be read).
    pub(crate) catalog_version: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreFile {
    format: u64,
    run: Run,
    findings: Vec<Insight>,
}

/// Everything the store holds, and each file it could not read (as words saying what to do).
#[derive(Debug, Default)]
pub(crate) struct StoreRead {
    /// Last runs, newest first.
    pub(crate) runs: Vec<Run>,
    /// Findings, newest run first, then by severity (highest first) and id.
    pub(crate) insights: Vec<Insight>,
    pub(crate) errors: Vec<String>,
}

/// The store folder in `data_dir`.
pub(crate) fn dir_in(data_dir: &Path) -> PathBuf {
    data_dir.join(DIR_NAME)
}

/// Replaces `run.analyzer`'s stored findings with `findings`; the file written.
pub(crate) fn write(data_dir: &Path, run: &Run, findings: &[Insight]) -> Result<PathBuf, String> {
    if !valid_name(&run.analyzer) {
        return Err(format!(
            "`{}` is not an analyzer name",
            crate::text::visible(&run.analyzer)
        ));
    }
    let dir = dir_in(data_dir);
    let cannot = |what: &str, path: &Path, e: std::io::Error| {
        format!(
            "holdmap cannot {what} {} ({e}): make {} writable by this account, or set HOLDMAP_HOME to a directory that is, and run it again",
            path.display(),
            data_dir.display()
        )
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| cannot("create its findings folder", &dir, e))?;
    let file = StoreFile {
        format: FORMAT,
        run: run.clone(),
        findings: findings.to_vec(),
    };
    let mut bytes = serde_json::to_vec_pretty(&file)
        .map_err(|e| format!("holdmap could not encode the findings: {e}"))?;
    bytes.push(b'\n');
    let target = dir.join(format!("{}.json", run.analyzer));
    let temp = dir.join(format!(".{}.json.{}.tmp", run.analyzer, std::process::id()));
    let written = (|| {
        // A leftover of a run that died (same pid, reused) is removed, and the temp file is
        // created new: never opened through a link someone left in its place.
        let _ = std::fs::remove_file(&temp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)?;
        f.write_all(&bytes)?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(cannot("write", &temp, e));
    }
    if let Err(e) = std::fs::rename(&temp, &target) {
        let _ = std::fs::remove_file(&temp);
        return Err(cannot("replace", &target, e));
    }
    // The rename is durable only once the directory is.
    std::fs::File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| cannot("sync", &dir, e))?;
    Ok(target)
}

/// Everything stored in `data_dir`. A missing store is an empty one (no analyzer has run).
pub(crate) fn read(data_dir: &Path) -> StoreRead {
    let dir = dir_in(data_dir);
    let mut out = StoreRead::default();
    let listing = match std::fs::read_dir(&dir) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return out,
        Err(e) => {
            out.errors.push(format!(
                "holdmap cannot read its findings folder {} ({e}): make it readable by this account",
                dir.display()
            ));
            return out;
        }
    };
    let mut paths = Vec::new();
    for entry in listing {
        match entry {
            Ok(e) => paths.push(e.path()),
            Err(e) => out.errors.push(format!(
                "holdmap cannot list its findings folder {} ({e})",
                dir.display()
            )),
        }
    }
    paths.sort();
    let mut files = 0usize;
    for path in paths {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        // Temporary files of a run being written, and anything not a store file.
        if name.starts_with('.') || !name.ends_with(".json") {
            continue;
        }
        files += 1;
        if files > limits::HOLDMAP_ANALYZERS_MAX + 1 {
            out.errors.push(format!(
                "the findings folder {} holds more than {} files; holdmap read the first {} only: remove the files of analyzers you no longer use",
                dir.display(),
                limits::HOLDMAP_ANALYZERS_MAX + 1,
                limits::HOLDMAP_ANALYZERS_MAX + 1
            ));
            break;
        }
        match read_one(&path, name.trim_end_matches(".json")) {
            Ok(file) => {
                out.insights.extend(file.findings);
                out.runs.push(file.run);
            }
            Err(why) => out.errors.push(why),
        }
    }
    out.runs.sort_by(|a, b| {
        b.finished_at_ms
            .cmp(&a.finished_at_ms)
            .then(a.analyzer.cmp(&b.analyzer))
    });
    out.insights.sort_by(|a, b| {
        b.found_at_ms
            .cmp(&a.found_at_ms)
            .then(severity_rank(&b.severity).cmp(&severity_rank(&a.severity)))
            .then(a.id.cmp(&b.id))
    });
    out
}

/// `info` < `low` < `medium` < `high`.
pub(crate) fn severity_rank(s: &str) -> u8 {
    match s {
        "high" => 3,
        "medium" => 2,
        "low" => 1,
        _ => 0,
    }
}

fn read_one(path: &Path, stem: &str) -> Result<StoreFile, String> {
    let fix = |what: String| {
        let again = if valid_name(stem) {
            format!("run `holdmap analyze {stem}` to write it again, or delete it")
        } else {
            "delete it".to_string()
        };
        format!(
            "the findings file {} {what}; holdmap ignored none of it and listed nothing from it: {again}",
            path.display()
        )
    };
    if !valid_name(stem) {
        return Err(fix("is not named after an analyzer".into()));
    }
    let max = limits::HOLDMAP_INSIGHTS_FILE_BYTES_MAX;
    let bytes = read_regular(path, max).map_err(|e| match e {
        Unread::Io(e) => fix(format!("could not be read ({e})")),
        Unread::NotAFile(kind) => fix(format!("is {kind}, not a regular file")),
        Unread::TooBig => fix(format!("is larger than {max} bytes")),
    })?;
    let text = String::from_utf8(bytes).map_err(|_| fix("is not UTF-8".into()))?;
    json::parse(&text, Flavour::STRICT).map_err(|e| fix(format!("is not valid JSON ({e})")))?;
    let file: StoreFile = serde_json::from_str(&text)
        .map_err(|e| fix(format!("is not a format-{FORMAT} findings file ({e})")))?;
    if file.format != FORMAT {
        return Err(fix(format!(
            "is format {}, which this holdmap does not read",
            file.format
        )));
    }
    if file.run.analyzer != stem || file.findings.iter().any(|f| f.analyzer != stem) {
        return Err(fix(format!(
            "holds findings of another analyzer than `{stem}`"
        )));
    }
    // What list_insights publishes must stay inside its schema's enums, whoever wrote the file.
    for f in &file.findings {
        let word = [
            ("severity", Some(&f.severity), SEVERITIES),
            ("state", Some(&f.state), STATES),
            ("pin", f.pin.as_ref(), PINS),
            ("routing", f.routing.as_ref(), ROUTINGS),
        ]
        .into_iter()
        .find(|(_, v, allowed)| v.is_some_and(|v| !allowed.contains(&v.as_str())));
        if let Some((field, _, allowed)) = word {
            return Err(fix(format!(
                "is corrupt: a finding's `{field}` is not one of {}",
                allowed.join(", ")
            )));
        }
    }
    Ok(file)
}

/// The words a stored finding's fields may hold (list_insights publishes them as enums).
pub(crate) const SEVERITIES: &[&str] = &["info", "low", "medium", "high"];
pub(crate) const STATES: &[&str] = &["open", "acknowledged", "resolved"];
pub(crate) const PINS: &[&str] = &["pinned", "unpinned", "unknown"];
pub(crate) const ROUTINGS: &[&str] = &["routed", "not routed", "remote", "unrecognized"];
