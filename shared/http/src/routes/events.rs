//! `GET /runs/{runId}/events`: a run's frames as SSE, replayed after
//! `Last-Event-ID`, then followed (`?dialect=hooks` for hook events).

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::json;

use crate::auth::Tenant;
use crate::error::ApiError;
use crate::sse::sse_response_in;
use crate::state::ApiState;
use crate::state::StreamQuery;
use crate::state::{StreamOf, held_while};

fn last_event_id(headers: &HeaderMap) -> Result<u64, ApiError> {
    match headers
        .get("last-event-id")
        .map(|value| value.to_str().map(str::trim))
    {
        None => Ok(0),
        Some(Ok("")) => Ok(0),
        Some(Ok(text)) => text.parse().map_err(|_| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_last_event_id",
                "Last-Event-ID must be a non-negative integer",
            )
            .with_details(json!({"header": "Last-Event-ID"}))
        }),
        Some(Err(_)) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_last_event_id",
            "Last-Event-ID is not ASCII",
        )),
    }
}

pub(super) async fn run_events(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Path(run_id): Path<String>,
    Query(query): Query<StreamQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let dialect = query.dialect()?;
    let after = last_event_id(&headers)?;
    if state.runs.load(&tenant.0, &run_id).await?.is_none() {
        return Err(ApiError::run_not_found(&run_id));
    }
    let ticket = state.open_stream(&tenant.0, StreamOf::Run(&run_id)).await?;
    let frames = held_while(
        state
            .runs
            .follow(&tenant.0, &run_id, after, state.settings.poll_interval),
        ticket,
    );
    Ok(sse_response_in(
        frames,
        state.settings.heartbeat,
        dialect,
        state.runs.clone(),
        &tenant.0,
    ))
}
