//! Run entries (`baton_core::records::entries`) in the `entries` table: put by the
//! commit that carries them (in its transaction), read by key prefix.

use baton_core::records::entries::RunEntry;
use baton_runtime::error::StoreError;
use rusqlite::params;

use crate::rows::{from_json, texts, to_json};
use crate::unavailable;

/// Puts `entries` under their keys (a re-applied step writes the same
/// bodies again).
pub(crate) fn write_entries(
    transaction: &rusqlite::Connection,
    tenant_id: &str,
    run_id: &str,
    entries: &[RunEntry],
) -> Result<(), StoreError> {
    if entries.is_empty() {
        return Ok(());
    }
    let mut insert = transaction
        .prepare_cached(
            "INSERT OR REPLACE INTO entries (tenant_id, run_id, entry_key, body) VALUES (?1, ?2, ?3, ?4)",
        )
        .map_err(unavailable)?;
    for entry in entries {
        insert
            .execute(params![tenant_id, run_id, entry.key, to_json(entry)?])
            .map_err(unavailable)?;
    }
    Ok(())
}

/// The run's entries whose keys start with `prefix`, in key order.
pub(crate) fn read_entries(
    connection: &rusqlite::Connection,
    tenant_id: &str,
    run_id: &str,
    prefix: &str,
) -> Result<Vec<RunEntry>, StoreError> {
    let bodies = texts(
        connection,
        "SELECT body FROM entries WHERE tenant_id = ?1 AND run_id = ?2
         AND substr(entry_key, 1, length(?3)) = ?3 ORDER BY entry_key",
        params![tenant_id, run_id, prefix],
    )?;
    bodies.iter().map(|body| from_json(body)).collect()
}
