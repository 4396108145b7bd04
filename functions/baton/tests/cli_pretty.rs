//! The CLI's pretty view and `--output-only`, against the scripted model
//! (the test double for the model endpoint): each node's time, tokens and
//! cost, the run's totals, no colours when stdout is not a terminal;
//! colours and the progress line on a terminal (a pseudo-terminal from
//! `script`); the validated output alone; a model that cannot be reached
//! reported with its cause ("Connection refused").

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::{Path, PathBuf};
use std::process::Output;

use scripted_llm::{Behavior, ScriptedLlmServer};
use serde_json::Value;

/// The sample envelope without its legacy policy keys (this file is about
/// the view, not the gate).
fn example() -> String {
    baton_test_support::plain_example_file("seed-10.1-sample-envelope.json")
        .display()
        .to_string()
}

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn command(base_url: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_baton"));
    command
        .current_dir(repository_root())
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("BATON_REGISTRY_DIR")
        .env_remove("BATON_LLM")
        .env_remove("NO_COLOR")
        .env("BATON_LLM_BASE_URL", base_url)
        .env("BATON_LLM_MODEL", "gpt-4o-mini")
        .env("BATON_LLM_INITIAL_BACKOFF_MS", "5");
    command
}

async fn run(base_url: &str, extra: &[&str]) -> Output {
    command(base_url)
        .args(["run", &example(), "--store", "memory"])
        .args(extra)
        .output()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_pretty_view_shows_each_nodes_time_tokens_and_cost_and_the_totals() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let output = run(&server.base_url(), &[]).await;
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        !stdout.contains('\u{1b}'),
        "no colours when stdout is not a terminal:\n{stdout}"
    );
    let figures: Vec<&str> = stdout
        .lines()
        .skip_while(|line| !line.contains(" node_complete "))
        .skip(1)
        .take(1)
        .collect();
    let line = figures[0];
    assert!(
        line.contains(" tokens (") && line.contains(" in, ") && line.contains(" out)"),
        "{line}"
    );
    assert!(
        line.contains("$0.0") && line.ends_with("gpt-4o-mini"),
        "{line}"
    );
    assert!(
        line.trim_start().chars().next().unwrap().is_ascii_digit(),
        "a duration first: {line}"
    );
    // A narration frame's line says what it narrates: `   7 phase → generation`.
    let bare: Vec<&str> = stdout
        .lines()
        .filter(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            words.len() == 2
                && words[0].chars().all(|c| c.is_ascii_digit())
                && matches!(words[1], "phase" | "handoff")
        })
        .collect();
    assert!(
        bare.is_empty(),
        "frame lines with nothing after their type: {bare:?}"
    );
    assert!(
        stdout
            .lines()
            .any(|line| line.contains(" phase → generation")),
        "{stdout}"
    );
    let closing = stdout
        .lines()
        .find(|line| line.starts_with("run completed"))
        .unwrap();
    assert!(
        closing.contains(" tokens (") && closing.contains(" · $0.0"),
        "{closing}"
    );
    assert!(stdout.contains("run totals: "), "{stdout}");
}

#[tokio::test(flavor = "multi_thread")]
async fn output_only_prints_the_validated_output_and_nothing_else() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let output = run(&server.base_url(), &["--output-only"]).await;
    assert_eq!(output.status.code(), Some(0));
    let document: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(document["copyVariants"].as_array().unwrap().len(), 2);
    assert!(document.get("type").is_none(), "not a frame: {document}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_model_is_reported_with_its_cause() {
    // A port nothing listens on (bound, then closed).
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    // No catch-all: the run fails with the node rather than waiting for a
    // person (the shipped catch-all is tested in shared/runtime/tests/fallback.rs).
    let fail_fast = baton_test_support::fail_fast_example_file("seed-10.1-sample-envelope.json");
    let output = command(&format!("http://127.0.0.1:{port}/v1"))
        .args(["run", fail_fast.to_str().unwrap(), "--store", "memory"])
        .args(["--format", "ndjson"])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    let frames: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let error = frames
        .iter()
        .find(|frame| frame["type"] == "error")
        .unwrap();
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("Connection refused"),
        "the cause is named: {message}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn on_a_terminal_the_view_is_coloured_and_shows_progress_while_the_model_works() {
    let server = ScriptedLlmServer::start().await.unwrap();
    // A slow model, so the progress line has time to draw.
    server.push_behaviors([
        Behavior::SlowValid { delay_ms: 700 },
        Behavior::SlowValid { delay_ms: 700 },
    ]);
    let baton = env!("CARGO_BIN_EXE_baton");
    let shell = format!(
        "BATON_LLM_BASE_URL={} {baton} run {} --store memory",
        server.base_url(),
        example()
    );
    // `script` gives the command a pseudo-terminal for stdout and stderr.
    let output = tokio::process::Command::new("script")
        .current_dir(repository_root())
        .env_remove("OPENAI_API_KEY")
        .env_remove("NO_COLOR")
        .env("TERM", "xterm")
        .env("BATON_LLM_MODEL", "gpt-4o-mini")
        .args(["-q", "-e", "-c", &shell, "/dev/null"])
        .output()
        .await
        .unwrap();
    let screen = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{screen}");
    assert!(
        screen.contains("\u{1b}[32mnode_complete\u{1b}[0m"),
        "coloured event names:\n{screen}"
    );
    assert!(
        screen.contains("is working"),
        "a progress line while the model works:\n{screen}"
    );
    assert!(
        screen.contains("\r\u{1b}[2K"),
        "the progress line is erased before frames print"
    );
}
