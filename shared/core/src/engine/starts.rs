//! Entry points that create a run: its first state, its `start` frame and
//! planning step ([`start_run`]), a chat run ([`start_chat_run`]), and the
//! warnings a new run's envelope earns (legacy policy keys, advisory
//! fields).

use std::sync::Arc;

use crate::basics::codes::WarningCode;
use crate::basics::error::CoreError;
use crate::basics::instant::Instant;
use crate::contracts::envelope::TaskEnvelope;
use crate::state::run::{RunIds, RunState, StepCommand, StepMessage};
use crate::wire::{event::EventDraft, frames, frames::FrameStamp};

use super::decision::{Decision, NewRunIdentity};

/// Creates the run: its state, the `start` frame and the planning step.
pub fn start_run(
    identity: NewRunIdentity,
    envelope: TaskEnvelope,
    now: Instant,
    max_node_attempts: u32,
) -> Decision {
    let mut state = RunState::queued(
        RunIds {
            run_id: identity.run_id.clone(),
            tenant_id: identity.tenant_id.clone(),
            correlation_id: identity.correlation_id.clone(),
            thread_id: identity.thread_id.clone(),
        },
        Arc::new(envelope),
        now,
        max_node_attempts,
    );
    state.phase = Some(frames::RunPhase::Planning);
    state.trace = identity.trace;
    state.submitted_by = identity.submitted_by;
    let start = frames::start(
        &FrameStamp::new(now, 0),
        &frames::StartPayload {
            run_id: identity.run_id.clone(),
            thread_id: identity.thread_id,
            correlation_id: identity.correlation_id,
            objective: state.envelope.objective.clone(),
        },
    );
    let planning = frames::phase(
        &FrameStamp::new(now, 0),
        &frames::PhasePayload {
            phase: frames::RunPhase::Planning,
        },
    );
    Decision {
        outbox: vec![StepMessage::new(
            &identity.tenant_id,
            &identity.run_id,
            StepCommand::Plan,
        )],
        events: vec![start, planning],
        state,
        transcripts: Vec::new(),
        exchanges: Vec::new(),
        entries: Vec::new(),
    }
}

/// The `warning` frames saying what each legacy policy key of a new run's
/// envelope became (appended after its `start`).
pub fn legacy_policy_warnings(
    rewrites: &[crate::contracts::legacy_policies::LegacyRewrite],
    now: Instant,
) -> Vec<EventDraft> {
    rewrites
        .iter()
        .map(|rewrite| {
            let mut payload = frames::WarningPayload::of(WarningCode::LegacyPolicyNormalized);
            payload.field = Some(rewrite.field.clone());
            frames::warning(
                &FrameStamp::new(now, 0),
                None,
                format!("{} became {}", rewrite.field, rewrite.became),
                &payload,
            )
        })
        .collect()
}

/// The `warning` frames naming the envelope's advisory fields that change
/// nothing in this run (see `TaskEnvelope::advisory_notes`).
pub fn advisory_field_warnings(notes: &[(String, String)], now: Instant) -> Vec<EventDraft> {
    notes
        .iter()
        .map(|(field, why)| {
            let mut payload = frames::WarningPayload::of(WarningCode::AdvisoryField);
            payload.field = Some(field.clone());
            frames::warning(
                &FrameStamp::new(now, 0),
                None,
                format!("{field}: {why}"),
                &payload,
            )
        })
        .collect()
}

/// Creates a chat run: `turn`'s message (and its thread's history) answered
/// by one agent node; its envelope asks for `{message, threadId}`.
pub fn start_chat_run(
    identity: NewRunIdentity,
    turn: crate::records::chat::ChatTurn,
    now: Instant,
) -> Result<Decision, CoreError> {
    let envelope = crate::records::chat::chat_envelope(&turn)?;
    let mut decision = start_run(identity, envelope, now, 1);
    decision.state.chat = Some(Box::new(turn));
    Ok(decision)
}
