//! Turn-by-turn orchestration (`policies.planner.turnByTurn`): instead of
//! one whole plan, an orchestrator model decides each turn, through the
//! planner's `DraftPlan` effect with its own request
//! (`planning::turn_decisions`). A `handoff` or `plan_update` becomes a
//! plan version (the first turn's is the first plan; later ones are
//! replans with the trigger `orchestrator_turn`), so replay, forks,
//! policies and the viewer read them as any plan; a `final` finishes the
//! run, refused while the output it would assemble breaks the caller's
//! schema. A turn is asked for each time every node of the plan in force
//! has settled, until `maxTurns` decisions were made. A decision that
//! cannot be read or planned is refused with its diagnostics and asked
//! again (the planner's attempts); when none comes, the first turn falls
//! back to the deterministic planner and a later one finishes the run.
//!
//! This file reads and decides; `planning_step` and `replan` put what it
//! decides in force (so it calls neither).

use serde_json::{Map, Value, json};

use crate::basics::codes::WarningCode;
use crate::basics::error::CoreError;
use crate::contracts::diagnostics::DiagnosticsBundle;
use crate::contracts::envelope::TaskEnvelope;
use crate::contracts::model_request::ModelRequest;
use crate::planning::llm_planner::plan_from_draft;
use crate::planning::plan::PlanGraph;
use crate::planning::turn_decisions::{TurnDecision, draft_after, read_decision, turn_request};
use crate::planning::validator::rejected_bundle;
use crate::state::replan_cause::{PendingReplan, ReplanCause};
use crate::state::run::{NodeStatus, RunState, StepCommand};
use crate::wire::frames::{self, TriggerDetails};

use super::decision::EngineContext;
use super::effects::{ModelFailure, ModelOutcome, PlanDraftCall, StepAdvance};
use super::lifecycle::RunTransition;
use super::step_context::StepContext;

/// The trigger kind of a later turn's plan version.
pub(super) const ORCHESTRATOR_TURN: &str = "orchestrator_turn";

/// The most characters of one produced value a turn's request shows.
const SHOWN_VALUE_CHARS: usize = 2_000;

/// `maxTurns` when the run is decided turn by turn.
pub(super) fn max_turns(state: &RunState) -> Option<u32> {
    if state.chat.is_some() {
        return None;
    }
    state
        .envelope
        .policies
        .turn_by_turn()
        .map(|policy| policy.max_turns())
}

/// The request for the run's next turn, with this turn's refused answers.
pub(super) fn next_turn_request(
    state: &RunState,
    engine: &EngineContext<'_>,
    refused: &[DiagnosticsBundle],
) -> ModelRequest {
    let max = max_turns(state).unwrap_or(1);
    turn_request(
        &state.envelope,
        engine.registry,
        (state.orchestrator_turns + 1, max),
        progress(state),
        refused,
    )
}

/// The first turn's effect.
pub(super) fn first_turn(state: &RunState, engine: &EngineContext<'_>) -> StepAdvance {
    StepAdvance::Perform(super::effects::Effect::DraftPlan(PlanDraftCall {
        attempt: 1,
        request: next_turn_request(state, engine, &[]),
        rejected: Vec::new(),
        frames_before: Vec::new(),
        spent: Vec::new(),
    }))
}

/// What the plan so far did: each node and its status, what the envelope
/// supplied, and the facets produced (long values shortened).
fn progress(state: &RunState) -> Value {
    let supplied: Vec<&String> = state.envelope.inputs.keys().collect();
    let Some(plan) = state.plan.as_deref() else {
        return json!({"supplied": supplied, "nodes": [], "produced": {}});
    };
    let mut produced = Map::new();
    let nodes: Vec<Value> = plan
        .nodes
        .iter()
        .map(|node| {
            let record = state.nodes.get(&node.node_id);
            let status = record.map(|record| record.status());
            if status == Some(NodeStatus::Completed)
                && let Some(Value::Object(output)) = record
                    .and_then(|record| record.output.as_ref())
                    .map(|output| output.as_ref())
            {
                for (facet, value) in output {
                    produced.insert(facet.clone(), shortened(value));
                }
            }
            json!({"nodeId": node.node_id, "capabilityId": node.capability_id,
                   "status": status, "outputFacets": node.output_facets})
        })
        .collect();
    json!({"supplied": supplied, "nodes": nodes, "produced": produced})
}

fn shortened(value: &Value) -> Value {
    let text = value.to_string();
    if text.chars().count() <= SHOWN_VALUE_CHARS {
        return value.clone();
    }
    let start: String = text.chars().take(SHOWN_VALUE_CHARS).collect();
    json!({"shortened": true, "start": start})
}

/// Whether a run whose nodes have all settled asks its orchestrator for
/// another turn (else it finishes). Past `maxTurns` decisions it does not,
/// and says so.
pub(super) fn wants_another_turn(step: &mut StepContext<'_, '_>) -> bool {
    let Some(max) = max_turns(step.state()) else {
        return false;
    };
    if step.state().orchestrator_turns < max {
        return true;
    }
    let mut payload = frames::WarningPayload::of(WarningCode::OrchestratorTurnsExhausted);
    payload.field = Some("$.policies.planner.turnByTurn.maxTurns".into());
    let warning = frames::warning(
        &step.stamp(),
        None,
        format!(
            "the orchestrator made {max} decision(s), its maxTurns, without deciding final: the run finishes with what its nodes produced"
        ),
        &payload,
    );
    step.emit(warning);
    false
}

/// Asks for the next turn in a step of its own (`StepCommand::Replan`):
/// nothing runs until its decision is in force.
pub(super) fn ask_for_turn(step: &mut StepContext<'_, '_>) -> Result<(), CoreError> {
    let Some(version) = step.state().plan.as_ref().map(|plan| plan.plan_version + 1) else {
        return Ok(());
    };
    step.enter_phase(frames::RunPhase::Planning);
    step.state_mut().pending_replan = Some(Box::new(PendingReplan {
        version,
        cause: ReplanCause {
            trigger: TriggerDetails {
                kind: ORCHESTRATOR_TURN.into(),
                ..TriggerDetails::default()
            },
            policy_id: None,
            rationale: None,
            invalidate: Vec::new(),
            exclude_capabilities: Vec::new(),
            reject_ends_run: false,
            escalated: None,
            ranking: Vec::new(),
        },
    }));
    step.enqueue(StepCommand::Replan { version });
    step.move_run(RunTransition::Work)?;
    Ok(())
}

/// What a turn's answer decided.
pub(super) enum TurnStep {
    /// A plan version to put in force: the plan, its judgement, the attempt
    /// that drafted it, the model's response, the orchestrator's note.
    Plan {
        plan: Box<PlanGraph>,
        bundle: DiagnosticsBundle,
        attempt: u32,
        response: Option<frames::ModelResponseSummary>,
        note: Option<String>,
    },
    /// The work is done: finish the run.
    Final,
    /// Ask again (a refused answer, attempts remain).
    Again(StepAdvance),
    /// No usable decision: why, and how many answers were refused.
    GiveUp { reason: String, refused: u32 },
}

/// Reads the orchestrator's answer to a turn: a decision in force, a
/// finish, a re-prompt, or giving up. The turn's frames (earlier refused
/// answers, this one's) are emitted on `step`; its spend is recorded once
/// it is decided.
pub(super) fn read_turn(
    step: &mut StepContext<'_, '_>,
    call: &PlanDraftCall,
    outcome: &ModelOutcome,
) -> Result<TurnStep, CoreError> {
    step.emit_all(call.frames_before.iter().cloned());
    let spent = super::usage_recording::drafts_spent(call, outcome);
    let engine = step.engine();
    let refused_before = u32::try_from(call.rejected.len()).unwrap_or(u32::MAX);
    let answer = match outcome {
        Err(ModelFailure { message, .. }) => {
            super::usage_recording::record_planner_spend(step, &spent);
            return Ok(TurnStep::GiveUp {
                reason: format!("the orchestrator model is unavailable ({message})"),
                refused: refused_before,
            });
        }
        Ok(answer) => answer,
    };
    let response = Some(super::plan_drafts::draft_response(answer));
    let turn = step.state().orchestrator_turns + 1;
    let bundle: DiagnosticsBundle = match read_decision(&answer.content, engine.registry) {
        Err(diagnostics) => rejected_bundle(diagnostics),
        Ok(TurnDecision::Final { summary }) => {
            let violations = super::finish::output_violations(step.state(), engine)?;
            if violations.is_empty() {
                super::usage_recording::record_planner_spend(step, &spent);
                step.state_mut().orchestrator_turns = turn;
                let said = frames::log(
                    &step.stamp(),
                    format!(
                        "the orchestrator decided final at turn {turn}{}",
                        summary
                            .map(|summary| format!(": {summary}"))
                            .unwrap_or_default()
                    ),
                );
                step.emit(said);
                return Ok(TurnStep::Final);
            }
            let broken: Vec<String> = violations
                .iter()
                .map(|violation| format!("{} ({})", violation.message, violation.instance_pointer))
                .collect();
            rejected_bundle(vec![
                crate::contracts::diagnostics::PlanDiagnostic::hard(
                    "turn.final",
                    crate::contracts::diagnostics::DiagnosticCause::MissingProducer,
                    "final only once the output contract can be assembled",
                )
                .with_suggestion(format!(
                    "The output is not complete: {}. Hand off to what produces it first.",
                    broken.join("; ")
                )),
            ])
        }
        Ok(decision) => {
            let envelope = turn_envelope(step.state(), engine, &decision);
            let drafted = draft_after(&decision, step.state().plan.as_deref(), turn)
                .map(|draft| plan_from_draft(&draft, &envelope, engine.registry, &answer.model))
                .unwrap_or_else(|| Err(Vec::new()));
            match super::plan_drafts::judge(drafted, &envelope, engine) {
                (Some(mut plan), bundle) => {
                    if let TurnDecision::Handoff {
                        payload: Some(payload),
                        ..
                    } = &decision
                    {
                        hand_payload(&mut plan, &format!("turn_{turn}"), payload);
                    }
                    super::usage_recording::record_planner_spend(step, &spent);
                    step.state_mut().orchestrator_turns = turn;
                    return Ok(TurnStep::Plan {
                        plan: Box::new(plan),
                        bundle,
                        attempt: call.attempt,
                        response,
                        note: Some(format!(
                            "{}{}",
                            decision.action(),
                            decision
                                .note()
                                .map(|note| format!(": {note}"))
                                .unwrap_or_default()
                        )),
                    });
                }
                (None, bundle) => bundle,
            }
        }
    };
    let rejection =
        super::plan_drafts::rejected_draft_frames(step, call.attempt, &bundle, response);
    let mut rejected = call.rejected.clone();
    rejected.push(bundle);
    let retry = next_turn_request(step.state(), engine, &rejected);
    let attempts = engine.max_planner_attempts.max(1);
    if call.attempt < attempts && super::plan_drafts::over_window(&retry, engine).is_none() {
        let mut frames_before = step.take_frames();
        frames_before.extend(rejection);
        return Ok(TurnStep::Again(StepAdvance::Perform(
            super::effects::Effect::DraftPlan(PlanDraftCall {
                attempt: call.attempt + 1,
                request: retry,
                rejected,
                frames_before,
                spent,
            }),
        )));
    }
    step.emit_all(rejection);
    super::usage_recording::record_planner_spend(step, &spent);
    Ok(TurnStep::GiveUp {
        reason: format!("the orchestrator made no usable decision in {attempts} attempts"),
        refused: refused_before.saturating_add(1),
    })
}

/// The envelope a turn's plan is judged against: the caller's, its contract
/// narrowed to the goal properties the plan's capabilities produce (the
/// whole contract is checked when the run finishes), with no planner
/// requirement the orchestrator has not chosen yet.
fn turn_envelope(
    state: &RunState,
    engine: &EngineContext<'_>,
    decision: &TurnDecision,
) -> TaskEnvelope {
    let mut capabilities: Vec<&str> = state
        .plan
        .iter()
        .flat_map(|plan| plan.nodes.iter().map(|node| node.capability_id.as_str()))
        .collect();
    match decision {
        TurnDecision::Handoff { capability_id, .. } => capabilities.push(capability_id),
        TurnDecision::PlanUpdate { nodes, .. } => {
            capabilities.extend(
                nodes
                    .iter()
                    .map(|(_, capability_id, _)| capability_id.as_str()),
            );
        }
        TurnDecision::Final { .. } => {}
    }
    let produced = |property: &str| {
        capabilities.iter().any(|id| {
            engine.registry.capability(id).is_some_and(|capability| {
                capability
                    .output_contract
                    .iter()
                    .any(|facet| facet == property)
            })
        })
    };
    let mut envelope = state.envelope.as_ref().clone();
    let schema = &mut envelope.output_contract.schema;
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        properties.retain(|property, _| produced(property));
    }
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|property| property.as_str().is_some_and(produced));
    }
    envelope.output_contract.constraints.clear();
    envelope.constraints.quality_threshold = None;
    if let Some(planner) = envelope.policies.planner.as_mut() {
        if let Some(selection) = planner.selection.as_mut() {
            selection.require.clear();
        }
        if let Some(topology) = planner.topology.as_mut() {
            topology.required_kinds.clear();
        }
    }
    envelope
}

/// A handoff's payload, added to its node's instructions.
fn hand_payload(plan: &mut PlanGraph, node_id: &str, payload: &Value) {
    if let Some(node) = plan.nodes.iter_mut().find(|node| node.node_id == node_id) {
        node.instructions = format!(
            "{}\n\nThe orchestrator hands you this payload:\n{payload}",
            node.instructions
        )
        .into();
    }
}
