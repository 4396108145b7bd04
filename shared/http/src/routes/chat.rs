//! `POST /api/v1/chat`: one chat message in, the chat run's frames out
//! (SSE, `?dialect=hooks` too). The body is `{message, threadId?, agent?,
//! contextType?, inputs?, entityId?, multitaskStrategy?}`; the run's
//! `complete` carries `{message, threadId}`. A thread still answering
//! another message: `multitaskStrategy` decides (`reject` is a 409 naming
//! the run answering). `GET /api/v1/threads` lists the tenant's threads,
//! the most recently answered first; `GET /api/v1/threads/{threadId}`
//! shows one by pages from its newest end (`limit`, `before`). A message with an idempotency key (`Idempotency-Key` or
//! `idempotencyKey`) sent again streams the first one's run, sending
//! nothing new to the thread.

use axum::Extension;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use baton_runtime::RuntimeError;
use baton_runtime::services::ChatRequest;
use serde_json::json;

use crate::auth::Tenant;
use crate::bodies::{ChatMessageRequest, ValidatedJson};
use crate::error::ApiError;
use crate::routes::request_keys::{mark_replayed, request_key};
use crate::sse::sse_response_in;
use crate::state::{ApiState, StreamQuery};
use crate::state::{StreamOf, held_while};

fn invalid(path: &str, message: impl Into<String>) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_chat_request",
        message,
    )
    .with_details(json!({"path": path}))
}

impl crate::bodies::RequestBody for ChatMessageRequest {
    fn refuse(path: &str, message: String) -> ApiError {
        invalid(path, message)
    }
}

/// Reads the body (`bodies::ChatMessageRequest`): `message` (a string, may
/// be blank), and the optional non-blank strings `threadId`, `agent`,
/// `contextType`; nothing else.
fn chat_request(body: ChatMessageRequest) -> Result<ChatRequest, ApiError> {
    let optional = |text: Option<String>, name: &str| match text {
        Some(text) if text.trim().is_empty() => {
            Err(invalid(&format!("$.{name}"), "must be a non-empty string"))
        }
        other => Ok(other),
    };
    Ok(ChatRequest {
        message: body.message,
        thread_id: optional(body.thread_id, "threadId")?,
        agent: optional(body.agent, "agent")?,
        context_type: optional(body.context_type, "contextType")?,
        inputs: body.inputs,
        entity_id: optional(body.entity_id, "entityId")?,
        multitask_strategy: body.multitask_strategy,
        user: None,
    })
}

pub(crate) async fn chat(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    principal: Option<Extension<crate::auth::Principal>>,
    Query(query): Query<StreamQuery>,
    headers: axum::http::HeaderMap,
    ValidatedJson(body): ValidatedJson<ChatMessageRequest>,
) -> Result<Response, ApiError> {
    let dialect = query.dialect()?;
    let key = request_key(&headers, body.idempotency_key.as_deref())?;
    let fingerprint = serde_json::to_value(&body).unwrap_or_default();
    let mut request = chat_request(body)?;
    // The signed-in person: whose preferences the chat may remember.
    request.user = principal.and_then(|Extension(principal)| principal.user);
    let caller = crate::trace_header::caller_trace(&headers);
    let ticket = state
        .open_stream(&tenant.0, StreamOf::RunNotStartedYet)
        .await?;
    let (runs, tenant_id) = (state.runs.clone(), tenant.0.clone());
    let sent = state
        .request_keys
        .once(
            &tenant.0,
            "chat",
            key.as_ref(),
            &fingerprint,
            || async move {
                let submitted = runs
                    .submit_chat_traced(&tenant_id, &request, caller)
                    .await?;
                Ok(json!({"runId": submitted.run_id, "threadId": submitted.thread_id}))
            },
        )
        .await
        .map_err(|error| match error {
            RuntimeError::InvalidInput { path, message } => {
                invalid(&path, format!("{path}: {message}"))
            }
            RuntimeError::ThreadNotFound(thread_id) => ApiError::new(
                StatusCode::NOT_FOUND,
                "thread_not_found",
                format!("no thread `{thread_id}`: leave threadId out to start one"),
            )
            .with_details(json!({"path": "$.threadId"})),
            other => other.into(),
        })?;
    let run_id = sent.answer()["runId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let thread_id = sent.answer()["threadId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let frames = held_while(
        state
            .runs
            .follow(&tenant.0, &run_id, 0, state.settings.poll_interval),
        ticket,
    );
    let mut response = sse_response_in(
        frames,
        state.settings.heartbeat,
        dialect,
        state.runs.clone(),
        &tenant.0,
    );
    mark_replayed(&mut response, sent.replayed());
    for (name, value) in [
        (
            header::LOCATION.as_str(),
            format!("/api/v1/flex/runs/{run_id}"),
        ),
        ("x-baton-thread-id", thread_id),
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

/// Exchanges per page of `GET /api/v1/threads/{threadId}` when `limit`
/// is not given, and at most.
pub const MAX_EXCHANGES_PER_PAGE: usize = 200;

/// `GET /api/v1/threads/{threadId}?limit=&before=`: one page of the
/// thread's exchanges from its newest end (rolled-back ones left out,
/// interrupted ones marked), `olderCursor` when older ones remain (passed
/// back as `before`), and who answers on it now. A bad parameter is a 400
/// naming it.
pub(crate) async fn thread(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    axum::extract::Path(thread_id): axum::extract::Path<String>,
    Query(parameters): Query<std::collections::HashMap<String, String>>,
) -> Result<axum::Json<crate::bodies::ThreadView>, ApiError> {
    let (before, limit) = thread_page_query(&parameters)?;
    let page = match state
        .runs
        .thread_page(&tenant.0, &thread_id, before.as_ref(), limit)
        .await
    {
        Ok(found) => found,
        Err(RuntimeError::ThreadNotFound(thread_id)) => {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "thread_not_found",
                format!("no thread `{thread_id}`"),
            )
            .with_details(json!({"path": "threadId"})));
        }
        Err(other) => return Err(other.into()),
    };
    let older_cursor = page
        .older_than
        .map(|(at_millis, run_id)| format!("{at_millis}:{run_id}"));
    let lane = page.lane;
    Ok(axum::Json(crate::bodies::ThreadView {
        thread_id,
        exchanges: page
            .exchanges
            .into_iter()
            .map(|exchange| crate::bodies::ThreadExchangeView {
                run_id: exchange.run_id,
                at_millis: exchange.at_millis,
                user: exchange.user,
                assistant: exchange.assistant,
                agent: exchange.agent,
                interrupted: exchange.interrupted,
                pending_drafts: exchange.drafts.len(),
            })
            .collect(),
        older_cursor,
        active_run_id: lane.active_run,
        queued_run_ids: lane.queued_runs,
    }))
}

/// `before` and `limit` of a thread's page, or a 400 naming the wrong one.
fn thread_page_query(
    parameters: &std::collections::HashMap<String, String>,
) -> Result<(Option<(u64, String)>, usize), ApiError> {
    let invalid = |parameter: &str, message: String| {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", message)
            .with_details(json!({"parameter": parameter}))
    };
    if let Some(unknown) = parameters
        .keys()
        .find(|name| !["limit", "before"].contains(&name.as_str()))
    {
        return Err(invalid(
            unknown,
            format!("unknown parameter `{unknown}`; a thread takes limit and before"),
        ));
    }
    let limit = match parameters.get("limit") {
        None => MAX_EXCHANGES_PER_PAGE,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|limit| (1..=MAX_EXCHANGES_PER_PAGE).contains(limit))
            .ok_or_else(|| {
                invalid(
                    "limit",
                    format!(
                        "limit `{text}` must be a whole number from 1 to {MAX_EXCHANGES_PER_PAGE}"
                    ),
                )
            })?,
    };
    let before = match parameters.get("before") {
        None => None,
        Some(text) => Some(
            text.split_once(':')
                .and_then(|(at, run_id)| {
                    let at = at.parse::<u64>().ok()?;
                    (!run_id.is_empty()).then(|| (at, run_id.to_string()))
                })
                .ok_or_else(|| {
                    invalid(
                        "before",
                        format!(
                            "before `{text}` is not a page's olderCursor (pass it as it was handed out)"
                        ),
                    )
                })?,
        ),
    };
    Ok((before, limit))
}

/// Threads per page when `limit` is not given.
pub const DEFAULT_THREADS_PER_PAGE: usize = 20;

/// `GET /api/v1/threads?limit=&cursor=`: one page of the tenant's threads,
/// the most recently answered first (`{threads: [{threadId,
/// startedAtMillis, lastAtMillis, firstMessage, lastMessage}],
/// nextCursor?}`). A bad parameter is a 400 naming it.
pub(crate) async fn list_threads(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Query(parameters): Query<std::collections::HashMap<String, String>>,
) -> Result<axum::Json<baton_core::records::thread_listing::ThreadListPage>, ApiError> {
    let query = thread_list_query(&parameters)?;
    Ok(axum::Json(
        state.runs.list_threads(&tenant.0, &query).await?,
    ))
}

/// The query the parameters ask for, or the 400 naming the first bad one.
pub fn thread_list_query(
    parameters: &std::collections::HashMap<String, String>,
) -> Result<baton_core::records::thread_listing::ThreadListQuery, ApiError> {
    use baton_core::records::thread_listing::{MAX_THREADS_PER_PAGE, ThreadListQuery};
    let invalid = |parameter: &str, message: String| {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", message)
            .with_details(json!({"parameter": parameter}))
    };
    if let Some(unknown) = parameters
        .keys()
        .find(|name| !["limit", "cursor"].contains(&name.as_str()))
    {
        return Err(invalid(
            unknown,
            format!("unknown parameter `{unknown}`; the list takes limit and cursor"),
        ));
    }
    let limit = match parameters.get("limit") {
        None => DEFAULT_THREADS_PER_PAGE,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|limit| (1..=MAX_THREADS_PER_PAGE).contains(limit))
            .ok_or_else(|| {
                invalid(
                    "limit",
                    format!(
                        "limit `{text}` must be a whole number from 1 to {MAX_THREADS_PER_PAGE}"
                    ),
                )
            })?,
    };
    let cursor = match parameters.get("cursor") {
        None => None,
        Some(text) if ThreadListQuery::is_cursor(text) => Some(text.clone()),
        Some(text) => {
            return Err(invalid(
                "cursor",
                format!(
                    "cursor `{text}` is not one this list handed out (pass a page's nextCursor as it is)"
                ),
            ));
        }
    };
    Ok(ThreadListQuery { limit, cursor })
}
