//! Requests' idempotency keys in memory: one process's, under one lock.
//! Expired records are dropped when the next key is claimed.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::error::StoreError;
use crate::ports::{ClaimTimes, RequestKeyClaim, RequestKeyRecord, RequestKeys};

/// `(tenant, key)` → record.
#[derive(Default)]
pub struct InMemoryRequestKeys {
    records: Mutex<BTreeMap<(String, String), RequestKeyRecord>>,
}

impl InMemoryRequestKeys {
    pub fn new() -> Self {
        Self::default()
    }
}

fn poisoned() -> StoreError {
    StoreError::Unavailable("request key lock poisoned".into())
}

#[async_trait]
impl RequestKeys for InMemoryRequestKeys {
    async fn claim_request_key(
        &self,
        tenant_id: &str,
        key: &str,
        fingerprint: &str,
        times: ClaimTimes,
    ) -> Result<RequestKeyClaim, StoreError> {
        let mut records = self.records.lock().map_err(|_| poisoned())?;
        records.retain(|_, kept| kept.expires_at_millis > times.now);
        let slot = (tenant_id.to_string(), key.to_string());
        if let Some(kept) = records.get(&slot)
            && (kept.answer.is_some() || kept.claimed_at_millis >= times.stale_before)
        {
            return Ok(RequestKeyClaim::Kept(kept.clone()));
        }
        records.insert(
            slot,
            RequestKeyRecord {
                fingerprint: fingerprint.to_string(),
                answer: None,
                claimed_at_millis: times.now,
                expires_at_millis: times.expires_at,
            },
        );
        Ok(RequestKeyClaim::Claimed)
    }

    async fn answer_request_key(
        &self,
        tenant_id: &str,
        key: &str,
        fingerprint: &str,
        answer: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let mut records = self.records.lock().map_err(|_| poisoned())?;
        match records.get_mut(&(tenant_id.to_string(), key.to_string())) {
            Some(kept) if kept.fingerprint == fingerprint && kept.answer.is_none() => {
                kept.answer = Some(answer.clone());
                Ok(())
            }
            _ => Err(StoreError::Unavailable(format!(
                "idempotency key `{key}` is no longer this request's"
            ))),
        }
    }

    async fn release_request_key(
        &self,
        tenant_id: &str,
        key: &str,
        fingerprint: &str,
    ) -> Result<(), StoreError> {
        let mut records = self.records.lock().map_err(|_| poisoned())?;
        let slot = (tenant_id.to_string(), key.to_string());
        if records
            .get(&slot)
            .is_some_and(|kept| kept.fingerprint == fingerprint && kept.answer.is_none())
        {
            records.remove(&slot);
        }
        Ok(())
    }
}
