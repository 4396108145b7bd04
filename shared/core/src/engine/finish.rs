//! Finishing a run: assemble the output from produced (or supplied) facets,
//! validate it against the caller's schema and hard constraints, then
//! `metrics` and `complete`, or a failure.

use super::decision::ThreadExchange;
use super::lifecycle::RunTransition;
use crate::records::chat::ChatExchange;
use serde_json::{Map, Value};

use crate::basics::codes::{FailureCode, WarningCode};
use crate::basics::error::CoreError;
use crate::basics::schema::collect_violations;
use crate::contracts::contract::ConstraintLevel;
use crate::contracts::diagnostics::{ConstraintOutcome, satisfaction_score};
use crate::contracts::envelope::TaskEnvelope;
use crate::contracts::facet::{FacetCatalog, FacetMerge};
use crate::state::context::{appended_value, facet_value_for_node};
use crate::state::run::{RunState, RunStatus};
use crate::wire::frames::{self, BrokenConstraint, ValidationErrors, ValidationScope};

use super::step_context::StepContext;

/// The caller's output, and (`with_facet_values`: when there are
/// constraints to evaluate) every facet value the constraints may read.
fn assemble_output(
    state: &RunState,
    facets: &FacetCatalog,
    with_facet_values: bool,
) -> (Map<String, Value>, Map<String, Value>) {
    let mut output = Map::new();
    let mut facet_values = Map::new();
    let Some(plan) = state.plan.as_ref() else {
        return (output, facet_values);
    };
    let node_output = |node_id: &str, facet: &str| {
        state
            .nodes
            .get(node_id)
            .and_then(|record| record.output.as_ref())
            .and_then(|answer| answer.get(facet))
            .cloned()
    };
    let every_node = || {
        plan.nodes
            .iter()
            .map(|node| node.node_id.as_str())
            .collect()
    };
    for property in state.envelope.output_contract.top_level_properties() {
        let appends = facets
            .get(&property)
            .is_some_and(|facet| facet.merge == FacetMerge::Append);
        let value = match plan.final_producer_of(&property) {
            // A list every producer adds to: all of their items.
            Some(_) if appends => appended_value(state, every_node(), &property),
            Some(producer) => node_output(&producer.node_id, &property),
            None => state.envelope.inputs.get(&property).cloned(),
        };
        if let Some(value) = value {
            output.insert(property, value);
        }
    }
    if !with_facet_values {
        return (output, facet_values);
    }
    for node in &plan.nodes {
        for facet in &node.output_facets {
            if let Some(value) = node_output(&node.node_id, facet) {
                facet_values.insert(facet.clone(), value);
            }
        }
        for facet in &node.input_facets {
            if !facet_values.contains_key(facet)
                && let Some(value) = facet_value_for_node(state, node, facet, facets)
            {
                facet_values.insert(facet.clone(), value);
            }
        }
    }
    (output, facet_values)
}

/// What the output assembled now would break of the caller's schema (the
/// turn-by-turn orchestrator's `final` is refused while there is any).
pub(super) fn output_violations(
    state: &RunState,
    engine: &super::decision::EngineContext<'_>,
) -> Result<Vec<crate::basics::schema::SchemaViolation>, CoreError> {
    let (output, _) = assemble_output(state, &engine.registry.facets, false);
    let validator = engine.validators.validator_for(
        &state.envelope.output_contract.schema,
        "$.outputContract.schema",
    )?;
    Ok(collect_violations(&validator, &Value::Object(output)))
}

pub(super) fn finish_run(step: &mut StepContext<'_, '_>) -> Result<(), CoreError> {
    step.enter_phase(frames::RunPhase::Finalization);
    let has_constraints = !step.state().envelope.output_contract.constraints.is_empty();
    let (output, mut evaluation_scope) = assemble_output(
        step.state(),
        &step.engine().registry.facets,
        has_constraints,
    );
    let output = Value::Object(output);
    let validator = step.engine().validators.validator_for(
        &step.state().envelope.output_contract.schema,
        "$.outputContract.schema",
    )?;
    let violations = collect_violations(&validator, &output);
    if !violations.is_empty() {
        let invalid = frames::run_validation_error(
            &step.stamp(),
            "the assembled output does not satisfy the caller's contract",
            &frames::ValidationErrorPayload {
                scope: ValidationScope::Output,
                attempt: None,
                errors: ValidationErrors::Schema(violations),
            },
        );
        step.emit(invalid);
        step.fail_run(
            FailureCode::OutputContractViolated,
            "the assembled output does not satisfy outputContract.schema",
        );
        return Ok(());
    }
    let (observed, broken_hard) = if has_constraints {
        for (key, value) in output.as_object().into_iter().flatten() {
            evaluation_scope.insert(key.clone(), value.clone());
        }
        evaluate_constraints(&step.state().envelope, &Value::Object(evaluation_scope))
    } else {
        (satisfaction_score(&[]), Vec::new())
    };
    step.state_mut().observed_satisfaction = Some(observed);
    if !broken_hard.is_empty() {
        let invalid = frames::run_validation_error(
            &step.stamp(),
            "hard constraints do not hold on the output",
            &frames::ValidationErrorPayload {
                scope: ValidationScope::Constraints,
                attempt: None,
                errors: ValidationErrors::Constraints(broken_hard),
            },
        );
        step.emit(invalid);
        step.fail_run(
            FailureCode::HardConstraintViolated,
            "hard constraints do not hold on the output",
        );
        return Ok(());
    }
    // `constraints.mustInclude` terms the delivered output lacks (a quality
    // loop revises for them first; whatever is still missing is said).
    let terms = super::quality_report::must_include(step.state());
    let missing: Vec<String> = super::quality_report::missing_terms(&terms, [&output])
        .into_iter()
        .map(str::to_string)
        .collect();
    if !missing.is_empty() {
        let mut payload = frames::WarningPayload::of(WarningCode::MustIncludeMissing);
        payload.field = Some("$.constraints.mustInclude".into());
        let warning = frames::warning(
            &step.stamp(),
            None,
            format!(
                "the delivered output lacks constraints.mustInclude: {}",
                missing.join(", ")
            ),
            &payload,
        );
        step.emit(warning);
    }
    // A quality threshold no reviewer checked: the draft goes out unreviewed.
    if let Some(threshold) = step.state().envelope.constraints.quality_threshold
        && step.state().governance.drafts.is_empty()
    {
        let mut payload = frames::WarningPayload::of(WarningCode::SpecialistSkipped);
        payload.field = Some("$.constraints.qualityThreshold".into());
        let warning = frames::warning(
            &step.stamp(),
            None,
            format!(
                "no reviewer ran, so qualityThreshold {threshold} was not checked: the output is delivered unreviewed"
            ),
            &payload,
        );
        step.emit(warning);
    }
    let (quality, acceptance_report) = super::quality_report::report(step.state(), observed);
    step.state_mut().quality = Some(Box::new(quality.clone()));
    step.state_mut().acceptance_report = acceptance_report.clone().map(Box::new);
    super::narration::emit_run_metrics(step);
    step.move_run(RunTransition::Complete)?;
    let payload = frames::CompletePayload {
        output,
        status: RunStatus::Completed,
        satisfaction_score: step
            .state()
            .plan_diagnostics
            .as_ref()
            .map(|bundle| bundle.satisfaction_score),
        observed_satisfaction: observed,
        duration_ms: Some(run_duration_millis(step)),
        quality: Some(quality),
        acceptance_report,
    };
    let complete = frames::complete(&step.stamp(), &payload);
    // Rendered: the output moves into the state, not copied.
    step.state_mut().output = Some(payload.output);
    // Where each delivered property came from: the output provenance its
    // final producer's compiled contract records for it.
    let complete = super::frame_provenance::with_provenance(step.state(), complete, None);
    step.emit(complete);
    record_exchange(step);
    Ok(())
}

/// Evaluates the contract's constraints (JSONLogic, via datalogic-rs) over
/// `scope`. Returns the observed weighted score and the broken hard ones.
fn evaluate_constraints(envelope: &TaskEnvelope, scope: &Value) -> (f64, Vec<BrokenConstraint>) {
    let mut outcomes = Vec::new();
    let mut broken_hard = Vec::new();
    for (index, constraint) in envelope.output_contract.constraints.iter().enumerate() {
        let holds = crate::basics::logic::holds(&constraint.expr, scope);
        outcomes.push(ConstraintOutcome {
            level: constraint.level,
            satisfiable: holds,
        });
        if !holds && constraint.level == ConstraintLevel::Hard {
            broken_hard.push(BrokenConstraint {
                constraint_id: constraint
                    .constraint_id
                    .clone()
                    .unwrap_or_else(|| format!("constraints[{index}]")),
                constraint: constraint.expr.clone(),
            });
        }
    }
    (satisfaction_score(&outcomes), broken_hard)
}

/// A completed chat run's exchange, for its thread.
pub(super) fn record_exchange(step: &mut StepContext<'_, '_>) {
    let (Some(turn), Some(output)) = (&step.state().chat, &step.state().output) else {
        return;
    };
    if step.state().status() != RunStatus::Completed {
        return;
    }
    let assistant = output
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let exchange = ThreadExchange {
        thread_id: turn.thread_id.clone(),
        exchange: ChatExchange {
            run_id: step.state().run_id.clone(),
            // After every exchange it read, even within the same
            // millisecond: a thread is ordered by this.
            at_millis: turn
                .history
                .iter()
                .map(|earlier| earlier.at_millis + 1)
                .fold(step.now().unix_millis(), u64::max),
            user: turn.message.clone(),
            assistant,
            agent: turn.agent.clone(),
            drafts: turn
                .pending_drafts
                .iter()
                .chain(&turn.new_drafts)
                .cloned()
                .collect(),
            interrupted: false,
            summary: turn.summary.clone(),
        },
    };
    step.record_exchange(exchange);
}

/// From the run's creation to this step (milliseconds).
pub(super) fn run_duration_millis(step: &StepContext<'_, '_>) -> u64 {
    let elapsed = step.now().since(step.state().created_at);
    u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
}
