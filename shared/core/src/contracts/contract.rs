//! The caller's output contract: a JSON Schema, optional
//! post-processing hints and declarative JSONLogic constraints.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Severity of a declarative constraint; decides planner responsibility.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ConstraintLevel {
    Hard,
    Soft,
    Informational,
}

/// A truth about the final output, as a JSONLogic expression over it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConstraintSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraint_id: Option<String>,
    pub expr: Value,
    pub level: ConstraintLevel,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
}

/// What a valid run result must look like.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutputContract {
    /// Contract mode as the seed's sample sends it (`json_schema`); informative.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The JSON Schema the final output must satisfy.
    pub schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hints: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<ConstraintSpec>,
}

impl OutputContract {
    /// The top-level property names of the contract schema, in schema order.
    pub fn top_level_properties(&self) -> Vec<String> {
        self.schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|properties| properties.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether the contract schema lists `property` under `required`.
    pub fn is_required_property(&self, property: &str) -> bool {
        self.schema
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|required| required.iter().any(|name| name.as_str() == Some(property)))
    }

    /// The schema the contract gives a top-level property, if any.
    pub fn property_schema(&self, property: &str) -> Option<&Value> {
        self.schema
            .get("properties")
            .and_then(|properties| properties.get(property))
    }
}
