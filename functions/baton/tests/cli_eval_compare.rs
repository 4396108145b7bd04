//! `baton eval` with a judge panel, `baton eval compare` and `baton eval
//! --api`, with the scripted model double standing in for the LLM endpoint.
//! The double reacts to prompts through prompt rules: a judge's request gets
//! a score taken in turn from a list (a judge that varies within noise),
//! and a writer prompt carrying a changed instruction gets answers with an
//! empty call to action (so the writer's output constraint breaks). Baton's own code
//! (the CLI, the engine, the panel, the comparison) is what runs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod serve_support;

use std::path::{Path, PathBuf};
use std::process::Output;

use scripted_llm::{PromptRule, ScriptedLlmServer};
use serde_json::{Value, json};

const DATASET: &str = "registry/examples/datasets/stream-contract-variants.jsonl";
const PANEL: &str = "registry/examples/datasets/copy-judges.json";
/// What the panel's judges are asked (their user message), in every round.
const JUDGE_TASK: &str = "Score the content from 0 (worst) to 10 (best)";
/// The instruction the candidate adds to the writer's prompt (the double
/// then answers with an empty call to action, which the writer's output
/// constraint refuses).
const CHANGED_INSTRUCTION: &str = "Leave the call to action out of every variant.";

async fn baton(server: &ScriptedLlmServer, data_home: &Path, arguments: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(arguments)
        .current_dir(serve_support::repository())
        .env("XDG_DATA_HOME", data_home)
        .env_remove("BATON_REGISTRY_DIR")
        .env_remove("BATON_LOCAL_MODEL_PATH")
        .env_remove("BATON_LLM")
        .env_remove("BATON_API_TOKEN")
        .env("BATON_LLM_BASE_URL", server.base_url())
        .env("BATON_LLM_MODEL", "gpt-4o-mini")
        .env("BATON_LLM_INITIAL_BACKOFF_MS", "5")
        .output()
        .await
        .unwrap()
}

/// `baton eval compare BASELINE CANDIDATE --report REPORT`.
async fn compare(
    server: &ScriptedLlmServer,
    data_home: &Path,
    baseline: &Path,
    candidate: &Path,
    report: &Path,
) -> Output {
    let arguments = [
        "eval",
        "compare",
        baseline.to_str().unwrap(),
        candidate.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ];
    baton(server, data_home, &arguments).await
}

fn results(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_folder(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A judge double whose scores vary within noise (taken in turn; eight
/// values, so two evaluations of nine judge calls each see different ones).
fn noisy_judges(server: &ScriptedLlmServer) {
    server.add_prompt_rule(PromptRule {
        contains: JUDGE_TASK.into(),
        pointer: "/score".into(),
        values: [7.0, 7.4, 6.8, 7.2, 7.1, 6.9, 7.3, 6.7]
            .map(Value::from)
            .to_vec(),
    });
}

fn scores(lines: &[Value]) -> Vec<f64> {
    lines
        .iter()
        .map(|line| line["judge"]["score"].as_f64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_prompt_change_that_breaks_a_constraint_is_a_regression_and_judge_noise_is_not() {
    let server = ScriptedLlmServer::start().await.unwrap();
    noisy_judges(&server);
    server.add_prompt_rule(PromptRule {
        contains: CHANGED_INSTRUCTION.into(),
        pointer: "/copyVariants/0/callToAction".into(),
        values: vec![json!("")],
    });
    let folder = tempfile::tempdir().unwrap();
    let registry = folder.path().join("registry");
    copy_folder(&serve_support::repository().join("registry"), &registry);
    let evaluate = |results: PathBuf| {
        let (server, folder, registry) = (&server, folder.path().to_path_buf(), registry.clone());
        async move {
            let ran = baton(
                server,
                &folder,
                &[
                    "eval",
                    DATASET,
                    "--registry",
                    registry.to_str().unwrap(),
                    "--judges",
                    PANEL,
                    "--results",
                    results.to_str().unwrap(),
                ],
            )
            .await;
            (ran, results)
        }
    };
    let (baseline_ran, baseline) = evaluate(folder.path().join("baseline.jsonl")).await;
    let said = String::from_utf8_lossy(&baseline_ran.stdout);
    assert_eq!(baseline_ran.status.code(), Some(0), "{baseline_ran:?}");
    assert!(said.contains("judge score  mean 7."), "{said}");
    let baseline_lines = results(&baseline);
    for line in &baseline_lines {
        let score = line["judge"]["score"].as_f64().unwrap();
        assert!((6.7..=7.4).contains(&score), "{line}");
    }
    // Every panel's transcript is kept and verifies.
    let transcript = baseline_lines[0]["judge"]["transcriptFile"]
        .as_str()
        .unwrap();
    assert!(
        transcript.ends_with("baseline.transcripts/as-shipped.json"),
        "{transcript}"
    );
    let verified = baton(&server, folder.path(), &["judge", "verify", transcript]).await;
    assert_eq!(verified.status.code(), Some(0), "{verified:?}");
    assert!(String::from_utf8_lossy(&verified.stdout).contains("every hash link holds"));

    // The same prompt again: the judges vary, nothing breaks.
    let (same_ran, same) = evaluate(folder.path().join("same.jsonl")).await;
    assert_eq!(same_ran.status.code(), Some(0), "{same_ran:?}");
    assert_ne!(
        scores(&baseline_lines),
        scores(&results(&same)),
        "the judges' scores varied between the two evaluations"
    );
    let report = folder.path().join("same.html");
    let compared = compare(&server, folder.path(), &baseline, &same, &report).await;
    let said = String::from_utf8_lossy(&compared.stdout);
    assert_eq!(compared.status.code(), Some(0), "{compared:?}");
    assert!(said.contains("verdict      no regression"), "{said}");
    assert!(said.contains("paired bootstrap over 3"), "{said}");
    assert!(!said.contains("broke"), "{said}");

    // The writer's prompt changed: its answers drop the call to action.
    let prompt = registry.join("prompts/ContentGenerator.copyVariants.md");
    let text = std::fs::read_to_string(&prompt).unwrap();
    std::fs::write(&prompt, format!("{text}\n{CHANGED_INSTRUCTION}\n")).unwrap();
    let (changed_ran, changed) = evaluate(folder.path().join("changed.jsonl")).await;
    assert_eq!(changed_ran.status.code(), Some(1), "{changed_ran:?}");
    assert!(
        server
            .requests()
            .iter()
            .any(|request| request.body.to_string().contains(CHANGED_INSTRUCTION)),
        "the changed prompt reached the model"
    );
    let report = folder.path().join("changed.html");
    let compared = compare(&server, folder.path(), &baseline, &changed, &report).await;
    let said = String::from_utf8_lossy(&compared.stdout);
    assert_eq!(compared.status.code(), Some(1), "{compared:?}");
    // An empty call to action breaks the writer's output constraint, so
    // every run stops for a person instead of completing: each example is
    // named with the checks it failed.
    for example in ["as-shipped", "hiring-goal", "awareness-goal"] {
        assert!(
            said.contains(&format!(
                "broke        {example}: status: awaiting_human, expected completed"
            )),
            "{example} is named with its failed check: {said}"
        );
    }
    assert!(
        said.contains(
            "assertions[1]: does not hold: {\"!!\":[{\"var\":\"copyVariants.1.callToAction\"}]}"
        ),
        "{said}"
    );
    assert!(said.contains("pass rate    3/3 → 0/3"), "{said}");
    assert!(
        said.contains("REGRESSION   pass rate fell from 100% to 0%"),
        "{said}"
    );
    let page = std::fs::read_to_string(&report).unwrap();
    assert!(
        page.contains("<tr class=\"broke\" data-example=\"as-shipped\">"),
        "{page}"
    );
    assert!(
        page.contains("href=\"http://127.0.0.1:8080/#run/run_"),
        "{page}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dataset_names_its_judges_and_a_minimum_score_is_checked() {
    let server = ScriptedLlmServer::start().await.unwrap();
    server.add_prompt_rule(PromptRule {
        contains: JUDGE_TASK.into(),
        pointer: "/score".into(),
        values: vec![json!(8.0)],
    });
    let folder = tempfile::tempdir().unwrap();
    std::fs::copy(
        serve_support::repository().join(PANEL),
        folder.path().join("panel.json"),
    )
    .unwrap();
    let template = serve_support::repository()
        .join("registry/examples/seed-10.0.1-stream-contract-variants.json")
        .canonicalize()
        .unwrap();
    let write_dataset = |name: &str, judges: Option<&str>| {
        let path = folder.path().join(name);
        let mut header = json!({"dataset": {"name": name, "template": template}});
        if let Some(judges) = judges {
            header["dataset"]["judges"] = json!(judges);
        }
        std::fs::write(
            &path,
            format!(
                "{header}\n{}\n{}\n",
                json!({"id": "good", "inputs": {}, "expect": {"minJudgeScore": 7, "reference": {"copyVariants": []}}}),
                json!({"id": "strict", "inputs": {}, "expect": {"minJudgeScore": 9}}),
            ),
        )
        .unwrap();
        path
    };
    let judged = write_dataset("judged.jsonl", Some("panel.json"));
    let results_file = folder.path().join("judged-results.jsonl");
    let ran = baton(
        &server,
        folder.path(),
        &[
            "eval",
            judged.to_str().unwrap(),
            "--results",
            results_file.to_str().unwrap(),
        ],
    )
    .await;
    let said = String::from_utf8_lossy(&ran.stdout);
    assert_eq!(ran.status.code(), Some(1), "{ran:?}");
    assert!(
        said.contains("failed       strict: minJudgeScore: 8.00 of at least 9"),
        "{said}"
    );
    let lines = results(&results_file);
    assert_eq!(lines[0]["passed"], true, "{}", lines[0]);
    assert_eq!(lines[0]["judge"]["score"], 8.0);
    // The judges read the reference answer.
    assert!(server.requests().iter().any(|request| {
        request
            .body
            .to_string()
            .contains("Reference answer (what a good output looks like)")
    }));

    // A minimum score with no panel named fails, saying so.
    let unjudged = write_dataset("unjudged.jsonl", None);
    let ran = baton(
        &server,
        folder.path(),
        &[
            "eval",
            unjudged.to_str().unwrap(),
            "--results",
            results_file.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(ran.status.code(), Some(1), "{ran:?}");
    assert!(String::from_utf8_lossy(&ran.stdout).contains("minJudgeScore: no judge panel"));

    // A panel file that is not one is refused before anything runs.
    let bad_panel = folder.path().join("bad-panel.json");
    std::fs::write(
        &bad_panel,
        r#"{"request": {"criteria": [], "selectedAgents": "everyone"}}"#,
    )
    .unwrap();
    let refused = baton(
        &server,
        folder.path(),
        &[
            "eval",
            unjudged.to_str().unwrap(),
            "--judges",
            bad_panel.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("bad-panel.json") && said.contains("selectedAgents"),
        "{said}"
    );

    // Compare refuses what it cannot read, naming the file and line.
    std::fs::write(
        folder.path().join("torn.jsonl"),
        "{\"id\": \"a\", \"passed\": true}\nnot json\n",
    )
    .unwrap();
    let refused = baton(
        &server,
        folder.path(),
        &[
            "eval",
            "compare",
            results_file.to_str().unwrap(),
            folder.path().join("torn.jsonl").to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("torn.jsonl: line 2"));
    let refused = baton(
        &server,
        folder.path(),
        &[
            "eval",
            "compare",
            results_file.to_str().unwrap(),
            results_file.to_str().unwrap(),
            "--fail-on",
            "speed=1",
        ],
    )
    .await;
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--fail-on: `speed`: not a threshold")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn eval_runs_the_examples_on_a_served_api() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let serve = serve_support::start_serve(
        &["--store", "memory"],
        &serve_support::model_environment(&server),
    )
    .await;
    let api = serve.base.trim_end_matches("/api/v1/flex").to_string();
    let folder = tempfile::tempdir().unwrap();
    let results_file = folder.path().join("api.jsonl");
    let ran = baton(
        &server,
        folder.path(),
        &[
            "eval",
            DATASET,
            "--api",
            &api,
            "--token",
            serve_support::TOKEN,
            "--results",
            results_file.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(ran.status.code(), Some(0), "{ran:?}");
    let client = reqwest::Client::new();
    for line in results(&results_file) {
        assert_eq!(line["passed"], true, "{line}");
        assert_eq!(line["api"], json!(api));
        let run_id = line["runId"].as_str().unwrap();
        // The run is the served API's, the test token's tenant's.
        let snapshot = client
            .get(format!("{}/runs/{run_id}", serve.base))
            .bearer_auth(serve_support::TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(snapshot.status(), 200, "{run_id}");
        let snapshot: Value = snapshot.json().await.unwrap();
        assert_eq!(snapshot["run"]["status"], "completed");
        assert_eq!(
            snapshot["output"]["copyVariants"].as_array().unwrap().len(),
            2
        );
        assert!(
            !line["modelByNode"].as_object().unwrap().is_empty(),
            "{line}"
        );
    }
    // A wrong token: every example fails at submission, naming the answer.
    let ran = baton(
        &server,
        folder.path(),
        &[
            "eval",
            DATASET,
            "--api",
            &api,
            "--token",
            "wrong",
            "--results",
            results_file.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(ran.status.code(), Some(1), "{ran:?}");
    assert!(
        String::from_utf8_lossy(&ran.stdout).contains("submitted: HTTP 401"),
        "{ran:?}"
    );
    serve.stop().await;
}
