//! The outbox's rows as the relay and the sweeper read and mark them: a
//! run's entries never re-sent, entries quiet since before a time, and
//! their re-send marks (written at `NORMAL`: a power loss undoes at most a
//! mark, which only repeats a send).

use async_trait::async_trait;
use baton_core::basics::ids::RunKey;
use baton_core::basics::instant::Instant;
use baton_core::state::run::StepMessage;
use baton_runtime::error::StoreError;
use baton_runtime::ports::{OutboxQuiet, OutboxStore, QuietOutboxEntry};
use rusqlite::params;

use crate::rows::{begin, from_json, millis, texts, without_fsync};
use crate::{SqliteStore, unavailable};

#[async_trait]
impl OutboxStore for SqliteStore {
    async fn pending_outbox(&self, key: RunKey<'_>) -> Result<Vec<StepMessage>, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let (tenant_id, run_id) = (tenant_id.to_string(), run_id.to_string());
        let messages: Vec<String> = self
            .with_reader(move |connection| {
                texts(
                    connection,
                    "SELECT message FROM outbox WHERE tenant_id = ?1 AND run_id = ?2 AND resent = 0
                         ORDER BY written_at_millis, message_id",
                    params![tenant_id, run_id],
                )
            })
            .await?;
        messages.iter().map(|message| from_json(message)).collect()
    }

    async fn mark_outbox_quiet(
        &self,
        key: RunKey<'_>,
        message_ids: &[String],
        quiet: OutboxQuiet,
    ) -> Result<(), StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let (tenant_id, run_id) = (tenant_id.to_string(), run_id.to_string());
        let message_ids = message_ids.to_vec();
        let (since, resends) = (millis(quiet.since), i64::from(quiet.resends));
        self.with_connection(move |connection| {
            without_fsync(connection, |connection| {
                let transaction = begin(connection)?;
                for message_id in &message_ids {
                    transaction
                        .prepare_cached(
                            "UPDATE outbox SET resent = ?4, quiet_since_millis = ?5
                         WHERE tenant_id = ?1 AND run_id = ?2 AND message_id = ?3",
                        )
                        .map_err(unavailable)?
                        .execute(params![tenant_id, run_id, message_id, resends, since])
                        .map_err(unavailable)?;
                }
                transaction.commit().map_err(unavailable)
            })
        })
        .await
    }

    async fn quiet_outbox(
        &self,
        quiet_before: Instant,
        limit: usize,
    ) -> Result<Vec<QuietOutboxEntry>, StoreError> {
        let cutoff = millis(quiet_before);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows: Vec<(String, i64)> = self
            .with_reader(move |connection| {
                let mut statement = connection
                    .prepare_cached(
                        "SELECT message, resent FROM outbox WHERE quiet_since_millis < ?1
                         ORDER BY quiet_since_millis, message_id LIMIT ?2",
                    )
                    .map_err(unavailable)?;
                let rows = statement
                    .query_map(params![cutoff, limit], |row| Ok((row.get(0)?, row.get(1)?)))
                    .map_err(unavailable)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(unavailable)
            })
            .await?;
        rows.iter()
            .map(|(message, resends)| {
                Ok(QuietOutboxEntry {
                    message: from_json(message)?,
                    resends: u32::try_from(*resends).unwrap_or(u32::MAX),
                })
            })
            .collect()
    }
}
