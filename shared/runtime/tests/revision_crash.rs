//! The revision loop survives a crash: the process dies right after the
//! first review is committed (its revision step still on the queue); a new
//! process on the same store takes over the unconsumed outbox and finishes.
//! The first draft is never written again: every capability is called once
//! per draft. The model is a test double answering by the requested schema
//! (the reviewer scores 0.5, then 0.9).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use baton_core::basics::ids::RunKey;
use baton_runtime::ports::OutboxStore;
use baton_runtime::ports::RunLog;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use baton_core::basics::instant::Instant;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_runtime::error::LlmError;
use baton_runtime::memory::{InMemoryRunStore, InMemoryStepQueue};
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta, StepQueue};
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

/// Test double for the model endpoint: schema-shaped answers; a reviewer's
/// answer carries the next scripted score. Counts calls per capability.
#[derive(Default)]
struct ReviewedModel {
    calls: Mutex<BTreeMap<String, usize>>,
    scores: Mutex<Vec<f64>>,
}

#[async_trait]
impl LlmProvider for ReviewedModel {
    fn model_name(&self) -> String {
        "reviewed".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        *self
            .calls
            .lock()
            .unwrap()
            .entry(request.schema_name.clone())
            .or_default() += 1;
        let mut answer = scripted_llm::generate_instance(&request.output_schema, "answer");
        if answer.get("qaFindings").is_some() {
            let score = self.scores.lock().unwrap().remove(0);
            answer["qaFindings"]["overallScore"] = json!(score);
        }
        Ok(ModelAnswer {
            content: answer.to_string(),
            usage: TokenUsage::default(),
            model: "reviewed".into(),
        })
    }
}

fn reviewed_envelope() -> Value {
    let mut envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    envelope["constraints"] = json!({"qualityThreshold": 0.8, "executionDepth": 3});
    envelope["policies"]["planner"] =
        json!({"selection": {"require": ["QualityAssurance.contentReview"]}});
    envelope
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_after_the_first_review_does_not_rewrite_the_first_draft() {
    let store = Arc::new(InMemoryRunStore::new());
    let model = Arc::new(ReviewedModel::default());
    model.scores.lock().unwrap().extend([0.5, 0.9]);

    // The first process: one step at a time, until the first review is committed.
    let first_queue = Arc::new(InMemoryStepQueue::new());
    let first = TestServices::with_model(model.clone())
        .store(store.clone())
        .queue(first_queue.clone())
        .build()
        .services;
    let run = first.runs.submit("t", &reviewed_envelope()).await.unwrap();
    loop {
        let received = first_queue
            .receive(1, Duration::ZERO)
            .await
            .unwrap()
            .pop()
            .expect("a step until the first review");
        first.steps.handle(&received.message).await.unwrap();
        first_queue.acknowledge(&received.receipt).await.unwrap();
        let state = store
            .load_run(RunKey::new("t", &run.run_id))
            .await
            .unwrap()
            .unwrap()
            .state;
        if !state.governance.drafts.is_empty() {
            assert_eq!(state.plan_version(), 2, "the revision is planned");
            break;
        }
    }
    drop(first);
    drop(first_queue);

    // The next process finds the revision step in the store's outbox.
    let left_over: Vec<_> = store
        .quiet_outbox(Instant::from_unix_millis(u64::MAX / 2), 100)
        .await
        .unwrap()
        .into_iter()
        .map(|entry| entry.message)
        .collect();
    assert!(!left_over.is_empty(), "the revision step was never sent");
    let second_queue = Arc::new(InMemoryStepQueue::new());
    second_queue.send(&left_over).await.unwrap();
    let second = TestServices::with_model(model.clone())
        .store(store.clone())
        .queue(second_queue.clone())
        .build()
        .services;
    let runner = LocalRunner {
        steps: second.steps.clone(),
        runs: second.runs.clone(),
        queue: second_queue,
    };
    let status = runner.run_until_settled("t", &run.run_id).await.unwrap();
    assert_eq!(status, RunStatus::Completed);

    let state = store
        .load_run(RunKey::new("t", &run.run_id))
        .await
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(state.governance.drafts.len(), 2);
    let calls = model.calls.lock().unwrap().clone();
    let called = |capability: &str| {
        calls
            .iter()
            .filter(|(schema, _)| schema.starts_with(capability))
            .map(|(_, count)| *count)
            .sum::<usize>()
    };
    assert_eq!(
        called("StrategyManager"),
        1,
        "the brief is written once: {calls:?}"
    );
    assert_eq!(
        called("ContentGenerator"),
        2,
        "one draft and one revision: {calls:?}"
    );
    assert_eq!(called("QualityAssurance"), 2, "two reviews: {calls:?}");
}
