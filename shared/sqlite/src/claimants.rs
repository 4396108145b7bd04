//! Which processes working on the file are alive, so a node claimed by a
//! process that died is driven again at once instead of after its lease.
//!
//! Each open store is a claimant process: it creates a lock file of its own
//! in `<database>.claimants/` and holds an exclusive lock on it for as long
//! as the store is open (the operating system drops the lock when the
//! process dies, however it dies). A lease records its process's token. A
//! lease whose process no longer holds its lock file (or whose file is gone)
//! belongs to a dead process: the lease is void, whatever its expiry says.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use baton_runtime::error::StoreError;

use crate::unavailable;

/// This process's registration as a claimant on one database file.
pub(crate) struct ClaimantProcess {
    token: String,
    directory: PathBuf,
    /// Held locked while the store is open; closing it releases the lock.
    lock_file: Option<File>,
}

impl ClaimantProcess {
    /// Registers this process beside `database`: a new token and its lock
    /// file, locked exclusively.
    pub(crate) fn register(database: &Path) -> Result<Self, StoreError> {
        let mut directory_name = database.as_os_str().to_os_string();
        directory_name.push(".claimants");
        let directory = PathBuf::from(directory_name);
        std::fs::create_dir_all(&directory)
            .map_err(|error| unavailable(format!("creating {}: {error}", directory.display())))?;
        let token = format!("p{}-{}", std::process::id(), uuid::Uuid::new_v4().simple());
        let path = lock_path(&directory, &token);
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|error| unavailable(format!("creating {}: {error}", path.display())))?;
        lock_file
            .try_lock()
            .map_err(|error| unavailable(format!("locking {}: {error}", path.display())))?;
        Ok(ClaimantProcess {
            token,
            directory,
            lock_file: Some(lock_file),
        })
    }

    /// The token leases taken by this process carry.
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// Whether the process that took a lease under `token` is still alive.
    /// This process is; a lease without a token (written before tokens
    /// existed) is presumed alive until it expires. A dead process's lock
    /// file is removed once proven free.
    pub(crate) fn is_alive(&self, token: &str) -> bool {
        if token == self.token || token.is_empty() || !is_plain_token(token) {
            return true;
        }
        let path = lock_path(&self.directory, token);
        let file = match OpenOptions::new().write(true).open(&path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return false,
            Err(_) => return true,
        };
        match file.try_lock() {
            Ok(()) => {
                // Nobody held it: its process is gone. Removed while locked,
                // so no living process can be using it.
                let _ = std::fs::remove_file(&path);
                false
            }
            Err(TryLockError::WouldBlock) => true,
            Err(TryLockError::Error(_)) => true,
        }
    }
}

impl Drop for ClaimantProcess {
    fn drop(&mut self) {
        // Remove the file while still holding it, then let the lock go.
        let _ = std::fs::remove_file(lock_path(&self.directory, &self.token));
        drop(self.lock_file.take());
    }
}

fn lock_path(directory: &Path, token: &str) -> PathBuf {
    directory.join(format!("{token}.lock"))
}

/// A token this code could have written (no path separators or dots), so a
/// corrupt row cannot make the store touch another file.
fn is_plain_token(token: &str) -> bool {
    token
        .chars()
        .all(|character| character.is_ascii_alphanumeric() || character == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_process_is_alive_and_a_dropped_one_is_not() {
        let folder = tempfile::tempdir().unwrap();
        let database = folder.path().join("runs.sqlite3");
        let first = ClaimantProcess::register(&database).unwrap();
        let second = ClaimantProcess::register(&database).unwrap();
        assert!(
            second.is_alive(first.token()),
            "a registered process holds its lock"
        );
        assert!(first.is_alive(first.token()));
        let gone = first.token().to_string();
        drop(first);
        assert!(!second.is_alive(&gone), "its lock file is gone with it");
        assert!(
            second.is_alive(""),
            "an untokened lease waits for its expiry"
        );
        assert!(second.is_alive("../etc/passwd"), "never a path");
    }

    #[test]
    fn a_lock_file_nobody_holds_proves_its_process_dead_and_is_removed() {
        let folder = tempfile::tempdir().unwrap();
        let database = folder.path().join("runs.sqlite3");
        let living = ClaimantProcess::register(&database).unwrap();
        // What a SIGKILLed process leaves: its file, with no lock on it.
        let left = lock_path(&living.directory, "p1-dead");
        std::fs::write(&left, b"").unwrap();
        assert!(!living.is_alive("p1-dead"));
        assert!(!left.exists());
    }
}
