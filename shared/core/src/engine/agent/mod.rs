//! Agent nodes: a session of model turns and tool calls, each its own
//! durable step. The node's step is the first model turn (under the node's
//! claim); a turn that asks for tools records them in the session (invalid
//! calls are answered at once with an error the model reads) and puts one
//! `RunTool` step per call in the outbox (all at once with `parallelTools`,
//! else one after another); when the last result is in, an `AgentTurn` step
//! asks the model again with the results appended. A turn that answers
//! without tools ends the session: the answer is judged against the node's
//! output contract like any other. Guardrails end a session incomplete
//! (`agent_incomplete`, after a `warning` naming the limit): more calls in
//! one turn than `maxToolCallsPerTurn`, `maxIterations` turns without an
//! answer, or the watchdog (a durable timer, and a check before each turn).

use std::sync::Arc;

use serde_json::Value;

use crate::basics::claims::ClaimKey;
use crate::basics::codes::{FailureCode, WarningCode};
use crate::basics::error::CoreError;
use crate::basics::instant::Instant;
use crate::planning::plan::PlanNode;
use crate::records::agents::{AgentSession, ConversationHead, PendingToolCall, watchdog_timer_id};
use crate::records::conversation::{
    OfferedTool, SessionAnswer, SessionTurn, ToolOutcome, ToolSession,
};
use crate::records::governance::TimerPurpose;
use crate::state::context::{ContextBundle, build_model_request};
use crate::state::run::{NodeStatus, RunState, StepCommand};

use crate::wire::frames::{self, AgentActivity, ExecutorType, FrameStamp, RunPhase};

mod calls;
mod plan_call;
mod session_frames;
pub(super) use session_frames::agent_state_frame;
use session_frames::{response_summary, thinking_frame};

pub use super::effects::{ConverseCall, ToolExecution};
pub(super) use calls::{begin_tool, resume_tool};
use calls::{check_call, dispatch_or_continue, record_result};
pub(super) use plan_call::{child_ended, resume_child_started, resume_review};

use super::decision::EngineContext;
use super::effects::{Effect, ModelFailure, StepAdvance, TurnOutcome};
use super::plan_lookup::{plan_node_in, plan_of};
use super::step_context::StepContext;

/// Whether an `AgentTurn` command no longer applies.
pub(super) fn turn_is_stale(state: &RunState, node_id: &str, attempt: u32, turn: u32) -> bool {
    !deliberating(state, node_id, attempt)
        || !state
            .sessions
            .get(node_id)
            .is_some_and(|session| session.awaits_turn(attempt, turn))
}

/// Whether a `ChildRunEnded` command no longer applies.
pub(super) fn child_is_stale(
    state: &RunState,
    node_id: &str,
    attempt: u32,
    turn: u32,
    call_id: &str,
) -> bool {
    !deliberating(state, node_id, attempt)
        || !state
            .sessions
            .get(node_id)
            .is_some_and(|session| session.awaits_child(attempt, turn, call_id))
}

/// Whether a `RunTool` command no longer applies (its result committed, or
/// the session over).
pub(super) fn tool_is_stale(
    state: &RunState,
    node_id: &str,
    attempt: u32,
    turn: u32,
    call_id: &str,
) -> bool {
    !deliberating(state, node_id, attempt)
        || !state
            .sessions
            .get(node_id)
            .is_some_and(|session| session.awaits_call(attempt, turn, call_id))
}

fn deliberating(state: &RunState, node_id: &str, attempt: u32) -> bool {
    state.nodes.get(node_id).is_some_and(|record| {
        record.status() == NodeStatus::Deliberating && record.current_attempt == attempt
    })
}

/// Appended to the instructions of an agent offered no tools (a chat
/// specialist that declares none).
pub const NO_TOOLS_REMINDER: &str =
    "\n\nYou currently have no tools: focus on guidance, and answer in words.";

/// The node's step: open the session and take its first model turn.
pub(super) fn begin_session(
    state: &RunState,
    node: &PlanNode,
    attempt: u32,
    bundle: &ContextBundle,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    let settings = node.agent().ok_or_else(|| {
        CoreError::StepDoesNotApply(format!("node {} is not an agent", node.node_id))
    })?;
    let mut tools = Vec::with_capacity(settings.tools.len());
    let memory_scope = super::memory_steps::memory_tool_scope(state, engine);
    for name in &settings.tools {
        let Some(tool) = engine.registry.tool(name) else {
            let mut step = StepContext::new(state.clone(), now, engine);
            let reason = format!("the tool `{name}` is not in the registry");
            let run_message = format!("node {} cannot start: {reason}", node.node_id);
            step.fail_node(
                node,
                attempt,
                FailureCode::AgentIncomplete,
                &reason,
                &run_message,
            );
            return Ok(step.into_advance());
        };
        if super::memory_steps::is_memory_tool(tool) && memory_scope.is_empty() {
            // Nothing the run may read or write: the tool is not offered.
            continue;
        }
        tools.push(OfferedTool {
            name: tool.name.clone(),
            description: tool.description.clone(),
            parameters: Arc::new(tool.parameters.clone()),
        });
    }
    let first_turn = state
        .nodes
        .get(&node.node_id)
        .map_or(0, |record| record.agent_turns);
    let mut request = build_model_request(node, bundle);
    if tools.is_empty() {
        // Said, not left to be guessed: the model answers in words.
        request.system_instruction.push_str(NO_TOOLS_REMINDER);
    }
    // The first turn's conversation: a chat node's thread so far (stored
    // with the turn's result), nothing otherwise.
    let mut opening = ToolSession {
        tools: tools.clone(),
        turns: Vec::new(),
        free_text: node.is_chat(),
    };
    let prompt_budget_tokens = crate::state::context_budget::prompt_budget(
        engine.registry.models(),
        request.model.as_ref().map(|target| target.name.as_str()),
    );
    let (mut context_trim, mut history_summary) = (None, None);
    if node.is_chat()
        && let Some(turn) = &state.chat
    {
        let fit = super::chat_runs::chat_history_fit(turn, &request, engine);
        request.user_message = super::chat_runs::seed_chat(&mut opening, turn, fit.first_kept);
        // What is left out is summarised by the shell first, or trimmed.
        history_summary = super::history_summary::summary_call(turn, &fit, &request, engine);
        if history_summary.is_none() {
            super::history_summary::with_thread_summary(&mut request, turn.summary.as_ref());
            context_trim = fit.trim;
        }
    }
    let session = AgentSession {
        attempt,
        first_turn,
        turns_taken: 0,
        started_at_millis: now.unix_millis(),
        conversation: ConversationHead {
            tools,
            free_text: node.is_chat(),
            recorded_turns: 0,
        },
        pending: Vec::new(),
    };
    let stamp = FrameStamp::for_run(state, now);
    let phase = RunPhase::of_node(node.kind);
    let mut start_frames =
        super::plan_lookup::claim_frames(state, node, attempt, ExecutorType::Agent, now);
    start_frames.push(thinking_frame(&stamp, state, node, first_turn));
    if let Some(trim) = context_trim {
        start_frames.push(frames::context_trimmed(
            &stamp,
            &node.node_id,
            request.model.as_ref().map(|target| target.name.clone()),
            trim,
            "exchanges of the thread",
        ));
    }
    Ok(StepAdvance::Perform(Effect::Converse(Box::new(
        ConverseCall {
            node_id: node.node_id.clone(),
            attempt,
            turn: first_turn,
            claim_key: ClaimKey::Node {
                node_id: node.node_id.clone(),
            },
            request,
            conversation: opening,
            stored_turns: 0,
            start_frames,
            opens: Some(session),
            stream_deltas: phase.streams_text(),
            prompt_budget_tokens,
            history_summary: history_summary.map(Box::new),
        },
    ))))
}

/// A later model turn's step: the watchdog first, then the model.
pub(super) fn begin_turn(
    state: &RunState,
    node_id: &str,
    attempt: u32,
    turn: u32,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    let plan = plan_of(state)?;
    let node = plan_node_in(&plan, state, node_id)?;
    let session = session_of(state, node_id)?;
    if outlived_watchdog(session, now, engine) {
        let mut step = StepContext::new(state.clone(), now, engine);
        end_incomplete(
            &mut step,
            node,
            attempt,
            WarningCode::SessionTimedOut,
            watchdog_reason(engine),
        );
        return Ok(step.into_advance());
    }
    Ok(StepAdvance::Perform(Effect::Converse(Box::new(
        ConverseCall {
            node_id: node_id.to_string(),
            attempt,
            turn,
            claim_key: ClaimKey::Turn {
                node_id: node_id.to_string(),
                turn,
            },
            request: super::chat_runs::session_request(state, node, engine),
            conversation: ToolSession {
                tools: session.conversation.tools.clone(),
                turns: Vec::new(),
                free_text: session.conversation.free_text,
            },
            stored_turns: session.conversation.recorded_turns,
            start_frames: Vec::new(),
            opens: None,
            history_summary: None,
            stream_deltas: RunPhase::of_node(node.kind).streams_text(),
            prompt_budget_tokens: crate::state::context_budget::prompt_budget(
                engine.registry.models(),
                node.model.as_ref().map(|target| target.name.as_str()),
            ),
        },
    ))))
}

pub(super) fn session_of<'s>(
    state: &'s RunState,
    node_id: &str,
) -> Result<&'s AgentSession, CoreError> {
    state
        .sessions
        .get(node_id)
        .ok_or_else(|| CoreError::StepDoesNotApply(format!("node {node_id} has no agent session")))
}

fn outlived_watchdog(session: &AgentSession, now: Instant, engine: &EngineContext<'_>) -> bool {
    let limit = u64::try_from(engine.agent_session_limit.as_millis()).unwrap_or(u64::MAX);
    now.unix_millis().saturating_sub(session.started_at_millis) >= limit
}

fn watchdog_reason(engine: &EngineContext<'_>) -> String {
    format!(
        "the session ran longer than its {} s watchdog",
        engine.agent_session_limit.as_secs()
    )
}

/// A model turn answered (or failed).
pub(super) fn resume_turn(
    state: RunState,
    call: &ConverseCall,
    outcome: &TurnOutcome,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    let plan = plan_of(&state)?;
    let node = plan_node_in(&plan, &state, &call.node_id)?;
    let mut step = StepContext::new(state, now, engine);
    if let Some(opened) = &call.opens {
        step.state_mut().phase = Some(RunPhase::of_node(node.kind));
        if let Some(record) = step.state_mut().node_mut(&node.node_id) {
            record.started_at_millis = Some(opened.started_at_millis);
            super::lifecycle::move_node(record, super::lifecycle::NodeTransition::Deliberate);
        }
        step.state_mut()
            .sessions
            .insert(node.node_id.clone(), opened.clone());
        let due =
            Instant::from_unix_millis(opened.started_at_millis).plus(engine.agent_session_limit);
        step.start_timer(
            watchdog_timer_id(&node.node_id, call.attempt),
            due,
            TimerPurpose::AgentWatchdog {
                node_id: node.node_id.clone(),
                attempt: call.attempt,
            },
        );
    }
    if let Some(summary) = &call.history_summary {
        super::history_summary::record_summary(&mut step, &node.node_id, summary);
    }
    let answer = match outcome {
        Ok(answer) => (**answer).clone(),
        Err(ModelFailure { code, message }) => {
            close_session(&mut step, &node.node_id, call.attempt);
            let run_message = format!("node {} failed: {message}", node.node_id);
            step.fail_node(node, call.attempt, *code, message, &run_message);
            return Ok(step.into_advance());
        }
    };
    super::usage_recording::record_model_usage(
        &mut step,
        &node.node_id,
        &answer.model,
        &answer.usage,
        super::usage_recording::operation_of(node),
    );
    if let Some(record) = step.state_mut().node_mut(&node.node_id) {
        record.agent_turns += 1;
    }
    let Some(session) = step.state_mut().sessions.get_mut(&node.node_id) else {
        return Err(CoreError::StepDoesNotApply(format!(
            "node {} has no agent session",
            node.node_id
        )));
    };
    session.turns_taken += 1;
    let turns = session.turns_taken;
    if answer.tool_calls.is_empty() {
        let response = response_summary(&answer);
        return answered(step, node, call.attempt, answer.content, turns, response);
    }
    if super::budget::stop_when_over_budget(&mut step, &node.node_id, false) {
        close_session(&mut step, &node.node_id, call.attempt);
        return Ok(step.into_advance());
    }
    take_tool_calls(
        &mut step,
        node,
        call.attempt,
        call.turn,
        &call.conversation.turns,
        answer,
    )?;
    Ok(step.into_advance())
}

/// The model answered without tools: the session ends and its answer is
/// judged against the node's output contract.
fn answered(
    mut step: StepContext<'_, '_>,
    node: &PlanNode,
    attempt: u32,
    content: String,
    turns: u32,
    response: frames::ModelResponseSummary,
) -> Result<StepAdvance, CoreError> {
    close_session(&mut step, &node.node_id, attempt);
    let said = frames::message(
        &step.stamp(),
        &node.node_id,
        content.clone(),
        &frames::MessagePayload {
            role: "assistant".into(),
            turns,
            response: Some(response),
        },
    );
    step.emit(said);
    if node.is_chat() {
        // The answer is the thread's: the agent now waits for the person.
        let waiting = agent_state_frame(
            &step.stamp(),
            step.state(),
            &node.node_id,
            AgentActivity::WaitingOnUser,
            turns,
        );
        step.emit(waiting);
    }
    if let Some(record) = step.state_mut().node_mut(&node.node_id) {
        super::lifecycle::move_node(record, super::lifecycle::NodeTransition::Schedule);
    }
    let parsed = if node.is_chat() {
        // Free text: delivered as the thread's answer.
        Ok(serde_json::json!({"message": content, "threadId": step.state().thread_id}))
    } else {
        serde_json::from_str::<Value>(&content)
    };
    super::node_answers::take_answer(&mut step, node, attempt, parsed)?;
    Ok(step.into_advance())
}

/// Records a turn's tool calls: the guardrails, then each call checked (an
/// invalid one is answered with its error), then the valid ones dispatched.
fn take_tool_calls(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
    attempt: u32,
    turn: u32,
    opening_turns: &[SessionTurn],
    answer: SessionAnswer,
) -> Result<(), CoreError> {
    let settings = node.agent().cloned().ok_or_else(|| {
        CoreError::StepDoesNotApply(format!("node {} is not an agent", node.node_id))
    })?;
    let mut response = Some(response_summary(&answer));
    let calls = answer.tool_calls;
    for opening in opening_turns {
        step.record_turn(&node.node_id, opening.clone());
    }
    step.record_turn(
        &node.node_id,
        SessionTurn::Assistant {
            content: answer.content,
            tool_calls: calls.clone(),
        },
    );
    let asked = u32::try_from(calls.len()).unwrap_or(u32::MAX);
    if asked > settings.max_tool_calls_per_turn {
        let reason = format!(
            "turn {turn} asked for {asked} tool calls, more than the {} allowed per turn; none ran: rephrase the request or narrow it",
            settings.max_tool_calls_per_turn
        );
        end_incomplete(
            step,
            node,
            attempt,
            WarningCode::ToolCallsPerTurnExceeded,
            reason,
        );
        return Ok(());
    }
    let turns_taken = step
        .state()
        .sessions
        .get(&node.node_id)
        .map_or(0, |session| session.turns_taken);
    if turns_taken >= settings.max_iterations {
        let reason = format!(
            "the session took its {} model turns without answering",
            settings.max_iterations
        );
        end_incomplete(
            step,
            node,
            attempt,
            WarningCode::MaxIterationsReached,
            reason,
        );
        return Ok(());
    }
    for call in calls {
        let arguments = serde_json::from_str::<Value>(&call.arguments)
            .unwrap_or_else(|_| Value::String(call.arguments.clone()));
        let announced = frames::tool_call(
            &step.stamp(),
            &node.node_id,
            &frames::ToolCallPayload {
                response: response.take(),
                tool_name: call.name.clone(),
                args: arguments.clone(),
                call_id: call.id.clone(),
                turn,
            },
        );
        step.emit(announced);
        match check_call(step, &settings.tools, &call, &arguments) {
            Ok(()) => {
                let now_millis = step.now().unix_millis();
                if let Some(session) = step.state_mut().sessions.get_mut(&node.node_id) {
                    session.pending.push(PendingToolCall {
                        call_id: call.id,
                        tool_name: call.name,
                        arguments,
                        dispatched: false,
                        child_run_id: None,
                        requested_at_millis: now_millis,
                    });
                }
            }
            Err(error) => record_result(
                step,
                &node.node_id,
                turn,
                &call.id,
                &call.name,
                ToolOutcome::failed(error),
                None,
            ),
        }
    }
    dispatch_or_continue(step, node, attempt, settings.parallel_tools);
    Ok(())
}

/// Every call of the turn has its result: ask the model again, unless the
/// watchdog says the session is over.
pub(super) fn next_turn(step: &mut StepContext<'_, '_>, node: &PlanNode, attempt: u32) {
    let Some(session) = step.state().sessions.get(&node.node_id) else {
        return;
    };
    if outlived_watchdog(session, step.now(), step.engine()) {
        let reason = watchdog_reason(step.engine());
        end_incomplete(step, node, attempt, WarningCode::SessionTimedOut, reason);
        return;
    }
    let turn = session.next_turn();
    let thinking = thinking_frame(&step.stamp(), step.state(), node, turn);
    step.emit(thinking);
    step.enqueue(StepCommand::AgentTurn {
        node_id: node.node_id.clone(),
        attempt,
        turn,
    });
}

/// The watchdog's timer fired: a session still at work ends incomplete.
pub(super) fn watchdog_fired(
    step: &mut StepContext<'_, '_>,
    node_id: &str,
    attempt: u32,
) -> Result<(), CoreError> {
    let running = step
        .state()
        .sessions
        .get(node_id)
        .is_some_and(|session| session.attempt == attempt);
    if !running {
        return Ok(());
    }
    let plan = plan_of(step.state())?;
    let node = plan_node_in(&plan, step.state(), node_id)?;
    let reason = watchdog_reason(step.engine());
    end_incomplete(step, node, attempt, WarningCode::SessionTimedOut, reason);
    Ok(())
}

/// A guardrail ends the session: a `warning` naming it, then the node and
/// the run fail with `agent_incomplete`.
fn end_incomplete(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
    attempt: u32,
    code: WarningCode,
    reason: String,
) {
    close_session(step, &node.node_id, attempt);
    let warning = frames::warning(
        &step.stamp(),
        Some(&node.node_id),
        reason.clone(),
        &frames::WarningPayload::of(code),
    );
    step.emit(warning);
    let run_message = format!("node {} stopped incomplete: {reason}", node.node_id);
    step.fail_node(
        node,
        attempt,
        FailureCode::AgentIncomplete,
        &reason,
        &run_message,
    );
}

/// Removes the session and its watchdog.
fn close_session(step: &mut StepContext<'_, '_>, node_id: &str, attempt: u32) {
    step.state_mut().sessions.remove(node_id);
    step.state_mut()
        .governance
        .timers
        .remove(&watchdog_timer_id(node_id, attempt));
}
