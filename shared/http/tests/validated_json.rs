//! The `ValidatedJson<T>` extractor on its own, through a one-route router
//! and `tower::ServiceExt::oneshot` (no socket): the body is read into its
//! type, or refused naming the JSON path of the fault, with the type's own
//! error code; not JSON is 400 `invalid_json` naming the line and column.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::post;
use baton_http::bodies::{ForkRequest, ValidatedJson};
use serde_json::{Value, json};
use tower::ServiceExt;

/// A handler that answers what it read.
async fn read_fork(ValidatedJson(request): ValidatedJson<ForkRequest>) -> String {
    format!(
        "at {:?} {:?}, {} input(s)",
        request.at.plan_version,
        request.at.event_id,
        request.inputs.len()
    )
}

async fn read_raw(ValidatedJson(value): ValidatedJson<Value>) -> String {
    value.to_string()
}

async fn answer(route: &str, body: &str) -> (StatusCode, String) {
    let app = Router::new()
        .route("/fork", post(read_fork))
        .route("/raw", post(read_raw));
    let response = app
        .oneshot(
            Request::post(route)
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
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

#[tokio::test]
async fn a_body_that_fits_is_read_into_its_type() {
    let (status, text) = answer("/fork", r#"{"at": {"planVersion": 2}, "inputs": {"a": 1}}"#).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(text, "at Some(2) None, 1 input(s)");
}

#[tokio::test]
async fn a_field_of_the_wrong_type_is_refused_at_its_json_path_with_the_types_code() {
    let cases = [
        (r#"{"at": {"planVersion": "two"}}"#, "$.at.planVersion"),
        (r#"{"at": {}, "extra": true}"#, "$.extra"),
        (r#"{"inputs": {}}"#, "$.at"),
        ("[1, 2]", "$"),
    ];
    for (body, path) in cases {
        let (status, text) = answer("/fork", body).await;
        let error: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {text}");
        assert_eq!(
            error["error"]["code"], "invalid_fork_request",
            "{body}: {text}"
        );
        assert_eq!(error["error"]["details"]["path"], path, "{body}: {text}");
    }
}

#[tokio::test]
async fn not_json_is_a_400_naming_line_and_column() {
    for route in ["/fork", "/raw"] {
        let (status, text) = answer(route, "{\n  \"at\": ").await;
        let error: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{route}: {text}");
        assert_eq!(error["error"]["code"], "invalid_json", "{route}: {text}");
        assert_eq!(error["error"]["details"]["line"], 2, "{route}: {text}");
    }
}

#[tokio::test]
async fn a_raw_body_is_any_json_its_service_then_checks() {
    let (status, text) = answer("/raw", "[1, 2]").await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(text, json!([1, 2]).to_string());
}
