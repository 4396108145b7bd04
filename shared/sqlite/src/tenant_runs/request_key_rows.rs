//! Requests' idempotency keys on the SQLite file (`request_keys`): a claim
//! is one `BEGIN IMMEDIATE` transaction (read, then insert or take over),
//! so two processes sharing the file cannot both hold a key. Expired rows
//! are dropped by the next claim.

use async_trait::async_trait;
use baton_runtime::error::StoreError;
use baton_runtime::ports::{ClaimTimes, RequestKeyClaim, RequestKeyRecord, RequestKeys};
use rusqlite::{OptionalExtension, params};

use crate::rows::{as_i64, from_json, to_json};
use crate::{SqliteStore, unavailable};

/// The key's record, read in the write's own transaction.
fn kept_record(
    transaction: &rusqlite::Transaction<'_>,
    tenant_id: &str,
    key: &str,
) -> Result<Option<RequestKeyRecord>, StoreError> {
    let kept: Option<String> = transaction
        .query_row(
            "SELECT record FROM request_keys WHERE tenant_id = ?1 AND request_key = ?2",
            params![tenant_id, key],
            |row| row.get(0),
        )
        .optional()
        .map_err(unavailable)?;
    kept.map(|text| from_json(&text)).transpose()
}

#[async_trait]
impl RequestKeys for SqliteStore {
    async fn claim_request_key(
        &self,
        tenant_id: &str,
        key: &str,
        fingerprint: &str,
        times: ClaimTimes,
    ) -> Result<RequestKeyClaim, StoreError> {
        let (tenant_id, key, fingerprint) = (
            tenant_id.to_string(),
            key.to_string(),
            fingerprint.to_string(),
        );
        self.with_connection(move |connection| {
            let transaction = crate::rows::begin(connection)?;
            transaction
                .execute(
                    "DELETE FROM request_keys WHERE expires_at_millis <= ?1",
                    params![as_i64(times.now)],
                )
                .map_err(unavailable)?;
            let kept = kept_record(&transaction, &tenant_id, &key)?;
            if let Some(kept) = kept
                && (kept.answer.is_some() || kept.claimed_at_millis >= times.stale_before)
            {
                return Ok(RequestKeyClaim::Kept(kept));
            }
            let record = RequestKeyRecord {
                fingerprint,
                answer: None,
                claimed_at_millis: times.now,
                expires_at_millis: times.expires_at,
            };
            transaction
                .execute(
                    "INSERT OR REPLACE INTO request_keys (tenant_id, request_key, expires_at_millis, record) \
                     VALUES (?1, ?2, ?3, ?4)",
                    params![tenant_id, key, as_i64(times.expires_at), to_json(&record)?],
                )
                .map_err(unavailable)?;
            transaction.commit().map_err(unavailable)?;
            Ok(RequestKeyClaim::Claimed)
        })
        .await
    }

    async fn answer_request_key(
        &self,
        tenant_id: &str,
        key: &str,
        fingerprint: &str,
        answer: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let (tenant_id, key, fingerprint, answer) = (
            tenant_id.to_string(),
            key.to_string(),
            fingerprint.to_string(),
            answer.clone(),
        );
        self.with_connection(move |connection| {
            let transaction = crate::rows::begin(connection)?;
            let kept = kept_record(&transaction, &tenant_id, &key)?;
            let mut record = match kept {
                Some(kept) => kept,
                None => {
                    return Err(StoreError::Unavailable(format!(
                        "idempotency key `{key}` is no longer this request's"
                    )));
                }
            };
            if record.fingerprint != fingerprint || record.answer.is_some() {
                return Err(StoreError::Unavailable(format!(
                    "idempotency key `{key}` is no longer this request's"
                )));
            }
            record.answer = Some(answer);
            transaction
                .execute(
                    "UPDATE request_keys SET record = ?3 WHERE tenant_id = ?1 AND request_key = ?2",
                    params![tenant_id, key, to_json(&record)?],
                )
                .map_err(unavailable)?;
            transaction.commit().map_err(unavailable)?;
            Ok(())
        })
        .await
    }

    async fn release_request_key(
        &self,
        tenant_id: &str,
        key: &str,
        fingerprint: &str,
    ) -> Result<(), StoreError> {
        let (tenant_id, key, fingerprint) = (
            tenant_id.to_string(),
            key.to_string(),
            fingerprint.to_string(),
        );
        self.with_connection(move |connection| {
            let transaction = crate::rows::begin(connection)?;
            let ours = kept_record(&transaction, &tenant_id, &key)?
                .is_some_and(|kept| kept.fingerprint == fingerprint && kept.answer.is_none());
            if ours {
                transaction
                    .execute(
                        "DELETE FROM request_keys WHERE tenant_id = ?1 AND request_key = ?2",
                        params![tenant_id, key],
                    )
                    .map_err(unavailable)?;
            }
            transaction.commit().map_err(unavailable)?;
            Ok(())
        })
        .await
    }
}
