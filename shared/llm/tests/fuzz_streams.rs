//! No stream crashes a provider: generated response bodies (`proptest`,
//! `BATON_FUZZ_CASES` cases, default 256) served as `text/event-stream` to
//! the OpenAI-compatible and the Anthropic providers, whose SSE decoders
//! read them: SSE-shaped fragments (`data:`, `event:`, comments, `[DONE]`,
//! chunks with the real fields holding generated values, cut anywhere) and
//! bytes that are not text. Each call ends with an answer or an error; it
//! never panics or hangs. The server is a test double for the providers'
//! endpoints (one axum route per wire protocol, serving the case's body).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::Response;
use axum::routing::post;
use baton_core::contracts::model_request::ModelRequest;
use baton_llm::anthropic::{AnthropicConfig, AnthropicProvider};
use baton_llm::{OpenAiCompatibleConfig, OpenAiCompatibleProvider};
use baton_runtime::ports::LlmProvider;
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Value, json};

type Served = Arc<Mutex<Vec<u8>>>;

async fn serve(State(body): State<Served>) -> Response<Body> {
    let bytes = body.lock().unwrap().clone();
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(bytes))
        .unwrap()
}

fn a_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|number| json!(number)),
        ".{0,12}".prop_map(Value::String),
        Just(json!({"text": "partial"})),
        Just(json!([])),
        Just(json!({})),
    ]
}

const ANTHROPIC_EVENTS: &[&str] = &[
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "error",
    "ping",
    "unknown",
];

/// One SSE event (or a fragment of one) in either protocol's vocabulary.
fn an_event() -> impl Strategy<Value = String> {
    prop_oneof![
        // OpenAI-compatible chunks, with generated values in the real fields.
        (a_value(), a_value(), a_value()).prop_map(|(content, finish, usage)| format!(
            "data: {}\n\n",
            json!({"choices": [{"delta": {"content": content, "tool_calls": [{"index": 0, "function": {"arguments": content}}]}, "finish_reason": finish}], "usage": usage})
        )),
        Just("data: [DONE]\n\n".to_string()),
        // Anthropic events.
        (proptest::sample::select(ANTHROPIC_EVENTS), a_value(), a_value()).prop_map(
            |(name, delta, usage)| format!(
                "event: {name}\ndata: {}\n\n",
                json!({"type": name, "index": 0, "delta": {"type": "input_json_delta", "partial_json": delta, "text": delta}, "content_block": {"type": "tool_use", "id": "t", "name": "answer", "input": {}}, "message": {"usage": usage}, "usage": usage, "error": {"type": "overloaded_error", "message": delta}})
            )
        ),
        Just(": a comment\n\n".to_string()),
        "data: .{0,40}\n\n",
        "[a-z:{}\\[\\]\" \n]{0,40}",
    ]
}

/// A whole body: events in any order, maybe cut anywhere, or raw bytes.
fn a_body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => (proptest::collection::vec(an_event(), 0..8), any::<Option<usize>>()).prop_map(|(events, cut)| {
            let mut bytes = events.concat().into_bytes();
            if let Some(cut) = cut {
                bytes.truncate(cut % (bytes.len() + 1));
            }
            bytes
        }),
        1 => proptest::collection::vec(any::<u8>(), 0..128),
    ]
}

fn request() -> ModelRequest {
    ModelRequest {
        system_instruction: "Answer.".into(),
        user_message: "{}".into(),
        schema_name: "answer".into(),
        output_schema: Arc::new(
            json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}),
        ),
        model: None,
    }
}

fn cases() -> u32 {
    std::env::var("BATON_FUZZ_CASES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(256)
}

struct Endpoints {
    body: Served,
    openai: OpenAiCompatibleProvider,
    anthropic: AnthropicProvider,
    runtime: tokio::runtime::Runtime,
}

fn endpoints() -> Endpoints {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let body: Served = Arc::default();
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(serve))
        .route("/v1/messages", post(serve))
        .with_state(body.clone());
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });
    let mut openai = OpenAiCompatibleConfig::new(format!("{base}/v1"), "fuzz", None);
    openai.max_attempts = 1;
    openai.request_timeout = Duration::from_secs(5);
    let mut anthropic =
        AnthropicConfig::new(&base, Some("sk-ant-fuzz".into()), "ANTHROPIC_API_KEY");
    anthropic.model = "claude-fuzz".into();
    anthropic.retry.max_attempts = 1;
    Endpoints {
        body,
        openai: OpenAiCompatibleProvider::new(openai).unwrap(),
        anthropic: AnthropicProvider::new(anthropic).unwrap(),
        runtime,
    }
}

fn shared() -> &'static Endpoints {
    static ENDPOINTS: std::sync::OnceLock<Endpoints> = std::sync::OnceLock::new();
    ENDPOINTS.get_or_init(endpoints)
}

proptest! {
    #![proptest_config(Config { cases: cases(), failure_persistence: None, ..Config::default() })]

    #[test]
    fn no_stream_crashes_or_hangs_a_provider(body in a_body()) {
        let endpoints = shared();
        *endpoints.body.lock().unwrap() = body;
        for provider in [&endpoints.openai as &dyn LlmProvider, &endpoints.anthropic] {
            let (deltas, _received) = tokio::sync::mpsc::unbounded_channel();
            let answered = endpoints.runtime.block_on(async {
                tokio::time::timeout(Duration::from_secs(10), provider.complete(&request(), deltas))
                    .await
            });
            prop_assert!(answered.is_ok(), "{} hung on the stream", provider.model_name());
        }
    }
}
