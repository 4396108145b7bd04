//! A chat message's opening frames (`session`, `ontology_loaded`,
//! `last_turn_context`), written by its planning step before the plan: who
//! talks on which thread, what the agent knows, and what of the thread the
//! message is answered with.

use crate::planning::plan::PlanGraph;
use crate::records::chat::ChatTurn;
use crate::wire::frames;

use super::step_context::StepContext;

/// The most of an earlier message or answer a frame quotes.
const QUOTED_CHARACTERS: usize = 280;

fn quoted(text: &str) -> String {
    let mut characters = text.chars();
    let mut kept: String = characters.by_ref().take(QUOTED_CHARACTERS).collect();
    if characters.next().is_some() {
        kept.push('…');
    }
    kept
}

/// Emits the three frames for `turn`, planned as `plan`.
pub(super) fn emit_opening(step: &mut StepContext<'_, '_>, turn: &ChatTurn, plan: &PlanGraph) {
    let registry = step.engine().registry;
    let guidance = turn
        .context_type
        .as_deref()
        .and_then(|context_type| registry.context_guidance(context_type));
    let tools = plan
        .nodes
        .first()
        .and_then(|node| node.agent())
        .map(|settings| settings.tools.clone())
        .unwrap_or_default();
    let ontology = frames::OntologyLoadedPayload {
        context_type: guidance.map(|guidance| guidance.name.clone()),
        intent: guidance.map(|guidance| guidance.intent.clone()),
        required_behaviors: guidance.map_or(0, |guidance| guidance.required_behaviors.len()),
        profile: guidance.and_then(|guidance| guidance.profile.clone()),
        capabilities: registry.capabilities().count(),
        facets: registry.facets.len(),
        tools,
    };
    let previous = turn.history.last();
    let last_turn = frames::LastTurnContextPayload {
        exchanges: turn.history.len(),
        summarized: turn.summary.is_some(),
        previous_run_id: previous.map(|exchange| exchange.run_id.clone()),
        previous_message: previous.map(|exchange| quoted(&exchange.user)),
        previous_answer: previous.map(|exchange| quoted(&exchange.assistant)),
        pending_drafts: turn.pending_drafts.len(),
    };
    let session = frames::SessionPayload {
        session_id: turn.thread_id.clone(),
        thread_id: turn.thread_id.clone(),
        user_id: step.state().submitted_by.clone(),
        context_type: turn.context_type.clone(),
        entity_id: turn.entity_id.clone(),
        agent: turn.agent.clone(),
        // Exchanges a summary covers are not in `history`: counted by the
        // summary's own count when there is one.
        message_number: turn.summary.as_ref().map_or(0, |summary| summary.exchanges)
            + turn.history.len()
            + 1,
    };
    let drafts = {
        let stamp = step.stamp();
        [
            frames::session(&stamp, &session),
            frames::ontology_loaded(&stamp, &ontology),
            frames::last_turn_context(&stamp, &last_turn),
        ]
    };
    for draft in drafts {
        step.emit(draft);
    }
}
