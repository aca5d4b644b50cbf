//! The checks of what the database holds, read-only: the journal verifies, its files can be
//! written, the stored policy compiles, the enrolled agents are current.

use std::path::{Path, PathBuf};

use super::{Check, Ctx, Status, check};
use crate::config::Home;
use crate::journal::{ChainState, Reader};
use crate::text::visible;

fn machine_id(home: &Home) -> Option<String> {
    std::fs::read_to_string(home.machine_id_path())
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The journal verifies, read-only, as `holdcall verify` does.
pub(super) fn journal(ctx: &Ctx) -> Vec<Check> {
    let name = "journal";
    let Ok(home) = &ctx.home else {
        return Vec::new();
    };
    if !home.db_path().exists() {
        return vec![check(
            name,
            Status::Warn,
            "nothing recorded yet".into(),
            Some("it is created when the daemon first starts"),
        )];
    }
    let line = match Reader::open(&home.db_path())
        .and_then(|r| r.verify(machine_id(home).as_deref(), None))
    {
        Err(e) => check(
            name,
            Status::Fail,
            e.to_string(),
            Some("run `holdcall verify` for the details"),
        ),
        Ok(rep) => match rep.state {
            ChainState::Broken if rep.problems.is_empty() => check(
                name,
                Status::Fail,
                format!(
                    "the policies, budgets or agents tables do not match the journal ({} difference(s), the first: {}); the daemon refuses every call",
                    rep.tables.len(),
                    rep.tables
                        .first()
                        .map(|t| crate::text::visible(t))
                        .unwrap_or_default()
                ),
                Some("run `holdcall verify` to see every difference"),
            ),
            ChainState::Broken => check(
                name,
                Status::Fail,
                format!(
                    "fails verification ({} problem(s){})",
                    rep.problems.len(),
                    if rep.tables.is_empty() {
                        String::new()
                    } else {
                        format!(", and {} table difference(s)", rep.tables.len())
                    }
                ),
                Some("run `holdcall verify` to see which entries"),
            ),
            ChainState::Partial => check(
                name,
                Status::Warn,
                format!(
                    "{} entries link up, but the machine id is missing",
                    rep.entries
                ),
                Some("restore the machine-id file from a backup of the holdcall home"),
            ),
            ChainState::Empty => check(name, Status::Ok, "empty".into(), None),
            _ => check(
                name,
                Status::Ok,
                format!("{} entries, every link and hash checks", rep.entries),
                None,
            ),
        },
    };
    vec![line]
}

/// The database, its `-wal` and its `-shm` (whichever exist), and the home directory they live
/// in, can be written: an immutable `-shm` (`chattr +i`) made the daemon die of SIGBUS. Each
/// file is opened for writing without truncating, creating or writing anything (an immutable or
/// append-only file refuses that even to root); the directory is asked with access(2).
pub(super) fn database_files(ctx: &Ctx) -> Vec<Check> {
    let name = "database files";
    let Ok(home) = &ctx.home else {
        return Vec::new();
    };
    let db = home.db_path();
    if !db.exists() {
        // The journal check already says nothing is recorded yet.
        return Vec::new();
    }
    let mut files = vec![db.clone()];
    for suffix in ["-wal", "-shm"] {
        let mut path = db.clone().into_os_string();
        path.push(suffix);
        files.push(PathBuf::from(path));
    }
    let mut lines = Vec::new();
    if let Err(e) = nix::unistd::access(home.dir(), nix::unistd::AccessFlags::W_OK) {
        lines.push(unwritable(name, home.dir(), Some(e as i32), true));
    }
    for file in files.iter().filter(|f| f.exists()) {
        if let Err(e) = std::fs::OpenOptions::new().write(true).open(file) {
            lines.push(unwritable(name, file, e.raw_os_error(), false));
        }
    }
    if lines.is_empty() {
        let present: Vec<String> = files
            .iter()
            .filter(|f| f.exists())
            .filter_map(|f| f.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        lines.push(check(
            name,
            Status::Ok,
            format!("{} writable", present.join(", ")),
            None,
        ));
    }
    lines
}

/// The FAIL line for a database file (or the home directory) that cannot be written, by why.
fn unwritable(name: &str, path: &Path, errno: Option<i32>, directory: bool) -> Check {
    let shown = visible(&path.display().to_string());
    let (why, remedy) = match errno.map(nix::errno::Errno::from_raw) {
        Some(nix::errno::Errno::EPERM) => (
            "is immutable or append-only (chattr +i or +a), so the daemon cannot write to it",
            format!("as root: `chattr -i -a {shown}`, then `holdcall daemon restart`"),
        ),
        Some(nix::errno::Errno::EROFS) => (
            "is on a read-only file system",
            "remount it read-write, or move the holdcall home (--home, HOLDCALL_HOME)".to_string(),
        ),
        _ => (
            "is not writable by this user",
            format!("give this user write permission on {shown} (chown, chmod u+w)"),
        ),
    };
    let what = if directory {
        "the holdcall home"
    } else {
        "database file"
    };
    check(
        name,
        Status::Fail,
        format!("{what} {shown} {why}"),
        Some(&remedy),
    )
}

/// What `read` takes from the journal, or the one line to show instead: `none` (OK) when there
/// is no journal yet, the error (FAIL) when it cannot be read.
fn stored<T>(
    home: &Home,
    name: &str,
    none: &str,
    read: impl FnOnce(&Reader) -> Result<T, crate::journal::JournalError>,
) -> Result<T, Check> {
    if !home.db_path().exists() {
        return Err(check(name, Status::Ok, none.into(), None));
    }
    Reader::open(&home.db_path())
        .and_then(|r| read(&r))
        .map_err(|e| {
            check(
                name,
                Status::Fail,
                e.to_string(),
                Some("run `holdcall verify`"),
            )
        })
}

/// The stored policy compiles; how many rules.
pub(super) fn policy(ctx: &Ctx) -> Vec<Check> {
    let name = "policy";
    let Ok(home) = &ctx.home else {
        return Vec::new();
    };
    let rows = match stored(
        home,
        name,
        "no rules yet: every call is allowed",
        Reader::policies,
    ) {
        Ok(r) => r,
        Err(line) => return vec![line],
    };
    let stored: Vec<crate::policy::StoredPolicy> = rows
        .iter()
        .map(|r| crate::policy::StoredPolicy {
            seq: r.seq,
            id: r.id.clone(),
            text: r.text.clone(),
        })
        .collect();
    vec![match crate::policy::PolicySet::compile(&stored) {
        Ok(set) => check(
            name,
            Status::Ok,
            format!("{} rule(s) compile", set.info().len()),
            None,
        ),
        Err(e) => check(
            name,
            Status::Fail,
            format!("the stored policy does not compile: {e}"),
            Some("run `holdcall policy list` and remove the rule it names"),
        ),
    }]
}

/// What `enrolments` says while no agent is enrolled (or there is no journal yet).
const NO_AGENTS: &str = "no agents enrolled: every session is bound only by rules naming no agent";

/// Each enrolled agent: current, or STALE (the file changed since enrolment, so it matches no
/// process until it is enrolled again).
pub(super) fn enrolments(ctx: &Ctx) -> Vec<Check> {
    let name = "enrolments";
    let Ok(home) = &ctx.home else {
        return Vec::new();
    };
    let agents = match stored(home, name, NO_AGENTS, Reader::agents) {
        Ok(a) => a,
        Err(line) => return vec![line],
    };
    if agents.is_empty() {
        return vec![check(name, Status::Ok, NO_AGENTS.into(), None)];
    }
    agents
        .iter()
        .map(|a| match crate::agents::staleness(a) {
            Ok(()) => check(
                &format!("agent {}", visible(&a.name)),
                Status::Ok,
                format!("current ({})", visible(&a.path)),
                None,
            ),
            Err(why) => check(
                &format!("agent {}", visible(&a.name)),
                Status::Warn,
                format!(
                    "STALE: {}; it matches no process ({})",
                    visible(&why),
                    visible(&a.path)
                ),
                Some("enrol it again: `holdcall agent add NAME PATH` (`holdcall agent list` shows both)"),
            ),
        })
        .collect()
}
