//! Escalation instead of death: a node whose attempts ran out, or whose
//! model kept failing after its provider's retries and fallback models,
//! hands its facets to the next-ranked capability in a new plan version
//! (a `capability_fallback` warning says why). When no capability makes
//! them, the catch-all fallback takes them (`catchAll: true`: the
//! envelope's `policies.fallbackCapability`, else the registry's first; the
//! shipped one is a person's review task with the failure on it and the
//! node's output contract as the form), in a version that swaps that one
//! node. Only when that is gone too (or was the node that failed) does the
//! node fail the run. `planning::escalation_targets` tells the same answer
//! before the run starts.
//!
//! The next capability is not only the planner's fixed order: the
//! capabilities that could take the facets over are ranked by the tenant's
//! recent calls of each (success rate, latency, price:
//! `catalog::capability_health`), the replan tries them in that order, and
//! `plan_updated` carries the ranking with its inputs.

use crate::basics::codes::FailureCode;
use crate::basics::error::CoreError;
use crate::planning::plan::PlanNode;
use crate::wire::frames;

use super::step_context::StepContext;

/// Why a node hands its facets on: the replan's trigger kind, the
/// planner's rationale, and what the `capability_fallback` warning says.
pub(super) struct Escalation {
    pub(super) trigger: &'static str,
    pub(super) rationale: String,
    pub(super) said: String,
}

impl Escalation {
    /// The replan's trigger: this escalation's kind, on `node`.
    fn trigger_on(&self, node: &PlanNode) -> frames::TriggerDetails {
        frames::TriggerDetails {
            kind: self.trigger.into(),
            node_id: Some(node.node_id.clone()),
            capability_id: Some(node.capability_id.clone()),
            ..frames::TriggerDetails::default()
        }
    }
}

/// Whether a model failure is one a provider kept returning after its own
/// retries (not a configuration or a refused request, which another
/// capability on the same model would meet again).
pub(super) fn provider_kept_failing(code: FailureCode) -> bool {
    matches!(
        code,
        FailureCode::LlmRateLimited
            | FailureCode::LlmServerError
            | FailureCode::LlmTimeout
            | FailureCode::LlmTransport
            | FailureCode::LlmUnexpectedResponse
    )
}

/// A node whose capability is a registration no longer active: a
/// `capability_inactive` warning names it, and the node escalates as a
/// failed one would (the next-ranked capability, the catch-all), or fails
/// with `capability_inactive` when nothing takes it over. The capability is
/// never called.
pub(super) fn escalate_unavailable(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
    attempt: u32,
) -> Result<(), CoreError> {
    let said = format!(
        "capability {} is not active (its heartbeat lapsed, or it was deregistered): node {} does not call it",
        node.capability_id, node.node_id
    );
    let warning = frames::warning(
        &step.stamp(),
        Some(&node.node_id),
        said.clone(),
        &frames::WarningPayload::of(crate::basics::codes::WarningCode::CapabilityInactive),
    );
    step.emit(warning);
    let escalation = Escalation {
        trigger: "capability_inactive",
        rationale: format!(
            "{} is not active; trying the next-ranked capability",
            node.capability_id
        ),
        said: said.clone(),
    };
    if fall_back_to_next_capability(step, node, escalation)? {
        return super::progress::continue_run(step);
    }
    step.fail_node(
        node,
        attempt,
        FailureCode::CapabilityInactive,
        &said,
        &format!(
            "node {} has no active capability: {} is not active and nothing else makes {}",
            node.node_id,
            node.capability_id,
            node.output_facets.join(", ")
        ),
    );
    Ok(())
}

/// The failure table: a node whose attempts ran out, or whose model kept
/// failing, hands its facets to the next-ranked capability in a new plan
/// version, when one exists (under the LLM planner, the version is drafted
/// in a step of its own and the warnings come with it).
pub(super) fn fall_back_to_next_capability(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
    escalation: Escalation,
) -> Result<bool, CoreError> {
    if node.builtin().is_some() {
        return Ok(false);
    }
    let record = crate::records::governance::EscalationRecord {
        plan_version: step.state().plan_version(),
        node_id: node.node_id.clone(),
        capability_id: node.capability_id.clone(),
        output_facets: node.output_facets.clone(),
        trigger: escalation.trigger.to_string(),
        failure: escalation.said.clone(),
    };
    let ranking = escalation_ranking(step, node);
    let replaced = super::replan::replan(
        step,
        super::replan::ReplanCause {
            trigger: escalation.trigger_on(node),
            policy_id: None,
            rationale: Some(escalation.rationale.clone()),
            invalidate: vec![node.node_id.clone()],
            exclude_capabilities: vec![node.capability_id.clone()],
            reject_ends_run: false,
            escalated: Some(record.clone()),
            ranking,
        },
    )?;
    let replaced = replaced || hand_to_catch_all(step, node, &escalation, &record)?;
    if replaced {
        step.state_mut().governance.escalations.push(record);
    }
    Ok(replaced)
}

/// The capabilities that could take `node`'s facets over (those making its
/// first facet, save the one that failed, those escalated away from
/// before, the caller's forbidden ones and the catch-all), best first by
/// the tenant's recent calls of each.
fn escalation_ranking(
    step: &StepContext<'_, '_>,
    node: &PlanNode,
) -> Vec<crate::catalog::capability_health::RankedCapability> {
    let engine = step.engine();
    let Some(facet) = node.output_facets.first() else {
        return Vec::new();
    };
    let state = step.state();
    let ruled_out = |capability_id: &str| {
        capability_id == node.capability_id
            || state
                .governance
                .escalations
                .iter()
                .any(|earlier| earlier.capability_id == capability_id)
            || state
                .envelope
                .policies
                .planner_selection()
                .is_some_and(|selection| {
                    selection.forbid.iter().any(|entry| {
                        crate::planning::planner::selection_matches(entry, capability_id)
                    })
                })
    };
    let candidates: Vec<&crate::contracts::capability::CapabilityRegistration> = engine
        .registry
        .producers_of(facet)
        .into_iter()
        .filter(|capability| !capability.catch_all && !ruled_out(&capability.capability_id))
        .collect();
    crate::catalog::capability_health::rank_by_health(&candidates, engine.capability_health)
}

/// No capability makes `node`'s facets: a new version swaps it for the
/// catch-all fallback, with `node`'s facets and contracts, and its failure
/// in the instructions (and on a person's task, through the escalation
/// record). Whether a version replaced the plan.
fn hand_to_catch_all(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
    escalation: &Escalation,
    record: &crate::records::governance::EscalationRecord,
) -> Result<bool, CoreError> {
    let engine = step.engine();
    let Some(fallback) =
        crate::planning::escalation_targets::catch_all_for(&step.state().envelope, engine.registry)
    else {
        return Ok(false);
    };
    // A catch-all that failed, or one a failure already escalated away from,
    // is not asked again: the run fails with the node.
    let escalated_away = step
        .state()
        .governance
        .escalations
        .iter()
        .any(|earlier| earlier.capability_id == fallback.capability_id);
    if node.capability_id == fallback.capability_id || escalated_away {
        return Ok(false);
    }
    let Some(previous) = step.state().plan.clone() else {
        return Ok(false);
    };
    let mut plan = previous.as_ref().clone();
    let Some(slot) = plan
        .nodes
        .iter_mut()
        .find(|candidate| candidate.node_id == node.node_id)
    else {
        return Ok(false);
    };
    let instructions = format!(
        "{}\n\nYou take over node {} ({}), which failed: {}. Produce {} as its contract asks.",
        fallback
            .instructions
            .clone()
            .unwrap_or_else(|| fallback.summary.clone()),
        node.node_id,
        node.capability_id,
        escalation.said,
        node.output_facets.join(", ")
    );
    *slot = PlanNode {
        capability_id: fallback.capability_id.clone(),
        label: fallback.display_name.clone(),
        kind: fallback.kind,
        executor: crate::planning::plan::NodeExecutor::for_capability(fallback),
        derived: false,
        instructions: instructions.into(),
        variant: node.variant,
        allows_clarify: false,
        task_surface: crate::planning::plan::TaskSurface::of(fallback, &engine.registry.facets),
        quality_score: None,
        remember: Vec::new(),
        model: crate::planning::model_choice::model_for(
            fallback,
            &step.state().envelope,
            engine.registry.models(),
        ),
        ..node.clone()
    };
    let bundle = crate::planning::validator::validate_plan(
        &plan,
        &step.state().envelope,
        engine.registry,
        engine.validators,
    );
    if bundle.status == crate::contracts::diagnostics::PlanStatus::Rejected {
        return Ok(false);
    }
    super::replan::apply(
        step,
        &previous,
        super::replan::ReplanCause {
            trigger: escalation.trigger_on(node),
            policy_id: None,
            rationale: Some(format!(
                "no other capability makes {}: the catch-all fallback {} takes over",
                node.output_facets.join(", "),
                fallback.capability_id
            )),
            invalidate: vec![node.node_id.clone()],
            exclude_capabilities: Vec::new(),
            reject_ends_run: false,
            escalated: Some(record.clone()),
            ranking: Vec::new(),
        },
        (plan, bundle),
        (1, frames::PlannerKind::Deterministic, None),
    )?;
    Ok(true)
}
