//! The ingest function's use case: runs other services submit through the
//! ingest queue, and schedules' fires EventBridge Scheduler sends there.

use baton_core::basics::instant::Instant;

use crate::services::{RunService, ScheduleService};

/// A run submitted by another service through the ingest queue.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IngestMessage {
    /// The tenant the run belongs to (the queue's IAM policy decides who may send).
    pub tenant_id: String,
    /// The task envelope; its `idempotencyKey` makes a re-sent submission return the same run.
    pub envelope: serde_json::Value,
    /// The sender's W3C `traceparent`: the run's root span hangs under it.
    /// A malformed one is ignored (as W3C asks of a malformed header),
    /// with a warning.
    #[serde(default)]
    pub traceparent: Option<String>,
}

impl IngestMessage {
    /// The sender's trace, when it sent a well-formed one.
    pub fn caller_trace(&self) -> Option<baton_core::basics::trace_context::TraceParent> {
        let text = self.traceparent.as_deref()?;
        match baton_core::basics::trace_context::TraceParent::parse(text) {
            Ok(parent) => Some(parent),
            Err(error) => {
                tracing::warn!(%error, "ingest message's traceparent ignored");
                None
            }
        }
    }

    /// The message in a record's body: `{tenantId, envelope}` itself, or an
    /// EventBridge event (`detail-type`, `detail`) whose `detail` is one (a
    /// rule routing events to the queue delivers the whole event).
    pub fn from_body(body: &str) -> Result<Self, serde_json::Error> {
        let value: serde_json::Value = serde_json::from_str(body)?;
        let is_event = value
            .get("detail-type")
            .is_some_and(serde_json::Value::is_string)
            && value
                .get("detail")
                .is_some_and(serde_json::Value::is_object);
        match value {
            serde_json::Value::Object(mut event) if is_event => {
                serde_json::from_value(event.remove("detail").unwrap_or_default())
            }
            other => serde_json::from_value(other),
        }
    }
}

/// A schedule's fire, sent by EventBridge Scheduler
/// (`{"tenantId", "scheduleFire": {"scheduleId", "fireTime"}}`).
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleFireMessage {
    pub tenant_id: String,
    pub schedule_fire: ScheduleFire,
}

/// Which schedule fired, for which time.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleFire {
    pub schedule_id: String,
    /// RFC 3339, as EventBridge Scheduler writes `<aws.scheduler.scheduled-time>`.
    pub fire_time: String,
}

impl ScheduleFireMessage {
    /// The fire in a record's body, if the body is one (it names
    /// `scheduleFire`).
    pub fn from_body(body: &str) -> Option<Result<Self, FireNotStarted>> {
        let value: serde_json::Value = serde_json::from_str(body).ok()?;
        value.get("scheduleFire")?;
        Some(serde_json::from_value(value).map_err(FireNotStarted::NotAFire))
    }
}

/// Why a schedule's fire was not started.
#[derive(Debug, thiserror::Error)]
pub enum FireNotStarted {
    #[error("not {{tenantId, scheduleFire: {{scheduleId, fireTime}}}}: {0}")]
    NotAFire(serde_json::Error),
    #[error("scheduleFire.fireTime `{0}` is not an RFC 3339 time")]
    NotATime(String),
    #[error(transparent)]
    Refused(#[from] crate::error::RuntimeError),
}

/// The ingest function's use case: submits each record's envelope (a
/// message, or an EventBridge event carrying one as its `detail`), or
/// starts a schedule's fire (one run per fire time, however often it is
/// delivered). Returns the ids to report as failed: after the queue's
/// bound they reach its dead-letter queue, so an invalid submission is
/// kept for inspection, never silently dropped.
pub async fn process_ingest_batch(
    runs: &RunService,
    schedules: &ScheduleService,
    records: Vec<(String, String)>,
) -> Vec<String> {
    let mut failed = Vec::new();
    for (message_id, body) in records {
        if let Some(fire) = ScheduleFireMessage::from_body(&body) {
            if let Err(error) = start_fire(schedules, fire).await {
                tracing::error!(%message_id, %error, "a schedule's fire was not started");
                failed.push(message_id);
            }
            continue;
        }
        let submitted = match IngestMessage::from_body(&body) {
            Ok(mut message) => {
                // The queue redelivers a record under its own id: with no
                // key of the sender's, that id is the submission's key, so
                // a redelivered batch makes no second run.
                if let Some(envelope) = message.envelope.as_object_mut()
                    && !envelope.contains_key("idempotencyKey")
                {
                    envelope.insert(
                        "idempotencyKey".into(),
                        serde_json::Value::String(format!("ingest:{message_id}")),
                    );
                }
                runs.submit_traced(
                    &message.tenant_id,
                    &message.envelope,
                    crate::services::Submitter {
                        traceparent: message.caller_trace(),
                        user: None,
                    },
                )
                .await
            }
            Err(error) => {
                tracing::error!(%message_id, %error, "ingest message is not {{tenantId, envelope}}");
                failed.push(message_id);
                continue;
            }
        };
        match submitted {
            Ok(run) => {
                tracing::info!(%message_id, run_id = %run.run_id, deduplicated = run.deduplicated, "ingested a run")
            }
            Err(error) => {
                tracing::error!(%message_id, %error, "ingest submission failed");
                failed.push(message_id);
            }
        }
    }
    failed
}

async fn start_fire(
    schedules: &ScheduleService,
    fire: Result<ScheduleFireMessage, FireNotStarted>,
) -> Result<(), FireNotStarted> {
    let fire = fire?;
    let fire_at = Instant::parse_rfc3339(&fire.schedule_fire.fire_time)
        .ok_or_else(|| FireNotStarted::NotATime(fire.schedule_fire.fire_time.clone()))?;
    let started = schedules
        .fire_delivered(&fire.tenant_id, &fire.schedule_fire.schedule_id, fire_at)
        .await?;
    if let Some(run) = started {
        tracing::info!(schedule_id = %fire.schedule_fire.schedule_id, run_id = %run.run_id, deduplicated = run.deduplicated, "a schedule fired");
    }
    Ok(())
}
