//! Every frame every CLI format prints matches the published schemas
//! (`events/schemas/event-frame.schema.json` and the frame type's own):
//! `run`, `fork`, `chat`, `resume` and `judge`, each in `--format ndjson`
//! and `--format sse` (the `data:` line of each event). The HTTP routes'
//! frames are checked the same way by `baton-http`'s API tests (every SSE
//! response they read goes through the same check). The model is the
//! scripted OpenAI-compatible server, a test double of the endpoint.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::{Path, PathBuf};

use scripted_llm::{Behavior, ScriptedLlmServer};
use serde_json::{Value, json};

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `baton` with the model double as its endpoint (model `stand-in`):
/// (exit code, stdout, stderr).
async fn baton(
    server: &ScriptedLlmServer,
    data_home: &Path,
    arguments: &[&str],
) -> (i32, String, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(arguments)
        .current_dir(repository_root())
        .env("XDG_DATA_HOME", data_home)
        .env("BATON_LLM_BASE_URL", server.base_url())
        .env("BATON_LLM_MODEL", "stand-in")
        .env("BATON_LLM_INITIAL_BACKOFF_MS", "5")
        .env_remove("BATON_LLM")
        .env_remove("BATON_LOCAL_MODEL_PATH")
        .env_remove("BATON_REGISTRY_DIR")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_MODEL")
        .output()
        .await
        .unwrap();
    (
        output.status.code().unwrap(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// The frames of one format's output.
fn frames_of(format: &str, text: &str) -> Vec<Value> {
    match format {
        "ndjson" => text
            .lines()
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line}"))
            })
            .collect(),
        "sse" => text
            .split("\n\n")
            .filter(|block| !block.trim().is_empty())
            .map(|block| {
                let data = block
                    .lines()
                    .find_map(|line| line.strip_prefix("data: "))
                    .unwrap_or_else(|| panic!("an SSE event without data: {block}"));
                serde_json::from_str(data).unwrap()
            })
            .collect(),
        other => panic!("no format {other}"),
    }
}

fn checked(command: &str, format: &str, text: &str) -> Vec<Value> {
    let frames = frames_of(format, text);
    assert!(
        !frames.is_empty(),
        "{command} --format {format} printed no frame"
    );
    baton_test_support::assert_frame_values_match_schemas(frames.iter());
    frames
}

#[tokio::test(flavor = "multi_thread")]
async fn every_frame_of_every_cli_format_matches_the_published_schemas() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let folder = tempfile::tempdir().unwrap();
    let data_home = folder.path().join("data");
    let store = format!(
        "--store=sqlite:{}",
        folder.path().join("runs.sqlite3").display()
    );
    let envelope = "registry/examples/seed-10.0.1-stream-contract-variants.json";
    let mut seen = std::collections::BTreeSet::new();

    for format in ["ndjson", "sse"] {
        // run
        let (code, out, err) = baton(
            &server,
            &data_home,
            &["run", envelope, "--format", format, &store],
        )
        .await;
        assert_eq!(code, 0, "run --format {format}: {err}");
        let frames = checked("run", format, &out);
        let completed_run = frames[0]["runId"].as_str().unwrap().to_string();
        seen.insert(("run", format));

        // fork
        let (code, out, err) = baton(
            &server,
            &data_home,
            &[
                "fork",
                &completed_run,
                "--at",
                "1",
                "--format",
                format,
                &store,
            ],
        )
        .await;
        assert_eq!(code, 0, "fork --format {format}: {err}");
        checked("fork", format, &out);
        seen.insert(("fork", format));

        // chat
        server.push_behaviors([Behavior::Content {
            content: "A panel of judges reviews content.".into(),
        }]);
        let (code, out, err) = baton(
            &server,
            &data_home,
            &[
                "chat",
                "-m",
                "What can you review?",
                "--format",
                format,
                &store,
            ],
        )
        .await;
        assert_eq!(code, 0, "chat --format {format}: {err}");
        checked("chat", format, &out);
        seen.insert(("chat", format));

        // run parked on a person, then resume
        let human = repository_root().join("functions/baton/tests/fixtures/human-review.json");
        let (code, out, err) = baton(
            &server,
            &data_home,
            &["run", human.to_str().unwrap(), "--format", format, &store],
        )
        .await;
        assert_eq!(code, 4, "a parked run: {err}");
        let parked = checked("run (parked)", format, &out);
        let last = parked.last().unwrap();
        let run_id = last["runId"].as_str().unwrap();
        let answer = folder.path().join(format!("answer-{format}.json"));
        std::fs::write(
            &answer,
            scripted_llm::generate_instance(&last["payload"]["contract"]["outputSchema"], "answer")
                .to_string(),
        )
        .unwrap();
        let (code, out, err) = baton(
            &server,
            &data_home,
            &[
                "resume",
                run_id,
                "--output",
                answer.to_str().unwrap(),
                "--format",
                format,
                &store,
            ],
        )
        .await;
        assert_eq!(code, 0, "resume --format {format}: {err}");
        checked("resume", format, &out);
        seen.insert(("resume", format));

        // judge
        server.push_behaviors([Behavior::Content {
            content: json!({"score": 7.0, "feedback": "fine", "strengths": [], "improvements": []})
                .to_string(),
        }]);
        let request = folder.path().join(format!("panel-{format}.json"));
        std::fs::write(
            &request,
            json!({
                "request": {"id": format!("req-{format}"), "content": "Baton streams frames.",
                            "selectedAgents": [{"id": "a", "capabilities": {"modelName": "stand-in"}}]},
                "config": {"maxDiscussionRounds": 1, "roundTimeout": 30000, "consensusAlgorithm": "simple_average",
                           "enableDiscussion": false, "convergenceThreshold": 0.5, "outlierDetection": false}
            })
            .to_string(),
        )
        .unwrap();
        let (code, out, err) = baton(
            &server,
            &data_home,
            &["judge", request.to_str().unwrap(), "--format", format],
        )
        .await;
        assert_eq!(code, 0, "judge --format {format}: {err}");
        checked("judge", format, &out);
        seen.insert(("judge", format));
    }
    assert_eq!(seen.len(), 10, "{seen:?}");
}
