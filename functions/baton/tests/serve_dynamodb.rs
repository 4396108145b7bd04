//! End to end against emulated AWS: `baton serve --store dynamodb` (the real
//! binary: HTTP API, DynamoDB run store, SQS step queue polled in-process)
//! with DynamoDB and SQS from the moto server, and the scripted
//! OpenAI-compatible server standing in for the model.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod serve_support;

use moto_server::MotoServer;
use scripted_llm::ScriptedLlmServer;
use serde_json::Value;
use serve_support::{
    TOKEN, dynamodb_environment, example, model_environment, read_sse, start_serve,
};

#[tokio::test(flavor = "multi_thread")]
async fn an_envelope_runs_end_to_end_on_dynamodb_and_sqs() {
    let moto = MotoServer::start().unwrap();
    let model = ScriptedLlmServer::start().await.unwrap();
    let mut environment = dynamodb_environment(&moto).await;
    environment.extend(model_environment(&model));
    let serve = start_serve(&["--store", "dynamodb"], &environment).await;
    let base = serve.base.clone();

    let client = reqwest::Client::new();
    let envelope = example("seed-10.1-sample-envelope.json");
    let unauthenticated = client
        .post(format!("{base}/run.stream"))
        .json(&envelope)
        .send()
        .await
        .unwrap();
    assert_eq!(unauthenticated.status(), 401);
    let frames = read_sse(
        client
            .post(format!("{base}/run.stream"))
            .bearer_auth(TOKEN)
            .json(&envelope)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let types: Vec<&str> = frames
        .iter()
        .map(|frame| frame["type"].as_str().unwrap())
        .collect();
    assert_eq!(types.first(), Some(&"start"));
    assert_eq!(types.last(), Some(&"complete"), "{types:?}");
    for (index, frame) in frames.iter().enumerate() {
        assert_eq!(frame["id"], index as u64 + 1);
    }
    assert_eq!(
        frames.last().unwrap()["payload"]["output"]["copyVariants"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let nodes = types
        .iter()
        .filter(|kind| **kind == "node_complete")
        .count();
    assert_eq!(model.request_count(), nodes, "one model call per node");

    let run_id = frames[0]["runId"].as_str().unwrap();
    let replay = read_sse(
        client
            .get(format!("{base}/runs/{run_id}/events"))
            .bearer_auth(TOKEN)
            .header("Last-Event-ID", "3")
            .send()
            .await
            .unwrap(),
    )
    .await;
    let replayed: Vec<u64> = replay
        .iter()
        .map(|frame| frame["id"].as_u64().unwrap())
        .collect();
    let expected: Vec<u64> = (4..=frames.len() as u64).collect();
    assert_eq!(replayed, expected, "exactly the frames after 3");
    let snapshot: Value = client
        .get(format!("{base}/runs/{run_id}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(snapshot["run"]["status"], "completed");
}
