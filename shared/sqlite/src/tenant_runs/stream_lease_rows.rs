//! Open event streams' leases on the SQLite file: one row per stream in
//! `stream_leases`, counted and taken in one write transaction, so the
//! per-run and per-tenant caps hold across every process sharing the file.
//! Expired rows (a process that died with streams open) are deleted by the
//! next opening of the tenant.

use async_trait::async_trait;
use baton_core::basics::ids::RunKey;
use baton_core::basics::instant::Instant;
use baton_runtime::error::StoreError;
use baton_runtime::ports::{StreamCaps, StreamLeases, StreamOpening};
use rusqlite::params;

use crate::rows::{begin, millis};
use crate::{SqliteStore, unavailable};

fn count(
    transaction: &rusqlite::Connection,
    sql: &str,
    parameters: impl rusqlite::Params,
) -> Result<usize, StoreError> {
    let counted: i64 = transaction
        .prepare_cached(sql)
        .map_err(unavailable)?
        .query_row(parameters, |row| row.get(0))
        .map_err(unavailable)?;
    Ok(usize::try_from(counted).unwrap_or(0))
}

#[async_trait]
impl StreamLeases for SqliteStore {
    async fn open_stream(
        &self,
        key: RunKey<'_>,
        stream_id: &str,
        caps: StreamCaps,
        now: Instant,
        until: Instant,
    ) -> Result<StreamOpening, StoreError> {
        let (tenant_id, run_id, stream_id) = (
            key.tenant_id().to_string(),
            key.run_id().to_string(),
            stream_id.to_string(),
        );
        let (now, until) = (millis(now), millis(until));
        self.with_connection(move |connection| {
            let transaction = begin(connection)?;
            transaction
                .prepare_cached(
                    "DELETE FROM stream_leases WHERE tenant_id = ?1 AND expires_at_millis <= ?2",
                )
                .map_err(unavailable)?
                .execute(params![tenant_id, now])
                .map_err(unavailable)?;
            let of_run = count(
                &transaction,
                "SELECT COUNT(*) FROM stream_leases WHERE tenant_id = ?1 AND run_id = ?2",
                params![tenant_id, run_id],
            )?;
            if of_run >= caps.per_run {
                return Ok(StreamOpening::RunAtCap { open: of_run });
            }
            let of_tenant = count(
                &transaction,
                "SELECT COUNT(*) FROM stream_leases WHERE tenant_id = ?1",
                params![tenant_id],
            )?;
            if of_tenant >= caps.per_tenant {
                return Ok(StreamOpening::TenantAtCap { open: of_tenant });
            }
            transaction
                .prepare_cached(
                    "INSERT OR REPLACE INTO stream_leases (tenant_id, run_id, stream_id, expires_at_millis)
                     VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(unavailable)?
                .execute(params![tenant_id, run_id, stream_id, until])
                .map_err(unavailable)?;
            transaction.commit().map_err(unavailable)?;
            Ok(StreamOpening::Opened)
        })
        .await
    }

    async fn renew_stream(
        &self,
        key: RunKey<'_>,
        stream_id: &str,
        until: Instant,
    ) -> Result<(), StoreError> {
        let (tenant_id, run_id, stream_id) = (
            key.tenant_id().to_string(),
            key.run_id().to_string(),
            stream_id.to_string(),
        );
        let until = millis(until);
        self.with_connection(move |connection| {
            connection
                .prepare_cached(
                    "UPDATE stream_leases SET expires_at_millis = ?4
                     WHERE tenant_id = ?1 AND run_id = ?2 AND stream_id = ?3",
                )
                .map_err(unavailable)?
                .execute(params![tenant_id, run_id, stream_id, until])
                .map_err(unavailable)?;
            Ok(())
        })
        .await
    }

    async fn close_stream(&self, key: RunKey<'_>, stream_id: &str) -> Result<(), StoreError> {
        let (tenant_id, run_id, stream_id) = (
            key.tenant_id().to_string(),
            key.run_id().to_string(),
            stream_id.to_string(),
        );
        self.with_connection(move |connection| {
            connection
                .prepare_cached(
                    "DELETE FROM stream_leases WHERE tenant_id = ?1 AND run_id = ?2 AND stream_id = ?3",
                )
                .map_err(unavailable)?
                .execute(params![tenant_id, run_id, stream_id])
                .map_err(unavailable)?;
            Ok(())
        })
        .await
    }
}
