//! Memory across runs, end to end on the shipped registry: the writer
//! capability (`ContentGenerator.copyVariants`) remembers the tone of
//! voice it worked with when its run completes; the next run, whose
//! envelope gives no tone, recalls it, and the writer's model request
//! quotes it (asserted at the model double) while a `memory_recalled`
//! frame names it. The model is a test double (`RecordingModel`) recording
//! every request and answering each with an instance of its output schema;
//! the memory store
//! is the in-memory adapter, searched by the real service.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use baton_core::basics::ids::RunKey;
use baton_core::state::run::{RunState, RunStatus};
use baton_runtime::memory::{InMemoryRunStore, InMemoryStepQueue};
use baton_runtime::ports::RunLog;
use baton_runtime::services::Services;
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use baton_test_support::conformance::memory_runs::{
    assert_the_writer_recalled_the_tone, tone_envelope, tone_namespace,
};
use baton_test_support::schema_shaped_model::RecordingModel;
use serde_json::{Value, json};

const TENANT: &str = "t";

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

#[tokio::test(flavor = "multi_thread")]
async fn the_tone_one_run_worked_with_is_recalled_by_the_next_runs_writer() {
    let harness = harness();
    let first = run(&harness, &tone_envelope(true)).await;
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
    let second = run(&harness, &tone_envelope(false)).await;
    let writer = assert_the_writer_recalled_the_tone(&harness.model, &first.run_id);
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
