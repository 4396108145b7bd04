//! Sending committed step messages, and the sweeper's re-send of what a
//! crash between commit and send left behind.

use std::sync::Arc;
use std::time::Duration;

use baton_core::basics::ids::RunKey;
use baton_core::state::run::StepMessage;

use crate::error::RuntimeError;
use crate::ports::{Clock, OutboxStore, StepQueue};

/// Sends committed outbox entries to the queue. On the hot path nothing is
/// written back: the step that handles a message consumes its entry in its
/// commit (never its claim, so a worker dying mid-node leaves the entry for
/// a restart or the sweeper to drive again).
#[derive(Clone)]
pub struct OutboxRelay {
    store: Arc<dyn OutboxStore>,
    queue: Arc<dyn StepQueue>,
}

impl OutboxRelay {
    pub fn new(store: Arc<dyn OutboxStore>, queue: Arc<dyn StepQueue>) -> Self {
        OutboxRelay { store, queue }
    }

    pub async fn send(&self, messages: &[StepMessage]) -> Result<(), RuntimeError> {
        if messages.is_empty() {
            return Ok(());
        }
        let span = tracing::info_span!(
            "send",
            otel.name = "steps send",
            otel.kind = "producer",
            messaging.operation.type = "send",
            messaging.batch.message_count = messages.len(),
        );
        tracing::Instrument::instrument(self.queue.send(messages), span).await?;
        Ok(())
    }

    /// Re-sends a run's unconsumed outbox entries once each (a stale
    /// delivery's recovery of a send lost after a commit; idempotent on the
    /// receiver: a step that already ran finds itself stale) and marks them
    /// re-sent.
    pub async fn resend_pending(
        &self,
        tenant_id: &str,
        run_id: &str,
    ) -> Result<usize, RuntimeError> {
        let pending = self
            .store
            .pending_outbox(RunKey::new(tenant_id, run_id))
            .await?;
        if pending.is_empty() {
            return Ok(0);
        }
        self.queue.send(&pending).await?;
        let ids: Vec<String> = pending
            .iter()
            .map(|message| message.message_id.clone())
            .collect();
        self.store
            .mark_outbox_sent(RunKey::new(tenant_id, run_id), &ids)
            .await?;
        Ok(pending.len())
    }
}

/// The sweeper's use case: needs a store, a queue and a clock, nothing else.
pub struct OutboxSweeper {
    store: Arc<dyn OutboxStore>,
    queue: Arc<dyn StepQueue>,
    clock: Arc<dyn Clock>,
}

impl OutboxSweeper {
    pub fn new(
        store: Arc<dyn OutboxStore>,
        queue: Arc<dyn StepQueue>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        OutboxSweeper {
            store,
            queue,
            clock,
        }
    }

    /// Re-sends outbox entries older than `older_than` that no step has
    /// consumed yet, then marks them re-sent. Returns how many were sent.
    /// One entry that cannot be sent or marked is logged and skipped (it
    /// stays pending, for the next sweep): it never holds back the others.
    pub async fn sweep(&self, older_than: Duration, limit: usize) -> Result<usize, RuntimeError> {
        let cutoff = self.clock.now().minus(older_than);
        let stale = self.store.stale_outbox(cutoff, limit).await?;
        let mut resent = 0;
        for message in &stale {
            if let Err(error) = self.resend(message).await {
                tracing::warn!(
                    %error,
                    run_id = %message.run_id,
                    step_id = %message.message_id,
                    "sweeper could not re-send a stale outbox entry; skipping it until the next sweep"
                );
                continue;
            }
            resent += 1;
        }
        if !stale.is_empty() {
            tracing::info!(
                resent,
                skipped = stale.len() - resent,
                "sweeper re-sent stale outbox entries"
            );
        }
        Ok(resent)
    }

    async fn resend(&self, message: &StepMessage) -> Result<(), RuntimeError> {
        self.queue.send(std::slice::from_ref(message)).await?;
        self.store
            .mark_outbox_sent(message.run_key(), std::slice::from_ref(&message.message_id))
            .await?;
        Ok(())
    }
}
