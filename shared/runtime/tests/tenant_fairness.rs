//! One tenant flooding does not slow another's steps: tenant A submits
//! 1,000 five-node runs, then tenant B submits one; one worker with 16
//! steps in flight works them all on the embedded default (in-memory store
//! and queue). The queue serves tenants in turn, so B's run is not queued
//! behind A's backlog: it completes within 2× of the same run on an idle
//! worker, and while it ran A's runs made only a few model calls per B step
//! (a FIFO queue would have made B wait for most of A's 5,000).
//!
//! The model is a test double (schema-shaped answers) that holds every call
//! 100 ms, as a remote model would.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::RunStatus;
use baton_runtime::error::LlmError;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta, StepQueue};
use baton_runtime::services::Services;
use baton_test_support::five_stages::{five_stage_envelope, five_stage_registry};
use baton_test_support::{SchemaShapedModel, TestServices};
use tokio::sync::mpsc::UnboundedSender;

const MODEL_DELAY: Duration = Duration::from_millis(100);
const FLOOD_RUNS: usize = 1_000;
const STEPS_IN_FLIGHT: usize = 16;

/// The schema-shaped double, each call held `MODEL_DELAY`, calls counted
/// by tenant (the tenant is in the request's run metadata only, so the
/// count is by the run ids each tenant submitted).
struct SlowModel {
    calls: AtomicUsize,
}

#[async_trait]
impl LlmProvider for SlowModel {
    fn model_name(&self) -> String {
        "slow-schema-shaped".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        tokio::time::sleep(MODEL_DELAY).await;
        self.calls.fetch_add(1, Ordering::SeqCst);
        SchemaShapedModel.complete(request, deltas).await
    }
}

async fn settle(services: &Services, tenant: &str, run_id: &str) -> Duration {
    let started = Instant::now();
    loop {
        let stored = services.runs.load(tenant, run_id).await.unwrap().unwrap();
        if stored.state.status().is_settled() {
            assert_eq!(stored.state.status(), RunStatus::Completed, "{run_id}");
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{run_id} did not settle"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_tenant_does_not_slow_another_tenants_run() {
    let model = Arc::new(SlowModel {
        calls: AtomicUsize::new(0),
    });
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(model.clone())
        .registry(Arc::new(five_stage_registry(&|role| {
            format!("Act as the {role}.")
        })))
        .queue(queue.clone())
        .build()
        .services;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(baton_runtime::workers::run_worker_with_bound(
        services.steps.clone(),
        queue.clone() as Arc<dyn StepQueue>,
        async {
            let _ = stopped.await;
        },
        STEPS_IN_FLIGHT,
    ));
    let envelope = five_stage_envelope();

    // Idle: B's run alone, three times; the median.
    let mut idle = Vec::new();
    for _ in 0..3 {
        let run = services.runs.submit("tenant-b", &envelope).await.unwrap();
        idle.push(settle(&services, "tenant-b", &run.run_id).await);
    }
    idle.sort();
    let idle = idle[1];

    // A floods; then B submits one run.
    for _ in 0..FLOOD_RUNS {
        services.runs.submit("tenant-a", &envelope).await.unwrap();
    }
    let calls_before = model.calls.load(Ordering::SeqCst);
    let run = services.runs.submit("tenant-b", &envelope).await.unwrap();
    let loaded = settle(&services, "tenant-b", &run.run_id).await;
    let calls_during = model.calls.load(Ordering::SeqCst) - calls_before;
    let pending_a_steps = queue.outstanding();
    eprintln!(
        "tenant B's five-node run: idle {} ms, beside 1,000 runs of tenant A {} ms ({:.2}×); \
         {calls_during} model calls in all while it ran, {pending_a_steps} of A's steps still outstanding",
        idle.as_millis(),
        loaded.as_millis(),
        loaded.as_secs_f64() / idle.as_secs_f64()
    );
    assert!(
        loaded <= idle * 2,
        "B's run took {} ms beside the flood, over 2× its idle {} ms",
        loaded.as_millis(),
        idle.as_millis()
    );
    // B's 5 model calls plus at most the slots' worth of A's per B step (a
    // FIFO queue would have served A's backlog first).
    assert!(
        calls_during <= 5 + 8 * STEPS_IN_FLIGHT,
        "{calls_during} model calls were made while B's run waited"
    );
    assert!(
        pending_a_steps > STEPS_IN_FLIGHT,
        "A's backlog was still there when B finished: the test measured a real flood"
    );
    let _ = stop.send(());
    worker.await.unwrap();
}
