//! Govern and apply: what follows from a node's answer once it is judged
//! (`answer_verdict` decides; [`after_answer`] documents the one order).
//! An input that breaks its contract is rejected; a valid answer completes
//! the node (its `node_complete`, the policies it fires, the quality gate,
//! then progress); a broken one is asked again or, out of attempts,
//! escalated or failed. Above governance (it fires policies), below the
//! executors that call it (node, agent, panel, human).

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

use crate::basics::codes::FailureCode;
use crate::basics::error::CoreError;
use crate::basics::schema::SchemaViolation;
use crate::planning::plan::{PlanGraph, PlanNode};
use crate::state::run::StepCommand;
use crate::wire::frames;

use super::answer_verdict::{Judgement, Probation, Verdict, judge_answer};
use super::effects::ModelFailure;
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
    if let Some(record) = step.state_mut().node_mut(&node.node_id) {
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

/// Decide, then govern: the one path of every node's answer (a model's,
/// an agent's, a panel's verdict, a built-in's).
pub(super) fn take_answer(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
    attempt: u32,
    parsed: Result<Value, serde_json::Error>,
) -> Result<(), CoreError> {
    let judgement = decide_answer(step, node, parsed)?;
    after_answer(step, node, attempt, judgement)
}

/// Decides an answer: judged against the node's contracts and the content
/// rules that apply to it. Changes nothing.
pub(super) fn decide_answer(
    step: &StepContext<'_, '_>,
    node: &PlanNode,
    parsed: Result<Value, serde_json::Error>,
) -> Result<Judgement, CoreError> {
    let rules = applicable_content_rules(step, node);
    judge_answer(
        step.engine().validators,
        &step.state().envelope.output_contract,
        node,
        &rules,
        parsed,
    )
}

/// A node attempt its executor has decided and governance has not yet
/// acted on: the step driver hands it to [`govern_attempt`].
pub(super) struct DecidedAttempt {
    /// The plan the node is in (shared: nothing is copied).
    pub(super) plan: Arc<PlanGraph>,
    pub(super) node_id: String,
    pub(super) attempt: u32,
    pub(super) decided: AttemptDecided,
}

/// What was decided of an attempt.
pub(super) enum AttemptDecided {
    /// An answer, judged.
    Judged(Judgement),
    /// The capability's model kept failing, past its retries and fallbacks.
    ModelFailed(ModelFailure),
}

/// Governs and applies a decided attempt: a judged answer through
/// [`after_answer`]; a model that kept failing hands the node's facets to
/// the next-ranked capability (a person's, when the registry ranks one
/// next) or, with none, fails the node.
pub(super) fn govern_attempt(
    step: &mut StepContext<'_, '_>,
    decided: DecidedAttempt,
) -> Result<(), CoreError> {
    let DecidedAttempt {
        plan,
        node_id,
        attempt,
        decided,
    } = decided;
    let node = super::plan_lookup::plan_node_in(&plan, step.state(), &node_id)?;
    match decided {
        AttemptDecided::Judged(judgement) => after_answer(step, node, attempt, judgement),
        AttemptDecided::ModelFailed(ModelFailure { code, message }) => {
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
            if super::escalation::provider_kept_failing(code)
                && super::escalation::fall_back_to_next_capability(step, node, escalation)?
            {
                return super::progress::continue_run(step);
            }
            let run_message = format!("node {} failed: {message}", node.node_id);
            step.fail_node(node, attempt, code, &message, &run_message);
            Ok(())
        }
    }
}

/// The registry's content rule sets that target one of `node`'s facets
/// and apply to this run (none, without building anything, when no set
/// targets its facets).
fn applicable_content_rules<'a>(
    step: &StepContext<'_, 'a>,
    node: &PlanNode,
) -> Vec<&'a crate::contracts::content_rules::ContentRules> {
    let all = step.engine().registry.content_rules();
    if !all
        .iter()
        .any(|rules| rules.targets_any(&node.output_facets))
    {
        return Vec::new();
    }
    let envelope = &step.state().envelope;
    let data = serde_json::json!({
        "objective": envelope.objective,
        "inputs": envelope.inputs,
        "constraints": serde_json::to_value(&envelope.constraints).unwrap_or_default(),
    });
    all.iter()
        .filter(|rules| rules.targets_any(&node.output_facets) && rules.applies_to(&data))
        .collect()
}

/// Governs a judged answer, in this order, each stage ending the step when
/// it decides:
///
/// 1. a clarifying question the model asked is put to a person (unless
///    the node has asked its share, or a hold is in force);
/// 2. a derived node's probation check is announced (a warning);
/// 3. the token budget: over it, the run stops (a last valid answer is
///    still delivered);
/// 4. a valid answer completes the node ([`complete_node`]: its frame,
///    then the policies it fires, the quality gate and feedback), a broken
///    one is asked again, escalated or fails the node
///    ([`reprompt_or_fail`]: policies first);
/// 5. progress: what became ready is scheduled, or the run finishes.
fn after_answer(
    step: &mut StepContext<'_, '_>,
    node: &PlanNode,
    attempt: u32,
    judgement: Judgement,
) -> Result<(), CoreError> {
    if !step.state().nodes.contains_key(&node.node_id) {
        return Err(CoreError::StepDoesNotApply(format!(
            "no ledger entry for {}",
            node.node_id
        )));
    }
    if let Some(question) = &judgement.clarification
        && super::hitl::ask_clarification(step, node, question)?
    {
        return Ok(());
    }
    if let Some(probation) = &judgement.probation {
        announce_probation(step, node, probation);
    }
    if super::budget::stop_when_over_budget(step, &node.node_id, judgement.verdict.is_valid()) {
        return Ok(());
    }
    match judgement.verdict {
        Verdict::Valid(answer) => complete_node(step, node, attempt, answer),
        Verdict::Broken(violations) => reprompt_or_fail(step, node, attempt, violations),
    }
}

/// A `derived_output_checked` warning: the node ran on probation, and what
/// the check found.
fn announce_probation(step: &mut StepContext<'_, '_>, node: &PlanNode, probation: &Probation) {
    let warning = frames::warning(
        &step.stamp(),
        Some(&node.node_id),
        format!(
            "node {} runs derived capability {} outside its declared inputs: its output was checked once more; {}",
            node.node_id,
            node.capability_id,
            probation.found()
        ),
        &frames::WarningPayload::of(crate::basics::codes::WarningCode::DerivedOutputChecked),
    );
    step.emit(warning);
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
    let now_millis = step.now().unix_millis();
    if let Some(record) = step.state_mut().node_mut(&node.node_id) {
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
            .map(|started| now_millis.saturating_sub(started));
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
            if let Some(record) = step.state_mut().node_mut(&node.node_id) {
                record.feedback = violations;
                super::lifecycle::move_node(record, super::lifecycle::NodeTransition::Reset);
            }
            return Ok(());
        }
        Applied::Continue => {}
    }
    let max_attempts = step.state().max_node_attempts;
    let attempt_base = step
        .state()
        .nodes
        .get(&node.node_id)
        .map_or(0, |record| record.attempt_base);
    if attempt.saturating_sub(attempt_base) < max_attempts {
        if let Some(record) = step.state_mut().node_mut(&node.node_id) {
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
