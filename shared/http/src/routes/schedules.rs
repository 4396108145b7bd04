//! Schedules: `POST /schedules` (201 with the schedule; 422 naming the JSON
//! path of a wrong expression, time zone or envelope; 409 past the tenant's
//! limit), `GET /schedules`, `GET` and `DELETE /schedules/{scheduleId}`,
//! and `POST /schedules/{scheduleId}/pause` and `/resume`. A tenant sees
//! only its own (another's is a 404).

use axum::Extension;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use baton_core::records::schedules::Schedule;

use crate::auth::Tenant;
use crate::bodies::{ScheduleList, ValidatedJson};
use crate::error::ApiError;
use crate::state::ApiState;

pub(super) async fn create_schedule(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    ValidatedJson(request): ValidatedJson<serde_json::Value>,
) -> Result<Response, ApiError> {
    let schedule = state.schedules.create(&tenant.0, &request).await?;
    Ok((StatusCode::CREATED, Json(schedule)).into_response())
}

pub(super) async fn list_schedules(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
) -> Result<Json<ScheduleList>, ApiError> {
    let schedules = state.schedules.list(&tenant.0).await?;
    Ok(Json(ScheduleList { schedules }))
}

pub(super) async fn get_schedule(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Path(schedule_id): Path<String>,
) -> Result<Json<Schedule>, ApiError> {
    Ok(Json(state.schedules.get(&tenant.0, &schedule_id).await?))
}

pub(super) async fn delete_schedule(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Path(schedule_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.schedules.delete(&tenant.0, &schedule_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn pause_schedule(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Path(schedule_id): Path<String>,
) -> Result<Json<Schedule>, ApiError> {
    Ok(Json(state.schedules.pause(&tenant.0, &schedule_id).await?))
}

pub(super) async fn resume_schedule(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Path(schedule_id): Path<String>,
) -> Result<Json<Schedule>, ApiError> {
    Ok(Json(state.schedules.resume(&tenant.0, &schedule_id).await?))
}
