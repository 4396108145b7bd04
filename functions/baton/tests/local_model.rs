//! The README's main job on the offline default model: `baton run` on an
//! example envelope with no LLM variables set, real decoding by SmolLM2 in
//! llama.cpp, no test double anywhere.
//!
//! Also `baton eval` on the shipped dataset with the offline model.
//! Slow (CPU decoding), so `#[ignore]`d in the fast suite; `scripts/test.sh`
//! (and so `.ci/run`) runs it with `--ignored` after fetching the model file.

#![cfg(feature = "local-model")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};

use baton_core::basics::schema::{collect_violations, compile_schema};
use serde_json::Value;

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `baton ARGUMENTS` from the repository with no model configured: the
/// CLI picks the offline model.
async fn offline_baton(arguments: &[&str]) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(arguments)
        .current_dir(repository_root())
        .env_remove("BATON_LLM")
        .env_remove("BATON_LLM_BASE_URL")
        .env_remove("BATON_LLM_API_KEY")
        .env_remove("BATON_LLM_MODEL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_MODEL")
        .env_remove("BATON_REGISTRY_DIR")
        .env_remove("BATON_PLANNER")
        .output()
        .await
        .unwrap()
}

async fn run_on_the_offline_model(envelope: &str) -> (Option<i32>, Vec<Value>, String) {
    let output = offline_baton(&["run", envelope, "--format", "ndjson"]).await;
    let frames = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (
        output.status.code(),
        frames,
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "slow: decodes with the offline model on the CPU; scripts/test.sh runs it"]
async fn an_example_envelope_completes_with_contract_valid_output_on_the_offline_model() {
    let envelope = "registry/examples/positioning-recommendation.json";
    let (code, frames, stderr) = run_on_the_offline_model(envelope).await;
    assert_eq!(code, Some(0), "stderr: {stderr}");
    assert!(stderr.contains("offline local model"), "{stderr}");

    let last = frames.last().unwrap();
    assert_eq!(last["type"], "complete");
    // The engine validated it; check again here, independently, against the caller's schema.
    let envelope_json: Value =
        serde_json::from_str(&std::fs::read_to_string(repository_root().join(envelope)).unwrap())
            .unwrap();
    let validator = compile_schema(&envelope_json["outputContract"]["schema"], "contract").unwrap();
    let violations = collect_violations(&validator, &last["payload"]["output"]);
    assert!(violations.is_empty(), "{violations:?}");

    // Every AI node that writes or reviews (not an analysis node: its text
    // is not streamed) was answered by the local model, streamed as deltas.
    let streaming_nodes: Vec<&str> = frames
        .iter()
        .filter(|frame| {
            frame["type"] == "node_start"
                && frame["payload"]["executorType"] == "ai"
                && frame["payload"]["kind"] != "structuring"
        })
        .map(|frame| frame["nodeId"].as_str().unwrap())
        .collect();
    assert!(!streaming_nodes.is_empty());
    for node in &streaming_nodes {
        assert!(
            frames
                .iter()
                .any(|frame| frame["type"] == "delta" && frame["nodeId"] == *node),
            "{node}'s answer streams at least one delta"
        );
    }
    // Token usage is the local model's own count (prompt and answer), not zero.
    let metrics = frames
        .iter()
        .find(|frame| frame["type"] == "metrics" && frame.get("nodeId").is_none())
        .unwrap();
    assert!(metrics["payload"]["tokens"]["prompt"].as_u64().unwrap() > 0);
    assert!(metrics["payload"]["tokens"]["completion"].as_u64().unwrap() > 0);
}

/// `baton chat` on the offline model: its grammar allows only a valid call
/// of an offered tool or the answer, so its first turn is a valid
/// `registry_search` call (the registry's chat agent, narrowed here to that
/// one tool, is told to search first), the real builtin answers, and after
/// its one tool round (`BATON_LOCAL_TOOL_ROUNDS`) it answers in text.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "slow: decodes with the offline model on the CPU; scripts/test.sh runs it"]
async fn the_offline_model_makes_a_valid_tool_call_then_answers() {
    let registry = tempfile::tempdir().unwrap();
    copy_folder(&repository_root().join("registry"), registry.path());
    let chat_file = registry.path().join("chat.json");
    let mut chat: Value =
        serde_json::from_str(&std::fs::read_to_string(&chat_file).unwrap()).unwrap();
    chat["tools"] = serde_json::json!(["registry_search"]);
    chat["instructions"] = Value::String(
        "You answer questions about this orchestrator's registry. Always call registry_search first with the key word of the question, then answer in one sentence using what it found.".into(),
    );
    std::fs::write(&chat_file, chat.to_string()).unwrap();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args([
            "chat",
            "-m",
            "Which capabilities review content?",
            "--format",
            "ndjson",
            "--store",
            "memory",
        ])
        .arg("--registry")
        .arg(registry.path())
        .current_dir(repository_root())
        .env_remove("BATON_LLM")
        .env_remove("BATON_LLM_BASE_URL")
        .env_remove("BATON_LLM_MODEL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("BATON_REGISTRY_DIR")
        .env_remove("BATON_LOCAL_TOOL_ROUNDS")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let frames: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    baton_test_support::assert_frame_values_match_schemas(frames.iter());
    let kinds: Vec<&str> = frames
        .iter()
        .filter_map(|frame| frame["type"].as_str())
        .filter(|kind| ["tool_call", "tool_result", "message", "complete"].contains(kind))
        .collect();
    assert_eq!(
        kinds,
        ["tool_call", "tool_result", "message", "complete"],
        "{stderr}"
    );
    let call = &frames
        .iter()
        .find(|frame| frame["type"] == "tool_call")
        .unwrap()["payload"];
    assert_eq!(call["toolName"], "registry_search");
    assert!(
        call["args"]["query"]
            .as_str()
            .is_some_and(|query| !query.is_empty()),
        "{call}"
    );
    let result = &frames
        .iter()
        .find(|frame| frame["type"] == "tool_result")
        .unwrap()["payload"];
    assert!(
        result.get("error").is_none(),
        "the call was valid: {result}"
    );
    assert!(result["result"]["matches"].is_array());
    let answer = &frames.last().unwrap()["payload"]["output"]["message"];
    assert!(
        answer.as_str().is_some_and(|text| !text.trim().is_empty()),
        "{answer}"
    );
}

fn copy_folder(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_folder(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// `baton eval` on the shipped dataset with the offline model: every
/// example runs, every deterministic check passes, the results file and the
/// summary are written, the exit code is 0.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "slow: decodes with the offline model on the CPU; scripts/test.sh runs it"]
async fn the_shipped_dataset_passes_its_deterministic_checks_on_the_offline_model() {
    let folder = tempfile::tempdir().unwrap();
    let results = folder.path().join("results.jsonl");
    let output = offline_baton(&[
        "eval",
        "registry/examples/datasets/stream-contract-variants.jsonl",
        "--concurrency",
        "1",
        "--results",
        results.to_str().unwrap(),
    ])
    .await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("offline local model"), "{stderr}");
    assert!(stdout.contains("passed       3/3"), "{stdout}");
    let lines: Vec<Value> = std::fs::read_to_string(&results)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    for line in &lines {
        assert_eq!(line["passed"], true, "{line}");
        assert!(
            line["checks"].as_array().unwrap().len() >= 3,
            "status, contract and assertions were checked: {line}"
        );
    }
}
