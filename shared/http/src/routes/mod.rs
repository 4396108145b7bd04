//! The API's router: one file per resource (`runs`, `events`,
//! `capabilities`, `people`, `forks`, `evaluations` (judge panels), `dataset_evaluations`
//! (datasets run by `baton serve`), `chat`, `schedules`, `sandbox` (the
//! developer sandbox, behind `BATON_SANDBOX`)), each route
//! behind the bearer-token middleware (`authenticate`), the MCP server at
//! `/mcp` behind the same, the A2A agent (`/a2a` behind the same, its card
//! public at `/.well-known/agent-card.json`), the OpenAPI document, the viewer, and a JSON 404
//! and 413 for everything else.

mod audit;
mod capabilities;
mod chat;
mod dataset_evaluations;
pub mod evaluation_port;
mod evaluations;
mod events;
mod forks;
pub(crate) mod memory;
pub mod openapi;
mod people;
mod request_keys;
mod runs;
mod sandbox;
mod schedules;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use crate::auth::{Scope, Tenant};
use crate::error::ApiError;
pub use crate::state::{ApiState, HttpSettings};

/// The whole API: every operation of the table (`openapi::operations`)
/// routed to its handler, the agent protocols' endpoints, the viewer, and
/// a JSON 404 and 413 for everything else. A route is added in the table,
/// never here (a test refuses one that is not).
pub fn router(state: ApiState) -> Router {
    let max_body_bytes = state.settings.max_body_bytes;
    let mut authenticated = Router::new();
    let mut open = Router::new();
    for operation in openapi::operations() {
        match operation.served {
            openapi::Served::Authenticated(handler) => {
                authenticated = authenticated.route(operation.path, handler());
            }
            openapi::Served::Open(handler) => open = open.route(operation.path, handler()),
            openapi::Served::ByViewer => {}
        }
    }
    let routes = authenticated
        .layer(middleware::from_fn_with_state(
            state.clone(),
            audit::record_changes,
        ))
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
                .layer(middleware::from_fn_with_state(
                    state.clone(),
                    audit::record_changes,
                ))
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
    app.merge(routes)
        .merge(open.with_state(state.clone()))
        .merge(crate::viewer::viewer_routes(&state.settings.viewer_api_origins))
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "route_not_found",
                "no such route; the API lives under /api/v1/flex, /api/v1/judge and /api/v1/chat",
            )
        })
        .layer(middleware::from_fn_with_state(
            state.clone(),
            refuse_cross_site,
        ))
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

/// Refuses what a page on another site may not do (`auth::cross_site`),
/// before any credential is read.
async fn refuse_cross_site(
    State(state): State<ApiState>,
    request: Request,
    next: Next,
) -> Response {
    let body_follows = !axum::body::HttpBody::is_end_stream(request.body());
    match crate::auth::cross_site::refusal(
        request.headers(),
        request.method(),
        body_follows,
        state.authenticator.is_anonymous(),
        &state.settings.trusted_origins,
    ) {
        Some(error) => error.into_response(),
        None => next.run(request).await,
    }
}

/// Routes whose scope depends on the method inside the body (A2A's and
/// MCP's JSON-RPC): they check each method's scope themselves, with the
/// principal this middleware puts in the request.
const PER_METHOD_ROUTES: &[&str] = &["/a2a", "/mcp"];

/// The scope of every operation by (method, OpenAPI path), built once from
/// the operations table.
fn scope_table() -> &'static std::collections::HashMap<(String, String), Scope> {
    static TABLE: std::sync::OnceLock<std::collections::HashMap<(String, String), Scope>> =
        std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        openapi::operations()
            .into_iter()
            .filter_map(|operation| {
                Some((
                    (operation.method.to_string(), operation.path.to_string()),
                    operation.scope?,
                ))
            })
            .collect()
    })
}

/// The scope a request to `matched_path` needs: the table's, nothing extra
/// on the per-method routes, else `admin` (deny by default).
fn required_scope(method: &axum::http::Method, matched_path: Option<&str>) -> Option<Scope> {
    let path = matched_path.unwrap_or_default();
    if PER_METHOD_ROUTES.contains(&path) {
        return None;
    }
    let key = (method.as_str().to_ascii_lowercase(), path.to_string());
    Some(scope_table().get(&key).copied().unwrap_or(Scope::Admin))
}

/// Authenticates before any handler (and so before any store read), then
/// checks the route's scope: a 401 naming why the credential was refused,
/// a 403 naming the missing scope.
async fn authenticate(State(state): State<ApiState>, mut request: Request, next: Next) -> Response {
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    let principal = match state.authenticator.authenticate(authorization).await {
        Ok(principal) => principal,
        Err(refusal) => {
            return ApiError::unauthorized()
                .with_message(refusal.to_string())
                .with_details(json!({"reason": refusal.reason()}))
                .into_response();
        }
    };
    let matched_path = request
        .extensions()
        .get::<MatchedPath>()
        .map(|matched| matched.as_str().to_string());
    if let Some(scope) = required_scope(request.method(), matched_path.as_deref())
        && let Err(refused) = principal.require(scope)
    {
        // A change the caller may not make is on the trail too.
        let entry = audit::refused_change(
            &state,
            &principal,
            &request,
            matched_path.as_deref(),
            &refused,
        );
        drop(request);
        if let Some(entry) = entry {
            audit::keep(&state, entry).await;
        }
        return refused.into_response();
    }
    request
        .extensions_mut()
        .insert(Tenant(principal.tenant.clone()));
    request.extensions_mut().insert(principal);
    next.run(request).await
}
