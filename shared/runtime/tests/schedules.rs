//! Schedules explored at random (`proptest`): N runs on the in-memory store
//! driven by two workers through a harness queue whose deliveries a
//! generated schedule decides: messages delivered in any order, duplicated
//! (at-least-once), held back (delayed), delivered to both workers at once
//! (a race), lost between commit and send (the sweeper repairs them), and a
//! worker crashing after its model answered but before it committed (its
//! lease runs out; another delivery takes the node over), and the store
//! throttling (its next calls fail retryably, wherever they fall). After the
//! schedule, the harness delivers what is left until every run settles.
//!
//! Invariants, per run: it completes; its frame ids are 1..n without gaps
//! or repeats; one `start` and one terminal frame; exactly one
//! `node_complete` per node of its final plan; every frame matches its
//! schema. Across runs: the model is never asked twice for one node
//! attempt, except after a crash or a failed store call lost an answer (at
//! most once each).
//!
//! `BATON_PROPTEST_CASES` sets the number of cases (default 1,000; CI runs
//! the default). A failing case is shrunk and its seed kept in
//! `tests/schedules.proptest-regressions`, replayed first on every run; the
//! shrunk schedules found so far are also spelled out as tests at the end.
//! The model is a test double answering by the requested schema.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use baton_core::basics::ids::RunKey;
use baton_runtime::ports::RunLog;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use baton_core::basics::schema::ValidatorCache;
use baton_core::catalog::registry::Registry;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, StepMessage, TokenUsage};
use baton_core::wire::event::EventFrame;
use baton_runtime::clock::OffsetClock;
use baton_runtime::error::{LlmError, QueueError};
use baton_runtime::memory::InMemoryRunStore;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta, ReceivedStep, StepQueue};
use baton_runtime::services::{OrchestratorSettings, OutboxSweeper, Services, StepOutcome};
use baton_test_support::TestServices;
use baton_test_support::fault_injection::ThrottlingStore;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

const NODE_LEASE: Duration = Duration::from_secs(30);

/// What the schedule does next.
#[derive(Debug, Clone)]
enum Move {
    /// Delivers one waiting message (any of them: order is the schedule's).
    Deliver(usize),
    /// Delivers it and keeps a copy waiting: the queue delivers it again.
    DeliverAndRedeliver(usize),
    /// Delivers one message to both workers at once.
    Race(usize),
    /// The next sends of the relay are lost (after their commit).
    LoseSends(u8),
    /// The worker delivering this message dies once its model answered,
    /// before it commits (nothing of that step is written).
    CrashAfterModel(usize),
    /// Time passes beyond a node lease: a dead worker's claim expires.
    LeasesExpire,
    /// The sweeper re-sends outbox entries nobody consumed.
    Sweep,
    /// The store throttles: its next calls fail retryably (a load, a
    /// claim, a commit after the model answered, a release…).
    StoreThrottles(u8),
}

fn a_move() -> impl Strategy<Value = Move> {
    prop_oneof![
        6 => any::<usize>().prop_map(Move::Deliver),
        2 => any::<usize>().prop_map(Move::DeliverAndRedeliver),
        2 => any::<usize>().prop_map(Move::Race),
        1 => (1u8..3).prop_map(Move::LoseSends),
        1 => any::<usize>().prop_map(Move::CrashAfterModel),
        1 => Just(Move::LeasesExpire),
        1 => Just(Move::Sweep),
        1 => (1u8..4).prop_map(Move::StoreThrottles),
    ]
}

/// The harness queue: sent messages wait in a pool the schedule picks from.
#[derive(Default)]
struct PoolQueue {
    waiting: Mutex<Vec<StepMessage>>,
    sends_to_lose: AtomicUsize,
}

impl PoolQueue {
    fn take(&self, pick: usize) -> Option<StepMessage> {
        let mut waiting = self.waiting.lock().unwrap();
        if waiting.is_empty() {
            return None;
        }
        let index = pick % waiting.len();
        Some(waiting.remove(index))
    }
    fn put_back(&self, message: StepMessage) {
        self.waiting.lock().unwrap().push(message);
    }
    fn is_empty(&self) -> bool {
        self.waiting.lock().unwrap().is_empty()
    }
}

#[async_trait]
impl StepQueue for PoolQueue {
    async fn send(&self, messages: &[StepMessage]) -> Result<(), QueueError> {
        let lose = self
            .sends_to_lose
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(1)
            })
            .is_ok();
        if lose {
            return Err(QueueError::Unavailable("lost by the schedule".into()));
        }
        self.waiting
            .lock()
            .unwrap()
            .extend(messages.iter().cloned());
        Ok(())
    }
    async fn receive(&self, _max: usize, _wait: Duration) -> Result<Vec<ReceivedStep>, QueueError> {
        Ok(Vec::new())
    }
    async fn acknowledge(&self, _receipt: &str) -> Result<(), QueueError> {
        Ok(())
    }
    async fn release(&self, _receipt: &str, _delay: Duration) -> Result<(), QueueError> {
        Ok(())
    }
    async fn send_delayed(
        &self,
        message: &StepMessage,
        _delay: Duration,
    ) -> Result<(), QueueError> {
        self.waiting.lock().unwrap().push(message.clone());
        Ok(())
    }
}

/// Test double for the model: a schema-shaped answer; when armed, the call
/// is counted and then never returns (its worker is about to die).
#[derive(Default)]
struct SchemaShapedModel {
    calls: AtomicUsize,
    hang_next: AtomicBool,
    hung: tokio::sync::Notify,
}

#[async_trait]
impl LlmProvider for SchemaShapedModel {
    fn model_name(&self) -> String {
        "schema-shaped".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        // A point where a racing twin may run.
        tokio::task::yield_now().await;
        if self.hang_next.swap(false, Ordering::SeqCst) {
            self.hung.notify_one();
            std::future::pending::<()>().await;
        }
        Ok(ModelAnswer {
            content: scripted_llm::generate_instance(&request.output_schema, "scheduled")
                .to_string(),
            usage: TokenUsage::default(),
            model: "schema-shaped".into(),
        })
    }
}

fn shared_registry() -> (Arc<Registry>, Arc<ValidatorCache>) {
    static SHARED: OnceLock<(Arc<Registry>, Arc<ValidatorCache>)> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            (
                baton_test_support::repository_registry(),
                Arc::new(ValidatorCache::new()),
            )
        })
        .clone()
}

struct World {
    workers: [Services; 2],
    /// The store as the invariants read it (never throttled).
    store: Arc<InMemoryRunStore>,
    /// The store as the workers reach it.
    throttling: Arc<ThrottlingStore>,
    queue: Arc<PoolQueue>,
    clock: Arc<OffsetClock>,
    model: Arc<SchemaShapedModel>,
    sweeper: OutboxSweeper,
    crashes: usize,
}

fn world() -> World {
    let (registry, validators) = shared_registry();
    let clock = Arc::new(OffsetClock::new());
    let store = Arc::new(InMemoryRunStore::new().with_clock(clock.clone()));
    let throttling = Arc::new(ThrottlingStore::new(store.clone()));
    let queue = Arc::new(PoolQueue::default());
    let model = Arc::new(SchemaShapedModel::default());
    let worker = |name: &str| {
        TestServices::with_model(model.clone())
            .registry(registry.clone())
            .validators(validators.clone())
            .store(throttling.clone())
            .queue(queue.clone())
            .clock(clock.clone())
            .settings(OrchestratorSettings {
                node_lease: NODE_LEASE,
                busy_retry_delay: Duration::from_millis(1),
                stream_deltas: false,
                ..OrchestratorSettings::default()
            })
            .worker_id(name)
            .build()
            .services
    };
    let sweeper = OutboxSweeper::new(throttling.clone(), queue.clone(), clock.clone());
    World {
        workers: [worker("worker-a"), worker("worker-b")],
        store,
        throttling,
        queue,
        clock,
        model,
        sweeper,
        crashes: 0,
    }
}

impl World {
    /// One delivery to worker `which`: the message stays waiting unless the
    /// step is done with it (committed, stale, gone).
    async fn deliver(&self, which: usize, message: StepMessage) {
        match self.workers[which].steps.handle(&message).await {
            Ok(StepOutcome::Committed { .. } | StepOutcome::Stale | StepOutcome::RunNotFound) => {}
            Ok(StepOutcome::Busy { .. } | StepOutcome::NotYetDue { .. }) | Err(_) => {
                self.queue.put_back(message);
            }
        }
    }

    async fn play(&mut self, next: &Move) {
        match next {
            Move::Deliver(pick) => {
                if let Some(message) = self.queue.take(*pick) {
                    self.deliver(pick % 2, message).await;
                }
            }
            Move::DeliverAndRedeliver(pick) => {
                if let Some(message) = self.queue.take(*pick) {
                    self.queue.put_back(message.clone());
                    self.deliver(pick % 2, message).await;
                }
            }
            Move::Race(pick) => {
                if let Some(message) = self.queue.take(*pick) {
                    let twin = message.clone();
                    tokio::join!(self.deliver(0, message), self.deliver(1, twin));
                }
            }
            Move::LoseSends(count) => {
                self.queue
                    .sends_to_lose
                    .store(usize::from(*count), Ordering::SeqCst);
            }
            Move::CrashAfterModel(pick) => {
                let Some(message) = self.queue.take(*pick) else {
                    return;
                };
                self.model.hang_next.store(true, Ordering::SeqCst);
                let handled = self.workers[pick % 2].steps.handle(&message);
                tokio::select! {
                    biased;
                    () = self.model.hung.notified() => {
                        // The worker dies: its step future is dropped mid-call;
                        // the queue redelivers the message after its timeout.
                        self.crashes += 1;
                        self.queue.put_back(message);
                    }
                    outcome = handled => {
                        // No model call in this step: nothing to crash after.
                        self.model.hang_next.store(false, Ordering::SeqCst);
                        if !matches!(outcome, Ok(StepOutcome::Committed { .. } | StepOutcome::Stale | StepOutcome::RunNotFound)) {
                            self.queue.put_back(message);
                        }
                    }
                }
            }
            Move::LeasesExpire => self.clock.advance(NODE_LEASE + Duration::from_secs(1)),
            Move::Sweep => {
                let _ = self.sweeper.sweep(Duration::ZERO, 100).await;
            }
            Move::StoreThrottles(calls) => self.throttling.throttle_next(usize::from(*calls)),
        }
    }

    /// Delivers what is left (in order, leases expiring and the sweeper
    /// running when nothing else moves) until every run settles.
    async fn settle(&mut self, run_ids: &[String]) {
        self.queue.sends_to_lose.store(0, Ordering::SeqCst);
        self.throttling.throttle_next(0);
        for _ in 0..2_000 {
            if self.all_settled(run_ids).await {
                return;
            }
            if self.queue.is_empty() {
                self.clock.advance(NODE_LEASE + Duration::from_secs(1));
                self.sweeper.sweep(Duration::ZERO, 100).await.unwrap();
                continue;
            }
            let message = self.queue.take(0).unwrap();
            let before = self.queue.waiting.lock().unwrap().len();
            self.deliver(0, message).await;
            if self.queue.waiting.lock().unwrap().len() > before {
                // Busy behind a dead worker's lease: let time pass.
                self.clock.advance(NODE_LEASE + Duration::from_secs(1));
            }
        }
        panic!("the runs did not settle");
    }

    async fn all_settled(&self, run_ids: &[String]) -> bool {
        for run_id in run_ids {
            let stored = self
                .store
                .load_run(RunKey::new("t", run_id))
                .await
                .unwrap()
                .unwrap();
            if !stored.state.status().is_settled() {
                return false;
            }
        }
        true
    }
}

/// Checks every invariant of the module doc; returns the number of model
/// node attempts started (distinct attempts among `node_start` frames).
async fn check_run(world: &World, run_id: &str) -> usize {
    let stored = world
        .store
        .load_run(RunKey::new("t", run_id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.state.status(),
        RunStatus::Completed,
        "{run_id}: {:?}",
        stored.state.failure
    );
    let frames: Vec<EventFrame> = world.workers[0]
        .runs
        .read_all_events_after("t", run_id, 0)
        .await
        .unwrap();
    baton_test_support::assert_frames_match_schemas(&frames);
    let ids: Vec<u64> = frames.iter().map(|frame| frame.id).collect();
    assert_eq!(
        ids,
        (1..=ids.len() as u64).collect::<Vec<_>>(),
        "{run_id}: gapless ids"
    );
    let count = |kind: &str| {
        frames
            .iter()
            .filter(|frame| frame.event_type.as_str() == kind)
            .count()
    };
    assert_eq!(count("start"), 1, "{run_id}");
    assert_eq!(
        count("complete") + count("error"),
        1,
        "{run_id}: one terminal frame"
    );
    let plan = stored.state.plan.as_ref().unwrap();
    let mut completions: BTreeMap<&str, usize> = BTreeMap::new();
    for frame in frames.iter().filter(|frame| {
        frame.event_type.as_str() == "node_complete" && frame.plan_version == plan.plan_version
    }) {
        *completions
            .entry(frame.node_id.as_deref().unwrap())
            .or_default() += 1;
    }
    for node in &plan.nodes {
        assert_eq!(
            completions.get(node.node_id.as_str()),
            Some(&1),
            "{run_id}: one node_complete for {}",
            node.node_id
        );
    }
    // Distinct model node attempts (a takeover writes another node_start
    // for the same attempt: one attempt, however many claims).
    frames
        .iter()
        .filter(|frame| frame.event_type.as_str() == "node_start")
        .filter_map(|frame| {
            let payload: &Value = frame.payload.as_ref()?;
            (payload["executorType"] == "ai")
                .then(|| (frame.node_id.clone(), payload["attempt"].as_u64()))
        })
        .collect::<std::collections::BTreeSet<_>>()
        .len()
}

/// Plays `schedule` over `runs` runs, settles them and checks every
/// invariant; returns how many workers crashed.
async fn explore(runs: usize, schedule: Vec<Move>) -> usize {
    let mut world = world();
    let envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    let mut run_ids = Vec::new();
    for _ in 0..runs {
        let submitted = world.workers[0].runs.submit("t", &envelope).await.unwrap();
        run_ids.push(submitted.run_id);
    }
    for next in &schedule {
        world.play(next).await;
    }
    world.settle(&run_ids).await;
    let mut attempts_started = 0;
    // Every run's attempts: (node, attempt) pairs are per run.
    for run_id in &run_ids {
        attempts_started += check_run(&world, run_id).await;
    }
    let calls = world.model.calls.load(Ordering::SeqCst);
    // A crash, or a store call that failed after the model answered (its
    // commit, or the release of its claim), may lose one answer each.
    let losses = world.crashes + world.throttling.calls_failed();
    assert!(
        calls <= attempts_started + losses,
        "{calls} model calls for {attempts_started} node attempts, {} crashes and {} failed store calls: an attempt asked the model twice",
        world.crashes,
        world.throttling.calls_failed()
    );
    world.crashes
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(false)
        .build()
        .unwrap()
}

fn cases() -> u32 {
    std::env::var("BATON_PROPTEST_CASES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(1_000)
}

proptest! {
    #![proptest_config(Config {
        cases: cases(),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..Config::default()
    })]

    #[test]
    fn every_schedule_completes_every_run_exactly_once(
        runs in 1usize..=3,
        schedule in proptest::collection::vec(a_move(), 0..40),
    ) {
        runtime().block_on(explore(runs, schedule));
    }
}

/// Shrunk by proptest from a failure (found with the in-memory store's
/// lease check disabled, which this schedule catches: two workers racing on
/// a node's first delivery both asked the model). Its seed is in
/// `schedules.proptest-regressions` too.
#[test]
fn regression_a_race_on_a_nodes_first_delivery_asks_the_model_once() {
    let crashes = runtime().block_on(explore(1, vec![Move::CrashAfterModel(0), Move::Race(0)]));
    assert_eq!(
        crashes, 0,
        "the plan step calls no model: nothing to crash after"
    );
}

/// A worker dies after its model answered for node_1; the message comes
/// back at once but the dead worker's lease holds it until it runs out;
/// then another worker takes the node over and the run completes.
#[test]
fn a_worker_dying_after_its_model_answered_is_taken_over_after_its_lease() {
    let crashes = runtime().block_on(explore(
        2,
        vec![
            Move::Deliver(0),
            Move::Deliver(0),
            Move::CrashAfterModel(1),
            Move::Deliver(0),
            Move::LeasesExpire,
            Move::LoseSends(2),
            Move::Deliver(0),
            Move::Sweep,
        ],
    ));
    assert_eq!(crashes, 1, "the schedule crashed a worker mid-node");
}
