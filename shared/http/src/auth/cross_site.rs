//! What a web page on another site may not do to this API: the checks that
//! run before authentication on every route, because a browser attaches no
//! token of ours to a page's request, yet an anonymous `baton serve` needs
//! none.
//!
//! - A state-changing request (`POST`, `PUT`, `PATCH`, `DELETE`) carrying a
//!   body must say `Content-Type: application/json` (or a `+json` type):
//!   a form or `text/plain` post, which a browser sends cross-site without
//!   asking the server first, is a 415 `unsupported_media_type`.
//! - A state-changing request from a page (`Origin`, or `Sec-Fetch-Site:
//!   cross-site`) is a 403 `cross_origin_refused` unless the page's origin
//!   is this server's own (its `Host`) or one the operator allowed
//!   (`BATON_ALLOWED_ORIGINS`).
//! - On an anonymous server (no tokens: the local default), every request's
//!   `Host` must name this machine (`localhost`, `127.0.0.1`, `[::1]`), the
//!   public URL's host, or an allowed origin's host: a page that rebinds its
//!   own name to 127.0.0.1 (DNS rebinding) is then refused with a 403
//!   `host_refused`, reads included.
//!
//! Requests from programs (curl, the typed clients, other services) send no
//! `Origin` and are only held to the content type.

use axum::http::{HeaderMap, Method, StatusCode, header};
use serde_json::json;

use crate::error::ApiError;

/// Hosts an anonymous server answers to besides the configured ones.
const LOOPBACK_HOSTS: &[&str] = &["localhost", "127.0.0.1", "[::1]", "::1"];

fn is_state_changing(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

fn header_text(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || header_text(headers, header::CONTENT_LENGTH)
            .and_then(|length| length.trim().parse::<u64>().ok())
            .is_some_and(|length| length > 0)
}

/// `application/json`, `application/json; charset=utf-8`, or any
/// `application/*+json`.
pub fn is_json_content_type(value: &str) -> bool {
    let essence = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// `host[:port]` of an origin or URL (`https://a.example:8443/x` gives
/// `a.example:8443`), lower-cased; `None` for `null` or no scheme.
fn authority_of(url: &str) -> Option<String> {
    let (_, rest) = url.trim().split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    (!authority.is_empty()).then(|| authority.to_ascii_lowercase())
}

/// The host of an authority, without its port (`[::1]:8080` gives `[::1]`).
fn host_of(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority
            .split_once(']')
            .map_or(authority, |(host, _)| &authority[..host.len() + 1]);
    }
    authority.split(':').next().unwrap_or(authority)
}

/// The origins and hosts this server trusts, from its settings.
#[derive(Debug, Clone, Default)]
pub struct TrustedOrigins {
    /// Authorities (`host[:port]`) of the allowed page origins.
    allowed_origin_authorities: Vec<String>,
    /// Hosts an anonymous server answers to besides loopback.
    extra_hosts: Vec<String>,
}

impl TrustedOrigins {
    /// `allowed_origins`: `BATON_ALLOWED_ORIGINS`' entries; `public_url`:
    /// `BATON_PUBLIC_URL`.
    pub fn new(allowed_origins: &[String], public_url: Option<&str>) -> Self {
        let allowed_origin_authorities: Vec<String> = allowed_origins
            .iter()
            .filter_map(|origin| authority_of(origin))
            .collect();
        let mut extra_hosts: Vec<String> = allowed_origin_authorities
            .iter()
            .map(|authority| host_of(authority).to_string())
            .collect();
        if let Some(authority) = public_url.and_then(authority_of) {
            extra_hosts.push(host_of(&authority).to_string());
        }
        TrustedOrigins {
            allowed_origin_authorities,
            extra_hosts,
        }
    }

    fn allows_origin(&self, origin_authority: &str, own_authority: Option<&str>) -> bool {
        own_authority.is_some_and(|own| own.eq_ignore_ascii_case(origin_authority))
            || self
                .allowed_origin_authorities
                .iter()
                .any(|allowed| allowed == origin_authority)
    }

    fn allows_host(&self, host: &str) -> bool {
        LOOPBACK_HOSTS.contains(&host) || self.extra_hosts.iter().any(|extra| extra == host)
    }
}

/// Why a request is refused before authentication, if it is.
/// `body_follows`: a body the headers may not announce (HTTP/2, a request
/// built in process); `anonymous`: the server takes no credential.
pub(crate) fn refusal(
    headers: &HeaderMap,
    method: &Method,
    body_follows: bool,
    anonymous: bool,
    trusted: &TrustedOrigins,
) -> Option<ApiError> {
    let own_authority = header_text(headers, header::HOST).map(str::to_ascii_lowercase);
    if anonymous
        && let Some(own) = own_authority.as_deref()
        && !trusted.allows_host(host_of(own))
    {
        return Some(
            ApiError::new(
                StatusCode::FORBIDDEN,
                "host_refused",
                format!(
                    "this server takes no tokens, so it answers only to this machine's names; `{own}` is not one (set BATON_PUBLIC_URL or BATON_ALLOWED_ORIGINS, or configure tokens)"
                ),
            )
            .with_details(json!({"host": own})),
        );
    }
    if !is_state_changing(method) {
        return None;
    }
    if let Some(origin) = header_text(headers, header::ORIGIN) {
        let allowed = authority_of(origin)
            .is_some_and(|authority| trusted.allows_origin(&authority, own_authority.as_deref()));
        if !allowed {
            return Some(
                ApiError::new(
                    StatusCode::FORBIDDEN,
                    "cross_origin_refused",
                    format!(
                        "a page at `{origin}` may not change anything here; only this server's own pages and the origins in BATON_ALLOWED_ORIGINS may"
                    ),
                )
                .with_details(json!({"origin": origin})),
            );
        }
    } else if header_text(headers, header::HeaderName::from_static("sec-fetch-site"))
        .is_some_and(|site| site.eq_ignore_ascii_case("cross-site"))
    {
        return Some(ApiError::new(
            StatusCode::FORBIDDEN,
            "cross_origin_refused",
            "a page on another site may not change anything here",
        ));
    }
    if body_follows || has_body(headers) {
        let content_type = header_text(headers, header::CONTENT_TYPE);
        if !content_type.is_some_and(is_json_content_type) {
            let named = content_type.unwrap_or("none");
            return Some(
                ApiError::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "unsupported_media_type",
                    format!(
                        "a request that changes something takes a JSON body with `Content-Type: application/json`; this one says `{named}`"
                    ),
                )
                .with_details(json!({"path": "$", "contentType": named})),
            );
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types_are_recognised() {
        assert!(is_json_content_type("application/json"));
        assert!(is_json_content_type("Application/JSON; charset=utf-8"));
        assert!(is_json_content_type("application/merge-patch+json"));
        assert!(!is_json_content_type("text/plain"));
        assert!(!is_json_content_type("application/x-www-form-urlencoded"));
        assert!(!is_json_content_type("multipart/form-data; boundary=x"));
        assert!(!is_json_content_type("text/json+html"));
    }

    #[test]
    fn authorities_and_hosts_are_read_from_origins() {
        assert_eq!(
            authority_of("https://A.example:8443/x?y").as_deref(),
            Some("a.example:8443")
        );
        assert_eq!(authority_of("null"), None);
        assert_eq!(host_of("[::1]:8080"), "[::1]");
        assert_eq!(host_of("127.0.0.1:8080"), "127.0.0.1");
        assert_eq!(host_of("localhost"), "localhost");
    }

    #[test]
    fn only_own_and_allowed_origins_pass() {
        let trusted = TrustedOrigins::new(
            &["https://viewer.example".to_string()],
            Some("https://api.example"),
        );
        assert!(trusted.allows_origin("127.0.0.1:8080", Some("127.0.0.1:8080")));
        assert!(trusted.allows_origin("viewer.example", Some("api.example")));
        assert!(!trusted.allows_origin("evil.example", Some("api.example")));
        assert!(!trusted.allows_origin("127.0.0.1:9090", Some("127.0.0.1:8080")));
        assert!(trusted.allows_host("api.example"));
        assert!(trusted.allows_host("viewer.example"));
        assert!(trusted.allows_host("localhost"));
        assert!(!trusted.allows_host("rebound.example"));
    }
}
