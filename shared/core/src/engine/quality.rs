//! The revision loop under `constraints.qualityThreshold` and
//! `executionDepth` (the number of drafts allowed). When a reviewer (a
//! capability with a `qualityScore`) completes, its normalised score is
//! recorded with the draft it reviewed. Below the threshold, while drafts
//! remain, a new plan version re-runs the reviewed nodes (their next request
//! carries the review as `revisionNotes`) and the review; at the depth limit
//! the best-scoring draft is delivered with an `execution_depth_reached`
//! warning. The plan's topology never changes within a version.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::basics::codes::WarningCode;
use crate::basics::error::CoreError;
use crate::contracts::capability::NodeKind;
use crate::planning::plan::PlanNode;
use crate::records::governance::DraftRecord;
use crate::state::run::RunState;
use crate::wire::frames::{self, TriggerDetails};

use super::quality_report::{best_draft_index, execution_depth, missing_terms, must_include};
use super::replan::{ReplanCause, replan};
use super::step_context::StepContext;

/// The nodes a review judged: its upstream producers, through
/// orchestrator-managed joins, leaving out structuring (briefs, plans).
fn reviewed_nodes(state: &RunState, review: &PlanNode) -> Vec<String> {
    let Some(plan) = &state.plan else {
        return Vec::new();
    };
    let mut reviewed = Vec::new();
    let mut frontier: Vec<String> = plan
        .upstream_of(&review.node_id)
        .into_iter()
        .map(str::to_string)
        .collect();
    while let Some(node_id) = frontier.pop() {
        let Some(node) = plan.node(&node_id) else {
            continue;
        };
        if node.builtin().is_some() {
            frontier.extend(plan.upstream_of(&node_id).into_iter().map(str::to_string));
        } else if node.kind != NodeKind::Structuring && !reviewed.contains(&node_id) {
            reviewed.push(node_id);
        }
    }
    reviewed.sort();
    reviewed
}

/// Records the review `node` just completed and revises, or goes on.
/// Returns whether a new plan version was made.
pub(super) fn judge_review(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
) -> Result<bool, CoreError> {
    let (Some(spec), Some(threshold)) = (
        node.quality_score.as_ref(),
        step.state().envelope.constraints.quality_threshold,
    ) else {
        return Ok(false);
    };
    let Some(review) = step
        .state()
        .nodes
        .get(&node.node_id)
        .and_then(|record| record.output.clone())
    else {
        return Ok(false);
    };
    let score = spec.score_of(&review).unwrap_or(0.0);
    let reviewed = reviewed_nodes(step.state(), node);
    let outputs: BTreeMap<_, _> = reviewed
        .iter()
        .filter_map(|node_id| {
            let output = step.state().nodes.get(node_id)?.output.clone()?;
            Some((node_id.clone(), output))
        })
        .collect();
    let acceptance_report = spec
        .acceptance_pointer
        .as_deref()
        .and_then(|pointer| review.pointer(pointer))
        .cloned();
    let unmet = unmet_requirements(
        acceptance_report.as_ref(),
        &must_include(step.state()),
        &outputs,
    );
    let plan_version = step.state().plan_version();
    step.state_mut().governance.drafts.push(DraftRecord {
        plan_version,
        review_node_id: node.node_id.clone(),
        score,
        review,
        outputs,
        acceptance_report,
        unmet: unmet.clone(),
    });
    if score >= threshold && unmet.is_empty() {
        return Ok(false);
    }
    let depth = execution_depth(step.state());
    let drafts = step.state().governance.drafts.len();
    if drafts < depth as usize && !reviewed.is_empty() {
        let revised = replan(
            step,
            ReplanCause {
                trigger: TriggerDetails {
                    kind: "quality_below_threshold".into(),
                    node_id: Some(node.node_id.clone()),
                    capability_id: Some(node.capability_id.clone()),
                    value: Some(score),
                    threshold: Some(threshold),
                    ..TriggerDetails::default()
                },
                policy_id: None,
                rationale: Some(if unmet.is_empty() {
                    format!("draft {drafts} scored {score:.3}, below {threshold}; revising")
                } else {
                    format!(
                        "draft {drafts} scored {score:.3} (threshold {threshold}) and fails: {}; revising",
                        unmet.join("; ")
                    )
                }),
                invalidate: reviewed,
                exclude_capabilities: Vec::new(),
                reject_ends_run: false,
                escalated: None,
                ranking: Vec::new(),
            },
        )?;
        if revised {
            return Ok(true);
        }
    }
    deliver_best_draft(step, threshold, depth);
    Ok(false)
}

/// Acceptance criteria the reviewer failed (`pass: false`) and
/// `mustInclude` terms the reviewed outputs lack.
fn unmet_requirements(
    acceptance_report: Option<&Value>,
    must_include: &[String],
    outputs: &BTreeMap<String, std::sync::Arc<Value>>,
) -> Vec<String> {
    let mut unmet: Vec<String> = acceptance_report
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|verdict| verdict.get("pass") == Some(&Value::Bool(false)))
        .map(|verdict| {
            format!(
                "acceptance criterion `{}` failed",
                verdict
                    .get("criterion")
                    .and_then(Value::as_str)
                    .unwrap_or("(unnamed)")
            )
        })
        .collect();
    unmet.extend(
        missing_terms(must_include, outputs.values().map(|output| output.as_ref()))
            .into_iter()
            .map(|term| format!("mustInclude `{term}` is missing")),
    );
    unmet
}

/// At the depth limit: the best-scoring draft's outputs stand, with a warning.
fn deliver_best_draft(step: &mut StepContext<'_, '_>, threshold: f64, depth: u32) {
    let drafts = &step.state().governance.drafts;
    let Some(best_index) = best_draft_index(drafts) else {
        return;
    };
    let best = drafts[best_index].clone();
    let count = drafts.len();
    for (node_id, output) in &best.outputs {
        if let Some(record) = step.state_mut().node_mut(node_id) {
            record.output = Some(output.clone());
        }
    }
    let warning = frames::warning(
        &step.stamp(),
        Some(&best.review_node_id),
        format!(
            "{count} of {depth} drafts reviewed, none reached {threshold}; delivering draft {} (score {:.3})",
            best_index + 1,
            best.score
        ),
        &frames::WarningPayload::of(WarningCode::ExecutionDepthReached),
    );
    step.emit(warning);
}
