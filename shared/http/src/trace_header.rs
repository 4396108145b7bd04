//! The caller's W3C `traceparent` request header (`POST /runs`,
//! `POST /run.stream`, `POST /api/v1/chat`): the run's root span hangs
//! under it. And the user a submission names (`X-Baton-User`), to whom
//! the run's usage is attributed.

use axum::http::HeaderMap;

/// The caller's W3C `traceparent` header, when well-formed: the run's root
/// span hangs under it. A malformed one is ignored, as W3C Trace Context
/// asks (the run starts a trace of its own), with a warning.
pub(crate) fn caller_trace(
    headers: &HeaderMap,
) -> Option<baton_core::basics::trace_context::TraceParent> {
    let value = headers.get("traceparent")?;
    let parsed = value
        .to_str()
        .map_err(|_| baton_core::basics::trace_context::TraceParentError("not ASCII"))
        .and_then(baton_core::basics::trace_context::TraceParent::parse);
    match parsed {
        Ok(parent) => Some(parent),
        Err(error) => {
            tracing::warn!(%error, "the request's traceparent is ignored");
            None
        }
    }
}

/// The header naming the user a submission is made for.
pub(crate) const USER_HEADER: &str = "x-baton-user";

/// Longest user name `X-Baton-User` may carry (characters).
const MAX_USER_CHARS: usize = 128;

/// Who submits: the `traceparent` (ignored when malformed) and the user.
/// The user is the principal's when its credential names one (a JWT, a
/// token configured with `user=`): `X-Baton-User` is then ignored, so no
/// caller can claim another's name. A credential that names no user (a
/// service token, an anonymous server) may name the end user it acts for
/// in `X-Baton-User`; one that is not 1–128 printable characters is a 400
/// naming the header.
pub(crate) fn submitter_of(
    headers: &HeaderMap,
    principal: &crate::auth::Principal,
) -> Result<baton_runtime::services::Submitter, crate::error::ApiError> {
    if let Some(user) = &principal.user {
        return Ok(baton_runtime::services::Submitter {
            traceparent: caller_trace(headers),
            user: Some(user.clone()),
        });
    }
    let user = match headers.get(USER_HEADER) {
        None => None,
        Some(value) => {
            let text = value.to_str().ok().map(str::trim).unwrap_or_default();
            let printable = !text.is_empty()
                && text.chars().count() <= MAX_USER_CHARS
                && text.chars().all(|character| !character.is_control());
            if !printable {
                return Err(crate::error::ApiError::new(
                    axum::http::StatusCode::BAD_REQUEST,
                    "invalid_header",
                    format!(
                        "X-Baton-User names a user in 1 to {MAX_USER_CHARS} printable characters"
                    ),
                )
                .with_details(serde_json::json!({"header": "X-Baton-User"})));
            }
            Some(text.to_string())
        }
    };
    Ok(baton_runtime::services::Submitter {
        traceparent: caller_trace(headers),
        user,
    })
}
