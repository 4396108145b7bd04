//! The developer sandbox, behind a setting (`BATON_SANDBOX=on`; off, both
//! routes are a 404 `sandbox_off`): `GET /sandbox/metadata` (the
//! registry's capabilities, facets, schemas, policies and example
//! envelopes) and `POST /sandbox/drafts` (one turn of the envelope
//! builder: the conversation so far in, the reply and the drafted envelope
//! out, checked as a submission is and planned as `baton plan` plans).
//! Nothing is stored and no model is called.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use baton_runtime::RuntimeError;
use baton_sandbox::{DraftProblem, DraftRequest, DraftTurn, SandboxMetadata};
use serde_json::json;

use crate::bodies::ValidatedJson;
use crate::error::ApiError;
use crate::state::ApiState;

fn invalid(path: &str, message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_draft", message)
        .with_details(json!({"path": path}))
}

impl crate::bodies::RequestBody for DraftRequest {
    fn refuse(path: &str, message: String) -> ApiError {
        invalid(path, message)
    }
}

fn sandbox_on(state: &ApiState) -> Result<(), ApiError> {
    if state.settings.sandbox {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "sandbox_off",
            "the developer sandbox is off on this server (BATON_SANDBOX=on turns it on)",
        ))
    }
}

pub(super) async fn sandbox_metadata(
    State(state): State<ApiState>,
) -> Result<Json<SandboxMetadata>, ApiError> {
    sandbox_on(&state)?;
    Ok(Json(baton_sandbox::sandbox_metadata(
        state.capabilities.registry(),
    )))
}

pub(super) async fn draft_envelope(
    State(state): State<ApiState>,
    ValidatedJson(request): ValidatedJson<DraftRequest>,
) -> Result<Json<DraftTurn>, ApiError> {
    sandbox_on(&state)?;
    // A submission's checks and `baton plan`'s plan: the run service's preview.
    let check = |envelope: &serde_json::Value| {
        state.runs.preview(envelope).map_err(|error| match error {
            RuntimeError::InvalidInput { path, message } => DraftProblem::new(path, message),
            other => DraftProblem::new("$", other.to_string()),
        })
    };
    baton_sandbox::draft_turn(state.capabilities.registry(), &request, &check)
        .map(Json)
        .map_err(|problem| invalid(&problem.path, problem.message))
}
