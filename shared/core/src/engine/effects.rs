//! The effects the engine asks the shell to perform, and what performing
//! them produced: data only, so every step replays in a test.

use crate::basics::codes::FailureCode;
use crate::contracts::diagnostics::DiagnosticsBundle;
use crate::state::context::ModelRequest;
use crate::state::run::TokenUsage;
use crate::wire::event::EventDraft;

use super::decision::Decision;
use crate::basics::claims::ClaimKey;
use crate::basics::error::CoreError;
use crate::records::agents::AgentSession;
use crate::records::chat::ThreadSummary;
use crate::records::conversation::{ToolInvocation, ToolSession};
use crate::records::entries::{EntryBody, RunEntry, conversation_prefix};
use crate::records::notifications::RunNotification;
use serde_json::{Value, json};

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
    /// The rejected drafts' frames so far (each one's request and
    /// rejection), carried to the step's decision and committed with it.
    pub frames_before: Vec<EventDraft>,
    /// What the rejected drafts so far used, recorded with the decision
    /// (the run's `planner_spend`).
    pub spent: Vec<DraftSpend>,
}

/// One planner draft's model and tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct DraftSpend {
    pub model: String,
    pub usage: crate::state::run::TokenUsage,
}

/// One judge's model call in one round of a panel node.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeModelCall {
    pub node_id: String,
    pub attempt: u32,
    pub round: u32,
    pub judge_id: String,
    /// The lease this call is claimed under (one per judge and round).
    pub claim_key: crate::basics::claims::ClaimKey,
    /// The entry holding what the round's judges are asked
    /// (`EntryKey::PanelRound`), which the shell loads and turns into this
    /// judge's model request (`JudgeModelCall::request_from`).
    pub round_entry: String,
}

impl JudgeModelCall {
    /// The model request of the judge's call, read from its entry.
    pub fn request_from(
        &self,
        entry: Option<&crate::records::entries::RunEntry>,
        catalog: &crate::catalog::model_catalog::ModelCatalog,
    ) -> Result<ModelRequest, crate::basics::error::CoreError> {
        let call = match entry.map(|entry| &entry.body) {
            Some(crate::records::entries::EntryBody::PanelRound(calls)) => {
                calls.iter().find(|call| call.judge_id == self.judge_id)
            }
            Some(
                crate::records::entries::EntryBody::Turn(_)
                | crate::records::entries::EntryBody::PlanVersion(_),
            ) => {
                return Err(crate::basics::error::CoreError::StepDoesNotApply(format!(
                    "entry {} is not a panel round",
                    self.round_entry
                )));
            }
            None => None,
        };
        let call = call.ok_or_else(|| {
            crate::basics::error::CoreError::StepDoesNotApply(format!(
                "the call of judge {} is not stored (entry {})",
                self.judge_id, self.round_entry
            ))
        })?;
        Ok(ModelRequest {
            system_instruction: call.system_prompt.clone(),
            user_message: call.user_message.clone(),
            schema_name: "judge_answer".to_string(),
            output_schema: std::sync::Arc::new(baton_judge::panel::judge_answer_schema()),
            // The judge's own model, when the catalog names it; else its
            // provider's first model with structured output.
            model: crate::planning::model_choice::model_for_judge(
                catalog,
                call.model_name.as_deref(),
                call.model_provider.as_deref(),
            )
            .map(Box::new),
        })
    }
}

/// What the shell must perform before the engine can decide.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Claim the node attempt (lease), append `start_frames`, call the model
    /// streaming its deltas into the event log.
    CallModel(ModelCall),
    /// Ask the model for a plan draft (no claim: the planning step is
    /// guarded by the run's version; nothing is appended before the commit).
    DraftPlan(PlanDraftCall),
    /// Claim the judge's lease and call the model (no deltas: a panel
    /// reports `progress`, not text).
    AskJudge(Box<JudgeModelCall>),
    /// Claim the turn's lease, append its start frames, take one model turn
    /// of an agent session with its tools offered.
    Converse(Box<ConverseCall>),
    /// Claim the call's lease and perform one tool call.
    RunTool(Box<ToolExecution>),
    /// Claim the call's lease, create the child run (once: its id and
    /// idempotency key are the call's) and send its first step.
    StartChildRun(Box<ChildRunStart>),
    /// Claim the review's lease and ask the reviewer model about a plan.
    ReviewPlan(Box<PlanReviewCall>),
    /// Deliver a completion notification (no claim: the run's version
    /// guards the record of the attempt).
    Notify(Box<NotificationDelivery>),
    /// Release the thread's lane a settled chat run held (no claim: the
    /// release is conditional on the lane's version, and idempotent).
    ReleaseThreadLane(LaneRelease),
    /// Search the tenant's memory for a model node before its call (no
    /// claim: a read; the node's call that follows claims).
    RecallMemory(Box<super::memory_effects::MemoryRecallCall>),
    /// Write a completed run's remembered facets to the tenant's memory
    /// (no claim: puts by key, so a repeat changes nothing).
    Remember(Box<super::memory_effects::MemoryRemembering>),
}

impl Effect {
    /// What the shell must claim before performing (and for which node
    /// attempt), if anything.
    pub fn claim(&self) -> Option<(crate::basics::claims::ClaimKey, u32)> {
        use crate::basics::claims::ClaimKey;
        match self {
            Effect::CallModel(call) => Some((
                ClaimKey::Node {
                    node_id: call.node_id.clone(),
                },
                call.attempt,
            )),
            Effect::AskJudge(call) => Some((call.claim_key.clone(), call.attempt)),
            Effect::Converse(call) => Some((call.claim_key.clone(), call.attempt)),
            Effect::RunTool(call) => Some((call.claim_key.clone(), call.attempt)),
            Effect::StartChildRun(start) => Some((start.claim_key.clone(), start.attempt)),
            Effect::ReviewPlan(review) => Some((review.claim_key.clone(), review.then.attempt)),
            Effect::DraftPlan(_)
            | Effect::Notify(_)
            | Effect::ReleaseThreadLane(_)
            | Effect::RecallMemory(_)
            | Effect::Remember(_) => None,
        }
    }

    /// The frames to append with the claim, taken out of the effect (they
    /// are written once; what stays is what `resume_step` needs).
    pub fn take_claim_frames(&mut self) -> Vec<EventDraft> {
        match self {
            Effect::CallModel(call) => std::mem::take(&mut call.start_frames),
            Effect::Converse(call) => std::mem::take(&mut call.start_frames),
            Effect::DraftPlan(_)
            | Effect::AskJudge(_)
            | Effect::RunTool(_)
            | Effect::StartChildRun(_)
            | Effect::ReviewPlan(_)
            | Effect::Notify(_)
            | Effect::ReleaseThreadLane(_)
            | Effect::RecallMemory(_)
            | Effect::Remember(_) => Vec::new(),
        }
    }
}

/// Why a model call gave up (after the provider's own retries).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelFailure {
    pub code: FailureCode,
    pub message: String,
}

/// What a model call produced: its answer, or why it gave up.
pub type ModelOutcome = Result<ModelAnswer, ModelFailure>;

/// What a model turn of an agent session produced (text, tool calls or
/// both), or why it gave up.
pub type TurnOutcome = Result<Box<crate::records::conversation::SessionAnswer>, ModelFailure>;

/// A notification that was not accepted: a destination refused it or could
/// not be reached.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryFailure {
    pub message: String,
}

/// What delivering a notification produced.
pub type DeliveryOutcome = Result<(), DeliveryFailure>;

/// An effect the shell performed, with what performing it produced: each
/// effect carries its own outcome type, so an outcome an effect cannot
/// produce (a tool result for a model call) does not compile.
#[derive(Debug, Clone, PartialEq)]
pub enum Performed {
    CallModel(ModelCall, ModelOutcome),
    DraftPlan(PlanDraftCall, ModelOutcome),
    AskJudge(Box<JudgeModelCall>, ModelOutcome),
    Converse(Box<ConverseCall>, TurnOutcome),
    /// A tool call finished (its failure is an outcome the model reads).
    RunTool(
        Box<ToolExecution>,
        crate::records::conversation::ToolOutcome,
    ),
    /// The child run exists (created now, or by an earlier try).
    StartChildRun(Box<ChildRunStart>),
    ReviewPlan(Box<PlanReviewCall>, ModelOutcome),
    Notify(Box<NotificationDelivery>, DeliveryOutcome),
    /// The lane was released (or had been already).
    ReleaseThreadLane(LaneRelease),
    RecallMemory(
        Box<super::memory_effects::MemoryRecallCall>,
        super::memory_effects::RecallOutcome,
    ),
    Remember(
        Box<super::memory_effects::MemoryRemembering>,
        super::memory_effects::RememberOutcome,
    ),
}

impl Performed {
    /// Whether the engine may ask for another effect after this one in the
    /// same step (a rejected plan draft, a reviewed plan, a node's recall
    /// before its model call).
    pub fn may_ask_again(&self) -> bool {
        matches!(
            self,
            Performed::DraftPlan(..) | Performed::ReviewPlan(..) | Performed::RecallMemory(..)
        )
    }
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

#[derive(Debug, Clone, PartialEq)]
pub struct ConverseCall {
    pub node_id: String,
    pub attempt: u32,
    pub turn: u32,
    /// The lease this turn is claimed under (the node's own for the first).
    pub claim_key: ClaimKey,
    pub request: crate::state::context::ModelRequest,
    /// The tools offered, and the turns not stored yet (the first turn's
    /// opening: a chat thread so far), recorded with this turn's result.
    pub conversation: ToolSession,
    /// The session's turns stored beside the run (`conversation_prefix`),
    /// which the shell loads and puts before `conversation.turns`.
    pub stored_turns: u32,
    /// Appended atomically with the claim (the first turn's `node_start`…).
    pub start_frames: Vec<EventDraft>,
    /// The first turn: the session it opens (stored when it is committed).
    pub opens: Option<AgentSession>,
    pub stream_deltas: bool,
    /// The prompt tokens the turn's model takes
    /// (`state::context_budget::prompt_budget`).
    pub prompt_budget_tokens: u64,
    /// A chat session's first turn on a summarised thread: the summariser's
    /// call the shell makes first (`engine::history_summary`), its answer
    /// put here.
    pub history_summary: Option<Box<HistorySummaryCall>>,
}

impl ConverseCall {
    /// The request to send: with the summary the summariser made before
    /// the turn, else the thread's earlier one (`carried`), when the turn
    /// had the summariser called; else as the engine built it.
    pub fn request_to_send(
        &self,
        carried: Option<&crate::records::chat::ThreadSummary>,
    ) -> std::borrow::Cow<'_, crate::state::context::ModelRequest> {
        match &self.history_summary {
            Some(summary) => std::borrow::Cow::Owned(summary.turn_request(&self.request, carried)),
            None => std::borrow::Cow::Borrowed(&self.request),
        }
    }

    /// [`ConverseCall::conversation_with`] fitted to the model's context
    /// (`state::context_budget::fit_session`): the conversation to send,
    /// and what was left out, if anything.
    pub fn fitted_conversation(
        &self,
        stored: &[RunEntry],
    ) -> Result<
        (
            ToolSession,
            Option<crate::state::context_budget::ContextTrim>,
        ),
        CoreError,
    > {
        use crate::state::context_budget::{estimated_tokens, fit_session};
        let mut conversation = self.conversation_with(stored)?;
        let tools = serde_json::to_string(&conversation.tools).unwrap_or_default();
        let fixed = estimated_tokens(&self.request.system_instruction)
            + estimated_tokens(&self.request.user_message)
            + estimated_tokens(&self.request.output_schema.to_string())
            + estimated_tokens(&tools);
        let trim = fit_session(&mut conversation, fixed, self.prompt_budget_tokens);
        Ok((conversation, trim))
    }

    /// Where the stored turns are, when there are any to load.
    pub fn stored_prefix(&self) -> Option<String> {
        (self.stored_turns > 0).then(|| conversation_prefix(&self.node_id, self.attempt))
    }

    /// The whole conversation: the stored turns, as a prefix read returned
    /// them, then the call's own. Fewer stored turns than the session
    /// counts means the store lost some: the step cannot go on.
    pub fn conversation_with(&self, stored: &[RunEntry]) -> Result<ToolSession, CoreError> {
        let wanted = self.stored_turns as usize;
        let mut turns = Vec::with_capacity(wanted + self.conversation.turns.len());
        for entry in stored.iter().take(wanted) {
            match &entry.body {
                EntryBody::Turn(turn) => turns.push(turn.clone()),
                EntryBody::PanelRound(_) | EntryBody::PlanVersion(_) => {
                    return Err(CoreError::StepDoesNotApply(format!(
                        "entry {} is not a conversation turn",
                        entry.key
                    )));
                }
            }
        }
        if turns.len() < wanted {
            return Err(CoreError::StepDoesNotApply(format!(
                "node {} attempt {}: {} conversation turns are stored, the session counts {wanted}",
                self.node_id,
                self.attempt,
                turns.len()
            )));
        }
        turns.extend(self.conversation.turns.iter().cloned());
        Ok(ToolSession {
            tools: self.conversation.tools.clone(),
            turns,
            free_text: self.conversation.free_text,
        })
    }
}

/// One tool call of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolExecution {
    pub node_id: String,
    pub attempt: u32,
    pub turn: u32,
    pub claim_key: ClaimKey,
    pub tool: crate::catalog::tools::ToolDefinition,
    pub invocation: ToolInvocation,
    /// A memory tool's scope: the namespaces it may read and write, and
    /// whose preferences they are (the shell performs the call within it).
    pub memory_scope: Option<Box<crate::contracts::memory_use::MemoryToolScope>>,
}

/// Start a child run (its id and first decision are chosen by the engine).
#[derive(Debug, Clone, PartialEq)]
pub struct ChildRunStart {
    pub node_id: String,
    pub attempt: u32,
    pub turn: u32,
    pub call_id: String,
    pub claim_key: ClaimKey,
    /// The child's creation (state, `start`, its planning step); its run
    /// id is the same for every retry of the call.
    pub child: Box<Decision>,
    /// Creates the child at most once (the call's idempotency key).
    pub idempotency_key: String,
    /// The parent's frames decided before the start (a review's verdict),
    /// committed with the wait.
    pub frames_before: Vec<crate::wire::event::EventDraft>,
}

/// A reviewer's model call on a drafted plan, before running it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanReviewCall {
    pub claim_key: ClaimKey,
    pub request: crate::state::context::ModelRequest,
    pub draft: Value,
    pub then: ChildRunStart,
}

/// A delivery attempt the shell performs.
#[derive(Debug, Clone, PartialEq)]
pub struct NotificationDelivery {
    pub notification_id: String,
    pub attempt: u32,
    pub notification: RunNotification,
    /// POST it here (signed), when the envelope named a `callbackUrl`.
    pub callback_url: Option<String>,
    /// Put it on the event bus too.
    pub to_event_bus: bool,
}

/// The release the shell performs: `ended_run` no longer answers on
/// `thread_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneRelease {
    pub thread_id: String,
    pub ended_run: String,
    pub release: u32,
}

/// The summariser's call the shell makes before a chat session's first
/// turn, and (filled in by the shell) its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct HistorySummaryCall {
    pub request: ModelRequest,
    /// The last exchange the new summary covers, and how many it covers in
    /// all (the earlier summary's and those it adds).
    pub through_run_id: String,
    pub through_at_millis: u64,
    pub exchanges: usize,
    /// How many exchanges it adds to the earlier summary, and how many the
    /// request keeps.
    pub adds: usize,
    pub kept: usize,
    /// The longest summary kept, in characters.
    pub max_chars: usize,
    /// The summariser's answer, put here by the shell that called it.
    pub answer: Option<ModelOutcome>,
}

/// The summariser's answer schema.
pub(super) fn summary_schema() -> Value {
    json!({
        "type": "object",
        "required": ["summary"],
        "properties": {"summary": {"type": "string"}},
        "additionalProperties": false
    })
}

impl HistorySummaryCall {
    /// The summary the answer makes, when the summariser answered.
    pub fn summary(&self) -> Option<ThreadSummary> {
        let answer = self.answer.as_ref()?.as_ref().ok()?;
        let text = serde_json::from_str::<Value>(&answer.content)
            .ok()
            .and_then(|parsed| parsed["summary"].as_str().map(str::to_string))
            .unwrap_or_else(|| answer.content.clone());
        let text: String = text.trim().chars().take(self.max_chars).collect();
        (!text.is_empty()).then(|| ThreadSummary {
            text,
            through_run_id: self.through_run_id.clone(),
            through_at_millis: self.through_at_millis,
            exchanges: self.exchanges,
        })
    }

    /// The first turn's request: `base` with the new summary when the
    /// summariser answered, else with the thread's earlier one.
    pub fn turn_request(
        &self,
        base: &ModelRequest,
        carried: Option<&ThreadSummary>,
    ) -> ModelRequest {
        let mut request = base.clone();
        let made = self.summary();
        with_thread_summary(&mut request, made.as_ref().or(carried));
        request
    }
}

/// `request` with the thread's summary at the end of its system
/// instruction (nothing for none).
pub fn with_thread_summary(request: &mut ModelRequest, summary: Option<&ThreadSummary>) {
    if let Some(summary) = summary {
        request.system_instruction.push_str(&format!(
            "\n\nThe conversation before the messages below, summarised ({} earlier exchanges):\n{}",
            summary.exchanges, summary.text
        ));
    }
}
