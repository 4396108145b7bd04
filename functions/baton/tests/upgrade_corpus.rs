//! Parked runs survive upgrades. `tests/upgrade-corpus/` holds what earlier
//! versions of main stored, recorded by those versions' own `baton`
//! (`tests/upgrade-corpus/record.sh <commit>`): a SQLite file (as SQL) and
//! every item of a DynamoDB table, each with runs parked for a person and
//! for an approval, a completed run, a chat thread and, in versions that
//! had them, a schedule. For every recorded version and store, the current
//! `baton serve` opens those records and a client drives them as a user
//! would: every run listed, each task answered and each approval given
//! until every run completes, every stored frame valid against today's
//! frame schemas, each thread continued, each schedule listed. A change
//! that cannot read an old record fails here: give the format a version
//! and a migration instead.
//!
//! DynamoDB and SQS are moto; the scripted model server stands in for the
//! model.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod serve_support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use moto_server::MotoServer;
use scripted_llm::ScriptedLlmServer;
use serde_json::{Value, json};
use serve_support::{TOKEN, dynamodb_environment, model_environment, read_sse, start_serve};

/// Every recorded version, oldest first.
fn recorded_versions() -> Vec<PathBuf> {
    let folder = serve_support::repository().join("tests/upgrade-corpus");
    let mut versions: Vec<PathBuf> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("corpus.json").is_file())
        .collect();
    versions.sort();
    assert!(
        !versions.is_empty(),
        "no recorded version in {}",
        folder.display()
    );
    versions
}

fn manifest(version: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(version.join("corpus.json")).unwrap()).unwrap()
}

/// The corpus is tenant `local`'s (the CLI's and anonymous serve's): the
/// test token is that tenant's.
fn as_tenant_local(mut environment: Vec<(String, String)>) -> Vec<(String, String)> {
    environment.push((
        "BATON_API_TOKENS".into(),
        format!("local:{}", serve_support::token_digest()),
    ));
    environment
}

#[tokio::test(flavor = "multi_thread")]
async fn every_recorded_sqlite_file_opens_and_its_parked_runs_complete() {
    for version in recorded_versions() {
        let expected = &manifest(&version)["sqlite"];
        let folder = tempfile::tempdir().unwrap();
        let file = folder.path().join("runs.sqlite3");
        let dump = std::fs::read_to_string(version.join("sqlite.sql")).unwrap();
        rusqlite::Connection::open(&file)
            .unwrap()
            .execute_batch(&dump)
            .unwrap();
        let model = ScriptedLlmServer::start().await.unwrap();
        let store = format!("sqlite:{}", file.display());
        let serve = start_serve(
            &["--store", &store],
            &as_tenant_local(model_environment(&model)),
        )
        .await;
        drive_recorded_records(&serve.base, expected, &version).await;
        serve.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_recorded_dynamodb_table_loads_and_its_parked_runs_complete() {
    let moto = MotoServer::start().unwrap();
    for version in recorded_versions() {
        let expected = &manifest(&version)["dynamodb"];
        let mut environment = dynamodb_environment(&moto).await;
        let table = environment
            .iter()
            .find(|(name, _)| name == "BATON_TABLE")
            .map(|(_, table)| table.clone())
            .unwrap();
        put_recorded_items(&moto, &table, &version.join("dynamodb-items.json")).await;
        let model = ScriptedLlmServer::start().await.unwrap();
        environment.extend(model_environment(&model));
        let serve = start_serve(&["--store", "dynamodb"], &as_tenant_local(environment)).await;
        drive_recorded_records(&serve.base, expected, &version).await;
        serve.stop().await;
    }
}

/// Writes every recorded item (DynamoDB JSON, binary values base64) into
/// `table`, as the old version left them.
async fn put_recorded_items(moto: &MotoServer, table: &str, items: &Path) {
    let configuration = moto.sdk_configuration().await;
    let client = aws_sdk_dynamodb::Client::new(&configuration);
    let items: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(items).unwrap()).unwrap();
    assert!(!items.is_empty());
    for item in &items {
        let attributes = item
            .as_object()
            .unwrap()
            .iter()
            .map(|(name, value)| (name.clone(), attribute(value)))
            .collect();
        client
            .put_item()
            .table_name(table)
            .set_item(Some(attributes))
            .send()
            .await
            .unwrap();
    }
}

/// One attribute value from DynamoDB JSON.
fn attribute(value: &Value) -> AttributeValue {
    let (kind, inner) = value.as_object().unwrap().iter().next().unwrap();
    let base64 = |text: &Value| {
        aws_sdk_dynamodb::primitives::Blob::new(
            base64::engine::general_purpose::STANDARD
                .decode(text.as_str().unwrap())
                .unwrap(),
        )
    };
    let texts = |list: &Value| -> Vec<String> {
        list.as_array()
            .unwrap()
            .iter()
            .map(|text| text.as_str().unwrap().to_string())
            .collect()
    };
    match kind.as_str() {
        "S" => AttributeValue::S(inner.as_str().unwrap().to_string()),
        "N" => AttributeValue::N(inner.as_str().unwrap().to_string()),
        "B" => AttributeValue::B(base64(inner)),
        "BOOL" => AttributeValue::Bool(inner.as_bool().unwrap()),
        "NULL" => AttributeValue::Null(true),
        "SS" => AttributeValue::Ss(texts(inner)),
        "NS" => AttributeValue::Ns(texts(inner)),
        "BS" => AttributeValue::Bs(inner.as_array().unwrap().iter().map(base64).collect()),
        "L" => AttributeValue::L(inner.as_array().unwrap().iter().map(attribute).collect()),
        "M" => AttributeValue::M(
            inner
                .as_object()
                .unwrap()
                .iter()
                .map(|(name, value)| (name.clone(), attribute(value)))
                .collect(),
        ),
        other => panic!("a recorded attribute of unknown type {other}"),
    }
}

/// Posts a person's answer or decision: `true` when taken, `false` when
/// refused because the run moved on meanwhile (409
/// `not_awaiting_a_person`, or `stale_plan_version` when a lapsed SLA
/// re-planned it between the listing and the answer); anything else fails
/// the test.
async fn answer_unless_moved_on(client: &reqwest::Client, path: String, body: Value) -> bool {
    let response = client
        .post(&path)
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    let moved_on = text.contains("not_awaiting_a_person") || text.contains("stale_plan_version");
    if status == reqwest::StatusCode::CONFLICT && moved_on {
        return false;
    }
    assert!(status.is_success(), "POST {path} {body}: {status} {text}");
    true
}

/// Drives a recorded store through the current API, as a user would.
async fn drive_recorded_records(base: &str, expected: &Value, version: &Path) {
    let client = reqwest::Client::new();
    let named = version.file_name().unwrap().to_string_lossy().to_string();
    let get = |path: String| {
        let client = client.clone();
        async move {
            let response = client.get(&path).bearer_auth(TOKEN).send().await.unwrap();
            let status = response.status();
            let body: Value = response.json().await.unwrap();
            assert!(status.is_success(), "GET {path}: {status} {body}");
            body
        }
    };

    let listed = get(format!("{base}/runs?limit=100")).await;
    let runs: Vec<String> = listed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["runId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        runs.len() as u64,
        expected["runs"].as_u64().unwrap(),
        "{named}: the runs list shows every recorded run: {listed}"
    );

    // Every parked run is answered, approved, until none waits. The
    // recorded tasks' SLA timers lapsed long ago (as after a long outage):
    // on open, a run may be re-asking its person while it is listed, and an
    // answer then is refused `not_awaiting_a_person` (409); the run parks
    // again and is answered at the next look. A lapsed SLA may also
    // re-plan the run between the listing and the answer (409
    // `stale_plan_version`); its task is listed again at the next look.
    let mut answered = 0;
    let started = Instant::now();
    loop {
        let tasks = get(format!("{base}/tasks")).await;
        let requests = get(format!("{base}/hitl/requests")).await;
        let tasks = tasks["tasks"].as_array().cloned().unwrap_or_default();
        let requests = requests["requests"].as_array().cloned().unwrap_or_default();
        if tasks.is_empty() && requests.is_empty() {
            break;
        }
        for task in &tasks {
            let output = scripted_llm::generate_instance(&task["outputSchema"], "answer");
            let body = json!({"taskId": task["taskId"], "output": output, "expectedPlanVersion": task["planVersion"]});
            answered += u64::from(
                answer_unless_moved_on(&client, format!("{base}/run.resume"), body).await,
            );
        }
        for request in &requests {
            let body = json!({"runId": request["runId"], "requestId": request["requestId"], "decision": "approve"});
            answered += u64::from(
                answer_unless_moved_on(&client, format!("{base}/hitl/resolve"), body).await,
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{named}: runs still wait for people after 120 s"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(
        answered >= expected["parked"].as_u64().unwrap(),
        "{named}: each parked run was answered ({answered} answers)"
    );

    // Every run completes; every frame it stored, old or new, is valid.
    for run_id in &runs {
        let settled = Instant::now();
        let status = loop {
            let status = serve_support::run_status(&client, base, run_id).await;
            if !matches!(status.as_str(), "queued" | "running") {
                break status;
            }
            assert!(
                settled.elapsed() < Duration::from_secs(60),
                "{named}: {run_id} never settled"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(status, "completed", "{named}: {run_id}");
        let frames = serve_support::run_frames(&client, base, run_id).await;
        baton_test_support::assert_frame_values_match_schemas(&frames);
    }

    // Each thread goes on, and is listed once it has (a thread written
    // before threads had summaries is listed from its next message on).
    let api = base.trim_end_matches("/flex");
    let thread_ids: Vec<&str> = expected["threadIds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap())
        .collect();
    for thread_id in &thread_ids {
        let response = client
            .post(format!("{api}/chat"))
            .bearer_auth(TOKEN)
            .json(&json!({"message": "And a tagline?", "threadId": thread_id}))
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "{named}: {}",
            response.status()
        );
        let frames = read_sse(response).await;
        assert_eq!(
            frames.last().and_then(|frame| frame["type"].as_str()),
            Some("complete"),
            "{named}: the thread went on: {frames:?}"
        );
    }
    let threads = get(format!("{api}/threads")).await;
    let listed: Vec<&str> = threads["threads"]
        .as_array()
        .map(|threads| {
            threads
                .iter()
                .filter_map(|thread| thread["threadId"].as_str())
                .collect()
        })
        .unwrap_or_default();
    for thread_id in &thread_ids {
        assert!(
            listed.contains(thread_id),
            "{named}: thread {thread_id} is listed: {threads}"
        );
    }

    // Each schedule is kept.
    let schedules = get(format!("{base}/schedules")).await;
    assert_eq!(
        schedules["schedules"].as_array().map_or(0, Vec::len) as u64,
        expected["schedules"].as_u64().unwrap_or(0),
        "{named}: {schedules}"
    );
}
