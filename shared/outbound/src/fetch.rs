//! The guarded client: each hop is checked and its connection pinned to the
//! checked address; redirects are followed here (never by the HTTP client)
//! and checked again; the body is read up to the size cap; the whole
//! exchange is bounded by the policy's timeout.

use std::sync::Arc;

use futures_util::StreamExt;
use reqwest::header::{HeaderMap, LOCATION};
use reqwest::{Method, StatusCode, Url};

use crate::guard::{OutboundPolicy, OutboundRefusal, Resolver, check};

/// What came back.
#[derive(Debug, Clone)]
pub struct GuardedResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    /// The URL that answered (after redirects).
    pub final_url: Url,
}

/// A response whose body is read as it arrives ([`GuardedClient::open`]).
pub struct GuardedStream {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub final_url: Url,
    pub body: std::pin::Pin<
        Box<dyn futures_util::Stream<Item = Result<bytes::Bytes, OutboundRefusal>> + Send>,
    >,
}

/// Sends requests under an [`OutboundPolicy`].
pub struct GuardedClient {
    policy: OutboundPolicy,
    resolver: Arc<dyn Resolver>,
}

impl GuardedClient {
    pub fn new(policy: OutboundPolicy, resolver: Arc<dyn Resolver>) -> Self {
        GuardedClient { policy, resolver }
    }

    /// `GET url` asking for `accept` (a JSON document, a key set): for
    /// callers that need no other verb or header (and so no HTTP client
    /// types of their own).
    pub async fn get(&self, url: &str, accept: &str) -> Result<GuardedResponse, OutboundRefusal> {
        let mut headers = HeaderMap::new();
        if let Ok(value) = reqwest::header::HeaderValue::from_str(accept) {
            headers.insert(reqwest::header::ACCEPT, value);
        }
        self.send(Method::GET, url, headers, None).await
    }

    /// Sends `method url` with `headers` and `body`. A redirect is followed
    /// as a GET without the body (303, and 301/302 after a non-GET) or as
    /// the same request (307/308), each hop checked like the first.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
    ) -> Result<GuardedResponse, OutboundRefusal> {
        let timeout = self.policy.timeout;
        tokio::time::timeout(timeout, self.follow(method, url, headers, body))
            .await
            .map_err(|_| OutboundRefusal::Timeout(timeout))?
    }

    async fn follow(
        &self,
        method: Method,
        url: &str,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
    ) -> Result<GuardedResponse, OutboundRefusal> {
        let (response, final_url) = self.connect(method, url, headers, body).await?;
        let status = response.status();
        let response_headers = response.headers().clone();
        let mut collected = Vec::new();
        let mut stream = Box::pin(self.capped_body(response)?);
        while let Some(chunk) = stream.next().await {
            collected.extend_from_slice(&chunk?);
        }
        Ok(GuardedResponse {
            status,
            headers: response_headers,
            body: collected,
            final_url,
        })
    }

    /// Sends like [`Self::send`] but answers as soon as the head arrives,
    /// with the body as a stream (for server-sent events): the size cap
    /// holds over the whole body, and the caller bounds the time.
    pub async fn open(
        &self,
        method: Method,
        url: &str,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
    ) -> Result<GuardedStream, OutboundRefusal> {
        let timeout = self.policy.timeout;
        let (response, final_url) =
            tokio::time::timeout(timeout, self.connect(method, url, headers, body))
                .await
                .map_err(|_| OutboundRefusal::Timeout(timeout))??;
        Ok(GuardedStream {
            status: response.status(),
            headers: response.headers().clone(),
            final_url,
            body: Box::pin(self.capped_body(response)?),
        })
    }

    /// The body's chunks, refused once they pass the size cap.
    fn capped_body(
        &self,
        response: reqwest::Response,
    ) -> Result<
        impl futures_util::Stream<Item = Result<bytes::Bytes, OutboundRefusal>> + Send + use<>,
        OutboundRefusal,
    > {
        let limit = self.policy.max_response_bytes;
        if response
            .content_length()
            .is_some_and(|length| length > limit as u64)
        {
            return Err(OutboundRefusal::ResponseTooLarge(limit));
        }
        let mut read = 0_usize;
        Ok(response.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(|error| OutboundRefusal::Transport(with_causes(&error)))?;
            read += chunk.len();
            if read > limit {
                return Err(OutboundRefusal::ResponseTooLarge(limit));
            }
            Ok(chunk)
        }))
    }

    /// Follows redirects (each hop checked and pinned) to the response
    /// that is not one; its head read, its body not yet.
    async fn connect(
        &self,
        mut method: Method,
        url: &str,
        headers: HeaderMap,
        mut body: Option<Vec<u8>>,
    ) -> Result<(reqwest::Response, Url), OutboundRefusal> {
        let mut next = url.to_string();
        for _ in 0..=self.policy.max_redirects {
            let target = check(&next, &self.policy, self.resolver.as_ref()).await?;
            // Pinned: the client connects to the checked address only.
            let client = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .resolve(&target.host, target.address)
                .no_proxy()
                .build()
                .map_err(|error| OutboundRefusal::Transport(with_causes(&error)))?;
            let mut request = client
                .request(method.clone(), target.url.clone())
                .headers(headers.clone());
            if let Some(bytes) = &body {
                request = request.body(bytes.clone());
            }
            let response = request
                .send()
                .await
                .map_err(|error| OutboundRefusal::Transport(with_causes(&error)))?;
            let status = response.status();
            if status.is_redirection() {
                let location = response
                    .headers()
                    .get(LOCATION)
                    .and_then(|value| value.to_str().ok())
                    .ok_or(OutboundRefusal::BadRedirect)?;
                let resolved = target
                    .url
                    .join(location)
                    .map_err(|_| OutboundRefusal::BadRedirect)?;
                if status == StatusCode::SEE_OTHER
                    || (matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND)
                        && method != Method::GET)
                {
                    method = Method::GET;
                    body = None;
                }
                next = resolved.to_string();
                continue;
            }
            return Ok((response, target.url));
        }
        Err(OutboundRefusal::TooManyRedirects(self.policy.max_redirects))
    }
}

/// `error` with its causes (reqwest's own text hides "connection refused").
/// This crate depends on no other Baton crate, so it keeps its own copy of
/// `baton_core::basics::error::with_causes`.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
