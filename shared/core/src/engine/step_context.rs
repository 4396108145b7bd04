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
    /// The run as the step changes it: read with [`StepContext::state`],
    /// changed with [`StepContext::state_mut`] (its status only through
    /// the life cycle's transitions).
    state: RunState,
    now: Instant,
    /// `now` formatted once for every frame of the step.
    timestamp: String,
    engine: &'e EngineContext<'r>,
    events: Vec<EventDraft>,
    outbox: Vec<StepMessage>,
    transcripts: Vec<crate::contracts::panels::TranscriptPublication>,
    exchanges: Vec<ThreadExchange>,
    entries: Vec<crate::records::entries::RunEntry>,
    /// The run's status before the step (a change may be announced).
    initial_status: RunStatus,
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

    /// The step's time (no clock is read in the engine).
    pub fn now(&self) -> Instant {
        self.now
    }

    /// What the step reads besides the run: the registry, the settings,
    /// the validator cache.
    pub fn engine(&self) -> &'e EngineContext<'r> {
        self.engine
    }

    /// The run's status before this step.
    pub(super) fn initial_status(&self) -> RunStatus {
        self.initial_status
    }

    /// Emits `frames`, in order.
    pub fn emit_all(&mut self, frames: impl IntoIterator<Item = EventDraft>) {
        self.events.extend(frames);
    }

    /// Takes the frames emitted so far out of the step (a draft's frames
    /// that go with an effect rather than with this commit).
    pub(super) fn take_frames(&mut self) -> Vec<EventDraft> {
        std::mem::take(&mut self.events)
    }

    /// The frames this step has emitted so far, to amend before it ends.
    pub(super) fn frames_mut(&mut self) -> &mut [EventDraft] {
        &mut self.events
    }

    /// Puts `message` in the outbox: a step of this run or another's (a
    /// parent told of its child's end, a child cancelled).
    pub fn send(&mut self, message: StepMessage) {
        self.outbox.push(message);
    }

    /// A judge panel's transcript, published with this step's commit.
    pub fn publish_transcript(
        &mut self,
        transcript: crate::contracts::panels::TranscriptPublication,
    ) {
        self.transcripts.push(transcript);
    }

    /// A chat exchange recorded in its thread with this step's commit.
    pub fn record_exchange(&mut self, exchange: ThreadExchange) {
        self.exchanges.push(exchange);
    }

    /// The working set as the decision the shell commits (the endings of
    /// `step_endings` are settled first).
    pub(super) fn into_decision_as_is(self) -> super::decision::Decision {
        super::decision::Decision {
            state: self.state,
            events: self.events,
            outbox: self.outbox,
            transcripts: self.transcripts,
            exchanges: self.exchanges,
            entries: self.entries,
        }
    }

    /// The run as this step has left it so far.
    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// The run, to change (its life-cycle fields are private to it).
    pub fn state_mut(&mut self) -> &mut RunState {
        &mut self.state
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
        let stamps = facet_stamps(&plan, self.engine.registry);
        if self.state.facet_snapshot.is_empty() {
            self.state.facet_snapshot = std::sync::Arc::new(stamps);
        } else {
            let snapshot = std::sync::Arc::make_mut(&mut self.state.facet_snapshot);
            for (facet, stamp) in stamps {
                snapshot.entry(facet).or_insert(stamp);
            }
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
/// builtin node invents are not the registry's and are left out), each
/// stamped once with the digest its catalog keeps.
fn facet_stamps(
    plan: &crate::planning::plan::PlanGraph,
    registry: &crate::catalog::registry::Registry,
) -> std::collections::BTreeMap<String, crate::records::audit::FacetStamp> {
    let mut stamps = std::collections::BTreeMap::new();
    for name in plan
        .nodes
        .iter()
        .flat_map(|node| node.input_facets.iter().chain(&node.output_facets))
    {
        if stamps.contains_key(name) {
            continue;
        }
        let (Some(facet), Some(schema_hash)) =
            (registry.facets.get(name), registry.facets.schema_key(name))
        else {
            continue;
        };
        let version = facet
            .metadata
            .get("version")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string);
        stamps.insert(
            name.clone(),
            crate::records::audit::FacetStamp {
                version,
                schema_hash: schema_hash.to_string(),
            },
        );
    }
    stamps
}
