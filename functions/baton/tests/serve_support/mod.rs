//! Starting the real `baton serve` binary and reading its SSE streams, for
//! the end-to-end suites.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

pub mod people;

pub const TOKEN: &str = "e2e-token";

/// A running `baton serve`; killed when dropped.
pub struct ServeProcess {
    child: tokio::process::Child,
    /// `http://127.0.0.1:PORT/api/v1/flex`
    pub base: String,
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

impl ServeProcess {
    /// Kills the process and waits until it is gone.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn token_digest() -> String {
    baton_http::auth::token_digest_hex(TOKEN)
}

/// Starts `baton serve` with `arguments` and `environment` (plus the test
/// token for tenant `acme`), on a free port; returns once it listens.
pub async fn start_serve(arguments: &[&str], environment: &[(String, String)]) -> ServeProcess {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_baton"));
    command
        .arg("serve")
        .args(arguments)
        .args(["--addr", "127.0.0.1:0"])
        .current_dir(repository())
        .env("BATON_API_TOKENS", format!("acme:{}", token_digest()))
        .env_remove("OPENAI_API_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (name, value) in environment {
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
        eprintln!("[baton serve] {line}");
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("[baton serve] {line}");
        }
    });
    ServeProcess { child, base }
}

/// Every frame of an SSE response until the server ends it.
pub async fn read_sse(response: reqwest::Response) -> Vec<Value> {
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

/// An example envelope without its legacy policy keys (these tests are about
/// serving, not about `hitlRequiredFor`).
pub fn example(name: &str) -> Value {
    baton_test_support::plain_example_envelope(name)
}

/// The scripted model server as the serve process's model.
pub fn model_environment(model: &scripted_llm::ScriptedLlmServer) -> Vec<(String, String)> {
    vec![
        ("BATON_LLM_BASE_URL".to_string(), model.base_url()),
        ("BATON_LLM_MODEL".to_string(), "scripted".to_string()),
    ]
}

/// A fresh table and step queue on `moto`, and the environment that points
/// `baton serve --store dynamodb` at them.
pub async fn dynamodb_environment(moto: &moto_server::MotoServer) -> Vec<(String, String)> {
    let configuration = moto.sdk_configuration().await;
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let table = moto_server::unique_name("baton-e2e");
    baton_aws::DynamoRunStore::new(&connection, &table)
        .create_table_if_missing()
        .await
        .unwrap();
    let queue_url = moto_server::create_unique_queue(&configuration, "baton-e2e-steps", None)
        .await
        .unwrap();
    let mut environment = vec![
        ("BATON_TABLE".to_string(), table),
        ("BATON_QUEUE_URL".to_string(), queue_url),
    ];
    environment.extend(
        moto.sdk_environment()
            .into_iter()
            .map(|(name, value)| (name.to_string(), value)),
    );
    environment
}
