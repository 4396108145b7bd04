//! Reading the plan a step works on: the run's plan and one of its nodes
//! (an error naming what is missing), the payload of a node's start, and
//! the frames a node attempt's claim writes. The step context's layer:
//! every transition reads a plan through these.

use std::borrow::Cow;
use std::sync::Arc;

use crate::basics::error::CoreError;
use crate::basics::instant::Instant;
use crate::planning::plan::{PlanGraph, PlanNode};
use crate::state::run::RunState;
use crate::wire::frames::{self, ExecutorType, HandoffStatus, RunPhase};

use super::narration::handoff;

/// The run's plan (shared, so borrowing a node from it copies nothing).
pub(super) fn plan_of(state: &RunState) -> Result<Arc<PlanGraph>, CoreError> {
    state
        .plan
        .clone()
        .ok_or_else(|| CoreError::StepDoesNotApply(format!("run {} has no plan", state.run_id)))
}

pub(super) fn plan_node_in<'p>(
    plan: &'p PlanGraph,
    state: &RunState,
    node_id: &str,
) -> Result<&'p PlanNode, CoreError> {
    plan.node(node_id).ok_or_else(|| {
        CoreError::StepDoesNotApply(format!("run {} has no node {node_id}", state.run_id))
    })
}

pub(super) fn start_payload(
    node: &PlanNode,
    attempt: u32,
    executor: ExecutorType,
) -> frames::NodeStartPayload<'_> {
    frames::NodeStartPayload {
        capability_id: Cow::Borrowed(&node.capability_id),
        kind: node.kind,
        executor_type: executor,
        attempt,
        input_facets: Cow::Borrowed(&node.input_facets),
        output_facets: Cow::Borrowed(&node.output_facets),
        contract: None,
        // Not a model's instructions: they are in the plan, and a frame
        // per node would hold them once per run (the hooks rendering reads
        // them from the plan: `RunService::fill_model_instructions`).
        instructions: None,
        inputs: None,
        rationale: None,
        due_at: None,
        escalated_from: None,
        model: node
            .model
            .as_ref()
            .map(|model| Cow::Borrowed(model.name.as_str())),
    }
}

/// The frames a claimed model node starts with (appended with its claim):
/// the phase when it changes, the handoff, `node_start`.
pub(super) fn claim_frames(
    state: &RunState,
    node: &PlanNode,
    attempt: u32,
    executor: ExecutorType,
    now: Instant,
) -> Vec<crate::wire::event::EventDraft> {
    let stamp = frames::FrameStamp::for_run(state, now);
    let phase = RunPhase::of_node(node.kind);
    let mut start_frames = Vec::with_capacity(4);
    if state.phase != Some(phase) {
        start_frames.push(frames::phase(&stamp, &frames::PhasePayload { phase }));
    }
    start_frames.push(handoff(
        &stamp,
        state,
        node,
        attempt,
        HandoffStatus::Occurred,
    ));
    start_frames.push(frames::node_start(
        &stamp,
        node,
        &start_payload(node, attempt, executor),
    ));
    start_frames
}
