//! Signed webhooks: a JSON body POSTed through the guarded client (the URL
//! checked, the connection pinned, no redirect followed), signed with
//! HMAC-SHA256 over `{timestamp}.{body}` and sent as
//! `X-Baton-Signature: t={unix seconds},v1={hex}`, with the event type
//! (`X-Baton-Event`) and a delivery id stable across retries
//! (`X-Baton-Delivery`). A receiver recomputes the signature with the
//! shared secret ([`verify_signature`]), refuses old timestamps, and
//! deduplicates by delivery id.

use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use reqwest::Method;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use sha2::Sha256;

use crate::fetch::GuardedClient;
use crate::guard::{OutboundPolicy, OutboundRefusal, Resolver};

pub const SIGNATURE_HEADER: &str = "x-baton-signature";
pub const EVENT_HEADER: &str = "x-baton-event";
pub const DELIVERY_HEADER: &str = "x-baton-delivery";

/// A webhook receiver's time limit for one delivery.
pub const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);

fn mac(secret: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
    match Hmac::<Sha256>::new_from_slice(secret) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts keys of every length"),
    }
}

/// Why a receiver refuses a delivery's signature.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SignatureRefusal {
    #[error("`{0}` is not `t=…,v1=…`")]
    Malformed(String),
    #[error("timestamp {timestamp} is too far from now ({now})")]
    TooOld { timestamp: u64, now: u64 },
    #[error("the signature does not match the body")]
    Mismatch,
}

/// Why a webhook was not delivered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WebhookFailure {
    /// Nothing is sent unsigned.
    #[error("no webhook secret is configured (BATON_WEBHOOK_SECRET): nothing is sent unsigned")]
    NoSecret,
    /// A header value (event type, delivery id) cannot be sent.
    #[error("`{value}` cannot be sent as the {header} header")]
    Header { header: &'static str, value: String },
    /// The outbound guard refused the URL, or the request did not finish.
    #[error("{url}: {refusal}")]
    Refused {
        url: String,
        refusal: OutboundRefusal,
    },
    /// The receiver answered, but not with a 2xx.
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
}

/// `t={timestamp},v1={hex(hmac_sha256(secret, "{timestamp}.{body}"))}`.
pub fn signature_header(secret: &[u8], timestamp: u64, body: &[u8]) -> String {
    let mut signer = mac(secret);
    signer.update(format!("{timestamp}.").as_bytes());
    signer.update(body);
    let digest = signer.finalize().into_bytes();
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("t={timestamp},v1={hex}")
}

/// What a receiver checks: the header's form, the signature (in constant
/// time), and that the timestamp is within `tolerance` of `now`.
pub fn verify_signature(
    secret: &[u8],
    header: &str,
    body: &[u8],
    now: u64,
    tolerance: Duration,
) -> Result<(), SignatureRefusal> {
    let mut timestamp = None;
    let mut signature = None;
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", value)) => timestamp = value.parse::<u64>().ok(),
            Some(("v1", value)) => signature = Some(value.to_string()),
            _ => {}
        }
    }
    let (Some(timestamp), Some(signature)) = (timestamp, signature) else {
        return Err(SignatureRefusal::Malformed(header.to_string()));
    };
    if now.abs_diff(timestamp) > tolerance.as_secs() {
        return Err(SignatureRefusal::TooOld { timestamp, now });
    }
    let bytes: Vec<u8> = (0..signature.len())
        .step_by(2)
        .filter_map(|at| signature.get(at..at + 2))
        .filter_map(|pair| u8::from_str_radix(pair, 16).ok())
        .collect();
    let mut checker = mac(secret);
    checker.update(format!("{timestamp}.").as_bytes());
    checker.update(body);
    checker
        .verify_slice(&bytes)
        .map_err(|_| SignatureRefusal::Mismatch)
}

/// Posts signed JSON bodies.
pub struct WebhookSender {
    client: GuardedClient,
    secret: Option<Vec<u8>>,
}

impl WebhookSender {
    /// `secret` signs every body; without one nothing is sent (an unsigned
    /// webhook cannot be told from a forged one).
    pub fn new(
        http_allowed_hosts: &str,
        resolver: Arc<dyn Resolver>,
        secret: Option<String>,
    ) -> Self {
        let policy = OutboundPolicy {
            timeout: WEBHOOK_TIMEOUT,
            max_redirects: 0,
            max_response_bytes: 64 * 1024,
            ..OutboundPolicy::default()
        }
        .with_http_allowed_hosts(http_allowed_hosts);
        WebhookSender {
            client: GuardedClient::new(policy, resolver),
            secret: secret
                .filter(|secret| !secret.is_empty())
                .map(String::into_bytes),
        }
    }

    /// One delivery attempt: `Ok(status)` for a 2xx, else why not.
    pub async fn post(
        &self,
        url: &str,
        event_type: &str,
        delivery_id: &str,
        body: &[u8],
        now_unix_seconds: u64,
    ) -> Result<u16, WebhookFailure> {
        let Some(secret) = &self.secret else {
            return Err(WebhookFailure::NoSecret);
        };
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let signed = signature_header(secret, now_unix_seconds, body);
        for (name, value) in [
            (SIGNATURE_HEADER, signed.as_str()),
            (EVENT_HEADER, event_type),
            (DELIVERY_HEADER, delivery_id),
        ] {
            let value = HeaderValue::from_str(value).map_err(|_| WebhookFailure::Header {
                header: name,
                value: value.to_string(),
            })?;
            headers.insert(HeaderName::from_static(name), value);
        }
        let response = self
            .client
            .send(Method::POST, url, headers, Some(body.to_vec()))
            .await
            .map_err(|refusal| WebhookFailure::Refused {
                url: url.to_string(),
                refusal,
            })?;
        let status = response.status.as_u16();
        if response.status.is_success() {
            Ok(status)
        } else {
            Err(WebhookFailure::Status {
                url: url.to_string(),
                status,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_and_a_changed_byte_or_an_old_timestamp_does_not() {
        let header = signature_header(b"s3cret", 1_700_000_000, b"{\"a\":1}");
        assert!(header.starts_with("t=1700000000,v1="));
        let tolerance = Duration::from_secs(300);
        assert_eq!(
            verify_signature(b"s3cret", &header, b"{\"a\":1}", 1_700_000_010, tolerance),
            Ok(())
        );
        assert_eq!(
            verify_signature(b"s3cret", &header, b"{\"a\":2}", 1_700_000_010, tolerance),
            Err(SignatureRefusal::Mismatch)
        );
        assert!(
            verify_signature(b"other", &header, b"{\"a\":1}", 1_700_000_010, tolerance).is_err()
        );
        assert_eq!(
            verify_signature(b"s3cret", &header, b"{\"a\":1}", 1_700_001_000, tolerance),
            Err(SignatureRefusal::TooOld {
                timestamp: 1_700_000_000,
                now: 1_700_001_000
            })
        );
        assert_eq!(
            verify_signature(b"s3cret", "v1=00", b"{}", 0, tolerance),
            Err(SignatureRefusal::Malformed("v1=00".into()))
        );
    }
}
