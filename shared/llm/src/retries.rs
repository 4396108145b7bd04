//! What every HTTP model provider of this crate does the same way: classify
//! a failed HTTP attempt (rate limited, server error, timeout, transport,
//! or fatal) for the one retry skeleton every provider shares
//! (`baton_runtime::models::retries`: exponential backoff and jitter, a
//! server's `Retry-After` honoured, `ModelDelta::Restarted` after streamed
//! text).

use std::time::Duration;

use baton_runtime::error::LlmError;
pub use baton_runtime::models::retries::{AttemptFailure, RetryPolicy};

pub(crate) fn classify_transport_error(error: reqwest::Error) -> AttemptFailure {
    if error.is_timeout() {
        AttemptFailure::Timeout
    } else if error.is_decode() {
        AttemptFailure::Fatal(LlmError::UnexpectedResponse(error.to_string()))
    } else {
        AttemptFailure::Transport(baton_core::basics::error::with_causes(&error))
    }
}

/// `Retry-After` as delta-seconds (HTTP dates are rare from model APIs and ignored).
pub(crate) fn parse_retry_after(value: Option<&reqwest::header::HeaderValue>) -> Option<Duration> {
    let text = value?.to_str().ok()?.trim();
    text.parse::<f64>()
        .ok()
        .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
        .map(Duration::from_secs_f64)
}

/// The failure a non-2xx answer is: 429 and 5xx (and Anthropic's 529
/// "overloaded") are retried, anything else is the request's fault.
pub(crate) async fn failure_of(response: reqwest::Response, key_variable: &str) -> AttemptFailure {
    let status = response.status().as_u16();
    if status == 401 {
        // A refused key will be refused again: not retried, and the error
        // says which variable to set (never the key itself).
        return AttemptFailure::Fatal(LlmError::Configuration(format!(
            "the provider refused the key (HTTP 401): set {key_variable} to a valid key"
        )));
    }
    let retry_after = parse_retry_after(response.headers().get(reqwest::header::RETRY_AFTER));
    let text = response.text().await.unwrap_or_default();
    let text: String = text.chars().take(500).collect();
    match status {
        429 => AttemptFailure::RateLimited { retry_after },
        code if code >= 500 => AttemptFailure::Server {
            status: code,
            body: text,
            retry_after,
        },
        code => AttemptFailure::Fatal(LlmError::RequestRejected {
            status: code,
            body: text,
        }),
    }
}
