//! Chat runs: planning is the one-node plan of `chat_plan::chat_plan` (no
//! planner, no validation against the registry's facets: the node's
//! contract is `{message, threadId}`); a blank message is answered with
//! the registry's clarifying question at once, without a model call. A
//! chat run that completes hands its exchange to the shell, which records
//! it in the thread before committing.

use std::sync::Arc;

use serde_json::json;

use crate::basics::codes::FailureCode;
use crate::basics::error::CoreError;
use crate::contracts::diagnostics::DiagnosticsBundle;
use crate::planning::chat_plan::chat_plan;
use crate::planning::plan::PlanNode;
use crate::records::chat::ChatExchange;
use crate::records::conversation::{SessionTurn, ToolSession};
use crate::state::context::{build_context_bundle, build_model_request};
use crate::state::delivered_quality::{QualityReport, QualitySource};
use crate::state::run::{NodeRecord, RunState, RunStatus};
use crate::wire::frames;

use super::decision::{Decision, EngineContext, NewRunIdentity};
use super::lifecycle::RunTransition;
use super::step_context::StepContext;
use crate::basics::instant::Instant;
use crate::records::chat::ChatTurn;
use crate::state::run::{StepCommand, StepMessage};

/// A chat run admitted behind `ahead` on its thread
/// (`multitaskStrategy: enqueue`): created `queued` with nothing to do yet
/// (no planning step in its outbox) and a `log` frame saying what it waits
/// for. [`start_queued_chat_run`] starts it when the run ahead has ended.
pub fn queue_chat_run(
    identity: NewRunIdentity,
    turn: ChatTurn,
    now: Instant,
    ahead: &str,
) -> Result<Decision, CoreError> {
    let thread_id = turn.thread_id.clone();
    let mut decision = super::starts::start_chat_run(
        identity,
        ChatTurn {
            waiting_on_thread: true,
            ..turn
        },
        now,
    )?;
    decision.outbox.clear();
    decision.events.push(frames::log(
        &frames::FrameStamp::new(now, 0),
        format!("queued on thread {thread_id} behind run {ahead}: it starts when that run ends"),
    ));
    Ok(decision)
}

/// Starts a chat run that waited on its thread, with the thread's history
/// as it is now (the runs ahead of it answered meanwhile). `None` when the
/// run is no longer waiting (started already, or cancelled).
pub fn start_queued_chat_run(
    mut state: RunState,
    history: Vec<ChatExchange>,
    summary: Option<crate::records::chat::ThreadSummary>,
    now: Instant,
) -> Option<Decision> {
    if state.status() != RunStatus::Queued || state.plan.is_some() {
        return None;
    }
    let chat = state.chat.as_mut().filter(|chat| chat.waiting_on_thread)?;
    chat.waiting_on_thread = false;
    chat.pending_drafts = history
        .last()
        .map(|exchange| exchange.drafts.clone())
        .unwrap_or_default();
    chat.history = history;
    chat.summary = summary;
    state.updated_at = now;
    let plan = StepMessage::new(&state.tenant_id, &state.run_id, StepCommand::Plan);
    Some(Decision {
        events: vec![frames::log(
            &frames::FrameStamp::new(now, 0),
            "the run ahead of it on the thread has ended: starting",
        )],
        outbox: vec![plan],
        state,
        transcripts: Vec::new(),
        exchanges: Vec::new(),
        entries: Vec::new(),
    })
}

/// The planning step of a chat run.
pub(super) fn plan_chat(step: &mut StepContext<'_, '_>) -> Result<(), CoreError> {
    let Some(turn) = step.state().chat.clone() else {
        return Ok(());
    };
    if turn.is_blank() {
        let question = step
            .engine()
            .registry
            .chat_settings()
            .map(|settings| settings.clarifying_question.clone())
            .unwrap_or_default();
        return deliver_without_a_model(step, question);
    }
    let plan = match chat_plan(&turn, step.engine().registry) {
        Ok(plan) => plan,
        Err(reason) => {
            step.fail_run(
                FailureCode::PlanRejected,
                &format!("plan rejected: {reason}"),
            );
            return Ok(());
        }
    };
    super::chat_opening::emit_opening(step, &turn, &plan);
    let bundle = DiagnosticsBundle::satisfied();
    let generated = frames::plan_generated(
        &frames::FrameStamp::new(step.now(), plan.plan_version),
        &super::plan_drafts::plan_generated_payload(&plan, &bundle),
    );
    step.state_mut().nodes = plan
        .nodes
        .iter()
        .map(|node| (node.node_id.clone(), Arc::new(NodeRecord::pending())))
        .collect();
    step.state_mut().plan = Some(Arc::new(plan));
    let generated = super::frame_provenance::with_provenance(step.state(), generated, None);
    step.emit(generated);
    step.state_mut().plan_diagnostics = Some(Arc::new(bundle));
    step.record_plan_version("initial", None, None, None);
    step.move_run(RunTransition::Work)?;
    super::progress::schedule_ready_nodes(step);
    Ok(())
}

/// Answers the run with `message` itself (a blank message's question).
fn deliver_without_a_model(
    step: &mut StepContext<'_, '_>,
    message: String,
) -> Result<(), CoreError> {
    let thread_id = step.state().thread_id.clone();
    let output = json!({"message": message, "threadId": thread_id});
    super::narration::emit_run_metrics(step);
    // Queued: it goes to work and completes in the one step.
    step.move_run(RunTransition::Work)?;
    step.move_run(RunTransition::Complete)?;
    step.state_mut().output = Some(output.clone());
    let quality = chat_quality(step);
    let complete = frames::complete(
        &step.stamp(),
        &frames::CompletePayload {
            output,
            status: RunStatus::Completed,
            satisfaction_score: None,
            observed_satisfaction: 1.0,
            duration_ms: Some(super::finish::run_duration_millis(step)),
            quality: Some(quality),
            acceptance_report: None,
        },
    );
    step.emit(complete);
    super::finish::record_exchange(step);
    Ok(())
}

/// A chat turn's quality: its answer is free text, held to no constraint.
fn chat_quality(step: &mut StepContext<'_, '_>) -> QualityReport {
    let quality = QualityReport {
        score: 1.0,
        source: QualitySource::Constraints,
        threshold: None,
        passed: true,
        drafts: 0,
        execution_depth: 1,
        draft_scores: Vec::new(),
    };
    step.state_mut().quality = Some(Box::new(quality.clone()));
    quality
}

/// How much of the thread a chat node's request keeps
/// (`state::context_budget`; `history_summary` for summarised threads): of
/// the exchanges no summary covers, the `historyLimit` newest that fit.
/// Reckoned from what every turn's request carries (the system
/// instruction, the answer's schema, the new message, the summary's
/// reservation), so every turn of the session keeps the same exchanges.
pub(super) fn chat_history_fit(
    turn: &crate::records::chat::ChatTurn,
    request: &crate::state::context::ModelRequest,
    engine: &EngineContext<'_>,
) -> super::history_summary::HistoryFit {
    use crate::state::context_budget::{estimated_tokens, fit_history, prompt_budget};
    let history = &turn.history;
    let limit = engine
        .registry
        .chat_settings()
        .map_or(history.len(), |settings| settings.history_limit);
    let first_uncovered = turn.summary.as_ref().map_or(0, |summary| {
        history
            .iter()
            .position(|exchange| !summary.covers(exchange))
            .unwrap_or(history.len())
    });
    let window = first_uncovered.max(history.len().saturating_sub(limit));
    let fixed = estimated_tokens(&request.system_instruction)
        + estimated_tokens(&request.output_schema.to_string())
        + estimated_tokens(&turn.message)
        + super::history_summary::summary_reservation(engine);
    let model = request.model.as_ref().map(|target| target.name.as_str());
    let (kept_from, trim) = fit_history(
        &history[window..],
        fixed,
        prompt_budget(engine.registry.models(), model),
    );
    super::history_summary::HistoryFit {
        first_kept: window + kept_from,
        first_uncovered,
        trim,
    }
}

/// A chat node's conversation: the thread's exchanges from `first_kept`
/// on, then the new message. Returns the first user message (the rest
/// become turns).
pub(super) fn seed_chat(
    conversation: &mut ToolSession,
    turn: &crate::records::chat::ChatTurn,
    first_kept: usize,
) -> String {
    let kept = turn.history.get(first_kept..).unwrap_or_default();
    let mut messages = Vec::with_capacity(kept.len() * 2 + 1);
    // A blank message and its clarifying question tell the model nothing.
    for exchange in kept
        .iter()
        .filter(|exchange| !exchange.user.trim().is_empty())
    {
        messages.push(SessionTurn::User {
            content: exchange.user.clone(),
        });
        messages.push(SessionTurn::Assistant {
            content: exchange.assistant.clone(),
            tool_calls: Vec::new(),
        });
    }
    messages.push(SessionTurn::User {
        content: turn.message.clone(),
    });
    let mut messages = messages.into_iter();
    let first = match messages.next() {
        Some(SessionTurn::User { content }) => content,
        _ => turn.message.clone(),
    };
    conversation.turns = messages.collect();
    first
}

/// The request of a session's later turns: the same first messages.
pub(super) fn session_request(
    state: &RunState,
    node: &PlanNode,
    engine: &EngineContext<'_>,
) -> crate::state::context::ModelRequest {
    let bundle = build_context_bundle(state, node, engine.registry);
    let mut request = build_model_request(node, &bundle);
    if node.is_chat()
        && let Some(turn) = &state.chat
    {
        let mut scratch = ToolSession::default();
        let fit = chat_history_fit(turn, &request, engine);
        request.user_message = seed_chat(&mut scratch, turn, fit.first_kept);
        super::history_summary::with_thread_summary(&mut request, turn.summary.as_ref());
    }
    request
}
