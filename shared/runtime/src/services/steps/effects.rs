//! Performing an effect: a model call (its text streamed as `delta`
//! frames when the engine asks), a judge's call, a planner draft, an agent
//! session's model turn, or a tool call. Provider and tool failures become
//! outcomes the engine judges; only the store failing is an error of the
//! step.

use baton_core::basics::codes::WarningCode;
use baton_core::basics::ids::RunKey;
use baton_core::engine::{
    DeliveryFailure, Effect, ModelFailure, ModelOutcome, Performed, TurnOutcome,
};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunState, StepCommand, StepMessage};
use baton_core::wire::event::EventDraft;
use baton_core::wire::frames::{self, FrameStamp};
use tokio::sync::mpsc;

use super::StepService;
use crate::error::{LlmError, RuntimeError, StoreError};
use crate::ports::{ModelDelta, ModelFallback};
use crate::services::admission::{NewRun, TenantLimitCheck, UnsentFirstSteps};

impl StepService {
    /// Appends `frame` beside the run (streamed text, a warning the step
    /// gives before it commits), and hands it to the life-cycle bus.
    pub(super) async fn append_beside(
        &self,
        state: &RunState,
        frame: EventDraft,
    ) -> Result<(), RuntimeError> {
        let frames = crate::observe::run_traces::traced_frames(state.trace.as_ref(), vec![frame]);
        let published = self.lifecycle.is_heard().then(|| frames.clone());
        self.run_log.append_events(state.key(), frames).await?;
        if let Some(frames) = published {
            self.lifecycle.publish(
                &state.tenant_id,
                &state.run_id,
                &state.correlation_id,
                frames,
            );
        }
        Ok(())
    }

    /// `message` with its child's outputs read from the child run, when it
    /// is a `ChildRunEnded` whose summary names them by reference; `None`
    /// when there is nothing to read. A child run that is gone is a step
    /// that cannot apply (failed for good).
    pub(super) async fn with_child_outputs(
        &self,
        message: &StepMessage,
    ) -> Result<Option<StepMessage>, RuntimeError> {
        let StepCommand::ChildRunEnded { summary, .. } = &message.command else {
            return Ok(None);
        };
        let Some(child_run_id) = baton_core::state::run::summary_outputs_by_reference(summary)
        else {
            return Ok(None);
        };
        let child = self
            .run_log
            .load_run(RunKey::new(&message.tenant_id, child_run_id))
            .await?
            .ok_or_else(|| {
                RuntimeError::Core(baton_core::CoreError::StepDoesNotApply(format!(
                    "child run {child_run_id}, whose outputs its end names, is gone"
                )))
            })?;
        let mut resolved = message.clone();
        if let StepCommand::ChildRunEnded { summary, .. } = &mut resolved.command
            && let Some(fields) = summary.as_object_mut()
        {
            fields.remove("outputsByReference");
            if let Some(output) = child.state.output {
                fields.insert("outputs".into(), output);
            }
        }
        Ok(Some(resolved))
    }

    /// Performs an effect and pairs it with what it produced; provider
    /// failures become outcomes, anything else (the store failing) is an
    /// error of the step.
    pub(super) async fn perform(
        &self,
        state: &RunState,
        effect: Effect,
        engine: &baton_core::engine::EngineContext<'_>,
    ) -> Result<Performed, RuntimeError> {
        Ok(match effect {
            Effect::CallModel(call) => {
                // Each effect's future boxed: the step holds only the one it
                // waits on, not room for the largest of them.
                let answered = Box::pin(self.call_model_streaming(
                    state,
                    &call.node_id,
                    &call.request,
                    call.stream_deltas,
                ))
                .await;
                Performed::CallModel(call, answered)
            }
            Effect::AskJudge(call) => {
                // What the round's judges are asked is stored beside the run.
                let stored = self
                    .run_log
                    .read_entries(state.key(), &call.round_entry)
                    .await?;
                let request = call
                    .request_from(stored.first(), self.registry.models())
                    .map_err(|error| StoreError::Corrupt(error.to_string()))?;
                // A judge's text is not streamed (the panel reports
                // `progress`); a fallback is still told, on the panel node.
                let span = tracing::info_span!(
                    "judge",
                    otel.name = %format!("judge {}", call.judge_id),
                    baton.judge.id = %call.judge_id,
                    baton.judge.round = call.round,
                    baton.node_id = %call.node_id,
                );
                let answered = tracing::Instrument::instrument(
                    Box::pin(self.complete_noting_fallbacks(state, &call.node_id, &request)),
                    span,
                )
                .await?;
                Performed::AskJudge(call, answered)
            }
            Effect::Converse(mut call) => {
                // A summarised thread's first turn: the summariser first.
                if let Some(summary) = call.history_summary.as_mut() {
                    summary.answer =
                        Some(Box::pin(self.complete_unstreamed(&summary.request)).await);
                }
                let outcome = Box::pin(self.converse(state, &call)).await?;
                Performed::Converse(call, outcome)
            }
            Effect::StartChildRun(start) => {
                Box::pin(self.start_child_run(&start)).await?;
                Performed::StartChildRun(start)
            }
            Effect::ReviewPlan(review) => {
                let answered = Box::pin(self.complete_unstreamed(&review.request)).await;
                Performed::ReviewPlan(review, answered)
            }
            Effect::Notify(delivery) => {
                let outcome = self.notifier.deliver(&delivery).await.map_err(|error| {
                    tracing::warn!(notification = %delivery.notification_id, attempt = delivery.attempt, %error, "a completion notification was not accepted");
                    DeliveryFailure {
                        message: error.to_string(),
                    }
                });
                Performed::Notify(delivery, outcome)
            }
            Effect::ReleaseThreadLane(release) => {
                Box::pin(self.committer.release_thread_lane(
                    &state.tenant_id,
                    &release.thread_id,
                    &release.ended_run,
                    engine,
                ))
                .await?;
                Performed::ReleaseThreadLane(release)
            }
            Effect::RunTool(execution) => {
                // The GenAI conventions' tool span; an HTTP tool forwards
                // it as the request's `traceparent`.
                let span = tracing::info_span!(
                    "gen_ai.execute_tool",
                    otel.name = %format!("execute_tool {}", execution.tool.name),
                    otel.status_code = tracing::field::Empty,
                    gen_ai.operation.name = "execute_tool",
                    gen_ai.tool.name = %execution.tool.name,
                    gen_ai.tool.call.id = %execution.invocation.call_id,
                    error.type = tracing::field::Empty,
                );
                let outcome = match execution.memory_scope.as_deref() {
                    // The tenant's memory, within the run's scope.
                    Some(scope) => {
                        // Boxed: inline, this one call would set the
                        // size of every effect's future.
                        Box::pin(tracing::Instrument::instrument(
                            self.memory.run_tool(
                                (&state.tenant_id, &state.run_id),
                                scope,
                                &execution,
                            ),
                            span.clone(),
                        ))
                        .await
                    }
                    None => {
                        tracing::Instrument::instrument(
                            self.tools.run_tool(&execution.tool, &execution.invocation),
                            span.clone(),
                        )
                        .await
                    }
                };
                if let baton_core::records::conversation::ToolOutcome::Failed { .. } = &outcome {
                    span.record("otel.status_code", "ERROR");
                    span.record("error.type", "tool_failed");
                }
                Performed::RunTool(execution, outcome)
            }
            Effect::RecallMemory(call) => {
                let found = Box::pin(self.memory.recall(&state.tenant_id, &call)).await;
                if let Err(failure) = &found {
                    tracing::warn!(node_id = %call.node_id, error = %failure.message, "the node's recall failed; it runs without memory");
                }
                Performed::RecallMemory(call, found)
            }
            Effect::Remember(remembering) => {
                let outcome = Box::pin(self.memory.remember(&state.tenant_id, &remembering)).await;
                if let Some(error) = &outcome.failure {
                    tracing::warn!(attempt = remembering.attempt, %error, "the run's remembered facets were not written; the step retries");
                }
                Performed::Remember(remembering, outcome)
            }
            Effect::DraftPlan(call) => {
                // The rejected drafts' frames go with the planning step's commit.
                let answered = Box::pin(self.complete_unstreamed(&call.request)).await;
                Performed::DraftPlan(call, answered)
            }
        })
    }

    /// A model call whose text is not streamed to readers.
    async fn complete_unstreamed(&self, request: &ModelRequest) -> ModelOutcome {
        let (sender, _receiver) = mpsc::unbounded_channel();
        self.llm
            .complete(request, sender)
            .await
            .map_err(|error| model_failure(&error))
    }

    /// A model call whose text is not streamed, under a claim on
    /// `node_id`: a fallback its model took is appended as the node's
    /// `model_fallback` warning, as a streamed call's is.
    async fn complete_noting_fallbacks(
        &self,
        state: &RunState,
        node_id: &str,
        request: &ModelRequest,
    ) -> Result<ModelOutcome, RuntimeError> {
        let (sender, mut receiver) = mpsc::unbounded_channel();
        let answered = self
            .llm
            .complete(request, sender)
            .await
            .map_err(|error| model_failure(&error));
        while let Ok(delta) = receiver.try_recv() {
            if let ModelDelta::FellBack(fallback) = delta {
                let ModelFallback { from, to, cause } = *fallback;
                self.note_fallback(state, node_id, &from, &to, &cause)
                    .await?;
            }
        }
        Ok(answered)
    }

    /// Calls the model while its deltas are pumped into the event log
    /// (when the engine asks for them: text streams in the generation and
    /// qa phases only).
    async fn call_model_streaming(
        &self,
        state: &RunState,
        node_id: &str,
        request: &ModelRequest,
        stream_deltas: bool,
    ) -> ModelOutcome {
        let (sender, receiver) = mpsc::unbounded_channel::<ModelDelta>();
        let call = self.llm.complete(request, sender);
        // Boxed: the pump's future is as large as the rest of the call.
        let pump = Box::pin(self.pump_deltas(state, node_id, stream_deltas, receiver));
        let (answer, pump_error) = tokio::join!(call, pump);
        if let Some(error) = pump_error {
            tracing::warn!(%error, "could not append streamed deltas; the answer is still committed");
        }
        answer.map_err(|error| model_failure(&error))
    }

    /// The one delta pump, for a node's model call and an agent's turn
    /// alike: drains `deltas` while the call runs and appends them as
    /// `delta` frames, flushed once `delta_flush_bytes` are buffered or
    /// `delta_flush_interval` after the first unflushed text (a timer, so a
    /// slow model's text still shows while it thinks). A restarted stream
    /// flushes what came before and appends the restart warning. Returns
    /// the first append error: streamed text is a view, the answer is
    /// committed whatever became of it.
    async fn pump_deltas(
        &self,
        state: &RunState,
        node_id: &str,
        stream_deltas: bool,
        mut deltas: mpsc::UnboundedReceiver<ModelDelta>,
    ) -> Option<RuntimeError> {
        // Each append below is boxed: the pump waits on its channel for the
        // whole model call, and inline they would double the room it holds.
        let stream = stream_deltas && self.settings.stream_deltas;
        let mut buffer = String::new();
        let mut first_error = None;
        let mut flush_due: Option<tokio::time::Instant> = None;
        loop {
            // Deltas first: a timer is only registered while none is ready
            // (an instant answer never arms one).
            let delta = match flush_due {
                Some(due) => tokio::select! {
                    biased;
                    delta = deltas.recv() => delta,
                    () = tokio::time::sleep_until(due) => {
                        keep_first(&mut first_error, Box::pin(self.flush_delta(state, node_id, &mut buffer)).await);
                        flush_due = None;
                        continue;
                    }
                },
                None => deltas.recv().await,
            };
            let Some(delta) = delta else {
                break;
            };
            // A fallback is told whether or not text streams.
            if let ModelDelta::FellBack(fallback) = &delta {
                let ModelFallback { from, to, cause } = fallback.as_ref();
                keep_first(
                    &mut first_error,
                    Box::pin(self.flush_delta(state, node_id, &mut buffer)).await,
                );
                keep_first(
                    &mut first_error,
                    Box::pin(self.note_fallback(state, node_id, from, to, cause)).await,
                );
                flush_due = None;
                continue;
            }
            if !stream {
                continue;
            }
            match delta {
                ModelDelta::Text(text) => {
                    buffer.push_str(&text);
                    let overdue = flush_due.is_some_and(|due| tokio::time::Instant::now() >= due);
                    if buffer.len() >= self.settings.delta_flush_bytes || overdue {
                        keep_first(
                            &mut first_error,
                            Box::pin(self.flush_delta(state, node_id, &mut buffer)).await,
                        );
                        flush_due = None;
                    } else if flush_due.is_none() {
                        flush_due =
                            Some(tokio::time::Instant::now() + self.settings.delta_flush_interval);
                    }
                }
                ModelDelta::Restarted => {
                    keep_first(
                        &mut first_error,
                        Box::pin(self.flush_delta(state, node_id, &mut buffer)).await,
                    );
                    keep_first(
                        &mut first_error,
                        Box::pin(self.note_stream_restart(state, node_id)).await,
                    );
                    flush_due = None;
                }
                ModelDelta::FellBack(_) => {}
            }
        }
        keep_first(
            &mut first_error,
            Box::pin(self.flush_delta(state, node_id, &mut buffer)).await,
        );
        first_error
    }

    /// A `warning` telling stream readers to drop the node's deltas so far:
    /// the provider restarted the answer after its stream broke.
    async fn note_stream_restart(
        &self,
        state: &RunState,
        node_id: &str,
    ) -> Result<(), RuntimeError> {
        let frame = frames::warning(
            &FrameStamp::for_run(state, self.clock.now()),
            Some(node_id),
            "the model's stream broke and restarted: discard this node's deltas streamed since its node_start",
            &frames::WarningPayload::of(WarningCode::StreamRestarted),
        );
        self.append_beside(state, frame).await?;
        Ok(())
    }

    /// A `model_fallback` warning: `from` failed after its provider's
    /// retries (`cause`) and `to` answers instead; its text streamed so far
    /// is void.
    async fn note_fallback(
        &self,
        state: &RunState,
        node_id: &str,
        from: &str,
        to: &str,
        cause: &str,
    ) -> Result<(), RuntimeError> {
        let mut payload = frames::WarningPayload::of(WarningCode::ModelFallback);
        payload.model = Some(to.to_string());
        let frame = frames::warning(
            &FrameStamp::for_run(state, self.clock.now()),
            Some(node_id),
            format!(
                "model `{from}` failed ({cause}); its fallback `{to}` answers: discard this node's deltas streamed so far"
            ),
            &payload,
        );
        self.append_beside(state, frame).await?;
        Ok(())
    }

    async fn flush_delta(
        &self,
        state: &RunState,
        node_id: &str,
        buffer: &mut String,
    ) -> Result<(), RuntimeError> {
        if buffer.is_empty() {
            return Ok(());
        }
        let frame = frames::delta(
            &FrameStamp::for_run(state, self.clock.now()),
            node_id,
            std::mem::take(buffer),
        );
        self.append_beside(state, frame).await?;
        Ok(())
    }

    /// One model turn of an agent session, its text pumped like a node's.
    async fn converse(
        &self,
        state: &RunState,
        call: &baton_core::engine::ConverseCall,
    ) -> Result<TurnOutcome, RuntimeError> {
        // The turns stored beside the run, then the call's own.
        let stored = match call.stored_prefix() {
            Some(prefix) => self.run_log.read_entries(state.key(), &prefix).await?,
            None => Vec::new(),
        };
        let (conversation, trimmed) = call
            .fitted_conversation(&stored)
            .map_err(|error| StoreError::Corrupt(error.to_string()))?;
        if let Some(trim) = trimmed {
            // A view of what the request left out, like the streamed text:
            // appended beside the claim, not part of the commit.
            let frame = frames::context_trimmed(
                &FrameStamp::for_run(state, self.clock.now()),
                &call.node_id,
                call.request
                    .model
                    .as_ref()
                    .map(|target| target.name.clone()),
                trim,
                &format!("tool rounds of the session (turn {})", call.turn),
            );
            self.append_beside(state, frame).await?;
        }
        let request =
            call.request_to_send(state.chat.as_ref().and_then(|chat| chat.summary.as_ref()));
        let (sender, receiver) = mpsc::unbounded_channel::<ModelDelta>();
        let turn = self.llm.converse(&request, &conversation, sender);
        let pump = self.pump_deltas(state, &call.node_id, call.stream_deltas, receiver);
        let (answered, pump_error) = tokio::join!(turn, pump);
        if let Some(error) = pump_error {
            tracing::warn!(%error, "could not append a turn's streamed text; the turn is still committed");
        }
        Ok(answered
            .map(Box::new)
            .map_err(|error| model_failure(&error)))
    }

    /// Creates the child run an `agent_create_plan` call starts, at most
    /// once (its id and idempotency key are the call's), through the one
    /// admission (`services::admission`); on a retry it exists already and
    /// its pending steps are sent again.
    async fn start_child_run(
        &self,
        start: &baton_core::engine::ChildRunStart,
    ) -> Result<(), RuntimeError> {
        let mut child = start.child.clone();
        // The child's root span hangs under this step's span when spans are
        // exported (under the parent run's root otherwise).
        if let Some(trace) = child.state.trace.as_mut()
            && let Some(step_span) = crate::observe::run_traces::current_span_id()
        {
            trace.caller_span_id = Some(step_span);
        }
        self.admission
            .admit(NewRun {
                decision: *child,
                idempotency_key: Some(&start.idempotency_key),
                limits: TenantLimitCheck::ChildOfAdmittedParent,
                unsent: UnsentFirstSteps::FailTheCaller,
            })
            .await?;
        Ok(())
    }
}

/// A provider's giving up, as the engine judges it.
fn model_failure(error: &LlmError) -> ModelFailure {
    ModelFailure {
        code: error.code(),
        message: error.to_string(),
    }
}

/// Keeps the first error of a series of appends.
fn keep_first(first_error: &mut Option<RuntimeError>, result: Result<(), RuntimeError>) {
    if let Err(error) = result {
        first_error.get_or_insert(error);
    }
}
