//! Secrets by reference: the port that reads a credential's value when a
//! call needs it ([`SecretStore`]), a brief cache over any store
//! ([`CachedSecrets`]), and the headers of a call resolved from their
//! sources ([`resolve_headers`]).
//!
//! Invariants: a [`SecretValue`] prints as `[secret]` (`Debug`), so no log
//! line or error formats one by accident; a [`SecretError`] names the
//! reference and the cause, never a value; the values a call resolved are
//! kept with it ([`ResolvedHeaders::secret_values`]) so what comes back can
//! be scrubbed of them before it is recorded.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use baton_core::basics::credentials::{HeaderSources, HeaderValueSource, SecretReference};

/// A secret's value: shown only by [`SecretValue::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    pub fn new(value: impl Into<String>) -> Self {
        SecretValue(value.into())
    }

    /// The value, for the one header or request that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("[secret]")
    }
}

/// A secret that could not be read: the reference, why, and whether a
/// later call may succeed (a throttled or unreachable store) or not (no
/// such secret, no permission).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reference}: {reason}")]
pub struct SecretError {
    /// The reference as displayed (names only).
    pub reference: String,
    pub reason: String,
    pub retryable: bool,
}

impl SecretError {
    pub fn new(reference: &SecretReference, reason: impl Into<String>, retryable: bool) -> Self {
        SecretError {
            reference: reference.to_string(),
            reason: reason.into(),
            retryable,
        }
    }
}

/// Where referenced secrets are read: SSM and Secrets Manager with the
/// function's role on AWS, the environment or a file under the data
/// directory for `baton serve`.
#[async_trait]
pub trait SecretStore: Send + Sync {
    async fn reveal(&self, reference: &SecretReference) -> Result<SecretValue, SecretError>;
}

/// No secret store: every reference is refused, naming it.
pub struct NoSecrets;

#[async_trait]
impl SecretStore for NoSecrets {
    async fn reveal(&self, reference: &SecretReference) -> Result<SecretValue, SecretError> {
        Err(SecretError::new(
            reference,
            "this process has no secret store",
            false,
        ))
    }
}

/// How long a read secret is kept by default: a rotated secret is used
/// within five minutes, and a warm process reads each one at most that
/// often.
pub const SECRET_CACHE_TIME: Duration = Duration::from_secs(300);

/// A store's values kept for `keep_for` (failures are not kept).
pub struct CachedSecrets<S> {
    inner: S,
    keep_for: Duration,
    kept: Mutex<HashMap<SecretReference, (Instant, SecretValue)>>,
}

impl<S: SecretStore> CachedSecrets<S> {
    pub fn new(inner: S, keep_for: Duration) -> Self {
        CachedSecrets {
            inner,
            keep_for,
            kept: Mutex::new(HashMap::new()),
        }
    }
}

#[async_trait]
impl<S: SecretStore> SecretStore for CachedSecrets<S> {
    async fn reveal(&self, reference: &SecretReference) -> Result<SecretValue, SecretError> {
        let now = Instant::now();
        if let Some((read_at, value)) = self
            .kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(reference)
            && now.duration_since(*read_at) < self.keep_for
        {
            return Ok(value.clone());
        }
        let value = self.inner.reveal(reference).await?;
        let mut kept = self
            .kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.retain(|_, (read_at, _)| now.duration_since(*read_at) < self.keep_for);
        kept.insert(reference.clone(), (now, value.clone()));
        Ok(value)
    }
}

/// Reads a named environment variable (the start-up wiring passes the
/// process environment).
pub type EnvironmentLookup = std::sync::Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// A call's headers with their values, and which values are secret.
#[derive(Default)]
pub struct ResolvedHeaders {
    /// Name and value, in the sources' order.
    pub headers: Vec<(String, String)>,
    secret_values: Vec<SecretValue>,
}

impl std::fmt::Debug for ResolvedHeaders {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        formatter
            .debug_struct("ResolvedHeaders")
            .field("names", &names)
            .finish()
    }
}

impl ResolvedHeaders {
    /// The values read from the environment or a secret store (what a
    /// response must be scrubbed of).
    pub fn secret_values(&self) -> Vec<&str> {
        self.secret_values.iter().map(SecretValue::expose).collect()
    }
}

/// Resolves `headers`: literals as written, `{"env": …}` from `environment`,
/// `{"secret": …}` from `secrets`. An error names the header and the
/// variable or reference, never a value.
pub async fn resolve_headers(
    headers: &HeaderSources,
    secrets: &dyn SecretStore,
    environment: &(dyn Fn(&str) -> Option<String> + Send + Sync),
) -> Result<ResolvedHeaders, HeaderResolutionError> {
    let mut resolved = ResolvedHeaders::default();
    for (name, source) in headers {
        let (prefix, value) = match source {
            HeaderValueSource::Literal(text) => {
                resolved.headers.push((name.clone(), text.clone()));
                continue;
            }
            HeaderValueSource::Environment { env, prefix } => {
                let value = environment(env).ok_or_else(|| HeaderResolutionError {
                    message: format!("header `{name}`: environment variable `{env}` is not set"),
                    retryable: false,
                })?;
                (prefix, SecretValue::new(value))
            }
            HeaderValueSource::Secret { secret, prefix } => {
                let value =
                    secrets
                        .reveal(secret)
                        .await
                        .map_err(|error| HeaderResolutionError {
                            message: format!("header `{name}`: {error}"),
                            retryable: error.retryable,
                        })?;
                (prefix, value)
            }
        };
        resolved.headers.push((
            name.clone(),
            format!(
                "{}{}",
                prefix.as_deref().unwrap_or_default(),
                value.expose()
            ),
        ));
        resolved.secret_values.push(value);
    }
    Ok(resolved)
}

/// A header whose value could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct HeaderResolutionError {
    pub message: String,
    pub retryable: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct CountingStore(AtomicUsize);

    #[async_trait]
    impl SecretStore for CountingStore {
        async fn reveal(&self, reference: &SecretReference) -> Result<SecretValue, SecretError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            match reference {
                SecretReference::Named(name) if name == "known" => Ok(SecretValue::new("value-1")),
                other => Err(SecretError::new(other, "not found", false)),
            }
        }
    }

    #[tokio::test]
    async fn a_cached_store_reads_each_secret_once_while_it_is_fresh_and_never_keeps_failures() {
        let cached = CachedSecrets::new(CountingStore(AtomicUsize::new(0)), SECRET_CACHE_TIME);
        let known = SecretReference::Named("known".into());
        let unknown = SecretReference::Named("unknown".into());
        for _ in 0..3 {
            assert_eq!(cached.reveal(&known).await.unwrap().expose(), "value-1");
            assert!(cached.reveal(&unknown).await.is_err());
        }
        assert_eq!(cached.inner.0.load(Ordering::SeqCst), 4);
        let expired = CachedSecrets::new(CountingStore(AtomicUsize::new(0)), Duration::ZERO);
        expired.reveal(&known).await.unwrap();
        expired.reveal(&known).await.unwrap();
        assert_eq!(expired.inner.0.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn resolved_headers_carry_prefixes_and_name_what_failed_without_a_value() {
        let store = CountingStore(AtomicUsize::new(0));
        let headers: HeaderSources = serde_json::from_value(serde_json::json!({
            "authorization": {"secret": "known", "prefix": "Bearer "},
            "x-plain": "literal",
        }))
        .unwrap();
        let resolved = resolve_headers(&headers, &store, &|_| None).await.unwrap();
        assert_eq!(
            resolved.headers,
            [
                ("authorization".to_string(), "Bearer value-1".to_string()),
                ("x-plain".to_string(), "literal".to_string())
            ]
        );
        assert_eq!(resolved.secret_values(), ["value-1"]);
        assert!(!format!("{resolved:?}").contains("value-1"));
        let missing: HeaderSources = serde_json::from_value(
            serde_json::json!({"x-api-key": {"secret": {"ssm": "/missing"}}}),
        )
        .unwrap();
        let error = resolve_headers(&missing, &store, &|_| None)
            .await
            .unwrap_err();
        assert_eq!(
            error.message,
            "header `x-api-key`: SSM parameter `/missing`: not found"
        );
    }
}
