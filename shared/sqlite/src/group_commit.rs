//! Group commit: writes that arrive while the connection is busy wait in a
//! queue; whichever takes the connection next runs all of them in one
//! transaction (`BEGIN IMMEDIATE`), each in a savepoint of its own (a write
//! whose check fails, such as a commit's version check, is rolled back
//! alone), then commits once: one fsync for the group. Each caller is
//! answered only after that commit, so an acknowledged write is as durable
//! as before; a failed commit fails every write of its group (each retried
//! by its step, as for any store error).
//!
//! Step commits and node claims go through it. A claim needs no fsync
//! (`rows::without_fsync` says why), so a group of claims alone commits at
//! `synchronous = NORMAL`; a group with one step commit in it is fsynced.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use baton_runtime::error::StoreError;
use tokio::sync::oneshot;

use crate::rows::{begin, without_fsync};
use crate::{SqliteStore, unavailable};

/// How durable a grouped write must be before its caller is answered.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// Fsynced: survives a power loss (step commits).
    Fsynced,
    /// Survives a crash of the process; a power loss may undo it, harmless
    /// for what goes this way (a claim is made again).
    ProcessCrash,
}

/// What a grouped write decided: keep its savepoint, or roll it back and
/// still answer (a claim on a settled run writes nothing and says so).
pub(crate) enum Grouped<T> {
    Keep(T),
    RollBack(T),
}

/// One write waiting for its group: run against the group's transaction
/// (a savepoint), or answered with the failure that kept it from running.
trait GroupedWrite: Send {
    /// Whether to keep the savepoint, and how to answer once the group's
    /// outcome is known.
    fn run(self: Box<Self>, savepoint: &rusqlite::Connection) -> Decided;
    fn fail(self: Box<Self>, error: StoreError);
}

struct Decided {
    keep: bool,
    answer: Box<dyn FnOnce(Result<(), StoreError>) + Send>,
}

struct Write<T, F> {
    work: F,
    answer: oneshot::Sender<Result<T, StoreError>>,
}

impl<T, F> GroupedWrite for Write<T, F>
where
    T: Send + 'static,
    F: FnOnce(&rusqlite::Connection) -> Result<Grouped<T>, StoreError> + Send + 'static,
{
    fn run(self: Box<Self>, savepoint: &rusqlite::Connection) -> Decided {
        let Write { work, answer } = *self;
        let (keep, outcome) = match work(savepoint) {
            Ok(Grouped::Keep(value)) => (true, Ok(value)),
            Ok(Grouped::RollBack(value)) => (false, Ok(value)),
            Err(error) => (false, Err(error)),
        };
        Decided {
            keep,
            answer: Box::new(move |group: Result<(), StoreError>| {
                // Its own failure first; else the group's.
                let _ = answer.send(outcome.and_then(|value| group.map(|()| value)));
            }),
        }
    }

    fn fail(self: Box<Self>, error: StoreError) {
        let _ = self.answer.send(Err(error));
    }
}

struct PendingWrite {
    durability: Durability,
    write: Box<dyn GroupedWrite>,
}

/// The writes waiting for the next group, and how many groups and step
/// commits were made so far.
#[derive(Default)]
pub(crate) struct GroupCommits {
    waiting: Mutex<Vec<PendingWrite>>,
    groups: AtomicU64,
    commits: AtomicU64,
}

impl SqliteStore {
    /// (fsynced transactions, step commits) this store made through group
    /// commit: a first figure below the second means commits shared an
    /// fsync. Groups of claims alone are not counted.
    pub fn group_commit_figures(&self) -> (u64, u64) {
        (
            self.group.groups.load(Ordering::Relaxed),
            self.group.commits.load(Ordering::Relaxed),
        )
    }

    /// Runs `work` in the next group; answers once that group is committed
    /// as durably as `durability` asks.
    pub(crate) async fn write_in_group<T, F>(
        &self,
        durability: Durability,
        work: F,
    ) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&rusqlite::Connection) -> Result<Grouped<T>, StoreError> + Send + 'static,
    {
        let (answer, answered) = oneshot::channel::<Result<T, StoreError>>();
        let write = Box::new(Write { work, answer });
        self.group
            .waiting
            .lock()
            .map_err(|_| unavailable("group commit queue poisoned"))?
            .push(PendingWrite { durability, write });
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

/// Runs every waiting write in one transaction. Nothing waiting (an earlier
/// group took them): nothing to do.
fn commit_waiting(connection: &mut rusqlite::Connection, group: &GroupCommits) {
    let batch = match group.waiting.lock() {
        Ok(mut waiting) => std::mem::take(&mut *waiting),
        Err(_) => return,
    };
    if batch.is_empty() {
        return;
    }
    let step_commits = batch
        .iter()
        .filter(|write| write.durability == Durability::Fsynced)
        .count();
    if step_commits > 0 {
        group.groups.fetch_add(1, Ordering::Relaxed);
        group
            .commits
            .fetch_add(step_commits as u64, Ordering::Relaxed);
    }
    if step_commits == 0 {
        // A failure here is setting the pragma, before anything ran.
        if let Err(error) = without_fsync(connection, |connection| {
            run_batch(connection, batch);
            Ok(())
        }) {
            tracing::warn!(%error, "sqlite: restoring synchronous = FULL after a group of claims");
        }
    } else {
        run_batch(connection, batch);
    }
}

/// One transaction over `batch`, each write in a savepoint; answers them
/// all once the transaction's fate is known.
fn run_batch(connection: &mut rusqlite::Connection, batch: Vec<PendingWrite>) {
    let mut transaction = match begin(connection) {
        Ok(transaction) => transaction,
        Err(error) => {
            for pending in batch {
                pending.write.fail(error.clone());
            }
            return;
        }
    };
    let mut answers = Vec::with_capacity(batch.len());
    for PendingWrite { write, .. } in batch {
        let mut savepoint = match transaction.savepoint() {
            Ok(savepoint) => savepoint,
            Err(error) => {
                write.fail(unavailable(error));
                continue;
            }
        };
        let decided = write.run(&savepoint);
        let settled = if decided.keep {
            savepoint.commit().map_err(unavailable)
        } else {
            // Its writes are undone; the others' stand.
            savepoint.rollback().map_err(unavailable)
        };
        answers.push((decided.answer, settled));
    }
    let committed = transaction
        .commit()
        .map_err(|error| unavailable(format!("the group's commit failed: {error}")));
    for (answer, settled) in answers {
        answer(committed.clone().and(settled));
    }
}
