//! The run viewer in a real browser: `baton serve` (the real binary, memory
//! store) whose model is the scripted test double, and
//! `tests/browser/viewer_test.py` driving Debian's headless Chromium through
//! Playwright for Python against it: a server without tokens used without
//! being asked for one (the local default), a tokened one asking only after
//! its first 401; a run watched to completion and a node
//! opened (output, cost), its timeline; a parked run's task form refusing a bad value next
//! to its field, then completing the run; a director's form giving feedback
//! on the visual, so only the designer is asked again and sees it; an
//! approval rejected failing the
//! run; a judge transcript rendered and verified (and a changed one caught),
//! published to a stand-in consensus node with a link per message;
//! a chat: a tool call folded under its answer, a drafted plan approved and
//! run as a child run (its graph one click away), a message refused by the
//! `reject` strategy while another answers, the thread read back; a run
//! forked from a node with its output corrected (a broken correction
//! refused with its path), the fork tree leading both ways; a schedule kept
//! (a wrong expression refused with its path), paused, resumed and deleted;
//! an evaluation run from the viewer (a wrong line refused with its path),
//! its examples shown, one opened as its run; an envelope drafted in three
//! messages in the developer sandbox (on for the tokened server, off for
//! the other, which says so), its plan drawn, then run to completion; a
//! run's remembered tone listed in the memory section, searched, its run
//! opened, deleted.
//! Screenshots go to `target/browser-artifacts/` (or
//! `BATON_BROWSER_ARTIFACTS`).
//!
//! Ignored by default like the other slow suites: `scripts/test.sh` installs
//! Chromium and Playwright and runs it with `--ignored`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod serve_support;

use std::path::PathBuf;

use serve_support::{TOKEN, repository, start_serve};

fn chromium() -> PathBuf {
    let path = std::env::var_os("BATON_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        path.exists(),
        "no Chromium at {} (apt-get install chromium, or set BATON_CHROMIUM); scripts/test.sh installs it",
        path.display()
    );
    path
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "browser: needs Debian's chromium and Playwright for Python (scripts/test.sh installs both)"]
async fn the_run_viewer_works_in_headless_chromium() {
    let browser = chromium();
    // Test double for the model endpoint: schema-valid answers for every node
    // and judge.
    let model = scripted_llm::ScriptedLlmServer::start().await.unwrap();
    // Where the served evaluations are kept.
    let data_home = tempfile::tempdir().unwrap();
    // Test double for a consensus node: the tokened server publishes its
    // judge transcripts there, so the viewer links each message's
    // transaction. A throwaway Ed25519 seed; the key reaches the server by
    // reference, through its local secret store.
    const LEDGER_KEY: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
    let ledger = baton_hcs::stand_in::StandInNode::start(
        baton_hcs::operator::account_from_text("0.0.3", "node").unwrap(),
        baton_hcs::operator::account_from_text("0.0.1002", "operator").unwrap(),
        baton_hcs::operator::public_key_of(LEDGER_KEY, "key").unwrap(),
    )
    .await
    .unwrap();
    let serve = start_serve(
        &["--store", "memory"],
        &[
            ("BATON_LLM_BASE_URL".to_string(), model.base_url()),
            // The double answers as the model it is asked for; a name the
            // registry prices, so costs show.
            ("BATON_LLM_MODEL".to_string(), "gpt-4o-mini".to_string()),
            (
                "XDG_DATA_HOME".to_string(),
                data_home.path().display().to_string(),
            ),
            ("BATON_SANDBOX".to_string(), "on".to_string()),
            ("BATON_HCS_NODE_URL".to_string(), ledger.url.clone()),
            (
                "BATON_HCS_OPERATOR_ACCOUNT".to_string(),
                "0.0.1002".to_string(),
            ),
            (
                "BATON_HCS_OPERATOR_KEY".to_string(),
                "hcs-operator".to_string(),
            ),
            (
                "BATON_SECRET_HCS_OPERATOR".to_string(),
                LEDGER_KEY.to_string(),
            ),
        ],
    )
    .await;
    let root = serve.base.trim_end_matches("/api/v1/flex").to_string();
    // The local default: no BATON_API_TOKENS, so the viewer never asks for one.
    let anonymous = start_serve(
        &["--store", "memory"],
        &[
            ("BATON_LLM_BASE_URL".to_string(), model.base_url()),
            ("BATON_LLM_MODEL".to_string(), "gpt-4o-mini".to_string()),
            ("BATON_API_TOKENS".to_string(), String::new()),
        ],
    )
    .await;
    let anonymous_root = anonymous.base.trim_end_matches("/api/v1/flex").to_string();
    let artifacts = std::env::var_os("BATON_BROWSER_ARTIFACTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repository().join("target/browser-artifacts"));
    let output = tokio::process::Command::new("python3")
        .arg(repository().join("tests/browser/viewer_test.py"))
        .env("BATON_VIEWER_URL", &root)
        .env("BATON_VIEWER_TOKEN", TOKEN)
        .env("BATON_VIEWER_ANONYMOUS_URL", &anonymous_root)
        .env("BATON_CHROMIUM", &browser)
        .env("BATON_BROWSER_ARTIFACTS", &artifacts)
        .env("BATON_REPOSITORY", repository())
        .env("BATON_MODEL_URL", model.root_url())
        .output()
        .await
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "the browser tests failed (screenshots in {}):\n{stdout}\n{stderr}",
        artifacts.display()
    );
    assert_eq!(
        stdout
            .lines()
            .filter(|line| line.starts_with("ok: "))
            .count(),
        12,
        "every scenario reported: {stdout}"
    );
    let topics = ledger.topics();
    assert!(
        !topics.is_empty()
            && topics
                .iter()
                .all(|(_, memo, messages)| memo.starts_with("baton panel ") && messages.len() >= 5),
        "the tokened server's judge panels are on the ledger, every message submitted: {topics:?}"
    );
    for screenshot in [
        "00-anonymous-server-no-token-asked",
        "01-run-completed",
        "02-node-details",
        "02b-timeline",
        "03-task-form-422",
        "04-task-submitted-run-completed",
        "05-approval-requested",
        "06-approval-rejected-run-failed",
        "07-judge-transcript-verified",
        "08-chat-plan-drafted",
        "09-chat-plan-approved-and-run",
        "10-chat-busy-thread-refused",
        "11-chat-child-run",
        "12-fork-correction-refused",
        "13-fork-tree",
        "14-schedule-kept",
        "15-schedule-paused",
        "16-evaluation",
        "17-evaluation-example-run",
        "18-sandbox-envelope-ready",
        "19-sandbox-envelope-run",
    ] {
        let file = artifacts.join(format!("{screenshot}.png"));
        assert!(
            std::fs::metadata(&file).is_ok_and(|meta| meta.len() > 1000),
            "{}",
            file.display()
        );
    }
    serve.stop().await;
    anonymous.stop().await;
}
