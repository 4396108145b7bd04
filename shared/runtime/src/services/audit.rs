//! The audit trail: every state-changing request a tenant's callers make
//! (submit, cancel, resume, approve or reject, answer, fork, chat,
//! register, schedule changes, evaluations) is kept as one append-only
//! record (who, what, when, the request, the resource, the outcome) for
//! its own retention (`audit_retention_days`, default 400), readable by the
//! tenant's admins, never changed.

use std::sync::Arc;

use crate::error::RuntimeError;
use crate::ports::{
    AuditAppend, AuditLog, AuditOutcome, AuditPage, AuditQuery, AuditRecord, Clock, IdGenerator,
};

/// The default retention of an audit record: 400 days.
pub const DEFAULT_AUDIT_RETENTION_DAYS: u32 = 400;

/// The most records one page holds.
pub const MAX_AUDIT_PAGE: usize = 1000;

/// What a caller did, as the edge knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub tenant_id: String,
    pub actor: String,
    pub action: String,
    pub resource: Option<String>,
    pub request_id: String,
    pub outcome: AuditOutcome,
}

/// Keeps and reads the audit trail.
pub struct AuditTrail {
    log: Arc<dyn AuditLog>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    retention_days: u32,
    /// Orders this process's records within one millisecond (ids sort by
    /// time, then by this, then by the random part).
    sequence: std::sync::atomic::AtomicU64,
}

impl AuditTrail {
    pub fn new(
        log: Arc<dyn AuditLog>,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGenerator>,
        retention_days: u32,
    ) -> Self {
        AuditTrail {
            log,
            clock,
            ids,
            retention_days,
            sequence: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// A new request id (for a request that brought none).
    pub fn new_request_id(&self) -> String {
        self.ids.new_id("req")
    }

    /// Keeps `entry`, stamped now; its id sorts by time, and within one
    /// millisecond by the order this process kept them.
    pub async fn record(&self, entry: AuditEntry) -> Result<AuditRecord, RuntimeError> {
        let now = self.clock.now();
        let at_millis = now.unix_millis();
        let record = AuditRecord {
            audit_id: format!(
                "{at_millis:013}-{:012}-{}",
                self.sequence
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                self.ids.new_id("a")
            ),
            tenant_id: entry.tenant_id,
            at: now.rfc3339(),
            at_millis,
            actor: entry.actor,
            action: entry.action,
            resource: entry.resource,
            request_id: entry.request_id,
            outcome: entry.outcome,
            expires_at_millis: at_millis
                .saturating_add(u64::from(self.retention_days) * 24 * 3600 * 1000),
        };
        match self.log.append_audit(&record).await? {
            AuditAppend::Appended => Ok(record),
            // Ids are unique per call: a kept one means two writers made
            // the same id, and the record kept is never overwritten.
            AuditAppend::AlreadyKept => Err(RuntimeError::Store(
                crate::error::StoreError::Corrupt(format!(
                    "audit record {} is kept already; nothing was overwritten",
                    record.audit_id
                )),
            )),
        }
    }

    /// The tenant's records, newest first: at most `limit` (1 to
    /// [`MAX_AUDIT_PAGE`]), older than `cursor` when given.
    pub async fn list(
        &self,
        tenant_id: &str,
        limit: usize,
        cursor: Option<String>,
    ) -> Result<AuditPage, RuntimeError> {
        let query = AuditQuery {
            limit: limit.clamp(1, MAX_AUDIT_PAGE),
            cursor,
            now_millis: self.clock.now().unix_millis(),
        };
        Ok(self.log.list_audit(tenant_id, &query).await?)
    }
}
