//! Schedules fired by EventBridge Scheduler, over moto (its Scheduler,
//! DynamoDB and SQS): the API's `ScheduleService` creates the EventBridge
//! schedule in the deployment's group, targeting the ingest queue with the
//! template's role; pause and resume move its state; delete removes it. moto
//! keeps schedules but never fires them, so the test plays EventBridge's
//! part: it puts the fire time into the target's input as EventBridge does
//! and sends that message to the queue twice (a redelivery); the ingest
//! worker takes both and starts one run. The model is a double that must
//! never be called (submitting calls no model).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use async_trait::async_trait;
use baton_core::state::context::ModelRequest;
use baton_runtime::error::LlmError;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta, ScheduleBook};
use baton_test_support::TestServices;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

struct NeverCalled;

#[async_trait]
impl LlmProvider for NeverCalled {
    fn model_name(&self) -> String {
        "never-called".into()
    }
    async fn complete(
        &self,
        _request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        panic!("submitting a run calls no model")
    }
}

const ROLE_ARN: &str = "arn:aws:iam::123456789012:role/baton-scheduler";

#[tokio::test(flavor = "multi_thread")]
async fn a_schedule_lives_in_eventbridge_scheduler_and_its_fire_starts_one_run() {
    let moto = moto_server::MotoServer::start().unwrap();
    let configuration = moto.sdk_configuration().await;
    let scheduler = aws_sdk_scheduler::Client::new(&configuration);
    let sqs = aws_sdk_sqs::Client::new(&configuration);
    let group = moto_server::unique_name("baton-schedules");
    scheduler
        .create_schedule_group()
        .name(&group)
        .send()
        .await
        .unwrap();
    let queue_url = moto_server::create_unique_queue(&configuration, "ingest", None)
        .await
        .unwrap();
    let queue_arn = moto_server::queue_arn(&configuration, &queue_url)
        .await
        .unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let store = Arc::new(baton_aws::DynamoRunStore::new(
        &connection,
        moto_server::unique_name("baton-scheduled"),
    ));
    store.create_table_if_missing().await.unwrap();
    let triggers = Arc::new(baton_aws::scheduler::EventBridgeScheduleTriggers::new(
        &connection,
        baton_aws::scheduler::SchedulerTarget {
            group: group.clone(),
            target_arn: queue_arn.clone(),
            role_arn: ROLE_ARN.into(),
        },
    ));
    let built = TestServices::with_model(Arc::new(NeverCalled))
        .store(store.clone())
        .schedules(store.clone(), triggers)
        .build();
    let services = &built.services;

    let schedule = services
        .schedules
        .create(
            "acme",
            &json!({
                "expression": "cron(30 7 ? * MON-FRI *)",
                "timezone": "Europe/Paris",
                "missedFires": "catch_up_once",
                "envelope": {
                    "objective": "Morning digest",
                    "outputContract": {"schema": {"type": "object"}}
                }
            }),
        )
        .await
        .unwrap();
    assert_eq!(schedule.trigger.as_ref(), "event_bridge");

    // The EventBridge schedule, as EventBridge Scheduler keeps it.
    let kept = scheduler
        .get_schedule()
        .name(&schedule.schedule_id)
        .group_name(&group)
        .send()
        .await
        .unwrap();
    assert_eq!(kept.schedule_expression(), Some("cron(30 7 ? * MON-FRI *)"));
    assert_eq!(kept.schedule_expression_timezone(), Some("Europe/Paris"));
    assert_eq!(kept.state().map(|state| state.as_str()), Some("ENABLED"));
    let target = kept.target().unwrap();
    assert_eq!(target.arn(), queue_arn);
    assert_eq!(target.role_arn(), ROLE_ARN);
    let retry = target.retry_policy().unwrap();
    assert_eq!(
        (
            retry.maximum_event_age_in_seconds(),
            retry.maximum_retry_attempts()
        ),
        (Some(86_400), Some(185)),
        "catch_up_once keeps a fire a day"
    );
    let input: Value = serde_json::from_str(target.input().unwrap()).unwrap();
    assert_eq!(
        input,
        json!({"tenantId": "acme", "scheduleFire": {"scheduleId": schedule.schedule_id, "fireTime": "<aws.scheduler.scheduled-time>"}})
    );
    // The store keeps it too, for the API's reads; `serve` never fires it.
    assert!(
        store
            .due_schedules(
                baton_core::basics::instant::Instant::from_unix_millis(u64::MAX / 2),
                10
            )
            .await
            .unwrap()
            .is_empty()
    );

    // Paused and resumed: the EventBridge schedule's state follows.
    services
        .schedules
        .pause("acme", &schedule.schedule_id)
        .await
        .unwrap();
    let state = |name: String| {
        let scheduler = scheduler.clone();
        let group = group.clone();
        async move {
            scheduler
                .get_schedule()
                .name(name)
                .group_name(group)
                .send()
                .await
                .unwrap()
                .state()
                .map(|state| state.as_str().to_string())
        }
    };
    assert_eq!(
        state(schedule.schedule_id.clone()).await.as_deref(),
        Some("DISABLED")
    );
    services
        .schedules
        .resume("acme", &schedule.schedule_id)
        .await
        .unwrap();
    assert_eq!(
        state(schedule.schedule_id.clone()).await.as_deref(),
        Some("ENABLED")
    );

    // EventBridge's part: the fire time put in, the message sent, twice.
    let fire_time = baton_core::basics::instant::Instant::from_unix_millis(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            * 1000,
    )
    .rfc3339();
    let fire = target
        .input()
        .unwrap()
        .replace("<aws.scheduler.scheduled-time>", &fire_time);
    for _ in 0..2 {
        sqs.send_message()
            .queue_url(&queue_url)
            .message_body(&fire)
            .send()
            .await
            .unwrap();
    }
    let mut records = Vec::new();
    while records.len() < 2 {
        let received = sqs
            .receive_message()
            .queue_url(&queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        for message in received.messages() {
            records.push((
                message.message_id().unwrap().to_string(),
                message.body().unwrap().to_string(),
            ));
        }
    }
    let failed =
        baton_runtime::workers::process_ingest_batch(&services.runs, &services.schedules, records)
            .await;
    assert!(failed.is_empty(), "{failed:?}");
    let runs = services
        .runs
        .list(
            "acme",
            &baton_core::state::listing::RunListQuery {
                limit: 10,
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .runs;
    assert_eq!(runs.len(), 1, "one fire, delivered twice, starts one run");
    let run = services
        .runs
        .load("acme", &runs[0].run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        run.state.envelope.idempotency_key.as_deref(),
        Some(format!("schedule:{}:{fire_time}", schedule.schedule_id).as_str())
    );
    let recorded = services
        .schedules
        .get("acme", &schedule.schedule_id)
        .await
        .unwrap();
    assert_eq!(recorded.fires, 1);
    assert_eq!(
        recorded.last_run_id.as_deref(),
        Some(runs[0].run_id.as_str())
    );

    // Deleted: gone from EventBridge Scheduler and from the store.
    services
        .schedules
        .delete("acme", &schedule.schedule_id)
        .await
        .unwrap();
    let gone = scheduler
        .get_schedule()
        .name(&schedule.schedule_id)
        .group_name(&group)
        .send()
        .await
        .unwrap_err();
    assert!(
        gone.as_service_error()
            .is_some_and(|error| error.is_resource_not_found_exception()),
        "{gone:?}"
    );
    assert!(services.schedules.list("acme").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_schedule_eventbridge_refuses_is_not_kept() {
    let moto = moto_server::MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let store = Arc::new(baton_aws::DynamoRunStore::new(
        &connection,
        moto_server::unique_name("baton-scheduled"),
    ));
    store.create_table_if_missing().await.unwrap();
    // A group that does not exist: EventBridge Scheduler refuses the schedule.
    let triggers = Arc::new(baton_aws::scheduler::EventBridgeScheduleTriggers::new(
        &connection,
        baton_aws::scheduler::SchedulerTarget {
            group: moto_server::unique_name("no-such-group"),
            target_arn: "arn:aws:sqs:us-east-1:123456789012:ingest".into(),
            role_arn: ROLE_ARN.into(),
        },
    ));
    let built = TestServices::with_model(Arc::new(NeverCalled))
        .store(store.clone())
        .schedules(store.clone(), triggers)
        .build();
    let refused = built
        .services
        .schedules
        .create(
            "acme",
            &json!({
                "expression": "rate(1 hour)",
                "envelope": {"objective": "x", "outputContract": {"schema": {"type": "object"}}}
            }),
        )
        .await
        .unwrap_err();
    // A group that does not exist is a permanent refusal (the deployment
    // must be fixed), named without ARNs or account ids.
    assert!(!refused.is_retryable(), "{refused}");
    let said = refused.to_string();
    assert!(
        said.contains("EventBridge Scheduler CreateSchedule failed ("),
        "{said}"
    );
    assert!(
        !said.contains("arn:") && !said.contains("123456789012"),
        "{said}"
    );
    assert!(
        built
            .services
            .schedules
            .list("acme")
            .await
            .unwrap()
            .is_empty(),
        "a schedule EventBridge refused is not kept"
    );
}

/// moto with a schedule group, a DynamoDB store, and the target a
/// schedule in that group fires into (an ingest queue's ARN: moto never
/// fires).
struct SchedulerStack {
    _moto: moto_server::MotoServer,
    scheduler: aws_sdk_scheduler::Client,
    group: String,
    connection: baton_aws::AwsConnection,
    store: Arc<baton_aws::DynamoRunStore>,
    target: baton_aws::scheduler::SchedulerTarget,
}

async fn scheduler_stack() -> SchedulerStack {
    let moto = moto_server::MotoServer::start().unwrap();
    let scheduler = aws_sdk_scheduler::Client::new(&moto.sdk_configuration().await);
    let group = moto_server::unique_name("baton-schedules");
    scheduler
        .create_schedule_group()
        .name(&group)
        .send()
        .await
        .unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let store = Arc::new(baton_aws::DynamoRunStore::new(
        &connection,
        moto_server::unique_name("baton-scheduled"),
    ));
    store.create_table_if_missing().await.unwrap();
    let target = baton_aws::scheduler::SchedulerTarget {
        group: group.clone(),
        target_arn: "arn:aws:sqs:us-east-1:123456789012:ingest".into(),
        role_arn: ROLE_ARN.into(),
    };
    SchedulerStack {
        _moto: moto,
        scheduler,
        group,
        connection,
        store,
        target,
    }
}

/// The store and EventBridge Scheduler disagree when a resume's call to
/// EventBridge fails (here its schedule group is deleted under it, so the
/// call is refused): the resume is kept, the schedule says it is out of
/// step, and the keeper's tick (the `sweeper` function in the cloud) hands
/// the change to EventBridge again after each back-off until it takes it.
/// The clock is moved by the test; EventBridge, DynamoDB and SQS are moto.
#[tokio::test(flavor = "multi_thread")]
async fn a_resume_eventbridge_refused_is_retried_until_the_two_agree() {
    use baton_core::records::schedules::{ScheduleState, fire_retry_delay};
    let SchedulerStack {
        _moto,
        scheduler,
        group,
        connection,
        store,
        target,
    } = scheduler_stack().await;
    let triggers = Arc::new(baton_aws::scheduler::EventBridgeScheduleTriggers::new(
        &connection,
        target,
    ));
    let clock = Arc::new(baton_runtime::clock::OffsetClock::new());
    let built = TestServices::with_model(Arc::new(NeverCalled))
        .store(store.clone())
        .schedules(store.clone(), triggers)
        .clock(clock.clone())
        .build();
    let schedules = &built.services.schedules;
    let request = json!({
        "expression": "rate(1 hour)",
        "envelope": {"objective": "x", "outputContract": {"schema": {"type": "object"}}}
    });
    let schedule = schedules.create("acme", &request).await.unwrap();
    assert_eq!(schedule.trigger_out_of_step, None, "created in step");
    schedules
        .pause("acme", &schedule.schedule_id)
        .await
        .unwrap();

    // EventBridge refuses the resume: its group is gone.
    scheduler
        .delete_schedule_group()
        .name(&group)
        .send()
        .await
        .unwrap();
    let resumed = schedules
        .resume("acme", &schedule.schedule_id)
        .await
        .unwrap();
    assert_eq!(resumed.state, ScheduleState::Active, "the store keeps it");
    let read = schedules.get("acme", &schedule.schedule_id).await.unwrap();
    let shown = serde_json::to_value(&read).unwrap();
    let out = &shown["triggerOutOfStep"];
    assert_eq!(out["attempts"], 1, "{shown}");
    assert!(
        out["message"]
            .as_str()
            .unwrap()
            .contains("EventBridge Scheduler"),
        "{shown}"
    );

    // Not before its back-off; then refused again, and backed off further.
    let early = schedules.fire_due().await.unwrap();
    assert_eq!(
        (early.triggers_settled, early.triggers_out_of_step),
        (0, 0),
        "{early:?}"
    );
    clock.advance(fire_retry_delay(1));
    let again = schedules.fire_due().await.unwrap();
    assert_eq!(again.triggers_out_of_step, 1, "{again:?}");
    let read = schedules.get("acme", &schedule.schedule_id).await.unwrap();
    assert_eq!(read.trigger_out_of_step.as_ref().unwrap().attempts, 2);

    // EventBridge is back: the next try sets it, and the two agree.
    scheduler
        .create_schedule_group()
        .name(&group)
        .send()
        .await
        .unwrap();
    clock.advance(fire_retry_delay(2));
    let settled = schedules.fire_due().await.unwrap();
    assert_eq!(settled.triggers_settled, 1, "{settled:?}");
    assert!(
        settled.runs.is_empty(),
        "EventBridge fires it, not the keeper"
    );
    let read = schedules.get("acme", &schedule.schedule_id).await.unwrap();
    assert_eq!(read.trigger_out_of_step, None);
    assert!(
        serde_json::to_value(&read)
            .unwrap()
            .get("triggerOutOfStep")
            .is_none()
    );
    let kept = scheduler
        .get_schedule()
        .name(&schedule.schedule_id)
        .group_name(&group)
        .send()
        .await
        .unwrap();
    assert_eq!(kept.state().map(|state| state.as_str()), Some("ENABLED"));
    // Nothing left for the keeper.
    let quiet = schedules.fire_due().await.unwrap();
    assert_eq!((quiet.triggers_settled, quiet.triggers_out_of_step), (0, 0));
}

/// A delete while EventBridge Scheduler is out of reach (the API process's
/// calls to it fail): the schedule is kept, marked `deleting` and out of
/// step, and fires no more; the keeper's tick (the `sweeper` function)
/// removes the EventBridge schedule after the back-off, then the schedule
/// is gone from the store too. The clock is moved by the test; EventBridge,
/// DynamoDB and SQS are moto, and the outage is a process whose Scheduler
/// endpoint refuses connections.
#[tokio::test(flavor = "multi_thread")]
async fn a_delete_eventbridge_missed_is_retried_until_the_schedule_is_gone() {
    use baton_core::records::schedules::fire_retry_delay;
    let SchedulerStack {
        _moto,
        scheduler,
        group,
        connection,
        store,
        target,
    } = scheduler_stack().await;
    let clock = Arc::new(baton_runtime::clock::OffsetClock::new());
    let reachable = Arc::new(baton_aws::scheduler::EventBridgeScheduleTriggers::new(
        &connection,
        target.clone(),
    ));
    let keeper = TestServices::with_model(Arc::new(NeverCalled))
        .store(store.clone())
        .schedules(store.clone(), reachable)
        .clock(clock.clone())
        .build();
    // The same deployment's API, cut off from EventBridge Scheduler.
    let cut_off = baton_aws::AwsConnection::to_emulator("http://127.0.0.1:9").await;
    let unreachable = Arc::new(baton_aws::scheduler::EventBridgeScheduleTriggers::new(
        &cut_off, target,
    ));
    let api = TestServices::with_model(Arc::new(NeverCalled))
        .store(store.clone())
        .schedules(store.clone(), unreachable)
        .clock(clock.clone())
        .build();
    let request = json!({
        "expression": "rate(1 hour)",
        "envelope": {"objective": "x", "outputContract": {"schema": {"type": "object"}}}
    });
    let schedule = keeper
        .services
        .schedules
        .create("acme", &request)
        .await
        .unwrap();
    let in_eventbridge = || {
        scheduler
            .get_schedule()
            .name(&schedule.schedule_id)
            .group_name(&group)
            .send()
    };
    assert!(in_eventbridge().await.is_ok(), "created in EventBridge");

    // The delete is taken; EventBridge was not reached.
    api.services
        .schedules
        .delete("acme", &schedule.schedule_id)
        .await
        .unwrap();
    let read = keeper
        .services
        .schedules
        .get("acme", &schedule.schedule_id)
        .await
        .unwrap();
    let shown = serde_json::to_value(&read).unwrap();
    assert_eq!(shown["deleting"], true, "{shown}");
    assert_eq!(shown["state"], "paused", "{shown}");
    assert_eq!(shown["triggerOutOfStep"]["attempts"], 1, "{shown}");
    assert!(
        shown["triggerOutOfStep"]["message"]
            .as_str()
            .unwrap()
            .contains("EventBridge Scheduler"),
        "{shown}"
    );
    assert!(in_eventbridge().await.is_ok(), "still in EventBridge");
    // A deleting schedule takes no other change.
    let refused = keeper
        .services
        .schedules
        .resume("acme", &schedule.schedule_id)
        .await;
    assert!(refused.is_err(), "{refused:?}");

    // After the back-off the keeper removes it from EventBridge, then the
    // store.
    clock.advance(fire_retry_delay(1));
    let settled = keeper.services.schedules.fire_due().await.unwrap();
    assert_eq!(settled.triggers_settled, 1, "{settled:?}");
    let gone = keeper
        .services
        .schedules
        .get("acme", &schedule.schedule_id)
        .await;
    assert!(gone.is_err(), "gone from the store: {gone:?}");
    let missing = in_eventbridge().await.unwrap_err();
    assert!(
        missing
            .as_service_error()
            .is_some_and(|error| error.is_resource_not_found_exception()),
        "gone from EventBridge: {missing:?}"
    );
    assert!(
        store.list_schedules("acme").await.unwrap().is_empty(),
        "nothing of it is kept"
    );
}

/// The template wires what the test above stands in for: the api and
/// stream functions name the ingest queue, the role and the group; the role
/// is EventBridge Scheduler's and may send only to the ingest queue.
#[test]
fn the_template_gives_the_api_the_scheduler_target_role_and_group() {
    let text = std::fs::read_to_string(baton_test_support::repository_path("infra/template.yaml"))
        .unwrap();
    let template: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let resources = &template["Resources"];
    let tagged = |value: &serde_yaml::Value| match value {
        serde_yaml::Value::Tagged(tagged) => format!(
            "{} {}",
            tagged.tag,
            serde_yaml::to_string(&tagged.value).unwrap().trim()
        ),
        other => serde_yaml::to_string(other).unwrap().trim().to_string(),
    };
    for function in ["ApiFunction", "StreamFunction"] {
        let variables = &resources[function]["Properties"]["Environment"]["Variables"];
        assert_eq!(
            tagged(&variables["BATON_SCHEDULER_TARGET_ARN"]),
            "!GetAtt IngestQueue.Arn",
            "{function}"
        );
        assert_eq!(
            tagged(&variables["BATON_SCHEDULER_ROLE_ARN"]),
            "!GetAtt SchedulerRole.Arn",
            "{function}"
        );
        assert_eq!(
            tagged(&variables["BATON_SCHEDULE_GROUP"]),
            "!Ref ScheduleGroup",
            "{function}"
        );
    }
    assert_eq!(
        resources["ScheduleGroup"]["Type"],
        "AWS::Scheduler::ScheduleGroup"
    );
    let role = &resources["SchedulerRole"]["Properties"];
    let trust = &role["AssumeRolePolicyDocument"]["Statement"][0];
    assert_eq!(trust["Principal"]["Service"], "scheduler.amazonaws.com");
    let grant = &role["Policies"][0]["PolicyDocument"]["Statement"];
    // One grant, and the customer's key when one is set (`!If
    // UsesCustomerKey`, checked in customer_key.rs).
    let unconditional = grant
        .as_sequence()
        .unwrap()
        .iter()
        .filter(|statement| !matches!(statement, serde_yaml::Value::Tagged(_)))
        .count();
    assert_eq!(unconditional, 1, "one grant: {grant:?}");
    assert_eq!(grant.as_sequence().unwrap().len(), 2, "{grant:?}");
    assert_eq!(grant[0]["Action"], "sqs:SendMessage");
    assert_eq!(tagged(&grant[0]["Resource"]), "!GetAtt IngestQueue.Arn");
}
