//! A cancel reaches the call in flight: a run cancelled while its node
//! waits on a model stops that call (its future dropped, so its HTTP
//! request's connection is closed) within a third of a node lease (the
//! lease heartbeat reads the run's status), instead of the call running to
//! its end. The model is a test double that would answer after 10
//! minutes and records when its call is dropped; the engine, the step
//! service, the in-memory store and queue are the real ones, with the
//! node lease the template ships (30 s).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::RunStatus;
use baton_runtime::error::LlmError;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_test_support::TestServices;
use tokio::sync::mpsc::UnboundedSender;

/// Test double for the model endpoint: every call hangs (10 minutes);
/// counts calls made and calls dropped.
#[derive(Default)]
struct Hangs {
    started: AtomicUsize,
    dropped: Arc<AtomicUsize>,
}

struct CountsDrop(Arc<AtomicUsize>);

impl Drop for CountsDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[async_trait]
impl LlmProvider for Hangs {
    fn model_name(&self) -> String {
        "hangs".into()
    }
    async fn complete(
        &self,
        _request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        self.started.fetch_add(1, Ordering::SeqCst);
        let _guard = CountsDrop(self.dropped.clone());
        tokio::time::sleep(Duration::from_secs(600)).await;
        Err(LlmError::Timeout { attempts: 1 })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_stops_the_model_call_in_flight_within_a_third_of_a_lease() {
    let model = Arc::new(Hangs::default());
    let (services, runner) = TestServices::with_model(model.clone()).build_with_local_runner();
    let envelope: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(baton_test_support::repository_path(
            "registry/examples/seed-10.0.1-stream-contract-variants.json",
        ))
        .unwrap(),
    )
    .unwrap();
    let submitted = services.runs.submit("acme", &envelope).await.unwrap();
    let draining = tokio::spawn(async move { runner.drain().await });
    // Wait for the node's model call.
    let waited = Instant::now();
    while model.started.load(Ordering::SeqCst) == 0 {
        assert!(waited.elapsed() < Duration::from_secs(30), "no model call");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cancelled_at = Instant::now();
    services
        .runs
        .cancel("acme", &submitted.run_id, "the caller changed its mind")
        .await
        .unwrap();
    while model.dropped.load(Ordering::SeqCst) == 0 {
        assert!(
            cancelled_at.elapsed() < Duration::from_secs(15),
            "the call in flight was not stopped within a third of the 30 s lease"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stopped_after = cancelled_at.elapsed();
    // The worker is free again: its drain ends, no call is left.
    tokio::time::timeout(Duration::from_secs(30), draining)
        .await
        .expect("the worker ended its step")
        .unwrap()
        .unwrap();
    assert_eq!(
        model.started.load(Ordering::SeqCst),
        1,
        "no call after the cancel"
    );
    let run = services
        .runs
        .load("acme", &submitted.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.state.status(), RunStatus::Cancelled);
    assert!(
        stopped_after <= Duration::from_secs(11),
        "{stopped_after:?}"
    );
}
