//! Baton's A2A server (`baton_http::protocols::a2a`) through the official `a2a-sdk`
//! Python client, used unchanged (a client no one here wrote), against a
//! real `baton serve` with a bearer token. `tests/a2a/a2a_client_test.py`
//! fetches the agent card, streams an envelope to a completed task whose
//! artifact is the validated output, takes a parked run through
//! `input-required` to completion with the answer message, cancels, and
//! sees bad input refused with its JSON path. The model is the scripted
//! test double of an LLM endpoint.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod serve_support;

use serve_support::{TOKEN, ensure_python_packages, repository, start_serve};

#[tokio::test(flavor = "multi_thread")]
async fn the_official_a2a_client_runs_envelopes_and_answers_parked_tasks() {
    ensure_python_packages("a2a.client", &["a2a-sdk[http-server]==1.3.0"]);
    // Test double for the model endpoint: schema-valid answers.
    let model = scripted_llm::ScriptedLlmServer::start().await.unwrap();
    let serve = start_serve(
        &["--store", "memory"],
        &[
            ("BATON_LLM_BASE_URL".to_string(), model.base_url()),
            ("BATON_LLM_MODEL".to_string(), "gpt-4o-mini".to_string()),
        ],
    )
    .await;
    let root = serve.base.trim_end_matches("/api/v1/flex").to_string();
    let output = tokio::process::Command::new("python3")
        .arg(repository().join("tests/a2a/a2a_client_test.py"))
        .env("BATON_ROOT", &root)
        .env("BATON_TOKEN", TOKEN)
        .env(
            "BATON_ENVELOPE",
            baton_test_support::plain_example_file("seed-10.0.1-stream-contract-variants.json"),
        )
        .env(
            "BATON_PARKED_ENVELOPE",
            repository().join("functions/baton/tests/fixtures/human-review.json"),
        )
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert_eq!(
        stdout
            .lines()
            .filter(|line| line.starts_with("ok: "))
            .count(),
        5,
        "every part reported: {stdout}\n{stderr}"
    );
    println!("{stdout}");
}
