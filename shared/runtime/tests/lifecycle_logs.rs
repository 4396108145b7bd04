//! The structured lifecycle log lines (`lifecycle_log`, written by
//! `telemetry::ObservedRunStore`), captured as the Lambda functions print
//! them (JSON) for a real run on the in-memory store. Alone in its test
//! binary: `tracing` caches per call site whether anyone listens, and tests
//! running beside it without a subscriber would race that cache. The model
//! is a test double (schema-shaped answers).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_runtime::error::LlmError;
use baton_runtime::memory::{InMemoryRunStore, InMemoryStepQueue};
use baton_runtime::observe::telemetry::{ObservedRunStore, RunCounters};
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

/// Test double for the model endpoint: schema-shaped answers.
struct SchemaShapedModel;

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
        Ok(ModelAnswer {
            content: scripted_llm::generate_instance(&request.output_schema, "specialist")
                .to_string(),
            usage: TokenUsage {
                prompt_tokens: 100,
                completion_tokens: 20,
                cached_prompt_tokens: 0,
                cache_write_prompt_tokens: 0,
            },
            model: "schema-shaped".into(),
        })
    }
}

/// A `tracing` writer into a shared buffer (the test's stand-in for stderr).
#[derive(Clone, Default)]
struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for CapturedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'writer> tracing_subscriber::fmt::MakeWriter<'writer> for CapturedLog {
    type Writer = CapturedLog;
    fn make_writer(&'writer self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn each_durable_lifecycle_event_is_one_json_log_line() {
    let captured = CapturedLog::default();
    // As the functions log (`init_json_logging`), on this test's thread.
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_env_filter(tracing_subscriber::EnvFilter::new("baton::lifecycle=info"))
        .with_writer(captured.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let store = Arc::new(ObservedRunStore::new(
        Arc::new(InMemoryRunStore::new()),
        Arc::new(RunCounters::default()),
    ));
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(Arc::new(SchemaShapedModel))
        .store(store)
        .queue(queue.clone())
        .build()
        .services;
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    let mut envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    envelope["policies"]
        .as_object_mut()
        .unwrap()
        .remove("hitlRequiredFor");
    let run = services.runs.submit("t", &envelope).await.unwrap();
    assert_eq!(
        runner.run_until_settled("t", &run.run_id).await.unwrap(),
        RunStatus::Completed
    );
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let events: Vec<&str> = lines
        .iter()
        .map(|line| line["fields"]["event"].as_str().unwrap())
        .collect();
    assert_eq!(events.first(), Some(&"run.started"), "{events:?}");
    assert_eq!(events.last(), Some(&"run.completed"), "{events:?}");
    assert!(events.contains(&"plan.generated"), "{events:?}");
    let started = events
        .iter()
        .filter(|event| **event == "node.started")
        .count();
    let completed = events
        .iter()
        .filter(|event| **event == "node.completed")
        .count();
    assert!(started >= 2 && started == completed, "{events:?}");
    assert!(events.contains(&"plan.requested"), "{events:?}");
    let flex_names: Vec<&str> = lines
        .iter()
        .map(|line| line["fields"]["flexName"].as_str().unwrap())
        .collect();
    assert_eq!(flex_names.first(), Some(&"flex_start"));
    assert!(
        flex_names.contains(&"flex_plan_requested"),
        "{flex_names:?}"
    );
    assert!(flex_names.contains(&"flex_node_complete"), "{flex_names:?}");
    for line in &lines {
        assert_eq!(line["target"], "baton::lifecycle");
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["fields"]["runId"], run.run_id.as_str());
        assert_eq!(line["fields"]["tenant"], "t");
    }
    let node_completed = lines
        .iter()
        .find(|line| line["fields"]["event"] == "node.completed" && line["fields"]["model"] != "")
        .unwrap();
    assert!(
        node_completed["fields"]["durationMs"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .is_ok(),
        "{node_completed}"
    );
    let ended = lines.last().unwrap();
    assert!(
        ended["fields"]["correlationId"]
            .as_str()
            .unwrap()
            .starts_with("corr_")
    );
    assert!(ended["fields"].get("runDurationMs").is_some(), "{ended}");
}
