//! Frames of agent sessions: each tool call (`tool_call`) and its result
//! (`tool_result`), what the agent is doing (`agent_state`), and its final
//! text (`message`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{FrameStamp, to_payload};
use crate::wire::event::{EventDraft, EventType};

/// `tool_call`: the model asked for `toolName` with `args` in `turn`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolCallPayload {
    /// The first call of a turn: the model's answer that asked for the
    /// turn's calls (its usage and model; `provider:response` in hooks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ModelResponseSummary>,
    pub tool_name: String,
    /// The arguments as parsed, or the text the model wrote when it is not JSON.
    pub args: Value,
    pub call_id: String,
    pub turn: u32,
}

pub fn tool_call(stamp: &FrameStamp, node_id: &str, payload: &ToolCallPayload) -> EventDraft {
    stamp
        .draft(EventType::ToolCall)
        .node(node_id)
        .payload(to_payload(payload))
}

/// `tool_result`: a call's `result`, or the `error` the model is told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolResultPayload {
    pub tool_name: String,
    pub call_id: String,
    pub turn: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// From the model's request of the call to its result (absent for a
    /// call refused before it ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

pub fn tool_result(stamp: &FrameStamp, node_id: &str, payload: &ToolResultPayload) -> EventDraft {
    stamp
        .draft(EventType::ToolResult)
        .node(node_id)
        .payload(to_payload(payload))
}

/// What an agent is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AgentActivity {
    /// A model turn is on its way.
    Thinking,
    /// Tool calls are running.
    ExecutingTool,
    /// A child run is at work for the agent.
    ExecutingPlan,
    /// The agent waits for the person it talks with.
    WaitingOnUser,
}

/// `agent_state`: the agent's activity (and the conversation's context type).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentStatePayload {
    pub state: AgentActivity,
    /// The model turn this is about.
    pub turn: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_type: Option<String>,
    /// `executing_plan`: the child run at work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_run_id: Option<String>,
    /// `thinking`: the catalog model the turn goes to (absent: the
    /// deployment's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

pub fn agent_state(stamp: &FrameStamp, node_id: &str, payload: &AgentStatePayload) -> EventDraft {
    stamp
        .draft(EventType::AgentState)
        .node(node_id)
        .payload(to_payload(payload))
}

/// `message`: an agent's final text (`message`), after `turns` model turns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MessagePayload {
    pub role: String,
    pub turns: u32,
    /// The model's last answer, the one said here (its usage and model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ModelResponseSummary>,
}

/// One model answer of an agent's session: what it cost and which model
/// gave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelResponseSummary {
    pub model: String,
    pub usage: super::metrics_frames::TokenTotals,
}

pub fn message(
    stamp: &FrameStamp,
    node_id: &str,
    text: String,
    payload: &MessagePayload,
) -> EventDraft {
    stamp
        .draft(EventType::Message)
        .node(node_id)
        .message(text)
        .payload(to_payload(payload))
}

/// `plan_ready_for_review`: an agent drafted a plan (`draft_only`); nothing
/// runs until a person approves it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanReadyForReviewPayload {
    pub draft_id: String,
    pub objective: String,
    /// `{nodes[{nodeId, capabilityId, label, consumes, produces}], goalFacets}`.
    pub plan: Value,
    pub reasoning: String,
}

pub fn plan_ready_for_review(
    stamp: &FrameStamp,
    node_id: &str,
    payload: &PlanReadyForReviewPayload,
) -> EventDraft {
    stamp
        .draft(EventType::PlanReadyForReview)
        .node(node_id)
        .payload(to_payload(payload))
}

/// `plan_review`: a reviewer's verdict on a drafted plan (`agent_review`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanReviewPayload {
    /// `approved` (it runs), `rejected` or `needs_changes` (it does not).
    pub verdict: String,
    pub notes: String,
    pub plan: Value,
}

pub fn plan_review(stamp: &FrameStamp, node_id: &str, payload: &PlanReviewPayload) -> EventDraft {
    stamp
        .draft(EventType::PlanReview)
        .node(node_id)
        .payload(to_payload(payload))
}

/// `warning` `context_trimmed`: the `dropped` oldest `what` (exchanges of a
/// chat thread, tool rounds of an agent session) were left out of a request
/// to `model` to fit its context window (`state::context_budget`).
pub fn context_trimmed(
    stamp: &FrameStamp,
    node_id: &str,
    model: Option<String>,
    trim: ContextTrim,
    what: &str,
) -> EventDraft {
    super::warning(
        stamp,
        Some(node_id),
        format!(
            "the {} oldest {what} were left out of the request to fit its model's context ({} of {} prompt tokens reckoned)",
            trim.dropped_exchanges, trim.estimated_tokens, trim.budget_tokens
        ),
        &super::WarningPayload {
            model,
            context: Some(trim),
            ..super::WarningPayload::of(crate::basics::codes::WarningCode::ContextTrimmed)
        },
    )
}

/// What trimming did, as the `warning` frame says it. The exchanges are a
/// thread's messages and answers, or an agent session's tool rounds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextTrim {
    /// Earlier exchanges left out (oldest first).
    pub dropped_exchanges: usize,
    /// Earlier exchanges kept.
    pub kept_exchanges: usize,
    /// Tokens reckoned for the request as sent.
    pub estimated_tokens: u64,
    /// The prompt tokens the model takes (`prompt_budget`).
    pub budget_tokens: u64,
}
