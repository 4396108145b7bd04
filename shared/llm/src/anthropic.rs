//! Anthropic's Messages API: `POST {base_url}/v1/messages` with
//! `x-api-key` and `anthropic-version`, streamed as server-sent events
//! (`message_start`, `content_block_start`, `content_block_delta` with
//! `text_delta` or `input_json_delta`, `content_block_stop`,
//! `message_delta`, `message_stop`, `ping`, `error`).
//!
//! Structured output is a forced tool: the answer tool's `input_schema` is
//! the node's schema (wrapped in an object when the schema is not one), and
//! its input is the answer. In an agent session the answer tool is offered
//! beside the session's tools; a call of it is the final answer, any other
//! call a tool call. The system prompt is marked cacheable
//! (`cache_control: ephemeral`) when the catalog says the model caches
//! prompts: Anthropic caches it, with the tools before it, when it is long
//! enough and reports cache reads and writes in `usage`.
//!
//! Invariant: the key never reaches a log or an error; a refused key (401)
//! is a configuration error naming the variable it came from.

use std::time::Duration;

use async_trait::async_trait;
use baton_core::contracts::model_request::answer_from_tool_input;
use baton_core::records::conversation::{
    SessionAnswer, SessionTurn, ToolSession, ToolUse, turn_of_tool_uses,
};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::TokenUsage;
use baton_runtime::error::LlmError;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

use crate::retries::{AttemptFailure, RetryPolicy, classify_transport_error, failure_of};

/// The API version Baton speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Anthropic's public endpoint.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";

/// Where and how to call Anthropic.
#[derive(Clone)]
pub struct AnthropicConfig {
    /// Without the `/v1` suffix (`https://api.anthropic.com`).
    pub base_url: String,
    pub api_key: Option<String>,
    /// The variable the key came from, named when the key is refused.
    pub api_key_variable: String,
    /// The model when a request names none.
    pub model: String,
    /// `max_tokens` of every request.
    pub max_tokens: u32,
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    pub retry: RetryPolicy,
}

impl std::fmt::Debug for AnthropicConfig {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl AnthropicConfig {
    /// Defaults around an endpoint, a key and the variable it came from.
    pub fn new(
        base_url: impl Into<String>,
        api_key: Option<String>,
        api_key_variable: impl Into<String>,
    ) -> Self {
        AnthropicConfig {
            base_url: base_url.into().trim_end_matches('/').to_string(),
            api_key,
            api_key_variable: api_key_variable.into(),
            model: String::new(),
            max_tokens: 4096,
            request_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
        }
    }
}

/// Calls the Messages API with streaming and a forced answer tool.
pub struct AnthropicProvider {
    config: AnthropicConfig,
    client: reqwest::Client,
}

/// What one streamed message held.
#[derive(Default)]
struct Streamed {
    text: String,
    /// Tool-use blocks by their content index.
    tool_uses: Vec<(usize, ToolUse)>,
    usage: TokenUsage,
    model: String,
}

impl AnthropicProvider {
    /// Builds the HTTP client once.
    pub fn new(config: AnthropicConfig) -> Result<Self, LlmError> {
        if !(config.base_url.starts_with("http://") || config.base_url.starts_with("https://")) {
            return Err(LlmError::Configuration(format!(
                "the Anthropic endpoint must start with http:// or https:// (got `{}`)",
                config.base_url
            )));
        }
        let client = reqwest::Client::builder()
            .timeout(config.request_timeout)
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|error| {
                LlmError::Configuration(format!("cannot build the HTTP client: {error}"))
            })?;
        Ok(AnthropicProvider { config, client })
    }

    fn model_of<'a>(&'a self, request: &'a ModelRequest) -> &'a str {
        request
            .model
            .as_ref()
            .map_or(self.config.model.as_str(), |target| {
                target.model_id.as_str()
            })
    }

    /// The answer tool (its input is the answer), and whether the schema
    /// was wrapped under `answer`.
    fn answer_tool(request: &ModelRequest) -> (Value, bool) {
        let (input_schema, wrapped) = request.answer_tool_schema();
        (
            json!({"name": request.answer_tool_name(), "description": "Give your answer: its input is the answer, exactly under this schema.", "input_schema": input_schema}),
            wrapped,
        )
    }

    fn base_body(&self, request: &ModelRequest) -> Value {
        let mut system = json!({"type": "text", "text": request.system_instruction});
        if request.marks_prompt_cache() {
            system["cache_control"] = json!({"type": "ephemeral"});
        }
        json!({
            "model": self.model_of(request),
            "max_tokens": self.config.max_tokens,
            "stream": true,
            "system": [system],
            "messages": [{"role": "user", "content": request.user_message}],
        })
    }

    fn complete_body(&self, request: &ModelRequest) -> (Value, bool) {
        let (tool, wrapped) = Self::answer_tool(request);
        let mut body = self.base_body(request);
        body["tool_choice"] = json!({"type": "tool", "name": tool["name"]});
        body["tools"] = json!([tool]);
        (body, wrapped)
    }

    fn conversation_body(&self, request: &ModelRequest, session: &ToolSession) -> (Value, bool) {
        let mut body = self.base_body(request);
        let messages = body["messages"]
            .as_array_mut()
            .map(std::mem::take)
            .unwrap_or_default();
        body["messages"] = Value::Array(conversation_messages(messages, &session.turns));
        let mut tools: Vec<Value> = session
            .tools
            .iter()
            .map(|tool| json!({"name": tool.name, "description": tool.description, "input_schema": tool.parameters}))
            .collect();
        let mut wrapped = false;
        if !session.free_text {
            let (answer, was_wrapped) = Self::answer_tool(request);
            wrapped = was_wrapped;
            tools.push(answer);
        }
        if !tools.is_empty() {
            body["tools"] = Value::Array(tools);
            body["tool_choice"] = json!({"type": "any"});
            if session.free_text {
                body["tool_choice"] = json!({"type": "auto"});
            }
        }
        (body, wrapped)
    }

    async fn call_with_retries(
        &self,
        body: &Value,
        deltas: &UnboundedSender<ModelDelta>,
    ) -> Result<Streamed, LlmError> {
        self.config
            .retry
            .run(deltas, || async move {
                let mut streamed_text = false;
                let answered = self.attempt_once(body, deltas, &mut streamed_text).await;
                (answered, streamed_text)
            })
            .await
    }

    async fn attempt_once(
        &self,
        body: &Value,
        deltas: &UnboundedSender<ModelDelta>,
        streamed_text: &mut bool,
    ) -> Result<Streamed, AttemptFailure> {
        let Some(key) = &self.config.api_key else {
            return Err(AttemptFailure::Fatal(LlmError::Configuration(format!(
                "no Anthropic key: set {}",
                self.config.api_key_variable
            ))));
        };
        let response = self
            .client
            .post(format!("{}/v1/messages", self.config.base_url))
            .header("x-api-key", key)
            .header("anthropic-version", ANTHROPIC_VERSION)
            .json(body)
            .send()
            .await
            .map_err(classify_transport_error)?;
        if !response.status().is_success() {
            return Err(failure_of(response, &self.config.api_key_variable).await);
        }
        let mut streamed = Streamed {
            model: body["model"].as_str().unwrap_or_default().to_string(),
            ..Streamed::default()
        };
        let mut finished = false;
        let mut events = response.bytes_stream().eventsource();
        while let Some(event) = events.next().await {
            let event = event
                .map_err(|error| AttemptFailure::Transport(format!("stream broke: {error}")))?;
            let data: Value = match serde_json::from_str(&event.data) {
                Ok(data) => data,
                Err(_) => continue,
            };
            match data["type"].as_str().unwrap_or(event.event.as_str()) {
                "message_start" => {
                    let usage = &data["message"]["usage"];
                    let read = usage["cache_read_input_tokens"].as_u64().unwrap_or(0);
                    let written = usage["cache_creation_input_tokens"].as_u64().unwrap_or(0);
                    streamed.usage.prompt_tokens =
                        usage["input_tokens"].as_u64().unwrap_or(0) + read + written;
                    streamed.usage.cached_prompt_tokens = read;
                    streamed.usage.cache_write_prompt_tokens = written;
                    if let Some(model) = data["message"]["model"].as_str() {
                        streamed.model = model.to_string();
                    }
                }
                "content_block_start" => {
                    let index = data["index"].as_u64().unwrap_or(0) as usize;
                    let block = &data["content_block"];
                    if block["type"] == "tool_use" {
                        streamed.tool_uses.push((
                            index,
                            ToolUse {
                                id: block["id"].as_str().unwrap_or_default().to_string(),
                                name: block["name"].as_str().unwrap_or_default().to_string(),
                                input: String::new(),
                            },
                        ));
                    } else if let Some(text) = block["text"].as_str() {
                        streamed.text.push_str(text);
                    }
                }
                "content_block_delta" => {
                    let index = data["index"].as_u64().unwrap_or(0) as usize;
                    let delta = &data["delta"];
                    let piece = match delta["type"].as_str() {
                        Some("text_delta") => {
                            let text = delta["text"].as_str().unwrap_or_default();
                            streamed.text.push_str(text);
                            text
                        }
                        Some("input_json_delta") => {
                            let json = delta["partial_json"].as_str().unwrap_or_default();
                            if let Some(tool_use) = streamed
                                .tool_uses
                                .iter_mut()
                                .find(|tool_use| tool_use.0 == index)
                            {
                                tool_use.1.input.push_str(json);
                            }
                            json
                        }
                        _ => "",
                    };
                    if !piece.is_empty() {
                        *streamed_text = true;
                        let _ = deltas.send(ModelDelta::Text(piece.to_string()));
                    }
                }
                "message_delta" => {
                    if let Some(output) = data["usage"]["output_tokens"].as_u64() {
                        streamed.usage.completion_tokens = output;
                    }
                }
                "message_stop" => {
                    finished = true;
                    break;
                }
                "error" => {
                    let kind = data["error"]["type"].as_str().unwrap_or("error");
                    let message = data["error"]["message"].as_str().unwrap_or_default();
                    return Err(match kind {
                        "overloaded_error" | "api_error" => AttemptFailure::Server {
                            status: 529,
                            body: format!("{kind}: {message}"),
                            retry_after: None,
                        },
                        "rate_limit_error" => AttemptFailure::RateLimited { retry_after: None },
                        _ => AttemptFailure::Fatal(LlmError::UnexpectedResponse(format!(
                            "{kind}: {message}"
                        ))),
                    });
                }
                _ => {}
            }
        }
        if !finished {
            return Err(AttemptFailure::Transport(
                "the stream ended before the message finished".into(),
            ));
        }
        Ok(streamed)
    }
}

/// The session's turns as Messages API messages after the first ones: a
/// tool's result goes back as a `tool_result` block of a user message
/// (consecutive results share one message).
fn conversation_messages(mut messages: Vec<Value>, turns: &[SessionTurn]) -> Vec<Value> {
    for turn in turns {
        match turn {
            SessionTurn::User { content } => {
                messages.push(json!({"role": "user", "content": content}));
            }
            SessionTurn::Assistant {
                content,
                tool_calls,
            } => {
                let mut blocks = Vec::new();
                if !content.is_empty() {
                    blocks.push(json!({"type": "text", "text": content}));
                }
                for call in tool_calls {
                    let input: Value =
                        serde_json::from_str(&call.arguments).unwrap_or_else(|_| json!({}));
                    blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
                }
                messages.push(json!({"role": "assistant", "content": blocks}));
            }
            SessionTurn::Tool { call_id, content } => {
                let result =
                    json!({"type": "tool_result", "tool_use_id": call_id, "content": content});
                let joins_previous = messages.last().is_some_and(|last: &Value| {
                    last["role"] == "user"
                        && last["content"]
                            .as_array()
                            .and_then(|blocks| blocks.last())
                            .is_some_and(|block| block["type"] == "tool_result")
                });
                match messages.last_mut().filter(|_| joins_previous) {
                    Some(last) => {
                        if let Some(blocks) = last["content"].as_array_mut() {
                            blocks.push(result);
                        }
                    }
                    None => messages.push(json!({"role": "user", "content": [result]})),
                }
            }
        }
    }
    messages
}

/// An answer tool's input that is not JSON.
fn unreadable(error: serde_json::Error) -> LlmError {
    LlmError::UnexpectedResponse(format!("the answer tool's input is not JSON: {error}"))
}

#[async_trait]
impl LlmProvider for AnthropicProvider {
    fn model_name(&self) -> String {
        self.config.model.clone()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        let (body, wrapped) = self.complete_body(request);
        let streamed = self.call_with_retries(&body, &deltas).await?;
        let input = streamed
            .tool_uses
            .first()
            .map(|tool_use| tool_use.1.input.clone())
            .ok_or_else(|| {
                LlmError::UnexpectedResponse("the message called no answer tool".into())
            })?;
        Ok(ModelAnswer {
            content: answer_from_tool_input(&input, wrapped).map_err(unreadable)?,
            usage: streamed.usage,
            model: streamed.model,
        })
    }

    async fn converse(
        &self,
        request: &ModelRequest,
        session: &ToolSession,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<SessionAnswer, LlmError> {
        let (body, wrapped) = self.conversation_body(request, session);
        let streamed = self.call_with_retries(&body, &deltas).await?;
        let (content, tool_calls) = turn_of_tool_uses(
            streamed.text,
            streamed
                .tool_uses
                .into_iter()
                .map(|(_, tool_use)| tool_use)
                .collect(),
            request.answer_tool_name(),
            session.free_text,
            wrapped,
        )
        .map_err(unreadable)?;
        Ok(SessionAnswer {
            content,
            tool_calls,
            usage: streamed.usage,
            model: streamed.model,
        })
    }
}

#[cfg(test)]
mod tests;
