//! A request's idempotency key, as the `Idempotency-Key` header or the
//! body's `idempotencyKey` (the same key if both: else 400), checked
//! (`RequestKey::parse`), and the answer's `Idempotent-Replayed: true`
//! header when the key's first answer is sent again.

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use baton_runtime::services::RequestKey;
use serde_json::json;

use crate::error::ApiError;

/// The header a retried request sends its key in.
pub(crate) const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";

/// The header on an answer replayed from a key's first request.
pub(crate) const REPLAYED_HEADER: &str = "idempotent-replayed";

/// The request's key, if it gave one.
pub(crate) fn request_key(
    headers: &HeaderMap,
    body_key: Option<&str>,
) -> Result<Option<RequestKey>, ApiError> {
    let header = match headers.get(IDEMPOTENCY_KEY_HEADER) {
        None => None,
        Some(value) => Some(value.to_str().map_err(|_| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_idempotency_key",
                "the Idempotency-Key header is not visible ASCII",
            )
            .with_details(json!({"header": "Idempotency-Key"}))
        })?),
    };
    let (key, path) = match (header, body_key) {
        (Some(header), Some(body)) if header != body => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "idempotency_key_mismatch",
                "the Idempotency-Key header and $.idempotencyKey differ; send one key",
            )
            .with_details(json!({"path": "$.idempotencyKey", "header": "Idempotency-Key"})));
        }
        (Some(header), _) => (header, "header Idempotency-Key"),
        (None, Some(body)) => (body, "$.idempotencyKey"),
        (None, None) => return Ok(None),
    };
    RequestKey::parse(key, path).map(Some).map_err(|error| {
        let mut refused = ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_idempotency_key",
            format!("{path}: {error}"),
        );
        refused = if path.starts_with('$') {
            refused.with_details(json!({"path": path}))
        } else {
            refused.with_details(json!({"header": "Idempotency-Key"}))
        };
        refused
    })
}

/// Marks `response` as the replay of a key's first answer.
pub(crate) fn mark_replayed(response: &mut Response, replayed: bool) {
    if replayed {
        response
            .headers_mut()
            .insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    }
}
