//! Chat threads on the SQLite file: one row per exchange, keyed by the run
//! that answered it, so recording an exchange again replaces it.

use async_trait::async_trait;
use baton_core::chat::ChatExchange;
use baton_runtime::error::StoreError;
use baton_runtime::ports::ThreadStore;
use rusqlite::params;

use crate::SqliteStore;
use crate::rows::{from_json, texts, to_json};

#[async_trait]
impl ThreadStore for SqliteStore {
    async fn thread_exchanges(
        &self,
        tenant_id: &str,
        thread_id: &str,
    ) -> Result<Option<Vec<ChatExchange>>, StoreError> {
        let (tenant_id, thread_id) = (tenant_id.to_string(), thread_id.to_string());
        let rows: Vec<String> = self
            .with_connection(move |connection| {
                texts(
                    connection,
                    "SELECT exchange FROM threads WHERE tenant_id = ?1 AND thread_id = ?2 \
                     ORDER BY at_millis, run_id",
                    params![tenant_id, thread_id],
                )
            })
            .await?;
        if rows.is_empty() {
            return Ok(None);
        }
        rows.iter()
            .map(|row| from_json(row))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    async fn record_exchange(
        &self,
        tenant_id: &str,
        thread_id: &str,
        exchange: &ChatExchange,
    ) -> Result<(), StoreError> {
        let (tenant_id, thread_id) = (tenant_id.to_string(), thread_id.to_string());
        let record = to_json(exchange)?;
        let (run_id, at_millis) = (
            exchange.run_id.clone(),
            i64::try_from(exchange.at_millis).unwrap_or(i64::MAX),
        );
        self.with_connection(move |connection| {
            connection
                .execute(
                    "INSERT OR REPLACE INTO threads (tenant_id, thread_id, run_id, at_millis, exchange) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![tenant_id, thread_id, run_id, at_millis, record],
                )
                .map_err(crate::unavailable)?;
            Ok(())
        })
        .await
    }
}
