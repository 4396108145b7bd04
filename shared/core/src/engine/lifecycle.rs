//! The run's life cycle: the one writer of a run's and a node's status
//! (both fields are private to `state/run.rs`; its crate-wide setters are
//! called only here, which an architecture test holds). Each change is a
//! named [`RunTransition`], checked against the status the run is in:
//!
//! | transition | to | from |
//! | --- | --- | --- |
//! | `Work` | running | queued, running, or parked (awaiting a person, held, paused) |
//! | `ParkForPerson` | awaiting_human | running, or parked |
//! | `HoldForDecision` | awaiting_hitl | queued, running, or parked |
//! | `Pause` | paused | queued, running, or parked |
//! | `Complete` | completed | running |
//! | `Fail`, `RejectPlan`, `Cancel` | failed, plan_rejected, cancelled | any status that has not ended |
//!
//! An ended run never changes again, and nothing returns to queued (only
//! admission makes a queued run, `starts.rs`). A transition the table
//! refuses changes nothing and is the step's error
//! (`CoreError::StepDoesNotApply`): the step's working set is dropped, so
//! nothing of it is committed. A fork is a new run, not a transition of its
//! source ([`reopen_as_fork`]).
//!
//! A node is reset, scheduled, deliberates, parks for a person, completes,
//! fails, or is skipped (only while pending); an ended node (completed,
//! failed, skipped) only goes back to pending.

use crate::basics::error::CoreError;
use crate::state::run::{NodeRecord, NodeStatus, RunState, RunStatus};

use super::step_context::StepContext;

/// A change of the run's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunTransition {
    /// At work: the plan is ready, a parked or held run goes on, a replan
    /// runs.
    Work,
    /// A node waits for a person's answer (and no hold is in force).
    ParkForPerson,
    /// Held on an approval request or a clarifying question.
    HoldForDecision,
    /// Paused by a policy until `run.resume`.
    Pause,
    /// Every node completed and the output met the contract.
    Complete,
    Fail,
    RejectPlan,
    Cancel,
}

impl RunTransition {
    /// The status the transition leads to.
    pub(crate) fn target(self) -> RunStatus {
        match self {
            RunTransition::Work => RunStatus::Running,
            RunTransition::ParkForPerson => RunStatus::AwaitingHuman,
            RunTransition::HoldForDecision => RunStatus::AwaitingHitl,
            RunTransition::Pause => RunStatus::Paused,
            RunTransition::Complete => RunStatus::Completed,
            RunTransition::Fail => RunStatus::Failed,
            RunTransition::RejectPlan => RunStatus::PlanRejected,
            RunTransition::Cancel => RunStatus::Cancelled,
        }
    }

    /// The transition that ends a run with `status` (failed, plan
    /// rejected, cancelled), when it is one.
    pub(crate) fn ending_with(status: RunStatus) -> Option<Self> {
        match status {
            RunStatus::Failed => Some(RunTransition::Fail),
            RunStatus::PlanRejected => Some(RunTransition::RejectPlan),
            RunStatus::Cancelled => Some(RunTransition::Cancel),
            _ => None,
        }
    }

    /// Whether a run in `from` may take this transition.
    pub(crate) fn allowed_from(self, from: RunStatus) -> bool {
        if from.is_terminal() {
            return false;
        }
        match self {
            RunTransition::ParkForPerson => from != RunStatus::Queued,
            RunTransition::Complete => from == RunStatus::Running,
            RunTransition::Work
            | RunTransition::HoldForDecision
            | RunTransition::Pause
            | RunTransition::Fail
            | RunTransition::RejectPlan
            | RunTransition::Cancel => true,
        }
    }
}

/// A transition the life cycle refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IllegalTransition {
    pub run_id: String,
    pub from: RunStatus,
    pub transition: RunTransition,
}

impl From<IllegalTransition> for CoreError {
    fn from(refused: IllegalTransition) -> Self {
        CoreError::StepDoesNotApply(format!(
            "run {} is {}: {:?} (to {}) is not a transition of its life cycle",
            refused.run_id,
            refused.from.as_str(),
            refused.transition,
            refused.transition.target().as_str()
        ))
    }
}

/// Moves `state` by `transition`, or refuses, changing nothing.
pub(crate) fn apply(
    state: &mut RunState,
    transition: RunTransition,
) -> Result<(), IllegalTransition> {
    if !transition.allowed_from(state.status()) {
        return Err(IllegalTransition {
            run_id: state.run_id.clone(),
            from: state.status(),
            transition,
        });
    }
    state.set_status_by_life_cycle(transition.target());
    Ok(())
}

/// A change of a node's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeTransition {
    /// Back to waiting for its inputs (a re-run).
    Reset,
    /// A step message for its next attempt is on its way.
    Schedule,
    /// Its own steps are at work (a panel's judges, an agent's session).
    Deliberate,
    /// It waits for a person's answer.
    ParkForPerson,
    Complete,
    Fail,
    /// It will not run: its guard did not hold, or all it depends on was
    /// skipped. Only a pending node is skipped.
    Skip,
}

impl NodeTransition {
    pub(crate) fn target(self) -> NodeStatus {
        match self {
            NodeTransition::Reset => NodeStatus::Pending,
            NodeTransition::Schedule => NodeStatus::Scheduled,
            NodeTransition::Deliberate => NodeStatus::Deliberating,
            NodeTransition::ParkForPerson => NodeStatus::AwaitingHuman,
            NodeTransition::Complete => NodeStatus::Completed,
            NodeTransition::Fail => NodeStatus::Failed,
            NodeTransition::Skip => NodeStatus::Skipped,
        }
    }

    /// Whether a node in `from` may take this transition.
    pub(crate) fn allowed_from(self, from: NodeStatus) -> bool {
        match from {
            NodeStatus::Completed | NodeStatus::Failed | NodeStatus::Skipped => {
                self == NodeTransition::Reset
            }
            NodeStatus::Pending => true,
            _ => self != NodeTransition::Skip,
        }
    }
}

/// Moves `record` by `transition`; a move the table refuses changes
/// nothing (and fails a debug build's tests, naming it).
pub(crate) fn move_node(record: &mut NodeRecord, transition: NodeTransition) {
    if transition.allowed_from(record.status()) {
        record.set_status_by_life_cycle(transition.target());
    } else {
        debug_assert!(
            false,
            "a {:?} node cannot take {transition:?}: not a transition of its life cycle",
            record.status()
        );
    }
}

/// A fork of a run starts at work, whatever its source's status: it is a
/// new run (its own id, its own log), not a transition of the source.
pub(crate) fn reopen_as_fork(state: &mut RunState) {
    state.set_status_by_life_cycle(RunStatus::Running);
}

impl StepContext<'_, '_> {
    /// Moves the run by `transition` (see the module's table).
    pub(crate) fn move_run(&mut self, transition: RunTransition) -> Result<(), IllegalTransition> {
        apply(self.state_mut(), transition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run started by admission (queued), moved to `status` for the test.
    fn run_in(status: RunStatus) -> RunState {
        let mut state = super::super::tests::started_run();
        state.set_status_by_life_cycle(status);
        state
    }

    const EVERY_STATUS: [RunStatus; 9] = RunStatus::ALL;
    const EVERY_TRANSITION: [RunTransition; 8] = [
        RunTransition::Work,
        RunTransition::ParkForPerson,
        RunTransition::HoldForDecision,
        RunTransition::Pause,
        RunTransition::Complete,
        RunTransition::Fail,
        RunTransition::RejectPlan,
        RunTransition::Cancel,
    ];

    #[test]
    fn an_ended_run_takes_no_transition_and_is_left_as_it_was() {
        for ended in EVERY_STATUS
            .into_iter()
            .filter(|status| status.is_terminal())
        {
            for transition in EVERY_TRANSITION {
                let mut state = run_in(ended);
                let refused = apply(&mut state, transition).unwrap_err();
                assert_eq!(refused.from, ended);
                assert_eq!(state.status(), ended, "{transition:?} changed an ended run");
                let error = CoreError::from(refused).to_string();
                assert!(
                    error.contains("is not a transition of its life cycle"),
                    "{error}"
                );
            }
        }
    }

    #[test]
    fn only_a_running_run_completes_and_a_queued_one_parks_for_no_person() {
        let allowed: Vec<(RunStatus, RunTransition)> = EVERY_STATUS
            .into_iter()
            .flat_map(|from| EVERY_TRANSITION.into_iter().map(move |to| (from, to)))
            .filter(|(from, to)| to.allowed_from(*from))
            .collect();
        let completes: Vec<RunStatus> = allowed
            .iter()
            .filter(|(_, to)| *to == RunTransition::Complete)
            .map(|(from, _)| *from)
            .collect();
        assert_eq!(completes, [RunStatus::Running]);
        assert!(!allowed.contains(&(RunStatus::Queued, RunTransition::ParkForPerson)));
        // Five open statuses: 5 × 8 transitions, less queued → complete,
        // parked → complete (3) and queued → park.
        assert_eq!(allowed.len(), 5 * 8 - 5);
    }

    #[test]
    fn a_completed_or_failed_node_only_goes_back_to_pending() {
        let every = [
            NodeTransition::Reset,
            NodeTransition::Schedule,
            NodeTransition::Deliberate,
            NodeTransition::ParkForPerson,
            NodeTransition::Complete,
            NodeTransition::Fail,
            NodeTransition::Skip,
        ];
        for ended in [
            NodeStatus::Completed,
            NodeStatus::Failed,
            NodeStatus::Skipped,
        ] {
            let allowed: Vec<NodeTransition> = every
                .into_iter()
                .filter(|transition| transition.allowed_from(ended))
                .collect();
            assert_eq!(allowed, [NodeTransition::Reset], "{ended:?}");
        }
        let mut record = NodeRecord::pending();
        for transition in [
            NodeTransition::Schedule,
            NodeTransition::Deliberate,
            NodeTransition::Complete,
            NodeTransition::Reset,
        ] {
            move_node(&mut record, transition);
            assert_eq!(record.status(), transition.target());
        }
    }

    #[test]
    fn an_allowed_transition_leads_to_its_status() {
        let mut state = run_in(RunStatus::Queued);
        apply(&mut state, RunTransition::Work).unwrap();
        apply(&mut state, RunTransition::ParkForPerson).unwrap();
        apply(&mut state, RunTransition::Work).unwrap();
        apply(&mut state, RunTransition::Complete).unwrap();
        assert_eq!(state.status(), RunStatus::Completed);
    }
}
