//! The queue-triggered step function's path (`process_step_queue_batch`)
//! on DynamoDB and SQS (moto), on the step queue as the template ships it
//! (`infra/template.yaml`'s `Timeouts`: a 1,800 s visibility timeout, a
//! redrive policy, a 30 s node lease):
//!
//! - a twin delivery that finds its node claimed by a living worker is
//!   replaced by a fresh copy visible after its `retry_after`, not after
//!   the queue's visibility timeout, and without using up its receives;
//! - an invocation that dies mid-node (its future dropped while the model
//!   answers, as a killed Lambda leaves its records) gives its record back
//!   within one node lease: the handler holds each record one lease at a
//!   time (`ChangeMessageVisibility`), not for the queue's 30 minutes.
//! - a record done with early is not delivered again while a slow sibling
//!   keeps its batch running: it is deleted when its step ends.
//!
//! The scripted OpenAI-compatible server stands in for the model; the
//! engine, the store and the queue are the real ones.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use baton_core::basics::ids::RunKey;
use baton_runtime::ports::RunLog;
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_aws::{DynamoRunStore, SqsStepQueue};
use baton_llm::{OpenAiCompatibleConfig, OpenAiCompatibleProvider};
use baton_runtime::ports::{Clock, StepQueue};
use baton_runtime::services::{OrchestratorSettings, StepOutcome};
use baton_runtime::workers::{QueueBatch, QueuedRecord, process_step_queue_batch};
use baton_test_support::TestServices;
use moto_server::{MotoServer, unique_name};
use scripted_llm::{Behavior, ScriptedLlmServer};

#[tokio::test(flavor = "multi_thread")]
async fn a_busy_twin_delivery_is_visible_again_after_its_retry_after() {
    let moto = MotoServer::start().unwrap();
    let configuration = moto.sdk_configuration().await;
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let store = DynamoRunStore::new(&connection, unique_name("baton-lambda-path"));
    store.create_table_if_missing().await.unwrap();
    let shipped = moto_server::create_shipped_step_queue(&configuration, "baton-lambda-path")
        .await
        .unwrap();
    let queue_visibility_seconds = shipped.timings.queue_visibility_seconds;
    let queue: Arc<dyn StepQueue> = Arc::new(SqsStepQueue::new(&connection, shipped.queue_url));
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
    assert!(
        failed.is_empty(),
        "the busy twin is replaced by a fresh copy, not reported failed: {failed:?}"
    );

    // Visible again after its retry_after (1 s), long before the queue's
    // visibility timeout, as a fresh message: its receive count starts again.
    let released = Instant::now();
    let again = queue.receive(1, Duration::from_secs(10)).await.unwrap();
    assert_eq!(
        again.len(),
        1,
        "the twin was not visible again within 10 s of its release (the queue's timeout is {queue_visibility_seconds} s)"
    );
    assert_eq!(again[0].message.message_id, node.message.message_id);
    assert_eq!(
        again[0].receive_count, 1,
        "a busy node does not use up the delivery's receives"
    );
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

/// Receives from `queue_url` as the Lambda service's poller does: no
/// visibility of its own, so a record starts hidden for the queue's whole
/// visibility timeout.
async fn receive_as_the_event_source_mapping(
    client: &aws_sdk_sqs::Client,
    queue_url: &str,
) -> Vec<QueuedRecord> {
    let output = client
        .receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(5)
        .message_system_attribute_names(
            aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount,
        )
        .send()
        .await
        .unwrap();
    output
        .messages()
        .iter()
        .map(|message| QueuedRecord {
            message_id: message.message_id().unwrap().to_string(),
            body: message.body().unwrap().to_string(),
            receipt: message.receipt_handle().map(str::to_string),
            receive_count: message
                .attributes()
                .and_then(|attributes| {
                    attributes.get(
                        &aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount,
                    )
                })
                .and_then(|count| count.parse().ok())
                .unwrap_or(1),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_invocation_that_dies_mid_node_gives_its_record_back_within_one_lease() {
    let moto = MotoServer::start().unwrap();
    let configuration = moto.sdk_configuration().await;
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let store = DynamoRunStore::new(&connection, unique_name("baton-lambda-death"));
    store.create_table_if_missing().await.unwrap();
    let shipped = moto_server::create_shipped_step_queue(&configuration, "baton-lambda-death")
        .await
        .unwrap();
    let lease = Duration::from_secs(u64::from(shipped.timings.node_lease_seconds));
    let sqs = aws_sdk_sqs::Client::new(&configuration);
    let queue: Arc<dyn StepQueue> =
        Arc::new(SqsStepQueue::new(&connection, shipped.queue_url.clone()));
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
                node_lease: lease,
                ..OrchestratorSettings::default()
            })
            .worker_id("lambda-death")
            .build(),
    );
    let steps = built.services.steps.clone();
    let submitted = built
        .services
        .runs
        .submit(
            "t",
            &baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json"),
        )
        .await
        .unwrap();
    let invocation = |records: Vec<QueuedRecord>| {
        let (steps, queue) = (steps.clone(), queue.clone());
        async move {
            process_step_queue_batch(
                &steps,
                QueueBatch {
                    records,
                    deadline: Some(baton_runtime::clock::SystemClock.now().plus(
                        Duration::from_secs(u64::from(shipped.timings.function_seconds)),
                    )),
                    redelivery: Some(queue.as_ref()),
                },
            )
            .await
        }
    };
    // The plan step, one invocation.
    let plan = receive_as_the_event_source_mapping(&sqs, &shipped.queue_url).await;
    assert_eq!(plan.len(), 1);
    assert!(invocation(plan).await.is_empty());

    // The nodes the plan scheduled, in an invocation killed while the
    // model answers (the model takes 20 s; the invocation dies at once).
    model.set_default_behavior(Behavior::SlowValid { delay_ms: 20_000 });
    let mut held = Vec::new();
    let waited = Instant::now();
    while held.is_empty() {
        assert!(
            waited.elapsed() < Duration::from_secs(20),
            "no node was scheduled"
        );
        held = receive_as_the_event_source_mapping(&sqs, &shipped.queue_url).await;
    }
    let held_ids: Vec<String> = held
        .iter()
        .map(|record| record.message_id.clone())
        .collect();
    let dying = tokio::spawn(invocation(held));
    let asked = Instant::now();
    while model.request_count() < held_ids.len() {
        assert!(
            asked.elapsed() < Duration::from_secs(20),
            "the model was not asked for every node"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    dying.abort();
    let died = Instant::now();
    eprintln!(
        "an invocation holding {} records died mid-node",
        held_ids.len()
    );

    // Its records come back within one lease (plus the emulator's slack),
    // not after the queue's 30 minutes; the model now answers at once.
    model.set_default_behavior(Behavior::SlowValid { delay_ms: 50 });
    let mut returned = std::collections::BTreeSet::new();
    while returned.len() < held_ids.len() {
        assert!(
            died.elapsed() < lease + Duration::from_secs(15),
            "{} of {} records came back within {} s of the death (lease {} s, queue visibility {} s)",
            returned.len(),
            held_ids.len(),
            died.elapsed().as_secs(),
            lease.as_secs(),
            shipped.timings.queue_visibility_seconds
        );
        let records = receive_as_the_event_source_mapping(&sqs, &shipped.queue_url).await;
        for record in &records {
            if held_ids.contains(&record.message_id) {
                returned.insert(record.message_id.clone());
            }
        }
        if !records.is_empty() {
            invocation(records).await;
        }
    }
    eprintln!(
        "every record of the dead invocation was back {} ms after its death",
        died.elapsed().as_millis()
    );
    // The nodes it held run again and complete (a node busy under the dead
    // claim's lease is deferred until the lease runs out).
    let finishing = Instant::now();
    loop {
        let stored = built
            .services
            .runs
            .load("t", &submitted.run_id)
            .await
            .unwrap()
            .unwrap();
        let completed = stored
            .state
            .nodes
            .values()
            .filter(|node| node.status() == baton_core::state::run::NodeStatus::Completed)
            .count();
        if completed >= held_ids.len() {
            break;
        }
        assert!(
            finishing.elapsed() < lease + Duration::from_secs(30),
            "the nodes of the dead invocation did not complete: {completed} of {}",
            held_ids.len()
        );
        let records = receive_as_the_event_source_mapping(&sqs, &shipped.queue_url).await;
        if !records.is_empty() {
            invocation(records).await;
        }
    }
}

/// A provider brown-out: the model hangs past every invocation's time on
/// every call. Each run ends `failed` with an `error` frame naming the
/// step and that it ran out of time, at its last receive (the redrive
/// policy's, as shipped); nothing reaches the dead-letter queue while its
/// run is running, and the model is asked once per delivery at most.
///
/// The one shortened timing: each emulated invocation's deadline is 8 s
/// from its start (the deployed function has 300 s; 5 s of it are kept
/// for the commit, so the model has 3 s), so ten deliveries take a
/// minute, not 50. The queue, its visibility timeout and its redrive
/// policy are the shipped ones.
#[tokio::test(flavor = "multi_thread")]
async fn a_model_brown_out_ends_every_run_at_its_last_receive() {
    const RUNS: usize = 3;
    const INVOCATION_TIME: Duration = Duration::from_secs(8);
    let moto = MotoServer::start().unwrap();
    let configuration = moto.sdk_configuration().await;
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let store = Arc::new(DynamoRunStore::new(
        &connection,
        unique_name("baton-brown-out"),
    ));
    store.create_table_if_missing().await.unwrap();
    let shipped = moto_server::create_shipped_step_queue(&configuration, "baton-brown-out")
        .await
        .unwrap();
    let sqs = aws_sdk_sqs::Client::new(&configuration);
    let queue: Arc<dyn StepQueue> =
        Arc::new(SqsStepQueue::new(&connection, shipped.queue_url.clone()));
    let model = ScriptedLlmServer::start().await.unwrap();
    let provider = OpenAiCompatibleProvider::new(OpenAiCompatibleConfig::new(
        model.base_url(),
        "scripted",
        None,
    ))
    .unwrap();
    let built = Arc::new(
        TestServices::with_model(Arc::new(provider))
            .store(store.clone())
            .queue(queue.clone())
            .worker_id("brown-out")
            .build(),
    );
    let steps = built.services.steps.clone();
    let mut run_ids = Vec::new();
    for _ in 0..RUNS {
        let submitted = built
            .services
            .runs
            .submit(
                "t",
                &baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json"),
            )
            .await
            .unwrap();
        run_ids.push(submitted.run_id);
    }
    // Plans are made at once; every model call then hangs for ten minutes.
    model.set_default_behavior(Behavior::SlowValid { delay_ms: 600_000 });
    let started = Instant::now();
    let mut deliveries = 0;
    loop {
        let mut running = 0;
        for run_id in &run_ids {
            let stored = store
                .load_run(RunKey::new("t", run_id))
                .await
                .unwrap()
                .unwrap();
            if !stored.state.status().is_terminal() {
                running += 1;
            }
        }
        if running == 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "{running} of {RUNS} runs still running after {} s of brown-out",
            started.elapsed().as_secs()
        );
        // Lambda's event source: receive, invoke, delete what the batch
        // did not report failed.
        let records = receive_as_the_event_source_mapping(&sqs, &shipped.queue_url).await;
        if records.is_empty() {
            continue;
        }
        deliveries += records.len();
        let receipts: Vec<(String, String)> = records
            .iter()
            .map(|record| (record.message_id.clone(), record.receipt.clone().unwrap()))
            .collect();
        let failed = process_step_queue_batch(
            &steps,
            QueueBatch {
                records,
                deadline: Some(
                    baton_runtime::clock::SystemClock
                        .now()
                        .plus(INVOCATION_TIME),
                ),
                redelivery: Some(queue.as_ref()),
            },
        )
        .await;
        for (message_id, receipt) in receipts {
            if !failed.contains(&message_id) {
                sqs.delete_message()
                    .queue_url(&shipped.queue_url)
                    .receipt_handle(receipt)
                    .send()
                    .await
                    .unwrap();
            }
        }
    }
    eprintln!(
        "every run ended {} s into the brown-out, after {deliveries} deliveries and {} model requests",
        started.elapsed().as_secs(),
        model.request_count()
    );
    let asked = model.request_count();
    assert!(
        asked >= RUNS && asked <= deliveries,
        "the model was asked for every run, once per delivery at most: {asked} requests, {deliveries} deliveries"
    );
    for run_id in &run_ids {
        let frames = built
            .services
            .runs
            .read_all_events_after("t", run_id, 0)
            .await
            .unwrap();
        let last = frames.last().unwrap();
        assert_eq!(
            last.event_type,
            baton_core::wire::event::EventType::Error,
            "{run_id}"
        );
        let payload = last.payload_value().unwrap();
        assert_eq!(payload["code"], "step_failed", "{payload}");
        let message = last.message.clone().unwrap_or_default();
        assert!(
            message.contains("execute_node")
                && message.contains(&format!(
                    "after {} deliveries",
                    shipped.timings.max_receive_count
                ))
                && message.contains("ran out of invocation time"),
            "the frame names the step, its deliveries and the timeout: {message}"
        );
        assert_eq!(
            built
                .services
                .runs
                .load("t", run_id)
                .await
                .unwrap()
                .unwrap()
                .state
                .status(),
            baton_core::state::run::RunStatus::Failed
        );
    }
    let dead = sqs
        .receive_message()
        .queue_url(&shipped.dead_letter_queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .send()
        .await
        .unwrap();
    assert!(
        dead.messages().is_empty(),
        "no step reached the dead-letter queue: every run ended at its last receive"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fast_record_of_a_batch_with_a_slow_one_is_not_delivered_again() {
    // A batch of two: a late twin of a step already done (stale: done at
    // once) and a node whose model takes longer than one node lease. The
    // fast record's hold ends with its step; the batch answers only when
    // the slow one does. The fast one must not come back meanwhile.
    let moto = MotoServer::start().unwrap();
    let configuration = moto.sdk_configuration().await;
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let store = DynamoRunStore::new(&connection, unique_name("baton-fast-slow"));
    store.create_table_if_missing().await.unwrap();
    let shipped = moto_server::create_shipped_step_queue(&configuration, "baton-fast-slow")
        .await
        .unwrap();
    let queue: Arc<dyn StepQueue> = Arc::new(SqsStepQueue::new(&connection, shipped.queue_url));
    let model = ScriptedLlmServer::start().await.unwrap();
    let provider = OpenAiCompatibleProvider::new(OpenAiCompatibleConfig::new(
        model.base_url(),
        "scripted",
        None,
    ))
    .unwrap();
    let built = TestServices::with_model(Arc::new(provider))
        .store(Arc::new(store))
        .queue(queue.clone())
        .worker_id("fast-slow")
        .build();
    let steps = built.services.steps.clone();
    let lease = steps.message_hold();
    assert_eq!(lease, Duration::from_secs(30), "the shipped node lease");

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
    let mut nodes = queue.receive(10, Duration::from_secs(5)).await.unwrap();
    let node = nodes.remove(0);
    for sibling in nodes {
        queue.acknowledge(&sibling.receipt).await.unwrap();
    }
    // The plan step's twin: SQS delivers at least once.
    queue
        .send(std::slice::from_ref(&plan.message))
        .await
        .unwrap();
    let twin = queue
        .receive(1, Duration::from_secs(5))
        .await
        .unwrap()
        .remove(0);
    assert_eq!(twin.message.message_id, plan.message.message_id);

    model.set_default_behavior(Behavior::SlowValid {
        delay_ms: (lease + Duration::from_secs(8)).as_millis() as u64,
    });
    let record = |received: &baton_runtime::ports::ReceivedStep, id: &str| QueuedRecord {
        message_id: id.into(),
        body: serde_json::to_string(&received.message).unwrap(),
        receipt: Some(received.receipt.clone()),
        receive_count: received.receive_count,
    };
    let batch = {
        let (steps, queue) = (steps.clone(), queue.clone());
        let records = vec![record(&twin, "fast"), record(&node, "slow")];
        tokio::spawn(async move {
            process_step_queue_batch(
                &steps,
                QueueBatch {
                    records,
                    deadline: Some(
                        baton_runtime::clock::SystemClock
                            .now()
                            .plus(Duration::from_secs(120)),
                    ),
                    redelivery: Some(queue.as_ref()),
                },
            )
            .await
        })
    };
    // Past one lease after the fast record was done, the slow one still
    // running: neither record of the batch is delivered again (the slow one
    // is held, the fast one deleted). The stale twin did re-send the run's
    // pending steps, as a stale delivery does: fresh messages, received for
    // the first time.
    let started = Instant::now();
    tokio::time::sleep(lease + Duration::from_secs(3)).await;
    assert!(!batch.is_finished(), "the slow record still runs");
    let visible = queue.receive(10, Duration::from_secs(1)).await.unwrap();
    let again: Vec<(&str, u32)> = visible
        .iter()
        .map(|received| (received.message.message_id.as_str(), received.receive_count))
        .filter(|(id, count)| *id == twin.message.message_id || *count > 1)
        .collect();
    assert!(
        again.is_empty(),
        "a record of the batch delivered again while it runs ({:?} after the start): {again:?}",
        started.elapsed()
    );
    let failed = batch.await.unwrap();
    assert!(failed.is_empty(), "{failed:?}");
    assert!(
        queue
            .receive(10, Duration::from_secs(1))
            .await
            .unwrap()
            .iter()
            .all(
                |received| received.message.message_id != twin.message.message_id
                    && received.receive_count == 1
            ),
        "no record of the batch is delivered again after it either"
    );
}
