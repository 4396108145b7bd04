//! Routes under `/api/v1/flex`.

use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use futures_util::StreamExt;
use serde_json::json;

use crate::auth::Tenant;
use crate::bodies::{
    CapabilityList, CapabilityRegistered, CapabilitySummary, RunAccepted, RunStatusAnswer,
    parse_json_body,
};
use crate::error::ApiError;
use crate::snapshot::RunSnapshotResponse;
use crate::sse::sse_response_in;
use crate::state::StreamQuery;
pub use crate::state::{ApiState, HttpSettings, StreamSlots};

/// The whole API.
pub fn router(state: ApiState) -> Router {
    let max_body_bytes = state.settings.max_body_bytes;
    let routes = Router::new()
        .route(
            "/runs",
            post(create_run).get(crate::runs_list_route::list_runs),
        )
        .route("/run.stream", post(create_run_and_stream))
        .route("/runs/{run_id}", get(run_snapshot))
        .route("/runs/{run_id}/events", get(run_events))
        .route("/runs/{run_id}/cancel", post(cancel_run))
        .route(
            "/runs/{run_id}/history",
            get(crate::fork_routes::run_history),
        )
        .route("/runs/{run_id}/fork", post(crate::fork_routes::fork_run))
        .route("/capabilities", get(list_capabilities))
        .route("/run.resume", post(crate::humans::resume_run))
        .route("/hitl/resolve", post(crate::humans::resolve_request))
        .route(
            "/runs/{run_id}/policies/{policy_id}/trigger",
            post(crate::humans::trigger_policy),
        )
        .route("/tasks", get(crate::humans::list_tasks))
        .route("/hitl/requests", get(crate::humans::list_requests))
        .route(
            "/tasks/{task_id}/decline",
            post(crate::humans::decline_task),
        )
        .route("/capabilities/register", post(register_capability))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .with_state(state.clone());
    let judge_routes = Router::new()
        .route("/evaluations", post(crate::judge::create_evaluation))
        .route(
            "/evaluations/{evaluation_id}",
            get(crate::judge::get_evaluation),
        )
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .with_state(state.clone());
    let chat_routes = Router::new()
        .route("/chat", post(crate::chat_route::chat))
        .route("/threads", get(crate::chat_route::list_threads))
        .route("/threads/{thread_id}", get(crate::chat_route::thread))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .with_state(state);
    Router::new()
        .nest("/api/v1/flex", routes)
        .nest("/api/v1/judge", judge_routes)
        .merge(Router::new().nest("/api/v1", chat_routes))
        .merge(crate::viewer::viewer_routes())
        .route(
            "/api/v1/flex/openapi.json",
            get(crate::openapi::serve_document),
        )
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "route_not_found",
                "no such route; the API lives under /api/v1/flex, /api/v1/judge and /api/v1/chat",
            )
        })
        .layer(middleware::map_response(move |response: Response| async move {
            json_payload_too_large(response, max_body_bytes)
        }))
        .layer(axum::extract::DefaultBodyLimit::max(max_body_bytes))
}

/// A body over the limit is refused by axum's body reader in plain text:
/// answer it as every other error, in JSON, naming the limit.
fn json_payload_too_large(response: Response, max_body_bytes: usize) -> Response {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if response.status() != StatusCode::PAYLOAD_TOO_LARGE || is_json {
        return response;
    }
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        format!(
            "the request body is over the limit of {max_body_bytes} bytes (BATON_MAX_BODY_BYTES)"
        ),
    )
    .with_details(json!({"path": "$", "limitBytes": max_body_bytes}))
    .into_response()
}

/// Authenticates before any handler (and so before any store read).
async fn authenticate(State(state): State<ApiState>, mut request: Request, next: Next) -> Response {
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    match state.authenticator.authenticate(authorization) {
        Some(tenant) => {
            request.extensions_mut().insert(tenant);
            next.run(request).await
        }
        None => ApiError::unauthorized().into_response(),
    }
}

async fn create_run(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    headers: header::HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let envelope = parse_json_body(&body)?;
    let submitted = state
        .runs
        .submit_traced(
            &tenant.0,
            &envelope,
            crate::trace_header::caller_trace(&headers),
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

async fn create_run_and_stream(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Query(query): Query<StreamQuery>,
    headers: header::HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let dialect = query.dialect()?;
    let envelope = parse_json_body(&body)?;
    let submitted = state
        .runs
        .submit_traced(
            &tenant.0,
            &envelope,
            crate::trace_header::caller_trace(&headers),
        )
        .await?;
    let frames = state.runs.follow(
        &tenant.0,
        &submitted.run_id,
        0,
        state.settings.poll_interval,
    );
    Ok(sse_response_in(
        frames,
        state.settings.heartbeat,
        dialect,
        state.runs.clone(),
        &tenant.0,
    ))
}

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

async fn run_events(
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
    let limit = state.settings.max_streams_per_run;
    let slot = state
        .streams
        .take(&tenant.0, &run_id, limit)
        .map_err(|open| ApiError::too_many_streams(&run_id, open, limit))?;
    // The slot lives as long as the stream: given back when it ends or the
    // client goes away.
    let frames = state
        .runs
        .follow(&tenant.0, &run_id, after, state.settings.poll_interval)
        .map(move |frame| {
            let _held = &slot;
            frame
        });
    Ok(sse_response_in(
        frames,
        state.settings.heartbeat,
        dialect,
        state.runs.clone(),
        &tenant.0,
    ))
}

async fn cancel_run(
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

async fn run_snapshot(
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

/// The registry files' capabilities and the tenant's registrations, with
/// their status (the planner uses only `active` ones).
async fn list_capabilities(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
) -> Result<Json<CapabilityList>, ApiError> {
    let listing = state.capabilities.list(&tenant.0).await?;
    let registry = &listing.registry;
    let mut capabilities: Vec<CapabilitySummary> = registry
        .capabilities()
        .map(CapabilitySummary::of_registry)
        .collect();
    capabilities.extend(
        listing
            .registrations
            .iter()
            .map(|(record, status)| CapabilitySummary::of_registration(record, *status)),
    );
    Ok(Json(CapabilityList {
        capabilities,
        facet_count: registry.facets.len(),
    }))
}

/// `POST /capabilities/register`: an agent advertises (or refreshes, as a
/// heartbeat) a capability for the caller's tenant.
async fn register_capability(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    body: Bytes,
) -> Result<Json<CapabilityRegistered>, ApiError> {
    let payload = parse_json_body(&body)?;
    let registered = state.capabilities.register(&tenant.0, &payload).await?;
    Ok(Json(CapabilityRegistered {
        summary: CapabilitySummary::of_registration(&registered.record, registered.status),
        input_schema: registered.input_schema.as_ref().clone(),
        output_schema: registered.output_schema.as_ref().clone(),
    }))
}
