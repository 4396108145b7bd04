//! Checking one URL: scheme, credentials, host, every resolved address; the
//! result names the address to pin the connection to.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use async_trait::async_trait;
use reqwest::Url;
use url::Host;

use crate::address::{AddressClass, refusal_of};

/// What outbound requests may do.
#[derive(Debug, Clone)]
pub struct OutboundPolicy {
    /// Hosts reachable over plain http and exempt from the address check:
    /// for local development only (e.g. `localhost`, `127.0.0.1`).
    pub http_allowed_hosts: Vec<String>,
    pub max_response_bytes: usize,
    /// For the whole exchange, each hop included.
    pub timeout: Duration,
    pub max_redirects: usize,
}

impl Default for OutboundPolicy {
    fn default() -> Self {
        OutboundPolicy {
            http_allowed_hosts: Vec::new(),
            max_response_bytes: 1024 * 1024,
            timeout: Duration::from_secs(10),
            max_redirects: 5,
        }
    }
}

impl OutboundPolicy {
    /// The allow-list from a setting's value (`host,host,…`).
    pub fn with_http_allowed_hosts(mut self, setting: &str) -> Self {
        self.http_allowed_hosts = setting
            .split(',')
            .map(|host| host.trim().to_ascii_lowercase())
            .filter(|host| !host.is_empty())
            .collect();
        self
    }

    fn allows_http_to(&self, host: &str) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        self.http_allowed_hosts
            .iter()
            .any(|allowed| allowed.trim_start_matches('[').trim_end_matches(']') == host)
    }
}

/// Why an outbound request was not made (or not finished).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OutboundRefusal {
    #[error("not a URL: {0}")]
    BadUrl(String),
    #[error("scheme `{0}` is not allowed (https only)")]
    Scheme(String),
    #[error(
        "http to `{0}` is not allowed: use https, or allow-list the host for local development"
    )]
    HttpNotAllowed(String),
    #[error("credentials in the URL are not allowed")]
    Credentials,
    #[error("`{host}` resolves to no address: {reason}")]
    NoAddress { host: String, reason: String },
    #[error("`{host}` resolves to {address}, a {} address", class.as_str())]
    Address {
        host: String,
        address: IpAddr,
        class: AddressClass,
    },
    #[error("more than {0} redirects")]
    TooManyRedirects(usize),
    #[error("a redirect without a usable Location")]
    BadRedirect,
    #[error("the response is larger than {0} bytes")]
    ResponseTooLarge(usize),
    #[error("no complete response within {0:?}")]
    Timeout(Duration),
    #[error("transport: {0}")]
    Transport(String),
}

/// Name resolution (the system's, or a test double).
#[async_trait]
pub trait Resolver: Send + Sync {
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<IpAddr>, ResolveError>;
}

/// Why a name did not resolve (the resolver's own words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ResolveError(pub String);

/// The operating system's resolver.
pub struct SystemResolver;

#[async_trait]
impl Resolver for SystemResolver {
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<IpAddr>, ResolveError> {
        tokio::net::lookup_host((host, port))
            .await
            .map(|addresses| addresses.map(|address| address.ip()).collect())
            .map_err(|error| ResolveError(error.to_string()))
    }
}

/// A URL that passed the check, with the address to connect to.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedTarget {
    pub url: Url,
    /// The host as written (for the `Host` header and TLS name).
    pub host: String,
    pub address: SocketAddr,
    /// The host is allow-listed (local development): not address-checked.
    pub allow_listed: bool,
}

/// Checks `url` under `policy`, resolving its host with `resolver`.
pub async fn check(
    url: &str,
    policy: &OutboundPolicy,
    resolver: &dyn Resolver,
) -> Result<CheckedTarget, OutboundRefusal> {
    let parsed = Url::parse(url).map_err(|error| OutboundRefusal::BadUrl(error.to_string()))?;
    let host = parsed
        .host()
        .ok_or_else(|| OutboundRefusal::BadUrl("no host".into()))?;
    let host_text = match &host {
        Host::Domain(domain) => domain.to_ascii_lowercase(),
        Host::Ipv4(v4) => v4.to_string(),
        Host::Ipv6(v6) => v6.to_string(),
    };
    let allow_listed = policy.allows_http_to(&host_text);
    match parsed.scheme() {
        "https" => {}
        "http" if allow_listed => {}
        "http" => return Err(OutboundRefusal::HttpNotAllowed(host_text)),
        other => return Err(OutboundRefusal::Scheme(other.to_string())),
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(OutboundRefusal::Credentials);
    }
    let port = parsed
        .port_or_known_default()
        .ok_or_else(|| OutboundRefusal::BadUrl("no port".into()))?;
    let addresses =
        match host {
            Host::Ipv4(v4) => vec![IpAddr::V4(v4)],
            Host::Ipv6(v6) => vec![IpAddr::V6(v6)],
            Host::Domain(domain) => resolver.resolve(domain, port).await.map_err(|reason| {
                OutboundRefusal::NoAddress {
                    host: host_text.clone(),
                    reason: reason.to_string(),
                }
            })?,
        };
    let Some(first) = addresses.first().copied() else {
        return Err(OutboundRefusal::NoAddress {
            host: host_text,
            reason: "no records".into(),
        });
    };
    if !allow_listed {
        // Every answer must be acceptable: one bad record refuses the host.
        for address in &addresses {
            if let Some(class) = refusal_of(*address) {
                return Err(OutboundRefusal::Address {
                    host: host_text,
                    address: *address,
                    class,
                });
            }
        }
    }
    Ok(CheckedTarget {
        url: parsed,
        host: host_text,
        address: SocketAddr::new(first, port),
        allow_listed,
    })
}
