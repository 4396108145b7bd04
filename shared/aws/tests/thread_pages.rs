//! A thread read by page on DynamoDB (moto): the time index every recorded
//! exchange gets, a retried step's exchange recorded again at another time
//! read once (its first index entry skipped), and a thread written before
//! the index (exchange items only, as earlier versions stored them) read
//! whole once, indexed, and paged from then on.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use aws_sdk_dynamodb::types::AttributeValue;
use baton_aws::DynamoRunStore;
use baton_core::basics::ids::ThreadKey;
use baton_core::records::chat::ChatExchange;
use baton_runtime::ports::ThreadStore;
use moto_server::{MotoServer, unique_name};

fn exchange(index: u64) -> ChatExchange {
    ChatExchange {
        run_id: format!("run_{index:032x}"),
        at_millis: 1_000 + index,
        user: format!("message {index}"),
        assistant: format!("answer {index}"),
        agent: None,
        drafts: Vec::new(),
        interrupted: false,
        summary: None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn threads_page_through_their_time_index_and_old_ones_are_indexed_once() {
    let moto = MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let table = unique_name("baton-thread-pages");
    let store = DynamoRunStore::new(&connection, &table);
    store.create_table_if_missing().await.unwrap();
    let key = ThreadKey::new("t", "paged");
    for index in 0..5 {
        store.record_exchange(key, &exchange(index)).await.unwrap();
    }
    // A retried step records run 2's exchange again, later.
    let again = ChatExchange {
        at_millis: 2_000,
        ..exchange(2)
    };
    store.record_exchange(key, &again).await.unwrap();
    let newest = store
        .thread_exchanges_before(key, None, 3)
        .await
        .unwrap()
        .unwrap();
    let runs: Vec<u64> = newest.exchanges.iter().map(|e| e.at_millis).collect();
    assert_eq!(
        runs,
        vec![1_003, 1_004, 2_000],
        "newest three, oldest first"
    );
    assert!(newest.older);
    let rest = store
        .thread_exchanges_before(key, Some(&(1_003, exchange(3).run_id)), 10)
        .await
        .unwrap()
        .unwrap();
    let runs: Vec<u64> = rest.exchanges.iter().map(|e| e.at_millis).collect();
    assert_eq!(runs, vec![1_000, 1_001], "run 2's stale entry is skipped");
    assert!(!rest.older);

    // A thread as an earlier version wrote it: exchange items, no index.
    let client = aws_sdk_dynamodb::Client::new(&moto.sdk_configuration().await);
    for index in 0..4 {
        let old = exchange(index);
        client
            .put_item()
            .table_name(&table)
            .item("pk", AttributeValue::S("T#t#THREAD#old".into()))
            .item("sk", AttributeValue::S(format!("X#{}", old.run_id)))
            .item(
                "exchange",
                AttributeValue::S(serde_json::to_string(&old).unwrap()),
            )
            .item("atMillis", AttributeValue::N(old.at_millis.to_string()))
            .send()
            .await
            .unwrap();
    }
    let old_key = ThreadKey::new("t", "old");
    let page = store
        .thread_exchanges_before(old_key, None, 2)
        .await
        .unwrap()
        .unwrap();
    let runs: Vec<u64> = page.exchanges.iter().map(|e| e.at_millis).collect();
    assert_eq!(runs, vec![1_002, 1_003]);
    assert!(page.older);
    let items = client
        .query()
        .table_name(&table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", AttributeValue::S("T#t#THREAD#old".into()))
        .send()
        .await
        .unwrap();
    let sort_keys: Vec<&str> = items
        .items()
        .iter()
        .map(|item| item["sk"].as_s().unwrap().as_str())
        .collect();
    assert_eq!(
        sort_keys
            .iter()
            .filter(|key| key.starts_with("XT#"))
            .count(),
        4,
        "every old exchange got its entry: {sort_keys:?}"
    );
    assert!(sort_keys.contains(&"XINDEXED"), "{sort_keys:?}");
    assert!(
        store
            .thread_exchanges_before(ThreadKey::new("t", "none"), None, 5)
            .await
            .unwrap()
            .is_none(),
        "no thread, no page"
    );
    let none = client
        .query()
        .table_name(&table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", AttributeValue::S("T#t#THREAD#none".into()))
        .send()
        .await
        .unwrap();
    assert_eq!(none.count(), 0, "reading no thread writes nothing");
}
