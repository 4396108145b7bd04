//! The step's entry points, the only functions the shell calls for a step:
//! [`begin_step`] and [`resume_step`] dispatch a command to the transition
//! that owns it, [`is_stale`] says whether a command still applies, and
//! [`cancel_run`] / [`fail_run`] end a live run from outside a step.

use crate::basics::codes::FailureCode;
use crate::basics::error::CoreError;
use crate::basics::instant::Instant;
use crate::state::run::{NodeStatus, RunState, RunStatus, StepCommand};

use super::decision::{Decision, EngineContext};
use super::effects::{Performed, StepAdvance};
use super::step_context::StepContext;
use super::{
    agent, budget, lane_release, memory_steps, node, node_answers, notify, panel, planning_step,
    policy, replan, timers,
};

/// Whether `command`'s step asks a model for a node: a model or agent
/// node's attempt, an agent's turn, a judge.
fn asks_a_model(state: &RunState, command: &StepCommand) -> bool {
    match command {
        StepCommand::AskJudge { .. } | StepCommand::AgentTurn { .. } => true,
        StepCommand::ExecuteNode { node_id, .. } => state
            .plan
            .as_ref()
            .and_then(|plan| plan.node(node_id))
            .is_some_and(|node| {
                crate::planning::model_choice::ModelNeed::of(&node.executor).is_some()
            }),
        _ => false,
    }
}

/// Whether `command` no longer applies to `state` (a duplicate or late
/// delivery). `begin_step` and `resume_step` check it themselves; the shell
/// may call it first to skip loading anything for a stale message.
pub fn is_stale(state: &RunState, command: &StepCommand) -> bool {
    if let StepCommand::Notify {
        notification_id,
        attempt,
    } = command
    {
        // Notifications outlive the run's ending.
        return notify::notify_is_stale(state, notification_id, *attempt);
    }
    if let StepCommand::Remember { attempt } = command {
        // A completed run remembers after its end.
        return memory_steps::remember_is_stale(state, *attempt);
    }
    if let StepCommand::ReleaseThreadLane { release, .. } = command {
        // A settled run's lane is released after its end.
        return lane_release::release_is_stale(state, *release);
    }
    if state.status().is_terminal() {
        return true;
    }
    match command {
        StepCommand::Plan => state.status() != RunStatus::Queued,
        StepCommand::Replan { version } => state
            .pending_replan
            .as_ref()
            .is_none_or(|pending| pending.version != *version),
        StepCommand::ExecuteNode { node_id, attempt } => {
            !state.nodes.get(node_id).is_some_and(|record| {
                record.status() == NodeStatus::Scheduled && record.current_attempt == *attempt
            })
        }
        StepCommand::AskJudge {
            node_id,
            attempt,
            round,
            judge_id,
        } => panel::judge_is_stale(state, node_id, *attempt, *round, judge_id),
        StepCommand::AgentTurn {
            node_id,
            attempt,
            turn,
        } => agent::turn_is_stale(state, node_id, *attempt, *turn),
        StepCommand::RunTool {
            node_id,
            attempt,
            turn,
            call_id,
        } => agent::tool_is_stale(state, node_id, *attempt, *turn, call_id),
        StepCommand::ChildRunEnded {
            node_id,
            attempt,
            turn,
            call_id,
            ..
        } => agent::child_is_stale(state, node_id, *attempt, *turn, call_id),
        StepCommand::FireTimer { timer_id } => !state.governance.timers.contains_key(timer_id),
        StepCommand::Notify { .. }
        | StepCommand::Remember { .. }
        | StepCommand::CancelRun { .. }
        | StepCommand::ReleaseThreadLane { .. } => false,
    }
}

/// Starts performing `command` on `state`.
pub fn begin_step(
    state: &RunState,
    command: &StepCommand,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    if is_stale(state, command) {
        return Ok(StepAdvance::Stale);
    }
    if let Some(limit) = state.envelope.constraints.max_turns
        && state.model_turns >= limit
        && asks_a_model(state, command)
    {
        // `constraints.maxTurns` bounds the run's model turns: the next one
        // would pass it.
        let mut step = StepContext::new(state.clone(), now, engine);
        step.fail_run(
            FailureCode::MaxTurnsReached,
            &format!(
                "the run's nodes took {} model turns and need more; constraints.maxTurns is {limit}",
                state.model_turns
            ),
        );
        return Ok(StepAdvance::Decided(Box::new(step.into_decision())));
    }
    if asks_a_model(state, command)
        && let Some(report) = budget::used_up_before_a_call(state, now, command.node_id())
    {
        // `constraints.maxCostUsd` or `maxDurationSeconds` is used up: no
        // more model calls (unless a policy parks the run for approval).
        let mut step = StepContext::new(state.clone(), now, engine);
        if !policy::park_for_approval(&mut step, command, &report)? {
            budget::end_over_budget(&mut step, report);
        }
        return Ok(StepAdvance::Decided(Box::new(step.into_decision())));
    }
    match command {
        StepCommand::Plan => planning_step::begin_planning(state, now, engine),
        StepCommand::Replan { .. } => replan::begin_replan(state, now, engine),
        StepCommand::ExecuteNode { node_id, attempt } => {
            node::begin_node(state, node_id, *attempt, now, engine)
        }
        StepCommand::AskJudge {
            node_id,
            attempt,
            round,
            judge_id,
        } => panel::begin_judge(state, node_id, *attempt, *round, judge_id),
        StepCommand::AgentTurn {
            node_id,
            attempt,
            turn,
        } => agent::begin_turn(state, node_id, *attempt, *turn, now, engine),
        StepCommand::RunTool {
            node_id,
            attempt,
            turn,
            call_id,
        } => agent::begin_tool(state, node_id, *attempt, *turn, call_id, now, engine),
        StepCommand::ChildRunEnded {
            node_id,
            attempt,
            turn,
            call_id,
            summary,
        } => {
            let link = crate::records::agents::ParentLink {
                run_id: state.run_id.clone(),
                node_id: node_id.clone(),
                attempt: *attempt,
                turn: *turn,
                call_id: call_id.clone(),
            };
            agent::child_ended(state, &link, summary, now, engine)
        }
        StepCommand::FireTimer { timer_id } => timers::fire_timer(state, timer_id, now, engine),
        StepCommand::Notify {
            notification_id,
            attempt,
        } => notify::begin_notify(state, notification_id, *attempt, engine),
        StepCommand::Remember { attempt } => memory_steps::begin_remember(state, *attempt, engine),
        StepCommand::CancelRun { reason } => {
            Ok(match cancel_run(state.clone(), reason, now, engine) {
                Some(decision) => StepAdvance::Decided(Box::new(decision)),
                None => StepAdvance::Stale,
            })
        }
        StepCommand::ReleaseThreadLane { thread_id, release } => {
            Ok(lane_release::begin_release(state, thread_id, *release))
        }
    }
}

/// Continues `command` with what performing its effect produced.
pub fn resume_step(
    state: RunState,
    command: &StepCommand,
    performed: &Performed,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    if is_stale(&state, command) {
        return Ok(StepAdvance::Stale);
    }
    match performed {
        Performed::DraftPlan(call, outcome) => match command {
            StepCommand::Replan { .. } => replan::resume_replan(state, call, outcome, now, engine),
            _ => planning_step::resume_planning(state, call, outcome, now, engine),
        },
        Performed::CallModel(call, outcome) => {
            // Decide (the node's executor), then govern and apply (one
            // ordered place for every executor's answer), in this step.
            let (mut step, decided) = node::resume_node(state, call, outcome, now, engine)?;
            node_answers::govern_attempt(&mut step, decided)?;
            Ok(step.into_advance())
        }
        Performed::AskJudge(call, outcome) => {
            panel::resume_judge(state, call, outcome, now, engine)
        }
        Performed::Converse(call, outcome) => agent::resume_turn(state, call, outcome, now, engine),
        Performed::RunTool(call, outcome) => agent::resume_tool(state, call, outcome, now, engine),
        Performed::StartChildRun(start) => agent::resume_child_started(state, start, now, engine),
        Performed::ReviewPlan(review, outcome) => {
            agent::resume_review(state, review, outcome, now, engine)
        }
        Performed::Notify(delivery, outcome) => {
            notify::resume_notify(state, delivery, outcome, now)
        }
        Performed::ReleaseThreadLane(release) => lane_release::resume_release(state, release, now),
        Performed::RecallMemory(call, outcome) => {
            memory_steps::resume_recall(state, call, outcome, now, engine)
        }
        Performed::Remember(remembering, outcome) => {
            memory_steps::resume_remember(state, remembering, outcome, now)
        }
    }
}

/// The caller cancels the run. None when it has already ended.
pub fn cancel_run(
    state: RunState,
    reason: &str,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Option<Decision> {
    end_live_run(state, now, engine, |step| {
        step.end_run(
            RunStatus::Cancelled,
            FailureCode::Cancelled,
            reason,
            &format!("run cancelled: {reason}"),
        );
    })
}

/// The shell cannot go on with the run (e.g. its state no longer fits the
/// store): it fails with `code`. None when it has already ended.
pub fn fail_run(
    state: RunState,
    code: FailureCode,
    message: &str,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Option<Decision> {
    end_live_run(state, now, engine, |step| step.fail_run(code, message))
}

fn end_live_run(
    state: RunState,
    now: Instant,
    engine: &EngineContext<'_>,
    end: impl FnOnce(&mut StepContext<'_, '_>),
) -> Option<Decision> {
    if state.status().is_terminal() {
        return None;
    }
    let mut step = StepContext::new(state, now, engine);
    end(&mut step);
    Some(step.into_decision())
}
