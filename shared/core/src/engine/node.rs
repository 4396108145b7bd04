//! Node steps: check the node's input against its contract, then resolve it
//! here (built-in operations, human parking) or ask the shell to call the
//! model; then decide the model's answer (judged against the output
//! contract, or a failure) for governance (`node_answers`) to act on.

use serde_json::{Value, json};

use crate::basics::error::CoreError;
use crate::basics::instant::Instant;
use crate::basics::schema::collect_violations;
use crate::planning::plan::{BuiltinOperation, NodeExecutor, PlanNode};
use crate::state::context::build_context_bundle;
use crate::state::run::RunState;
use crate::wire::frames::{self, ExecutorType, RunPhase};

use super::decision::EngineContext;
use super::effects::{ModelCall, ModelOutcome, StepAdvance};
use super::lifecycle::RunTransition;
use super::narration::hand_over;
use super::node_answers::reject_input;
use super::node_answers::{AttemptDecided, DecidedAttempt, decide_answer, take_answer};
use super::plan_lookup::{plan_node_in, plan_of, start_payload};
use super::step_context::StepContext;

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
    if engine
        .unavailable_capabilities
        .contains(&node.capability_id)
    {
        let mut step = StepContext::new(state.clone(), now, engine);
        super::escalation::escalate_unavailable(&mut step, node, attempt)?;
        return Ok(step.into_advance());
    }
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
            let answer = perform_builtin(step.state(), operation);
            take_answer(&mut step, node, attempt, Ok(answer))?;
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
        NodeExecutor::Human => hand_to_a_person(state, node, attempt, bundle, now, engine),
        NodeExecutor::Model => Ok(
            match super::memory_steps::recall_for(state, node, attempt, &bundle) {
                Some(recall) => StepAdvance::Perform(super::effects::Effect::RecallMemory(recall)),
                None => {
                    super::memory_steps::model_call(state, node, attempt, &bundle, now, Vec::new())
                }
            },
        ),
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
) -> Result<StepAdvance, CoreError> {
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
        .state()
        .governance
        .escalation_taken_over_by(&node.output_facets)
        .cloned();
    if let Some(plan) = step.state().plan.as_deref() {
        payload.rationale = Some(super::human::why_a_person(
            plan,
            node,
            payload.escalated_from.as_ref(),
        ));
    }
    if let Some(record) = step.state_mut().node_mut(&node.node_id) {
        super::lifecycle::move_node(record, super::lifecycle::NodeTransition::ParkForPerson);
    }
    if step.state().governance.hold.is_none() {
        step.move_run(RunTransition::ParkForPerson)?;
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
    super::human::schedule_reminder(&mut step, node, attempt, 1);
    Ok(step.into_advance())
}

/// Decides a model node's attempt from the model's outcome: records its
/// usage and judges its answer (or takes its failure), and hands the step
/// back with what was decided. Governance is not here: the step driver
/// passes the decided attempt to `node_answers::govern_attempt`, in the
/// same step (decide, then govern and apply).
pub(super) fn resume_node<'e, 'r>(
    state: RunState,
    call: &ModelCall,
    outcome: &ModelOutcome,
    now: Instant,
    engine: &'e EngineContext<'r>,
) -> Result<(StepContext<'e, 'r>, DecidedAttempt), CoreError> {
    let plan = plan_of(&state)?;
    let node = plan_node_in(&plan, &state, &call.node_id)?;
    let mut step = StepContext::new(state, now, engine);
    step.state_mut().phase = Some(RunPhase::of_node(node.kind));
    if let Some(record) = step.state_mut().node_mut(&node.node_id) {
        record.started_at_millis = Some(call.started_at_millis);
    }
    let decided = match outcome {
        Ok(answer) => {
            let parsed = serde_json::from_str::<Value>(&answer.content);
            super::usage_recording::record_model_usage(
                &mut step,
                &node.node_id,
                &answer.model,
                &answer.usage,
                super::usage_recording::operation_of(node),
            );
            AttemptDecided::Judged(decide_answer(&step, node, parsed)?)
        }
        Err(failure) => AttemptDecided::ModelFailed(failure.clone()),
    };
    let node_id = node.node_id.clone();
    Ok((
        step,
        DecidedAttempt {
            plan,
            node_id,
            attempt: call.attempt,
            decided,
        },
    ))
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
