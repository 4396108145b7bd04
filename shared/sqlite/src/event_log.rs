//! The SQLite run store's event log: frames appended after the run's last
//! sequence, in the caller's transaction; writes outside a commit (deltas,
//! warnings, a claim's `node_start`) refused once the run has settled.

use baton_core::wire::event::EventDraft;
use baton_runtime::error::StoreError;
use rusqlite::{OptionalExtension, params};

use crate::rows::{as_i64, to_json};
use crate::unavailable;

/// What [`append_unless_settled`] did.
pub(crate) enum Appended {
    /// The drafts were written; the new last sequence.
    Written(u64),
    /// The run has settled (its terminal frame written): nothing was
    /// written; its last sequence.
    RunSettled(u64),
}

/// Appends `drafts` after the run's last sequence; returns the new last one.
pub(crate) fn append(
    transaction: &rusqlite::Connection,
    tenant_id: &str,
    run_id: &str,
    drafts: Vec<EventDraft>,
) -> Result<u64, StoreError> {
    let (last, correlation_id): (i64, String) = transaction
        .prepare_cached(
            "SELECT last_sequence, correlation_id FROM runs WHERE tenant_id = ?1 AND run_id = ?2",
        )
        .map_err(unavailable)?
        .query_row(params![tenant_id, run_id], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .optional()
        .map_err(unavailable)?
        .ok_or(StoreError::RunNotFound)?;
    insert_events(
        transaction,
        tenant_id,
        run_id,
        last,
        &correlation_id,
        drafts,
    )
}

/// As [`append`] for writes outside a commit (streamed deltas, warnings,
/// a claim's `node_start`): nothing lands after a settled run's terminal
/// frame. One read of the run row either way.
pub(crate) fn append_unless_settled(
    transaction: &rusqlite::Connection,
    tenant_id: &str,
    run_id: &str,
    drafts: Vec<EventDraft>,
) -> Result<Appended, StoreError> {
    let (last, correlation_id, status): (i64, String, String) = transaction
        .prepare_cached("SELECT last_sequence, correlation_id, status FROM runs WHERE tenant_id = ?1 AND run_id = ?2")
                .map_err(unavailable)?
                .query_row(params![tenant_id, run_id],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()
        .map_err(unavailable)?
        .ok_or(StoreError::RunNotFound)?;
    let settled = serde_json::from_value::<baton_core::state::run::RunStatus>(
        serde_json::Value::String(status),
    )
    .is_ok_and(|status| status.is_terminal());
    if settled {
        return Ok(Appended::RunSettled(u64::try_from(last).unwrap_or(0)));
    }
    insert_events(
        transaction,
        tenant_id,
        run_id,
        last,
        &correlation_id,
        drafts,
    )
    .map(Appended::Written)
}

fn insert_events(
    transaction: &rusqlite::Connection,
    tenant_id: &str,
    run_id: &str,
    last: i64,
    correlation_id: &str,
    drafts: Vec<EventDraft>,
) -> Result<u64, StoreError> {
    let mut sequence = u64::try_from(last).unwrap_or(0);
    let mut insert = transaction
        .prepare_cached(
            "INSERT INTO events (tenant_id, run_id, sequence, frame) VALUES (?1, ?2, ?3, ?4)",
        )
        .map_err(unavailable)?;
    for draft in drafts {
        sequence += 1;
        let frame = draft.into_frame(sequence, run_id, correlation_id);
        insert
            .execute(params![
                tenant_id,
                run_id,
                as_i64(sequence),
                to_json(&frame)?
            ])
            .map_err(unavailable)?;
    }
    transaction
        .prepare_cached("UPDATE runs SET last_sequence = ?3 WHERE tenant_id = ?1 AND run_id = ?2")
        .map_err(unavailable)?
        .execute(params![tenant_id, run_id, as_i64(sequence)])
        .map_err(unavailable)?;
    Ok(sequence)
}

impl crate::SqliteStore {
    /// The run's `last_sequence` column (`None`: no such run), on the
    /// reading connection.
    pub(crate) async fn stored_last_sequence(
        &self,
        tenant_id: &str,
        run_id: &str,
    ) -> Result<Option<u64>, StoreError> {
        let (tenant_id, run_id) = (tenant_id.to_string(), run_id.to_string());
        self.with_reader(move |connection| {
            connection
                .query_row(
                    "SELECT last_sequence FROM runs WHERE tenant_id = ?1 AND run_id = ?2",
                    rusqlite::params![tenant_id, run_id],
                    |row| row.get::<_, i64>(0),
                )
                .optional()
                .map(|last| last.map(|last| u64::try_from(last).unwrap_or(0)))
                .map_err(crate::unavailable)
        })
        .await
    }
}
