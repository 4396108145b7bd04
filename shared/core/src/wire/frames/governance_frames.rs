//! Frames of governance: runtime policies firing, plan updates, human
//! requests (approvals, clarifying questions) and their resolution.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{FrameStamp, PlannerKind, to_payload};
use crate::basics::status::NodeStatus;
use crate::planning::plan::PlanEdge;
use crate::records::governance::HitlKind;
use crate::wire::event::{EventDraft, EventType};

/// What made a policy fire (or a plan change).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TriggerDetails {
    /// `onStart`, `onNodeComplete`, `onValidationFail`, `onTimeout`,
    /// `onMetricBelow`, `onBudgetExceeded`, `manual`; for chained and
    /// built-in changes: `hitl_resolved`, `attempts_exhausted`,
    /// `model_failed`, `quality_below_threshold`, `feedback`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability_id: Option<String>,
    /// `onMetricBelow`: the metric, its value and the threshold
    /// (`onBudgetExceeded`: the budget's field, the spend and the limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// `hitl_resolved`: the request and the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<HitlDecision>,
}

/// `policy_triggered`: a runtime policy fired and its action is applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyTriggeredPayload {
    pub policy_id: String,
    pub trigger: TriggerDetails,
    /// The canonical action (`type` and its fields, nested
    /// `approveAction`/`rejectAction` for `hitl`).
    pub action_details: Value,
}

pub fn policy_triggered(stamp: &FrameStamp, payload: &PolicyTriggeredPayload) -> EventDraft {
    let draft = stamp.draft(EventType::PolicyTriggered);
    let draft = match &payload.trigger.node_id {
        Some(node_id) => draft.node(node_id),
        None => draft,
    };
    draft
        .message(format!("policy {} fired", payload.policy_id))
        .payload(to_payload(payload))
}

/// A node of the new plan version and where it stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdatedNodeSummary {
    pub node_id: String,
    pub capability_id: String,
    pub status: NodeStatus,
}

/// `plan_updated`: a new plan version replaced the previous one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanUpdatedPayload {
    pub previous_version: u32,
    pub version: u32,
    pub trigger: TriggerDetails,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    /// Completed nodes whose outputs the new version keeps (not re-run).
    pub reused_nodes: Vec<String>,
    /// Nodes the new version has that the previous one did not (by id).
    #[serde(default)]
    pub added_nodes: Vec<String>,
    /// Nodes of the previous version the new one drops (by id).
    #[serde(default)]
    pub removed_nodes: Vec<String>,
    /// Which planner drafted the new version (the LLM planner, when it is
    /// configured and its draft was valid; else the deterministic one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planner: Option<PlannerKind>,
    /// The planner model's answer this version was drafted from (its model
    /// and usage); absent for a version no model drafted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<super::ModelResponseSummary>,
    pub nodes: Vec<UpdatedNodeSummary>,
    pub edges: Vec<PlanEdge>,
    /// The new version's validation: its findings and satisfaction score,
    /// as `plan_generated` carries them for the first (absent in frames
    /// written before versions carried them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<crate::contracts::diagnostics::DiagnosticsBundle>,
    /// A node escalated: the capabilities that could take its facets over,
    /// best first, with what ranked them (recent success rate, latency and
    /// price, kept per capability per tenant). The caller's selection
    /// policy still ranks first; absent for any other replan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub escalation_ranking: Vec<crate::catalog::capability_health::RankedCapability>,
}

pub fn plan_updated(stamp: &FrameStamp, payload: &PlanUpdatedPayload) -> EventDraft {
    stamp
        .draft(EventType::PlanUpdated)
        .message(format!(
            "plan version {} replaces version {}",
            payload.version, payload.previous_version
        ))
        .payload(to_payload(payload))
}

pub use crate::records::governance::ContractSummary;

/// `hitl_request`: the run waits for a person's approval or answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HitlRequestPayload {
    pub request_id: String,
    pub kind: HitlKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_node_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_summary: Option<ContractSummary>,
    pub operator_prompt: String,
    /// `clarify`: the question's id in `runContext.hitlClarifications`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question_id: Option<String>,
}

pub fn hitl_request(stamp: &FrameStamp, payload: &HitlRequestPayload) -> EventDraft {
    let draft = stamp.draft(EventType::HitlRequest);
    let draft = match &payload.pending_node_id {
        Some(node_id) => draft.node(node_id),
        None => draft,
    };
    draft
        .message(payload.operator_prompt.clone())
        .payload(to_payload(payload))
}

/// How a person resolved a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HitlDecision {
    Approve,
    Reject,
    /// A clarifying question was answered.
    Answered,
}

/// `hitl_resolved`: a person resolved a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HitlResolvedPayload {
    pub request_id: String,
    pub kind: HitlKind,
    pub decision: HitlDecision,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The signed-in user who decided or answered, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
}

pub fn hitl_resolved(stamp: &FrameStamp, payload: &HitlResolvedPayload) -> EventDraft {
    stamp
        .draft(EventType::HitlResolved)
        .payload(to_payload(payload))
}

/// A policy's `emit` action: a `log` frame naming the event, with its payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyEventPayload {
    pub event: String,
    pub policy_id: String,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub data: Map<String, Value>,
}

pub fn policy_event(stamp: &FrameStamp, payload: &PolicyEventPayload) -> EventDraft {
    stamp
        .draft(EventType::Log)
        .message(payload.event.clone())
        .payload(to_payload(payload))
}
