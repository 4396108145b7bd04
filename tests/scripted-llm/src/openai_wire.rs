//! OpenAI-compatible chat completions: `POST /v1/chat/completions`, whole
//! or streamed as SSE chunks ending in `[DONE]`; tool calls streamed in
//! pieces; `usage.prompt_tokens_details.cached_tokens` from the automatic
//! prompt cache.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::{
    Behavior, ScriptedToolCall, Shared, WireProtocol, answer_text, cut_after, pieces_of,
    take_behavior, tokens_of,
};

/// What OpenAI caches on its own: the tools, then the system message.
fn cacheable_prefix(body: &Value) -> Option<String> {
    let system = body
        .pointer("/messages/0")
        .filter(|message| message["role"] == "system")?;
    let tools = body.get("tools").map(Value::to_string).unwrap_or_default();
    Some(format!("{tools}{}", system["content"]))
}

fn requested_schema(body: &Value) -> Value {
    body.pointer("/response_format/json_schema/schema")
        .cloned()
        .unwrap_or(json!({"type": "object"}))
}

pub(crate) async fn chat_completions(State(shared): State<Arc<Shared>>, body: String) -> Response {
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
    let asked_model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("scripted");
    let behavior = take_behavior(&shared, WireProtocol::OpenAiChat, asked_model, &body);
    if let Behavior::Status {
        status,
        retry_after_seconds,
    } = &behavior
    {
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
    if let Behavior::ToolCalls { calls } = &behavior {
        return tool_calls_response(&body, calls);
    }
    let schema = body.get("response_format").map(|_| requested_schema(&body));
    let content = answer_text(&behavior, schema.as_ref())
        .await
        .unwrap_or_default();
    let cached = shared
        .cache
        .lock()
        .map(|mut cache| cache.automatic(cacheable_prefix(&body).as_deref()))
        .unwrap_or_default();
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("scripted")
        .to_string();
    let prompt_tokens = tokens_of(&body.to_string());
    let completion_tokens = tokens_of(&content);
    let usage = json!({"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached.read}});
    let streaming = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if !streaming {
        return axum::Json(json!({
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": usage
        }))
        .into_response();
    }
    let cut_after = cut_after(&behavior);
    let mut frames = String::new();
    for text in pieces_of(&content, 24)
        .into_iter()
        .take(cut_after.unwrap_or(usize::MAX))
    {
        let chunk = json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model,
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
        frames.push_str(&format!("data: {chunk}\n\n"));
    }
    if cut_after.is_none() {
        let last = json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model,
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": usage});
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
    let prompt_tokens = tokens_of(&body.to_string());
    let usage = json!({"prompt_tokens": prompt_tokens, "completion_tokens": 8, "total_tokens": prompt_tokens + 8});
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
