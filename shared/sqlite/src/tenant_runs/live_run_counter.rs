//! The tenant's live-run counter: one row per tenant in
//! `live_run_counters`, moved inside the transaction that creates a run at
//! work or commits a change into or out of work (queued, running), so it
//! never disagrees with the runs and is read in one lookup.

use baton_core::state::run::RunStatus;
use baton_runtime::error::StoreError;
use rusqlite::{OptionalExtension, params};

use crate::{SqliteStore, unavailable};

/// The tenant's counter as `connection` sees it (0 when it has none).
pub(crate) fn live_runs_of(
    connection: &rusqlite::Connection,
    tenant_id: &str,
) -> Result<u64, StoreError> {
    let live: Option<i64> = connection
        .prepare_cached("SELECT live_runs FROM live_run_counters WHERE tenant_id = ?1")
        .map_err(unavailable)?
        .query_row(params![tenant_id], |row| row.get(0))
        .optional()
        .map_err(unavailable)?;
    Ok(u64::try_from(live.unwrap_or(0)).unwrap_or(0))
}

/// Moves the counter by what `before` → `after` means (`before` None: a
/// new run), in the caller's transaction.
pub(crate) fn count_live_run_change(
    transaction: &rusqlite::Connection,
    tenant_id: &str,
    before: Option<RunStatus>,
    after: RunStatus,
) -> Result<(), StoreError> {
    let was = before.is_some_and(RunStatus::is_at_work);
    let delta: i64 = match (was, after.is_at_work()) {
        (false, true) => 1,
        (true, false) => -1,
        _ => return Ok(()),
    };
    transaction
        .prepare_cached(
            "INSERT INTO live_run_counters (tenant_id, live_runs) VALUES (?1, MAX(?2, 0))
             ON CONFLICT (tenant_id) DO UPDATE SET live_runs = MAX(live_runs + ?2, 0)",
        )
        .map_err(unavailable)?
        .execute(params![tenant_id, delta])
        .map_err(unavailable)?;
    Ok(())
}

impl SqliteStore {
    /// The tenant's runs at work, from its counter (one indexed read).
    pub(crate) async fn read_live_runs(&self, tenant_id: &str) -> Result<u64, StoreError> {
        let tenant_id = tenant_id.to_string();
        self.with_reader(move |connection| live_runs_of(connection, &tenant_id))
            .await
    }
}
