//! Test double (tests and local demos only): a scripted OpenAI-compatible
//! chat-completions server. By default it answers every request with JSON
//! generated from the request's `response_format.json_schema.schema`, so any
//! node contract gets a valid answer; it can be told to fail (HTTP status with
//! optional `Retry-After`, malformed JSON, schema-violating JSON) to exercise
//! retries and re-prompts. It records every request so tests can count calls.
//!
//! It stands in for an external LLM endpoint, never for Baton's own code.

pub mod instance;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use instance::generate_instance;

/// What the server does with the next request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "behavior", rename_all = "snake_case")]
pub enum Behavior {
    /// Answer with JSON generated from the requested schema.
    Valid,
    /// Same, after waiting `delay_ms` (a slow model).
    SlowValid { delay_ms: u64 },
    /// Answer with this exact content.
    Content { content: String },
    /// Fail with an HTTP status (429, 500, …), optionally with `Retry-After` seconds.
    Status {
        status: u16,
        #[serde(default)]
        retry_after_seconds: Option<u64>,
    },
    /// Answer with text that is not JSON.
    MalformedJson,
    /// Answer with JSON that breaks the requested schema.
    SchemaViolating,
    /// Stream the first `after_chunks` chunks of a valid answer, then end
    /// the response with neither a `finish_reason` nor `[DONE]` (a
    /// connection cut mid-answer).
    BrokenStream { after_chunks: usize },
    /// Ask for these tool calls instead of answering (streamed in pieces as
    /// OpenAI does: the id and name first, the arguments in two halves;
    /// `finish_reason: "tool_calls"`). Ids are `call_0`, `call_1`, ….
    ToolCalls { calls: Vec<ScriptedToolCall> },
}

/// One tool call a [`Behavior::ToolCalls`] asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptedToolCall {
    pub name: String,
    pub arguments: Value,
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub body: Value,
    pub received_at: Instant,
    pub behavior: Behavior,
}

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<Behavior>>,
    /// What a request gets once the script is used up (`Valid` unless set).
    default_behavior: Mutex<Option<Behavior>>,
    recorded: Mutex<Vec<RecordedRequest>>,
}

/// A running scripted server; stops when dropped.
pub struct ScriptedLlmServer {
    pub address: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ScriptedLlmServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ScriptedLlmServer {
    /// Starts on `127.0.0.1:0` (a free port).
    pub async fn start() -> std::io::Result<Self> {
        Self::start_on("127.0.0.1:0").await
    }

    pub async fn start_on(address: &str) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(address).await?;
        let address = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let app = router(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(ScriptedLlmServer {
            address,
            shared,
            task,
        })
    }

    /// `http://127.0.0.1:PORT/v1`, the value for `BATON_LLM_BASE_URL`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    /// Queues behaviours for the next requests (after which: `Valid`).
    pub fn push_behaviors(&self, behaviors: impl IntoIterator<Item = Behavior>) {
        if let Ok(mut script) = self.shared.script.lock() {
            script.extend(behaviors);
        }
    }

    /// What every request gets once the script is used up (`Valid` until
    /// set): e.g. `SlowValid` for a model that always takes its time.
    pub fn set_default_behavior(&self, behavior: Behavior) {
        if let Ok(mut default) = self.shared.default_behavior.lock() {
            *default = Some(behavior);
        }
    }

    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared
            .recorded
            .lock()
            .map(|recorded| recorded.clone())
            .unwrap_or_default()
    }

    pub fn request_count(&self) -> usize {
        self.shared
            .recorded
            .lock()
            .map(|recorded| recorded.len())
            .unwrap_or(0)
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/_script", post(push_script))
        .route("/_requests", get(request_summary))
        .with_state(shared)
}

async fn push_script(
    State(shared): State<Arc<Shared>>,
    axum::Json(behaviors): axum::Json<Vec<Behavior>>,
) -> StatusCode {
    if let Ok(mut script) = shared.script.lock() {
        script.extend(behaviors);
    }
    StatusCode::NO_CONTENT
}

async fn request_summary(State(shared): State<Arc<Shared>>) -> axum::Json<Value> {
    let count = shared
        .recorded
        .lock()
        .map(|recorded| recorded.len())
        .unwrap_or(0);
    axum::Json(json!({"count": count}))
}

fn requested_schema(body: &Value) -> Value {
    body.pointer("/response_format/json_schema/schema")
        .cloned()
        .unwrap_or(json!({"type": "object"}))
}

async fn chat_completions(State(shared): State<Arc<Shared>>, body: String) -> Response {
    let body: Value = match serde_json::from_str(&body) {
        Ok(body) => body,
        Err(error) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("request is not JSON: {error}"),
            )
                .into_response();
        }
    };
    let behavior = shared
        .script
        .lock()
        .ok()
        .and_then(|mut script| script.pop_front())
        .or_else(|| {
            shared
                .default_behavior
                .lock()
                .ok()
                .and_then(|default| default.clone())
        })
        .unwrap_or(Behavior::Valid);
    if let Ok(mut recorded) = shared.recorded.lock() {
        recorded.push(RecordedRequest {
            body: body.clone(),
            received_at: Instant::now(),
            behavior: behavior.clone(),
        });
    }
    let content = match &behavior {
        Behavior::Status {
            status,
            retry_after_seconds,
        } => {
            let mut response = (
                StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                axum::Json(json!({"error": {"message": "scripted failure", "type": "scripted"}})),
            )
                .into_response();
            if let Some(seconds) = retry_after_seconds
                && let Ok(value) = HeaderValue::from_str(&seconds.to_string())
            {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            return response;
        }
        Behavior::Valid | Behavior::BrokenStream { .. } => {
            generate_instance(&requested_schema(&body), "answer").to_string()
        }
        Behavior::SlowValid { delay_ms } => {
            tokio::time::sleep(Duration::from_millis(*delay_ms)).await;
            generate_instance(&requested_schema(&body), "answer").to_string()
        }
        Behavior::Content { content } => content.clone(),
        Behavior::MalformedJson => "{\"this is\": not json".to_string(),
        Behavior::SchemaViolating => json!({"scriptedUnexpectedProperty": true}).to_string(),
        Behavior::ToolCalls { calls } => {
            return tool_calls_response(&body, calls);
        }
    };
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("scripted")
        .to_string();
    let prompt_tokens = body.to_string().len() as u64 / 4;
    let completion_tokens = content.len() as u64 / 4;
    let streaming = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if !streaming {
        return axum::Json(json!({
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}
        }))
        .into_response();
    }
    let characters: Vec<char> = content.chars().collect();
    let cut_after = match behavior {
        Behavior::BrokenStream { after_chunks } => Some(after_chunks),
        _ => None,
    };
    let mut frames = String::new();
    for piece in characters.chunks(24).take(cut_after.unwrap_or(usize::MAX)) {
        let text: String = piece.iter().collect();
        let chunk = json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model,
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
        frames.push_str(&format!("data: {chunk}\n\n"));
    }
    if cut_after.is_none() {
        let last = json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model,
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}});
        frames.push_str(&format!("data: {last}\n\ndata: [DONE]\n\n"));
    }
    let stream = futures_util::stream::iter(
        frames
            .into_bytes()
            .chunks(97)
            .map(|bytes| Ok::<_, std::io::Error>(bytes.to_vec()))
            .collect::<Vec<_>>(),
    );
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// A turn that asks for `calls`, streamed or whole as the request asks.
fn tool_calls_response(body: &Value, calls: &[ScriptedToolCall]) -> Response {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("scripted");
    let usage = json!({"prompt_tokens": body.to_string().len() / 4, "completion_tokens": 8, "total_tokens": body.to_string().len() / 4 + 8});
    if !body.get("stream").and_then(Value::as_bool).unwrap_or(false) {
        let whole: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(index, call)| json!({"id": format!("call_{index}"), "type": "function",
                                        "function": {"name": call.name, "arguments": call.arguments.to_string()}}))
            .collect();
        return axum::Json(json!({"id": "chatcmpl-scripted", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": whole}, "finish_reason": "tool_calls"}],
            "usage": usage}))
        .into_response();
    }
    let chunk = |delta: Value, finish: Value| {
        let chunk = json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {chunk}\n\n")
    };
    let mut frames = String::new();
    for (index, call) in calls.iter().enumerate() {
        frames.push_str(&chunk(
            json!({"tool_calls": [{"index": index, "id": format!("call_{index}"), "type": "function",
                                   "function": {"name": call.name, "arguments": ""}}]}),
            Value::Null,
        ));
        let arguments = call.arguments.to_string();
        let middle = arguments.len() / 2;
        let middle = (middle..=arguments.len())
            .find(|at| arguments.is_char_boundary(*at))
            .unwrap_or(arguments.len());
        for half in [&arguments[..middle], &arguments[middle..]] {
            frames.push_str(&chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": half}}]}),
                Value::Null,
            ));
        }
    }
    let last = json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model,
        "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}], "usage": usage});
    frames.push_str(&format!("data: {last}\n\ndata: [DONE]\n\n"));
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from(frames))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Convenience for tests: time between two recorded requests.
pub fn gap_between(first: &RecordedRequest, second: &RecordedRequest) -> Duration {
    second
        .received_at
        .saturating_duration_since(first.received_at)
}
