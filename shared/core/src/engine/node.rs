//! Node steps: check the node's input against its contract, then resolve it
//! here (built-in operations, human parking) or ask the shell to call the
//! model; judge the answer against the output contract, re-prompt or fail,
//! and schedule what became ready.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::basics::codes::FailureCode;
use crate::basics::error::CoreError;
use crate::basics::instant::Instant;
use crate::basics::schema::{SchemaViolation, collect_violations};
use crate::planning::plan::{BuiltinOperation, NodeExecutor, PlanNode};
use crate::state::context::{build_context_bundle, build_model_request, clarifying_question};
use crate::state::run::{NodeStatus, RunState, RunStatus, StepCommand};
use crate::wire::frames::{self, ExecutorType, HandoffStatus, RunPhase};

use super::narration::{emit_node_metrics, hand_over, handoff};
use super::policy::{self, Applied, Occurrence};
use super::{EngineContext, ModelCall, ModelFailure, ModelOutcome, StepAdvance, StepContext};
use crate::planning::plan::PlanGraph;

/// The run's plan (shared, so borrowing a node from it copies nothing).
pub(super) fn plan_of(state: &RunState) -> Result<Arc<PlanGraph>, CoreError> {
    state
        .plan
        .clone()
        .ok_or_else(|| CoreError::StepDoesNotApply(format!("run {} has no plan", state.run_id)))
}

pub(super) fn plan_node_in<'p>(
    plan: &'p PlanGraph,
    state: &RunState,
    node_id: &str,
) -> Result<&'p PlanNode, CoreError> {
    plan.node(node_id).ok_or_else(|| {
        CoreError::StepDoesNotApply(format!("run {} has no node {node_id}", state.run_id))
    })
}

pub(super) fn start_payload(
    node: &PlanNode,
    attempt: u32,
    executor: ExecutorType,
) -> frames::NodeStartPayload<'_> {
    frames::NodeStartPayload {
        capability_id: Cow::Borrowed(&node.capability_id),
        kind: node.kind,
        executor_type: executor,
        attempt,
        input_facets: Cow::Borrowed(&node.input_facets),
        output_facets: Cow::Borrowed(&node.output_facets),
        contract: None,
        // Not a model's instructions: they are in the plan, and a frame
        // per node would hold them once per run (the hooks rendering reads
        // them from the plan: `RunService::fill_model_instructions`).
        instructions: None,
        inputs: None,
        due_at: None,
        escalated_from: None,
        model: node
            .model
            .as_ref()
            .map(|model| Cow::Borrowed(model.name.as_str())),
    }
}

pub(super) fn begin_node(
    state: &RunState,
    node_id: &str,
    attempt: u32,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    // Borrowed from the shared plan: a node is never copied per step.
    let plan = plan_of(state)?;
    let node = plan_node_in(&plan, state, node_id)?;
    let mut bundle = build_context_bundle(state, node, engine.registry);
    let validator = engine.validators.validator_for_key(
        &node.input_contract.schema_key,
        &node.input_contract.schema,
        "input contract",
    )?;
    let inputs = Value::Object(std::mem::take(&mut bundle.inputs));
    let mut violations = collect_violations(&validator, &inputs);
    if let Value::Object(map) = inputs {
        bundle.inputs = map;
    }
    if !violations.is_empty() {
        node.input_contract.attribute_violations(&mut violations);
        let mut step = StepContext::new(state.clone(), now, engine);
        reject_input(&mut step, node, attempt, violations);
        return Ok(step.into_advance());
    }
    match &node.executor {
        NodeExecutor::Builtin(operation) => {
            let mut step = StepContext::new(state.clone(), now, engine);
            let started = frames::node_start(
                &step.stamp(),
                node,
                &start_payload(node, attempt, ExecutorType::Builtin),
            );
            step.emit(started);
            let answer = perform_builtin(&step.state, operation);
            judge_answer(&mut step, node, attempt, Ok(answer))?;
            Ok(step.into_advance())
        }
        NodeExecutor::Panel(executor) => {
            let mut step = StepContext::new(state.clone(), now, engine);
            hand_over(&mut step, node, attempt);
            super::panel::begin_panel(&mut step, node, executor, attempt, &bundle.inputs)?;
            Ok(step.into_advance())
        }
        NodeExecutor::AgentSession(_) | NodeExecutor::Chat(_) => {
            super::agent::begin_session(state, node, attempt, &bundle, now, engine)
        }
        NodeExecutor::Human => Ok(hand_to_a_person(state, node, attempt, bundle, now, engine)),
        NodeExecutor::Model => {
            // Claimed, not committed: the frames go with the claim; the state
            // learns the phase and the start time when the answer is committed.
            let phase = RunPhase::of_node(node.kind);
            let start_frames = claim_frames(state, node, attempt, ExecutorType::Ai, now);
            Ok(StepAdvance::Perform(super::Effect::CallModel(ModelCall {
                node_id: node.node_id.clone(),
                attempt,
                request: build_model_request(node, &bundle),
                start_frames,
                started_at_millis: now.unix_millis(),
                stream_deltas: phase.streams_text(),
            })))
        }
    }
}

/// A person's node: parked as a human task (the run waits for them), with
/// its SLA timer.
fn hand_to_a_person(
    state: &RunState,
    node: &PlanNode,
    attempt: u32,
    bundle: crate::state::context::ContextBundle,
    now: Instant,
    engine: &EngineContext<'_>,
) -> StepAdvance {
    let mut step = StepContext::new(state.clone(), now, engine);
    hand_over(&mut step, node, attempt);
    let mut payload = start_payload(node, attempt, ExecutorType::Human);
    payload.contract = Some(frames::NodeContractSummary {
        input_schema: node.input_contract.schema.as_ref().clone(),
        output_schema: node.output_contract.schema.as_ref().clone(),
        provenance: node.output_contract.provenance.as_ref().clone(),
    });
    payload.instructions = Some(node.instructions.to_string());
    payload.inputs = Some(bundle.inputs);
    let due = now.plus(engine.human_task_timeout);
    payload.due_at = Some(due.rfc3339());
    payload.escalated_from = step
        .state
        .governance
        .escalation_taken_over_by(&node.output_facets)
        .cloned();
    if let Some(record) = step.state.node_mut(&node.node_id) {
        record.status = NodeStatus::AwaitingHuman;
    }
    if step.state.governance.hold.is_none() {
        step.state.status = RunStatus::AwaitingHuman;
    }
    let parked = frames::node_start(&step.stamp(), node, &payload);
    step.emit(parked);
    step.start_timer(
        crate::records::governance::human_sla_timer_id(&node.node_id, attempt),
        due,
        crate::records::governance::TimerPurpose::HumanTaskSla {
            node_id: node.node_id.clone(),
            attempt,
        },
    );
    step.into_advance()
}

/// The frames a claimed model node starts with (appended with its claim):
/// the phase when it changes, the handoff, `node_start`.
pub(super) fn claim_frames(
    state: &RunState,
    node: &PlanNode,
    attempt: u32,
    executor: ExecutorType,
    now: Instant,
) -> Vec<crate::wire::event::EventDraft> {
    let stamp = frames::FrameStamp::for_run(state, now);
    let phase = RunPhase::of_node(node.kind);
    let mut start_frames = Vec::with_capacity(4);
    if state.phase != Some(phase) {
        start_frames.push(frames::phase(&stamp, &frames::PhasePayload { phase }));
    }
    start_frames.push(handoff(
        &stamp,
        state,
        node,
        attempt,
        HandoffStatus::Occurred,
    ));
    start_frames.push(frames::node_start(
        &stamp,
        node,
        &start_payload(node, attempt, executor),
    ));
    start_frames
}

pub(super) fn resume_node(
    state: RunState,
    call: &ModelCall,
    outcome: &ModelOutcome,
    now: Instant,
    engine: &EngineContext<'_>,
) -> Result<StepAdvance, CoreError> {
    let plan = plan_of(&state)?;
    let node = plan_node_in(&plan, &state, &call.node_id)?;
    let mut step = StepContext::new(state, now, engine);
    step.state.phase = Some(RunPhase::of_node(node.kind));
    if let Some(record) = step.state.node_mut(&node.node_id) {
        record.started_at_millis = Some(call.started_at_millis);
    }
    match outcome {
        Ok(answer) => {
            let parsed = serde_json::from_str::<Value>(&answer.content)
                .map_err(|error| format!("the answer is not valid JSON: {error}"));
            super::usage_recording::record_model_usage(
                &mut step,
                &node.node_id,
                &answer.model,
                &answer.usage,
            );
            judge_answer(&mut step, node, call.attempt, parsed)?;
        }
        Err(ModelFailure { code, message }) => {
            // A provider that kept failing after its retries (and its
            // fallback models): escalate to the next capability that makes
            // the node's facets (a person's, when the registry ranks one
            // next) before failing the run.
            let escalation = super::escalation::Escalation {
                trigger: "model_failed",
                rationale: format!(
                    "{}'s model kept failing ({message}); trying the next-ranked capability",
                    node.capability_id
                ),
                said: format!(
                    "{}'s model kept failing ({}: {message})",
                    node.capability_id,
                    code.as_str()
                ),
            };
            if super::escalation::provider_kept_failing(*code)
                && super::escalation::fall_back_to_next_capability(&mut step, node, escalation)?
            {
                super::progress::continue_run(&mut step)?;
                return Ok(step.into_advance());
            }
            let run_message = format!("node {} failed: {message}", node.node_id);
            step.fail_node(node, call.attempt, *code, message, &run_message);
        }
    }
    Ok(step.into_advance())
}

/// Computes an orchestrator-managed node's output from its upstream outputs.
fn perform_builtin(state: &RunState, operation: &BuiltinOperation) -> Value {
    match operation {
        BuiltinOperation::ConcatArrays { facet, sources } => {
            let mut items = Vec::new();
            for source in sources {
                let produced = state
                    .nodes
                    .get(source)
                    .and_then(|record| record.output.as_ref())
                    .and_then(|output| output.get(facet))
                    .and_then(Value::as_array);
                items.extend(produced.into_iter().flatten().cloned());
            }
            json!({ facet.clone(): items })
        }
    }
}

fn reject_input(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
    attempt: u32,
    violations: Vec<SchemaViolation>,
) {
    let invalid = frames::node_validation_error(
        &step.stamp(),
        node,
        "node input does not satisfy its compiled input contract",
        &frames::ValidationErrorPayload {
            scope: frames::ValidationScope::NodeInput,
            attempt: Some(attempt),
            errors: frames::ValidationErrors::Schema(violations),
        },
    );
    step.emit(invalid);
    if let Some(record) = step.state.node_mut(&node.node_id) {
        record.status = NodeStatus::Failed;
        record.error = Some("input contract violated".into());
    }
    let failed = frames::node_error(
        &step.stamp(),
        node,
        "input contract violated; the capability was not invoked",
        &frames::NodeErrorPayload {
            code: FailureCode::InputContractViolated,
            attempt,
        },
    );
    step.emit(failed);
    step.fail_run(
        FailureCode::InputContractViolated,
        &format!(
            "node {} received input that breaks its contract",
            node.node_id
        ),
    );
}

/// Judges an answer (parsed, or why it could not be) against the node's
/// output contract: complete the node, re-prompt, or fail.
pub(super) fn judge_answer(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
    attempt: u32,
    parsed: Result<Value, String>,
) -> Result<(), CoreError> {
    let (answer, violations) = match parsed {
        Err(reason) => (
            None,
            vec![SchemaViolation {
                instance_pointer: String::new(),
                schema_pointer: String::new(),
                message: reason,
                facet: None,
            }],
        ),
        Ok(answer) => {
            let validator = step.engine.validators.validator_for_key(
                &node.output_contract.schema_key,
                &node.output_contract.schema,
                "output contract",
            )?;
            let mut violations = collect_violations(&validator, &answer);
            node.output_contract.attribute_violations(&mut violations);
            (Some(answer), violations)
        }
    };
    if !step.state.nodes.contains_key(&node.node_id) {
        return Err(CoreError::StepDoesNotApply(format!(
            "no ledger entry for {}",
            node.node_id
        )));
    }
    if node.allows_clarify
        && let Some(question) = answer.as_ref().and_then(clarifying_question)
    {
        let question = question.to_string();
        if super::hitl::ask_clarification(step, node, &question) {
            return Ok(());
        }
    }
    let answer_is_valid = answer.is_some() && violations.is_empty();
    if super::budget::stop_when_over_budget(step, &node.node_id, answer_is_valid) {
        return Ok(());
    }
    match answer {
        Some(answer) if violations.is_empty() => complete_node(step, node, attempt, answer),
        _ => reprompt_or_fail(step, node, attempt, violations),
    }
}

pub(super) fn complete_node(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
    attempt: u32,
    answer: Value,
) -> Result<(), CoreError> {
    let output = Arc::new(answer);
    let mut usage = frames::TokenTotals::of(&Default::default());
    let (mut model, mut duration_ms, mut cost_usd) = (None, None, None);
    if let Some(record) = step.state.node_mut(&node.node_id) {
        record.status = NodeStatus::Completed;
        record.output = Some(output.clone());
        record.feedback.clear();
        usage = frames::TokenTotals::of(&record.usage);
        model = record.model.clone();
        cost_usd = record
            .cost_usd
            .map(crate::catalog::model_catalog::round_cost);
        duration_ms = record
            .started_at_millis
            .map(|started| step.now.unix_millis().saturating_sub(started));
    }
    let completed = frames::node_complete(
        &step.stamp(),
        node,
        &frames::NodeCompletePayload {
            attempt,
            output_facets: Cow::Borrowed(&node.output_facets),
            output: output.clone(),
            usage,
            model,
            duration_ms,
            cost_usd,
            reused: false,
        },
    );
    step.emit(completed);
    if node.builtin().is_none() {
        emit_node_metrics(step, node);
    }
    let occurrence = Occurrence::NodeComplete {
        node,
        output: &output,
    };
    match policy::fire(step, &occurrence)? {
        Applied::Ended | Applied::Replanned => return super::progress::continue_run(step),
        Applied::Continue | Applied::Held => {}
    }
    super::quality::judge_review(step, node)?;
    super::progress::continue_run(step)
}

fn reprompt_or_fail(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
    attempt: u32,
    violations: Vec<SchemaViolation>,
) -> Result<(), CoreError> {
    let invalid = frames::node_validation_error(
        &step.stamp(),
        node,
        format!("attempt {attempt} broke the node's output contract"),
        &frames::ValidationErrorPayload {
            scope: frames::ValidationScope::NodeOutput,
            attempt: Some(attempt),
            errors: frames::ValidationErrors::Schema(violations.clone()),
        },
    );
    step.emit(invalid);
    let occurrence = Occurrence::ValidationFail {
        node,
        attempt,
        violations: &violations,
    };
    match policy::fire(step, &occurrence)? {
        Applied::Ended => return Ok(()),
        Applied::Replanned => return super::progress::continue_run(step),
        Applied::Held => {
            // The node runs again (with the feedback) once the hold is released.
            if let Some(record) = step.state.node_mut(&node.node_id) {
                record.feedback = violations;
                record.status = NodeStatus::Pending;
            }
            return Ok(());
        }
        Applied::Continue => {}
    }
    let max_attempts = step.state.max_node_attempts;
    let attempt_base = step
        .state
        .nodes
        .get(&node.node_id)
        .map_or(0, |record| record.attempt_base);
    if attempt.saturating_sub(attempt_base) < max_attempts {
        if let Some(record) = step.state.node_mut(&node.node_id) {
            record.feedback = violations;
            record.current_attempt = attempt + 1;
            record.status = NodeStatus::Scheduled;
        }
        step.enqueue(StepCommand::ExecuteNode {
            node_id: node.node_id.clone(),
            attempt: attempt + 1,
        });
        return Ok(());
    }
    let escalation = super::escalation::Escalation {
        trigger: "attempts_exhausted",
        rationale: format!(
            "{} never produced valid output; trying the next-ranked capability",
            node.capability_id
        ),
        said: format!("{} ran out of attempts", node.capability_id),
    };
    if super::escalation::fall_back_to_next_capability(step, node, escalation)? {
        return super::progress::continue_run(step);
    }
    step.fail_node(
        node,
        attempt,
        FailureCode::OutputContractViolated,
        &format!("output contract still violated after {attempt} attempts"),
        &format!("node {} never produced valid output", node.node_id),
    );
    Ok(())
}
