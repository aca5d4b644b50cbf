//! Backups of client config files, the index that remembers them, atomic writes, and undo.
//!
//! Owns: `<holdcall home>/backups/` (0700): one file per backup (0600, a unique timestamped name,
//! created with O_EXCL so one is never overwritten) and `index.jsonl`, one line per write naming
//! the original path, the content hashes before and after, and the entries routed. Must never:
//! write a client file before its backup and index line are on disk, replace a symlink with a
//! file (the link's target is written), or restore over changes made since without `--force`.

use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Plan;
use super::RoutingError;
use crate::clients::{ClientConfigError, ClientId};
use crate::config::Home;
use crate::ids::sha256_hex;

/// One line of `index.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Record {
    /// `write` (init --write) or `undo` (the file as it was before an undo).
    pub(crate) kind: String,
    /// The backup's file name in the backups directory.
    pub(crate) backup: String,
    /// The config file's path as the client names it (may be a symlink).
    pub(crate) path: PathBuf,
    /// The file actually written (the symlink's target, if any).
    pub(crate) target: PathBuf,
    pub(crate) client: String,
    pub(crate) at: String,
    pub(crate) before_sha256: String,
    pub(crate) after_sha256: String,
    /// The entries this write routed: the key path of their group, then their name.
    #[serde(default)]
    pub(crate) routed: Vec<(Vec<String>, String)>,
    /// For an undo: the backup it restored.
    #[serde(default)]
    pub(crate) undoes: Option<String>,
}

/// The backups directory of one Holdcall home.
pub(crate) struct Backups {
    dir: PathBuf,
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ClientConfigError {
    let path = path.to_path_buf();
    move |source| ClientConfigError::Io {
        action,
        path,
        source,
    }
}

/// What an undo did.
pub(crate) struct Undone {
    pub(crate) path: PathBuf,
    pub(crate) backup: PathBuf,
    /// The backup of the content the undo replaced.
    pub(crate) saved_as: PathBuf,
}

impl Backups {
    pub(crate) fn of(home: &Home) -> Backups {
        Backups {
            dir: home.dir().join("backups"),
        }
    }

    fn index_path(&self) -> PathBuf {
        self.dir.join("index.jsonl")
    }

    /// Every record, oldest first; none when nothing was ever written. Unreadable lines are
    /// skipped (the index is a convenience for undo and doctor, not a ledger).
    pub(crate) fn records(&self) -> Vec<Record> {
        let Ok(text) = fs::read_to_string(self.index_path()) else {
            return Vec::new();
        };
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The entries of `path` that holdcall routed and no undo took back since.
    pub(crate) fn routed_by_us(&self, path: &Path) -> Vec<(Vec<String>, String)> {
        let records = self.records();
        let mut routed: Vec<(Vec<String>, String)> = Vec::new();
        for r in &records {
            if r.path != path {
                continue;
            }
            match r.kind.as_str() {
                "write" => {
                    for x in &r.routed {
                        if !routed.contains(x) {
                            routed.push(x.clone());
                        }
                    }
                }
                "undo" => {
                    if let Some(undone) = records
                        .iter()
                        .find(|w| Some(&w.backup) == r.undoes.as_ref())
                    {
                        routed.retain(|x| !undone.routed.contains(x));
                    }
                }
                _ => {}
            }
        }
        routed
    }

    /// Copies `bytes` into a new backup file and returns its name.
    fn new_backup(&self, client: &str, path: &Path, bytes: &[u8]) -> Result<String, RoutingError> {
        crate::config::ensure_private_dir(&self.dir).map_err(|e| ClientConfigError::Io {
            action: "create",
            path: self.dir.clone(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.9fZ");
        let file: String = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "config".into())
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        for n in 0..crate::limits::BACKUP_NAME_ATTEMPTS_MAX {
            let name = if n == 0 {
                format!("{stamp}-{client}-{file}.bak")
            } else {
                format!("{stamp}-{client}-{file}-{n}.bak")
            };
            let full = self.dir.join(&name);
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&full)
            {
                Ok(mut f) => {
                    f.write_all(bytes).map_err(io("write", &full))?;
                    f.sync_all().map_err(io("write", &full))?;
                    return Ok(name);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io("create", &full)(e).into()),
            }
        }
        Err(ClientConfigError::Io {
            action: "name a backup in",
            path: self.dir.clone(),
            source: std::io::Error::other("every backup name for this instant is taken"),
        }
        .into())
    }

    fn append(&self, record: &Record) -> Result<(), RoutingError> {
        let path = self.index_path();
        let mut line = serde_json::to_string(record)
            .map_err(|e| io("record a backup in", &path)(std::io::Error::other(e)))?;
        line.push('\n');
        let mut f = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&path)
            .map_err(io("open", &path))?;
        f.write_all(line.as_bytes()).map_err(io("write", &path))?;
        f.sync_all().map_err(io("write", &path))?;
        Ok(())
    }

    /// Writes a planned rewrite: backup, index line, then the file, atomically. Returns the
    /// backup's path.
    pub(crate) fn write(
        &self,
        client: ClientId,
        path: &Path,
        plan: &Plan,
    ) -> Result<PathBuf, RoutingError> {
        let target = fs::canonicalize(path).map_err(io("resolve", path))?;
        let now = fs::read(&target).map_err(io("read", &target))?;
        if now != plan.before.as_bytes() {
            return Err(RoutingError::Raced {
                path: path.to_path_buf(),
            });
        }
        let name = self.new_backup(client.id(), path, &now)?;
        self.append(&Record {
            kind: "write".into(),
            backup: name.clone(),
            path: path.to_path_buf(),
            target: target.clone(),
            client: client.id().into(),
            at: chrono::Utc::now().to_rfc3339(),
            before_sha256: sha256_hex(&now),
            after_sha256: sha256_hex(plan.after.as_bytes()),
            routed: plan.routed.clone(),
            undoes: None,
        })?;
        write_atomically(&target, plan.after.as_bytes())?;
        Ok(self.dir.join(name))
    }

    /// Restores the file a backup was taken of. The current content is backed up first.
    pub(crate) fn undo(&self, which: &str, force: bool) -> Result<Undone, RoutingError> {
        let name = Path::new(which)
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| RoutingError::Undo(format!("{which} does not name a backup")))?;
        let record = self
            .records()
            .into_iter()
            .rev()
            .find(|r| r.backup == name)
            .ok_or_else(|| {
                RoutingError::Undo(format!(
                    "{which} is not a backup holdcall made (it is not in {})",
                    self.index_path().display()
                ))
            })?;
        let backup = self.dir.join(name);
        let saved = fs::read(&backup).map_err(io("read", &backup))?;
        if sha256_hex(&saved) != record.before_sha256 {
            return Err(RoutingError::Undo(format!(
                "{} no longer holds what holdcall saved in it; not restoring it",
                backup.display()
            )));
        }
        let path = record.path.clone();
        let target = fs::canonicalize(&path).unwrap_or_else(|_| record.target.clone());
        let current = match fs::read(&target) {
            Ok(b) => Some(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io("read", &target)(e).into()),
        };
        let unchanged = current
            .as_deref()
            .is_some_and(|c| sha256_hex(c) == record.after_sha256);
        if !unchanged && !force {
            return Err(RoutingError::ChangedSince {
                path,
                backup: name.to_string(),
            });
        }
        let current = current.unwrap_or_default();
        let saved_name = self.new_backup(&record.client, &path, &current)?;
        self.append(&Record {
            kind: "undo".into(),
            backup: saved_name.clone(),
            path: path.clone(),
            target: target.clone(),
            client: record.client.clone(),
            at: chrono::Utc::now().to_rfc3339(),
            before_sha256: sha256_hex(&current),
            after_sha256: sha256_hex(&saved),
            routed: Vec::new(),
            undoes: Some(name.to_string()),
        })?;
        write_atomically(&target, &saved)?;
        Ok(Undone {
            path,
            backup,
            saved_as: self.dir.join(saved_name),
        })
    }
}

/// Replaces `target` (a regular file, never a symlink: callers resolve links first) with
/// `bytes`: a temporary file in the same directory with the same mode, synced, then renamed
/// over it, then the directory synced. A crash leaves the old file or the new one, never half.
pub(crate) fn write_atomically(target: &Path, bytes: &[u8]) -> Result<(), RoutingError> {
    let dir = target.parent().unwrap_or(Path::new("."));
    let mode = fs::metadata(target)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o600);
    let base = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let suffix = crate::ids::random_hex(6).map_err(io("name a temporary file for", target))?;
    let tmp = dir.join(format!(".{base}.holdcall-{suffix}.tmp"));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        // The final mode, set on the open file (umask does not apply to fchmod).
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        f.sync_all()?;
        fs::rename(&tmp, target)?;
        fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    Ok(result.map_err(io("write", target))?)
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn a_file_changed_since_it_was_read_is_not_written_and_gets_no_backup() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path().join("hc"));
        let file = dir.path().join("mcp.json");
        fs::write(&file, "{\"changed\": true}").unwrap();
        let plan = Plan {
            before: "{}".into(),
            after: "{\"x\": 1}".into(),
            routed: Vec::new(),
            connectors: Vec::new(),
        };
        let err = Backups::of(&home)
            .write(ClientId::Cursor, &file, &plan)
            .unwrap_err();
        assert!(matches!(err, RoutingError::Raced { .. }), "{err}");
        assert_eq!(fs::read_to_string(&file).unwrap(), "{\"changed\": true}");
        assert!(!dir.path().join("hc/backups").exists());
    }

    #[test]
    fn two_backups_in_the_same_instant_get_two_names() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path().join("hc"));
        let b = Backups::of(&home);
        let p = Path::new("/x/mcp.json");
        let names: Vec<String> = (0..5)
            .map(|_| b.new_backup("cursor", p, b"{}").unwrap())
            .collect();
        let mut unique = names.clone();
        unique.dedup();
        assert_eq!(unique.len(), 5, "{names:?}");
    }
}
