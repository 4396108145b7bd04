//! Escalation instead of death: a node whose attempts ran out, or whose
//! model kept failing after its provider's retries and fallback models,
//! hands its facets to the next-ranked capability in a new plan version
//! (a `capability_fallback` warning says why); only when no capability is
//! left does the node fail the run.

use crate::basics::codes::FailureCode;
use crate::basics::error::CoreError;
use crate::planning::plan::PlanNode;
use crate::wire::frames;

use super::StepContext;

/// Why a node hands its facets on: the replan's trigger kind, the
/// planner's rationale, and what the `capability_fallback` warning says.
pub(super) struct Escalation {
    pub(super) trigger: &'static str,
    pub(super) rationale: String,
    pub(super) said: String,
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
        plan_version: step.state.plan_version(),
        node_id: node.node_id.clone(),
        capability_id: node.capability_id.clone(),
        output_facets: node.output_facets.clone(),
        trigger: escalation.trigger.to_string(),
        failure: escalation.said,
    };
    let replaced = super::replan::replan(
        step,
        super::replan::ReplanCause {
            trigger: frames::TriggerDetails {
                kind: escalation.trigger.into(),
                node_id: Some(node.node_id.clone()),
                capability_id: Some(node.capability_id.clone()),
                ..frames::TriggerDetails::default()
            },
            policy_id: None,
            rationale: Some(escalation.rationale),
            invalidate: vec![node.node_id.clone()],
            exclude_capabilities: vec![node.capability_id.clone()],
            reject_ends_run: false,
            escalated: Some(record.clone()),
        },
    )?;
    if replaced {
        step.state.governance.escalations.push(record);
    }
    Ok(replaced)
}
