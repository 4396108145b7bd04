//! A chat message's opening frames, as the chat specification names them:
//! `session` (who talks, on which thread, in which context),
//! `ontology_loaded` (the context type's guidance and the registry the
//! agent works over) and `last_turn_context` (what of the thread the
//! message is answered with). Written by the chat run's planning step,
//! before `plan_generated`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{FrameStamp, to_payload};
use crate::wire::event::{EventDraft, EventType};

/// `session`: the conversation this message belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionPayload {
    /// The session is the thread: every message of a thread shares it.
    pub session_id: String,
    pub thread_id: String,
    /// The user the submitting request named (`X-Baton-User`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_id: Option<String>,
    /// The specialist addressed, when not the orchestrator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// This message's place in the thread (1: the first).
    pub message_number: usize,
}

/// `ontology_loaded`: what the agent knows before it reads the message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OntologyLoadedPayload {
    /// The context type whose guidance joined the system prompt (absent:
    /// none named, or none the registry knows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<String>,
    pub required_behaviors: usize,
    /// The model profile the context asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The registry the agent's plans draw on.
    pub capabilities: usize,
    pub facets: usize,
    /// The tools the agent may call.
    pub tools: Vec<String>,
}

/// `last_turn_context`: the thread as the message is answered with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LastTurnContextPayload {
    /// Earlier exchanges given to the model in full.
    pub exchanges: usize,
    /// Whether older exchanges reach it as a summary.
    pub summarized: bool,
    /// The exchange just before this message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_answer: Option<String>,
    /// Drafted plans awaiting the person's approval.
    pub pending_drafts: usize,
}

pub fn session(stamp: &FrameStamp, payload: &SessionPayload) -> EventDraft {
    stamp.draft(EventType::Session).payload(to_payload(payload))
}

pub fn ontology_loaded(stamp: &FrameStamp, payload: &OntologyLoadedPayload) -> EventDraft {
    stamp
        .draft(EventType::OntologyLoaded)
        .payload(to_payload(payload))
}

pub fn last_turn_context(stamp: &FrameStamp, payload: &LastTurnContextPayload) -> EventDraft {
    stamp
        .draft(EventType::LastTurnContext)
        .payload(to_payload(payload))
}
