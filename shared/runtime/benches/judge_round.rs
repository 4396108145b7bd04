//! One scoring round of a 5-judge panel whose model answers each judge
//! after 200 ms: judges are asked concurrently, so a round takes about one
//! answer's time, not five (sequential would be 1 000 ms). Measured twice:
//! in process (`PanelRunner`, what `baton judge` does) and durably, as a
//! whole evaluation run on the step engine (in-memory store and queue, the
//! plan step, the panel node's step, one `AskJudge` step per judge with its
//! own claim and commit, the conclusion).
//!
//! `cargo bench -p baton-runtime --bench judge_round`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::TokenUsage;
use baton_judge::request::PanelRequest;
use baton_runtime::clock::SystemClock;
use baton_runtime::error::LlmError;
use baton_runtime::models::panels::PanelRunner;
use baton_runtime::ports::{LlmProvider, ModelAnswer};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use tokio::sync::mpsc::UnboundedSender;

/// Test double for the judges' model endpoint: every answer takes 200 ms.
struct SlowJudgeModel;

#[async_trait]
impl LlmProvider for SlowJudgeModel {
    fn model_name(&self) -> String {
        "slow-judge".into()
    }
    async fn complete(
        &self,
        _request: &ModelRequest,
        _deltas: UnboundedSender<baton_runtime::ports::ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        tokio::time::sleep(Duration::from_millis(200)).await;
        Ok(ModelAnswer {
            content: json!({"score": 8.0, "feedback": "fine", "strengths": [], "improvements": []})
                .to_string(),
            usage: TokenUsage::default(),
            model: "slow-judge".into(),
        })
    }
}

fn five_judges() -> PanelRequest {
    PanelRequest::parse(&json!({
        "request": {"id": "bench", "content": "A document.",
                    "selectedAgents": [{"id": "a"}, {"id": "b"}, {"id": "c"}, {"id": "d"}, {"id": "e"}]},
        "config": {"maxDiscussionRounds": 0, "roundTimeout": 5000, "consensusAlgorithm": "median",
                   "enableDiscussion": false, "convergenceThreshold": 0.5, "outlierDetection": true}
    }))
    .unwrap()
}

fn judge_round(criterion: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let runner = PanelRunner::new(Arc::new(SlowJudgeModel), Arc::new(SystemClock));
    let mut group = criterion.benchmark_group("judges");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(4));
    group.bench_function("five_judges_one_round_200ms_each", |bench| {
        bench.iter(|| {
            runtime.block_on(async {
                let output = runner.run(five_judges(), "bench", |_| {}).await.unwrap();
                assert_eq!(output.individual_results.len(), 5);
            })
        })
    });
    let queue = Arc::new(baton_runtime::memory::InMemoryStepQueue::new());
    let services = baton_test_support::TestServices::with_model(Arc::new(SlowJudgeModel))
        .queue(queue.clone())
        .build();
    let runner = baton_runtime::workers::LocalRunner {
        steps: services.services.steps.clone(),
        runs: services.services.runs.clone(),
        queue,
    };
    let runs = services.services.runs.clone();
    let entry = runs
        .panel_entry()
        .expect("the registry runs panel requests");
    let body = serde_json::to_value(five_judges()).unwrap();
    group.bench_function("five_judges_one_round_200ms_each_durable_steps", |bench| {
        bench.iter(|| {
            runtime.block_on(async {
                let submitted = runs
                    .submit_evaluation("bench", &entry, &five_judges(), &body)
                    .await
                    .unwrap();
                let status = runner
                    .run_until_settled("bench", &submitted.run_id)
                    .await
                    .unwrap();
                assert_eq!(status, baton_core::state::run::RunStatus::Completed);
            })
        })
    });
    group.finish();
}

criterion_group!(benches, judge_round);
criterion_main!(benches);
