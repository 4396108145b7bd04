//! The plainest test double for the model endpoint: every request answered
//! at once with an instance of its own output schema (`scripted_llm`'s
//! generator), no usage, as model `schema-shaped`.

use async_trait::async_trait;
use baton_core::context::ModelRequest;
use baton_core::run::TokenUsage;
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
