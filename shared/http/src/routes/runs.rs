//! The runs resource under `/api/v1/flex`: `POST /runs` (an envelope in,
//! 202 with the run), `POST /run.stream` (the same, answered with the run's
//! SSE stream), `GET /runs/{runId}` (its snapshot), `POST
//! /runs/{runId}/cancel`, and `GET /runs?status=&limit=&cursor=&forkedFrom=`:
//! one page of the tenant's runs (or of one run's forks), newest first
//! (`{runs: [{runId, status, objective, createdAt, parentRunId?,
//! forkedFromRunId?}], nextCursor?}`). A bad parameter is a 400 naming it;
//! nothing is read for it.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use baton_core::state::listing::{ListCursor, MAX_RUNS_PER_PAGE, RunListPage, RunListQuery};
use baton_core::state::run::RunStatus;
use serde_json::{Value, json};

use crate::auth::{Principal, Tenant};
use crate::bodies::{RunAccepted, RunStatusAnswer, ValidatedJson};
use crate::error::ApiError;
use crate::snapshot::RunSnapshotResponse;
use crate::sse::sse_response_in;
use crate::state::{ApiState, StreamQuery};
use crate::state::{StreamOf, held_while};

/// Runs per page when `limit` is not given.
pub const DEFAULT_RUNS_PER_PAGE: usize = 20;

fn invalid(parameter: &str, message: String) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", message)
        .with_details(json!({"parameter": parameter}))
}

/// The query the parameters ask for, or the 400 naming the first bad one.
pub fn run_list_query(parameters: &HashMap<String, String>) -> Result<RunListQuery, ApiError> {
    if let Some(unknown) = parameters
        .keys()
        .find(|name| !["status", "limit", "cursor", "forkedFrom"].contains(&name.as_str()))
    {
        return Err(invalid(
            unknown,
            format!(
                "unknown parameter `{unknown}`; the list takes status, limit, cursor and forkedFrom"
            ),
        ));
    }
    let status = match parameters.get("status") {
        None => None,
        Some(text) => Some(
            serde_json::from_value::<RunStatus>(Value::String(text.clone())).map_err(|_| {
                invalid(
                    "status",
                    format!("status `{text}` is not a run status (queued, running, awaiting_human, awaiting_hitl, paused, completed, failed, plan_rejected, cancelled)"),
                )
            })?,
        ),
    };
    let limit = match parameters.get("limit") {
        None => DEFAULT_RUNS_PER_PAGE,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|limit| (1..=MAX_RUNS_PER_PAGE).contains(limit))
            .ok_or_else(|| {
                invalid(
                    "limit",
                    format!("limit `{text}` must be a whole number from 1 to {MAX_RUNS_PER_PAGE}"),
                )
            })?,
    };
    let cursor = match parameters.get("cursor") {
        None => None,
        Some(text) => Some(ListCursor::parse(text).ok_or_else(|| {
            invalid(
                "cursor",
                format!("cursor `{text}` is not one this list handed out (pass a page's nextCursor as it is)"),
            )
        })?),
    };
    let forked_from = match parameters.get("forkedFrom") {
        Some(run_id) if run_id.trim().is_empty() => {
            return Err(invalid(
                "forkedFrom",
                "forkedFrom must name a run id".to_string(),
            ));
        }
        other => other.cloned(),
    };
    Ok(RunListQuery {
        status,
        limit,
        cursor,
        forked_from,
    })
}

pub(crate) async fn list_runs(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Query(parameters): Query<HashMap<String, String>>,
) -> Result<Json<RunListPage>, ApiError> {
    let query = run_list_query(&parameters)?;
    Ok(Json(state.runs.list(&tenant.0, &query).await?))
}

pub(super) async fn create_run(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Extension(principal): Extension<Principal>,
    headers: header::HeaderMap,
    ValidatedJson(envelope): ValidatedJson<Value>,
) -> Result<Response, ApiError> {
    let submitted = state
        .runs
        .submit_traced(
            &tenant.0,
            &envelope,
            crate::trace_header::submitter_of(&headers, &principal)?,
        )
        .await?;
    let status = if submitted.deduplicated || submitted.resumed {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok((
        status,
        Json(RunAccepted {
            run_id: submitted.run_id,
            thread_id: submitted.thread_id,
            status: submitted.status,
            deduplicated: submitted.deduplicated,
            resumed: submitted.resumed,
        }),
    )
        .into_response())
}

pub(super) async fn create_run_and_stream(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Extension(principal): Extension<Principal>,
    Query(query): Query<StreamQuery>,
    headers: header::HeaderMap,
    ValidatedJson(envelope): ValidatedJson<Value>,
) -> Result<Response, ApiError> {
    let dialect = query.dialect()?;
    let ticket = state
        .open_stream(&tenant.0, StreamOf::RunNotStartedYet)
        .await?;
    let submitted = state
        .runs
        .submit_traced(
            &tenant.0,
            &envelope,
            crate::trace_header::submitter_of(&headers, &principal)?,
        )
        .await?;
    let frames = held_while(
        state.runs.follow(
            &tenant.0,
            &submitted.run_id,
            0,
            state.settings.poll_interval,
        ),
        ticket,
    );
    let mut response = sse_response_in(
        frames,
        state.settings.heartbeat,
        dialect,
        state.runs.clone(),
        &tenant.0,
    );
    // Where the run is, before its first frame is read (as chat answers).
    if let Ok(location) =
        header::HeaderValue::from_str(&format!("/api/v1/flex/runs/{}", submitted.run_id))
    {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

pub(super) async fn cancel_run(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Path(run_id): Path<String>,
) -> Result<Response, ApiError> {
    match state
        .runs
        .cancel(&tenant.0, &run_id, "cancelled by the caller")
        .await?
    {
        None => Err(ApiError::run_not_found(&run_id)),
        Some(status) => Ok((
            StatusCode::ACCEPTED,
            Json(RunStatusAnswer { run_id, status }),
        )
            .into_response()),
    }
}

pub(super) async fn run_snapshot(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Path(run_id): Path<String>,
) -> Result<Json<RunSnapshotResponse>, ApiError> {
    let Some(stored) = state.runs.load(&tenant.0, &run_id).await? else {
        return Err(ApiError::run_not_found(&run_id));
    };
    let superseded = state.runs.superseded_plans(&tenant.0, &run_id).await?;
    Ok(Json(RunSnapshotResponse::of(
        &stored.state,
        stored.version,
        &superseded,
    )))
}
