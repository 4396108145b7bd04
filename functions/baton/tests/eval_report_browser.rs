//! `baton eval compare`'s HTML report in a real browser: two evaluations of
//! the shipped dataset judged by the shipped panel (the scripted model
//! double stands in for the LLM endpoint: schema-shaped answers, judge
//! scores that vary within noise), compared with `--viewer` pointing at a
//! `baton serve` on the same SQLite store; `tests/browser/eval_report_test.py`
//! opens the report in Debian's headless Chromium through Playwright: the
//! aggregates, every example row, both histograms with their counts, and a
//! run link that opens the run, completed, in the viewer. Screenshots 20
//! and 21 go to `target/browser-artifacts/` (or `BATON_BROWSER_ARTIFACTS`).
//!
//! Ignored by default like the other slow suites: `scripts/test.sh` installs
//! Chromium and Playwright and runs it with `--ignored`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod serve_support;

use std::path::{Path, PathBuf};

use scripted_llm::{PromptRule, ScriptedLlmServer};
use serde_json::Value;
use serve_support::{repository, start_serve};

const DATASET: &str = "registry/examples/datasets/stream-contract-variants.jsonl";
const PANEL: &str = "registry/examples/datasets/copy-judges.json";

async fn baton(server: &ScriptedLlmServer, data_home: &Path, arguments: &[&str]) {
    let ran = tokio::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(arguments)
        .current_dir(repository())
        .env("XDG_DATA_HOME", data_home)
        .env_remove("BATON_REGISTRY_DIR")
        .env_remove("BATON_LLM")
        .env("BATON_LLM_BASE_URL", server.base_url())
        .env("BATON_LLM_MODEL", "gpt-4o-mini")
        .output()
        .await
        .unwrap();
    assert_eq!(ran.status.code(), Some(0), "{arguments:?}: {ran:?}");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "browser: needs Debian's chromium and Playwright for Python (scripts/test.sh installs both)"]
async fn the_comparison_report_renders_in_headless_chromium() {
    let browser = std::env::var_os("BATON_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(browser.exists(), "no Chromium at {}", browser.display());
    let model = ScriptedLlmServer::start().await.unwrap();
    model.add_prompt_rule(PromptRule {
        contains: "Score the content from 0 (worst) to 10 (best)".into(),
        pointer: "/score".into(),
        values: [6.2, 7.4, 8.1, 7.0, 6.8, 8.5, 7.3]
            .map(Value::from)
            .to_vec(),
    });
    let folder = tempfile::tempdir().unwrap();
    let (baseline, candidate, report) = (
        folder.path().join("baseline.jsonl"),
        folder.path().join("candidate.jsonl"),
        folder.path().join("report.html"),
    );
    for results in [&baseline, &candidate] {
        baton(
            &model,
            folder.path(),
            &[
                "eval",
                DATASET,
                "--judges",
                PANEL,
                "--results",
                results.to_str().unwrap(),
            ],
        )
        .await;
    }
    // The viewer reading the store `baton eval` kept the runs in.
    let serve = start_serve(
        &["--store", "sqlite"],
        &[
            (
                "XDG_DATA_HOME".to_string(),
                folder.path().display().to_string(),
            ),
            ("BATON_API_TOKENS".to_string(), String::new()),
            ("BATON_LLM_BASE_URL".to_string(), model.base_url()),
            ("BATON_LLM_MODEL".to_string(), "gpt-4o-mini".to_string()),
        ],
    )
    .await;
    let root = serve.base.trim_end_matches("/api/v1/flex").to_string();
    baton(
        &model,
        folder.path(),
        &[
            "eval",
            "compare",
            baseline.to_str().unwrap(),
            candidate.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
            "--viewer",
            &root,
        ],
    )
    .await;
    let artifacts = std::env::var_os("BATON_BROWSER_ARTIFACTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repository().join("target/browser-artifacts"));
    let output = tokio::process::Command::new("python3")
        .arg(repository().join("tests/browser/eval_report_test.py"))
        .env("BATON_REPORT", &report)
        .env("BATON_EXAMPLES", "as-shipped,hiring-goal,awareness-goal")
        .env("BATON_CHROMIUM", &browser)
        .env("BATON_BROWSER_ARTIFACTS", &artifacts)
        .output()
        .await
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert_eq!(
        stdout
            .lines()
            .filter(|line| line.starts_with("ok: "))
            .count(),
        2,
        "{stdout}"
    );
    for screenshot in ["20-eval-report", "21-eval-report-run-in-viewer"] {
        let file = artifacts.join(format!("{screenshot}.png"));
        assert!(
            std::fs::metadata(&file).is_ok_and(|meta| meta.len() > 1000),
            "{}",
            file.display()
        );
    }
    serve.stop().await;
}
