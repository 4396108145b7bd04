//! A tenant's memory across runs (`/api/v1/flex/memory`): `PUT
//! /memory/items` keeps an item (the caller's user as its provenance),
//! `GET /memory/items?prefix=&limit=` lists the items of a namespace and
//! those under it, `GET` and `DELETE /memory/item?namespace=&key=` read and
//! delete one, `POST /memory/search` ranks namespaces' items for a query
//! (BM25, fused with embeddings where the deployment has a model for them),
//! and `POST /memory/forget` deletes every item under a prefix or every
//! item one person wrote, in one audited call. A namespace in a query
//! string is its JSON array (`["client","tone"]`, URL-encoded). A wrong
//! body or parameter is a 422 or 400 naming it; a namespace at its cap
//! refuses a new key with 409 `memory_namespace_full`.

use std::collections::HashMap;

use axum::Extension;
use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use baton_memory::item::{MemoryItem, Provenance};
use baton_memory::search::RankedItem;
use baton_runtime::services::memory::{MemoryError, MemoryWrite};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::auth::{Principal, Tenant};
use crate::bodies::{RequestBody, ValidatedJson};
use crate::error::ApiError;
use crate::state::ApiState;

/// `PUT /memory/items`: an item to keep.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryItemWrite {
    pub namespace: Vec<String>,
    pub key: String,
    pub value: Value,
    /// What search reads (default: the value's text).
    #[serde(default)]
    pub text: Option<String>,
    /// RFC 3339, in the future.
    #[serde(default)]
    pub expires_at: Option<String>,
}

/// `POST /memory/search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemorySearchRequest {
    /// 1 to 10 namespaces, each read whole (up to its cap).
    pub namespaces: Vec<Vec<String>>,
    pub query: String,
    /// 1 to 50 (default 5).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// `POST /memory/forget`: exactly one of `prefix` and `person`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryForgetRequest {
    /// Every item of this namespace and those under it (`[]`: all).
    #[serde(default)]
    pub prefix: Option<Vec<String>>,
    /// Every item this person wrote.
    #[serde(default)]
    pub person: Option<String>,
}

/// The items of a list.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryItemList {
    pub items: Vec<MemoryItem>,
}

/// A search's items, best first.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemorySearchAnswer {
    pub found: Vec<RankedItem>,
}

/// What a forget deleted.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryForgotten {
    pub deleted: usize,
}

/// A body that does not fit: 422 `invalid_memory` naming its JSON path.
fn refused_body(path: &str, message: String) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_memory",
        format!("{path}: {message}"),
    )
    .with_details(json!({ "path": path }))
}

impl RequestBody for MemoryItemWrite {
    fn refuse(path: &str, message: String) -> ApiError {
        refused_body(path, message)
    }
}

impl RequestBody for MemorySearchRequest {
    fn refuse(path: &str, message: String) -> ApiError {
        refused_body(path, message)
    }
}

impl RequestBody for MemoryForgetRequest {
    fn refuse(path: &str, message: String) -> ApiError {
        refused_body(path, message)
    }
}

impl From<MemoryError> for ApiError {
    fn from(error: MemoryError) -> Self {
        match error {
            MemoryError::Invalid { path, message } => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_memory",
                format!("{path}: {message}"),
            )
            .with_details(json!({ "path": path })),
            MemoryError::NamespaceFull { cap } => ApiError::new(
                StatusCode::CONFLICT,
                "memory_namespace_full",
                format!("the namespace holds {cap} items, its cap (BATON_MEMORY_NAMESPACE_CAP); delete some or use another namespace"),
            )
            .with_details(json!({ "cap": cap })),
            MemoryError::Unavailable(reason) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "memory_unavailable",
                reason,
            ),
        }
    }
}

fn bad_parameter(parameter: &str, message: String) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", message)
        .with_details(json!({ "parameter": parameter }))
}

/// A namespace given in a query string as its JSON array.
fn namespace_parameter(
    parameters: &HashMap<String, String>,
    name: &str,
    required: bool,
) -> Result<Vec<String>, ApiError> {
    match parameters.get(name) {
        None if required => Err(bad_parameter(
            name,
            format!("`{name}` is required: the namespace as a JSON array of strings"),
        )),
        None => Ok(Vec::new()),
        Some(text) => serde_json::from_str::<Vec<String>>(text).map_err(|_| {
            bad_parameter(
                name,
                format!("`{name}` must be a JSON array of strings, e.g. [\"client\",\"tone\"]"),
            )
        }),
    }
}

fn only(parameters: &HashMap<String, String>, known: &[&str]) -> Result<(), ApiError> {
    match parameters
        .keys()
        .find(|name| !known.contains(&name.as_str()))
    {
        Some(unknown) => Err(bad_parameter(
            unknown,
            format!(
                "unknown parameter `{unknown}`; this takes {}",
                known.join(", ")
            ),
        )),
        None => Ok(()),
    }
}

/// An item as the API answers it (its embedding left out).
fn shown(mut item: MemoryItem) -> MemoryItem {
    item.embedding = None;
    item
}

pub(super) async fn put_item(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    principal: Option<Extension<Principal>>,
    ValidatedJson(body): ValidatedJson<MemoryItemWrite>,
) -> Result<Json<MemoryItem>, ApiError> {
    let person = principal.and_then(|Extension(principal)| principal.user);
    let item = state
        .memory
        .put(
            &tenant.0,
            MemoryWrite {
                namespace: body.namespace,
                key: body.key,
                value: body.value,
                text: body.text,
                expires_at: body.expires_at,
                provenance: Provenance {
                    person,
                    ..Provenance::default()
                },
            },
        )
        .await?;
    Ok(Json(shown(item)))
}

pub(super) async fn list_items(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Query(parameters): Query<HashMap<String, String>>,
) -> Result<Json<MemoryItemList>, ApiError> {
    only(&parameters, &["prefix", "limit"])?;
    let prefix = namespace_parameter(&parameters, "prefix", false)?;
    let limit = match parameters.get("limit") {
        None => 100,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|limit| (1..=baton_runtime::services::memory::MAX_LISTED).contains(limit))
            .ok_or_else(|| {
                bad_parameter(
                    "limit",
                    format!(
                        "limit `{text}` must be a whole number from 1 to {}",
                        baton_runtime::services::memory::MAX_LISTED
                    ),
                )
            })?,
    };
    let items = state.memory.list(&tenant.0, &prefix, limit).await?;
    Ok(Json(MemoryItemList {
        items: items.into_iter().map(shown).collect(),
    }))
}

fn addressed(parameters: &HashMap<String, String>) -> Result<(Vec<String>, String), ApiError> {
    only(parameters, &["namespace", "key"])?;
    let namespace = namespace_parameter(parameters, "namespace", true)?;
    let key = parameters
        .get("key")
        .cloned()
        .ok_or_else(|| bad_parameter("key", "`key` is required".into()))?;
    Ok((namespace, key))
}

fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "memory_item_not_found",
        "no such memory item (or it expired)",
    )
}

pub(super) async fn get_item(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Query(parameters): Query<HashMap<String, String>>,
) -> Result<Json<MemoryItem>, ApiError> {
    let (namespace, key) = addressed(&parameters)?;
    match state.memory.get(&tenant.0, &namespace, &key).await? {
        Some(item) => Ok(Json(shown(item))),
        None => Err(not_found()),
    }
}

pub(super) async fn delete_item(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    Query(parameters): Query<HashMap<String, String>>,
) -> Result<StatusCode, ApiError> {
    let (namespace, key) = addressed(&parameters)?;
    if state.memory.delete(&tenant.0, &namespace, &key).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(not_found())
    }
}

pub(super) async fn search(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    ValidatedJson(body): ValidatedJson<MemorySearchRequest>,
) -> Result<Json<MemorySearchAnswer>, ApiError> {
    let found = state
        .memory
        .search(
            &tenant.0,
            &body.namespaces,
            &body.query,
            body.limit.unwrap_or(5),
        )
        .await?;
    Ok(Json(MemorySearchAnswer {
        found: found
            .into_iter()
            .map(|mut ranked| {
                ranked.item = shown(ranked.item);
                ranked
            })
            .collect(),
    }))
}

pub(super) async fn forget(
    State(state): State<ApiState>,
    Extension(tenant): Extension<Tenant>,
    ValidatedJson(body): ValidatedJson<MemoryForgetRequest>,
) -> Result<Json<MemoryForgotten>, ApiError> {
    let deleted = match (body.prefix, body.person) {
        (Some(prefix), None) => state.memory.forget_under(&tenant.0, &prefix).await?,
        (None, Some(person)) => state.memory.forget_person(&tenant.0, &person).await?,
        _ => {
            return Err(MemoryError::Invalid {
                path: "$".into(),
                message: "exactly one of `prefix` and `person`".into(),
            }
            .into());
        }
    };
    Ok(Json(MemoryForgotten { deleted }))
}
