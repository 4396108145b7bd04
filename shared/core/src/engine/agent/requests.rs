//! What an agent session's steps ask the shell to perform: a model turn
//! (with the conversation to load) or a tool call.

use crate::basics::claims::ClaimKey;
use crate::basics::error::CoreError;
use crate::records::agents::AgentSession;
use crate::records::conversation::{ToolInvocation, ToolSession};
use crate::records::entries::{EntryBody, RunEntry, conversation_prefix};
use crate::wire::event::EventDraft;

/// One model turn of a session.
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
    pub history_summary: Option<Box<crate::engine::history_summary::HistorySummaryCall>>,
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
}
