//! The API's router: one file per resource (`runs`, `events`,
//! `capabilities`, `people`, `forks`, `evaluations` (judge panels), `dataset_evaluations`
//! (datasets run by `baton serve`), `chat`, `schedules`), each route
//! behind the bearer-token middleware (`authenticate`), the MCP server at
//! `/mcp` behind the same, the A2A agent (`/a2a` behind the same, its card
//! public at `/.well-known/agent-card.json`), the OpenAPI document, the viewer, and a JSON 404
//! and 413 for everything else.

mod capabilities;
mod chat;
mod dataset_evaluations;
pub mod evaluation_port;
mod evaluations;
mod events;
mod forks;
mod people;
mod runs;
mod schedules;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use crate::error::ApiError;
pub use crate::state::{ApiState, HttpSettings};

/// The whole API.
pub fn router(state: ApiState) -> Router {
    let max_body_bytes = state.settings.max_body_bytes;
    let routes = Router::new()
        .route("/runs", post(runs::create_run).get(runs::list_runs))
        .route("/run.stream", post(runs::create_run_and_stream))
        .route("/runs/{run_id}", get(runs::run_snapshot))
        .route("/runs/{run_id}/events", get(events::run_events))
        .route("/runs/{run_id}/cancel", post(runs::cancel_run))
        .route("/runs/{run_id}/history", get(forks::run_history))
        .route("/runs/{run_id}/fork", post(forks::fork_run))
        .route("/capabilities", get(capabilities::list_capabilities))
        .route("/run.resume", post(people::resume_run))
        .route("/hitl/resolve", post(people::resolve_request))
        .route(
            "/runs/{run_id}/policies/{policy_id}/trigger",
            post(people::trigger_policy),
        )
        .route("/tasks", get(people::list_tasks))
        .route("/hitl/requests", get(people::list_requests))
        .route("/tasks/{task_id}/decline", post(people::decline_task))
        .route(
            "/capabilities/register",
            post(capabilities::register_capability),
        )
        .route(
            "/schedules",
            post(schedules::create_schedule).get(schedules::list_schedules),
        )
        .route(
            "/schedules/{schedule_id}",
            get(schedules::get_schedule).delete(schedules::delete_schedule),
        )
        .route(
            "/schedules/{schedule_id}/pause",
            post(schedules::pause_schedule),
        )
        .route(
            "/schedules/{schedule_id}/resume",
            post(schedules::resume_schedule),
        )
        .route(
            "/evaluations",
            post(dataset_evaluations::create_evaluation).get(dataset_evaluations::list_evaluations),
        )
        .route(
            "/evaluations/{evaluation_id}",
            get(dataset_evaluations::get_evaluation),
        )
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .with_state(state.clone());
    let judge_routes = Router::new()
        .route("/evaluations", post(evaluations::create_evaluation))
        .route(
            "/evaluations/{evaluation_id}",
            get(evaluations::get_evaluation),
        )
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .with_state(state.clone());
    let chat_routes = Router::new()
        .route("/chat", post(chat::chat))
        .route("/threads", get(chat::list_threads))
        .route("/threads/{thread_id}", get(chat::thread))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .with_state(state.clone());
    // The A2A agent: its card (public) and its JSON-RPC endpoint (tokens).
    let app = Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(crate::protocols::a2a::agent_card).with_state(state.clone()),
        )
        .merge(
            Router::new()
                .route("/a2a", post(crate::protocols::a2a::json_rpc))
                .layer(middleware::from_fn_with_state(state.clone(), authenticate))
                .with_state(state.clone()),
        );
    // The MCP server (Streamable HTTP) at /mcp, behind the same tokens.
    #[cfg(feature = "mcp-server")]
    let app = app.merge(
        Router::new()
            .route_service("/mcp", crate::protocols::mcp::mcp_service(state.clone()))
            .layer(middleware::from_fn_with_state(state.clone(), authenticate)),
    );
    app.nest("/api/v1/flex", routes)
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
