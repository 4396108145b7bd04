//! The one conformance suite of `EvaluationRecords`, run on every store:
//! in memory (`InMemoryEvaluations`), as files (`EvaluationFiles`, in a
//! temporary folder), on the SQLite file (`baton-sqlite`, feature
//! `evaluations`, what `baton serve --store sqlite` keeps them in) and in
//! the DynamoDB table (`baton-aws`, over moto: `--store dynamodb`). A record reads back as written, each tenant sees
//! only its own, a deletion takes the results and transcripts with it, and
//! an id that is not an evaluation id names no file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use std::sync::Arc;

use baton_evaluation::served::{EvaluationRecord, EvaluationStatus};
use baton_runtime::memory::{EvaluationFiles, InMemoryEvaluations, TranscriptFolder};
use baton_runtime::ports::evaluation_ports::{EvaluationRecords, TranscriptShelf};

fn record(evaluation_id: &str, finished: usize) -> EvaluationRecord {
    EvaluationRecord {
        evaluation_id: evaluation_id.to_string(),
        name: "a dataset".into(),
        status: EvaluationStatus::Running,
        created_at: "2026-11-29T09:00:00Z".into(),
        total: 3,
        finished,
        passed: finished,
        judged: false,
        summary: None,
        results: Vec::new(),
        in_flight: Vec::new(),
    }
}

async fn conformance(store: Arc<dyn EvaluationRecords>, name: &str) {
    let (tenant_a, tenant_b) = ("tenant-a", "../tenant b");
    assert!(store.tenants().await.unwrap().is_empty(), "{name}: empty");
    assert!(store.list_records(tenant_a).await.unwrap().is_empty());
    assert_eq!(store.get_record(tenant_a, "eval_0a").await.unwrap(), None);

    // Written, read back; the next version replaces it.
    store
        .put_record(tenant_a, &record("eval_0a", 0))
        .await
        .unwrap();
    store
        .put_record(tenant_a, &record("eval_0a", 1))
        .await
        .unwrap();
    store
        .put_record(tenant_b, &record("eval_0b", 2))
        .await
        .unwrap();
    assert_eq!(
        store.get_record(tenant_a, "eval_0a").await.unwrap(),
        Some(record("eval_0a", 1)),
        "{name}: the newest version"
    );

    // Each tenant sees its own.
    let listed = store.list_records(tenant_a).await.unwrap();
    assert_eq!(listed, vec![record("eval_0a", 1)], "{name}");
    assert_eq!(store.get_record(tenant_b, "eval_0a").await.unwrap(), None);
    let mut tenants = store.tenants().await.unwrap();
    tenants.sort();
    assert_eq!(tenants, vec![tenant_b.to_string(), tenant_a.to_string()]);

    // Its request, results and transcripts are kept beside it, and go
    // with it.
    assert_eq!(store.get_request(tenant_a, "eval_0a").await.unwrap(), None);
    store
        .put_request(tenant_a, "eval_0a", "{\"dataset\":[]}")
        .await
        .unwrap();
    assert_eq!(
        store.get_request(tenant_a, "eval_0a").await.unwrap(),
        Some("{\"dataset\":[]}".to_string()),
        "{name}: the request reads back"
    );
    assert_eq!(
        store.get_request(tenant_b, "eval_0a").await.unwrap(),
        None,
        "{name}: another tenant's request is not seen"
    );
    assert_eq!(
        store.list_records(tenant_a).await.unwrap().len(),
        1,
        "{name}: a kept request is no record"
    );
    store
        .put_results(tenant_a, "eval_0a", "{\"id\":\"one\"}\n")
        .await
        .unwrap();
    let shelf = store.transcript_shelf(tenant_a, "eval_0a");
    let kept = shelf
        .keep("example/1", "{\"transcript\":[]}")
        .await
        .unwrap();
    assert!(kept.contains("example"), "{name}: {kept}");
    store.delete_evaluation(tenant_a, "eval_0a").await.unwrap();
    assert_eq!(store.get_record(tenant_a, "eval_0a").await.unwrap(), None);
    assert_eq!(store.get_request(tenant_a, "eval_0a").await.unwrap(), None);
    assert!(store.list_records(tenant_a).await.unwrap().is_empty());
    store.delete_evaluation(tenant_a, "eval_0a").await.unwrap();
    assert_eq!(
        store.get_record(tenant_b, "eval_0b").await.unwrap(),
        Some(record("eval_0b", 2)),
        "{name}: another tenant's is untouched"
    );
}

#[tokio::test]
async fn the_in_memory_store_passes_the_conformance_suite() {
    let store = InMemoryEvaluations::default();
    conformance(Arc::new(store.clone()), "memory").await;
}

#[tokio::test]
async fn the_sqlite_store_passes_the_conformance_suite_and_keeps_no_row_of_a_deleted_one() {
    let folder = tempfile::tempdir().unwrap();
    let database = folder.path().join("runs.sqlite3");
    let store = baton_sqlite::SqliteStore::open(&database).unwrap();
    conformance(Arc::new(store.clone()), "sqlite").await;
    drop(store);
    let connection = rusqlite::Connection::open(&database).unwrap();
    for table in ["evaluations", "evaluation_transcripts"] {
        let rows: i64 = connection
            .query_row(
                &format!("SELECT COUNT(*) FROM {table} WHERE tenant_id = 'tenant-a'"),
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(
            rows, 0,
            "{table} keeps nothing of tenant-a's deleted evaluation"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_dynamodb_store_passes_the_conformance_suite() {
    let moto = moto_server::MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let table = moto_server::unique_name("baton-evaluations");
    let store = baton_aws::DynamoRunStore::new(&connection, &table);
    store.create_table_if_missing().await.unwrap();
    conformance(Arc::new(store.clone()), "dynamodb").await;
    // Nothing of tenant a's deleted evaluation is left in the table.
    let client = aws_sdk_dynamodb::Client::new(&moto.sdk_configuration().await);
    let left = client
        .query()
        .table_name(&table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(
            ":pk",
            aws_sdk_dynamodb::types::AttributeValue::S("T#tenant-a#EVALS".into()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(left.count(), 0, "{:?}", left.items());
}

#[tokio::test]
async fn the_file_store_passes_the_conformance_suite_and_leaves_no_file_behind() {
    let folder = tempfile::tempdir().unwrap();
    let root = folder.path().join("evaluations");
    conformance(Arc::new(EvaluationFiles::new(&root)), "files").await;
    // Tenant a's folder holds nothing after its deletion: no results, no
    // transcripts, no half-written file.
    let tenant_a: String = "tenant-a"
        .bytes()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let left: Vec<_> = std::fs::read_dir(root.join(tenant_a))
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn an_id_that_is_not_an_evaluation_id_names_no_file() {
    let folder = tempfile::tempdir().unwrap();
    let store = EvaluationFiles::new(folder.path());
    for id in ["../../escape", "eval_", "eval_xyz", "eval_0a/../0b"] {
        assert!(
            store.put_record("tenant", &record(id, 0)).await.is_err(),
            "{id}"
        );
        assert_eq!(store.get_record("tenant", id).await.unwrap(), None, "{id}");
        store.delete_evaluation("tenant", id).await.unwrap();
    }
    assert!(store.tenants().await.unwrap().is_empty());
}

#[tokio::test]
async fn transcripts_sit_beside_the_results_under_safe_names() {
    let folder = tempfile::tempdir().unwrap();
    let results = folder.path().join("out").join("eval-results.jsonl");
    let shelf = TranscriptFolder::beside(&results);
    let plain = shelf.keep("as-shipped", "{}").await.unwrap();
    assert_eq!(
        plain,
        folder
            .path()
            .join("out/eval-results.transcripts/as-shipped.json")
            .display()
            .to_string()
    );
    assert_eq!(std::fs::read_to_string(&plain).unwrap(), "{}");
    // Ids that are not plain file names keep their plain characters and a
    // hash of the whole id: two that look alike never share a file.
    let slashed = shelf.keep("a/b", "1").await.unwrap();
    let underscored = shelf.keep("a_b", "2").await.unwrap();
    let dotted = shelf.keep("../up", "3").await.unwrap();
    assert_ne!(slashed, underscored);
    assert!(
        slashed.contains("eval-results.transcripts/a_b-"),
        "{slashed}"
    );
    assert!(dotted.contains("eval-results.transcripts/_up-"), "{dotted}");
    assert_eq!(std::fs::read_to_string(&slashed).unwrap(), "1");
    assert_eq!(std::fs::read_to_string(&underscored).unwrap(), "2");
    // A server's shelf names its transcripts without its data directory.
    let served = TranscriptFolder::shown_as(folder.path().join("ev.transcripts"), "ev.transcripts")
        .keep("x y", "{}")
        .await
        .unwrap();
    assert!(served.starts_with("ev.transcripts/x_y-"), "{served}");
    assert!(
        !served.contains(&folder.path().display().to_string()),
        "{served}"
    );
}
