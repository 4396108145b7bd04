//! No body crashes the API: generated bodies (`proptest`, `BATON_FUZZ_CASES`
//! cases, default 256) sent to every POST route through the router itself
//! (`tower::ServiceExt::oneshot`, no socket), on the real services over the
//! in-memory adapters: arbitrary JSON, JSON near each route's own shape,
//! and bytes that are not JSON. Every answer is a 2xx or a 4xx with a JSON
//! `error` (a code and a message); never a 5xx, never a panic. No worker
//! runs: a body that starts a run only queues its plan step. The model is a
//! test double that is never reached (a closed port).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use baton_http::{HttpSettings, TokenAuthenticator};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Map, Value, json};
use tower::ServiceExt;

const ROUTES: &[&str] = &[
    "/api/v1/flex/runs",
    "/api/v1/flex/run.stream",
    "/api/v1/flex/run.resume",
    "/api/v1/flex/hitl/resolve",
    "/api/v1/flex/runs/run_x/cancel",
    "/api/v1/flex/runs/run_x/policies/p/trigger",
    "/api/v1/flex/tasks/run_x:node_1/decline",
    "/api/v1/flex/capabilities/register",
    "/api/v1/judge/evaluations",
    "/api/v1/chat",
];

const KEYS: &[&str] = &[
    "objective",
    "inputs",
    "outputContract",
    "schema",
    "policies",
    "constraints",
    "runId",
    "taskId",
    "nodeId",
    "output",
    "expectedPlanVersion",
    "answer",
    "requestId",
    "decision",
    "note",
    "reasonCode",
    "capabilityId",
    "agentType",
    "version",
    "displayName",
    "summary",
    "inputContract",
    "request",
    "config",
    "selectedAgents",
    "criteria",
    "content",
    "message",
    "threadId",
    "type",
    "properties",
    "required",
    "kind",
    "id",
    "capabilities",
];

fn a_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|number| json!(number)),
        (-1e300f64..1e300).prop_map(|number| json!(number)),
        ".{0,20}".prop_map(Value::String),
        proptest::sample::select(&["approve", "reject", "run_x", "run_x:node_1", "object", ""][..])
            .prop_map(|text| Value::String(text.to_string())),
    ];
    leaf.prop_recursive(5, 40, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::vec(
                (
                    proptest::sample::select(KEYS).prop_map(str::to_string),
                    inner
                ),
                0..6
            )
            .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A body: JSON (mostly objects), bytes that are not JSON, or a valid
/// envelope with one generated field added (the example a caller starts from).
fn a_body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => a_json().prop_map(|value| value.to_string().into_bytes()),
        1 => proptest::collection::vec(any::<u8>(), 0..96),
        2 => (proptest::sample::select(KEYS), a_json(), any::<bool>()).prop_map(|(key, value, in_inputs)| {
            let mut envelope = baton_test_support::plain_example_envelope("positioning-recommendation.json");
            let target = if in_inputs { &mut envelope["inputs"] } else { &mut envelope };
            target[key] = value;
            envelope.to_string().into_bytes()
        }),
    ]
}

fn api() -> axum::Router {
    support::api_without_a_model(
        TokenAuthenticator::from_configuration("")
            .unwrap()
            .allowing_anonymous_when_unconfigured("fuzz"),
        HttpSettings::default(),
    )
}

fn cases() -> u32 {
    std::env::var("BATON_FUZZ_CASES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(256)
}

proptest! {
    #![proptest_config(Config { cases: cases(), failure_persistence: None, ..Config::default() })]

    #[test]
    fn no_body_on_any_post_route_is_answered_with_a_5xx(
        route in proptest::sample::select(ROUTES),
        body in a_body(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let streams = route.ends_with("/run.stream") || route.ends_with("/chat") || route.ends_with("/evaluations");
        let (status, answer) = runtime.block_on(async {
            let response = api()
                .oneshot(
                    Request::post(route)
                        .header("content-type", "application/json")
                        .header("accept", "application/json")
                        .body(Body::from(body.clone()))
                        .unwrap(),
                )
                .await
                .unwrap();
            let status = response.status();
            if streams && status.is_success() {
                // An accepted stream follows its run, which no worker moves here.
                return (status, axum::body::Bytes::new());
            }
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
            (status, bytes)
        });
        prop_assert!(!status.is_server_error(), "{route}: {status} for {}", String::from_utf8_lossy(&body));
        if status.is_client_error() {
            let error: Value = serde_json::from_slice(&answer)
                .unwrap_or_else(|_| panic!("{route}: a {status} body is JSON: {}", String::from_utf8_lossy(&answer)));
            prop_assert!(error["error"]["code"].is_string(), "{route}: {error}");
            prop_assert!(error["error"]["message"].is_string(), "{route}: {error}");
        } else {
            prop_assert!(status.is_success() || status == StatusCode::SEE_OTHER, "{route}: {status}");
        }
    }
}
