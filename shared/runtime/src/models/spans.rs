//! The span of one model call, named and attributed by the OpenTelemetry
//! semantic conventions for generative AI (`gen_ai.*`): operation, provider,
//! requested and answering model, token usage, finish reason, the error's
//! type; the prompt and the completion only when the operator opts in
//! (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`), redacted by
//! the snapshots' rules (secret-named keys).
//!
//! A plain `tracing` span: exported as an OpenTelemetry span when traces
//! are (the functions' layer), a no-op otherwise. The finish reason is
//! derived from the answer (`tool_calls` when it asks for tools, `stop`
//! otherwise): the providers' own reasons are not carried this far.

use baton_core::basics::usage::TokenUsage;
use baton_core::records::conversation::{SessionAnswer, ToolSession};
use baton_core::state::context::ModelRequest;
use serde_json::{Value, json};
use tracing::field::Empty;

use crate::error::LlmError;

/// The span of a call to `model` (served by `provider` when known).
pub(crate) fn model_call_span(provider: Option<&str>, model: &str, tools: bool) -> tracing::Span {
    tracing::info_span!(
        "gen_ai.chat",
        otel.name = %format!("chat {model}"),
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider.unwrap_or("openai"),
        gen_ai.request.model = %model,
        gen_ai.response.model = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        baton.tools_offered = tools,
        error.type = Empty,
    )
}

/// Records what answered.
pub(crate) fn record_answer(
    span: &tracing::Span,
    model: &str,
    usage: &TokenUsage,
    asked_for_tools: bool,
) {
    span.record("gen_ai.response.model", model);
    span.record("gen_ai.usage.input_tokens", usage.prompt_tokens);
    span.record("gen_ai.usage.output_tokens", usage.completion_tokens);
    span.record(
        "gen_ai.response.finish_reasons",
        if asked_for_tools {
            "[\"tool_calls\"]"
        } else {
            "[\"stop\"]"
        },
    );
}

/// Records a failed call.
pub(crate) fn record_failure(span: &tracing::Span, error: &LlmError) {
    span.record("otel.status_code", "ERROR");
    span.record("error.type", error.code().as_str());
}

fn text_message(role: &str, text: &str) -> Value {
    json!({"role": role, "parts": [{"type": "text", "content": text}]})
}

/// The prompt (system instruction, user message, a session's turns) as
/// `gen_ai.input.messages`, redacted.
pub(crate) fn record_input(
    span: &tracing::Span,
    request: &ModelRequest,
    session: Option<&ToolSession>,
) {
    let mut messages = vec![
        text_message("system", &request.system_instruction),
        text_message("user", &request.user_message),
    ];
    if let Some(session) = session {
        messages.push(json!({"role": "session", "parts": [{"type": "turns", "content": format!("{session:?}")}]}));
    }
    let redacted = baton_core::basics::redaction::redact(&Value::Array(messages));
    span.record("gen_ai.input.messages", redacted.to_string());
}

/// The completion as `gen_ai.output.messages`, redacted.
pub(crate) fn record_output(span: &tracing::Span, content: &str, turn: Option<&SessionAnswer>) {
    let mut parts = vec![json!({"type": "text", "content": content})];
    for call in turn
        .map(|turn| turn.tool_calls.as_slice())
        .unwrap_or_default()
    {
        parts.push(json!({"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}));
    }
    let message = json!([{"role": "assistant", "parts": parts}]);
    span.record(
        "gen_ai.output.messages",
        baton_core::basics::redaction::redact(&message).to_string(),
    );
}
