//! The OpenAI-compatible chat-completions provider.

use async_trait::async_trait;
use baton_core::records::conversation::{SessionAnswer, SessionTurn, ToolCallRequest, ToolSession};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::TokenUsage;
use baton_runtime::error::LlmError;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

use crate::config::OpenAiCompatibleConfig;
use crate::retries::{AttemptFailure, RetryPolicy, classify_transport_error, failure_of};

/// Whether OpenAI's strict structured output takes `schema` as it is: an
/// object at the root, every object closed (`additionalProperties: false`)
/// with every property required, and none of the keywords strict mode
/// refuses (`allOf`, `oneOf`, `not`, `if`, `patternProperties`, …). A schema
/// that is not is sent with `strict: false` rather than rewritten, since
/// making optional properties required changes what the contract allows.
pub fn strict_mode_accepts(schema: &Value) -> bool {
    schema.get("type") == Some(&json!("object")) && strict_subschema(schema)
}

fn strict_subschema(schema: &Value) -> bool {
    let Some(fields) = schema.as_object() else {
        return schema.is_boolean();
    };
    const REFUSED: [&str; 8] = [
        "allOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "patternProperties",
        "dependentSchemas",
    ];
    if REFUSED.iter().any(|keyword| fields.contains_key(*keyword)) {
        return false;
    }
    if let Some(properties) = fields.get("properties").and_then(Value::as_object) {
        let required: Vec<&str> = fields
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let closed = fields.get("additionalProperties") == Some(&json!(false));
        if !closed
            || properties
                .keys()
                .any(|name| !required.contains(&name.as_str()))
        {
            return false;
        }
        if !properties.values().all(strict_subschema) {
            return false;
        }
    } else if fields.get("type") == Some(&json!("object"))
        && fields.get("additionalProperties") != Some(&json!(false))
    {
        return false;
    }
    let nested_single = ["items", "additionalProperties"]
        .iter()
        .filter_map(|keyword| fields.get(*keyword))
        .filter(|nested| nested.is_object())
        .all(strict_subschema);
    let nested_lists = fields
        .get("anyOf")
        .and_then(Value::as_array)
        .is_none_or(|members| members.iter().all(strict_subschema));
    let definitions = ["$defs", "definitions"]
        .iter()
        .filter_map(|keyword| fields.get(*keyword).and_then(Value::as_object))
        .all(|defined| defined.values().all(strict_subschema));
    nested_single && nested_lists && definitions
}

/// Calls `{base_url}/chat/completions` with streaming and a JSON Schema response format.
pub struct OpenAiCompatibleProvider {
    config: OpenAiCompatibleConfig,
    client: reqwest::Client,
}

/// What one streamed answer held.
struct Streamed {
    content: String,
    tool_calls: Vec<ToolCallRequest>,
    usage: TokenUsage,
    model: String,
}

/// Tool calls arriving in pieces, by index.
#[derive(Default)]
struct PartialToolCall {
    id: String,
    name: String,
    arguments: String,
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

    /// The provider's id of the model `request` goes to: its catalog
    /// model's, else the configured default (`BATON_LLM_MODEL`).
    fn model_of<'a>(&'a self, request: &'a ModelRequest) -> &'a str {
        request
            .model
            .as_ref()
            .map_or(self.config.model.as_str(), |target| {
                target.model_id.as_str()
            })
    }

    fn request_body(&self, request: &ModelRequest) -> Value {
        json!({
            "model": self.model_of(request),
            "messages": [
                {"role": "system", "content": request.system_instruction},
                {"role": "user", "content": request.user_message},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.output_schema,
                                "strict": request.model_takes_strict_output() && strict_mode_accepts(&request.output_schema)},
            },
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    }

    /// A conversation turn: the first messages, the session's turns, the tools.
    fn conversation_body(&self, request: &ModelRequest, session: &ToolSession) -> Value {
        let mut body = self.request_body(request);
        if let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) {
            for turn in &session.turns {
                messages.push(match turn {
                    SessionTurn::User { content } => json!({"role": "user", "content": content}),
                    SessionTurn::Assistant {
                        content,
                        tool_calls,
                    } => {
                        let mut message = json!({"role": "assistant", "content": content});
                        if !tool_calls.is_empty() {
                            message["tool_calls"] = tool_calls
                                .iter()
                                .map(|call| {
                                    json!({"id": call.id, "type": "function",
                                           "function": {"name": call.name, "arguments": call.arguments}})
                                })
                                .collect();
                        }
                        message
                    }
                    SessionTurn::Tool { call_id, content } => {
                        json!({"role": "tool", "tool_call_id": call_id, "content": content})
                    }
                });
            }
        }
        if session.free_text
            && let Some(fields) = body.as_object_mut()
        {
            // Chat: the answer is text for a person, not JSON.
            fields.remove("response_format");
        }
        if !session.tools.is_empty() {
            body["tools"] = session
                .tools
                .iter()
                .map(|tool| {
                    json!({"type": "function", "function": {
                        "name": tool.name, "description": tool.description, "parameters": tool.parameters}})
                })
                .collect();
            body["tool_choice"] = json!("auto");
        }
        body
    }

    fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            max_attempts: self.config.max_attempts,
            initial_backoff: self.config.initial_backoff,
            max_backoff: self.config.max_backoff,
            max_retry_after: self.config.max_retry_after,
        }
    }

    /// Sends `body`, retrying what may succeed later with backoff.
    async fn call_with_retries(
        &self,
        body: &Value,
        deltas: &UnboundedSender<ModelDelta>,
    ) -> Result<Streamed, LlmError> {
        self.retry_policy()
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
        let url = format!("{}/chat/completions", self.config.base_url);
        let mut builder = self.client.post(&url).json(body);
        if let Some(key) = &self.config.api_key {
            builder = builder.bearer_auth(key);
        }
        let response = builder.send().await.map_err(classify_transport_error)?;
        if !response.status().is_success() {
            return Err(failure_of(response, &self.config.api_key_variable).await);
        }
        let is_event_stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        if !is_event_stream {
            let whole: Value = response.json().await.map_err(classify_transport_error)?;
            let message = whole.pointer("/choices/0/message").ok_or_else(|| {
                AttemptFailure::Fatal(LlmError::UnexpectedResponse("no choices[0].message".into()))
            })?;
            let content = message
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let tool_calls = whole_tool_calls(message);
            if content.is_empty() && tool_calls.is_empty() {
                return Err(AttemptFailure::Fatal(LlmError::UnexpectedResponse(
                    "no choices[0].message.content".into(),
                )));
            }
            *streamed_text = true;
            let _ = deltas.send(ModelDelta::Text(content.clone()));
            return Ok(Streamed {
                content,
                tool_calls,
                usage: usage_from(&whole),
                model: whole
                    .get("model")
                    .and_then(Value::as_str)
                    .unwrap_or_else(|| asked_model(body, &self.config.model))
                    .to_string(),
            });
        }
        let mut events = response.bytes_stream().eventsource();
        let mut content = String::new();
        let mut usage = TokenUsage::default();
        let mut model = asked_model(body, &self.config.model).to_string();
        let mut finished = false;
        let mut partial_calls: Vec<PartialToolCall> = Vec::new();
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
            if let Some(pieces) = chunk
                .pointer("/choices/0/delta/tool_calls")
                .and_then(Value::as_array)
            {
                gather_tool_call_pieces(&mut partial_calls, pieces);
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
        Ok(Streamed {
            content,
            tool_calls: partial_calls
                .into_iter()
                .map(|call| ToolCallRequest {
                    id: call.id,
                    name: call.name,
                    arguments: call.arguments,
                })
                .collect(),
            usage,
            model,
        })
    }
}

/// Adds streamed tool-call pieces (`{index, id?, function: {name?, arguments?}}`).
fn gather_tool_call_pieces(calls: &mut Vec<PartialToolCall>, pieces: &[Value]) {
    for piece in pieces {
        let index = piece
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|index| usize::try_from(index).ok())
            .unwrap_or(calls.len());
        if calls.len() <= index {
            calls.resize_with(index + 1, PartialToolCall::default);
        }
        let call = &mut calls[index];
        if let Some(id) = piece.get("id").and_then(Value::as_str) {
            call.id = id.to_string();
        }
        if let Some(name) = piece.pointer("/function/name").and_then(Value::as_str) {
            call.name.push_str(name);
        }
        if let Some(arguments) = piece.pointer("/function/arguments").and_then(Value::as_str) {
            call.arguments.push_str(arguments);
        }
    }
}

/// The tool calls of a whole (not streamed) message.
fn whole_tool_calls(message: &Value) -> Vec<ToolCallRequest> {
    message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .map(|call| ToolCallRequest {
                    id: call["id"].as_str().unwrap_or_default().to_string(),
                    name: call
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    arguments: call
                        .pointer("/function/arguments")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The model a request body asked for (when the answer does not name the
/// one that answered).
fn asked_model<'a>(body: &'a Value, configured: &'a str) -> &'a str {
    body.get("model")
        .and_then(Value::as_str)
        .unwrap_or(configured)
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
        cached_prompt_tokens: body
            .pointer("/usage/prompt_tokens_details/cached_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        // OpenAI-compatible APIs cache on their own and bill no writes.
        cache_write_prompt_tokens: 0,
    }
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
        let streamed = self
            .call_with_retries(&self.request_body(request), &deltas)
            .await?;
        Ok(ModelAnswer {
            content: streamed.content,
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
        let body = self.conversation_body(request, session);
        let streamed = self.call_with_retries(&body, &deltas).await?;
        Ok(SessionAnswer {
            content: streamed.content,
            tool_calls: streamed.tool_calls,
            usage: streamed.usage,
            model: streamed.model,
        })
    }
}

#[cfg(test)]
mod tests;
