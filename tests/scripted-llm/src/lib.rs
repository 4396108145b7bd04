//! Test double (tests and local demos only): a scripted model endpoint that
//! speaks three providers' public wire protocols on one port:
//!
//! - OpenAI-compatible chat completions (`POST /v1/chat/completions`, SSE
//!   chunks and `[DONE]`), in `openai_wire`;
//! - Anthropic's Messages API (`POST /v1/messages`, its SSE events
//!   `message_start` … `message_stop`), in `anthropic_wire`;
//! - Amazon Bedrock's ConverseStream (`POST /model/{modelId}/converse-stream`,
//!   `application/vnd.amazon.eventstream` frames written by the AWS SDK's own
//!   encoder, `aws-smithy-eventstream`), in `converse_wire`.
//!
//! By default it answers every request with JSON generated from the
//! request's answer schema (`response_format`, or the forced answer tool's
//! input schema), so any node contract gets a valid answer; it can be told to
//! fail (HTTP status with optional `Retry-After`, malformed JSON,
//! schema-violating JSON, a cut stream, a slow answer) to exercise retries
//! and re-prompts, and it keeps a prompt cache the way the providers
//! document theirs (`prompt_cache`), so cached tokens in `usage` come from
//! what the request marked cacheable. It records every request (protocol,
//! model, body) so tests can count and inspect calls.
//!
//! It stands in for an external LLM endpoint, never for Baton's own code.

mod anthropic_wire;
mod converse_wire;
pub mod instance;
mod openai_wire;
pub mod prompt_cache;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
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
    /// Answer with JSON generated from the requested schema, with the value
    /// at `pointer` (a JSON Pointer) replaced by `value`: what a
    /// [`PromptRule`] turns `Valid` into for a request it matches.
    ValidPatched { pointer: String, value: Value },
}

/// A model that reacts to its prompt: a request whose body contains
/// `contains` (anywhere: system prompt, user message) and would get a
/// `Valid` answer gets the schema-shaped answer with `pointer` set to the
/// next of `values` (taken in turn, cycling). Lets a test change a prompt
/// and see the answers change, or give a judge scores that vary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptRule {
    pub contains: String,
    pub pointer: String,
    pub values: Vec<Value>,
}

/// One tool call a [`Behavior::ToolCalls`] asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptedToolCall {
    pub name: String,
    pub arguments: Value,
}

/// The wire protocol a request came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireProtocol {
    OpenAiChat,
    AnthropicMessages,
    BedrockConverseStream,
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub protocol: WireProtocol,
    /// The model id the request named (in the body, or Bedrock's path).
    pub model: String,
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
    cache: Mutex<prompt_cache::PromptCache>,
    /// Prompt rules, each with how many answers it has given.
    rules: Mutex<Vec<(PromptRule, usize)>>,
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

    /// `http://127.0.0.1:PORT`: Anthropic's base URL (it adds `/v1/messages`)
    /// and Bedrock's endpoint URL.
    pub fn root_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The fewest tokens a cacheable prefix needs before it is cached
    /// (1,024 unless set, as the providers document for most models).
    pub fn set_cache_minimum_tokens(&self, tokens: u64) {
        if let Ok(mut cache) = self.shared.cache.lock() {
            cache.minimum_tokens = tokens;
        }
    }

    /// Queues behaviours for the next requests (after which: `Valid`).
    pub fn push_behaviors(&self, behaviors: impl IntoIterator<Item = Behavior>) {
        if let Ok(mut script) = self.shared.script.lock() {
            script.extend(behaviors);
        }
    }

    /// Adds a [`PromptRule`] (rules are tried in the order added).
    pub fn add_prompt_rule(&self, rule: PromptRule) {
        if let Ok(mut rules) = self.shared.rules.lock() {
            rules.push((rule, 0));
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
        .route("/v1/chat/completions", post(openai_wire::chat_completions))
        .route("/v1/messages", post(anthropic_wire::messages))
        .route(
            "/model/{model_id}/converse-stream",
            post(converse_wire::converse_stream),
        )
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

/// `GET /_requests`: how many requests came, and each one's protocol and
/// model (for a test driving the double as a separate process).
async fn request_summary(State(shared): State<Arc<Shared>>) -> axum::Json<Value> {
    let requests: Vec<Value> = shared
        .recorded
        .lock()
        .map(|recorded| {
            recorded
                .iter()
                .map(|request| json!({"protocol": format!("{:?}", request.protocol), "model": request.model}))
                .collect()
        })
        .unwrap_or_default();
    axum::Json(json!({"count": requests.len(), "requests": requests}))
}

/// The next behaviour (the script's, else the default, else `Valid`),
/// recorded with the request it answers.
fn take_behavior(shared: &Shared, protocol: WireProtocol, model: &str, body: &Value) -> Behavior {
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
    let behavior = match behavior {
        Behavior::Valid => by_prompt_rule(shared, body).unwrap_or(Behavior::Valid),
        other => other,
    };
    if let Ok(mut recorded) = shared.recorded.lock() {
        recorded.push(RecordedRequest {
            protocol,
            model: model.to_string(),
            body: body.clone(),
            received_at: Instant::now(),
            behavior: behavior.clone(),
        });
    }
    behavior
}

/// The first prompt rule matching `body`, as the answer it gives next.
fn by_prompt_rule(shared: &Shared, body: &Value) -> Option<Behavior> {
    let text = body.to_string();
    let mut rules = shared.rules.lock().ok()?;
    let (rule, answered) = rules
        .iter_mut()
        .find(|(rule, _)| !rule.values.is_empty() && text.contains(&rule.contains))?;
    let value = rule.values[*answered % rule.values.len()].clone();
    *answered += 1;
    Some(Behavior::ValidPatched {
        pointer: rule.pointer.clone(),
        value,
    })
}

/// The answer's text for a behaviour that answers (after a slow model's
/// wait): JSON generated from `schema` (`None`: free text), or the scripted
/// content; `None` for a failing status or tool calls.
async fn answer_text(behavior: &Behavior, schema: Option<&Value>) -> Option<String> {
    let generated = || match schema {
        Some(schema) => generate_instance(schema, "answer").to_string(),
        None => "A scripted reply.".to_string(),
    };
    match behavior {
        Behavior::Valid | Behavior::BrokenStream { .. } => Some(generated()),
        Behavior::SlowValid { delay_ms } => {
            tokio::time::sleep(Duration::from_millis(*delay_ms)).await;
            Some(generated())
        }
        Behavior::ValidPatched { pointer, value } => {
            let mut answer = match schema {
                Some(schema) => generate_instance(schema, "answer"),
                None => Value::String("A scripted reply.".to_string()),
            };
            if let Some(slot) = answer.pointer_mut(pointer) {
                *slot = value.clone();
            }
            Some(answer.to_string())
        }
        Behavior::Content { content } => Some(content.clone()),
        Behavior::MalformedJson => Some("{\"this is\": not json".to_string()),
        Behavior::SchemaViolating => Some(json!({"scriptedUnexpectedProperty": true}).to_string()),
        Behavior::Status { .. } | Behavior::ToolCalls { .. } => None,
    }
}

/// One content block of a tool-calling protocol's answer: the tool it
/// calls (name, id), or text when `None`, and its streamed pieces.
pub(crate) struct AnswerBlock {
    pub tool: Option<(String, String)>,
    pub pieces: Vec<String>,
}

/// The blocks answering `behavior`: the scripted tool calls (arguments in
/// two halves, ids `{id_prefix}_0`, …), else the answer, as a call of
/// `answer_tool` (name, input schema) or as text.
pub(crate) async fn answer_blocks(
    behavior: &Behavior,
    answer_tool: Option<(&str, &Value)>,
    id_prefix: &str,
) -> Vec<AnswerBlock> {
    if let Behavior::ToolCalls { calls } = behavior {
        return calls
            .iter()
            .enumerate()
            .map(|(index, call)| {
                let arguments = call.arguments.to_string();
                let middle = arguments.len() / 2;
                let middle = (middle..=arguments.len())
                    .find(|at| arguments.is_char_boundary(*at))
                    .unwrap_or(arguments.len());
                AnswerBlock {
                    tool: Some((call.name.clone(), format!("{id_prefix}_{index}"))),
                    pieces: vec![
                        arguments[..middle].to_string(),
                        arguments[middle..].to_string(),
                    ],
                }
            })
            .collect();
    }
    let text = answer_text(behavior, answer_tool.map(|(_, schema)| schema))
        .await
        .unwrap_or_default();
    vec![AnswerBlock {
        tool: answer_tool.map(|(name, _)| (name.to_string(), format!("{id_prefix}_answer"))),
        pieces: pieces_of(&text, 24),
    }]
}

/// How many stream pieces a cut stream keeps, `None` for a whole one.
fn cut_after(behavior: &Behavior) -> Option<usize> {
    match behavior {
        Behavior::BrokenStream { after_chunks } => Some(*after_chunks),
        _ => None,
    }
}

/// `text` in pieces of at most `size` characters (the deltas of a stream).
fn pieces_of(text: &str, size: usize) -> Vec<String> {
    let characters: Vec<char> = text.chars().collect();
    characters
        .chunks(size.max(1))
        .map(|piece| piece.iter().collect())
        .collect()
}

/// `value` as text with every object's keys sorted, so two equal JSON
/// values read the same whatever order their keys were written in.
pub(crate) fn canonical_json(value: &Value) -> String {
    match value {
        Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .into_iter()
                .map(|key| {
                    format!(
                        "{}:{}",
                        Value::from(key.as_str()),
                        canonical_json(&fields[key])
                    )
                })
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(canonical_json)
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => other.to_string(),
    }
}

/// The prompt tokens a request is billed for: its body without the cache
/// marks (`cache_control`, `cachePoint`), which the providers do not bill.
pub(crate) fn prompt_tokens_of(body: &Value) -> u64 {
    fn without_marks(value: &Value) -> Value {
        match value {
            Value::Object(fields) => Value::Object(
                fields
                    .iter()
                    .filter(|(key, _)| *key != "cache_control" && *key != "cachePoint")
                    .map(|(key, value)| (key.clone(), without_marks(value)))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .filter(|item| {
                        !item.as_object().is_some_and(|fields| {
                            fields.len() == 1 && fields.contains_key("cachePoint")
                        })
                    })
                    .map(without_marks)
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    tokens_of(&without_marks(body).to_string())
}

/// A rough token count (four characters a token), as the double bills.
fn tokens_of(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// Convenience for tests: time between two recorded requests.
pub fn gap_between(first: &RecordedRequest, second: &RecordedRequest) -> Duration {
    second
        .received_at
        .saturating_duration_since(first.received_at)
}
