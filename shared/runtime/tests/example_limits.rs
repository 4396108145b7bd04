//! An evaluation's example past its time limit is cancelled, not left
//! spending: its run waits on a model that never answers, the example
//! fails its `settled` check saying the run was cancelled, and the run is
//! `cancelled` in the store.
//!
//! Test double: the model endpoint (never answers). The engine, the step
//! worker, the run service and the example runner are the real ones.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use baton_core::contracts::dataset::{Expectations, ResolvedExample};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::RunStatus;
use baton_runtime::error::LlmError;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::services::dataset_evaluations::{EmbeddedExampleRuns, run_example};
use baton_test_support::TestServices;
use baton_test_support::five_stages::{five_stage_envelope, five_stage_registry};
use tokio::sync::mpsc::UnboundedSender;

/// Test double for the model endpoint: a call that never answers.
struct NeverAnswers;

#[async_trait]
impl LlmProvider for NeverAnswers {
    fn model_name(&self) -> String {
        "never-answers".into()
    }
    async fn complete(
        &self,
        _request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        std::future::pending().await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_example_past_its_limit_is_cancelled() {
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(Arc::new(NeverAnswers))
        .registry(Arc::new(five_stage_registry(&|role| {
            format!("Act as the {role}.")
        })))
        .queue(queue.clone())
        .build()
        .services;
    let worker = tokio::spawn(baton_runtime::workers::run_worker_until(
        services.steps.clone(),
        queue,
        std::future::pending(),
    ));
    let runs = EmbeddedExampleRuns {
        runs: services.runs.clone(),
        tenant: "t".into(),
    };
    let example = ResolvedExample {
        id: "slow".into(),
        line: 1,
        envelope: five_stage_envelope(),
        // Its limit is twice its bound, at least 2 s.
        expect: Expectations {
            max_duration_ms: Some(100),
            ..Expectations::default()
        },
    };
    let result = tokio::time::timeout(Duration::from_secs(30), run_example(&runs, None, &example))
        .await
        .expect("the example ends at its limit");
    assert!(!result.passed);
    let settled = result
        .checks
        .iter()
        .find(|check| check.check == "settled")
        .expect("a settled check");
    assert!(!settled.passed);
    assert!(
        settled.detail.contains("it was cancelled"),
        "{}",
        settled.detail
    );
    let run_id = result.run_id.expect("the example's run is named");
    let stored = services.runs.load("t", &run_id).await.unwrap().unwrap();
    assert_eq!(stored.state.status(), RunStatus::Cancelled);
    worker.abort();
}
