//! The caller's W3C `traceparent` request header (`POST /runs`,
//! `POST /run.stream`, `POST /api/v1/chat`): the run's root span hangs
//! under it.

use axum::http::HeaderMap;

/// The caller's W3C `traceparent` header, when well-formed: the run's root
/// span hangs under it. A malformed one is ignored, as W3C Trace Context
/// asks (the run starts a trace of its own), with a warning.
pub(crate) fn caller_trace(headers: &HeaderMap) -> Option<baton_core::trace_context::TraceParent> {
    let value = headers.get("traceparent")?;
    let parsed = value
        .to_str()
        .map_err(|_| baton_core::trace_context::TraceParentError("not ASCII"))
        .and_then(baton_core::trace_context::TraceParent::parse);
    match parsed {
        Ok(parent) => Some(parent),
        Err(error) => {
            tracing::warn!(%error, "the request's traceparent is ignored");
            None
        }
    }
}
