//! Runs planned alike hold one plan: two runs of the same envelope on the
//! in-memory store end with the same plan object (not two equal copies),
//! while a run planned differently keeps its own. The model is
//! `SchemaShapedModel`, a test double answering with its schema's instance.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use baton_core::basics::ids::RunKey;
use baton_core::planning::plan::PlanGraph;
use baton_core::state::run::RunStatus;
use baton_runtime::memory::{InMemoryRunStore, InMemoryStepQueue};
use baton_runtime::ports::RunLog;
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use baton_test_support::schema_shaped_model::SchemaShapedModel;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread")]
async fn runs_planned_alike_hold_one_plan() {
    let store = Arc::new(InMemoryRunStore::new());
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(Arc::new(SchemaShapedModel))
        .store(store.clone())
        .queue(queue.clone())
        .build()
        .services;
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    let plan_of = |envelope: Value| {
        let (services, runner, store) = (&services, &runner, &store);
        async move {
            let run = services.runs.submit("t", &envelope).await.unwrap();
            let status = runner.run_until_settled("t", &run.run_id).await.unwrap();
            assert_eq!(status, RunStatus::Completed);
            let stored = store
                .load_run(RunKey::new("t", &run.run_id))
                .await
                .unwrap()
                .unwrap();
            stored.state.plan.expect("planned")
        }
    };
    let positioning = baton_test_support::plain_example_envelope("positioning-recommendation.json");
    let first: Arc<PlanGraph> = plan_of(positioning.clone()).await;
    let second = plan_of(positioning).await;
    assert!(Arc::ptr_eq(&first, &second), "one plan for both runs");

    let other = plan_of(baton_test_support::plain_example_envelope(
        "seed-10.1-sample-envelope.json",
    ))
    .await;
    assert!(!Arc::ptr_eq(&first, &other));
    assert_ne!(*first, *other);
}
