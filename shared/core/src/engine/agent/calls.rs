//! The tool calls of an agent session: each call checked against its
//! tool's schema (an invalid one is answered at once with an error the
//! model reads), dispatched as `RunTool` steps (all at once with
//! `parallelTools`, else one after another), performed under its own lease
//! and idempotency key, and its result appended to the conversation.

use serde_json::{Value, json};

use crate::basics::claims::ClaimKey;
use crate::basics::error::CoreError;
use crate::basics::instant::Instant;
use crate::planning::plan::PlanNode;
use crate::records::agents::{PendingToolCall, tool_idempotency_key};
use crate::records::conversation::{SessionTurn, ToolCallRequest, ToolInvocation, ToolOutcome};
use crate::state::run::{RunState, StepCommand};
use crate::wire::frames::{self, AgentActivity};

use super::super::decision::EngineContext;
use super::super::effects::{Effect, StepAdvance};
use super::super::plan_lookup::{plan_node_in, plan_of};
use super::super::step_context::StepContext;
use super::{ToolExecution, agent_state_frame, next_turn, session_of};

/// Why a call cannot run (the model reads it as the call's result).
pub(super) fn check_call(
    step: &StepContext<'_, '_>,
    offered: &[String],
    call: &ToolCallRequest,
    arguments: &Value,
) -> Result<(), crate::basics::error::Refusal> {
    if !offered.iter().any(|name| name == &call.name) {
        return Err(format!(
            "there is no tool `{}`; the tools are: {}",
            call.name,
            offered.join(", ")
        )
        .into());
    }
    if !arguments.is_object() {
        return Err(format!(
            "the arguments must be a JSON object; got `{}`",
            call.arguments
        )
        .into());
    }
    let Some(tool) = step.engine().registry.tool(&call.name) else {
        return Err(format!("the tool `{}` is no longer available", call.name).into());
    };
    let violations = tool.argument_violations(arguments, step.engine().validators);
    if violations.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = violations
        .iter()
        .map(|violation| {
            let path = if violation.instance_pointer.is_empty() {
                "(the arguments)".to_string()
            } else {
                violation.instance_pointer.clone()
            };
            format!("{path}: {}", violation.message)
        })
        .collect();
    Err(format!(
        "the arguments break the tool's schema: {}; call it again with them fixed",
        listed.join("; ")
    )
    .into())
}

/// Puts the next calls in the outbox, or, with none left, the next turn.
pub(super) fn dispatch_or_continue(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
    attempt: u32,
    parallel: bool,
) {
    let Some(session) = step.state_mut().sessions.get_mut(&node.node_id) else {
        return;
    };
    let turn = session.calls_turn();
    if session.pending.is_empty() {
        next_turn(step, node, attempt);
        return;
    }
    if session.pending.iter().any(|call| call.dispatched) && !parallel {
        return;
    }
    let mut commands = Vec::new();
    for call in session.pending.iter_mut().filter(|call| !call.dispatched) {
        call.dispatched = true;
        commands.push(StepCommand::RunTool {
            node_id: node.node_id.clone(),
            attempt,
            turn,
            call_id: call.call_id.clone(),
        });
        if !parallel {
            break;
        }
    }
    let first_dispatch = commands.len() == session.pending.len() || !parallel;
    for command in commands {
        step.enqueue(command);
    }
    if first_dispatch {
        let executing = agent_state_frame(
            &step.stamp(),
            step.state(),
            &node.node_id,
            AgentActivity::ExecutingTool,
            turn,
        );
        step.emit(executing);
    }
}

/// A tool call's step: perform it under its own lease.
pub(in crate::engine) fn begin_tool(
    state: &RunState,
    node_id: &str,
    attempt: u32,
    turn: u32,
    call_id: &str,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    let session = session_of(state, node_id)?;
    let pending = session
        .pending
        .iter()
        .find(|call| call.call_id == call_id)
        .ok_or_else(|| {
            CoreError::StepDoesNotApply(format!("node {node_id} does not wait for {call_id}"))
        })?;
    let Some(tool) = engine.registry.tool(&pending.tool_name) else {
        // Removed from the registry since the call was checked: the model
        // is told, nothing runs.
        let plan = plan_of(state)?;
        let node = plan_node_in(&plan, state, node_id)?;
        let outcome = ToolOutcome::failed(format!(
            "the tool `{}` is no longer available",
            pending.tool_name
        ));
        let tool_name = pending.tool_name.clone();
        let mut step = StepContext::new(state.clone(), now, engine);
        finish_call(&mut step, node, attempt, turn, call_id, &tool_name, outcome);
        return Ok(step.into_advance());
    };
    if matches!(
        tool.executor,
        crate::catalog::tools::ToolExecutor::Builtin {
            operation: crate::catalog::tools::BuiltinTool::AgentCreatePlan
        }
    ) {
        let plan = plan_of(state)?;
        let node = plan_node_in(&plan, state, node_id)?;
        let site = super::plan_call::CallSite {
            state,
            node,
            attempt,
            turn,
            pending,
            now,
        };
        return super::plan_call::begin_plan_call(&site, engine);
    }
    Ok(StepAdvance::Perform(Effect::RunTool(Box::new(
        ToolExecution {
            node_id: node_id.to_string(),
            attempt,
            turn,
            claim_key: ClaimKey::ToolCall {
                node_id: node_id.to_string(),
                turn,
                call_id: call_id.to_string(),
            },
            memory_scope: crate::engine::memory_steps::is_memory_tool(tool).then(|| {
                Box::new(crate::engine::memory_steps::memory_tool_scope(
                    state, engine,
                ))
            }),
            tool: tool.clone(),
            invocation: invocation(state, node_id, turn, pending),
        },
    ))))
}

fn invocation(
    state: &RunState,
    node_id: &str,
    turn: u32,
    pending: &PendingToolCall,
) -> ToolInvocation {
    ToolInvocation {
        call_id: pending.call_id.clone(),
        arguments: pending.arguments.clone(),
        idempotency_key: tool_idempotency_key(&state.run_id, node_id, turn, &pending.call_id),
    }
}

/// A tool call finished: its result goes into the conversation; the next
/// call or turn follows.
pub(in crate::engine) fn resume_tool(
    state: RunState,
    execution: &ToolExecution,
    outcome: &ToolOutcome,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    let plan = plan_of(&state)?;
    let node = plan_node_in(&plan, &state, &execution.node_id)?;
    let result = outcome.clone();
    let mut step = StepContext::new(state, now, engine);
    finish_call(
        &mut step,
        node,
        execution.attempt,
        execution.turn,
        &execution.invocation.call_id,
        &execution.tool.name,
        result,
    );
    Ok(step.into_advance())
}

/// A call is done: out of the pending calls, its result in the
/// conversation, then the next call or turn.
pub(super) fn finish_call(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
    attempt: u32,
    turn: u32,
    call_id: &str,
    tool_name: &str,
    outcome: ToolOutcome,
) {
    let mut duration_ms = None;
    let now_millis = step.now().unix_millis();
    if let Some(session) = step.state_mut().sessions.get_mut(&node.node_id) {
        let requested_at = session
            .pending
            .iter()
            .find(|call| call.call_id == call_id)
            .map(|call| call.requested_at_millis)
            .filter(|requested_at| *requested_at > 0);
        duration_ms = requested_at.map(|at| now_millis.saturating_sub(at));
        session.pending.retain(|call| call.call_id != call_id);
    }
    record_result(
        step,
        &node.node_id,
        turn,
        call_id,
        tool_name,
        outcome,
        duration_ms,
    );
    let parallel = node
        .agent()
        .as_ref()
        .is_some_and(|agent| agent.parallel_tools);
    dispatch_or_continue(step, node, attempt, parallel);
}

/// Appends a call's result (or error) to the conversation and says it.
pub(super) fn record_result(
    step: &mut StepContext<'_, '_>,
    node_id: &str,
    turn: u32,
    call_id: &str,
    tool_name: &str,
    outcome: ToolOutcome,
    duration_ms: Option<u64>,
) {
    let (content, payload) = match outcome {
        ToolOutcome::Succeeded(result) => (
            result.to_string(),
            frames::ToolResultPayload {
                tool_name: tool_name.to_string(),
                call_id: call_id.to_string(),
                turn,
                result: Some(result),
                error: None,
                duration_ms,
            },
        ),
        ToolOutcome::Failed { message, retryable } => (
            json!({"error": message, "retryable": retryable}).to_string(),
            frames::ToolResultPayload {
                tool_name: tool_name.to_string(),
                call_id: call_id.to_string(),
                turn,
                result: None,
                error: Some(message),
                duration_ms,
            },
        ),
    };
    step.record_turn(
        node_id,
        SessionTurn::Tool {
            call_id: call_id.to_string(),
            content,
        },
    );
    let frame = frames::tool_result(&step.stamp(), node_id, &payload);
    step.emit(frame);
}
