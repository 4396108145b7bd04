//! Scopes on every route: a walk over the OpenAPI document. Every operation
//! that takes a token declares the scope it needs; a caller holding no scope
//! gets a 403 naming exactly that scope, and a caller holding only that
//! scope gets past the check. A2A's methods are checked the same way.
//! Requests go through the router with `oneshot` (no socket); the model
//! endpoint is never reached (no worker runs).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use baton_http::auth::{Scope, token_digest_hex};
use baton_http::{HttpSettings, TokenAuthenticator};
use serde_json::{Value, json};
use tower::ServiceExt;

const NOTHING_TOKEN: &str = "holds-nothing";

fn scoped_token(scope: Scope) -> String {
    format!("holds-{}", scope.as_str().replace(':', "-"))
}

fn api() -> axum::Router {
    let mut tokens = vec![format!(
        "acme:{};user=nobody;scopes=",
        token_digest_hex(NOTHING_TOKEN)
    )];
    for scope in Scope::ALL {
        tokens.push(format!(
            "acme:{};user=holder;scopes={}",
            token_digest_hex(&scoped_token(scope)),
            scope.as_str()
        ));
    }
    support::api_without_a_model(
        TokenAuthenticator::from_configuration(&tokens.join(",")).unwrap(),
        HttpSettings::default(),
    )
}

fn concrete(path: &str) -> String {
    let mut concrete = String::new();
    for piece in path.split('{') {
        match piece.split_once('}') {
            Some((_, rest)) => {
                concrete.push_str("some_id");
                concrete.push_str(rest);
            }
            None => concrete.push_str(piece),
        }
    }
    concrete
}

async fn send(app: &axum::Router, method: &str, path: &str, token: &str) -> (StatusCode, Value) {
    let mut request = Request::builder()
        .method(method.to_uppercase().as_str())
        .uri(concrete(path))
        .header("authorization", format!("Bearer {token}"));
    let body = if method == "get" {
        Body::empty()
    } else {
        request = request.header("content-type", "application/json");
        Body::from("{}")
    };
    let response = app
        .clone()
        .oneshot(request.body(body).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let is_stream = response
        .headers()
        .get("content-type")
        .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"));
    if is_stream {
        return (status, Value::Null);
    }
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn every_route_declares_a_scope_and_checks_it() {
    let document = baton_http::openapi::document();
    let app = api();
    let mut walked = 0;
    for (path, methods) in document["paths"].as_object().unwrap() {
        for (method, operation) in methods.as_object().unwrap() {
            let open = operation["security"] == json!([]);
            if open {
                continue;
            }
            let declared = operation["x-baton-scope"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path} declares no scope"));
            let scope = Scope::parse(declared)
                .unwrap_or_else(|| panic!("{method} {path}: `{declared}` is not a scope"));
            assert_eq!(
                operation["security"],
                json!([{"bearer": [declared]}]),
                "{method} {path}"
            );
            assert!(
                operation["responses"]["403"].is_object(),
                "{method} {path} documents its 403"
            );
            // Holding nothing: a 403 naming the scope, before the handler.
            let (status, body) = send(&app, method, path, NOTHING_TOKEN).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {body}");
            assert_eq!(body["error"]["code"], "missing_scope", "{method} {path}");
            assert_eq!(
                body["error"]["details"]["scope"], declared,
                "{method} {path}"
            );
            // Holding that scope only: past the check (the handler answers,
            // whatever it makes of the dummy ids and the empty body).
            let (status, body) = send(&app, method, path, &scoped_token(scope)).await;
            assert!(
                status != StatusCode::FORBIDDEN && status != StatusCode::UNAUTHORIZED,
                "{method} {path} with `{declared}`: {status} {body}"
            );
            // Admin holds every scope.
            let (status, body) = send(&app, method, path, &scoped_token(Scope::Admin)).await;
            assert!(
                status != StatusCode::FORBIDDEN,
                "{method} {path} as admin: {body}"
            );
            walked += 1;
        }
    }
    assert!(walked >= 30, "walked {walked} operations");
}

#[tokio::test]
async fn a2a_methods_check_their_scope() {
    let app = api();
    let call = |token: String, body: Value| {
        let app = app.clone();
        async move {
            let response = app
                .oneshot(
                    Request::post("/a2a")
                        .header("authorization", format!("Bearer {token}"))
                        .header("content-type", "application/json")
                        .body(Body::from(body.to_string()))
                        .unwrap(),
                )
                .await
                .unwrap();
            let status = response.status();
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
                .await
                .unwrap();
            (status, serde_json::from_slice::<Value>(&bytes).unwrap())
        }
    };
    let send_message = json!({"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {
        "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}});
    let (status, body) = call(scoped_token(Scope::RunsRead), send_message.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["id"], 7);
    assert_eq!(body["error"]["data"]["scope"], "runs:write", "{body}");
    // A message on a task is a person's answer: `tasks:answer`.
    let answer = json!({"jsonrpc": "2.0", "id": 8, "method": "SendMessage", "params": {
        "message": {"messageId": "m2", "role": "ROLE_USER", "taskId": "run_x", "parts": [{"text": "yes"}]}}});
    let (status, body) = call(scoped_token(Scope::RunsWrite), answer.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["data"]["scope"], "tasks:answer", "{body}");
    let (status, body) = call(scoped_token(Scope::TasksAnswer), answer).await;
    assert_eq!(status, StatusCode::OK, "past the check: {body}");
    let get_task =
        json!({"jsonrpc": "2.0", "id": 9, "method": "GetTask", "params": {"id": "run_x"}});
    let (status, body) = call(NOTHING_TOKEN.to_string(), get_task.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["data"]["scope"], "runs:read");
    let (status, body) = call(scoped_token(Scope::RunsRead), get_task).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("run_x"));
}
