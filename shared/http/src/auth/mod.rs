//! Who a request comes from, decided once at the edge, and what they may
//! do. A request's credential becomes one [`Principal`] (tenant, user,
//! groups, scopes):
//!
//! - here: static bearer tokens, configured as
//!   `tenant:sha256-hex-of-token[;user=…][;scopes=…][;groups=…]`
//!   (`BATON_API_TOKENS`), so plain tokens never sit in configuration or logs;
//! - `oidc`: JWTs of the company's identity provider, verified against its JWKS;
//! - `principal`: the principal and the scopes;
//! - `cross_site`: what a page on another site may not do (checked before any
//!   credential).

pub mod cross_site;

pub mod oidc;
pub mod principal;

use std::sync::Arc;

use sha2::{Digest, Sha256};

pub use principal::{Credential, Principal, Scope};

/// Who a request acts for (the principal's tenant; routes that need only
/// the tenant take this).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant(pub String);

#[derive(Debug, Clone)]
struct TokenEntry {
    tenant: String,
    token_sha256: [u8; 32],
    user: Option<String>,
    groups: Vec<String>,
    scopes: Vec<Scope>,
}

/// Maps bearer credentials to principals: static tokens
/// (`BATON_API_TOKENS`) and, when configured, OIDC JWTs.
#[derive(Debug, Clone, Default)]
pub struct TokenAuthenticator {
    entries: Vec<TokenEntry>,
    /// When set and no tokens are configured, requests without a token act
    /// for this tenant (local development only).
    anonymous_tenant: Option<String>,
    /// JWTs of the company's identity provider.
    oidc: Option<Arc<oidc::OidcVerifier>>,
}

/// Why a request did not authenticate (the 401's `details.reason`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthenticationRefusal {
    #[error("a valid `Authorization: Bearer <token>` header is required")]
    NoCredential,
    #[error("the bearer token is not one of this server's")]
    UnknownToken,
    #[error("the JWT is refused: {0}")]
    Jwt(#[from] oidc::OidcRefusal),
}

impl AuthenticationRefusal {
    /// A short code for the 401's details.
    pub fn reason(&self) -> &'static str {
        match self {
            AuthenticationRefusal::NoCredential => "no_credential",
            AuthenticationRefusal::UnknownToken => "unknown_token",
            AuthenticationRefusal::Jwt(refusal) => refusal.code(),
        }
    }
}

fn decode_hex_digest(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let mut digest = [0u8; 32];
    for (index, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(index * 2..index * 2 + 2)?, 16).ok()?;
    }
    Some(digest)
}

fn constant_time_equal(left: &[u8; 32], right: &[u8; 32]) -> bool {
    left.iter()
        .zip(right.iter())
        .fold(0u8, |difference, (a, b)| difference | (a ^ b))
        == 0
}

/// Why `BATON_API_TOKENS` cannot be read: the entry (by index) and what is
/// wrong with it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TokenConfigurationError {
    #[error(
        "BATON_API_TOKENS entry {index} is not `tenant:sha256hex[;user=…][;scopes=…][;groups=…]`"
    )]
    NotAPair { index: usize },
    #[error(
        "BATON_API_TOKENS entry {index}: the digest must be 64 hex characters (sha256 of the token)"
    )]
    NotADigest { index: usize },
    #[error("BATON_API_TOKENS entry {index}: empty tenant")]
    EmptyTenant { index: usize },
    #[error("BATON_API_TOKENS entry {index}: `{attribute}` is not one of user=, scopes=, groups=")]
    UnknownAttribute { index: usize, attribute: String },
    #[error(
        "BATON_API_TOKENS entry {index}: `{scope}` is not a scope (runs:read, runs:write, tasks:answer, approvals:decide, registry:write, schedules:write, evaluations:run, admin)"
    )]
    UnknownScope { index: usize, scope: String },
}

fn words(text: &str) -> Vec<String> {
    text.split([' ', '+'])
        .map(str::trim)
        .filter(|word| !word.is_empty())
        .map(str::to_string)
        .collect()
}

impl TokenAuthenticator {
    /// Parses `tenant:hex[;user=NAME][;scopes=S S][;groups=G G],…`. A token
    /// without `scopes=` holds `admin` (every scope), as tokens did before
    /// scopes existed. Errors name the offending entry's index.
    pub fn from_configuration(text: &str) -> Result<Self, TokenConfigurationError> {
        let mut entries = Vec::new();
        for (index, entry) in text
            .split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .enumerate()
        {
            let mut attributes = entry.split(';');
            let pair = attributes.next().unwrap_or_default();
            let (tenant, digest) = pair
                .split_once(':')
                .ok_or(TokenConfigurationError::NotAPair { index })?;
            let token_sha256 = decode_hex_digest(digest.trim())
                .ok_or(TokenConfigurationError::NotADigest { index })?;
            if tenant.trim().is_empty() {
                return Err(TokenConfigurationError::EmptyTenant { index });
            }
            let mut parsed = TokenEntry {
                tenant: tenant.trim().to_string(),
                token_sha256,
                user: None,
                groups: Vec::new(),
                scopes: vec![Scope::Admin],
            };
            for attribute in attributes.map(str::trim).filter(|text| !text.is_empty()) {
                match attribute.split_once('=') {
                    Some(("user", user)) if !user.trim().is_empty() => {
                        parsed.user = Some(user.trim().to_string());
                    }
                    Some(("groups", groups)) => parsed.groups = words(groups),
                    Some(("scopes", scopes)) => {
                        parsed.scopes = words(scopes)
                            .into_iter()
                            .map(|scope| {
                                Scope::parse(&scope)
                                    .ok_or(TokenConfigurationError::UnknownScope { index, scope })
                            })
                            .collect::<Result<_, _>>()?;
                    }
                    _ => {
                        return Err(TokenConfigurationError::UnknownAttribute {
                            index,
                            attribute: attribute.to_string(),
                        });
                    }
                }
            }
            entries.push(parsed);
        }
        Ok(TokenAuthenticator {
            entries,
            anonymous_tenant: None,
            oidc: None,
        })
    }

    /// Allows token-less requests as `tenant` when no credential of any kind
    /// is configured.
    pub fn allowing_anonymous_when_unconfigured(mut self, tenant: &str) -> Self {
        self.anonymous_tenant = Some(tenant.to_string());
        self
    }

    /// Accepts the JWTs `verifier` verifies beside the static tokens.
    pub fn with_oidc(mut self, verifier: oidc::OidcVerifier) -> Self {
        self.oidc = Some(Arc::new(verifier));
        self
    }

    /// No credential is configured and anonymous requests are allowed.
    pub fn is_anonymous(&self) -> bool {
        self.entries.is_empty() && self.oidc.is_none() && self.anonymous_tenant.is_some()
    }

    /// Whether JWTs of an identity provider are accepted.
    pub fn accepts_jwts(&self) -> bool {
        self.oidc.is_some()
    }

    /// The principal of an `Authorization` header value, if it authenticates.
    pub async fn authenticate(
        &self,
        authorization: Option<&str>,
    ) -> Result<Principal, AuthenticationRefusal> {
        if self.is_anonymous()
            && let Some(tenant) = &self.anonymous_tenant
        {
            return Ok(Principal {
                tenant: tenant.clone(),
                user: None,
                groups: Vec::new(),
                scopes: vec![Scope::Admin],
                credential: Credential::Anonymous,
            });
        }
        let token = authorization
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|token| !token.is_empty())
            .ok_or(AuthenticationRefusal::NoCredential)?;
        if let Some(verifier) = &self.oidc
            && oidc::looks_like_jwt(token)
        {
            return Ok(verifier.verify(token).await?);
        }
        self.static_principal(token)
            .ok_or(AuthenticationRefusal::UnknownToken)
    }

    fn static_principal(&self, token: &str) -> Option<Principal> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        self.entries
            .iter()
            .find(|entry| constant_time_equal(&entry.token_sha256, &digest))
            .map(|entry| Principal {
                tenant: entry.tenant.clone(),
                user: entry.user.clone(),
                groups: entry.groups.clone(),
                scopes: entry.scopes.clone(),
                credential: Credential::StaticToken,
            })
    }
}

/// Hex SHA-256 of a token: what goes into `BATON_API_TOKENS`.
pub fn token_digest_hex(token: &str) -> String {
    format!("{:x}", Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant_of(result: Result<Principal, AuthenticationRefusal>) -> Option<String> {
        result.ok().map(|principal| principal.tenant)
    }

    #[tokio::test]
    async fn tokens_map_to_their_tenant_and_nothing_else_does() {
        let configuration = format!(
            "tenant_a:{},tenant_b:{}",
            token_digest_hex("a-secret"),
            token_digest_hex("g-secret")
        );
        let authenticator = TokenAuthenticator::from_configuration(&configuration).unwrap();
        assert_eq!(
            tenant_of(authenticator.authenticate(Some("Bearer a-secret")).await),
            Some("tenant_a".into())
        );
        assert_eq!(
            tenant_of(authenticator.authenticate(Some("Bearer g-secret")).await),
            Some("tenant_b".into())
        );
        assert_eq!(
            authenticator.authenticate(Some("Bearer wrong")).await,
            Err(AuthenticationRefusal::UnknownToken)
        );
        assert_eq!(
            authenticator.authenticate(Some("a-secret")).await,
            Err(AuthenticationRefusal::NoCredential)
        );
        assert_eq!(
            authenticator.authenticate(None).await,
            Err(AuthenticationRefusal::NoCredential)
        );
        // A token configured without scopes holds every one.
        let principal = authenticator
            .authenticate(Some("Bearer a-secret"))
            .await
            .unwrap();
        assert_eq!(principal.scopes, vec![Scope::Admin]);
        assert_eq!(principal.credential, Credential::StaticToken);
    }

    #[tokio::test]
    async fn a_token_names_its_user_groups_and_scopes() {
        let configuration = format!(
            "tenant_a:{};user=ana@example.org;scopes=runs:read runs:write;groups=group_a+group_b",
            token_digest_hex("ana-secret")
        );
        let authenticator = TokenAuthenticator::from_configuration(&configuration).unwrap();
        let principal = authenticator
            .authenticate(Some("Bearer ana-secret"))
            .await
            .unwrap();
        assert_eq!(principal.user.as_deref(), Some("ana@example.org"));
        assert_eq!(principal.scopes, vec![Scope::RunsRead, Scope::RunsWrite]);
        assert_eq!(principal.groups, vec!["group_a", "group_b"]);
        assert!(!principal.holds(Scope::ApprovalsDecide));
    }

    #[tokio::test]
    async fn anonymous_only_when_no_tokens_are_configured() {
        let anonymous = TokenAuthenticator::default().allowing_anonymous_when_unconfigured("local");
        assert_eq!(
            tenant_of(anonymous.authenticate(None).await),
            Some("local".into())
        );
        let configured =
            TokenAuthenticator::from_configuration(&format!("t:{}", token_digest_hex("x")))
                .unwrap()
                .allowing_anonymous_when_unconfigured("local");
        assert!(configured.authenticate(None).await.is_err());
        assert!(
            TokenAuthenticator::default()
                .authenticate(None)
                .await
                .is_err()
        );
    }

    #[test]
    fn malformed_configuration_names_the_entry() {
        let error = TokenAuthenticator::from_configuration("tenant_a:nothex").unwrap_err();
        assert_eq!(error, TokenConfigurationError::NotADigest { index: 0 });
        assert!(error.to_string().contains("entry 0"), "{error}");
        let digest = token_digest_hex("x");
        let error =
            TokenAuthenticator::from_configuration(&format!("a:{digest};scopes=runs:delete"))
                .unwrap_err();
        assert!(error.to_string().contains("`runs:delete`"), "{error}");
        let error =
            TokenAuthenticator::from_configuration(&format!("a:{digest},b:{digest};colour=red"))
                .unwrap_err();
        assert!(error.to_string().contains("entry 1"), "{error}");
    }
}
