//! A model call's usage, recorded on its node: tokens (cached ones too),
//! the model that answered and what it cost by the registry's price table.
//! A model the table does not price is warned about once per run.

use crate::basics::codes::WarningCode;
use crate::state::run::TokenUsage;
use crate::wire::frames;

use super::StepContext;

/// Adds one model call's `usage` on `model` to `node_id`'s record.
pub(super) fn record_model_usage(
    step: &mut StepContext<'_, '_>,
    node_id: &str,
    model: &str,
    usage: &TokenUsage,
) {
    let cost = step.engine.registry.models().cost_usd(model, usage);
    step.state.model_turns = step.state.model_turns.saturating_add(1);
    let Some(record) = step.state.nodes.get_mut(node_id) else {
        return;
    };
    record.usage.add(usage);
    if !model.is_empty() {
        record.model = Some(model.to_string());
    }
    if let Some(cost) = cost {
        record.cost_usd = Some(record.cost_usd.unwrap_or(0.0) + cost);
        super::budget::warn_when_nearly_spent(step, node_id);
        return;
    }
    if model.is_empty() || !step.state.unpriced_models.insert(model.to_string()) {
        return;
    }
    let warning = frames::warning(
        &step.stamp(),
        Some(node_id),
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
