//! A run's plan in an item of its own on DynamoDB (moto): after a whole
//! five-node run, the run item's `state` holds no plan and names the
//! version the plan item holds; another process's store loads the state
//! whole, plan included; and a plan item of another version than the run
//! item names (a commit landing during the read) is never taken for the
//! run's plan: the load reads again and, the tear lasting, says so instead
//! of answering a state without its plan. A run item written whole, plan
//! included (by an earlier Baton, or a fork's creation), is split by its
//! next commit, which writes the plan item.
//!
//! Test double: the model endpoint (the five-stage workload's instant
//! answers). The engine, the step service and the DynamoDB store are the
//! real ones.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::io::Read;
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use baton_aws::DynamoRunStore;
use baton_core::basics::ids::RunKey;
use baton_core::state::run::RunStatus;
use baton_runtime::error::StoreError;
use baton_runtime::ports::{LlmProvider, RunLog, StepCommit};
use baton_test_support::TestServices;
use baton_test_support::five_stages::{
    InstantFiveStageModel, five_stage_envelope, five_stage_registry,
};
use moto_server::{MotoServer, unique_name};

fn inflated(attribute: &AttributeValue) -> serde_json::Value {
    let AttributeValue::B(blob) = attribute else {
        panic!("not binary: {attribute:?}");
    };
    let mut json = Vec::new();
    flate2::read::DeflateDecoder::new(blob.as_ref())
        .read_to_end(&mut json)
        .unwrap();
    serde_json::from_slice(&json).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runs_plan_lives_in_its_own_item_and_is_read_back_whole() {
    let moto = MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let table = unique_name("baton-plan-item");
    let store = Arc::new(DynamoRunStore::new(&connection, table.clone()));
    store.create_table_if_missing().await.unwrap();
    let registry = Arc::new(five_stage_registry(&|role| format!("Act as the {role}.")));
    let model: Arc<dyn LlmProvider> = Arc::new(InstantFiveStageModel::new(&registry, 0));
    let finished = TestServices::with_model(model)
        .registry(registry)
        .store(store.clone())
        .run_to_the_end(store.as_ref(), "t", &five_stage_envelope())
        .await;
    let run_id = finished.run_id;

    let client = aws_sdk_dynamodb::Client::new(&moto.sdk_configuration().await);
    let pk = format!("T#t#R#{}", run_id);
    let item = |sk: &'static str| {
        let client = client.clone();
        let (table, pk) = (table.clone(), pk.clone());
        async move {
            client
                .get_item()
                .table_name(table)
                .key("pk", AttributeValue::S(pk))
                .key("sk", AttributeValue::S(sk.into()))
                .consistent_read(true)
                .send()
                .await
                .unwrap()
                .item
                .unwrap_or_else(|| panic!("no `{sk}` item"))
        }
    };
    let run_item = item("RUN").await;
    let plan_item = item("RUN#PLAN").await;
    let state_without_plan = inflated(&run_item["state"]);
    assert!(
        state_without_plan.get("plan").is_none(),
        "the run item's state leaves its plan out"
    );
    assert_eq!(run_item["planVersion"], AttributeValue::N("1".into()));
    assert_eq!(plan_item["planVersion"], AttributeValue::N("1".into()));
    let plan = inflated(&plan_item["plan"]);
    assert_eq!(plan["nodes"].as_array().unwrap().len(), 5, "{plan}");

    // Another process (a fresh store, nothing remembered) reads it whole.
    let elsewhere = DynamoRunStore::new(&connection, table.clone());
    let loaded = elsewhere
        .load_run(RunKey::new("t", &run_id))
        .await
        .unwrap()
        .unwrap();
    let loaded_plan = loaded.state.plan.as_deref().expect("the plan is put back");
    assert_eq!(serde_json::to_value(loaded_plan).unwrap(), plan);
    assert_eq!(loaded.state.status(), RunStatus::Completed);

    // Written whole, as an earlier Baton wrote it: the state with its
    // plan, no `planVersion`, no plan item. The next commit through a store
    // that loaded it must write the plan item.
    let mut whole = serde_json::to_value(&loaded.state).unwrap();
    assert!(whole.get("plan").is_some());
    whole["plan"] = plan.clone();
    let mut deflater = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut deflater, &serde_json::to_vec(&whole).unwrap()).unwrap();
    let mut whole_item = run_item.clone();
    whole_item.remove("planVersion");
    whole_item.insert(
        "state".into(),
        AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(
            deflater.finish().unwrap(),
        )),
    );
    client
        .put_item()
        .table_name(&table)
        .set_item(Some(whole_item))
        .send()
        .await
        .unwrap();
    client
        .delete_item()
        .table_name(&table)
        .key("pk", AttributeValue::S(pk.clone()))
        .key("sk", AttributeValue::S("RUN#PLAN".into()))
        .send()
        .await
        .unwrap();
    let upgrading = DynamoRunStore::new(&connection, table.clone());
    let key = RunKey::new("t", &run_id);
    let read_whole = upgrading.load_run(key).await.unwrap().unwrap();
    assert!(
        read_whole.state.plan.is_some(),
        "a whole item reads with its plan"
    );
    upgrading
        .commit_step(
            key,
            StepCommit {
                expected_version: read_whole.version,
                previous_status: read_whole.state.status(),
                retain_until: None,
                state: read_whole.state,
                events: Vec::new(),
                outbox: Vec::new(),
                consumed_message_id: None,
                entries: Vec::new(),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        item("RUN").await["planVersion"],
        AttributeValue::N("1".into())
    );
    assert_eq!(inflated(&item("RUN#PLAN").await["plan"]), plan);
    let reloaded = DynamoRunStore::new(&connection, table.clone())
        .load_run(key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        serde_json::to_value(reloaded.state.plan.as_deref().unwrap()).unwrap(),
        plan
    );

    // A plan item of another version than the run item names is a torn
    // read: never answered as the run's plan.
    client
        .update_item()
        .table_name(&table)
        .key("pk", AttributeValue::S(pk.clone()))
        .key("sk", AttributeValue::S("RUN#PLAN".into()))
        .update_expression("SET planVersion = :other")
        .expression_attribute_values(":other", AttributeValue::N("2".into()))
        .send()
        .await
        .unwrap();
    let torn = DynamoRunStore::new(&connection, table)
        .load_run(RunKey::new("t", &run_id))
        .await;
    assert!(
        matches!(torn, Err(StoreError::Unavailable(ref why)) if why.contains("kept changing")),
        "{torn:?}"
    );
}
