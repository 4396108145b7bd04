//! What a tool answers when it refuses: the error the client reads, with
//! the JSON path of a wrong argument.

use baton_runtime::RuntimeError;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};

/// A tool error: what went wrong, in words and as JSON.
pub(super) struct ToolRefusal {
    pub(super) message: String,
    pub(super) details: Value,
}

impl ToolRefusal {
    /// The error result the client reads (`isError`, the message as text,
    /// `{error, details}` as structured content).
    pub(super) fn into_result(self) -> CallToolResult {
        let mut result = CallToolResult::error(vec![ContentBlock::text(self.message.clone())]);
        result.structured_content = Some(json!({"error": self.message, "details": self.details}));
        result
    }
}

pub(super) fn refused(message: impl Into<String>, details: Value) -> ToolRefusal {
    ToolRefusal {
        message: message.into(),
        details,
    }
}

/// The arguments as `T`, or a refusal naming the JSON path that is wrong.
pub(super) fn arguments<T: serde::de::DeserializeOwned>(
    arguments: Option<Map<String, Value>>,
) -> Result<T, ToolRefusal> {
    let value = Value::Object(arguments.unwrap_or_default());
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = match error.path().to_string().as_str() {
            "." => "$".to_string(),
            inner => format!("$.{inner}"),
        };
        refused(format!("{path}: {}", error.inner()), json!({"path": path}))
    })
}

/// A service error as a tool error (an invalid input names its path).
pub(super) fn runtime_refusal(error: RuntimeError) -> ToolRefusal {
    match error {
        RuntimeError::InvalidInput { path, message } => {
            refused(format!("{path}: {message}"), json!({"path": path}))
        }
        other => {
            let api = crate::error::ApiError::from(other);
            refused(
                format!("{}: {}", api.code, api.message),
                json!({"code": api.code, "retryable": api.is_retryable()}),
            )
        }
    }
}
