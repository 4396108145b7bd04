//! The frames of an agent session: its `agent_state`s, a model answer's
//! summary (usage and model), and the warning of a trimmed thread.

use crate::engine::agent::context_type;
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

/// `warning` `context_trimmed`: the thread's oldest exchanges were left out
/// of the request (`state::context_budget`).
pub(super) fn context_trimmed(
    stamp: &FrameStamp,
    node_id: &str,
    request: &crate::state::context::ModelRequest,
    trim: crate::state::context_budget::ContextTrim,
) -> EventDraft {
    frames::warning(
        stamp,
        Some(node_id),
        format!(
            "the thread's {} oldest exchanges were left out of the request to fit its model's context ({} of {} prompt tokens reckoned)",
            trim.dropped_exchanges, trim.estimated_tokens, trim.budget_tokens
        ),
        &frames::WarningPayload {
            model: request.model.as_ref().map(|target| target.name.clone()),
            context: Some(trim),
            ..frames::WarningPayload::of(crate::basics::codes::WarningCode::ContextTrimmed)
        },
    )
}
