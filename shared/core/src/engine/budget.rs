//! The token budget (`policies.planner.optimisation.maxTokens`) at run time:
//! past it, nothing more is scheduled or retried, except that an answer that
//! completes the run is still delivered, with a warning.

use crate::basics::codes::{FailureCode, WarningCode};
use crate::state::run::{NodeStatus, RunState};
use crate::wire::frames;

use super::StepContext;

/// The run's token use against the budget: a message when it is passed.
fn token_budget_exceeded(state: &RunState) -> Option<String> {
    let budget = state.envelope.policies.token_budget()?;
    let usage = state.total_usage();
    let used = usage.prompt_tokens + usage.completion_tokens;
    (used > budget).then(|| {
        format!("the run used {used} tokens, over policies.planner.optimisation.maxTokens {budget}")
    })
}

/// Called after `node_id`'s usage is recorded. Returns true when the run
/// was stopped (the caller decides nothing more).
pub(super) fn stop_when_over_budget(
    step: &mut StepContext<'_, '_>,
    node_id: &str,
    answer_is_valid: bool,
) -> bool {
    let Some(exceeded) = token_budget_exceeded(&step.state) else {
        return false;
    };
    let all_others_completed = step
        .state
        .nodes
        .iter()
        .all(|(id, record)| id == node_id || record.status == NodeStatus::Completed);
    if all_others_completed && answer_is_valid {
        // The last answer is in and valid: deliver it, and say the budget was passed.
        let warning = frames::warning(
            &step.stamp(),
            Some(node_id),
            exceeded,
            &frames::WarningPayload::of(WarningCode::TokenBudgetExceeded),
        );
        step.emit(warning);
        return false;
    }
    // Spend no more: nothing else is scheduled or retried.
    if let Some(record) = step.state.nodes.get_mut(node_id) {
        record.status = NodeStatus::Failed;
        record.error = Some(exceeded.clone());
    }
    step.fail_run(FailureCode::TokenBudgetExceeded, &exceeded);
    true
}
