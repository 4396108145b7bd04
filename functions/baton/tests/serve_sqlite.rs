//! `baton serve --store sqlite:PATH` (the real binary) keeps runs across
//! processes: a run streamed to `complete` by one process is read whole,
//! snapshot and frames, by the next one on the same file. The scripted
//! OpenAI-compatible server stands in for the model.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod serve_support;

use scripted_llm::ScriptedLlmServer;
use serde_json::Value;
use serve_support::{TOKEN, example, read_sse, start_serve};

#[tokio::test(flavor = "multi_thread")]
async fn a_run_outlives_the_serve_process_that_ran_it() {
    let model = ScriptedLlmServer::start().await.unwrap();
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", folder.path().join("runs.sqlite3").display());
    let environment = vec![
        ("BATON_LLM_BASE_URL".to_string(), model.base_url()),
        ("BATON_LLM_MODEL".to_string(), "scripted".to_string()),
    ];
    let client = reqwest::Client::new();

    let first = start_serve(&["--store", &store], &environment).await;
    let frames = read_sse(
        client
            .post(format!("{}/run.stream", first.base))
            .bearer_auth(TOKEN)
            .json(&example("seed-10.0.1-stream-contract-variants.json"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(frames.last().unwrap()["type"], "complete");
    let run_id = frames[0]["runId"].as_str().unwrap().to_string();
    let model_calls = model.request_count();
    first.stop().await;

    let second = start_serve(&["--store", &store], &environment).await;
    let snapshot: Value = client
        .get(format!("{}/runs/{run_id}", second.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(snapshot["run"]["status"], "completed", "{snapshot}");
    let replay = read_sse(
        client
            .get(format!("{}/runs/{run_id}/events", second.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(replay, frames, "the same frames, read by a new process");
    assert_eq!(
        model.request_count(),
        model_calls,
        "nothing ran again in the second process"
    );
}
