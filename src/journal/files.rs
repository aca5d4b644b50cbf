//! The journal's files on disk: the database and its WAL files created or tightened to 0600,
//! and the machine id file that seeds the chain.

use std::fs::{File, OpenOptions, Permissions};
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use super::JournalError;
use super::reader::Reader;

/// The only mode the journal, its WAL files and the machine id may have: the decisions and their
/// arguments' digests are the user's business alone.
const PRIVATE_MODE: u32 = 0o600;

/// Tightens an existing file to 0600 if any bit beyond owner read/write is set.
fn tighten(file: &File, path: &Path) -> Result<(), JournalError> {
    let perm_err = |source| JournalError::Permissions {
        path: path.to_path_buf(),
        source,
    };
    let mode = file.metadata().map_err(perm_err)?.permissions().mode();
    if mode & 0o7777 & !PRIVATE_MODE != 0 {
        // fchmod on the open file, not chmod on the path: the path could be swapped in between.
        file.set_permissions(Permissions::from_mode(PRIVATE_MODE))
            .map_err(perm_err)?;
    }
    Ok(())
}

/// Creates the journal file 0600 before SQLite sees it (SQLite would use the umask), or tightens an
/// existing one, together with any WAL files left from an earlier run.
pub(super) fn prepare_db_file(path: &Path) -> Result<(), JournalError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(PRIVATE_MODE)
        .open(path)
        .map_err(|source| JournalError::CreateFile {
            path: path.to_path_buf(),
            source,
        })?;
    tighten(&file, path)?;
    for suffix in ["-wal", "-shm"] {
        let mut side = path.as_os_str().to_owned();
        side.push(suffix);
        let side = PathBuf::from(side);
        // SQLite gives new WAL files the database's mode; one left over may predate the fix above.
        match OpenOptions::new().read(true).open(&side) {
            Ok(f) => tighten(&f, &side)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(JournalError::Permissions { path: side, source }),
        }
    }
    Ok(())
}

/// Whether the journal at `db_path` holds at least one entry. A missing file or table counts as
/// empty. The daemon asks this before [`load_or_create_machine_id`], since the machine id must
/// exist before [`Journal::open`](super::Journal::open) and may only be created for an empty
/// journal.
pub(crate) fn journal_has_entries(db_path: &Path) -> Result<bool, JournalError> {
    match Reader::open(db_path) {
        Ok(reader) => Ok(reader.count()? > 0),
        Err(JournalError::NoJournalYet { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Reads the machine id (trimmed), or creates a random 32-hex-character one, mode 0600, when
/// `journal_is_empty`. A missing or empty file next to a journal with entries is an error: the id
/// seeds the chain, and a new one would make every existing entry fail verification.
pub fn load_or_create_machine_id(
    path: &Path,
    journal_is_empty: bool,
) -> Result<String, JournalError> {
    let io_err = |source| JournalError::MachineIdIo {
        path: path.to_path_buf(),
        source,
    };
    match File::open(path) {
        Ok(mut file) => {
            tighten(&file, path)?;
            let mut text = String::new();
            file.read_to_string(&mut text).map_err(io_err)?;
            let id = text.trim();
            if !id.is_empty() {
                return Ok(id.to_owned());
            }
            if !journal_is_empty {
                return Err(JournalError::MachineIdEmpty {
                    path: path.to_path_buf(),
                });
            }
            // An empty file next to an empty journal is a creation interrupted by a crash:
            // nothing depends on it yet, so finish the job.
            write_machine_id(path, false)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !journal_is_empty {
                return Err(JournalError::MachineIdMissing {
                    path: path.to_path_buf(),
                });
            }
            write_machine_id(path, true)
        }
        Err(source) => Err(io_err(source)),
    }
}

fn write_machine_id(path: &Path, create_new: bool) -> Result<String, JournalError> {
    let io_err = |source| JournalError::MachineIdIo {
        path: path.to_path_buf(),
        source,
    };
    let id = crate::ids::random_hex(16).map_err(|source| JournalError::Random { source })?;
    let mut options = OpenOptions::new();
    options.write(true).mode(PRIVATE_MODE);
    if create_new {
        // create_new: if another process won the race, read its id instead of overwriting it.
        options.create_new(true);
    } else {
        options.truncate(true);
    }
    let mut file = match options.open(path) {
        Ok(f) => f,
        Err(e) if create_new && e.kind() == std::io::ErrorKind::AlreadyExists => {
            return load_or_create_machine_id(path, true);
        }
        Err(source) => return Err(io_err(source)),
    };
    tighten(&file, path)?;
    file.write_all(format!("{id}\n").as_bytes())
        .map_err(io_err)?;
    file.sync_all().map_err(io_err)?;
    // The directory entry must be durable too: losing the file after entries were chained on its
    // id would leave a journal that can never verify.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        File::open(dir).and_then(|d| d.sync_all()).map_err(io_err)?;
    }
    Ok(id)
}
