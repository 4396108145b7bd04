//! Poison messages on the queue-triggered path (`process_step_queue_batch`,
//! as the `step` Lambda runs it) over DynamoDB and SQS from moto, on the
//! step queue as the template ships it (its visibility timeout, its redrive
//! policy: ten receives, then the dead-letter queue), and Lambda's SQS
//! event source emulated: receive, process, delete what the batch did not
//! report failed.
//!
//! - A step that fails for good in a run that can still be written (a store
//!   read that fails unretryably once, injected by a fault decorator around
//!   the DynamoDB store) ends the run `failed` with a `step_failed` error
//!   frame naming the step and the error; the message is consumed, never
//!   redelivered, and the DLQ stays empty.
//! - A step whose run can no longer be read (its stored state corrupted)
//!   cannot record anything: its message is redelivered up to the redrive
//!   bound (soon each time, not after its hold) and then reaches the
//!   dead-letter queue, exactly once; the dead-letter reader leaves it there.
//! - A dead-lettered step of a readable run (its holders all died) ends the
//!   run `step_failed` naming the step, read by the sweeper's dead-letter
//!   reader, which then removes it.
//!
//! The model is a test double answering by the requested schema.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use baton_core::basics::ids::RunKey;
use baton_runtime::ports::RunLog;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use baton_aws::{DynamoRunStore, SqsStepQueue};
use baton_core::state::run::{RunStatus, StepCommand, StepMessage};
use baton_core::wire::event::EventType;
use baton_runtime::ports::StepQueue;
use baton_runtime::queue::dead_letters::{DeadLetterReader, DeadLetterReport};
use baton_runtime::services::Services;
use baton_runtime::workers::{QueueBatch, QueuedRecord, process_step_queue_batch};
use baton_test_support::fault_injection::ThrottlingStore;
use baton_test_support::{SchemaShapedModel, TestServices};
use moto_server::{MotoServer, unique_name};

/// The redrive policy's bound, as the template ships it.
fn max_receives() -> u32 {
    moto_server::shipped_step_timings()
        .unwrap()
        .max_receive_count
}

struct Fixture {
    _moto: MotoServer,
    configuration: aws_config::SdkConfig,
    table: String,
    queue_url: String,
    dead_letter_url: String,
    queue: Arc<SqsStepQueue>,
    /// The dead-letter queue, as the sweeper reads it.
    dead_letter_queue: Arc<SqsStepQueue>,
    /// The DynamoDB store behind a fault injector (off until armed).
    faults: Arc<ThrottlingStore>,
    /// The same store without the injector: what the test itself reads.
    store: Arc<DynamoRunStore>,
    services: Services,
}

async fn fixture() -> Fixture {
    let moto = MotoServer::start().unwrap();
    let configuration = moto.sdk_configuration().await;
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let table = unique_name("baton-poison");
    let store = DynamoRunStore::new(&connection, &table);
    store.create_table_if_missing().await.unwrap();
    let shipped = moto_server::create_shipped_step_queue(&configuration, "baton-poison-steps")
        .await
        .unwrap();
    let (queue_url, dead_letter_url) = (shipped.queue_url, shipped.dead_letter_queue_url);
    let queue = Arc::new(SqsStepQueue::new(&connection, queue_url.clone()));
    let dead_letter_queue = Arc::new(SqsStepQueue::new(&connection, dead_letter_url.clone()));
    let store = Arc::new(store);
    let faults = Arc::new(ThrottlingStore::new(store.clone()));
    let services = TestServices::with_model(Arc::new(SchemaShapedModel))
        .store(faults.clone())
        .queue(queue.clone())
        .worker_id("poison")
        .build()
        .services;
    Fixture {
        _moto: moto,
        configuration,
        table,
        queue_url,
        dead_letter_url,
        queue,
        dead_letter_queue,
        faults,
        store,
        services,
    }
}

/// One poll of Lambda's SQS event source: receive a batch, hand it to the
/// step function's batch handler, delete what it did not report failed.
/// Returns how many records it handled.
/// Moves the next step message of the queue to the dead-letter queue, as
/// the redrive policy does after every holder died; returns its body.
async fn dead_letter_the_next_step(fixture: &Fixture) -> String {
    let sqs = aws_sdk_sqs::Client::new(&fixture.configuration);
    let step = sqs
        .receive_message()
        .queue_url(&fixture.queue_url)
        .max_number_of_messages(1)
        .wait_time_seconds(1)
        .send()
        .await
        .unwrap()
        .messages()[0]
        .clone();
    let body = step.body().unwrap().to_string();
    sqs.send_message()
        .queue_url(&fixture.dead_letter_url)
        .message_body(&body)
        .send()
        .await
        .unwrap();
    sqs.delete_message()
        .queue_url(&fixture.queue_url)
        .receipt_handle(step.receipt_handle().unwrap())
        .send()
        .await
        .unwrap();
    body
}

async fn poll_once(fixture: &Fixture) -> usize {
    let sqs = aws_sdk_sqs::Client::new(&fixture.configuration);
    let received = sqs
        .receive_message()
        .queue_url(&fixture.queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
        .send()
        .await
        .unwrap();
    let records: Vec<QueuedRecord> = received
        .messages()
        .iter()
        .map(|message| QueuedRecord {
            message_id: message.message_id().unwrap().to_string(),
            body: message.body().unwrap().to_string(),
            receipt: Some(message.receipt_handle().unwrap().to_string()),
            receive_count: message
                .attributes()
                .and_then(|attributes| {
                    attributes.get(&MessageSystemAttributeName::ApproximateReceiveCount)
                })
                .and_then(|count| count.parse().ok())
                .unwrap_or(1),
        })
        .collect();
    let handled = records.len();
    let receipts: Vec<(String, String)> = records
        .iter()
        .map(|record| (record.message_id.clone(), record.receipt.clone().unwrap()))
        .collect();
    let failed = process_step_queue_batch(
        &fixture.services.steps,
        QueueBatch {
            records,
            deadline: None,
            redelivery: Some(fixture.queue.as_ref() as &dyn StepQueue),
        },
    )
    .await;
    for (message_id, receipt) in receipts {
        if !failed.contains(&message_id) {
            sqs.delete_message()
                .queue_url(&fixture.queue_url)
                .receipt_handle(receipt)
                .send()
                .await
                .unwrap();
        }
    }
    handled
}

async fn messages_in(fixture: &Fixture, queue_url: &str) -> Vec<String> {
    let output = aws_sdk_sqs::Client::new(&fixture.configuration)
        .receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(10)
        // Looked at, not taken: visible again at once.
        .visibility_timeout(0)
        .wait_time_seconds(1)
        .send()
        .await
        .unwrap();
    output
        .messages()
        .iter()
        .map(|message| message.body().unwrap_or_default().to_string())
        .collect()
}

/// The sweeper's reader of this fixture's dead-letter queue.
fn dead_letter_reader(fixture: &Fixture) -> DeadLetterReader {
    DeadLetterReader::new(
        fixture.services.steps.clone(),
        fixture.dead_letter_queue.clone(),
    )
}

async fn status_of(fixture: &Fixture, run_id: &str) -> RunStatus {
    fixture
        .store
        .load_run(RunKey::new("t", run_id))
        .await
        .unwrap()
        .unwrap()
        .state
        .status()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_step_failed_for_good_ends_its_run_with_the_reason_and_is_consumed() {
    let fixture = fixture().await;
    let submitted = fixture
        .services
        .runs
        .submit(
            "t",
            &baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json"),
        )
        .await
        .unwrap();
    // The plan step; then the next store call fails for good (an item that
    // cannot be read, once): the node step that meets it cannot be retried.
    poll_once(&fixture).await;
    fixture.faults.corrupt_next(1);
    let started = Instant::now();
    loop {
        let status = status_of(&fixture, &submitted.run_id).await;
        if status == RunStatus::Failed {
            break;
        }
        assert_eq!(status, RunStatus::Running);
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the run never said why"
        );
        poll_once(&fixture).await;
    }
    assert_eq!(fixture.faults.calls_failed(), 1);
    let frames = fixture
        .services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap();
    let last = frames.last().unwrap();
    assert_eq!(last.event_type, EventType::Error);
    let payload = last.payload_value().unwrap();
    assert_eq!(payload["code"], "step_failed", "{payload}");
    let message = last.message.clone().unwrap_or_default();
    assert!(
        message.contains("execute_node")
            && message.contains("failed for good after 1 deliveries")
            && message.contains("an unreadable item (injected)"),
        "the frame names the step and the error: {message}"
    );
    // The rest of the run's messages drain as stale; nothing is redelivered
    // and nothing reaches the dead-letter queue.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    while poll_once(&fixture).await > 0 {}
    assert!(messages_in(&fixture, &fixture.queue_url).await.is_empty());
    assert!(
        messages_in(&fixture, &fixture.dead_letter_url)
            .await
            .is_empty(),
        "a run that said why leaves nothing for the dead-letter queue"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_step_of_an_unreadable_run_reaches_the_dead_letter_queue_once() {
    let fixture = fixture().await;
    let submitted = fixture
        .services
        .runs
        .submit(
            "t",
            &baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json"),
        )
        .await
        .unwrap();
    // The run's stored state is damaged before its plan step runs.
    aws_sdk_dynamodb::Client::new(&fixture.configuration)
        .update_item()
        .table_name(&fixture.table)
        .key(
            "pk",
            AttributeValue::S(format!("T#t#R#{}", submitted.run_id)),
        )
        .key("sk", AttributeValue::S("RUN".into()))
        .update_expression("SET #state = :garbage")
        .expression_attribute_names("#state", "state")
        .expression_attribute_values(":garbage", AttributeValue::S("{not json".into()))
        .send()
        .await
        .unwrap();
    let mut deliveries = 0;
    let started = Instant::now();
    // Each failed give-up is released for 2 s: ten deliveries take ~30 s.
    while started.elapsed() < Duration::from_secs(45) {
        deliveries += poll_once(&fixture).await;
    }
    assert_eq!(
        deliveries,
        max_receives() as usize,
        "delivered up to the redrive bound, then no more"
    );
    let dead = messages_in(&fixture, &fixture.dead_letter_url).await;
    assert_eq!(
        dead.len(),
        1,
        "the poison reached the dead-letter queue once"
    );
    let message: StepMessage = serde_json::from_str(&dead[0]).unwrap();
    assert_eq!(message.run_id, submitted.run_id);
    assert_eq!(message.command, StepCommand::Plan);
    // The dead-letter reader cannot end a run it cannot read: it leaves
    // the message for a person.
    let read = dead_letter_reader(&fixture).read(10).await.unwrap();
    assert_eq!(
        read,
        DeadLetterReport {
            runs_ended: 0,
            stale_dropped: 0,
            left: 1
        }
    );
    assert!(messages_in(&fixture, &fixture.queue_url).await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_lettered_step_of_a_readable_run_ends_it_naming_the_step() {
    let fixture = fixture().await;
    let submitted = fixture
        .services
        .runs
        .submit(
            "t",
            &baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json"),
        )
        .await
        .unwrap();
    poll_once(&fixture).await; // the plan
    // A node's message is moved to the dead-letter queue as the redrive
    // policy moves it after every holder died (the deaths themselves are
    // lambda_path.rs's): the run is still running.
    dead_letter_the_next_step(&fixture).await;
    assert_eq!(
        status_of(&fixture, &submitted.run_id).await,
        RunStatus::Running
    );

    let read = dead_letter_reader(&fixture).read(10).await.unwrap();
    assert_eq!(
        read,
        DeadLetterReport {
            runs_ended: 1,
            stale_dropped: 0,
            left: 0
        }
    );
    assert_eq!(
        status_of(&fixture, &submitted.run_id).await,
        RunStatus::Failed
    );
    let frames = fixture
        .services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap();
    let last = frames.last().unwrap();
    assert_eq!(last.event_type, EventType::Error);
    assert_eq!(last.payload_value().unwrap()["code"], "step_failed");
    let message = last.message.clone().unwrap_or_default();
    assert!(
        message.contains("execute_node") && message.contains("dead-lettered"),
        "the frame names the step and the cause: {message}"
    );
    assert!(
        messages_in(&fixture, &fixture.dead_letter_url)
            .await
            .is_empty(),
        "the reader removes what it ended"
    );
}

/// An outage, a recovery, then the dead letter read: the node's message
/// reached the dead-letter queue, the sweeper's re-send did the step, and
/// the run moved on. The old message is dropped, and the live run goes on.
#[tokio::test(flavor = "multi_thread")]
async fn a_dead_lettered_step_the_run_has_moved_past_is_dropped_not_used_to_fail_it() {
    let fixture = fixture().await;
    let submitted = fixture
        .services
        .runs
        .submit(
            "t",
            &baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json"),
        )
        .await
        .unwrap();
    poll_once(&fixture).await; // the plan
    let body = dead_letter_the_next_step(&fixture).await;
    let node: StepMessage = serde_json::from_str(&body).unwrap();
    let StepCommand::ExecuteNode { node_id, .. } = &node.command else {
        panic!("a node's step: {:?}", node.command);
    };
    // The recovery: the same step sent again (as the sweeper re-sends a
    // run's pending outbox entry), and done.
    aws_sdk_sqs::Client::new(&fixture.configuration)
        .send_message()
        .queue_url(&fixture.queue_url)
        .message_body(&body)
        .send()
        .await
        .unwrap();
    poll_once(&fixture).await;
    let moved_on = fixture
        .services
        .runs
        .load("t", &submitted.run_id)
        .await
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(
        moved_on.nodes[node_id].status(),
        baton_core::state::run::NodeStatus::Completed,
        "the re-sent step did the node"
    );

    let read = dead_letter_reader(&fixture).read(10).await.unwrap();
    assert_eq!(
        read,
        DeadLetterReport {
            runs_ended: 0,
            stale_dropped: 1,
            left: 0
        }
    );
    assert_ne!(
        status_of(&fixture, &submitted.run_id).await,
        RunStatus::Failed,
        "the live run is not failed by its old step"
    );
    assert!(
        messages_in(&fixture, &fixture.dead_letter_url)
            .await
            .is_empty(),
        "the stale message is removed"
    );
}
