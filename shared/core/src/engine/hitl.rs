//! People acting on a held run (resolving an approval request, answering a
//! clarifying question, resuming a pause, triggering a `manual` policy) and
//! durable timers coming due (human task SLAs, `onTimeout` policies).
//!
//! Each is decided here with no I/O; the shell commits the decision
//! conditionally on the version it read, so of two concurrent resolutions
//! exactly one is a transition.

use crate::basics::codes::FailureCode;
use crate::basics::error::CoreError;
use crate::basics::instant::Instant;
use crate::contracts::policies::PolicyTrigger;
use crate::records::governance::{HitlKind, Hold};
use crate::state::run::RunState;
use crate::wire::frames::{self, HitlDecision, TriggerDetails};

use super::decision::HumanInputRefused;
use super::decision::{Decision, EngineContext};
use super::policy::{self, Applied};
use super::policy_matching::Occurrence;
use super::step_context::StepContext;

/// A person's decision on an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalDecision {
    Approve,
    Reject,
}

/// `hitl/resolve`: which request, the decision, an optional note.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalResolution<'a> {
    pub request_id: &'a str,
    pub decision: ApprovalDecision,
    pub note: Option<&'a str>,
    /// Who decides: their user is recorded in `hitl_resolved`, and an
    /// approval with `approvers` admits only them.
    pub by: &'a crate::contracts::assignment::Answerer,
}

/// A person's answer to a node's clarifying question.
#[derive(Debug, Clone, PartialEq)]
pub struct ClarificationAnswer<'a> {
    /// The request answered; none: the pending one.
    pub request_id: Option<&'a str>,
    pub expected_plan_version: u32,
    pub answer: &'a str,
    /// The signed-in user who answers, recorded in `hitl_resolved`.
    pub answered_by: Option<&'a str>,
}

type Resolved = Result<Result<Decision, HumanInputRefused>, CoreError>;

fn pending_request<'s>(
    state: &'s RunState,
    kind: HitlKind,
    request_id: Option<&str>,
) -> Result<&'s crate::records::governance::HitlRequest, HumanInputRefused> {
    let pending = state
        .governance
        .pending_request()
        .filter(|request| request.kind == kind && !state.status().is_terminal());
    match pending {
        None => Err(HumanInputRefused::NoPendingRequest {
            run_status: state.status(),
        }),
        Some(request) if request_id.is_some_and(|id| id != request.request_id) => {
            Err(HumanInputRefused::UnknownRequest {
                pending: request.request_id.clone(),
            })
        }
        Some(request) => Ok(request),
    }
}

fn resolved_frame(
    step: &mut StepContext<'_, '_>,
    request_id: &str,
    kind: HitlKind,
    decision: HitlDecision,
    note: Option<&str>,
    decided_by: Option<&str>,
) {
    let frame = frames::hitl_resolved(
        &step.stamp(),
        &frames::HitlResolvedPayload {
            request_id: request_id.to_string(),
            kind,
            decision,
            note: note.map(str::to_string),
            decided_by: decided_by.map(str::to_string),
        },
    );
    let pending_node = step
        .state()
        .governance
        .pending_request()
        .and_then(|request| request.pending_node_id.clone());
    let frame =
        super::frame_provenance::with_provenance(step.state(), frame, pending_node.as_deref());
    step.emit(frame);
}

/// Resolves the pending approval request: approval applies `approveAction`
/// (none: resume), rejection `rejectAction` (none: the run fails).
pub fn resolve_approval(
    state: RunState,
    resolution: ApprovalResolution<'_>,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Resolved {
    let request = match pending_request(&state, HitlKind::Approval, Some(resolution.request_id)) {
        Ok(request) => request.clone(),
        Err(refused) => return Ok(Err(refused)),
    };
    if let Some(approvers) = &request.approvers
        && !approvers.admits(resolution.by)
    {
        return Ok(Err(HumanInputRefused::NotAssignee {
            assigned_to: approvers.clone(),
        }));
    }
    let mut step = StepContext::new(state, now, engine);
    let decision = match resolution.decision {
        ApprovalDecision::Approve => HitlDecision::Approve,
        ApprovalDecision::Reject => HitlDecision::Reject,
    };
    resolved_frame(
        &mut step,
        &request.request_id,
        HitlKind::Approval,
        decision,
        resolution.note,
        resolution.by.user.as_deref(),
    );
    step.state_mut().governance.hold = None;
    let policy_id = request.policy_id.clone().unwrap_or_default();
    if resolution.decision == ApprovalDecision::Approve {
        super::budget::grant_another_budget(&mut step, &policy_id);
    }
    let chained = match resolution.decision {
        ApprovalDecision::Approve => request.approve_action.clone(),
        ApprovalDecision::Reject => request.reject_action.clone(),
    };
    let plan = step.state().plan.clone();
    let node = request
        .pending_node_id
        .as_deref()
        .and_then(|node_id| plan.as_deref().and_then(|plan| plan.node(node_id)));
    match chained {
        Some(action) => {
            let trigger = TriggerDetails {
                kind: "hitl_resolved".into(),
                node_id: request.pending_node_id.clone(),
                request_id: Some(request.request_id.clone()),
                decision: Some(decision),
                ..TriggerDetails::default()
            };
            policy::announce(&mut step, &policy_id, trigger.clone(), &action);
            match policy::apply(&mut step, &policy_id, &action, node, &trigger)? {
                Applied::Ended | Applied::Held => return Ok(Ok(step.into_decision())),
                Applied::Continue | Applied::Replanned => {}
            }
        }
        None if resolution.decision == ApprovalDecision::Reject
            && super::budget::end_on_rejection(
                &mut step,
                &policy_id,
                request.pending_node_id.as_deref(),
            ) =>
        {
            return Ok(Ok(step.into_decision()));
        }
        None if resolution.decision == ApprovalDecision::Reject => {
            let note = resolution
                .note
                .map(|note| format!(": {note}"))
                .unwrap_or_default();
            step.fail_run(
                FailureCode::HitlRejected,
                &format!("approval request {} was rejected{note}", request.request_id),
            );
            return Ok(Ok(step.into_decision()));
        }
        None => {}
    }
    super::plan_drafts::emit_resumed_plan(&mut step);
    policy::release_hold(&mut step)?;
    Ok(Ok(step.into_decision()))
}

/// Answers the pending clarifying question: the answer joins the run's
/// clarifications and the node that asked runs again with it (no new plan
/// version).
pub fn answer_clarification(
    state: RunState,
    answer: ClarificationAnswer<'_>,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Resolved {
    let request = match pending_request(&state, HitlKind::Clarify, answer.request_id) {
        Ok(request) => request.clone(),
        Err(refused) => return Ok(Err(refused)),
    };
    let current = state.plan_version();
    if answer.expected_plan_version != current {
        return Ok(Err(HumanInputRefused::StalePlanVersion { current }));
    }
    if answer.answer.trim().is_empty() {
        return Ok(Err(HumanInputRefused::AnswerRequired));
    }
    let mut step = StepContext::new(state, now, engine);
    let answered_at = step.now();
    if let Some(entry) = step
        .state_mut()
        .governance
        .clarifications
        .iter_mut()
        .rev()
        .find(|entry| Some(&entry.node_id) == request.pending_node_id.as_ref())
    {
        entry.answer = Some(answer.answer.to_string());
        entry.answered_at = Some(answered_at);
    }
    resolved_frame(
        &mut step,
        &request.request_id,
        HitlKind::Clarify,
        HitlDecision::Answered,
        None,
        answer.answered_by,
    );
    super::plan_drafts::emit_resumed_plan(&mut step);
    policy::release_hold(&mut step)?;
    Ok(Ok(step.into_decision()))
}

/// Resumes a run a policy paused, from its stored snapshot, without
/// re-planning.
pub fn resume_paused_run(
    state: RunState,
    expected_plan_version: u32,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Resolved {
    if !matches!(state.governance.hold, Some(Hold::Paused { .. })) || state.status().is_terminal() {
        return Ok(Err(HumanInputRefused::NotPaused {
            run_status: state.status(),
        }));
    }
    let current = state.plan_version();
    if expected_plan_version != current {
        return Ok(Err(HumanInputRefused::StalePlanVersion { current }));
    }
    let mut step = StepContext::new(state, now, engine);
    super::plan_drafts::emit_resumed_plan(&mut step);
    policy::release_hold(&mut step)?;
    Ok(Ok(step.into_decision()))
}

/// Fires a `manual` policy of the run's envelope.
pub fn trigger_manual_policy(
    state: RunState,
    policy_id: &str,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Resolved {
    let known = state.envelope.policies.runtime.iter().any(|policy| {
        policy.id == policy_id && policy.enabled && policy.trigger == PolicyTrigger::Manual
    });
    if !known || state.status().is_terminal() {
        return Ok(Err(HumanInputRefused::NoManualPolicy {
            policy_id: policy_id.to_string(),
            run_status: state.status(),
        }));
    }
    let mut step = StepContext::new(state, now, engine);
    if policy::fire(&mut step, &Occurrence::Manual { policy_id })? != Applied::Held {
        super::progress::continue_run(&mut step)?;
    }
    Ok(Ok(step.into_decision()))
}

/// Questions one node may ask in a run; after that it must answer.
pub const MAX_CLARIFICATIONS_PER_NODE: usize = 3;

/// A node asked a clarifying question instead of answering: the run is
/// held on it and the node runs again with the answer (the attempt does not
/// count against its bound). False when the node asked its quota already
/// (the answer is then judged like any other).
pub(super) fn ask_clarification(
    step: &mut StepContext<'_, '_>,
    node: &crate::planning::plan::PlanNode,
    question: &str,
) -> Result<bool, CoreError> {
    let asked = step
        .state()
        .governance
        .clarifications
        .iter()
        .filter(|entry| entry.node_id == node.node_id)
        .count();
    if asked >= MAX_CLARIFICATIONS_PER_NODE || step.state().governance.hold.is_some() {
        return Ok(false);
    }
    let question_id = format!("{}:q{}", node.node_id, asked + 1);
    let created_at = step.now();
    step.state_mut().governance.clarifications.push(
        crate::records::governance::ClarificationEntry {
            node_id: node.node_id.clone(),
            capability_id: Some(node.capability_id.clone()),
            question_id: question_id.clone(),
            question: question.to_string(),
            answer: None,
            created_at,
            answered_at: None,
        },
    );
    if let Some(record) = step.state_mut().node_mut(&node.node_id) {
        super::lifecycle::move_node(record, super::lifecycle::NodeTransition::Reset);
        record.attempt_base += 1;
        record.feedback.clear();
    }
    let request = crate::records::governance::HitlRequest {
        request_id: policy::next_request_id(step.state_mut()),
        kind: HitlKind::Clarify,
        policy_id: None,
        pending_node_id: Some(node.node_id.clone()),
        operator_prompt: question.to_string(),
        approve_action: None,
        reject_action: None,
        approvers: None,
        contract_summary: None,
        created_at: step.now(),
    };
    policy::hold_on_request(step, request, Some(node), Some(question_id))?;
    Ok(true)
}
