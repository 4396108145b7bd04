//! Answer handling for a node: an input that breaks its contract rejected,
//! an answer judged against the output contract (a clarifying question
//! asked, the budget checked), a valid one completing the node (its
//! `node_complete`, the policies it fires, the quality gate, then progress),
//! an invalid one re-prompted or, out of attempts, escalated or failed.
//! Above governance (it fires policies), below the executors that call it
//! (node, agent, panel, human).

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

use crate::basics::codes::FailureCode;
use crate::basics::error::CoreError;
use crate::basics::schema::{SchemaViolation, collect_violations};
use crate::planning::plan::PlanNode;
use crate::state::context::clarifying_question;
use crate::state::run::StepCommand;
use crate::wire::frames;

use super::narration::emit_node_metrics;
use super::policy::{self, Applied};
use super::policy_matching::Occurrence;
use super::step_context::StepContext;

pub(super) fn reject_input(
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
        super::lifecycle::move_node(record, super::lifecycle::NodeTransition::Fail);
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
        if super::hitl::ask_clarification(step, node, &question)? {
            return Ok(());
        }
    }
    // Probation: a derived node's valid answer is checked once more.
    let violations = match &answer {
        Some(answer) if node.derived && violations.is_empty() => {
            probation_violations(step, node, answer)?
        }
        _ => violations,
    };
    let answer_is_valid = answer.is_some() && violations.is_empty();
    if super::budget::stop_when_over_budget(step, &node.node_id, answer_is_valid) {
        return Ok(());
    }
    match answer {
        Some(answer) if violations.is_empty() => complete_node(step, node, attempt, answer),
        _ => reprompt_or_fail(step, node, attempt, violations),
    }
}

/// A derived capability runs outside its declared inputs: its answer is
/// held, facet by facet, to the caller's schema for that property (even
/// when a later node delivers it), and a `derived_output_checked` warning
/// says the node ran on probation and what the check found.
fn probation_violations(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
    answer: &Value,
) -> Result<Vec<SchemaViolation>, CoreError> {
    let contract = &step.state.envelope.output_contract;
    let mut violations = Vec::new();
    let mut checked = Vec::new();
    for facet in &node.output_facets {
        let (Some(schema), Some(value)) = (contract.property_schema(facet), answer.get(facet))
        else {
            continue;
        };
        let path = format!("$.outputContract.schema.properties.{facet}");
        let validator = crate::basics::schema::compile_schema(schema, &path)?;
        checked.push(facet.as_str());
        violations.extend(collect_violations(&validator, value).into_iter().map(
            |mut violation| {
                violation.instance_pointer = format!("/{facet}{}", violation.instance_pointer);
                violation.facet = Some(facet.clone());
                violation
            },
        ));
    }
    let found = if checked.is_empty() {
        "the caller's contract names none of its facets".to_string()
    } else if violations.is_empty() {
        format!("{} meet the caller's contract", checked.join(", "))
    } else {
        format!(
            "{} break the caller's contract ({} violations): it is asked again",
            checked.join(", "),
            violations.len()
        )
    };
    let warning = frames::warning(
        &step.stamp(),
        Some(&node.node_id),
        format!(
            "node {} runs derived capability {} outside its declared inputs: its output was checked once more; {found}",
            node.node_id, node.capability_id
        ),
        &frames::WarningPayload::of(crate::basics::codes::WarningCode::DerivedOutputChecked),
    );
    step.emit(warning);
    Ok(violations)
}

pub(super) fn complete_node(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
    attempt: u32,
    answer: Value,
) -> Result<(), CoreError> {
    let output = Arc::new(answer);
    let mut usage = frames::TokenTotals::of(&Default::default());
    let (mut model, mut duration_ms, mut cost_usd, mut answered_by) = (None, None, None, None);
    if let Some(record) = step.state.node_mut(&node.node_id) {
        super::lifecycle::move_node(record, super::lifecycle::NodeTransition::Complete);
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
        answered_by = record.answered_by.clone();
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
            answered_by,
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
    if !super::quality::judge_review(step, node)? {
        super::feedback::revise_on_feedback(step, node)?;
    }
    super::progress::continue_run(step)
}

pub(super) fn reprompt_or_fail(
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
                super::lifecycle::move_node(record, super::lifecycle::NodeTransition::Reset);
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
            super::lifecycle::move_node(record, super::lifecycle::NodeTransition::Schedule);
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
