//! The plainest test double for the model endpoint: every request answered
//! at once with an instance of its own output schema (`scripted_llm`'s
//! generator), no usage, as model `schema-shaped`; and `NoModel`, a model
//! port that must never be called.

use async_trait::async_trait;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::TokenUsage;
use baton_runtime::error::LlmError;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use tokio::sync::mpsc::UnboundedSender;

/// Answers every request with a schema-shaped instance.
pub struct SchemaShapedModel;

#[async_trait]
impl LlmProvider for SchemaShapedModel {
    fn model_name(&self) -> String {
        "schema-shaped".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        Ok(ModelAnswer {
            content: scripted_llm::generate_instance(&request.output_schema, "schema-shaped")
                .to_string(),
            usage: TokenUsage::default(),
            model: "schema-shaped".into(),
        })
    }
}

/// A model port that must never be called (benches whose steps only plan or
/// submit): every call fails, naming who said so.
pub struct NoModel(pub &'static str);

#[async_trait]
impl LlmProvider for NoModel {
    fn model_name(&self) -> String {
        "none".into()
    }
    async fn complete(
        &self,
        _request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        Err(LlmError::Configuration(format!(
            "{} calls no model",
            self.0
        )))
    }
}

/// A schema-shaped model that passes every judge (`judge_answer` scores
/// 9.0) and keeps every request it was sent, for tests that assert what a
/// node was given.
#[derive(Default)]
pub struct RecordingModel {
    pub requests: std::sync::Mutex<Vec<ModelRequest>>,
}

impl RecordingModel {
    /// The user messages (parsed) of the requests for `schema_name`.
    pub fn user_messages_for(&self, schema_name: &str) -> Vec<serde_json::Value> {
        self.requests
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .filter(|request| request.schema_name == schema_name)
            .map(|request| {
                serde_json::from_str(&request.user_message)
                    .unwrap_or_else(|error| panic!("a user message is JSON: {error}"))
            })
            .collect()
    }
}

#[async_trait]
impl LlmProvider for RecordingModel {
    fn model_name(&self) -> String {
        "recording".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        self.requests
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(request.clone());
        let mut answer = scripted_llm::generate_instance(&request.output_schema, "recording");
        if request.schema_name == "judge_answer" {
            answer["score"] = serde_json::json!(9.0);
        }
        Ok(ModelAnswer {
            content: answer.to_string(),
            usage: TokenUsage::default(),
            model: "recording".into(),
        })
    }
}
