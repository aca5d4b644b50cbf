//! The first exchange on every connection, of either protocol: `daemon.hello`, which asks the
//! daemon which home it serves and gives the connection no role.

use serde::{Deserialize, Serialize};

use crate::config::Home;

/// Which home the daemon serves: asked on every connection before anything else, on
/// management and session connections alike (it gives a connection no role).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub(crate) enum HelloRequest {
    #[serde(rename = "daemon.hello")]
    Hello,
}

/// The answer to `daemon.hello`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub(crate) enum HelloResponse {
    /// The home this daemon serves, as it proves it.
    #[serde(rename = "daemon.hello")]
    Hello(Serves),
    #[serde(rename = "error")]
    Error { message: String },
}

/// Which home a daemon serves: the database it opened (its device and inode when it opened it)
/// and the machine id it read. A client compares both with its own reading of its home, so a
/// daemon of another home moved onto this home's socket path is refused (issue 12, item 5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Serves {
    /// The home directory, as the daemon was given it (for messages only: never compared).
    pub(crate) home: String,
    pub(crate) db_dev: u64,
    pub(crate) db_ino: u64,
    pub(crate) machine_id: String,
}

impl Serves {
    /// What `home` holds now: its database's device and inode and its machine id; None for
    /// what is missing or unreadable.
    fn of(home: &Home) -> (Option<(u64, u64)>, Option<String>) {
        use std::os::unix::fs::MetadataExt as _;
        let db = std::fs::metadata(home.db_path())
            .ok()
            .map(|m| (m.dev(), m.ino()));
        let id = std::fs::read_to_string(home.machine_id_path())
            .ok()
            .map(|t| t.trim().to_string());
        (db, id)
    }

    /// None when this daemon serves `home`; else why not, in words that name both homes.
    pub(crate) fn mismatch(&self, home: &Home) -> Option<String> {
        let (db, id) = Serves::of(home);
        let theirs = format!(
            "it serves the home {} (database device {}, inode {})",
            crate::text::visible(&self.home),
            self.db_dev,
            self.db_ino
        );
        let ours = home.db_path();
        let ours = crate::text::visible(&ours.to_string_lossy());
        let why = match (db, id) {
            (None, _) => format!("{theirs}, and this home has no database at {ours}"),
            (Some((dev, ino)), _) if (dev, ino) != (self.db_dev, self.db_ino) => {
                format!("{theirs}, not {ours} (device {dev}, inode {ino})")
            }
            (Some(_), None) => format!("{theirs}, and this home has no machine id"),
            (Some(_), Some(id)) if id != self.machine_id => {
                format!("{theirs}, whose machine id is not this home's")
            }
            (Some(_), Some(_)) => return None,
        };
        Some(why)
    }
}
