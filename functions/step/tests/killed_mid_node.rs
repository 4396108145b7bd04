//! A step Lambda killed mid-node loses no run. The real `step` binary runs
//! as Lambda runs it: each execution environment is one process with its
//! own Runtime API (emulated here: `next` hands out an invocation, the
//! function posts its response), and the SQS event source mapping is
//! emulated by one poller per environment that receives batches of up to
//! 10 (the template's `BatchSize`), invokes, and deletes every record the
//! response does not report failed. DynamoDB and SQS come from moto, with
//! the queue, redrive policy, node lease, model timeout and function
//! timeout the template ships (`infra/template.yaml`'s `Timeouts`); the
//! scripted OpenAI-compatible server stands in for the model.
//!
//! Three environments serve 30 runs; five times, one of them is SIGKILLed
//! while it holds a batch mid-node, and a fresh one takes its place (as
//! Lambda starts a new environment). Every run completes exactly once
//! within 90 s of the last restart: the dead environment's records come
//! back within one node lease (the handler holds each record one lease at
//! a time), not after the queue's 1,800 s visibility timeout.
//!
//! The Runtime API and the poller are test doubles of the Lambda service;
//! the function, the store and the queue are the real ones.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use baton_runtime::ports::{LlmProvider, RunStore, StepQueue};
use moto_server::{MotoServer, ShippedStepQueue, unique_name};
use scripted_llm::{Behavior, ScriptedLlmServer};
use serde_json::{Value, json};
use tokio::sync::oneshot;

const RUNS: usize = 30;
const KILLS: usize = 5;
const ENVIRONMENTS: usize = 3;
/// The template's `StepEventSource` `BatchSize`.
const BATCH_SIZE: i32 = 10;

/// One invocation handed to an environment, and where its answer goes.
struct Invocation {
    event: Value,
    answer: oneshot::Sender<Value>,
}

/// An invocation the function took: when, and where its answer goes.
type HandedOut = (Instant, oneshot::Sender<Value>);

/// The Runtime API of one execution environment.
#[derive(Clone)]
struct RuntimeApi {
    waiting: Arc<Mutex<VecDeque<Invocation>>>,
    /// Handed out by `next`, not answered yet: request id → (handed out
    /// at, where the answer goes).
    in_flight: Arc<Mutex<HashMap<String, HandedOut>>>,
    function_timeout: Duration,
}

impl RuntimeApi {
    fn new(function_timeout: Duration) -> Self {
        RuntimeApi {
            waiting: Arc::default(),
            in_flight: Arc::default(),
            function_timeout,
        }
    }

    /// How long the oldest invocation the function holds has been running.
    fn running_for(&self) -> Option<Duration> {
        self.in_flight
            .lock()
            .unwrap()
            .values()
            .map(|(handed_out, _)| handed_out.elapsed())
            .max()
    }

    /// The environment died: what it held or had not taken yet gets no
    /// answer (its pollers see the invocation fail).
    fn forget_everything(&self) {
        self.waiting.lock().unwrap().clear();
        self.in_flight.lock().unwrap().clear();
    }
}

async fn next_invocation(State(api): State<RuntimeApi>) -> impl IntoResponse {
    let invocation = loop {
        let taken = api.waiting.lock().unwrap().pop_front();
        match taken {
            Some(invocation) => break invocation,
            None => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    };
    let request_id = unique_name("invocation");
    let deadline = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        + api.function_timeout;
    api.in_flight
        .lock()
        .unwrap()
        .insert(request_id.clone(), (Instant::now(), invocation.answer));
    let headers = baton_test_support::lambda_runtime::next_invocation_headers(
        &request_id,
        deadline.as_millis(),
    );
    (headers, axum::Json(invocation.event))
}

async fn invocation_answer(
    State(api): State<RuntimeApi>,
    UrlPath(request_id): UrlPath<String>,
    body: String,
) -> StatusCode {
    let answer = serde_json::from_str(&body).unwrap_or_else(|_| json!({"unreadable": body}));
    if let Some((_, sender)) = api.in_flight.lock().unwrap().remove(&request_id) {
        let _ = sender.send(answer);
    }
    StatusCode::ACCEPTED
}

async fn invocation_error(
    State(api): State<RuntimeApi>,
    UrlPath(request_id): UrlPath<String>,
    body: String,
) -> StatusCode {
    if let Some((_, sender)) = api.in_flight.lock().unwrap().remove(&request_id) {
        let _ = sender.send(json!({"functionError": body}));
    }
    StatusCode::ACCEPTED
}

/// One execution environment: the `step` process and its Runtime API.
struct Environment {
    api: RuntimeApi,
    process: Child,
    server: tokio::task::JoinHandle<()>,
}

impl Environment {
    async fn start(function_environment: &[(String, String)], log: &PathBuf) -> Self {
        let timings = moto_server::shipped_step_timings().unwrap();
        let api = RuntimeApi::new(Duration::from_secs(timings.function_seconds.into()));
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next_invocation))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(invocation_answer),
            )
            .route(
                "/2018-06-01/runtime/invocation/{id}/error",
                post(invocation_error),
            )
            .with_state(api.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let runtime_api = listener.local_addr().unwrap().to_string();
        let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let process = Command::new(env!("CARGO_BIN_EXE_step"))
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .envs(function_environment.iter().cloned())
            .env("AWS_LAMBDA_RUNTIME_API", &runtime_api)
            .env("AWS_LAMBDA_FUNCTION_NAME", "step")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
            .env("BATON_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .unwrap();
        Environment {
            api,
            process,
            server,
        }
    }

    /// SIGKILL: no shutdown code runs; what it held is left where it was.
    fn kill(mut self) {
        self.process.kill().unwrap();
        self.process.wait().unwrap();
        self.server.abort();
        self.api.forget_everything();
    }
}

/// One environment's place, taken by a fresh one after each kill.
type Slot = Arc<Mutex<Option<Environment>>>;

/// The event source mapping for one environment: receive a batch, invoke,
/// delete what the answer does not report failed. A batch whose
/// environment died gets no answer and is left on the queue (its records
/// come back when their hold lapses).
async fn poll_for(slot: Slot, sqs: aws_sdk_sqs::Client, queue_url: String, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        let received = sqs
            .receive_message()
            .queue_url(&queue_url)
            .max_number_of_messages(BATCH_SIZE)
            .wait_time_seconds(1)
            .message_system_attribute_names(
                aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount,
            )
            .send()
            .await;
        let Ok(received) = received else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let messages = received.messages.unwrap_or_default();
        if messages.is_empty() {
            continue;
        }
        let records: Vec<Value> = messages
            .iter()
            .map(|message| {
                let receive_count = message
                    .attributes
                    .as_ref()
                    .and_then(|attributes| {
                        attributes.get(
                            &aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount,
                        )
                    })
                    .cloned()
                    .unwrap_or_else(|| "1".into());
                json!({
                    "messageId": message.message_id,
                    "receiptHandle": message.receipt_handle,
                    "body": message.body,
                    "attributes": {"ApproximateReceiveCount": receive_count},
                    "messageAttributes": {},
                    "eventSource": "aws:sqs",
                    "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:steps",
                    "awsRegion": "us-east-1",
                })
            })
            .collect();
        let (answer, answered) = oneshot::channel();
        // Between a kill and its replacement the slot is empty: the batch
        // received meanwhile waits for the fresh environment (as Lambda
        // hands it to another one), never dropped, which would hide its
        // records for the queue's whole visibility timeout.
        let mut invocation = Some(Invocation {
            event: json!({ "Records": records }),
            answer,
        });
        let timeout = loop {
            {
                let environment = slot.lock().unwrap();
                if let Some(environment) = environment.as_ref() {
                    if let Some(invocation) = invocation.take() {
                        environment
                            .api
                            .waiting
                            .lock()
                            .unwrap()
                            .push_back(invocation);
                    }
                    break environment.api.function_timeout;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let Ok(Ok(answer)) = tokio::time::timeout(timeout, answered).await else {
            continue;
        };
        let failed: Vec<&str> = answer["batchItemFailures"]
            .as_array()
            .map(|failures| {
                failures
                    .iter()
                    .filter_map(|failure| failure["itemIdentifier"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        if answer.get("batchItemFailures").is_none() {
            // A function error: Lambda deletes nothing.
            continue;
        }
        for message in &messages {
            if failed.contains(&message.message_id().unwrap_or_default()) {
                continue;
            }
            let _ = sqs
                .delete_message()
                .queue_url(&queue_url)
                .receipt_handle(message.receipt_handle().unwrap_or_default())
                .send()
                .await;
        }
    }
}

/// The API side: the real services over the same table and queue, creating
/// runs as the `api` function does (no model call).
async fn api_services(
    moto: &MotoServer,
    table: &str,
    queue: &ShippedStepQueue,
) -> baton_runtime::services::Services {
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let store = Arc::new(baton_aws::DynamoRunStore::new(&connection, table));
    store.create_table_if_missing().await.unwrap();
    let step_queue: Arc<dyn StepQueue> = Arc::new(baton_aws::SqsStepQueue::new(
        &connection,
        queue.queue_url.clone(),
    ));
    let unused_model: Arc<dyn LlmProvider> =
        Arc::new(baton_test_support::schema_shaped_model::SchemaShapedModel);
    baton_test_support::TestServices::with_model(unused_model)
        .store(store.clone() as Arc<dyn RunStore>)
        .queue(step_queue)
        .threads(store)
        .build()
        .services
}

/// Every run `completed`, at most `limit` from now; how long it took.
async fn wait_until_all_complete(
    services: &baton_runtime::services::Services,
    run_ids: &[String],
    limit: Duration,
) -> Duration {
    let started = Instant::now();
    loop {
        let mut statuses = BTreeMap::new();
        for run_id in run_ids {
            let stored = services.runs.load("t", run_id).await.unwrap().unwrap();
            statuses.insert(run_id.clone(), stored.state.status().as_str());
        }
        if statuses.values().all(|status| *status == "completed") {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < limit,
            "{} s after the last restart, not every run completed: {statuses:?}",
            limit.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_survive_step_lambdas_sigkilled_mid_node() {
    let moto = MotoServer::start().unwrap();
    let configuration = moto.sdk_configuration().await;
    let table = unique_name("baton-step-kill");
    let queue = moto_server::create_shipped_step_queue(&configuration, "baton-step-kill")
        .await
        .unwrap();
    let services = api_services(&moto, &table, &queue).await;
    let model = ScriptedLlmServer::start().await.unwrap();
    model.set_default_behavior(Behavior::SlowValid { delay_ms: 4_000 });
    let timings = &queue.timings;
    let mut function_environment = vec![
        ("BATON_TABLE".to_string(), table.clone()),
        ("BATON_QUEUE_URL".to_string(), queue.queue_url.clone()),
        ("BATON_LLM_BASE_URL".to_string(), model.base_url()),
        ("BATON_LLM_MODEL".to_string(), "scripted".to_string()),
        (
            "BATON_LLM_TIMEOUT_SECONDS".to_string(),
            timings.model_request_seconds.to_string(),
        ),
        (
            "BATON_NODE_LEASE_SECONDS".to_string(),
            timings.node_lease_seconds.to_string(),
        ),
    ];
    function_environment.extend(
        moto.sdk_environment()
            .into_iter()
            .map(|(name, value)| (name.to_string(), value)),
    );
    let log = std::env::temp_dir().join(format!("{}.log", unique_name("baton-step-kill")));

    let stop = Arc::new(AtomicBool::new(false));
    let sqs = aws_sdk_sqs::Client::new(&configuration);
    let mut slots: Vec<Slot> = Vec::new();
    let mut pollers = Vec::new();
    for _ in 0..ENVIRONMENTS {
        let slot: Slot = Arc::new(Mutex::new(Some(
            Environment::start(&function_environment, &log).await,
        )));
        pollers.push(tokio::spawn(poll_for(
            slot.clone(),
            sqs.clone(),
            queue.queue_url.clone(),
            stop.clone(),
        )));
        slots.push(slot);
    }

    let envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    let mut run_ids = Vec::new();
    for _ in 0..RUNS {
        run_ids.push(services.runs.submit("t", &envelope).await.unwrap().run_id);
    }

    for kill in 0..KILLS {
        let slot = &slots[kill % ENVIRONMENTS];
        // Mid-node: the environment has held a batch for over a second
        // (its records are held and its model calls, 4 s each, under way).
        let waiting_since = Instant::now();
        loop {
            let running_for = slot
                .lock()
                .unwrap()
                .as_ref()
                .and_then(|environment| environment.api.running_for());
            if running_for.is_some_and(|running| running > Duration::from_millis(1_500)) {
                break;
            }
            assert!(
                waiting_since.elapsed() < Duration::from_secs(120),
                "kill {kill}: environment {} was never mid-invocation; log: {}",
                kill % ENVIRONMENTS,
                log.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut ended = 0;
        for run_id in &run_ids {
            let status = services
                .runs
                .load("t", run_id)
                .await
                .unwrap()
                .unwrap()
                .state
                .status();
            if status.is_terminal() {
                ended += 1;
            }
        }
        assert!(
            ended <= RUNS / 2,
            "kill {kill} would find most runs already ended, proving little: {ended} of {RUNS}"
        );
        let dead = slot.lock().unwrap().take().unwrap();
        dead.kill();
        eprintln!(
            "kill {kill}: environment {} SIGKILLed mid-node; {ended} of {RUNS} runs ended; {} model requests so far",
            kill % ENVIRONMENTS,
            model.request_count()
        );
        let fresh = Environment::start(&function_environment, &log).await;
        *slot.lock().unwrap() = Some(fresh);
    }
    // Within 90 s of the last restart: what the dead environments held is
    // back within one lease (30 s), not the queue's 1,800 s.
    model.set_default_behavior(Behavior::SlowValid { delay_ms: 200 });
    let took = wait_until_all_complete(&services, &run_ids, Duration::from_secs(90)).await;
    eprintln!(
        "every run completed {} ms after the last restart ({} model requests in all)",
        took.as_millis(),
        model.request_count()
    );
    for run_id in &run_ids {
        let frames: Vec<Value> = services
            .runs
            .read_all_events_after("t", run_id, 0)
            .await
            .unwrap()
            .iter()
            .map(|frame| serde_json::to_value(frame).unwrap())
            .collect();
        baton_test_support::crash_checks::assert_completed_exactly_once(run_id, &frames);
    }
    stop.store(true, Ordering::SeqCst);
    for poller in pollers {
        let _ = poller.await;
    }
    for slot in slots {
        if let Some(environment) = slot.lock().unwrap().take() {
            environment.kill();
        }
    }
    let _ = std::fs::remove_file(&log);
}
