//! Runtime policies: evaluated deterministically at their triggers, their
//! actions applied to the step. A policy fires at most once per trigger key
//! (the run start, a node, a failed attempt, the timeout), recorded in the
//! run's governance, so re-running a node after a replan cannot loop.
//!
//! Holding a run (an approval request, a pause, a clarifying question)
//! stops new dispatch; work already dispatched finishes. Releasing the hold
//! applies the hold actions that waited behind it, then dispatches again.

use serde_json::Value;

use crate::basics::codes::{FailureCode, WarningCode};
use crate::basics::error::CoreError;
use crate::contracts::policies::PolicyAction;
use crate::planning::plan::PlanNode;
use crate::records::governance::{DeferredAction, HitlKind, HitlRequest, Hold};
use crate::state::run::RunState;
use crate::wire::frames::{self, TriggerDetails};

use super::lifecycle::RunTransition;
use super::policy_matching::{Occurrence, firing_key, matching, unreadable_conditions};
use super::replan::{ReplanCause, replan};
use super::step_context::StepContext;

/// What applying an action did to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Applied {
    /// Nothing that stops dispatch (an `emit`, or a resume).
    Continue,
    /// The run is held (approval, pause) or the action waits behind a hold.
    Held,
    /// The run ended (`fail`, a rejected replan).
    Ended,
    /// A new plan version replaced the plan.
    Replanned,
}

/// Fires every policy `occurrence` matches, in order, until one ends or
/// replans the run (hold actions after the first wait behind it). Returns
/// what the firings did together.
pub(super) fn fire(
    step: &mut StepContext<'_, '_>,
    occurrence: &Occurrence<'_>,
) -> Result<Applied, CoreError> {
    let node = match occurrence {
        Occurrence::NodeComplete { node, .. }
        | Occurrence::ValidationFail { node, .. }
        | Occurrence::BudgetExceeded { node, .. } => Some(*node),
        Occurrence::Timeout { node, .. } => *node,
        Occurrence::Start | Occurrence::Manual { .. } => None,
    };
    for (index, policy_id, reason) in unreadable_conditions(step.state(), occurrence) {
        let mut payload = frames::WarningPayload::of(WarningCode::PolicyConditionUnreadable);
        payload.field = Some(format!("$.policies.runtime[{index}].trigger.condition"));
        let frame = frames::warning(
            &step.stamp(),
            node.map(|node| node.node_id.as_str()),
            format!("policy `{policy_id}` did not fire: its condition {reason}"),
            &payload,
        );
        step.emit(frame);
    }
    let mut outcome = Applied::Continue;
    for (policy, details, key) in matching(step.state(), occurrence) {
        step.state_mut()
            .governance
            .fired
            .insert(firing_key(&policy.id, &key));
        announce(step, &policy.id, details.clone(), &policy.action);
        match apply(step, &policy.id, &policy.action, node, &details)? {
            // Later hold actions wait behind the first (deferred).
            Applied::Held => outcome = Applied::Held,
            Applied::Continue => {}
            ended_or_replanned => return Ok(ended_or_replanned),
        }
    }
    Ok(outcome)
}

/// `policy_triggered` with the canonical action.
pub(super) fn announce(
    step: &mut StepContext<'_, '_>,
    policy_id: &str,
    trigger: TriggerDetails,
    action: &PolicyAction,
) {
    let frame = frames::policy_triggered(
        &step.stamp(),
        &frames::PolicyTriggeredPayload {
            policy_id: policy_id.to_string(),
            trigger,
            action_details: serde_json::to_value(action).unwrap_or(Value::Null),
        },
    );
    let node_id = frame.node_id.clone();
    let frame = super::frame_provenance::with_provenance(step.state(), frame, node_id.as_deref());
    step.emit(frame);
}

/// Applies one action of `policy_id` (about `node` when the trigger was a node's).
pub(super) fn apply(
    step: &mut StepContext<'_, '_>,
    policy_id: &str,
    action: &PolicyAction,
    node: Option<&PlanNode>,
    trigger: &TriggerDetails,
) -> Result<Applied, CoreError> {
    match action {
        PolicyAction::Emit { event, payload } => {
            let frame = frames::policy_event(
                &step.stamp(),
                &frames::PolicyEventPayload {
                    event: event.clone(),
                    policy_id: policy_id.to_string(),
                    data: payload.clone().unwrap_or_default(),
                },
            );
            step.emit(frame);
            Ok(Applied::Continue)
        }
        PolicyAction::Fail { message } => {
            let message = message
                .clone()
                .unwrap_or_else(|| format!("runtime policy {policy_id} failed the run"));
            step.fail_run(FailureCode::PolicyFailed, &message);
            Ok(Applied::Ended)
        }
        PolicyAction::Pause { .. } | PolicyAction::Hitl { .. }
            if step.state_mut().governance.hold.is_some() =>
        {
            step.state_mut().governance.deferred.push(DeferredAction {
                policy_id: policy_id.to_string(),
                node_id: node.map(|node| node.node_id.clone()),
                action: action.clone(),
            });
            Ok(Applied::Held)
        }
        PolicyAction::Pause { reason } => {
            step.state_mut().governance.hold = Some(Hold::Paused {
                policy_id: policy_id.to_string(),
                reason: reason.clone(),
            });
            step.move_run(RunTransition::Pause)?;
            Ok(Applied::Held)
        }
        PolicyAction::Hitl {
            rationale,
            approve_action,
            reject_action,
            approvers,
        } => {
            let budget_prompt = super::budget::approval_prompt(step.state(), trigger);
            let prompt = rationale
                .clone()
                .or(budget_prompt)
                .unwrap_or_else(|| match node {
                    Some(node) => format!(
                        "Policy {policy_id} asks for approval of node {} ({}).",
                        node.node_id, node.capability_id
                    ),
                    None => format!("Policy {policy_id} asks for approval to continue."),
                });
            let request = HitlRequest {
                request_id: next_request_id(step.state_mut()),
                kind: HitlKind::Approval,
                policy_id: Some(policy_id.to_string()),
                pending_node_id: node.map(|node| node.node_id.clone()),
                operator_prompt: prompt,
                approve_action: approve_action.as_deref().cloned(),
                reject_action: reject_action.as_deref().cloned(),
                approvers: approvers.clone(),
                contract_summary: None,
                created_at: step.now(),
            };
            hold_on_request(step, request, node, None)?;
            Ok(Applied::Held)
        }
        PolicyAction::Replan { rationale } => {
            let accepted = replan(
                step,
                ReplanCause {
                    trigger: trigger.clone(),
                    policy_id: Some(policy_id.to_string()),
                    rationale: rationale.clone(),
                    invalidate: node.map(|node| node.node_id.clone()).into_iter().collect(),
                    exclude_capabilities: Vec::new(),
                    reject_ends_run: true,
                    escalated: None,
                    ranking: Vec::new(),
                },
            )?;
            Ok(if accepted {
                Applied::Replanned
            } else {
                Applied::Ended
            })
        }
    }
}

/// `{runId}:hitl:{n}`, numbered in the run.
pub(super) fn next_request_id(state: &mut RunState) -> String {
    state.governance.requests_issued += 1;
    format!("{}:hitl:{}", state.run_id, state.governance.requests_issued)
}

/// Holds the run on `request` and writes its `hitl_request`; the request
/// keeps the pending node's contract summary the frame carries.
pub(super) fn hold_on_request(
    step: &mut StepContext<'_, '_>,
    mut request: HitlRequest,
    node: Option<&PlanNode>,
    question_id: Option<String>,
) -> Result<(), CoreError> {
    let contract_summary = node.map(|node| frames::ContractSummary {
        capability_id: node.capability_id.clone(),
        input_facets: node.input_facets.clone(),
        output_facets: node.output_facets.clone(),
        input_schema: node.input_contract.schema.as_ref().clone(),
        output_schema: node.output_contract.schema.as_ref().clone(),
        output: step
            .state()
            .nodes
            .get(&node.node_id)
            .and_then(|record| record.output.as_deref().cloned()),
    });
    request.contract_summary = contract_summary;
    let frame = frames::hitl_request(
        &step.stamp(),
        &frames::HitlRequestPayload {
            request_id: request.request_id.clone(),
            kind: request.kind,
            policy_id: request.policy_id.clone(),
            pending_node_id: request.pending_node_id.clone(),
            contract_summary: request.contract_summary.clone(),
            operator_prompt: request.operator_prompt.clone(),
            question_id,
        },
    );
    let frame = super::frame_provenance::with_provenance(
        step.state(),
        frame,
        request.pending_node_id.as_deref(),
    );
    step.emit(frame);
    step.state_mut().governance.hold = Some(Hold::Request(Box::new(request)));
    step.move_run(RunTransition::HoldForDecision)?;
    Ok(())
}

/// Lifts the hold, applies the hold actions that waited behind it (one may
/// hold the run again), then continues.
pub(super) fn release_hold(step: &mut StepContext<'_, '_>) -> Result<(), CoreError> {
    step.state_mut().governance.hold = None;
    while step.state().governance.hold.is_none() && !step.state().governance.deferred.is_empty() {
        let deferred = step.state_mut().governance.deferred.remove(0);
        let plan = step.state().plan.clone();
        let node = deferred
            .node_id
            .as_deref()
            .and_then(|node_id| plan.as_deref().and_then(|plan| plan.node(node_id)));
        let details = TriggerDetails {
            kind: "deferred".into(),
            node_id: deferred.node_id.clone(),
            ..TriggerDetails::default()
        };
        if apply(step, &deferred.policy_id, &deferred.action, node, &details)? == Applied::Ended {
            return Ok(());
        }
    }
    super::progress::continue_run(step)
}

/// Parks the run for approval when an `onBudgetExceeded` policy asks for it
/// and the budget was used up before a node's model call. False when no
/// policy parks it (the caller ends the run).
pub(super) fn park_for_approval(
    step: &mut StepContext<'_, '_>,
    command: &crate::state::run::StepCommand,
    report: &crate::wire::frames::BudgetReport,
) -> Result<bool, crate::CoreError> {
    let crate::state::run::StepCommand::ExecuteNode { node_id, attempt } = command else {
        return Ok(false);
    };
    let Some(plan) = step.state().plan.clone() else {
        return Ok(false);
    };
    let Some(node) = plan.node(node_id) else {
        return Ok(false);
    };
    let occurrence = Occurrence::BudgetExceeded { node, report };
    if matching(step.state(), &occurrence).is_empty() {
        return Ok(false);
    }
    // The node waits, its attempt unspent: it is scheduled again (with the
    // same attempt number) once the hold is lifted.
    if let Some(record) = step.state_mut().node_mut(node_id)
        && record.current_attempt == *attempt
    {
        super::lifecycle::move_node(record, super::lifecycle::NodeTransition::Reset);
        record.current_attempt = attempt.saturating_sub(1);
    }
    if fire(step, &occurrence)? == Applied::Ended {
        return Ok(true);
    }
    super::progress::continue_run(step)?;
    Ok(true)
}
