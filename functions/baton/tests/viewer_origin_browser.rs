//! The viewer hands its token to no other site: `baton serve` (the real
//! binary, tokens configured, one API origin in `BATON_VIEWER_API_ORIGINS`)
//! and `tests/browser/viewer_origin_test.py` driving Debian's headless
//! Chromium through Playwright for Python. A user enters the token on the
//! viewer, then opens it with `?api=` naming another origin: that origin
//! receives nothing (not even from a script on the page: the CSP blocks
//! it), the page says it ignored the parameter and keeps to its own
//! server; the configured origin is used, without the other API's token.
//! And a task answered by a signed-in director shows "Answered by" with
//! their name in the node's details.
//! Screenshots go to `target/browser-artifacts/` (or
//! `BATON_BROWSER_ARTIFACTS`).
//!
//! Ignored by default like the other slow suites: `scripts/test.sh` installs
//! Chromium and Playwright and runs it with `--ignored`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod serve_support;

use std::path::PathBuf;

use serve_support::{TOKEN, repository, start_serve};

/// A director's token: their group answers the review task.
const DIRECTOR_TOKEN: &str = "viewer-director-token";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "browser: needs Debian's chromium and Playwright for Python (scripts/test.sh installs both)"]
async fn the_viewer_sends_its_token_to_no_other_origin() {
    let browser = std::env::var_os("BATON_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(browser.exists(), "no Chromium at {}", browser.display());
    let elsewhere_port = free_port();
    let allowed_port = free_port();
    // Test double for the model endpoint (no run reaches it here; serve
    // needs one to start without the offline model file).
    let model = scripted_llm::ScriptedLlmServer::start().await.unwrap();
    let mut environment = serve_support::model_environment(&model);
    environment.push((
        "BATON_VIEWER_API_ORIGINS".to_string(),
        format!("http://127.0.0.1:{allowed_port}"),
    ));
    // The usual token, and a director's (its group answers the review task).
    environment.push((
        "BATON_API_TOKENS".to_string(),
        format!(
            "acme:{},acme:{};user=dana@acme.example;scopes=runs:read tasks:answer;groups=director",
            serve_support::token_digest(),
            baton_http::auth::token_digest_hex(DIRECTOR_TOKEN)
        ),
    ));
    let serve = start_serve(&["--store", "memory"], &environment).await;
    let root = serve.base.trim_end_matches("/api/v1/flex").to_string();
    let artifacts = std::env::var_os("BATON_BROWSER_ARTIFACTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repository().join("target/browser-artifacts"));
    let output = tokio::process::Command::new("python3")
        .arg(repository().join("tests/browser/viewer_origin_test.py"))
        .env("BATON_VIEWER_URL", &root)
        .env("BATON_VIEWER_TOKEN", TOKEN)
        .env("BATON_DIRECTOR_TOKEN", DIRECTOR_TOKEN)
        .env("BATON_REPOSITORY", repository())
        .env("BATON_ELSEWHERE_PORT", elsewhere_port.to_string())
        .env("BATON_ALLOWED_PORT", allowed_port.to_string())
        .env("BATON_CHROMIUM", &browser)
        .env("BATON_BROWSER_ARTIFACTS", &artifacts)
        .output()
        .await
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "the browser test failed:\n{stdout}\n{stderr}"
    );
    assert_eq!(
        stdout
            .lines()
            .filter(|line| line.starts_with("ok: "))
            .count(),
        3,
        "every scenario reported: {stdout}"
    );
    let screenshot = artifacts.join("30-viewer-api-origin-refused.png");
    assert!(std::fs::metadata(&screenshot).is_ok_and(|meta| meta.len() > 1000));
}
