//! Why a run replans ([`ReplanCause`]), and the replan the planner model is
//! drafting while the run waits for it ([`PendingReplan`]). Both are stored
//! with the run: a drafted replan survives any process between the step
//! that asked for it and the step that applies it.

use serde::{Deserialize, Serialize};

use crate::records::governance::EscalationRecord;
use crate::wire::frames::TriggerDetails;

/// Why and how to replan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplanCause {
    pub trigger: TriggerDetails,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    /// Nodes whose outputs must not be kept (with everything downstream).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalidate: Vec<String>,
    /// Capabilities the new version must not use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_capabilities: Vec<String>,
    /// A rejected draft ends the run (`plan_rejected`); otherwise the step
    /// goes on as if no replan was tried and nothing is written.
    #[serde(default)]
    pub reject_ends_run: bool,
    /// The node this replan escalates away from: once the new version is
    /// in place, warnings say what took its facets over (or that none did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalated: Option<EscalationRecord>,
    /// An escalation's candidates by recent health and price, best first:
    /// the replan tries them in this order, and `plan_updated` shows it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranking: Vec<crate::catalog::capability_health::RankedCapability>,
}

/// A replan the planner model drafts in its own step (`StepCommand::Replan`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingReplan {
    /// The plan version the draft becomes.
    pub version: u32,
    pub cause: ReplanCause,
}
