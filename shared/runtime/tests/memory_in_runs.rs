//! Memory across runs, end to end on the shipped registry: the writer
//! capability (`ContentGenerator.copyVariants`) remembers the tone of
//! voice it worked with when its run completes; the next run, whose
//! envelope gives no tone, recalls it, and the writer's model request
//! quotes it (asserted at the model double) while a `memory_recalled`
//! frame names it. The model is a test double recording every request and
//! answering each with an instance of its output schema; the memory store
//! is the in-memory adapter, searched by the real service.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use baton_core::basics::ids::RunKey;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunState, RunStatus, TokenUsage};
use baton_runtime::error::LlmError;
use baton_runtime::memory::{InMemoryRunStore, InMemoryStepQueue};
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta, RunLog};
use baton_runtime::services::Services;
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

const TENANT: &str = "t";
const WRITER: &str = "ContentGenerator_copyVariants";

/// Test double for the model endpoint: answers with its output schema's
/// instance, keeping every request.
#[derive(Default)]
struct RecordingModel {
    requests: Mutex<Vec<ModelRequest>>,
}

#[async_trait]
impl LlmProvider for RecordingModel {
    fn model_name(&self) -> String {
        "recording".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        self.requests.lock().unwrap().push(request.clone());
        let mut answer = scripted_llm::generate_instance(&request.output_schema, "recording");
        if request.schema_name == "judge_answer" {
            answer["score"] = json!(9.0);
        }
        Ok(ModelAnswer {
            content: answer.to_string(),
            usage: TokenUsage::default(),
            model: "recording".into(),
        })
    }
}

fn tone_namespace() -> Vec<String> {
    ["client", "example", "tone"]
        .iter()
        .map(|part| part.to_string())
        .collect()
}

fn envelope(with_tone: bool) -> Value {
    let mut envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    if !with_tone {
        envelope["inputs"]
            .as_object_mut()
            .unwrap()
            .remove("toneOfVoice");
    }
    envelope["memory"] = json!({
        "recall": {"namespaces": [tone_namespace()], "perNode": 3},
        "rememberTo": tone_namespace()
    });
    envelope
}

struct Harness {
    services: Services,
    store: Arc<InMemoryRunStore>,
    runner: LocalRunner,
    model: Arc<RecordingModel>,
}

fn harness() -> Harness {
    let store = Arc::new(InMemoryRunStore::new());
    let queue = Arc::new(InMemoryStepQueue::new());
    let model = Arc::new(RecordingModel::default());
    let services = TestServices::with_model(model.clone())
        .store(store.clone())
        .queue(queue.clone())
        .build()
        .services;
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    Harness {
        services,
        store,
        runner,
        model,
    }
}

async fn run(harness: &Harness, envelope: &Value) -> RunState {
    let run = harness
        .services
        .runs
        .submit(TENANT, envelope)
        .await
        .unwrap();
    // Drains the queue: the run's steps, then its `Remember` step.
    let status = harness
        .runner
        .run_until_settled(TENANT, &run.run_id)
        .await
        .unwrap();
    let state = harness
        .store
        .load_run(RunKey::new(TENANT, &run.run_id))
        .await
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(status, RunStatus::Completed, "{:?}", state.failure);
    state
}

fn writer_requests(model: &RecordingModel) -> Vec<Value> {
    model
        .requests
        .lock()
        .unwrap()
        .iter()
        .filter(|request| request.schema_name == WRITER)
        .map(|request| serde_json::from_str(&request.user_message).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tone_one_run_worked_with_is_recalled_by_the_next_runs_writer() {
    let harness = harness();
    let first = run(&harness, &envelope(true)).await;
    let remembered = first.remembering.as_deref().expect("the run remembers");
    assert!(remembered.done, "{remembered:?}");
    assert_eq!(remembered.written, vec!["toneOfVoice"]);

    let item = harness
        .services
        .memory
        .get(TENANT, &tone_namespace(), "toneOfVoice")
        .await
        .unwrap()
        .expect("the tone is in memory");
    assert_eq!(item.value, json!(["confident", "supportive"]));
    assert_eq!(
        item.provenance.run_id.as_deref(),
        Some(first.run_id.as_str())
    );
    let writer_node = first
        .plan
        .as_ref()
        .unwrap()
        .nodes
        .iter()
        .find(|node| node.capability_id == "ContentGenerator.copyVariants")
        .unwrap()
        .node_id
        .clone();
    assert_eq!(
        item.provenance.node_id.as_deref(),
        Some(writer_node.as_str())
    );

    harness.model.requests.lock().unwrap().clear();
    let second = run(&harness, &envelope(false)).await;
    let requests = writer_requests(&harness.model);
    assert_eq!(requests.len(), 1, "one writer call");
    let writer = &requests[0];
    assert!(
        writer["inputs"].get("toneOfVoice").is_none(),
        "the second envelope gives no tone"
    );
    let recalled = writer["recalledMemory"].as_array().expect("recalled items");
    let tone = recalled
        .iter()
        .find(|snippet| snippet["key"] == "toneOfVoice")
        .expect("the tone is recalled");
    assert!(
        tone["text"].as_str().unwrap().contains("confident"),
        "{tone}"
    );
    assert_eq!(tone["provenance"]["runId"], first.run_id.as_str());
    assert_eq!(tone["namespace"], json!(tone_namespace()));
    assert!(
        writer["recalledMemoryRule"]
            .as_str()
            .unwrap()
            .contains("never instructions")
    );

    let frames = harness
        .services
        .runs
        .read_all_events_after(TENANT, &second.run_id, 0)
        .await
        .unwrap();
    let writer_node = second
        .plan
        .as_ref()
        .unwrap()
        .nodes
        .iter()
        .find(|node| node.capability_id == "ContentGenerator.copyVariants")
        .unwrap()
        .node_id
        .clone();
    let recalled_frames: Vec<_> = frames
        .iter()
        .filter(|frame| {
            frame.event_type.as_str() == "memory_recalled"
                && frame.node_id.as_deref() == Some(writer_node.as_str())
        })
        .collect();
    assert_eq!(recalled_frames.len(), 1);
    let payload = recalled_frames[0].payload.as_ref().unwrap();
    assert_eq!(payload["items"][0]["key"], "toneOfVoice");
    assert_eq!(
        payload["items"][0]["provenance"]["runId"],
        first.run_id.as_str()
    );
    baton_test_support::assert_frames_match_schemas(&frames);
    // The frame comes before the writer's answer.
    let recalled_at = recalled_frames[0].id;
    let completed_at = frames
        .iter()
        .find(|frame| {
            frame.event_type.as_str() == "node_complete"
                && frame.node_id.as_deref() == Some(writer_node.as_str())
        })
        .unwrap()
        .id;
    assert!(recalled_at < completed_at);
    // The second run had no tone to remember: memory keeps the first's.
    assert_eq!(second.remembering, None);
}
