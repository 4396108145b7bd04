//! The in-memory outbox as the relay and the sweeper see it: a run's
//! entries never re-sent, entries quiet since before a time, re-send marks.

use std::collections::HashMap;

use async_trait::async_trait;
use baton_core::basics::ids::RunKey;
use baton_core::basics::instant::Instant;
use baton_core::state::run::StepMessage;

use super::{InMemoryRunStore, poisoned};
use crate::error::StoreError;
use crate::ports::{OutboxQuiet, OutboxStore, QuietOutboxEntry};

#[async_trait]
impl OutboxStore for InMemoryRunStore {
    async fn pending_outbox(&self, key: RunKey<'_>) -> Result<Vec<StepMessage>, StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let tables = self.tables.lock().map_err(|_| poisoned())?;
        let record = tables.run(tenant_id, run_id)?;
        Ok(record
            .outbox
            .values()
            .filter(|entry| entry.resends == 0)
            .map(|entry| entry.message.clone())
            .collect())
    }

    async fn quiet_outbox(
        &self,
        quiet_before: Instant,
        limit: usize,
    ) -> Result<Vec<QuietOutboxEntry>, StoreError> {
        let tables = self.tables.lock().map_err(|_| poisoned())?;
        let mut quiet: Vec<(u64, QuietOutboxEntry)> = tables
            .runs
            .values()
            .flat_map(HashMap::values)
            .flat_map(|record| record.outbox.values())
            .filter(|entry| entry.quiet_since_millis < quiet_before.unix_millis())
            .map(|entry| {
                let found = QuietOutboxEntry {
                    message: entry.message.clone(),
                    resends: entry.resends,
                };
                (entry.quiet_since_millis, found)
            })
            .collect();
        quiet.sort_by_key(|(since, _)| *since);
        Ok(quiet
            .into_iter()
            .take(limit)
            .map(|(_, entry)| entry)
            .collect())
    }

    async fn mark_outbox_quiet(
        &self,
        key: RunKey<'_>,
        message_ids: &[String],
        quiet: OutboxQuiet,
    ) -> Result<(), StoreError> {
        let (tenant_id, run_id) = (key.tenant_id(), key.run_id());
        let mut tables = self.tables.lock().map_err(|_| poisoned())?;
        let record = tables.run_mut(tenant_id, run_id)?;
        for message_id in message_ids {
            if let Some(entry) = record.outbox.get_mut(message_id) {
                entry.resends = quiet.resends;
                entry.quiet_since_millis = quiet.since.unix_millis();
            }
        }
        Ok(())
    }
}
