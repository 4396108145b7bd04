//! Row helpers every table module shares: JSON in and out of text columns,
//! times as Unix milliseconds, the first column of a query, a write
//! transaction (`BEGIN IMMEDIATE`).

use baton_core::basics::instant::Instant;
use baton_runtime::error::StoreError;
use rusqlite::{Transaction, TransactionBehavior};

use crate::unavailable;

pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|error| StoreError::Corrupt(error.to_string()))
}

pub(crate) fn from_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|error| StoreError::Corrupt(error.to_string()))
}

pub(crate) fn millis(instant: Instant) -> i64 {
    i64::try_from(instant.unix_millis()).unwrap_or(i64::MAX)
}

pub(crate) fn as_i64(number: u64) -> i64 {
    i64::try_from(number).unwrap_or(i64::MAX)
}

/// The first column (text) of every row `sql` selects with `parameters`.
pub(crate) fn texts(
    connection: &rusqlite::Connection,
    sql: &str,
    parameters: impl rusqlite::Params,
) -> Result<Vec<String>, StoreError> {
    let mut statement = connection.prepare_cached(sql).map_err(unavailable)?;
    let rows = statement
        .query_map(parameters, |row| row.get(0))
        .map_err(unavailable)?;
    rows.collect::<Result<Vec<String>, _>>()
        .map_err(unavailable)
}

pub(crate) fn begin(connection: &mut rusqlite::Connection) -> Result<Transaction<'_>, StoreError> {
    connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(unavailable)
}

/// Runs `write` with `synchronous = NORMAL`, then puts `FULL` back: its
/// commit is not fsynced. In WAL mode such a commit survives a crash of the
/// process (the kill test's SIGKILL), not a power loss; and since the WAL is
/// one ordered file, the next `FULL` commit makes it durable too. Only for
/// writes whose loss in a power cut is harmless: a lease (the node is
/// claimed again: at-least-once), a renewal, a release, an outbox entry
/// marked re-sent (sent again).
pub(crate) fn without_fsync<T>(
    connection: &mut rusqlite::Connection,
    write: impl FnOnce(&mut rusqlite::Connection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    connection
        .pragma_update(None, "synchronous", "NORMAL")
        .map_err(unavailable)?;
    let written = write(connection);
    let restored = connection
        .pragma_update(None, "synchronous", "FULL")
        .map_err(unavailable);
    let written = written?;
    restored?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synchronous(connection: &rusqlite::Connection) -> i64 {
        connection
            .pragma_query_value(None, "synchronous", |row| row.get(0))
            .unwrap()
    }

    #[test]
    fn a_write_without_fsync_runs_at_normal_and_puts_full_back_even_when_it_fails() {
        let mut connection = rusqlite::Connection::open_in_memory().unwrap();
        connection
            .pragma_update(None, "synchronous", "FULL")
            .unwrap();
        let seen =
            without_fsync(&mut connection, |connection| Ok(synchronous(connection))).unwrap();
        assert_eq!(seen, 1, "NORMAL during the write");
        assert_eq!(synchronous(&connection), 2, "FULL after it");
        let failed: Result<(), StoreError> = without_fsync(&mut connection, |_| {
            Err(StoreError::Unavailable("the write failed".into()))
        });
        assert!(failed.is_err());
        assert_eq!(synchronous(&connection), 2, "FULL after a failed write too");
    }
}
