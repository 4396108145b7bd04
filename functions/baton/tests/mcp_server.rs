//! Baton's MCP server (`baton_http::protocols::mcp`) through the official `mcp` Python
//! SDK, a client no one here wrote: over stdio (`baton mcp`, the real
//! binary, spawned by the SDK) and over Streamable HTTP (`/mcp` of a real
//! `baton serve`, with its bearer token). `tests/mcp/mcp_client_test.py`
//! lists the tools, starts a run and receives its progress notifications
//! and its validated output, plans, reads the run, lists capabilities, and
//! sees a bad envelope refused at its JSON path; a parked run answers with
//! its task, listed by `list_tasks`, and an answer breaking the node's
//! contract is refused; a token holding `runs:read` only reads but is
//! refused `start_run`, naming `runs:write`; a session without a token is refused. The model is the scripted test double.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod serve_support;

use serve_support::{TOKEN, ensure_python_packages, repository, start_serve};

/// A token holding `runs:read` only.
const READER_TOKEN: &str = "mcp-reader-token";

#[tokio::test(flavor = "multi_thread")]
async fn the_official_mcp_client_runs_work_over_stdio_and_streamable_http() {
    ensure_python_packages("mcp.client.streamable_http", &["mcp"]);
    // Test double for the model endpoint: schema-valid answers.
    let model = scripted_llm::ScriptedLlmServer::start().await.unwrap();
    let serve = start_serve(
        &["--store", "memory"],
        &[
            ("BATON_LLM_BASE_URL".to_string(), model.base_url()),
            ("BATON_LLM_MODEL".to_string(), "gpt-4o-mini".to_string()),
            // The usual token, and one that may only read.
            (
                "BATON_API_TOKENS".to_string(),
                format!(
                    "acme:{},acme:{};user=rita@acme.example;scopes=runs:read",
                    serve_support::token_digest(),
                    baton_http::auth::token_digest_hex(READER_TOKEN)
                ),
            ),
        ],
    )
    .await;
    let root = serve.base.trim_end_matches("/api/v1/flex").to_string();
    let envelope =
        baton_test_support::plain_example_file("seed-10.0.1-stream-contract-variants.json");
    let output = tokio::process::Command::new("python3")
        .arg(repository().join("tests/mcp/mcp_client_test.py"))
        .env("BATON_BINARY", env!("CARGO_BIN_EXE_baton"))
        .env("BATON_REPOSITORY", repository())
        .env("BATON_MCP_URL", format!("{root}/mcp"))
        .env("BATON_MCP_TOKEN", TOKEN)
        .env("BATON_MCP_READER_TOKEN", READER_TOKEN)
        .env("BATON_ENVELOPE", &envelope)
        .env("BATON_MODEL_BASE_URL", model.base_url())
        .env_remove("BATON_API_TOKENS")
        .env_remove("OPENAI_API_KEY")
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
