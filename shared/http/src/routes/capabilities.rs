//! `GET /capabilities` (the tenant's capability snapshot), `POST
//! /capabilities/register` (a registration, validated, stored for the
//! tenant), `PATCH /capabilities/{capabilityId}` (a heartbeat) and `DELETE
//! /capabilities/{capabilityId}` (deregistration).

use axum::extract::State;
use axum::{Extension, Json};

use crate::auth::Tenant;
use crate::bodies::{CapabilityList, CapabilityRegistered, CapabilitySummary, ValidatedJson};
use crate::error::ApiError;
use crate::state::ApiState;

/// The registry files' capabilities and the tenant's registrations, with
/// their status (the planner uses only `active` ones).
pub(super) async fn list_capabilities(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
) -> Result<Json<CapabilityList>, ApiError> {
    let listing = state.capabilities.list(&tenant.0).await?;
    Ok(Json(CapabilityList::of(&listing)))
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
