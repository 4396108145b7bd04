//! The dead-letter queue's reader: a step message the queue's redrive
//! policy moved there (every delivery's holder stopped before it finished:
//! out of memory, killed, out of time at its last receive) ends its run
//! `step_failed`, naming the step and why, so no run stays `running` with
//! its message gone. A dead-lettered step that no longer applies (the run
//! moved on: a re-sent copy did the step, or the sweeper re-drove the run
//! after an outage) is dropped and logged, never used to fail a live run.
//! Run by the sweeper (the scheduled function, and `baton serve --store
//! dynamodb`).

use std::time::Duration;

use crate::error::{QueueError, RuntimeError};
use crate::ports::StepQueue;
use crate::queue::disposition::MAX_RECEIVES_BEFORE_DEAD_LETTER;
use crate::services::{GaveUp, StepService};

/// What one read of the dead-letter queue did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeadLetterReport {
    /// Messages whose run was ended here (or had ended already): removed.
    pub runs_ended: usize,
    /// Messages whose step no longer applied (their run had moved on):
    /// removed, the run left as it was.
    pub stale_dropped: usize,
    /// Messages whose run could not be ended (unreadable, or the store
    /// failing): left in the dead-letter queue for a person, and for the
    /// next read.
    pub left: usize,
}

impl DeadLetterReport {
    /// Messages this read took from the queue, whatever became of them.
    pub fn read(&self) -> usize {
        self.runs_ended + self.stale_dropped + self.left
    }
}

/// Reads up to `limit` messages of the dead-letter queue `dead_letters`,
/// ends each one's run (`StepService::give_up` with
/// [`RuntimeError::DeadLettered`]) and removes the message once the run's
/// end is recorded. A message whose run cannot be ended stays where it is,
/// hidden for `hold`, and is logged.
pub async fn end_runs_of_dead_letters(
    steps: &StepService,
    dead_letters: &dyn StepQueue,
    limit: usize,
    hold: Duration,
) -> Result<DeadLetterReport, QueueError> {
    let mut report = DeadLetterReport::default();
    while report.read() < limit {
        let batch = dead_letters
            .receive(10.min(limit - report.read()), Duration::ZERO)
            .await?;
        if batch.is_empty() {
            break;
        }
        for received in batch {
            // Hidden while its run is ended, then again if that failed, so
            // this read does not meet it twice.
            if let Err(error) = dead_letters.hold(&received.receipt, hold).await {
                tracing::warn!(%error, "could not hold a dead-lettered message");
            }
            let cause = RuntimeError::DeadLettered {
                receives: MAX_RECEIVES_BEFORE_DEAD_LETTER,
            };
            let message = &received.message;
            match steps
                .give_up_dead_letter(message, &cause, MAX_RECEIVES_BEFORE_DEAD_LETTER)
                .await
            {
                Ok(GaveUp::Stale) => {
                    tracing::warn!(run_id = %message.run_id, step_id = %message.message_id, step = message.command.kind_name(), "a dead-lettered step no longer applies (its run moved on): dropped, the run left as it is");
                    dead_letters.acknowledge(&received.receipt).await?;
                    report.stale_dropped += 1;
                }
                Ok(gave_up) => {
                    let ended = gave_up == GaveUp::RunEnded;
                    tracing::error!(run_id = %message.run_id, step_id = %message.message_id, step = message.command.kind_name(), ended, "a dead-lettered step: its run ends step_failed");
                    dead_letters.acknowledge(&received.receipt).await?;
                    report.runs_ended += 1;
                }
                Err(error) => {
                    tracing::error!(run_id = %message.run_id, step_id = %message.message_id, %error, "a dead-lettered step whose run cannot be ended: left in the dead-letter queue");
                    report.left += 1;
                }
            }
        }
    }
    Ok(report)
}

/// The dead-letter queue and the step service that ends its messages' runs.
pub struct DeadLetterReader {
    steps: std::sync::Arc<StepService>,
    dead_letters: std::sync::Arc<dyn StepQueue>,
}

impl DeadLetterReader {
    pub fn new(
        steps: std::sync::Arc<StepService>,
        dead_letters: std::sync::Arc<dyn StepQueue>,
    ) -> Self {
        DeadLetterReader {
            steps,
            dead_letters,
        }
    }

    /// [`end_runs_of_dead_letters`] on this queue, each message held for
    /// one node lease while its run is ended.
    pub async fn read(&self, limit: usize) -> Result<DeadLetterReport, QueueError> {
        end_runs_of_dead_letters(
            &self.steps,
            self.dead_letters.as_ref(),
            limit,
            self.steps.message_hold(),
        )
        .await
    }
}
