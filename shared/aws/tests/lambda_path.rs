//! The queue-triggered step function's path (`process_step_queue_batch`)
//! on DynamoDB and SQS (moto): a twin delivery that finds its node claimed
//! by a living worker is made visible again after its `retry_after`
//! (`ChangeMessageVisibility`), not after the queue's visibility timeout
//! (two minutes here, 30 in the template). The scripted OpenAI-compatible
//! server stands in for the model; the engine, the store and the queue are
//! the real ones.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_aws::{DynamoRunStore, SqsStepQueue};
use baton_llm::{OpenAiCompatibleConfig, OpenAiCompatibleProvider};
use baton_runtime::ports::{Clock, StepQueue};
use baton_runtime::services::{OrchestratorSettings, StepOutcome};
use baton_runtime::worker::{QueueBatch, QueuedRecord, process_step_queue_batch};
use baton_test_support::TestServices;
use moto_server::{MotoServer, unique_name};
use scripted_llm::{Behavior, ScriptedLlmServer};

const QUEUE_VISIBILITY_SECONDS: u32 = 120;

#[tokio::test(flavor = "multi_thread")]
async fn a_busy_twin_delivery_is_visible_again_after_its_retry_after() {
    let moto = MotoServer::start().unwrap();
    let configuration = moto.sdk_configuration().await;
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let store = DynamoRunStore::new(&connection, unique_name("baton-lambda-path"));
    store.create_table_if_missing().await.unwrap();
    let queue_url = moto_server::create_unique_queue(
        &configuration,
        "baton-lambda-path",
        Some(QUEUE_VISIBILITY_SECONDS),
    )
    .await
    .unwrap();
    let queue: Arc<dyn StepQueue> = Arc::new(SqsStepQueue::new(&connection, queue_url));
    let model = ScriptedLlmServer::start().await.unwrap();
    let provider = OpenAiCompatibleProvider::new(OpenAiCompatibleConfig::new(
        model.base_url(),
        "scripted",
        None,
    ))
    .unwrap();
    let built = Arc::new(
        TestServices::with_model(Arc::new(provider))
            .store(Arc::new(store))
            .queue(queue.clone())
            .settings(OrchestratorSettings {
                busy_retry_delay: Duration::from_secs(1),
                ..OrchestratorSettings::default()
            })
            .worker_id("lambda-path")
            .build(),
    );
    let steps = built.services.steps.clone();

    built
        .services
        .runs
        .submit(
            "t",
            &baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json"),
        )
        .await
        .unwrap();
    let plan = queue
        .receive(1, Duration::from_secs(5))
        .await
        .unwrap()
        .remove(0);
    steps.handle(&plan.message).await.unwrap();
    queue.acknowledge(&plan.receipt).await.unwrap();
    // The plan's first node; its sibling branches are taken off the queue
    // (this test needs one node only).
    let mut nodes = queue.receive(10, Duration::from_secs(5)).await.unwrap();
    let node = nodes.remove(0);
    for sibling in nodes {
        queue.acknowledge(&sibling.receipt).await.unwrap();
    }

    // The first delivery claims the node and waits on a slow model.
    model.set_default_behavior(Behavior::SlowValid { delay_ms: 4_000 });
    let first = {
        let steps = steps.clone();
        let message = node.message.clone();
        tokio::spawn(async move { steps.handle(&message).await })
    };
    let asked = Instant::now();
    while model.request_count() == 0 {
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "the model was never asked"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Its twin arrives (SQS delivers at least once) while the node runs.
    queue
        .send(std::slice::from_ref(&node.message))
        .await
        .unwrap();
    let twin = queue
        .receive(1, Duration::from_secs(5))
        .await
        .unwrap()
        .remove(0);
    assert_eq!(twin.message.message_id, node.message.message_id);
    let failed = process_step_queue_batch(
        &steps,
        QueueBatch {
            records: vec![QueuedRecord {
                message_id: "twin".into(),
                body: serde_json::to_string(&twin.message).unwrap(),
                receipt: Some(twin.receipt.clone()),
                receive_count: twin.receive_count,
            }],
            deadline: Some(
                baton_runtime::clock::SystemClock
                    .now()
                    .plus(Duration::from_secs(60)),
            ),
            redelivery: Some(queue.as_ref()),
        },
    )
    .await;
    assert_eq!(
        failed,
        vec!["twin".to_string()],
        "the busy twin is reported for redelivery"
    );

    // Visible again after its retry_after (1 s), long before the queue's
    // two-minute visibility timeout.
    let released = Instant::now();
    let again = queue.receive(1, Duration::from_secs(10)).await.unwrap();
    assert_eq!(
        again.len(),
        1,
        "the twin was not visible again within 10 s of its release (the queue's timeout is {QUEUE_VISIBILITY_SECONDS} s)"
    );
    assert_eq!(again[0].message.message_id, node.message.message_id);
    eprintln!(
        "the busy twin was visible again {} ms after its release",
        released.elapsed().as_millis()
    );
    queue.acknowledge(&again[0].receipt).await.unwrap();

    let outcome = first.await.unwrap().unwrap();
    assert!(
        matches!(outcome, StepOutcome::Committed { .. }),
        "the first delivery commits: {outcome:?}"
    );
    assert_eq!(
        model.request_count(),
        1,
        "the model was asked once for the node"
    );
}
