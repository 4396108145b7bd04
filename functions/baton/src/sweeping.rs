//! `baton serve --store dynamodb`'s sweeps, as the deployment's scheduled
//! sweeper function does them: stale outbox entries re-sent, and the runs of
//! dead-lettered steps ended.

use std::time::Duration;

use baton_runtime::services::OutboxSweeper;

/// How often `baton serve --store dynamodb` sweeps (the deployment's
/// scheduled sweeper runs once a minute too).
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Outbox entries re-sent per sweep at most (as the sweeper function).
const SWEEP_LIMIT: usize = 1000;

/// What `baton serve --store dynamodb` sweeps, as the deployment's
/// scheduled sweeper does: the outbox, and the dead-letter queue when
/// `BATON_DEAD_LETTER_QUEUE_URL` names one.
pub(crate) struct Sweepers {
    pub(crate) outbox: OutboxSweeper,
    pub(crate) dead_letters: Option<baton_runtime::queue::dead_letters::DeadLetterReader>,
}

/// Sweeps every [`SWEEP_EVERY`] (outbox entries older than `sweep_after`,
/// `BATON_SWEEP_AFTER_SECONDS`; the dead-letter queue) until `stop` changes.
impl Sweepers {
    /// The outbox sweeper, and the dead-letter reader over `services`' step
    /// service when `BATON_DEAD_LETTER_QUEUE_URL` names a queue.
    pub(crate) async fn new(
        outbox: OutboxSweeper,
        configuration: &baton_bootstrap::Configuration,
        services: &baton_runtime::services::Services,
    ) -> Self {
        let dead_letters =
            baton_bootstrap::dead_letter_reader(configuration, services.steps.clone()).await;
        Sweepers {
            outbox,
            dead_letters,
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
        if let Err(error) = sweeper.outbox.sweep(sweep_after, SWEEP_LIMIT).await {
            tracing::warn!(%error, "the outbox sweep failed; trying again at the next one");
        }
    }
}
