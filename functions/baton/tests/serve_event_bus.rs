//! Runs announced on an EventBridge bus, end to end on the emulator:
//! `baton serve` (the real binary, memory store, the scripted model) with
//! `BATON_EVENT_BUS` puts a `baton.run.completed` event when a run
//! completes and `baton.run.awaiting_human` when one parks; a rule on the
//! bus (moto's EventBridge) routes them to an SQS queue the test reads.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod serve_support;

use std::time::Duration;

use moto_server::{MotoServer, create_unique_queue, unique_name};
use scripted_llm::ScriptedLlmServer;
use serde_json::{Value, json};
use serve_support::{TOKEN, example, repository, start_serve};

#[tokio::test(flavor = "multi_thread")]
async fn ended_and_parked_runs_are_announced_on_the_bus() {
    let moto = MotoServer::start().unwrap();
    let configuration = moto.sdk_configuration().await;
    let events = aws_sdk_eventbridge::Client::new(&configuration);
    let sqs = aws_sdk_sqs::Client::new(&configuration);
    let bus = unique_name("baton-bus");
    events.create_event_bus().name(&bus).send().await.unwrap();
    let queue_url = create_unique_queue(&configuration, "baton-announced", None)
        .await
        .unwrap();
    let queue_arn = moto_server::queue_arn(&configuration, &queue_url)
        .await
        .unwrap();
    let rule = unique_name("baton-runs");
    events
        .put_rule()
        .name(&rule)
        .event_bus_name(&bus)
        .event_pattern(json!({"source": ["baton"]}).to_string())
        .send()
        .await
        .unwrap();
    events
        .put_targets()
        .rule(&rule)
        .event_bus_name(&bus)
        .targets(
            aws_sdk_eventbridge::types::Target::builder()
                .id("queue")
                .arn(&queue_arn)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();

    let model = ScriptedLlmServer::start().await.unwrap();
    let mut environment = vec![
        ("BATON_LLM_BASE_URL".to_string(), model.base_url()),
        ("BATON_LLM_MODEL".to_string(), "gpt-4o-mini".to_string()),
        ("BATON_EVENT_BUS".to_string(), bus.clone()),
    ];
    environment.extend(
        moto.sdk_environment()
            .into_iter()
            .map(|(name, value)| (name.to_string(), value)),
    );
    let serve = start_serve(&["--store", "memory"], &environment).await;
    let client = reqwest::Client::new();
    let mut run_ids = Vec::new();
    for envelope in [
        example("seed-10.1-sample-envelope.json"),
        serde_json::from_str::<Value>(
            &std::fs::read_to_string(
                repository().join("functions/baton/tests/fixtures/human-review.json"),
            )
            .unwrap(),
        )
        .unwrap(),
    ] {
        let created: Value = client
            .post(format!("{}/runs", serve.base))
            .bearer_auth(TOKEN)
            .json(&envelope)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        run_ids.push(created["runId"].as_str().unwrap().to_string());
    }

    let mut announced: Vec<Value> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while announced.len() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "announced so far: {announced:?}"
        );
        let received = sqs
            .receive_message()
            .queue_url(&queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        for message in received.messages() {
            announced.push(serde_json::from_str(message.body().unwrap()).unwrap());
        }
    }
    let mut kinds: Vec<(String, String)> = announced
        .iter()
        .map(|event| {
            assert_eq!(event["source"], "baton");
            assert_eq!(event["detail"]["type"], event["detail-type"]);
            assert_eq!(event["detail"]["tenantId"], "acme");
            (
                event["detail"]["runId"].as_str().unwrap().to_string(),
                event["detail-type"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    kinds.sort();
    let mut expected = vec![
        (run_ids[0].clone(), "baton.run.completed".to_string()),
        (run_ids[1].clone(), "baton.run.awaiting_human".to_string()),
    ];
    expected.sort();
    assert_eq!(kinds, expected);
    serve.stop().await;
}
