//! The stored run state's format, versioned. A run parked for a person may
//! wait weeks across deploys, so a store must read every state an earlier
//! version wrote. Adding an optional field needs nothing (`serde(default)`);
//! a change an old state cannot be read into (a field renamed, a meaning
//! changed) raises [`RUN_STATE_FORMAT_VERSION`] and adds a migration, which
//! rewrites the old state's JSON into the new format before it is read.
//! `tests/upgrade-corpus/` holds states, frames and items earlier versions
//! wrote; `functions/baton/tests/upgrade_corpus.rs` drives them to
//! completion on every store.
//!
//! Invariants: a state in the current format is parsed once (the store's
//! hot path pays nothing for migrations); a state of a newer format than
//! this code knows is refused, never read half-understood; migrations run
//! in order, each from its version to the next.

use serde_json::{Map, Value};

use crate::state::run::RunState;
pub use crate::state::run_format::{RUN_STATE_FORMAT_VERSION, first_format};

/// Why a migration refused a state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationRefused(pub String);

/// A migration rewrites a state's JSON from one format to the next.
type Migration = fn(&mut Map<String, Value>) -> Result<(), MigrationRefused>;

/// `MIGRATIONS[i]` turns format `i + 1` into format `i + 2`: one entry per
/// format after the first. Format 1 is the only one so far.
const MIGRATIONS: [Migration; RUN_STATE_FORMAT_VERSION as usize - 1] = [];

/// Why a stored state could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredStateError {
    /// Written by a newer Baton, in a format this one does not know.
    Newer { found: u32 },
    /// Not a run state (or a migration refused it), with why.
    Unreadable(String),
}

impl std::fmt::Display for StoredStateError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoredStateError::Newer { found } => write!(
                formatter,
                "the run state is format {found}, written by a newer Baton (this one reads up to {RUN_STATE_FORMAT_VERSION})"
            ),
            StoredStateError::Unreadable(why) => write!(formatter, "{why}"),
        }
    }
}

impl std::error::Error for StoredStateError {}

/// A stored state's JSON read into the current format: parsed at once when
/// it is current, else migrated from its format first.
pub fn decode_stored_run_state(json: &[u8]) -> Result<RunState, StoredStateError> {
    let direct = serde_json::from_slice::<RunState>(json);
    if let Ok(state) = &direct
        && state.format_version == RUN_STATE_FORMAT_VERSION
    {
        return direct.map_err(|error| StoredStateError::Unreadable(error.to_string()));
    }
    let mut value: Value = serde_json::from_slice(json)
        .map_err(|error| StoredStateError::Unreadable(error.to_string()))?;
    migrate_state_json(&mut value)?;
    serde_json::from_value(value).map_err(|error| StoredStateError::Unreadable(error.to_string()))
}

/// Rewrites a stored state's JSON, of any known format, into the current
/// one.
pub fn migrate_state_json(value: &mut Value) -> Result<(), StoredStateError> {
    let object = value
        .as_object_mut()
        .ok_or_else(|| StoredStateError::Unreadable("a run state is a JSON object".into()))?;
    let found = match object.get("formatVersion") {
        None => first_format(),
        Some(version) => version
            .as_u64()
            .and_then(|version| u32::try_from(version).ok())
            .filter(|version| *version >= 1)
            .ok_or_else(|| {
                StoredStateError::Unreadable(format!(
                    "formatVersion: a whole number from 1 (got {version})"
                ))
            })?,
    };
    if found > RUN_STATE_FORMAT_VERSION {
        return Err(StoredStateError::Newer { found });
    }
    for migration in &MIGRATIONS[(found - 1) as usize..] {
        migration(object).map_err(|refused| StoredStateError::Unreadable(refused.0))?;
    }
    object.insert(
        "formatVersion".into(),
        Value::from(RUN_STATE_FORMAT_VERSION),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_without_a_format_is_format_one_and_a_newer_one_is_refused() {
        let mut older = serde_json::json!({"runId": "r"});
        migrate_state_json(&mut older).unwrap();
        assert_eq!(older["formatVersion"], RUN_STATE_FORMAT_VERSION);
        let mut newer = serde_json::json!({"formatVersion": RUN_STATE_FORMAT_VERSION + 1});
        assert_eq!(
            migrate_state_json(&mut newer),
            Err(StoredStateError::Newer {
                found: RUN_STATE_FORMAT_VERSION + 1
            })
        );
        let mut wrong = serde_json::json!({"formatVersion": "one"});
        assert!(matches!(
            migrate_state_json(&mut wrong),
            Err(StoredStateError::Unreadable(why)) if why.contains("formatVersion")
        ));
        assert!(
            decode_stored_run_state(br#"{"formatVersion": 99}"#)
                .unwrap_err()
                .to_string()
                .contains("newer Baton")
        );
    }
}
