//! The frames of an agent session: its `agent_state`s and a model answer's
//! summary (usage and model).

use serde_json::Value;

use crate::planning::plan::PlanNode;
use crate::records::conversation::SessionAnswer;
use crate::state::run::RunState;
use crate::wire::event::EventDraft;
use crate::wire::frames::{self, AgentActivity, FrameStamp};

pub(in crate::engine) fn agent_state_frame(
    stamp: &FrameStamp,
    state: &RunState,
    node_id: &str,
    activity: AgentActivity,
    turn: u32,
) -> EventDraft {
    frames::agent_state(
        stamp,
        node_id,
        &frames::AgentStatePayload {
            state: activity,
            turn,
            context_type: context_type(state),
            child_run_id: None,
            model: None,
        },
    )
}

/// `agent_state` `thinking`: a model turn begins, on the node's model.
pub(super) fn thinking_frame(
    stamp: &FrameStamp,
    state: &RunState,
    node: &PlanNode,
    turn: u32,
) -> EventDraft {
    frames::agent_state(
        stamp,
        &node.node_id,
        &frames::AgentStatePayload {
            state: AgentActivity::Thinking,
            turn,
            context_type: context_type(state),
            child_run_id: None,
            model: node.model.as_ref().map(|target| target.name.clone()),
        },
    )
}

/// What a model answer cost and which model gave it, as frames carry it.
pub(super) fn response_summary(answer: &SessionAnswer) -> frames::ModelResponseSummary {
    frames::ModelResponseSummary {
        model: answer.model.clone(),
        usage: frames::TokenTotals::of(&answer.usage),
    }
}

/// The context type a run's conversation is about (`metadata.contextType`).
/// The conversation's context type: the chat message's, else the
/// envelope's `metadata.contextType`.
pub(super) fn context_type(state: &RunState) -> Option<String> {
    let chat = state
        .chat
        .as_ref()
        .and_then(|turn| turn.context_type.clone());
    chat.or_else(|| {
        state
            .envelope
            .metadata
            .as_ref()
            .and_then(|metadata| metadata.get("contextType"))
            .and_then(Value::as_str)
            .map(str::to_string)
    })
}
