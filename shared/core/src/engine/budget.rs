//! The run's budgets at run time.
//!
//! - Tokens (`policies.planner.optimisation.maxTokens`): past it, nothing
//!   more is scheduled or retried, except that an answer that completes the
//!   run is still delivered, with a warning.
//! - Money (`constraints.maxCostUsd`, priced by the model catalog): checked
//!   before every model call against the run's ledger; 80% spent is a
//!   `warning` `budget_nearly_spent` (once), all of it ends the run
//!   `budget_exceeded` with the limit, the spend and the node whose call
//!   was not made. An answer already paid for is kept: the budget stops the
//!   next call, never one in flight.
//! - Time (`constraints.maxDurationSeconds`, from the submission): two
//!   durable timers, at 80% (the warning) and at the end, which ends the
//!   run on time even while a model call is in flight (its late answer is
//!   stale); every model call is checked against it too.
//! - Parking: a runtime policy `onBudgetExceeded` (`maxCostUsd`) with a
//!   `hitl` action parks the run instead, before the node's call: the node
//!   goes back to pending (its attempt unspent) and an approval request
//!   holds the run. Approval allows another budget's worth (the limit
//!   becomes the budget times one plus the approvals so far, and the 80%
//!   warning is said again against it) and the node runs; rejection ends
//!   the run `budget_exceeded` (or applies the policy's `rejectAction`).

use crate::basics::codes::{FailureCode, WarningCode};
use crate::basics::instant::Instant;
use crate::contracts::policies::{BudgetField, PolicyTrigger};
use crate::records::governance::{TimerPurpose, deadline_timer_id};
use crate::state::run::{NodeStatus, RunState, RunStatus};
use crate::wire::frames::{self, BudgetReport};

use super::step_context::StepContext;

const COST_FIELD: &str = "$.constraints.maxCostUsd";
const DURATION_FIELD: &str = "$.constraints.maxDurationSeconds";
/// The share of a budget at which the run is warned.
const NEARLY_SPENT: f64 = 0.8;

fn cost_report(state: &RunState, node_id: Option<&str>) -> Option<BudgetReport> {
    let budget = state.envelope.constraints.max_cost_usd?;
    let grants = state
        .governance
        .budget_grants
        .get(COST_FIELD)
        .copied()
        .unwrap_or(0);
    let limit = budget * f64::from(1 + grants);
    Some(BudgetReport {
        field: COST_FIELD.into(),
        unit: "usd".into(),
        limit,
        spent: state.total_cost_usd().unwrap_or(0.0),
        node_id: node_id.map(str::to_string),
    })
}

fn duration_report(state: &RunState, now: Instant, node_id: Option<&str>) -> Option<BudgetReport> {
    let limit = state.envelope.constraints.max_duration_seconds?;
    Some(BudgetReport {
        field: DURATION_FIELD.into(),
        unit: "seconds".into(),
        limit,
        spent: now.since(state.created_at).as_secs_f64(),
        node_id: node_id.map(str::to_string),
    })
}

/// A money or time budget the run has used up before `node_id`'s next
/// model call, if any.
pub(super) fn used_up_before_a_call(
    state: &RunState,
    now: Instant,
    node_id: Option<&str>,
) -> Option<BudgetReport> {
    [
        cost_report(state, node_id),
        duration_report(state, now, node_id),
    ]
    .into_iter()
    .flatten()
    .find(|report| report.spent >= report.limit)
}

fn said(report: &BudgetReport) -> String {
    match report.unit.as_str() {
        "usd" => format!(
            "the run spent ${:.6} of its {} budget ${}",
            report.spent, report.field, report.limit
        ),
        _ => format!(
            "the run has lasted {:.1} s of its {} budget {} s",
            report.spent, report.field, report.limit
        ),
    }
}

/// The budget `policy_id` parks the run on, when it is one of this run's
/// `onBudgetExceeded` policies.
fn parked_budget(state: &RunState, policy_id: &str) -> Option<BudgetField> {
    state
        .envelope
        .policies
        .runtime
        .iter()
        .find_map(|policy| match &policy.trigger {
            PolicyTrigger::OnBudgetExceeded { budget } if policy.id == policy_id => Some(*budget),
            _ => None,
        })
}

/// Whether `policy_id` is an `onBudgetExceeded` policy of this run: its
/// approval allows another budget's worth (and the warning again).
pub(super) fn grant_another_budget(step: &mut StepContext<'_, '_>, policy_id: &str) -> bool {
    let Some(budget) = parked_budget(step.state(), policy_id) else {
        return false;
    };
    let field = budget.path().to_string();
    *step
        .state_mut()
        .governance
        .budget_grants
        .entry(field.clone())
        .or_insert(0) += 1;
    step.state_mut().governance.budgets_warned.remove(&field);
    true
}

/// A rejected approval of `policy_id`'s: when it is an `onBudgetExceeded`
/// policy's, the run ends `budget_exceeded` (true), as it would have with
/// no policy.
pub(super) fn end_on_rejection(
    step: &mut StepContext<'_, '_>,
    policy_id: &str,
    node_id: Option<&str>,
) -> bool {
    let parks = parked_budget(step.state(), policy_id).is_some();
    match cost_report(step.state(), node_id) {
        Some(report) if parks => {
            end_over_budget(step, report);
            true
        }
        _ => false,
    }
}

/// The operator prompt of an approval an `onBudgetExceeded` trigger asks
/// for (its details carry the budget's field, spend and limit); `None` for
/// any other trigger.
pub(super) fn approval_prompt(
    state: &RunState,
    trigger: &frames::TriggerDetails,
) -> Option<String> {
    if trigger.kind != "onBudgetExceeded" {
        return None;
    }
    let report = BudgetReport {
        field: trigger.metric.clone().unwrap_or_default(),
        unit: "usd".into(),
        limit: trigger.threshold.unwrap_or_default(),
        spent: trigger.value.unwrap_or_default(),
        node_id: trigger.node_id.clone(),
    };
    let another = state.envelope.constraints.max_cost_usd.unwrap_or_default();
    let node = report
        .node_id
        .as_deref()
        .map(|node_id| format!(" ({node_id}'s model call waits)"))
        .unwrap_or_default();
    Some(format!(
        "{}{node}: approve to allow another ${another}, or reject to end the run.",
        said(&report)
    ))
}

/// Ends the run `budget_exceeded`, naming the budget, the spend and the node.
pub(super) fn end_over_budget(step: &mut StepContext<'_, '_>, report: BudgetReport) {
    let message = match &report.node_id {
        Some(node_id) if report.unit == "usd" => {
            format!("{}; {node_id}'s model call was not made", said(&report))
        }
        Some(node_id) => format!("{}; stopped at {node_id}", said(&report)),
        None => said(&report),
    };
    step.end_run_with_budget(
        RunStatus::Failed,
        FailureCode::BudgetExceeded,
        &message,
        &message,
        Some(report),
    );
}

/// After a model call's cost is recorded: the 80% warning, once per budget.
pub(super) fn warn_when_nearly_spent(step: &mut StepContext<'_, '_>, node_id: Option<&str>) {
    let Some(report) = cost_report(step.state(), node_id) else {
        return;
    };
    if report.spent >= report.limit * NEARLY_SPENT {
        warn_once(step, report);
    }
}

fn warn_once(step: &mut StepContext<'_, '_>, report: BudgetReport) {
    if !step
        .state_mut()
        .governance
        .budgets_warned
        .insert(report.field.clone())
    {
        return;
    }
    let node_id = report.node_id.clone();
    let warning = frames::warning(
        &step.stamp(),
        node_id.as_deref(),
        format!("{} (80% or more)", said(&report)),
        &frames::WarningPayload {
            budget: Some(report),
            ..frames::WarningPayload::of(WarningCode::BudgetNearlySpent)
        },
    );
    step.emit(warning);
}

/// At the first plan: the `maxDurationSeconds` timers, from the submission.
pub(super) fn start_deadline_timers(step: &mut StepContext<'_, '_>) {
    let Some(limit) = step.state().envelope.constraints.max_duration_seconds else {
        return;
    };
    let created = step.state().created_at;
    for nearly_spent in [true, false] {
        let share = if nearly_spent { NEARLY_SPENT } else { 1.0 };
        let due = created.plus(std::time::Duration::from_secs_f64(limit * share));
        step.start_timer(
            deadline_timer_id(nearly_spent),
            due,
            TimerPurpose::RunDeadline { nearly_spent },
        );
    }
}

/// A deadline timer fired: the warning at 80%, the run's end at 100%.
pub(super) fn deadline_reached(step: &mut StepContext<'_, '_>, nearly_spent: bool) {
    // The node at work when the deadline passed (scheduled, deliberating
    // or with a person), if any.
    let running = step
        .state()
        .nodes
        .iter()
        .find(|(_, record)| {
            matches!(
                record.status(),
                NodeStatus::Scheduled | NodeStatus::Deliberating | NodeStatus::AwaitingHuman
            )
        })
        .map(|(node_id, _)| node_id.clone());
    let Some(report) = duration_report(step.state(), step.now(), running.as_deref()) else {
        return;
    };
    if nearly_spent {
        warn_once(step, report);
    } else {
        end_over_budget(step, report);
    }
}

/// The run's token use against the budget: a message when it is passed.
fn token_budget_exceeded(state: &RunState) -> Option<String> {
    let budget = state.envelope.policies.token_budget()?;
    let usage = state.total_usage();
    let used = usage.prompt_tokens + usage.completion_tokens;
    (used > budget).then(|| {
        format!("the run used {used} tokens, over policies.planner.optimisation.maxTokens {budget}")
    })
}

/// Called after `node_id`'s usage is recorded. Returns true when the run
/// was stopped (the caller decides nothing more).
pub(super) fn stop_when_over_budget(
    step: &mut StepContext<'_, '_>,
    node_id: &str,
    answer_is_valid: bool,
) -> bool {
    let Some(exceeded) = token_budget_exceeded(step.state()) else {
        return false;
    };
    let all_others_completed = step
        .state()
        .nodes
        .iter()
        .all(|(id, record)| id == node_id || record.status().is_settled());
    if all_others_completed && answer_is_valid {
        // The last answer is in and valid: deliver it, and say the budget was passed.
        let warning = frames::warning(
            &step.stamp(),
            Some(node_id),
            exceeded,
            &frames::WarningPayload::of(WarningCode::TokenBudgetExceeded),
        );
        step.emit(warning);
        return false;
    }
    // Spend no more: nothing else is scheduled or retried.
    if let Some(record) = step.state_mut().node_mut(node_id) {
        super::lifecycle::move_node(record, super::lifecycle::NodeTransition::Fail);
        record.error = Some(exceeded.clone());
    }
    step.fail_run(FailureCode::TokenBudgetExceeded, &exceeded);
    true
}
