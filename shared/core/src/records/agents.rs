//! Agent sessions: a node whose capability names tools runs a loop of model
//! turns and tool executions, each one durable step. What the loop needs
//! between steps lives here: the limits a planned node carries from its
//! capability, and the session kept in the run state (the conversation's
//! tools and turn count, the tool calls of the last turn still to run; the
//! turns themselves are run entries, `crate::records::entries`).
//!
//! Turn numbers count a node's model turns across its attempts, so a tool
//! call's idempotency key (`runId:nodeId:turn:callId`) names one call for
//! the run's whole life.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::contracts::capability::CapabilityRegistration;
use crate::records::conversation::OfferedTool;

/// Model turns a session may take unless its capability says otherwise.
pub const DEFAULT_MAX_ITERATIONS: u32 = 10;

/// Tool calls one turn may ask for unless its capability says otherwise.
pub const DEFAULT_MAX_TOOL_CALLS_PER_TURN: u32 = 8;

/// How long a session may last, across its steps, unless configured
/// otherwise (`BATON_SESSION_MAX_SECONDS`).
pub const DEFAULT_SESSION_LIMIT: std::time::Duration = std::time::Duration::from_secs(90);

/// What a planned agent node carries from its capability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentLoopSettings {
    /// The tools offered, by registry name.
    pub tools: Vec<String>,
    pub max_iterations: u32,
    pub max_tool_calls_per_turn: u32,
    /// One turn's calls run as parallel steps (else one after another).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parallel_tools: bool,
}

impl AgentLoopSettings {
    /// The loop of `capability`; none when it names no tools.
    pub fn of(capability: &CapabilityRegistration) -> Option<Self> {
        if capability.tools.is_empty() {
            return None;
        }
        Some(AgentLoopSettings {
            tools: capability.tools.clone(),
            max_iterations: capability
                .max_iterations
                .unwrap_or(DEFAULT_MAX_ITERATIONS)
                .max(1),
            max_tool_calls_per_turn: capability
                .max_tool_calls_per_turn
                .unwrap_or(DEFAULT_MAX_TOOL_CALLS_PER_TURN)
                .max(1),
            parallel_tools: capability.parallel_tools,
        })
    }
}

/// A tool call of the last turn that was valid and waits for its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingToolCall {
    pub call_id: String,
    pub tool_name: String,
    pub arguments: Value,
    /// Its step is in the outbox (sequential tools are sent one by one).
    #[serde(default)]
    pub dispatched: bool,
    /// The child run it started, while the session waits for it to end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_run_id: Option<String>,
    /// When the model asked for it (Unix ms; 0 in a state written before
    /// it was kept): its `tool_result` says how long it took.
    #[serde(default)]
    pub requested_at_millis: u64,
}

/// One node attempt's session, kept in the run state between its steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSession {
    pub attempt: u32,
    /// The node's turn number of this session's first model turn.
    pub first_turn: u32,
    /// Model turns answered in this session.
    pub turns_taken: u32,
    /// When the session began (Unix ms): the watchdog measures from here.
    pub started_at_millis: u64,
    /// The tools offered, and how many turns after the first user message
    /// are stored beside the run (`crate::records::entries`).
    pub conversation: ConversationHead,
    /// Calls of the last turn still without a result, in the model's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<PendingToolCall>,
}

/// What the run state keeps of a session's conversation: its fixed part
/// and a count. The turns themselves are run entries
/// (`EntryKey::ConversationTurn`, sequence `0..recorded_turns`), written by
/// the commits that took them and loaded by the step of the next turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationHead {
    pub tools: Vec<OfferedTool>,
    /// The answer is free text (chat), not JSON under the request's schema.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub free_text: bool,
    /// Turns stored as entries.
    #[serde(default)]
    pub recorded_turns: u32,
}

impl AgentSession {
    /// The number of the next model turn.
    pub fn next_turn(&self) -> u32 {
        self.first_turn + self.turns_taken
    }

    /// The turn whose tool calls are pending.
    pub fn calls_turn(&self) -> u32 {
        self.next_turn().saturating_sub(1)
    }

    /// Whether the session waits for model turn `turn`.
    pub fn awaits_turn(&self, attempt: u32, turn: u32) -> bool {
        self.attempt == attempt && self.pending.is_empty() && self.next_turn() == turn
    }

    /// Whether the session waits for `call_id` of `turn` to run (not for
    /// a child run it started).
    pub fn awaits_call(&self, attempt: u32, turn: u32, call_id: &str) -> bool {
        self.pending_call(attempt, turn, call_id)
            .is_some_and(|call| call.child_run_id.is_none())
    }

    /// Whether the session waits for the child run `call_id` started.
    pub fn awaits_child(&self, attempt: u32, turn: u32, call_id: &str) -> bool {
        self.pending_call(attempt, turn, call_id)
            .is_some_and(|call| call.child_run_id.is_some())
    }

    fn pending_call(&self, attempt: u32, turn: u32, call_id: &str) -> Option<&PendingToolCall> {
        if self.attempt != attempt || self.calls_turn() != turn {
            return None;
        }
        self.pending
            .iter()
            .find(|call| call.call_id == call_id && call.dispatched)
    }
}

/// The key a tool call carries to its executor (`Idempotency-Key` for HTTP
/// tools): the same for every retry of the call, never for another call.
pub fn tool_idempotency_key(run_id: &str, node_id: &str, turn: u32, call_id: &str) -> String {
    format!("{run_id}:{node_id}:{turn}:{call_id}")
}

/// The timer id of a session's watchdog.
pub fn watchdog_timer_id(node_id: &str, attempt: u32) -> String {
    format!("agent:{node_id}:{attempt}")
}

/// What a child run remembers of the tool call that started it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentLink {
    pub run_id: String,
    pub node_id: String,
    pub attempt: u32,
    pub turn: u32,
    pub call_id: String,
}

/// The id of the child run a tool call starts: the same for every retry of
/// the call, so a retried step finds the child it already created.
pub fn child_run_id(parent_run_id: &str, node_id: &str, turn: u32, call_id: &str) -> String {
    let call: String = call_id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("{parent_run_id}.{node_id}.{turn}.{call}")
}
