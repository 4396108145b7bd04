//! `GET /capabilities` (the tenant's capability snapshot; `?q=` searches
//! it, the same search as memory's), `POST
//! /capabilities/register` (a registration, validated, stored for the
//! tenant), `PATCH /capabilities/{capabilityId}` (a heartbeat) and `DELETE
//! /capabilities/{capabilityId}` (deregistration).

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::{Extension, Json};

use crate::auth::Tenant;
use crate::bodies::{CapabilityList, CapabilityRegistered, CapabilitySummary, ValidatedJson};
use crate::error::ApiError;
use crate::state::ApiState;

/// Characters of a search's `q` at most.
const MAX_QUERY_CHARS: usize = 1_000;

fn bad_parameter(parameter: &str, message: String) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::BAD_REQUEST,
        "invalid_parameter",
        message,
    )
    .with_details(serde_json::json!({"parameter": parameter}))
}

/// The registry files' capabilities and the tenant's registrations, with
/// their status (the planner uses only `active` ones); with `q`, those the
/// search finds, best first (`limit`, default 20).
pub(super) async fn list_capabilities(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Query(parameters): Query<HashMap<String, String>>,
) -> Result<Json<CapabilityList>, ApiError> {
    if let Some(unknown) = parameters
        .keys()
        .find(|name| !["q", "limit"].contains(&name.as_str()))
    {
        return Err(bad_parameter(
            unknown,
            format!("`{unknown}` is not a parameter of this list (q, limit)"),
        ));
    }
    let listing = state.capabilities.list(&tenant.0).await?;
    let Some(query) = parameters.get("q") else {
        if parameters.contains_key("limit") {
            return Err(bad_parameter("limit", "`limit` goes with `q`".into()));
        }
        return Ok(Json(CapabilityList::of(&listing)));
    };
    let characters = query.chars().count();
    if query.trim().is_empty() || characters > MAX_QUERY_CHARS {
        return Err(bad_parameter(
            "q",
            format!("`q` must be 1 to {MAX_QUERY_CHARS} characters, not blank"),
        ));
    }
    let limit = match parameters.get("limit") {
        None => 20,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|limit| (1..=100).contains(limit))
            .ok_or_else(|| {
                bad_parameter(
                    "limit",
                    format!("limit `{text}` must be a whole number from 1 to 100"),
                )
            })?,
    };
    let answer = state.capabilities.search(&listing, query, limit).await;
    Ok(Json(CapabilityList::found(&listing, answer)))
}

/// `POST /capabilities/register`: an agent advertises (or refreshes, as a
/// heartbeat) a capability for the caller's tenant.
pub(super) async fn register_capability(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    ValidatedJson(payload): ValidatedJson<serde_json::Value>,
) -> Result<Json<CapabilityRegistered>, ApiError> {
    let registered = state.capabilities.register(&tenant.0, &payload).await?;
    Ok(Json(CapabilityRegistered {
        summary: CapabilitySummary::of_registration(&registered.record, registered.status),
        input_schema: registered.input_schema.as_ref().clone(),
        output_schema: registered.output_schema.as_ref().clone(),
    }))
}

/// `PATCH /capabilities/{capabilityId}`: a registered capability's
/// heartbeat (no body): it is seen now, active again if it had lapsed.
pub(super) async fn renew_capability(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    axum::extract::Path(capability_id): axum::extract::Path<String>,
) -> Result<Json<CapabilitySummary>, ApiError> {
    let (record, status) = state
        .capabilities
        .heartbeat(&tenant.0, &capability_id)
        .await?;
    Ok(Json(CapabilitySummary::of_registration(&record, status)))
}

/// `DELETE /capabilities/{capabilityId}`: the registration is removed; the
/// planner stops using it, and a node of it not yet called is escalated.
pub(super) async fn deregister_capability(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    axum::extract::Path(capability_id): axum::extract::Path<String>,
) -> Result<axum::http::StatusCode, ApiError> {
    state
        .capabilities
        .deregister(&tenant.0, &capability_id)
        .await?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}
