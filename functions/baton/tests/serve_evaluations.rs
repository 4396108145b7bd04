//! `baton serve`'s evaluations over a real socket (`/api/v1/flex/evaluations`),
//! with the scripted model double standing in for the LLM endpoint (judge
//! scores by a prompt rule): a dataset given inline runs under the caller's
//! tenant (its runs are that tenant's), judged by the panel given (one
//! durable panel run of the tenant per judged example; a panel past its
//! size refused at submission, naming its path), and is
//! kept in the store (the SQLite file: record, request, results lines and
//! transcripts); the list and the record answer only their
//! tenant; wrong requests are 422 naming their JSON path; a tenant's third
//! running evaluation is a 409; one left running by a killed server is
//! resumed after a restart and completes with one run per example (on
//! SQLite, the runs it had started taken up, none started twice), and an
//! ended one past the retention is deleted with its rows.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod serve_support;

use std::time::Duration;

use scripted_llm::{Behavior, PromptRule, ScriptedLlmServer};
use serde_json::{Value, json};
use serve_support::{TOKEN, model_environment, repository, start_serve, token_digest};

const OTHER_TOKEN: &str = "other-tenant-token";

fn environment(model: &ScriptedLlmServer, data_home: &std::path::Path) -> Vec<(String, String)> {
    let mut environment = model_environment(model);
    environment.push(("XDG_DATA_HOME".into(), data_home.display().to_string()));
    environment.push((
        "BATON_API_TOKENS".into(),
        format!(
            "acme:{},other:{}",
            token_digest(),
            baton_http::auth::token_digest_hex(OTHER_TOKEN)
        ),
    ));
    environment
}

fn request_body() -> Value {
    let template: Value = serde_json::from_str(
        &std::fs::read_to_string(
            repository().join("registry/examples/seed-10.0.1-stream-contract-variants.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let judges: Value = serde_json::from_str(
        &std::fs::read_to_string(repository().join("registry/examples/datasets/copy-judges.json"))
            .unwrap(),
    )
    .unwrap();
    json!({
        "name": "variants",
        "template": template,
        "judges": judges,
        "concurrency": 2,
        "dataset": [
            {"id": "as-shipped", "inputs": {}, "expect": {"assertions": [{"!!": [{"var": "copyVariants.1.callToAction"}]}], "minJudgeScore": 7}},
            {"id": "hiring", "inputs": {"goal": "attract_new_employees"}},
            {"id": "three", "inputs": {}, "expect": {"assertions": [{"!!": [{"var": "copyVariants.2"}]}]}}
        ]
    })
}

async fn call(request: reqwest::RequestBuilder, token: &str) -> (u16, Value) {
    let response = request.bearer_auth(token).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dataset_runs_on_the_server_for_its_tenant_and_is_kept() {
    let model = ScriptedLlmServer::start().await.unwrap();
    model.add_prompt_rule(PromptRule {
        contains: "Score the content from 0 (worst) to 10 (best)".into(),
        pointer: "/score".into(),
        values: vec![json!(8.0)],
    });
    let data_home = tempfile::tempdir().unwrap();
    let database = data_home.path().join("runs.sqlite3");
    let store = format!("sqlite:{}", database.display());
    let serve = start_serve(
        &["--store", store.as_str()],
        &environment(&model, data_home.path()),
    )
    .await;
    let client = reqwest::Client::new();
    let base = &serve.base;
    let (status, started) = call(
        client
            .post(format!("{base}/evaluations"))
            .json(&request_body()),
        TOKEN,
    )
    .await;
    assert_eq!(status, 202, "{started}");
    assert_eq!(started["status"], "running");
    assert_eq!(
        (started["total"].as_u64(), started["judged"].as_bool()),
        (Some(3), Some(true))
    );
    let id = started["evaluationId"].as_str().unwrap().to_string();
    let record = loop {
        let (status, record) = call(client.get(format!("{base}/evaluations/{id}")), TOKEN).await;
        assert_eq!(status, 200, "{record}");
        if record["status"] == "completed" {
            break record;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        (record["finished"].as_u64(), record["passed"].as_u64()),
        (Some(3), Some(2)),
        "{record}"
    );
    let results = record["results"].as_array().unwrap();
    let ids: Vec<&str> = results
        .iter()
        .map(|result| result["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["as-shipped", "hiring", "three"],
        "in the dataset's order"
    );
    assert_eq!(results[0]["judge"]["score"], 8.0);
    assert!(
        results[0]["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|check| check["check"] == "minJudgeScore" && check["passed"] == true)
    );
    assert_eq!(results[2]["passed"], false);
    assert_eq!(record["summary"]["judgeScore"]["mean"], 8.0);
    // The runs are the tenant's: acme reads them, another tenant does not.
    for result in results {
        let run_id = result["runId"].as_str().unwrap();
        let (status, _) = call(client.get(format!("{base}/runs/{run_id}")), TOKEN).await;
        assert_eq!(status, 200);
        let (status, _) = call(client.get(format!("{base}/runs/{run_id}")), OTHER_TOKEN).await;
        assert_eq!(status, 404);
    }
    // The judges ran as the tenant's own panel runs, one per judged
    // example, beside the examples' runs.
    let judged = results
        .iter()
        .filter(|result| result["judge"].is_object())
        .count();
    assert!(judged >= 1, "{record}");
    let (_, runs) = call(client.get(format!("{base}/runs?limit=100")), TOKEN).await;
    assert_eq!(
        runs["runs"].as_array().unwrap().len(),
        results.len() + judged,
        "one run per example and one panel run per judged example: {runs}"
    );
    let (_, listed) = call(client.get(format!("{base}/evaluations")), TOKEN).await;
    assert_eq!(listed["evaluations"][0]["evaluationId"], json!(id));
    assert_eq!(
        listed["evaluations"][0]["results"],
        json!([]),
        "the list leaves results out"
    );
    let (_, other) = call(client.get(format!("{base}/evaluations")), OTHER_TOKEN).await;
    assert_eq!(other["evaluations"], json!([]));
    let (status, body) = call(client.get(format!("{base}/evaluations/{id}")), OTHER_TOKEN).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("evaluation_not_found"))
    );
    let (status, _) = call(
        client.get(format!("{base}/evaluations/eval_..%2F..")),
        TOKEN,
    )
    .await;
    assert_eq!(status, 404);
    // Kept in the store: the record, its results lines, its transcripts
    // (each one verifiable); nothing as files in the data directory.
    assert!(!data_home.path().join("baton/evaluations").exists());
    let connection = rusqlite::Connection::open(&database).unwrap();
    let (results_lines, request): (String, String) = connection
        .query_row(
            "SELECT results, request FROM evaluations WHERE tenant_id = 'acme' AND evaluation_id = ?1",
            [&id],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!(results_lines.lines().count(), 3, "{results_lines}");
    assert!(
        request.contains("as-shipped"),
        "the request is kept to resume it"
    );
    let panel_output: String = connection
        .query_row(
            "SELECT panel_output FROM evaluation_transcripts WHERE evaluation_id = ?1 AND example_id = 'as-shipped'",
            [&id],
            |row| row.get(0),
        )
        .unwrap();
    let transcript = data_home.path().join("as-shipped.json");
    std::fs::write(&transcript, panel_output).unwrap();
    let verified = tokio::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["judge", "verify", transcript.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert_eq!(verified.status.code(), Some(0), "{verified:?}");
    serve.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_requests_are_named_limits_hold_and_a_restart_resumes_the_unfinished() {
    let model = ScriptedLlmServer::start().await.unwrap();
    let data_home = tempfile::tempdir().unwrap();
    let database = data_home.path().join("runs.sqlite3");
    let store = format!("sqlite:{}", database.display());
    let serve = start_serve(
        &["--store", store.as_str()],
        &environment(&model, data_home.path()),
    )
    .await;
    let client = reqwest::Client::new();
    let base = serve.base.clone();
    let refused = |body: Value| {
        let (client, base) = (client.clone(), base.clone());
        async move {
            let (status, answer) = call(
                client.post(format!("{base}/evaluations")).json(&body),
                TOKEN,
            )
            .await;
            assert_eq!(status, 422, "{answer}");
            assert_eq!(answer["error"]["code"], "invalid_evaluation");
            answer["error"]["details"]["path"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    let mut body = request_body();
    body["dataset"][1] = json!({"id": "x", "envelope": {"objective": 3}});
    assert_eq!(refused(body).await, "$.dataset[1].envelope.objective");
    let mut body = request_body();
    body["judges"]["request"]["selectedAgents"] = json!("everyone");
    assert_eq!(refused(body).await, "$.judges.request.selectedAgents");
    // A panel past its size is refused when the evaluation is submitted,
    // not when a round is stored.
    let mut body = request_body();
    let judge = body["judges"]["request"]["selectedAgents"][0].clone();
    body["judges"]["request"]["selectedAgents"] = Value::Array(
        (0..=baton_judge::request::MAX_JUDGES)
            .map(|index| {
                let mut judge = judge.clone();
                judge["id"] = json!(format!("judge-{index}"));
                judge
            })
            .collect(),
    );
    assert_eq!(refused(body).await, "$.judges.request.selectedAgents");
    let mut body = request_body();
    body["extra"] = json!(true);
    assert_eq!(refused(body).await, "$.extra");
    let mut body = request_body();
    body.as_object_mut().unwrap().remove("template");
    assert_eq!(refused(body).await, "$.dataset[0].inputs");
    let response = client
        .post(format!("{base}/evaluations"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body("{")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(
        client
            .get(format!("{base}/evaluations"))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    // A slow model: two evaluations run, a third is refused; another tenant still may.
    model.set_default_behavior(Behavior::SlowValid { delay_ms: 60_000 });
    let mut body = request_body();
    body.as_object_mut().unwrap().remove("judges");
    for _ in 0..2 {
        let (status, answer) = call(
            client.post(format!("{base}/evaluations")).json(&body),
            TOKEN,
        )
        .await;
        assert_eq!(status, 202, "{answer}");
    }
    let (status, answer) = call(
        client.post(format!("{base}/evaluations")).json(&body),
        TOKEN,
    )
    .await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (409, Some("evaluation_limit")),
        "{answer}"
    );
    let (status, _) = call(
        client.post(format!("{base}/evaluations")).json(&body),
        OTHER_TOKEN,
    )
    .await;
    assert_eq!(status, 202);
    serve.stop().await;
    // An ended evaluation past the retention (30 days by default), kept by
    // an earlier server: the restart deletes it with its rows.
    let old = json!({"evaluationId": "eval_0123abcd", "name": "old", "status": "completed",
        "createdAt": "2020-01-01T00:00:00Z", "total": 0, "finished": 0, "passed": 0,
        "judged": false, "results": []});
    let connection = rusqlite::Connection::open(&database).unwrap();
    connection
        .execute(
            "INSERT INTO evaluations (tenant_id, evaluation_id, record, results) VALUES ('acme', 'eval_0123abcd', ?1, '')",
            [old.to_string()],
        )
        .unwrap();
    connection
        .execute(
            "INSERT INTO evaluation_transcripts VALUES ('acme', 'eval_0123abcd', 'x', '{}')",
            [],
        )
        .unwrap();
    // Restarted on the same file: the unfinished are resumed.
    let serve = start_serve(
        &["--store", store.as_str()],
        &environment(&model, data_home.path()),
    )
    .await;
    let (_, listed) = call(client.get(format!("{}/evaluations", serve.base)), TOKEN).await;
    let statuses: Vec<&str> = listed["evaluations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|record| record["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["running", "running"], "{listed}");
    for table in ["evaluations", "evaluation_transcripts"] {
        let left: i64 = connection
            .query_row(
                &format!("SELECT COUNT(*) FROM {table} WHERE evaluation_id = 'eval_0123abcd'"),
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(left, 0, "the old evaluation's {table} rows were deleted");
    }
    serve.stop().await;
}

/// Killed while an evaluation's first two examples wait on a slow model,
/// then started again on the same SQLite file and data directory with a
/// fast one: the evaluation is resumed and completes, every example with a
/// result, and the tenant has exactly one run per example (the two
/// started before the kill were taken up under their keys, not started
/// again).
#[tokio::test(flavor = "multi_thread")]
async fn a_running_evaluation_survives_a_restart_with_one_run_per_example() {
    let model = ScriptedLlmServer::start().await.unwrap();
    model.set_default_behavior(Behavior::SlowValid { delay_ms: 60_000 });
    let data_home = tempfile::tempdir().unwrap();
    let database = data_home.path().join("runs.sqlite3");
    let store = format!("sqlite:{}", database.display());
    let arguments = ["--store", store.as_str()];
    let serve = start_serve(&arguments, &environment(&model, data_home.path())).await;
    let client = reqwest::Client::new();
    let mut body = request_body();
    body.as_object_mut().unwrap().remove("judges");
    let (status, started) = call(
        client
            .post(format!("{}/evaluations", serve.base))
            .json(&body),
        TOKEN,
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let evaluation_id = started["evaluationId"].as_str().unwrap().to_string();
    serve_support::wait_for_model_requests(&model, 2).await;
    serve.stop().await;

    model.set_default_behavior(Behavior::Valid);
    let serve = start_serve(&arguments, &environment(&model, data_home.path())).await;
    let url = format!("{}/evaluations/{evaluation_id}", serve.base);
    let began = std::time::Instant::now();
    let record = loop {
        let (status, record) = call(client.get(&url), TOKEN).await;
        assert_eq!(status, 200, "{record}");
        if record["status"] != "running" {
            break record;
        }
        assert!(
            began.elapsed() < Duration::from_secs(120),
            "still running after 120 s: {record}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(record["status"], "completed", "{record}");
    assert_eq!(record["finished"], 3, "{record}");
    let mut example_runs: Vec<String> = record["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|result| result["runId"].as_str().unwrap().to_string())
        .collect();
    example_runs.sort();
    let (_, listed) = call(client.get(format!("{}/runs?limit=100", serve.base)), TOKEN).await;
    let mut tenant_runs: Vec<String> = listed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["runId"].as_str().unwrap().to_string())
        .collect();
    tenant_runs.sort();
    assert_eq!(
        tenant_runs, example_runs,
        "one run per example, none started twice: {listed}"
    );
    serve.stop().await;
}

/// `baton serve --store dynamodb` (DynamoDB and SQS from moto) keeps its
/// evaluations in the table: one runs to its end, its record and results
/// are items of the tenant's evaluations partition, and a server started
/// again on the same table still answers it.
#[tokio::test(flavor = "multi_thread")]
async fn an_evaluation_on_dynamodb_is_kept_in_the_table() {
    let moto = moto_server::MotoServer::start().unwrap();
    let model = ScriptedLlmServer::start().await.unwrap();
    let data_home = tempfile::tempdir().unwrap();
    let mut environment = environment(&model, data_home.path());
    let cloud = serve_support::dynamodb_environment(&moto).await;
    let table = cloud
        .iter()
        .find(|(name, _)| name == "BATON_TABLE")
        .unwrap()
        .1
        .clone();
    environment.extend(cloud);
    let serve = start_serve(&["--store", "dynamodb"], &environment).await;
    let client = reqwest::Client::new();
    let mut body = request_body();
    body.as_object_mut().unwrap().remove("judges");
    let (status, started) = call(
        client
            .post(format!("{}/evaluations", serve.base))
            .json(&body),
        TOKEN,
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let id = started["evaluationId"].as_str().unwrap().to_string();
    let url = format!("{}/evaluations/{id}", serve.base);
    let began = std::time::Instant::now();
    loop {
        let (_, record) = call(client.get(&url), TOKEN).await;
        if record["status"] == "completed" {
            assert_eq!(record["finished"], 3, "{record}");
            break;
        }
        assert!(
            began.elapsed() < Duration::from_secs(120),
            "not completed after 120 s: {record}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    serve.stop().await;
    assert!(!data_home.path().join("baton/evaluations").exists());
    let dynamodb = aws_sdk_dynamodb::Client::new(&moto.sdk_configuration().await);
    let items = dynamodb
        .query()
        .table_name(&table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(
            ":pk",
            aws_sdk_dynamodb::types::AttributeValue::S("T#acme#EVALS".into()),
        )
        .send()
        .await
        .unwrap();
    let kinds: Vec<String> = items
        .items()
        .iter()
        .map(|item| {
            item["sk"]
                .as_s()
                .unwrap()
                .split('#')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    for kind in ["REC", "REQ", "RES"] {
        assert!(
            kinds.iter().any(|found| found == kind),
            "{kind} in {kinds:?}"
        );
    }
    let serve = start_serve(&["--store", "dynamodb"], &environment).await;
    let (status, record) = call(
        client.get(format!("{}/evaluations/{id}", serve.base)),
        TOKEN,
    )
    .await;
    assert_eq!(
        (status, record["status"].as_str()),
        (200, Some("completed"))
    );
    serve.stop().await;
}
