//! Giving up on a step message: the worker's, at a message's last receive
//! (the run ends `step_failed`), and the dead-letter reader's, which
//! leaves a run alone when the message's step no longer applies.

use baton_core::engine::is_stale;
use baton_core::state::run::{RunState, StepMessage};

use super::StepService;
use crate::error::RuntimeError;
use crate::services::commit::{CommitResult, CommitTarget, Decided};

/// What giving up on a step message did to its run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GaveUp {
    /// The run ended `failed` (`step_failed`) here.
    RunEnded,
    /// The run had ended already, or is gone: nothing written.
    AlreadyEnded,
    /// The step no longer applies (the run moved on): nothing written.
    Stale,
}

/// Whether giving up on a step that no longer applies still ends its run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StaleSteps {
    /// Yes: the worker gives up on the message it holds (at its last
    /// receive), whose step it just failed.
    EndTheRun,
    /// No: a dead-lettered message may be older than the run's progress.
    Leave,
}

impl StepService {
    /// A step message failed for good (`disposition::StepDisposition::
    /// DeadLetter`): the run ends `failed` with a `step_failed` error frame
    /// naming the step, how often it was tried and the error, and the
    /// message's outbox entry is consumed, so no sweeper sends it again.
    /// Returns whether the run was ended here (false: it had already ended,
    /// or is gone). When even that commit fails (a state that no longer
    /// loads), the error is returned and the message is left to the
    /// dead-letter queue.
    pub async fn give_up(
        &self,
        message: &StepMessage,
        error: &RuntimeError,
        deliveries: u32,
    ) -> Result<bool, RuntimeError> {
        Ok(self
            .give_up_where(message, error, deliveries, StaleSteps::EndTheRun)
            .await?
            == GaveUp::RunEnded)
    }

    /// The same for a message the dead-letter queue holds, which may be
    /// old: when its step no longer applies (the run moved on after a
    /// re-sent copy did the step, or the sweeper re-drove it), the run is
    /// left as it is and [`GaveUp::Stale`] says so.
    pub async fn give_up_dead_letter(
        &self,
        message: &StepMessage,
        error: &RuntimeError,
        deliveries: u32,
    ) -> Result<GaveUp, RuntimeError> {
        self.give_up_where(message, error, deliveries, StaleSteps::Leave)
            .await
    }

    async fn give_up_where(
        &self,
        message: &StepMessage,
        error: &RuntimeError,
        deliveries: u32,
        stale: StaleSteps,
    ) -> Result<GaveUp, RuntimeError> {
        let target = CommitTarget {
            tenant_id: &message.tenant_id,
            run_id: &message.run_id,
            consumed_message_id: Some(&message.message_id),
        };
        let step = serde_json::to_string(&message.command).unwrap_or_default();
        let reason = format!("step {step} failed for good after {deliveries} deliveries: {error}");
        let engine = self.engine(&self.registry);
        let decide = |state: RunState| {
            if state.status().is_terminal() {
                return Ok(Decided::Nothing(GaveUp::AlreadyEnded));
            }
            if stale == StaleSteps::Leave && is_stale(&state, &message.command) {
                return Ok(Decided::Nothing(GaveUp::Stale));
            }
            Ok(
                match baton_core::engine::fail_run(
                    state,
                    baton_core::basics::codes::FailureCode::StepFailed,
                    &reason,
                    self.clock.now(),
                    &engine,
                ) {
                    Some(decision) => Decided::Commit(Box::new(decision)),
                    None => Decided::Nothing(GaveUp::AlreadyEnded),
                },
            )
        };
        Ok(
            match self.committer.commit(target, &engine, None, decide).await? {
                CommitResult::Committed { .. } | CommitResult::RunFailedTooLarge { .. } => {
                    GaveUp::RunEnded
                }
                CommitResult::Nothing(nothing) => nothing,
                CommitResult::RunNotFound => GaveUp::AlreadyEnded,
            },
        )
    }
}
