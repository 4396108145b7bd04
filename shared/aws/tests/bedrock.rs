//! The Bedrock provider against a double of the Converse API's
//! `ConverseStream` (a test double for Bedrock's endpoint, since moto's
//! `bedrock-runtime` has no Converse): `POST /model/{modelId}/converse-stream`
//! answered with `application/vnd.amazon.eventstream` frames written by the
//! SDK's own event-stream encoder (`aws-smithy-eventstream`) and read back by
//! the SDK's decoder in the provider, so the framing is the SDK's, and the
//! event payloads (`messageStart`, `contentBlockStart`, `contentBlockDelta`,
//! `contentBlockStop`, `messageStop`, `metadata`) are those the SDK parses.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Response};
use baton_aws::bedrock::{BedrockProvider, BedrockSettings};
use baton_core::contracts::model_request::ModelTarget;
use baton_core::records::conversation::{OfferedTool, SessionTurn, ToolCallRequest, ToolSession};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::TokenUsage;
use baton_runtime::error::LlmError;
use baton_runtime::ports::{LlmProvider, ModelDelta};
use serde_json::{Value, json};

#[derive(Clone)]
enum Scripted {
    Stream(Vec<(&'static str, Value)>),
    Throttled,
}

#[derive(Default)]
struct Double {
    script: Mutex<Vec<Scripted>>,
    /// (model id in the path, request body) of every call.
    seen: Mutex<Vec<(String, Value)>>,
}

fn frame(event_type: &'static str, payload: &Value) -> Vec<u8> {
    let message = Message::new(payload.to_string().into_bytes())
        .add_header(Header::new(
            ":message-type",
            HeaderValue::String("event".into()),
        ))
        .add_header(Header::new(
            ":event-type",
            HeaderValue::String(event_type.into()),
        ))
        .add_header(Header::new(
            ":content-type",
            HeaderValue::String("application/json".into()),
        ));
    let mut bytes = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&message, &mut bytes).unwrap();
    bytes
}

async fn converse_stream(
    State(double): State<Arc<Double>>,
    Path(model_id): Path<String>,
    _headers: HeaderMap,
    body: String,
) -> Response<Body> {
    double
        .seen
        .lock()
        .unwrap()
        .push((model_id, serde_json::from_str(&body).unwrap()));
    let next = {
        let mut script = double.script.lock().unwrap();
        if script.len() > 1 {
            script.remove(0)
        } else {
            script[0].clone()
        }
    };
    match next {
        Scripted::Throttled => Response::builder()
            .status(429)
            .header("content-type", "application/json")
            .header("x-amzn-errortype", "ThrottlingException")
            .body(Body::from(
                json!({"message": "Too many requests"}).to_string(),
            ))
            .unwrap(),
        Scripted::Stream(events) => {
            let bytes: Vec<u8> = events
                .iter()
                .flat_map(|(event_type, payload)| frame(event_type, payload))
                .collect();
            Response::builder()
                .status(200)
                .header("content-type", "application/vnd.amazon.eventstream")
                .body(Body::from(bytes))
                .unwrap()
        }
    }
}

async fn serve(script: Vec<Scripted>) -> (String, Arc<Double>) {
    let double = Arc::new(Double {
        script: Mutex::new(script),
        ..Double::default()
    });
    let app = axum::Router::new()
        .route(
            "/model/{model_id}/converse-stream",
            axum::routing::post(converse_stream),
        )
        .with_state(double.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}"), double)
}

/// A message whose one tool-use block `name` streams `pieces`.
fn tool_message(name: &str, pieces: &[&str]) -> Scripted {
    let mut events = vec![
        ("messageStart", json!({"role": "assistant"})),
        (
            "contentBlockStart",
            json!({"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "tooluse_1", "name": name}}}),
        ),
    ];
    for piece in pieces {
        events.push((
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"toolUse": {"input": piece}}}),
        ));
    }
    events.push(("contentBlockStop", json!({"contentBlockIndex": 0})));
    events.push(("messageStop", json!({"stopReason": "tool_use"})));
    events.push((
        "metadata",
        json!({"usage": {"inputTokens": 30, "outputTokens": 12, "totalTokens": 1042,
                         "cacheReadInputTokens": 1000, "cacheWriteInputTokens": 0},
               "metrics": {"latencyMs": 5}}),
    ));
    Scripted::Stream(events)
}

async fn provider(base: &str) -> BedrockProvider {
    let connection = baton_aws::AwsConnection::to_emulator(base).await;
    BedrockProvider::new(
        &connection,
        BedrockSettings {
            max_tokens: 1024,
            max_attempts: 3,
            initial_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(20),
            request_timeout: Duration::from_secs(10),
        },
    )
}

fn request() -> ModelRequest {
    ModelRequest {
        system_instruction: "Write a brief.".into(),
        user_message: "{}".into(),
        schema_name: "brief".into(),
        output_schema: Arc::new(
            json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}),
        ),
        model: Some(Box::new(ModelTarget {
            name: "bedrock-claude".into(),
            provider: "bedrock".into(),
            model_id: "anthropic.claude-test-v1:0".into(),
            fallbacks: Vec::new(),
            prompt_cache: true,
            remote_headers: Default::default(),
            ..Default::default()
        })),
    }
}

#[tokio::test]
async fn a_schema_answer_streams_through_the_sdks_event_stream_with_cache_usage() {
    let (base, double) = serve(vec![tool_message("brief", &["{\"text\":", " \"hi\"}"])]).await;
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let answer = provider(&base)
        .await
        .complete(&request(), sender)
        .await
        .unwrap();
    assert_eq!(answer.content, "{\"text\": \"hi\"}");
    assert_eq!(answer.model, "anthropic.claude-test-v1:0");
    assert_eq!(
        answer.usage,
        TokenUsage {
            prompt_tokens: 1030,
            completion_tokens: 12,
            cached_prompt_tokens: 1000,
            cache_write_prompt_tokens: 0
        }
    );
    let mut pieces = Vec::new();
    while let Ok(ModelDelta::Text(piece)) = receiver.try_recv() {
        pieces.push(piece);
    }
    assert_eq!(pieces, vec!["{\"text\":", " \"hi\"}"]);
    let seen = double.seen.lock().unwrap();
    let (model_id, body) = &seen[0];
    assert_eq!(model_id, "anthropic.claude-test-v1:0");
    assert_eq!(body["system"][0]["text"], "Write a brief.");
    assert_eq!(body["system"][1]["cachePoint"]["type"], "default");
    assert_eq!(
        body["toolConfig"]["toolChoice"],
        json!({"tool": {"name": "brief"}})
    );
    assert_eq!(
        body["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]["required"],
        json!(["text"])
    );
    assert_eq!(body["inferenceConfig"]["maxTokens"], 1024);
}

#[tokio::test]
async fn throttling_is_retried_and_gives_up_as_rate_limited() {
    let (base, double) = serve(vec![Scripted::Throttled, tool_message("brief", &["{}"])]).await;
    let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
    let answer = provider(&base)
        .await
        .complete(&request(), sender)
        .await
        .unwrap();
    assert_eq!(answer.content, "{}");
    assert_eq!(double.seen.lock().unwrap().len(), 2);

    let (base, double) = serve(vec![Scripted::Throttled]).await;
    let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
    let error = provider(&base)
        .await
        .complete(&request(), sender)
        .await
        .unwrap_err();
    assert_eq!(error, LlmError::RateLimited { attempts: 3 });
    assert_eq!(double.seen.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn a_stream_cut_before_message_stop_is_retried_with_a_restart() {
    let whole = tool_message("brief", &["{\"text\": \"a\"}"]);
    let Scripted::Stream(events) = whole.clone() else {
        unreachable!()
    };
    let cut = Scripted::Stream(events[..3].to_vec());
    let (base, double) = serve(vec![cut, whole]).await;
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let answer = provider(&base)
        .await
        .complete(&request(), sender)
        .await
        .unwrap();
    assert_eq!(answer.content, "{\"text\": \"a\"}");
    assert_eq!(double.seen.lock().unwrap().len(), 2);
    let mut seen = Vec::new();
    while let Ok(delta) = receiver.try_recv() {
        seen.push(delta);
    }
    assert_eq!(seen[1], ModelDelta::Restarted, "{seen:?}");
}

#[tokio::test]
async fn a_session_turn_calls_a_tool_then_answers_through_the_answer_tool() {
    let (base, double) = serve(vec![
        tool_message("registry_search", &["{\"query\":", " \"brief\"}"]),
        tool_message("brief", &["{\"text\": \"done\"}"]),
    ])
    .await;
    let provider = provider(&base).await;
    let mut session = ToolSession {
        tools: vec![OfferedTool {
            name: "registry_search".into(),
            description: "Searches the registry.".into(),
            parameters: Arc::new(
                json!({"type": "object", "properties": {"query": {"type": "string"}}}),
            ),
        }],
        turns: Vec::new(),
        free_text: false,
    };
    let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
    let first = provider
        .converse(&request(), &session, sender)
        .await
        .unwrap();
    assert_eq!(
        first.tool_calls,
        vec![ToolCallRequest {
            id: "tooluse_1".into(),
            name: "registry_search".into(),
            arguments: "{\"query\": \"brief\"}".into()
        }]
    );
    session.turns.push(SessionTurn::Assistant {
        content: String::new(),
        tool_calls: first.tool_calls.clone(),
    });
    session.turns.push(SessionTurn::Tool {
        call_id: "tooluse_1".into(),
        content: "two capabilities".into(),
    });
    let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
    let second = provider
        .converse(&request(), &session, sender)
        .await
        .unwrap();
    assert_eq!(second.content, "{\"text\": \"done\"}");
    assert!(second.tool_calls.is_empty());
    let seen = double.seen.lock().unwrap();
    let body = &seen[1].1;
    assert_eq!(body["toolConfig"]["toolChoice"], json!({"any": {}}));
    assert_eq!(
        body["messages"][1]["content"][0]["toolUse"]["input"],
        json!({"query": "brief"})
    );
    assert_eq!(
        body["messages"][2]["content"][0]["toolResult"],
        json!({"toolUseId": "tooluse_1", "content": [{"text": "two capabilities"}]})
    );
}
