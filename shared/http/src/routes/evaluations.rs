//! Routes under `/api/v1/judge`: judge panel evaluations. An evaluation is a
//! run (`RunService::submit_evaluation`), so it streams and is stored like
//! one; these routes speak the panel's own shapes.

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use baton_judge::request::PanelRequest;
use serde_json::json;

use crate::auth::Tenant;
use crate::bodies::ValidatedJson;
use crate::error::ApiError;
use crate::sse::sse_response;
use crate::state::ApiState;
use crate::state::{StreamOf, held_while};

fn panels_not_configured() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "judge_panels_not_configured",
        "the registry has no panel capability that takes a whole panel request (`panel.requestFacet`)",
    )
}

/// `POST /evaluations`: the panel request in, the evaluation's frames out (SSE).
pub(crate) async fn create_evaluation(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    ValidatedJson(body): ValidatedJson<serde_json::Value>,
) -> Result<Response, ApiError> {
    let request = PanelRequest::parse(&body).map_err(|error| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_panel_request",
            error.to_string(),
        )
        .with_details(json!({"path": error.path}))
    })?;
    let entry = state.runs.panel_entry().ok_or_else(panels_not_configured)?;
    let ticket = state
        .open_stream(&tenant.0, StreamOf::RunNotStartedYet)
        .await?;
    let submitted = state
        .runs
        .submit_evaluation(&tenant.0, &entry, &request, &body)
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
    let mut response = sse_response(frames, state.settings.heartbeat);
    if let Ok(location) =
        HeaderValue::from_str(&format!("/api/v1/judge/evaluations/{}", submitted.run_id))
    {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// `GET /evaluations/{id}`: the `OrchestratorOutput` once the panel
/// concluded; 202 with the status while it works; 409 when it failed.
pub(crate) async fn get_evaluation(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Path(evaluation_id): Path<String>,
) -> Result<Response, ApiError> {
    let not_found = || {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "evaluation_not_found",
            format!("no evaluation `{evaluation_id}`"),
        )
    };
    let view = state
        .runs
        .evaluation(&tenant.0, &evaluation_id)
        .await?
        .ok_or_else(not_found)?;
    if let Some(verdict) = view.verdict {
        return Ok((StatusCode::OK, Json(verdict)).into_response());
    }
    if let Some(failure) = view.failure {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "evaluation_failed",
            format!(
                "the evaluation ended without a verdict: {}",
                failure.message
            ),
        )
        .with_details(json!({"status": view.status.as_str(), "code": failure.code})));
    }
    Ok((
        StatusCode::ACCEPTED,
        Json(crate::bodies::EvaluationPending {
            evaluation_id,
            status: view.status,
        }),
    )
        .into_response())
}
