//! Amazon Bedrock's ConverseStream: `POST /model/{modelId}/converse-stream`
//! (SigV4-signed: a request without `authorization` is refused as an
//! invalid security token), answered with `application/vnd.amazon.eventstream`
//! frames written by the AWS SDK's own encoder (`aws-smithy-eventstream`)
//! carrying the documented events `messageStart`, `contentBlockStart`,
//! `contentBlockDelta` (`text` or `toolUse.input`), `contentBlockStop`,
//! `messageStop` and `metadata` (usage with `cacheReadInputTokens` and
//! `cacheWriteInputTokens`). Failures carry `x-amzn-errortype` as the
//! service does (`ThrottlingException` 429, `InternalServerException` 500,
//! `ServiceUnavailableException` 503, `UnrecognizedClientException` 403,
//! `ValidationException` 400).
//!
//! Which block answers: a forced tool (`toolChoice.tool`) is called with the
//! answer; with `toolChoice.any` the last tool offered is called (Baton
//! offers its answer tool last); otherwise the answer is text.

use std::sync::Arc;

use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::{
    AnswerBlock, Behavior, Shared, WireProtocol, answer_blocks, cut_after, take_behavior, tokens_of,
};

/// One event frame, encoded by the SDK's own event-stream writer.
fn frame(event_type: &str, payload: &Value) -> Vec<u8> {
    let message = Message::new(payload.to_string().into_bytes())
        .add_header(Header::new(
            ":message-type",
            HeaderValue::String("event".into()),
        ))
        .add_header(Header::new(
            ":event-type",
            HeaderValue::String(event_type.to_string().into()),
        ))
        .add_header(Header::new(
            ":content-type",
            HeaderValue::String("application/json".into()),
        ));
    let mut bytes = Vec::new();
    match aws_smithy_eventstream::frame::write_message_to(&message, &mut bytes) {
        Ok(()) => bytes,
        Err(_) => Vec::new(),
    }
}

/// The tool spec the answer goes to, if the request makes it a tool call.
fn answer_tool(body: &Value) -> Option<&Value> {
    let specs: Vec<&Value> = body
        .pointer("/toolConfig/tools")?
        .as_array()?
        .iter()
        .filter_map(|tool| tool.get("toolSpec"))
        .collect();
    let choice = body.pointer("/toolConfig/toolChoice")?;
    if let Some(name) = choice.pointer("/tool/name") {
        return specs.into_iter().find(|spec| spec["name"] == *name);
    }
    if choice.get("any").is_some() {
        return specs.last().copied();
    }
    None
}

/// The prefix the request marks cacheable: the tools, then the system
/// blocks before the last `cachePoint`.
fn cacheable_prefix(body: &Value) -> Option<String> {
    let system = body.get("system").and_then(Value::as_array);
    let tools = body.pointer("/toolConfig/tools").and_then(Value::as_array);
    let system_point = system.and_then(|blocks| {
        blocks
            .iter()
            .rposition(|block| block.get("cachePoint").is_some())
    });
    let tools_point = tools.and_then(|tools| {
        tools
            .iter()
            .rposition(|tool| tool.get("cachePoint").is_some())
    });
    if system_point.is_none() && tools_point.is_none() {
        return None;
    }
    // The SDK writes a tool's schema from a `Document` (a hash map), so its
    // keys come in a different order each call; Bedrock reads the JSON, so
    // the prefix is compared as parsed JSON, keys sorted.
    let mut prefix = tools
        .map(|tools| crate::canonical_json(&Value::from(tools.clone())))
        .unwrap_or_default();
    if let (Some(blocks), Some(point)) = (system, system_point) {
        for block in &blocks[..point] {
            prefix.push_str(block["text"].as_str().unwrap_or_default());
        }
    }
    Some(prefix)
}

pub(crate) async fn converse_stream(
    State(shared): State<Arc<Shared>>,
    Path(model_id): Path<String>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let body: Value = match serde_json::from_str(&body) {
        Ok(body) => body,
        Err(error) => return refusal(400, &format!("request is not JSON: {error}")),
    };
    if headers.get(header::AUTHORIZATION).is_none() {
        return refusal(401, "the request is not signed");
    }
    let behavior = take_behavior(
        &shared,
        WireProtocol::BedrockConverseStream,
        &model_id,
        &body,
    );
    if let Behavior::Status { status, .. } = &behavior {
        return refusal(*status, "scripted failure");
    }
    let cache = shared
        .cache
        .lock()
        .map(|mut cache| cache.marked(cacheable_prefix(&body).as_deref()))
        .unwrap_or_default();
    let answer_tool = answer_tool(&body).map(|tool| {
        (
            tool["name"].as_str().unwrap_or("answer"),
            &tool["inputSchema"]["json"],
        )
    });
    let blocks = answer_blocks(&behavior, answer_tool, "tooluse").await;
    let mut bytes = frame("messageStart", &json!({"role": "assistant"}));
    let cut_after = cut_after(&behavior);
    let mut sent_pieces = 0usize;
    let mut output_tokens = 0u64;
    for (index, AnswerBlock { tool, pieces }) in blocks.iter().enumerate() {
        if let Some((name, id)) = tool {
            bytes.extend(frame(
                "contentBlockStart",
                &json!({"contentBlockIndex": index, "start": {"toolUse": {"toolUseId": id, "name": name}}}),
            ));
        }
        for piece in pieces {
            if cut_after.is_some_and(|limit| sent_pieces >= limit) {
                return event_stream(bytes);
            }
            sent_pieces += 1;
            output_tokens += tokens_of(piece);
            let delta = match tool {
                Some(_) => json!({"toolUse": {"input": piece}}),
                None => json!({"text": piece}),
            };
            bytes.extend(frame(
                "contentBlockDelta",
                &json!({"contentBlockIndex": index, "delta": delta}),
            ));
        }
        bytes.extend(frame(
            "contentBlockStop",
            &json!({"contentBlockIndex": index}),
        ));
    }
    if cut_after.is_some() {
        return event_stream(bytes);
    }
    let stop_reason = if blocks.iter().any(|block| block.tool.is_some()) {
        "tool_use"
    } else {
        "end_turn"
    };
    bytes.extend(frame("messageStop", &json!({"stopReason": stop_reason})));
    let input_tokens = crate::prompt_tokens_of(&body).saturating_sub(cache.read + cache.written);
    bytes.extend(frame(
        "metadata",
        &json!({"usage": {"inputTokens": input_tokens, "outputTokens": output_tokens,
                          "totalTokens": input_tokens + cache.read + cache.written + output_tokens,
                          "cacheReadInputTokens": cache.read, "cacheWriteInputTokens": cache.written},
                "metrics": {"latencyMs": 1}}),
    ));
    event_stream(bytes)
}

fn event_stream(bytes: Vec<u8>) -> Response {
    let chunks = futures_util::stream::iter(
        bytes
            .chunks(101)
            .map(|piece| Ok::<_, std::io::Error>(piece.to_vec()))
            .collect::<Vec<_>>(),
    );
    Response::builder()
        .header(header::CONTENT_TYPE, "application/vnd.amazon.eventstream")
        .body(Body::from_stream(chunks))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// A failure as Bedrock sends it: the status, `x-amzn-errortype` and a
/// `message`.
fn refusal(status: u16, message: &str) -> Response {
    let (status, error_type) = match status {
        429 => (429, "ThrottlingException"),
        500 => (500, "InternalServerException"),
        502..=504 => (503, "ServiceUnavailableException"),
        401 => (403, "UnrecognizedClientException"),
        403 => (403, "AccessDeniedException"),
        404 => (404, "ResourceNotFoundException"),
        _ if status >= 500 => (500, "InternalServerException"),
        _ => (400, "ValidationException"),
    };
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .header("x-amzn-errortype", error_type)
        .body(Body::from(json!({"message": message}).to_string()))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
