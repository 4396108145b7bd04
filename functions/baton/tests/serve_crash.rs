//! A crash loses no run: `baton serve --store sqlite:FILE` (the real
//! binary) is SIGKILLed again and again while its runs are mid-node, then
//! restarted on the same file. Every run completes within 10 s of the last
//! restart (its nodes' leases are 30 s: only the takeover of a dead
//! process's lease makes that possible), with a gapless event log and one
//! `node_complete` per node. The scripted OpenAI-compatible server stands in
//! for the model.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod serve_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use scripted_llm::{Behavior, ScriptedLlmServer};
use serde_json::Value;
use serve_support::{TOKEN, example, model_environment, read_sse, start_serve};

const RUNS: usize = 12;
const KILLS: usize = 4;

async fn wait_for_model_requests(model: &ScriptedLlmServer, at_least: usize) {
    let started = Instant::now();
    while model.request_count() < at_least {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the model was asked {} times, expected {at_least}",
            model.request_count()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn run_status(client: &reqwest::Client, base: &str, run_id: &str) -> String {
    let snapshot: Value = client
        .get(format!("{base}/runs/{run_id}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    snapshot["run"]["status"].as_str().unwrap_or("").to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_mid_node_survive_repeated_sigkills_of_the_serve_process() {
    let model = ScriptedLlmServer::start().await.unwrap();
    model.set_default_behavior(Behavior::SlowValid { delay_ms: 2_000 });
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", folder.path().join("runs.sqlite3").display());
    let environment = model_environment(&model);
    let client = reqwest::Client::new();

    let mut serve = start_serve(&["--store", &store], &environment).await;
    let mut run_ids = Vec::new();
    for _ in 0..RUNS {
        let response = client
            .post(format!("{}/runs", serve.base))
            .bearer_auth(TOKEN)
            .json(&example("seed-10.1-sample-envelope.json"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 202);
        let body: Value = response.json().await.unwrap();
        run_ids.push(body["runId"].as_str().unwrap().to_string());
    }

    for kill in 0..KILLS {
        // New model calls have started (each takes 2 s): nodes are mid-call.
        let asked = model.request_count();
        wait_for_model_requests(&model, asked + RUNS / 2).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        serve.stop().await; // SIGKILL: no shutdown code runs
        eprintln!(
            "kill {kill}: after {} model requests",
            model.request_count()
        );
        serve = start_serve(&["--store", &store], &environment).await;
    }

    // The last kill, then a quicker model, so the deadline measures the
    // takeover rather than the model.
    let asked = model.request_count();
    wait_for_model_requests(&model, asked + RUNS / 2).await;
    serve.stop().await;
    model.set_default_behavior(Behavior::SlowValid { delay_ms: 200 });
    let restarted = Instant::now();
    let serve = start_serve(&["--store", &store], &environment).await;
    let mut statuses = BTreeMap::new();
    loop {
        for run_id in &run_ids {
            statuses.insert(
                run_id.clone(),
                run_status(&client, &serve.base, run_id).await,
            );
        }
        if statuses.values().all(|status| status == "completed") {
            break;
        }
        assert!(
            restarted.elapsed() < Duration::from_secs(10),
            "10 s after the restart, not every run completed: {statuses:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "every run completed {} ms after the last restart",
        restarted.elapsed().as_millis()
    );

    for run_id in &run_ids {
        let frames = read_sse(
            client
                .get(format!("{}/runs/{run_id}/events", serve.base))
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap(),
        )
        .await;
        let ids: Vec<u64> = frames
            .iter()
            .map(|frame| frame["id"].as_u64().unwrap())
            .collect();
        assert_eq!(
            ids,
            (1..=ids.len() as u64).collect::<Vec<_>>(),
            "{run_id}: frames are gapless"
        );
        assert_eq!(frames.last().unwrap()["type"], "complete", "{run_id}");
        let plan = frames
            .iter()
            .find(|frame| frame["type"] == "plan_generated")
            .expect("a plan");
        let planned = plan["payload"]["nodes"].as_array().map_or(0, Vec::len);
        let mut completions: BTreeMap<String, usize> = BTreeMap::new();
        for frame in frames
            .iter()
            .filter(|frame| frame["type"] == "node_complete")
        {
            *completions
                .entry(frame["nodeId"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
        assert!(planned > 0, "{run_id}: the plan names its nodes: {plan}");
        assert_eq!(completions.len(), planned, "{run_id}: every node completed");
        assert!(
            completions.values().all(|count| *count == 1),
            "{run_id}: one node_complete per node: {completions:?}"
        );
    }
}
