//! Text embeddings, where the model provider offers them: the registry
//! search ranks capabilities and facets by meaning with them (word overlap
//! stays the offline default).

use async_trait::async_trait;

use crate::error::LlmError;

/// Turns texts into vectors (one per text, in order, all of one length).
#[async_trait]
pub trait TextEmbedder: Send + Sync {
    /// The embedding model's name, in results and errors.
    fn model_name(&self) -> String;
    /// The vectors of `texts`, in their order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError>;
}
