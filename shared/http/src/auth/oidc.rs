//! Sign-in with the company's identity provider: OIDC JWTs verified with
//! `jsonwebtoken` against the issuer's JWKS.
//!
//! - Keys come from the issuer's JWKS (`BATON_OIDC_JWKS_URL`, else the
//!   `jwks_uri` of `{issuer}/.well-known/openid-configuration`), fetched
//!   through the outbound guard (https, checked addresses, size and time
//!   caps), cached, and fetched again when a token names an unknown `kid`
//!   (at most once per [`REFRESH_FLOOR`]) or the cache is older than
//!   [`CACHE_LIFETIME`].
//! - Only asymmetric algorithms are accepted (RS*, PS*, ES*, EdDSA), and
//!   the key's type must be the algorithm's: `alg: none` and an HMAC
//!   signed with a public key are refused.
//! - `iss`, `aud` and `exp` are required; `exp` and `nbf` are checked with
//!   [`CLOCK_SKEW_SECONDS`] of leeway.
//! - The tenant, user, groups and scopes come from configured claims.
//!
//! A refusal is an [`OidcRefusal`]: the 401's reason, never the token.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_outbound::{GuardedClient, OutboundPolicy, Resolver, SystemResolver};
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;
use tokio::sync::Mutex;

use super::principal::{Credential, Principal, Scope};

/// Leeway on `exp` and `nbf`.
pub const CLOCK_SKEW_SECONDS: u64 = 60;
/// The JWKS is fetched again after this long even when every `kid` is known.
pub const CACHE_LIFETIME: Duration = Duration::from_secs(3600);
/// An unknown `kid` fetches the JWKS again at most this often (a flood of
/// forged `kid`s cannot make Baton hammer the issuer).
pub const REFRESH_FLOOR: Duration = Duration::from_secs(10);
/// The largest JWKS or discovery document read.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// Where the identity provider is and which claims say what.
#[derive(Debug, Clone, PartialEq)]
pub struct OidcSettings {
    /// `BATON_OIDC_ISSUER`: the `iss` every token must carry.
    pub issuer: String,
    /// `BATON_OIDC_AUDIENCE`: an `aud` every token must carry (comma
    /// separated: any of them).
    pub audiences: Vec<String>,
    /// `BATON_OIDC_JWKS_URL`; unset: discovered from the issuer.
    pub jwks_url: Option<String>,
    /// `BATON_OIDC_TENANT_CLAIM` (default `tenant`): the claim naming the
    /// tenant.
    pub tenant_claim: String,
    /// `BATON_OIDC_TENANT`: the tenant of every token that has no tenant
    /// claim (one provider per tenant).
    pub fixed_tenant: Option<String>,
    /// `BATON_OIDC_USER_CLAIM` (default `sub`).
    pub user_claim: String,
    /// `BATON_OIDC_GROUPS_CLAIM` (default `groups`; Cognito: `cognito:groups`).
    pub groups_claim: String,
    /// `BATON_OIDC_SCOPES_CLAIM` (default `scope`: a space-separated string
    /// or an array; Entra ID: `scp` or `roles`).
    pub scopes_claim: String,
    /// `BATON_OUTBOUND_HTTP_HOSTS`: hosts the JWKS may be read from over
    /// plain http (local development and tests).
    pub http_allowed_hosts: String,
}

impl OidcSettings {
    /// Settings for `issuer` and `audience` with the default claim names.
    pub fn new(issuer: &str, audience: &str) -> Self {
        OidcSettings {
            issuer: issuer.trim_end_matches('/').to_string(),
            audiences: audience
                .split(',')
                .map(str::trim)
                .filter(|audience| !audience.is_empty())
                .map(str::to_string)
                .collect(),
            jwks_url: None,
            tenant_claim: "tenant".into(),
            fixed_tenant: None,
            user_claim: "sub".into(),
            groups_claim: "groups".into(),
            scopes_claim: "scope".into(),
            http_allowed_hosts: String::new(),
        }
    }
}

/// Why a JWT was refused (the 401's `details.reason`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OidcRefusal {
    #[error("the token is not a JWT")]
    Malformed,
    #[error("the token's algorithm `{0}` is not accepted (asymmetric signatures only)")]
    AlgorithmRefused(String),
    #[error("the token names no key id (`kid`) the issuer publishes")]
    UnknownKey,
    #[error("the issuer's key does not fit the token's algorithm")]
    KeyMismatch,
    #[error("the signature does not verify")]
    BadSignature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet (`nbf`)")]
    NotYetValid,
    #[error("the token is for another audience")]
    WrongAudience,
    #[error("the token is from another issuer")]
    WrongIssuer,
    #[error("the token lacks the `{0}` claim")]
    MissingClaim(String),
    #[error("the issuer's keys could not be read: {0}")]
    KeysUnavailable(String),
}

impl OidcRefusal {
    /// A short code for the 401's details.
    pub fn code(&self) -> &'static str {
        match self {
            OidcRefusal::Malformed => "malformed",
            OidcRefusal::AlgorithmRefused(_) => "algorithm_refused",
            OidcRefusal::UnknownKey => "unknown_key",
            OidcRefusal::KeyMismatch => "key_mismatch",
            OidcRefusal::BadSignature => "bad_signature",
            OidcRefusal::Expired => "expired",
            OidcRefusal::NotYetValid => "not_yet_valid",
            OidcRefusal::WrongAudience => "wrong_audience",
            OidcRefusal::WrongIssuer => "wrong_issuer",
            OidcRefusal::MissingClaim(_) => "missing_claim",
            OidcRefusal::KeysUnavailable(_) => "keys_unavailable",
        }
    }
}

/// Whether a bearer token looks like a JWT (three base64url parts).
pub fn looks_like_jwt(token: &str) -> bool {
    let parts: Vec<&str> = token.split('.').collect();
    parts.len() == 3
        && parts.iter().take(2).all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
        })
}

#[derive(Default)]
struct KeyCache {
    keys: HashMap<String, Jwk>,
    fetched_at: Option<Instant>,
}

/// Verifies JWTs of one issuer.
pub struct OidcVerifier {
    settings: OidcSettings,
    resolver: Arc<dyn Resolver>,
    cache: Mutex<KeyCache>,
}

impl std::fmt::Debug for OidcVerifier {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("OidcVerifier")
            .field("issuer", &self.settings.issuer)
            .finish_non_exhaustive()
    }
}

const ACCEPTED_ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Whether `key`'s type is the one `algorithm` signs with.
fn key_fits(key: &Jwk, algorithm: Algorithm) -> bool {
    let family_fits = match &key.algorithm {
        AlgorithmParameters::RSA(_) => matches!(
            algorithm,
            Algorithm::RS256
                | Algorithm::RS384
                | Algorithm::RS512
                | Algorithm::PS256
                | Algorithm::PS384
                | Algorithm::PS512
        ),
        AlgorithmParameters::EllipticCurve(_) => {
            matches!(algorithm, Algorithm::ES256 | Algorithm::ES384)
        }
        AlgorithmParameters::OctetKeyPair(_) => algorithm == Algorithm::EdDSA,
        AlgorithmParameters::OctetKey(_) => false,
    };
    let declared_fits = key.common.key_algorithm.is_none_or(|declared| {
        serde_json::to_value(declared).ok() == serde_json::to_value(algorithm).ok()
    });
    family_fits && declared_fits
}

/// A claim as a list of strings: an array of strings, or one string split
/// on spaces (OAuth's `scope`) or commas.
fn claim_strings(claims: &Value, name: &str) -> Vec<String> {
    match claims.get(name) {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        Some(Value::String(text)) => text
            .split([' ', ','])
            .filter(|item| !item.is_empty())
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

impl OidcVerifier {
    pub fn new(settings: OidcSettings) -> Self {
        OidcVerifier::with_resolver(settings, Arc::new(SystemResolver))
    }

    /// With a resolver of the caller's (tests).
    pub fn with_resolver(settings: OidcSettings, resolver: Arc<dyn Resolver>) -> Self {
        OidcVerifier {
            settings,
            resolver,
            cache: Mutex::new(KeyCache::default()),
        }
    }

    pub fn settings(&self) -> &OidcSettings {
        &self.settings
    }

    fn client(&self) -> GuardedClient {
        let policy = OutboundPolicy {
            max_response_bytes: MAX_DOCUMENT_BYTES,
            timeout: Duration::from_secs(5),
            ..OutboundPolicy::default()
        }
        .with_http_allowed_hosts(&self.settings.http_allowed_hosts);
        GuardedClient::new(policy, self.resolver.clone())
    }

    async fn read_json(&self, url: &str) -> Result<Value, OidcRefusal> {
        let response = self
            .client()
            .get(url, "application/json")
            .await
            .map_err(|refusal| OidcRefusal::KeysUnavailable(refusal.to_string()))?;
        if !response.status.is_success() {
            return Err(OidcRefusal::KeysUnavailable(format!(
                "{url} answered HTTP {}",
                response.status.as_u16()
            )));
        }
        serde_json::from_slice(&response.body)
            .map_err(|error| OidcRefusal::KeysUnavailable(format!("{url}: not JSON: {error}")))
    }

    async fn jwks_url(&self) -> Result<String, OidcRefusal> {
        if let Some(url) = &self.settings.jwks_url {
            return Ok(url.clone());
        }
        let discovery = format!("{}/.well-known/openid-configuration", self.settings.issuer);
        let document = self.read_json(&discovery).await?;
        document
            .get("jwks_uri")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| OidcRefusal::KeysUnavailable(format!("{discovery} names no jwks_uri")))
    }

    async fn fetch_keys(&self) -> Result<HashMap<String, Jwk>, OidcRefusal> {
        let url = self.jwks_url().await?;
        let document = self.read_json(&url).await?;
        let set: JwkSet = serde_json::from_value(document)
            .map_err(|error| OidcRefusal::KeysUnavailable(format!("{url}: not a JWKS: {error}")))?;
        Ok(set
            .keys
            .into_iter()
            .filter_map(|key| Some((key.common.key_id.clone()?, key)))
            .collect())
    }

    /// The key named `kid`: from the cache, else after one fetch (when the
    /// cache is stale, or the last fetch is older than the floor).
    async fn key(&self, kid: &str) -> Result<Jwk, OidcRefusal> {
        let mut cache = self.cache.lock().await;
        let age = cache.fetched_at.map(|fetched| fetched.elapsed());
        let stale = age.is_none_or(|age| age > CACHE_LIFETIME);
        if !stale && let Some(key) = cache.keys.get(kid) {
            return Ok(key.clone());
        }
        let may_fetch = stale || age.is_some_and(|age| age > REFRESH_FLOOR);
        if may_fetch {
            match self.fetch_keys().await {
                Ok(keys) => {
                    cache.keys = keys;
                    cache.fetched_at = Some(Instant::now());
                }
                // Keys read before still verify while the issuer is down.
                Err(refusal) if cache.keys.is_empty() => return Err(refusal),
                Err(refusal) => tracing::warn!(%refusal, "the JWKS could not be read again"),
            }
        }
        cache.keys.get(kid).cloned().ok_or(OidcRefusal::UnknownKey)
    }

    /// The principal a JWT proves, or why it proves nothing.
    pub async fn verify(&self, token: &str) -> Result<Principal, OidcRefusal> {
        let header = jsonwebtoken::decode_header(token).map_err(|error| {
            // `alg: none` and HS* on unknown names fail to decode here.
            let text = error.to_string();
            if text.contains("algorithm") || text.contains("variant") {
                OidcRefusal::AlgorithmRefused("unknown".into())
            } else {
                OidcRefusal::Malformed
            }
        })?;
        if !ACCEPTED_ALGORITHMS.contains(&header.alg) {
            return Err(OidcRefusal::AlgorithmRefused(format!("{:?}", header.alg)));
        }
        let kid = header.kid.ok_or(OidcRefusal::UnknownKey)?;
        let key = self.key(&kid).await?;
        if !key_fits(&key, header.alg) {
            return Err(OidcRefusal::KeyMismatch);
        }
        let decoding_key = DecodingKey::from_jwk(&key).map_err(|_| OidcRefusal::KeyMismatch)?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = CLOCK_SKEW_SECONDS;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&self.settings.audiences);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let claims = jsonwebtoken::decode::<Value>(token, &decoding_key, &validation)
            .map_err(|error| {
                use jsonwebtoken::errors::ErrorKind;
                match error.kind() {
                    ErrorKind::ExpiredSignature => OidcRefusal::Expired,
                    ErrorKind::ImmatureSignature => OidcRefusal::NotYetValid,
                    ErrorKind::InvalidAudience => OidcRefusal::WrongAudience,
                    ErrorKind::InvalidIssuer => OidcRefusal::WrongIssuer,
                    ErrorKind::MissingRequiredClaim(claim) => {
                        OidcRefusal::MissingClaim(claim.clone())
                    }
                    ErrorKind::InvalidSignature => OidcRefusal::BadSignature,
                    ErrorKind::InvalidAlgorithm => {
                        OidcRefusal::AlgorithmRefused(format!("{:?}", header.alg))
                    }
                    _ => OidcRefusal::Malformed,
                }
            })?
            .claims;
        self.principal_of(&claims)
    }

    fn principal_of(&self, claims: &Value) -> Result<Principal, OidcRefusal> {
        let settings = &self.settings;
        let tenant = match claims.get(&settings.tenant_claim).and_then(Value::as_str) {
            Some(tenant) if !tenant.trim().is_empty() => tenant.trim().to_string(),
            _ => settings
                .fixed_tenant
                .clone()
                .ok_or_else(|| OidcRefusal::MissingClaim(settings.tenant_claim.clone()))?,
        };
        let user = claims
            .get(&settings.user_claim)
            .and_then(Value::as_str)
            .filter(|user| !user.trim().is_empty())
            .map(|user| user.trim().to_string())
            .ok_or_else(|| OidcRefusal::MissingClaim(settings.user_claim.clone()))?;
        let mut scopes: Vec<Scope> = claim_strings(claims, &settings.scopes_claim)
            .iter()
            .filter_map(|name| Scope::parse(name))
            .collect();
        scopes.sort();
        scopes.dedup();
        Ok(Principal {
            tenant,
            user: Some(user),
            groups: claim_strings(claims, &settings.groups_claim),
            scopes,
            credential: Credential::Jwt,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jwt_shapes_are_recognised() {
        assert!(looks_like_jwt("eyJh.eyJi.c2ln"));
        assert!(looks_like_jwt("eyJh.eyJi."));
        assert!(!looks_like_jwt("a-static-token"));
        assert!(!looks_like_jwt("a.b"));
        assert!(!looks_like_jwt("a b.c.d"));
    }

    #[test]
    fn claims_are_read_as_lists_and_map_to_scopes() {
        let verifier = OidcVerifier::new(OidcSettings {
            fixed_tenant: Some("tenant_a".into()),
            groups_claim: "cognito:groups".into(),
            ..OidcSettings::new("https://id.example", "baton")
        });
        let principal = verifier
            .principal_of(&serde_json::json!({
                "sub": "ana",
                "scope": "openid runs:read runs:write email",
                "cognito:groups": ["group_a", "group_b"],
            }))
            .unwrap();
        assert_eq!(principal.tenant, "tenant_a");
        assert_eq!(principal.user.as_deref(), Some("ana"));
        assert_eq!(principal.scopes, vec![Scope::RunsRead, Scope::RunsWrite]);
        assert_eq!(principal.groups, vec!["group_a", "group_b"]);
        let without_user = verifier.principal_of(&serde_json::json!({"scope": "admin"}));
        assert_eq!(without_user, Err(OidcRefusal::MissingClaim("sub".into())));
        let strict = OidcVerifier::new(OidcSettings::new("https://id.example", "baton"));
        assert_eq!(
            strict.principal_of(&serde_json::json!({"sub": "ana"})),
            Err(OidcRefusal::MissingClaim("tenant".into()))
        );
    }
}
