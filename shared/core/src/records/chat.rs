//! Chat mode: one message of a conversation thread is a run whose plan is
//! one agent node. The orchestrator's own chat agent is registry data
//! (`registry/chat.json`: its instructions, tools and limits, the question a
//! blank message gets, how many earlier exchanges a turn sees); a caller
//! may instead talk to a registered specialist (`agent`), whose own
//! instructions are then the whole system prompt. The thread's earlier
//! exchanges travel in the run (`ChatTurn.history`) and are replayed before
//! the new message; the answer is free text, delivered as
//! `{message, threadId}`.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::contracts::envelope::TaskEnvelope;

/// The capability id a plan records for the orchestrator's own chat agent.
pub const ORCHESTRATOR_CHAT_AGENT: &str = "baton.chat";

/// The orchestrator's chat agent and chat defaults (`registry/chat.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChatSettings {
    /// The orchestrator agent's system prompt.
    pub instructions: String,
    /// The agent keeps what a signed-in person prefers across their
    /// threads: its `memory_search` and `memory_put` tools read and write
    /// the namespace `["people", <user>, "preferences"]` (offered only
    /// when the message names its person).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub remember_preferences: bool,
    /// The tools it may call (registry names).
    #[serde(default)]
    pub tools: Vec<String>,
    /// The catalog model the orchestrator agent answers with (it must call
    /// tools); the deployment's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The catalog model a context type's `profile` (`speed`, `balanced`,
    /// `quality`) picks for the orchestrator agent, before `model`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub profile_models: std::collections::BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls_per_turn: Option<u32>,
    #[serde(default)]
    pub parallel_tools: bool,
    /// What a blank message is answered with (no model call).
    pub clarifying_question: String,
    /// Earlier exchanges a turn sees (the most recent ones).
    #[serde(default = "default_history_limit")]
    pub history_limit: usize,
    /// The reviewer's system prompt for `agent_create_plan`'s
    /// `agent_review` mode.
    #[serde(default = "default_plan_review_instructions")]
    pub plan_review_instructions: String,
    /// The profile whose model (`profileModels`) reviews plans in
    /// `agent_review` mode; unmapped or absent: the deployment's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_review_profile: Option<String>,
    /// Exchanges a turn leaves out (past `historyLimit`, or over the
    /// model's context window) are summarised by a model call instead of
    /// dropped; the summary travels with the thread, folded forward.
    #[serde(default)]
    pub summarize_dropped_history: bool,
    /// The summariser's system prompt.
    #[serde(default = "default_history_summary_instructions")]
    pub history_summary_instructions: String,
    /// The longest summary kept (tokens, reckoned as the context budget
    /// reckons them); reserved in every request of a summarising thread.
    #[serde(default = "default_history_summary_max_tokens")]
    pub history_summary_max_tokens: u64,
}

fn default_history_summary_instructions() -> String {
    "You summarise the earlier part of a conversation between a person and an assistant, so the assistant can go on without it. Keep what was asked, decided, produced and still open, with names, numbers and identifiers exactly as given; leave out pleasantries. Write plain prose, at most a few short paragraphs.".into()
}

fn default_history_summary_max_tokens() -> u64 {
    800
}

/// What a thread said before the exchanges a request keeps, summarised:
/// every exchange up to and including `through_run_id` (answered at
/// `through_at_millis`), `exchanges` of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadSummary {
    pub text: String,
    pub through_run_id: String,
    pub through_at_millis: u64,
    pub exchanges: usize,
}

impl ThreadSummary {
    /// Whether `exchange` is one the summary covers.
    pub fn covers(&self, exchange: &ChatExchange) -> bool {
        (exchange.at_millis, exchange.run_id.as_str())
            <= (self.through_at_millis, self.through_run_id.as_str())
    }
}

fn default_plan_review_instructions() -> String {
    "You review an execution plan before it runs. Approve it when its steps can produce what the objective asks for; otherwise reject it or say what must change, in one or two sentences.".into()
}

fn default_history_limit() -> usize {
    20
}

/// One earlier exchange of a thread: what the person said and the answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatExchange {
    /// The run that answered (exchanges are recorded once per run).
    pub run_id: String,
    /// When it was answered (Unix ms): a thread is ordered by it.
    pub at_millis: u64,
    pub user: String,
    pub assistant: String,
    /// The specialist that answered, when not the orchestrator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Plans drafted for approval and not run yet, after this exchange.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drafts: Vec<PlanDraft>,
    /// A newer message on the thread cut this answer short
    /// (`multitaskStrategy: interrupt`): `assistant` is what it had said.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// The summary of the thread before the exchanges this answer's
    /// request kept (`summarizeDroppedHistory`), for the next message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<ThreadSummary>,
}

/// A chat run's message and what it needs of its thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatTurn {
    pub thread_id: String,
    pub message: String,
    /// The signed-in person who sent it (the caller's `sub`), when known:
    /// whose preferences the agent may remember.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The specialist to talk to (a registered capability), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_type: Option<String>,
    /// The thread's most recent exchanges, oldest first (when the thread
    /// is summarised: every exchange its summary does not cover).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<ChatExchange>,
    /// The thread's summary so far (`summarizeDroppedHistory`): the one
    /// its latest exchange carried, then the one this run made, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<ThreadSummary>,
    /// Drafted plans awaiting the person's approval (an `auto_execute`
    /// call with the same objective runs one and takes it off the list).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_drafts: Vec<PlanDraft>,
    /// Plans drafted during this message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub new_drafts: Vec<PlanDraft>,
    /// Facet values the person gave with the message: the chat run's
    /// envelope inputs, which the plans its agent creates consume.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub inputs: serde_json::Map<String, Value>,
    /// The entity the conversation is about (the envelope's
    /// `metadata.entityId`, passed on to the plans its agent creates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_id: Option<String>,
    /// Queued behind another run on its thread and not started yet
    /// (`engine::queue_chat_run`); starting it clears this, once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub waiting_on_thread: bool,
    /// How many times the run settled and asked for its thread's lane to
    /// be released (`StepCommand::ReleaseThreadLane`), and how many of
    /// those releases were performed.
    #[serde(default, skip_serializing_if = "LaneReleases::is_none")]
    pub lane_releases: LaneReleases,
}

/// A chat run's releases of its thread's lane: asked for (in the settling
/// commit's outbox) and performed (the release step's commit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LaneReleases {
    pub asked: u32,
    pub performed: u32,
}

impl LaneReleases {
    pub fn is_none(&self) -> bool {
        self.asked == 0 && self.performed == 0
    }
}

impl ChatTurn {
    /// Whether there is nothing to answer but a question back.
    pub fn is_blank(&self) -> bool {
        self.message.trim().is_empty()
    }
}

/// The output every chat run delivers.
pub fn chat_output_schema() -> Value {
    json!({
        "type": "object",
        "required": ["message", "threadId"],
        "properties": {"message": {"type": "string"}, "threadId": {"type": "string"}},
        "additionalProperties": false
    })
}

/// The envelope of a chat run (its objective is the message).
pub fn chat_envelope(turn: &ChatTurn) -> Result<TaskEnvelope, crate::basics::error::CoreError> {
    let objective = if turn.is_blank() {
        "(a blank chat message)".to_string()
    } else {
        turn.message.clone()
    };
    let mut envelope = json!({
        "objective": objective,
        "outputContract": {"schema": chat_output_schema()},
        "threadId": turn.thread_id,
        "inputs": turn.inputs,
    });
    if let Some(entity_id) = &turn.entity_id {
        envelope["metadata"] = json!({"entityId": entity_id});
    }
    TaskEnvelope::parse_value(&envelope)
}

/// A plan kept for approval (`draft_only`): what running it needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanDraft {
    pub draft_id: String,
    pub objective: String,
    /// The envelope the draft was planned from (it is planned again, the
    /// same way, when approved).
    pub envelope: Value,
}
