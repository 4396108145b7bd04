//! Cold start of the `step` function: time from process start to the first
//! handled event, with the Lambda Runtime API emulated in-process (next
//! invocation → the function → its response), DynamoDB and SQS from moto.
//! Each round starts a fresh process on a fresh run's planning step, so the
//! figure includes start-up wiring (registry load, SDK clients) and the real
//! store calls of one step.
//!
//!   cargo build --profile lambda-size -p baton-step-function
//!   cargo bench -p baton-step-function --bench cold_start
//!
//! (`BATON_STEP_BINARY` overrides the binary's path.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use baton_runtime::ports::StepQueue;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

const ROUNDS: usize = 15;

#[derive(Clone)]
struct RuntimeApi {
    pending_events: Arc<Mutex<mpsc::UnboundedReceiver<Value>>>,
    responses: Arc<Mutex<Vec<(Instant, Value)>>>,
    responded: Arc<Notify>,
}

async fn next_invocation(State(api): State<RuntimeApi>) -> impl IntoResponse {
    let event = loop {
        let received = api.pending_events.lock().unwrap().try_recv();
        match received {
            Ok(event) => break event,
            Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
        }
    };
    // Far in the future: the bench measures start-up, not deadlines.
    let headers = baton_test_support::lambda_runtime::next_invocation_headers(
        "bench-request",
        4_102_444_800_000,
    );
    (headers, axum::Json(event))
}

async fn invocation_response(
    State(api): State<RuntimeApi>,
    UrlPath(_id): UrlPath<String>,
    body: String,
) -> &'static str {
    let parsed = serde_json::from_str(&body).unwrap_or(Value::Null);
    api.responses.lock().unwrap().push((Instant::now(), parsed));
    api.responded.notify_one();
    "{}"
}

async fn invocation_error(UrlPath(_id): UrlPath<String>, body: String) -> &'static str {
    panic!("the step function reported an error: {body}");
}

fn step_binary() -> PathBuf {
    if let Ok(path) = std::env::var("BATON_STEP_BINARY") {
        return PathBuf::from(path);
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("lambda-size/step")
}

fn main() {
    let binary = step_binary();
    if !binary.exists() {
        eprintln!(
            "{} is missing: build it with `cargo build --profile lambda-size -p baton-step-function`",
            binary.display()
        );
        std::process::exit(2);
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(measure(binary));
}

async fn measure(binary: PathBuf) {
    let moto = moto_server::MotoServer::start().unwrap();
    let configuration = moto.sdk_configuration().await;
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let table = moto_server::unique_name("baton-cold-start");
    let store = Arc::new(baton_aws::DynamoRunStore::new(&connection, &table));
    store.create_table_if_missing().await.unwrap();
    let queue_url = moto_server::create_unique_queue(&configuration, "baton-cold-start", None)
        .await
        .unwrap();
    let queue = Arc::new(baton_aws::SqsStepQueue::new(&connection, &queue_url));
    let repository = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // Runs are created through the real orchestrator; their planning steps become the events.
    let llm_placeholder = "http://127.0.0.1:9/v1";
    let registry = baton_bootstrap::registry_from(Some(&repository.join("registry"))).unwrap();
    let services = baton_bootstrap::services_over(
        registry,
        baton_bootstrap::StorePorts {
            store: store.clone(),
            queue: queue.clone(),
            capability_directory: store.clone(),
            clock: Arc::new(baton_runtime::clock::SystemClock),
            threads: store.clone(),
            retention: store.clone(),
            stream_leases: store.clone(),
            schedules: store.clone(),
            audit: store.clone(),
            request_keys: store.clone(),
            memory: store.clone(),
            schedule_triggers: Arc::new(baton_runtime::ports::StoreKeepsSchedules),
        },
        baton_bootstrap::Executors {
            llm: Arc::new(baton_test_support::schema_shaped_model::NoModel(
                "the cold-start bench",
            )),
            tools: Arc::new(baton_runtime::ports::NoToolRunner),
            notifier: Arc::new(baton_runtime::ports::NoCompletionNotifier),
            remote_agents: Arc::new(baton_runtime::ports::NoRemoteAgents),
            transcripts: Arc::new(baton_runtime::models::panels::EventLogTranscripts),
            embedder: None,
        },
        baton_runtime::services::OrchestratorSettings::default(),
        "bench".into(),
    );
    let envelope: Value = serde_json::from_str(
        &std::fs::read_to_string(
            repository.join("registry/examples/seed-10.1-sample-envelope.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let (sender, receiver) = mpsc::unbounded_channel();
    for _ in 0..ROUNDS {
        services.runs.submit("bench", &envelope).await.unwrap();
    }
    let mut bodies = Vec::new();
    while bodies.len() < ROUNDS {
        for received in queue.receive(10, Duration::from_secs(1)).await.unwrap() {
            bodies.push(serde_json::to_string(&received.message).unwrap());
            queue.acknowledge(&received.receipt).await.unwrap();
        }
    }
    let api = RuntimeApi {
        pending_events: Arc::new(Mutex::new(receiver)),
        responses: Arc::default(),
        responded: Arc::default(),
    };
    let app = Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next_invocation))
        .route(
            "/2018-06-01/runtime/invocation/{id}/response",
            post(invocation_response),
        )
        .route(
            "/2018-06-01/runtime/invocation/{id}/error",
            post(invocation_error),
        )
        .with_state(api.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let runtime_api = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let mut samples = Vec::new();
    for body in bodies {
        let event = json!({"Records": [{"messageId": "bench", "receiptHandle": "r", "body": body, "attributes": {}, "messageAttributes": {}, "eventSource": "aws:sqs", "awsRegion": "us-east-1"}]});
        sender.send(event).unwrap();
        let responses_before = api.responses.lock().unwrap().len();
        let started = Instant::now();
        let mut child = std::process::Command::new(&binary)
            .current_dir(&repository)
            .env("AWS_LAMBDA_RUNTIME_API", &runtime_api)
            .env("AWS_LAMBDA_FUNCTION_NAME", "step")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
            .env("AWS_ENDPOINT_URL", &moto.endpoint)
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("BATON_TABLE", &table)
            .env("BATON_QUEUE_URL", &queue_url)
            .env("BATON_LLM_BASE_URL", llm_placeholder)
            .env("BATON_LLM_MODEL", "unused-by-planning")
            .env("BATON_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        while api.responses.lock().unwrap().len() == responses_before {
            tokio::time::timeout(Duration::from_secs(30), api.responded.notified())
                .await
                .expect("no response within 30 s");
        }
        let (answered_at, response) = api.responses.lock().unwrap().last().cloned().unwrap();
        assert_eq!(
            response["batchItemFailures"],
            json!([]),
            "the step succeeded"
        );
        samples.push(answered_at.duration_since(started));
        let _ = child.kill();
        let _ = child.wait();
    }
    samples.sort();
    let millis = |duration: Duration| duration.as_secs_f64() * 1000.0;
    println!(
        "step function cold start → first handled event (planning step, DynamoDB+SQS on moto), {} rounds: median {:.1} ms, min {:.1} ms, max {:.1} ms",
        samples.len(),
        millis(samples[samples.len() / 2]),
        millis(samples[0]),
        millis(samples[samples.len() - 1])
    );
}
