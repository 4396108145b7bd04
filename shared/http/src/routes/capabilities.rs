//! `GET /capabilities` (the tenant's capability snapshot) and `POST
//! /capabilities/register` (a registration, validated, stored for the
//! tenant).

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
