//! Event frames: what a client sees on the SSE stream. The core builds
//! `EventDraft`s (through the typed constructors of `crate::wire::frames`); the run
//! store stamps each with the run's next sequence number and the run's
//! identity, making it an `EventFrame`. `EventFrame::to_sse` is the one SSE
//! encoder.

use serde::{Deserialize, Serialize};

use crate::contracts::compiler::FacetProvenance;
use crate::wire::frame_payload::FramePayload;

/// Every event type a run's stream can carry. Its name (`as_str`, the
/// SSE `event:` and the JSON `type`) and the list of all (`ALL`, in
/// catalogue order) come from `strum`, spelled as serde spells them.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum EventType {
    Start,
    Phase,
    PlanRequested,
    PlanRejected,
    PlanGenerated,
    PlanUpdated,
    PlanReadyForReview,
    PlanReview,
    NodeStart,
    NodeComplete,
    NodeError,
    /// A node that never ran (its guard did not hold, or all it depends
    /// on was skipped).
    NodeSkipped,
    Handoff,
    Delta,
    ToolCall,
    ToolResult,
    AgentState,
    /// A chat message's conversation: thread, user, context type.
    Session,
    /// A chat message's context guidance and registry, as loaded.
    OntologyLoaded,
    /// What of its thread a chat message is answered with.
    LastTurnContext,
    PolicyTriggered,
    HitlRequest,
    HitlResolved,
    ValidationError,
    Warning,
    Message,
    Metrics,
    /// A judge panel's `EvaluationProgress`.
    Progress,
    /// What a node was given from the tenant's memory before it ran.
    MemoryRecalled,
    Log,
    Error,
    Complete,
}

impl EventType {
    /// Every event type, in catalogue order.
    pub const ALL: &'static [EventType] = <EventType as strum::VariantArray>::VARIANTS;

    /// The SSE `event:` name (same as the JSON `type`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// `complete` and `error` end a run's stream.
    pub fn is_terminal(self) -> bool {
        matches!(self, EventType::Complete | EventType::Error)
    }
}

/// An event before it has a sequence number: every field of a frame but
/// its place in the run's log. Built by the constructors in
/// `crate::wire::frames`, one per frame type; an [`EventFrame`] is a draft
/// with that place (its fields flattened into the frame's JSON), so the
/// two cannot drift apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventDraft {
    #[serde(rename = "type")]
    pub event_type: EventType,
    pub timestamp: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    /// The run's plan version when the frame was written (0: no plan yet).
    #[serde(default)]
    pub plan_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<FramePayload>,
    /// Node-scoped frames: where each property of the node's compiled input
    /// and output contracts came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facet_provenance: Option<FrameProvenance>,
    /// A child run's frames: the run (and agent session) that started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    /// The run's trace, stamped when the write that makes the frame
    /// durable is made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<crate::basics::trace_context::TraceId>,
    /// The span that wrote the frame (a step's), when traces are exported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_id: Option<crate::basics::trace_context::SpanId>,
}

/// The facet provenance of a node's compiled contracts, as frames carry it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FrameProvenance {
    pub input: std::sync::Arc<Vec<FacetProvenance>>,
    pub output: std::sync::Arc<Vec<FacetProvenance>>,
}

impl EventDraft {
    pub fn new(event_type: EventType, timestamp: &str, plan_version: u32) -> Self {
        EventDraft {
            event_type,
            timestamp: timestamp.to_string(),
            node_id: None,
            plan_version,
            message: None,
            payload: None,
            facet_provenance: None,
            parent_run_id: None,
            trace_id: None,
            span_id: None,
        }
    }
    pub fn node(mut self, node_id: &str) -> Self {
        self.node_id = Some(node_id.to_string());
        self
    }
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }
    pub fn payload(mut self, payload: impl Into<FramePayload>) -> Self {
        self.payload = Some(payload.into());
        self
    }
    /// The payload as a JSON value, if the frame has one.
    pub fn payload_value(&self) -> Option<serde_json::Value> {
        self.payload.as_ref().map(|payload| payload.value().clone())
    }
    pub fn provenance(mut self, provenance: FrameProvenance) -> Self {
        self.facet_provenance = Some(provenance);
        self
    }

    /// Stamps the draft with its sequence number and run identity.
    pub fn into_frame(self, sequence: u64, run_id: &str, correlation_id: &str) -> EventFrame {
        EventFrame {
            draft: self,
            id: sequence,
            run_id: run_id.to_string(),
            correlation_id: correlation_id.to_string(),
            forwarded: false,
        }
    }
}

/// One frame of a run's event log, as streamed: a draft ([`EventDraft`],
/// read through `Deref`) with its sequence number and run identity.
///
/// Written with the draft flattened into it; read through
/// `FrameOnTheWire` rather than `#[serde(flatten)]`, which buffers the
/// fields and so cannot read the payload's raw JSON (`RawValue`), and would
/// cost every store read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "FrameOnTheWire")]
pub struct EventFrame {
    /// Everything but the frame's place in the log, flattened into its JSON.
    #[serde(flatten)]
    pub draft: EventDraft,
    pub id: u64,
    pub run_id: String,
    pub correlation_id: String,
    /// Set by a follower on a child run's frame it relays inside its
    /// parent's stream (never stored): such a frame keeps its own run's
    /// ids, and is written without an SSE `id:` so that `Last-Event-ID`
    /// stays the followed run's sequence.
    #[serde(skip)]
    pub forwarded: bool,
}

/// A frame as its JSON spells it, field by field: only for reading one.
/// `From` builds the draft with every field named, so a field added to
/// [`EventDraft`] does not compile until it is read here too.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FrameOnTheWire {
    #[serde(rename = "type")]
    event_type: EventType,
    id: u64,
    timestamp: String,
    run_id: String,
    correlation_id: String,
    #[serde(default)]
    node_id: Option<String>,
    #[serde(default)]
    plan_version: u32,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    payload: Option<FramePayload>,
    #[serde(default)]
    facet_provenance: Option<FrameProvenance>,
    #[serde(default)]
    parent_run_id: Option<String>,
    #[serde(default)]
    trace_id: Option<crate::basics::trace_context::TraceId>,
    #[serde(default)]
    span_id: Option<crate::basics::trace_context::SpanId>,
}

impl From<FrameOnTheWire> for EventFrame {
    fn from(wire: FrameOnTheWire) -> Self {
        EventFrame {
            draft: EventDraft {
                event_type: wire.event_type,
                timestamp: wire.timestamp,
                node_id: wire.node_id,
                plan_version: wire.plan_version,
                message: wire.message,
                payload: wire.payload,
                facet_provenance: wire.facet_provenance,
                parent_run_id: wire.parent_run_id,
                trace_id: wire.trace_id,
                span_id: wire.span_id,
            },
            id: wire.id,
            run_id: wire.run_id,
            correlation_id: wire.correlation_id,
            forwarded: false,
        }
    }
}

impl std::ops::Deref for EventFrame {
    type Target = EventDraft;
    fn deref(&self) -> &EventDraft {
        &self.draft
    }
}

impl std::ops::DerefMut for EventFrame {
    fn deref_mut(&mut self) -> &mut EventDraft {
        &mut self.draft
    }
}

impl EventFrame {
    /// `id: <seq>\nevent: <type>\ndata: <json>\n\n` (no `id:` line for a
    /// forwarded child frame).
    pub fn to_sse(&self) -> String {
        let data = serde_json::to_string(self).unwrap_or_else(|_| "{}".to_string());
        let id = if self.forwarded {
            String::new()
        } else {
            format!("id: {}\n", self.id)
        };
        format!(
            "{id}event: {}\ndata: {}\n\n",
            self.event_type.as_str(),
            data
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_event_type_is_named_as_serde_writes_it_in_catalogue_order() {
        assert_eq!(EventType::ALL.len(), 32);
        assert_eq!(EventType::ALL.first(), Some(&EventType::Start));
        assert_eq!(EventType::ALL.last(), Some(&EventType::Complete));
        for event_type in EventType::ALL {
            assert_eq!(
                serde_json::to_value(event_type).unwrap(),
                serde_json::Value::String(event_type.as_str().into())
            );
        }
        assert_eq!(
            EventType::PlanReadyForReview.as_str(),
            "plan_ready_for_review"
        );
    }

    #[test]
    fn a_frame_reads_back_as_it_was_written_its_payload_raw() {
        let mut draft = EventDraft::new(EventType::NodeComplete, "2026-01-01T00:00:00Z", 3)
            .node("node_1")
            .message("done")
            .payload(json!({"output": {"a": [1, 2]}}));
        draft.parent_run_id = Some("run-0".into());
        let frame = draft.into_frame(7, "run-1", "corr-1");
        let text = serde_json::to_string(&frame).unwrap();
        let back: EventFrame = serde_json::from_str(&text).unwrap();
        assert_eq!(back, frame);
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["type"], "node_complete");
        assert_eq!(value["id"], 7);
        assert_eq!(value["payload"]["output"]["a"][1], 2);
    }

    #[test]
    fn sse_frame_has_id_event_and_data_lines() {
        let frame = EventDraft::new(EventType::NodeStart, "2026-01-01T00:00:00Z", 1)
            .node("node_1")
            .payload(json!({"a": 1}))
            .into_frame(7, "run-1", "corr-1");
        let text = frame.to_sse();
        assert!(text.starts_with("id: 7\nevent: node_start\ndata: {"));
        assert!(text.ends_with("\n\n"));
        let data: serde_json::Value =
            serde_json::from_str(text.lines().nth(2).unwrap().trim_start_matches("data: "))
                .unwrap();
        assert_eq!(data["runId"], "run-1");
        assert_eq!(data["correlationId"], "corr-1");
        assert_eq!(data["type"], "node_start");
        assert_eq!(data["nodeId"], "node_1");
    }
}
