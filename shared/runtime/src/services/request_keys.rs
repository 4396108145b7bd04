//! Requests made once by their idempotency key: a chat message, a fork, a
//! person's answer or a schedule's creation sent again with the same key
//! makes no second effect and answers with the first one's answer.
//!
//! The key is claimed in the store ([`RequestKeys`]) before the effect; the
//! effect's answer is kept on it for [`REQUEST_KEY_RETENTION`]. A request
//! whose effect fails gives the key back, so its retry makes the effect.
//! The same key with a different request is refused (422), and a retry
//! while the first is still being made is told to retry (409). A claim
//! whose caller died is taken over after [`STALE_CLAIM`]. Keys are scoped
//! by route (`chat:`, `fork:{runId}:`, `answer:`, `schedule:`), so one key
//! on two routes names two requests.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::RuntimeError;
use crate::ports::{ClaimTimes, Clock, RequestKeyClaim, RequestKeys};

/// How long a request's key and answer are kept.
pub const REQUEST_KEY_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// An unanswered claim older than this is a dead caller's: taken over.
pub const STALE_CLAIM: Duration = Duration::from_secs(60);

/// The longest key taken, in characters.
pub const MAX_REQUEST_KEY_CHARS: usize = 255;

/// What a keyed request answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Once {
    /// The effect was made now (or no key was given).
    First(Value),
    /// The key was used before by the same request: its answer, kept.
    Replayed(Value),
}

impl Once {
    pub fn answer(&self) -> &Value {
        match self {
            Once::First(answer) | Once::Replayed(answer) => answer,
        }
    }

    pub fn replayed(&self) -> bool {
        matches!(self, Once::Replayed(_))
    }
}

/// A request's key, where the caller gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestKey {
    pub key: String,
    /// Where it was given (`header Idempotency-Key`, or the body's path).
    pub path: String,
}

impl RequestKey {
    /// A key as given, checked: 1 to [`MAX_REQUEST_KEY_CHARS`] visible
    /// ASCII characters.
    pub fn parse(key: &str, path: &str) -> Result<RequestKey, RuntimeError> {
        if key.is_empty()
            || key.chars().count() > MAX_REQUEST_KEY_CHARS
            || !key.chars().all(|c| c.is_ascii_graphic())
        {
            return Err(RuntimeError::InvalidInput {
                path: path.to_string(),
                message: format!(
                    "an idempotency key is 1 to {MAX_REQUEST_KEY_CHARS} visible ASCII characters"
                ),
            });
        }
        Ok(RequestKey {
            key: key.to_string(),
            path: path.to_string(),
        })
    }
}

#[derive(Clone)]
pub struct RequestKeyService {
    keys: Arc<dyn RequestKeys>,
    clock: Arc<dyn Clock>,
}

impl RequestKeyService {
    pub fn new(keys: Arc<dyn RequestKeys>, clock: Arc<dyn Clock>) -> Self {
        RequestKeyService { keys, clock }
    }

    /// Makes `effect` once per `key` (none: every time): the first request
    /// makes it and its answer is kept; the same request again gets that
    /// answer. `scope` names the route (and the resource) the key is for;
    /// `request` is what makes two requests the same.
    ///
    /// The effect's error type is the caller's (an HTTP handler's own
    /// refusals pass through); the key's own refusals come as
    /// [`RuntimeError`]s converted into it.
    pub async fn once<F, Fut, E>(
        &self,
        tenant_id: &str,
        scope: &str,
        key: Option<&RequestKey>,
        request: &Value,
        effect: F,
    ) -> Result<Once, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Value, E>>,
        E: From<RuntimeError>,
    {
        let Some(key) = key else {
            return effect().await.map(Once::First);
        };
        let stored_key = format!("{scope}:{}", key.key);
        let fingerprint = format!(
            "{:x}",
            Sha256::digest(format!("{scope}\n{request}").as_bytes())
        );
        let now = self.clock.now();
        let times = ClaimTimes {
            now: now.unix_millis(),
            stale_before: now
                .unix_millis()
                .saturating_sub(STALE_CLAIM.as_millis() as u64),
            expires_at: now.plus(REQUEST_KEY_RETENTION).unix_millis(),
        };
        match self
            .keys
            .claim_request_key(tenant_id, &stored_key, &fingerprint, times)
            .await
            .map_err(|error| E::from(RuntimeError::Store(error)))?
        {
            RequestKeyClaim::Claimed => match effect().await {
                Ok(answer) => {
                    if let Err(error) = self
                        .keys
                        .answer_request_key(tenant_id, &stored_key, &fingerprint, &answer)
                        .await
                    {
                        // The effect is made: its answer goes out. A retry
                        // finds the claim unanswered (409) until it is stale.
                        tracing::warn!(%tenant_id, key = %stored_key, %error, "a keyed request's answer was not kept");
                    }
                    Ok(Once::First(answer))
                }
                Err(error) => {
                    if let Err(release) = self
                        .keys
                        .release_request_key(tenant_id, &stored_key, &fingerprint)
                        .await
                    {
                        tracing::warn!(%tenant_id, key = %stored_key, error = %release, "a failed keyed request's key was not given back; it is taken over once stale");
                    }
                    Err(error)
                }
            },
            RequestKeyClaim::Kept(kept) if kept.fingerprint != fingerprint => {
                Err(E::from(RuntimeError::IdempotencyKeyReused {
                    key: key.key.clone(),
                    path: key.path.clone(),
                }))
            }
            RequestKeyClaim::Kept(kept) => match kept.answer {
                Some(answer) => Ok(Once::Replayed(answer)),
                None => Err(E::from(RuntimeError::RequestInFlight {
                    key: key.key.clone(),
                })),
            },
        }
    }
}
