//! Capability registrations (seed 004 §5.6.2) and the plan taxonomy kinds.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Who performs the capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentType {
    Ai,
    Human,
    /// Orchestrator-managed (e.g. a join of variant branches); never registered.
    Builtin,
}

/// Plan taxonomy (seed 004 Story 8.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    Structuring,
    Branch,
    #[default]
    Execution,
    Transformation,
    Validation,
    Fallback,
}

impl NodeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Structuring => "structuring",
            NodeKind::Branch => "branch",
            NodeKind::Execution => "execution",
            NodeKind::Transformation => "transformation",
            NodeKind::Validation => "validation",
            NodeKind::Fallback => "fallback",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InputTraits {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub languages: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub formats: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub strengths: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limitations: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CapabilityCost {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_tokens: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeartbeatSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

/// The registration payload agents post (and `registry/capabilities/*.json` holds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CapabilityRegistration {
    pub capability_id: String,
    pub agent_type: AgentType,
    pub version: String,
    pub display_name: String,
    pub summary: String,
    #[serde(default)]
    pub kind: NodeKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_traits: Option<InputTraits>,
    pub input_contract: Vec<String>,
    pub output_contract: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<CapabilityCost>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_models: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<HeartbeatSpec>,
    /// The capability's system instruction. Registry files may give it as a
    /// `promptTemplateFile` next to the registration; the loader inlines it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_template_file: Option<String>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

impl CapabilityRegistration {
    /// Planner cost rank: lower is cheaper. Unknown tiers sort last.
    pub fn cost_rank(&self) -> u8 {
        match self.cost.as_ref().and_then(|cost| cost.tier.as_deref()) {
            Some("low") | Some("economy") => 0,
            Some("standard") | None => 1,
            Some("premium") | Some("high") => 2,
            Some(_) => 3,
        }
    }
}
