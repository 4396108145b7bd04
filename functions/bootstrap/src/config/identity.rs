//! The variables of who may reach the API: the identity provider whose
//! JWTs it accepts (`BATON_OIDC_*`) and the origins pages may call it from
//! (`BATON_ALLOWED_ORIGINS`, `BATON_VIEWER_API_ORIGINS`).

use super::{VariableReader, non_empty};
use crate::StartupError;

/// Sign-in with the company's identity provider: OIDC JWTs accepted beside
/// the static tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcConfiguration {
    /// `BATON_OIDC_ISSUER`: the `iss` every token carries.
    pub issuer: String,
    /// `BATON_OIDC_AUDIENCE`: the `aud` (comma separated: any of them).
    pub audience: String,
    /// `BATON_OIDC_JWKS_URL`; unset: the issuer's discovery document names it.
    pub jwks_url: Option<String>,
    /// `BATON_OIDC_TENANT_CLAIM` (default `tenant`).
    pub tenant_claim: String,
    /// `BATON_OIDC_TENANT`: the tenant of a token without the tenant claim.
    pub fixed_tenant: Option<String>,
    /// `BATON_OIDC_USER_CLAIM` (default `sub`).
    pub user_claim: String,
    /// `BATON_OIDC_GROUPS_CLAIM` (default `groups`).
    pub groups_claim: String,
    /// `BATON_OIDC_SCOPES_CLAIM` (default `scope`).
    pub scopes_claim: String,
}

impl OidcConfiguration {
    pub(super) fn from_variables(read: VariableReader<'_>) -> Result<Option<Self>, StartupError> {
        let issuer = non_empty(read, "BATON_OIDC_ISSUER");
        let audience = non_empty(read, "BATON_OIDC_AUDIENCE");
        let (issuer, audience) = match (issuer, audience) {
            (None, None) => return Ok(None),
            (Some(issuer), Some(audience)) => (issuer, audience),
            _ => {
                return Err(StartupError(
                    "BATON_OIDC_ISSUER and BATON_OIDC_AUDIENCE go together: set both to accept the identity provider's JWTs, or neither".into(),
                ));
            }
        };
        if !issuer.starts_with("https://") && !issuer.starts_with("http://") {
            return Err(StartupError(format!(
                "BATON_OIDC_ISSUER: `{issuer}` is not a URL (https://…)"
            )));
        }
        let claim = |name: &str, default: &str| {
            non_empty(read, name).unwrap_or_else(|| default.to_string())
        };
        Ok(Some(OidcConfiguration {
            issuer,
            audience,
            jwks_url: non_empty(read, "BATON_OIDC_JWKS_URL"),
            tenant_claim: claim("BATON_OIDC_TENANT_CLAIM", "tenant"),
            fixed_tenant: non_empty(read, "BATON_OIDC_TENANT"),
            user_claim: claim("BATON_OIDC_USER_CLAIM", "sub"),
            groups_claim: claim("BATON_OIDC_GROUPS_CLAIM", "groups"),
            scopes_claim: claim("BATON_OIDC_SCOPES_CLAIM", "scope"),
        }))
    }
}

/// A list of origins (`scheme://host[:port]`, comma or space separated);
/// an entry with a path, a query or no scheme names the variable.
pub(super) fn origin_list(
    read: VariableReader<'_>,
    name: &str,
) -> Result<Vec<String>, StartupError> {
    let Some(text) = non_empty(read, name) else {
        return Ok(Vec::new());
    };
    text.split([',', ' '])
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            normalised_origin(entry).ok_or_else(|| {
                StartupError(format!(
                    "{name}: `{entry}` is not an origin (scheme://host[:port], no path)"
                ))
            })
        })
        .collect()
}

/// `scheme://host[:port]` (http or https), lower-cased, without a trailing
/// slash; `None` for anything with a path, a query, user info or another
/// scheme.
fn normalised_origin(text: &str) -> Option<String> {
    let text = text.trim().trim_end_matches('/');
    let (scheme, authority) = text.split_once("://")?;
    let well_formed = matches!(scheme, "http" | "https")
        && !authority.is_empty()
        && !authority.contains(['/', '?', '#', '@', '"', '\'', '<', '>', '\\']);
    well_formed.then(|| format!("{scheme}://{}", authority.to_ascii_lowercase()))
}
