//! Row helpers every table module shares: JSON in and out of text columns,
//! times as Unix milliseconds, the first column of a query, a write
//! transaction (`BEGIN IMMEDIATE`).

use baton_core::instant::Instant;
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
