//! The cloud adapters against emulated AWS (the moto server): the run store
//! conformance suite on DynamoDB, and the SQS queue's send/receive/release/
//! delete cycle. `BATON_TEST_AWS_ENDPOINT` points at a running moto (CI starts
//! one); otherwise each test starts `moto_server` on a free port and stops it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use baton_core::basics::ids::RunKey;
use baton_runtime::ports::RunLog;
use std::sync::Arc;
use std::time::Duration;

use baton_aws::{DynamoRunStore, SqsStepQueue};
use baton_core::state::run::{StepCommand, StepMessage};
use baton_runtime::ports::{StepCommit, StepQueue};
use baton_test_support::conformance::{
    capability_directory_conformance, run_store_conformance, thread_store_conformance,
};

fn unique(prefix: &str) -> String {
    moto_server::unique_name(prefix)
}

#[tokio::test]
async fn dynamodb_store_passes_the_conformance_suite() {
    let emulator = moto_server::MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&emulator.endpoint).await;
    let store = DynamoRunStore::new(&connection, unique("baton-conformance"));
    store.create_table_if_missing().await.unwrap();
    store.create_table_if_missing().await.unwrap();
    run_store_conformance(Arc::new(store), &unique("suite"))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn two_processes_creating_one_table_at_once_both_succeed() {
    let emulator = moto_server::MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&emulator.endpoint).await;
    for _ in 0..4 {
        let table = unique("baton-create-race");
        let left = DynamoRunStore::new(&connection, table.clone());
        let right = DynamoRunStore::new(&connection, table);
        let (left_created, right_created) = tokio::join!(
            left.create_table_if_missing(),
            right.create_table_if_missing()
        );
        left_created.unwrap();
        right_created.unwrap();
        run_store_conformance(Arc::new(left), &unique("race"))
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn dynamodb_capability_directory_passes_the_conformance_suite() {
    let emulator = moto_server::MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&emulator.endpoint).await;
    let store = DynamoRunStore::new(&connection, unique("baton-capabilities"));
    store.create_table_if_missing().await.unwrap();
    capability_directory_conformance(Arc::new(store), &unique("suite"))
        .await
        .unwrap();
}

#[tokio::test]
async fn dynamodb_thread_store_passes_the_conformance_suite() {
    let emulator = moto_server::MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&emulator.endpoint).await;
    let store = DynamoRunStore::new(&connection, unique("baton-threads"));
    store.create_table_if_missing().await.unwrap();
    thread_store_conformance(Arc::new(store), &unique("suite"))
        .await
        .unwrap();
}

#[tokio::test]
async fn dynamodb_audit_log_passes_the_conformance_suite() {
    let emulator = moto_server::MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&emulator.endpoint).await;
    let store = DynamoRunStore::new(&connection, unique("baton-audit"));
    store.create_table_if_missing().await.unwrap();
    baton_test_support::conformance::audit_log_conformance(Arc::new(store), &unique("suite"))
        .await
        .unwrap();
}

#[tokio::test]
async fn dynamodb_request_keys_pass_the_conformance_suite() {
    let emulator = moto_server::MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&emulator.endpoint).await;
    let store = DynamoRunStore::new(&connection, unique("baton-request-keys"));
    store.create_table_if_missing().await.unwrap();
    baton_test_support::conformance::request_keys_conformance(Arc::new(store), &unique("suite"))
        .await
        .unwrap();
}

#[tokio::test]
async fn sqs_queue_sends_receives_releases_and_deletes() {
    let emulator = moto_server::MotoServer::start().unwrap();
    let configuration = emulator.sdk_configuration().await;
    let connection = baton_aws::AwsConnection::to_emulator(&emulator.endpoint).await;
    let queue_url = moto_server::create_unique_queue(&configuration, "baton-steps", None)
        .await
        .unwrap();
    let queue = SqsStepQueue::new(&connection, queue_url);
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

/// Step messages carry their tenant as `MessageGroupId` (what makes a
/// standard queue an SQS fair queue across tenants), delayed ones too.
#[tokio::test]
async fn step_messages_are_grouped_by_tenant_for_a_fair_queue() {
    let emulator = moto_server::MotoServer::start().unwrap();
    let configuration = emulator.sdk_configuration().await;
    let connection = baton_aws::AwsConnection::to_emulator(&emulator.endpoint).await;
    let queue_url = moto_server::create_unique_queue(&configuration, "baton-fair", None)
        .await
        .unwrap();
    let queue = SqsStepQueue::new(&connection, queue_url.clone());
    // A traced run's message carries its traceparent as an attribute too.
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let mut traced = StepMessage::new("tenant-a", "r1", StepCommand::Plan);
    traced.traceparent = Some(traceparent.into());
    queue
        .send(&[
            traced,
            StepMessage::new("tenant-b", "r2", StepCommand::Plan),
        ])
        .await
        .unwrap();
    queue
        .send_delayed(
            &StepMessage::new("tenant-c", "r3", StepCommand::Plan),
            Duration::ZERO,
        )
        .await
        .unwrap();
    let sqs = aws_sdk_sqs::Client::new(&configuration);
    let mut groups = Vec::new();
    for _ in 0..10 {
        let output = sqs
            .receive_message()
            .queue_url(&queue_url)
            .max_number_of_messages(10)
            .message_system_attribute_names(
                aws_sdk_sqs::types::MessageSystemAttributeName::MessageGroupId,
            )
            .message_attribute_names("All")
            .send()
            .await
            .unwrap();
        for message in output.messages() {
            let body: StepMessage = serde_json::from_str(message.body().unwrap()).unwrap();
            let attribute = message
                .message_attributes()
                .and_then(|attributes| attributes.get("traceparent"))
                .and_then(|value| value.string_value())
                .map(str::to_string);
            assert_eq!(attribute, body.traceparent, "{}", body.run_id);
            assert_eq!(body.traceparent.is_some(), body.run_id == "r1");
            let group = message
                .attributes()
                .and_then(|attributes| {
                    attributes.get(&aws_sdk_sqs::types::MessageSystemAttributeName::MessageGroupId)
                })
                .cloned()
                .unwrap_or_default();
            groups.push((body.tenant_id, group));
        }
        if groups.len() == 3 {
            break;
        }
    }
    groups.sort();
    assert_eq!(
        groups,
        [
            ("tenant-a".to_string(), "tenant-a".to_string()),
            ("tenant-b".to_string(), "tenant-b".to_string()),
            ("tenant-c".to_string(), "tenant-c".to_string()),
        ]
    );
}

/// A run whose envelope carries `payload` as an input.
fn run_carrying(payload: String, run_id: &str) -> baton_core::state::run::RunState {
    let envelope = baton_core::contracts::envelope::TaskEnvelope::parse_value(&serde_json::json!({
        "objective": "carry a large input",
        "inputs": {"notes": payload},
        "outputContract": {"schema": {"type": "object"}}
    }))
    .unwrap();
    baton_core::engine::start_run(
        baton_core::engine::NewRunIdentity {
            run_id: run_id.into(),
            tenant_id: "large".into(),
            correlation_id: "corr".into(),
            thread_id: "thread".into(),
            trace: None,
            submitted_by: None,
        },
        envelope,
        baton_core::basics::instant::Instant::from_unix_millis(1_767_225_600_000),
        3,
    )
    .state
}

#[tokio::test]
async fn run_state_is_stored_compressed_and_an_oversized_state_is_refused_clearly() {
    use baton_runtime::error::StoreError;

    let emulator = moto_server::MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&emulator.endpoint).await;
    let store = DynamoRunStore::new(&connection, unique("baton-large-state"));
    store.create_table_if_missing().await.unwrap();

    // 600 KB of JSON (over DynamoDB's 400 KB item limit) that compresses well.
    let compressible = "the same planning note, again. ".repeat(20_000);
    let state = run_carrying(compressible.clone(), "run-compressible");
    store
        .create_run(&state, vec![], vec![], None)
        .await
        .unwrap();
    let loaded = store
        .load_run(RunKey::new("large", "run-compressible"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(loaded.state.envelope.inputs["notes"], compressible.as_str());
    // Commits write it compressed too.
    store
        .commit_step(
            RunKey::new("large", "run-compressible"),
            StepCommit {
                expected_version: loaded.version,
                previous_status: loaded.state.status(),
                retain_until: None,
                state: loaded.state,
                events: vec![],
                outbox: vec![],
                consumed_message_id: None,
                entries: vec![],
            },
        )
        .await
        .unwrap();

    // 700 KB that does not compress (pseudo-random letters and digits):
    // stored in parts (one DynamoDB item holds 400 KB) and read back whole.
    let alphabet: Vec<char> = ('a'..='z').chain('A'..='Z').chain('0'..='9').collect();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut incompressible = |length: usize| -> String {
        (0..length)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                alphabet[(seed >> 33) as usize % alphabet.len()]
            })
            .collect()
    };
    let large = incompressible(700_000);
    store
        .create_run(
            &run_carrying(large.clone(), "run-large"),
            vec![],
            vec![],
            None,
        )
        .await
        .unwrap();
    let loaded = store
        .load_run(RunKey::new("large", "run-large"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(loaded.state.envelope.inputs["notes"], large.as_str());

    // 6 MB that does not compress: over what one run's state may take
    // (ten parts), refused, nothing written.
    let error = store
        .create_run(
            &run_carrying(incompressible(6_000_000), "run-huge"),
            vec![],
            vec![],
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::TooLarge(_)), "{error}");
    assert!(error.to_string().contains("run-huge"), "{error}");
    assert!(
        store
            .load_run(RunKey::new("large", "run-huge"))
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn a_commit_over_one_transactions_hundred_actions_is_refused_unretryably_and_writes_nothing()
{
    use baton_runtime::error::StoreError;

    let emulator = moto_server::MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&emulator.endpoint).await;
    let store = DynamoRunStore::new(&connection, unique("baton-wide-commit"));
    store.create_table_if_missing().await.unwrap();
    let state = run_carrying("small".into(), "run-wide");
    store
        .create_run(&state, vec![], vec![], None)
        .await
        .unwrap();
    let stamp = baton_core::wire::frames::FrameStamp::new(
        baton_core::basics::instant::Instant::from_unix_millis(1_000),
        1,
    );
    let frames: Vec<_> = (0..120)
        .map(|index| baton_core::wire::frames::log(&stamp, format!("frame {index}")))
        .collect();
    let error = store
        .commit_step(
            RunKey::new("large", "run-wide"),
            StepCommit {
                expected_version: 1,
                previous_status: state.status(),
                retain_until: None,
                state: state.clone(),
                events: frames,
                outbox: vec![],
                consumed_message_id: None,
                entries: vec![],
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::TooLarge(_)), "{error}");
    assert!(!error.is_retryable());
    assert!(error.to_string().contains("100"), "{error}");
    let stored = store
        .load_run(RunKey::new("large", "run-wide"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.version, 1, "nothing was written");
    assert!(
        store
            .read_events(RunKey::new("large", "run-wide"), 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_timer_waits_on_sqs_until_it_is_due() {
    let emulator = moto_server::MotoServer::start().unwrap();
    let configuration = emulator.sdk_configuration().await;
    let connection = baton_aws::AwsConnection::to_emulator(&emulator.endpoint).await;
    // The test reads the queue's attributes with an SDK client of its own.
    let client = aws_sdk_sqs::Client::new(&configuration);
    let queue_url = moto_server::create_unique_queue(&configuration, "baton-timers", None)
        .await
        .unwrap();
    let queue = SqsStepQueue::new(&connection, queue_url.clone());
    let in_ten_minutes = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + 600_000;
    let due = baton_core::basics::instant::Instant::from_unix_millis(in_ten_minutes);
    let timer = StepMessage::timer("t", "run-timer", "sla:node_2:1", due);

    // Its first hop is delayed until it is due (SQS allows 15 minutes).
    queue.send(std::slice::from_ref(&timer)).await.unwrap();
    assert!(queue.receive(10, Duration::ZERO).await.unwrap().is_empty());
    let attributes = client
        .get_queue_attributes()
        .queue_url(&queue_url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesDelayed)
        .send()
        .await
        .unwrap();
    let delayed = attributes
        .attributes()
        .and_then(|map| {
            map.get(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesDelayed)
        })
        .cloned();
    assert_eq!(delayed.as_deref(), Some("1"));

    // A worker that got it early sends a fresh copy with the time left.
    queue
        .send_delayed(&timer, Duration::from_secs(1))
        .await
        .unwrap();
    assert!(queue.receive(10, Duration::ZERO).await.unwrap().is_empty());
    let arrived = queue.receive(10, Duration::from_secs(5)).await.unwrap();
    assert_eq!(arrived.len(), 1);
    assert_eq!(arrived[0].message, timer);
}

/// Double texting on DynamoDB: the four strategies, two messages sent
/// together each time, the runs and the thread's lane on one table
/// (`baton_test_support::double_texting`; the model is its test double).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_messages_sent_together_obey_each_multitask_strategy_on_dynamodb() {
    let emulator = moto_server::MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&emulator.endpoint).await;
    let store = Arc::new(DynamoRunStore::new(
        &connection,
        unique("baton-double-texting"),
    ));
    store.create_table_if_missing().await.unwrap();
    baton_test_support::double_texting::double_texting_suite(
        store.clone(),
        store,
        &unique("suite"),
    )
    .await;
}

/// A plan with two exclusive branches takes exactly one on DynamoDB (the
/// scenario of `baton_test_support::conformance::two_branches_take_one`; the model is its test
/// double, the queue in memory as in the other whole-run tests here).
#[tokio::test(flavor = "multi_thread")]
async fn two_exclusive_branches_take_one_on_dynamodb() {
    let emulator = moto_server::MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&emulator.endpoint).await;
    let store = DynamoRunStore::new(&connection, unique("baton-branches"));
    store.create_table_if_missing().await.unwrap();
    baton_test_support::conformance::two_branches_take_one(Arc::new(store)).await;
}

#[tokio::test]
async fn dynamodb_memory_passes_the_conformance_suite() {
    let emulator = moto_server::MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&emulator.endpoint).await;
    let store = DynamoRunStore::new(&connection, unique("baton-memory"));
    store.create_table_if_missing().await.unwrap();
    // DynamoDB's TTL removes expired items: retention's pass removes none.
    baton_test_support::conformance::memory_store_conformance(
        Arc::new(store),
        &unique("suite"),
        true,
    )
    .await
    .unwrap();
}
