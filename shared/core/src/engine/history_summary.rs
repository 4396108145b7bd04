//! Summarised threads (`chat.json` `summarizeDroppedHistory`): what a chat
//! turn leaves out of its request (exchanges past `historyLimit`, or over
//! the model's context window) is summarised by a model call instead of
//! dropped, and the summary rides in the system instruction.
//!
//! The summary is folded forward: a run reads the thread's summary (its
//! latest exchange's) and every exchange it does not cover; what the run's
//! first turn leaves out of those is summarised together with the earlier
//! summary, once, by the shell just before that turn (the same claimed
//! step: no second lease, no extra step), and the new summary is kept in
//! the run's chat turn, so later turns and the thread's next message carry
//! it. The summariser failing leaves the exchanges out unsummarised (the
//! earlier summary stays), said in the `context_trimmed` warning.
//!
//! Every request of a summarising thread reserves
//! `historySummaryMaxTokens` for the summary, so the first turn (which does
//! not know the summary yet) and the later ones (which do) keep the same
//! exchanges; a longer answer is cut to that length.

use std::sync::Arc;

use super::decision::EngineContext;
use super::effects::summary_schema;
pub use super::effects::{HistorySummaryCall, with_thread_summary};
use super::step_context::StepContext;
use crate::records::chat::ChatTurn;
use crate::state::context::ModelRequest;
use crate::state::context_budget::{
    CHARS_PER_TOKEN, ContextTrim, estimated_tokens, fit_history, prompt_budget,
};
use crate::wire::frames;

/// What a chat turn's request keeps of its thread.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryFit {
    /// `history[first_kept..]` is sent.
    pub first_kept: usize,
    /// `history[first_uncovered..first_kept]` is left out and not covered
    /// by the thread's summary.
    pub first_uncovered: usize,
    /// What the context window left out of the `historyLimit` newest.
    pub trim: Option<ContextTrim>,
}

impl HistoryFit {
    /// The exchanges left out that no summary covers yet.
    pub fn uncovered(&self) -> usize {
        self.first_kept.saturating_sub(self.first_uncovered)
    }
}

/// Whether the registry's chat settings summarise threads, and the
/// summary's reservation in tokens (0 when they do not).
pub(super) fn summary_reservation(engine: &EngineContext<'_>) -> u64 {
    engine
        .registry
        .chat_settings()
        .filter(|settings| settings.summarize_dropped_history)
        .map_or(0, |settings| settings.history_summary_max_tokens)
}

/// The summariser's call for what `fit` leaves out uncovered, when the
/// thread is summarised and something is.
pub(super) fn summary_call(
    turn: &ChatTurn,
    fit: &HistoryFit,
    chat_request: &ModelRequest,
    engine: &EngineContext<'_>,
) -> Option<HistorySummaryCall> {
    let settings = engine
        .registry
        .chat_settings()
        .filter(|settings| settings.summarize_dropped_history)?;
    let left_out = turn.history.get(fit.first_uncovered..fit.first_kept)?;
    let last = left_out.last()?;
    let mut transcript = String::new();
    if let Some(earlier) = &turn.summary {
        transcript.push_str(&format!("Summary so far:\n{}\n\nThen:\n", earlier.text));
    }
    // The summariser's own request fits its model's window too: the
    // oldest of what is left out go first (said in the transcript).
    let fixed = estimated_tokens(&settings.history_summary_instructions)
        + estimated_tokens(&transcript)
        + settings.history_summary_max_tokens;
    let model = chat_request
        .model
        .as_ref()
        .map(|target| target.name.as_str());
    let (first_sent, _) = fit_history(
        left_out,
        fixed,
        prompt_budget(engine.registry.models(), model),
    );
    if first_sent > 0 {
        transcript.push_str(&format!(
            "({first_sent} older exchanges did not fit and are not shown.)\n\n"
        ));
    }
    for exchange in &left_out[first_sent..] {
        transcript.push_str(&format!(
            "Person: {}\nAssistant: {}\n\n",
            exchange.user, exchange.assistant
        ));
    }
    let max_chars = usize::try_from(settings.history_summary_max_tokens * CHARS_PER_TOKEN)
        .unwrap_or(usize::MAX);
    Some(HistorySummaryCall {
        request: ModelRequest {
            system_instruction: settings.history_summary_instructions.clone(),
            user_message: transcript,
            schema_name: "history_summary".into(),
            output_schema: Arc::new(summary_schema()),
            model: chat_request.model.clone(),
        },
        through_run_id: last.run_id.clone(),
        through_at_millis: last.at_millis,
        exchanges: turn.summary.as_ref().map_or(0, |earlier| earlier.exchanges) + left_out.len(),
        adds: left_out.len(),
        kept: turn.history.len().saturating_sub(fit.first_kept),
        max_chars,
        answer: None,
    })
}

/// After a chat session's first turn: the summariser's usage on the node,
/// the new summary kept in the run's chat turn, and a `context_trimmed`
/// warning saying what was summarised (or left out when it failed).
pub(super) fn record_summary(
    step: &mut StepContext<'_, '_>,
    node_id: &str,
    call: &HistorySummaryCall,
) {
    if let Some(Ok(answer)) = &call.answer {
        super::usage_recording::record_model_usage(
            step,
            node_id,
            &answer.model,
            &answer.usage,
            crate::state::run::UsageOperation::Summary,
        );
    }
    let made = call.summary();
    let trim = ContextTrim {
        dropped_exchanges: call.adds,
        kept_exchanges: call.kept,
        estimated_tokens: 0,
        budget_tokens: crate::state::context_budget::prompt_budget(
            step.engine().registry.models(),
            call.request
                .model
                .as_ref()
                .map(|target| target.name.as_str()),
        ),
    };
    let what = match (&made, &call.answer) {
        (Some(_), _) => format!(
            "exchanges of the thread, summarised (the summary covers {} in all)",
            call.exchanges
        ),
        (None, Some(Err(failure))) => format!(
            "exchanges of the thread, unsummarised: the summariser failed ({})",
            failure.message
        ),
        (None, _) => "exchanges of the thread, unsummarised: the summary was empty".to_string(),
    };
    let warning = frames::context_trimmed(
        &step.stamp(),
        node_id,
        call.request
            .model
            .as_ref()
            .map(|target| target.name.clone()),
        trim,
        &what,
    );
    step.emit(warning);
    if let (Some(summary), Some(turn)) = (made, step.state_mut().chat.as_mut()) {
        turn.summary = Some(summary);
    }
}
