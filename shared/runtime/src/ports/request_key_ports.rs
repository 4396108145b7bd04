//! Idempotency keys of requests that are not run submissions (a chat
//! message, a fork, a person's answer, a schedule's creation): the store
//! keeps, per tenant and key, the request's fingerprint and, once it has
//! one, its answer, so a retried request gets the first one's answer and
//! makes no second effect. A run submission's key lives with its run
//! (`RunLog::create_run`), not here.
//!
//! Invariants: one record per tenant and key; a claim is taken by exactly
//! one caller at a time (a conditional write); an answer is written only
//! over its own claim (same fingerprint); a record is gone (or ignored)
//! once `expires_at_millis` has passed.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::StoreError;

/// A key as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestKeyRecord {
    /// The request's fingerprint (a digest of its route and body).
    pub fingerprint: String,
    /// The first request's answer, once it has one (none: in flight).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<serde_json::Value>,
    pub claimed_at_millis: u64,
    pub expires_at_millis: u64,
}

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestKeyClaim {
    /// The caller holds the key: make the effect, then answer or release.
    Claimed,
    /// Another request holds it (answered, or still in flight).
    Kept(RequestKeyRecord),
}

/// A claim's times (Unix milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimTimes {
    pub now: u64,
    /// An unanswered claim made before this is a dead caller's: taken over.
    pub stale_before: u64,
    pub expires_at: u64,
}

#[async_trait]
pub trait RequestKeys: Send + Sync {
    /// Takes `key` of `tenant_id` for the request `fingerprint`, unless a
    /// live record holds it (an expired record, or a stale unanswered
    /// claim, is taken over).
    async fn claim_request_key(
        &self,
        tenant_id: &str,
        key: &str,
        fingerprint: &str,
        times: ClaimTimes,
    ) -> Result<RequestKeyClaim, StoreError>;

    /// Keeps `answer` on the caller's claim (the same fingerprint).
    async fn answer_request_key(
        &self,
        tenant_id: &str,
        key: &str,
        fingerprint: &str,
        answer: &serde_json::Value,
    ) -> Result<(), StoreError>;

    /// Gives an unanswered claim back (its request failed; a retry may
    /// make the effect). An answered record is kept.
    async fn release_request_key(
        &self,
        tenant_id: &str,
        key: &str,
        fingerprint: &str,
    ) -> Result<(), StoreError>;
}
