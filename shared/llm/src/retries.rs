//! What every HTTP model provider of this crate does the same way: classify
//! a failed attempt (rate limited, server error, timeout, transport, or
//! fatal), retry what may succeed later with exponential backoff and
//! jitter (a server's `Retry-After` wins, capped), and tell readers of
//! streamed text that a retry voids it (`ModelDelta::Restarted`).

use std::time::Duration;

use baton_runtime::error::LlmError;
use baton_runtime::ports::ModelDelta;
use rand::Rng;
use tokio::sync::mpsc::UnboundedSender;

/// Why one attempt failed.
pub(crate) enum AttemptFailure {
    RateLimited {
        retry_after: Option<Duration>,
    },
    Server {
        status: u16,
        body: String,
        retry_after: Option<Duration>,
    },
    Timeout,
    Transport(String),
    Fatal(LlmError),
}

/// How often and how long to retry (429, 5xx, 529 overloaded, timeouts,
/// broken streams).
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    pub(crate) fn backoff_delay(
        &self,
        failed_attempt: u32,
        retry_after: Option<Duration>,
    ) -> Duration {
        if let Some(server_says) = retry_after {
            return server_says.min(self.max_retry_after);
        }
        let exponent = failed_attempt.saturating_sub(1).min(16);
        let ceiling = self
            .initial_backoff
            .saturating_mul(2u32.saturating_pow(exponent))
            .min(self.max_backoff);
        let jitter: f64 = rand::rng().random_range(0.5..=1.0);
        ceiling.mul_f64(jitter)
    }

    /// Runs `attempt` until it answers, fails for good, or the attempts run
    /// out; an attempt also says whether it had streamed text.
    pub(crate) async fn run<T, Attempt>(
        &self,
        deltas: &UnboundedSender<ModelDelta>,
        mut attempt: impl FnMut() -> Attempt,
    ) -> Result<T, LlmError>
    where
        Attempt: std::future::Future<Output = (Result<T, AttemptFailure>, bool)>,
    {
        let attempts = self.max_attempts.max(1);
        for number in 1..=attempts {
            let (answered, streamed_text) = attempt().await;
            let failure = match answered {
                Ok(answer) => return Ok(answer),
                Err(AttemptFailure::Fatal(error)) => return Err(error),
                Err(failure) => failure,
            };
            let retry_after = match &failure {
                AttemptFailure::RateLimited { retry_after }
                | AttemptFailure::Server { retry_after, .. } => *retry_after,
                _ => None,
            };
            if number == attempts {
                return Err(match failure {
                    AttemptFailure::RateLimited { .. } => LlmError::RateLimited { attempts },
                    AttemptFailure::Server { status, body, .. } => LlmError::ServerError {
                        status,
                        attempts,
                        body,
                    },
                    AttemptFailure::Timeout => LlmError::Timeout { attempts },
                    AttemptFailure::Transport(message) => LlmError::Transport { attempts, message },
                    AttemptFailure::Fatal(error) => error,
                });
            }
            if streamed_text {
                // The retry answers from the start: what was streamed is void.
                let _ = deltas.send(ModelDelta::Restarted);
            }
            let delay = self.backoff_delay(number, retry_after);
            tracing::warn!(
                attempt = number,
                delay_ms = delay.as_millis() as u64,
                "model call failed; retrying"
            );
            tokio::time::sleep(delay).await;
        }
        Err(LlmError::UnexpectedResponse("no attempt was made".into()))
    }
}

pub(crate) fn classify_transport_error(error: reqwest::Error) -> AttemptFailure {
    if error.is_timeout() {
        AttemptFailure::Timeout
    } else if error.is_decode() {
        AttemptFailure::Fatal(LlmError::UnexpectedResponse(error.to_string()))
    } else {
        AttemptFailure::Transport(baton_core::error::with_causes(&error))
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
