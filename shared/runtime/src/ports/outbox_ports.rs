//! The outbox port: committed step messages as the relay and the sweeper
//! see them.

use async_trait::async_trait;
use baton_core::basics::ids::RunKey;
use baton_core::basics::instant::Instant;
use baton_core::state::run::StepMessage;

use crate::error::StoreError;

/// An outbox entry the sweeper found quiet: its message, and how many
/// times it was re-sent already (the sweeper waits twice as long after
/// each).
#[derive(Debug, Clone, PartialEq)]
pub struct QuietOutboxEntry {
    pub message: StepMessage,
    pub resends: u32,
}

/// What `OutboxStore::mark_outbox_quiet` records on an entry: re-sent
/// `resends` times in all (0: never, it stays in `pending_outbox`), quiet
/// since `since`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxQuiet {
    pub since: Instant,
    pub resends: u32,
}

/// The outbox of committed step messages as the relay and the sweeper see
/// it: a run's entries never re-sent, and every run's entries quiet since
/// before a time.
///
/// Each unconsumed entry has a *quiet since* instant: its write, then what
/// each re-send sets. The sweeper re-sends an entry quiet for two node
/// leases whose run holds no live lease (a send lost after its commit, a
/// holder that died between the queue's receive and its first hold, a
/// backlog), and sets its quiet-since further out after each re-send.
#[async_trait]
pub trait OutboxStore: Send + Sync {
    /// Unconsumed outbox entries never re-sent.
    async fn pending_outbox(&self, key: RunKey<'_>) -> Result<Vec<StepMessage>, StoreError>;

    /// Sets the entries' re-send count and quiet-since (after a re-send,
    /// or when the sweeper found their run at work): off the sweeper's
    /// list until they have been quiet long enough again. An entry already
    /// consumed is left gone.
    async fn mark_outbox_quiet(
        &self,
        key: RunKey<'_>,
        message_ids: &[String],
        quiet: OutboxQuiet,
    ) -> Result<(), StoreError>;

    /// Unconsumed outbox entries of any run quiet since before
    /// `quiet_before`, longest quiet first.
    async fn quiet_outbox(
        &self,
        quiet_before: Instant,
        limit: usize,
    ) -> Result<Vec<QuietOutboxEntry>, StoreError>;
}
