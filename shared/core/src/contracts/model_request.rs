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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelTarget {
    pub name: String,
    pub provider: String,
    pub model_id: String,
    /// The models that answer in this one's place, in order, when its
    /// provider keeps failing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallbacks: Vec<ModelTarget>,
    /// The model takes strict structured output (the catalog's
    /// `supports.jsonSchema`): an OpenAI-compatible request asks for
    /// `strict: true` when the schema allows it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub strict_output: bool,
    /// The model caches marked prompt prefixes (the catalog's
    /// `supports.promptCache`): Anthropic and Bedrock requests mark their
    /// stable prefix only then (Bedrock refuses a `cachePoint` a model
    /// cannot use).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prompt_cache: bool,
    /// A remote agent's request headers, by reference (its capability's
    /// `remoteAgent.headers`): the provider reads their values when it
    /// calls, so a request never holds one.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub remote_headers: crate::basics::credentials::HeaderSources,
}

/// The answer tool's name when the request's schema has none.
const ANSWER_TOOL: &str = "answer";

impl ModelRequest {
    /// Whether the request's stable prefix is marked cacheable: when its
    /// model caches prompts, or when it names no catalog model (the
    /// deployment's default).
    pub fn marks_prompt_cache(&self) -> bool {
        self.model.as_ref().is_none_or(|target| target.prompt_cache)
    }

    /// Whether the request's model takes strict structured output.
    pub fn model_takes_strict_output(&self) -> bool {
        self.model
            .as_ref()
            .is_some_and(|target| target.strict_output)
    }

    /// The tool whose input is the answer, for providers that give
    /// structured output as a forced tool call (Anthropic, Bedrock).
    pub fn answer_tool_name(&self) -> &str {
        if self.schema_name.is_empty() {
            ANSWER_TOOL
        } else {
            &self.schema_name
        }
    }

    /// The answer tool's input schema: the request's schema when it is an
    /// object, else wrapped under `answer` (a tool's input is an object);
    /// and whether it was wrapped.
    pub fn answer_tool_schema(&self) -> (Value, bool) {
        let schema = self.output_schema.as_ref();
        if schema.get("type").and_then(Value::as_str) == Some("object") {
            (schema.clone(), false)
        } else {
            (
                serde_json::json!({"type": "object", "required": ["answer"], "properties": {"answer": schema}}),
                true,
            )
        }
    }
}

/// The answer text an answer tool's `input` carries (unwrapped when the
/// schema was wrapped under `answer`; `{}` for an empty input).
pub fn answer_from_tool_input(input: &str, wrapped: bool) -> Result<String, serde_json::Error> {
    if !wrapped {
        return Ok(if input.trim().is_empty() {
            "{}".to_string()
        } else {
            input.to_string()
        });
    }
    let value: Value = serde_json::from_str(input)?;
    Ok(value
        .get("answer")
        .cloned()
        .unwrap_or(Value::Null)
        .to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(schema: Value, schema_name: &str) -> ModelRequest {
        ModelRequest {
            system_instruction: String::new(),
            user_message: String::new(),
            schema_name: schema_name.into(),
            output_schema: std::sync::Arc::new(schema),
            model: None,
        }
    }

    #[test]
    fn an_object_schema_is_the_answer_tool_input_and_any_other_is_wrapped() {
        let object = serde_json::json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let (schema, wrapped) = request(object.clone(), "brief").answer_tool_schema();
        assert_eq!((schema, wrapped), (object, false));
        let list = serde_json::json!({"type": "array"});
        let asked = request(list.clone(), "");
        let (schema, wrapped) = asked.answer_tool_schema();
        assert!(wrapped);
        assert_eq!(schema["properties"]["answer"], list);
        assert_eq!(asked.answer_tool_name(), "answer");
    }

    #[test]
    fn a_tool_input_reads_back_as_the_answer() {
        assert_eq!(
            answer_from_tool_input("{\"a\": 1}", false).unwrap(),
            "{\"a\": 1}"
        );
        assert_eq!(answer_from_tool_input("  ", false).unwrap(), "{}");
        assert_eq!(
            answer_from_tool_input("{\"answer\": [1, 2]}", true).unwrap(),
            "[1,2]"
        );
        assert!(answer_from_tool_input("{\"answer\": ", true).is_err());
    }
}
