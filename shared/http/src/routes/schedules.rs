//! Schedules: `POST /schedules` (201 with the schedule; 422 naming the JSON
//! path of a wrong expression, time zone or envelope; 409 past the tenant's
//! limit), `GET /schedules`, `GET` and `DELETE /schedules/{scheduleId}`,
//! and `POST /schedules/{scheduleId}/pause` and `/resume`. A tenant sees
//! only its own (another's is a 404). A creation with an idempotency key
//! sent again answers 200 with the schedule the first made.

use axum::Extension;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use baton_core::records::schedules::Schedule;

use crate::auth::Tenant;
use crate::bodies::{ScheduleList, ValidatedJson};
use crate::error::ApiError;
use crate::routes::request_keys::{mark_replayed, request_key};
use crate::state::ApiState;

pub(super) async fn create_schedule(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    headers: axum::http::HeaderMap,
    ValidatedJson(mut request): ValidatedJson<serde_json::Value>,
) -> Result<Response, ApiError> {
    let body_key = match request
        .as_object_mut()
        .and_then(|body| body.remove("idempotencyKey"))
    {
        None => None,
        Some(serde_json::Value::String(key)) => Some(key),
        Some(_) => {
            return Err(ApiError::from(
                baton_runtime::RuntimeError::InvalidSchedule {
                    path: "$.idempotencyKey".into(),
                    message: "must be a string".into(),
                },
            ));
        }
    };
    let key = request_key(&headers, body_key.as_deref())?;
    let created = state
        .request_keys
        .once(&tenant.0, "schedule", key.as_ref(), &request, || async {
            let schedule = state.schedules.create(&tenant.0, &request).await?;
            serde_json::to_value(schedule).map_err(|error| {
                baton_runtime::RuntimeError::Store(baton_runtime::error::StoreError::Corrupt(
                    error.to_string(),
                ))
            })
        })
        .await?;
    let status = if created.replayed() {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    let mut response = (status, Json(created.answer().clone())).into_response();
    mark_replayed(&mut response, created.replayed());
    Ok(response)
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
