//! Starting the real `baton serve` binary and reading its SSE streams, for
//! the end-to-end suites.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

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

    /// Sends SIGTERM (a graceful stop: steps finish, spans are flushed)
    /// and waits (at most `limit`) until the process is gone.
    pub async fn terminate(mut self, limit: Duration) -> std::process::ExitStatus {
        let pid = self.child.id().expect("the process is running");
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill -TERM {pid} failed");
        tokio::time::timeout(limit, self.child.wait())
            .await
            .expect("the process did not stop in time")
            .unwrap()
    }

    /// Waits (at most `limit`) for the process to end on its own.
    pub async fn wait_for_exit(mut self, limit: Duration) -> std::process::ExitStatus {
        tokio::time::timeout(limit, self.child.wait())
            .await
            .expect("the process did not end in time")
            .unwrap()
    }
}

/// Installs `packages` with pip when `python3 -c "import {modules}"`
/// fails (the README's test command and CI install them beforehand).
pub fn ensure_python_packages(modules: &str, packages: &[&str]) {
    let installed = std::process::Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .status()
        .unwrap();
    if !installed.success() {
        let pip = std::process::Command::new("python3")
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(packages)
            .status()
            .unwrap();
        assert!(pip.success(), "pip install {packages:?} failed");
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
/// `baton serve --store dynamodb` at them. The queue is made as the
/// deployment ships it (`infra/template.yaml`'s `Timeouts` mapping: its
/// visibility timeout, its redrive policy to a dead-letter queue of its
/// own) and the node lease is the shipped one: no test-only timings.
pub async fn dynamodb_environment(moto: &moto_server::MotoServer) -> Vec<(String, String)> {
    let configuration = moto.sdk_configuration().await;
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let table = moto_server::unique_name("baton-e2e");
    baton_aws::DynamoRunStore::new(&connection, &table)
        .create_table_if_missing()
        .await
        .unwrap();
    let queue = moto_server::create_shipped_step_queue(&configuration, "baton-e2e-steps")
        .await
        .unwrap();
    let mut environment = vec![
        ("BATON_TABLE".to_string(), table),
        ("BATON_QUEUE_URL".to_string(), queue.queue_url),
        (
            "BATON_DEAD_LETTER_QUEUE_URL".to_string(),
            queue.dead_letter_queue_url,
        ),
        (
            "BATON_NODE_LEASE_SECONDS".to_string(),
            queue.timings.node_lease_seconds.to_string(),
        ),
    ];
    environment.extend(
        moto.sdk_environment()
            .into_iter()
            .map(|(name, value)| (name.to_string(), value)),
    );
    environment
}

/// Every frame a run has written, from its event stream.
pub async fn run_frames(client: &reqwest::Client, base: &str, run_id: &str) -> Vec<Value> {
    read_sse(
        client
            .get(format!("{base}/runs/{run_id}/events"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// The run's debug snapshot (`GET /runs/{id}`).
pub async fn run_snapshot(client: &reqwest::Client, base: &str, run_id: &str) -> Value {
    client
        .get(format!("{base}/runs/{run_id}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The run's status as `GET /runs/{id}` says it.
pub async fn run_status(client: &reqwest::Client, base: &str, run_id: &str) -> String {
    let snapshot = run_snapshot(client, base, run_id).await;
    snapshot["run"]["status"].as_str().unwrap_or("").to_string()
}

/// A small deterministic generator (xorshift64*) for the kill moments.
pub struct KillMoments(u64);

impl KillMoments {
    pub fn from_environment() -> Self {
        let seed = std::env::var("BATON_KILL_SEED")
            .ok()
            .and_then(|text| text.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|elapsed| elapsed.as_nanos() as u64)
                    .unwrap_or(1)
            })
            | 1;
        eprintln!("kill moments from seed {seed} (BATON_KILL_SEED={seed} replays them)");
        KillMoments(seed)
    }

    /// A delay in 0..1500 ms.
    pub fn next_delay(&mut self) -> Duration {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        Duration::from_millis(self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % 1_500)
    }
}

/// Waits (at most 120 s) until the model double was asked `at_least` times.
pub async fn wait_for_model_requests(model: &scripted_llm::ScriptedLlmServer, at_least: usize) {
    let started = Instant::now();
    while model.request_count() < at_least {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the model was asked {} times, expected {at_least}",
            model.request_count()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
