//! The typed clients (`clients/python`, `baton-client`; `clients/typescript`,
//! `@baton/client`) tested from their own test runners (pytest; node's test
//! runner) against a real `baton serve` with a bearer token: runs streamed
//! to their output, typed errors with the JSON path, a parked run answered,
//! and an event stream resumed with `Last-Event-ID` after a proxy in the
//! test cuts the connection mid-run. Each client's test also checks it
//! against `docs/openapi.json`, so neither can drift. The model is the
//! scripted test double of an LLM endpoint.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod serve_support;

use serve_support::{ServeProcess, TOKEN, ensure_python_packages, repository, start_serve};

async fn serve_with_model() -> (scripted_llm::ScriptedLlmServer, ServeProcess, String) {
    // Test double for the model endpoint: schema-valid answers.
    let model = scripted_llm::ScriptedLlmServer::start().await.unwrap();
    // The served evaluations are kept in a data directory of the test's own.
    let data_home = tempfile::tempdir().unwrap().keep();
    let serve = start_serve(
        &["--store", "memory"],
        &[
            ("BATON_LLM_BASE_URL".to_string(), model.base_url()),
            ("BATON_LLM_MODEL".to_string(), "gpt-4o-mini".to_string()),
            ("XDG_DATA_HOME".to_string(), data_home.display().to_string()),
            // The developer sandbox's routes, which the clients call too.
            ("BATON_SANDBOX".to_string(), "on".to_string()),
        ],
    )
    .await;
    let root = serve.base.trim_end_matches("/api/v1/flex").to_string();
    (model, serve, root)
}

fn envelopes() -> [(&'static str, std::path::PathBuf); 2] {
    [
        (
            "BATON_ENVELOPE",
            baton_test_support::plain_example_file("seed-10.0.1-stream-contract-variants.json"),
        ),
        (
            "BATON_PARKED_ENVELOPE",
            repository().join("functions/baton/tests/fixtures/human-review.json"),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_client_passes_its_tests_against_a_live_server() {
    ensure_python_packages(
        "httpx, httpx_sse, pydantic, pytest, datamodel_code_generator",
        &[
            "httpx",
            "httpx-sse==0.4.3",
            "pydantic>=2.7",
            "pytest",
            "datamodel-code-generator==0.89.0",
        ],
    );
    let (_model, _serve, root) = serve_with_model().await;
    let mut pytest = tokio::process::Command::new("python3");
    pytest
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
        .current_dir(repository().join("clients/python"))
        .env("BATON_URL", &root)
        .env("BATON_TOKEN", TOKEN)
        .env("PYTHONPATH", repository().join("clients/python"));
    for (name, file) in envelopes() {
        pytest.env(name, file);
    }
    let output = pytest.output().await.unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("13 passed") && !stdout.contains("skipped"),
        "every test ran: {stdout}"
    );
    println!("{stdout}");
}

/// `npm ci` (the lock file's versions, from the npm registry) when the
/// client's dependencies are missing, then `npm run build`.
fn build_typescript_client(directory: &std::path::Path) {
    if !directory.join("node_modules/.bin/tsc").exists() {
        let installed = std::process::Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--silent"])
            .current_dir(directory)
            .status()
            .expect("npm is installed (Debian's nodejs and npm)");
        assert!(installed.success(), "npm ci failed");
    }
    let built = std::process::Command::new("npm")
        .args(["run", "--silent", "build"])
        .current_dir(directory)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "the client does not type-check against src/openapi.ts: {}{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_typescript_client_passes_its_tests_against_a_live_server() {
    let directory = repository().join("clients/typescript");
    build_typescript_client(&directory);
    let (_model, _serve, root) = serve_with_model().await;
    let mut node = tokio::process::Command::new("node");
    node.args(["--test", "test/"])
        .current_dir(&directory)
        .env("BATON_URL", &root)
        .env("BATON_TOKEN", TOKEN);
    for (name, file) in envelopes() {
        node.env(name, file);
    }
    let output = node.output().await.unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("# pass 9") && stdout.contains("# skipped 0"),
        "every test ran: {stdout}"
    );
    println!("{stdout}");
}
