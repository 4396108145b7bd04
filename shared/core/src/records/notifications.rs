//! Completion out: when a run ends or parks, an optional notification (an
//! event on the configured event bus, and a signed POST to the envelope's
//! `callbackUrl`). The engine decides *that* a notification is due and
//! keeps its record in the run; each delivery attempt is its own step
//! (`StepCommand::Notify`), so a slow or failing receiver never holds up a
//! step of the run, and a failed attempt is retried later through the
//! queue (`not_before`, doubling from [`FIRST_RETRY_DELAY`]) up to
//! [`MAX_NOTIFICATION_ATTEMPTS`], then given up with the error kept.
//!
//! Invariants: a notification is delivered at most once by this engine
//! (its record says `delivered` once an attempt succeeded; a later
//! duplicate of any attempt is stale); every attempt of one notification
//! carries the same `deliveryId`, so a receiver deduplicates the rare
//! redelivery after a crash between the POST and its commit.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::basics::status::RunStatus;
use crate::basics::usage::TokenUsage;

/// Attempts per notification (the first and four retries).
pub const MAX_NOTIFICATION_ATTEMPTS: u32 = 5;

/// The delay before the first retry; each later one doubles it.
pub const FIRST_RETRY_DELAY: Duration = Duration::from_secs(2);

/// What happened to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunEvent {
    /// Delivered its output.
    Completed,
    /// Ended without output (failed, plan rejected, cancelled).
    Failed,
    /// Parked on a person (a task, an approval, a question, a pause).
    AwaitingHuman,
}

impl RunEvent {
    /// What `status` announces, if anything.
    pub fn of(status: RunStatus) -> Option<Self> {
        if status == RunStatus::Completed {
            Some(RunEvent::Completed)
        } else if status.is_terminal() {
            Some(RunEvent::Failed)
        } else if status.awaits_people() {
            Some(RunEvent::AwaitingHuman)
        } else {
            None
        }
    }

    /// The event's type on the bus (`detail-type`) and in the webhook body.
    pub fn event_type(self) -> &'static str {
        match self {
            RunEvent::Completed => "baton.run.completed",
            RunEvent::Failed => "baton.run.failed",
            RunEvent::AwaitingHuman => "baton.run.awaiting_human",
        }
    }
}

/// One notification's record in the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NotificationRecord {
    pub event: RunEvent,
    /// The run's status when it was due.
    pub status: RunStatus,
    /// When it was due (RFC 3339).
    pub occurred_at: String,
    /// Attempts made so far.
    #[serde(default)]
    pub attempts: u32,
    #[serde(default)]
    pub delivered: bool,
    /// Set when the attempts ran out.
    #[serde(default)]
    pub gave_up: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// What a delivery carries: the webhook body and the bus event's detail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunNotification {
    /// `baton.run.completed | failed | awaiting_human`.
    #[serde(rename = "type")]
    pub event_type: String,
    /// Stable across every attempt of this notification.
    pub delivery_id: String,
    pub run_id: String,
    pub tenant_id: String,
    pub correlation_id: String,
    pub status: RunStatus,
    pub occurred_at: String,
    pub usage: NotificationUsage,
    /// Failed runs: the failure's code and message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<serde_json::Value>,
}

/// The run's tokens and cost when the notification was built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotificationUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl NotificationUsage {
    pub fn of(usage: TokenUsage, cost_usd: Option<f64>) -> Self {
        NotificationUsage {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            total_tokens: usage.total(),
            cost_usd,
        }
    }
}

/// The delay before attempt `next_attempt` (2 s, 4 s, 8 s, …, at most 5 min).
pub fn retry_delay(next_attempt: u32) -> Duration {
    let doublings = next_attempt.saturating_sub(2).min(8);
    (FIRST_RETRY_DELAY * 2_u32.pow(doublings)).min(Duration::from_secs(300))
}
