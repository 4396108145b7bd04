//! The Anthropic provider against a scripted double of the Messages API (a
//! test double for Anthropic's endpoint, speaking its documented SSE
//! events: `message_start`, `content_block_start`, `content_block_delta`,
//! `content_block_stop`, `message_delta`, `message_stop`, `ping`, `error`).

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Response, StatusCode};
use baton_core::contracts::model_request::ModelTarget;
use baton_core::records::conversation::{OfferedTool, ToolCallRequest};

use super::*;

/// One scripted answer: status, `Retry-After`, body.
#[derive(Clone)]
struct Scripted {
    status: u16,
    retry_after: Option<&'static str>,
    body: String,
}

#[derive(Default)]
struct Double {
    script: Mutex<Vec<Scripted>>,
    /// (headers, body) of every request, in order.
    seen: Mutex<Vec<(HeaderMap, Value)>>,
}

async fn messages(
    State(double): State<Arc<Double>>,
    headers: HeaderMap,
    body: String,
) -> Response<Body> {
    double
        .seen
        .lock()
        .unwrap()
        .push((headers, serde_json::from_str(&body).unwrap()));
    let next = {
        let mut script = double.script.lock().unwrap();
        if script.len() > 1 {
            script.remove(0)
        } else {
            script[0].clone()
        }
    };
    let mut response = Response::builder().status(StatusCode::from_u16(next.status).unwrap());
    if next.status == 200 {
        response = response.header("content-type", "text/event-stream");
    }
    if let Some(seconds) = next.retry_after {
        response = response.header("retry-after", seconds);
    }
    response.body(Body::from(next.body)).unwrap()
}

/// Serves `script` on a local port; returns its base URL and the double.
async fn serve(script: Vec<Scripted>) -> (String, Arc<Double>) {
    let double = Arc::new(Double {
        script: Mutex::new(script),
        ..Double::default()
    });
    let app = axum::Router::new()
        .route("/v1/messages", axum::routing::post(messages))
        .with_state(double.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}"), double)
}

fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// A whole message whose one tool-use block `name` streams `pieces`.
fn tool_message(name: &str, pieces: &[&str]) -> String {
    let mut body = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
            "model": "claude-test-20260101", "content": [],
            "usage": {"input_tokens": 20, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 5, "output_tokens": 1}}}),
    );
    body += &event("ping", json!({"type": "ping"}));
    body += &event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": name, "input": {}}}),
    );
    for piece in pieces {
        body += &event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": piece}}),
        );
    }
    body += &event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    body += &event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 42}}),
    );
    body += &event("message_stop", json!({"type": "message_stop"}));
    body
}

fn ok(body: String) -> Scripted {
    Scripted {
        status: 200,
        retry_after: None,
        body,
    }
}

fn failing(status: u16) -> Scripted {
    Scripted {
        status,
        retry_after: Some("0"),
        body: json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
            .to_string(),
    }
}

fn provider(base_url: &str) -> AnthropicProvider {
    let mut config =
        AnthropicConfig::new(base_url, Some("sk-ant-test".into()), "ANTHROPIC_API_KEY");
    config.model = "claude-default".into();
    config.retry.initial_backoff = Duration::from_millis(5);
    config.retry.max_backoff = Duration::from_millis(20);
    config.retry.max_attempts = 3;
    AnthropicProvider::new(config).unwrap()
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
            name: "claude-test".into(),
            provider: "anthropic".into(),
            model_id: "claude-test-20260101".into(),
            fallbacks: Vec::new(),
            prompt_cache: true,
            remote_headers: Default::default(),
            ..Default::default()
        })),
    }
}

#[tokio::test]
async fn a_schema_answer_is_the_forced_tool_input_streamed_in_order_with_cache_usage() {
    let (base, double) = serve(vec![ok(tool_message(
        "brief",
        &["{\"te", "xt\": \"hi", "\"}"],
    ))])
    .await;
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let answer = provider(&base).complete(&request(), sender).await.unwrap();
    assert_eq!(answer.content, "{\"text\": \"hi\"}");
    assert_eq!(answer.model, "claude-test-20260101");
    assert_eq!(
        answer.usage,
        TokenUsage {
            prompt_tokens: 1025,
            completion_tokens: 42,
            cached_prompt_tokens: 1000,
            cache_write_prompt_tokens: 5
        }
    );
    let mut pieces = Vec::new();
    while let Ok(ModelDelta::Text(piece)) = receiver.try_recv() {
        pieces.push(piece);
    }
    assert_eq!(pieces, vec!["{\"te", "xt\": \"hi", "\"}"]);
    let seen = double.seen.lock().unwrap();
    let (headers, body) = &seen[0];
    assert_eq!(headers["x-api-key"], "sk-ant-test");
    assert_eq!(headers["anthropic-version"], ANTHROPIC_VERSION);
    assert_eq!(body["model"], "claude-test-20260101");
    assert_eq!(
        body["tool_choice"],
        json!({"type": "tool", "name": "brief"})
    );
    assert_eq!(
        body["tools"][0]["input_schema"]["required"],
        json!(["text"])
    );
    assert_eq!(
        body["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert_eq!(body["stream"], true);
}

#[tokio::test]
async fn a_model_without_prompt_caching_gets_no_cache_mark() {
    let (base, double) = serve(vec![ok(tool_message("brief", &["{\"text\": \"hi\"}"]))]).await;
    let mut request = request();
    if let Some(target) = request.model.as_mut() {
        target.prompt_cache = false;
    }
    let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
    provider(&base).complete(&request, sender).await.unwrap();
    let seen = double.seen.lock().unwrap();
    assert_eq!(seen[0].1["system"][0]["text"], "Write a brief.");
    assert!(seen[0].1["system"][0].get("cache_control").is_none());
}

#[tokio::test]
async fn rate_limits_and_overloads_are_retried_and_a_refused_key_names_its_variable() {
    let (base, double) = serve(vec![
        failing(429),
        failing(529),
        ok(tool_message("brief", &["{}"])),
    ])
    .await;
    let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
    let answer = provider(&base).complete(&request(), sender).await.unwrap();
    assert_eq!(answer.content, "{}");
    assert_eq!(double.seen.lock().unwrap().len(), 3);

    let (base, double) = serve(vec![failing(500)]).await;
    let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
    let error = provider(&base)
        .complete(&request(), sender)
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            LlmError::ServerError {
                status: 500,
                attempts: 3,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(double.seen.lock().unwrap().len(), 3);

    let (base, double) = serve(vec![Scripted {
        status: 401,
        retry_after: None,
        body: "{}".into(),
    }])
    .await;
    let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
    let error = provider(&base)
        .complete(&request(), sender)
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "provider configuration: the provider refused the key (HTTP 401): set ANTHROPIC_API_KEY to a valid key"
    );
    assert_eq!(
        double.seen.lock().unwrap().len(),
        1,
        "a refused key is not retried"
    );
}

#[tokio::test]
async fn a_cut_stream_is_retried_and_its_readers_told_to_start_over() {
    let whole = tool_message("brief", &["{\"text\": \"a\"}"]);
    let cut = whole[..whole.find("event: message_delta").unwrap()].to_string();
    let (base, double) = serve(vec![ok(cut), ok(whole)]).await;
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let answer = provider(&base).complete(&request(), sender).await.unwrap();
    assert_eq!(answer.content, "{\"text\": \"a\"}");
    assert_eq!(double.seen.lock().unwrap().len(), 2);
    let mut seen = Vec::new();
    while let Ok(delta) = receiver.try_recv() {
        seen.push(delta);
    }
    assert_eq!(
        seen,
        vec![
            ModelDelta::Text("{\"text\": \"a\"}".into()),
            ModelDelta::Restarted,
            ModelDelta::Text("{\"text\": \"a\"}".into()),
        ]
    );
}

#[tokio::test]
async fn a_session_turn_calls_a_tool_in_pieces_and_answers_through_the_answer_tool() {
    let (base, double) = serve(vec![
        ok(tool_message(
            "registry_search",
            &["{\"qu", "ery\": \"brief\"}"],
        )),
        ok(tool_message("brief", &["{\"text\": \"done\"}"])),
    ])
    .await;
    let provider = provider(&base);
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
            id: "toolu_1".into(),
            name: "registry_search".into(),
            arguments: "{\"query\": \"brief\"}".into()
        }]
    );
    session.turns.push(SessionTurn::Assistant {
        content: String::new(),
        tool_calls: first.tool_calls.clone(),
    });
    session.turns.push(SessionTurn::Tool {
        call_id: "toolu_1".into(),
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
    let (_, body) = &seen[1];
    assert_eq!(body["tool_choice"], json!({"type": "any"}));
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["registry_search", "brief"]);
    assert_eq!(body["messages"][1]["content"][0]["type"], "tool_use");
    assert_eq!(
        body["messages"][1]["content"][0]["input"],
        json!({"query": "brief"})
    );
    assert_eq!(
        body["messages"][2],
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "two capabilities"}]})
    );
}

#[tokio::test]
async fn a_schema_that_is_not_an_object_is_wrapped_and_unwrapped() {
    let (base, double) = serve(vec![ok(tool_message("brief", &["{\"answer\": [1, 2]}"]))]).await;
    let mut asked = request();
    asked.output_schema = Arc::new(json!({"type": "array", "items": {"type": "integer"}}));
    let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
    let answer = provider(&base).complete(&asked, sender).await.unwrap();
    assert_eq!(answer.content, "[1,2]");
    let seen = double.seen.lock().unwrap();
    assert_eq!(
        seen[0].1["tools"][0]["input_schema"]["properties"]["answer"]["type"],
        "array"
    );
}
