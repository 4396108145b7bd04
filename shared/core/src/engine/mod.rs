//! The step engine: it owns the whole step. The shell calls two functions
//! and performs what they ask, nothing else:
//!
//! ```text
//! begin_step(state, command, now)            -> Stale | Perform(effect) | Decided(decision)
//! resume_step(state, command, effect, outcome, now) -> Stale | Perform(effect) | Decided(decision)
//! ```
//!
//! `begin_step` borrows the state (the shell keeps it while it performs the
//! effect); `resume_step` takes it (the decision is built from it, no copy).
//!
//! ```text
//! ```
//!
//! An [`Effect`] is data: call this model with this request (after claiming
//! the node and appending these frames), or ask the planner model for a
//! draft. The shell performs it and hands it back as [`Performed`], the
//! effect with its own outcome type (a model call's answer or failure, a
//! tool's result, a delivery's refusal: a mismatch does not compile); the
//! engine decides what it means. Built-in nodes, human parking and rejected
//! inputs are decided without an effect. A [`Decision`] (new state, frames,
//! outbox) is committed by the shell in one transaction. On a version
//! conflict the shell reloads and calls `resume_step` again with the same
//! outcome: the capability is never called twice for one attempt.
//!
//! Nothing in here performs I/O, reads a clock or draws randomness: time
//! comes in as an [`Instant`], so every step replays in a test.

mod agent;
mod budget;
mod chat_runs;
mod fork;
pub use fork::{CompletedNode, ForkBase, ForkChanges, ForkPoint, ForkRefused, fork_base, fork_run};
mod effects;
mod escalation;
mod finish;
mod frame_provenance;
pub mod history_summary;
mod hitl;
mod human;
mod lane_release;
mod narration;
mod node;
mod notify;
mod panel;
mod planning_step;
mod policy;
mod quality;
mod replan;
mod step_context;
#[cfg(test)]
mod tests;
mod usage_recording;

use std::sync::Arc;

pub use agent::{ChildRunStart, ConverseCall, PlanReviewCall, ToolExecution};
pub use effects::{
    DeliveryFailure, DeliveryOutcome, Effect, JudgeModelCall, ModelAnswer, ModelCall, ModelFailure,
    ModelOutcome, Performed, PlanDraftCall, TurnOutcome,
};
pub use hitl::{
    ApprovalDecision, ApprovalResolution, ClarificationAnswer, answer_clarification,
    resolve_approval, resume_paused_run, trigger_manual_policy,
};
pub use human::{
    HumanAnswer, HumanDecline, HumanInputRefused, answer_human_node, decline_human_node,
};
pub use lane_release::LaneRelease;
pub use notify::NotificationDelivery;
pub use policy::run_metrics;
pub(crate) use step_context::StepContext;

use crate::basics::error::CoreError;
use crate::basics::{
    codes::{FailureCode, WarningCode},
    instant::Instant,
    schema::ValidatorCache,
};
use crate::catalog::registry::Registry;
use crate::contracts::envelope::TaskEnvelope;
use crate::state::run::{NodeStatus, RunState, RunStatus, StepCommand, StepMessage};
use crate::wire::{event::EventDraft, frames, frames::FrameStamp};

/// Default bound on attempts per node: the first try plus two re-prompts.
pub const DEFAULT_MAX_NODE_ATTEMPTS: u32 = 3;

/// Default bound on LLM planner drafts before the deterministic planner takes over.
pub const DEFAULT_MAX_PLANNER_ATTEMPTS: u32 = 3;

/// Default SLA of a human task: unanswered after this, the run fails.
pub const DEFAULT_HUMAN_TASK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(900);

/// What one step decided: committed in one transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub state: RunState,
    pub events: Vec<EventDraft>,
    pub outbox: Vec<StepMessage>,
    /// Judge panel transcripts concluded in this step: the shell hands each
    /// to its transcript publisher before it commits (at least once; a
    /// re-applied step publishes again under the same idempotency key).
    pub transcripts: Vec<crate::contracts::panels::TranscriptPublication>,
    /// Chat exchanges answered in this step: the shell records each in its
    /// thread before it commits (recording one twice changes nothing).
    pub exchanges: Vec<ThreadExchange>,
    /// Entries written beside the run in the same commit (conversation
    /// turns, judge calls: `crate::records::entries`).
    pub entries: Vec<crate::records::entries::RunEntry>,
}

/// A chat exchange for the thread it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadExchange {
    pub thread_id: String,
    pub exchange: crate::records::chat::ChatExchange,
}

/// Identity of a new run, chosen by the shell.
#[derive(Debug, Clone)]
pub struct NewRunIdentity {
    pub run_id: String,
    pub tenant_id: String,
    pub correlation_id: String,
    pub thread_id: String,
    /// The run's trace (`trace_context::RunTrace`).
    pub trace: Option<crate::basics::trace_context::RunTrace>,
}

/// Which planner drafts plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PlannerChoice {
    /// Backward chaining over facet coverage; no model call.
    #[default]
    Deterministic,
    /// A model drafts, the validator proves, rejected drafts are re-prompted
    /// with their diagnostics; the deterministic planner is the fallback.
    Llm,
}

/// Read-only collaborators of the engine.
pub struct EngineContext<'a> {
    /// For planning: the registry files plus the tenant's active
    /// registrations. Planned nodes carry their own compiled contracts.
    pub registry: &'a Registry,
    pub validators: &'a ValidatorCache,
    pub planner: PlannerChoice,
    pub max_planner_attempts: u32,
    /// A human task's SLA (`BATON_HUMAN_TASK_TIMEOUT_SECONDS`).
    pub human_task_timeout: std::time::Duration,
    /// How long an agent session may last across its steps
    /// (`BATON_SESSION_MAX_SECONDS`).
    pub agent_session_limit: std::time::Duration,
    /// Runs that end or park are announced on the event bus
    /// (`BATON_EVENT_BUS` is set).
    pub announce_to_event_bus: bool,
}

/// Where a step stands.
#[derive(Debug, Clone, PartialEq)]
pub enum StepAdvance {
    /// The command no longer applies (a duplicate or late delivery).
    Stale,
    /// Perform this, then call `resume_step` with its outcome.
    Perform(Effect),
    /// Commit this (boxed: a decision carries the whole run state).
    Decided(Box<Decision>),
}

/// Creates the run: its state, the `start` frame and the planning step.
pub fn start_run(
    identity: NewRunIdentity,
    envelope: TaskEnvelope,
    now: Instant,
    max_node_attempts: u32,
) -> Decision {
    let state = RunState {
        run_id: identity.run_id.clone(),
        tenant_id: identity.tenant_id.clone(),
        correlation_id: identity.correlation_id.clone(),
        thread_id: identity.thread_id.clone(),
        envelope: Arc::new(envelope),
        status: RunStatus::Queued,
        plan: None,
        plan_diagnostics: None,
        nodes: Default::default(),
        output: None,
        observed_satisfaction: None,
        failure: None,
        created_at: now,
        updated_at: now,
        max_node_attempts: max_node_attempts.max(1),
        governance: Default::default(),
        phase: Some(frames::RunPhase::Planning),
        panels: Default::default(),
        sessions: Default::default(),
        chat: None,
        parent: None,
        notifications: Default::default(),
        unpriced_models: Default::default(),
        model_turns: 0,
        planner_spend: Default::default(),
        retired_spend: Default::default(),
        pending_replan: None,
        forked_from: None,
        trace: identity.trace,
    };
    let start = frames::start(
        &FrameStamp::new(now, 0),
        &frames::StartPayload {
            run_id: identity.run_id.clone(),
            thread_id: identity.thread_id,
            correlation_id: identity.correlation_id,
            objective: state.envelope.objective.clone(),
        },
    );
    let planning = frames::phase(
        &FrameStamp::new(now, 0),
        &frames::PhasePayload {
            phase: frames::RunPhase::Planning,
        },
    );
    Decision {
        outbox: vec![StepMessage::new(
            &identity.tenant_id,
            &identity.run_id,
            StepCommand::Plan,
        )],
        events: vec![start, planning],
        state,
        transcripts: Vec::new(),
        exchanges: Vec::new(),
        entries: Vec::new(),
    }
}

/// The `warning` frames saying what each legacy policy key of a new run's
/// envelope became (appended after its `start`).
pub fn legacy_policy_warnings(
    rewrites: &[crate::contracts::legacy_policies::LegacyRewrite],
    now: Instant,
) -> Vec<EventDraft> {
    rewrites
        .iter()
        .map(|rewrite| {
            let mut payload = frames::WarningPayload::of(WarningCode::LegacyPolicyNormalized);
            payload.field = Some(rewrite.field.clone());
            frames::warning(
                &FrameStamp::new(now, 0),
                None,
                format!("{} became {}", rewrite.field, rewrite.became),
                &payload,
            )
        })
        .collect()
}

/// The `warning` frames naming the envelope's advisory fields that change
/// nothing in this run (see `TaskEnvelope::advisory_notes`).
pub fn advisory_field_warnings(notes: &[(String, String)], now: Instant) -> Vec<EventDraft> {
    notes
        .iter()
        .map(|(field, why)| {
            let mut payload = frames::WarningPayload::of(WarningCode::AdvisoryField);
            payload.field = Some(field.clone());
            frames::warning(
                &FrameStamp::new(now, 0),
                None,
                format!("{field}: {why}"),
                &payload,
            )
        })
        .collect()
}

/// Creates a chat run: `turn`'s message (and its thread's history) answered
/// by one agent node; its envelope asks for `{message, threadId}`.
pub fn start_chat_run(
    identity: NewRunIdentity,
    turn: crate::records::chat::ChatTurn,
    now: Instant,
) -> Result<Decision, CoreError> {
    let envelope = crate::records::chat::chat_envelope(&turn)?;
    let mut decision = start_run(identity, envelope, now, 1);
    decision.state.chat = Some(Box::new(turn));
    Ok(decision)
}

pub use chat_runs::{queue_chat_run, start_queued_chat_run};

/// Whether `command`'s step asks a model for a node: a model or agent
/// node's attempt, an agent's turn, a judge.
/// The node a command is about, if any.
fn command_node(command: &StepCommand) -> Option<&str> {
    match command {
        StepCommand::ExecuteNode { node_id, .. }
        | StepCommand::AskJudge { node_id, .. }
        | StepCommand::AgentTurn { node_id, .. }
        | StepCommand::RunTool { node_id, .. }
        | StepCommand::ChildRunEnded { node_id, .. } => Some(node_id),
        StepCommand::Plan
        | StepCommand::Replan { .. }
        | StepCommand::FireTimer { .. }
        | StepCommand::CancelRun { .. }
        | StepCommand::ReleaseThreadLane { .. }
        | StepCommand::Notify { .. } => None,
    }
}

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
    if let StepCommand::ReleaseThreadLane { release, .. } = command {
        // A settled run's lane is released after its end.
        return lane_release::release_is_stale(state, *release);
    }
    if state.status.is_terminal() {
        return true;
    }
    match command {
        StepCommand::Plan => state.status != RunStatus::Queued,
        StepCommand::Replan { version } => state
            .pending_replan
            .as_ref()
            .is_none_or(|pending| pending.version != *version),
        StepCommand::ExecuteNode { node_id, attempt } => {
            !state.nodes.get(node_id).is_some_and(|record| {
                record.status == NodeStatus::Scheduled && record.current_attempt == *attempt
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
        && let Some(report) = budget::used_up_before_a_call(state, now, command_node(command))
    {
        // `constraints.maxCostUsd` or `maxDurationSeconds` is used up: no
        // more model calls (unless a policy parks the run for approval).
        let mut step = StepContext::new(state.clone(), now, engine);
        if !budget::park_for_approval(&mut step, command, &report)? {
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
        StepCommand::FireTimer { timer_id } => hitl::fire_timer(state, timer_id, now, engine),
        StepCommand::Notify {
            notification_id,
            attempt,
        } => notify::begin_notify(state, notification_id, *attempt, engine),
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
        Performed::CallModel(call, outcome) => node::resume_node(state, call, outcome, now, engine),
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
    if state.status.is_terminal() {
        return None;
    }
    let mut step = StepContext::new(state, now, engine);
    end(&mut step);
    Some(step.into_decision())
}
