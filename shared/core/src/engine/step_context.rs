//! One step's working set ([`StepContext`]): the state a transition
//! changes, with the frames, outbox, transcripts, exchanges and run entries
//! it produces, and the helpers every transition uses to add to them.

use crate::basics::instant::Instant;
use crate::records::governance::{Timer, TimerPurpose};
use crate::state::run::{RunState, RunStatus, StepCommand, StepMessage};
use crate::wire::{event::EventDraft, frames, frames::FrameStamp};

use super::decision::{EngineContext, ThreadExchange};

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
            initial_status: state.status(),
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

    /// The plan now in force is recorded for the audit: its time and cause
    /// (`trigger`: `initial`, or the replan's trigger kind), its
    /// satisfaction score, and the registry facets it uses (each facet's
    /// first stamp in the run is kept).
    pub fn record_plan_version(
        &mut self,
        trigger: &str,
        trigger_node_id: Option<&str>,
        policy_id: Option<&str>,
        rationale: Option<&str>,
    ) {
        let Some(plan) = self.state.plan.clone() else {
            return;
        };
        self.state
            .plan_history
            .push(crate::records::audit::PlanVersionRecord {
                version: plan.plan_version,
                planned_at: self.now.rfc3339(),
                trigger: trigger.to_string(),
                trigger_node_id: trigger_node_id.map(str::to_string),
                policy_id: policy_id.map(str::to_string),
                rationale: rationale.map(str::to_string),
                satisfaction_score: self
                    .state
                    .plan_diagnostics
                    .as_ref()
                    .map(|bundle| bundle.satisfaction_score),
            });
        for (facet, stamp) in facet_stamps(&plan, self.engine.registry) {
            self.state.facet_snapshot.entry(facet).or_insert(stamp);
        }
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
}

/// The stamps of every registry facet `plan` reads or writes (facets a
/// builtin node invents are not the registry's and are left out).
fn facet_stamps(
    plan: &crate::planning::plan::PlanGraph,
    registry: &crate::catalog::registry::Registry,
) -> std::collections::BTreeMap<String, crate::records::audit::FacetStamp> {
    plan.nodes
        .iter()
        .flat_map(|node| node.input_facets.iter().chain(&node.output_facets))
        .filter_map(|name| {
            let facet = registry.facets.get(name)?;
            Some((
                name.clone(),
                crate::records::audit::FacetStamp {
                    version: facet
                        .metadata
                        .get("version")
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_string),
                    schema_hash: crate::contracts::compiler::schema_key_of(&facet.schema)
                        .to_string(),
                },
            ))
        })
        .collect()
}
