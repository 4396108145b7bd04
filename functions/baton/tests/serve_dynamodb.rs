//! End to end against emulated AWS: `baton serve --store dynamodb` (the real
//! binary: HTTP API, DynamoDB run store, SQS step queue polled in-process)
//! with DynamoDB and SQS from the moto server, and the scripted
//! OpenAI-compatible server standing in for the model.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use moto_server::{MotoServer, unique_name};
use scripted_llm::ScriptedLlmServer;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

const TOKEN: &str = "e2e-token";

struct ServeProcess(tokio::process::Child);

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}

fn token_digest() -> String {
    baton_http::auth::token_digest_hex(TOKEN)
}

async fn read_sse(response: reqwest::Response) -> Vec<Value> {
    assert_eq!(response.status(), 200);
    let mut events = response.bytes_stream().eventsource();
    let mut frames = Vec::new();
    while let Some(event) = tokio::time::timeout(Duration::from_secs(60), events.next())
        .await
        .expect("stream stalled")
    {
        frames.push(serde_json::from_str(&event.unwrap().data).unwrap());
    }
    frames
}

#[tokio::test(flavor = "multi_thread")]
async fn an_envelope_runs_end_to_end_on_dynamodb_and_sqs() {
    let moto = MotoServer::start().unwrap();
    let configuration = moto.sdk_configuration().await;
    let table = unique_name("baton-e2e");
    baton_aws::DynamoRunStore::new(aws_sdk_dynamodb::Client::new(&configuration), &table)
        .create_table_if_missing()
        .await
        .unwrap();
    let sqs = aws_sdk_sqs::Client::new(&configuration);
    let queue_url = sqs
        .create_queue()
        .queue_name(unique_name("baton-e2e-steps"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let model = ScriptedLlmServer::start().await.unwrap();

    let repository = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_baton"));
    command
        .args(["serve", "--store", "dynamodb", "--addr", "127.0.0.1:0"])
        .current_dir(&repository)
        .env("BATON_TABLE", &table)
        .env("BATON_QUEUE_URL", &queue_url)
        .env("BATON_API_TOKENS", format!("acme:{}", token_digest()))
        .env("BATON_LLM_BASE_URL", model.base_url())
        .env("BATON_LLM_MODEL", "scripted")
        .env_remove("OPENAI_API_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (name, value) in moto.sdk_environment() {
        command.env(name, value);
    }
    let mut child = command.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let base = loop {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .expect("serve exited");
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("[baton serve] {line}");
        }
    });
    let _serve = ServeProcess(child);

    let client = reqwest::Client::new();
    let envelope: Value = serde_json::from_str(
        &std::fs::read_to_string(
            repository.join("registry/examples/seed-10.1-sample-envelope.json"),
        )
        .unwrap(),
    )
    .unwrap();
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
