//! `baton eval` on the shipped dataset (`registry/examples/datasets/`) with
//! the scripted model double standing in for the LLM endpoint: every
//! example runs, every deterministic check passes, the results file has a
//! line per example and the exit code is 0. The same dataset with an
//! assertion the output cannot meet exits 1, naming the example and the
//! check; a broken dataset exits 2 naming its line and JSON path.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::process::Output;

use scripted_llm::ScriptedLlmServer;
use serde_json::Value;

async fn baton(server: &ScriptedLlmServer, arguments: &[&str]) -> Output {
    let data_home = tempfile::tempdir().unwrap();
    tokio::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(arguments)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .env("XDG_DATA_HOME", data_home.path())
        .env_remove("BATON_REGISTRY_DIR")
        .env_remove("BATON_LOCAL_MODEL_PATH")
        .env_remove("BATON_LLM")
        .env("BATON_LLM_BASE_URL", server.base_url())
        .env("BATON_LLM_MODEL", "gpt-4o-mini")
        .env("BATON_LLM_INITIAL_BACKOFF_MS", "5")
        .output()
        .await
        .unwrap()
}

fn results(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_shipped_dataset_passes_every_deterministic_check() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let folder = tempfile::tempdir().unwrap();
    let results_file = folder.path().join("results.jsonl");
    let ran = baton(
        &server,
        &[
            "eval",
            "registry/examples/datasets/stream-contract-variants.jsonl",
            "--results",
            results_file.to_str().unwrap(),
        ],
    )
    .await;
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert_eq!(ran.status.code(), Some(0), "{ran:?}");
    assert!(stdout.contains("passed       3/3"), "{stdout}");
    let lines = results(&results_file);
    assert_eq!(lines.len(), 3);
    for line in &lines {
        assert_eq!(line["passed"], true, "{line}");
        assert_eq!(line["status"], "completed", "{line}");
        assert!(
            line["runId"].as_str().unwrap().starts_with("run_"),
            "{line}"
        );
        let checks: Vec<&str> = line["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|check| check["check"].as_str().unwrap())
            .collect();
        assert!(
            checks.contains(&"status") && checks.contains(&"contract"),
            "{line}"
        );
        assert!(
            checks.iter().any(|check| check.starts_with("assertions[")),
            "{line}"
        );
    }
    assert_eq!(
        lines
            .iter()
            .map(|line| line["id"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["as-shipped", "hiring-goal", "awareness-goal"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_assertion_exits_1_and_a_broken_dataset_exits_2() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let folder = tempfile::tempdir().unwrap();
    let template = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../registry/examples/seed-10.0.1-stream-contract-variants.json"
    ))
    .canonicalize()
    .unwrap();
    let dataset = folder.path().join("breaks.jsonl");
    std::fs::write(
        &dataset,
        format!(
            "{}\n{}\n{}\n",
            serde_json::json!({"dataset": {"name": "breaks", "template": template}}),
            r#"{"id": "holds", "inputs": {}, "expect": {"assertions": [{"!!": [{"var": "copyVariants.0.body"}]}]}}"#,
            r#"{"id": "three-variants", "inputs": {}, "expect": {"assertions": [{"!!": [{"var": "copyVariants.2"}]}]}}"#,
        ),
    )
    .unwrap();
    let results_file = folder.path().join("results.jsonl");
    let ran = baton(
        &server,
        &[
            "eval",
            dataset.to_str().unwrap(),
            "--results",
            results_file.to_str().unwrap(),
            "--concurrency",
            "2",
        ],
    )
    .await;
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert_eq!(ran.status.code(), Some(1), "{ran:?}");
    assert!(stdout.contains("passed       1/2"), "{stdout}");
    assert!(
        stdout.contains("three-variants"),
        "the failed example is named: {stdout}"
    );
    assert!(
        stdout.contains("assertions[0]"),
        "the failed check is named: {stdout}"
    );
    let lines = results(&results_file);
    let failed: Vec<&Value> = lines
        .iter()
        .filter(|line| line["passed"] == false)
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["id"], "three-variants");
    // Half may fail: the threshold decides.
    let tolerated = baton(
        &server,
        &[
            "eval",
            dataset.to_str().unwrap(),
            "--results",
            results_file.to_str().unwrap(),
            "--min-pass-rate",
            "0.5",
        ],
    )
    .await;
    assert_eq!(tolerated.status.code(), Some(0), "{tolerated:?}");

    let broken = folder.path().join("broken.jsonl");
    std::fs::write(
        &broken,
        "{\"id\": \"x\", \"envelope\": {\"objective\": 3}}\n",
    )
    .unwrap();
    let refused = baton(&server, &["eval", broken.to_str().unwrap()]).await;
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("line 1: $.envelope.objective"), "{said}");
}
