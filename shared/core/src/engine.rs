//! The step state machine: `decide(state, input, now) -> Decision`.
//!
//! The shell (baton-runtime) loads a run, performs one effect (plan, call a
//! model, park for a human) and hands the result here; the returned state,
//! events and outbox are committed in one transaction. Nothing in here
//! performs I/O, reads a clock or draws randomness.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::CoreError;
use crate::capability::AgentType;
use crate::context::{
    ModelRequest, build_context_bundle, build_model_request, facet_value_for_node,
};
use crate::diagnostics::{DiagnosticsBundle, PlanDiagnostic, PlanStatus};
use crate::envelope::TaskEnvelope;
use crate::event::{EventDraft, EventType};
use crate::plan::{PlanGraph, PlanNode};
use crate::registry::Registry;
use crate::run::{
    NodeRecord, NodeStatus, RunFailure, RunState, RunStatus, StepCommand, StepMessage, TokenUsage,
};
use crate::schema::{SchemaViolation, ValidatorCache, collect_violations};
use crate::validator::{rejected_bundle, validate_plan};

/// Default bound on attempts per node: the first try plus two re-prompts.
pub const DEFAULT_MAX_NODE_ATTEMPTS: u32 = 3;

/// What one step decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub state: RunState,
    pub events: Vec<EventDraft>,
    pub outbox: Vec<StepMessage>,
}

/// Identity of a new run, chosen by the shell.
#[derive(Debug, Clone)]
pub struct NewRunIdentity {
    pub run_id: String,
    pub tenant_id: String,
    pub correlation_id: String,
    pub thread_id: String,
}

/// What the shell observed, fed back into the machine.
#[derive(Debug, Clone, PartialEq)]
pub enum StepInput {
    /// The planner ran: a plan, or the diagnostics of why none exists.
    PlanDrafted(Result<PlanGraph, Vec<PlanDiagnostic>>),
    /// Same, on planner attempt `attempt` (earlier attempts were rejected).
    PlanDraftedOnAttempt {
        drafted: Result<PlanGraph, Vec<PlanDiagnostic>>,
        attempt: u32,
    },
    /// The model answered attempt `attempt` of `node_id` with `content`.
    NodeAnswered {
        node_id: String,
        attempt: u32,
        content: String,
        usage: TokenUsage,
    },
    /// The capability could not be invoked (the provider gave up).
    NodeInvocationFailed {
        node_id: String,
        attempt: u32,
        code: String,
        message: String,
    },
    /// The node's input failed its compiled input contract; nothing was invoked.
    NodeInputRejected {
        node_id: String,
        attempt: u32,
        violations: Vec<SchemaViolation>,
    },
    /// The node is performed by a human; the run parks.
    NodeParkedForHuman { node_id: String, attempt: u32 },
    /// The caller cancelled the run.
    CancelRequested { reason: String },
    /// The shell cannot go on with the run (e.g. its state no longer fits
    /// the store): it fails with `code`.
    RunFailed { code: String, message: String },
}

/// Read-only collaborators of `decide`.
pub struct EngineContext<'a> {
    pub registry: &'a Registry,
    pub validators: &'a ValidatorCache,
}

/// How the shell must perform a node.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeDispatch {
    Model(ModelRequest),
    Human,
    InputRejected(Vec<SchemaViolation>),
    /// An orchestrator-managed node's answer, computed here: feed it back as
    /// `NodeAnswered` without calling anything.
    Builtin(String),
}

/// Computes an orchestrator-managed node's output from its upstream outputs.
fn perform_builtin(state: &RunState, operation: &crate::plan::BuiltinOperation) -> Value {
    match operation {
        crate::plan::BuiltinOperation::ConcatArrays { facet, sources } => {
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

/// Creates the run: its state, the `start` frame and the planning step.
pub fn start_run(
    identity: NewRunIdentity,
    envelope: TaskEnvelope,
    now: &str,
    max_node_attempts: u32,
) -> Decision {
    let state = RunState {
        run_id: identity.run_id.clone(),
        tenant_id: identity.tenant_id.clone(),
        correlation_id: identity.correlation_id.clone(),
        thread_id: identity.thread_id.clone(),
        envelope: Arc::new(envelope),
        status: RunStatus::Queued,
        plan: None,
        plan_diagnostics: None,
        nodes: Default::default(),
        output: None,
        observed_satisfaction: None,
        failure: None,
        created_at: now.to_string(),
        updated_at: now.to_string(),
        max_node_attempts: max_node_attempts.max(1),
    };
    let start = EventDraft::new(EventType::Start, now)
        .message("run accepted")
        .payload(json!({
            "runId": identity.run_id,
            "threadId": identity.thread_id,
            "correlationId": identity.correlation_id,
            "objective": state.envelope.objective,
        }));
    Decision {
        outbox: vec![StepMessage::new(
            &identity.tenant_id,
            &identity.run_id,
            StepCommand::Plan,
        )],
        events: vec![start],
        state,
    }
}

/// Whether `command` no longer applies to `state` (a duplicate or late delivery).
pub fn is_stale(state: &RunState, command: &StepCommand) -> bool {
    if state.status.is_terminal() {
        return true;
    }
    match command {
        StepCommand::Plan => state.status != RunStatus::Queued,
        StepCommand::ExecuteNode { node_id, attempt } => {
            !state.nodes.get(node_id).is_some_and(|record| {
                record.status == NodeStatus::Scheduled && record.current_attempt == *attempt
            })
        }
    }
}

fn plan_node<'s>(state: &'s RunState, node_id: &str) -> Result<&'s PlanNode, CoreError> {
    state
        .plan
        .as_ref()
        .and_then(|plan| plan.node(node_id))
        .ok_or_else(|| {
            CoreError::StepDoesNotApply(format!("run {} has no node {node_id}", state.run_id))
        })
}

/// Decides how to perform `node_id`: builds the context bundle, validates it
/// against the node's input contract, and builds the model request.
pub fn dispatch_node(
    state: &RunState,
    node_id: &str,
    context: &EngineContext<'_>,
) -> Result<NodeDispatch, CoreError> {
    let node = plan_node(state, node_id)?;
    let mut bundle = build_context_bundle(state, node, context.registry);
    let validator = context.validators.validator_for_key(
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
        return Ok(NodeDispatch::InputRejected(violations));
    }
    if let Some(operation) = &node.builtin {
        return Ok(NodeDispatch::Builtin(
            perform_builtin(state, operation).to_string(),
        ));
    }
    if node.agent_type == AgentType::Human {
        return Ok(NodeDispatch::Human);
    }
    Ok(NodeDispatch::Model(build_model_request(node, &bundle)))
}

/// Frames appended when a worker claims a node, before it calls the model.
pub fn node_start_events(
    state: &RunState,
    node_id: &str,
    attempt: u32,
    now: &str,
) -> Result<Vec<EventDraft>, CoreError> {
    let node = plan_node(state, node_id)?;
    let plan_version = state.plan.as_ref().map_or(1, |plan| plan.plan_version);
    Ok(vec![
        EventDraft::new(EventType::NodeStart, now)
            .node(node_id)
            .plan_version(plan_version)
            .message(node.label.clone())
            .payload(json!({
                "capabilityId": node.capability_id,
                "kind": node.kind,
                "executorType": "ai",
                "attempt": attempt,
                "inputFacets": node.input_facets,
                "outputFacets": node.output_facets,
            })),
    ])
}

/// Applies one observed result to the run.
pub fn decide(
    mut state: RunState,
    input: StepInput,
    now: &str,
    context: &EngineContext<'_>,
) -> Result<Decision, CoreError> {
    state.updated_at = now.to_string();
    let mut events = Vec::new();
    let mut outbox = Vec::new();
    match input {
        StepInput::PlanDrafted(drafted) => decide_plan(
            &mut state,
            drafted,
            1,
            now,
            context,
            &mut events,
            &mut outbox,
        )?,
        StepInput::PlanDraftedOnAttempt { drafted, attempt } => decide_plan(
            &mut state,
            drafted,
            attempt,
            now,
            context,
            &mut events,
            &mut outbox,
        )?,
        StepInput::NodeAnswered {
            node_id,
            attempt,
            content,
            usage,
        } => decide_answer(
            &mut state,
            &node_id,
            attempt,
            &content,
            usage,
            now,
            context,
            &mut events,
            &mut outbox,
        )?,
        StepInput::NodeInvocationFailed {
            node_id,
            attempt,
            code,
            message,
        } => {
            let plan_version = current_plan_version(&state);
            if let Some(record) = state.nodes.get_mut(&node_id) {
                record.status = NodeStatus::Failed;
                record.error = Some(message.clone());
            }
            events.push(
                EventDraft::new(EventType::NodeError, now)
                    .node(&node_id)
                    .plan_version(plan_version)
                    .message(message.clone())
                    .payload(json!({"code": code, "attempt": attempt})),
            );
            fail_run(
                &mut state,
                &code,
                &format!("node {node_id} failed: {message}"),
                now,
                &mut events,
            );
        }
        StepInput::NodeInputRejected {
            node_id,
            attempt,
            violations,
        } => {
            let plan_version = current_plan_version(&state);
            events.push(
                EventDraft::new(EventType::ValidationError, now)
                    .node(&node_id)
                    .plan_version(plan_version)
                    .message("node input does not satisfy its compiled input contract")
                    .payload(
                        json!({"scope": "node_input", "attempt": attempt, "errors": violations}),
                    ),
            );
            if let Some(record) = state.nodes.get_mut(&node_id) {
                record.status = NodeStatus::Failed;
                record.error = Some("input contract violated".into());
            }
            events.push(
                EventDraft::new(EventType::NodeError, now)
                    .node(&node_id)
                    .plan_version(plan_version)
                    .message("input contract violated; the capability was not invoked")
                    .payload(json!({"code": "input_contract_violated", "attempt": attempt})),
            );
            fail_run(
                &mut state,
                "input_contract_violated",
                &format!("node {node_id} received input that breaks its contract"),
                now,
                &mut events,
            );
        }
        StepInput::RunFailed { code, message } => {
            if !state.status.is_terminal() {
                fail_run(&mut state, &code, &message, now, &mut events);
            }
        }
        StepInput::CancelRequested { reason } => {
            if !state.status.is_terminal() {
                state.status = RunStatus::Cancelled;
                state.failure = Some(RunFailure {
                    code: "cancelled".into(),
                    message: reason.clone(),
                });
                events.push(
                    EventDraft::new(EventType::Error, now)
                        .message(format!("run cancelled: {reason}"))
                        .payload(json!({"code": "cancelled", "status": state.status.as_str()})),
                );
            }
        }
        StepInput::NodeParkedForHuman { node_id, attempt } => {
            let node = plan_node(&state, &node_id)?.clone();
            let plan_version = current_plan_version(&state);
            let bundle = build_context_bundle(&state, &node, context.registry);
            if let Some(record) = state.nodes.get_mut(&node_id) {
                record.status = NodeStatus::AwaitingHuman;
            }
            state.status = RunStatus::AwaitingHuman;
            events.push(
                EventDraft::new(EventType::NodeStart, now)
                    .node(&node_id)
                    .plan_version(plan_version)
                    .message(node.label.clone())
                    .payload(json!({
                        "capabilityId": node.capability_id,
                        "kind": node.kind,
                        "executorType": "human",
                        "attempt": attempt,
                        "inputFacets": node.input_facets,
                        "outputFacets": node.output_facets,
                        "contract": {
                            "inputSchema": node.input_contract.schema,
                            "outputSchema": node.output_contract.schema,
                            "provenance": node.output_contract.provenance,
                        },
                        "instructions": node.instructions,
                        "inputs": bundle.inputs,
                    })),
            );
        }
    }
    Ok(Decision {
        state,
        events,
        outbox,
    })
}

fn current_plan_version(state: &RunState) -> u32 {
    state.plan.as_ref().map_or(1, |plan| plan.plan_version)
}

/// The run's token use against `policies.planner.optimisation.maxTokens`:
/// a message when the budget is passed.
fn token_budget_exceeded(state: &RunState) -> Option<String> {
    let budget = state.envelope.policies.token_budget()?;
    let used: u64 = state
        .nodes
        .values()
        .map(|record| record.usage.prompt_tokens + record.usage.completion_tokens)
        .sum();
    (used > budget).then(|| {
        format!("the run used {used} tokens, over policies.planner.optimisation.maxTokens {budget}")
    })
}

fn fail_run(
    state: &mut RunState,
    code: &str,
    message: &str,
    now: &str,
    events: &mut Vec<EventDraft>,
) {
    state.status = RunStatus::Failed;
    state.failure = Some(RunFailure {
        code: code.to_string(),
        message: message.to_string(),
    });
    events.push(
        EventDraft::new(EventType::Error, now)
            .message(message.to_string())
            .payload(json!({"code": code, "status": state.status.as_str()})),
    );
}

fn plan_generated_payload(plan: &PlanGraph, bundle: &DiagnosticsBundle) -> Value {
    let nodes: Vec<Value> = plan
        .nodes
        .iter()
        .map(|node| {
            json!({
                "nodeId": node.node_id,
                "capabilityId": node.capability_id,
                "label": node.label,
                "kind": node.kind,
                "agentType": node.agent_type,
                "derived": node.derived,
                "provides": node.output_facets,
                "enforces": if node.kind == crate::capability::NodeKind::Validation { node.output_facets.clone() } else { Vec::new() },
            })
        })
        .collect();
    json!({
        "planVersion": plan.plan_version,
        "plannerRuntime": plan.planner_runtime,
        "plannerModel": plan.planner_model,
        "nodes": nodes,
        "edges": plan.edges,
        "derivedCapabilities": plan.nodes.iter().filter(|node| node.derived).map(|node| node.capability_id.as_str()).collect::<Vec<_>>(),
        "branchCount": plan.nodes.iter().filter(|node| node.variant.is_some()).count(),
        "normalizationInjected": plan.metadata.get("normalizationInjected").cloned().unwrap_or(Value::Bool(false)),
        "metadata": plan.metadata,
        "status": bundle.status,
        "satisfactionScore": bundle.satisfaction_score,
        "failures": bundle.failures,
        "warnings": bundle.warnings,
        "infos": bundle.infos,
    })
}

#[allow(clippy::too_many_arguments)]
fn decide_plan(
    state: &mut RunState,
    drafted: Result<PlanGraph, Vec<PlanDiagnostic>>,
    attempt: u32,
    now: &str,
    context: &EngineContext<'_>,
    events: &mut Vec<EventDraft>,
    outbox: &mut Vec<StepMessage>,
) -> Result<(), CoreError> {
    let capability_ids: Vec<&str> = context
        .registry
        .capabilities()
        .map(|c| c.capability_id.as_str())
        .collect();
    let mut policy_keys: Vec<String> = state.envelope.policies.hints.keys().cloned().collect();
    if state.envelope.policies.planner.is_some() {
        policy_keys.push("planner".into());
    }
    if !state.envelope.policies.runtime.is_empty() {
        policy_keys.push("runtime".into());
    }
    events.push(EventDraft::new(EventType::PlanRequested, now).message("planning").payload(json!({
        "attempt": attempt,
        "policyKeys": policy_keys,
        "capabilitySnapshot": {"count": capability_ids.len(), "capabilityIds": capability_ids},
    })));
    let (plan, bundle) = match drafted {
        Ok(plan) => {
            let bundle =
                validate_plan(&plan, &state.envelope, context.registry, context.validators);
            (Some(plan), bundle)
        }
        Err(diagnostics) => (None, rejected_bundle(diagnostics)),
    };
    state.plan_diagnostics = Some(bundle.clone());
    let plan = match plan {
        Some(plan) if bundle.status != PlanStatus::Rejected => plan,
        _ => {
            events.push(
                EventDraft::new(EventType::PlanRejected, now)
                    .message("no plan satisfies the contract")
                    .payload(serde_json::to_value(&bundle).unwrap_or(Value::Null)),
            );
            state.status = RunStatus::PlanRejected;
            let summary = bundle
                .failures
                .iter()
                .filter_map(|failure| {
                    failure
                        .suggestion
                        .clone()
                        .or_else(|| failure.constraint.clone())
                })
                .collect::<Vec<_>>()
                .join(" ");
            state.failure = Some(RunFailure {
                code: "plan_rejected".into(),
                message: summary.clone(),
            });
            events.push(
                EventDraft::new(EventType::Error, now)
                    .message(format!("plan rejected: {summary}"))
                    .payload(json!({"code": "plan_rejected", "status": state.status.as_str()})),
            );
            return Ok(());
        }
    };
    events.push(
        EventDraft::new(EventType::PlanGenerated, now)
            .plan_version(plan.plan_version)
            .payload(plan_generated_payload(&plan, &bundle)),
    );
    state.nodes = plan
        .nodes
        .iter()
        .map(|node| (node.node_id.clone(), NodeRecord::pending()))
        .collect();
    state.plan = Some(Arc::new(plan));
    state.status = RunStatus::Running;
    schedule_ready_nodes(state, outbox);
    if state.nodes.is_empty() {
        finish_run(state, now, context, events)?;
    }
    Ok(())
}

/// Marks every pending node whose upstream nodes all completed as scheduled
/// and puts its first-attempt step in the outbox.
fn schedule_ready_nodes(state: &mut RunState, outbox: &mut Vec<StepMessage>) {
    let Some(plan) = state.plan.as_ref() else {
        return;
    };
    let completed: BTreeSet<&str> = state
        .nodes
        .iter()
        .filter(|(_, record)| record.status == NodeStatus::Completed)
        .map(|(node_id, _)| node_id.as_str())
        .collect();
    let ready: Vec<String> = plan
        .nodes
        .iter()
        .filter(|node| {
            state
                .nodes
                .get(&node.node_id)
                .is_some_and(|record| record.status == NodeStatus::Pending)
        })
        .filter(|node| {
            plan.upstream_of(&node.node_id)
                .iter()
                .all(|upstream| completed.contains(upstream))
        })
        .map(|node| node.node_id.clone())
        .collect();
    for node_id in ready {
        if let Some(record) = state.nodes.get_mut(&node_id) {
            record.status = NodeStatus::Scheduled;
            record.current_attempt = 1;
            outbox.push(StepMessage::new(
                &state.tenant_id,
                &state.run_id,
                StepCommand::ExecuteNode {
                    node_id,
                    attempt: 1,
                },
            ));
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn decide_answer(
    state: &mut RunState,
    node_id: &str,
    attempt: u32,
    content: &str,
    usage: TokenUsage,
    now: &str,
    context: &EngineContext<'_>,
    events: &mut Vec<EventDraft>,
    outbox: &mut Vec<StepMessage>,
) -> Result<(), CoreError> {
    let node = plan_node(state, node_id)?;
    let plan_version = current_plan_version(state);
    let violations = match serde_json::from_str::<Value>(content) {
        Err(error) => (
            None,
            vec![SchemaViolation {
                instance_pointer: String::new(),
                schema_pointer: String::new(),
                message: format!("the answer is not valid JSON: {error}"),
                facet: None,
            }],
        ),
        Ok(answer) => {
            let validator = context.validators.validator_for_key(
                &node.output_contract.schema_key,
                &node.output_contract.schema,
                "output contract",
            )?;
            let mut violations = collect_violations(&validator, &answer);
            node.output_contract.attribute_violations(&mut violations);
            (Some(answer), violations)
        }
    };
    let output_facets = node.output_facets.clone();
    let is_builtin = node.builtin.is_some();
    let max_attempts = state.max_node_attempts;
    let Some(record) = state.nodes.get_mut(node_id) else {
        return Err(CoreError::StepDoesNotApply(format!(
            "no ledger entry for {node_id}"
        )));
    };
    record.usage.prompt_tokens += usage.prompt_tokens;
    record.usage.completion_tokens += usage.completion_tokens;
    if let Some(exceeded) = token_budget_exceeded(state) {
        let all_others_completed = state
            .nodes
            .iter()
            .all(|(id, record)| id == node_id || record.status == NodeStatus::Completed);
        let answer_is_valid = matches!(&violations, (Some(_), found) if found.is_empty());
        if !(all_others_completed && answer_is_valid) {
            // Spend no more: nothing else is scheduled or retried.
            if let Some(record) = state.nodes.get_mut(node_id) {
                record.status = NodeStatus::Failed;
                record.error = Some(exceeded.clone());
            }
            fail_run(state, "token_budget_exceeded", &exceeded, now, events);
            return Ok(());
        }
        // The last answer is in and valid: deliver it, and say the budget was passed.
        events.push(
            EventDraft::new(EventType::Warning, now)
                .node(node_id)
                .message(exceeded)
                .payload(json!({"code": "token_budget_exceeded"})),
        );
    }
    let Some(record) = state.nodes.get_mut(node_id) else {
        return Err(CoreError::StepDoesNotApply(format!(
            "no ledger entry for {node_id}"
        )));
    };
    match violations {
        (Some(answer), violations) if violations.is_empty() => {
            if is_builtin {
                events.push(
                    EventDraft::new(EventType::NodeStart, now)
                        .node(node_id)
                        .plan_version(plan_version)
                        .payload(json!({"capabilityId": crate::plan::BUILTIN_JOIN_CAPABILITY, "executorType": "builtin", "attempt": attempt})),
                );
            }
            record.status = NodeStatus::Completed;
            record.output = Some(Arc::new(answer));
            record.feedback.clear();
            events.push(
                EventDraft::new(EventType::NodeComplete, now)
                    .node(node_id)
                    .plan_version(plan_version)
                    .payload(json!({"attempt": attempt, "outputFacets": output_facets, "output": record.output})),
            );
            schedule_ready_nodes(state, outbox);
            let all_completed = state
                .nodes
                .values()
                .all(|record| record.status == NodeStatus::Completed);
            if all_completed {
                finish_run(state, now, context, events)?;
            }
        }
        (_, violations) => {
            events.push(
                EventDraft::new(EventType::ValidationError, now)
                    .node(node_id)
                    .plan_version(plan_version)
                    .message(format!(
                        "attempt {attempt} broke the node's output contract"
                    ))
                    .payload(
                        json!({"scope": "node_output", "attempt": attempt, "errors": violations}),
                    ),
            );
            if attempt < max_attempts {
                record.feedback = violations;
                record.current_attempt = attempt + 1;
                record.status = NodeStatus::Scheduled;
                outbox.push(StepMessage::new(
                    &state.tenant_id,
                    &state.run_id,
                    StepCommand::ExecuteNode {
                        node_id: node_id.to_string(),
                        attempt: attempt + 1,
                    },
                ));
            } else {
                record.status = NodeStatus::Failed;
                record.error = Some(format!(
                    "output contract still violated after {attempt} attempts"
                ));
                events.push(
                    EventDraft::new(EventType::NodeError, now)
                        .node(node_id)
                        .plan_version(plan_version)
                        .message(format!(
                            "output contract still violated after {attempt} attempts"
                        ))
                        .payload(json!({"code": "output_contract_violated", "attempt": attempt})),
                );
                fail_run(
                    state,
                    "output_contract_violated",
                    &format!("node {node_id} never produced valid output"),
                    now,
                    events,
                );
            }
        }
    }
    Ok(())
}

/// Assembles the final output from produced or supplied facets, validates
/// it against the caller's schema and constraints, and completes or fails.
fn finish_run(
    state: &mut RunState,
    now: &str,
    context: &EngineContext<'_>,
    events: &mut Vec<EventDraft>,
) -> Result<(), CoreError> {
    let mut output = Map::new();
    let mut facet_values = Map::new();
    if let Some(plan) = state.plan.as_ref() {
        for property in state.envelope.output_contract.top_level_properties() {
            let value = match plan.final_producer_of(&property) {
                Some(producer) => state
                    .nodes
                    .get(&producer.node_id)
                    .and_then(|record| record.output.as_ref())
                    .and_then(|answer| answer.get(&property))
                    .cloned(),
                None => state.envelope.inputs.get(&property).cloned(),
            };
            if let Some(value) = value {
                output.insert(property, value);
            }
        }
        for node in &plan.nodes {
            for facet in &node.output_facets {
                if let Some(value) = state
                    .nodes
                    .get(&node.node_id)
                    .and_then(|r| r.output.as_ref())
                    .and_then(|o| o.get(facet))
                {
                    facet_values.insert(facet.clone(), value.clone());
                }
            }
            for facet in &node.input_facets {
                if !facet_values.contains_key(facet)
                    && let Some(value) = facet_value_for_node(state, node, facet)
                {
                    facet_values.insert(facet.clone(), value);
                }
            }
        }
    }
    let output = Value::Object(output);
    let validator = context.validators.validator_for(
        &state.envelope.output_contract.schema,
        "$.outputContract.schema",
    )?;
    let violations = collect_violations(&validator, &output);
    if !violations.is_empty() {
        events.push(
            EventDraft::new(EventType::ValidationError, now)
                .message("the assembled output does not satisfy the caller's contract")
                .payload(json!({"scope": "output", "errors": violations})),
        );
        fail_run(
            state,
            "output_contract_violated",
            "the assembled output does not satisfy outputContract.schema",
            now,
            events,
        );
        return Ok(());
    }
    let mut evaluation_scope = facet_values;
    for (key, value) in output.as_object().into_iter().flatten() {
        evaluation_scope.insert(key.clone(), value.clone());
    }
    let (observed, broken_hard) =
        evaluate_constraints(&state.envelope, &Value::Object(evaluation_scope));
    state.observed_satisfaction = Some(observed);
    if !broken_hard.is_empty() {
        events.push(
            EventDraft::new(EventType::ValidationError, now)
                .message("hard constraints do not hold on the output")
                .payload(json!({"scope": "constraints", "errors": broken_hard})),
        );
        fail_run(
            state,
            "hard_constraint_violated",
            "hard constraints do not hold on the output",
            now,
            events,
        );
        return Ok(());
    }
    let usage = state
        .nodes
        .values()
        .fold(TokenUsage::default(), |mut total, record| {
            total.prompt_tokens += record.usage.prompt_tokens;
            total.completion_tokens += record.usage.completion_tokens;
            total
        });
    events.push(EventDraft::new(EventType::Metrics, now).payload(json!({
        "tokens": {"prompt": usage.prompt_tokens, "completion": usage.completion_tokens, "total": usage.prompt_tokens + usage.completion_tokens},
        "nodes": state.nodes.len(),
    })));
    state.status = RunStatus::Completed;
    state.output = Some(output.clone());
    let symbolic = state
        .plan_diagnostics
        .as_ref()
        .map(|bundle| bundle.satisfaction_score);
    events.push(
        EventDraft::new(EventType::Complete, now)
            .plan_version(current_plan_version(state))
            .payload(json!({
                "output": output,
                "status": state.status.as_str(),
                "satisfactionScore": symbolic,
                "observedSatisfaction": observed,
            })),
    );
    Ok(())
}

/// Evaluates the contract's constraints (JSONLogic, via datalogic-rs) over
/// `scope`. Returns the observed weighted score and the broken hard ones.
fn evaluate_constraints(envelope: &TaskEnvelope, scope: &Value) -> (f64, Vec<Value>) {
    use crate::diagnostics::{ConstraintOutcome, satisfaction_score};
    let engine = datalogic_rs::Engine::new();
    let data = scope.to_string();
    let mut outcomes = Vec::new();
    let mut broken_hard = Vec::new();
    for (index, constraint) in envelope.output_contract.constraints.iter().enumerate() {
        let holds = engine
            .eval_str(&constraint.expr.to_string(), &data)
            .map(|result| {
                serde_json::from_str::<Value>(&result).is_ok_and(|value| match value {
                    Value::Bool(flag) => flag,
                    Value::Null => false,
                    Value::Number(number) => number.as_f64().is_some_and(|n| n != 0.0),
                    Value::String(text) => !text.is_empty(),
                    Value::Array(items) => !items.is_empty(),
                    Value::Object(_) => true,
                })
            })
            .unwrap_or(false);
        outcomes.push(ConstraintOutcome {
            level: constraint.level,
            satisfiable: holds,
        });
        if !holds && constraint.level == crate::contract::ConstraintLevel::Hard {
            broken_hard.push(json!({
                "constraintId": constraint.constraint_id.clone().unwrap_or_else(|| format!("constraints[{index}]")),
                "constraint": constraint.expr,
            }));
        }
    }
    (satisfaction_score(&outcomes), broken_hard)
}

#[cfg(test)]
mod tests {
    //! Table-driven engine tests: (state, input) → (status, event types, outbox).

    use super::*;
    use crate::capability::CapabilityRegistration;
    use crate::facet::{Facet, FacetDirection};
    use crate::planner::plan_deterministically;

    const NOW: &str = "2026-01-01T00:00:00Z";

    fn registry() -> Registry {
        let mut registry = Registry::default();
        for name in ["notes", "brief", "draft"] {
            registry
                .add_facet(
                    Facet {
                        name: name.into(),
                        title: name.into(),
                        description: name.into(),
                        schema: json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}),
                        semantics: String::new(),
                        direction: FacetDirection::Bidirectional,
                        required_by_default: true,
                        metadata: Map::new(),
                    },
                    "test",
                )
                .unwrap();
        }
        for (id, input, output) in [
            ("plan.brief", "notes", "brief"),
            ("write.draft", "brief", "draft"),
        ] {
            let capability: CapabilityRegistration = serde_json::from_value(json!({
                "capabilityId": id, "agentType": "ai", "version": "1", "displayName": id, "summary": id,
                "inputContract": [input], "outputContract": [output]
            }))
            .unwrap();
            registry.add_capability(capability, "test").unwrap();
        }
        registry
    }

    fn envelope() -> TaskEnvelope {
        TaskEnvelope::parse_value(&json!({
            "objective": "o",
            "inputs": {"notes": {"text": "n"}},
            "outputContract": {"schema": {"type": "object", "required": ["draft"], "properties": {"draft": {"type": "object"}}}}
        }))
        .unwrap()
    }

    fn started() -> RunState {
        let identity = NewRunIdentity {
            run_id: "run".into(),
            tenant_id: "t".into(),
            correlation_id: "c".into(),
            thread_id: "th".into(),
        };
        start_run(identity, envelope(), NOW, 3).state
    }

    fn planned(registry: &Registry, validators: &ValidatorCache) -> RunState {
        let context = EngineContext {
            registry,
            validators,
        };
        let state = started();
        let plan = plan_deterministically(&state.envelope, registry);
        decide(state, StepInput::PlanDrafted(plan), NOW, &context)
            .unwrap()
            .state
    }

    fn answer(node: &str, attempt: u32, content: Value) -> StepInput {
        StepInput::NodeAnswered {
            node_id: node.into(),
            attempt,
            content: content.to_string(),
            usage: TokenUsage::default(),
        }
    }

    fn event_types(decision: &Decision) -> Vec<&'static str> {
        decision
            .events
            .iter()
            .map(|event| event.event_type.as_str())
            .collect()
    }

    fn outbox(decision: &Decision) -> Vec<String> {
        decision
            .outbox
            .iter()
            .map(|message| message.message_id.clone())
            .collect()
    }

    #[test]
    fn start_run_emits_start_and_queues_planning() {
        let identity = NewRunIdentity {
            run_id: "run".into(),
            tenant_id: "t".into(),
            correlation_id: "c".into(),
            thread_id: "th".into(),
        };
        let decision = start_run(identity, envelope(), NOW, 3);
        assert_eq!(event_types(&decision), vec!["start"]);
        assert_eq!(outbox(&decision), vec!["run:plan"]);
        assert_eq!(decision.state.status, RunStatus::Queued);
    }

    #[test]
    fn step_table() {
        let registry = registry();
        let validators = ValidatorCache::new();
        let context = EngineContext {
            registry: &registry,
            validators: &validators,
        };
        let valid_brief = json!({"brief": {"text": "b"}});
        let valid_draft = json!({"draft": {"text": "d"}});
        let mut after_first_node = planned(&registry, &validators);
        after_first_node = decide(
            after_first_node,
            answer("node_1", 1, valid_brief.clone()),
            NOW,
            &context,
        )
        .unwrap()
        .state;
        let mut on_last_attempt = planned(&registry, &validators);
        if let Some(record) = on_last_attempt.nodes.get_mut("node_1") {
            record.current_attempt = 3;
        }
        struct Row {
            name: &'static str,
            state: RunState,
            input: StepInput,
            status: RunStatus,
            events: Vec<&'static str>,
            outbox: Vec<&'static str>,
        }
        let rows = vec![
            Row {
                name: "plan accepted schedules the first node",
                state: started(),
                input: StepInput::PlanDrafted(plan_deterministically(&envelope(), &registry)),
                status: RunStatus::Running,
                events: vec!["plan_requested", "plan_generated"],
                outbox: vec!["run:node_1:1"],
            },
            Row {
                name: "no plan rejects the run",
                state: started(),
                input: StepInput::PlanDrafted(Err(vec![PlanDiagnostic::hard(
                    "output.draft",
                    crate::diagnostics::DiagnosticCause::MissingProducer,
                    "draft is produced",
                )])),
                status: RunStatus::PlanRejected,
                events: vec!["plan_requested", "plan_rejected", "error"],
                outbox: vec![],
            },
            Row {
                name: "a valid answer completes the node and schedules the next",
                state: planned(&registry, &validators),
                input: answer("node_1", 1, valid_brief.clone()),
                status: RunStatus::Running,
                events: vec!["node_complete"],
                outbox: vec!["run:node_2:1"],
            },
            Row {
                name: "an invalid answer is re-prompted",
                state: planned(&registry, &validators),
                input: answer("node_1", 1, json!({"brief": {"wrong": true}})),
                status: RunStatus::Running,
                events: vec!["validation_error"],
                outbox: vec!["run:node_1:2"],
            },
            Row {
                name: "text that is not JSON is re-prompted",
                state: planned(&registry, &validators),
                input: StepInput::NodeAnswered {
                    node_id: "node_1".into(),
                    attempt: 1,
                    content: "{oops".into(),
                    usage: TokenUsage::default(),
                },
                status: RunStatus::Running,
                events: vec!["validation_error"],
                outbox: vec!["run:node_1:2"],
            },
            Row {
                name: "an invalid answer on the last attempt fails the run",
                state: on_last_attempt,
                input: answer("node_1", 3, json!({})),
                status: RunStatus::Failed,
                events: vec!["validation_error", "node_error", "error"],
                outbox: vec![],
            },
            Row {
                name: "the last node's valid answer completes the run",
                state: after_first_node.clone(),
                input: answer("node_2", 1, valid_draft),
                status: RunStatus::Completed,
                events: vec!["node_complete", "metrics", "complete"],
                outbox: vec![],
            },
            Row {
                name: "a provider failure fails the node and the run",
                state: after_first_node.clone(),
                input: StepInput::NodeInvocationFailed {
                    node_id: "node_2".into(),
                    attempt: 1,
                    code: "llm_server_error".into(),
                    message: "500".into(),
                },
                status: RunStatus::Failed,
                events: vec!["node_error", "error"],
                outbox: vec![],
            },
            Row {
                name: "a human node parks the run",
                state: after_first_node,
                input: StepInput::NodeParkedForHuman {
                    node_id: "node_2".into(),
                    attempt: 1,
                },
                status: RunStatus::AwaitingHuman,
                events: vec!["node_start"],
                outbox: vec![],
            },
        ];
        for row in rows {
            let decision = decide(row.state, row.input, NOW, &context).unwrap();
            assert_eq!(decision.state.status, row.status, "{}", row.name);
            assert_eq!(event_types(&decision), row.events, "{}", row.name);
            assert_eq!(outbox(&decision), row.outbox, "{}", row.name);
        }
    }

    #[test]
    fn completion_carries_the_output_and_feedback_reaches_the_next_attempt() {
        let registry = registry();
        let validators = ValidatorCache::new();
        let context = EngineContext {
            registry: &registry,
            validators: &validators,
        };
        let state = planned(&registry, &validators);
        let state = decide(
            state,
            answer("node_1", 1, json!({"brief": 1})),
            NOW,
            &context,
        )
        .unwrap()
        .state;
        let NodeDispatch::Model(request) = dispatch_node(&state, "node_1", &context).unwrap()
        else {
            unreachable!("node_1 is an AI node")
        };
        let user: Value = serde_json::from_str(&request.user_message).unwrap();
        assert_eq!(user["previousAttemptErrors"][0]["facet"], "brief");
        let state = decide(
            state,
            answer("node_1", 2, json!({"brief": {"text": "b"}})),
            NOW,
            &context,
        )
        .unwrap()
        .state;
        let done = decide(
            state,
            answer("node_2", 1, json!({"draft": {"text": "d"}})),
            NOW,
            &context,
        )
        .unwrap();
        assert_eq!(done.state.output, Some(json!({"draft": {"text": "d"}})));
        let complete = done.events.last().unwrap();
        assert_eq!(
            complete.payload.as_ref().unwrap()["output"]["draft"]["text"],
            "d"
        );
    }

    #[test]
    fn staleness_table() {
        let registry = registry();
        let validators = ValidatorCache::new();
        let context = EngineContext {
            registry: &registry,
            validators: &validators,
        };
        let planned_state = planned(&registry, &validators);
        let first = StepCommand::ExecuteNode {
            node_id: "node_1".into(),
            attempt: 1,
        };
        assert!(
            is_stale(&planned_state, &StepCommand::Plan),
            "planning twice"
        );
        assert!(!is_stale(&planned_state, &first));
        assert!(
            is_stale(
                &planned_state,
                &StepCommand::ExecuteNode {
                    node_id: "node_2".into(),
                    attempt: 1
                }
            ),
            "not scheduled yet"
        );
        let done = decide(
            planned_state,
            answer("node_1", 1, json!({"brief": {"text": "b"}})),
            NOW,
            &context,
        )
        .unwrap()
        .state;
        assert!(is_stale(&done, &first), "duplicate after completion");
        assert!(!is_stale(&started(), &StepCommand::Plan));
    }

    #[test]
    fn input_breaking_the_node_contract_is_rejected_before_dispatch() {
        let registry = registry();
        let validators = ValidatorCache::new();
        let context = EngineContext {
            registry: &registry,
            validators: &validators,
        };
        let mut state = planned(&registry, &validators);
        let mut envelope = (*state.envelope).clone();
        envelope.inputs.insert("notes".into(), json!({"text": 5}));
        state.envelope = Arc::new(envelope);
        let dispatch = dispatch_node(&state, "node_1", &context).unwrap();
        let NodeDispatch::InputRejected(violations) = dispatch else {
            unreachable!("notes.text must be a string")
        };
        assert_eq!(violations[0].facet.as_deref(), Some("notes"));
    }

    #[test]
    fn the_token_budget_stops_the_run_before_more_is_spent() {
        let registry = registry();
        let validators = ValidatorCache::new();
        let context = EngineContext {
            registry: &registry,
            validators: &validators,
        };
        let with_budget = |budget: u64| {
            let mut state = planned(&registry, &validators);
            let mut envelope = (*state.envelope).clone();
            envelope.policies.planner = Some(
                serde_json::from_value(json!({"optimisation": {"maxTokens": budget}})).unwrap(),
            );
            state.envelope = Arc::new(envelope);
            state
        };
        let costly = |node: &str, content: Value, tokens: u64| StepInput::NodeAnswered {
            node_id: node.into(),
            attempt: 1,
            content: content.to_string(),
            usage: TokenUsage {
                prompt_tokens: tokens,
                completion_tokens: 0,
            },
        };
        // (budget, tokens of the first answer) → (status, last event, steps queued)
        let table = [
            (1_000, 400, RunStatus::Running, "node_complete", 1),
            (1_000, 1_001, RunStatus::Failed, "error", 0),
        ];
        for (budget, tokens, status, last_event, queued) in table {
            let decision = decide(
                with_budget(budget),
                costly("node_1", json!({"brief": {"text": "b"}}), tokens),
                NOW,
                &context,
            )
            .unwrap();
            assert_eq!(decision.state.status, status, "{budget}/{tokens}");
            assert_eq!(event_types(&decision).last().copied(), Some(last_event));
            assert_eq!(decision.outbox.len(), queued, "{budget}/{tokens}");
            if status == RunStatus::Failed {
                assert_eq!(
                    decision
                        .state
                        .failure
                        .as_ref()
                        .map(|failure| failure.code.as_str()),
                    Some("token_budget_exceeded")
                );
            }
        }
        // Over budget on the last node with a valid answer: the output is
        // delivered, with a warning.
        let after_first = decide(
            with_budget(1_000),
            costly("node_1", json!({"brief": {"text": "b"}}), 400),
            NOW,
            &context,
        )
        .unwrap()
        .state;
        let last = decide(
            after_first,
            costly("node_2", json!({"draft": {"text": "d"}}), 700),
            NOW,
            &context,
        )
        .unwrap();
        assert_eq!(last.state.status, RunStatus::Completed);
        assert!(event_types(&last).contains(&"warning"));
        assert_eq!(event_types(&last).last().copied(), Some("complete"));
    }
}
