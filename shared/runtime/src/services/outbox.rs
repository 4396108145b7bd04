//! Sending committed step messages, and the sweeper's re-drive of what
//! stalled: a send lost after its commit, a holder that died between the
//! queue's receive and its first hold (its batch hidden for the queue's
//! whole visibility timeout), a step waiting in a backlog.

use std::sync::Arc;
use std::time::Duration;

use baton_core::basics::ids::RunKey;
use baton_core::state::run::StepMessage;

use crate::error::RuntimeError;
use crate::ports::{Clock, OutboxQuiet, QuietOutboxEntry, RunStore, StepQueue};

/// The longest the sweeper waits between two re-sends of one entry,
/// however often it was re-sent (the backoff's cap).
pub const LONGEST_QUIET_BETWEEN_RESENDS: Duration = Duration::from_secs(3600);

/// Sends committed outbox entries to the queue. On the hot path nothing is
/// written back: the step that handles a message consumes its entry in its
/// commit (never its claim, so a worker dying mid-node leaves the entry for
/// a restart or the sweeper to drive again).
#[derive(Clone)]
pub struct OutboxRelay {
    store: Arc<dyn RunStore>,
    queue: Arc<dyn StepQueue>,
    clock: Arc<dyn Clock>,
}

impl OutboxRelay {
    pub fn new(store: Arc<dyn RunStore>, queue: Arc<dyn StepQueue>, clock: Arc<dyn Clock>) -> Self {
        OutboxRelay {
            store,
            queue,
            clock,
        }
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
    /// re-sent (quiet from now: the sweeper looks at them again later).
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
        let quiet = OutboxQuiet {
            since: self.clock.now(),
            resends: 1,
        };
        self.store
            .mark_outbox_quiet(RunKey::new(tenant_id, run_id), &ids, quiet)
            .await?;
        Ok(pending.len())
    }
}

/// The sweeper's use case: needs a store, a queue and a clock, nothing else.
///
/// Invariant: an entry is re-sent only once it has been quiet for
/// `stall_after` (the deployment's two node leases) and its run holds no
/// live lease, and each re-send doubles the wait before the next (capped
/// at [`LONGEST_QUIET_BETWEEN_RESENDS`]): a stalled run is driven again
/// without the queue's help, and a backlog is not multiplied by its own
/// duplicates. A duplicate is harmless: the commit protocol makes the step
/// that finds its work done stale.
pub struct OutboxSweeper {
    store: Arc<dyn RunStore>,
    queue: Arc<dyn StepQueue>,
    clock: Arc<dyn Clock>,
}

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepOutcome {
    /// Quiet entries re-sent.
    pub resent: usize,
    /// Quiet entries left alone: their run holds a live lease, or they are
    /// timers not due yet.
    pub held: usize,
    /// Quiet entries that could not be sent or marked (tried again at the
    /// next sweep).
    pub failed: usize,
}

impl OutboxSweeper {
    pub fn new(store: Arc<dyn RunStore>, queue: Arc<dyn StepQueue>, clock: Arc<dyn Clock>) -> Self {
        OutboxSweeper {
            store,
            queue,
            clock,
        }
    }

    /// Re-sends the outbox entries quiet for `stall_after` whose run holds
    /// no live lease, and marks each quiet again from later on (twice the
    /// previous wait). An entry whose run holds a live lease is marked
    /// quiet from now, not re-sent: its holder is at work and commits or
    /// loses its lease. One entry that cannot be read, sent or marked is
    /// logged and skipped (it stays quiet, for the next sweep): it never
    /// holds back the others.
    pub async fn sweep(
        &self,
        stall_after: Duration,
        limit: usize,
    ) -> Result<SweepOutcome, RuntimeError> {
        let now = self.clock.now();
        let quiet = self
            .store
            .quiet_outbox(now.minus(stall_after), limit)
            .await?;
        let mut outcome = SweepOutcome::default();
        for entry in &quiet {
            match self.redrive(entry, stall_after, now).await {
                Ok(true) => outcome.resent += 1,
                Ok(false) => outcome.held += 1,
                Err(error) => {
                    outcome.failed += 1;
                    tracing::warn!(
                        %error,
                        run_id = %entry.message.run_id,
                        step_id = %entry.message.message_id,
                        "sweeper could not re-drive a quiet outbox entry; skipping it until the next sweep"
                    );
                }
            }
        }
        if outcome.resent > 0 || outcome.failed > 0 {
            tracing::info!(
                resent = outcome.resent,
                held = outcome.held,
                failed = outcome.failed,
                "sweeper re-drove quiet outbox entries"
            );
        }
        Ok(outcome)
    }

    /// `true` when re-sent; `false` when its run holds a live lease or it
    /// is a timer not due yet (its quiet is counted from then).
    async fn redrive(
        &self,
        entry: &QuietOutboxEntry,
        stall_after: Duration,
        now: baton_core::basics::instant::Instant,
    ) -> Result<bool, RuntimeError> {
        let message = &entry.message;
        let ids = std::slice::from_ref(&message.message_id);
        if let Some(due) = message.not_before
            && due.plus(stall_after) > now
        {
            let quiet = OutboxQuiet {
                since: due,
                resends: entry.resends,
            };
            self.store
                .mark_outbox_quiet(message.run_key(), ids, quiet)
                .await?;
            return Ok(false);
        }
        if self
            .store
            .run_holds_live_lease(message.run_key(), now)
            .await?
        {
            let quiet = OutboxQuiet {
                since: now,
                resends: entry.resends,
            };
            self.store
                .mark_outbox_quiet(message.run_key(), ids, quiet)
                .await?;
            return Ok(false);
        }
        self.queue.send(std::slice::from_ref(message)).await?;
        let resends = entry.resends.saturating_add(1);
        let wait = wait_after_resend(stall_after, resends);
        // Quiet since `now + wait - stall_after`: quiet for `stall_after`
        // again `wait` from now.
        let quiet = OutboxQuiet {
            since: now.plus(wait.saturating_sub(stall_after)),
            resends,
        };
        self.store
            .mark_outbox_quiet(message.run_key(), ids, quiet)
            .await?;
        Ok(true)
    }
}

/// How long an entry re-sent `resends` times stays off the sweeper's list:
/// `stall_after` doubled for each re-send, at most
/// [`LONGEST_QUIET_BETWEEN_RESENDS`] (never less than `stall_after`).
pub fn wait_after_resend(stall_after: Duration, resends: u32) -> Duration {
    let doubled = stall_after.saturating_mul(1u32.checked_shl(resends.min(31)).unwrap_or(u32::MAX));
    doubled.min(LONGEST_QUIET_BETWEEN_RESENDS.max(stall_after))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_after_each_resend_up_to_its_cap() {
        let lease_pair = Duration::from_secs(60);
        assert_eq!(wait_after_resend(lease_pair, 1), Duration::from_secs(120));
        assert_eq!(wait_after_resend(lease_pair, 2), Duration::from_secs(240));
        assert_eq!(wait_after_resend(lease_pair, 6), Duration::from_secs(3600));
        assert_eq!(wait_after_resend(lease_pair, 40), Duration::from_secs(3600));
        assert_eq!(
            wait_after_resend(Duration::from_secs(7200), 3),
            Duration::from_secs(7200)
        );
    }
}
