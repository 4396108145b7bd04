//! The port behind `/api/v1/flex/evaluations`: who runs a dataset's
//! examples for a tenant and keeps the record. `baton serve` and the `api`
//! function plug one in (an axum `Extension` of `Arc<dyn
//! ServedEvaluations>`, from `baton_bootstrap::evaluations`); a router
//! built without one answers 501 `evaluations_not_served`, naming `baton
//! eval --api` as the way to evaluate a deployment from outside.

use std::sync::Arc;

use axum::http::StatusCode;
use baton_evaluation::served::EvaluationRecord;
use serde_json::{Value, json};

use crate::error::ApiError;

/// What refused an evaluation request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvaluationRefusal {
    /// 422 `invalid_evaluation`, naming the JSON path.
    Invalid { path: String, message: String },
    /// 404 `evaluation_not_found` (also another tenant's).
    NotFound,
    /// 409 `evaluation_limit`: the tenant has as many running as allowed.
    Limit { running: usize, limit: usize },
    /// 503 `evaluations_unavailable`: the server could not keep it.
    Unavailable(String),
}

impl From<EvaluationRefusal> for ApiError {
    fn from(refusal: EvaluationRefusal) -> Self {
        match refusal {
            EvaluationRefusal::Invalid { path, message } => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_evaluation",
                format!("{path}: {message}"),
            )
            .with_details(json!({ "path": path })),
            EvaluationRefusal::NotFound => ApiError::new(
                StatusCode::NOT_FOUND,
                "evaluation_not_found",
                "no such evaluation",
            ),
            EvaluationRefusal::Limit { running, limit } => ApiError::new(
                StatusCode::CONFLICT,
                "evaluation_limit",
                format!(
                    "{running} evaluations of this tenant are running; at most {limit} at once"
                ),
            )
            .with_details(json!({ "limit": limit })),
            EvaluationRefusal::Unavailable(reason) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "evaluations_unavailable",
                reason,
            ),
        }
    }
}

/// Runs and keeps a tenant's evaluations.
#[async_trait::async_trait]
pub trait ServedEvaluations: Send + Sync {
    /// Checks the request, keeps the record (`running`) and starts its
    /// examples; answers at once with the record.
    async fn start(
        &self,
        tenant_id: &str,
        request: &Value,
    ) -> Result<EvaluationRecord, EvaluationRefusal>;
    /// The tenant's evaluations, newest first, without their results.
    async fn list(&self, tenant_id: &str) -> Result<Vec<EvaluationRecord>, EvaluationRefusal>;
    /// One evaluation with the results of the examples finished so far.
    async fn get(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
    ) -> Result<EvaluationRecord, EvaluationRefusal>;
}

/// The evaluations a server runs, as the routes find them.
pub type EvaluationsExtension = Arc<dyn ServedEvaluations>;

/// The answer of a server that runs none.
pub(crate) fn not_served() -> ApiError {
    ApiError::new(
        StatusCode::NOT_IMPLEMENTED,
        "evaluations_not_served",
        "this server runs no evaluations (`baton serve` and the Lambda API do); evaluate a deployment from outside with `baton eval DATASET --api URL`",
    )
}
