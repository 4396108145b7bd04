//! Frames that narrate a run for people watching it: the phase it is in
//! (`phase`, on each change) and each handoff between the orchestrator and a
//! capability (`handoff`: `requested` when a node is dispatched, `occurred`
//! when it starts).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{FrameStamp, to_payload};
use crate::contracts::capability::NodeKind;
use crate::wire::event::{EventDraft, EventType};

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunPhase {
    Planning,
    /// Structuring nodes: briefs, plans, analyses.
    Analysis,
    /// Execution, transformation and branch nodes: the artifacts.
    Generation,
    /// Validation nodes: reviews and panels.
    Qa,
    /// Assembling and checking the output.
    Finalization,
}

impl RunPhase {
    /// The phase a node of `kind` works in.
    pub fn of_node(kind: NodeKind) -> Self {
        match kind {
            NodeKind::Structuring => RunPhase::Analysis,
            NodeKind::Validation => RunPhase::Qa,
            NodeKind::Execution
            | NodeKind::Transformation
            | NodeKind::Branch
            | NodeKind::Fallback => RunPhase::Generation,
        }
    }

    /// Whether model text is streamed as `delta` frames in this phase.
    pub fn streams_text(self) -> bool {
        matches!(self, RunPhase::Generation | RunPhase::Qa)
    }
}

/// `phase`: the run entered `phase`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PhasePayload {
    pub phase: RunPhase,
}

pub fn phase(stamp: &FrameStamp, payload: &PhasePayload) -> EventDraft {
    stamp.draft(EventType::Phase).payload(to_payload(payload))
}

/// Where a handoff stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HandoffStatus {
    /// The node was dispatched (its step is on the queue).
    Requested,
    /// The capability took the work (the node started).
    Occurred,
}

/// `handoff`: work passes from `from` (the orchestrator, or the upstream
/// capabilities whose output it carries) to `to` (the node's capability).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HandoffPayload {
    pub status: HandoffStatus,
    pub from: String,
    pub to: String,
    pub attempt: u32,
}

pub fn handoff(stamp: &FrameStamp, node_id: &str, payload: &HandoffPayload) -> EventDraft {
    stamp
        .draft(EventType::Handoff)
        .node(node_id)
        .payload(to_payload(payload))
}
