//! How a step ends: a node or the run failed (with the run's closing
//! metrics and its `error` frame), and the settling of a step's working set
//! into its [`Decision`]: the completion notification announced, a chat
//! run's lane release asked for, the parent told of a child's end and the
//! children cancelled with their parent. Methods of [`StepContext`], kept
//! apart so the step context itself depends on nothing of the engine but
//! its types.

use crate::basics::codes::FailureCode;
use crate::state::run::{RunFailure, RunStatus, StepCommand, StepMessage};
use crate::wire::frames;

use super::decision::Decision;
use super::effects::StepAdvance;
use super::step_context::StepContext;
use super::{lane_release, narration, notify};

impl StepContext<'_, '_> {
    /// Fails `node` for good (its record, a `node_error` saying `reason`)
    /// and with it the run (`run_message` in its `error`).
    pub(crate) fn fail_node(
        &mut self,
        node: &crate::planning::plan::PlanNode,
        attempt: u32,
        code: FailureCode,
        reason: &str,
        run_message: &str,
    ) {
        if let Some(record) = self.state_mut().node_mut(&node.node_id) {
            super::lifecycle::move_node(record, super::lifecycle::NodeTransition::Fail);
            record.error = Some(reason.to_string());
        }
        let failed = frames::node_error(
            &self.stamp(),
            node,
            reason.to_string(),
            &frames::NodeErrorPayload { code, attempt },
        );
        self.emit(failed);
        narration::emit_node_metrics(self, node);
        self.fail_run(code, run_message);
    }

    /// Ends the run with `code`: status failed, an `error` frame.
    pub fn fail_run(&mut self, code: FailureCode, message: &str) {
        self.end_run(RunStatus::Failed, code, message, message);
    }

    /// Ends the run without output: `status`, the failure, an `error` frame.
    pub(crate) fn end_run(
        &mut self,
        status: RunStatus,
        code: FailureCode,
        reason: &str,
        message: &str,
    ) {
        self.end_run_with_budget(status, code, reason, message, None);
    }

    /// [`Self::end_run`], with the budget that ended it in the `error` frame.
    pub(crate) fn end_run_with_budget(
        &mut self,
        status: RunStatus,
        code: FailureCode,
        reason: &str,
        message: &str,
        budget: Option<frames::BudgetReport>,
    ) {
        // An ended run keeps its first ending: a second changes nothing.
        let Some(transition) = super::lifecycle::RunTransition::ending_with(status) else {
            debug_assert!(
                false,
                "end_run with {status:?}, which is no ending without output"
            );
            return;
        };
        if let Err(refused) = self.move_run(transition) {
            debug_assert!(false, "{}", crate::basics::error::CoreError::from(refused));
            return;
        }
        narration::emit_run_metrics(self);
        self.state_mut().failure = Some(RunFailure {
            code,
            message: reason.to_string(),
        });
        let frame = frames::error(
            &self.stamp(),
            message,
            &frames::ErrorPayload {
                code,
                status,
                component: Some(code.component()),
                stage: self.state().phase,
                tool: self.state().last_tool_called(),
                budget,
            },
        );
        self.emit(frame);
    }

    pub(crate) fn into_decision(mut self) -> Decision {
        notify::announce(&mut self);
        super::memory_steps::ask_to_remember(&mut self);
        lane_release::ask_for_release(&mut self);
        if let Some(parent) = self.state().parent.clone() {
            for event in self.frames_mut() {
                event
                    .parent_run_id
                    .get_or_insert_with(|| parent.run_id.clone());
            }
            if self.state().status().is_terminal() {
                // The parent's session waits for this run: tell it how it
                // ended (its outputs by reference when large, so the step
                // message stays within a queue's message limit).
                let summary = crate::state::run::summary_for_message(self.state().child_summary());
                self.send(StepMessage::new(
                    &self.state().tenant_id,
                    &parent.run_id,
                    StepCommand::ChildRunEnded {
                        node_id: parent.node_id.clone(),
                        attempt: parent.attempt,
                        turn: parent.turn,
                        call_id: parent.call_id.clone(),
                        summary,
                    },
                ));
            }
        }
        if self.state().status().is_terminal() {
            // The child runs its sessions wait for end with it: their
            // cancel is in this commit's outbox, as durable as this end.
            let reason = format!(
                "its parent run {} ended {}",
                self.state().run_id,
                self.state().status().as_str()
            );
            for child_run_id in self.state().awaited_child_runs() {
                self.send(StepMessage::new(
                    &self.state().tenant_id,
                    &child_run_id,
                    StepCommand::CancelRun {
                        reason: reason.clone(),
                    },
                ));
            }
        }
        self.into_decision_as_is()
    }

    pub(crate) fn into_advance(self) -> StepAdvance {
        StepAdvance::Decided(Box::new(self.into_decision()))
    }
}
