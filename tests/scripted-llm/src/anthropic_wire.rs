//! Anthropic's Messages API: `POST /v1/messages` (`x-api-key`,
//! `anthropic-version`), streamed as the documented SSE events
//! `message_start`, `content_block_start`, `content_block_delta`
//! (`text_delta`, `input_json_delta`), `content_block_stop`, `message_delta`,
//! `message_stop`, with `ping` between; failures as `{"type": "error",
//! "error": {"type", "message"}}` with the documented status and error type.
//!
//! Which block answers: a forced tool (`tool_choice: {type: "tool"}`) is
//! called with the answer; with `tool_choice: {type: "any"}` the last tool
//! offered is called (Baton offers its answer tool last); otherwise the
//! answer is text.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::{
    AnswerBlock, Behavior, Shared, WireProtocol, answer_blocks, cut_after, take_behavior, tokens_of,
};

/// The error type Anthropic documents for a status.
fn error_type(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

/// The tool the answer goes to, if the request makes the answer a tool call.
fn answer_tool(body: &Value) -> Option<&Value> {
    let tools = body.get("tools")?.as_array()?;
    match body.pointer("/tool_choice/type").and_then(Value::as_str) {
        Some("tool") => {
            let name = body.pointer("/tool_choice/name")?;
            tools.iter().find(|tool| tool["name"] == *name)
        }
        Some("any") => tools.last(),
        _ => None,
    }
}

/// The prefix the request marks cacheable: the tools, then the system
/// blocks up to the last with `cache_control` (Anthropic's order).
fn cacheable_prefix(body: &Value) -> Option<String> {
    let tools = body.get("tools").and_then(Value::as_array);
    let tools_marked = tools
        .and_then(|tools| tools.last())
        .is_some_and(|tool| tool.get("cache_control").is_some());
    let system = body.get("system").and_then(Value::as_array);
    let last_marked_system = system.and_then(|blocks| {
        blocks
            .iter()
            .rposition(|block| block.get("cache_control").is_some())
    });
    if !tools_marked && last_marked_system.is_none() {
        return None;
    }
    let mut prefix = tools
        .map(|tools| Value::from(tools.clone()).to_string())
        .unwrap_or_default();
    if let (Some(blocks), Some(last)) = (system, last_marked_system) {
        for block in &blocks[..=last] {
            prefix.push_str(block["text"].as_str().unwrap_or_default());
        }
    }
    Some(prefix)
}

fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

pub(crate) async fn messages(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let body: Value = match serde_json::from_str(&body) {
        Ok(body) => body,
        Err(error) => return refusal(400, &format!("request is not JSON: {error}"), None),
    };
    if headers.get("x-api-key").is_none() || headers.get("anthropic-version").is_none() {
        return refusal(401, "x-api-key and anthropic-version are required", None);
    }
    let model = body["model"].as_str().unwrap_or("scripted").to_string();
    let behavior = take_behavior(&shared, WireProtocol::AnthropicMessages, &model, &body);
    if let Behavior::Status {
        status,
        retry_after_seconds,
    } = &behavior
    {
        return refusal(*status, "scripted failure", *retry_after_seconds);
    }
    let cache = shared
        .cache
        .lock()
        .map(|mut cache| cache.marked(cacheable_prefix(&body).as_deref()))
        .unwrap_or_default();
    let whole_prompt = crate::prompt_tokens_of(&body);
    let mut stream = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_scripted", "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null,
            "usage": {"input_tokens": whole_prompt.saturating_sub(cache.read + cache.written),
                      "cache_read_input_tokens": cache.read,
                      "cache_creation_input_tokens": cache.written, "output_tokens": 1}}}),
    );
    stream += &event("ping", json!({"type": "ping"}));
    // Each block: (tool name and id, or text) and its pieces.
    let answer_tool = answer_tool(&body).map(|tool| {
        (
            tool["name"].as_str().unwrap_or("answer"),
            &tool["input_schema"],
        )
    });
    let blocks = answer_blocks(&behavior, answer_tool, "toolu").await;
    let cut_after = cut_after(&behavior);
    let mut sent_pieces = 0usize;
    let mut output_tokens = 0u64;
    for (index, AnswerBlock { tool, pieces }) in blocks.iter().enumerate() {
        let start = match tool {
            Some((name, id)) => json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
            None => json!({"type": "text", "text": ""}),
        };
        stream += &event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        );
        for piece in pieces {
            if cut_after.is_some_and(|limit| sent_pieces >= limit) {
                return streamed(stream);
            }
            sent_pieces += 1;
            output_tokens += tokens_of(piece);
            let delta = match tool {
                Some(_) => json!({"type": "input_json_delta", "partial_json": piece}),
                None => json!({"type": "text_delta", "text": piece}),
            };
            stream += &event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            );
        }
        stream += &event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
    }
    if cut_after.is_some() {
        return streamed(stream);
    }
    let stop_reason = if blocks.iter().any(|block| block.tool.is_some()) {
        "tool_use"
    } else {
        "end_turn"
    };
    stream += &event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
               "usage": {"output_tokens": output_tokens}}),
    );
    stream += &event("message_stop", json!({"type": "message_stop"}));
    streamed(stream)
}

/// The SSE body, sent in small chunks as a network would.
fn streamed(stream: String) -> Response {
    let chunks = futures_util::stream::iter(
        stream
            .into_bytes()
            .chunks(97)
            .map(|bytes| Ok::<_, std::io::Error>(bytes.to_vec()))
            .collect::<Vec<_>>(),
    );
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(chunks))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn refusal(status: u16, message: &str, retry_after_seconds: Option<u64>) -> Response {
    let mut response = (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        axum::Json(
            json!({"type": "error", "error": {"type": error_type(status), "message": message}}),
        ),
    )
        .into_response();
    if let Some(seconds) = retry_after_seconds
        && let Ok(value) = HeaderValue::from_str(&seconds.to_string())
    {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}
