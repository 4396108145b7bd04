//! Text embeddings from an OpenAI-compatible endpoint (`POST
//! {base}/embeddings`, `{"model", "input": [texts]}` answered with
//! `{"data": [{"index", "embedding"}]}`): the same endpoint and key as the
//! chat model, a model of its own (`BATON_EMBEDDINGS_MODEL`), the same
//! retry loop. Texts go in batches of at most [`TEXTS_PER_REQUEST`].

use async_trait::async_trait;
use baton_runtime::error::LlmError;
use baton_runtime::ports::TextEmbedder;
use serde_json::{Value, json};

use crate::config::OpenAiCompatibleConfig;
use crate::retries::{AttemptFailure, RetryPolicy, classify_transport_error, failure_of};

/// Most texts in one request (OpenAI accepts 2,048).
pub const TEXTS_PER_REQUEST: usize = 256;

/// An OpenAI-compatible embeddings client.
pub struct OpenAiCompatibleEmbedder {
    config: OpenAiCompatibleConfig,
    embedding_model: String,
    client: reqwest::Client,
}

impl OpenAiCompatibleEmbedder {
    /// The embedder of `embedding_model` at `config`'s endpoint, with its key.
    pub fn new(config: OpenAiCompatibleConfig, embedding_model: &str) -> Result<Self, LlmError> {
        if embedding_model.trim().is_empty() {
            return Err(LlmError::Configuration(
                "BATON_EMBEDDINGS_MODEL is empty: name the embedding model".into(),
            ));
        }
        let client = reqwest::Client::builder()
            .timeout(config.request_timeout)
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|error| {
                LlmError::Configuration(format!("cannot build the HTTP client: {error}"))
            })?;
        Ok(OpenAiCompatibleEmbedder {
            config,
            embedding_model: embedding_model.trim().to_string(),
            client,
        })
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, AttemptFailure> {
        let url = format!("{}/embeddings", self.config.base_url);
        let body = json!({"model": self.embedding_model, "input": texts});
        let mut builder = self.client.post(&url).json(&body);
        if let Some(key) = &self.config.api_key {
            builder = builder.bearer_auth(key);
        }
        let response = builder.send().await.map_err(classify_transport_error)?;
        if !response.status().is_success() {
            return Err(failure_of(response, &self.config.api_key_variable).await);
        }
        let answer: Value = response.json().await.map_err(classify_transport_error)?;
        vectors_of(&answer, texts.len()).map_err(AttemptFailure::Fatal)
    }
}

/// The vectors of an embeddings answer, by `index`, checked: one per
/// text, every one of the same length.
fn vectors_of(answer: &Value, expected: usize) -> Result<Vec<Vec<f32>>, LlmError> {
    let unexpected = |why: String| LlmError::UnexpectedResponse(format!("embeddings: {why}"));
    let data = answer
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| unexpected("no `data` list".into()))?;
    let mut vectors: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (position, item) in data.iter().enumerate() {
        let index = item
            .get("index")
            .and_then(Value::as_u64)
            .map_or(position, |index| index as usize);
        let slot = vectors
            .get_mut(index)
            .ok_or_else(|| unexpected(format!("index {index} of {expected} texts")))?;
        let vector = item
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or_else(|| unexpected(format!("data[{position}] has no `embedding` list")))?
            .iter()
            .map(|number| number.as_f64().map(|number| number as f32))
            .collect::<Option<Vec<f32>>>()
            .ok_or_else(|| unexpected(format!("data[{position}].embedding holds a non-number")))?;
        *slot = Some(vector);
    }
    let vectors: Vec<Vec<f32>> = vectors
        .into_iter()
        .enumerate()
        .map(|(index, vector)| {
            vector.ok_or_else(|| unexpected(format!("no vector for text {index}")))
        })
        .collect::<Result<_, _>>()?;
    if let Some(first) = vectors.first()
        && vectors
            .iter()
            .any(|vector| vector.len() != first.len() || vector.is_empty())
    {
        return Err(unexpected("vectors of different lengths".into()));
    }
    Ok(vectors)
}

#[async_trait]
impl TextEmbedder for OpenAiCompatibleEmbedder {
    fn model_name(&self) -> String {
        self.embedding_model.clone()
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let policy = RetryPolicy {
            max_attempts: self.config.max_attempts,
            initial_backoff: self.config.initial_backoff,
            max_backoff: self.config.max_backoff,
            max_retry_after: self.config.max_retry_after,
        };
        // No deltas to tell anyone about: the channel's reader is gone.
        let (deltas, _) = tokio::sync::mpsc::unbounded_channel();
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(TEXTS_PER_REQUEST) {
            let embedded = policy
                .run(
                    &deltas,
                    || async move { (self.embed_batch(batch).await, false) },
                )
                .await?;
            vectors.extend(embedded);
        }
        Ok(vectors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_come_back_in_text_order_and_a_short_answer_is_refused() {
        let answer = json!({"data": [
            {"index": 1, "embedding": [0.0, 1.0]},
            {"index": 0, "embedding": [1.0, 0.0]}
        ]});
        assert_eq!(
            vectors_of(&answer, 2).unwrap(),
            vec![vec![1.0, 0.0], vec![0.0, 1.0]]
        );
        let short = json!({"data": [{"index": 0, "embedding": [1.0]}]});
        assert!(
            vectors_of(&short, 2)
                .unwrap_err()
                .to_string()
                .contains("no vector for text 1")
        );
        let ragged = json!({"data": [{"embedding": [1.0]}, {"embedding": [1.0, 2.0]}]});
        assert!(
            vectors_of(&ragged, 2)
                .unwrap_err()
                .to_string()
                .contains("different lengths")
        );
    }
}
