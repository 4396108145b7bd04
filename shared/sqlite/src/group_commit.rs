//! Group commit: step commits that arrive while the connection is busy wait
//! in a queue; whichever takes the connection next runs all of them in one
//! transaction (`BEGIN IMMEDIATE`), each in a savepoint of its own (a commit
//! whose version check fails is rolled back alone), then commits once: one
//! fsync for the group. Each caller is answered only after that commit, so
//! an acknowledged step is as durable as before; a failed commit fails every
//! commit of its group (each retried by its step, as for any store error).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use baton_runtime::error::StoreError;
use tokio::sync::oneshot;

use crate::rows::begin;
use crate::{SqliteStore, unavailable};

/// One commit's writes: its version check and everything it puts, against
/// the open transaction (a savepoint). Returns the run's new version.
pub(crate) type CommitWork =
    Box<dyn FnOnce(&rusqlite::Connection) -> Result<u64, StoreError> + Send>;

struct PendingCommit {
    work: CommitWork,
    answer: oneshot::Sender<Result<u64, StoreError>>,
}

/// The commits waiting for the next group, and how many groups and
/// commits were made so far.
#[derive(Default)]
pub(crate) struct GroupCommits {
    waiting: Mutex<Vec<PendingCommit>>,
    groups: AtomicU64,
    commits: AtomicU64,
}

impl SqliteStore {
    /// (transactions, step commits) this store made through group commit: a
    /// first figure below the second means commits shared an fsync.
    pub fn group_commit_figures(&self) -> (u64, u64) {
        (
            self.group.groups.load(Ordering::Relaxed),
            self.group.commits.load(Ordering::Relaxed),
        )
    }

    /// Commits `work` in the next group; answers once that group is durable.
    pub(crate) async fn commit_in_group(&self, work: CommitWork) -> Result<u64, StoreError> {
        let (answer, answered) = oneshot::channel();
        self.group
            .waiting
            .lock()
            .map_err(|_| unavailable("group commit queue poisoned"))?
            .push(PendingCommit { work, answer });
        let group = self.group.clone();
        self.with_connection(move |connection| {
            commit_waiting(connection, &group);
            Ok(())
        })
        .await?;
        answered
            .await
            .map_err(|_| unavailable("the group commit ended without an answer"))?
    }
}

/// Runs every waiting commit in one transaction. Nothing waiting (an earlier
/// group took them): nothing to do.
fn commit_waiting(connection: &mut rusqlite::Connection, group: &GroupCommits) {
    let batch = match group.waiting.lock() {
        Ok(mut waiting) => std::mem::take(&mut *waiting),
        Err(_) => return,
    };
    if batch.is_empty() {
        return;
    }
    let mut transaction = match begin(connection) {
        Ok(transaction) => transaction,
        Err(error) => {
            for pending in batch {
                let _ = pending.answer.send(Err(error.clone()));
            }
            return;
        }
    };
    group.groups.fetch_add(1, Ordering::Relaxed);
    group
        .commits
        .fetch_add(batch.len() as u64, Ordering::Relaxed);
    let mut outcomes = Vec::with_capacity(batch.len());
    for PendingCommit { work, answer } in batch {
        let outcome = match transaction.savepoint() {
            Ok(mut savepoint) => match work(&savepoint) {
                Ok(version) => savepoint.commit().map(|()| version).map_err(unavailable),
                Err(error) => {
                    // Its writes are undone; the others' stand.
                    let _ = savepoint.rollback();
                    Err(error)
                }
            },
            Err(error) => Err(unavailable(error)),
        };
        outcomes.push((answer, outcome));
    }
    match transaction.commit() {
        Ok(()) => {
            for (answer, outcome) in outcomes {
                let _ = answer.send(outcome);
            }
        }
        Err(error) => {
            let failed = unavailable(format!("the group's commit failed: {error}"));
            for (answer, _) in outcomes {
                let _ = answer.send(Err(failed.clone()));
            }
        }
    }
}
