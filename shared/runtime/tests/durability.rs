//! Durability of the step loop on the in-memory adapters: duplicate
//! deliveries, a crash between commit and send, and twin concurrent
//! deliveries. The model endpoint is a counting test double that answers
//! schema-shaped JSON; the engine, store, queue and worker are the real ones.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use baton_core::basics::ids::RunKey;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_core::wire::event::EventType;
use baton_runtime::clock::SystemClock;
use baton_runtime::error::LlmError;
use baton_runtime::memory::{InMemoryRunStore, InMemoryStepQueue};
use baton_runtime::ports::{
    LlmProvider, ModelAnswer, NodeLeases, OutboxStore, RunLog, RunQueries, RunStore, StepQueue,
};
use baton_runtime::services::{OutboxSweeper, Services, StepOutcome};
use baton_runtime::workers::LocalRunner;
use baton_test_support::fault_injection::{DuplicatingQueue, FailingSendQueue};
use baton_test_support::{TestServices, assert_frames_match_schemas};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

/// Test double for the model endpoint: valid answers, counted, optionally slow.
struct CountingModel {
    calls: AtomicUsize,
    delay: Duration,
}

#[async_trait]
impl LlmProvider for CountingModel {
    fn model_name(&self) -> String {
        "counting".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: UnboundedSender<baton_runtime::ports::ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        let content = scripted_llm::generate_instance(&request.output_schema, "answer").to_string();
        let _ = deltas.send(baton_runtime::ports::ModelDelta::Text(content.clone()));
        Ok(ModelAnswer {
            content,
            usage: TokenUsage::default(),
            model: "counting".into(),
        })
    }
}

fn envelope() -> Value {
    baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json")
}

fn services(
    store: Arc<InMemoryRunStore>,
    queue: Arc<dyn StepQueue>,
    model: Arc<CountingModel>,
) -> Services {
    services_over_store(store, queue, model)
}

/// The real services over `store` and `queue`, with the counting model
/// standing in for the model endpoint.
fn services_over_store(
    store: Arc<dyn RunStore>,
    queue: Arc<dyn StepQueue>,
    model: Arc<CountingModel>,
) -> Services {
    TestServices::with_model(model)
        .store(store)
        .queue(queue)
        .build()
        .services
}

async fn assert_completed_once_per_node(
    store: &InMemoryRunStore,
    services: &Services,
    run_id: &str,
    model: &CountingModel,
) {
    let state = store
        .load_run(RunKey::new("t", run_id))
        .await
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(state.status(), RunStatus::Completed);
    let frames = services
        .runs
        .read_all_events_after("t", run_id, 0)
        .await
        .unwrap();
    assert_frames_match_schemas(&frames);
    for (index, frame) in frames.iter().enumerate() {
        assert_eq!(frame.id, index as u64 + 1, "contiguous sequence numbers");
    }
    let count = |event_type: EventType| {
        frames
            .iter()
            .filter(|frame| frame.event_type == event_type)
            .count()
    };
    let nodes = state.plan.as_ref().unwrap().nodes.len();
    assert_eq!(
        count(EventType::NodeComplete),
        nodes,
        "no duplicated node_complete"
    );
    assert_eq!(
        count(EventType::NodeStart),
        nodes,
        "no duplicated node_start"
    );
    assert_eq!(count(EventType::PlanGenerated), 1);
    assert_eq!(count(EventType::Complete), 1);
    assert_eq!(
        model.calls.load(Ordering::SeqCst),
        nodes,
        "one model call per node"
    );
}

#[tokio::test]
async fn every_message_delivered_twice_changes_nothing() {
    let store = Arc::new(InMemoryRunStore::new());
    let inner = Arc::new(InMemoryStepQueue::new());
    let model = Arc::new(CountingModel {
        calls: AtomicUsize::new(0),
        delay: Duration::ZERO,
    });
    let services = services(
        store.clone(),
        Arc::new(DuplicatingQueue(inner.clone() as Arc<dyn StepQueue>)),
        model.clone(),
    );
    let started = std::time::Instant::now();
    let submitted = services.runs.submit("t", &envelope()).await.unwrap();
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue: inner,
    };
    let status = runner
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Completed);
    assert_completed_once_per_node(&store, &services, &submitted.run_id, &model).await;
    let frames: Vec<Value> = services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap()
        .iter()
        .map(|frame| serde_json::to_value(frame).unwrap())
        .collect();
    baton_test_support::crash_checks::assert_completed_exactly_once(&submitted.run_id, &frames);
    baton_test_support::crash_checks::record_figures(
        "memory-every-step-message-delivered-twice",
        serde_json::json!({
            "store": "memory",
            "path": "step service, local runner",
            "fault": "every step message sent twice",
            "runs": 1,
            "recoveryMs": started.elapsed().as_millis() as u64,
            "modelRequests": model.calls.load(Ordering::SeqCst),
            "checks": baton_test_support::crash_checks::EXACTLY_ONCE_HISTORY_CHECKS,
        }),
    );
}

#[tokio::test]
async fn a_send_lost_after_commit_is_repaired_by_redelivery() {
    let store = Arc::new(InMemoryRunStore::new());
    let inner = Arc::new(InMemoryStepQueue::new());
    let model = Arc::new(CountingModel {
        calls: AtomicUsize::new(0),
        delay: Duration::ZERO,
    });
    let queue = Arc::new(FailingSendQueue::new(inner.clone(), 2));
    let services = services(store.clone(), queue, model.clone());
    let submitted = services.runs.submit("t", &envelope()).await.unwrap();
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue: inner,
    };
    let status = runner
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Completed);
    assert!(
        store
            .pending_outbox(RunKey::new("t", &submitted.run_id))
            .await
            .unwrap()
            .is_empty(),
        "outbox drained"
    );
    assert_completed_once_per_node(&store, &services, &submitted.run_id, &model).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_deliveries_of_one_step_call_the_model_once() {
    let store = Arc::new(InMemoryRunStore::new());
    let queue = Arc::new(InMemoryStepQueue::new());
    let model = Arc::new(CountingModel {
        calls: AtomicUsize::new(0),
        delay: Duration::from_millis(200),
    });
    let services = services(store.clone(), queue.clone(), model.clone());
    let submitted = services.runs.submit("t", &envelope()).await.unwrap();
    let plan = queue.receive(1, Duration::ZERO).await.unwrap().remove(0);
    services.steps.handle(&plan.message).await.unwrap();
    queue.acknowledge(&plan.receipt).await.unwrap();
    let first_node = queue
        .receive(1, Duration::ZERO)
        .await
        .unwrap()
        .remove(0)
        .message;
    let (left, right) = tokio::join!(
        services.steps.handle(&first_node),
        services.steps.handle(&first_node)
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
    assert_eq!(model.calls.load(Ordering::SeqCst), 1);
    // The loser's redelivery after the winner's commit is stale and appends nothing.
    let before = services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap()
        .len();
    assert_eq!(
        services.steps.handle(&first_node).await.unwrap(),
        StepOutcome::Stale
    );
    let after = services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap()
        .len();
    assert_eq!(before, after);
    assert_eq!(model.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_idempotency_key_returns_the_same_run() {
    let store = Arc::new(InMemoryRunStore::new());
    let queue = Arc::new(InMemoryStepQueue::new());
    let model = Arc::new(CountingModel {
        calls: AtomicUsize::new(0),
        delay: Duration::ZERO,
    });
    let services = services(store, queue, model);
    let mut envelope = envelope();
    envelope["idempotencyKey"] = "order-42".into();
    let first = services.runs.submit("t", &envelope).await.unwrap();
    let second = services.runs.submit("t", &envelope).await.unwrap();
    assert_eq!(first.run_id, second.run_id);
    assert!(second.deduplicated && !first.deduplicated);
    let other_tenant = services.runs.submit("u", &envelope).await.unwrap();
    assert_ne!(
        other_tenant.run_id, first.run_id,
        "keys are scoped by tenant"
    );
}

#[tokio::test]
async fn a_queue_batch_reports_only_the_messages_to_redeliver() {
    let store = Arc::new(InMemoryRunStore::new());
    let queue = Arc::new(InMemoryStepQueue::new());
    let model = Arc::new(CountingModel {
        calls: AtomicUsize::new(0),
        delay: Duration::ZERO,
    });
    let services = services(store, queue.clone(), model);
    let submitted = services.runs.submit("t", &envelope()).await.unwrap();
    let plan = queue.receive(1, Duration::ZERO).await.unwrap().remove(0);
    let plan_body = serde_json::to_string(&plan.message).unwrap();
    let records = vec![
        ("plan".to_string(), plan_body.clone()),
        ("garbage".to_string(), "{not a step".to_string()),
        (
            "unknown-run".to_string(),
            plan_body.replace(&submitted.run_id, "run_missing"),
        ),
    ];
    let failed = baton_runtime::workers::process_step_batch(&services.steps, records).await;
    assert_eq!(
        failed,
        vec!["garbage".to_string()],
        "only the malformed body is redelivered"
    );
    let duplicate = baton_runtime::workers::process_step_batch(
        &services.steps,
        vec![("again".into(), plan_body)],
    )
    .await;
    assert!(duplicate.is_empty(), "a duplicate is acknowledged as stale");
}

#[tokio::test]
async fn the_sweeper_resends_what_a_crash_left_in_the_outbox() {
    let store = Arc::new(InMemoryRunStore::new());
    let inner = Arc::new(InMemoryStepQueue::new());
    let model = Arc::new(CountingModel {
        calls: AtomicUsize::new(0),
        delay: Duration::ZERO,
    });
    let lossy_queue: Arc<dyn StepQueue> = Arc::new(FailingSendQueue::new(inner.clone(), 1));
    let lossy = services(store.clone(), lossy_queue.clone(), model.clone());
    let sweeper = OutboxSweeper::new(store.clone(), lossy_queue, Arc::new(SystemClock));
    let submitted = lossy.runs.submit("t", &envelope()).await.unwrap();
    let plan = inner.receive(1, Duration::ZERO).await.unwrap().remove(0);
    // The plan step commits, then its send of node_1 is lost; the message is acknowledged anyway
    // (as if the worker had died after the commit and SQS had since dropped the delivery).
    assert!(lossy.steps.handle(&plan.message).await.is_err());
    inner.acknowledge(&plan.receipt).await.unwrap();
    assert_eq!(
        inner.outstanding(),
        0,
        "nothing left on the queue: only the outbox knows node_1"
    );
    assert_eq!(
        sweeper
            .sweep(Duration::from_secs(3600), 100)
            .await
            .unwrap()
            .resent,
        0,
        "young entries are left alone"
    );
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(sweeper.sweep(Duration::ZERO, 100).await.unwrap().resent, 1);
    let runner = LocalRunner {
        steps: lossy.steps.clone(),
        runs: lossy.runs.clone(),
        queue: inner,
    };
    assert_eq!(
        runner
            .run_until_settled("t", &submitted.run_id)
            .await
            .unwrap(),
        RunStatus::Completed
    );
    assert_completed_once_per_node(&store, &lossy, &submitted.run_id, &model).await;
}

#[tokio::test]
async fn ingest_submits_envelopes_and_keeps_bad_ones_for_the_dead_letter_queue() {
    let store = Arc::new(InMemoryRunStore::new());
    let queue = Arc::new(InMemoryStepQueue::new());
    let model = Arc::new(CountingModel {
        calls: AtomicUsize::new(0),
        delay: Duration::ZERO,
    });
    let services = services(store, queue.clone(), model);
    let mut keyed = envelope();
    keyed["idempotencyKey"] = "crm-event-7".into();
    let body = serde_json::json!({"tenantId": "t", "envelope": keyed}).to_string();
    let records = vec![
        ("first".to_string(), body.clone()),
        ("resent".to_string(), body),
        ("not-json".to_string(), "{".to_string()),
        (
            "bad-envelope".to_string(),
            serde_json::json!({"tenantId": "t", "envelope": {"objective": ""}}).to_string(),
        ),
    ];
    let failed =
        baton_runtime::workers::process_ingest_batch(&services.runs, &services.schedules, records)
            .await;
    assert_eq!(
        failed,
        vec!["not-json".to_string(), "bad-envelope".to_string()]
    );
    // The re-sent submission started no second run: it re-sent the first
    // run's pending step (in case the first send was lost), nothing else.
    let queued = queue.receive(10, Duration::ZERO).await.unwrap();
    let steps: std::collections::BTreeSet<_> = queued
        .iter()
        .map(|received| received.message.message_id.clone())
        .collect();
    assert_eq!(
        (queued.len(), steps.len()),
        (2, 1),
        "the re-sent submission did not start a second run: {steps:?}"
    );
    for received in queued {
        queue.acknowledge(&received.receipt).await.unwrap();
    }

    // A record redelivered (the same message id) whose envelope has no key
    // of its own makes no second run: its id is the key.
    let unkeyed = serde_json::json!({"tenantId": "t", "envelope": envelope()}).to_string();
    let count_runs = || async {
        let query = baton_core::state::listing::RunListQuery {
            status: None,
            limit: 100,
            cursor: None,
            forked_from: None,
        };
        services.runs.list("t", &query).await.unwrap().runs.len()
    };
    let before = count_runs().await;
    for _ in 0..2 {
        let failed = baton_runtime::workers::process_ingest_batch(
            &services.runs,
            &services.schedules,
            vec![("sqs-message-9".to_string(), unkeyed.clone())],
        )
        .await;
        assert!(failed.is_empty(), "{failed:?}");
    }
    let after = count_runs().await;
    assert_eq!(after, before + 1, "a redelivered record made one run");
    while let Ok(batch) = queue.receive(10, Duration::ZERO).await {
        if batch.is_empty() {
            break;
        }
        for received in batch {
            queue.acknowledge(&received.receipt).await.unwrap();
        }
    }

    // A sender's traceparent: the run's trace is the sender's, its root
    // under the sender's span; a malformed one starts a trace of its own.
    let traced = serde_json::json!({"tenantId": "t", "envelope": envelope(),
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"});
    let garbled = serde_json::json!({"tenantId": "t", "envelope": envelope(),
        "traceparent": "00-not-a-trace"});
    let records = vec![
        ("traced".to_string(), traced.to_string()),
        ("garbled".to_string(), garbled.to_string()),
    ];
    let failed =
        baton_runtime::workers::process_ingest_batch(&services.runs, &services.schedules, records)
            .await;
    assert!(failed.is_empty(), "{failed:?}");
    let mut traces = Vec::new();
    let query = baton_core::state::listing::RunListQuery {
        status: None,
        limit: 10,
        cursor: None,
        forked_from: None,
    };
    for listing in services.runs.list("t", &query).await.unwrap().runs {
        let run = services
            .runs
            .load("t", &listing.run_id)
            .await
            .unwrap()
            .unwrap();
        traces.push(run.state.trace.unwrap());
    }
    let callers: Vec<String> = traces
        .iter()
        .filter_map(|trace| {
            trace
                .caller_span_id
                .map(|caller| format!("{}-{caller}", trace.trace_id))
        })
        .collect();
    assert_eq!(
        callers,
        ["4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"],
        "only the well-formed traceparent is the run's parent"
    );
    assert_eq!(traces.len(), 4, "every ingested run has a trace");
}

/// Store decorator whose `fail_commits` next node commits fail with `injected`
/// (the table unavailable, or an item over the size limit).
struct FlakyCommitStore {
    inner: Arc<InMemoryRunStore>,
    fail_commits: AtomicUsize,
    injected: baton_runtime::error::StoreError,
}

#[async_trait]
impl RunLog for FlakyCommitStore {
    async fn create_run_within(
        &self,
        state: &baton_core::state::run::RunState,
        events: Vec<baton_core::wire::event::EventDraft>,
        outbox: Vec<baton_core::state::run::StepMessage>,
        key: Option<&str>,
        live_run_limit: Option<u64>,
    ) -> Result<baton_runtime::ports::CreateOutcome, baton_runtime::error::StoreError> {
        self.inner
            .create_run_within(state, events, outbox, key, live_run_limit)
            .await
    }

    async fn load_run(
        &self,
        key: RunKey<'_>,
    ) -> Result<Option<baton_runtime::ports::StoredRun>, baton_runtime::error::StoreError> {
        self.inner.load_run(key).await
    }

    async fn commit_step(
        &self,
        key: RunKey<'_>,
        commit: baton_runtime::ports::StepCommit,
    ) -> Result<u64, baton_runtime::error::StoreError> {
        let node_commit = commit
            .events
            .iter()
            .any(|event| event.event_type == EventType::NodeComplete);
        if node_commit
            && self
                .fail_commits
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                    left.checked_sub(1)
                })
                .is_ok()
        {
            return Err(self.injected.clone());
        }
        self.inner.commit_step(key, commit).await
    }

    async fn append_events(
        &self,
        key: RunKey<'_>,
        events: Vec<baton_core::wire::event::EventDraft>,
    ) -> Result<u64, baton_runtime::error::StoreError> {
        self.inner.append_events(key, events).await
    }

    async fn read_events(
        &self,
        key: RunKey<'_>,
        after: u64,
        limit: usize,
    ) -> Result<Vec<baton_core::wire::event::EventFrame>, baton_runtime::error::StoreError> {
        self.inner.read_events(key, after, limit).await
    }

    async fn read_entries(
        &self,
        key: RunKey<'_>,
        prefix: &str,
    ) -> Result<Vec<baton_core::records::entries::RunEntry>, baton_runtime::error::StoreError> {
        self.inner.read_entries(key, prefix).await
    }
}

#[async_trait]
impl NodeLeases for FlakyCommitStore {
    async fn claim_node(
        &self,
        key: RunKey<'_>,
        claim: baton_runtime::ports::NodeClaim<'_>,
        events: Vec<baton_core::wire::event::EventDraft>,
    ) -> Result<baton_runtime::ports::ClaimOutcome, baton_runtime::error::StoreError> {
        self.inner.claim_node(key, claim, events).await
    }

    async fn renew_claim(
        &self,
        key: RunKey<'_>,
        claim: baton_runtime::ports::NodeClaim<'_>,
    ) -> Result<bool, baton_runtime::error::StoreError> {
        self.inner.renew_claim(key, claim).await
    }

    async fn release_claim(
        &self,
        key: RunKey<'_>,
        node: &str,
        attempt: u32,
        claimant: &str,
    ) -> Result<(), baton_runtime::error::StoreError> {
        self.inner.release_claim(key, node, attempt, claimant).await
    }

    async fn run_holds_live_lease(
        &self,
        key: RunKey<'_>,
        now: baton_core::basics::instant::Instant,
    ) -> Result<bool, baton_runtime::error::StoreError> {
        self.inner.run_holds_live_lease(key, now).await
    }
}

#[async_trait]
impl OutboxStore for FlakyCommitStore {
    async fn pending_outbox(
        &self,
        key: RunKey<'_>,
    ) -> Result<Vec<baton_core::state::run::StepMessage>, baton_runtime::error::StoreError> {
        self.inner.pending_outbox(key).await
    }

    async fn mark_outbox_quiet(
        &self,
        key: RunKey<'_>,
        ids: &[String],
        quiet: baton_runtime::ports::OutboxQuiet,
    ) -> Result<(), baton_runtime::error::StoreError> {
        self.inner.mark_outbox_quiet(key, ids, quiet).await
    }

    async fn quiet_outbox(
        &self,
        before: baton_core::basics::instant::Instant,
        limit: usize,
    ) -> Result<Vec<baton_runtime::ports::QuietOutboxEntry>, baton_runtime::error::StoreError> {
        self.inner.quiet_outbox(before, limit).await
    }
}

#[async_trait]
impl RunQueries for FlakyCommitStore {
    async fn live_runs(&self, tenant: &str) -> Result<u64, baton_runtime::error::StoreError> {
        self.inner.live_runs(tenant).await
    }

    async fn list_runs(
        &self,
        tenant: &str,
        query: &baton_core::state::listing::RunListQuery,
    ) -> Result<baton_core::state::listing::RunListPage, baton_runtime::error::StoreError> {
        self.inner.list_runs(tenant, query).await
    }

    async fn runs_awaiting_human(
        &self,
        tenant: &str,
    ) -> Result<Vec<baton_core::state::run::RunState>, baton_runtime::error::StoreError> {
        self.inner.runs_awaiting_human(tenant).await
    }
}

#[tokio::test]
async fn a_failed_commit_releases_the_claim_so_the_redelivery_proceeds_at_once() {
    let store = Arc::new(FlakyCommitStore {
        inner: Arc::new(InMemoryRunStore::new()),
        fail_commits: AtomicUsize::new(1),
        injected: baton_runtime::error::StoreError::Unavailable(
            "injected: table unavailable".into(),
        ),
    });
    let queue = Arc::new(InMemoryStepQueue::new());
    let model = Arc::new(CountingModel {
        calls: AtomicUsize::new(0),
        delay: Duration::ZERO,
    });
    let services = services_over_store(store, queue.clone(), model.clone());
    services.runs.submit("t", &envelope()).await.unwrap();
    let plan = queue.receive(1, Duration::ZERO).await.unwrap().remove(0);
    services.steps.handle(&plan.message).await.unwrap();
    let node_step = queue
        .receive(1, Duration::ZERO)
        .await
        .unwrap()
        .remove(0)
        .message;
    let failed = services.steps.handle(&node_step).await.unwrap_err();
    assert!(failed.is_retryable(), "{failed}");
    let retried = services.steps.handle(&node_step).await.unwrap();
    assert!(
        matches!(retried, StepOutcome::Committed { .. }),
        "the redelivery was not held off by the dead claim: {retried:?}"
    );
    assert_eq!(
        model.calls.load(Ordering::SeqCst),
        2,
        "the lost answer had to be asked for again"
    );
}

#[tokio::test]
async fn a_result_too_large_to_store_fails_the_run_clearly_instead_of_retrying_for_ever() {
    let inner = Arc::new(InMemoryRunStore::new());
    let store = Arc::new(FlakyCommitStore {
        inner: inner.clone(),
        fail_commits: AtomicUsize::new(usize::MAX),
        injected: baton_runtime::error::StoreError::TooLarge(
            "injected: 512000 bytes compressed".into(),
        ),
    });
    let queue = Arc::new(InMemoryStepQueue::new());
    let model = Arc::new(CountingModel {
        calls: AtomicUsize::new(0),
        delay: Duration::ZERO,
    });
    let services = services_over_store(store, queue.clone(), model.clone());
    let submitted = services.runs.submit("t", &envelope()).await.unwrap();
    let plan = queue.receive(1, Duration::ZERO).await.unwrap().remove(0);
    services.steps.handle(&plan.message).await.unwrap();
    let node_step = queue.receive(1, Duration::ZERO).await.unwrap().remove(0);
    let outcome = services.steps.handle(&node_step.message).await.unwrap();
    assert!(
        matches!(outcome, StepOutcome::Committed { .. }),
        "{outcome:?}"
    );
    let stored = inner
        .load_run(RunKey::new("t", &submitted.run_id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.state.status(),
        baton_core::state::run::RunStatus::Failed
    );
    assert_eq!(
        stored
            .state
            .failure
            .as_ref()
            .map(|failure| failure.code.as_str()),
        Some("state_too_large")
    );
    let events = services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap();
    let last = events.last().unwrap();
    assert_eq!(last.event_type, EventType::Error);
    assert!(
        last.message
            .as_deref()
            .unwrap_or_default()
            .contains("512000 bytes"),
        "{:?}",
        last.message
    );
    assert_eq!(model.calls.load(Ordering::SeqCst), 1);
}

/// Test double for the model endpoint: its first answer takes `first_delay`
/// (longer than any invocation), later ones are instant.
struct SlowFirstCallModel {
    calls: AtomicUsize,
    first_delay: Duration,
}

#[async_trait]
impl LlmProvider for SlowFirstCallModel {
    fn model_name(&self) -> String {
        "slow-first".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<baton_runtime::ports::ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            tokio::time::sleep(self.first_delay).await;
        }
        Ok(ModelAnswer {
            content: scripted_llm::generate_instance(&request.output_schema, "answer").to_string(),
            usage: TokenUsage::default(),
            model: "slow-first".into(),
        })
    }
}

#[tokio::test]
async fn a_step_out_of_invocation_time_releases_its_claim_and_is_redelivered_within_seconds() {
    use baton_runtime::ports::Clock;
    use baton_runtime::services::OrchestratorSettings;
    use baton_runtime::workers::{
        QueueBatch, QueuedRecord, REDELIVER_AFTER_DEADLINE, process_step_queue_batch,
    };
    let queue = Arc::new(InMemoryStepQueue::new());
    let model = Arc::new(SlowFirstCallModel {
        calls: AtomicUsize::new(0),
        first_delay: Duration::from_secs(60),
    });
    let services = TestServices::with_model(model.clone())
        .queue(queue.clone())
        .settings(OrchestratorSettings {
            commit_margin: Duration::from_millis(100),
            ..OrchestratorSettings::default()
        })
        .build()
        .services;
    services.runs.submit("t", &envelope()).await.unwrap();
    let plan = queue.receive(1, Duration::ZERO).await.unwrap().remove(0);
    services.steps.handle(&plan.message).await.unwrap();
    queue.acknowledge(&plan.receipt).await.unwrap();
    let node = queue.receive(1, Duration::ZERO).await.unwrap().remove(0);
    let started = std::time::Instant::now();
    let deadline = SystemClock.now().plus(Duration::from_millis(600));
    let failed = process_step_queue_batch(
        &services.steps,
        QueueBatch {
            records: vec![QueuedRecord {
                message_id: "node".into(),
                body: serde_json::to_string(&node.message).unwrap(),
                receipt: Some(node.receipt.clone()),
                receive_count: node.receive_count,
            }],
            deadline: Some(deadline),
            redelivery: Some(queue.as_ref()),
        },
    )
    .await;
    assert_eq!(failed, vec!["node".to_string()], "reported for redelivery");
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_millis(600) + REDELIVER_AFTER_DEADLINE + Duration::from_secs(1),
        "stopped at the deadline, not after the model's 60 s: {elapsed:?}"
    );
    let again = queue
        .receive(1, REDELIVER_AFTER_DEADLINE + Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(
        again.first().map(|received| &received.message),
        Some(&node.message),
        "visible again within seconds, not after the visibility timeout"
    );
    // The claim was released: the redelivery proceeds at once.
    let outcome = services.steps.handle(&again[0].message).await.unwrap();
    assert!(
        matches!(outcome, StepOutcome::Committed { .. }),
        "{outcome:?}"
    );
    assert_eq!(model.calls.load(Ordering::SeqCst), 2);
}

/// A long-running worker (`baton serve`'s, over its queue) gives each step
/// a budget as a Lambda invocation's timeout does: a model call that hangs
/// is dropped at the budget, its claim released, and the step delivered
/// again, which completes the run. The model is a test double of an
/// endpoint whose first answer takes a minute.
#[tokio::test(flavor = "multi_thread")]
async fn a_serve_worker_step_past_its_budget_is_delivered_again_instead_of_hanging() {
    use baton_runtime::services::OrchestratorSettings;
    let queue = Arc::new(InMemoryStepQueue::new());
    let model = Arc::new(SlowFirstCallModel {
        calls: AtomicUsize::new(0),
        first_delay: Duration::from_secs(60),
    });
    let services = TestServices::with_model(model.clone())
        .queue(queue.clone())
        .settings(OrchestratorSettings {
            step_budget: Some(Duration::from_secs(1)),
            commit_margin: Duration::from_millis(100),
            ..OrchestratorSettings::default()
        })
        .build()
        .services;
    let run = services.runs.submit("t", &envelope()).await.unwrap();
    let started = std::time::Instant::now();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(baton_runtime::workers::run_worker_until(
        services.steps.clone(),
        queue.clone(),
        async move {
            let _ = stopped.await;
        },
    ));
    let status = loop {
        let status = services
            .runs
            .load("t", &run.run_id)
            .await
            .unwrap()
            .unwrap()
            .state
            .status();
        if status.is_settled() || started.elapsed() > Duration::from_secs(30) {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let _ = stop.send(());
    worker.await.unwrap();
    assert_eq!(
        status,
        RunStatus::Completed,
        "after {:?}",
        started.elapsed()
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "ended by the budget, not by the model's minute: {:?}",
        started.elapsed()
    );
    // The first node's call dropped at the budget and asked again, then the
    // second node's.
    assert_eq!(model.calls.load(Ordering::SeqCst), 3);
}
