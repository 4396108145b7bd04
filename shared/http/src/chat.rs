//! `POST /api/v1/chat`: one chat message in, the chat run's frames out
//! (SSE, `?dialect=hooks` too). The body is `{message, threadId?, agent?,
//! contextType?}`; the run's `complete` carries `{message, threadId}`.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use baton_runtime::RuntimeError;
use baton_runtime::services::ChatRequest;
use serde_json::{Value, json};

use crate::auth::Tenant;
use crate::error::ApiError;
use crate::routes::{ApiState, StreamQuery, parse_json_body};
use crate::sse::sse_response_in;

fn invalid(path: &str, message: impl Into<String>) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_chat_request",
        message,
    )
    .with_details(json!({"path": path}))
}

/// Reads the body: `message` (a string, may be blank), and the optional
/// strings `threadId`, `agent`, `contextType`; nothing else.
fn chat_request(body: &Value) -> Result<ChatRequest, ApiError> {
    let Some(fields) = body.as_object() else {
        return Err(invalid("$", "the body must be a JSON object"));
    };
    if let Some(unknown) = fields
        .keys()
        .find(|key| !["message", "threadId", "agent", "contextType"].contains(&key.as_str()))
    {
        return Err(invalid(
            &format!("$.{unknown}"),
            format!(
                "unknown field `{unknown}`: a chat message has message, threadId, agent, contextType"
            ),
        ));
    }
    let message = match fields.get("message") {
        Some(Value::String(message)) => message.clone(),
        Some(_) => return Err(invalid("$.message", "must be a string")),
        None => return Err(invalid("$.message", "is required")),
    };
    let optional = |name: &str| -> Result<Option<String>, ApiError> {
        match fields.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) if !text.trim().is_empty() => Ok(Some(text.clone())),
            Some(_) => Err(invalid(&format!("$.{name}"), "must be a non-empty string")),
        }
    };
    Ok(ChatRequest {
        message,
        thread_id: optional("threadId")?,
        agent: optional("agent")?,
        context_type: optional("contextType")?,
    })
}

pub(crate) async fn chat(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Query(query): Query<StreamQuery>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let dialect = query.dialect()?;
    let request = chat_request(&parse_json_body(&body)?)?;
    let submitted = match state.runs.submit_chat(&tenant.0, &request).await {
        Ok(submitted) => submitted,
        Err(RuntimeError::InvalidInput { path, message }) => {
            return Err(invalid(&path, format!("{path}: {message}")));
        }
        Err(RuntimeError::ThreadNotFound(thread_id)) => {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "thread_not_found",
                format!("no thread `{thread_id}`: leave threadId out to start one"),
            )
            .with_details(json!({"path": "$.threadId"})));
        }
        Err(other) => return Err(other.into()),
    };
    let frames = state.runs.follow(
        &tenant.0,
        &submitted.run_id,
        0,
        state.settings.poll_interval,
    );
    let mut response = sse_response_in(frames, state.settings.heartbeat, dialect);
    for (name, value) in [
        (
            header::LOCATION.as_str(),
            format!("/api/v1/flex/runs/{}", submitted.run_id),
        ),
        ("x-baton-thread-id", submitted.thread_id.clone()),
    ] {
        if let (Ok(name), Ok(value)) = (
            header::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            response.headers_mut().insert(name, value);
        }
    }
    Ok(response)
}
