//! What the planning step and a replan share: a draft judged once by the
//! validator, a draft too large for the planner model's window refused,
//! the frames of a rejected draft and of the planner falling back, the
//! `plan_requested` and `plan_generated` payloads, and the plan restated on
//! a resume. Below both: it names neither.

use crate::basics::codes::{FailureCode, WarningCode};
use crate::contracts::capability::NodeKind;
use crate::contracts::diagnostics::{DiagnosticsBundle, PlanDiagnostic, PlanStatus};
use crate::planning::plan::PlanGraph;
use crate::planning::validator::{rejected_bundle, validate_plan};
use crate::state::context::ModelRequest;
use crate::state::run::RunState;
use crate::wire::frames::{self, PlannerKind};

use super::decision::EngineContext;
use super::effects::ModelFailure;
use super::step_context::StepContext;

/// The planner's request would not fit its model's context window
/// (`state::context_budget`): why, as the model's failure would say it.
pub(super) fn over_window(
    request: &ModelRequest,
    engine: &EngineContext<'_>,
) -> Option<ModelFailure> {
    use crate::state::context_budget::{estimated_tokens, prompt_budget};
    let model = request.model.as_ref().map(|target| target.name.as_str());
    let budget = prompt_budget(engine.registry.models(), model);
    let tokens = estimated_tokens(&request.system_instruction)
        + estimated_tokens(&request.user_message)
        + estimated_tokens(&request.output_schema.to_string());
    (tokens > budget).then(|| ModelFailure {
        code: FailureCode::LlmRequestRejected,
        message: format!(
            "not sent: the request is about {tokens} tokens, over the {budget} its model's context window leaves for a prompt"
        ),
    })
}

/// A planner draft's model and usage, as its frames say them.
pub(super) fn draft_response(answer: &super::effects::ModelAnswer) -> frames::ModelResponseSummary {
    frames::ModelResponseSummary {
        model: answer.model.clone(),
        usage: frames::TokenTotals::of(&answer.usage),
    }
}

/// A planner-model draft the validator rejected, to be re-prompted: its
/// `plan_requested` and `plan_rejected` (`willRetry`) frames.
pub(super) fn rejected_draft_frames(
    step: &StepContext<'_, '_>,
    attempt: u32,
    bundle: &DiagnosticsBundle,
    response: Option<frames::ModelResponseSummary>,
) -> [crate::wire::event::EventDraft; 2] {
    [
        frames::plan_requested(
            &step.stamp(),
            &plan_requested_payload(step.state(), step.engine(), attempt, PlannerKind::Llm),
        ),
        frames::plan_rejected(
            &step.stamp(),
            &frames::PlanRejectedPayload {
                attempt,
                will_retry: true,
                response,
                diagnostics: bundle.clone(),
            },
        ),
    ]
}

/// `planner_fallback`: the planner model failed (`reason`); the
/// deterministic planner plans.
pub(super) fn warn_planner_fallback(
    step: &mut StepContext<'_, '_>,
    reason: &str,
    rejected_drafts: u32,
) {
    let warning = frames::warning(
        &step.stamp(),
        None,
        format!("{reason}; using the deterministic planner"),
        &frames::WarningPayload {
            fallback: Some(PlannerKind::Deterministic),
            rejected_drafts: Some(rejected_drafts),
            ..frames::WarningPayload::of(WarningCode::PlannerFallback)
        },
    );
    step.emit(warning);
}

/// Validates a draft against `envelope`, once.
pub(super) fn judge(
    drafted: Result<PlanGraph, Vec<PlanDiagnostic>>,
    envelope: &crate::contracts::envelope::TaskEnvelope,
    engine: &EngineContext<'_>,
) -> Judged {
    match drafted {
        Ok(plan) => {
            let bundle = validate_plan(&plan, envelope, engine.registry, engine.validators);
            if bundle.status == PlanStatus::Rejected {
                (None, bundle)
            } else {
                (Some(plan), bundle)
            }
        }
        Err(diagnostics) => (None, rejected_bundle(diagnostics)),
    }
}

pub(super) fn plan_requested_payload(
    state: &RunState,
    engine: &EngineContext<'_>,
    attempt: u32,
    planner: PlannerKind,
) -> frames::PlanRequestedPayload {
    let capability_ids: Vec<String> = engine
        .registry
        .capabilities()
        .map(|capability| capability.capability_id.clone())
        .collect();
    let policies = &state.envelope.policies;
    let mut policy_keys: Vec<String> = policies.hints.keys().cloned().collect();
    if policies.planner.is_some() {
        policy_keys.push("planner".into());
    }
    if !policies.runtime.is_empty() {
        policy_keys.push("runtime".into());
    }
    frames::PlanRequestedPayload {
        attempt,
        planner,
        policy_keys,
        capability_snapshot: frames::CapabilitySnapshotSummary {
            count: capability_ids.len(),
            capability_ids,
        },
    }
}

pub(super) fn plan_generated_payload(
    plan: &PlanGraph,
    bundle: &DiagnosticsBundle,
) -> frames::PlanGeneratedPayload {
    let nodes = plan
        .nodes
        .iter()
        .map(|node| frames::PlannedNodeSummary {
            node_id: node.node_id.clone(),
            capability_id: node.capability_id.clone(),
            label: node.label.clone(),
            kind: node.kind,
            agent_type: node.agent_type(),
            derived: node.derived,
            provides: node.output_facets.clone(),
            enforces: if node.kind == NodeKind::Validation {
                node.output_facets.clone()
            } else {
                Vec::new()
            },
            model: node.model.as_ref().map(|model| model.name.clone()),
        })
        .collect();
    frames::PlanGeneratedPayload {
        plan_version: plan.plan_version,
        planner_runtime: plan.planner_runtime.clone(),
        planner_model: plan.planner_model.clone(),
        nodes,
        edges: plan.edges.clone(),
        derived_capabilities: plan
            .nodes
            .iter()
            .filter(|node| node.derived)
            .map(|node| node.capability_id.clone())
            .collect(),
        branch_count: plan
            .nodes
            .iter()
            .filter(|node| node.variant.is_some())
            .count(),
        normalization_injected: plan
            .metadata
            .get("normalizationInjected")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false),
        metadata: plan.metadata.clone(),
        response: None,
        diagnostics: bundle.clone(),
    }
}

/// `plan_generated` for the current plan with `metadata.resumed: true`:
/// what a resumed run's stream shows before it goes on.
pub(super) fn emit_resumed_plan(step: &mut StepContext<'_, '_>) {
    let (Some(plan), Some(bundle)) = (
        step.state().plan.clone(),
        step.state().plan_diagnostics.clone(),
    ) else {
        return;
    };
    let mut payload = plan_generated_payload(&plan, &bundle);
    payload
        .metadata
        .insert("resumed".into(), serde_json::Value::Bool(true));
    let frame = frames::plan_generated(&step.stamp(), &payload);
    let frame = super::frame_provenance::with_provenance(step.state(), frame, None);
    step.emit(frame);
}

/// A draft and its diagnostics: the plan only when it is not rejected.
pub(super) type Judged = (Option<PlanGraph>, DiagnosticsBundle);
