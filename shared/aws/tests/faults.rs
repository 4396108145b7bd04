//! The durable step loop on DynamoDB and SQS (moto) under injected faults:
//! every message delivered twice, sends lost between commit and send, a
//! brown-out of the store (its calls refused as throttled), and two
//! concurrent deliveries of one step. Each completed history passes the
//! durability report's checks, and the scenarios record their figures for
//! it (`crash_checks::record_figures`). Model calls are counted at the
//! scripted OpenAI-compatible server (the test double for the model); the
//! engine, the DynamoDB store and the SQS queue are the real ones. Also
//! counts the store and queue calls per node step on the hot path.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use baton_aws::{DynamoRunStore, SqsStepQueue};
use baton_core::basics::ids::RunKey;
use baton_core::basics::instant::Instant;
use baton_core::state::run::{RunState, RunStatus, StepMessage};
use baton_core::wire::event::{EventDraft, EventFrame, EventType};
use baton_llm::{OpenAiCompatibleConfig, OpenAiCompatibleProvider};
use baton_runtime::error::{QueueError, StoreError};
use baton_runtime::ports::{
    ClaimOutcome, CreateOutcome, NodeClaim, NodeLeases, OutboxStore, ReceivedStep, RunLog,
    RunQueries, RunStore, StepCommit, StepQueue, StoredRun,
};
use baton_runtime::services::{OrchestratorSettings, StepOutcome};
use baton_runtime::workers::process_received_step;
use baton_test_support::fault_injection::{DuplicatingQueue, FailingSendQueue};
use baton_test_support::{BuiltServices, TestServices, assert_frames_match_schemas};
use moto_server::{MotoServer, unique_name};
use scripted_llm::{Behavior, ScriptedLlmServer};
use serde_json::Value;

/// Counts port calls by name (a decorator around the real adapters).
#[derive(Default)]
struct CallCounter(Mutex<BTreeMap<&'static str, usize>>);

impl CallCounter {
    fn add(&self, name: &'static str) {
        *self.0.lock().unwrap().entry(name).or_default() += 1;
    }
    fn snapshot(&self) -> BTreeMap<&'static str, usize> {
        self.0.lock().unwrap().clone()
    }
}

struct CountingStore(Arc<dyn RunStore>, Arc<CallCounter>);

#[async_trait]
impl RunLog for CountingStore {
    async fn create_run_within(
        &self,
        state: &RunState,
        events: Vec<EventDraft>,
        outbox: Vec<StepMessage>,
        key: Option<&str>,
        live_run_limit: Option<u64>,
    ) -> Result<CreateOutcome, StoreError> {
        self.1.add("store.create_run");
        self.0
            .create_run_within(state, events, outbox, key, live_run_limit)
            .await
    }

    async fn load_run(&self, key: RunKey<'_>) -> Result<Option<StoredRun>, StoreError> {
        self.1.add("store.load_run");
        self.0.load_run(key).await
    }

    async fn commit_step(&self, key: RunKey<'_>, commit: StepCommit) -> Result<u64, StoreError> {
        self.1.add("store.commit_step");
        self.0.commit_step(key, commit).await
    }

    async fn append_events(
        &self,
        key: RunKey<'_>,
        events: Vec<EventDraft>,
    ) -> Result<u64, StoreError> {
        self.1.add("store.append_events");
        self.0.append_events(key, events).await
    }

    async fn read_events(
        &self,
        key: RunKey<'_>,
        after: u64,
        limit: usize,
    ) -> Result<Vec<EventFrame>, StoreError> {
        self.0.read_events(key, after, limit).await
    }

    async fn read_entries(
        &self,
        key: RunKey<'_>,
        prefix: &str,
    ) -> Result<Vec<baton_core::records::entries::RunEntry>, StoreError> {
        self.1.add("store.read_entries");
        self.0.read_entries(key, prefix).await
    }
}

#[async_trait]
impl NodeLeases for CountingStore {
    async fn claim_node(
        &self,
        key: RunKey<'_>,
        claim: NodeClaim<'_>,
        events: Vec<EventDraft>,
    ) -> Result<ClaimOutcome, StoreError> {
        self.1.add("store.claim_node");
        self.0.claim_node(key, claim, events).await
    }

    async fn renew_claim(&self, key: RunKey<'_>, claim: NodeClaim<'_>) -> Result<bool, StoreError> {
        self.1.add("store.renew_claim");
        self.0.renew_claim(key, claim).await
    }

    async fn release_claim(
        &self,
        key: RunKey<'_>,
        node: &str,
        attempt: u32,
        claimant: &str,
    ) -> Result<(), StoreError> {
        self.1.add("store.release_claim");
        self.0.release_claim(key, node, attempt, claimant).await
    }

    async fn run_holds_live_lease(
        &self,
        key: RunKey<'_>,
        now: Instant,
    ) -> Result<bool, StoreError> {
        self.1.add("store.run_holds_live_lease");
        self.0.run_holds_live_lease(key, now).await
    }
}

#[async_trait]
impl OutboxStore for CountingStore {
    async fn pending_outbox(&self, key: RunKey<'_>) -> Result<Vec<StepMessage>, StoreError> {
        self.1.add("store.pending_outbox");
        self.0.pending_outbox(key).await
    }

    async fn quiet_outbox(
        &self,
        before: Instant,
        limit: usize,
    ) -> Result<Vec<baton_runtime::ports::QuietOutboxEntry>, StoreError> {
        self.0.quiet_outbox(before, limit).await
    }

    async fn mark_outbox_quiet(
        &self,
        key: RunKey<'_>,
        ids: &[String],
        quiet: baton_runtime::ports::OutboxQuiet,
    ) -> Result<(), StoreError> {
        self.1.add("store.mark_outbox_quiet");
        self.0.mark_outbox_quiet(key, ids, quiet).await
    }
}

#[async_trait]
impl RunQueries for CountingStore {
    async fn live_runs(&self, tenant: &str) -> Result<u64, StoreError> {
        self.1.add("store.live_runs");
        self.0.live_runs(tenant).await
    }

    async fn list_runs(
        &self,
        tenant: &str,
        query: &baton_core::state::listing::RunListQuery,
    ) -> Result<baton_core::state::listing::RunListPage, StoreError> {
        self.1.add("store.list_runs");
        self.0.list_runs(tenant, query).await
    }

    async fn runs_awaiting_human(&self, tenant: &str) -> Result<Vec<RunState>, StoreError> {
        self.1.add("store.runs_awaiting_human");
        self.0.runs_awaiting_human(tenant).await
    }
}

struct CountingQueue(Arc<dyn StepQueue>, Arc<CallCounter>);

#[async_trait]
impl StepQueue for CountingQueue {
    async fn send(&self, messages: &[StepMessage]) -> Result<(), QueueError> {
        self.1.add("queue.send");
        self.0.send(messages).await
    }
    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<ReceivedStep>, QueueError> {
        self.0.receive(max, wait).await
    }
    async fn acknowledge(&self, receipt: &str) -> Result<(), QueueError> {
        self.1.add("queue.acknowledge");
        self.0.acknowledge(receipt).await
    }
    async fn release(&self, receipt: &str, delay: Duration) -> Result<(), QueueError> {
        self.1.add("queue.release");
        self.0.release(receipt, delay).await
    }
    async fn send_delayed(&self, message: &StepMessage, delay: Duration) -> Result<(), QueueError> {
        self.1.add("queue.send_delayed");
        self.0.send_delayed(message, delay).await
    }
    async fn hold(&self, receipt: &str, hold: Duration) -> Result<(), QueueError> {
        self.1.add("queue.hold");
        self.0.hold(receipt, hold).await
    }
}

struct Fixture {
    _moto: MotoServer,
    model: ScriptedLlmServer,
    store: Arc<dyn RunStore>,
    sqs: Arc<dyn StepQueue>,
}

async fn fixture() -> Fixture {
    let moto = MotoServer::start().unwrap();
    let configuration = moto.sdk_configuration().await;
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let store = DynamoRunStore::new(&connection, unique_name("baton-faults"));
    store.create_table_if_missing().await.unwrap();
    let queue_url = moto_server::create_shipped_step_queue(&configuration, "baton-faults-steps")
        .await
        .unwrap()
        .queue_url;
    Fixture {
        _moto: moto,
        model: ScriptedLlmServer::start().await.unwrap(),
        store: Arc::new(store),
        sqs: Arc::new(SqsStepQueue::new(&connection, queue_url)),
    }
}

fn orchestrator(
    fixture: &Fixture,
    store: Arc<dyn RunStore>,
    queue: Arc<dyn StepQueue>,
) -> Arc<BuiltServices> {
    worker_with_clock(
        fixture,
        store,
        queue,
        Arc::new(baton_runtime::clock::SystemClock),
        "faults",
    )
}

/// A worker whose clock is `clock` (a skewed one: another machine).
fn worker_with_clock(
    fixture: &Fixture,
    store: Arc<dyn RunStore>,
    queue: Arc<dyn StepQueue>,
    clock: Arc<dyn baton_runtime::ports::Clock>,
    worker_id: &str,
) -> Arc<BuiltServices> {
    let provider = OpenAiCompatibleProvider::new(OpenAiCompatibleConfig::new(
        fixture.model.base_url(),
        "scripted",
        None,
    ))
    .unwrap();
    Arc::new(
        TestServices::with_model(Arc::new(provider))
            .store(store)
            .queue(queue)
            .settings(OrchestratorSettings {
                busy_retry_delay: Duration::from_millis(200),
                ..OrchestratorSettings::default()
            })
            .clock(clock)
            .worker_id(worker_id)
            .build(),
    )
}

fn envelope() -> Value {
    baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json")
}

/// How long `drive_until_settled` waits for a run.
const SETTLE_LIMIT: Duration = Duration::from_secs(60);

/// Records a completed scenario of this file for the durability report.
fn record(scenario: &str, fault: &str, recovered: Duration, model: &ScriptedLlmServer) {
    baton_test_support::crash_checks::record_figures(
        scenario,
        serde_json::json!({
            "store": "DynamoDB + SQS (moto)",
            "path": "step service over the shipped step queue (in process)",
            "fault": fault,
            "runs": 1,
            "recoveryMs": recovered.as_millis() as u64,
            "recoveryLimitMs": SETTLE_LIMIT.as_millis() as u64,
            "modelRequests": model.request_count(),
            "checks": baton_test_support::crash_checks::EXACTLY_ONCE_HISTORY_CHECKS,
        }),
    );
}

/// Receives and performs steps (concurrently within a batch) until the run settles.
async fn drive_until_settled(orchestrator: &Arc<BuiltServices>, run_id: &str) -> RunStatus {
    let deadline = tokio::time::Instant::now() + SETTLE_LIMIT;
    loop {
        let stored = orchestrator
            .store
            .load_run(RunKey::new("t", run_id))
            .await
            .unwrap()
            .unwrap();
        if stored.state.status().is_settled() {
            return stored.state.status();
        }
        assert!(tokio::time::Instant::now() < deadline, "run did not settle");
        let batch = orchestrator
            .queue
            .receive(10, Duration::from_secs(1))
            .await
            .unwrap();
        let handles: Vec<_> = batch
            .into_iter()
            .map(|received| {
                let orchestrator = orchestrator.clone();
                tokio::spawn(async move {
                    process_received_step(
                        &orchestrator.services.steps,
                        orchestrator.queue.as_ref(),
                        received,
                    )
                    .await
                })
            })
            .collect();
        for handle in handles {
            let _ = handle.await.unwrap();
        }
    }
}

async fn assert_exactly_once(
    orchestrator: &BuiltServices,
    run_id: &str,
    model: &ScriptedLlmServer,
) {
    let frames = orchestrator
        .services
        .runs
        .read_all_events_after("t", run_id, 0)
        .await
        .unwrap();
    assert_frames_match_schemas(&frames);
    let values: Vec<Value> = frames
        .iter()
        .map(|frame| serde_json::to_value(frame).unwrap())
        .collect();
    baton_test_support::crash_checks::assert_completed_exactly_once(run_id, &values);
    for (index, frame) in frames.iter().enumerate() {
        assert_eq!(frame.id, index as u64 + 1, "contiguous sequence numbers");
    }
    let count = |kind: EventType| {
        frames
            .iter()
            .filter(|frame| frame.event_type == kind)
            .count()
    };
    assert_eq!(count(EventType::NodeStart), 2, "one node_start per node");
    assert_eq!(
        count(EventType::NodeComplete),
        2,
        "one node_complete per node"
    );
    assert_eq!(count(EventType::PlanGenerated), 1);
    assert_eq!(count(EventType::Complete), 1);
    assert_eq!(frames.last().unwrap().event_type, EventType::Complete);
    assert_eq!(model.request_count(), 2, "one model call per node");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_step_message_delivered_twice() {
    let fixture = fixture().await;
    let queue: Arc<dyn StepQueue> = Arc::new(DuplicatingQueue(fixture.sqs.clone()));
    let orchestrator = orchestrator(&fixture, fixture.store.clone(), queue);
    let started = std::time::Instant::now();
    let submitted = orchestrator
        .services
        .runs
        .submit("t", &envelope())
        .await
        .unwrap();
    assert_eq!(
        drive_until_settled(&orchestrator, &submitted.run_id).await,
        RunStatus::Completed
    );
    assert_exactly_once(&orchestrator, &submitted.run_id, &fixture.model).await;
    record(
        "dynamodb-every-step-message-delivered-twice",
        "every step message sent twice (duplicates, and a twin that may arrive after its run moved on)",
        started.elapsed(),
        &fixture.model,
    );
}

/// A brown-out: the store refuses calls as throttled (DynamoDB's
/// `ProvisionedThroughputExceeded`, retryable) at the run's first step and
/// again at a later one; the steps are released and delivered again, and
/// the run completes once, each node's model called once.
#[tokio::test(flavor = "multi_thread")]
async fn a_store_brown_out_delays_the_run_and_changes_nothing_else() {
    let fixture = fixture().await;
    let faults = Arc::new(baton_test_support::fault_injection::ThrottlingStore::new(
        fixture.store.clone(),
    ));
    let orchestrator = orchestrator(&fixture, faults.clone(), fixture.sqs.clone());
    let started = std::time::Instant::now();
    let submitted = orchestrator
        .services
        .runs
        .submit("t", &envelope())
        .await
        .unwrap();
    // Steps are taken until each burst has been refused whole.
    for (burst, failed_by_then) in [(4, 4), (3, 7)] {
        faults.throttle_next(burst);
        let deadline = tokio::time::Instant::now() + SETTLE_LIMIT;
        while faults.calls_failed() < failed_by_then {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the burst was never hit"
            );
            for received in orchestrator
                .queue
                .receive(10, Duration::from_secs(1))
                .await
                .unwrap()
            {
                let _ = process_received_step(
                    &orchestrator.services.steps,
                    orchestrator.queue.as_ref(),
                    received,
                )
                .await;
            }
        }
    }
    assert_eq!(
        drive_until_settled(&orchestrator, &submitted.run_id).await,
        RunStatus::Completed
    );
    assert_eq!(faults.calls_failed(), 7, "both bursts were refused");
    assert_exactly_once(&orchestrator, &submitted.run_id, &fixture.model).await;
    record(
        "dynamodb-store-brown-out",
        "two bursts of store calls refused as throttled (4, then 3)",
        started.elapsed(),
        &fixture.model,
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sends_lost_between_commit_and_send_are_repaired() {
    let fixture = fixture().await;
    let queue: Arc<dyn StepQueue> = Arc::new(FailingSendQueue::new(fixture.sqs.clone(), 2));
    let orchestrator = orchestrator(&fixture, fixture.store.clone(), queue);
    let started = std::time::Instant::now();
    let submitted = orchestrator
        .services
        .runs
        .submit("t", &envelope())
        .await
        .unwrap();
    assert_eq!(
        drive_until_settled(&orchestrator, &submitted.run_id).await,
        RunStatus::Completed
    );
    assert_exactly_once(&orchestrator, &submitted.run_id, &fixture.model).await;
    record(
        "dynamodb-sends-lost-after-commit",
        "2 step messages lost between the commit and the send",
        started.elapsed(),
        &fixture.model,
    );
    assert!(
        fixture
            .store
            .pending_outbox(RunKey::new("t", &submitted.run_id))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn two_concurrent_deliveries_of_one_step_commit_once() {
    let fixture = fixture().await;
    fixture
        .model
        .push_behaviors([Behavior::SlowValid { delay_ms: 500 }]);
    let orchestrator = orchestrator(&fixture, fixture.store.clone(), fixture.sqs.clone());
    let submitted = orchestrator
        .services
        .runs
        .submit("t", &envelope())
        .await
        .unwrap();
    let plan = orchestrator
        .queue
        .receive(1, Duration::from_secs(2))
        .await
        .unwrap()
        .remove(0);
    process_received_step(
        &orchestrator.services.steps,
        orchestrator.queue.as_ref(),
        plan,
    )
    .await
    .unwrap();
    let node_step = orchestrator
        .queue
        .receive(1, Duration::from_secs(2))
        .await
        .unwrap()
        .remove(0)
        .message;
    let (left, right) = tokio::join!(
        orchestrator.services.steps.handle(&node_step),
        orchestrator.services.steps.handle(&node_step)
    );
    let outcomes = [left.unwrap(), right.unwrap()];
    assert!(
        outcomes
            .iter()
            .any(|outcome| matches!(outcome, StepOutcome::Committed { .. })),
        "{outcomes:?}"
    );
    assert!(
        outcomes
            .iter()
            .any(|outcome| matches!(outcome, StepOutcome::Busy { .. })),
        "{outcomes:?}"
    );
    assert_eq!(
        fixture.model.request_count(),
        1,
        "the twin never called the model"
    );
    let before = orchestrator
        .services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap()
        .len();
    assert_eq!(
        orchestrator
            .services
            .steps
            .handle(&node_step)
            .await
            .unwrap(),
        StepOutcome::Stale
    );
    assert_eq!(
        orchestrator
            .services
            .runs
            .read_all_events_after("t", &submitted.run_id, 0)
            .await
            .unwrap()
            .len(),
        before,
        "the loser appended nothing"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn store_and_queue_calls_per_node_step() {
    let fixture = fixture().await;
    let counter = Arc::new(CallCounter::default());
    let store: Arc<dyn RunStore> = Arc::new(CountingStore(fixture.store.clone(), counter.clone()));
    let queue: Arc<dyn StepQueue> = Arc::new(CountingQueue(fixture.sqs.clone(), counter.clone()));
    let orchestrator = orchestrator(&fixture, store, queue);
    let submitted = orchestrator
        .services
        .runs
        .submit("t", &envelope())
        .await
        .unwrap();
    let plan = orchestrator
        .queue
        .receive(1, Duration::from_secs(2))
        .await
        .unwrap()
        .remove(0);
    process_received_step(
        &orchestrator.services.steps,
        orchestrator.queue.as_ref(),
        plan,
    )
    .await
    .unwrap();
    let before = counter.snapshot();
    let node_step = orchestrator
        .queue
        .receive(1, Duration::from_secs(2))
        .await
        .unwrap()
        .remove(0);
    process_received_step(
        &orchestrator.services.steps,
        orchestrator.queue.as_ref(),
        node_step,
    )
    .await
    .unwrap();
    let after = counter.snapshot();
    let per_step: BTreeMap<&str, usize> = after
        .iter()
        .map(|(name, count)| (*name, count - before.get(name).copied().unwrap_or(0)))
        .filter(|(_, count)| *count > 0)
        .collect();
    println!("port calls for one node step: {per_step:?}");
    // One load, one claim (which consumes the message's outbox entry), one
    // commit; one send, one delete. No outbox mark, and no delta batch: the
    // first node is a structuring (analysis) node, whose text is not
    // streamed (deltas only in the generation and qa phases).
    let expected: BTreeMap<&str, usize> = [
        ("queue.acknowledge", 1),
        ("queue.send", 1),
        ("store.claim_node", 1),
        ("store.commit_step", 1),
        ("store.load_run", 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(per_step, expected);
    assert_eq!(
        drive_until_settled(&orchestrator, &submitted.run_id).await,
        RunStatus::Completed
    );
}

/// Two people answer one parked node at once, on DynamoDB: exactly one
/// answer is applied, the other is told the node no longer waits, and the
/// node completes once.
#[tokio::test(flavor = "multi_thread")]
async fn two_concurrent_answers_to_one_task_make_one_transition() {
    use baton_runtime::services::{PersonInput, PersonInputOutcome};

    let fixture = fixture().await;
    let orchestrator = orchestrator(&fixture, fixture.store.clone(), fixture.sqs.clone());
    let human_review: Value = serde_json::from_str(
        &std::fs::read_to_string(baton_test_support::repository_path(
            "functions/baton/tests/fixtures/human-review.json",
        ))
        .unwrap(),
    )
    .unwrap();
    let submitted = orchestrator
        .services
        .runs
        .submit("t", &human_review)
        .await
        .unwrap();
    assert_eq!(
        drive_until_settled(&orchestrator, &submitted.run_id).await,
        RunStatus::AwaitingHuman
    );
    let parked = fixture
        .store
        .load_run(RunKey::new("t", &submitted.run_id))
        .await
        .unwrap()
        .unwrap();
    let tasks = baton_core::state::tasks::human_tasks(&parked.state);
    assert_eq!(tasks.len(), 1);
    let task = &tasks[0];
    let answer = || PersonInput::Answer {
        node_id: task.node_id.clone(),
        expected_plan_version: task.plan_version,
        output: scripted_llm::generate_instance(&task.output_schema, "answer"),
    };
    let people = orchestrator.services.people.clone();
    let (first, second) = tokio::join!(
        people.apply("t", &submitted.run_id, answer()),
        people.apply("t", &submitted.run_id, answer())
    );
    let outcomes = [first.unwrap(), second.unwrap()];
    let applied = outcomes
        .iter()
        .filter(|outcome| matches!(outcome, PersonInputOutcome::Applied { .. }))
        .count();
    let refused = outcomes
        .iter()
        .filter(|outcome| matches!(outcome, PersonInputOutcome::Refused(_)))
        .count();
    assert_eq!((applied, refused), (1, 1), "{outcomes:?}");
    assert_eq!(
        drive_until_settled(&orchestrator, &submitted.run_id).await,
        RunStatus::Completed
    );
    let frames = orchestrator
        .services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap();
    let completions = frames
        .iter()
        .filter(|frame| {
            frame.event_type.as_str() == "node_complete"
                && frame.node_id.as_deref() == Some(task.node_id.as_str())
        })
        .count();
    assert_eq!(completions, 1, "no duplicate frame");
}

/// The frames of `run_id` pass the history checks, and its model was asked
/// once per planned node (every node's answer used once).
async fn assert_history_exact(orchestrator: &BuiltServices, run_id: &str) -> usize {
    let frames = orchestrator
        .services
        .runs
        .read_all_events_after("t", run_id, 0)
        .await
        .unwrap();
    assert_frames_match_schemas(&frames);
    let values: Vec<Value> = frames
        .iter()
        .map(|frame| serde_json::to_value(frame).unwrap())
        .collect();
    baton_test_support::crash_checks::assert_completed_exactly_once(run_id, &values);
    frames
        .iter()
        .filter(|frame| frame.event_type == EventType::NodeComplete)
        .count()
}

/// Reordered deliveries: the plan fans out to two nodes at once, each
/// batch of step messages arrives in reverse order, and every message
/// arrives again 4 s later, after its run moved on. The run completes
/// once, each node's model asked once.
#[tokio::test(flavor = "multi_thread")]
async fn reordered_and_late_deliveries_change_nothing() {
    let fixture = fixture().await;
    let queue: Arc<dyn StepQueue> =
        Arc::new(baton_test_support::fault_injection::ReorderingQueue {
            inner: fixture.sqs.clone(),
            late_by: Duration::from_secs(4),
        });
    let orchestrator = orchestrator(&fixture, fixture.store.clone(), queue);
    let started = std::time::Instant::now();
    let submitted = orchestrator
        .services
        .runs
        .submit(
            "t",
            &baton_test_support::plain_example_envelope(
                "seed-10.0.1-stream-contract-variants.json",
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        drive_until_settled(&orchestrator, &submitted.run_id).await,
        RunStatus::Completed
    );
    let recovered = started.elapsed();
    // The late copies come after the run ended: each is stale.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let late = orchestrator
        .queue
        .receive(10, Duration::from_secs(1))
        .await
        .unwrap();
    for received in late {
        let outcome = orchestrator.services.steps.handle(&received.message).await;
        assert_eq!(outcome.unwrap(), StepOutcome::Stale);
        orchestrator
            .queue
            .acknowledge(&received.receipt)
            .await
            .unwrap();
    }
    let nodes = assert_history_exact(&orchestrator, &submitted.run_id).await;
    assert_eq!(nodes, 4, "a plan of four nodes, two of them side by side");
    let model_nodes = orchestrator
        .store
        .load_run(RunKey::new("t", &submitted.run_id))
        .await
        .unwrap()
        .unwrap()
        .state
        .nodes
        .values()
        .filter(|node| node.model.is_some())
        .count();
    assert_eq!(
        fixture.model.request_count(),
        model_nodes,
        "one model call per node that asks a model"
    );
    record(
        "dynamodb-reordered-and-late-deliveries",
        "each batch of step messages delivered in reverse order, a second apart, and every message again 4 s later (after its run moved on)",
        recovered,
        &fixture.model,
    );
}

/// Clock skew within a lease: two workers, one 10 s ahead of the true
/// time and one 10 s behind (20 s apart, the lease is 30 s), take the same
/// steps (every message delivered twice) while each model call takes
/// 1.5 s. Neither takes the other's live claim: the run completes once,
/// each node's model asked once.
#[tokio::test(flavor = "multi_thread")]
async fn workers_whose_clocks_differ_by_less_than_a_lease_call_each_model_once() {
    use baton_test_support::fault_injection::SkewedClock;
    let fixture = fixture().await;
    fixture
        .model
        .set_default_behavior(Behavior::SlowValid { delay_ms: 1_500 });
    let queue: Arc<dyn StepQueue> = Arc::new(DuplicatingQueue(fixture.sqs.clone()));
    let ahead = worker_with_clock(
        &fixture,
        fixture.store.clone(),
        queue.clone(),
        Arc::new(SkewedClock {
            off_by: Duration::from_secs(10),
            behind: false,
        }),
        "ahead",
    );
    let behind = worker_with_clock(
        &fixture,
        fixture.store.clone(),
        queue,
        Arc::new(SkewedClock {
            off_by: Duration::from_secs(10),
            behind: true,
        }),
        "behind",
    );
    let started = std::time::Instant::now();
    let submitted = behind.services.runs.submit("t", &envelope()).await.unwrap();
    let (first, second) = tokio::join!(
        drive_until_settled(&ahead, &submitted.run_id),
        drive_until_settled(&behind, &submitted.run_id)
    );
    assert_eq!(
        (first, second),
        (RunStatus::Completed, RunStatus::Completed)
    );
    assert_exactly_once(&ahead, &submitted.run_id, &fixture.model).await;
    record(
        "dynamodb-clock-skew-within-a-lease",
        "two workers 20 s apart (one 10 s ahead, one 10 s behind; the lease is 30 s), every step message delivered twice, each model call 1.5 s",
        started.elapsed(),
        &fixture.model,
    );
}

/// Clock skew past a lease, the known limit: a worker 45 s ahead (the
/// lease is 30 s) sees the other's live claim as expired and may take it,
/// asking the model again. The commit protocol still keeps the run's
/// history exact: one answer per node is used, whatever was asked.
#[tokio::test(flavor = "multi_thread")]
async fn a_worker_ahead_by_more_than_a_lease_may_call_again_but_the_history_stays_exact() {
    use baton_test_support::fault_injection::SkewedClock;
    let fixture = fixture().await;
    fixture
        .model
        .set_default_behavior(Behavior::SlowValid { delay_ms: 3_000 });
    let queue: Arc<dyn StepQueue> = Arc::new(DuplicatingQueue(fixture.sqs.clone()));
    let true_time = orchestrator(&fixture, fixture.store.clone(), queue.clone());
    let ahead = worker_with_clock(
        &fixture,
        fixture.store.clone(),
        queue,
        Arc::new(SkewedClock {
            off_by: Duration::from_secs(45),
            behind: false,
        }),
        "far-ahead",
    );
    let started = std::time::Instant::now();
    let submitted = true_time
        .services
        .runs
        .submit("t", &envelope())
        .await
        .unwrap();
    let (first, second) = tokio::join!(
        drive_until_settled(&true_time, &submitted.run_id),
        drive_until_settled(&ahead, &submitted.run_id)
    );
    assert_eq!(
        (first, second),
        (RunStatus::Completed, RunStatus::Completed)
    );
    let nodes = assert_history_exact(&true_time, &submitted.run_id).await;
    assert_eq!(nodes, 2);
    let asked = fixture.model.request_count();
    assert!(asked >= nodes, "{asked} model requests for {nodes} nodes");
    eprintln!("{asked} model requests for {nodes} nodes with a worker 45 s ahead");
    record(
        "dynamodb-clock-skew-past-a-lease",
        "a worker 45 s ahead of another (the lease is 30 s), every step message delivered twice, each model call 3 s: a live claim may be taken, the model asked again",
        started.elapsed(),
        &fixture.model,
    );
}
