//! What a run costs in AWS infrastructure, measured on the real code path:
//! the DynamoDB store and SQS queue adapters over the real SDK clients
//! against moto, the step service, the repository's registry and examples.
//! The model endpoint is the scripted test double (an OpenAI-compatible
//! server answering schema-valid JSON at once), so model time is left out:
//! the Lambda time printed is Baton's own orchestration time per step.
//!
//! An SDK interceptor records every call with the size of what it reads and
//! writes; capacity units follow DynamoDB's on-demand rules (strongly
//! consistent read: 1 RRU per 4 KB; write: 1 WRU per 1 KB, twice in a
//! transaction; an update is charged on the whole item, the run item's
//! state included). SQS: one request per call per 64 KB. Prices are the
//! published us-east-1 on-demand ones, written below.
//!
//!   cargo bench -p baton-aws --bench cost_per_run
//!
//! Needs `moto_server` on the PATH (`pip install "moto[server]"`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::operation::get_item::GetItemOutput;
use aws_sdk_dynamodb::operation::query::QueryOutput;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsInput;
use aws_sdk_dynamodb::operation::update_item::UpdateItemInput;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::operation::send_message_batch::SendMessageBatchInput;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{
    AfterDeserializationInterceptorContextRef, BeforeSerializationInterceptorContextRef,
    BeforeTransmitInterceptorContextRef,
};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use baton_aws::{DynamoRunStore, SqsStepQueue};
use baton_core::basics::ids::RunKey;
use baton_core::state::run::{RunStatus, StepCommand};
use baton_llm::{OpenAiCompatibleConfig, OpenAiCompatibleProvider};
use baton_runtime::ports::StepQueue;
use baton_runtime::workers::process_received_step;
use baton_test_support::TestServices;
use moto_server::{MotoServer, unique_name};
use scripted_llm::ScriptedLlmServer;

/// us-east-1 on-demand prices (USD).
const DYNAMODB_PER_MILLION_WRU: f64 = 0.625;
const DYNAMODB_PER_MILLION_RRU: f64 = 0.125;
const SQS_PER_MILLION_REQUESTS: f64 = 0.40;
const LAMBDA_ARM64_PER_GB_SECOND: f64 = 0.000_013_333_4;
const LAMBDA_PER_MILLION_REQUESTS: f64 = 0.20;
const STEP_FUNCTIONS_STANDARD_PER_THOUSAND_TRANSITIONS: f64 = 0.025;
const STEP_FUNCTIONS_EXPRESS_PER_MILLION_REQUESTS: f64 = 1.0;
const STEP_FUNCTIONS_EXPRESS_PER_GB_SECOND: f64 = 0.000_016_67;
/// The template's `MemorySize` for every function.
const LAMBDA_MEMORY_GB: f64 = 0.5;
/// Express bills memory in 64 MB steps; a small workflow uses the first.
const EXPRESS_MEMORY_GB: f64 = 0.064;
const ROUNDS: usize = 5;
const EXAMPLES: [&str; 4] = [
    "seed-10.0.1-stream-contract-variants.json",
    "seed-10.1-sample-envelope.json",
    "positioning-recommendation.json",
    "social-post-new-case.json",
];

/// Capacity and requests one piece of work consumed.
#[derive(Debug, Clone, Default)]
struct Usage {
    calls: BTreeMap<String, usize>,
    read_units: f64,
    write_units: f64,
    /// Write units by item kind (the sort key's prefix: RUN, EV, OUT, LEASE…).
    write_units_by_item: BTreeMap<String, f64>,
    sqs_requests: f64,
}

impl Usage {
    fn write(&mut self, sort_key: &str, write_units: f64) {
        // A listing's key is its ordering key (`{created ms}.{run id}`).
        let kind = if sort_key.starts_with(|first: char| first.is_ascii_digit()) {
            "LISTING".to_string()
        } else {
            sort_key.split('#').next().unwrap_or("?").to_string()
        };
        *self.write_units_by_item.entry(kind).or_default() += write_units;
        self.write_units += write_units;
    }

    fn add(&mut self, other: &Usage) {
        for (name, count) in &other.calls {
            *self.calls.entry(name.clone()).or_default() += count;
        }
        self.read_units += other.read_units;
        self.write_units += other.write_units;
        for (kind, units) in &other.write_units_by_item {
            *self.write_units_by_item.entry(kind.clone()).or_default() += units;
        }
        self.sqs_requests += other.sqs_requests;
    }

    fn scaled(&self, factor: f64) -> Usage {
        Usage {
            calls: self
                .calls
                .iter()
                .map(|(name, count)| (name.clone(), *count))
                .collect(),
            read_units: self.read_units * factor,
            write_units: self.write_units * factor,
            write_units_by_item: self
                .write_units_by_item
                .iter()
                .map(|(kind, units)| (kind.clone(), units * factor))
                .collect(),
            sqs_requests: self.sqs_requests * factor,
        }
    }

    fn dollars(&self) -> f64 {
        self.read_units * DYNAMODB_PER_MILLION_RRU / 1e6
            + self.write_units * DYNAMODB_PER_MILLION_WRU / 1e6
            + self.sqs_requests * SQS_PER_MILLION_REQUESTS / 1e6
    }
}

/// What the interceptor knows of item sizes it cannot see in a request
/// (an update or delete is charged on the stored item).
#[derive(Debug, Default)]
struct Meter {
    usage: Usage,
    item_bytes: HashMap<(String, String), usize>,
}

#[derive(Debug, Clone)]
struct Metering {
    service: &'static str,
    meter: Arc<Mutex<Meter>>,
}

fn value_bytes(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(text) => text.len(),
        AttributeValue::N(number) => number.len() / 2 + 1,
        AttributeValue::B(blob) => blob.as_ref().len(),
        AttributeValue::M(map) => {
            3 + map
                .iter()
                .map(|(k, v)| k.len() + value_bytes(v) + 1)
                .sum::<usize>()
        }
        AttributeValue::L(list) => 3 + list.iter().map(|v| value_bytes(v) + 1).sum::<usize>(),
        _ => 1,
    }
}

fn item_bytes(item: &HashMap<String, AttributeValue>) -> usize {
    item.iter()
        .map(|(name, value)| name.len() + value_bytes(value))
        .sum()
}

fn key_of(item: &HashMap<String, AttributeValue>) -> (String, String) {
    let text = |name: &str| {
        item.get(name)
            .and_then(|value| value.as_s().ok())
            .cloned()
            .unwrap_or_default()
    };
    (text("pk"), text("sk"))
}

fn units(bytes: usize, unit: usize) -> f64 {
    bytes.max(1).div_ceil(unit) as f64
}

impl Meter {
    /// The stored item an update changes: its size after `changes`.
    fn updated(
        &mut self,
        key: (String, String),
        changes: &HashMap<String, AttributeValue>,
    ) -> usize {
        let before = self.item_bytes.get(&key).copied().unwrap_or(0);
        let after = match changes.get(":state") {
            // A commit rewrites the state; the rest of the run item stays.
            Some(state) => before.max(200) - self.state_bytes(&key) + value_bytes(state) + 6,
            None => before,
        };
        if let Some(state) = changes.get(":state") {
            self.item_bytes.insert(
                (key.0.clone(), format!("{}#state", key.1)),
                value_bytes(state) + 5,
            );
        }
        self.item_bytes.insert(key, after);
        before.max(after)
    }

    fn state_bytes(&self, key: &(String, String)) -> usize {
        self.item_bytes
            .get(&(key.0.clone(), format!("{}#state", key.1)))
            .copied()
            .unwrap_or(0)
    }

    fn remember(&mut self, item: &HashMap<String, AttributeValue>) -> usize {
        let bytes = item_bytes(item);
        let key = key_of(item);
        if let Some(state) = item.get("state") {
            self.item_bytes.insert(
                (key.0.clone(), format!("{}#state", key.1)),
                value_bytes(state) + 5,
            );
        }
        self.item_bytes.insert(key, bytes);
        bytes
    }
}

impl Intercept for Metering {
    fn name(&self) -> &'static str {
        "Metering"
    }

    fn read_before_execution(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let mut meter = self.meter.lock().unwrap();
        let input = context.input();
        if let Some(transaction) = input.downcast_ref::<TransactWriteItemsInput>() {
            for item in transaction.transact_items() {
                let (sort_key, bytes) = if let Some(put) = item.put() {
                    (key_of(put.item()).1, meter.remember(put.item()))
                } else if let Some(update) = item.update() {
                    let key = key_of(update.key());
                    let values = update
                        .expression_attribute_values()
                        .cloned()
                        .unwrap_or_default();
                    (key.1.clone(), meter.updated(key, &values))
                } else if let Some(delete) = item.delete() {
                    let key = key_of(delete.key());
                    (key.1.clone(), meter.item_bytes.remove(&key).unwrap_or(1))
                } else {
                    ("?".into(), 1)
                };
                meter.usage.write(&sort_key, 2.0 * units(bytes, 1024));
            }
        } else if let Some(update) = input.downcast_ref::<UpdateItemInput>() {
            let key = key_of(update.key().unwrap_or(&HashMap::new()));
            let values = update
                .expression_attribute_values()
                .cloned()
                .unwrap_or_default();
            let sort_key = key.1.clone();
            let bytes = meter.updated(key, &values);
            meter.usage.write(&sort_key, units(bytes, 1024));
        } else if let Some(batch) = input.downcast_ref::<SendMessageBatchInput>() {
            let bytes: usize = batch
                .entries()
                .iter()
                .map(|entry| entry.message_body().len())
                .sum();
            // Counted once more as a request in `read_before_transmit`.
            meter.usage.sqs_requests += units(bytes, 64 * 1024) - 1.0;
        }
        Ok(())
    }

    /// Every call by its operation (`X-Amz-Target`, e.g. `DynamoDB_20120810.GetItem`).
    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let operation = context
            .request()
            .headers()
            .get("x-amz-target")
            .and_then(|target| target.rsplit('.').next())
            .unwrap_or("unknown")
            .to_string();
        let mut meter = self.meter.lock().unwrap();
        if self.service == "sqs" {
            meter.usage.sqs_requests += 1.0;
        }
        *meter
            .usage
            .calls
            .entry(format!("{}.{operation}", self.service))
            .or_default() += 1;
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Ok(output) = context.output_or_error() else {
            return Ok(());
        };
        let mut meter = self.meter.lock().unwrap();
        if let Some(got) = output.downcast_ref::<GetItemOutput>() {
            let bytes = got.item().map(|item| meter.remember(item)).unwrap_or(1);
            meter.usage.read_units += units(bytes, 4096);
        } else if let Some(queried) = output.downcast_ref::<QueryOutput>() {
            let bytes: usize = queried.items().iter().map(item_bytes).sum();
            meter.usage.read_units += units(bytes, 4096);
        }
        Ok(())
    }
}

/// One handled step: what it was, what it used, how long the handler took.
struct StepRecord {
    label: &'static str,
    usage: Usage,
    duration: Duration,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let moto = MotoServer::start().expect("moto_server starts (pip install \"moto[server]\")");
    let configuration = moto.sdk_configuration().await;
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let table = unique_name("baton-cost");
    DynamoRunStore::new(&connection, &table)
        .create_table_if_missing()
        .await
        .unwrap();
    let queue_url = moto_server::create_unique_queue(&configuration, "baton-cost-steps", None)
        .await
        .unwrap();
    let model = ScriptedLlmServer::start().await.unwrap();
    let meter = Arc::new(Mutex::new(Meter::default()));
    let metering = |service| Metering {
        service,
        meter: meter.clone(),
    };
    let dynamodb = aws_sdk_dynamodb::config::Builder::from(&configuration)
        .interceptor(metering("dynamodb"))
        .build();
    let sqs = aws_sdk_sqs::config::Builder::from(&configuration)
        .interceptor(metering("sqs"))
        .build();
    let store = Arc::new(baton_aws::from_clients::dynamodb_store(
        aws_sdk_dynamodb::Client::from_conf(dynamodb),
        &table,
    ));
    let queue = Arc::new(baton_aws::from_clients::sqs_queue(
        aws_sdk_sqs::Client::from_conf(sqs),
        &queue_url,
    ));
    let provider = Arc::new(
        OpenAiCompatibleProvider::new(OpenAiCompatibleConfig::new(
            model.base_url(),
            "scripted",
            None,
        ))
        .unwrap(),
    );
    let services = TestServices::with_model(provider)
        .store(store.clone())
        .queue(queue.clone())
        .capability_directory(store.clone())
        .stream_leases(store.clone())
        .build()
        .services;
    let take_usage = || std::mem::take(&mut meter.lock().unwrap().usage);

    let mut records: Vec<StepRecord> = Vec::new();
    for _ in 0..ROUNDS {
        for example in EXAMPLES {
            take_usage();
            let started = Instant::now();
            let submitted = services
                .runs
                .submit("t", &baton_test_support::plain_example_envelope(example))
                .await
                .unwrap();
            records.push(StepRecord {
                label: "submit (api or ingest)",
                duration: started.elapsed(),
                usage: take_usage(),
            });
            loop {
                let received = queue.receive(1, Duration::from_secs(5)).await.unwrap();
                let Some(received) = received.into_iter().next() else {
                    break;
                };
                let label = match &received.message.command {
                    StepCommand::Plan => "plan step",
                    StepCommand::Replan { .. } => "replan step",
                    StepCommand::ExecuteNode { node_id, .. } => {
                        let stored = store.clone();
                        let state = baton_runtime::ports::RunLog::load_run(
                            stored.as_ref(),
                            RunKey::new("t", &received.message.run_id),
                        )
                        .await
                        .unwrap()
                        .unwrap()
                        .state;
                        let is_model_node = state.plan.as_ref().is_some_and(|plan| {
                            plan.nodes
                                .iter()
                                .any(|node| &node.node_id == node_id && node.builtin().is_none())
                        });
                        if is_model_node {
                            "node step (model)"
                        } else {
                            "node step (built-in)"
                        }
                    }
                    StepCommand::AskJudge { .. } => "judge step",
                    StepCommand::AgentTurn { .. } => "agent turn step",
                    StepCommand::RunTool { .. } => "tool step",
                    StepCommand::ChildRunEnded { .. } => "child run ended step",
                    StepCommand::FireTimer { .. } => "timer step",
                    StepCommand::Notify { .. } => "notification step",
                    StepCommand::Remember { .. } => "remember step",
                    StepCommand::CancelRun { .. } => "cancel step",
                    StepCommand::ReleaseThreadLane { .. } => "thread lane release step",
                };
                take_usage();
                let started = Instant::now();
                process_received_step(&services.steps, queue.as_ref(), received)
                    .await
                    .unwrap();
                let duration = started.elapsed();
                let mut usage = take_usage();
                // The Lambda poller's ReceiveMessage for this message.
                usage.sqs_requests += 1.0;
                *usage.calls.entry("sqs.ReceiveMessage".into()).or_default() += 1;
                records.push(StepRecord {
                    label,
                    usage,
                    duration,
                });
            }
            let status = services
                .runs
                .load("t", &submitted.run_id)
                .await
                .unwrap()
                .unwrap()
                .state
                .status();
            assert_eq!(status, RunStatus::Completed, "{example} completes");
        }
    }

    println!(
        "Per piece of work (medians of {ROUNDS} rounds over {} examples; moto on localhost):",
        EXAMPLES.len()
    );
    let mut by_label: BTreeMap<&str, Vec<&StepRecord>> = BTreeMap::new();
    for record in &records {
        by_label.entry(record.label).or_default().push(record);
    }
    let mut typical: HashMap<&str, (Usage, f64)> = HashMap::new();
    for (label, group) in &by_label {
        let mut total = Usage::default();
        for record in group {
            total.add(&record.usage);
        }
        let count = group.len() as f64;
        let mean = total.scaled(1.0 / count);
        let calls: BTreeMap<&String, f64> = total
            .calls
            .iter()
            .map(|(name, n)| (name, *n as f64 / count))
            .collect();
        let milliseconds = median(
            group
                .iter()
                .map(|record| record.duration.as_secs_f64() * 1000.0)
                .collect(),
        );
        println!(
            "  {label:<22} n={:<3} handler {milliseconds:>6.1} ms  RRU {:>5.1}  WRU {:>5.1} {:?}  SQS req {:>3.1}\n      calls per step {calls:?}",
            group.len(),
            mean.read_units,
            mean.write_units,
            mean.write_units_by_item,
            mean.sqs_requests
        );
        typical.insert(label, (mean, milliseconds));
    }

    let nodes = 5.0;
    let (submit, submit_ms) = typical["submit (api or ingest)"].clone();
    let (plan, plan_ms) = typical["plan step"].clone();
    let (node, node_ms) = typical["node step (model)"].clone();
    let mut run = submit.clone();
    run.add(&plan);
    run.add(&node.scaled(nodes));
    let lambda_seconds = (submit_ms + plan_ms + nodes * node_ms) / 1000.0;
    let invocations = 2.0 + nodes;
    let lambda = lambda_seconds * LAMBDA_MEMORY_GB * LAMBDA_ARM64_PER_GB_SECOND
        + invocations * LAMBDA_PER_MILLION_REQUESTS / 1e6;
    let baton = run.dollars() + lambda;
    println!(
        "\nOne 5-node run (submit + plan step + 5 model node steps), infrastructure only, model time excluded:"
    );
    println!(
        "  DynamoDB {:.0} RRU + {:.0} WRU = ${:.7}",
        run.read_units,
        run.write_units,
        run.read_units * DYNAMODB_PER_MILLION_RRU / 1e6
            + run.write_units * DYNAMODB_PER_MILLION_WRU / 1e6
    );
    println!(
        "  SQS {:.0} requests = ${:.7}",
        run.sqs_requests,
        run.sqs_requests * SQS_PER_MILLION_REQUESTS / 1e6
    );
    println!(
        "  Lambda {invocations:.0} invocations, {lambda_seconds:.3} s at {LAMBDA_MEMORY_GB} GB arm64 = ${lambda:.7}"
    );
    println!(
        "  Baton total ${baton:.7} per run (${:.2} per 1,000 runs)",
        baton * 1000.0
    );
    let transitions = nodes + 1.0;
    let standard = transitions * STEP_FUNCTIONS_STANDARD_PER_THOUSAND_TRANSITIONS / 1000.0;
    let express = STEP_FUNCTIONS_EXPRESS_PER_MILLION_REQUESTS / 1e6
        + lambda_seconds * EXPRESS_MEMORY_GB * STEP_FUNCTIONS_EXPRESS_PER_GB_SECOND;
    println!(
        "  Step Functions Standard, {transitions:.0} transitions (plan + 5 tasks), orchestration alone: ${standard:.7} per run (${:.2} per 1,000)",
        standard * 1000.0
    );
    println!(
        "  Step Functions Express, 1 request + {lambda_seconds:.3} s at 64 MB, orchestration alone: ${express:.7} per run (${:.3} per 1,000)",
        express * 1000.0
    );
    println!(
        "  (Both Step Functions figures add the same task Lambdas and model calls Baton has; Express also bills the time it waits for each model.)"
    );

    agent_session_costs(&store, &queue, &meter).await;
    idle_stream_costs(&services, &meter).await;
}

/// How long the idle stream is measured (then scaled to a minute): past
/// the follower's back-off to its 1 s idle poll and one lease renewal.
const IDLE_STREAM_SECONDS: u64 = 30;

/// One event stream on a run that stays queued (nothing drives it), as the
/// stream function follows it: its lease taken, then the follower's polls
/// and the lease's renewals, metered, per minute.
async fn idle_stream_costs(
    services: &baton_runtime::services::Services,
    meter: &Arc<Mutex<Meter>>,
) {
    use futures_util::StreamExt;
    let submitted = services
        .runs
        .submit(
            "idle",
            &baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json"),
        )
        .await
        .unwrap();
    let take_usage = || std::mem::take(&mut meter.lock().unwrap().usage);
    take_usage();
    let ticket = services
        .streams
        .open(
            "idle",
            &submitted.run_id,
            baton_runtime::ports::StreamCaps {
                per_run: 64,
                per_tenant: 200,
            },
        )
        .await
        .unwrap();
    let frames = services
        .runs
        .follow("idle", &submitted.run_id, 0, Duration::from_millis(100));
    let window = Duration::from_secs(IDLE_STREAM_SECONDS);
    let seen = tokio::time::timeout(window, frames.count()).await;
    assert!(seen.is_err(), "the queued run's stream stays open");
    drop(ticket);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let usage = take_usage().scaled(60.0 / IDLE_STREAM_SECONDS as f64);
    let lambda = 60.0 * LAMBDA_MEMORY_GB * LAMBDA_ARM64_PER_GB_SECOND;
    println!(
        "\nOne idle event stream, per minute (follower back-off 100 ms -> 1 s, a 60 s lease renewed every 20 s; measured over {IDLE_STREAM_SECONDS} s):"
    );
    println!(
        "  DynamoDB {:.0} RRU + {:.1} WRU = ${:.7}; calls in the window {:?}",
        usage.read_units,
        usage.write_units,
        usage.dollars(),
        usage.calls
    );
    println!(
        "  Lambda 60 s at {LAMBDA_MEMORY_GB} GB arm64 (a streaming function bills while it streams) = ${lambda:.7}"
    );
    println!(
        "  total ${:.7} per idle stream-minute (${:.2} per 1,000 stream-hours)",
        usage.dollars() + lambda,
        (usage.dollars() + lambda) * 60.0 * 1000.0
    );
}

/// Turns of the measured agent session, and the size of each tool result.
const AGENT_TURNS: usize = 40;
const TOOL_RESULT_BYTES: usize = 1500;

/// One agent session of `AGENT_TURNS` model turns (a lookup each, ~1.5 kB
/// per result) on the same metered store and queue: what an agent turn and
/// a tool step cost, and whether the cost grows with the session.
async fn agent_session_costs(
    store: &Arc<DynamoRunStore>,
    queue: &Arc<SqsStepQueue>,
    meter: &Arc<Mutex<Meter>>,
) {
    use baton_test_support::agent_session::{
        FixedLookup, OneLookupPerTurn, agent_envelope, agent_registry,
    };
    let services = TestServices::with_model(Arc::new(OneLookupPerTurn { turns: AGENT_TURNS }))
        .registry(agent_registry(AGENT_TURNS))
        .store(store.clone())
        .queue(queue.clone())
        .tools(Arc::new(FixedLookup {
            result_bytes: TOOL_RESULT_BYTES,
        }))
        .settings(baton_runtime::services::OrchestratorSettings {
            agent_session_limit: Duration::from_secs(1800),
            ..baton_runtime::services::OrchestratorSettings::default()
        })
        .build()
        .services;
    let take_usage = || std::mem::take(&mut meter.lock().unwrap().usage);
    let submitted = services.runs.submit("t", &agent_envelope()).await.unwrap();
    let mut turns: Vec<f64> = Vec::new();
    let mut tools: Vec<f64> = Vec::new();
    loop {
        let received = queue.receive(1, Duration::from_secs(5)).await.unwrap();
        let Some(received) = received.into_iter().next() else {
            break;
        };
        let command = received.message.command.clone();
        take_usage();
        process_received_step(&services.steps, queue.as_ref(), received)
            .await
            .unwrap();
        let written = take_usage().write_units;
        match command {
            StepCommand::AgentTurn { .. } => turns.push(written),
            StepCommand::RunTool { .. } => tools.push(written),
            _ => {}
        }
    }
    let status = services
        .runs
        .load("t", &submitted.run_id)
        .await
        .unwrap()
        .unwrap()
        .state
        .status();
    assert_eq!(status, RunStatus::Completed, "the agent session completes");
    let (first_turn, last_turn) = (turns[0], turns[turns.len() - 1]);
    println!(
        "\nOne {AGENT_TURNS}-turn agent session (a ~{TOOL_RESULT_BYTES} B tool result per turn):"
    );
    println!(
        "  agent turn step  n={:<3} WRU median {:>5.1}  first {first_turn:.1}  last {last_turn:.1}",
        turns.len(),
        median(turns.clone())
    );
    println!(
        "  tool step        n={:<3} WRU median {:>5.1}  first {:.1}  last {:.1}",
        tools.len(),
        median(tools.clone()),
        tools[0],
        tools[tools.len() - 1]
    );
    println!(
        "  whole session: {:.0} WRU",
        turns.iter().chain(&tools).sum::<f64>()
    );
}
