//! What a model is asked: a provider-neutral request for one structured
//! answer (the system instruction, the user message, the answer's schema).

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
}
