//! The cloud adapters against emulated AWS (the moto server): the run store
//! conformance suite on DynamoDB, and the SQS queue's send/receive/release/
//! delete cycle. `BATON_TEST_AWS_ENDPOINT` points at a running moto (CI starts
//! one); otherwise each test starts `moto_server` on a free port and stops it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::Duration;

use baton_aws::{DynamoRunStore, SqsStepQueue};
use baton_core::run::{StepCommand, StepMessage};
use baton_runtime::conformance::{capability_directory_conformance, run_store_conformance};
use baton_runtime::ports::StepQueue;

fn unique(prefix: &str) -> String {
    moto_server::unique_name(prefix)
}

#[tokio::test]
async fn dynamodb_store_passes_the_conformance_suite() {
    let emulator = moto_server::MotoServer::start().unwrap();
    let configuration = emulator.sdk_configuration().await;
    let store = DynamoRunStore::new(
        aws_sdk_dynamodb::Client::new(&configuration),
        unique("baton-conformance"),
    );
    store.create_table_if_missing().await.unwrap();
    store.create_table_if_missing().await.unwrap();
    run_store_conformance(Arc::new(store), &unique("suite"))
        .await
        .unwrap();
}

#[tokio::test]
async fn dynamodb_capability_directory_passes_the_conformance_suite() {
    let emulator = moto_server::MotoServer::start().unwrap();
    let configuration = emulator.sdk_configuration().await;
    let store = DynamoRunStore::new(
        aws_sdk_dynamodb::Client::new(&configuration),
        unique("baton-capabilities"),
    );
    store.create_table_if_missing().await.unwrap();
    capability_directory_conformance(Arc::new(store), &unique("suite"))
        .await
        .unwrap();
}

#[tokio::test]
async fn sqs_queue_sends_receives_releases_and_deletes() {
    let emulator = moto_server::MotoServer::start().unwrap();
    let configuration = emulator.sdk_configuration().await;
    let client = aws_sdk_sqs::Client::new(&configuration);
    let queue_url = client
        .create_queue()
        .queue_name(unique("baton-steps"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let queue = SqsStepQueue::new(client, queue_url);
    let messages: Vec<StepMessage> = (1..=12)
        .map(|attempt| {
            StepMessage::new(
                "t",
                "r",
                StepCommand::ExecuteNode {
                    node_id: "node_1".into(),
                    attempt,
                },
            )
        })
        .collect();
    queue.send(&messages).await.unwrap();
    let mut received = Vec::new();
    for _ in 0..10 {
        received.extend(queue.receive(10, Duration::from_secs(1)).await.unwrap());
        if received.len() == 12 {
            break;
        }
    }
    assert_eq!(received.len(), 12, "batches above 10 are split");
    let mut ids: Vec<String> = received
        .iter()
        .map(|step| step.message.message_id.clone())
        .collect();
    ids.sort();
    let mut expected: Vec<String> = messages
        .iter()
        .map(|message| message.message_id.clone())
        .collect();
    expected.sort();
    assert_eq!(ids, expected);
    assert!(received.iter().all(|step| step.receive_count == 1));
    queue
        .release(&received[0].receipt, Duration::ZERO)
        .await
        .unwrap();
    for step in &received[1..] {
        queue.acknowledge(&step.receipt).await.unwrap();
    }
    let again = queue.receive(10, Duration::from_secs(2)).await.unwrap();
    assert_eq!(again.len(), 1, "only the released message comes back");
    assert_eq!(again[0].message.message_id, received[0].message.message_id);
    assert_eq!(again[0].receive_count, 2);
    queue.acknowledge(&again[0].receipt).await.unwrap();
    assert!(
        queue
            .receive(10, Duration::from_secs(1))
            .await
            .unwrap()
            .is_empty()
    );
}
