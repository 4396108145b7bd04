//! Structured lifecycle logs: one log line per lifecycle event a write
//! made durable (`run.started`, `plan.requested`, `plan.generated`,
//! `node.started`, `node.completed`, `validation.failed`,
//! `policy.triggered`, `run.completed`, …), each with its legacy name too
//! (`flexName`: `flex_plan_requested`, `flex_node_complete`,
//! `flex_validation_failed`, …, so a dashboard reading those names keeps
//! working), as a `tracing`
//! event of target [`LIFECYCLE_TARGET`] at `INFO` with `runId`, `tenant`,
//! `correlationId`, `planVersion`, the node and what the event measures
//! (durations, model, cost, codes). The Lambda functions format `tracing` as
//! JSON lines on stderr, so each is one JSON log line there.
//!
//! Logged by the observing store (`telemetry::ObservedRunStore`) after the
//! write that made the frames durable (a run's creation, a claim with its
//! start frames, a step's commit), so every path that writes a run logs, and
//! a retried or refused write logs nothing. Nothing is built when no
//! subscriber listens at `INFO` for the target (the benches, a quiet
//! `BATON_LOG`). Each line carries the run's `traceId` and, when traces are
//! exported, the `spanId` of the span that wrote the frame (both read off
//! the stamped frame), so a line links to its span in a trace backend.

use baton_core::basics::instant::Instant;
use baton_core::state::run::RunState;
use baton_core::wire::event::{EventDraft, EventType};
use serde_json::Value;

/// The `tracing` target every lifecycle line has (filter with
/// `BATON_LOG=baton::lifecycle=info`).
pub const LIFECYCLE_TARGET: &str = "baton::lifecycle";

/// The lifecycle event a frame is, if it is one.
pub fn lifecycle_event(draft: &EventDraft) -> Option<&'static str> {
    let payload = draft.payload.as_ref();
    Some(match draft.event_type {
        EventType::Start => "run.started",
        EventType::PlanRequested => "plan.requested",
        EventType::PlanGenerated => "plan.generated",
        EventType::PlanUpdated => "plan.updated",
        EventType::PlanRejected if payload.is_some_and(|payload| payload["willRetry"] != true) => {
            "plan.rejected"
        }
        EventType::NodeStart => "node.started",
        EventType::NodeComplete => "node.completed",
        EventType::NodeError => "node.failed",
        EventType::NodeSkipped => "node.skipped",
        EventType::PolicyTriggered => "policy.triggered",
        EventType::ValidationError => "validation.failed",
        EventType::HitlRequest => "hitl.requested",
        EventType::HitlResolved => "hitl.resolved",
        EventType::Complete => "run.completed",
        EventType::Error => "run.failed",
        _ => return None,
    })
}

/// The legacy name of a lifecycle frame's line: `flex_` and the frame's
/// type, `flex_validation_failed` for a `validation_error`.
pub fn flex_name(event_type: EventType) -> &'static str {
    match event_type {
        EventType::Start => "flex_start",
        EventType::PlanRequested => "flex_plan_requested",
        EventType::PlanGenerated => "flex_plan_generated",
        EventType::PlanUpdated => "flex_plan_updated",
        EventType::PlanRejected => "flex_plan_rejected",
        EventType::NodeStart => "flex_node_start",
        EventType::NodeComplete => "flex_node_complete",
        EventType::NodeError => "flex_node_error",
        EventType::NodeSkipped => "flex_node_skipped",
        EventType::PolicyTriggered => "flex_policy_triggered",
        EventType::ValidationError => "flex_validation_failed",
        EventType::HitlRequest => "flex_hitl_request",
        EventType::HitlResolved => "flex_hitl_resolved",
        EventType::Complete => "flex_complete",
        EventType::Error => "flex_error",
        _ => "",
    }
}

fn text(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// One lifecycle line, taken from a frame before the write that makes it
/// durable, logged after it.
#[derive(Debug, Clone, PartialEq)]
pub struct LifecycleLine {
    pub event: &'static str,
    /// The legacy name ([`flex_name`]).
    pub flex_name: &'static str,
    pub run_id: String,
    pub tenant: String,
    pub correlation_id: String,
    pub trace_id: String,
    pub span_id: String,
    pub plan_version: u32,
    pub node_id: String,
    pub attempt: String,
    pub duration_ms: String,
    pub run_duration_ms: Option<u64>,
    pub model: String,
    pub cost_usd: String,
    pub code: String,
    pub policy_id: String,
    pub status: String,
    pub message: String,
}

/// The lifecycle lines of `frames` written for run `run_id` of `tenant`
/// (whose state is `state` when the write carries it); none, and nothing
/// built, when nobody listens.
pub fn lines_of(
    tenant: &str,
    run_id: &str,
    state: Option<&RunState>,
    frames: &[EventDraft],
) -> Vec<LifecycleLine> {
    if !tracing::enabled!(target: LIFECYCLE_TARGET, tracing::Level::INFO) {
        return Vec::new();
    }
    frames
        .iter()
        .filter_map(|frame| {
            let event = lifecycle_event(frame)?;
            let payload = frame.payload.as_ref();
            let field = |name: &str| text(payload.and_then(|payload| payload.get(name)));
            // A run's ending says how long it took, from its creation.
            let run_duration_ms = state
                .filter(|_| matches!(event, "run.completed" | "run.failed"))
                .zip(Instant::parse_rfc3339(&frame.timestamp))
                .map(|(state, at)| {
                    u64::try_from(at.since(state.created_at).as_millis()).unwrap_or(u64::MAX)
                });
            Some(LifecycleLine {
                event,
                flex_name: flex_name(frame.event_type),
                run_id: run_id.to_string(),
                tenant: tenant.to_string(),
                correlation_id: state
                    .map(|state| state.correlation_id.clone())
                    .unwrap_or_default(),
                trace_id: frame.trace_id.map(|id| id.to_string()).unwrap_or_default(),
                span_id: frame.span_id.map(|id| id.to_string()).unwrap_or_default(),
                plan_version: frame.plan_version,
                node_id: frame.node_id.clone().unwrap_or_default(),
                attempt: field("attempt"),
                duration_ms: field("durationMs"),
                run_duration_ms,
                model: field("model"),
                cost_usd: field("costUsd"),
                code: field("code"),
                policy_id: field("policyId"),
                status: field("status"),
                message: frame.message.clone().unwrap_or_else(|| event.to_string()),
            })
        })
        .collect()
}

/// Logs `lines` (their write is durable now).
pub fn log_lines(lines: Vec<LifecycleLine>) {
    for line in lines {
        tracing::info!(
            target: LIFECYCLE_TARGET,
            event = line.event,
            flexName = line.flex_name,
            runId = %line.run_id,
            tenant = %line.tenant,
            correlationId = %line.correlation_id,
            traceId = %line.trace_id,
            spanId = %line.span_id,
            planVersion = line.plan_version,
            nodeId = %line.node_id,
            attempt = %line.attempt,
            durationMs = %line.duration_ms,
            runDurationMs = line.run_duration_ms,
            model = %line.model,
            costUsd = %line.cost_usd,
            code = %line.code,
            policyId = %line.policy_id,
            status = %line.status,
            "{}",
            line.message
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(event_type: EventType, payload: serde_json::Value) -> EventDraft {
        EventDraft {
            event_type,
            timestamp: String::new(),
            node_id: None,
            plan_version: 1,
            message: None,
            payload: Some(payload.into()),
            facet_provenance: None,
            parent_run_id: None,
            trace_id: None,
            span_id: None,
        }
    }

    #[test]
    fn lifecycle_frames_are_named_and_the_rest_are_not() {
        let named = |event_type, payload| lifecycle_event(&draft(event_type, payload));
        assert_eq!(named(EventType::Start, Value::Null), Some("run.started"));
        assert_eq!(
            named(EventType::NodeComplete, Value::Null),
            Some("node.completed")
        );
        assert_eq!(named(EventType::Error, Value::Null), Some("run.failed"));
        assert_eq!(
            named(
                EventType::PlanRejected,
                serde_json::json!({"willRetry": true})
            ),
            None,
            "a draft re-prompted is not the run's plan being rejected"
        );
        assert_eq!(
            named(
                EventType::PlanRejected,
                serde_json::json!({"willRetry": false})
            ),
            Some("plan.rejected")
        );
        assert_eq!(
            named(EventType::ValidationError, Value::Null),
            Some("validation.failed")
        );
        assert_eq!(
            flex_name(EventType::ValidationError),
            "flex_validation_failed"
        );
        assert_eq!(flex_name(EventType::NodeComplete), "flex_node_complete");
        assert_eq!(named(EventType::Delta, Value::Null), None);
        assert_eq!(named(EventType::Metrics, Value::Null), None);
    }
}
