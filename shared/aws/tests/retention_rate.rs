//! Retention's pass keeps up with 1,000 ended runs a minute on DynamoDB
//! (moto). A real five-node run is taken to completion by the engine on
//! the store; its items and its retention mark, as its commits left them,
//! are then copied under 999 more run ids (each with its own idempotency
//! key), so the table holds 1,000 ended runs exactly as real runs leave
//! them (their marks all in the first run's shard: one partition to read,
//! the pass's worst case). The pass's budget is set as the sweeper sets it,
//! from the function timeout `infra/template.yaml` ships. The sweeper function's passes, with its shipped
//! settings (`RetentionPass::SWEEPER_FUNCTION`), one after another as its
//! invocations would run them, must then leave every item of every run
//! carrying its expiry, every mark gone, within 60 s of pass time: the
//! pass keeps up with 1,000 runs ending a minute. moto (one Python
//! process, its core saturated here) answers far more slowly than
//! DynamoDB, so the figure holds with room on AWS.
//!
//! Test double: the model (`SchemaShapedModel`, schema-shaped answers).
//! The engine, the step service, the store and the pass are the real ones.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use baton_aws::DynamoRunStore;
use baton_core::state::run::RunStatus;
use baton_runtime::clock::SystemClock;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::services::RetentionPass;
use baton_runtime::workers::LocalRunner;
use baton_test_support::five_stages::{five_stage_envelope, five_stage_registry};
use baton_test_support::{SchemaShapedModel, TestServices};
use futures_util::{StreamExt, stream};
use moto_server::{MotoServer, unique_name};

type Item = HashMap<String, AttributeValue>;

/// Ended runs the pass must stamp within a minute.
const RUNS: usize = 1000;

/// The sweeper function's period: the pass must end within it.
const SWEEPER_PERIOD: Duration = Duration::from_secs(60);

/// Every item of the table.
async fn every_item(client: &aws_sdk_dynamodb::Client, table: &str) -> Vec<Item> {
    let mut found = Vec::new();
    let mut start = None;
    loop {
        let page = client
            .scan()
            .table_name(table)
            .set_exclusive_start_key(start)
            .send()
            .await
            .unwrap();
        found.extend(page.items.unwrap_or_default());
        match page.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => return found,
        }
    }
}

fn text<'a>(item: &'a Item, name: &str) -> &'a str {
    item.get(name).unwrap().as_s().unwrap()
}

/// Copies of the run's own items, its idempotency key's item and its mark
/// for copy `copy`: the run id (in keys and in the mark) and the key made
/// the copy's own, nothing else changed.
fn copied(items: &[Item], run_pk: &str, idempotency_key: &str, copy: usize) -> Vec<Item> {
    let copy_pk = format!("{run_pk}-copy{copy}");
    let copy_key = format!("{idempotency_key}-copy{copy}");
    let mut copies = Vec::new();
    for item in items {
        let mut item = item.clone();
        let pk = text(&item, "pk").to_string();
        if pk == run_pk {
            item.insert("pk".into(), AttributeValue::S(copy_pk.clone()));
            if item.contains_key("idempotencyKey") {
                item.insert("idempotencyKey".into(), AttributeValue::S(copy_key.clone()));
            }
        } else if pk.starts_with("RETAIN#") {
            item.insert("sk".into(), AttributeValue::S(copy_pk.clone()));
        } else if pk.ends_with(&format!("#IDEM#{idempotency_key}")) {
            item.insert(
                "pk".into(),
                AttributeValue::S(pk.replace(idempotency_key, &copy_key)),
            );
            let run_id = format!("{}-copy{copy}", text(&item, "runId"));
            item.insert("runId".into(), AttributeValue::S(run_id));
        } else {
            continue;
        }
        // A copy holds no place in the pending-outbox index.
        item.remove("gsi1pk");
        item.remove("gsi1sk");
        copies.push(item);
    }
    copies
}

async fn put_all(client: &aws_sdk_dynamodb::Client, table: &str, items: Vec<Item>) {
    let batches: Vec<Vec<Item>> = items.chunks(25).map(<[Item]>::to_vec).collect();
    stream::iter(batches.into_iter().map(|batch| async move {
        let mut requests: Vec<WriteRequest> = batch
            .into_iter()
            .map(|item| {
                WriteRequest::builder()
                    .put_request(PutRequest::builder().set_item(Some(item)).build().unwrap())
                    .build()
            })
            .collect();
        while !requests.is_empty() {
            let output = client
                .batch_write_item()
                .request_items(table, requests)
                .send()
                .await
                .unwrap();
            requests = output
                .unprocessed_items
                .and_then(|mut left| left.remove(table))
                .unwrap_or_default();
        }
    }))
    .buffer_unordered(8)
    .collect::<Vec<()>>()
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn one_sweeper_pass_stamps_a_thousand_ended_runs_within_its_minute() {
    let moto = MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let table = unique_name("baton-retention-rate");
    let store = Arc::new(DynamoRunStore::new(&connection, &table));
    store.create_table_if_missing().await.unwrap();
    let client = aws_sdk_dynamodb::Client::new(&moto.sdk_configuration().await);

    // One real five-node run, to its end.
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(Arc::new(SchemaShapedModel))
        .registry(Arc::new(five_stage_registry(&|role| {
            format!("Act as the {role}.")
        })))
        .store(store.clone())
        .queue(queue.clone())
        .build()
        .services;
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    let mut envelope = five_stage_envelope();
    envelope["idempotencyKey"] = "retention-rate".into();
    let submitted = services.runs.submit("t", &envelope).await.unwrap();
    let status = runner
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Completed);

    // Its items as its commits left them, then 999 copies.
    let run_pk = format!("T#t#R#{}", submitted.run_id);
    let written = every_item(&client, &table).await;
    let own: Vec<Item> = written
        .iter()
        .filter(|item| text(item, "pk") == run_pk)
        .cloned()
        .collect();
    let unstamped = own
        .iter()
        .filter(|item| !item.contains_key("expiresAt"))
        .count();
    assert!(
        written
            .iter()
            .any(|item| text(item, "pk").starts_with("RETAIN#") && text(item, "sk") == run_pk),
        "the ending commit marked the run for the pass"
    );
    eprintln!(
        "left to the pass: {:?}",
        own.iter()
            .filter(|item| !item.contains_key("expiresAt"))
            .map(|item| text(item, "sk"))
            .collect::<Vec<_>>()
    );
    assert!(
        unstamped > 0,
        "the ending commit leaves earlier commits' items to the pass"
    );
    let copies: Vec<Item> = (1..RUNS)
        .flat_map(|copy| copied(&written, &run_pk, "retention-rate", copy))
        .collect();
    put_all(&client, &table, copies).await;

    // One pass, as the sweeper function runs it.
    // Its budget as one invocation sets it: the template's timeout is the
    // time left at its start.
    let timeout = Duration::from_secs(u64::from(
        moto_server::shipped_step_timings()
            .unwrap()
            .sweeper_function_seconds,
    ));
    let pass_settings = RetentionPass::SWEEPER_FUNCTION.ending_before(timeout);
    assert!(
        pass_settings.budget + RetentionPass::LAST_BATCH_MARGIN <= timeout,
        "the pass leaves its last batch room within the function's {timeout:?}"
    );
    let started = Instant::now();
    let pass = pass_settings
        .run(store.as_ref(), &SystemClock)
        .await
        .unwrap();
    let took = started.elapsed();
    eprintln!(
        "retention pass over moto: {} ended runs ({} items each of {} left by earlier commits; {} stamped) in {:.1} s, {:.0} runs a minute",
        pass.runs,
        unstamped,
        own.len(),
        pass.items,
        took.as_secs_f64(),
        pass.runs as f64 * 60.0 / took.as_secs_f64()
    );
    assert_eq!(
        pass.runs as usize, RUNS,
        "the pass took up every marked run"
    );
    assert!(!pass.more, "no mark is left for the next pass");
    assert!(
        took < SWEEPER_PERIOD,
        "1,000 ended runs took {took:?}, past the sweeper's period of {SWEEPER_PERIOD:?}"
    );

    // Every item of every run, and every idempotency key, carries its expiry.
    let after = every_item(&client, &table).await;
    let of_runs: Vec<&Item> = after
        .iter()
        .filter(|item| text(item, "pk").starts_with(&run_pk) || text(item, "pk").contains("#IDEM#"))
        .collect();
    assert_eq!(
        of_runs.len(),
        RUNS * (own.len() + 1),
        "no item went missing"
    );
    let lacking: Vec<String> = of_runs
        .iter()
        .filter(|item| !item.contains_key("expiresAt"))
        .map(|item| format!("{} {}", text(item, "pk"), text(item, "sk")))
        .collect();
    assert!(lacking.is_empty(), "items left without expiry: {lacking:?}");
    let marks_left: Vec<&Item> = after
        .iter()
        .filter(|item| text(item, "pk").starts_with("RETAIN#"))
        .collect();
    assert!(
        marks_left.is_empty(),
        "every mark is deleted: {marks_left:?}"
    );
}
