//! A model call's usage, recorded on its node (a planner draft's on the
//! run's `planner_spend`): tokens (cached ones too), the model that
//! answered and what it cost by the registry's price table.
//! A model the table does not price is warned about once per run. Each
//! call also counts toward the run's split by what it was for
//! (`UsageOperation`: planning, execution, review, judge, summary).

use crate::basics::codes::WarningCode;
use crate::state::run::{TokenUsage, UsageOperation};
use crate::wire::frames;

use super::effects::{DraftSpend, PlanDraftCall};
use super::step_context::StepContext;

/// What a node's own model calls are for: a reviewer's are a review, the
/// others' the work.
pub(super) fn operation_of(node: &crate::planning::plan::PlanNode) -> UsageOperation {
    if node.kind == crate::contracts::capability::NodeKind::Validation
        || node.quality_score.is_some()
    {
        UsageOperation::Review
    } else {
        UsageOperation::Execution
    }
}

/// Adds one model call's `usage` on `model`, made for `operation`, to
/// `node_id`'s record and to the run's split by operation.
pub(super) fn record_model_usage(
    step: &mut StepContext<'_, '_>,
    node_id: &str,
    model: &str,
    usage: &TokenUsage,
    operation: UsageOperation,
) {
    let cost = step.engine().registry.models().cost_usd(model, usage);
    step.state_mut().model_turns = step.state().model_turns.saturating_add(1);
    std::sync::Arc::make_mut(&mut step.state_mut().usage_by_operation)
        .entry(operation)
        .or_default()
        .add(usage, cost);
    let Some(record) = step.state_mut().node_mut(node_id) else {
        return;
    };
    record.usage.add(usage);
    if !model.is_empty() {
        record.model = Some(model.to_string());
    }
    if let Some(cost) = cost {
        record.cost_usd = Some(record.cost_usd.unwrap_or(0.0) + cost);
        super::budget::warn_when_nearly_spent(step, Some(node_id));
        return;
    }
    warn_unpriced(step, Some(node_id), model);
}

/// The planner model's drafts (`spent`: every draft of this planning step,
/// rejected ones too) on the run's `planner_spend`.
pub(super) fn record_planner_spend(step: &mut StepContext<'_, '_>, spent: &[DraftSpend]) {
    for draft in spent {
        let cost = step
            .engine()
            .registry
            .models()
            .cost_usd(&draft.model, &draft.usage);
        step.state_mut().planner_spend.add(&draft.usage, cost);
        std::sync::Arc::make_mut(&mut step.state_mut().usage_by_operation)
            .entry(UsageOperation::Planning)
            .or_default()
            .add(&draft.usage, cost);
        match cost {
            Some(_) => super::budget::warn_when_nearly_spent(step, None),
            None => warn_unpriced(step, None, &draft.model),
        }
    }
}

/// The drafts a planning step used: those rejected before, and the one
/// answered now.
pub(super) fn drafts_spent(
    call: &PlanDraftCall,
    outcome: &super::effects::ModelOutcome,
) -> Vec<DraftSpend> {
    let mut spent = call.spent.clone();
    if let Ok(answer) = outcome {
        spent.push(DraftSpend {
            model: answer.model.clone(),
            usage: answer.usage,
        });
    }
    spent
}

/// `model_price_unknown`, once per run and model.
fn warn_unpriced(step: &mut StepContext<'_, '_>, node_id: Option<&str>, model: &str) {
    if model.is_empty() || !step.state_mut().unpriced_models.insert(model.to_string()) {
        return;
    }
    let warning = frames::warning(
        &step.stamp(),
        node_id,
        format!(
            "model `{model}` has no price in the registry's models.json: its calls have no cost"
        ),
        &frames::WarningPayload {
            model: Some(model.to_string()),
            ..frames::WarningPayload::of(WarningCode::ModelPriceUnknown)
        },
    );
    step.emit(warning);
}
