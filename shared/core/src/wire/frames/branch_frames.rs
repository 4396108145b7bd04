//! Branches: `node_skipped`, a node that never ran because its guard did
//! not hold over the values it read, or because every node it depends on
//! was skipped.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{FrameStamp, node_scoped, to_payload};
use crate::planning::plan::PlanNode;
use crate::wire::event::{EventDraft, EventType};

/// Why a node was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// Its guard did not hold over the values it read.
    GuardFalse,
    /// Every node it depends on was skipped: it has nothing to work on.
    UpstreamSkipped,
}

/// `node_skipped`: the node ended without running.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeSkippedPayload {
    pub reason: SkipReason,
    /// The guard, as the plan holds it (`guard_false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<Value>,
    /// The values the guard read, by input facet (`guard_false`).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub read: Map<String, Value>,
    /// The skipped nodes it depended on (`upstream_skipped`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_upstream: Vec<String>,
}

pub fn node_skipped(
    stamp: &FrameStamp,
    node: &PlanNode,
    message: impl Into<String>,
    payload: &NodeSkippedPayload,
) -> EventDraft {
    node_scoped(stamp.draft(EventType::NodeSkipped), node)
        .message(message)
        .payload(to_payload(payload))
}
