//! Opt-in analyzers and their stored findings: the local catalog file under holdmap's data
//! directory (`catalog`), the one built-in analyzer (`builtin`: every configured MCP server,
//! pinned or not, routed through Holdcall or not; no network), the findings store (`store`),
//! the tools `list_analyzers` and `list_insights` (`tools`), and `holdmap analyze NAME`, the
//! only way an analyzer runs: a command a person types.
//!
//! Must never: run, install, add or approve an analyzer from an MCP tool; store a secret value
//! in a finding; treat an unreadable catalog or store as empty without saying so.

pub(crate) mod builtin;
pub(crate) mod catalog;
pub(crate) mod store;
mod tools;

#[cfg(test)]
mod tests;

use std::io::Write;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::clients::Places;
use crate::clients::routed::Judge;
use crate::holdmap::agents::capabilities::holdcall_judge;
use crate::holdmap::home;
use crate::limits;

pub(crate) use tools::TOOLS;

/// A stored finding (one element of a store file's `findings`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Insight {
    /// Stable: the same subject and rule give the same id on every run
    /// (`builtin::finding_id`).
    pub(crate) id: String,
    pub(crate) analyzer: String,
    /// The analyzer's rule that made it (`unpinned`, `not-routed`, …).
    pub(crate) rule: String,
    /// The agent product or client it concerns (`claude-code`, …).
    pub(crate) agent: String,
    /// `info`, `low`, `medium`, `high`.
    pub(crate) severity: String,
    /// `open`, `acknowledged`, `resolved`.
    pub(crate) state: String,
    /// What it is about (`mcp server github in ~/.claude.json`), and what was found.
    pub(crate) subject: String,
    pub(crate) title: String,
    pub(crate) detail: String,
    /// What to do about it, in one line (a `holdcall init` line, a pinned version to use).
    pub(crate) action: Option<String>,
    /// When the run that found it ended (Unix epoch, milliseconds).
    pub(crate) found_at_ms: u64,
    /// The config file it is about.
    pub(crate) source: Option<String>,
    /// The MCP server's name in that file.
    pub(crate) alias: Option<String>,
    /// The package or image the server runs (without a version).
    pub(crate) package: Option<String>,
    /// `pinned`, `unpinned`, `unknown`.
    pub(crate) pin: Option<String>,
    /// `routed`, `not routed`, `remote`, `unrecognized`.
    pub(crate) routing: Option<String>,
}

/// Every stored finding, newest run first; an error (saying which file and what to do) when a
/// store file cannot be read, rather than a shorter list.
pub(crate) fn stored_insights() -> Result<Vec<Insight>, String> {
    let dir = home::data_dir()?;
    let read = store::read(&dir);
    if !read.errors.is_empty() {
        return Err(read.errors.join("; "));
    }
    Ok(read.insights)
}

/// Exit codes of `holdmap analyze`: ran and stored; could not run or store; refused.
pub(crate) const EXIT_FAILED: i32 = 1;
pub(crate) const EXIT_REFUSED: i32 = 2;

/// `holdmap analyze NAME`: runs one approved analyzer and stores its findings; the exit code.
pub(crate) fn analyze_cli(name: &str) -> i32 {
    let places = Places::from_env().map_err(|e| e.to_string());
    analyze_at(
        name,
        home::data_dir(),
        places,
        &holdcall_judge(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    )
}

/// Now, Unix epoch milliseconds.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// `holdmap analyze` against a given data directory and client places (tests give temporary
/// ones). The summary goes to `out`, refusals and failures to `err`.
pub(crate) fn analyze_at(
    name: &str,
    data_dir: Result<PathBuf, String>,
    places: Result<Places, String>,
    judge: &Judge,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let data_dir = match data_dir {
        Ok(d) => d,
        Err(why) => {
            let _ = writeln!(err, "holdmap analyze: {why}");
            return EXIT_FAILED;
        }
    };
    let cat = catalog::read_in(&data_dir);
    if name != catalog::BUILTIN {
        let why = refusal(name, &cat);
        let _ = writeln!(err, "holdmap analyze: {why}");
        return EXIT_REFUSED;
    }
    if let Err(e) = &cat.read {
        // The built-in analyzer needs nothing from the catalog: it runs, and says so.
        let _ = writeln!(
            err,
            "holdmap analyze: warning: {e}. `{}` is built in and runs anyway; this run records no catalog version.",
            catalog::BUILTIN
        );
    }
    let places = match places {
        Ok(p) => p,
        Err(why) => {
            let _ = writeln!(
                err,
                "holdmap analyze: cannot tell where the client config files are: {why}"
            );
            return EXIT_FAILED;
        }
    };
    let started = now_ms();
    let mut checked = builtin::run(&places, judge, 0);
    let finished = now_ms().max(started);
    let left_out = checked
        .findings
        .len()
        .saturating_sub(limits::HOLDMAP_INSIGHTS_PER_RUN_MAX);
    checked
        .findings
        .truncate(limits::HOLDMAP_INSIGHTS_PER_RUN_MAX);
    for f in &mut checked.findings {
        f.found_at_ms = finished;
    }
    let run = store::Run {
        analyzer: catalog::BUILTIN.to_string(),
        started_at_ms: started,
        finished_at_ms: finished,
        findings: checked.findings.len() as u64,
        findings_left_out: left_out as u64,
        servers_checked: checked.servers,
        files_read: checked.files_read,
        holdmap_version: env!("CARGO_PKG_VERSION").to_string(),
        catalog_version: cat.version().map(str::to_string),
    };
    let path = match store::write(&data_dir, &run, &checked.findings) {
        Ok(p) => p,
        Err(why) => {
            let _ = writeln!(
                err,
                "holdmap analyze: {why}. The run found {} findings; none is stored.",
                checked.findings.len()
            );
            return EXIT_FAILED;
        }
    };
    let _ = out.write_all(summary(&run, &checked, &places, &path).as_bytes());
    0
}

/// Why `name` does not run (it is not the built-in analyzer), in words saying what to do.
fn refusal(name: &str, cat: &catalog::CatalogAt) -> String {
    let builtin = catalog::BUILTIN;
    if let Err(e) = &cat.read {
        return format!(
            "{e}. holdmap cannot tell what `{}` is while its catalog is unreadable; `holdmap analyze {builtin}` runs the built-in analyzer meanwhile",
            crate::text::visible(name)
        );
    }
    let Some(entry) = cat.entries().iter().find(|e| e.name == name) else {
        let mut names = vec![format!("{builtin} (built in)")];
        names.extend(
            cat.entries()
                .iter()
                .map(|e| format!("{} ({})", e.name, e.state.label())),
        );
        let where_ = if cat.exists() {
            format!("the catalog {}", cat.path.display())
        } else {
            format!("no catalog file ({} does not exist)", cat.path.display())
        };
        return format!(
            "there is no analyzer named `{}`: holdmap knows {} ({where_}). Run `holdmap analyze {builtin}`, or check the name with list_analyzers",
            crate::text::visible(name),
            names.join(", ")
        );
    };
    match entry.state {
        catalog::State::Pending => format!(
            "`{name}` is pending in the catalog {}: it has not been approved, so it does not run. A person approves it by reading its source and setting its \"state\" to \"approved\" in that file; holdmap never approves one",
            cat.path.display()
        ),
        catalog::State::Disabled => format!(
            "`{name}` is disabled in the catalog {}: it does not run. Set its \"state\" to \"approved\" there to turn it back on",
            cat.path.display()
        ),
        catalog::State::Approved => format!(
            "`{name}` is approved in the catalog {}, but this version of holdmap runs only its built-in analyzer (`{builtin}`): it does not run catalog analyzers yet. Run `{name}` yourself as its source ({}) documents, or `holdmap analyze {builtin}`",
            cat.path.display(),
            entry.source
        ),
    }
}

/// The person's summary of one run.
fn summary(
    run: &store::Run,
    checked: &builtin::Checked,
    places: &Places,
    path: &std::path::Path,
) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let plural = |n: u64, one: &str, many: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {many}")
        }
    };
    let _ = writeln!(
        s,
        "{}: checked {} in {} of {} clients ({}: user files, and the project files of {}).",
        run.analyzer,
        plural(run.servers_checked, "MCP server", "MCP servers"),
        plural(run.files_read, "config file", "config files"),
        checked.clients.len(),
        checked.clients.join(", "),
        places.project.display()
    );
    let _ = writeln!(s, "{}.", plural(run.findings, "finding", "findings"));
    for f in &checked.findings {
        let _ = writeln!(s, "  {:<6}  {}: {}", f.severity, f.rule, f.title);
        if let Some(a) = &f.action {
            let _ = writeln!(s, "          to do: {a}");
        }
    }
    if run.findings_left_out > 0 {
        let _ = writeln!(
            s,
            "{} more findings were not stored (at most {} a run).",
            run.findings_left_out,
            limits::HOLDMAP_INSIGHTS_PER_RUN_MAX
        );
    }
    let _ = writeln!(
        s,
        "Stored in {} (this run replaced the previous one); list_insights in `holdmap mcp` reads them.",
        path.display()
    );
    s
}
