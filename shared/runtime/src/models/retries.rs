//! The one call-with-retries skeleton of every model provider (the
//! OpenAI-compatible and Anthropic clients of `baton-llm`, Bedrock's of
//! `baton-aws`): a provider says why one attempt failed
//! ([`AttemptFailure`]: rate limited, server error, timeout, transport, or
//! fatal); [`RetryPolicy::run`] retries what may succeed later with
//! exponential backoff and jitter (a server's `Retry-After` wins, capped),
//! tells readers of streamed text that a retry voids it
//! (`ModelDelta::Restarted`), and reports the last failure with the number
//! of attempts made.

use std::time::Duration;

use rand::Rng;
use tokio::sync::mpsc::UnboundedSender;

use crate::error::LlmError;
use crate::ports::ModelDelta;

/// Why one attempt failed: what the provider saw, before the policy
/// decides whether to try again.
#[derive(Debug)]
pub enum AttemptFailure {
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
    pub fn backoff_delay(&self, failed_attempt: u32, retry_after: Option<Duration>) -> Duration {
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
    pub async fn run<T, Attempt>(
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
