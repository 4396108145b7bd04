//! The sweeper on DynamoDB + SQS (moto), on the step queue as the template
//! ships it: one sweep, two node leases after the writes, re-sends a child
//! run's end (an outbox entry its last commit wrote for its parent, whose
//! send was lost) and the first steps of runs whose API-side send was
//! lost, and marks each re-sent, so the next sweep re-sends nothing until
//! twice the wait has passed. Before entries were keyed by the run that
//! consumes them, the child's entry could not be marked and every sweep
//! stopped on it. The queue that loses sends is a fault wrapper around the
//! real SQS queue; the store, the queue and the sweeper are the real ones.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use baton_core::basics::ids::RunKey;
use baton_runtime::ports::RunLog;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use baton_aws::{DynamoRunStore, SqsStepQueue};
use baton_core::state::run::{StepCommand, StepMessage};
use baton_runtime::clock::OffsetClock;
use baton_runtime::error::QueueError;
use baton_runtime::ports::{ReceivedStep, StepCommit, StepQueue};
use baton_runtime::services::OutboxSweeper;
use baton_test_support::{SchemaShapedModel, TestServices};
use moto_server::{MotoServer, unique_name};

/// The real queue, its sends lost while `losing` is set (a process that
/// died, or SQS failing, between a commit and its send).
struct LosingQueue {
    inner: Arc<dyn StepQueue>,
    losing: AtomicBool,
}

#[async_trait]
impl StepQueue for LosingQueue {
    async fn send(&self, messages: &[StepMessage]) -> Result<(), QueueError> {
        if self.losing.load(Ordering::SeqCst) {
            return Err(QueueError::Unavailable(
                "injected: the send was lost".into(),
            ));
        }
        self.inner.send(messages).await
    }
    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<ReceivedStep>, QueueError> {
        self.inner.receive(max, wait).await
    }
    async fn acknowledge(&self, receipt: &str) -> Result<(), QueueError> {
        self.inner.acknowledge(receipt).await
    }
    async fn release(&self, receipt: &str, delay: Duration) -> Result<(), QueueError> {
        self.inner.release(receipt, delay).await
    }
    async fn send_delayed(&self, message: &StepMessage, delay: Duration) -> Result<(), QueueError> {
        self.inner.send_delayed(message, delay).await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn one_sweep_recovers_a_child_run_s_end_and_lost_api_side_sends() {
    let moto = MotoServer::start().unwrap();
    let configuration = moto.sdk_configuration().await;
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let store = Arc::new(DynamoRunStore::new(
        &connection,
        unique_name("baton-sweeper"),
    ));
    store.create_table_if_missing().await.unwrap();
    let shipped = moto_server::create_shipped_step_queue(&configuration, "baton-sweeper")
        .await
        .unwrap();
    let sqs: Arc<dyn StepQueue> = Arc::new(SqsStepQueue::new(&connection, shipped.queue_url));
    let losing = Arc::new(LosingQueue {
        inner: sqs.clone(),
        losing: AtomicBool::new(true),
    });
    let services = TestServices::with_model(Arc::new(SchemaShapedModel))
        .store(store.clone())
        .queue(losing.clone())
        .worker_id("sweeper")
        .build()
        .services;
    let envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");

    // Two submissions whose first step was never sent: the API still
    // answers with the run (it is stored), the sweeper owes its send.
    let parent = services.runs.submit("t", &envelope).await.unwrap();
    let child = services.runs.submit("t", &envelope).await.unwrap();

    // The child's last commit writes its parent's step (the child's end);
    // its send is lost too.
    let child_ended = StepMessage {
        message_id: format!("{}:child-ended", parent.run_id),
        tenant_id: "t".into(),
        run_id: parent.run_id.clone(),
        command: StepCommand::ChildRunEnded {
            node_id: "node_agent".into(),
            attempt: 1,
            turn: 1,
            call_id: "call_1".into(),
            summary: serde_json::json!({"status": "completed"}),
        },
        not_before: None,
        traceparent: None,
    };
    let loaded = store
        .load_run(RunKey::new("t", &child.run_id))
        .await
        .unwrap()
        .unwrap();
    store
        .commit_step(
            RunKey::new("t", &child.run_id),
            StepCommit {
                expected_version: loaded.version,
                previous_status: loaded.state.status(),
                retain_until: None,
                state: loaded.state,
                events: vec![],
                outbox: vec![child_ended.clone()],
                consumed_message_id: None,
                entries: vec![],
            },
        )
        .await
        .unwrap();
    assert!(
        sqs.receive(10, Duration::from_secs(1))
            .await
            .unwrap()
            .is_empty(),
        "nothing was sent"
    );

    // One sweep two leases later re-sends all three and marks each re-sent.
    let stall_after = 2 * Duration::from_secs(shipped.timings.node_lease_seconds.into());
    let clock = Arc::new(OffsetClock::new());
    let sweeper = OutboxSweeper::new(store.clone(), sqs.clone(), clock.clone());
    assert_eq!(
        sweeper.sweep(stall_after, 1_000).await.unwrap().resent,
        0,
        "nothing is quiet for two leases yet"
    );
    clock.advance(stall_after + Duration::from_secs(1));
    let swept = sweeper.sweep(stall_after, 1_000).await.unwrap();
    assert_eq!(swept.resent, 3, "the child's end and both first steps");
    let mut delivered = Vec::new();
    for _ in 0..5 {
        for received in sqs.receive(10, Duration::from_secs(1)).await.unwrap() {
            delivered.push((
                received.message.run_id.clone(),
                received.message.command.kind_name(),
            ));
        }
    }
    delivered.sort();
    let mut expected = vec![
        (parent.run_id.clone(), "plan"),
        (child.run_id.clone(), "plan"),
        (parent.run_id.clone(), "child_run_ended"),
    ];
    expected.sort();
    assert_eq!(delivered, expected);
    assert_eq!(
        sweeper.sweep(stall_after, 1_000).await.unwrap().resent,
        0,
        "marked re-sent: the next sweep re-sends nothing"
    );
    clock.advance(stall_after);
    assert_eq!(
        sweeper.sweep(stall_after, 1_000).await.unwrap().resent,
        0,
        "after a re-send the wait doubles: not again two leases later"
    );
    clock.advance(stall_after + Duration::from_secs(1));
    assert_eq!(
        sweeper.sweep(stall_after, 1_000).await.unwrap().resent,
        3,
        "still unconsumed four leases after the first re-send: re-sent again"
    );
}
