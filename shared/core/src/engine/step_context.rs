//! One step's working set ([`StepContext`]): the state a transition
//! changes, with the frames, outbox, transcripts, exchanges and run entries
//! it produces, and the helpers every transition uses to add to them.

use crate::basics::codes::FailureCode;
use crate::basics::instant::Instant;
use crate::records::governance::{Timer, TimerPurpose};
use crate::state::run::{NodeStatus, RunFailure, RunState, RunStatus, StepCommand, StepMessage};
use crate::wire::{event::EventDraft, frames, frames::FrameStamp};

use super::{
    Decision, EngineContext, StepAdvance, ThreadExchange, lane_release, narration, notify,
};

/// One step's working set: the state being changed, its frames and outbox.
pub(crate) struct StepContext<'e, 'r> {
    pub state: RunState,
    pub now: Instant,
    /// `now` formatted once for every frame of the step.
    pub(super) timestamp: String,
    pub engine: &'e EngineContext<'r>,
    pub events: Vec<EventDraft>,
    pub outbox: Vec<StepMessage>,
    pub transcripts: Vec<crate::contracts::panels::TranscriptPublication>,
    pub exchanges: Vec<ThreadExchange>,
    pub entries: Vec<crate::records::entries::RunEntry>,
    /// The run's status before the step (a change may be announced).
    pub(super) initial_status: RunStatus,
}

impl<'e, 'r> StepContext<'e, 'r> {
    pub(crate) fn new(mut state: RunState, now: Instant, engine: &'e EngineContext<'r>) -> Self {
        let timestamp = now.rfc3339();
        state.updated_at = now;
        StepContext {
            initial_status: state.status,
            state,
            now,
            timestamp,
            engine,
            events: Vec::new(),
            outbox: Vec::new(),
            transcripts: Vec::new(),
            exchanges: Vec::new(),
            entries: Vec::new(),
        }
    }

    /// Writes `body` beside the run under `key`, with this step's commit.
    pub fn put_entry(
        &mut self,
        key: &crate::records::entries::EntryKey,
        body: crate::records::entries::EntryBody,
    ) {
        self.entries
            .push(crate::records::entries::RunEntry::new(key, body));
    }

    /// Appends `turn` to the conversation of `node_id`'s open session (an
    /// entry, and the session's count of them); nothing when the session
    /// is over.
    pub fn record_turn(&mut self, node_id: &str, turn: crate::records::conversation::SessionTurn) {
        let Some(session) = self.state.sessions.get_mut(node_id) else {
            return;
        };
        let key = crate::records::entries::EntryKey::ConversationTurn {
            node_id: node_id.to_string(),
            attempt: session.attempt,
            seq: session.conversation.recorded_turns,
        };
        session.conversation.recorded_turns += 1;
        self.put_entry(&key, crate::records::entries::EntryBody::Turn(turn));
    }

    /// The stamp of this step's frames (borrowing its timestamp).
    pub fn stamp(&self) -> FrameStamp<'_> {
        FrameStamp::from_parts(
            std::borrow::Cow::Borrowed(&self.timestamp),
            self.state.plan_version(),
            self.state
                .parent
                .as_ref()
                .map(|parent| parent.run_id.as_str()),
        )
    }

    pub fn emit(&mut self, frame: EventDraft) {
        self.events.push(frame);
    }

    /// Announces `phase` (a `phase` frame) unless the run is in it already.
    pub fn enter_phase(&mut self, phase: frames::RunPhase) {
        if self.state.phase != Some(phase) {
            self.state.phase = Some(phase);
            let frame = frames::phase(&self.stamp(), &frames::PhasePayload { phase });
            self.emit(frame);
        }
    }

    pub fn enqueue(&mut self, command: StepCommand) {
        self.outbox.push(StepMessage::new(
            &self.state.tenant_id,
            &self.state.run_id,
            command,
        ));
    }

    /// Records a durable timer and puts its delayed message in the outbox.
    pub fn start_timer(&mut self, timer_id: String, due: Instant, purpose: TimerPurpose) {
        self.outbox.push(StepMessage::timer(
            &self.state.tenant_id,
            &self.state.run_id,
            &timer_id,
            due,
        ));
        self.state.governance.timers.insert(
            timer_id,
            Timer {
                due_at: due,
                purpose,
            },
        );
    }

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
        if let Some(record) = self.state.node_mut(&node.node_id) {
            record.status = NodeStatus::Failed;
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
        narration::emit_run_metrics(self);
        self.state.status = status;
        self.state.failure = Some(RunFailure {
            code,
            message: reason.to_string(),
        });
        let frame = frames::error(
            &self.stamp(),
            message,
            &frames::ErrorPayload {
                code,
                status,
                budget,
            },
        );
        self.emit(frame);
    }

    pub(crate) fn into_decision(mut self) -> Decision {
        notify::announce(&mut self);
        lane_release::ask_for_release(&mut self);
        if let Some(parent) = self.state.parent.clone() {
            for event in &mut self.events {
                event
                    .parent_run_id
                    .get_or_insert_with(|| parent.run_id.clone());
            }
            if self.state.status.is_terminal() {
                // The parent's session waits for this run: tell it how it
                // ended (its outputs by reference when large, so the step
                // message stays within a queue's message limit).
                let summary = crate::state::run::summary_for_message(self.state.child_summary());
                self.outbox.push(StepMessage::new(
                    &self.state.tenant_id,
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
        if self.state.status.is_terminal() {
            // The child runs its sessions wait for end with it: their
            // cancel is in this commit's outbox, as durable as this end.
            let reason = format!(
                "its parent run {} ended {}",
                self.state.run_id,
                self.state.status.as_str()
            );
            for child_run_id in self.state.awaited_child_runs() {
                self.outbox.push(StepMessage::new(
                    &self.state.tenant_id,
                    &child_run_id,
                    StepCommand::CancelRun {
                        reason: reason.clone(),
                    },
                ));
            }
        }
        Decision {
            state: self.state,
            events: self.events,
            outbox: self.outbox,
            transcripts: self.transcripts,
            exchanges: self.exchanges,
            entries: self.entries,
        }
    }

    pub(crate) fn into_advance(self) -> StepAdvance {
        StepAdvance::Decided(Box::new(self.into_decision()))
    }
}
