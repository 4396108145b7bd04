//! The audit trail in memory: one process's, under one lock. Records past
//! their retention are dropped when the next one is appended.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::error::StoreError;
use crate::ports::{AuditAppend, AuditLog, AuditPage, AuditQuery, AuditRecord};

/// `(tenant, audit id)` → record.
#[derive(Default)]
pub struct InMemoryAuditLog {
    records: Mutex<BTreeMap<(String, String), AuditRecord>>,
}

impl InMemoryAuditLog {
    pub fn new() -> Self {
        Self::default()
    }
}

fn poisoned() -> StoreError {
    StoreError::Unavailable("audit lock poisoned".into())
}

#[async_trait]
impl AuditLog for InMemoryAuditLog {
    async fn append_audit(&self, record: &AuditRecord) -> Result<AuditAppend, StoreError> {
        let mut records = self.records.lock().map_err(|_| poisoned())?;
        records.retain(|_, kept| kept.expires_at_millis > record.at_millis);
        let key = (record.tenant_id.clone(), record.audit_id.clone());
        if records.contains_key(&key) {
            return Ok(AuditAppend::AlreadyKept);
        }
        records.insert(key, record.clone());
        Ok(AuditAppend::Appended)
    }

    async fn list_audit(
        &self,
        tenant_id: &str,
        query: &AuditQuery,
    ) -> Result<AuditPage, StoreError> {
        let records = self.records.lock().map_err(|_| poisoned())?;
        let page: Vec<AuditRecord> = records
            .iter()
            .filter(|((tenant, _), _)| tenant == tenant_id)
            .map(|(_, record)| record)
            .filter(|record| record.expires_at_millis > query.now_millis)
            .filter(|record| {
                query
                    .cursor
                    .as_ref()
                    .is_none_or(|cursor| record.audit_id < *cursor)
            })
            .rev()
            .take(query.limit + 1)
            .cloned()
            .collect();
        Ok(AuditPage::of_over_fetched(page, query.limit))
    }
}
