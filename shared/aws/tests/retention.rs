//! Retention and the live-run counter on DynamoDB (moto): the shared
//! retention case, then the table itself. After the sweeper's pass every
//! item of the ended run (run, sequence, parts, frames, listings, the
//! idempotency key) carries its expiry, so DynamoDB's TTL deletes it all;
//! the parked run of the same age carries none. moto does not delete
//! expired items itself, so the test reads the stamps (reads already treat
//! an expired item as gone).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use baton_aws::DynamoRunStore;
use baton_runtime::clock::OffsetClock;
use baton_test_support::conformance::retention_conformance;
use moto_server::{MotoServer, unique_name};

/// Every item whose partition key starts with `prefix`: `(pk, sk, expiresAt)`.
async fn items_under(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    prefix: &str,
) -> Vec<(String, String, Option<u64>)> {
    let mut found = Vec::new();
    let mut start = None;
    loop {
        let page = client
            .scan()
            .table_name(table)
            .filter_expression("begins_with(pk, :prefix)")
            .expression_attribute_values(":prefix", AttributeValue::S(prefix.into()))
            .set_exclusive_start_key(start)
            .send()
            .await
            .unwrap();
        for item in page.items() {
            let text = |name: &str| item.get(name).unwrap().as_s().unwrap().clone();
            let expires = item
                .get("expiresAt")
                .map(|value| value.as_n().unwrap().parse().unwrap());
            found.push((text("pk"), text("sk"), expires));
        }
        match page.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => return found,
        }
    }
}

#[tokio::test]
async fn an_ended_run_past_retention_is_stamped_whole_and_a_parked_run_is_kept() {
    let moto = MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let table = unique_name("baton-retention");
    let clock = Arc::new(OffsetClock::new());
    let store = Arc::new(DynamoRunStore::new(&connection, &table).with_clock(clock.clone()));
    store.create_table_if_missing().await.unwrap();
    let case = retention_conformance(
        store.as_ref(),
        &clock,
        store.as_ref(),
        &unique_name("dynamo"),
    )
    .await
    .unwrap();

    let client = aws_sdk_dynamodb::Client::new(&moto.sdk_configuration().await);
    let now_seconds = baton_runtime::ports::Clock::now(clock.as_ref()).unix_millis() / 1000;
    let run_items = items_under(
        &client,
        &table,
        &format!("T#{}#R#{}", case.tenant_id, case.ended_run_id),
    )
    .await;
    assert!(
        run_items.len() >= 4,
        "the ended run's items are found: {run_items:?}"
    );
    let tenant_items = items_under(&client, &table, &format!("T#{}#", case.tenant_id)).await;
    let of_the_ended_run: Vec<_> = tenant_items
        .iter()
        .filter(|(pk, sk, _)| pk.contains(&case.ended_run_id) || sk.contains(&case.ended_run_id))
        .collect();
    assert!(
        of_the_ended_run
            .iter()
            .any(|(pk, _, _)| pk.contains("#IDEM#")),
        "its idempotency key's item is among them: {of_the_ended_run:?}"
    );
    assert!(
        of_the_ended_run
            .iter()
            .any(|(pk, _, _)| pk.ends_with("#RUNS")),
        "its listing is among them: {of_the_ended_run:?}"
    );
    for (pk, sk, expires) in &of_the_ended_run {
        if pk.contains("#IDEM#") {
            // The conformance suite submitted under the expired key again:
            // its item now names that new run (the create's condition,
            // `expiresAt <= now`, held because the pass had stamped it).
            continue;
        }
        let expires = expires.unwrap_or_else(|| panic!("{pk} {sk} carries no expiry"));
        assert!(
            expires <= now_seconds,
            "{pk} {sk} expires by now ({expires} > {now_seconds})"
        );
    }
    let parked = items_under(
        &client,
        &table,
        &format!("T#{}#R#{}", case.tenant_id, case.parked_run_id),
    )
    .await;
    assert!(parked.len() >= 3, "the parked run's items: {parked:?}");
    assert!(
        parked.iter().all(|(_, _, expires)| expires.is_none()),
        "nothing of the parked run expires: {parked:?}"
    );
    let marks = items_under(&client, &table, "RETAIN#").await;
    assert!(
        marks
            .iter()
            .all(|(_, sk, _)| !sk.contains(&case.ended_run_id)),
        "the pass deleted the run's mark: {marks:?}"
    );
}

#[tokio::test]
async fn the_dynamodb_stream_leases_pass_the_conformance_case() {
    let moto = MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let store = DynamoRunStore::new(&connection, unique_name("baton-streams"));
    store.create_table_if_missing().await.unwrap();
    baton_test_support::conformance::stream_lease_conformance(&store, &unique_name("dynamo"))
        .await
        .unwrap();
}

/// A run's stream counter goes with its last stream: the tenant's streams
/// partition holds the runs being watched, not every run ever watched.
#[tokio::test]
async fn a_runs_stream_counter_is_deleted_with_its_last_stream() {
    use baton_core::basics::ids::RunKey;
    use baton_core::basics::instant::Instant;
    use baton_runtime::ports::{StreamCaps, StreamLeases, StreamOpening};
    let moto = MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let table = unique_name("baton-stream-counters");
    let store = DynamoRunStore::new(&connection, table.clone());
    store.create_table_if_missing().await.unwrap();
    let tenant = unique_name("watcher");
    let caps = StreamCaps {
        per_run: 8,
        per_tenant: 64,
    };
    let now = Instant::from_unix_millis(1_767_225_600_000);
    let until = Instant::from_unix_millis(1_767_225_660_000);
    for run in ["run-a", "run-b"] {
        for stream in ["s1", "s2"] {
            let opened = store
                .open_stream(RunKey::new(&tenant, run), stream, caps, now, until)
                .await
                .unwrap();
            assert_eq!(opened, StreamOpening::Opened);
        }
    }
    let client = aws_sdk_dynamodb::Client::new(&moto.sdk_configuration().await);
    let partition = format!("T#{tenant}#STREAMS");
    let sort_keys = || async {
        let mut keys: Vec<String> = items_under(&client, &table, &partition)
            .await
            .into_iter()
            .map(|(_, sk, _)| sk)
            .collect();
        keys.sort();
        keys
    };
    assert!(sort_keys().await.contains(&"#OPEN#run-a".to_string()));
    store
        .close_stream(RunKey::new(&tenant, "run-a"), "s1")
        .await
        .unwrap();
    assert!(
        sort_keys().await.contains(&"#OPEN#run-a".to_string()),
        "one stream of run-a is still open"
    );
    store
        .close_stream(RunKey::new(&tenant, "run-a"), "s2")
        .await
        .unwrap();
    let left = sort_keys().await;
    assert!(!left.contains(&"#OPEN#run-a".to_string()), "{left:?}");
    assert!(left.contains(&"#OPEN#run-b".to_string()), "{left:?}");
    // Opened again, it is counted from one.
    store
        .open_stream(RunKey::new(&tenant, "run-a"), "s3", caps, now, until)
        .await
        .unwrap();
    assert!(sort_keys().await.contains(&"#OPEN#run-a".to_string()));
}

#[tokio::test]
async fn the_dynamodb_schedule_book_passes_the_conformance_case() {
    let moto = MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let store = DynamoRunStore::new(&connection, unique_name("baton-schedules"));
    store.create_table_if_missing().await.unwrap();
    baton_test_support::conformance::schedule_book_conformance(&store, &unique_name("dynamo"))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_key_whose_run_is_gone_before_its_own_item_expires_makes_a_new_run() {
    // DynamoDB's TTL deletes items in no order, and the retention pass may
    // not have stamped the key's item yet: the run can be gone while its
    // key still names it. A submission under the key then makes a new run
    // (it used to answer with the gone run, which no read could find: a 500).
    let moto = MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let table = unique_name("baton-stale-key");
    let store = DynamoRunStore::new(&connection, &table);
    store.create_table_if_missing().await.unwrap();
    let tenant = unique_name("tenant");
    let (first, events, outbox) = baton_test_support::conformance::new_run(&tenant, "run-first");
    use baton_runtime::ports::{CreateOutcome, RunLog};
    assert_eq!(
        store
            .create_run(&first, events.clone(), outbox.clone(), Some("the-key"))
            .await
            .unwrap(),
        CreateOutcome::Created
    );
    // The same key while its run lives: that run.
    let (again, events, outbox) = baton_test_support::conformance::new_run(&tenant, "run-again");
    assert_eq!(
        store
            .create_run(&again, events.clone(), outbox.clone(), Some("the-key"))
            .await
            .unwrap(),
        CreateOutcome::AlreadyExists {
            run_id: "run-first".into()
        }
    );
    // TTL takes the run's item first.
    let client = aws_sdk_dynamodb::Client::new(&moto.sdk_configuration().await);
    client
        .delete_item()
        .table_name(&table)
        .key("pk", AttributeValue::S(format!("T#{tenant}#R#run-first")))
        .key("sk", AttributeValue::S("RUN".into()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        store
            .create_run(&again, events, outbox, Some("the-key"))
            .await
            .unwrap(),
        CreateOutcome::Created,
        "the key names no run any more: a new one takes it"
    );
    let loaded = store
        .load_run(baton_core::basics::ids::RunKey::new(&tenant, "run-again"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(loaded.state.run_id, "run-again");
    // And the key now names the new run.
    let (third, events, outbox) = baton_test_support::conformance::new_run(&tenant, "run-third");
    assert_eq!(
        store
            .create_run(&third, events, outbox, Some("the-key"))
            .await
            .unwrap(),
        CreateOutcome::AlreadyExists {
            run_id: "run-again".into()
        }
    );
}
