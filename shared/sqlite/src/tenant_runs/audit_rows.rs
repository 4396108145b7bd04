//! The audit trail on the SQLite file: rows are inserted, never updated (a
//! trigger refuses any `UPDATE`, and no code path issues one); a row goes
//! only when its retention has passed, dropped by the next append.

use async_trait::async_trait;
use baton_runtime::error::StoreError;
use baton_runtime::ports::{AuditAppend, AuditLog, AuditPage, AuditQuery, AuditRecord};
use rusqlite::params;

use crate::SqliteStore;
use crate::rows::{as_i64, from_json, texts, to_json};

#[async_trait]
impl AuditLog for SqliteStore {
    async fn append_audit(&self, record: &AuditRecord) -> Result<AuditAppend, StoreError> {
        let text = to_json(record)?;
        let (tenant_id, audit_id) = (record.tenant_id.clone(), record.audit_id.clone());
        let (expires, now) = (as_i64(record.expires_at_millis), as_i64(record.at_millis));
        self.with_connection(move |connection| {
            let transaction = crate::rows::begin(connection)?;
            transaction
                .execute(
                    "DELETE FROM audit_records WHERE expires_at_millis <= ?1",
                    params![now],
                )
                .map_err(crate::unavailable)?;
            let inserted = transaction
                .execute(
                    "INSERT OR IGNORE INTO audit_records (tenant_id, audit_id, expires_at_millis, record) \
                     VALUES (?1, ?2, ?3, ?4)",
                    params![tenant_id, audit_id, expires, text],
                )
                .map_err(crate::unavailable)?;
            transaction.commit().map_err(crate::unavailable)?;
            Ok(if inserted == 1 {
                AuditAppend::Appended
            } else {
                AuditAppend::AlreadyKept
            })
        })
        .await
    }

    async fn list_audit(
        &self,
        tenant_id: &str,
        query: &AuditQuery,
    ) -> Result<AuditPage, StoreError> {
        let tenant_id = tenant_id.to_string();
        let cursor = query.cursor.clone().unwrap_or_else(|| "~".to_string());
        let (now, fetch) = (
            as_i64(query.now_millis),
            i64::try_from(query.limit + 1).unwrap_or(i64::MAX),
        );
        let rows: Vec<String> = self
            .with_reader(move |connection| {
                texts(
                    connection,
                    "SELECT record FROM audit_records \
                     WHERE tenant_id = ?1 AND audit_id < ?2 AND expires_at_millis > ?3 \
                     ORDER BY audit_id DESC LIMIT ?4",
                    params![tenant_id, cursor, now, fetch],
                )
            })
            .await?;
        let records = rows
            .iter()
            .map(|row| from_json::<AuditRecord>(row))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AuditPage::of_over_fetched(records, query.limit))
    }
}
