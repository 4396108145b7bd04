//! A chat run's release of its thread's lane, as a step of its own: the
//! commit that settles a chat run (ends it, or parks it for a person) puts
//! a `ReleaseThreadLane` message in its outbox ([`ask_for_release`]); the
//! step asks the shell to release the lane (which starts the next queued
//! message's run through the one commit protocol) and then records the
//! release as performed. A process that dies between the settling commit
//! and the release leaves the message to redelivery or the sweeper, like
//! any other step.

use crate::basics::error::CoreError;
use crate::basics::instant::Instant;
use crate::state::run::{RunState, StepCommand, StepMessage};

use super::decision::Decision;
pub use super::effects::LaneRelease;
use super::effects::{Effect, StepAdvance};
use super::step_context::StepContext;

/// Puts a release in the outbox when this step settled a chat run.
pub(super) fn ask_for_release(step: &mut StepContext<'_, '_>) {
    if step.initial_status().is_settled() || !step.state().status().is_settled() {
        return;
    }
    let Some(chat) = step.state_mut().chat.as_mut() else {
        return;
    };
    chat.lane_releases.asked += 1;
    let command = StepCommand::ReleaseThreadLane {
        thread_id: chat.thread_id.clone(),
        release: chat.lane_releases.asked,
    };
    step.send(StepMessage::new(
        &step.state().tenant_id,
        &step.state().run_id,
        command,
    ));
}

/// Whether release `release` was performed already (or never asked for).
pub(super) fn release_is_stale(state: &RunState, release: u32) -> bool {
    state.chat.as_ref().is_none_or(|chat| {
        chat.lane_releases.performed >= release || chat.lane_releases.asked < release
    })
}

pub(super) fn begin_release(state: &RunState, thread_id: &str, release: u32) -> StepAdvance {
    StepAdvance::Perform(Effect::ReleaseThreadLane(LaneRelease {
        thread_id: thread_id.to_string(),
        ended_run: state.run_id.clone(),
        release,
    }))
}

/// Records the release as performed: no frame (the run may have ended,
/// and `complete`/`error` stay last), nothing sent.
pub(super) fn resume_release(
    mut state: RunState,
    release: &LaneRelease,
    now: Instant,
) -> Result<StepAdvance, CoreError> {
    let Some(chat) = state.chat.as_mut() else {
        return Err(CoreError::StepDoesNotApply(format!(
            "run {} is not a chat run: it has no thread lane to release",
            state.run_id
        )));
    };
    chat.lane_releases.performed = chat.lane_releases.performed.max(release.release);
    state.updated_at = now;
    Ok(StepAdvance::Decided(Box::new(Decision {
        state,
        events: Vec::new(),
        outbox: Vec::new(),
        transcripts: Vec::new(),
        exchanges: Vec::new(),
        entries: Vec::new(),
    })))
}
