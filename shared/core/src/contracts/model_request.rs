//! What a model is asked: a provider-neutral request for one structured
//! answer (the system instruction, the user message, the answer's schema)
//! and, when one was chosen, the catalog model it goes to.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A provider-neutral request for one structured answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRequest {
    pub system_instruction: String,
    pub user_message: String,
    /// Name for `response_format.json_schema.name` (`[a-zA-Z0-9_-]`).
    pub schema_name: String,
    pub output_schema: std::sync::Arc<Value>,
    /// The catalog model the request goes to; the deployment's default
    /// model when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Box<ModelTarget>>,
}

/// A model of the registry's catalog as a request names it: its catalog
/// name, its provider and the provider's id for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelTarget {
    pub name: String,
    pub provider: String,
    pub model_id: String,
    /// The models that answer in this one's place, in order, when its
    /// provider keeps failing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallbacks: Vec<ModelTarget>,
}
