//! Feedback that revises. A node that produces a facet marked
//! `drivesRevisions` (the registry's feedback facet: a reviewer's answer, a
//! person's task answer, a judge panel's verdict mapped to it) with open
//! items asks for a revision: each item names a facet (`facet`; `*` for
//! the whole output) or a node (`nodeId`). The engine maps the items to the
//! nodes of the plan that make what they name (never the node that gave
//! the feedback), and a new plan version (`plan_updated`, trigger
//! `feedback`) re-runs those nodes and everything downstream of them, the
//! reviewer included; what is not downstream keeps its output and does not
//! run again. The re-run nodes get the items that concern them: in their
//! model request's `revisionNotes.feedback`, or on a person's task.
//!
//! At most `constraints.maxRevisions` revisions (default 2) are made in a
//! run; past it the feedback stays open with a
//! `feedback_revisions_exhausted` warning and the run goes on. An item
//! naming nothing the plan makes is a `feedback_unmatched` warning.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::basics::codes::WarningCode;
use crate::basics::error::CoreError;
use crate::planning::plan::{PlanGraph, PlanNode};
use crate::records::governance::FeedbackRound;
use crate::wire::frames::{self, TriggerDetails};

use super::replan::{ReplanCause, replan};
use super::step_context::StepContext;

/// Revisions a run makes on feedback when the envelope does not say.
pub const DEFAULT_MAX_REVISIONS: u32 = 2;

use crate::records::governance::FEEDBACK_WHOLE_OUTPUT as WHOLE_OUTPUT;

/// `node` just completed: when it gave open feedback, revise what it names.
/// Returns whether a new plan version was made.
pub(super) fn revise_on_feedback(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
) -> Result<bool, CoreError> {
    let items = open_items(step, node);
    if items.is_empty() {
        return Ok(false);
    }
    let Some(plan) = step.state().plan.clone() else {
        return Ok(false);
    };
    let mut revised: BTreeSet<String> = BTreeSet::new();
    for item in &items {
        let targets = targets_of(&plan, node, item);
        if targets.is_empty() {
            let named = item
                .get("nodeId")
                .or_else(|| item.get("facet"))
                .and_then(Value::as_str)
                .unwrap_or("(nothing)");
            let warning = frames::warning(
                &step.stamp(),
                Some(&node.node_id),
                format!(
                    "feedback from {} names `{named}`, which no other node of plan version {} makes: it revises nothing",
                    node.node_id, plan.plan_version
                ),
                &frames::WarningPayload::of(WarningCode::FeedbackUnmatched),
            );
            step.emit(warning);
        }
        revised.extend(targets);
    }
    if revised.is_empty() {
        return Ok(false);
    }
    let done = step.state().governance.feedback_rounds.len();
    let most = step
        .state()
        .envelope
        .constraints
        .max_revisions
        .unwrap_or(DEFAULT_MAX_REVISIONS) as usize;
    if done >= most {
        let warning = frames::warning(
            &step.stamp(),
            Some(&node.node_id),
            format!(
                "{done} of {most} revisions made (constraints.maxRevisions): the feedback from {} on {} stays open",
                node.node_id,
                revised.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
            &frames::WarningPayload::of(WarningCode::FeedbackRevisionsExhausted),
        );
        step.emit(warning);
        return Ok(false);
    }
    let revised: Vec<String> = revised.into_iter().collect();
    let round = FeedbackRound {
        plan_version: plan.plan_version,
        from_node_id: node.node_id.clone(),
        items,
        revised_nodes: revised.clone(),
    };
    let replanned = replan(
        step,
        ReplanCause {
            trigger: TriggerDetails {
                kind: "feedback".into(),
                node_id: Some(node.node_id.clone()),
                capability_id: Some(node.capability_id.clone()),
                ..TriggerDetails::default()
            },
            policy_id: None,
            rationale: Some(format!(
                "revision {} of {most}: feedback from {} re-runs {}",
                done + 1,
                node.node_id,
                revised.join(", ")
            )),
            invalidate: revised,
            exclude_capabilities: Vec::new(),
            reject_ends_run: false,
            escalated: None,
            ranking: Vec::new(),
        },
    )?;
    if replanned {
        step.state_mut().governance.feedback_rounds.push(round);
    }
    Ok(replanned)
}

/// The open items of the feedback facets `node` produced.
fn open_items(step: &StepContext<'_, '_>, node: &PlanNode) -> Vec<Value> {
    let Some(output) = step
        .state()
        .nodes
        .get(&node.node_id)
        .and_then(|record| record.output.clone())
    else {
        return Vec::new();
    };
    let facets = &step.engine().registry.facets;
    node.output_facets
        .iter()
        .filter(|facet| {
            facets
                .get(facet)
                .is_some_and(|facet| facet.drives_revisions)
        })
        .filter_map(|facet| output.get(facet.as_str()).and_then(Value::as_array))
        .flatten()
        .filter(|item| is_open(item))
        .cloned()
        .collect()
}

/// An item without a resolution, or `open`.
fn is_open(item: &Value) -> bool {
    match item.get("resolution").and_then(Value::as_str) {
        None | Some("open") => true,
        Some(_) => false,
    }
}

/// The nodes of `plan` an item from `reviewer` re-runs: the node it names,
/// else the makers of the facet it names (of every facet of the output for
/// `*`). Never the reviewer, never an orchestrator-managed join (the nodes
/// feeding it are named instead).
fn targets_of(plan: &PlanGraph, reviewer: &PlanNode, item: &Value) -> BTreeSet<String> {
    let is_candidate = |candidate: &&PlanNode| {
        candidate.node_id != reviewer.node_id && candidate.builtin().is_none()
    };
    if let Some(node_id) = item.get("nodeId").and_then(Value::as_str) {
        return plan
            .nodes
            .iter()
            .filter(is_candidate)
            .filter(|candidate| candidate.node_id == node_id)
            .map(|candidate| candidate.node_id.clone())
            .collect();
    }
    let Some(facet) = item.get("facet").and_then(Value::as_str) else {
        return BTreeSet::new();
    };
    let upstream = upstream_closure(plan, &reviewer.node_id);
    plan.nodes
        .iter()
        .filter(is_candidate)
        .filter(|candidate| upstream.contains(candidate.node_id.as_str()))
        .filter(|candidate| {
            facet == WHOLE_OUTPUT
                && candidate
                    .output_facets
                    .iter()
                    .any(|made| plan.goal_facets.contains(made))
                || candidate.output_facets.iter().any(|made| made == facet)
        })
        .map(|candidate| candidate.node_id.clone())
        .collect()
}

/// Every node `node_id` depends on, directly or not.
fn upstream_closure<'a>(plan: &'a PlanGraph, node_id: &str) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::new();
    let mut frontier: Vec<&str> = plan.upstream_of(node_id).into_iter().collect();
    while let Some(next) = frontier.pop() {
        if let Some(node) = plan.node(next)
            && seen.insert(node.node_id.as_str())
        {
            frontier.extend(plan.upstream_of(next));
        }
    }
    seen
}
