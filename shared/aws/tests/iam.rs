//! The AWS calls the code makes, recorded by SDK interceptors on the real
//! clients against moto.
//!
//! IAM from the code: every DynamoDB and SQS action each function's code
//! paths call is recorded (an SDK interceptor on the real clients, against
//! moto) and compared with that function's policy in `infra/template.yaml`.
//! The test fails when a policy lacks an action the code calls, and when it
//! grants one the code never calls (beyond what the Lambda service itself
//! needs to poll a queue for the function).
//!
//! `TransactWriteItems` is recorded as the item actions IAM checks for it
//! (`PutItem`, `UpdateItem`, `DeleteItem`, `ConditionCheckItem`). Resources
//! are not compared, only actions. The model endpoint is the scripted test
//! double; everything else is the real code.
//!
//! Calls per node step: counted on the hot path and asserted exactly.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsInput;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use baton_aws::{DynamoRunStore, SqsStepQueue};
use baton_core::basics::ids::RunKey;
use baton_core::state::run::RunStatus;
use baton_llm::{OpenAiCompatibleConfig, OpenAiCompatibleProvider};
use baton_runtime::clock::SystemClock;
use baton_runtime::ports::{
    ClaimOutcome, Clock, NodeClaim, NodeLeases, OutboxStore, RunLog, StepQueue,
};
use baton_runtime::services::{OrchestratorSettings, OutboxSweeper, Services};
use baton_runtime::services::{PersonInput, PersonInputOutcome};
use baton_runtime::workers::{QueueBatch, QueuedRecord, process_step_queue_batch};
use baton_test_support::fault_injection::FailingSendQueue;
use baton_test_support::{TestServices, repository_path};
use moto_server::{MotoServer, unique_name};
use scripted_llm::{Behavior, ScriptedLlmServer};

/// Records `service:Action` of every call made through a client.
#[derive(Debug, Clone, Default)]
struct ActionRecorder {
    service: &'static str,
    actions: Arc<Mutex<BTreeSet<String>>>,
}

impl Intercept for ActionRecorder {
    fn name(&self) -> &'static str {
        "ActionRecorder"
    }

    fn read_before_execution(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let mut actions = self.actions.lock().unwrap();
        if let Some(transaction) = context.input().downcast_ref::<TransactWriteItemsInput>() {
            for item in transaction.transact_items() {
                let action = if item.put().is_some() {
                    "PutItem"
                } else if item.update().is_some() {
                    "UpdateItem"
                } else if item.delete().is_some() {
                    "DeleteItem"
                } else {
                    "ConditionCheckItem"
                };
                actions.insert(format!("{}:{action}", self.service));
            }
        }
        let _ = cfg;
        Ok(())
    }

    /// Every other call, by its `X-Amz-Target` (`DynamoDB_20120810.GetItem`,
    /// `AmazonSQS.SendMessage`): the operation IAM authorizes.
    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if self.service == "bedrock" {
            // Bedrock's runtime is REST: the operation is in the path.
            let path = context.request().uri();
            let action = if path.ends_with("/converse-stream") {
                "InvokeModelWithResponseStream"
            } else if path.ends_with("/converse") {
                "InvokeModel"
            } else {
                "unknown"
            };
            self.actions
                .lock()
                .unwrap()
                .insert(format!("bedrock:{action}"));
            return Ok(());
        }
        if self.service == "scheduler" {
            // EventBridge Scheduler is REST: `/schedules/{name}`, the
            // operation in the method.
            let action = match context.request().method() {
                "POST" => "CreateSchedule",
                "PUT" => "UpdateSchedule",
                "DELETE" => "DeleteSchedule",
                "GET" => "GetSchedule",
                _ => "unknown",
            };
            self.actions
                .lock()
                .unwrap()
                .insert(format!("scheduler:{action}"));
            return Ok(());
        }
        let target = operation_of(context);
        if target != "TransactWriteItems" {
            self.actions.lock().unwrap().insert(format!(
                "{}:{}",
                self.service,
                iam_action_of(target)
            ));
        }
        Ok(())
    }
}

/// The operation a request calls, from its `X-Amz-Target`
/// (`DynamoDB_20120810.GetItem`, `AmazonSQS.SendMessage`).
fn operation_of<'a>(context: &'a BeforeTransmitInterceptorContextRef<'_>) -> &'a str {
    context
        .request()
        .headers()
        .get("x-amz-target")
        .and_then(|target| target.rsplit('.').next())
        .unwrap_or("unknown")
}

/// The IAM action that authorizes an API operation: batch operations are
/// authorized by their single-item action.
fn iam_action_of(operation: &str) -> &str {
    match operation {
        "SendMessageBatch" => "SendMessage",
        "DeleteMessageBatch" => "DeleteMessage",
        "ChangeMessageVisibilityBatch" => "ChangeMessageVisibility",
        "TransactGetItems" | "BatchGetItem" => "GetItem",
        other => other,
    }
}

struct Fixture {
    _moto: MotoServer,
    configuration: aws_config::SdkConfig,
    table: String,
    queue_url: String,
    dead_letter_url: String,
    model: ScriptedLlmServer,
}

async fn fixture() -> Fixture {
    let moto = MotoServer::start().unwrap();
    let configuration = moto.sdk_configuration().await;
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let table = unique_name("baton-iam");
    DynamoRunStore::new(&connection, &table)
        .create_table_if_missing()
        .await
        .unwrap();
    let shipped = moto_server::create_shipped_step_queue(&configuration, "baton-iam-steps")
        .await
        .unwrap();
    Fixture {
        _moto: moto,
        configuration,
        table,
        queue_url: shipped.queue_url,
        dead_letter_url: shipped.dead_letter_queue_url,
        model: ScriptedLlmServer::start().await.unwrap(),
    }
}

/// The OpenAI-compatible provider over the scripted model server.
fn scripted_provider(fixture: &Fixture) -> Arc<OpenAiCompatibleProvider> {
    Arc::new(
        OpenAiCompatibleProvider::new(OpenAiCompatibleConfig::new(
            fixture.model.base_url(),
            "scripted",
            None,
        ))
        .unwrap(),
    )
}

/// The DynamoDB store and SQS queue over clients carrying `interceptor_for(service)`.
fn adapters_with<I: Intercept + 'static>(
    fixture: &Fixture,
    interceptor_for: impl Fn(&'static str) -> I,
) -> (Arc<DynamoRunStore>, Arc<SqsStepQueue>) {
    let dynamodb = aws_sdk_dynamodb::config::Builder::from(&fixture.configuration)
        .interceptor(interceptor_for("dynamodb"))
        .build();
    let sqs = aws_sdk_sqs::config::Builder::from(&fixture.configuration)
        .interceptor(interceptor_for("sqs"))
        .build();
    (
        Arc::new(baton_aws::from_clients::dynamodb_store(
            aws_sdk_dynamodb::Client::from_conf(dynamodb),
            &fixture.table,
        )),
        Arc::new(baton_aws::from_clients::sqs_queue(
            aws_sdk_sqs::Client::from_conf(sqs),
            &fixture.queue_url,
        )),
    )
}

/// The real services over clients that record into `recorded`.
struct Recorded {
    services: Services,
    store: Arc<DynamoRunStore>,
    queue: Arc<SqsStepQueue>,
    recorded: Arc<Mutex<BTreeSet<String>>>,
}

/// The models the step calls: the scripted OpenAI-compatible endpoint by
/// default, and the catalog's `bedrock` provider through a Bedrock client
/// that records its calls (against the same double's ConverseStream).
fn recorded_models(
    fixture: &Fixture,
    recorded: &Arc<Mutex<BTreeSet<String>>>,
) -> Arc<dyn baton_runtime::ports::LlmProvider> {
    let bedrock = aws_sdk_bedrockruntime::config::Builder::from(&fixture.configuration)
        .endpoint_url(fixture.model.root_url())
        .retry_config(aws_sdk_bedrockruntime::config::retry::RetryConfig::disabled())
        .interceptor(ActionRecorder {
            service: "bedrock",
            actions: recorded.clone(),
        })
        .build();
    let bedrock = baton_aws::bedrock::BedrockProvider::over_client(
        aws_sdk_bedrockruntime::Client::from_conf(bedrock),
        baton_aws::bedrock::BedrockSettings::default(),
    );
    Arc::new(
        baton_runtime::models::router::ModelRouter::new(scripted_provider(fixture)).with_provider(
            "bedrock",
            baton_runtime::models::router::ProviderRoute::Ready(Arc::new(bedrock)),
        ),
    )
}

/// Schedules fired by EventBridge Scheduler (as the api function is
/// configured), through a client that records its calls.
fn recorded_scheduler(
    fixture: &Fixture,
    recorded: &Arc<Mutex<BTreeSet<String>>>,
) -> Arc<dyn baton_runtime::ports::ScheduleTriggers> {
    let scheduler = aws_sdk_scheduler::config::Builder::from(&fixture.configuration)
        .interceptor(ActionRecorder {
            service: "scheduler",
            actions: recorded.clone(),
        })
        .build();
    Arc::new(baton_aws::from_clients::scheduler_triggers(
        aws_sdk_scheduler::Client::from_conf(scheduler),
        baton_aws::scheduler::SchedulerTarget {
            group: "default".into(),
            target_arn: "arn:aws:sqs:us-east-1:123456789012:baton-ingest".into(),
            role_arn: "arn:aws:iam::123456789012:role/baton-scheduler".into(),
        },
    ))
}

fn recorded_services(fixture: &Fixture, settings: OrchestratorSettings) -> Recorded {
    let recorded = Arc::new(Mutex::new(BTreeSet::new()));
    let (store, queue) = adapters_with(fixture, |service| ActionRecorder {
        service,
        actions: recorded.clone(),
    });
    let services = TestServices::with_model(recorded_models(fixture, &recorded))
        .store(store.clone())
        .queue(queue.clone())
        .capability_directory(store.clone())
        .schedules(store.clone(), recorded_scheduler(fixture, &recorded))
        .settings(settings)
        .build()
        .services;
    Recorded {
        services,
        store,
        queue,
        recorded,
    }
}

fn taken(recorded: &Arc<Mutex<BTreeSet<String>>>) -> BTreeSet<String> {
    std::mem::take(&mut *recorded.lock().unwrap())
}

/// What the code of each function calls, by exercising its use cases.
/// Handles every queued step (each `deliveries` times: a duplicate delivery
/// changes nothing), only `only_run`'s when given, until the queue is empty.
async fn drain(parts: &Recorded, deliveries: usize, only_run: Option<&str>) {
    loop {
        let batch = parts
            .queue
            .receive(10, Duration::from_secs(1))
            .await
            .unwrap();
        if batch.is_empty() {
            return;
        }
        for received in batch {
            if only_run.is_none_or(|run_id| received.message.run_id == run_id) {
                for _ in 0..deliveries {
                    parts
                        .services
                        .steps
                        .handle(&received.message)
                        .await
                        .unwrap();
                }
            }
            parts.queue.acknowledge(&received.receipt).await.unwrap();
        }
    }
}

async fn actions_by_function(fixture: &Fixture) -> BTreeMap<&'static str, BTreeSet<String>> {
    let mut by_function = BTreeMap::new();
    let parts = recorded_services(fixture, OrchestratorSettings::default());
    let envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");

    // ingest: submissions, a re-sent one deduplicated by its key.
    let mut keyed = envelope.clone();
    keyed["idempotencyKey"] = "iam-check".into();
    let run = parts.services.runs.submit("t", &keyed).await.unwrap();
    parts.services.runs.submit("t", &keyed).await.unwrap();
    // ingest: a schedule's fire from EventBridge Scheduler, delivered twice.
    // (The schedule is put without recording: the api creates it.)
    let unrecorded = DynamoRunStore::new(
        &baton_aws::AwsConnection::to_emulator(&fixture._moto.endpoint).await,
        &fixture.table,
    );
    let now = SystemClock.now();
    let scheduled = baton_core::records::schedules::Schedule {
        schedule_id: "sch_iam".into(),
        tenant_id: "t".into(),
        expression: "rate(1 hour)".into(),
        timezone: "UTC".into(),
        envelope: envelope.clone(),
        missed_fires: baton_core::records::schedules::MissedFirePolicy::Skip,
        description: None,
        state: baton_core::records::schedules::ScheduleState::Active,
        trigger: baton_core::records::schedules::ScheduleTrigger::EventBridge,
        created_at: now,
        anchor_at: now,
        next_fire_at: Some(now.plus(Duration::from_secs(3600))),
        last_fire_at: None,
        last_run_id: None,
        fires: 0,
        missed: 0,
        revision: 0,
        failed_fires: 0,
        last_error: None,
        retry_fire_at: None,
        trigger_out_of_step: None,
        deleting: false,
    };
    baton_runtime::ports::ScheduleBook::create_schedule(&unrecorded, &scheduled, 10)
        .await
        .unwrap();
    let fire = serde_json::json!({
        "tenantId": "t",
        "scheduleFire": {"scheduleId": "sch_iam", "fireTime": now.rfc3339()}
    })
    .to_string();
    let failed = baton_runtime::workers::process_ingest_batch(
        &parts.services.runs,
        &parts.services.schedules,
        vec![("fire-1".into(), fire.clone()), ("fire-2".into(), fire)],
    )
    .await;
    assert!(failed.is_empty(), "{failed:?}");
    by_function.insert("IngestFunction", taken(&parts.recorded));

    // step: plan and every node of the run, a duplicate delivery, and a
    // step that runs out of invocation time (claim released, message
    // visible again soon).
    drain(&parts, 2, None).await;
    let stored = parts.store.as_ref();
    let status = baton_runtime::ports::RunLog::load_run(stored, RunKey::new("t", &run.run_id))
        .await
        .unwrap()
        .unwrap()
        .state
        .status();
    assert_eq!(status, RunStatus::Completed, "the step path ran to the end");
    // The same path on a catalog Bedrock model: the envelope prefers one, so
    // its model nodes call Bedrock's ConverseStream.
    let mut on_bedrock = envelope.clone();
    on_bedrock["constraints"]["preferredModels"] = serde_json::json!(["bedrock-nova-lite"]);
    let bedrock_run = parts.services.runs.submit("t", &on_bedrock).await.unwrap();
    drain(&parts, 1, None).await;
    let bedrock_state =
        baton_runtime::ports::RunLog::load_run(stored, RunKey::new("t", &bedrock_run.run_id))
            .await
            .unwrap()
            .unwrap()
            .state;
    assert_eq!(bedrock_state.status(), RunStatus::Completed);
    assert!(
        fixture
            .model
            .requests()
            .iter()
            .any(|request| request.model == "amazon.nova-lite-v1:0"),
        "a node called the Bedrock model"
    );
    fixture
        .model
        .push_behaviors([Behavior::SlowValid { delay_ms: 5_000 }]);
    let slow = recorded_services(
        fixture,
        OrchestratorSettings {
            commit_margin: Duration::from_millis(100),
            ..OrchestratorSettings::default()
        },
    );
    slow.services.runs.submit("t", &envelope).await.unwrap();
    taken(&slow.recorded);
    let plan = slow
        .queue
        .receive(1, Duration::from_secs(1))
        .await
        .unwrap()
        .remove(0);
    slow.services.steps.handle(&plan.message).await.unwrap();
    slow.queue.acknowledge(&plan.receipt).await.unwrap();
    let node = slow
        .queue
        .receive(1, Duration::from_secs(1))
        .await
        .unwrap()
        .remove(0);
    let failed = process_step_queue_batch(
        &slow.services.steps,
        QueueBatch {
            records: vec![QueuedRecord {
                message_id: "node".into(),
                body: serde_json::to_string(&node.message).unwrap(),
                receipt: Some(node.receipt.clone()),
                receive_count: node.receive_count,
            }],
            deadline: Some(SystemClock.now().plus(Duration::from_millis(500))),
            redelivery: Some(slow.queue.as_ref()),
        },
    )
    .await;
    assert_eq!(
        failed,
        vec!["node".to_string()],
        "the slow step ran out of time"
    );
    let mut step_actions = taken(&parts.recorded);
    step_actions.extend(taken(&slow.recorded));

    // A run that parks on a person: its task becomes an item of its own.
    let human_run = parts
        .services
        .runs
        .submit("t", &human_review_envelope())
        .await
        .unwrap();
    drain(&parts, 1, Some(&human_run.run_id)).await;
    // Contention the step's store meets: another writer moved the event
    // sequence since the load (the store reads it again), and a twin
    // delivery finds the node's lease held (the store reads the lease).
    // On the parked run (a settled run refuses claims).
    let rival = DynamoRunStore::new(
        &baton_aws::AwsConnection::to_emulator(&fixture._moto.endpoint).await,
        &fixture.table,
    );
    let store = parts.store.as_ref();
    RunLog::load_run(store, RunKey::new("t", &human_run.run_id))
        .await
        .unwrap();
    let now = SystemClock.now();
    let frame = || {
        baton_core::wire::frames::log(&baton_core::wire::frames::FrameStamp::new(now, 0), "rival")
    };
    RunLog::append_events(&rival, RunKey::new("t", &human_run.run_id), vec![frame()])
        .await
        .unwrap();
    let claim = |claimant| NodeClaim {
        claim_key: "contended",
        attempt: 1,
        worker_id: claimant,
        now,
        lease_expires_at: now.plus(Duration::from_secs(60)),
    };
    assert_eq!(
        NodeLeases::claim_node(
            store,
            RunKey::new("t", &human_run.run_id),
            claim("first"),
            vec![frame()]
        )
        .await
        .unwrap(),
        ClaimOutcome::Claimed
    );
    // The heartbeat of a long capability call.
    assert!(
        NodeLeases::renew_claim(store, RunKey::new("t", &human_run.run_id), claim("first"))
            .await
            .unwrap()
    );
    assert!(matches!(
        NodeLeases::claim_node(
            store,
            RunKey::new("t", &human_run.run_id),
            claim("twin"),
            vec![]
        )
        .await
        .unwrap(),
        ClaimOutcome::HeldByOther { .. }
    ));
    step_actions.extend(taken(&parts.recorded));
    by_function.insert("StepFunction", step_actions);

    // api and stream: the routes' use cases (a keyed submission sent twice).
    let mut keyed = envelope.clone();
    keyed["idempotencyKey"] = "iam-check-api".into();
    let submitted = parts.services.runs.submit("t", &keyed).await.unwrap();
    parts.services.runs.submit("t", &keyed).await.unwrap();
    parts
        .services
        .runs
        .load("t", &submitted.run_id)
        .await
        .unwrap();
    parts
        .services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap();
    parts
        .services
        .runs
        .cancel("t", &submitted.run_id, "iam check")
        .await
        .unwrap();
    parts.services.capabilities.list("t").await.unwrap();
    let tasks = parts
        .services
        .people
        .pending_tasks("t", None)
        .await
        .unwrap();
    let task = tasks
        .iter()
        .find(|task| task.run_id == human_run.run_id)
        .expect("the parked run's task is listed");
    parts.services.people.pending_requests("t").await.unwrap();
    let answered = parts
        .services
        .people
        .apply(
            "t",
            &human_run.run_id,
            PersonInput::Answer {
                node_id: task.node_id.clone(),
                expected_plan_version: task.plan_version,
                output: scripted_llm::generate_instance(&task.output_schema, "answer"),
            },
        )
        .await
        .unwrap();
    assert!(
        matches!(answered, PersonInputOutcome::Applied { .. }),
        "{answered:?}"
    );
    let registration = serde_json::json!({
        "capabilityId": "writer.iam", "agentType": "ai", "version": "1", "displayName": "w",
        "summary": "s", "inputContract": ["creative_brief"], "outputContract": ["copyVariants"]
    });
    parts
        .services
        .capabilities
        .register("t", &registration)
        .await
        .unwrap();
    // Schedules, fired by EventBridge Scheduler as the template configures
    // the api: created, listed, paused, resumed, deleted.
    let schedule = parts
        .services
        .schedules
        .create(
            "t",
            &serde_json::json!({"expression": "rate(5 minutes)", "envelope": envelope}),
        )
        .await
        .unwrap();
    parts.services.schedules.list("t").await.unwrap();
    parts
        .services
        .schedules
        .pause("t", &schedule.schedule_id)
        .await
        .unwrap();
    parts
        .services
        .schedules
        .resume("t", &schedule.schedule_id)
        .await
        .unwrap();
    parts
        .services
        .schedules
        .delete("t", &schedule.schedule_id)
        .await
        .unwrap();
    let api_actions = taken(&parts.recorded);
    by_function.insert("ApiFunction", api_actions.clone());
    by_function.insert("StreamFunction", api_actions);

    // sweeper: a run whose first node step was committed but never sent
    // (the send failed), then one sweep that re-sends it.
    let lossy = TestServices::with_model(scripted_provider(fixture))
        .store(parts.store.clone())
        .queue(Arc::new(FailingSendQueue::new(parts.queue.clone(), 1)))
        .capability_directory(parts.store.clone())
        .build()
        .services;
    let lossy_run = lossy.runs.submit("t", &envelope).await.unwrap();
    // Earlier steps may still be on the queue (the one that ran out of time
    // is visible again): take them off until this run's planning step.
    let plan = loop {
        let received = parts
            .queue
            .receive(1, Duration::from_secs(3))
            .await
            .unwrap();
        let received = received
            .into_iter()
            .next()
            .expect("the planning step arrives");
        parts.queue.acknowledge(&received.receipt).await.unwrap();
        if received.message.run_id == lossy_run.run_id {
            break received;
        }
    };
    assert!(
        lossy.steps.handle(&plan.message).await.is_err(),
        "the node step's send was lost after its commit"
    );
    // The node step the lost send carried: still pending, so a copy of it
    // in the dead-letter queue is a step the run still waits on.
    let lost_node_step = parts
        .store
        .pending_outbox(RunKey::new("t", &lossy_run.run_id))
        .await
        .unwrap()
        .into_iter()
        .find(|message| message.command.kind_name() == "execute_node")
        .expect("the lost node step is pending");
    // A schedule whose change EventBridge Scheduler has not taken (its
    // mark set here, as a failed resume leaves it), for the keeper's tick.
    let kept = parts
        .services
        .schedules
        .create(
            "t",
            &serde_json::json!({"expression": "rate(5 minutes)", "envelope": envelope}),
        )
        .await
        .unwrap();
    let mut out_of_step = kept.clone();
    out_of_step.revision += 1;
    out_of_step.trigger_failed(kept.created_at, "EventBridge Scheduler: throttled");
    // Its back-off is over.
    if let Some(mark) = out_of_step.trigger_out_of_step.as_mut() {
        mark.retry_at = kept.created_at;
    }
    baton_runtime::ports::ScheduleBook::update_schedule(parts.store.as_ref(), &out_of_step)
        .await
        .unwrap();
    taken(&parts.recorded);
    tokio::time::sleep(Duration::from_millis(5)).await;
    let sweeper = OutboxSweeper::new(
        parts.store.clone(),
        parts.queue.clone(),
        Arc::new(SystemClock),
    );
    // Three entries no step consumed: this run's lost node step, the
    // parked run's SLA timer (consumed only when it fires; a re-sent timer
    // is deferred again until it is due), and the node step that ran out of
    // time (its claim did not consume it: only a commit does). The
    // cancelled run's planning step was re-sent and marked by its
    // deduplicated submission.
    assert_eq!(sweeper.sweep(Duration::ZERO, 100).await.unwrap().resent, 3);
    // ...and its read of the dead-letter queue: a step message of a
    // running run found there ends that run.
    let dead_letters = Arc::new(baton_aws::from_clients::sqs_queue(
        aws_sdk_sqs::Client::from_conf(
            aws_sdk_sqs::config::Builder::from(&fixture.configuration)
                .interceptor(ActionRecorder {
                    service: "sqs",
                    actions: parts.recorded.clone(),
                })
                .build(),
        ),
        &fixture.dead_letter_url,
    ));
    aws_sdk_sqs::Client::new(&fixture.configuration)
        .send_message()
        .queue_url(&fixture.dead_letter_url)
        .message_body(serde_json::to_string(&lost_node_step).unwrap())
        .send()
        .await
        .unwrap();
    let read = baton_runtime::queue::dead_letters::DeadLetterReader::new(
        parts.services.steps.clone(),
        dead_letters,
    )
    .read(10)
    .await
    .unwrap();
    assert_eq!(read.runs_ended, 1, "{read:?}");
    // ...and the schedules' keeper tick: the schedule set up out of step
    // above is handed to EventBridge Scheduler again.
    let tick = parts.services.schedules.fire_due().await.unwrap();
    assert_eq!(tick.triggers_settled, 1, "{tick:?}");
    by_function.insert("SweeperFunction", taken(&parts.recorded));
    by_function
}

/// `Action`s of each function's policy statements in the template.
fn granted_by_function() -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(repository_path("infra/template.yaml")).unwrap();
    let template: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let mut granted = BTreeMap::new();
    for (name, resource) in template["Resources"].as_mapping().unwrap() {
        if resource["Type"].as_str() != Some("AWS::Serverless::Function") {
            continue;
        }
        let mut actions = BTreeSet::new();
        for policy in resource["Properties"]["Policies"]
            .as_sequence()
            .into_iter()
            .flatten()
        {
            for statement in policy["Statement"].as_sequence().into_iter().flatten() {
                for action in statement["Action"].as_sequence().into_iter().flatten() {
                    actions.insert(action.as_str().unwrap().to_string());
                }
            }
        }
        granted.insert(name.as_str().unwrap().to_string(), actions);
    }
    granted
}

/// What the Lambda service needs to poll a queue for a function (not called by its code).
const EVENT_SOURCE_ACTIONS: [&str; 4] = [
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
    "sqs:ChangeMessageVisibility",
];

/// Actions a function's code calls only in a race this test cannot stage
/// deterministically, with the race. The sweeper ends a dead-lettered
/// step's run with one commit; a rival append between its load and its
/// commit makes the store re-read the run's event sequence (`GetItem`),
/// which the step function's claims exercise here.
const RACE_ONLY_ACTIONS: [(&str, &str); 1] = [("SweeperFunction", "dynamodb:GetItem")];

/// Actions another service checks on a function's behalf, never called by
/// its code: EventBridge Scheduler checks that whoever creates or updates a
/// schedule may pass the schedule's target role.
const CHECKED_ON_BEHALF: [(&str, &str); 3] = [
    ("ApiFunction", "iam:PassRole"),
    ("StreamFunction", "iam:PassRole"),
    ("SweeperFunction", "iam:PassRole"),
];

#[tokio::test(flavor = "multi_thread")]
async fn every_function_is_granted_exactly_what_its_code_calls() {
    let fixture = fixture().await;
    let called = actions_by_function(&fixture).await;
    let granted = granted_by_function();
    let mut problems = Vec::new();
    for (function, calls) in &called {
        let Some(policy) = granted.get(*function) else {
            problems.push(format!("{function}: not in the template"));
            continue;
        };
        for action in calls.difference(policy) {
            problems.push(format!(
                "{function}: calls {action}, which its policy lacks"
            ));
        }
        let polled = ["StepFunction", "IngestFunction"].contains(function);
        for action in policy.difference(calls) {
            let polled_for = polled && EVENT_SOURCE_ACTIONS.contains(&action.as_str());
            let race_only = RACE_ONLY_ACTIONS.contains(&(*function, action.as_str()));
            let on_behalf = CHECKED_ON_BEHALF.contains(&(*function, action.as_str()));
            if !polled_for && !race_only && !on_behalf {
                problems.push(format!(
                    "{function}: granted {action}, which its code never calls"
                ));
            }
        }
    }
    assert!(
        called.values().all(|calls| !calls.is_empty()),
        "every function's calls were recorded: {called:#?}"
    );
    eprintln!("actions each function calls: {called:#?}");
    assert!(problems.is_empty(), "{problems:#?}\ncalled: {called:#?}");
}

/// The Bedrock resources the step function's policy must name for a
/// catalog model id: the foundation model in the stack's region, or, for a
/// cross-region inference profile (`us.…`, `eu.…`, `apac.…`, `global.…`),
/// the profile and the foundation model in every region it routes to.
fn bedrock_resources_for(model_id: &str) -> Vec<String> {
    let profile = ["us.", "eu.", "apac.", "global."]
        .iter()
        .find_map(|prefix| model_id.strip_prefix(prefix));
    match profile {
        None => vec![format!(
            "arn:${{AWS::Partition}}:bedrock:${{AWS::Region}}::foundation-model/{model_id}"
        )],
        Some(foundation) => vec![
            format!(
                "arn:${{AWS::Partition}}:bedrock:${{AWS::Region}}:${{AWS::AccountId}}:inference-profile/{model_id}"
            ),
            format!("arn:${{AWS::Partition}}:bedrock:*::foundation-model/{foundation}"),
        ],
    }
}

#[test]
fn the_bedrock_grant_names_exactly_the_catalogs_bedrock_models() {
    let catalog: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repository_path("registry/models.json")).unwrap(),
    )
    .unwrap();
    let bedrock_providers: BTreeSet<&str> = catalog["providers"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, provider)| provider["kind"] == "bedrock")
        .map(|(name, _)| name.as_str())
        .collect();
    let expected: BTreeSet<String> = catalog["models"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, model)| bedrock_providers.contains(model["provider"].as_str().unwrap()))
        .flat_map(|(name, model)| bedrock_resources_for(model["modelId"].as_str().unwrap_or(name)))
        .collect();
    assert!(
        !expected.is_empty(),
        "the shipped catalog has Bedrock models"
    );

    let text = std::fs::read_to_string(repository_path("infra/template.yaml")).unwrap();
    let template: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let mut granted = BTreeSet::new();
    for policy in template["Resources"]["StepFunction"]["Properties"]["Policies"]
        .as_sequence()
        .unwrap()
    {
        for statement in policy["Statement"].as_sequence().into_iter().flatten() {
            let actions = statement["Action"].as_sequence().into_iter().flatten();
            if !actions
                .filter_map(|action| action.as_str())
                .any(|action| action.starts_with("bedrock:"))
            {
                continue;
            }
            for resource in statement["Resource"].as_sequence().into_iter().flatten() {
                let text = match resource {
                    serde_yaml::Value::Tagged(tagged) => tagged.value.as_str().unwrap().to_string(),
                    other => other.as_str().unwrap().to_string(),
                };
                granted.insert(text);
            }
        }
    }
    let lines: Vec<String> = expected
        .iter()
        .map(|arn| format!("                - !Sub {arn}"))
        .collect();
    assert_eq!(
        granted,
        expected,
        "the step function's Bedrock grant must be the catalog's Bedrock models; put these under its bedrock statement's Resource:\n{}",
        lines.join("\n")
    );
}

/// Counts AWS calls by operation (the `X-Amz-Target` name).
#[derive(Debug, Clone, Default)]
struct CallCounter {
    service: &'static str,
    calls: Arc<Mutex<BTreeMap<String, usize>>>,
}

impl Intercept for CallCounter {
    fn name(&self) -> &'static str {
        "CallCounter"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let operation = operation_of(context);
        *self
            .calls
            .lock()
            .unwrap()
            .entry(format!("{}.{operation}", self.service))
            .or_default() += 1;
        Ok(())
    }
}

/// The AWS calls of one node step (the `nth` node step of the sample,
/// from 1) with `settings`.
async fn calls_for_one_node_step(
    settings: OrchestratorSettings,
    nth: usize,
) -> BTreeMap<String, usize> {
    let fixture = fixture().await;
    let calls = Arc::new(Mutex::new(BTreeMap::new()));
    let (store, queue) = adapters_with(&fixture, |service| CallCounter {
        service,
        calls: calls.clone(),
    });
    let services = TestServices::with_model(scripted_provider(&fixture))
        .store(store.clone())
        .queue(queue.clone())
        .capability_directory(store.clone())
        .settings(settings)
        .build()
        .services;
    services
        .runs
        .submit(
            "t",
            &baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json"),
        )
        .await
        .unwrap();
    let plan = queue
        .receive(1, Duration::from_secs(2))
        .await
        .unwrap()
        .remove(0);
    baton_runtime::workers::process_received_step(&services.steps, queue.as_ref(), plan)
        .await
        .unwrap();
    for _ in 1..nth {
        let earlier = queue
            .receive(1, Duration::from_secs(2))
            .await
            .unwrap()
            .remove(0);
        baton_runtime::workers::process_received_step(&services.steps, queue.as_ref(), earlier)
            .await
            .unwrap();
    }
    let node = queue
        .receive(1, Duration::from_secs(2))
        .await
        .unwrap()
        .remove(0);
    calls.lock().unwrap().clear();
    baton_runtime::workers::process_received_step(&services.steps, queue.as_ref(), node)
        .await
        .unwrap();
    let per_step = calls.lock().unwrap().clone();
    eprintln!("AWS calls for one node step: {per_step:?}");
    per_step
}

fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs
        .iter()
        .map(|(name, count)| (name.to_string(), *count))
        .collect()
}

/// The AWS calls one node step makes: one consistent read of the run (a
/// `Query` returning the run item and its small sequence item); one
/// transactional write for the claim (lease + `node_start` + the handled
/// outbox entry consumed), one per streamed delta batch (the scripted
/// model's answer streams as one batch) and one for the commit (state +
/// events + outbox); one send and one delete. Nothing is re-read and no
/// outbox entry is marked on the way. Text streams only in the generation
/// and qa phases: a structuring (analysis) node, or any node with deltas
/// off (`BATON_DELTA_FLUSH_MILLIS=off`), writes the claim and the commit only.
#[tokio::test(flavor = "multi_thread")]
async fn aws_calls_per_node_step_are_at_the_floor() {
    // The sample's first node writes a brief (structuring: analysis), its
    // second and last the copy (execution: generation; the run completes in
    // that step, so nothing is sent).
    let (analysis, generation) = (1, 2);
    let streamed = calls_for_one_node_step(OrchestratorSettings::default(), generation).await;
    assert_eq!(
        streamed,
        counts(&[
            ("dynamodb.Query", 1),
            ("dynamodb.TransactWriteItems", 3),
            ("sqs.DeleteMessage", 1),
        ]),
        "AWS calls for one generation node step"
    );
    let analysed = calls_for_one_node_step(OrchestratorSettings::default(), analysis).await;
    assert_eq!(
        analysed,
        counts(&[
            ("dynamodb.Query", 1),
            ("dynamodb.TransactWriteItems", 2),
            ("sqs.SendMessageBatch", 1),
            ("sqs.DeleteMessage", 1),
        ]),
        "AWS calls for one analysis node step (no text streamed)"
    );
    let quiet = calls_for_one_node_step(
        OrchestratorSettings {
            stream_deltas: false,
            ..OrchestratorSettings::default()
        },
        generation,
    )
    .await;
    assert_eq!(
        quiet,
        counts(&[
            ("dynamodb.Query", 1),
            ("dynamodb.TransactWriteItems", 2),
            ("sqs.DeleteMessage", 1),
        ]),
        "AWS calls for one generation node step without deltas"
    );
}

/// A run with a human node (the director's review of a positioning).
fn human_review_envelope() -> serde_json::Value {
    serde_json::json!({
        "objective": "Agree the final positioning with the director.",
        "inputs": {"positioning_context": {"company_name": "Acme", "company_url": "https://acme.example",
                                            "competing_factors": ["reliability"]}},
        "outputContract": {"schema": {"type": "object", "required": ["positioning"],
                                      "properties": {"positioning": {"type": "object"}}}}
    })
}
