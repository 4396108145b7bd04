//! `GET /api/v1/flex/runs?status=&limit=&cursor=&forkedFrom=`: one page
//! of the tenant's runs (or of one run's forks), newest first (`{runs:
//! [{runId, status, objective, createdAt, parentRunId?, forkedFromRunId?}],
//! nextCursor?}`). A bad parameter is a 400
//! naming it; nothing is read for it.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use baton_core::listing::{ListCursor, MAX_RUNS_PER_PAGE, RunListPage, RunListQuery};
use baton_core::run::RunStatus;
use serde_json::{Value, json};

use crate::auth::Tenant;
use crate::error::ApiError;
use crate::state::ApiState;

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
