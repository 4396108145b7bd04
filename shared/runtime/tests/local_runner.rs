//! The embedded default's worker (`LocalRunner`, what `baton run` drives):
//! its steps are polled by one future, not spawned, so these check what
//! spawning gave for free. Steps of different runs still wait on their
//! models at the same time, and a step that panics neither hangs the
//! runner nor stops the others: its run ends `step_failed` naming the
//! panic. The model is a test double standing in for
//! an LLM endpoint: schema-shaped answers after a delay, counting the calls
//! in flight; one variant panics on a chosen run's calls.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_runtime::error::LlmError;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::services::Services;
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

/// Answers with schema-shaped output after `delay`, recording the most
/// calls it had in flight at once; panics on a request whose prompt
/// contains `panic_on` (when set).
struct CountingModel {
    delay: Duration,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
    calls: AtomicUsize,
    panic_on: Option<String>,
}

impl CountingModel {
    fn new(delay: Duration, panic_on: Option<&str>) -> Self {
        CountingModel {
            delay,
            in_flight: AtomicUsize::new(0),
            most_in_flight: AtomicUsize::new(0),
            calls: AtomicUsize::new(0),
            panic_on: panic_on.map(str::to_string),
        }
    }
}

#[async_trait]
impl LlmProvider for CountingModel {
    fn model_name(&self) -> String {
        "counting".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(marker) = &self.panic_on
            && serde_json::to_string(request)
                .unwrap()
                .contains(marker.as_str())
        {
            panic!("test double: a bug in a step");
        }
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        Ok(ModelAnswer {
            content: scripted_llm::generate_instance(&request.output_schema, "counting")
                .to_string(),
            usage: TokenUsage::default(),
            model: "counting".into(),
        })
    }
}

fn orchestrator(model: Arc<CountingModel>) -> (Services, LocalRunner) {
    TestServices::with_model(model).build_with_local_runner()
}

fn envelope_with_objective(objective: &str) -> Value {
    let mut envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    envelope["objective"] = Value::String(objective.into());
    envelope
}

async fn status_of(services: &Services, run_id: &str) -> RunStatus {
    services
        .runs
        .load("t", run_id)
        .await
        .unwrap()
        .unwrap()
        .state
        .status()
}

#[tokio::test(flavor = "multi_thread")]
async fn steps_of_different_runs_wait_on_their_models_at_the_same_time() {
    let model = Arc::new(CountingModel::new(Duration::from_millis(200), None));
    let (services, runner) = orchestrator(model.clone());
    let mut run_ids = Vec::new();
    for index in 0..4 {
        let envelope = envelope_with_objective(&format!("Run number {index} of four."));
        run_ids.push(services.runs.submit("t", &envelope).await.unwrap().run_id);
    }
    let steps = tokio::time::timeout(Duration::from_secs(60), runner.drain())
        .await
        .expect("the runner drains")
        .unwrap();
    assert!(steps > 4, "{steps} steps ran");
    for run_id in &run_ids {
        assert_eq!(status_of(&services, run_id).await, RunStatus::Completed);
    }
    let most = model.most_in_flight.load(Ordering::SeqCst);
    assert!(
        most >= 4,
        "the four runs' first model calls overlap: at most {most} were in flight at once"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_step_that_panics_ends_its_run_step_failed_and_the_other_runs_complete() {
    let marker = "This run meets a bug.";
    let model = Arc::new(CountingModel::new(Duration::from_millis(20), Some(marker)));
    let (services, runner) = orchestrator(model.clone());
    let doomed = services
        .runs
        .submit("t", &envelope_with_objective(marker))
        .await
        .unwrap()
        .run_id;
    let healthy = services
        .runs
        .submit("t", &envelope_with_objective("This run goes well."))
        .await
        .unwrap()
        .run_id;
    tokio::time::timeout(Duration::from_secs(60), runner.drain())
        .await
        .expect("a panicking step does not hang the runner")
        .unwrap();
    assert_eq!(status_of(&services, &healthy).await, RunStatus::Completed);
    assert_eq!(status_of(&services, &doomed).await, RunStatus::Failed);
    let frames = services
        .runs
        .read_all_events_after("t", &doomed, 0)
        .await
        .unwrap();
    let error = frames
        .iter()
        .find(|frame| frame.event_type.as_str() == "error")
        .expect("the run says why it ended");
    let payload = error.payload.as_ref().unwrap();
    assert_eq!(payload["code"], "step_failed", "{}", payload.json());
    let said = serde_json::to_string(&error).unwrap();
    assert!(
        said.contains("the step panicked: test double: a bug in a step"),
        "{said}"
    );
    assert_eq!(runner.queue.outstanding(), 0, "its message was consumed");
}
