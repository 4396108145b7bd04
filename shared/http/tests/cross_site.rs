//! What a web page on another site can do to an anonymous server (the local
//! `baton serve` default, which takes no token): nothing. Every
//! state-changing operation of the OpenAPI document is sent a `text/plain`
//! post the way a page's `fetch` or form sends it without asking first, and
//! each is refused before any handler runs; nothing is stored. Requests go
//! through the router with `oneshot` (no socket); the model endpoint is never
//! reached (no worker runs).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use baton_http::auth::cross_site::TrustedOrigins;
use baton_http::{HttpSettings, TokenAuthenticator};
use serde_json::Value;
use tower::ServiceExt;

const HOST: &str = "127.0.0.1:8080";

fn anonymous_api(settings: HttpSettings) -> axum::Router {
    support::api_without_a_model(
        TokenAuthenticator::from_configuration("")
            .unwrap()
            .allowing_anonymous_when_unconfigured("local"),
        settings,
    )
}

/// Every state-changing operation's concrete path (path parameters filled).
fn state_changing_routes() -> Vec<(String, String)> {
    let routes: Vec<(String, String)> = baton_http::openapi::operations()
        .into_iter()
        .filter(|operation| matches!(operation.method, "post" | "put" | "patch" | "delete"))
        .map(|operation| {
            let mut path = String::new();
            for piece in operation.path.split('{') {
                match piece.split_once('}') {
                    Some((_, rest)) => {
                        path.push_str("some_id");
                        path.push_str(rest);
                    }
                    None => path.push_str(piece),
                }
            }
            (operation.method.to_uppercase(), path)
        })
        .collect();
    assert!(
        routes.len() >= 15,
        "the document lists the state-changing routes: {routes:?}"
    );
    routes
}

fn envelope_text() -> String {
    baton_test_support::plain_example_envelope("positioning-recommendation.json").to_string()
}

async fn send(app: &axum::Router, request: Request<Body>) -> (StatusCode, Value) {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn runs_stored(app: &axum::Router) -> usize {
    let (status, body) = send(
        app,
        Request::get("/api/v1/flex/runs")
            .header("host", HOST)
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["runs"].as_array().unwrap().len()
}

#[tokio::test]
async fn a_page_on_another_site_changes_nothing_on_any_route() {
    let app = anonymous_api(HttpSettings::default());
    for (method, path) in state_changing_routes() {
        // The request a page (or a rebound name) makes: `headers` and, when
        // given, a body.
        let attempt = |headers: &[(&str, &str)], body: Option<String>| {
            let mut request = Request::builder().method(method.as_str()).uri(&path);
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            let body = body.map_or_else(Body::empty, Body::from);
            send(&app, request.body(body).unwrap())
        };
        // A page's `fetch(url, {method: "POST", body, mode: "no-cors"})`:
        // text/plain, its own Origin.
        let (status, body) = attempt(
            &[
                ("host", HOST),
                ("origin", "https://evil.example"),
                ("content-type", "text/plain;charset=UTF-8"),
            ],
            Some(envelope_text()),
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {body}");
        assert_eq!(
            body["error"]["code"], "cross_origin_refused",
            "{method} {path}"
        );
        assert_eq!(body["error"]["details"]["origin"], "https://evil.example");

        // The same with no body at all (a cancel, a pause): the Origin decides.
        let (status, body) =
            attempt(&[("host", HOST), ("origin", "https://evil.example")], None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {body}");

        // A browser that hides the Origin still says the request is cross-site.
        let (status, body) =
            attempt(&[("host", HOST), ("sec-fetch-site", "cross-site")], None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {body}");

        // A form or text post with no Origin (an old browser, a proxy that
        // strips it) is refused by its content type.
        let (status, body) = attempt(
            &[
                ("host", HOST),
                ("content-type", "application/x-www-form-urlencoded"),
            ],
            Some(envelope_text()),
        )
        .await;
        assert_eq!(
            status,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{method} {path}: {body}"
        );
        assert_eq!(body["error"]["code"], "unsupported_media_type");
        assert_eq!(body["error"]["details"]["path"], "$");

        // DNS rebinding: the page's own name now points at 127.0.0.1, so its
        // requests are same-origin; the Host gives it away.
        let (status, body) = attempt(
            &[
                ("host", "rebound.example"),
                ("origin", "http://rebound.example"),
                ("content-type", "application/json"),
            ],
            Some(envelope_text()),
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {body}");
        assert_eq!(body["error"]["code"], "host_refused", "{method} {path}");
    }
    assert_eq!(
        runs_stored(&app).await,
        0,
        "no refused request stored a run"
    );

    // Reads under a rebound name are refused too (they would leak runs).
    let (status, body) = send(
        &app,
        Request::get("/api/v1/flex/runs")
            .header("host", "rebound.example")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
}

#[tokio::test]
async fn own_pages_programs_and_allowed_origins_still_get_through() {
    let settings = HttpSettings {
        trusted_origins: TrustedOrigins::new(&["https://viewer.example".to_string()], None),
        ..HttpSettings::default()
    };
    let app = anonymous_api(settings);
    let create = |origin: Option<&str>| {
        let mut request = Request::post("/api/v1/flex/runs")
            .header("host", HOST)
            .header("content-type", "application/json");
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.body(Body::from(envelope_text())).unwrap()
    };
    // The served viewer (same origin), a program (no Origin), and a viewer
    // the operator hosts elsewhere (BATON_ALLOWED_ORIGINS).
    for origin in [
        Some("http://127.0.0.1:8080"),
        None,
        Some("https://viewer.example"),
    ] {
        let (status, body) = send(&app, create(origin)).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{origin:?}: {body}");
    }
    assert_eq!(runs_stored(&app).await, 3);
    // A bodiless state change from a program needs no content type.
    let (status, body) = send(
        &app,
        Request::post("/api/v1/flex/runs/run_missing/cancel")
            .header("host", HOST)
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    // The allowed origin's host is one an anonymous server answers to.
    let (status, _) = send(
        &app,
        Request::get("/api/v1/flex/runs")
            .header("host", "viewer.example")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}
