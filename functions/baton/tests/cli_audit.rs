//! The audit trail end to end: `baton serve --store sqlite:PATH` (the real
//! binary) with three users' tokens; sam submits a run that waits for
//! approval, abe approves it, sam submits another and olga cancels it; then
//! `baton audit` on the same file prints who did what, newest first, and
//! exports it as JSON lines. The scripted OpenAI-compatible server stands
//! in for the model.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod serve_support;

use scripted_llm::ScriptedLlmServer;
use serde_json::{Value, json};
use serve_support::{example, read_sse, repository, start_serve, token_digest};

fn tokens() -> String {
    let digest = baton_http::auth::token_digest_hex;
    [
        format!("acme:{}", token_digest()),
        format!(
            "acme:{};user=sam@acme.example;scopes=runs:read runs:write",
            digest("sam-token")
        ),
        format!(
            "acme:{};user=abe@acme.example;scopes=runs:read approvals:decide",
            digest("abe-token")
        ),
        format!(
            "acme:{};user=olga@acme.example;scopes=runs:read runs:write",
            digest("olga-token")
        ),
    ]
    .join(",")
}

#[tokio::test(flavor = "multi_thread")]
async fn baton_audit_reads_back_who_submitted_approved_and_cancelled() {
    let model = ScriptedLlmServer::start().await.unwrap();
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", folder.path().join("runs.sqlite3").display());
    let environment = vec![
        ("BATON_LLM_BASE_URL".to_string(), model.base_url()),
        ("BATON_LLM_MODEL".to_string(), "scripted".to_string()),
        ("BATON_API_TOKENS".to_string(), tokens()),
    ];
    let client = reqwest::Client::new();
    let serve = start_serve(&["--store", &store], &environment).await;
    let base = serve.base.clone();

    // The seed sample as shipped asks for approval of its final output.
    let envelope: Value = serde_json::from_str(
        &std::fs::read_to_string(
            repository().join("registry/examples/seed-10.1-sample-envelope.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let frames = read_sse(
        client
            .post(format!("{base}/run.stream"))
            .bearer_auth("sam-token")
            .json(&envelope)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let approved = frames[0]["runId"].as_str().unwrap().to_string();
    let requests: Value = client
        .get(format!("{base}/hitl/requests"))
        .bearer_auth("abe-token")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let request_id = requests["requests"][0]["requestId"].as_str().unwrap();
    let resolved = client
        .post(format!("{base}/hitl/resolve"))
        .bearer_auth("abe-token")
        .json(&json!({"runId": approved, "requestId": request_id, "decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resolved.status(), 200);
    let accepted: Value = client
        .post(format!("{base}/runs"))
        .bearer_auth("sam-token")
        .json(&example("positioning-recommendation.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let cancelled = accepted["runId"].as_str().unwrap().to_string();
    let cancel = client
        .post(format!("{base}/runs/{cancelled}/cancel"))
        .bearer_auth("olga-token")
        .send()
        .await
        .unwrap();
    assert_eq!(cancel.status(), 202);
    serve.stop().await;

    let audit = |format: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
            .args([
                "audit", "--store", &store, "--tenant", "acme", "--format", format,
            ])
            .current_dir(repository())
            .env("BATON_LLM_BASE_URL", model.base_url())
            .output()
            .unwrap()
    };
    let pretty = audit("pretty");
    assert!(pretty.status.success(), "{pretty:?}");
    let text = String::from_utf8(pretty.stdout).unwrap();
    println!("{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(lines[0].contains("olga@acme.example") && lines[0].contains("cancelRun"));
    assert!(lines[0].contains(&format!("run/{cancelled}")) && lines[0].ends_with("202"));
    assert!(lines[1].contains("sam@acme.example") && lines[1].contains("submitRun "));
    assert!(lines[2].contains("abe@acme.example") && lines[2].contains("resolveRequest"));
    assert!(lines[2].contains(&format!("run/{approved}")));
    assert!(lines[3].contains("sam@acme.example") && lines[3].contains("submitRunAndStream"));
    assert!(
        lines[3].contains(&format!("run/{approved}")),
        "{}",
        lines[3]
    );

    let exported = audit("jsonl");
    assert!(exported.status.success());
    let records: Vec<Value> = String::from_utf8(exported.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let actors: Vec<&str> = records
        .iter()
        .map(|record| record["actor"].as_str().unwrap())
        .collect();
    assert_eq!(
        actors,
        [
            "olga@acme.example",
            "sam@acme.example",
            "abe@acme.example",
            "sam@acme.example"
        ]
    );
    assert!(records.iter().all(|record| record["requestId"].is_string()));
}
