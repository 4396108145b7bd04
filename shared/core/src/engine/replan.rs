//! Replanning: a new plan version replaces the current one (a policy's
//! `replan`, a revision under the quality loop, or a node whose facets are
//! escalated to another capability). The plan topology of a version never
//! changes; a new version is a new graph.
//!
//! Completed nodes the new version still uses (same id, capability and
//! upstream nodes, not invalidated) keep their outputs and are not re-run;
//! the invalidated nodes and everything downstream of them run again, with
//! attempt numbers that continue (so no step message id repeats).
//!
//! Under the deterministic planner a replan is decided within the step that
//! asked for it. Under the LLM planner that step records the cause
//! (`RunState::pending_replan`) and queues `StepCommand::Replan`, which
//! asks the planner model through the same `DraftPlan` effect as the first
//! plan (the request says what is replaced and why), validates the draft
//! like the first, re-prompts a rejected one, and falls back to the
//! deterministic planner. Nothing new is scheduled while a replan is drafted.
//! The deterministic planner is asked first in both cases: a replan it
//! cannot make is refused at once, so the caller's own fallback still runs.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::basics::codes::FailureCode;
use crate::basics::error::CoreError;
use crate::basics::instant::Instant;
use crate::contracts::diagnostics::{DiagnosticsBundle, PlanStatus};
use crate::contracts::envelope::TaskEnvelope;
use crate::contracts::policies::{PlannerPolicy, SelectionPolicy};
use crate::planning::llm_planner::{plan_from_draft, replan_request};
use crate::planning::plan::PlanGraph;
use crate::planning::planner::{CandidateOrders, plan_deterministically_ordered};
use crate::planning::validator::validate_plan;
use crate::state::replan_cause::PendingReplan;
pub(super) use crate::state::replan_cause::ReplanCause;
use crate::state::run::{NodeRecord, NodeStatus, RunState, RunStatus, StepCommand};
use crate::wire::frames::{self, PlannerKind};

use super::decision::{EngineContext, PlannerChoice};
use super::effects::{ModelFailure, ModelOutcome, PlanDraftCall, StepAdvance};
use super::lifecycle::RunTransition;
use super::step_context::StepContext;

/// Plans a new version, now (deterministic planner) or in a step of its own
/// (LLM planner). Returns whether a new version replaces (or will replace)
/// the plan.
pub(super) fn replan(
    step: &mut StepContext<'_, '_>,
    cause: ReplanCause,
) -> Result<bool, CoreError> {
    let Some(previous) = step.state().plan.clone() else {
        return Ok(false);
    };
    if let Some(pending) = step.state_mut().pending_replan.as_mut() {
        // A version is being drafted already: this cause joins it.
        join(&mut pending.cause, cause);
        return Ok(true);
    }
    let engine = step.engine();
    let envelope = planning_envelope(step.state(), &cause);
    let Some((plan, bundle)) = draft_deterministically(&envelope, &cause, engine) else {
        refuse(step, &previous, &cause);
        return Ok(false);
    };
    if engine.planner == PlannerChoice::Llm && step.state().chat.is_none() {
        let version = previous.plan_version + 1;
        step.enter_phase(frames::RunPhase::Planning);
        step.state_mut().pending_replan = Some(Box::new(PendingReplan { version, cause }));
        step.enqueue(StepCommand::Replan { version });
        return Ok(true);
    }
    apply(
        step,
        &previous,
        cause,
        (plan, bundle),
        (1, PlannerKind::Deterministic, None),
    )?;
    Ok(true)
}

/// `StepCommand::Replan`: ask the planner model for version `version`.
pub(super) fn begin_replan(
    state: &RunState,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    let Some(pending) = state.pending_replan.as_deref() else {
        return Ok(StepAdvance::Stale);
    };
    let call = PlanDraftCall {
        attempt: 1,
        request: request_for(state, pending, engine, &[]),
        rejected: Vec::new(),
        frames_before: Vec::new(),
        spent: Vec::new(),
    };
    // Not sent when its model's window cannot hold it: as a failure.
    if let Some(refusal) = super::plan_drafts::over_window(&call.request, engine) {
        return resume_replan(state.clone(), &call, &Err(refusal), now, engine);
    }
    Ok(StepAdvance::Perform(super::effects::Effect::DraftPlan(
        call,
    )))
}

/// The planner model answered (or failed) for a pending replan: apply a
/// valid draft, re-prompt a rejected one while attempts remain, else let
/// the deterministic planner make the version.
pub(super) fn resume_replan(
    state: RunState,
    call: &PlanDraftCall,
    outcome: &ModelOutcome,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    let (Some(pending), Some(previous)) = (state.pending_replan.clone(), state.plan.clone()) else {
        return Ok(StepAdvance::Stale);
    };
    if pending.cause.trigger.kind == super::orchestrator_turns::ORCHESTRATOR_TURN {
        return resume_turn(state, *pending, &previous, (call, outcome), now, engine);
    }
    let mut step = StepContext::new(state, now, engine);
    step.emit_all(call.frames_before.iter().cloned());
    // Every draft's tokens count, the rejected ones' too: a retry carries
    // them, and the step that decides records them.
    let spent = super::usage_recording::drafts_spent(call, outcome);
    let envelope = planning_envelope(step.state(), &pending.cause);
    let attempts = engine.max_planner_attempts.max(1);
    let drafts_rejected_before = u32::try_from(call.rejected.len()).unwrap_or(u32::MAX);
    let (fallback_reason, rejected_drafts) = match outcome {
        Err(ModelFailure { message, .. }) => (
            format!("the planner model is unavailable ({message})"),
            drafts_rejected_before,
        ),
        Ok(answer) => {
            let drafted =
                plan_from_draft(&answer.content, &envelope, engine.registry, &answer.model);
            let response = Some(super::plan_drafts::draft_response(answer));
            match super::plan_drafts::judge(drafted, &envelope, engine) {
                (Some(plan), bundle) => {
                    super::usage_recording::record_planner_spend(&mut step, &spent);
                    step.state_mut().pending_replan = None;
                    apply(
                        &mut step,
                        &previous,
                        pending.cause,
                        (plan, bundle),
                        (call.attempt, PlannerKind::Llm, response),
                    )?;
                    super::progress::continue_run(&mut step)?;
                    return Ok(step.into_advance());
                }
                (None, bundle) => {
                    let rejection = super::plan_drafts::rejected_draft_frames(
                        &step,
                        call.attempt,
                        &bundle,
                        response,
                    );
                    let mut rejected = call.rejected.clone();
                    rejected.push(bundle);
                    let retry = request_for(step.state(), &pending, engine, &rejected);
                    if call.attempt < attempts
                        && super::plan_drafts::over_window(&retry, engine).is_none()
                    {
                        let mut frames_before = step.take_frames();
                        frames_before.extend(rejection);
                        return Ok(StepAdvance::Perform(super::effects::Effect::DraftPlan(
                            PlanDraftCall {
                                attempt: call.attempt + 1,
                                request: retry,
                                rejected,
                                frames_before,
                                spent,
                            },
                        )));
                    }
                    step.emit_all(rejection);
                    (
                        format!(
                            "the planner model produced no valid replan in {attempts} attempts"
                        ),
                        drafts_rejected_before.saturating_add(1),
                    )
                }
            }
        }
    };
    super::usage_recording::record_planner_spend(&mut step, &spent);
    super::plan_drafts::warn_planner_fallback(&mut step, &fallback_reason, rejected_drafts);
    step.state_mut().pending_replan = None;
    match draft_deterministically(&envelope, &pending.cause, engine) {
        Some(judged) => apply(
            &mut step,
            &previous,
            pending.cause,
            judged,
            (
                rejected_drafts.saturating_add(1),
                PlannerKind::Deterministic,
                None,
            ),
        )?,
        // The deterministic planner made this version when the replan was
        // asked for; only a registry changed since can refuse it now.
        None => refuse(
            &mut step,
            &previous,
            &ReplanCause {
                reject_ends_run: true,
                ..pending.cause
            },
        ),
    }
    super::progress::continue_run(&mut step)?;
    Ok(step.into_advance())
}

/// A later turn of the turn-by-turn orchestrator decided: its version in
/// force, the run finished, or asked again; with no usable decision the
/// run finishes with what it has.
fn resume_turn(
    state: RunState,
    pending: PendingReplan,
    previous: &Arc<PlanGraph>,
    (call, outcome): (&PlanDraftCall, &ModelOutcome),
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    use super::orchestrator_turns::TurnStep;
    let mut step = StepContext::new(state, now, engine);
    match super::orchestrator_turns::read_turn(&mut step, call, outcome)? {
        TurnStep::Again(advance) => return Ok(advance),
        TurnStep::Plan {
            plan,
            bundle,
            attempt,
            response,
            note,
        } => {
            step.state_mut().pending_replan = None;
            let cause = ReplanCause {
                rationale: note,
                ..pending.cause
            };
            apply(
                &mut step,
                previous,
                cause,
                (*plan, bundle),
                (attempt, PlannerKind::Llm, response),
            )?;
            super::progress::continue_run(&mut step)?;
        }
        TurnStep::Final => {
            step.state_mut().pending_replan = None;
            step.move_run(RunTransition::Work)?;
            super::finish::finish_run(&mut step)?;
        }
        TurnStep::GiveUp { reason, refused } => {
            step.state_mut().pending_replan = None;
            super::plan_drafts::warn_planner_fallback(&mut step, &reason, refused);
            step.move_run(RunTransition::Work)?;
            super::finish::finish_run(&mut step)?;
        }
    }
    Ok(step.into_advance())
}

/// The planner model's request for `pending`: the envelope the replan plans
/// against, and what it replaces and why (the orchestrator's request for a
/// turn).
fn request_for(
    state: &RunState,
    pending: &PendingReplan,
    engine: &EngineContext<'_>,
    rejected: &[DiagnosticsBundle],
) -> crate::contracts::model_request::ModelRequest {
    if pending.cause.trigger.kind == super::orchestrator_turns::ORCHESTRATOR_TURN {
        return super::orchestrator_turns::next_turn_request(state, engine, rejected);
    }
    let envelope = planning_envelope(state, &pending.cause);
    replan_request(
        &envelope,
        engine.registry,
        rejected,
        replan_context(state, pending),
    )
}

/// What the planner model is told about the plan it replaces.
fn replan_context(state: &RunState, pending: &PendingReplan) -> Value {
    let cause = &pending.cause;
    let nodes: Vec<Value> = state
        .plan
        .as_ref()
        .map(|plan| {
            plan.nodes
                .iter()
                .map(|node| {
                    let record = state.nodes.get(&node.node_id);
                    json!({
                        "nodeId": node.node_id,
                        "capabilityId": node.capability_id,
                        "dependsOn": plan.upstream_of(&node.node_id),
                        "status": record.map(|record| record.status()),
                        "error": record.and_then(|record| record.error.clone()),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let escalations: Vec<Value> = state
        .governance
        .escalations
        .iter()
        .chain(cause.escalated.iter())
        .map(|record| json!({"nodeId": record.node_id, "capabilityId": record.capability_id, "failure": record.failure}))
        .collect();
    json!({
        "replacesVersion": state.plan_version(),
        "version": pending.version,
        "trigger": cause.trigger,
        "policyId": cause.policy_id,
        "rationale": cause.rationale,
        "invalidatedNodes": cause.invalidate,
        "excludedCapabilities": cause.exclude_capabilities,
        "failedNodes": escalations,
        "escalationRanking": cause.ranking,
        "planInForce": nodes,
    })
}

/// A second cause while a version is being drafted: its nodes and
/// exclusions join the first's; its rationale is appended.
fn join(pending: &mut ReplanCause, cause: ReplanCause) {
    pending.invalidate.extend(cause.invalidate);
    pending
        .exclude_capabilities
        .extend(cause.exclude_capabilities);
    pending.rationale = match (pending.rationale.take(), cause.rationale) {
        (Some(first), Some(second)) => Some(format!("{first}; then {second}")),
        (first, second) => first.or(second),
    };
    pending.reject_ends_run |= cause.reject_ends_run;
    if pending.escalated.is_none() {
        pending.escalated = cause.escalated;
    }
    if pending.ranking.is_empty() {
        pending.ranking = cause.ranking;
    }
}

/// The run's envelope with the capabilities the replan may not use (the
/// cause's, and every capability escalated away before: a second escalation
/// never goes back to the first one that failed) added to the forbidden list.
fn planning_envelope(state: &RunState, cause: &ReplanCause) -> TaskEnvelope {
    let mut envelope = state.envelope.as_ref().clone();
    let mut excluded = cause.exclude_capabilities.clone();
    excluded.extend(
        state
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
    envelope
}

/// A valid deterministic draft for `envelope`, with its diagnostics (an
/// escalation's candidates tried in `cause`'s health order).
fn draft_deterministically(
    envelope: &TaskEnvelope,
    cause: &ReplanCause,
    engine: &EngineContext<'_>,
) -> Option<(PlanGraph, DiagnosticsBundle)> {
    let order: Vec<String> = cause
        .ranking
        .iter()
        .map(|ranked| ranked.capability_id.clone())
        .collect();
    let orders = CandidateOrders {
        health: &order,
        relevance: engine.capability_relevance,
    };
    let plan = plan_deterministically_ordered(envelope, engine.registry, orders).ok()?;
    let bundle = validate_plan(&plan, envelope, engine.registry, engine.validators);
    (bundle.status != PlanStatus::Rejected).then_some((plan, bundle))
}

/// No valid plan can replace `previous`: the run ends when the cause says so.
fn refuse(step: &mut StepContext<'_, '_>, previous: &PlanGraph, cause: &ReplanCause) {
    if !cause.reject_ends_run {
        return;
    }
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

/// Puts the new version in force: node records carried over or reset, the
/// replaced version kept as a run entry, `plan_requested` and
/// `plan_updated`, and the warnings about specialists it goes without.
pub(super) fn apply(
    step: &mut StepContext<'_, '_>,
    previous: &Arc<PlanGraph>,
    cause: ReplanCause,
    (mut plan, bundle): (PlanGraph, DiagnosticsBundle),
    (attempt, planner, response): (u32, PlannerKind, Option<frames::ModelResponseSummary>),
) -> Result<(), CoreError> {
    let engine = step.engine();
    plan.plan_version = previous.plan_version + 1;
    let invalidated = previous.downstream_closure(&cause.invalidate);
    let mut reused = Vec::new();
    let mut nodes = std::collections::BTreeMap::new();
    for node in &plan.nodes {
        let old_record = step.state().nodes.get(&node.node_id);
        let same_node = previous.node(&node.node_id).is_some_and(|old| {
            old.capability_id == node.capability_id
                && previous.upstream_of(&node.node_id) == plan.upstream_of(&node.node_id)
        });
        let record = match old_record {
            Some(record) if same_node && !invalidated.contains(node.node_id.as_str()) => {
                if record.status() == NodeStatus::Completed {
                    reused.push(node.node_id.clone());
                }
                record.clone()
            }
            Some(record) => {
                let mut fresh = NodeRecord::pending();
                fresh.current_attempt = record.current_attempt;
                fresh.attempt_base = record.current_attempt;
                fresh.usage = record.usage;
                fresh.cost_usd = record.cost_usd;
                Arc::new(fresh)
            }
            None => Arc::new(NodeRecord::pending()),
        };
        nodes.insert(node.node_id.clone(), record);
    }
    step.enter_phase(frames::RunPhase::Planning);
    let requested = frames::plan_requested(
        &step.stamp(),
        &super::plan_drafts::plan_requested_payload(step.state(), engine, attempt, planner),
    );
    step.emit(requested);
    // What the nodes this version drops had used stays the run's.
    let state = step.state_mut();
    for (node_id, record) in &state.nodes {
        if !nodes.contains_key(node_id) {
            state.retired_spend.add(&record.usage, record.cost_usd);
        }
    }
    step.state_mut().nodes = nodes;
    let diagnostics = bundle.clone();
    step.state_mut().plan_diagnostics = Some(Arc::new(bundle));
    plan.share_contract_schemas(engine.validators);
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
    step.state_mut().plan = Some(plan.clone());
    step.move_run(RunTransition::Work)?;
    step.record_plan_version(
        &cause.trigger.kind,
        cause.trigger.node_id.as_deref(),
        cause.policy_id.as_deref(),
        cause.rationale.as_deref(),
    );
    let had = |id: &str| previous.node(id).is_some();
    let updated = frames::plan_updated(
        &step.stamp(),
        &frames::PlanUpdatedPayload {
            previous_version: previous.plan_version,
            version: plan.plan_version,
            trigger: cause.trigger.clone(),
            policy_id: cause.policy_id.clone(),
            rationale: cause.rationale.clone(),
            reused_nodes: reused,
            added_nodes: plan
                .nodes
                .iter()
                .filter(|node| !had(&node.node_id))
                .map(|node| node.node_id.clone())
                .collect(),
            removed_nodes: previous
                .nodes
                .iter()
                .filter(|node| plan.node(&node.node_id).is_none())
                .map(|node| node.node_id.clone())
                .collect(),
            planner: Some(planner),
            response,
            nodes: plan
                .nodes
                .iter()
                .map(|node| frames::UpdatedNodeSummary {
                    node_id: node.node_id.clone(),
                    capability_id: node.capability_id.clone(),
                    status: step.state().nodes[&node.node_id].status(),
                })
                .collect(),
            edges: plan.edges.clone(),
            diagnostics: Some(diagnostics),
            escalation_ranking: cause.ranking.clone(),
        },
    );
    let updated = super::frame_provenance::with_provenance(step.state(), updated, None);
    step.emit(updated);
    if let Some(escalated) = &cause.escalated {
        super::replan_warnings::say_what_took_over(step, escalated);
    }
    super::replan_warnings::say_dropped_specialists(step, previous, &plan, &cause);
    Ok(())
}
