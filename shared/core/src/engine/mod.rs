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
//! draft. The shell performs it and hands the [`EffectOutcome`] back; the
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
mod chat;
mod finish;
mod hitl;
mod human;
mod narration;
mod node;
mod panel;
mod plan;
mod policy;
mod quality;
mod replan;
#[cfg(test)]
mod tests;

use std::sync::Arc;

pub use agent::{ConverseCall, ToolExecution};
pub use hitl::{
    ApprovalDecision, ApprovalResolution, ClarificationAnswer, answer_clarification,
    resolve_approval, resume_paused_run, trigger_manual_policy,
};
pub use human::{
    HumanAnswer, HumanDecline, HumanInputRefused, answer_human_node, decline_human_node,
};
pub use policy::run_metrics;

use crate::CoreError;
use crate::codes::FailureCode;
use crate::context::ModelRequest;
use crate::diagnostics::DiagnosticsBundle;
use crate::envelope::TaskEnvelope;
use crate::event::EventDraft;
use crate::frames::{self, FrameStamp};
use crate::governance::{Timer, TimerPurpose};
use crate::instant::Instant;
use crate::registry::Registry;
use crate::run::{
    NodeStatus, RunFailure, RunState, RunStatus, StepCommand, StepMessage, TokenUsage,
};
use crate::schema::ValidatorCache;

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
    pub transcripts: Vec<crate::panels::TranscriptPublication>,
    /// Chat exchanges answered in this step: the shell records each in its
    /// thread before it commits (recording one twice changes nothing).
    pub exchanges: Vec<ThreadExchange>,
}

/// A chat exchange for the thread it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadExchange {
    pub thread_id: String,
    pub exchange: crate::chat::ChatExchange,
}

/// Identity of a new run, chosen by the shell.
#[derive(Debug, Clone)]
pub struct NewRunIdentity {
    pub run_id: String,
    pub tenant_id: String,
    pub correlation_id: String,
    pub thread_id: String,
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
}

/// A model's structured answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelAnswer {
    pub content: String,
    pub usage: TokenUsage,
    pub model: String,
}

/// A node attempt's model call.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCall {
    pub node_id: String,
    pub attempt: u32,
    pub request: ModelRequest,
    /// Appended atomically with the node's claim (`node_start`).
    pub start_frames: Vec<EventDraft>,
    /// When the attempt began (Unix ms), for the node's `metrics`.
    pub started_at_millis: u64,
    /// Whether the model's text is streamed as `delta` frames (only in the
    /// generation and qa phases).
    pub stream_deltas: bool,
}

/// A request to the planner model for a plan draft.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanDraftCall {
    pub attempt: u32,
    pub request: ModelRequest,
    /// Diagnostics of the drafts rejected so far (fed into `request`).
    pub rejected: Vec<DiagnosticsBundle>,
    /// Appended before the call: the previous draft's request and rejection.
    pub frames_before: Vec<EventDraft>,
}

/// One judge's model call in one round of a panel node.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeModelCall {
    pub node_id: String,
    pub attempt: u32,
    pub round: u32,
    pub judge_id: String,
    /// The lease this call is claimed under (one per judge and round).
    pub claim_key: String,
    pub request: ModelRequest,
}

/// What the shell must perform before the engine can decide.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Claim the node attempt (lease), append `start_frames`, call the model
    /// streaming its deltas into the event log.
    CallModel(ModelCall),
    /// Append `frames_before`, ask the model for a plan draft (no claim: the
    /// planning step is guarded by the run's version).
    DraftPlan(PlanDraftCall),
    /// Claim the judge's lease and call the model (no deltas: a panel
    /// reports `progress`, not text).
    AskJudge(Box<JudgeModelCall>),
    /// Claim the turn's lease, append its start frames, take one model turn
    /// of an agent session with its tools offered.
    Converse(Box<ConverseCall>),
    /// Claim the call's lease and perform one tool call.
    RunTool(Box<ToolExecution>),
}

impl Effect {
    /// The node attempt the shell must claim before performing, if any.
    pub fn claim(&self) -> Option<(&str, u32)> {
        match self {
            Effect::CallModel(call) => Some((&call.node_id, call.attempt)),
            Effect::AskJudge(call) => Some((&call.claim_key, call.attempt)),
            Effect::Converse(call) => Some((&call.claim_key, call.attempt)),
            Effect::RunTool(call) => Some((&call.claim_key, call.attempt)),
            Effect::DraftPlan(_) => None,
        }
    }

    /// The frames to append with the claim, taken out of the effect (they
    /// are written once; what stays is what `resume_step` needs).
    pub fn take_claim_frames(&mut self) -> Vec<EventDraft> {
        match self {
            Effect::CallModel(call) => std::mem::take(&mut call.start_frames),
            Effect::Converse(call) => std::mem::take(&mut call.start_frames),
            Effect::DraftPlan(_) | Effect::AskJudge(_) | Effect::RunTool(_) => Vec::new(),
        }
    }
}

/// What performing an effect produced.
#[derive(Debug, Clone, PartialEq)]
pub enum EffectOutcome {
    ModelAnswered(ModelAnswer),
    /// The provider gave up (after its own retries).
    ModelFailed {
        code: FailureCode,
        message: String,
    },
    /// A model turn of an agent session answered (text, tool calls or both).
    ModelConversed(Box<crate::conversation::SessionAnswer>),
    /// A tool call finished (its failure is an outcome the model reads).
    ToolFinished(crate::conversation::ToolOutcome),
}

/// The error for an outcome an effect cannot have produced (a shell bug).
fn unexpected_outcome(effect: &str, outcome: &EffectOutcome) -> CoreError {
    let kind = match outcome {
        EffectOutcome::ModelAnswered(_) => "a model answer",
        EffectOutcome::ModelFailed { .. } => "a model failure",
        EffectOutcome::ModelConversed(_) => "a conversation turn",
        EffectOutcome::ToolFinished(_) => "a tool result",
    };
    CoreError::StepDoesNotApply(format!("{effect} cannot take {kind}"))
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

/// One step's working set: the state being changed, its frames and outbox.
pub(crate) struct StepContext<'e, 'r> {
    pub state: RunState,
    pub now: Instant,
    /// `now` formatted once for every frame of the step.
    timestamp: String,
    pub engine: &'e EngineContext<'r>,
    pub events: Vec<EventDraft>,
    pub outbox: Vec<StepMessage>,
    pub transcripts: Vec<crate::panels::TranscriptPublication>,
    pub exchanges: Vec<ThreadExchange>,
}

impl<'e, 'r> StepContext<'e, 'r> {
    fn new(mut state: RunState, now: Instant, engine: &'e EngineContext<'r>) -> Self {
        let timestamp = now.rfc3339();
        state.updated_at = timestamp.clone();
        StepContext {
            state,
            now,
            timestamp,
            engine,
            events: Vec::new(),
            outbox: Vec::new(),
            transcripts: Vec::new(),
            exchanges: Vec::new(),
        }
    }

    pub fn stamp(&self) -> FrameStamp {
        FrameStamp::from_parts(self.timestamp.clone(), self.state.plan_version())
    }

    pub fn emit(&mut self, frame: EventDraft) {
        self.events.push(frame);
    }

    /// Announces `phase` (a `phase` frame) unless the run is in it already.
    pub fn enter_phase(&mut self, phase: frames::RunPhase) {
        if self.state.phase != Some(phase) {
            self.state.phase = Some(phase);
            let frame = frames::phase(&self.stamp(), &frames::PhasePayload { phase });
            self.emit(frame);
        }
    }

    pub fn enqueue(&mut self, command: StepCommand) {
        self.outbox.push(StepMessage::new(
            &self.state.tenant_id,
            &self.state.run_id,
            command,
        ));
    }

    /// Records a durable timer and puts its delayed message in the outbox.
    pub fn start_timer(&mut self, timer_id: String, due: Instant, purpose: TimerPurpose) {
        let due_at = due.rfc3339();
        self.outbox.push(StepMessage::timer(
            &self.state.tenant_id,
            &self.state.run_id,
            &timer_id,
            &due_at,
        ));
        self.state
            .governance
            .timers
            .insert(timer_id, Timer { due_at, purpose });
    }

    /// Fails `node` for good (its record, a `node_error` saying `reason`)
    /// and with it the run (`run_message` in its `error`).
    pub(crate) fn fail_node(
        &mut self,
        node: &crate::plan::PlanNode,
        attempt: u32,
        code: FailureCode,
        reason: &str,
        run_message: &str,
    ) {
        if let Some(record) = self.state.nodes.get_mut(&node.node_id) {
            record.status = NodeStatus::Failed;
            record.error = Some(reason.to_string());
        }
        let failed = frames::node_error(
            &self.stamp(),
            node,
            reason.to_string(),
            &frames::NodeErrorPayload { code, attempt },
        );
        self.emit(failed);
        self.fail_run(code, run_message);
    }

    /// Ends the run with `code`: status failed, an `error` frame.
    pub fn fail_run(&mut self, code: FailureCode, message: &str) {
        self.end_run(RunStatus::Failed, code, message, message);
    }

    /// Ends the run without output: `status`, the failure, an `error` frame.
    fn end_run(&mut self, status: RunStatus, code: FailureCode, reason: &str, message: &str) {
        self.state.status = status;
        self.state.failure = Some(RunFailure {
            code,
            message: reason.to_string(),
        });
        let frame = frames::error(
            &self.stamp(),
            message,
            &frames::ErrorPayload { code, status },
        );
        self.emit(frame);
    }

    fn into_decision(self) -> Decision {
        Decision {
            state: self.state,
            events: self.events,
            outbox: self.outbox,
            transcripts: self.transcripts,
            exchanges: self.exchanges,
        }
    }

    fn into_advance(self) -> StepAdvance {
        StepAdvance::Decided(Box::new(self.into_decision()))
    }
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
        created_at: now.rfc3339(),
        updated_at: now.rfc3339(),
        max_node_attempts: max_node_attempts.max(1),
        governance: Default::default(),
        phase: Some(frames::RunPhase::Planning),
        panels: Default::default(),
        sessions: Default::default(),
        chat: None,
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
    }
}

/// Creates a chat run: `turn`'s message (and its thread's history) answered
/// by one agent node; its envelope asks for `{message, threadId}`.
pub fn start_chat_run(
    identity: NewRunIdentity,
    turn: crate::chat::ChatTurn,
    now: Instant,
) -> Result<Decision, CoreError> {
    let envelope = crate::chat::chat_envelope(&turn)?;
    let mut decision = start_run(identity, envelope, now, 1);
    decision.state.chat = Some(turn);
    Ok(decision)
}

/// Whether `command` no longer applies to `state` (a duplicate or late
/// delivery). `begin_step` and `resume_step` check it themselves; the shell
/// may call it first to skip loading anything for a stale message.
pub fn is_stale(state: &RunState, command: &StepCommand) -> bool {
    if state.status.is_terminal() {
        return true;
    }
    match command {
        StepCommand::Plan => state.status != RunStatus::Queued,
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
        StepCommand::FireTimer { timer_id } => !state.governance.timers.contains_key(timer_id),
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
    match command {
        StepCommand::Plan => plan::begin_planning(state, now, engine),
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
        StepCommand::FireTimer { timer_id } => hitl::fire_timer(state, timer_id, now, engine),
    }
}

/// Continues `command` with what performing `effect` produced.
pub fn resume_step(
    state: RunState,
    command: &StepCommand,
    effect: &Effect,
    outcome: EffectOutcome,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    if is_stale(&state, command) {
        return Ok(StepAdvance::Stale);
    }
    match effect {
        Effect::DraftPlan(call) => plan::resume_planning(state, call, outcome, now, engine),
        Effect::CallModel(call) => node::resume_node(state, call, outcome, now, engine),
        Effect::AskJudge(call) => panel::resume_judge(state, call, outcome, now, engine),
        Effect::Converse(call) => agent::resume_turn(state, call, outcome, now, engine),
        Effect::RunTool(call) => agent::resume_tool(state, call, outcome, now, engine),
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
