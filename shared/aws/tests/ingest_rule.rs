//! The template's `IngestRule` on the emulator (moto's EventBridge and
//! SQS): its event pattern, read from `infra/template.yaml`, routes a
//! `baton.run.requested` event (detail `{tenantId, envelope}`) to a queue,
//! whole; the ingest worker takes the message from the event's `detail` and
//! starts the run; an event of another source is not routed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use async_trait::async_trait;
use baton_core::state::context::ModelRequest;
use baton_runtime::error::LlmError;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_test_support::{TestServices, repository_path};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

/// Submitting a run calls no model: a double that fails if it is called.
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

/// The rule's event pattern (as JSON).
fn ingest_rule_pattern() -> Value {
    let text = std::fs::read_to_string(repository_path("infra/template.yaml")).unwrap();
    let template: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    serde_json::to_value(&template["Resources"]["IngestRule"]["Properties"]["EventPattern"])
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_requested_run_event_reaches_the_ingest_queue_as_an_ingest_message() {
    let pattern = ingest_rule_pattern();
    assert_eq!(pattern["source"], json!(["baton.submit"]));
    let moto = moto_server::MotoServer::start().unwrap();
    let configuration = moto.sdk_configuration().await;
    let events = aws_sdk_eventbridge::Client::new(&configuration);
    let sqs = aws_sdk_sqs::Client::new(&configuration);
    let bus = moto_server::unique_name("submissions");
    events.create_event_bus().name(&bus).send().await.unwrap();
    let queue_url = moto_server::create_unique_queue(&configuration, "ingest", None)
        .await
        .unwrap();
    let queue_arn = moto_server::queue_arn(&configuration, &queue_url)
        .await
        .unwrap();
    let rule = moto_server::unique_name("ingest-rule");
    events
        .put_rule()
        .name(&rule)
        .event_bus_name(&bus)
        .event_pattern(pattern.to_string())
        .send()
        .await
        .unwrap();
    events
        .put_targets()
        .rule(&rule)
        .event_bus_name(&bus)
        .targets(
            aws_sdk_eventbridge::types::Target::builder()
                .id("ingest-queue")
                .arn(&queue_arn)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    let envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    let entry = |source: &str| {
        aws_sdk_eventbridge::types::PutEventsRequestEntry::builder()
            .event_bus_name(&bus)
            .source(source)
            .detail_type("baton.run.requested")
            .detail(json!({"tenantId": "t", "envelope": envelope}).to_string())
            .build()
    };
    events
        .put_events()
        .entries(entry("somebody.else"))
        .entries(entry("baton.submit"))
        .send()
        .await
        .unwrap();

    let mut bodies = Vec::new();
    for _ in 0..3 {
        let received = sqs
            .receive_message()
            .queue_url(&queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        for message in received.messages() {
            bodies.push((
                message.message_id().unwrap().to_string(),
                message.body().unwrap().to_string(),
            ));
        }
    }
    assert_eq!(
        bodies.len(),
        1,
        "only the baton.submit event is routed: {bodies:?}"
    );
    let event: Value = serde_json::from_str(&bodies[0].1).unwrap();
    assert_eq!(event["detail-type"], "baton.run.requested");
    assert_eq!(
        event["detail"],
        json!({"tenantId": "t", "envelope": envelope})
    );

    let built = TestServices::with_model(Arc::new(NeverCalled)).build();
    let failed = baton_runtime::workers::process_ingest_batch(
        &built.services.runs,
        &built.services.schedules,
        bodies,
    )
    .await;
    assert!(failed.is_empty(), "{failed:?}");
    let page = built
        .store
        .list_runs(
            "t",
            &baton_core::state::listing::RunListQuery {
                status: None,
                limit: 10,
                cursor: None,
                forked_from: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(page.runs.len(), 1, "the event became a run");
    assert_eq!(
        page.runs[0].objective,
        envelope["objective"].as_str().unwrap()
    );
}
