//! The `runs.state` column: a run's state as LZ4-compressed JSON (a BLOB).
//! A state is rewritten by every step commit and its plan is most of it
//! (a five-node run's state is about 9 KB of JSON, 7 KB of it the plan);
//! compressed it is about a quarter, so a commit writes one page to the WAL
//! instead of three overflow pages. Files written before kept the state as
//! JSON text: a TEXT value is read as such, and rewritten compressed at the
//! run's next commit.

use baton_core::state::run::RunState;
use baton_runtime::error::StoreError;
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ValueRef};

/// A `runs.state` value as read, not yet parsed.
pub(crate) enum StoredState {
    /// Written before states were compressed.
    JsonText(String),
    /// LZ4 (size-prefixed) of the JSON.
    Compressed(Vec<u8>),
}

impl FromSql for StoredState {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        match value {
            ValueRef::Text(text) => std::str::from_utf8(text)
                .map(|text| StoredState::JsonText(text.to_string()))
                .map_err(|error| FromSqlError::Other(Box::new(error))),
            ValueRef::Blob(bytes) => Ok(StoredState::Compressed(bytes.to_vec())),
            _ => Err(FromSqlError::InvalidType),
        }
    }
}

impl StoredState {
    pub(crate) fn parse(&self) -> Result<RunState, StoreError> {
        let corrupt = |error: &dyn std::fmt::Display| {
            StoreError::Corrupt(format!("a run's stored state: {error}"))
        };
        // In the current format (an older one migrated: `stored_format`).
        let decode = baton_core::state::stored_format::decode_stored_run_state;
        match self {
            StoredState::JsonText(text) => decode(text.as_bytes()).map_err(|error| corrupt(&error)),
            StoredState::Compressed(bytes) => {
                let json =
                    lz4_flex::decompress_size_prepended(bytes).map_err(|error| corrupt(&error))?;
                decode(&json).map_err(|error| corrupt(&error))
            }
        }
    }
}

/// The value a commit writes to `runs.state`.
pub(crate) fn encode_state(state: &RunState) -> Result<Vec<u8>, StoreError> {
    let json = serde_json::to_vec(state).map_err(|error| StoreError::Corrupt(error.to_string()))?;
    Ok(lz4_flex::compress_prepend_size(&json))
}
