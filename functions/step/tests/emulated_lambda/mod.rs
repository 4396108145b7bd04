//! The Lambda service as the kill tests emulate it: one Runtime API per
//! execution environment (`next` hands out an invocation, the function
//! posts its response), the real `step` binary as each environment's
//! process, and the SQS event source mapping as one poller per environment
//! that receives batches of up to 10 (the template's `BatchSize`), invokes,
//! and deletes every record the response does not report failed. The
//! Runtime API and the poller are test doubles of the Lambda service; the
//! function, the store and the queue they drive are the real ones.

#![allow(dead_code)] // each test file uses its own part

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use baton_runtime::ports::{LlmProvider, RunStore, StepQueue};
use moto_server::{MotoServer, ShippedStepQueue, unique_name};
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// The template's `StepEventSource` `BatchSize`.
pub const BATCH_SIZE: i32 = 10;

/// One invocation handed to an environment, and where its answer goes.
pub struct Invocation {
    event: Value,
    answer: oneshot::Sender<Value>,
}

/// An invocation the function took: when, and where its answer goes.
type HandedOut = (Instant, oneshot::Sender<Value>);

/// The Runtime API of one execution environment.
#[derive(Clone)]
pub struct RuntimeApi {
    waiting: Arc<Mutex<VecDeque<Invocation>>>,
    /// Handed out by `next`, not answered yet: request id → (handed out
    /// at, where the answer goes).
    in_flight: Arc<Mutex<HashMap<String, HandedOut>>>,
    pub function_timeout: Duration,
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
    pub fn running_for(&self) -> Option<Duration> {
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
pub struct Environment {
    pub api: RuntimeApi,
    process: Child,
    server: tokio::task::JoinHandle<()>,
}

impl Environment {
    pub async fn start(function_environment: &[(String, String)], log: &PathBuf) -> Self {
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
    pub fn kill(mut self) {
        self.process.kill().unwrap();
        self.process.wait().unwrap();
        self.server.abort();
        self.api.forget_everything();
    }
}

/// One environment's place, taken by a fresh one after each kill.
pub type Slot = Arc<Mutex<Option<Environment>>>;

/// The `step` function's variables as the template sets them: the table,
/// the queue, the model endpoint (the scripted double) and the shipped
/// model timeout and node lease, plus moto's endpoint and credentials.
pub fn step_function_environment(
    moto: &MotoServer,
    table: &str,
    queue: &ShippedStepQueue,
    model: &scripted_llm::ScriptedLlmServer,
) -> Vec<(String, String)> {
    let timings = &queue.timings;
    let mut environment = vec![
        ("BATON_TABLE".to_string(), table.to_string()),
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
    environment.extend(
        moto.sdk_environment()
            .into_iter()
            .map(|(name, value)| (name.to_string(), value)),
    );
    environment
}

/// What starts a fresh environment: the function's variables and the log
/// every environment appends to.
pub struct Fleet {
    pub function_environment: Vec<(String, String)>,
    pub log: PathBuf,
}

impl Fleet {
    pub async fn start(&self) -> Environment {
        Environment::start(&self.function_environment, &self.log).await
    }
}

/// Environments doomed to die right after the event source mapping
/// received a batch for them, before their handler runs (so before its
/// first hold): each death takes one from `pending`, counts the batch's
/// records in `records_lost`, and a fresh environment takes the dead one's
/// place. The batch stays hidden for the queue's whole visibility timeout.
#[derive(Clone)]
pub struct DeathsAfterReceive {
    pub pending: Arc<AtomicUsize>,
    pub records_lost: Arc<AtomicUsize>,
    pub fleet: Arc<Fleet>,
}

impl DeathsAfterReceive {
    /// `true` when this batch's environment died (one death taken).
    async fn strike(&self, slot: &Slot, records: usize) -> bool {
        let taken = self
            .pending
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(1)
            })
            .is_ok();
        if !taken {
            return false;
        }
        let dead = slot.lock().unwrap().take();
        if let Some(dead) = dead {
            dead.kill();
        }
        self.records_lost.fetch_add(records, Ordering::SeqCst);
        let fresh = self.fleet.start().await;
        *slot.lock().unwrap() = Some(fresh);
        true
    }
}

/// The event source mapping for one environment: receive a batch, invoke,
/// delete what the answer does not report failed. A batch whose
/// environment died gets no answer and is left on the queue (its records
/// come back when their hold lapses, or, if it died before any hold, after
/// the queue's visibility timeout).
pub async fn poll_for(
    slot: Slot,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    stop: Arc<AtomicBool>,
    deaths: Option<DeathsAfterReceive>,
) {
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
        if let Some(deaths) = &deaths
            && deaths.strike(&slot, messages.len()).await
        {
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
pub async fn api_services(
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
pub async fn wait_until_all_complete(
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
