//! Completion out, end to end: `baton serve` (the real binary, memory
//! store, the scripted model) POSTs a run's completion to the envelope's
//! `callbackUrl`, signed with `BATON_WEBHOOK_SECRET`. A test receiver (a
//! real HTTP server on 127.0.0.1, allowed over plain http for local
//! development by `BATON_OUTBOUND_HTTP_HOSTS`) verifies every signature,
//! refuses the first two attempts and accepts the third: exactly one
//! delivery is accepted, each attempt carrying the same delivery id. A
//! callback to the cloud metadata address is refused by the outbound guard
//! and never dialled.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod serve_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use baton_outbound::webhook::verify_signature;
use scripted_llm::ScriptedLlmServer;
use serde_json::{Value, json};
use serve_support::{TOKEN, example, start_serve};

const SECRET: &str = "test-webhook-secret";

/// What the receiver saw: each attempt's status it answered, delivery id,
/// event header and body.
#[derive(Default)]
struct Receiver {
    attempts: Vec<(u16, String, String, Value)>,
    refuse_first: usize,
}

async fn receive(receiver: Arc<Mutex<Receiver>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // A receiver refuses what it cannot verify.
    if let Err(why) = verify_signature(
        SECRET.as_bytes(),
        &header("x-baton-signature"),
        &body,
        now,
        Duration::from_secs(300),
    ) {
        panic!("a delivery failed verification: {why}");
    }
    let mut seen = receiver.lock().unwrap();
    let status = if seen.attempts.len() < seen.refuse_first {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::NO_CONTENT
    };
    seen.attempts.push((
        status.as_u16(),
        header("x-baton-delivery"),
        header("x-baton-event"),
        serde_json::from_slice(&body).unwrap(),
    ));
    status
}

async fn start_receiver(refuse_first: usize) -> (String, Arc<Mutex<Receiver>>) {
    let receiver = Arc::new(Mutex::new(Receiver {
        attempts: Vec::new(),
        refuse_first,
    }));
    let shared = receiver.clone();
    let app = axum::Router::new().route(
        "/hook",
        post(move |headers: HeaderMap, body: Bytes| receive(shared.clone(), headers, body)),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://127.0.0.1:{}/hook",
        listener.local_addr().unwrap().port()
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, receiver)
}

async fn submit(client: &reqwest::Client, base: &str, envelope: &Value) -> String {
    let response = client
        .post(format!("{base}/runs"))
        .bearer_auth(TOKEN)
        .json(envelope)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    response.json::<Value>().await.unwrap()["runId"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn notifications(client: &reqwest::Client, base: &str, run_id: &str) -> Value {
    let snapshot: Value = client
        .get(format!("{base}/runs/{run_id}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    snapshot["run"]["notifications"].clone()
}

/// `/metrics`'s own token (`BATON_METRICS_TOKEN` holds its digest).
const METRICS_TOKEN: &str = "metrics-token";

#[tokio::test(flavor = "multi_thread")]
async fn a_signed_callback_refused_twice_is_accepted_once_and_an_ssrf_target_is_never_dialled() {
    let model = ScriptedLlmServer::start().await.unwrap();
    let (callback, receiver) = start_receiver(2).await;
    let serve = start_serve(
        &["--store", "memory"],
        &[
            ("BATON_LLM_BASE_URL".to_string(), model.base_url()),
            ("BATON_LLM_MODEL".to_string(), "gpt-4o-mini".to_string()),
            ("BATON_WEBHOOK_SECRET".to_string(), SECRET.to_string()),
            (
                "BATON_OUTBOUND_HTTP_HOSTS".to_string(),
                "127.0.0.1".to_string(),
            ),
            (
                "BATON_METRICS_TOKEN".to_string(),
                baton_http::auth::token_digest_hex(METRICS_TOKEN),
            ),
        ],
    )
    .await;
    let client = reqwest::Client::new();
    let mut envelope = example("seed-10.1-sample-envelope.json");
    envelope["callbackUrl"] = json!(callback);
    let run_id = submit(&client, &serve.base, &envelope).await;

    // Attempts 1 and 2 are refused; the retries come 2 s and 4 s later.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    loop {
        let record = notifications(&client, &serve.base, &run_id).await;
        if record["completed-1"]["delivered"] == json!(true) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not delivered: {record}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Nothing more arrives after the accepted attempt.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let seen: Vec<(u16, String, String, Value)> = receiver.lock().unwrap().attempts.clone();
    let statuses: Vec<u16> = seen.iter().map(|attempt| attempt.0).collect();
    assert_eq!(
        statuses,
        [503, 503, 204],
        "two refusals, then exactly one accepted delivery"
    );
    for (_, delivery_id, event, body) in &seen {
        assert_eq!(
            delivery_id,
            &format!("{run_id}:completed-1"),
            "one delivery id for every attempt"
        );
        assert_eq!(event, "baton.run.completed");
        assert_eq!(body["type"], "baton.run.completed");
        assert_eq!(body["runId"], run_id.as_str());
        assert_eq!(body["status"], "completed");
        assert_eq!(body["tenantId"], "acme");
        assert!(body["usage"]["totalTokens"].as_u64().unwrap() > 0);
        assert!(body["usage"]["costUsd"].as_f64().unwrap() > 0.0);
    }
    let record = notifications(&client, &serve.base, &run_id).await;
    assert_eq!(record["completed-1"]["attempts"], 3);

    // The cloud metadata address: refused before any connection is made.
    let mut metadata = example("seed-10.1-sample-envelope.json");
    metadata["callbackUrl"] = json!("https://169.254.169.254/latest/meta-data/");
    let refused_run = submit(&client, &serve.base, &metadata).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let error = loop {
        let record = notifications(&client, &serve.base, &refused_run).await;
        if let Some(error) = record["completed-1"]["lastError"].as_str() {
            break error.to_string();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no attempt recorded: {record}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(error.contains("169.254.169.254"), "{error}");
    assert!(error.contains("a cloud metadata address"), "{error}");
    assert_eq!(
        receiver.lock().unwrap().attempts.len(),
        3,
        "the receiver saw nothing more"
    );

    // `baton serve` counts what it committed: both runs ended completed.
    // `/metrics` takes its own token: not none, not a tenant's.
    let root = serve.base.trim_end_matches("/api/v1/flex");
    let anonymous = client.get(format!("{root}/metrics")).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let tenant = client
        .get(format!("{root}/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(
        tenant.status(),
        401,
        "a tenant's token does not read the counters"
    );
    let metrics = client
        .get(format!("{root}/metrics"))
        .bearer_auth(METRICS_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), 200);
    let text = metrics.text().await.unwrap();
    assert!(
        text.contains("baton_runs_ended_total{status=\"completed\"} 2"),
        "{text}"
    );
    assert!(text.contains("baton_planner_requests_total 2"), "{text}");
    assert!(
        text.contains(
            "baton_node_duration_ms_count{capability=\"ContentGenerator.copyVariants\"} 2"
        ),
        "{text}"
    );
    serve.stop().await;
}

/// A run cancelled mid-node announces its end at once: the cancel's
/// `Notify` step is sent with the cancel's commit, not left in the outbox
/// until some later delivery of the run (the model here takes 20 s: the
/// node is still running when the delivery must have arrived).
#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_run_calls_its_callback_at_once() {
    let model = ScriptedLlmServer::start().await.unwrap();
    model.set_default_behavior(scripted_llm::Behavior::SlowValid { delay_ms: 20_000 });
    let (callback, receiver) = start_receiver(0).await;
    let serve = start_serve(
        &["--store", "memory"],
        &[
            ("BATON_LLM_BASE_URL".to_string(), model.base_url()),
            ("BATON_LLM_MODEL".to_string(), "gpt-4o-mini".to_string()),
            ("BATON_WEBHOOK_SECRET".to_string(), SECRET.to_string()),
            (
                "BATON_OUTBOUND_HTTP_HOSTS".to_string(),
                "127.0.0.1".to_string(),
            ),
        ],
    )
    .await;
    let client = reqwest::Client::new();
    let mut envelope = example("seed-10.1-sample-envelope.json");
    envelope["callbackUrl"] = json!(callback);
    let run_id = submit(&client, &serve.base, &envelope).await;
    let asked = tokio::time::Instant::now();
    while model.request_count() == 0 {
        assert!(asked.elapsed() < Duration::from_secs(20), "no node started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let cancelled_at = tokio::time::Instant::now();
    let response = client
        .post(format!("{}/runs/{run_id}/cancel", serve.base))
        .bearer_auth(TOKEN)
        .json(&json!({"reason": "no longer needed"}))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    while receiver.lock().unwrap().attempts.is_empty() {
        assert!(
            cancelled_at.elapsed() < Duration::from_secs(5),
            "no callback within 5 s of the cancel"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "the cancel's callback arrived {} ms after the cancel",
        cancelled_at.elapsed().as_millis()
    );
    let seen = receiver.lock().unwrap().attempts.clone();
    let (status, _, event, body) = &seen[0];
    assert_eq!(*status, 204);
    assert_eq!(
        event, "baton.run.failed",
        "a cancel is announced as an end without output"
    );
    assert_eq!(body["runId"], run_id.as_str());
    assert_eq!(body["status"], "cancelled");
}
