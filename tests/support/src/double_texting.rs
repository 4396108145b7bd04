//! The double-texting suite: two chat messages sent at the same instant on
//! one thread, once per `multitaskStrategy`, against any run store and
//! thread store (in memory, SQLite, DynamoDB on moto). Steps run on a real
//! worker over an in-memory queue; the model is [`GatedChatModel`], a test
//! double of the model endpoint that holds every answer until the test lets
//! it go, so a run is provably mid-node when the next message arrives.
//!
//! Each scenario checks the outcome the strategy defines and that no
//! exchange is lost or duplicated.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use baton_core::records::chat::ChatExchange;
use baton_core::records::conversation::{SessionAnswer, ToolSession};
use baton_core::records::thread_lane::MultitaskStrategy;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_runtime::error::{LlmError, RuntimeError};
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::{
    LlmProvider, ModelAnswer, ModelDelta, RunStore, StepQueue, ThreadStore,
};
use baton_runtime::services::{ChatRequest, Services, SubmittedRun};
use tokio::sync::Semaphore;
use tokio::sync::mpsc::UnboundedSender;

use crate::TestServices;

/// Test double for the model endpoint: a chat answer that streams its
/// first words at once, then waits for a permit of `gate` before it
/// answers. Counts the calls.
pub struct GatedChatModel {
    pub gate: Arc<Semaphore>,
    pub calls: AtomicUsize,
}

impl GatedChatModel {
    pub fn closed() -> Self {
        GatedChatModel {
            gate: Arc::new(Semaphore::new(0)),
            calls: AtomicUsize::new(0),
        }
    }
}

#[async_trait]
impl LlmProvider for GatedChatModel {
    fn model_name(&self) -> String {
        "gated-chat-double".into()
    }

    async fn complete(
        &self,
        _request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        Err(LlmError::Configuration("a chat node converses".into()))
    }

    async fn converse(
        &self,
        _request: &ModelRequest,
        _session: &ToolSession,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<SessionAnswer, LlmError> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let _ = deltas.send(ModelDelta::Text("Thinking it over".into()));
        let permit = self.gate.acquire().await;
        if let Ok(permit) = permit {
            permit.forget();
        }
        Ok(SessionAnswer {
            content: format!("Thinking it over: answer {call}."),
            tool_calls: Vec::new(),
            usage: TokenUsage {
                prompt_tokens: 10,
                completion_tokens: 5,
                cached_prompt_tokens: 0,
                cache_write_prompt_tokens: 0,
            },
            model: "gpt-4o-mini".into(),
        })
    }
}

/// Services over `store` and `threads`, a worker running their steps, and
/// the gated model.
struct Harness {
    services: Services,
    model: Arc<GatedChatModel>,
    tenant: String,
    stop: tokio::sync::watch::Sender<bool>,
    worker: tokio::task::JoinHandle<()>,
}

impl Harness {
    fn start(store: Arc<dyn RunStore>, threads: Arc<dyn ThreadStore>, tenant: String) -> Self {
        Self::start_on(store, threads, tenant, Arc::new(InMemoryStepQueue::new()))
    }

    /// The harness with its steps on `queue`.
    fn start_on(
        store: Arc<dyn RunStore>,
        threads: Arc<dyn ThreadStore>,
        tenant: String,
        queue: Arc<dyn StepQueue>,
    ) -> Self {
        let model = Arc::new(GatedChatModel::closed());
        // Streamed words reach the log at once (an interrupted run keeps them).
        let settings = baton_runtime::services::OrchestratorSettings {
            delta_flush_interval: Duration::from_millis(1),
            ..Default::default()
        };
        let services = TestServices::with_model(model.clone())
            .store(store)
            .threads(threads)
            .queue(queue.clone())
            .settings(settings)
            .build()
            .services;
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let worker = tokio::spawn(baton_runtime::workers::run_worker_until(
            services.steps.clone(),
            queue,
            async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            },
        ));
        Harness {
            services,
            model,
            tenant,
            stop,
            worker,
        }
    }

    async fn say(
        &self,
        message: &str,
        thread_id: Option<&str>,
        strategy: MultitaskStrategy,
    ) -> Result<SubmittedRun, RuntimeError> {
        let request = ChatRequest {
            message: message.into(),
            thread_id: thread_id.map(str::to_string),
            multitask_strategy: strategy,
            ..ChatRequest::default()
        };
        self.services.runs.submit_chat(&self.tenant, &request).await
    }

    async fn wait_for_model_calls(&self, calls: usize) {
        for _ in 0..2_000 {
            if self.model.calls.load(Ordering::SeqCst) >= calls {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!(
            "the model got {} calls, not {calls}",
            self.model.calls.load(Ordering::SeqCst)
        );
    }

    async fn status(&self, run_id: &str) -> RunStatus {
        self.services
            .runs
            .load(&self.tenant, run_id)
            .await
            .unwrap()
            .unwrap()
            .state
            .status()
    }

    async fn wait_until_settled(&self, run_ids: &[&str]) -> Vec<RunStatus> {
        for _ in 0..4_000 {
            let mut statuses = Vec::new();
            for run_id in run_ids {
                statuses.push(self.status(run_id).await);
            }
            if statuses.iter().all(|status| status.is_terminal()) {
                return statuses;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("runs {run_ids:?} did not end");
    }

    async fn thread(&self, thread_id: &str) -> Vec<ChatExchange> {
        self.services
            .runs
            .thread_page(&self.tenant, thread_id, None, 1000)
            .await
            .unwrap()
            .exchanges
    }

    async fn log_lines(&self, run_id: &str) -> Vec<String> {
        self.services
            .runs
            .read_all_events_after(&self.tenant, run_id, 0)
            .await
            .unwrap()
            .into_iter()
            .filter(|frame| frame.event_type.as_str() == "log")
            .filter_map(|frame| frame.draft.message)
            .collect()
    }

    async fn finish(self) {
        let _ = self.stop.send(true);
        let _ = self.worker.await;
    }
}

fn run_ids(exchanges: &[ChatExchange]) -> Vec<String> {
    exchanges
        .iter()
        .map(|exchange| exchange.run_id.clone())
        .collect()
}

/// A thread answering its first message (held in the model), and the
/// harness: the first run's id and the thread's.
async fn busy_thread(harness: &Harness) -> (String, String) {
    let first = harness
        .say("first", None, MultitaskStrategy::Enqueue)
        .await
        .unwrap();
    harness.wait_for_model_calls(1).await;
    (first.run_id, first.thread_id)
}

/// Runs the four scenarios on `store` and `threads`; `unique` keeps their
/// tenants apart from other runs of the suite on the same stores.
pub async fn double_texting_suite(
    store: Arc<dyn RunStore>,
    threads: Arc<dyn ThreadStore>,
    unique: &str,
) {
    reject(store.clone(), threads.clone(), format!("reject-{unique}")).await;
    enqueue(store.clone(), threads.clone(), format!("enqueue-{unique}")).await;
    replace(
        store.clone(),
        threads.clone(),
        format!("interrupt-{unique}"),
        false,
    )
    .await;
    replace(
        store.clone(),
        threads.clone(),
        format!("rollback-{unique}"),
        true,
    )
    .await;
    lost_release(store, threads, format!("lost-release-{unique}")).await;
}

/// The answering run's lane release is lost on its way to the queue (the
/// send after the commit that ended the run fails): the message queued
/// behind it still starts and is answered, with no later message on the
/// thread to notice. The release is a step in the ending commit's outbox,
/// so the ending step's redelivery sends it again.
async fn lost_release(store: Arc<dyn RunStore>, threads: Arc<dyn ThreadStore>, tenant: String) {
    let losing = Arc::new(crate::fault_injection::FailingSendQueue::of_kind(
        Arc::new(InMemoryStepQueue::new()),
        "release_thread_lane",
        1,
    ));
    let harness = Harness::start_on(store, threads, tenant, losing.clone());
    let (first, thread) = busy_thread(&harness).await;
    let queued = harness
        .say("second", Some(&thread), MultitaskStrategy::Enqueue)
        .await
        .unwrap();
    assert_eq!(queued.status, RunStatus::Queued);
    harness.model.gate.add_permits(2);
    assert_eq!(
        harness.wait_until_settled(&[&first, &queued.run_id]).await,
        [RunStatus::Completed, RunStatus::Completed]
    );
    assert_eq!(
        losing.failures_left(),
        0,
        "the release's send was lost once"
    );
    let exchanges = harness.thread(&thread).await;
    assert_eq!(run_ids(&exchanges), [first, queued.run_id]);
    assert_eq!(harness.model.calls.load(Ordering::SeqCst), 2);
    harness.finish().await;
}

/// While a run answers, a `reject` message is refused naming it; on the
/// idle thread, of two `reject` messages sent together one is answered and
/// the other refused naming it.
async fn reject(store: Arc<dyn RunStore>, threads: Arc<dyn ThreadStore>, tenant: String) {
    let harness = Harness::start(store, threads, tenant);
    let (first, thread) = busy_thread(&harness).await;
    match harness
        .say("second", Some(&thread), MultitaskStrategy::Reject)
        .await
    {
        Err(RuntimeError::ThreadBusy { active_run_id, .. }) => assert_eq!(active_run_id, first),
        other => panic!("a busy thread rejects: {other:?}"),
    }
    harness.model.gate.add_permits(1);
    assert_eq!(
        harness.wait_until_settled(&[&first]).await,
        [RunStatus::Completed]
    );

    let (left, right) = tokio::join!(
        harness.say("left", Some(&thread), MultitaskStrategy::Reject),
        harness.say("right", Some(&thread), MultitaskStrategy::Reject),
    );
    let (admitted, refused) = match (left, right) {
        (Ok(admitted), Err(refused)) | (Err(refused), Ok(admitted)) => (admitted, refused),
        (left, right) => panic!("exactly one of two is admitted: {left:?} / {right:?}"),
    };
    match refused {
        RuntimeError::ThreadBusy { active_run_id, .. } => {
            assert_eq!(
                active_run_id, admitted.run_id,
                "the refusal names the run answering"
            )
        }
        other => panic!("refused as busy, not {other:?}"),
    }
    harness.model.gate.add_permits(1);
    assert_eq!(
        harness.wait_until_settled(&[&admitted.run_id]).await,
        [RunStatus::Completed]
    );
    let exchanges = harness.thread(&thread).await;
    assert_eq!(run_ids(&exchanges), [first, admitted.run_id]);
    assert_eq!(harness.model.calls.load(Ordering::SeqCst), 2);
    harness.finish().await;
}

/// Two `enqueue` messages while a run answers: both wait (no model call),
/// then run one after the other, each reading the exchanges before it.
async fn enqueue(store: Arc<dyn RunStore>, threads: Arc<dyn ThreadStore>, tenant: String) {
    let harness = Harness::start(store, threads, tenant);
    let (first, thread) = busy_thread(&harness).await;
    let (left, right) = tokio::join!(
        harness.say("left", Some(&thread), MultitaskStrategy::Enqueue),
        harness.say("right", Some(&thread), MultitaskStrategy::Enqueue),
    );
    let (left, right) = (left.unwrap(), right.unwrap());
    assert_eq!(left.status, RunStatus::Queued);
    assert_eq!(right.status, RunStatus::Queued);
    // Which was queued first: the one waiting behind the first run.
    let behind_first = format!("behind run {first}");
    let left_first = harness
        .log_lines(&left.run_id)
        .await
        .iter()
        .any(|line| line.contains(&behind_first));
    let (second, third) = if left_first {
        (left.run_id, right.run_id)
    } else {
        (right.run_id, left.run_id)
    };
    assert!(
        harness
            .log_lines(&third)
            .await
            .iter()
            .any(|line| line.contains(&format!("behind run {second}"))),
        "the later one waits behind the earlier"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        harness.model.calls.load(Ordering::SeqCst),
        1,
        "queued runs wait"
    );
    harness.model.gate.add_permits(3);
    let statuses = harness.wait_until_settled(&[&first, &second, &third]).await;
    assert_eq!(statuses, [RunStatus::Completed; 3]);
    let exchanges = harness.thread(&thread).await;
    assert_eq!(
        run_ids(&exchanges),
        [first.clone(), second.clone(), third.clone()],
        "answered in order, each once"
    );
    let third_state = harness
        .services
        .runs
        .load(&harness.tenant, &third)
        .await
        .unwrap()
        .unwrap()
        .state;
    let history = run_ids(&third_state.chat.unwrap().history);
    assert_eq!(history, [first, second], "it read the answers before it");
    assert_eq!(harness.model.calls.load(Ordering::SeqCst), 3);
    harness.finish().await;
}

/// Two `interrupt` (or `rollback`) messages while a run answers: the run
/// answering is cancelled, so is the earlier of the two; the later one is
/// answered. Interrupt keeps the others' exchanges, marked; rollback leaves
/// them out.
async fn replace(
    store: Arc<dyn RunStore>,
    threads: Arc<dyn ThreadStore>,
    tenant: String,
    rollback: bool,
) {
    let strategy = if rollback {
        MultitaskStrategy::Rollback
    } else {
        MultitaskStrategy::Interrupt
    };
    let harness = Harness::start(store, threads, tenant);
    let (first, thread) = busy_thread(&harness).await;
    let (left, right) = tokio::join!(
        harness.say("left", Some(&thread), strategy),
        harness.say("right", Some(&thread), strategy),
    );
    let (left, right) = (left.unwrap(), right.unwrap());
    assert_eq!(
        harness.status(&first).await,
        RunStatus::Cancelled,
        "the run answering is cut short at once"
    );
    harness.model.gate.add_permits(3);
    let statuses = harness
        .wait_until_settled(&[&first, &left.run_id, &right.run_id])
        .await;
    assert_eq!(statuses[0], RunStatus::Cancelled);
    let (winner, loser) = match (statuses[1], statuses[2]) {
        (RunStatus::Completed, RunStatus::Cancelled) => (&left.run_id, &right.run_id),
        (RunStatus::Cancelled, RunStatus::Completed) => (&right.run_id, &left.run_id),
        other => panic!("one of the two is answered, the other cut short: {other:?}"),
    };
    let exchanges = harness.thread(&thread).await;
    if rollback {
        assert_eq!(
            run_ids(&exchanges),
            std::slice::from_ref(winner),
            "rolled-back exchanges leave the thread"
        );
    } else {
        let mut seen = run_ids(&exchanges);
        seen.sort();
        let mut expected = vec![first.clone(), winner.clone(), loser.clone()];
        expected.sort();
        assert_eq!(seen, expected, "each run's exchange once");
        for exchange in &exchanges {
            assert_eq!(
                exchange.interrupted,
                &exchange.run_id != winner,
                "only the cut-short ones are marked: {exchange:?}"
            );
        }
        let first_exchange = exchanges
            .iter()
            .find(|exchange| exchange.run_id == first)
            .unwrap();
        assert_eq!(first_exchange.user, "first");
        assert!(
            first_exchange.assistant.starts_with("Thinking it over"),
            "what it had said is kept: {first_exchange:?}"
        );
    }
    harness.finish().await;
}
