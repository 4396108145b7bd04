//! The audit trail at the edge: `record_changes`, the middleware that
//! writes one record for every state-changing request a principal makes
//! (after it is answered: who, the operation, the resource, the request
//! id, the status and error code), and `GET /audit` (`admin`), the
//! tenant's trail newest first, as JSON pages or JSON lines.
//!
//! The record is an append-only put beside the change, not part of the
//! run's commit: a store failure after the change is logged (the change
//! stands) and the request still answers.

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, Query, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Json, Response};
use baton_runtime::ports::{AuditOutcome, AuditPage};
use baton_runtime::services::AuditEntry;
use serde_json::{Value, json};

use crate::auth::{Principal, Tenant};
use crate::error::ApiError;
use crate::state::ApiState;

/// The request id header: taken when given (1–128 printable characters),
/// made otherwise, and answered back.
const REQUEST_ID: &str = "x-request-id";

/// Largest JSON answer read for a resource id (a submission's answer names
/// the new run).
const MAX_PEEK_BYTES: usize = 1024 * 1024;

/// The path parameters that name a resource, and the resource's kind.
const RESOURCE_PARAMETERS: &[(&str, &str)] = &[
    ("run_id", "run"),
    ("schedule_id", "schedule"),
    ("evaluation_id", "evaluation"),
    ("task_id", "task"),
    ("thread_id", "thread"),
];

/// The operations whose request body, not their path, names the run.
const NAMES_ITS_RUN_IN_THE_BODY: &[&str] = &["resumeRun", "resolveRequest"];

/// Body fields that name a resource, and the resource's kind.
const RESOURCE_FIELDS: &[(&str, &str)] = &[
    ("runId", "run"),
    ("scheduleId", "schedule"),
    ("evaluationId", "evaluation"),
    ("capabilityId", "capability"),
    ("threadId", "thread"),
];

fn changes_state(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

/// `kind/id` from the matched route's parameters.
fn resource_in_path(matched: &str, path: &str) -> Option<String> {
    matched
        .split('/')
        .zip(path.split('/'))
        .find_map(|(pattern, value)| {
            let name = pattern.strip_prefix('{')?.strip_suffix('}')?;
            let (_, kind) = RESOURCE_PARAMETERS
                .iter()
                .find(|(parameter, _)| *parameter == name)?;
            Some(format!("{kind}/{value}"))
        })
}

/// `kind/id` from a JSON body's top-level fields.
fn resource_in_body(bytes: &[u8]) -> Option<String> {
    let body: Value = serde_json::from_slice(bytes).ok()?;
    RESOURCE_FIELDS.iter().find_map(|(field, kind)| {
        let id = body.get(field)?.as_str()?;
        Some(format!("{kind}/{id}"))
    })
}

fn request_id_of(request: &Request, state: &ApiState) -> String {
    request
        .headers()
        .get(REQUEST_ID)
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
        .filter(|id| !id.is_empty() && id.len() <= 128 && id.chars().all(|c| c.is_ascii_graphic()))
        .map(str::to_string)
        .unwrap_or_else(|| state.audit.new_request_id())
}

/// Records every state-changing request of an authenticated principal.
pub(crate) async fn record_changes(
    State(state): State<ApiState>,
    request: Request,
    next: Next,
) -> Response {
    let request_id = request_id_of(&request, &state);
    let (Some(principal), true) = (
        request.extensions().get::<Principal>().cloned(),
        changes_state(request.method()),
    ) else {
        let mut response = next.run(request).await;
        if let Ok(value) = HeaderValue::from_str(&request_id) {
            response.headers_mut().insert(REQUEST_ID, value);
        }
        return response;
    };
    let matched = request
        .extensions()
        .get::<MatchedPath>()
        .map(|matched| matched.as_str().to_string())
        .unwrap_or_default();
    let action = crate::openapi::action_name(request.method().as_str(), &matched);
    let mut resource = resource_in_path(&matched, request.uri().path());
    // A resume or an approval names its run in the body only: read it for
    // those (handed on unchanged), never a submission's envelope.
    let request = if resource.is_none() && NAMES_ITS_RUN_IN_THE_BODY.contains(&action.as_str()) {
        let (parts, body) = request.into_parts();
        let limit = state.settings.max_body_bytes;
        let Ok(bytes) = axum::body::to_bytes(body, limit).await else {
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                format!(
                    "the request body is over the limit of {limit} bytes (BATON_MAX_BODY_BYTES)"
                ),
            )
            .with_details(json!({"path": "$", "limitBytes": limit}))
            .into_response();
        };
        resource = resource_in_body(&bytes);
        Request::from_parts(parts, Body::from(bytes))
    } else {
        request
    };
    let response = next.run(request).await;
    let status = response.status();
    // A streamed answer (run.stream, chat) names its run in `Location`.
    if resource.is_none() {
        resource = response
            .headers()
            .get(header::LOCATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|location| location.strip_prefix("/api/v1/flex/runs/"))
            .map(|run_id| format!("run/{run_id}"));
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"application/json"));
    // A JSON answer is read for the new resource's id and the error code.
    let (mut response, code) = if is_json {
        let (parts, body) = response.into_parts();
        let bytes: Bytes = axum::body::to_bytes(body, MAX_PEEK_BYTES)
            .await
            .unwrap_or_default();
        if resource.is_none() {
            resource = resource_in_body(&bytes);
        }
        let code = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|body| body.pointer("/error/code")?.as_str().map(str::to_string));
        (Response::from_parts(parts, Body::from(bytes)), code)
    } else {
        (response, None)
    };
    let entry = AuditEntry {
        tenant_id: principal.tenant.clone(),
        actor: principal.actor(),
        action,
        resource,
        request_id: request_id.clone(),
        outcome: AuditOutcome {
            status: status.as_u16(),
            code,
        },
    };
    keep(&state, entry).await;
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    response
}

/// The record of a state-changing request the scope check refused (no
/// handler ran, so the resource is only what the path names); `None` for a
/// read.
pub(crate) fn refused_change(
    state: &ApiState,
    principal: &Principal,
    request: &Request,
    matched: Option<&str>,
    refusal: &ApiError,
) -> Option<AuditEntry> {
    if !changes_state(request.method()) {
        return None;
    }
    let matched = matched.unwrap_or_default();
    Some(AuditEntry {
        tenant_id: principal.tenant.clone(),
        actor: principal.actor(),
        action: crate::openapi::action_name(request.method().as_str(), matched),
        resource: resource_in_path(matched, request.uri().path()),
        request_id: request_id_of(request, state),
        outcome: AuditOutcome {
            status: refusal.status.as_u16(),
            code: Some(refusal.code.to_string()),
        },
    })
}

/// Keeps `entry`; a store failure is logged (the request is answered).
pub(crate) async fn keep(state: &ApiState, entry: AuditEntry) {
    if let Err(error) = state.audit.record(entry).await {
        tracing::error!(%error, "an audit record could not be written");
    }
}

/// `GET /audit?limit=&cursor=&format=json|jsonl`.
pub(crate) async fn list_audit(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let parameter_error = |name: &str, message: String| {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", message)
            .with_details(json!({"parameter": name}))
    };
    let limit = match query.get("limit") {
        None => 100,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|limit| (1..=baton_runtime::services::MAX_AUDIT_PAGE).contains(limit))
            .ok_or_else(|| {
                parameter_error(
                    "limit",
                    format!(
                        "limit must be 1 to {}",
                        baton_runtime::services::MAX_AUDIT_PAGE
                    ),
                )
            })?,
    };
    let jsonl = match query.get("format").map(String::as_str) {
        None | Some("json") => false,
        Some("jsonl") => true,
        Some(other) => {
            return Err(parameter_error(
                "format",
                format!("format `{other}`: json or jsonl"),
            ));
        }
    };
    let page: AuditPage = state
        .audit
        .list(&tenant.0, limit, query.get("cursor").cloned())
        .await?;
    if !jsonl {
        return Ok(Json(page).into_response());
    }
    let mut lines = String::new();
    for record in &page.records {
        lines.push_str(&serde_json::to_string(record).unwrap_or_default());
        lines.push('\n');
    }
    let mut response = ([(header::CONTENT_TYPE, "application/x-ndjson")], lines).into_response();
    if let Some(cursor) = page.next_cursor.as_deref()
        && let Ok(value) = HeaderValue::from_str(cursor)
    {
        response.headers_mut().insert("x-next-cursor", value);
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_are_read_from_the_path_and_bodies() {
        assert_eq!(
            resource_in_path(
                "/api/v1/flex/runs/{run_id}/cancel",
                "/api/v1/flex/runs/run_1/cancel"
            )
            .as_deref(),
            Some("run/run_1")
        );
        assert_eq!(
            resource_in_path("/api/v1/flex/runs", "/api/v1/flex/runs"),
            None
        );
        assert_eq!(
            resource_in_body(br#"{"runId": "run_2", "status": "queued"}"#).as_deref(),
            Some("run/run_2")
        );
        assert_eq!(resource_in_body(b"not json"), None);
    }
}
