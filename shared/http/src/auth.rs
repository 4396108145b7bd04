//! Bearer-token authentication. Tokens are configured as
//! `tenant:sha256-hex-of-token` pairs (`BATON_API_TOKENS`), so plain tokens
//! never sit in configuration or logs.

use sha2::{Digest, Sha256};

/// Who a request acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant(pub String);

#[derive(Debug, Clone)]
struct TokenEntry {
    tenant: String,
    token_sha256: [u8; 32],
}

/// Maps bearer tokens to tenants.
#[derive(Debug, Clone, Default)]
pub struct TokenAuthenticator {
    entries: Vec<TokenEntry>,
    /// When set and no tokens are configured, requests without a token act
    /// for this tenant (local development only).
    anonymous_tenant: Option<String>,
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
    #[error("BATON_API_TOKENS entry {index} is not `tenant:sha256hex`")]
    NotAPair { index: usize },
    #[error(
        "BATON_API_TOKENS entry {index}: the digest must be 64 hex characters (sha256 of the token)"
    )]
    NotADigest { index: usize },
    #[error("BATON_API_TOKENS entry {index}: empty tenant")]
    EmptyTenant { index: usize },
}

impl TokenAuthenticator {
    /// Parses `tenant:hex,tenant:hex`. Errors name the offending entry's index.
    pub fn from_configuration(text: &str) -> Result<Self, TokenConfigurationError> {
        let mut entries = Vec::new();
        for (index, entry) in text
            .split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .enumerate()
        {
            let (tenant, digest) = entry
                .split_once(':')
                .ok_or(TokenConfigurationError::NotAPair { index })?;
            let token_sha256 = decode_hex_digest(digest.trim())
                .ok_or(TokenConfigurationError::NotADigest { index })?;
            if tenant.trim().is_empty() {
                return Err(TokenConfigurationError::EmptyTenant { index });
            }
            entries.push(TokenEntry {
                tenant: tenant.trim().to_string(),
                token_sha256,
            });
        }
        Ok(TokenAuthenticator {
            entries,
            anonymous_tenant: None,
        })
    }

    /// Allows token-less requests as `tenant` when no tokens are configured.
    pub fn allowing_anonymous_when_unconfigured(mut self, tenant: &str) -> Self {
        self.anonymous_tenant = Some(tenant.to_string());
        self
    }

    pub fn is_anonymous(&self) -> bool {
        self.entries.is_empty() && self.anonymous_tenant.is_some()
    }

    /// The tenant for an `Authorization` header value, if it authenticates.
    pub fn authenticate(&self, authorization: Option<&str>) -> Option<Tenant> {
        if self.entries.is_empty() {
            return self.anonymous_tenant.clone().map(Tenant);
        }
        let token = authorization?.strip_prefix("Bearer ")?.trim();
        if token.is_empty() {
            return None;
        }
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        self.entries
            .iter()
            .find(|entry| constant_time_equal(&entry.token_sha256, &digest))
            .map(|entry| Tenant(entry.tenant.clone()))
    }
}

/// Hex SHA-256 of a token: what goes into `BATON_API_TOKENS`.
pub fn token_digest_hex(token: &str) -> String {
    format!("{:x}", Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_map_to_their_tenant_and_nothing_else_does() {
        let configuration = format!(
            "tenant_a:{},tenant_b:{}",
            token_digest_hex("a-secret"),
            token_digest_hex("g-secret")
        );
        let authenticator = TokenAuthenticator::from_configuration(&configuration).unwrap();
        assert_eq!(
            authenticator.authenticate(Some("Bearer a-secret")),
            Some(Tenant("tenant_a".into()))
        );
        assert_eq!(
            authenticator.authenticate(Some("Bearer g-secret")),
            Some(Tenant("tenant_b".into()))
        );
        assert_eq!(authenticator.authenticate(Some("Bearer wrong")), None);
        assert_eq!(authenticator.authenticate(Some("a-secret")), None);
        assert_eq!(authenticator.authenticate(None), None);
    }

    #[test]
    fn anonymous_only_when_no_tokens_are_configured() {
        let anonymous = TokenAuthenticator::default().allowing_anonymous_when_unconfigured("local");
        assert_eq!(anonymous.authenticate(None), Some(Tenant("local".into())));
        let configured =
            TokenAuthenticator::from_configuration(&format!("t:{}", token_digest_hex("x")))
                .unwrap()
                .allowing_anonymous_when_unconfigured("local");
        assert_eq!(configured.authenticate(None), None);
        assert_eq!(TokenAuthenticator::default().authenticate(None), None);
    }

    #[test]
    fn malformed_configuration_names_the_entry() {
        let error = TokenAuthenticator::from_configuration("tenant_a:nothex").unwrap_err();
        assert_eq!(error, TokenConfigurationError::NotADigest { index: 0 });
        assert!(error.to_string().contains("entry 0"), "{error}");
    }
}
