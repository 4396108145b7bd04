//! `GET /runs/{runId}/history` (the checkpoints a fork can start from) and
//! `POST /runs/{runId}/fork` (a new run from one of them, with inputs or
//! node outputs changed; 202 with the new run, 422 naming the path of what
//! is refused, 404 for another tenant's run). A fork with an idempotency
//! key sent again answers 200 with the first fork's run
//! (`deduplicated: true`) and makes no second one.

use axum::Extension;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use baton_core::engine::{ForkChanges, ForkPoint};
use serde_json::json;

use crate::auth::Tenant;
use crate::bodies::{CheckpointView, ForkRequest, RunAccepted, RunHistory, ValidatedJson};
use crate::error::ApiError;
use crate::routes::request_keys::{mark_replayed, request_key};
use crate::state::ApiState;

fn invalid(path: &str, message: impl Into<String>) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_fork_request",
        message,
    )
    .with_details(json!({"path": path}))
}

impl crate::bodies::RequestBody for ForkRequest {
    fn refuse(path: &str, message: String) -> ApiError {
        invalid(path, message)
    }
}

pub(crate) async fn run_history(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Path(run_id): Path<String>,
) -> Result<Json<RunHistory>, ApiError> {
    let checkpoints = state.runs.history(&tenant.0, &run_id).await?;
    Ok(Json(RunHistory {
        run_id,
        checkpoints: checkpoints
            .into_iter()
            .map(|point| CheckpointView {
                event_id: point.event_id,
                kind: point.kind.to_string(),
                plan_version: point.plan_version,
                node_id: point.node_id,
            })
            .collect(),
    }))
}

pub(crate) async fn fork_run(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Path(run_id): Path<String>,
    headers: axum::http::HeaderMap,
    ValidatedJson(request): ValidatedJson<ForkRequest>,
) -> Result<Response, ApiError> {
    let key = request_key(&headers, request.idempotency_key.as_deref())?;
    let fingerprint = serde_json::to_value(&request).unwrap_or_default();
    let point = match (request.at.plan_version, request.at.event_id) {
        (Some(version), None) => ForkPoint::PlanVersion(version),
        (None, Some(event_id)) => ForkPoint::EventId(event_id),
        _ => {
            return Err(invalid(
                "$.at",
                "$.at: give exactly one of `planVersion` and `eventId`",
            ));
        }
    };
    let changes = ForkChanges {
        inputs: request.inputs,
        node_outputs: request.node_outputs,
    };
    let (runs, tenant_id, scope) = (
        state.runs.clone(),
        tenant.0.clone(),
        format!("fork:{run_id}"),
    );
    let forked = state
        .request_keys
        .once(
            &tenant.0,
            &scope,
            key.as_ref(),
            &fingerprint,
            || async move {
                let forked = runs.fork(&tenant_id, &run_id, point, &changes).await?;
                serde_json::to_value(RunAccepted {
                    run_id: forked.run_id,
                    thread_id: forked.thread_id,
                    status: forked.status,
                    deduplicated: false,
                    resumed: false,
                })
                .map_err(|error| {
                    baton_runtime::RuntimeError::Store(baton_runtime::error::StoreError::Corrupt(
                        error.to_string(),
                    ))
                })
            },
        )
        .await
        .map_err(|error| match error {
            baton_runtime::RuntimeError::InvalidInput { path, message } => {
                invalid(&path, format!("{path}: {message}"))
            }
            other => other.into(),
        })?;
    let (status, mut answer) = if forked.replayed() {
        (StatusCode::OK, forked.answer().clone())
    } else {
        (StatusCode::ACCEPTED, forked.answer().clone())
    };
    if forked.replayed() {
        answer["deduplicated"] = json!(true);
    }
    let mut response = (status, Json(answer)).into_response();
    mark_replayed(&mut response, forked.replayed());
    Ok(response)
}
