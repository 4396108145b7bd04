//! `baton serve`'s and `baton mcp`'s upkeep, as the deployment's scheduled
//! sweeper function does it: ended runs past their retention removed (every
//! store), expired memory items removed (SQLite and memory; DynamoDB's TTL
//! removes its own), and on DynamoDB + SQS stale outbox entries re-sent and
//! the runs of dead-lettered steps ended.

use std::sync::Arc;
use std::time::Duration;

use baton_runtime::ports::{Clock, RetentionUpkeep};
use baton_runtime::services::{OutboxSweeper, RetentionPass};

/// How often the upkeep runs (the deployment's scheduled sweeper runs once
/// a minute too).
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Outbox entries re-sent per sweep at most (as the sweeper function).
const SWEEP_LIMIT: usize = 1000;

/// Expired memory items removed per sweep at most.
const MEMORY_ITEMS_PER_SWEEP: usize = 10_000;

/// What the upkeep works on.
pub(crate) struct Sweepers {
    /// On DynamoDB + SQS: stale outbox entries (the embedded stores re-drive
    /// left-over steps at start instead).
    pub(crate) outbox: Option<OutboxSweeper>,
    pub(crate) dead_letters: Option<baton_runtime::queue::dead_letters::DeadLetterReader>,
    /// Retention's batches on the process's store.
    pub(crate) retention: Arc<dyn RetentionUpkeep>,
    pub(crate) clock: Arc<dyn Clock>,
    /// Expired memory items removed where the store has no TTL of its own.
    pub(crate) memory: Option<Arc<baton_runtime::services::memory::MemoryService>>,
}

impl Sweepers {
    /// The upkeep of an embedded store: retention only.
    pub(crate) fn retention_only(
        retention: Arc<dyn RetentionUpkeep>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Sweepers {
            outbox: None,
            dead_letters: None,
            retention,
            clock,
            memory: None,
        }
    }

    /// The same upkeep, removing `memory`'s expired items too.
    pub(crate) fn with_memory(
        mut self,
        memory: Arc<baton_runtime::services::memory::MemoryService>,
    ) -> Self {
        self.memory = Some(memory);
        self
    }

    /// The cloud's: the outbox sweeper, retention, and the dead-letter
    /// reader over `services`' step service when
    /// `BATON_DEAD_LETTER_QUEUE_URL` names a queue.
    pub(crate) async fn cloud(
        outbox: OutboxSweeper,
        retention: Arc<dyn RetentionUpkeep>,
        clock: Arc<dyn Clock>,
        configuration: &baton_bootstrap::Configuration,
        services: &baton_runtime::services::Services,
    ) -> Self {
        let dead_letters =
            baton_bootstrap::dead_letter_reader(configuration, services.steps.clone()).await;
        Sweepers {
            outbox: Some(outbox),
            dead_letters,
            retention,
            clock,
            memory: None,
        }
    }

    /// [`sweep_every`] in a task of its own.
    pub(crate) fn spawn(
        self,
        configuration: &baton_bootstrap::Configuration,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(sweep_every(self, configuration.sweep_after, stop))
    }
}

async fn sweep_every(
    sweeper: Sweepers,
    sweep_after: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut every = tokio::time::interval(SWEEP_EVERY.min(sweep_after).max(Duration::from_secs(1)));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = every.tick() => {}
        }
        if let Some(reader) = &sweeper.dead_letters
            && let Err(error) = reader.read(SWEEP_LIMIT).await
        {
            tracing::warn!(%error, "reading the dead-letter queue failed; trying again at the next sweep");
        }
        if let Some(outbox) = &sweeper.outbox
            && let Err(error) = outbox.sweep(sweep_after, SWEEP_LIMIT).await
        {
            tracing::warn!(%error, "the outbox sweep failed; trying again at the next one");
        }
        match RetentionPass::SERVE
            .run(sweeper.retention.as_ref(), sweeper.clock.as_ref())
            .await
        {
            Ok(batch) if batch.runs == 0 => {}
            Ok(batch) => {
                tracing::info!(runs = batch.runs, "ended runs past their retention removed")
            }
            Err(error) => {
                tracing::warn!(%error, "retention's batch failed; trying again at the next sweep");
            }
        }
        if let Some(memory) = &sweeper.memory {
            match memory.remove_expired(MEMORY_ITEMS_PER_SWEEP).await {
                Ok(0) => {}
                Ok(removed) => tracing::info!(removed, "expired memory items removed"),
                Err(error) => {
                    tracing::warn!(%error, "removing expired memory items failed; trying again at the next sweep");
                }
            }
        }
    }
}
