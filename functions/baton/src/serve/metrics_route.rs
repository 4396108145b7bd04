//! `baton serve`'s `GET /metrics` (Prometheus text): behind a token of its
//! own (`BATON_METRICS_TOKEN`, a SHA-256 hex digest like the API's), never
//! a tenant's. Without one it is open only while the API is anonymous
//! (local development); once the API has tokens, a request is refused with
//! a 401 that says what to set. The counters name the registry files'
//! capabilities only (`RunCounters::naming_only`).

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use baton_runtime::observe::telemetry::RunCounters;

/// Who may read `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetricsAccess {
    /// Anyone (the API is anonymous and no metrics token is set).
    Open,
    /// The bearer of the token whose SHA-256 hex digest this is.
    Token(String),
    /// No one: the API has tokens and no metrics token is set.
    Refused,
}

impl MetricsAccess {
    pub fn of(metrics_token_digest: Option<&str>, api_is_anonymous: bool) -> Self {
        match (metrics_token_digest, api_is_anonymous) {
            (Some(digest), _) => MetricsAccess::Token(digest.to_string()),
            (None, true) => MetricsAccess::Open,
            (None, false) => MetricsAccess::Refused,
        }
    }

    /// Whether a request with `headers` may read the counters.
    fn admits(&self, headers: &HeaderMap) -> bool {
        match self {
            MetricsAccess::Open => true,
            MetricsAccess::Refused => false,
            MetricsAccess::Token(digest) => headers
                .get(header::AUTHORIZATION)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.strip_prefix("Bearer "))
                .is_some_and(|token| baton_http::auth::token_digest_hex(token.trim()) == *digest),
        }
    }
}

/// The route, answering the counters' text or a JSON 401.
pub fn metrics_router(counters: Arc<RunCounters>, access: MetricsAccess) -> Router {
    Router::new().route(
        "/metrics",
        axum::routing::get(move |headers: HeaderMap| {
            let answer = metrics_answer(&counters, &access, &headers);
            async move { answer }
        }),
    )
}

fn metrics_answer(counters: &RunCounters, access: &MetricsAccess, headers: &HeaderMap) -> Response {
    if !access.admits(headers) {
        let message = match access {
            MetricsAccess::Refused => {
                "/metrics takes a token of its own: set BATON_METRICS_TOKEN (the SHA-256 hex digest of the token) and send it as a bearer token"
            }
            _ => "/metrics needs its bearer token (BATON_METRICS_TOKEN)",
        };
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            axum::Json(serde_json::json!({"error": {"code": "unauthorized", "message": message}})),
        )
            .into_response();
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        counters.prometheus_text(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    async fn status_of(access: MetricsAccess, bearer: Option<&str>) -> u16 {
        let mut request = Request::get("/metrics");
        if let Some(token) = bearer {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        metrics_router(Arc::new(RunCounters::default()), access)
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    #[tokio::test]
    async fn metrics_take_their_own_token_once_the_api_has_tokens() {
        let digest = baton_http::auth::token_digest_hex("metrics-secret");
        let with_token = MetricsAccess::of(Some(&digest), false);
        assert_eq!(status_of(with_token.clone(), None).await, 401);
        assert_eq!(
            status_of(with_token.clone(), Some("a-tenant-token")).await,
            401
        );
        assert_eq!(status_of(with_token, Some("metrics-secret")).await, 200);
        let unset_with_api_tokens = MetricsAccess::of(None, false);
        assert_eq!(unset_with_api_tokens, MetricsAccess::Refused);
        assert_eq!(
            status_of(unset_with_api_tokens, Some("metrics-secret")).await,
            401
        );
        assert_eq!(status_of(MetricsAccess::of(None, true), None).await, 200);
    }
}
