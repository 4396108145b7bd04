//! The OpenAI-compatible chat-completions provider.

use std::time::Duration;

use async_trait::async_trait;
use baton_core::context::ModelRequest;
use baton_core::run::TokenUsage;
use baton_runtime::error::LlmError;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

use crate::config::OpenAiCompatibleConfig;

/// Calls `{base_url}/chat/completions` with streaming and a JSON Schema response format.
pub struct OpenAiCompatibleProvider {
    config: OpenAiCompatibleConfig,
    client: reqwest::Client,
}

/// Why one attempt failed.
enum AttemptFailure {
    RateLimited {
        retry_after: Option<Duration>,
    },
    Server {
        status: u16,
        body: String,
        retry_after: Option<Duration>,
    },
    Timeout,
    Transport(String),
    Fatal(LlmError),
}

impl OpenAiCompatibleProvider {
    /// Builds the HTTP client once; fails on a configuration the client rejects.
    pub fn new(config: OpenAiCompatibleConfig) -> Result<Self, LlmError> {
        let client = reqwest::Client::builder()
            .timeout(config.request_timeout)
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|error| {
                LlmError::Configuration(format!("cannot build the HTTP client: {error}"))
            })?;
        Ok(OpenAiCompatibleProvider { config, client })
    }

    pub fn config(&self) -> &OpenAiCompatibleConfig {
        &self.config
    }

    fn request_body(&self, request: &ModelRequest) -> Value {
        json!({
            "model": self.config.model,
            "messages": [
                {"role": "system", "content": request.system_instruction},
                {"role": "user", "content": request.user_message},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.output_schema, "strict": false},
            },
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    }

    fn backoff_delay(&self, failed_attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(server_says) = retry_after {
            return server_says.min(self.config.max_retry_after);
        }
        let exponent = failed_attempt.saturating_sub(1).min(16);
        let ceiling = self
            .config
            .initial_backoff
            .saturating_mul(2u32.saturating_pow(exponent))
            .min(self.config.max_backoff);
        let jitter: f64 = rand::rng().random_range(0.5..=1.0);
        ceiling.mul_f64(jitter)
    }

    async fn attempt_once(
        &self,
        body: &Value,
        deltas: &UnboundedSender<ModelDelta>,
        streamed_text: &mut bool,
    ) -> Result<ModelAnswer, AttemptFailure> {
        let url = format!("{}/chat/completions", self.config.base_url);
        let mut builder = self.client.post(&url).json(body);
        if let Some(key) = &self.config.api_key {
            builder = builder.bearer_auth(key);
        }
        let response = builder.send().await.map_err(classify_transport_error)?;
        let status = response.status();
        if !status.is_success() {
            let retry_after =
                parse_retry_after(response.headers().get(reqwest::header::RETRY_AFTER));
            let text = response.text().await.unwrap_or_default();
            let text: String = text.chars().take(500).collect();
            return Err(match status.as_u16() {
                429 => AttemptFailure::RateLimited { retry_after },
                code if code >= 500 => AttemptFailure::Server {
                    status: code,
                    body: text,
                    retry_after,
                },
                code => AttemptFailure::Fatal(LlmError::RequestRejected {
                    status: code,
                    body: text,
                }),
            });
        }
        let is_event_stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        if !is_event_stream {
            let whole: Value = response.json().await.map_err(classify_transport_error)?;
            let content = whole
                .pointer("/choices/0/message/content")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    AttemptFailure::Fatal(LlmError::UnexpectedResponse(
                        "no choices[0].message.content".into(),
                    ))
                })?
                .to_string();
            *streamed_text = true;
            let _ = deltas.send(ModelDelta::Text(content.clone()));
            return Ok(ModelAnswer {
                content,
                usage: usage_from(&whole),
                model: whole
                    .get("model")
                    .and_then(Value::as_str)
                    .unwrap_or(&self.config.model)
                    .to_string(),
            });
        }
        let mut events = response.bytes_stream().eventsource();
        let mut content = String::new();
        let mut usage = TokenUsage::default();
        let mut model = self.config.model.clone();
        let mut finished = false;
        while let Some(event) = events.next().await {
            let event = event
                .map_err(|error| AttemptFailure::Transport(format!("stream broke: {error}")))?;
            if event.data.trim() == "[DONE]" {
                finished = true;
                break;
            }
            let chunk: Value = serde_json::from_str(&event.data).map_err(|error| {
                AttemptFailure::Fatal(LlmError::UnexpectedResponse(format!(
                    "chunk is not JSON: {error}"
                )))
            })?;
            if let Some(error) = chunk.get("error") {
                return Err(AttemptFailure::Server {
                    status: 500,
                    body: error.to_string(),
                    retry_after: None,
                });
            }
            if let Some(text) = chunk
                .pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
                && !text.is_empty()
            {
                content.push_str(text);
                *streamed_text = true;
                let _ = deltas.send(ModelDelta::Text(text.to_string()));
            }
            if chunk.get("usage").is_some_and(Value::is_object) {
                usage = usage_from(&chunk);
            }
            if let Some(name) = chunk.get("model").and_then(Value::as_str) {
                model = name.to_string();
            }
            if chunk
                .pointer("/choices/0/finish_reason")
                .is_some_and(|reason| !reason.is_null())
            {
                finished = true;
            }
        }
        if !finished {
            // Cut mid-answer: neither a finish_reason nor [DONE] arrived.
            return Err(AttemptFailure::Transport(
                "the stream ended before the answer finished".into(),
            ));
        }
        Ok(ModelAnswer {
            content,
            usage,
            model,
        })
    }
}

fn usage_from(body: &Value) -> TokenUsage {
    TokenUsage {
        prompt_tokens: body
            .pointer("/usage/prompt_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        completion_tokens: body
            .pointer("/usage/completion_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
    }
}

fn classify_transport_error(error: reqwest::Error) -> AttemptFailure {
    if error.is_timeout() {
        AttemptFailure::Timeout
    } else if error.is_decode() {
        AttemptFailure::Fatal(LlmError::UnexpectedResponse(error.to_string()))
    } else {
        AttemptFailure::Transport(error.to_string())
    }
}

/// `Retry-After` as delta-seconds (HTTP dates are rare from model APIs and ignored).
fn parse_retry_after(value: Option<&reqwest::header::HeaderValue>) -> Option<Duration> {
    let text = value?.to_str().ok()?.trim();
    text.parse::<f64>()
        .ok()
        .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
        .map(Duration::from_secs_f64)
}

#[async_trait]
impl LlmProvider for OpenAiCompatibleProvider {
    fn model_name(&self) -> String {
        self.config.model.clone()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        let body = self.request_body(request);
        let attempts = self.config.max_attempts.max(1);
        for attempt in 1..=attempts {
            let mut streamed_text = false;
            let failure = match self.attempt_once(&body, &deltas, &mut streamed_text).await {
                Ok(answer) => return Ok(answer),
                Err(AttemptFailure::Fatal(error)) => return Err(error),
                Err(failure) => failure,
            };
            let retry_after = match &failure {
                AttemptFailure::RateLimited { retry_after }
                | AttemptFailure::Server { retry_after, .. } => *retry_after,
                _ => None,
            };
            if attempt == attempts {
                return Err(match failure {
                    AttemptFailure::RateLimited { .. } => LlmError::RateLimited { attempts },
                    AttemptFailure::Server { status, body, .. } => LlmError::ServerError {
                        status,
                        attempts,
                        body,
                    },
                    AttemptFailure::Timeout => LlmError::Timeout { attempts },
                    AttemptFailure::Transport(message) => LlmError::Transport { attempts, message },
                    AttemptFailure::Fatal(error) => error,
                });
            }
            if streamed_text {
                // The retry answers from the start: what was streamed is void.
                let _ = deltas.send(ModelDelta::Restarted);
            }
            let delay = self.backoff_delay(attempt, retry_after);
            tracing::warn!(
                attempt,
                delay_ms = delay.as_millis() as u64,
                "model call failed; retrying"
            );
            tokio::time::sleep(delay).await;
        }
        Err(LlmError::UnexpectedResponse("no attempt was made".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scripted_llm::{Behavior, ScriptedLlmServer, gap_between};

    fn request() -> ModelRequest {
        ModelRequest {
            system_instruction: "be brief".into(),
            user_message: "{}".into(),
            schema_name: "answer".into(),
            output_schema: std::sync::Arc::new(
                json!({"type": "object", "required": ["greeting"], "properties": {"greeting": {"type": "string"}}}),
            ),
        }
    }

    fn provider(server: &ScriptedLlmServer) -> OpenAiCompatibleProvider {
        let mut config = OpenAiCompatibleConfig::new(
            server.base_url(),
            "scripted-model",
            Some("sk-test".into()),
        );
        config.initial_backoff = Duration::from_millis(5);
        config.max_backoff = Duration::from_millis(20);
        OpenAiCompatibleProvider::new(config).unwrap()
    }

    #[tokio::test]
    async fn streams_deltas_and_returns_the_whole_answer_with_usage() {
        let server = ScriptedLlmServer::start().await.unwrap();
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
        let answer = provider(&server)
            .complete(&request(), sender)
            .await
            .unwrap();
        let mut streamed = String::new();
        let mut pieces = 0;
        while let Ok(piece) = receiver.try_recv() {
            let ModelDelta::Text(piece) = piece else {
                unreachable!("nothing restarted")
            };
            streamed.push_str(&piece);
            pieces += 1;
        }
        assert_eq!(streamed, answer.content);
        assert!(pieces >= 2, "expected several deltas, got {pieces}");
        let parsed: Value = serde_json::from_str(&answer.content).unwrap();
        assert!(parsed["greeting"].is_string());
        assert!(answer.usage.completion_tokens > 0);
        let sent = &server.requests()[0].body;
        assert_eq!(sent["response_format"]["type"], "json_schema");
        assert_eq!(sent["stream"], true);
    }

    #[tokio::test]
    async fn a_stream_cut_mid_answer_is_retried_and_voided_with_a_restart() {
        let server = ScriptedLlmServer::start().await.unwrap();
        server.push_behaviors([Behavior::BrokenStream { after_chunks: 2 }]);
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
        let answer = provider(&server)
            .complete(&request(), sender)
            .await
            .unwrap();
        let mut deltas = Vec::new();
        while let Ok(delta) = receiver.try_recv() {
            deltas.push(delta);
        }
        let restart = deltas
            .iter()
            .position(|delta| *delta == ModelDelta::Restarted)
            .unwrap();
        assert_eq!(restart, 2, "two chunks streamed before the cut");
        let after_restart: String = deltas[restart + 1..]
            .iter()
            .map(|delta| match delta {
                ModelDelta::Text(text) => text.as_str(),
                ModelDelta::Restarted => unreachable!("one restart"),
            })
            .collect();
        assert_eq!(after_restart, answer.content);
        assert_eq!(server.request_count(), 2);
        assert!(serde_json::from_str::<Value>(&answer.content).is_ok());
    }

    #[tokio::test]
    async fn retries_server_errors_then_succeeds() {
        let server = ScriptedLlmServer::start().await.unwrap();
        server.push_behaviors([
            Behavior::Status {
                status: 500,
                retry_after_seconds: None,
            },
            Behavior::Status {
                status: 503,
                retry_after_seconds: None,
            },
        ]);
        let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
        provider(&server)
            .complete(&request(), sender)
            .await
            .unwrap();
        assert_eq!(server.request_count(), 3);
    }

    #[tokio::test]
    async fn gives_up_after_the_attempt_bound() {
        let server = ScriptedLlmServer::start().await.unwrap();
        server.push_behaviors((0..5).map(|_| Behavior::Status {
            status: 500,
            retry_after_seconds: None,
        }));
        let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
        let error = provider(&server)
            .complete(&request(), sender)
            .await
            .unwrap_err();
        assert_eq!(
            error,
            LlmError::ServerError {
                status: 500,
                attempts: 5,
                body: r#"{"error":{"message":"scripted failure","type":"scripted"}}"#.into()
            }
        );
        assert_eq!(server.request_count(), 5);
    }

    #[tokio::test]
    async fn honours_retry_after_on_429() {
        let server = ScriptedLlmServer::start().await.unwrap();
        server.push_behaviors([Behavior::Status {
            status: 429,
            retry_after_seconds: Some(1),
        }]);
        let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
        provider(&server)
            .complete(&request(), sender)
            .await
            .unwrap();
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        // The backoff alone is at most 20 ms here; only Retry-After explains a wait near a second.
        assert!(gap_between(&requests[0], &requests[1]) >= Duration::from_millis(900));
    }

    #[tokio::test]
    async fn client_errors_are_not_retried() {
        let server = ScriptedLlmServer::start().await.unwrap();
        server.push_behaviors([Behavior::Status {
            status: 400,
            retry_after_seconds: None,
        }]);
        let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
        let error = provider(&server)
            .complete(&request(), sender)
            .await
            .unwrap_err();
        assert!(matches!(
            error,
            LlmError::RequestRejected { status: 400, .. }
        ));
        assert!(!error.is_retryable());
        assert_eq!(server.request_count(), 1);
    }

    #[test]
    fn backoff_grows_and_stays_under_the_cap() {
        let mut config = OpenAiCompatibleConfig::new("http://x/v1", "m", None);
        config.initial_backoff = Duration::from_millis(100);
        config.max_backoff = Duration::from_millis(1000);
        let provider = OpenAiCompatibleProvider::new(config).unwrap();
        for attempt in 1..10 {
            let delay = provider.backoff_delay(attempt, None);
            let ceiling = Duration::from_millis((100u64 << (attempt - 1)).min(1000));
            assert!(
                delay <= ceiling && delay >= ceiling / 2,
                "attempt {attempt}: {delay:?}"
            );
        }
        assert_eq!(
            provider.backoff_delay(1, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
    }
}
