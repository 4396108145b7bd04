//! The developer sandbox through the router (`oneshot`, no socket), over
//! the real services on the in-memory adapters (no model is called: the
//! builder calls none). Off by default: both routes are a 404
//! `sandbox_off`. On: the metadata, and a three-message conversation that
//! ends with an envelope the API then accepts as a run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use baton_http::{HttpSettings, TokenAuthenticator};
use serde_json::{Value, json};
use tower::ServiceExt;

const HOST: &str = "127.0.0.1:8080";

fn api(sandbox: bool) -> axum::Router {
    support::api_without_a_model(
        TokenAuthenticator::from_configuration("")
            .unwrap()
            .allowing_anonymous_when_unconfigured("local"),
        HttpSettings {
            sandbox,
            ..HttpSettings::default()
        },
    )
}

async fn send(
    app: &axum::Router,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = Request::builder()
        .method(method)
        .uri(format!("/api/v1/flex{path}"))
        .header("host", HOST);
    let body = match body {
        Some(body) => {
            request = request.header("content-type", "application/json");
            Body::from(body.to_string())
        }
        None => Body::empty(),
    };
    let response = app
        .clone()
        .oneshot(request.body(body).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 4 << 20)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn conversation(said: &[&str]) -> Value {
    json!({"messages": said.iter().map(|content| json!({"role": "user", "content": content})).collect::<Vec<Value>>()})
}

const OBJECTIVE: &str =
    "Recommend a market positioning for Acme Analytics and the messaging stack that expresses it.";
const INPUTS: &str = "positioning_context.company_name: Acme Analytics
positioning_context.company_url: https://acmeanalytics.io
positioning_context.competing_factors: Data reliability, Ease of integration";

#[tokio::test]
async fn the_sandbox_is_off_unless_the_setting_turns_it_on() {
    let app = api(false);
    let (status, body) = send(&app, "GET", "/sandbox/metadata", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"]["code"], "sandbox_off");
    let (status, body) = send(
        &app,
        "POST",
        "/sandbox/drafts",
        Some(conversation(&[OBJECTIVE])),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"]["code"], "sandbox_off");
}

#[tokio::test]
async fn the_metadata_names_what_an_envelope_is_written_with() {
    let app = api(true);
    let (status, body) = send(&app, "GET", "/sandbox/metadata", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["capabilities"].as_array().unwrap().len() >= 11);
    assert!(
        body["facets"]
            .as_array()
            .unwrap()
            .iter()
            .any(|facet| facet["name"] == "positioning_context"
                && facet["producedBy"].as_array().unwrap().is_empty())
    );
    assert_eq!(body["schemas"]["envelope"]["title"], "Baton task envelope");
    assert!(
        body["policies"]
            .as_array()
            .unwrap()
            .iter()
            .any(|policy| policy["name"] == "runtime")
    );
    assert!(
        body["examples"]
            .as_array()
            .unwrap()
            .iter()
            .any(|example| example["name"] == "positioning-recommendation")
    );
}

#[tokio::test]
async fn three_messages_build_an_envelope_the_api_then_accepts() {
    let app = api(true);
    let (status, opening) = send(&app, "POST", "/sandbox/drafts", Some(json!({}))).await;
    assert_eq!(status, StatusCode::OK, "{opening}");
    assert_eq!(opening["stage"], "needs_objective");

    let (_, first) = send(
        &app,
        "POST",
        "/sandbox/drafts",
        Some(conversation(&[OBJECTIVE])),
    )
    .await;
    assert_eq!(first["stage"], "needs_inputs", "{first}");
    assert_eq!(first["missingInputs"][0]["facet"], "positioning_context");

    // The builder's replies may be sent back; they are not read.
    let mut second_request = conversation(&[OBJECTIVE, INPUTS]);
    second_request["messages"]
        .as_array_mut()
        .unwrap()
        .insert(1, json!({"role": "assistant", "content": first["reply"]}));
    let (_, second) = send(&app, "POST", "/sandbox/drafts", Some(second_request)).await;
    assert_eq!(second["stage"], "awaiting_confirmation", "{second}");
    assert!(
        second["plan"]["plan"]["nodes"].as_array().unwrap().len() >= 2,
        "{second}"
    );

    let (_, third) = send(
        &app,
        "POST",
        "/sandbox/drafts",
        Some(conversation(&[OBJECTIVE, INPUTS, "yes"])),
    )
    .await;
    assert_eq!(third["stage"], "ready", "{third}");
    assert_eq!(third["ready"], true);
    let (status, accepted) = send(&app, "POST", "/runs", Some(third["envelope"].clone())).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
}

#[tokio::test]
async fn a_request_the_builder_cannot_read_is_refused_naming_the_path() {
    let app = api(true);
    let (status, body) = send(
        &app,
        "POST",
        "/sandbox/drafts",
        Some(json!({"messages": [{"role": "someone", "content": "hi"}]})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "invalid_draft");
    assert_eq!(body["error"]["details"]["path"], "$.messages[0].role");
    let long = "x".repeat(baton_sandbox::conversation::MAX_DRAFT_MESSAGE_BYTES + 1);
    let (status, body) = send(
        &app,
        "POST",
        "/sandbox/drafts",
        Some(conversation(&[OBJECTIVE, &long])),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["details"]["path"], "$.messages[1].content");
    // A value its facet refuses is a problem of the turn, not an error.
    let (status, body) = send(
        &app,
        "POST",
        "/sandbox/drafts",
        Some(conversation(&[
            OBJECTIVE,
            "positioning_context.company_name: Acme\npositioning_context.company_url: not a url",
        ])),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|problem| problem["path"] == "$.inputs.positioning_context.company_url"),
        "{body}"
    );
}
