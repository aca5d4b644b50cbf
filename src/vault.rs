//! The OS credential store: a connector's secret, kept by the Secret Service (Linux, over the
//! session D-Bus) or the Keychain (macOS), under a service name derived from the home and the
//! connector's name as the account.
//!
//! Owns: the `SecretStore` trait, its one real implementation (`Keyring`), the `Secret` type
//! that never prints itself, and running store calls off the async threads within a bound.
//! Must never: fall back to a file, an environment variable or an in-memory store when the OS
//! store cannot be reached (keyring 3 silently uses a mock store on a platform without a backend
//! feature, so this module refuses to compile there), or put a secret in an error, a log line or
//! `Debug` output. Only the daemon calls it.

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
compile_error!(
    "holdcall keeps connector secrets only in the Secret Service (Linux) or the Keychain (macOS); \
     on this platform keyring 3 would silently keep them in a throwaway mock store"
);

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::limits;

/// A connector's secret. Its `Debug` never shows the value, so a `{:?}` of any message carrying
/// one (a request, a launch) cannot leak it; only [`Secret::expose`] reads it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Secret {
        Secret(value)
    }

    /// The value, for the one place that needs it: the store, or the server's environment.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The value is zeroed when the last holder drops it, so a freed buffer does not keep it.
impl Drop for Secret {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.0);
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Why the store did not do what was asked. No variant carries the secret.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub(crate) enum VaultError {
    #[error("no credential store: {0}")]
    #[diagnostic(
        code(holdcall::vault::unreachable),
        help(
            "the daemon reads secrets from the Secret Service (Linux: gnome-keyring or KeePassXC on \
             the session D-Bus) or the Keychain (macOS); start the daemon from a desktop session \
             (`holdcall daemon restart`) so it sees DBUS_SESSION_BUS_ADDRESS. Holdcall never keeps \
             a secret anywhere else"
        )
    )]
    Unreachable(String),
    #[error(
        "the credential store did not answer within {0:?} (is it waiting for an unlock prompt?)"
    )]
    #[diagnostic(
        code(holdcall::vault::timeout),
        help("unlock your keyring (log in to the desktop session), then try again")
    )]
    TimedOut(Duration),
    #[error("the credential store refused: {0}")]
    #[diagnostic(
        code(holdcall::vault::store),
        help("check the keyring with your desktop's password manager (Seahorse, Keychain Access)")
    )]
    Store(String),
}

/// A place connectors' secrets live, addressed by connector name. Calls may block (D-Bus, an
/// unlock prompt): run them with [`run_blocking`].
pub(crate) trait SecretStore: Send + Sync {
    /// The secret of `connector`, or `None` when the store has no entry for it.
    fn get(&self, connector: &str) -> Result<Option<Secret>, VaultError>;
    /// Stores (or replaces) the secret of `connector`.
    fn set(&self, connector: &str, secret: &Secret) -> Result<(), VaultError>;
    /// Removes the secret of `connector`; a missing entry is not an error.
    fn delete(&self, connector: &str) -> Result<(), VaultError>;
    /// Where the secrets are, in words (for messages; never a secret).
    fn describe(&self) -> String;
}

/// The service name under which one home's secrets are stored: `holdcall-` and the first four
/// bytes of the SHA-256 of the home's path, so two homes (a test's and yours) never share one.
pub fn service_name(home: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let digest = crate::ids::sha256_hex(home.as_os_str().as_bytes());
    format!("holdcall-{}", digest.get(..8).unwrap_or(&digest))
}

/// The OS credential store through the `keyring` crate.
pub(crate) struct Keyring {
    service: String,
}

impl Keyring {
    pub(crate) fn for_home(home: &Path) -> Keyring {
        Keyring {
            service: service_name(home),
        }
    }

    fn entry(&self, connector: &str) -> Result<keyring::Entry, VaultError> {
        keyring::Entry::new(&self.service, connector).map_err(map_error)
    }
}

impl SecretStore for Keyring {
    fn get(&self, connector: &str) -> Result<Option<Secret>, VaultError> {
        match self.entry(connector)?.get_password() {
            Ok(s) => Ok(Some(Secret(s))),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(e) => Err(map_error(e)),
        }
    }

    fn set(&self, connector: &str, secret: &Secret) -> Result<(), VaultError> {
        self.entry(connector)?
            .set_password(secret.expose())
            .map_err(map_error)
    }

    fn delete(&self, connector: &str) -> Result<(), VaultError> {
        match self.entry(connector)?.delete_credential() {
            Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
            Err(e) => Err(map_error(e)),
        }
    }

    fn describe(&self) -> String {
        format!("{} (service {})", STORE_NAME, self.service)
    }
}

#[cfg(target_os = "linux")]
const STORE_NAME: &str = "the Secret Service";
#[cfg(target_os = "macos")]
const STORE_NAME: &str = "the login Keychain";

/// What the platform's store needs in order to be reached, said when it is not.
#[cfg(target_os = "linux")]
fn unreachable_hint() -> String {
    let bus = match std::env::var("DBUS_SESSION_BUS_ADDRESS") {
        Ok(a) if !a.is_empty() => format!("DBUS_SESSION_BUS_ADDRESS is {a}"),
        _ => "DBUS_SESSION_BUS_ADDRESS is not set in the daemon's environment".to_string(),
    };
    format!("the Secret Service is not reachable on the session D-Bus ({bus})")
}

#[cfg(target_os = "macos")]
fn unreachable_hint() -> String {
    "the login Keychain cannot be reached from this session".to_string()
}

/// Maps keyring's errors to ours without ever carrying a secret: `BadEncoding` holds the stored
/// bytes, so it is described, never shown.
fn map_error(e: keyring::Error) -> VaultError {
    match e {
        keyring::Error::NoStorageAccess(inner) | keyring::Error::PlatformFailure(inner) => {
            VaultError::Unreachable(format!("{inner}, {}", unreachable_hint()))
        }
        keyring::Error::BadEncoding(_) => {
            VaultError::Store("the stored secret is not UTF-8 text".into())
        }
        keyring::Error::TooLong(what, max) => {
            VaultError::Store(format!("the {what} is longer than the store's {max}"))
        }
        keyring::Error::Invalid(what, why) => VaultError::Store(format!("invalid {what}: {why}")),
        keyring::Error::Ambiguous(found) => VaultError::Store(format!(
            "{} entries match this connector; remove the extra ones in your keyring",
            found.len()
        )),
        keyring::Error::NoEntry => VaultError::Store("no entry".into()),
        _ => VaultError::Store("an error the keyring crate does not name".into()),
    }
}

/// Runs one store call on a blocking thread (D-Bus calls block, and may wait for an unlock
/// prompt) and gives up after `limits::VAULT_TIMEOUT`. A call that times out keeps running on
/// its thread; its result is dropped.
pub(crate) async fn run_blocking<T: Send + 'static>(
    store: &Arc<dyn SecretStore>,
    f: impl FnOnce(&dyn SecretStore) -> Result<T, VaultError> + Send + 'static,
) -> Result<T, VaultError> {
    let store = Arc::clone(store);
    let task = tokio::task::spawn_blocking(move || f(store.as_ref()));
    match tokio::time::timeout(limits::VAULT_TIMEOUT, task).await {
        Ok(Ok(r)) => r,
        Ok(Err(_)) => Err(VaultError::Store(
            "the store call stopped unexpectedly".into(),
        )),
        Err(_) => Err(VaultError::TimedOut(limits::VAULT_TIMEOUT)),
    }
}

/// Writes the secret first, then runs `record` (the connector's row and journal entry, one
/// transaction); if recording fails the secret is deleted again, so the store never holds a
/// secret that no registration names.
pub(crate) async fn store_then_record<T, E: std::fmt::Display>(
    store: &Arc<dyn SecretStore>,
    connector: &str,
    secret: Secret,
    record: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, StoreThenRecordError> {
    let name = connector.to_string();
    run_blocking(store, move |s| s.set(&name, &secret))
        .await
        .map_err(StoreThenRecordError::Store)?;
    match record.await {
        Ok(t) => Ok(t),
        Err(e) => {
            let name = connector.to_string();
            let undone = run_blocking(store, move |s| s.delete(&name)).await;
            Err(StoreThenRecordError::Record {
                why: e.to_string(),
                secret_deleted: undone.is_ok(),
            })
        }
    }
}

/// Why [`store_then_record`] changed nothing (or left only what it says).
#[derive(Debug)]
pub(crate) enum StoreThenRecordError {
    /// The store refused the secret; nothing was recorded.
    Store(VaultError),
    /// The registration could not be recorded; the secret was deleted again if `secret_deleted`.
    Record { why: String, secret_deleted: bool },
}

/// A store for unit tests of the code that calls the vault: one file per connector in a
/// directory, and a switch that makes every call fail as an unreachable store does. It exists
/// only in test builds; the binary has no store but the OS's.
#[cfg(test)]
pub mod file_double {
    use super::*;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicBool, Ordering};

    pub(crate) struct FileStore {
        pub dir: PathBuf,
        pub unreachable: AtomicBool,
    }

    impl FileStore {
        pub(crate) fn new(dir: &Path) -> FileStore {
            FileStore {
                dir: dir.to_path_buf(),
                unreachable: AtomicBool::new(false),
            }
        }
        fn check(&self) -> Result<(), VaultError> {
            if self.unreachable.load(Ordering::SeqCst) {
                return Err(VaultError::Unreachable(
                    "the test switched the store off".into(),
                ));
            }
            Ok(())
        }
    }

    impl SecretStore for FileStore {
        fn get(&self, connector: &str) -> Result<Option<Secret>, VaultError> {
            self.check()?;
            match std::fs::read_to_string(self.dir.join(connector)) {
                Ok(s) => Ok(Some(Secret(s))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(VaultError::Store(e.to_string())),
            }
        }
        fn set(&self, connector: &str, secret: &Secret) -> Result<(), VaultError> {
            self.check()?;
            std::fs::write(self.dir.join(connector), secret.expose())
                .map_err(|e| VaultError::Store(e.to_string()))
        }
        fn delete(&self, connector: &str) -> Result<(), VaultError> {
            self.check()?;
            match std::fs::remove_file(self.dir.join(connector)) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(VaultError::Store(e.to_string())),
            }
        }
        fn describe(&self) -> String {
            format!("the test double in {}", self.dir.display())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::file_double::FileStore;
    use super::*;

    fn store(dir: &Path) -> (Arc<FileStore>, Arc<dyn SecretStore>) {
        let f = Arc::new(FileStore::new(dir));
        let d: Arc<dyn SecretStore> = f.clone();
        (f, d)
    }

    #[test]
    fn a_secret_never_shows_itself_in_debug_output() {
        let s = Secret::new("canary-7f3a".into());
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
        assert!(!format!("{:?}", Some(&s)).contains("canary"));
    }

    #[test]
    fn a_secret_travels_as_a_plain_json_string() {
        let s = Secret::new("x\"y".into());
        assert_eq!(serde_json::to_string(&s).unwrap(), r#""x\"y""#);
        let back: Secret = serde_json::from_str(r#""x\"y""#).unwrap();
        assert_eq!(back.expose(), "x\"y");
    }

    #[test]
    fn each_home_has_its_own_service_name() {
        let a = service_name(Path::new("/home/a/.local/share/holdcall"));
        let b = service_name(Path::new("/tmp/hc123/home"));
        assert!(
            a.starts_with("holdcall-") && a.len() == "holdcall-".len() + 8,
            "{a}"
        );
        assert_ne!(a, b);
        assert_eq!(a, service_name(Path::new("/home/a/.local/share/holdcall")));
    }

    #[tokio::test]
    async fn a_registration_that_cannot_be_recorded_deletes_the_secret_again() {
        let dir = tempfile::tempdir().unwrap();
        let (f, s) = store(dir.path());
        let r = store_then_record(&s, "github", Secret::new("tok".into()), async {
            Err::<(), _>("disk full")
        })
        .await;
        match r {
            Err(StoreThenRecordError::Record {
                why,
                secret_deleted,
            }) => {
                assert_eq!(why, "disk full");
                assert!(secret_deleted);
            }
            other => panic!("{other:?}"),
        }
        assert!(f.get("github").unwrap().is_none());
    }

    #[tokio::test]
    async fn a_store_that_refuses_the_secret_records_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (f, s) = store(dir.path());
        f.unreachable
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let mut recorded = false;
        let r = store_then_record(&s, "github", Secret::new("tok".into()), async {
            recorded = true;
            Ok::<(), String>(())
        })
        .await;
        assert!(matches!(r, Err(StoreThenRecordError::Store(_))));
        assert!(!recorded, "nothing is recorded when the store refused");
    }

    #[tokio::test]
    async fn a_recorded_registration_keeps_its_secret() {
        let dir = tempfile::tempdir().unwrap();
        let (f, s) = store(dir.path());
        store_then_record(&s, "github", Secret::new("tok".into()), async {
            Ok::<(), String>(())
        })
        .await
        .unwrap();
        assert_eq!(f.get("github").unwrap().unwrap().expose(), "tok");
        let got = run_blocking(&s, |st| st.get("github")).await.unwrap();
        assert_eq!(got.map(|g| g.expose().to_string()).as_deref(), Some("tok"));
    }

    #[test]
    fn a_bad_encoding_error_never_carries_the_stored_bytes() {
        let e = map_error(keyring::Error::BadEncoding(b"canary-7f3a".to_vec()));
        assert!(!e.to_string().contains("canary"));
        assert!(!format!("{e:?}").contains("canary"));
    }
}
