//! A tool whose credential is a Secrets Manager secret on moto, end to
//! end through the real `baton run` binary: the secret is created the way
//! an operator would, the registry names it by reference (`{"secret":
//! {"secretsManager": ARN, "key": "token"}, "prefix": "Bearer "}`), and the
//! run reads it with `BATON_SECRETS=aws`. The stand-in service (a test
//! double of the API the tool calls) refuses any other `Authorization` and
//! echoes the one it was sent in its answer.
//!
//! Shown: the call succeeds with the secret; its value appears in no frame
//! (stdout), no log line (stderr at `BATON_LOG=trace`), no exported span
//! (an OTLP receiver, with message content captured), and not in what the
//! model was sent next: the echoed credential reads `[redacted]`. A second
//! run with the reference naming a missing key fails the tool call naming
//! the reference, with no value anywhere.
//! The scripted OpenAI-compatible server stands in for the model.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use baton_test_support::otlp_receiver::OtlpReceiver;
use moto_server::{MotoServer, put_secret, unique_name};
use scripted_llm::{Behavior, ScriptedLlmServer, ScriptedToolCall};
use serde_json::{Value, json};

/// A stand-in for the service the tool calls: it answers only the given
/// bearer token, echoing the `Authorization` it was sent, and records
/// every one.
async fn start_service(token: &str) -> (String, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let expected = format!("Bearer {token}");
    let recorded = seen.clone();
    let app = axum::Router::new().route(
        "/lookup",
        axum::routing::get(move |headers: HeaderMap| {
            let recorded = recorded.clone();
            let expected = expected.clone();
            async move {
                let sent = headers
                    .get("authorization")
                    .and_then(|value| value.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                recorded.lock().unwrap().push(sent.clone());
                if sent != expected {
                    return (
                        StatusCode::UNAUTHORIZED,
                        axum::Json(json!({"error": "who are you?"})),
                    );
                }
                (
                    StatusCode::OK,
                    axum::Json(json!({"answer": "forty-two", "youSent": sent})),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}"), seen)
}

/// The five-stage registry, its first stage given the `lookup` tool whose
/// `Authorization` is `reference`.
fn write_registry(root: &Path, service: &str, reference: Value) {
    baton_test_support::five_stages::write_five_stage_registry(root);
    let path = root.join("capabilities/bench.strategist.json");
    let mut capability: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    capability["tools"] = json!(["lookup"]);
    std::fs::write(&path, capability.to_string()).unwrap();
    std::fs::create_dir_all(root.join("tools")).unwrap();
    let tool = json!({
        "name": "lookup",
        "description": "Looks a question up in the team's service.",
        "parameters": {"type": "object", "required": ["question"], "properties": {"question": {"type": "string"}}},
        "executor": {
            "kind": "http",
            "method": "GET",
            "url": format!("{service}/lookup"),
            "headers": {"authorization": {"secret": reference, "prefix": "Bearer "}}
        }
    });
    std::fs::write(root.join("tools/lookup.json"), tool.to_string()).unwrap();
}

struct RunSeen {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    frames: Vec<Value>,
}

async fn baton_run(
    registry: &Path,
    data_home: &Path,
    model: &ScriptedLlmServer,
    moto: &MotoServer,
    receiver: &OtlpReceiver,
) -> RunSeen {
    let envelope = data_home.join("envelope.json");
    std::fs::write(
        &envelope,
        baton_test_support::five_stages::five_stage_envelope().to_string(),
    )
    .unwrap();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["run", envelope.to_str().unwrap(), "--format", "ndjson"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("XDG_DATA_HOME", data_home)
        .env("BATON_REGISTRY_DIR", registry)
        .env("BATON_LLM_BASE_URL", model.base_url())
        .env("BATON_LLM_MODEL", "gpt-4o-mini")
        .env("BATON_LLM_INITIAL_BACKOFF_MS", "5")
        .env("BATON_OUTBOUND_HTTP_HOSTS", "127.0.0.1")
        .env("BATON_SECRETS", "aws")
        .env("BATON_LOG", "trace")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
        .envs(moto.sdk_environment())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let frames = stdout
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    RunSeen {
        code: output.status.code(),
        stdout,
        stderr: String::from_utf8(output.stderr).unwrap(),
        frames,
    }
}

fn tool_results(frames: &[Value]) -> Vec<&Value> {
    frames
        .iter()
        .filter(|frame| frame["type"] == "tool_result")
        .collect()
}

/// Nothing the run left where people read holds `value`.
fn assert_nowhere(value: &str, seen: &RunSeen, receiver: &OtlpReceiver, model: &ScriptedLlmServer) {
    assert!(!seen.stdout.contains(value), "a frame holds the secret");
    assert!(!seen.stderr.contains(value), "a log line holds the secret");
    let spans = format!("{:?}", receiver.spans());
    assert!(!spans.contains(value), "an exported span holds the secret");
    for request in model.requests() {
        assert!(
            !request.body.to_string().contains(value),
            "the model was sent the secret"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_credential_from_secrets_manager_is_used_and_written_nowhere() {
    let moto = MotoServer::start().unwrap();
    let token = format!("tok-{}", unique_name("live"));
    let arn = put_secret(
        &moto.endpoint,
        &unique_name("baton-test/lookup-service"),
        &json!({"token": token, "note": "rotated monthly"}).to_string(),
    )
    .await
    .unwrap();
    let (service, seen_by_service) = start_service(&token).await;
    let receiver = OtlpReceiver::start().await;
    let model = ScriptedLlmServer::start().await.unwrap();
    model.push_behaviors([Behavior::ToolCalls {
        calls: vec![ScriptedToolCall {
            name: "lookup".into(),
            arguments: json!({"question": "the answer"}),
        }],
    }]);
    let folder = tempfile::tempdir().unwrap();
    let registry = folder.path().join("registry");
    write_registry(
        &registry,
        &service,
        json!({"secretsManager": arn, "key": "token"}),
    );

    let seen = baton_run(&registry, folder.path(), &model, &moto, &receiver).await;
    assert_eq!(
        seen.code,
        Some(0),
        "{}",
        seen.stderr
            .lines()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(
        *seen_by_service.lock().unwrap(),
        [format!("Bearer {token}")],
        "the service was called once, with the secret"
    );
    let results = tool_results(&seen.frames);
    assert_eq!(results.len(), 1, "{results:?}");
    let result = results[0].to_string();
    assert!(result.contains("forty-two"), "the call succeeded: {result}");
    assert!(
        result.contains("Bearer [redacted]"),
        "the echoed credential is scrubbed: {result}"
    );
    assert_eq!(
        seen.frames.last().unwrap()["type"],
        "complete",
        "the run ends complete"
    );
    receiver
        .wait_for(Duration::from_secs(10), |spans| {
            spans.iter().any(|span| span.name.contains("execute_tool"))
        })
        .await;
    assert!(
        !receiver.spans().is_empty(),
        "the run's spans were exported (so their absence of the secret means something)"
    );
    assert!(
        seen.stderr.lines().count() > 100,
        "trace-level logs were written (so their absence of the secret means something)"
    );
    assert_nowhere(&token, &seen, &receiver, &model);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reference_to_a_missing_key_fails_the_call_naming_the_reference() {
    let moto = MotoServer::start().unwrap();
    let token = format!("tok-{}", unique_name("kept"));
    let name = unique_name("baton-test/other-service");
    put_secret(&moto.endpoint, &name, &json!({"token": token}).to_string())
        .await
        .unwrap();
    let (service, seen_by_service) = start_service(&token).await;
    let receiver = OtlpReceiver::start().await;
    let model = ScriptedLlmServer::start().await.unwrap();
    model.push_behaviors([Behavior::ToolCalls {
        calls: vec![ScriptedToolCall {
            name: "lookup".into(),
            arguments: json!({"question": "the answer"}),
        }],
    }]);
    let folder = tempfile::tempdir().unwrap();
    let registry = folder.path().join("registry");
    write_registry(
        &registry,
        &service,
        json!({"secretsManager": name, "key": "password"}),
    );

    let seen = baton_run(&registry, folder.path(), &model, &moto, &receiver).await;
    assert!(
        seen_by_service.lock().unwrap().is_empty(),
        "no request leaves without its credential"
    );
    let results = tool_results(&seen.frames);
    assert_eq!(results.len(), 1, "{}", seen.stdout);
    let result = results[0].to_string();
    assert!(
        result.contains(&format!("Secrets Manager secret `{name}` (key `password`)"))
            && result.contains("no such key"),
        "the failure names the reference: {result}"
    );
    assert_nowhere(&token, &seen, &receiver, &model);
}
