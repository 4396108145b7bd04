//! Narration for people watching a run: the phase it enters, the handoff
//! of work to a node's capability, a node's own `metrics`. Written beside
//! the frames that decide things, never instead of them.

use crate::planning::plan::PlanNode;
use crate::state::run::RunState;
use crate::wire::event::EventDraft;
use crate::wire::frames::{self, HandoffStatus, RunPhase};

use super::step_context::StepContext;

/// Who hands work to `node`: the capabilities of its upstream nodes, or
/// the orchestrator.
fn handed_from(state: &RunState, node: &PlanNode) -> String {
    let Some(plan) = state.plan.as_deref() else {
        return "orchestrator".into();
    };
    // The upstream nodes in node id order, each once (as `upstream_of`
    // gives them), without building its set.
    let mut upstream: Vec<&str> = plan
        .edges
        .iter()
        .filter(|edge| edge.to == node.node_id)
        .map(|edge| edge.from.as_str())
        .collect();
    upstream.sort_unstable();
    upstream.dedup();
    let capabilities: Vec<&str> = upstream
        .iter()
        .filter_map(|upstream| plan.node(upstream))
        .map(|upstream| upstream.capability_id.as_str())
        .collect();
    if capabilities.is_empty() {
        "orchestrator".into()
    } else {
        capabilities.join(",")
    }
}

pub(super) fn handoff(
    stamp: &frames::FrameStamp,
    state: &RunState,
    node: &PlanNode,
    attempt: u32,
    status: HandoffStatus,
) -> EventDraft {
    frames::handoff(
        stamp,
        &node.node_id,
        &frames::HandoffPayload {
            status,
            from: handed_from(state, node),
            to: node.capability_id.clone(),
            attempt,
        },
    )
}

/// A node decided in its own step starts: its phase, the handoff, its clock.
pub(super) fn hand_over(step: &mut StepContext<'_, '_>, node: &PlanNode, attempt: u32) {
    step.enter_phase(RunPhase::of_node(node.kind));
    let occurred = handoff(
        &step.stamp(),
        step.state(),
        node,
        attempt,
        HandoffStatus::Occurred,
    );
    step.emit(occurred);
    let started = step.now().unix_millis();
    if let Some(record) = step.state_mut().node_mut(&node.node_id) {
        record.started_at_millis = Some(started);
    }
}

/// A node's `metrics`: its tokens (every attempt) and its wall time.
pub(super) fn emit_node_metrics(step: &mut StepContext<'_, '_>, node: &PlanNode) {
    let Some(record) = step.state().nodes.get(&node.node_id) else {
        return;
    };
    let duration_ms = record
        .started_at_millis
        .map(|started| step.now().unix_millis().saturating_sub(started));
    let payload = frames::MetricsPayload {
        tokens: frames::TokenTotals::of(&record.usage),
        nodes: 1,
        duration_ms,
        cost_usd: record
            .cost_usd
            .map(crate::catalog::model_catalog::round_cost),
        run: Some(frames::RunTotals {
            tokens: frames::TokenTotals::of(&step.state().total_usage()),
            cost_usd: step.state().total_cost_usd(),
            nodes_completed: step
                .state()
                .nodes
                .values()
                .filter(|record| record.status() == crate::state::run::NodeStatus::Completed)
                .count(),
        }),
        // What the node's calls were for; who and in which session, on
        // the run's last `metrics` (once per run, not per node).
        operation_type: Some(std::borrow::Cow::Borrowed(
            super::usage_recording::operation_of(node).as_str(),
        )),
        attribution: None,
    };
    let metrics = frames::node_metrics(&step.stamp(), &node.node_id, &payload);
    step.emit(metrics);
}

/// The run's `metrics` at its ending (delivered, failed, cancelled): its
/// tokens, cost, nodes and wall time.
pub(super) fn emit_run_metrics(step: &mut StepContext<'_, '_>) {
    let metrics = frames::metrics(
        &step.stamp(),
        &frames::MetricsPayload {
            tokens: frames::TokenTotals::of(&step.state().total_usage()),
            nodes: step.state().nodes.len(),
            duration_ms: Some(
                step.now()
                    .unix_millis()
                    .saturating_sub(step.state().created_at.unix_millis()),
            ),
            cost_usd: step.state().total_cost_usd(),
            run: None,
            operation_type: None,
            attribution: Some(crate::state::listing::usage_attribution(step.state(), None)),
        },
    );
    step.emit(metrics);
}
