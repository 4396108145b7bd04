//! Served evaluations: `POST /evaluations` (202 with the record, its
//! examples running; 422 naming the JSON path of a wrong dataset, template
//! or panel; 409 past the tenant's running evaluations), `GET /evaluations`
//! (newest first) and `GET /evaluations/{evaluationId}` (with the results
//! so far). A tenant sees only its own. Distinct from `/api/v1/judge/
//! evaluations` (one judge panel on one content).

use axum::Extension;
use axum::Json;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use baton_evaluation::served::{EvaluationList, EvaluationRecord};

use super::evaluation_port::{EvaluationsExtension, not_served};
use crate::auth::Tenant;
use crate::bodies::ValidatedJson;
use crate::error::ApiError;

fn served(
    evaluations: Option<Extension<EvaluationsExtension>>,
) -> Result<EvaluationsExtension, ApiError> {
    evaluations
        .map(|Extension(evaluations)| evaluations)
        .ok_or_else(not_served)
}

pub(super) async fn create_evaluation(
    Extension(tenant): Extension<Tenant>,
    evaluations: Option<Extension<EvaluationsExtension>>,
    ValidatedJson(request): ValidatedJson<serde_json::Value>,
) -> Result<Response, ApiError> {
    let evaluations = served(evaluations)?;
    let record = evaluations.start(&tenant.0, &request).await?;
    Ok((StatusCode::ACCEPTED, Json(record)).into_response())
}

pub(super) async fn list_evaluations(
    Extension(tenant): Extension<Tenant>,
    evaluations: Option<Extension<EvaluationsExtension>>,
) -> Result<Json<EvaluationList>, ApiError> {
    let evaluations = served(evaluations)?.list(&tenant.0).await?;
    Ok(Json(EvaluationList { evaluations }))
}

pub(super) async fn get_evaluation(
    Extension(tenant): Extension<Tenant>,
    evaluations: Option<Extension<EvaluationsExtension>>,
    Path(evaluation_id): Path<String>,
) -> Result<Json<EvaluationRecord>, ApiError> {
    Ok(Json(
        served(evaluations)?.get(&tenant.0, &evaluation_id).await?,
    ))
}
