//! Memory across runs on DynamoDB (moto): the shipped writer remembers the
//! tone of voice its run worked with, in the runs' table; a second
//! process's run, whose envelope gives no tone, recalls it, and its
//! writer's model request quotes it. The model is a test double
//! (`RecordingModel`) keeping every request and answering each with an
//! instance of its output schema; the store is the real DynamoDB adapter.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use baton_aws::DynamoRunStore;
use baton_core::state::run::RunState;
use baton_runtime::ports::MemoryStore;
use baton_test_support::TestServices;
use baton_test_support::conformance::memory_runs::{
    assert_the_writer_recalled_the_tone, tone_envelope, tone_namespace,
};
use baton_test_support::schema_shaped_model::RecordingModel;
use moto_server::{MotoServer, unique_name};
use serde_json::{Value, json};

const TENANT: &str = "t";

/// One process: services on the table (runs and memory), a run driven to
/// its end (its `Remember` step too).
async fn run_in_a_process(
    store: Arc<DynamoRunStore>,
    model: Arc<RecordingModel>,
    envelope: &Value,
) -> RunState {
    TestServices::with_model(model)
        .store(store.clone())
        .memory(store.clone(), None)
        .run_to_the_end(store.as_ref(), TENANT, envelope)
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tone_remembered_by_one_run_is_recalled_by_the_next_on_dynamodb() {
    let moto = MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let table = unique_name("baton-memory-runs");
    let store = Arc::new(DynamoRunStore::new(&connection, table.clone()));
    store.create_table_if_missing().await.unwrap();

    let first = run_in_a_process(
        store.clone(),
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
    let item = store
        .get_memory(TENANT, &tone_namespace(), "toneOfVoice")
        .await
        .unwrap()
        .expect("the tone is in the table");
    assert_eq!(item.value, json!(["confident", "supportive"]));
    assert_eq!(
        item.provenance.run_id.as_deref(),
        Some(first.run_id.as_str())
    );

    // A second process: a new client on the same table.
    let second_store = Arc::new(DynamoRunStore::new(&connection, table));
    let model = Arc::new(RecordingModel::default());
    run_in_a_process(second_store, model.clone(), &tone_envelope(false)).await;
    assert_the_writer_recalled_the_tone(&model, &first.run_id);
}
