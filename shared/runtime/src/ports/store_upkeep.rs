//! The store's ports beyond a run's own records: open event streams' leases
//! (the per-run and per-tenant stream caps, counted across processes) and
//! retention's batches (ended runs past their retention removed).

use async_trait::async_trait;
use baton_core::basics::ids::RunKey;
use baton_core::basics::instant::Instant;

use crate::error::StoreError;

/// The caps on open event streams: per run and per tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamCaps {
    pub per_run: usize,
    pub per_tenant: usize,
}

/// Whether a stream may open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamOpening {
    Opened,
    /// The run has `open` live streams, its cap.
    RunAtCap {
        open: usize,
    },
    /// The tenant has `open` live streams, its cap.
    TenantAtCap {
        open: usize,
    },
}

/// Open event streams as leases kept in the store, so every process and
/// Lambda instance sharing it counts the same streams: a stream takes a
/// lease when it opens, renews it while it is open and gives it back when
/// it ends; a stream whose process died holds its lease until it expires.
/// The count and the lease's write are one step where the store allows
/// (memory, SQLite); on DynamoDB two streams opening at once may both pass
/// a cap by one.
#[async_trait]
pub trait StreamLeases: Send + Sync {
    /// Takes a lease for stream `stream_id` of the run until `until`,
    /// unless the run or the tenant has its cap of leases live at `now`.
    async fn open_stream(
        &self,
        key: RunKey<'_>,
        stream_id: &str,
        caps: StreamCaps,
        now: Instant,
        until: Instant,
    ) -> Result<StreamOpening, StoreError>;

    /// Extends the lease to `until`.
    async fn renew_stream(
        &self,
        key: RunKey<'_>,
        stream_id: &str,
        until: Instant,
    ) -> Result<(), StoreError>;

    /// Gives the lease back.
    async fn close_stream(&self, key: RunKey<'_>, stream_id: &str) -> Result<(), StoreError>;
}

/// What one batch of retention's work did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpiredRunsBatch {
    /// Ended runs handled: deleted (SQLite, memory) or whose every item
    /// now carries its expiry (DynamoDB, whose TTL deletes them).
    pub runs: u64,
    /// Rows or items deleted or stamped with them, the runs' own aside.
    pub items: u64,
    /// More wait for the next batch.
    pub more: bool,
}

/// Retention's work a store does besides its commits, one bounded batch at
/// a time (`baton gc`, `serve`'s interval, the `sweeper` function): the
/// commit that ends a run stamps when it may go (`StepCommit::retain_until`),
/// and this removes ended runs past it with everything of them. Never
/// touches a run that works or waits.
#[async_trait]
pub trait RetentionUpkeep: Send + Sync {
    /// At most `batch` ended runs whose retention passed before `now`.
    async fn expire_ended_runs(
        &self,
        now: Instant,
        batch: usize,
    ) -> Result<ExpiredRunsBatch, StoreError>;
}
