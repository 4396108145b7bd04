//! `metrics` frames: a node's tokens, cost and wall time (with the run's
//! totals so far), and the run's totals at its ending.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{FrameStamp, to_payload};
use crate::wire::event::{EventDraft, EventType};

/// Token totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenTotals {
    pub prompt: u64,
    pub completion: u64,
    pub total: u64,
    /// Of `prompt`, served from the provider's prompt cache (when it says).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached: Option<u64>,
}

impl TokenTotals {
    pub fn of(usage: &crate::basics::usage::TokenUsage) -> Self {
        TokenTotals {
            prompt: usage.prompt_tokens,
            completion: usage.completion_tokens,
            total: usage.total(),
            cached: (usage.cached_prompt_tokens > 0).then_some(usage.cached_prompt_tokens),
        }
    }
}

/// The run's totals so far, carried by a node's `metrics`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunTotals {
    pub tokens: TokenTotals,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Nodes completed so far.
    pub nodes_completed: usize,
}

/// `metrics`: the run's totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricsPayload {
    pub tokens: TokenTotals,
    pub nodes: usize,
    /// Wall time: of the node (a node's `metrics`, after its
    /// `node_complete`), or of the run (the last `metrics`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// What the priced model calls cost (of the node, or of the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// A node's `metrics`: the run's totals so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunTotals>,
    /// A node's `metrics`: what its model calls were for (`planning`,
    /// `execution`, `review`, `judge`, `summary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_type: Option<std::borrow::Cow<'static, str>>,
    /// The run's last `metrics`: who and what its usage is attributed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<crate::basics::usage::UsageAttribution>,
}

pub fn metrics(stamp: &FrameStamp, payload: &MetricsPayload) -> EventDraft {
    stamp.draft(EventType::Metrics).payload(to_payload(payload))
}

/// A node's `metrics`: its tokens and wall time.
pub fn node_metrics(stamp: &FrameStamp, node_id: &str, payload: &MetricsPayload) -> EventDraft {
    metrics(stamp, payload).node(node_id)
}
