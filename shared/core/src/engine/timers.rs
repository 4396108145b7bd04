//! An entry point: a durable timer came due (`FireTimer`). A human task
//! past its SLA fires the first `onTimeout` policy, escalates to the next
//! capability that makes its facets, or fails the run; a panel round past
//! its time closes with the judges it has; an agent session past its
//! watchdog ends; a parked task's reminder announces the run again; an
//! `onTimeout` policy's timer fires it; a budget's
//! deadline ends the run or warns. It dispatches each to its owner.

use crate::basics::codes::FailureCode;
use crate::basics::error::CoreError;
use crate::basics::instant::Instant;
use crate::records::governance::TimerPurpose;
use crate::state::run::{NodeStatus, RunState};

use super::decision::EngineContext;
use super::effects::StepAdvance;
use super::policy::{self, Applied};
use super::policy_matching::Occurrence;
use super::step_context::StepContext;

/// A timer came due: a human task past its SLA fires the first `onTimeout`
/// policy, or escalates to the next capability that makes its facets (a
/// terminal fallback), or fails the run; an `onTimeout` policy's timer fires it.
pub(super) fn fire_timer(
    state: &RunState,
    timer_id: &str,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    let Some(timer) = state.governance.timers.get(timer_id).cloned() else {
        return Ok(StepAdvance::Stale);
    };
    let mut step = StepContext::new(state.clone(), now, engine);
    step.state_mut().governance.timers.remove(timer_id);
    let plan = step.state().plan.clone();
    match &timer.purpose {
        TimerPurpose::PanelRound {
            node_id,
            attempt,
            round,
        } => super::panel::round_timed_out(&mut step, node_id, *attempt, *round)?,
        TimerPurpose::AgentWatchdog { node_id, attempt } => {
            super::agent::watchdog_fired(&mut step, node_id, *attempt)?;
        }
        TimerPurpose::HumanTaskSla { node_id, attempt } => {
            let still_waiting = step.state().nodes.get(node_id).is_some_and(|record| {
                record.status() == NodeStatus::AwaitingHuman && record.current_attempt == *attempt
            });
            let node = plan.as_deref().and_then(|plan| plan.node(node_id));
            if let (true, Some(node)) = (still_waiting, node) {
                let occurrence = Occurrence::Timeout {
                    policy_id: None,
                    node: Some(node),
                };
                if let Some((policy, details, key)) =
                    super::policy_matching::matching(step.state(), &occurrence)
                        .into_iter()
                        .next()
                {
                    step.state_mut()
                        .governance
                        .fired
                        .insert(format!("{}@{key}", policy.id));
                    policy::announce(&mut step, &policy.id, details.clone(), &policy.action);
                    if policy::apply(&mut step, &policy.id, &policy.action, Some(node), &details)?
                        != Applied::Held
                    {
                        super::progress::continue_run(&mut step)?;
                    }
                } else {
                    let reason = format!(
                        "no answer to the human task within its SLA (due {})",
                        timer.due_at.rfc3339()
                    );
                    // A terminal fallback (or another capability) may still
                    // make the facets: escalate before failing.
                    let escalation = super::escalation::Escalation {
                        trigger: "human_task_timed_out",
                        rationale: format!(
                            "{}: {reason}; trying the next-ranked capability",
                            node.capability_id
                        ),
                        said: format!("{} had {reason}", node.capability_id),
                    };
                    if super::escalation::fall_back_to_next_capability(&mut step, node, escalation)?
                    {
                        super::progress::continue_run(&mut step)?;
                        return Ok(step.into_advance());
                    }
                    step.fail_node(
                        node,
                        *attempt,
                        FailureCode::HumanTaskTimedOut,
                        &reason,
                        &format!("node {node_id}: {reason}"),
                    );
                }
            }
        }
        TimerPurpose::TaskReminder {
            node_id,
            attempt,
            sent,
        } => super::human::remind(&mut step, node_id, *attempt, *sent)?,
        TimerPurpose::RunDeadline { nearly_spent } => {
            super::budget::deadline_reached(&mut step, *nearly_spent);
        }
        TimerPurpose::PolicyTimeout { policy_id } => {
            let occurrence = Occurrence::Timeout {
                policy_id: Some(policy_id),
                node: None,
            };
            if policy::fire(&mut step, &occurrence)? != Applied::Held {
                super::progress::continue_run(&mut step)?;
            }
        }
    }
    Ok(step.into_advance())
}
