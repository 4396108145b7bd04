//! The audit trail's port: who changed what, when, and how it went, kept
//! append-only by every store (`AuditLog`). A record is never changed
//! through any route or port: the only way out is its retention.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::StoreError;

/// How a recorded request ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditOutcome {
    /// The HTTP status answered.
    pub status: u16,
    /// The error's code, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// One state-changing request: who, what, when, on what, and the outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditRecord {
    /// Time-ordered: the records of a tenant sort by it.
    pub audit_id: String,
    pub tenant_id: String,
    /// RFC 3339.
    pub at: String,
    pub at_millis: u64,
    /// The signed-in user, else the kind of credential (`token`,
    /// `anonymous`).
    pub actor: String,
    /// The operation (`createRun`, `cancelRun`, `resolveRequest`, …).
    pub action: String,
    /// What it acted on (`run/…`, `schedule/…`, `task/…`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// The request's id (`X-Request-Id`, given or made).
    pub request_id: String,
    pub outcome: AuditOutcome,
    /// When the store may drop it (its retention).
    pub expires_at_millis: u64,
}

/// A page of a tenant's audit trail, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditPage {
    pub records: Vec<AuditRecord>,
    /// Present when older records remain: the next page's `cursor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

impl AuditPage {
    /// The page of `records` read with one record past `limit` (newest
    /// first): that extra record only says whether older ones remain.
    pub fn of_over_fetched(mut records: Vec<AuditRecord>, limit: usize) -> Self {
        let next_cursor = if records.len() > limit {
            records.truncate(limit);
            records.last().map(|record| record.audit_id.clone())
        } else {
            None
        };
        AuditPage {
            records,
            next_cursor,
        }
    }
}

/// Which records to read: newest first, `limit` of them, older than the
/// `cursor` (an `audit_id`) when given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditQuery {
    pub limit: usize,
    pub cursor: Option<String>,
    /// Records expiring at or before this are not returned (the store may
    /// not have dropped them yet).
    pub now_millis: u64,
}

/// What appending found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditAppend {
    Appended,
    /// A record with that id is kept already: nothing was written.
    AlreadyKept,
}

/// The audit trail, append-only.
#[async_trait]
pub trait AuditLog: Send + Sync {
    /// Keeps `record` unless one with its id is kept (a conditional put:
    /// never an overwrite).
    async fn append_audit(&self, record: &AuditRecord) -> Result<AuditAppend, StoreError>;

    /// The tenant's records, newest first.
    async fn list_audit(
        &self,
        tenant_id: &str,
        query: &AuditQuery,
    ) -> Result<AuditPage, StoreError>;
}
