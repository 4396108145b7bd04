//! Event frames: what a client sees on the SSE stream (DESIGN.md "Wire
//! contracts"). The core decides `EventDraft`s; the run store stamps each
//! with the run's next sequence number, making it an `EventFrame`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Every event type of the seeds (the union DESIGN.md lists).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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
    Handoff,
    Delta,
    ToolCall,
    ToolResult,
    AgentState,
    PolicyTriggered,
    HitlRequest,
    HitlResolved,
    ValidationError,
    Warning,
    Message,
    Metrics,
    Log,
    Error,
    Complete,
}

impl EventType {
    /// The SSE `event:` name (same as the JSON `type`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Start => "start",
            EventType::Phase => "phase",
            EventType::PlanRequested => "plan_requested",
            EventType::PlanRejected => "plan_rejected",
            EventType::PlanGenerated => "plan_generated",
            EventType::PlanUpdated => "plan_updated",
            EventType::PlanReadyForReview => "plan_ready_for_review",
            EventType::PlanReview => "plan_review",
            EventType::NodeStart => "node_start",
            EventType::NodeComplete => "node_complete",
            EventType::NodeError => "node_error",
            EventType::Handoff => "handoff",
            EventType::Delta => "delta",
            EventType::ToolCall => "tool_call",
            EventType::ToolResult => "tool_result",
            EventType::AgentState => "agent_state",
            EventType::PolicyTriggered => "policy_triggered",
            EventType::HitlRequest => "hitl_request",
            EventType::HitlResolved => "hitl_resolved",
            EventType::ValidationError => "validation_error",
            EventType::Warning => "warning",
            EventType::Message => "message",
            EventType::Metrics => "metrics",
            EventType::Log => "log",
            EventType::Error => "error",
            EventType::Complete => "complete",
        }
    }

    /// `complete` and `error` end a run's stream.
    pub fn is_terminal(self) -> bool {
        matches!(self, EventType::Complete | EventType::Error)
    }
}

/// An event before it has a sequence number.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventDraft {
    #[serde(rename = "type")]
    pub event_type: EventType,
    pub timestamp: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_version: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
}

impl EventDraft {
    pub fn new(event_type: EventType, timestamp: &str) -> Self {
        EventDraft {
            event_type,
            timestamp: timestamp.to_string(),
            node_id: None,
            plan_version: None,
            message: None,
            payload: None,
        }
    }
    pub fn node(mut self, node_id: &str) -> Self {
        self.node_id = Some(node_id.to_string());
        self
    }
    pub fn plan_version(mut self, version: u32) -> Self {
        self.plan_version = Some(version);
        self
    }
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }
    pub fn payload(mut self, payload: Value) -> Self {
        self.payload = Some(payload);
        self
    }

    /// Stamps the draft with its sequence number and run identity.
    pub fn into_frame(self, sequence: u64, run_id: &str, correlation_id: &str) -> EventFrame {
        EventFrame {
            event_type: self.event_type,
            id: sequence,
            timestamp: self.timestamp,
            run_id: run_id.to_string(),
            correlation_id: correlation_id.to_string(),
            node_id: self.node_id,
            plan_version: self.plan_version,
            message: self.message,
            payload: self.payload,
        }
    }
}

/// One frame of a run's event log, as streamed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventFrame {
    #[serde(rename = "type")]
    pub event_type: EventType,
    pub id: u64,
    pub timestamp: String,
    pub run_id: String,
    pub correlation_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_version: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
}

impl EventFrame {
    /// `id: <seq>\nevent: <type>\ndata: <json>\n\n`.
    pub fn to_sse(&self) -> String {
        let data = serde_json::to_string(self).unwrap_or_else(|_| "{}".to_string());
        format!(
            "id: {}\nevent: {}\ndata: {}\n\n",
            self.id,
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
    fn sse_frame_has_id_event_and_data_lines() {
        let frame = EventDraft::new(EventType::NodeStart, "2026-01-01T00:00:00Z")
            .node("node_1")
            .payload(json!({"a": 1}))
            .into_frame(7, "run-1", "corr-1");
        let text = frame.to_sse();
        assert!(text.starts_with("id: 7\nevent: node_start\ndata: {"));
        assert!(text.ends_with("\n\n"));
        let data: Value =
            serde_json::from_str(text.lines().nth(2).unwrap().trim_start_matches("data: "))
                .unwrap();
        assert_eq!(data["runId"], "run-1");
        assert_eq!(data["correlationId"], "corr-1");
        assert_eq!(data["type"], "node_start");
        assert_eq!(data["nodeId"], "node_1");
    }
}
