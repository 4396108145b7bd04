//! Retention on the SQLite file: an ended run whose `retain_until_millis`
//! has passed is deleted with everything of it (its frames, entries,
//! leases, outbox entries, idempotency keys and thread exchanges), a batch
//! of runs per write transaction. A run that works or waits has no
//! `retain_until_millis` and is never picked. `baton gc` calls it until
//! nothing is left; `baton serve` calls it on an interval, one batch at a
//! time, so steps' commits take the writing connection between batches.

use baton_core::basics::instant::Instant;
use baton_runtime::error::StoreError;
use rusqlite::params;

use baton_runtime::ports::{ExpiredRunsBatch, RetentionUpkeep};

use crate::rows::{begin, millis};
use crate::{SqliteStore, unavailable};

/// The tables whose rows belong to one run, keyed by `tenant_id, run_id`.
const TABLES_OF_A_RUN: [&str; 6] = [
    "events",
    "entries",
    "leases",
    "outbox",
    "idempotency",
    "threads",
];

#[async_trait::async_trait]
impl RetentionUpkeep for SqliteStore {
    /// Deletes at most `batch` ended runs whose retention passed before
    /// `now`, with everything of them, in one write transaction.
    async fn expire_ended_runs(
        &self,
        now: Instant,
        batch: usize,
    ) -> Result<ExpiredRunsBatch, StoreError> {
        let now_millis = millis(now);
        let batch = i64::try_from(batch.max(1)).unwrap_or(i64::MAX);
        self.with_connection(move |connection| {
            let transaction = begin(connection)?;
            let expired: Vec<(String, String)> = {
                let mut statement = transaction
                    .prepare_cached(
                        "SELECT tenant_id, run_id FROM runs
                         WHERE retain_until_millis IS NOT NULL AND retain_until_millis <= ?1
                         ORDER BY retain_until_millis LIMIT ?2",
                    )
                    .map_err(unavailable)?;
                let rows = statement
                    .query_map(params![now_millis, batch + 1], |row| {
                        Ok((row.get(0)?, row.get(1)?))
                    })
                    .map_err(unavailable)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(unavailable)?
            };
            let more = expired.len() as i64 > batch;
            let mut deleted = ExpiredRunsBatch {
                more,
                ..ExpiredRunsBatch::default()
            };
            for (tenant_id, run_id) in expired.iter().take(batch as usize) {
                for table in TABLES_OF_A_RUN {
                    let removed = transaction
                        .prepare_cached(&format!(
                            "DELETE FROM {table} WHERE tenant_id = ?1 AND run_id = ?2"
                        ))
                        .map_err(unavailable)?
                        .execute(params![tenant_id, run_id])
                        .map_err(unavailable)?;
                    deleted.items += removed as u64;
                }
                // Conditional on the retention still being past: a commit
                // that took the run up again meanwhile cleared it.
                let removed = transaction
                    .prepare_cached(
                        "DELETE FROM runs WHERE tenant_id = ?1 AND run_id = ?2
                           AND retain_until_millis IS NOT NULL AND retain_until_millis <= ?3",
                    )
                    .map_err(unavailable)?
                    .execute(params![tenant_id, run_id, now_millis])
                    .map_err(unavailable)?;
                deleted.runs += removed as u64;
            }
            transaction.commit().map_err(unavailable)?;
            Ok(deleted)
        })
        .await
    }
}
