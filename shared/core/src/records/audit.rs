//! What makes a run auditable after the fact, kept on the run: each plan
//! version's time and cause, and the registry facets its plans used, as
//! they were when planned (a registry changed since cannot rewrite what a
//! run was held to). `GET /runs/{id}` shows both, with the envelope's
//! schema hash and the provenance of each output property.

use serde::{Deserialize, Serialize};

/// One plan version: when it was put in force and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanVersionRecord {
    pub version: u32,
    /// RFC 3339.
    pub planned_at: String,
    /// `initial` for the first version; else the replan's trigger kind
    /// (`policy`, `model_failed`, `attempts_exhausted`,
    /// `quality_below_threshold`, `feedback`, …).
    pub trigger: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_node_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    /// The version's satisfaction score, when it was validated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub satisfaction_score: Option<f64>,
}

/// A registry facet as a run's plan used it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FacetStamp {
    /// The facet's `metadata.version`, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Hex SHA-256 of the facet's JSON Schema text.
    pub schema_hash: String,
}
