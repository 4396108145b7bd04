//! Replanning: a new plan version replaces the current one within the step
//! that asked for it (a policy's `replan`, or a node whose attempts ran out
//! and whose facets another capability can produce). The plan topology of
//! a version never changes; a new version is a new graph.
//!
//! Completed nodes the new version still uses (same id, capability and
//! upstream nodes, not invalidated) keep their outputs and are not re-run;
//! the invalidated nodes and everything downstream of them run again, with
//! attempt numbers that continue (so no step message id repeats).
//!
//! Replans use the deterministic planner (the LLM planner drafts first plans
//! only): a replan decides within one step, with no effect to perform.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::basics::codes::FailureCode;
use crate::basics::error::CoreError;
use crate::contracts::diagnostics::PlanStatus;
use crate::contracts::policies::{PlannerPolicy, SelectionPolicy};
use crate::planning::plan::PlanGraph;
use crate::planning::planner::plan_deterministically;
use crate::planning::validator::validate_plan;
use crate::state::run::{NodeRecord, RunStatus};
use crate::wire::frames::{self, PlannerKind, TriggerDetails};

use super::StepContext;

/// Why and how to replan.
pub(super) struct ReplanCause {
    pub trigger: TriggerDetails,
    pub policy_id: Option<String>,
    pub rationale: Option<String>,
    /// Nodes whose outputs must not be kept (with everything downstream).
    pub invalidate: Vec<String>,
    /// Capabilities the new version must not use.
    pub exclude_capabilities: Vec<String>,
    /// A rejected draft ends the run (`plan_rejected`); otherwise the step
    /// goes on as if no replan was tried and nothing is written.
    pub reject_ends_run: bool,
}

/// Plans a new version. Returns whether it replaced the plan.
pub(super) fn replan(
    step: &mut StepContext<'_, '_>,
    cause: ReplanCause,
) -> Result<bool, CoreError> {
    let Some(previous) = step.state.plan.clone() else {
        return Ok(false);
    };
    let mut envelope = step.state.envelope.as_ref().clone();
    // Capabilities escalated away before stay excluded: a second escalation
    // never goes back to the first one that failed.
    let mut excluded = cause.exclude_capabilities.clone();
    excluded.extend(
        step.state
            .governance
            .escalations
            .iter()
            .map(|record| record.capability_id.clone()),
    );
    if !excluded.is_empty() {
        let planner = envelope
            .policies
            .planner
            .get_or_insert_with(PlannerPolicy::default);
        let selection = planner
            .selection
            .get_or_insert_with(SelectionPolicy::default);
        selection.forbid.extend(excluded);
    }
    let engine = step.engine;
    let drafted = plan_deterministically(&envelope, engine.registry);
    let judged = match drafted {
        Ok(plan) => {
            let bundle = validate_plan(&plan, &envelope, engine.registry, engine.validators);
            (bundle.status != PlanStatus::Rejected).then_some((plan, bundle))
        }
        Err(_) => None,
    };
    let Some((mut plan, bundle)) = judged else {
        if cause.reject_ends_run {
            let message = format!(
                "no valid plan could replace version {}{}",
                previous.plan_version,
                cause
                    .policy_id
                    .as_deref()
                    .map(|policy| format!(" (policy {policy})"))
                    .unwrap_or_default()
            );
            step.end_run(
                RunStatus::PlanRejected,
                FailureCode::PlanRejected,
                &message,
                &format!("plan rejected: {message}"),
            );
        }
        return Ok(false);
    };
    plan.plan_version = previous.plan_version + 1;
    let invalidated = downstream_closure(&previous, &cause.invalidate);
    let mut reused = Vec::new();
    let mut nodes = std::collections::BTreeMap::new();
    for node in &plan.nodes {
        let old_record = step.state.nodes.get(&node.node_id);
        let same_node = previous.node(&node.node_id).is_some_and(|old| {
            old.capability_id == node.capability_id
                && previous.upstream_of(&node.node_id) == plan.upstream_of(&node.node_id)
        });
        let record = match old_record {
            Some(record) if same_node && !invalidated.contains(node.node_id.as_str()) => {
                if record.status == crate::state::run::NodeStatus::Completed {
                    reused.push(node.node_id.clone());
                }
                record.clone()
            }
            Some(record) => NodeRecord {
                current_attempt: record.current_attempt,
                attempt_base: record.current_attempt,
                usage: record.usage,
                cost_usd: record.cost_usd,
                ..NodeRecord::pending()
            },
            None => NodeRecord::pending(),
        };
        nodes.insert(node.node_id.clone(), record);
    }
    step.enter_phase(frames::RunPhase::Planning);
    let requested = frames::plan_requested(
        &step.stamp(),
        &super::planning_step::plan_requested_payload(
            &step.state,
            engine,
            1,
            PlannerKind::Deterministic,
        ),
    );
    step.emit(requested);
    step.state.nodes = nodes;
    step.state.plan_diagnostics = Some(Arc::new(bundle));
    let plan = Arc::new(plan);
    // The replaced version is kept beside the run (its history).
    step.put_entry(
        &crate::records::entries::EntryKey::PlanVersion {
            version: previous.plan_version,
        },
        crate::records::entries::EntryBody::PlanVersion(Box::new(
            serde_json::to_value(previous.as_ref()).unwrap_or_default(),
        )),
    );
    step.state.plan = Some(plan.clone());
    step.state.status = RunStatus::Running;
    let updated = frames::plan_updated(
        &step.stamp(),
        &frames::PlanUpdatedPayload {
            previous_version: previous.plan_version,
            version: plan.plan_version,
            trigger: cause.trigger,
            policy_id: cause.policy_id,
            rationale: cause.rationale,
            reused_nodes: reused,
            nodes: plan
                .nodes
                .iter()
                .map(|node| frames::UpdatedNodeSummary {
                    node_id: node.node_id.clone(),
                    capability_id: node.capability_id.clone(),
                    status: step.state.nodes[&node.node_id].status,
                })
                .collect(),
            edges: plan.edges.clone(),
        },
    );
    step.emit(updated);
    // Capabilities the old version used that the new one goes without
    // (besides those the cause excluded) are said: the output will be made
    // without them.
    let dropped: BTreeSet<&str> = previous
        .nodes
        .iter()
        .map(|node| node.capability_id.as_str())
        .filter(|capability| {
            !plan
                .nodes
                .iter()
                .any(|node| node.capability_id == *capability)
                && !cause
                    .exclude_capabilities
                    .iter()
                    .any(|excluded| excluded == capability)
        })
        .collect();
    if !dropped.is_empty() {
        let names: Vec<&str> = dropped.into_iter().collect();
        let warning = frames::warning(
            &step.stamp(),
            None,
            format!(
                "plan version {} goes without {}: the output is made without them",
                plan.plan_version,
                names.join(", ")
            ),
            &frames::WarningPayload::of(crate::basics::codes::WarningCode::SpecialistSkipped),
        );
        step.emit(warning);
    }
    Ok(true)
}

/// `roots` and every node downstream of them in `plan`.
fn downstream_closure<'p>(plan: &'p PlanGraph, roots: &[String]) -> BTreeSet<&'p str> {
    let mut closed: BTreeSet<&str> = plan
        .nodes
        .iter()
        .filter(|node| roots.contains(&node.node_id))
        .map(|node| node.node_id.as_str())
        .collect();
    loop {
        let before = closed.len();
        for node in &plan.nodes {
            if plan
                .upstream_of(&node.node_id)
                .iter()
                .any(|upstream| closed.contains(upstream))
            {
                closed.insert(node.node_id.as_str());
            }
        }
        if closed.len() == before {
            return closed;
        }
    }
}
