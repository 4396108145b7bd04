//! Memory across runs on SQLite, across a reopen (a new process): the
//! shipped writer remembers the tone of voice its run worked with, in the
//! same file as the runs; a second process, on the reopened file, runs an
//! envelope that gives no tone, and its writer's model request quotes the
//! remembered one. The model is a test double (`RecordingModel`) keeping
//! every request and answering each with an instance of its output schema.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use baton_core::state::run::RunState;
use baton_runtime::ports::MemoryStore;
use baton_sqlite::SqliteStore;
use baton_test_support::TestServices;
use baton_test_support::conformance::memory_runs::{
    assert_the_writer_recalled_the_tone, tone_envelope, tone_namespace,
};
use baton_test_support::schema_shaped_model::RecordingModel;
use serde_json::{Value, json};

const TENANT: &str = "t";
/// One process: services on the SQLite file (runs and memory), a run
/// driven to its end (its `Remember` step too).
async fn run_in_a_process(
    path: &std::path::Path,
    model: Arc<RecordingModel>,
    envelope: &Value,
) -> RunState {
    let store = Arc::new(SqliteStore::open(path).unwrap());
    TestServices::with_model(model)
        .store(store.clone())
        .capability_directory(store.clone())
        .memory(store.clone(), None)
        .run_to_the_end(store.as_ref(), TENANT, envelope)
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tone_remembered_in_one_process_is_recalled_by_the_next_from_the_same_file() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("baton.sqlite3");

    let first = run_in_a_process(
        &path,
        Arc::new(RecordingModel::default()),
        &tone_envelope(true),
    )
    .await;
    assert!(
        first
            .remembering
            .as_deref()
            .is_some_and(|remembering| remembering.done)
    );

    let reopened = SqliteStore::open(&path).unwrap();
    let item = reopened
        .get_memory(TENANT, &tone_namespace(), "toneOfVoice")
        .await
        .unwrap()
        .expect("the tone is kept in the file");
    assert_eq!(item.value, json!(["confident", "supportive"]));
    assert_eq!(
        item.provenance.run_id.as_deref(),
        Some(first.run_id.as_str())
    );

    let model = Arc::new(RecordingModel::default());
    run_in_a_process(&path, model.clone(), &tone_envelope(false)).await;
    assert_the_writer_recalled_the_tone(&model, &first.run_id);
}
