//! The HTTP API over a real socket: axum serving the router, reqwest as the
//! client, the real engine on the in-memory adapters with its worker running,
//! and the scripted OpenAI-compatible server standing in for the model.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::Duration;

use baton_http::auth::token_digest_hex;
use baton_http::{ApiState, HttpSettings, TokenAuthenticator, router};
use baton_llm::{OpenAiCompatibleConfig, OpenAiCompatibleProvider};
use baton_runtime::clock::SystemClock;
use baton_runtime::services::OrchestratorSettings;
use baton_test_support::{TestServices, assert_frame_values_match_schemas};
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use scripted_llm::ScriptedLlmServer;
use serde_json::{Value, json};

const ACME_TOKEN: &str = "acme-token";
const GLOBEX_TOKEN: &str = "globex-token";
/// acme's director (user and group claim), who may answer tasks.
const DIRECTOR_TOKEN: &str = "acme-director-token";
/// acme's writer: may answer tasks, but is in no director group.
const WRITER_TOKEN: &str = "acme-writer-token";
/// acme's submitter and its operator (run scopes only).
const SUBMITTER_TOKEN: &str = "acme-submitter-token";
const OPERATOR_TOKEN: &str = "acme-operator-token";
/// acme's approver.
const APPROVER_TOKEN: &str = "acme-approver-token";
/// acme's director, as an approver.
const DANA_APPROVER_TOKEN: &str = "acme-dana-approver-token";
/// Event streams one run may have open in the tests' server (default 64).
const TEST_STREAMS_PER_RUN: usize = 3;
const TEST_STREAMS_PER_TENANT: usize = 5;
/// The test server's limits (the defaults are 1 MiB and 256 KiB).
const TEST_BODY_LIMIT: usize = 256 * 1024;
const TEST_ENVELOPE_LIMIT: usize = 64 * 1024;

struct TestApi {
    base: String,
    client: reqwest::Client,
    model: ScriptedLlmServer,
    _server: tokio::task::JoinHandle<()>,
    _worker: tokio::task::JoinHandle<()>,
}

/// An example envelope without its legacy policy keys (they have their own tests).
fn example(name: &str) -> Value {
    baton_test_support::plain_example_envelope(name)
}

async fn start_api() -> TestApi {
    start_api_with_clock(Arc::new(SystemClock)).await
}

async fn start_api_with_clock(clock: Arc<dyn baton_runtime::ports::Clock>) -> TestApi {
    start_api_with(
        clock,
        OrchestratorSettings {
            max_envelope_bytes: TEST_ENVELOPE_LIMIT,
            ..OrchestratorSettings::default()
        },
    )
    .await
}

async fn start_api_with(
    clock: Arc<dyn baton_runtime::ports::Clock>,
    settings: OrchestratorSettings,
) -> TestApi {
    let model = ScriptedLlmServer::start().await.unwrap();
    let provider = OpenAiCompatibleProvider::new(OpenAiCompatibleConfig::new(
        model.base_url(),
        "scripted",
        None,
    ))
    .unwrap();
    let built = TestServices::with_model(Arc::new(provider))
        .clock(clock)
        .settings(settings)
        .worker_id("api-test")
        .build();
    let tokens = [
        format!("acme:{}", token_digest_hex(ACME_TOKEN)),
        format!("globex:{}", token_digest_hex(GLOBEX_TOKEN)),
        format!(
            "acme:{};user=dana@acme.example;scopes=runs:read tasks:answer;groups=director",
            token_digest_hex(DIRECTOR_TOKEN)
        ),
        format!(
            "acme:{};user=will@acme.example;scopes=runs:read tasks:answer;groups=writers",
            token_digest_hex(WRITER_TOKEN)
        ),
        format!(
            "acme:{};user=sam@acme.example;scopes=runs:read runs:write",
            token_digest_hex(SUBMITTER_TOKEN)
        ),
        format!(
            "acme:{};user=olga@acme.example;scopes=runs:read runs:write",
            token_digest_hex(OPERATOR_TOKEN)
        ),
        format!(
            "acme:{};user=abe@acme.example;scopes=runs:read approvals:decide",
            token_digest_hex(APPROVER_TOKEN)
        ),
        format!(
            "acme:{};user=dana@acme.example;scopes=runs:read approvals:decide",
            token_digest_hex(DANA_APPROVER_TOKEN)
        ),
    ]
    .join(",");
    let state = ApiState {
        runs: built.services.runs.clone(),
        capabilities: built.services.capabilities.clone(),
        people: built.services.people.clone(),
        authenticator: Arc::new(TokenAuthenticator::from_configuration(&tokens).unwrap()),
        settings: HttpSettings {
            heartbeat: Duration::from_secs(15),
            poll_interval: Duration::from_millis(20),
            max_body_bytes: TEST_BODY_LIMIT,
            max_streams_per_run: TEST_STREAMS_PER_RUN,
            max_streams_per_tenant: TEST_STREAMS_PER_TENANT,
            public_url: None,
            ..HttpSettings::default()
        },
        streams: built.services.streams.clone(),
        schedules: built.services.schedules.clone(),
        audit: built.services.audit.clone(),
        request_keys: built.services.request_keys.clone(),
        memory: built.services.memory.clone(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/api/v1/flex", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        axum::serve(listener, router(state)).await.unwrap();
    });
    let worker = tokio::spawn(baton_runtime::workers::run_worker_until(
        built.services.steps.clone(),
        built.queue.clone(),
        std::future::pending(),
    ));
    TestApi {
        base,
        client: reqwest::Client::new(),
        model,
        _server: server,
        _worker: worker,
    }
}

/// Reads an SSE response to its end: (id, event name, frame JSON) per event.
async fn read_sse(response: reqwest::Response) -> Vec<(String, String, Value)> {
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut events = response.bytes_stream().eventsource();
    let mut frames = Vec::new();
    while let Some(event) = tokio::time::timeout(Duration::from_secs(20), events.next())
        .await
        .expect("stream stalled")
    {
        let event = event.unwrap();
        frames.push((
            event.id.clone(),
            event.event.clone(),
            serde_json::from_str(&event.data).unwrap(),
        ));
        assert_frame_values_match_schemas([&frames.last().unwrap().2]);
    }
    frames
}

#[tokio::test(flavor = "multi_thread")]
async fn run_stream_relays_every_frame_until_complete() {
    let api = start_api().await;
    let response = api
        .client
        .post(format!("{}/run.stream", api.base))
        .bearer_auth(ACME_TOKEN)
        .json(&example("seed-10.0.1-stream-contract-variants.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let frames = read_sse(response).await;
    assert_eq!(frames.first().unwrap().1, "start");
    assert_eq!(frames.last().unwrap().1, "complete");
    for (index, (id, event, frame)) in frames.iter().enumerate() {
        assert_eq!(id, &(index + 1).to_string());
        assert_eq!(event, frame["type"].as_str().unwrap());
    }
    let output = &frames.last().unwrap().2["payload"]["output"];
    assert_eq!(output["copyVariants"].as_array().unwrap().len(), 2);
}

/// A caller's W3C `traceparent` on `POST /run.stream` and on a chat
/// message makes the run's trace the caller's (every frame's `traceId`); a
/// malformed one is ignored (the run gets a trace of its own), never an
/// error.
#[tokio::test(flavor = "multi_thread")]
async fn a_callers_traceparent_is_the_runs_trace_and_a_malformed_one_is_ignored() {
    const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    let traceparent = format!("00-{CALLER_TRACE}-00f067aa0ba902b7-01");
    let api = start_api().await;
    let mut trace_ids = Vec::new();
    for header in [traceparent.as_str(), "00-garbled-01"] {
        let response = api
            .client
            .post(format!("{}/run.stream", api.base))
            .bearer_auth(ACME_TOKEN)
            .header("traceparent", header)
            .json(&example("social-post-new-case.json"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{header}");
        let frames = read_sse(response).await;
        let ids: std::collections::BTreeSet<String> = frames
            .iter()
            .map(|(_, _, frame)| frame["traceId"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(ids.len(), 1, "one trace per run: {ids:?}");
        trace_ids.extend(ids);
    }
    assert_eq!(trace_ids[0], CALLER_TRACE);
    assert_ne!(trace_ids[1], CALLER_TRACE);
    assert_eq!(trace_ids[1].len(), 32);

    api.model.push_behaviors([scripted_llm::Behavior::Content {
        content: "Traced.".into(),
    }]);
    let response = api
        .client
        .post(api.base.replace("/api/v1/flex", "/api/v1/chat"))
        .bearer_auth(ACME_TOKEN)
        .header("traceparent", &traceparent)
        .json(&json!({"message": "Are you traced?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let frames = read_sse(response).await;
    assert!(
        frames
            .iter()
            .all(|(_, _, frame)| frame["traceId"] == CALLER_TRACE),
        "{frames:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn reconnecting_with_last_event_id_yields_exactly_the_later_frames() {
    let api = start_api().await;
    let created: Value = api
        .client
        .post(format!("{}/runs", api.base))
        .bearer_auth(ACME_TOKEN)
        .json(&example("social-post-new-case.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let run_id = created["runId"].as_str().unwrap();
    assert_eq!(created["status"], "queued");
    let everything = read_sse(
        api.client
            .get(format!("{}/runs/{run_id}/events", api.base))
            .bearer_auth(ACME_TOKEN)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(everything.last().unwrap().1, "complete");
    let after_three = read_sse(
        api.client
            .get(format!("{}/runs/{run_id}/events", api.base))
            .bearer_auth(ACME_TOKEN)
            .header("Last-Event-ID", "3")
            .send()
            .await
            .unwrap(),
    )
    .await;
    let expected: Vec<&String> = everything.iter().skip(3).map(|(id, _, _)| id).collect();
    let received: Vec<&String> = after_three.iter().map(|(id, _, _)| id).collect();
    assert_eq!(received, expected);
    assert_eq!(after_three[0].0, "4");
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_or_wrong_tokens_get_401_on_every_route() {
    let api = start_api().await;
    let routes = [
        ("POST", "/runs"),
        ("GET", "/runs"),
        ("POST", "/run.stream"),
        ("GET", "/runs/run_x"),
        ("GET", "/runs/run_x/events"),
        ("POST", "/runs/run_x/cancel"),
        ("GET", "/capabilities"),
        ("POST", "/run.resume"),
        ("POST", "/tasks/run_x:node_1/decline"),
    ];
    for (method, path) in routes {
        for token in [None, Some("not-a-token")] {
            let mut request = api
                .client
                .request(method.parse().unwrap(), format!("{}{path}", api.base))
                .json(&json!({}));
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 401, "{method} {path} with {token:?}");
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["error"]["code"], "unauthorized");
        }
    }
    assert_eq!(api.model.request_count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn another_tenants_run_is_404_on_every_route() {
    let api = start_api().await;
    let created: Value = api
        .client
        .post(format!("{}/runs", api.base))
        .bearer_auth(ACME_TOKEN)
        .json(&example("social-post-new-case.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let run_id = created["runId"].as_str().unwrap();
    for (method, path) in [
        ("GET", format!("/runs/{run_id}")),
        ("GET", format!("/runs/{run_id}/events")),
        ("POST", format!("/runs/{run_id}/cancel")),
    ] {
        let response = api
            .client
            .request(method.parse().unwrap(), format!("{}{path}", api.base))
            .bearer_auth(GLOBEX_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404, "{method} {path}");
        let owner = api
            .client
            .request(reqwest::Method::GET, format!("{}/runs/{run_id}", api.base))
            .bearer_auth(ACME_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(owner.status(), 200);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_envelopes_are_400_or_422_with_the_path_and_nothing_runs() {
    let api = start_api().await;
    let invalid_json = api
        .client
        .post(format!("{}/runs", api.base))
        .bearer_auth(ACME_TOKEN)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(invalid_json.status(), 400);
    assert_eq!(
        invalid_json.json::<Value>().await.unwrap()["error"]["code"],
        "invalid_json"
    );
    let bad_schema = api
        .client
        .post(format!("{}/run.stream", api.base))
        .bearer_auth(ACME_TOKEN)
        .json(&json!({"objective": "x", "outputContract": {"schema": {"type": "nonsense"}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad_schema.status(), 422);
    let body: Value = bad_schema.json().await.unwrap();
    assert_eq!(body["error"]["details"]["path"], "$.outputContract.schema");
    // A missing field is named in the path, not left at `$`.
    let (status, body) = post_json(
        &api,
        "/runs",
        ACME_TOKEN,
        &json!({"outputContract": {"schema": {"type": "object"}}}),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["details"]["path"], "$.objective", "{body}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(api.model.request_count(), 0);
}

/// A guard that could never fire is refused at submission: an operator
/// JSONLogic does not have (`between`), a variable no node provides.
#[tokio::test(flavor = "multi_thread")]
async fn a_policy_condition_that_could_never_fire_is_a_422_naming_the_condition() {
    let api = start_api().await;
    let guarded = |condition: Value| {
        json!({"objective": "x", "outputContract": {"schema": {"type": "object"}},
               "policies": {"runtime": [{"id": "guard",
                   "trigger": {"kind": "onNodeComplete", "condition": condition},
                   "action": {"type": "fail"}}]}})
    };
    for (condition, path, named) in [
        (
            json!({"between": [{"var": "qualityScore"}, 0, 0.5]}),
            "$.policies.runtime[0].trigger.condition",
            "`between`",
        ),
        (
            json!({"<": [{"var": "qualtyScroe"}, 0.5]}),
            "$.policies.runtime[0].trigger.condition.<[0].var",
            "`qualtyScroe`",
        ),
    ] {
        let response = api
            .client
            .post(format!("{}/runs", api.base))
            .bearer_auth(ACME_TOKEN)
            .json(&guarded(condition))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 422, "{named}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["details"]["path"], path, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(named), "{message}");
    }
    // A metric no run or node could ever have.
    let (status, body) = post_json(
        &api,
        "/runs",
        ACME_TOKEN,
        &json!({"objective": "x", "outputContract": {"schema": {"type": "object"}},
                "policies": {"runtime": [{"id": "floor",
                    "trigger": {"kind": "onMetricBelow", "metric": "qaScroe", "threshold": 0.5},
                    "action": {"type": "fail"}}]}}),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["error"]["details"]["path"],
        "$.policies.runtime[0].trigger.metric"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`qaScroe` is neither a run metric"),
        "{body}"
    );
    let listed = get_json(&api, "/runs", ACME_TOKEN).await;
    assert_eq!(listed["runs"], json!([]), "nothing was created");
    assert_eq!(api.model.request_count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_snapshot_redacts_secrets_and_a_parked_run_can_be_cancelled() {
    let api = start_api().await;
    let mut envelope: Value = serde_json::from_str(
        &std::fs::read_to_string(baton_test_support::repository_path(
            "functions/baton/tests/fixtures/human-review.json",
        ))
        .unwrap(),
    )
    .unwrap();
    envelope["inputs"]["crmCredentials"] = json!({"apiKey": "sk-live-123", "region": "eu"});
    let frames = read_sse(
        api.client
            .post(format!("{}/run.stream", api.base))
            .bearer_auth(ACME_TOKEN)
            .json(&envelope)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let last = &frames.last().unwrap().2;
    assert_eq!(
        last["payload"]["executorType"], "human",
        "the stream ends when the run parks"
    );
    let run_id = last["runId"].as_str().unwrap();
    let snapshot = get_json(&api, &format!("/runs/{run_id}"), ACME_TOKEN).await;
    assert_eq!(snapshot["run"]["status"], "awaiting_human");
    assert!(!snapshot.to_string().contains("sk-live-123"));
    assert_eq!(
        snapshot["run"]["envelope"]["inputs"]["crmCredentials"],
        "[redacted]"
    );
    let cancelled = api
        .client
        .post(format!("{}/runs/{run_id}/cancel", api.base))
        .bearer_auth(ACME_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status(), 202);
    assert_eq!(
        cancelled.json::<Value>().await.unwrap()["status"],
        "cancelled"
    );
    let tail = read_sse(
        api.client
            .get(format!("{}/runs/{run_id}/events", api.base))
            .bearer_auth(ACME_TOKEN)
            .header("Last-Event-ID", last["id"].to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(tail.len(), 2, "the run's metrics, then the error");
    assert_eq!(tail[0].2["type"], "metrics");
    assert_eq!(tail[1].2["payload"]["code"], "cancelled");
}

fn scoped_messaging_writer() -> Value {
    // Same facets as the registry's copywriter.Messaging, under a scoped id.
    json!({
        "capabilityId": "copywriter.Messaging.scoped",
        "agentType": "ai",
        "version": "2026.11.22",
        "displayName": "Scoped messaging writer",
        "summary": "Turns a positioning recommendation into a messaging stack.",
        "inputTraits": {"languages": ["en"]},
        "inputContract": ["company_information", "positioning_context", "positioning_recommendation", "feedback"],
        "outputContract": ["messaging_stack", "handoff_summary"],
        "cost": {"tier": "low"},
        "heartbeat": {"intervalSeconds": 60, "timeoutSeconds": 120},
        "instructions": "Write the messaging stack for the recommended positioning."
    })
}

async fn post_json(api: &TestApi, path: &str, token: &str, body: &Value) -> (u16, Value) {
    let response = api
        .client
        .post(format!("{}{path}", api.base))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn get_json(api: &TestApi, path: &str, token: &str) -> Value {
    api.client
        .get(format!("{}{path}", api.base))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn listed_capability(api: &TestApi, token: &str, capability_id: &str) -> Option<Value> {
    let listed = get_json(api, "/capabilities", token).await;
    listed["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|capability| capability["capabilityId"] == capability_id)
        .cloned()
}

/// The plan of a run requiring `capability_id`: (status of `plan_*`, node capability ids).
async fn plan_requiring(api: &TestApi, capability_id: &str) -> (String, Vec<String>) {
    let mut envelope = example("positioning-recommendation.json");
    envelope["policies"] = json!({"planner": {"selection": {"require": [capability_id]}}});
    let response = api
        .client
        .post(format!("{}/run.stream", api.base))
        .bearer_auth(ACME_TOKEN)
        .json(&envelope)
        .send()
        .await
        .unwrap();
    let frames = read_sse(response).await;
    let plan = frames
        .iter()
        .find(|(_, event, _)| event == "plan_generated" || event == "plan_rejected")
        .unwrap();
    let nodes = plan.2["payload"]["nodes"]
        .as_array()
        .map(|nodes| {
            nodes
                .iter()
                .map(|node| node["capabilityId"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default();
    (plan.1.clone(), nodes)
}

#[tokio::test(flavor = "multi_thread")]
async fn registered_capabilities_are_validated_planned_with_and_go_inactive_without_heartbeats() {
    let clock = Arc::new(baton_runtime::clock::OffsetClock::new());
    let api = start_api_with_clock(clock.clone()).await;

    // Before registering, a plan that requires it is rejected.
    let (event, _) = plan_requiring(&api, "copywriter.Messaging.scoped").await;
    assert_eq!(event, "plan_rejected");

    let (status, registered) = post_json(
        &api,
        "/capabilities/register",
        ACME_TOKEN,
        &scoped_messaging_writer(),
    )
    .await;
    assert_eq!(status, 200, "{registered}");
    assert_eq!(registered["status"], "active");
    assert_eq!(registered["source"], "registered");
    assert_eq!(registered["heartbeatTimeoutSeconds"], 120);
    // The compiled contracts it will be held to come back with it.
    assert_eq!(
        registered["outputSchema"]["required"],
        json!(["messaging_stack", "handoff_summary"])
    );
    assert_eq!(
        registered["inputSchema"]["properties"]
            .as_object()
            .unwrap()
            .len(),
        4
    );

    // Listed for its tenant only.
    let listed = listed_capability(&api, ACME_TOKEN, "copywriter.Messaging.scoped").await;
    assert_eq!(listed.unwrap()["status"], "active");
    assert!(
        listed_capability(&api, GLOBEX_TOKEN, "copywriter.Messaging.scoped")
            .await
            .is_none()
    );

    // The planner uses it.
    let (event, nodes) = plan_requiring(&api, "copywriter.Messaging.scoped").await;
    assert_eq!(event, "plan_generated");
    assert!(
        nodes.contains(&"copywriter.Messaging.scoped".to_string()),
        "{nodes:?}"
    );

    // A heartbeat (re-registration) keeps registeredAt and moves lastSeenAt.
    clock.advance(Duration::from_secs(100));
    let (status, heartbeat) = post_json(
        &api,
        "/capabilities/register",
        ACME_TOKEN,
        &scoped_messaging_writer(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(heartbeat["registeredAt"], registered["registeredAt"]);
    assert_ne!(heartbeat["lastSeenAt"], registered["lastSeenAt"]);

    // No heartbeat for longer than the timeout: inactive, and the planner skips it.
    clock.advance(Duration::from_secs(121));
    let listed = listed_capability(&api, ACME_TOKEN, "copywriter.Messaging.scoped").await;
    assert_eq!(listed.unwrap()["status"], "inactive");
    let (event, _) = plan_requiring(&api, "copywriter.Messaging.scoped").await;
    assert_eq!(event, "plan_rejected");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_registrations_are_refused_with_the_path_and_nothing_is_stored() {
    let api = start_api().await;
    let mut unknown_facet = scoped_messaging_writer();
    unknown_facet["outputContract"] = json!(["messaging_stack", "no_such_facet"]);
    let mut wrong_direction = scoped_messaging_writer();
    wrong_direction["outputContract"] = json!(["qaRubric"]);
    let mut wrong_type = scoped_messaging_writer();
    wrong_type["inputContract"] = json!("company_information");
    let mut missing_field = scoped_messaging_writer();
    missing_field.as_object_mut().unwrap().remove("summary");
    let mut prompt_file = scoped_messaging_writer();
    prompt_file["promptTemplateFile"] = json!("../../etc/passwd");
    let mut builtin = scoped_messaging_writer();
    builtin["agentType"] = json!("builtin");
    let mut unknown_model = scoped_messaging_writer();
    unknown_model["preferredModels"] = json!(["gpt-4o-mini", "no-such-model"]);
    for (body, status, path) in [
        (unknown_facet, 422, "$.outputContract[1]"),
        (wrong_direction, 422, "$.outputContract[0]"),
        (wrong_type, 422, "$.inputContract"),
        (missing_field, 422, "$"),
        (prompt_file, 422, "$.promptTemplateFile"),
        (builtin, 422, "$.agentType"),
        (unknown_model, 422, "$.preferredModels[1]"),
    ] {
        let (got, error) = post_json(&api, "/capabilities/register", ACME_TOKEN, &body).await;
        assert_eq!(got, status, "{error}");
        assert_eq!(error["error"]["details"]["path"], path, "{error}");
        assert_eq!(error["error"]["code"], "invalid_registration");
    }
    // A human capability's task-surface fields are accepted and kept.
    let mut reviewer = scoped_messaging_writer();
    reviewer["capabilityId"] = json!("copywriter.Messaging.reviewer");
    reviewer["agentType"] = json!("human");
    reviewer["instructionTemplates"] = json!({"title": "Write the messaging stack"});
    reviewer["assignmentDefaults"] = json!({"role": "writer", "maxNotifications": 1});
    let (got, registered) = post_json(&api, "/capabilities/register", ACME_TOKEN, &reviewer).await;
    assert_eq!(got, 200, "{registered}");
    let listed = get_json(&api, "/capabilities", ACME_TOKEN).await;
    let kept = listed["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|capability| capability["capabilityId"] == "copywriter.Messaging.reviewer")
        .expect("listed");
    assert_eq!(
        kept["instructionTemplates"]["title"], "Write the messaging stack",
        "{kept}"
    );
    let mut static_id = scoped_messaging_writer();
    static_id["capabilityId"] = json!("copywriter.Messaging");
    let (got, error) = post_json(&api, "/capabilities/register", ACME_TOKEN, &static_id).await;
    assert_eq!(got, 409, "{error}");
    assert_eq!(error["error"]["code"], "capability_conflict");
    let (got, _) = api
        .client
        .post(format!("{}/capabilities/register", api.base))
        .bearer_auth(ACME_TOKEN)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .map(|response| (response.status().as_u16(), ()))
        .unwrap();
    assert_eq!(got, 400);
    assert!(
        listed_capability(&api, ACME_TOKEN, "copywriter.Messaging.scoped")
            .await
            .is_none(),
        "nothing was stored"
    );
}

/// `PATCH /capabilities/{id}` renews a registration's heartbeat (404 for an
/// id the tenant has not registered, another tenant's included) and
/// `DELETE` removes it (404 the second time); a registry file's capability
/// is not a registration.
#[tokio::test(flavor = "multi_thread")]
async fn a_registration_is_renewed_by_patch_and_removed_by_delete() {
    let api = start_api().await;
    let (got, registered) = post_json(
        &api,
        "/capabilities/register",
        ACME_TOKEN,
        &scoped_messaging_writer(),
    )
    .await;
    assert_eq!(got, 200, "{registered}");
    let id = "copywriter.Messaging.scoped";
    let send = |method: reqwest::Method, path: String, token: &'static str| {
        let request = api
            .client
            .request(method, format!("{}{path}", api.base))
            .bearer_auth(token);
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            (status, body)
        }
    };
    let (got, renewed) = send(
        reqwest::Method::PATCH,
        format!("/capabilities/{id}"),
        ACME_TOKEN,
    )
    .await;
    assert_eq!(got, 200, "{renewed}");
    assert_eq!(renewed["capabilityId"], id);
    assert_eq!(renewed["status"], "active");
    assert!(renewed["lastSeenAt"].is_string(), "{renewed}");
    for (path, token) in [
        (format!("/capabilities/{id}"), GLOBEX_TOKEN),
        ("/capabilities/copywriter.Messaging".to_string(), ACME_TOKEN),
        ("/capabilities/no.such".to_string(), ACME_TOKEN),
    ] {
        let (got, error) = send(reqwest::Method::PATCH, path.clone(), token).await;
        assert_eq!(got, 404, "{path}: {error}");
        assert_eq!(error["error"]["code"], "capability_not_registered");
    }
    let (got, _) = send(
        reqwest::Method::DELETE,
        format!("/capabilities/{id}"),
        GLOBEX_TOKEN,
    )
    .await;
    assert_eq!(got, 404, "another tenant cannot remove it");
    let (got, _) = send(
        reqwest::Method::DELETE,
        format!("/capabilities/{id}"),
        ACME_TOKEN,
    )
    .await;
    assert_eq!(got, 204);
    assert!(listed_capability(&api, ACME_TOKEN, id).await.is_none());
    let (got, error) = send(
        reqwest::Method::DELETE,
        format!("/capabilities/{id}"),
        ACME_TOKEN,
    )
    .await;
    assert_eq!(got, 404, "{error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn capabilities_are_listed_and_unbuilt_routes_say_so() {
    let api = start_api().await;
    let listed = get_json(&api, "/capabilities", ACME_TOKEN).await;
    assert!(listed["capabilities"].as_array().unwrap().len() >= 11);
    let resolve = api
        .client
        .post(format!("{}/hitl/resolve", api.base))
        .bearer_auth(ACME_TOKEN)
        .json(&serde_json::json!({"runId": "r"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resolve.status(), 400, "a resolution names its request");
    let body: serde_json::Value = resolve.json().await.unwrap();
    assert_eq!(body["error"]["details"]["path"], "$.requestId");
    let unknown = api
        .client
        .get(format!("{}/nope", api.base))
        .bearer_auth(ACME_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
}

/// Streams the human-review fixture until it parks; returns the parked
/// `node_start` frame (its `runId`, `nodeId`, `planVersion`, contract).
async fn park_on_a_person(api: &TestApi) -> Value {
    let envelope: Value = serde_json::from_str(
        &std::fs::read_to_string(baton_test_support::repository_path(
            "functions/baton/tests/fixtures/human-review.json",
        ))
        .unwrap(),
    )
    .unwrap();
    let frames = read_sse(
        api.client
            .post(format!("{}/run.stream", api.base))
            .bearer_auth(ACME_TOKEN)
            .json(&envelope)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let parked = frames.last().unwrap().2.clone();
    assert_eq!(parked["payload"]["executorType"], "human");
    parked
}

async fn frames_after(api: &TestApi, run_id: &str, after: &Value) -> Vec<Value> {
    read_sse(
        api.client
            .get(format!("{}/runs/{run_id}/events", api.base))
            .bearer_auth(ACME_TOKEN)
            .header("Last-Event-ID", after.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await
    .into_iter()
    .map(|(_, _, frame)| frame)
    .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_for_a_group_is_listed_and_answered_by_its_members_only() {
    let api = start_api().await;
    // The director's review capability names `assignmentDefaults.role:
    // director` in the registry: a group claim.
    let parked = park_on_a_person(&api).await;
    let run_id = parked["runId"].as_str().unwrap();
    let node_id = parked["nodeId"].as_str().unwrap();
    let version = parked["planVersion"].clone();
    let output_schema = parked["payload"]["contract"]["outputSchema"].clone();

    let listed = get_json(&api, "/tasks", DIRECTOR_TOKEN).await;
    assert_eq!(listed["tasks"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(
        listed["tasks"][0]["assignedTo"],
        json!({"groups": ["director"]})
    );
    assert_eq!(
        get_json(&api, "/tasks", WRITER_TOKEN).await["tasks"],
        json!([]),
        "a task shows only to those who may answer it"
    );

    let output = scripted_llm::generate_instance(&output_schema, "answer");
    let answer = json!({"runId": run_id, "nodeId": node_id, "expectedPlanVersion": version, "output": output});
    let (status, body) = post_json(&api, "/run.resume", WRITER_TOKEN, &answer).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "not_assignee");
    assert_eq!(
        body["error"]["details"]["assignedTo"]["groups"],
        json!(["director"])
    );
    let (status, body) = post_json(
        &api,
        &format!("/tasks/{run_id}:{node_id}/decline"),
        WRITER_TOKEN,
        &json!({"reasonCode": "not_mine"}),
    )
    .await;
    assert_eq!(status, 403, "declining is answering too: {body}");
    assert_eq!(body["error"]["code"], "not_assignee");
    assert!(
        frames_after(&api, run_id, &parked["id"]).await.is_empty(),
        "a refused answer appends nothing"
    );

    let (status, body) = post_json(&api, "/run.resume", DIRECTOR_TOKEN, &answer).await;
    assert_eq!(status, 200, "{body}");
    let snapshot = get_json(&api, &format!("/runs/{run_id}"), DIRECTOR_TOKEN).await;
    assert_eq!(
        snapshot["nodes"][node_id]["answeredBy"], "dana@acme.example",
        "{snapshot}"
    );
    let after = frames_after(&api, run_id, &parked["id"]).await;
    let completed = after
        .iter()
        .find(|frame| frame["type"] == "node_complete" && frame["nodeId"] == node_id)
        .expect("the answered node completes");
    assert_eq!(completed["payload"]["answeredBy"], "dana@acme.example");
}

/// An approval whose policy names its `approvers`: listed to them alone,
/// refused (403 `not_assignee`) to anyone else who may decide approvals,
/// and decided by one of them, who is named in `hitl_resolved`.
#[tokio::test(flavor = "multi_thread")]
async fn an_approval_for_named_approvers_is_listed_and_decided_by_them_only() {
    let api = start_api().await;
    let mut envelope = example("positioning-recommendation.json");
    envelope["policies"] = json!({"runtime": [{
        "id": "gate", "trigger": {"kind": "onStart"},
        "action": {"type": "hitl", "approvers": {"users": ["dana@acme.example"]}}
    }]});
    let (status, accepted) = post_json(&api, "/runs", SUBMITTER_TOKEN, &envelope).await;
    assert_eq!(status, 202, "{accepted}");
    let run_id = accepted["runId"].as_str().unwrap().to_string();
    let mut listed = json!([]);
    for _ in 0..200 {
        listed = get_json(&api, "/hitl/requests", ACME_TOKEN).await["requests"].clone();
        if listed
            .as_array()
            .is_some_and(|requests| !requests.is_empty())
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(
        listed[0]["approvers"],
        json!({"users": ["dana@acme.example"]}),
        "{listed}"
    );
    assert_eq!(
        get_json(&api, "/hitl/requests", APPROVER_TOKEN).await["requests"],
        json!([]),
        "an approval shows only to its approvers"
    );
    let decision =
        json!({"runId": run_id, "requestId": listed[0]["requestId"], "decision": "approve"});
    let (status, body) = post_json(&api, "/hitl/resolve", APPROVER_TOKEN, &decision).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "not_assignee");
    assert_eq!(
        body["error"]["details"]["assignedTo"]["users"],
        json!(["dana@acme.example"])
    );
    let (status, body) = post_json(&api, "/hitl/resolve", DANA_APPROVER_TOKEN, &decision).await;
    assert_eq!(status, 200, "{body}");
    let frames = frames_after(&api, &run_id, &json!(0)).await;
    let resolved = frames
        .iter()
        .find(|frame| frame["type"] == "hitl_resolved")
        .expect("the approval is resolved");
    assert_eq!(resolved["payload"]["decidedBy"], "dana@acme.example");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_audit_trail_names_who_submitted_approved_and_cancelled_and_cannot_be_changed() {
    let api = start_api().await;
    // Submitted by sam: the seed sample waits for approval of its final output.
    let envelope: Value = serde_json::from_str(
        &std::fs::read_to_string(baton_test_support::repository_path(
            "registry/examples/seed-10.1-sample-envelope.json",
        ))
        .unwrap(),
    )
    .unwrap();
    let frames = read_sse(
        api.client
            .post(format!("{}/run.stream", api.base))
            .bearer_auth(SUBMITTER_TOKEN)
            .header("x-request-id", "req-submit-1")
            .json(&envelope)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let approved_run = frames.last().unwrap().2["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let requests = get_json(&api, "/hitl/requests", APPROVER_TOKEN).await;
    let request_id = requests["requests"][0]["requestId"]
        .as_str()
        .unwrap()
        .to_string();
    // The stored request shows what is being approved, as its frame did:
    // the pending node's contract and its output.
    let asked = frames
        .iter()
        .find(|frame| frame.1 == "hitl_request")
        .expect("the run asks for approval");
    let summary = &requests["requests"][0]["contractSummary"];
    assert_eq!(
        *summary, asked.2["payload"]["contractSummary"],
        "{requests}"
    );
    assert!(summary["output"].is_object(), "{summary}");
    assert!(
        !summary["outputFacets"].as_array().unwrap().is_empty(),
        "{summary}"
    );
    // sam may not approve; abe may.
    let decision = json!({"runId": approved_run, "requestId": request_id, "decision": "approve"});
    let (status, body) = post_json(&api, "/hitl/resolve", SUBMITTER_TOKEN, &decision).await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = post_json(&api, "/hitl/resolve", APPROVER_TOKEN, &decision).await;
    assert_eq!(status, 200, "{body}");
    // A second run, submitted by sam and cancelled by olga.
    let (status, accepted) = post_json(
        &api,
        "/runs",
        SUBMITTER_TOKEN,
        &example("positioning-recommendation.json"),
    )
    .await;
    assert_eq!(status, 202, "{accepted}");
    let cancelled_run = accepted["runId"].as_str().unwrap().to_string();
    let (status, body) = post_json(
        &api,
        &format!("/runs/{cancelled_run}/cancel"),
        OPERATOR_TOKEN,
        &json!({}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let cancel_status = status;

    // Only an admin reads the trail.
    let refused = api
        .client
        .get(format!("{}/audit", api.base))
        .bearer_auth(OPERATOR_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let page = get_json(&api, "/audit", ACME_TOKEN).await;
    let records = page["records"].as_array().unwrap();
    let line = |record: &Value| {
        format!(
            "{} {} {} {}",
            record["actor"].as_str().unwrap(),
            record["action"].as_str().unwrap(),
            record["resource"].as_str().unwrap_or("-"),
            record["outcome"]["status"]
        )
    };
    let lines: Vec<String> = records.iter().rev().map(line).collect();
    assert_eq!(
        lines,
        [
            format!("sam@acme.example submitRunAndStream run/{approved_run} 200"),
            // Refused by the scope check: on the trail, nothing changed.
            "sam@acme.example resolveRequest - 403".to_string(),
            format!("abe@acme.example resolveRequest run/{approved_run} 200"),
            format!("sam@acme.example submitRun run/{cancelled_run} 202"),
            format!("olga@acme.example cancelRun run/{cancelled_run} {cancel_status}"),
        ],
        "{page}"
    );
    assert_eq!(records.last().unwrap()["requestId"], "req-submit-1");
    let refused = &records[records.len() - 2];
    assert_eq!(refused["outcome"]["code"], "missing_scope", "{refused}");
    // globex sees none of acme's trail.
    assert_eq!(
        get_json(&api, "/audit", GLOBEX_TOKEN).await["records"],
        json!([])
    );
    // JSON lines, one record a line.
    let exported = api
        .client
        .get(format!("{}/audit?format=jsonl&limit=2", api.base))
        .bearer_auth(ACME_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(exported.headers()["content-type"], "application/x-ndjson");
    let cursor = exported.headers()["x-next-cursor"]
        .to_str()
        .unwrap()
        .to_string();
    let text = exported.text().await.unwrap();
    assert_eq!(text.lines().count(), 2);
    for exported_line in text.lines() {
        let record: Value = serde_json::from_str(exported_line).unwrap();
        assert!(record["auditId"].is_string());
    }
    let rest = get_json(&api, &format!("/audit?cursor={cursor}"), ACME_TOKEN).await;
    assert_eq!(rest["records"].as_array().unwrap().len(), 3);
    // No route changes the trail: the document has one operation on it, a read.
    let document = baton_http::openapi::document();
    let audit_paths: Vec<(&String, Vec<&String>)> = document["paths"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(path, _)| path.contains("audit"))
        .map(|(path, methods)| (path, methods.as_object().unwrap().keys().collect()))
        .collect();
    assert_eq!(audit_paths.len(), 1, "{audit_paths:?}");
    assert_eq!(audit_paths[0].1, vec!["get"]);
    for method in ["PUT", "PATCH", "DELETE", "POST"] {
        let response = api
            .client
            .request(method.parse().unwrap(), format!("{}/audit", api.base))
            .bearer_auth(ACME_TOKEN)
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 405, "{method} /audit");
    }
    // The attempts are themselves on the trail (405, nothing changed), and
    // the five records before them are as they were.
    let after = get_json(&api, "/audit", ACME_TOKEN).await;
    let after = after["records"].as_array().unwrap();
    assert_eq!(after.len(), 9, "{after:?}");
    assert!(
        after[..4]
            .iter()
            .all(|record| record["outcome"]["status"] == 405 && record["actor"] == "token")
    );
    assert_eq!(
        &after[4..],
        &records[..],
        "the earlier records are unchanged"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_person_resumes_a_parked_run_once_with_valid_output() {
    let api = start_api().await;
    let parked = park_on_a_person(&api).await;
    let run_id = parked["runId"].as_str().unwrap();
    let node_id = parked["nodeId"].as_str().unwrap();
    let version = parked["planVersion"].clone();
    let output_schema = parked["payload"]["contract"]["outputSchema"].clone();

    // The task is listed for its tenant (and its capability), not for another.
    let capability = parked["payload"]["capabilityId"].as_str().unwrap();
    let listed = get_json(
        &api,
        &format!("/tasks?status=pending&capabilityId={capability}"),
        ACME_TOKEN,
    )
    .await;
    let tasks = listed["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "{listed}");
    assert_eq!(tasks[0]["taskId"], format!("{run_id}:{node_id}"));
    assert_eq!(tasks[0]["outputSchema"], output_schema);
    assert_eq!(tasks[0]["planVersion"], version);
    let other_capability = get_json(&api, "/tasks?capabilityId=nobody", ACME_TOKEN).await;
    assert_eq!(other_capability["tasks"], json!([]));
    assert_eq!(
        get_json(&api, "/tasks", GLOBEX_TOKEN).await["tasks"],
        json!([])
    );
    let (status, _) = post_json(&api, "/run.resume", ACME_TOKEN, &json!([])).await;
    assert_eq!(status, 400);

    // Output that breaks the node's contract: 422 with paths, nothing changes.
    let (status, body) = post_json(
        &api,
        "/run.resume",
        ACME_TOKEN,
        &json!({"runId": run_id, "nodeId": node_id, "expectedPlanVersion": version, "output": {"positioning": 7}}),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "output_contract_violated");
    let paths: Vec<&str> = body["error"]["details"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|error| error["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"$.output.positioning"), "{paths:?}");
    assert!(
        frames_after(&api, run_id, &parked["id"]).await.is_empty(),
        "nothing was appended"
    );
    let snapshot = get_json(&api, &format!("/runs/{run_id}"), ACME_TOKEN).await;
    assert_eq!(snapshot["run"]["status"], "awaiting_human");

    // A stale plan version and a malformed body change nothing either.
    let (status, body) = post_json(
        &api,
        "/run.resume",
        ACME_TOKEN,
        &json!({"taskId": format!("{run_id}:{node_id}"), "expectedPlanVersion": 99, "output": {}}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("stale_plan_version"))
    );
    assert_eq!(body["error"]["details"]["currentPlanVersion"], version);
    let (status, body) = post_json(
        &api,
        "/run.resume",
        ACME_TOKEN,
        &json!({"runId": run_id, "nodeId": node_id}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["details"]["path"].as_str()),
        (400, Some("$.expectedPlanVersion"))
    );

    // Two valid answers at once: one transition, the other is told so.
    let output = scripted_llm::generate_instance(&output_schema, "answer");
    let answer = json!({"runId": run_id, "nodeId": node_id, "expectedPlanVersion": version, "output": output});
    let (first, second) = tokio::join!(
        post_json(&api, "/run.resume", ACME_TOKEN, &answer),
        post_json(&api, "/run.resume", ACME_TOKEN, &answer)
    );
    let mut statuses = vec![first.0, second.0];
    statuses.sort_unstable();
    assert_eq!(statuses, vec![200, 409], "{first:?} {second:?}");
    let loser = if first.0 == 409 { &first.1 } else { &second.1 };
    assert_eq!(loser["error"]["code"], "not_awaiting_a_person");

    let after = frames_after(&api, run_id, &parked["id"]).await;
    let types: Vec<&str> = after
        .iter()
        .map(|frame| frame["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types[..2],
        ["plan_generated", "node_complete"],
        "a resume restates the plan (metadata.resumed) first: {types:?}"
    );
    assert_eq!(types.last(), Some(&"complete"), "{types:?}");
    let completions_of_the_node = after
        .iter()
        .filter(|frame| frame["type"] == "node_complete" && frame["nodeId"] == node_id)
        .count();
    assert_eq!(completions_of_the_node, 1, "no duplicate frame");
    baton_test_support::assert_frame_values_match_schemas(&after);
    assert_eq!(after[0]["payload"]["metadata"]["resumed"], true);
    assert_eq!(after[1]["payload"]["output"], output);
    assert_eq!(
        get_json(&api, "/tasks", ACME_TOKEN).await["tasks"],
        json!([])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_person_declining_fails_the_run_with_the_reason() {
    let api = start_api().await;
    let parked = park_on_a_person(&api).await;
    let run_id = parked["runId"].as_str().unwrap();
    let node_id = parked["nodeId"].as_str().unwrap();
    let task = format!("/tasks/{run_id}:{node_id}/decline");
    let (status, body) = post_json(&api, &task, ACME_TOKEN, &json!({"note": "no code"})).await;
    assert_eq!(
        (status, body["error"]["details"]["path"].as_str()),
        (400, Some("$.reasonCode"))
    );
    let (status, _) = post_json(&api, &task, GLOBEX_TOKEN, &json!({"reasonCode": "x"})).await;
    assert_eq!(status, 404, "another tenant's task");
    let (status, body) = post_json(
        &api,
        &task,
        ACME_TOKEN,
        &json!({"reasonCode": "out_of_scope", "note": "not ours to judge"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "failed");
    let after = frames_after(&api, run_id, &parked["id"]).await;
    let types: Vec<&str> = after
        .iter()
        .map(|frame| frame["type"].as_str().unwrap())
        .collect();
    // The node's metrics, then the run's at its ending.
    assert_eq!(types, vec!["node_error", "metrics", "metrics", "error"]);
    assert_eq!(after[1]["nodeId"], after[0]["nodeId"]);
    assert!(after[2]["nodeId"].is_null());
    assert_eq!(after[3]["payload"]["code"], "human_declined");
    assert!(
        after[3]["message"]
            .as_str()
            .unwrap()
            .contains("not ours to judge")
    );
    let (status, body) = post_json(&api, &task, ACME_TOKEN, &json!({"reasonCode": "again"})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("not_awaiting_a_person"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resume_asked_as_a_stream_relays_the_frames_from_the_answer_on() {
    let api = start_api().await;
    let parked = park_on_a_person(&api).await;
    let run_id = parked["runId"].as_str().unwrap();
    let output =
        scripted_llm::generate_instance(&parked["payload"]["contract"]["outputSchema"], "answer");
    let frames: Vec<Value> = read_sse(
        api.client
            .post(format!("{}/run.resume", api.base))
            .bearer_auth(ACME_TOKEN)
            .header("accept", "text/event-stream")
            .json(&json!({
                "taskId": format!("{run_id}:{}", parked["nodeId"].as_str().unwrap()),
                "expectedPlanVersion": parked["planVersion"],
                "output": output
            }))
            .send()
            .await
            .unwrap(),
    )
    .await
    .into_iter()
    .map(|(_, _, frame)| frame)
    .collect();
    let types: Vec<&str> = frames
        .iter()
        .map(|frame| frame["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types[..2],
        ["plan_generated", "node_complete"],
        "a resume restates the plan (metadata.resumed) first: {types:?}"
    );
    assert_eq!(types.last(), Some(&"complete"), "{types:?}");
    assert_eq!(
        frames[0]["id"],
        parked["id"].as_u64().unwrap() + 1,
        "nothing before the answer is repeated"
    );
}

/// A seed-003 panel request: three judges, discussion on, simple average.
fn panel_request(judges: &[&str]) -> Value {
    let selected: Vec<Value> = judges
        .iter()
        .map(|id| {
            json!({"id": id, "capabilities": {"systemPrompt": format!("You are judge {id}.")},
                         "paymentConfig": {"enabled": false}})
        })
        .collect();
    json!({
        "request": {"id": "req-http", "content": "Baton runs plans one durable step at a time.",
                    "criteria": ["Accuracy", "Clarity"], "selectedAgents": selected},
        "config": {"maxDiscussionRounds": 2, "roundTimeout": 30000, "consensusAlgorithm": "simple_average",
                   "enableDiscussion": true, "convergenceThreshold": 0.5, "outlierDetection": true}
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_judge_panel_evaluation_streams_its_progress_and_is_kept() {
    let api = start_api().await;
    // Test double for the judges' model: three close scores (converged at once).
    api.model
        .push_behaviors([8.0, 8.5, 8.2].map(|score| scripted_llm::Behavior::Content {
            content: json!({"score": score, "feedback": "solid", "strengths": ["clear"], "improvements": []})
                .to_string(),
        }));
    let root = api.base.trim_end_matches("/api/v1/flex").to_string();
    let response = api
        .client
        .post(format!("{root}/api/v1/judge/evaluations"))
        .bearer_auth(ACME_TOKEN)
        .json(&panel_request(&["a", "b", "c"]))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let location = response.headers()["location"].to_str().unwrap().to_string();
    let frames = read_sse(response).await;
    let types: Vec<&str> = frames.iter().map(|(_, kind, _)| kind.as_str()).collect();
    assert_eq!(types.last(), Some(&"complete"), "{types:?}");
    let progress: Vec<&Value> = frames
        .iter()
        .filter(|(_, kind, _)| kind == "progress")
        .map(|(_, _, frame)| &frame["payload"])
        .collect();
    assert_eq!(
        progress.len(),
        7,
        "initializing, scoring, three answers, converging, completed: {types:?}"
    );
    let statuses: Vec<&str> = progress
        .iter()
        .map(|payload| payload["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [
            "initializing",
            "scoring",
            "scoring",
            "scoring",
            "scoring",
            "converging",
            "completed"
        ]
    );
    assert_eq!(progress[4]["scoresReceived"], 3);
    assert_eq!(api.model.request_count(), 3, "one model call per judge");
    let run_id = frames[0].2["runId"].as_str().unwrap();
    assert_eq!(location, format!("/api/v1/judge/evaluations/{run_id}"));

    let kept = api
        .client
        .get(format!("{root}{location}"))
        .bearer_auth(ACME_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(kept.status(), 200);
    let evaluation: Value = kept.json().await.unwrap();
    let final_score = evaluation["consensus"]["finalScore"].as_f64().unwrap();
    assert!((final_score - (8.0 + 8.5 + 8.2) / 3.0).abs() < 1e-9);
    assert_eq!(evaluation["requestId"], "req-http");
    let transcript: baton_judge::transcript::EvaluationTranscript =
        serde_json::from_value(evaluation["transcript"].clone()).unwrap();
    assert!(transcript.verify().is_ok());

    let other_tenant = api
        .client
        .get(format!("{root}{location}"))
        .bearer_auth(GLOBEX_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(other_tenant.status(), 404);
    let plain_run = api
        .client
        .post(format!("{}/runs", api.base))
        .bearer_auth(ACME_TOKEN)
        .json(&example("seed-10.0.1-stream-contract-variants.json"))
        .send()
        .await
        .unwrap();
    let plain: Value = plain_run.json().await.unwrap();
    let not_an_evaluation = api
        .client
        .get(format!(
            "{root}/api/v1/judge/evaluations/{}",
            plain["runId"].as_str().unwrap()
        ))
        .bearer_auth(ACME_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(not_an_evaluation.status(), 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_panel_request_is_422_with_its_path_and_starts_nothing() {
    let api = start_api().await;
    let root = api.base.trim_end_matches("/api/v1/flex").to_string();
    for (body, path) in [
        (panel_request(&[]), "$.request.selectedAgents"),
        (panel_request(&["a", "a"]), "$.request.selectedAgents[1].id"),
        (
            {
                let mut body = panel_request(&["a"]);
                body["config"]["roundTimeout"] = json!(0);
                body
            },
            "$.config.roundTimeout",
        ),
    ] {
        let refused = api
            .client
            .post(format!("{root}/api/v1/judge/evaluations"))
            .bearer_auth(ACME_TOKEN)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 422);
        let error: Value = refused.json().await.unwrap();
        assert_eq!(error["error"]["code"], "invalid_panel_request");
        assert_eq!(error["error"]["details"]["path"], path);
    }
    let unauthenticated = api
        .client
        .post(format!("{root}/api/v1/judge/evaluations"))
        .json(&panel_request(&["a"]))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthenticated.status(), 401);
    assert_eq!(api.model.request_count(), 0);
}

/// Reads an SSE response to its end: (id, event name, data JSON), no frame checks.
async fn read_raw_sse(response: reqwest::Response) -> Vec<(String, String, Value)> {
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut events = response.bytes_stream().eventsource();
    let mut read = Vec::new();
    while let Some(event) = tokio::time::timeout(Duration::from_secs(20), events.next())
        .await
        .expect("stream stalled")
    {
        let event = event.unwrap();
        read.push((
            event.id,
            event.event,
            serde_json::from_str(&event.data).unwrap(),
        ));
    }
    read
}

#[tokio::test(flavor = "multi_thread")]
async fn the_hooks_dialect_renders_a_stream_as_hook_events() {
    let api = start_api().await;
    let streamed = read_raw_sse(
        api.client
            .post(format!("{}/run.stream?dialect=hooks", api.base))
            .bearer_auth(ACME_TOKEN)
            .json(&example("seed-10.0.1-stream-contract-variants.json"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let names: Vec<&str> = streamed.iter().map(|(_, name, _)| name.as_str()).collect();
    assert_eq!(names.first(), Some(&"prompt:submit"));
    assert_eq!(names.last(), Some(&"orchestrator:complete"));
    assert_eq!(
        names
            .iter()
            .filter(|name| **name == "orchestrator:complete")
            .count(),
        1
    );
    let (_, _, ended) = streamed.last().unwrap();
    assert_eq!(ended["data"]["status"], "success");
    assert_eq!(
        ended["data"]["turn_count"].as_u64().unwrap() as usize,
        api.model.request_count()
    );
    // The same run replayed in the hooks dialect gives the same events.
    let run_id = streamed[0].2["runId"].as_str().unwrap();
    let replayed = read_raw_sse(
        api.client
            .get(format!("{}/runs/{run_id}/events?dialect=hooks", api.base))
            .bearer_auth(ACME_TOKEN)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(replayed, streamed);
    // A run that parks on a person ends its hook stream too.
    let human_review: Value = serde_json::from_str(
        &std::fs::read_to_string(baton_test_support::repository_path(
            "functions/baton/tests/fixtures/human-review.json",
        ))
        .unwrap(),
    )
    .unwrap();
    let parked = read_raw_sse(
        api.client
            .post(format!("{}/run.stream?dialect=hooks", api.base))
            .bearer_auth(ACME_TOKEN)
            .json(&human_review)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let (_, name, last) = parked.last().unwrap();
    assert_eq!(name, "orchestrator:complete");
    assert_eq!(last["data"]["status"], "incomplete");
    let refused = api
        .client
        .post(format!("{}/run.stream?dialect=smoke-signals", api.base))
        .bearer_auth(ACME_TOKEN)
        .json(&example("seed-10.0.1-stream-contract-variants.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["error"]["code"], "invalid_dialect");
    assert_eq!(error["error"]["details"]["parameter"], "dialect");
}

/// POSTs a chat message; the status and, for a stream, its frames.
async fn chat(api: &TestApi, token: &str, body: &Value) -> (u16, Option<String>, Vec<Value>) {
    let response = api
        .client
        .post(api.base.replace("/api/v1/flex", "/api/v1/chat"))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    if status != 200 {
        let error: Value = response.json().await.unwrap_or(Value::Null);
        return (status, None, vec![error]);
    }
    let thread = response
        .headers()
        .get("x-baton-thread-id")
        .map(|value| value.to_str().unwrap().to_string());
    let frames = read_sse(response)
        .await
        .into_iter()
        .map(|(_, _, frame)| frame)
        .collect();
    (status, thread, frames)
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_messages_stream_and_a_thread_remembers_its_exchanges() {
    let api = start_api().await;
    api.model.push_behaviors([
        scripted_llm::Behavior::Content {
            content: "I plan and run content work.".into(),
        },
        scripted_llm::Behavior::Content {
            content: "Usually a few minutes.".into(),
        },
    ]);
    let (status, thread, frames) =
        chat(&api, ACME_TOKEN, &json!({"message": "What do you do?"})).await;
    assert_eq!(status, 200);
    let thread = thread.expect("the thread id header");
    let last = frames.last().unwrap();
    assert_eq!(last["type"], "complete");
    assert_eq!(
        last["payload"]["output"],
        json!({"message": "I plan and run content work.", "threadId": thread})
    );
    let types: Vec<&str> = frames
        .iter()
        .map(|frame| frame["type"].as_str().unwrap())
        .collect();
    for expected in ["start", "agent_state", "delta", "message", "complete"] {
        assert!(types.contains(&expected), "{expected} in {types:?}");
    }

    let (status, _, frames) = chat(
        &api,
        ACME_TOKEN,
        &json!({"message": "How long does it take?", "threadId": thread}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        frames.last().unwrap()["payload"]["output"]["message"],
        "Usually a few minutes."
    );
    let requests = api.model.requests();
    let messages: Vec<(String, String)> = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| {
            (
                message["role"].as_str().unwrap().to_string(),
                message["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        messages[1..],
        [
            ("user".to_string(), "What do you do?".to_string()),
            (
                "assistant".to_string(),
                "I plan and run content work.".to_string()
            ),
            ("user".to_string(), "How long does it take?".to_string()),
        ]
    );
    assert!(
        requests[1].body.get("response_format").is_none(),
        "chat answers in prose"
    );

    // Another tenant cannot continue the thread; bad bodies name their path.
    for (token, body, status, path) in [
        (
            GLOBEX_TOKEN,
            json!({"message": "hi", "threadId": thread}),
            404,
            "$.threadId",
        ),
        (ACME_TOKEN, json!({"message": 5}), 422, "$.message"),
        (ACME_TOKEN, json!({"text": "hi"}), 422, "$.text"),
        (
            ACME_TOKEN,
            json!({"message": "hi", "agent": "nobody.here"}),
            422,
            "$.agent",
        ),
        (
            ACME_TOKEN,
            json!({"message": "hi", "contextType": "astrology"}),
            422,
            "$.contextType",
        ),
    ] {
        let (got, _, error) = chat(&api, token, &body).await;
        assert_eq!(got, status, "{body}");
        assert_eq!(error[0]["error"]["details"]["path"], path, "{body}");
    }
    let (unauthorized, _, _) = chat(&api, "wrong", &json!({"message": "hi"})).await;
    assert_eq!(unauthorized, 401);
    assert_eq!(
        api.model.request_count(),
        2,
        "no refused message reached the model"
    );

    // The thread as its readers see it; another tenant's is not found.
    let threads = api.base.replace("/api/v1/flex", "/api/v1/threads");
    let read = |token: &'static str, thread: String| {
        let request = api
            .client
            .get(format!("{threads}/{thread}"))
            .bearer_auth(token);
        async move {
            let response = request.send().await.unwrap();
            (
                response.status().as_u16(),
                response.json::<Value>().await.unwrap(),
            )
        }
    };
    let (status, view) = read(ACME_TOKEN, thread.clone()).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["threadId"], thread);
    let said: Vec<(&str, &str)> = view["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|exchange| {
            (
                exchange["user"].as_str().unwrap(),
                exchange["assistant"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        said,
        [
            ("What do you do?", "I plan and run content work."),
            ("How long does it take?", "Usually a few minutes.")
        ]
    );
    assert!(view.get("activeRunId").is_none(), "nothing answers now");
    assert_eq!(view["queuedRunIds"], json!([]));
    let (status, error) = read(GLOBEX_TOKEN, thread.clone()).await;
    assert_eq!(status, 404, "{error}");
    assert_eq!(error["error"]["code"], "thread_not_found");
    // The threads list: this thread, titled by its first message; nothing
    // of it for another tenant; a bad parameter is a 400 naming it.
    let list = |token: &'static str, query: &'static str| {
        let request = api
            .client
            .get(format!("{threads}{query}"))
            .bearer_auth(token);
        async move {
            let response = request.send().await.unwrap();
            (
                response.status().as_u16(),
                response.json::<Value>().await.unwrap(),
            )
        }
    };
    let (status, page) = list(ACME_TOKEN, "?limit=5").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["threads"][0]["threadId"], thread, "{page}");
    assert_eq!(page["threads"][0]["firstMessage"], "What do you do?");
    assert_eq!(page["threads"][0]["lastMessage"], "How long does it take?");
    assert!(page.get("nextCursor").is_none(), "{page}");
    let (status, page) = list(GLOBEX_TOKEN, "").await;
    assert_eq!((status, page["threads"].clone()), (200, json!([])));
    for (query, parameter) in [
        ("?limit=0", "limit"),
        ("?cursor=abc", "cursor"),
        ("?status=x", "status"),
    ] {
        let (status, error) = list(ACME_TOKEN, query).await;
        assert_eq!(status, 400, "{query}: {error}");
        assert_eq!(error["error"]["details"]["parameter"], parameter, "{query}");
    }
    // An unknown strategy names its path.
    let (status, _, error) = chat(
        &api,
        ACME_TOKEN,
        &json!({"message": "hi", "threadId": thread, "multitaskStrategy": "shout"}),
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(error[0]["error"]["details"]["path"], "$.multitaskStrategy");
}

/// How many runs the tenant of `token` has.
async fn run_count(api: &TestApi, token: &str) -> usize {
    get_json(api, "/runs?limit=100", token).await["runs"]
        .as_array()
        .unwrap()
        .len()
}

#[tokio::test(flavor = "multi_thread")]
async fn bodies_and_envelopes_over_the_limits_are_json_413s_naming_the_limit_and_nothing_runs() {
    let api = start_api().await;
    let padded = |bytes: usize| {
        let mut envelope = example("positioning-recommendation.json");
        envelope["inputs"]["padding"] = json!("x".repeat(bytes));
        envelope
    };
    // A body over the server's limit, on every POST route.
    for path in ["/runs", "/run.stream", "/run.resume", "/hitl/resolve"] {
        let response = api
            .client
            .post(format!("{}{path}", api.base))
            .bearer_auth(ACME_TOKEN)
            .header("content-type", "application/json")
            .body(padded(TEST_BODY_LIMIT + 1).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 413, "{path}");
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json"),
            "{path}"
        );
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "body_too_large", "{path}: {body}");
        assert_eq!(body["error"]["details"]["limitBytes"], TEST_BODY_LIMIT);
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("BATON_MAX_BODY_BYTES"),
            "{body}"
        );
    }
    // Under the body limit but over the envelope's: refused at submission,
    // on every store alike.
    let (status, body) = post_json(&api, "/runs", ACME_TOKEN, &padded(TEST_ENVELOPE_LIMIT)).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"]["code"], "envelope_too_large");
    assert_eq!(body["error"]["details"]["path"], "$");
    assert_eq!(body["error"]["details"]["limitBytes"], TEST_ENVELOPE_LIMIT);
    assert!(body["error"]["details"]["sizeBytes"].as_u64().unwrap() > TEST_ENVELOPE_LIMIT as u64);
    // JSON nested past serde_json's depth limit (128) is a 400, not a crash.
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let response = api
        .client
        .post(format!("{}/runs", api.base))
        .bearer_auth(ACME_TOKEN)
        .header("content-type", "application/json")
        .body(deep)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_json", "{body}");
    assert_eq!(run_count(&api, ACME_TOKEN).await, 0, "nothing was created");
    assert_eq!(api.model.request_count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_over_its_live_run_limit_gets_429_with_retry_after_and_another_tenant_does_not() {
    // The model double holds each call 2 s: the runs stay at work meanwhile.
    let api = start_api_with(
        Arc::new(SystemClock),
        OrchestratorSettings {
            tenant_limits: baton_runtime::services::TenantLimits {
                live_runs: baton_runtime::services::PerTenantLimit::parse("2").unwrap(),
                ..Default::default()
            },
            ..OrchestratorSettings::default()
        },
    )
    .await;
    api.model
        .set_default_behavior(scripted_llm::Behavior::SlowValid { delay_ms: 2_000 });
    let envelope = example("positioning-recommendation.json");
    for _ in 0..2 {
        let (status, body) = post_json(&api, "/runs", ACME_TOKEN, &envelope).await;
        assert_eq!(status, 202, "{body}");
    }
    let refused = api
        .client
        .post(format!("{}/runs", api.base))
        .bearer_auth(ACME_TOKEN)
        .json(&envelope)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "5");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "tenant_limit");
    assert_eq!(body["error"]["details"]["limit"], 2);
    assert_eq!(body["error"]["details"]["liveRuns"], 2);
    assert_eq!(run_count(&api, ACME_TOKEN).await, 2, "nothing was created");
    // The other tenant is not held back.
    let (status, body) = post_json(&api, "/runs", GLOBEX_TOKEN, &envelope).await;
    assert_eq!(status, 202, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_over_its_submissions_per_minute_gets_429_with_retry_after_and_another_does_not() {
    let api = start_api_with(
        Arc::new(SystemClock),
        OrchestratorSettings {
            tenant_limits: baton_runtime::services::TenantLimits {
                submissions_per_minute: baton_runtime::services::PerTenantLimit::parse(
                    "2,globex:5",
                )
                .unwrap(),
                ..Default::default()
            },
            ..OrchestratorSettings::default()
        },
    )
    .await;
    let envelope = example("positioning-recommendation.json");
    for _ in 0..2 {
        let (status, body) = post_json(&api, "/runs", ACME_TOKEN, &envelope).await;
        assert_eq!(status, 202, "{body}");
    }
    let refused = api
        .client
        .post(format!("{}/runs", api.base))
        .bearer_auth(ACME_TOKEN)
        .json(&envelope)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    let retry_after: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (55..=60).contains(&retry_after),
        "the first submission leaves the window in about a minute: {retry_after}"
    );
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "tenant_rate_limit", "{body}");
    assert_eq!(body["error"]["details"]["limit"], 2);
    assert_eq!(body["error"]["details"]["submittedLastMinute"], 2);
    assert_eq!(body["error"]["details"]["retryAfterSeconds"], retry_after);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("BATON_TENANT_MAX_SUBMISSIONS_PER_MINUTE"),
        "{body}"
    );
    assert_eq!(run_count(&api, ACME_TOKEN).await, 2, "nothing was created");
    // A chat message and a fork start runs too: the same limit holds.
    let chat = api
        .client
        .post(api.base.replace("/api/v1/flex", "/api/v1/chat"))
        .bearer_auth(ACME_TOKEN)
        .json(&json!({"message": "One more, please."}))
        .send()
        .await
        .unwrap();
    assert_eq!(chat.status(), 429);
    assert!(chat.headers().contains_key("retry-after"));
    let body: Value = chat.json().await.unwrap();
    assert_eq!(body["error"]["code"], "tenant_rate_limit", "{body}");
    let listed = get_json(&api, "/runs?limit=10", ACME_TOKEN).await;
    let source = listed["runs"][0]["runId"].as_str().unwrap().to_string();
    let mut planned = false;
    for _ in 0..100 {
        let history = api
            .client
            .get(format!("{}/runs/{source}/history", api.base))
            .bearer_auth(ACME_TOKEN)
            .send()
            .await
            .unwrap();
        if history.status() == 200 {
            let history: Value = history.json().await.unwrap();
            if history["checkpoints"]
                .as_array()
                .is_some_and(|points| points.iter().any(|point| point["kind"] == "plan"))
            {
                planned = true;
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(planned, "the source run was planned");
    let fork = api
        .client
        .post(format!("{}/runs/{source}/fork", api.base))
        .bearer_auth(ACME_TOKEN)
        .json(&json!({"at": {"planVersion": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(fork.status(), 429);
    assert!(fork.headers().contains_key("retry-after"));
    let body: Value = fork.json().await.unwrap();
    assert_eq!(body["error"]["code"], "tenant_rate_limit", "{body}");
    assert_eq!(run_count(&api, ACME_TOKEN).await, 2, "nothing was created");
    // The other tenant has its own, higher, limit.
    for _ in 0..3 {
        let (status, body) = post_json(&api, "/runs", GLOBEX_TOKEN, &envelope).await;
        assert_eq!(status, 202, "{body}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_nested_deeper_than_the_parser_goes_is_a_400_naming_the_depth_and_nothing_is_created()
 {
    let api = start_api().await;
    // 100,000 open arrays: under the body limit, far over the JSON parser's
    // nesting limit (128). No stack overflow, no 500.
    let deep = format!(
        "{{\"objective\": \"deep\", \"inputs\": {{\"x\": {}}}}}",
        "[".repeat(100_000)
    );
    let chat = api.base.replace("/api/v1/flex", "/api/v1/chat");
    for url in [
        format!("{}/runs", api.base),
        format!("{}/run.stream", api.base),
        chat,
    ] {
        let route = url.clone();
        let response = api
            .client
            .post(url)
            .bearer_auth(ACME_TOKEN)
            .header("content-type", "application/json")
            .body(deep.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{route}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_json", "{route}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("recursion limit"),
            "{route}: {body}"
        );
    }
    assert_eq!(run_count(&api, ACME_TOKEN).await, 0, "nothing was created");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_over_its_open_event_streams_gets_429_and_another_run_does_not() {
    let api = start_api().await;
    // The model double holds each call 5 s: the runs stay at work and
    // their streams open meanwhile.
    api.model
        .set_default_behavior(scripted_llm::Behavior::SlowValid { delay_ms: 5_000 });
    let envelope = example("positioning-recommendation.json");
    let (status, first) = post_json(&api, "/runs", ACME_TOKEN, &envelope).await;
    assert_eq!(status, 202, "{first}");
    let (status, second) = post_json(&api, "/runs", ACME_TOKEN, &envelope).await;
    assert_eq!(status, 202, "{second}");
    let open = |run_id: String| {
        let client = api.client.clone();
        let base = api.base.clone();
        async move {
            client
                .get(format!("{base}/runs/{run_id}/events"))
                .bearer_auth(ACME_TOKEN)
                .send()
                .await
                .unwrap()
        }
    };
    let first_id = first["runId"].as_str().unwrap().to_string();
    let mut streams = Vec::new();
    for _ in 0..TEST_STREAMS_PER_RUN {
        let stream = open(first_id.clone()).await;
        assert_eq!(stream.status(), 200);
        streams.push(stream);
    }
    let refused = open(first_id.clone()).await;
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_streams", "{body}");
    assert_eq!(body["error"]["details"]["limit"], TEST_STREAMS_PER_RUN);
    assert_eq!(
        body["error"]["details"]["openStreams"],
        TEST_STREAMS_PER_RUN
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("BATON_MAX_STREAMS_PER_RUN"),
        "{body}"
    );
    // Another run's streams are counted apart, up to the tenant's cap.
    let second_id = second["runId"].as_str().unwrap().to_string();
    let other = open(second_id.clone()).await;
    assert_eq!(other.status(), 200);
    let fifth = open(second_id.clone()).await;
    assert_eq!(fifth.status(), 200, "five of the tenant's streams are open");
    let refused = open(second_id.clone()).await;
    assert_eq!(refused.status(), 429);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["details"]["scope"], "tenant", "{body}");
    assert_eq!(body["error"]["details"]["limit"], TEST_STREAMS_PER_TENANT);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("BATON_MAX_STREAMS_PER_TENANT"),
        "{body}"
    );
    // A closed stream gives its lease back (off the closing request).
    drop(streams);
    let mut reopened = None;
    for _ in 0..100 {
        let stream = open(first_id.clone()).await;
        if stream.status() == 200 {
            reopened = Some(stream);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(reopened.is_some(), "the closed streams' leases came back");
    drop((other, fifth, reopened));
}

/// Every stream takes a lease in the tenant's stream budget, through one
/// opening: with the tenant's five streams open (each on a run's
/// `/events`), `run.stream`, a chat message, a judge evaluation, a resume
/// over SSE, A2A `SendStreamingMessage` and `SubscribeToTask`, and MCP's
/// `start_run` are each refused with `too_many_streams`, and none of them
/// starts a run or applies an answer. A stream given back lets the next
/// one open. The model double holds each call 5 s (the runs stay at work).
#[tokio::test(flavor = "multi_thread")]
async fn every_streaming_route_and_method_takes_the_tenants_stream_budget() {
    let api = start_api().await;
    let parked = park_on_a_person(&api).await;
    let parked_id = parked["runId"].as_str().unwrap().to_string();
    let node_id = parked["nodeId"].as_str().unwrap().to_string();
    let answer = json!({
        "runId": parked_id, "nodeId": node_id, "expectedPlanVersion": parked["planVersion"],
        "output": scripted_llm::generate_instance(&parked["payload"]["contract"]["outputSchema"], "answer"),
    });
    api.model
        .set_default_behavior(scripted_llm::Behavior::SlowValid { delay_ms: 5_000 });
    let envelope = example("positioning-recommendation.json");
    let mut holders = Vec::new();
    let mut held = Vec::new();
    while held.len() < TEST_STREAMS_PER_TENANT {
        let (status, run) = post_json(&api, "/runs", ACME_TOKEN, &envelope).await;
        assert_eq!(status, 202, "{run}");
        let run_id = run["runId"].as_str().unwrap().to_string();
        for _ in 0..TEST_STREAMS_PER_RUN.min(TEST_STREAMS_PER_TENANT - held.len()) {
            let stream = api
                .client
                .get(format!("{}/runs/{run_id}/events", api.base))
                .bearer_auth(ACME_TOKEN)
                .send()
                .await
                .unwrap();
            assert_eq!(stream.status(), 200);
            held.push(stream);
        }
        holders.push(run_id);
    }
    let runs_before = run_count(&api, ACME_TOKEN).await;
    let root = api.base.trim_end_matches("/api/v1/flex").to_string();
    let refused_with_429 = |name: &str, response: reqwest::Response| {
        let name = name.to_string();
        async move {
            assert_eq!(response.status(), 429, "{name}");
            assert!(response.headers().contains_key("retry-after"), "{name}");
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["error"]["code"], "too_many_streams", "{name}: {body}");
            assert_eq!(
                body["error"]["details"]["scope"], "tenant",
                "{name}: {body}"
            );
        }
    };
    let post = |url: String, body: Value| {
        api.client
            .post(url)
            .bearer_auth(ACME_TOKEN)
            .header("accept", "text/event-stream")
            .json(&body)
            .send()
    };
    refused_with_429(
        "run.stream",
        post(format!("{}/run.stream", api.base), envelope.clone())
            .await
            .unwrap(),
    )
    .await;
    refused_with_429(
        "chat",
        post(
            format!("{root}/api/v1/chat"),
            json!({"message": "Write three taglines"}),
        )
        .await
        .unwrap(),
    )
    .await;
    refused_with_429(
        "judge evaluation",
        post(
            format!("{root}/api/v1/judge/evaluations"),
            panel_request(&["a", "b", "c"]),
        )
        .await
        .unwrap(),
    )
    .await;
    refused_with_429(
        "resume over SSE",
        post(format!("{}/run.resume", api.base), answer.clone())
            .await
            .unwrap(),
    )
    .await;
    for (method, params) in [
        (
            "SendStreamingMessage",
            json!({"message": {"messageId": "m-cap", "role": "ROLE_USER", "parts": [{"data": envelope}]}}),
        ),
        ("SubscribeToTask", json!({"id": parked_id})),
    ] {
        let answer = a2a_call(
            &api,
            ACME_TOKEN,
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
        )
        .await;
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("too_many_streams"),
            "{method}: {answer}"
        );
    }
    // MCP is served when the crate's `mcp-server` feature is on (as the
    // workspace's test run builds it).
    #[cfg(feature = "mcp-server")]
    {
        let mcp = api
            .client
            .post(format!("{root}/mcp"))
            .bearer_auth(ACME_TOKEN)
            .header("accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "start_run", "arguments": {"envelope": envelope}}}))
            .send()
            .await
            .unwrap();
        let mcp_status = mcp.status();
        let mcp_text = mcp.text().await.unwrap();
        assert_eq!(mcp_status, 200, "{mcp_text}");
        assert!(
            mcp_text.contains("too_many_streams") && mcp_text.contains("\"isError\":true"),
            "MCP start_run: {mcp_text}"
        );
    }

    // Nothing was started, and the parked run still waits for its answer.
    assert_eq!(run_count(&api, ACME_TOKEN).await, runs_before);
    let still = get_json(&api, &format!("/runs/{parked_id}"), ACME_TOKEN).await;
    assert_eq!(still["run"]["status"], "awaiting_human", "{still}");

    // A stream given back lets the next one open.
    drop(held.pop());
    let mut reopened = None;
    for _ in 0..100 {
        let response = post(format!("{}/run.resume", api.base), answer.clone())
            .await
            .unwrap();
        if response.status() == 200 {
            reopened = Some(response);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(reopened.is_some(), "the stream given back was taken again");
    drop((held, reopened, holders));
}

#[tokio::test(flavor = "multi_thread")]
async fn resume_run_id_follows_the_existing_run_and_never_creates_one() {
    let api = start_api().await;
    let parked = park_on_a_person(&api).await;
    let run_id = parked["runId"].as_str().unwrap();
    let node_id = parked["nodeId"].as_str().unwrap();
    assert_eq!(run_count(&api, ACME_TOKEN).await, 1);
    let mut resending: Value = serde_json::from_str(
        &std::fs::read_to_string(baton_test_support::repository_path(
            "functions/baton/tests/fixtures/human-review.json",
        ))
        .unwrap(),
    )
    .unwrap();
    resending["constraints"]["resumeRunId"] = json!(run_id);

    // A parked run: the same run, its state as it is.
    let (status, accepted) = post_json(&api, "/runs", ACME_TOKEN, &resending).await;
    assert_eq!(status, 200, "{accepted}");
    assert_eq!(accepted["runId"], run_id);
    assert_eq!(accepted["resumed"], true);
    assert_eq!(accepted["status"], "awaiting_human");
    let replayed = read_sse(
        api.client
            .post(format!("{}/run.stream", api.base))
            .bearer_auth(ACME_TOKEN)
            .json(&resending)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(replayed.first().unwrap().1, "start");
    assert_eq!(replayed.last().unwrap().2, parked, "up to where it waits");

    // It continues when the person answers, and a resend replays it whole.
    let output =
        scripted_llm::generate_instance(&parked["payload"]["contract"]["outputSchema"], "answer");
    let (status, body) = post_json(
        &api,
        "/run.resume",
        ACME_TOKEN,
        &json!({"runId": run_id, "nodeId": node_id, "expectedPlanVersion": parked["planVersion"], "output": output}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let mut finished = Vec::new();
    for _ in 0..200 {
        finished = read_sse(
            api.client
                .post(format!("{}/run.stream", api.base))
                .bearer_auth(ACME_TOKEN)
                .json(&resending)
                .send()
                .await
                .unwrap(),
        )
        .await;
        if finished.last().unwrap().1 == "complete" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(finished.last().unwrap().1, "complete");
    assert!(
        finished
            .iter()
            .all(|(_, _, frame)| frame["runId"] == run_id)
    );
    let ids: Vec<&str> = finished.iter().map(|(id, _, _)| id.as_str()).collect();
    let expected: Vec<String> = (1..=finished.len()).map(|id| id.to_string()).collect();
    assert_eq!(
        ids, expected,
        "the whole run, in order, from its first frame"
    );
    assert_eq!(run_count(&api, ACME_TOKEN).await, 1, "no second run");

    // Another tenant's run, or none: 404 naming the field; nothing created.
    let (status, body) = post_json(&api, "/runs", GLOBEX_TOKEN, &resending).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "run_not_found");
    assert_eq!(
        body["error"]["details"]["path"],
        "$.constraints.resumeRunId"
    );
    assert_eq!(run_count(&api, GLOBEX_TOKEN).await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_runs_list_pages_newest_first_filters_by_status_and_names_bad_parameters() {
    let api = start_api().await;
    let mut created = Vec::new();
    for _ in 0..3 {
        let response = api
            .client
            .post(format!("{}/run.stream", api.base))
            .bearer_auth(ACME_TOKEN)
            .json(&example("seed-10.1-sample-envelope.json"))
            .send()
            .await
            .unwrap();
        let frames = read_sse(response).await;
        assert_eq!(frames.last().unwrap().1, "complete");
        created.push(frames[0].2["runId"].as_str().unwrap().to_string());
        // Creation times a few milliseconds apart order the list.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A run no plan can serve ends plan_rejected: listed under its status.
    let response = api
        .client
        .post(format!("{}/run.stream", api.base))
        .bearer_auth(ACME_TOKEN)
        .json(&json!({"objective": "x", "outputContract": {"schema": {"type": "object", "required": ["nothingProducesThis"], "properties": {"nothingProducesThis": {"type": "string"}}}}}))
        .send()
        .await
        .unwrap();
    let rejected = read_sse(response).await;
    assert_eq!(
        rejected.last().unwrap().2["payload"]["status"],
        "plan_rejected"
    );
    let rejected_runs = get_json(&api, "/runs?status=plan_rejected", ACME_TOKEN).await;
    assert_eq!(rejected_runs["runs"][0]["runId"], rejected[0].2["runId"]);
    let first = get_json(&api, "/runs?limit=2&status=completed", ACME_TOKEN).await;
    let listed: Vec<&str> = first["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["runId"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [created[2].as_str(), created[1].as_str()]);
    assert_eq!(first["runs"][0]["status"], "completed");
    assert!(first["runs"][0]["objective"].as_str().unwrap().len() > 10);
    let cursor = first["nextCursor"].as_str().unwrap();
    let second = get_json(
        &api,
        &format!("/runs?limit=2&status=completed&cursor={cursor}"),
        ACME_TOKEN,
    )
    .await;
    assert_eq!(second["runs"].as_array().unwrap().len(), 1);
    assert_eq!(second["runs"][0]["runId"], created[0].as_str());
    assert!(second.get("nextCursor").is_none(), "{second}");
    let everything = get_json(&api, "/runs", ACME_TOKEN).await;
    assert_eq!(
        everything["runs"].as_array().unwrap().len(),
        4,
        "without a status every run is listed: {everything}"
    );
    assert_eq!(everything["runs"][0]["status"], "plan_rejected");
    let globex = get_json(&api, "/runs", GLOBEX_TOKEN).await;
    assert_eq!(
        globex["runs"],
        json!([]),
        "another tenant's runs are not listed"
    );
    for (query, parameter) in [
        ("status=finished", "status"),
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=ten", "limit"),
        ("cursor=yesterday", "cursor"),
        ("order=asc", "order"),
    ] {
        let response = api
            .client
            .get(format!("{}/runs?{query}", api.base))
            .bearer_auth(ACME_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{query}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_query", "{query}");
        assert_eq!(body["error"]["details"]["parameter"], parameter, "{query}");
    }
}

/// The routes the router's source declares: `(method, path literal)`.
fn declared_routes() -> Vec<(String, String)> {
    let source_directory = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut routes = Vec::new();
    let mut files = Vec::new();
    let mut folders = vec![source_directory];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                files.push(path);
            }
        }
    }
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        for piece in text.split(".route(").skip(1) {
            let Some(path) = piece
                .trim_start()
                .strip_prefix('"')
                .and_then(|rest| rest.split('"').next())
            else {
                continue;
            };
            // The method routers of this `.route(…)` call: up to its closing parenthesis.
            let mut depth = 1;
            let mut end = piece.len();
            for (at, character) in piece.char_indices() {
                match character {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            end = at;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let call = &piece[..end];
            for method in ["get", "post", "put", "delete", "patch"] {
                if call.contains(&format!(" {method}("))
                    || call.contains(&format!("\n{method}("))
                    || call.contains(&format!(",{method}("))
                    || call.contains(&format!(".{method}("))
                    || call.contains(&format!("({method}("))
                {
                    routes.push((method.to_string(), path.to_string()));
                }
            }
        }
    }
    routes
}

/// The document names the idempotency key on each route that takes one:
/// the `Idempotency-Key` header parameter, the body's `idempotencyKey`,
/// and the 409 of a request still in flight.
#[test]
fn the_openapi_document_names_the_idempotency_key_on_each_keyed_route() {
    let document = baton_http::openapi::document();
    let mut named = Vec::new();
    for (path, methods) in document["paths"].as_object().unwrap() {
        for (method, operation) in methods.as_object().unwrap() {
            let id = operation["operationId"].as_str().unwrap_or_default();
            let header = operation["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|parameter| {
                    parameter["name"] == "Idempotency-Key" && parameter["in"] == "header"
                });
            let keyed = baton_http::openapi::KEYED_OPERATIONS.contains(&id);
            assert_eq!(header, keyed, "{method} {path} ({id})");
            if !keyed {
                continue;
            }
            named.push(id.to_string());
            assert!(operation["responses"]["409"].is_object(), "{id}");
            let schema = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
                .as_str()
                .unwrap()
                .trim_start_matches("#/components/schemas/");
            assert!(
                document["components"]["schemas"][schema]["properties"]["idempotencyKey"]
                    .is_object(),
                "{id}: {schema} names idempotencyKey"
            );
        }
    }
    named.sort();
    let mut expected: Vec<String> = baton_http::openapi::KEYED_OPERATIONS
        .iter()
        .map(|id| id.to_string())
        .collect();
    expected.sort();
    assert_eq!(named, expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_openapi_document_matches_the_router_and_every_status_it_answers() {
    let api = start_api().await;
    let root = api.base.trim_end_matches("/api/v1/flex").to_string();
    let document = baton_http::openapi::document();
    // Served as generated, and checked in as generated.
    let served: Value = api
        .client
        .get(format!("{}/openapi.json", api.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(served, document);
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
    let generated = format!("{}\n", serde_json::to_string_pretty(&document).unwrap());
    if std::env::var("BATON_UPDATE_SCHEMAS").is_ok_and(|value| value == "1") {
        std::fs::write(&file, &generated).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&file).unwrap_or_default(),
        generated,
        "docs/openapi.json differs from the generated document (rerun with BATON_UPDATE_SCHEMAS=1)"
    );
    assert_eq!(document["openapi"], "3.1.0");

    // Every route comes from the operations table: the only routes the
    // source declares itself are the agent protocols' endpoints (A2A's card
    // and JSON-RPC, MCP's: specified by their protocols, not by this
    // document) and the viewer's, which are the table's `ByViewer` entries
    // served with the viewer's configured origins. A route added anywhere
    // else fails here.
    let operations = baton_http::openapi::operations();
    let protocol_endpoints = ["/.well-known/agent-card.json", "/a2a", "/mcp"];
    let declared_elsewhere: std::collections::BTreeSet<(String, String)> = declared_routes()
        .into_iter()
        .filter(|(_, path)| !protocol_endpoints.contains(&path.as_str()))
        .collect();
    let served_by_viewer: std::collections::BTreeSet<(String, String)> = operations
        .iter()
        .filter(|operation| matches!(operation.served, baton_http::openapi::Served::ByViewer))
        .map(|operation| (operation.method.to_string(), operation.path.to_string()))
        .collect();
    assert_eq!(served_by_viewer.len(), 3, "{served_by_viewer:?}");
    assert_eq!(
        declared_elsewhere, served_by_viewer,
        "a route is added to the operations table (shared/http/src/routes/openapi/mod.rs), never to the router"
    );
    // Every documented operation is served, and answers only with statuses
    // it documents: without a token, with a body that is not JSON, with an
    // empty object, for a run that does not exist.
    let mut observed_total = 0;
    for operation in &operations {
        let path = operation
            .path
            .replace("{run_id}", "run_nonexistent")
            .replace("{evaluation_id}", "run_nonexistent")
            .replace("{task_id}", "run_nonexistent:node_1")
            .replace("{policy_id}", "gate")
            .replace("{name}", "viewer.js");
        let documented: Vec<u16> = operation
            .answers
            .iter()
            .map(|answer| answer.status)
            .collect();
        for (token, body) in [
            (None, None),
            (Some(ACME_TOKEN), Some("{")),
            (Some(ACME_TOKEN), Some("{}")),
            (Some(ACME_TOKEN), None),
        ] {
            let mut request = api.client.request(
                operation.method.to_uppercase().parse().unwrap(),
                format!("{root}{path}"),
            );
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            if let Some(body) = body {
                request = request
                    .header("content-type", "application/json")
                    .body(body);
            }
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            assert_ne!(
                status, 405,
                "{} {path} is not served with that method",
                operation.method
            );
            assert!(
                !text.contains("route_not_found") || operation.path == "/viewer/{name}",
                "{} {path} is not served",
                operation.method
            );
            assert!(
                documented.contains(&status),
                "{} {path} answered {status} ({text}), documented: {documented:?}",
                operation.method
            );
            observed_total += 1;
        }
    }
    assert_eq!(observed_total, operations.len() * 4);
}

/// Checks `body` against the OpenAPI document's component `name`.
fn violations_of(document: &Value, name: &str, body: &Value) -> Vec<String> {
    let schema = json!({
        "$ref": format!("#/components/schemas/{name}"),
        "components": document["components"].clone(),
    });
    let validator = jsonschema::validator_for(&schema).unwrap();
    validator
        .iter_errors(body)
        .map(|error| format!("{}: {error}", error.instance_path()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_json_body_is_a_named_schema_and_the_served_bodies_match_theirs() {
    let document = baton_http::openapi::document();
    // No placeholder component: every body names its own, and every
    // reference resolves.
    let components = document["components"]["schemas"].as_object().unwrap();
    assert!(!components.contains_key("Object"));
    let text = document.to_string();
    for reference in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = reference.split('"').next().unwrap();
        assert!(components.contains_key(name), "$ref to a missing {name}");
    }
    for operation in baton_http::openapi::operations() {
        if let Some(request) = operation.request {
            assert!(components.contains_key(request), "{request}");
        }
    }

    // What the routes answer matches what the document says they answer.
    let api = start_api().await;
    let parked = park_on_a_person(&api).await;
    let run_id = parked["runId"].as_str().unwrap();
    let mut checked = Vec::new();
    for (name, path) in [
        ("TaskList", "/tasks".to_string()),
        ("RequestList", "/hitl/requests".to_string()),
        ("CapabilityList", "/capabilities".to_string()),
        ("RunSnapshotResponse", format!("/runs/{run_id}")),
        ("OpenApiDocument", "/openapi.json".to_string()),
    ] {
        let body = get_json(&api, &path, ACME_TOKEN).await;
        assert_eq!(
            violations_of(&document, name, &body),
            Vec::<String>::new(),
            "{path}: {body}"
        );
        checked.push(name);
    }
    assert!(
        !get_json(&api, "/tasks", ACME_TOKEN).await["tasks"]
            .as_array()
            .unwrap()
            .is_empty(),
        "a task was checked, not only an empty list"
    );
    let (status, accepted) = post_json(
        &api,
        "/runs",
        ACME_TOKEN,
        &example("positioning-recommendation.json"),
    )
    .await;
    assert_eq!(status, 202);
    assert_eq!(
        violations_of(&document, "RunAccepted", &accepted),
        Vec::<String>::new()
    );
    let (status, cancelled) = post_json(
        &api,
        &format!("/runs/{run_id}/cancel"),
        ACME_TOKEN,
        &json!({}),
    )
    .await;
    assert_eq!(status, 202);
    assert_eq!(
        violations_of(&document, "RunStatusAnswer", &cancelled),
        Vec::<String>::new()
    );
    // The check can fail: a body missing a required field, or with a status
    // that is not one, is refused.
    let mut broken = accepted.clone();
    broken.as_object_mut().unwrap().remove("runId");
    assert!(!violations_of(&document, "RunAccepted", &broken).is_empty());
    broken = accepted;
    broken["status"] = json!("finished-ish");
    assert!(!violations_of(&document, "RunAccepted", &broken).is_empty());
    assert_eq!(checked.len(), 5);
}

/// History and forks over HTTP: a finished run's checkpoints, a fork with
/// nothing changed (every node reused: it completes without a model call),
/// refusals naming their path, and another tenant's run not found.
/// Posts `body` to `path` with `key` as the `Idempotency-Key` header:
/// (status, whether the answer says it is a replay, the answer's text).
async fn post_keyed(
    api: &TestApi,
    url: String,
    key: &str,
    body: &Value,
    accept: &str,
) -> (u16, bool, String) {
    let response = api
        .client
        .post(url)
        .bearer_auth(ACME_TOKEN)
        .header("idempotency-key", key)
        .header("accept", accept)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let replayed = response
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|value| value == "true");
    (status, replayed, response.text().await.unwrap())
}

/// Every retry is safe: a chat message, a fork, a person's answer and a
/// schedule's creation, each sent twice with one idempotency key (as the
/// header, or the body's `idempotencyKey`), make one effect each (one chat
/// run and one exchange on the thread, one forked run, the answer applied
/// once, one schedule), and the second answers with the first's answer
/// (`Idempotent-Replayed: true`). The same key with another request is a
/// 422 naming where the key was given; header and body disagreeing is a
/// 400. The model double answers the chat, the run and the forked run.
#[tokio::test(flavor = "multi_thread")]
async fn a_chat_message_a_fork_an_answer_and_a_schedule_sent_twice_with_one_key_act_once() {
    let api = start_api().await;
    let root = api.base.trim_end_matches("/api/v1/flex").to_string();

    // Chat: twice with one key, then the same key with another message.
    let chat = json!({"message": "Write three taglines"});
    let mut chat_runs = Vec::new();
    for expected_replay in [false, true] {
        let response = api
            .client
            .post(format!("{root}/api/v1/chat"))
            .bearer_auth(ACME_TOKEN)
            .header("idempotency-key", "chat-key-1")
            .json(&chat)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers().get("idempotent-replayed").is_some(),
            expected_replay
        );
        let frames = read_sse(response).await;
        assert_eq!(frames.last().unwrap().1, "complete");
        chat_runs.push(frames[0].2["runId"].as_str().unwrap().to_string());
    }
    assert_eq!(chat_runs[0], chat_runs[1], "one chat run");
    let thread_id = {
        let run = get_json(&api, &format!("/runs/{}", chat_runs[0]), ACME_TOKEN).await;
        run["run"]["threadId"].as_str().unwrap().to_string()
    };
    let thread = api
        .client
        .get(format!("{root}/api/v1/threads/{thread_id}"))
        .bearer_auth(ACME_TOKEN)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(
        thread["exchanges"].as_array().unwrap().len(),
        1,
        "one exchange on the thread: {thread}"
    );
    let (status, _, reused) = post_keyed(
        &api,
        format!("{root}/api/v1/chat"),
        "chat-key-1",
        &json!({"message": "Something else"}),
        "text/event-stream",
    )
    .await;
    assert_eq!(status, 422, "{reused}");
    let reused: Value = serde_json::from_str(&reused).unwrap();
    assert_eq!(reused["error"]["code"], "idempotency_key_reused");
    assert_eq!(reused["error"]["details"]["path"], "header Idempotency-Key");
    let mismatched = api
        .client
        .post(format!("{root}/api/v1/chat"))
        .bearer_auth(ACME_TOKEN)
        .header("idempotency-key", "one")
        .json(&json!({"message": "x", "idempotencyKey": "two"}))
        .send()
        .await
        .unwrap();
    assert_eq!(mismatched.status(), 400);

    // A fork, twice with one key (in the body): one forked run.
    let source = &chat_runs[0];
    let runs_before = run_count(&api, ACME_TOKEN).await;
    let fork = json!({"at": {"planVersion": 1}, "idempotencyKey": "fork-key-1"});
    let (first_status, first_replayed, first) = post_keyed(
        &api,
        format!("{}/runs/{source}/fork", api.base),
        "fork-key-1",
        &fork,
        "application/json",
    )
    .await;
    assert_eq!((first_status, first_replayed), (202, false), "{first}");
    let (second_status, second_replayed, second) = post_keyed(
        &api,
        format!("{}/runs/{source}/fork", api.base),
        "fork-key-1",
        &fork,
        "application/json",
    )
    .await;
    assert_eq!((second_status, second_replayed), (200, true), "{second}");
    let (first, second): (Value, Value) = (
        serde_json::from_str(&first).unwrap(),
        serde_json::from_str(&second).unwrap(),
    );
    assert_eq!(first["runId"], second["runId"]);
    assert_eq!(second["deduplicated"], true);
    assert_eq!(
        run_count(&api, ACME_TOKEN).await,
        runs_before + 1,
        "one fork"
    );

    // A person's answer, twice with one key: applied once, answered twice.
    let parked = park_on_a_person(&api).await;
    let run_id = parked["runId"].as_str().unwrap();
    let answer = json!({
        "runId": run_id, "nodeId": parked["nodeId"], "expectedPlanVersion": parked["planVersion"],
        "output": scripted_llm::generate_instance(&parked["payload"]["contract"]["outputSchema"], "answer"),
    });
    let mut answers = Vec::new();
    for expected_replay in [false, true] {
        let (status, replayed, body) = post_keyed(
            &api,
            format!("{}/run.resume", api.base),
            "answer-key-1",
            &answer,
            "application/json",
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(replayed, expected_replay);
        answers.push(serde_json::from_str::<Value>(&body).unwrap());
    }
    assert_eq!(answers[0], answers[1], "the first answer, again");
    let (status, unkeyed) = post_json_text(&api, "/run.resume", &answer).await;
    assert_eq!(
        status, 409,
        "without the key the answer is refused: {unkeyed}"
    );
    let frames = frames_after(&api, run_id, &json!(0)).await;
    let answered = frames
        .iter()
        .filter(|frame| frame["type"] == "node_complete" && frame["nodeId"] == parked["nodeId"])
        .count();
    assert_eq!(answered, 1, "the answer was applied once");

    // A schedule, twice with one key: one schedule.
    let schedule = json!({"expression": "rate(1 hour)",
                          "envelope": {"objective": "o", "outputContract": {"schema": {"type": "object"}}}});
    let mut created = Vec::new();
    for expected in [(201, false), (200, true)] {
        let (status, replayed, body) = post_keyed(
            &api,
            format!("{}/schedules", api.base),
            "schedule-key-1",
            &schedule,
            "application/json",
        )
        .await;
        assert_eq!((status, replayed), expected, "{body}");
        created.push(serde_json::from_str::<Value>(&body).unwrap()["scheduleId"].clone());
    }
    assert_eq!(created[0], created[1]);
    let listed = get_json(&api, "/schedules", ACME_TOKEN).await;
    assert_eq!(listed["schedules"].as_array().unwrap().len(), 1, "{listed}");
}

async fn post_json_text(api: &TestApi, path: &str, body: &Value) -> (u16, String) {
    let response = api
        .client
        .post(format!("{}{path}", api.base))
        .bearer_auth(ACME_TOKEN)
        .json(body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_finished_run_lists_its_checkpoints_and_forks_without_calling_the_model_again() {
    let api = start_api().await;
    let response = api
        .client
        .post(format!("{}/run.stream", api.base))
        .bearer_auth(ACME_TOKEN)
        .json(&example("seed-10.0.1-stream-contract-variants.json"))
        .send()
        .await
        .unwrap();
    let frames = read_sse(response).await;
    assert_eq!(frames.last().unwrap().1, "complete");
    let run_id = frames[0].2["runId"].as_str().unwrap().to_string();
    let history = get_json(&api, &format!("/runs/{run_id}/history"), ACME_TOKEN).await;
    let checkpoints = history["checkpoints"].as_array().unwrap();
    assert_eq!(checkpoints[0]["kind"], "plan");
    let nodes = checkpoints
        .iter()
        .filter(|point| point["kind"] == "node")
        .count();
    assert!(nodes >= 1, "{history}");
    let plan_version = checkpoints[0]["planVersion"].clone();

    let calls_before = api.model.request_count();
    let fork_path = format!("/runs/{run_id}/fork");
    for (body, path) in [
        (json!({"at": {}}), "$.at"),
        (json!({"at": {"planVersion": 1, "eventId": 3}}), "$.at"),
        (json!({"at": {"planVersion": 9}}), "$.at.planVersion"),
        (json!({"at": {"eventId": 99_999}}), "$.at.eventId"),
        (
            json!({"at": {"planVersion": 1}, "nodeOutputs": {"nope": {}}}),
            "$.nodeOutputs.nope",
        ),
        (json!({"at": {"planVersion": 1}, "extra": 1}), "$.extra"),
    ] {
        let (status, error) = post_json(&api, &fork_path, ACME_TOKEN, &body).await;
        assert_eq!(status, 422, "{body}: {error}");
        assert_eq!(error["error"]["details"]["path"], path, "{body}");
    }
    let (status, _) = post_json(
        &api,
        &fork_path,
        GLOBEX_TOKEN,
        &json!({"at": {"planVersion": 1}}),
    )
    .await;
    assert_eq!(status, 404, "another tenant's run");

    let (status, forked) = post_json(
        &api,
        &fork_path,
        ACME_TOKEN,
        &json!({"at": {"planVersion": plan_version}}),
    )
    .await;
    assert_eq!(status, 202, "{forked}");
    let fork_id = forked["runId"].as_str().unwrap();
    assert_ne!(fork_id, run_id);
    let snapshot = get_json(&api, &format!("/runs/{fork_id}"), ACME_TOKEN).await;
    assert_eq!(snapshot["run"]["status"], "completed", "{snapshot}");
    assert_eq!(snapshot["run"]["forkedFrom"]["runId"], run_id.as_str());
    assert_eq!(
        api.model.request_count(),
        calls_before,
        "every node was reused: no model call"
    );
}

/// An ended run is auditable from `GET /runs/{id}`: the contract's schema
/// hash, the registry facets its plan used (version and schema hash), each
/// plan version's time and cause, which node and attempt made each output
/// property, the user the submission named and the usage split by what it
/// was for; `GET /runs` carries the thread, the user and the split too. A
/// malformed user header is a 400 and starts nothing.
#[tokio::test(flavor = "multi_thread")]
async fn an_ended_run_is_auditable_from_its_snapshot_and_the_runs_list() {
    let api = start_api().await;
    let mut envelope = example("seed-10.0.1-stream-contract-variants.json");
    envelope["workflowName"] = json!("variant-review");
    let frames = read_sse(
        api.client
            .post(format!("{}/run.stream", api.base))
            .bearer_auth(ACME_TOKEN)
            .header("X-Baton-User", "ana@acme.example")
            .json(&envelope)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(frames.last().unwrap().1, "complete");
    let run_id = frames.last().unwrap().2["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let snapshot = get_json(&api, &format!("/runs/{run_id}"), ACME_TOKEN).await;
    let run = &snapshot["run"];
    assert_eq!(run["submittedBy"], "ana@acme.example");
    assert_eq!(run["workflowName"], "variant-review");
    let hash = run["schemaHash"].as_str().unwrap();
    assert!(
        hash.starts_with("sha256:") && hash.len() == "sha256:".len() + 64,
        "{hash}"
    );
    let facets = run["facetSnapshot"].as_object().unwrap();
    assert!(facets.contains_key("copyVariants"), "{facets:?}");
    for (facet, stamp) in facets {
        assert_eq!(
            stamp["schemaHash"].as_str().map(str::len),
            Some(64),
            "{facet}: {stamp}"
        );
    }
    let history = &snapshot["planVersions"][0]["history"];
    assert_eq!(history["version"], 1);
    assert_eq!(history["trigger"], "initial");
    assert!(history["plannedAt"].as_str().unwrap().ends_with('Z'));
    let provenance = snapshot["outputProvenance"].as_object().unwrap();
    let output = snapshot["output"].as_object().unwrap();
    assert_eq!(
        provenance.keys().collect::<Vec<_>>(),
        output.keys().collect::<Vec<_>>(),
        "every output property has its maker"
    );
    for made in provenance.values() {
        let node_id = made["nodeId"].as_str().unwrap();
        assert_eq!(snapshot["nodes"][node_id]["status"], "completed");
        assert_eq!(made["attempt"], 1);
        assert_eq!(made["planVersion"], 1);
    }
    // The final bundle under the specification's names, beside the current
    // ones: `result` is the output, `quality` and `acceptance-report` as
    // `complete` said them.
    let complete = &frames.last().unwrap().2["payload"];
    assert_eq!(snapshot["bundle"]["result"], snapshot["output"]);
    assert_eq!(snapshot["quality"], complete["quality"]);
    assert_eq!(snapshot["bundle"]["quality"], complete["quality"]);
    assert_eq!(snapshot["quality"]["source"], "constraints", "{snapshot}");
    assert!(
        snapshot["bundle"]
            .as_object()
            .unwrap()
            .contains_key("acceptance-report"),
        "{snapshot}"
    );
    let by_operation = &run["usage"]["byOperation"];
    assert!(
        by_operation["execution"]["totalTokens"].as_u64().unwrap() > 0,
        "{by_operation}"
    );
    assert_eq!(
        by_operation["execution"]["totalTokens"], run["usage"]["totalTokens"],
        "only the work used tokens in this run"
    );
    let listed = get_json(&api, "/runs", ACME_TOKEN).await;
    let item = listed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["runId"] == run_id.as_str())
        .unwrap()
        .clone();
    assert_eq!(item["submittedBy"], "ana@acme.example");
    assert_eq!(item["workflowName"], "variant-review");
    assert_eq!(item["threadId"], run["threadId"]);
    assert_eq!(
        item["usage"]["tokensByOperation"]["execution"],
        run["usage"]["totalTokens"]
    );
    let before = run_count(&api, ACME_TOKEN).await;
    let refused = api
        .client
        .post(format!("{}/runs", api.base))
        .bearer_auth(ACME_TOKEN)
        .header("X-Baton-User", "")
        .json(&envelope)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["details"]["header"], "X-Baton-User", "{body}");
    assert_eq!(run_count(&api, ACME_TOKEN).await, before, "nothing started");
}

/// One JSON-RPC call to the A2A endpoint with `token`.
async fn a2a_call(api: &TestApi, token: &str, body: Value) -> Value {
    let root = api.base.trim_end_matches("/api/v1/flex");
    let response = api
        .client
        .post(format!("{root}/a2a"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "JSON-RPC answers errors with 200");
    response.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_a2a_endpoint_keeps_tenants_apart_and_names_what_is_wrong() {
    let api = start_api().await;
    let root = api.base.trim_end_matches("/api/v1/flex").to_string();
    // The card is public, names the host the request reached (never a
    // forwarded one: whoever sets that header would choose where clients
    // send their tokens), is kept by no shared cache, and lists no tenant's
    // registration.
    let response = api
        .client
        .get(format!("{root}/.well-known/agent-card.json"))
        .header("x-forwarded-proto", "https")
        .header("x-forwarded-host", "elsewhere.example")
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()["cache-control"],
        "private, no-cache",
        "a card built from the Host is not for shared caches"
    );
    let card: Value = response.json().await.unwrap();
    assert_eq!(card["supportedInterfaces"][0]["url"], format!("{root}/a2a"));
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );

    // An envelope sent without waiting: a task of acme's, unknown to globex.
    let envelope = example("seed-10.0.1-stream-contract-variants.json");
    let sent = a2a_call(
        &api,
        ACME_TOKEN,
        json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
            "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"data": envelope}]},
            "configuration": {"returnImmediately": true}}}),
    )
    .await;
    let task_id = sent["result"]["task"]["id"].as_str().unwrap().to_string();
    assert!(task_id.starts_with("run"), "{sent}");
    let theirs = a2a_call(
        &api,
        GLOBEX_TOKEN,
        json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}),
    )
    .await;
    assert_eq!(theirs["error"]["code"], -32001, "{theirs}");
    let ours = a2a_call(
        &api,
        ACME_TOKEN,
        json!({"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": task_id}}),
    )
    .await;
    assert_eq!(ours["result"]["id"], task_id.as_str(), "{ours}");
    assert_eq!(ours["id"], 3);

    // What is wrong, by JSON path and A2A code.
    let no_message = a2a_call(
        &api,
        ACME_TOKEN,
        json!({"jsonrpc": "2.0", "id": 4, "method": "SendMessage", "params": {}}),
    )
    .await;
    assert_eq!(no_message["error"]["code"], -32602, "{no_message}");
    assert_eq!(
        no_message["error"]["data"][0]["metadata"]["path"], "$.params",
        "{no_message}"
    );
    let nothing_to_run = a2a_call(
        &api,
        ACME_TOKEN,
        json!({"jsonrpc": "2.0", "id": 5, "method": "SendMessage", "params": {
            "message": {"messageId": "m2", "role": "ROLE_USER", "parts": [{"url": "https://example.com/x"}]}}}),
    )
    .await;
    assert_eq!(
        nothing_to_run["error"]["data"][0]["metadata"]["path"], "$.params.message.parts",
        "{nothing_to_run}"
    );
    let mut broken = envelope.clone();
    broken["objective"] = json!(42);
    let bad_envelope = a2a_call(
        &api,
        ACME_TOKEN,
        json!({"jsonrpc": "2.0", "id": 6, "method": "SendMessage", "params": {
            "message": {"messageId": "m3", "role": "ROLE_USER", "parts": [{"data": broken}]}}}),
    )
    .await;
    assert_eq!(
        bad_envelope["error"]["data"][0]["metadata"]["path"],
        "$.params.message.parts[data].objective",
        "{bad_envelope}"
    );
    let unknown = a2a_call(
        &api,
        ACME_TOKEN,
        json!({"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": {}}),
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let root_url = format!("{root}/a2a");
    let not_json: Value = api
        .client
        .post(&root_url)
        .bearer_auth(ACME_TOKEN)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(not_json["error"]["code"], -32700, "{not_json}");
    let anonymous = api
        .client
        .post(&root_url)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
}

/// The router alone (built without `baton_bootstrap::evaluations`) runs no
/// evaluations: a 501 naming `baton eval --api`, after the token is checked.
#[tokio::test]
async fn a_server_without_evaluations_answers_501_naming_the_way_to_evaluate() {
    let api = start_api().await;
    let (status, body) = post_json(&api, "/evaluations", ACME_TOKEN, &json!({"dataset": []})).await;
    assert_eq!(status, 501, "{body}");
    assert_eq!(body["error"]["code"], "evaluations_not_served");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("baton eval DATASET --api URL")
    );
    let listed = get_json(&api, "/evaluations", ACME_TOKEN).await;
    assert_eq!(listed["error"]["code"], "evaluations_not_served");
    let (status, _) = post_json(&api, "/evaluations", "wrong-token", &json!({"dataset": []})).await;
    assert_eq!(status, 401);
}

/// A thread is read by pages from its newest end: `limit` exchanges at a
/// time, `olderCursor` leading to the page before (passed as `before`),
/// none on the oldest page; every exchange comes once, in order. A wrong
/// `limit` or `before`, or an unknown parameter, is a 400 naming it. The
/// model double answers the chat.
#[tokio::test(flavor = "multi_thread")]
async fn a_thread_is_read_by_pages_from_its_newest_end() {
    let api = start_api().await;
    let root = api.base.trim_end_matches("/api/v1/flex").to_string();
    let mut thread_id: Option<String> = None;
    for index in 1..=5 {
        let mut message = json!({"message": format!("message {index}")});
        if let Some(thread_id) = &thread_id {
            message["threadId"] = json!(thread_id);
        }
        let response = api
            .client
            .post(format!("{root}/api/v1/chat"))
            .bearer_auth(ACME_TOKEN)
            .json(&message)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let frames = read_sse(response).await;
        assert_eq!(frames.last().unwrap().1, "complete", "{frames:?}");
        if thread_id.is_none() {
            let run_id = frames[0].2["runId"].as_str().unwrap();
            let run = get_json(&api, &format!("/runs/{run_id}"), ACME_TOKEN).await;
            thread_id = Some(run["run"]["threadId"].as_str().unwrap().to_string());
        }
    }
    let thread_id = thread_id.unwrap();
    let page = |query: String| {
        let (api, url) = (&api, format!("{root}/api/v1/threads/{thread_id}{query}"));
        async move {
            let response = api
                .client
                .get(url)
                .bearer_auth(ACME_TOKEN)
                .send()
                .await
                .unwrap();
            (
                response.status().as_u16(),
                response.json::<Value>().await.unwrap(),
            )
        }
    };
    let (status, whole) = page(String::new()).await;
    assert_eq!(status, 200);
    assert_eq!(whole["exchanges"].as_array().unwrap().len(), 5, "{whole}");
    assert!(whole.get("olderCursor").is_none(), "{whole}");

    let mut read_newest_first: Vec<String> = Vec::new();
    let mut query = "?limit=2".to_string();
    let mut pages = 0;
    loop {
        let (status, body) = page(query.clone()).await;
        assert_eq!(status, 200, "{body}");
        pages += 1;
        let exchanges = body["exchanges"].as_array().unwrap();
        assert!(exchanges.len() <= 2, "{body}");
        for exchange in exchanges.iter().rev() {
            read_newest_first.push(exchange["user"].as_str().unwrap().to_string());
        }
        match body["olderCursor"].as_str() {
            Some(cursor) => query = format!("?limit=2&before={cursor}"),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(
        read_newest_first,
        [
            "message 5",
            "message 4",
            "message 3",
            "message 2",
            "message 1"
        ]
    );

    for (query, parameter) in [
        ("?limit=0", "limit"),
        ("?limit=201", "limit"),
        ("?before=yesterday", "before"),
        ("?cursor=x", "cursor"),
    ] {
        let (status, body) = page(query.to_string()).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["details"]["parameter"], parameter, "{body}");
    }
}
