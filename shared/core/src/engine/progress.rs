//! Progress: what runs next. Scheduling the nodes whose inputs are all
//! settled (or skipping them, `branches`), and continuing a run after a
//! step (dispatch what is ready, finish it when every node is settled,
//! settle its status), unless it ended or is held. Governance and the executors call down into this; it calls
//! only the run's finishing (`finish`), the turn-by-turn orchestrator's
//! next turn (`orchestrator_turns`) and the step context.

use crate::basics::error::CoreError;
use crate::planning::plan::PlanNode;
use crate::records::governance::Hold;
use crate::state::run::{NodeStatus, StepCommand};
use crate::wire::frames::HandoffStatus;

use super::lifecycle::RunTransition;
use super::narration::handoff;
use super::step_context::StepContext;

/// Settles every pending node whose upstream nodes are all settled
/// (completed or skipped): it is skipped when every node it depends on was
/// skipped or its guard does not hold, else scheduled (its next attempt's
/// step in the outbox). A skip can settle more nodes, so this goes on
/// until a pass skips nothing.
pub(super) fn schedule_ready_nodes(step: &mut StepContext<'_, '_>) {
    let Some(plan) = step.state().plan.clone() else {
        return;
    };
    loop {
        let status_of = |node_id: &str| {
            step.state()
                .nodes
                .get(node_id)
                .map(|record| record.status())
        };
        let ready: Vec<&PlanNode> = plan
            .nodes
            .iter()
            .filter(|node| status_of(&node.node_id) == Some(NodeStatus::Pending))
            .filter(|node| {
                plan.edges
                    .iter()
                    .filter(|edge| edge.to == node.node_id)
                    .all(|edge| status_of(&edge.from).is_some_and(NodeStatus::is_settled))
            })
            .collect();
        let mut skipped_any = false;
        for node in ready {
            match super::branches::branch_taken(step.state(), &plan, node, step.engine().registry) {
                super::branches::Branch::Run => schedule(step, node),
                super::branches::Branch::Skip(skip) => {
                    super::branches::skip_node(step, node, skip);
                    skipped_any = true;
                }
            }
        }
        if !skipped_any {
            return;
        }
    }
}

/// Marks `node` scheduled and puts its next attempt's step in the outbox.
fn schedule(step: &mut StepContext<'_, '_>, node: &PlanNode) {
    if let Some(record) = step.state_mut().node_mut(&node.node_id) {
        super::lifecycle::move_node(record, super::lifecycle::NodeTransition::Schedule);
        record.current_attempt += 1;
        let attempt = record.current_attempt;
        if node.builtin().is_none() {
            let requested = handoff(
                &step.stamp(),
                step.state(),
                node,
                attempt,
                HandoffStatus::Requested,
            );
            step.emit(requested);
        }
        step.enqueue(StepCommand::ExecuteNode {
            node_id: node.node_id.clone(),
            attempt,
        });
    }
}

/// Dispatches what is ready, finishes the run when every node completed,
/// and settles the status, unless the run ended or is held.
pub(super) fn continue_run(step: &mut StepContext<'_, '_>) -> Result<(), CoreError> {
    if step.state().status().is_terminal() {
        return Ok(());
    }
    if step.state().pending_replan.is_some() {
        // The planner model is drafting the next version: its step
        // schedules what that version needs.
        return Ok(());
    }
    match &step.state().governance.hold {
        Some(Hold::Request(_)) => {
            step.move_run(RunTransition::HoldForDecision)?;
            return Ok(());
        }
        Some(Hold::Paused { .. }) => {
            step.move_run(RunTransition::Pause)?;
            return Ok(());
        }
        None => {}
    }
    schedule_ready_nodes(step);
    let all_settled = step
        .state()
        .nodes
        .values()
        .all(|record| record.status().is_settled());
    if all_settled {
        // Turn by turn, the orchestrator decides what follows.
        if super::orchestrator_turns::wants_another_turn(step) {
            return super::orchestrator_turns::ask_for_turn(step);
        }
        step.move_run(RunTransition::Work)?;
        return super::finish::finish_run(step);
    }
    let someone_awaited = step
        .state()
        .nodes
        .values()
        .any(|record| record.status() == NodeStatus::AwaitingHuman);
    step.move_run(if someone_awaited {
        RunTransition::ParkForPerson
    } else {
        RunTransition::Work
    })?;
    Ok(())
}
