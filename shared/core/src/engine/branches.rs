//! Branches in a plan: whether a node whose upstream nodes are all settled
//! runs or is skipped. Skipped when every node it depends on was skipped
//! (it has nothing to work on), or when its guard (JSONLogic over its input
//! facets, checked when the plan was validated) does not hold over the
//! values it would receive. A skip is a node transition with a
//! `node_skipped` frame that says why, with the values the guard read; the
//! output contract then decides whether the run can still complete.

use serde_json::{Map, Value};

use crate::basics::logic::{evaluate, variables_read};
use crate::catalog::registry::Registry;
use crate::planning::plan::{PlanGraph, PlanNode};
use crate::state::context::build_context_bundle;
use crate::state::run::{NodeStatus, RunState};
use crate::wire::frames::{self, NodeSkippedPayload, SkipReason};

use super::step_context::StepContext;

/// What a ready node does.
#[derive(Debug, PartialEq)]
pub(super) enum Branch {
    Run,
    Skip(Skip),
}

/// Why a node is skipped, for its frame.
#[derive(Debug, PartialEq)]
pub(super) struct Skip {
    message: String,
    payload: NodeSkippedPayload,
}

/// Whether `node` (pending, its upstream nodes all settled) runs.
pub(super) fn branch_taken(
    state: &RunState,
    plan: &PlanGraph,
    node: &PlanNode,
    registry: &Registry,
) -> Branch {
    let upstream: Vec<&str> = plan
        .edges
        .iter()
        .filter(|edge| edge.to == node.node_id)
        .map(|edge| edge.from.as_str())
        .collect();
    let skipped = |node_id: &&str| {
        state
            .nodes
            .get(*node_id)
            .is_some_and(|record| record.status() == NodeStatus::Skipped)
    };
    if !upstream.is_empty() && upstream.iter().all(skipped) {
        let skipped_upstream: Vec<String> = upstream.iter().map(|id| id.to_string()).collect();
        return Branch::Skip(Skip {
            message: format!(
                "node {} is skipped: every node it depends on was skipped ({})",
                node.node_id,
                skipped_upstream.join(", ")
            ),
            payload: NodeSkippedPayload {
                reason: SkipReason::UpstreamSkipped,
                guard: None,
                read: Map::new(),
                skipped_upstream,
            },
        });
    }
    let Some(guard) = &node.guard else {
        return Branch::Run;
    };
    let mut inputs = build_context_bundle(state, node, registry).inputs;
    let (holds, why) = match evaluate(guard, &Value::Object(inputs.clone())) {
        Ok(holds) => (holds, "its guard does not hold".to_string()),
        Err(error) => (false, format!("its guard could not be evaluated ({error})")),
    };
    if holds {
        return Branch::Run;
    }
    let roots: Vec<String> = variables_read(guard)
        .iter()
        .map(|read| read.root().to_string())
        .collect();
    inputs.retain(|facet, _| roots.contains(facet));
    Branch::Skip(Skip {
        message: format!("node {} is skipped: {why} over what it read", node.node_id),
        payload: NodeSkippedPayload {
            reason: SkipReason::GuardFalse,
            guard: Some(guard.as_ref().clone()),
            read: inputs,
            skipped_upstream: Vec::new(),
        },
    })
}

/// Skips `node`: its record, and a `node_skipped` frame saying why.
pub(super) fn skip_node(step: &mut StepContext<'_, '_>, node: &PlanNode, skip: Skip) {
    if let Some(record) = step.state_mut().node_mut(&node.node_id) {
        super::lifecycle::move_node(record, super::lifecycle::NodeTransition::Skip);
    }
    let frame = frames::node_skipped(&step.stamp(), node, skip.message, &skip.payload);
    step.emit(frame);
}
