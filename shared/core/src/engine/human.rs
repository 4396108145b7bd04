//! Human nodes: a person's answer to a parked node, or their refusal.
//! Both are decided here, with no I/O; the shell commits the decision
//! conditionally on the version it read, so of two concurrent answers to
//! one task exactly one is a transition.

use serde_json::Value;

use crate::basics::codes::FailureCode;
use crate::basics::error::CoreError;
use crate::basics::instant::Instant;
use crate::basics::schema::collect_violations;
use crate::planning::plan::{PlanGraph, PlanNode};
use crate::records::governance::EscalationRecord;
use crate::state::run::{NodeStatus, RunState};
use crate::state::tasks::{Answerer, check_assignee};

pub use super::decision::HumanInputRefused;
use super::decision::{Decision, EngineContext};
use super::node_answers::complete_node;
use super::plan_lookup::{plan_node_in, plan_of};
use super::step_context::StepContext;

/// Why the plan hands `node` to a person, in a sentence: the failed node
/// whose facets it takes over, else what it makes and for whom (the nodes
/// downstream, the output contract).
pub(super) fn why_a_person(
    plan: &PlanGraph,
    node: &PlanNode,
    escalated_from: Option<&EscalationRecord>,
) -> String {
    if let Some(escalation) = escalated_from {
        return format!(
            "takes over {} from node {} ({}), which failed: {}",
            escalation.output_facets.join(", "),
            escalation.node_id,
            escalation.capability_id,
            escalation.failure
        );
    }
    let mut for_whom: Vec<String> = plan
        .edges
        .iter()
        .filter(|edge| edge.from == node.node_id)
        .map(|edge| format!("node {}", edge.to))
        .collect();
    for_whom.dedup();
    if node
        .output_facets
        .iter()
        .any(|facet| plan.goal_facets.contains(facet))
    {
        for_whom.push("the output contract".into());
    }
    let makes = format!(
        "{} is a person's capability; it makes {}",
        node.capability_id,
        node.output_facets.join(", ")
    );
    if for_whom.is_empty() {
        makes
    } else {
        format!("{makes} for {}", for_whom.join(" and "))
    }
}

/// How many times a parked task of `node` is announced: its capability's
/// `assignmentDefaults.maxNotifications` (at least 1), else once.
fn max_notifications(node: &PlanNode) -> u32 {
    node.task_surface
        .as_ref()
        .and_then(|surface| surface.assignment_defaults.as_ref())
        .and_then(|defaults| defaults.get("maxNotifications"))
        .and_then(serde_json::Value::as_u64)
        .map_or(1, |most| u32::try_from(most).unwrap_or(u32::MAX).max(1))
}

/// After `sent` announcements of `node`'s parked task, the timer of the
/// next, when its capability allows more and someone listens: spread
/// evenly over the task's SLA (three announcements over 15 minutes: at
/// parking, 5 and 10 minutes in).
pub(super) fn schedule_reminder(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
    attempt: u32,
    sent: u32,
) {
    let most = max_notifications(node);
    if sent >= most || !super::notify::someone_listens(step) {
        return;
    }
    let every = step.engine().human_task_timeout / most;
    let due = step.now().plus(every);
    step.start_timer(
        crate::records::governance::task_reminder_timer_id(&node.node_id, attempt),
        due,
        crate::records::governance::TimerPurpose::TaskReminder {
            node_id: node.node_id.clone(),
            attempt,
            sent,
        },
    );
}

/// A reminder came due: the task still waiting, the run is announced
/// again and the next reminder set (at most `maxNotifications` in all).
pub(super) fn remind(
    step: &mut StepContext<'_, '_>,
    node_id: &str,
    attempt: u32,
    sent: u32,
) -> Result<(), CoreError> {
    let still_waiting = step.state().nodes.get(node_id).is_some_and(|record| {
        record.status() == NodeStatus::AwaitingHuman && record.current_attempt == attempt
    });
    if !still_waiting {
        return Ok(());
    }
    let plan = plan_of(step.state())?;
    let node = plan_node_in(&plan, step.state(), node_id)?;
    super::notify::announce_again(step);
    schedule_reminder(step, node, attempt, sent + 1);
    Ok(())
}

/// A person's answer to a parked node.
#[derive(Debug, Clone, PartialEq)]
pub struct HumanAnswer<'a> {
    pub node_id: &'a str,
    /// The plan version the person saw; a different current one refuses.
    pub expected_plan_version: u32,
    /// The node's output, judged against its output contract.
    pub output: Value,
    /// Who answers: checked against the task's assignment, recorded on the
    /// node and in its `node_complete` frame.
    pub by: &'a Answerer,
}

/// A person declining a parked node's task.
#[derive(Debug, Clone, PartialEq)]
pub struct HumanDecline<'a> {
    pub node_id: &'a str,
    pub reason_code: &'a str,
    pub note: Option<&'a str>,
    /// Who declines: checked against the task's assignment, named in the
    /// failure.
    pub by: &'a Answerer,
}

/// The node waits for a person, and `answerer` is one it is assigned to.
fn awaiting(state: &RunState, node_id: &str, answerer: &Answerer) -> Result<(), HumanInputRefused> {
    let node_status = state.nodes.get(node_id).map(|record| record.status());
    if state.status().is_terminal() || node_status != Some(NodeStatus::AwaitingHuman) {
        return Err(HumanInputRefused::NotAwaiting {
            run_status: state.status(),
            node_status,
        });
    }
    check_assignee(state, node_id, answerer)
        .map_err(|assigned_to| HumanInputRefused::NotAssignee { assigned_to })
}

/// The node's SLA timer no longer applies once a person acted.
fn drop_task_timer(step: &mut StepContext<'_, '_>, node_id: &str, attempt: u32) {
    let timer_id = crate::records::governance::human_sla_timer_id(node_id, attempt);
    step.state_mut().governance.timers.remove(&timer_id);
}

/// Completes a parked node with a person's output, validated against the
/// node's output contract, and schedules what became ready.
pub fn answer_human_node(
    state: RunState,
    answer: HumanAnswer<'_>,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<Result<Decision, HumanInputRefused>, CoreError> {
    if let Err(refused) = awaiting(&state, answer.node_id, answer.by) {
        return Ok(Err(refused));
    }
    let current = state.plan_version();
    if answer.expected_plan_version != current {
        return Ok(Err(HumanInputRefused::StalePlanVersion { current }));
    }
    let plan = plan_of(&state)?;
    let node = plan_node_in(&plan, &state, answer.node_id)?;
    let validator = engine.validators.validator_for_key(
        &node.output_contract.schema_key,
        &node.output_contract.schema,
        "output contract",
    )?;
    let mut violations = collect_violations(&validator, &answer.output);
    if !violations.is_empty() {
        node.output_contract.attribute_violations(&mut violations);
        return Ok(Err(HumanInputRefused::OutputContractViolated(violations)));
    }
    let attempt = state
        .nodes
        .get(answer.node_id)
        .map_or(1, |record| record.current_attempt);
    let mut step = StepContext::new(state, now, engine);
    if let Some(record) = step.state_mut().node_mut(answer.node_id) {
        record.answered_by = answer.by.user.clone();
    }
    drop_task_timer(&mut step, answer.node_id, attempt);
    super::plan_drafts::emit_resumed_plan(&mut step);
    complete_node(&mut step, node, attempt, answer.output)?;
    Ok(Ok(step.into_decision()))
}

/// A person declines a parked node's task: the node fails and so does the
/// run, with the reason recorded.
pub fn decline_human_node(
    state: RunState,
    decline: HumanDecline<'_>,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<Result<Decision, HumanInputRefused>, CoreError> {
    if let Err(refused) = awaiting(&state, decline.node_id, decline.by) {
        return Ok(Err(refused));
    }
    let plan = plan_of(&state)?;
    let node = plan_node_in(&plan, &state, decline.node_id)?;
    let attempt = state
        .nodes
        .get(decline.node_id)
        .map_or(1, |record| record.current_attempt);
    let who = decline.by.user.as_deref().unwrap_or("a person");
    let reason = match decline.note {
        Some(note) => format!("declined by {who} ({}): {note}", decline.reason_code),
        None => format!("declined by {who} ({})", decline.reason_code),
    };
    let mut step = StepContext::new(state, now, engine);
    drop_task_timer(&mut step, decline.node_id, attempt);
    step.fail_node(
        node,
        attempt,
        FailureCode::HumanDeclined,
        &reason,
        &format!("node {} {reason}", node.node_id),
    );
    Ok(Ok(step.into_decision()))
}
