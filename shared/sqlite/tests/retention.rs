//! Retention and the live-run counter on the SQLite file: the shared
//! retention case with `expire_ended_runs` as its upkeep (what `baton gc`
//! and `serve` call), then the file itself holds no row of the ended run,
//! in any table, while the parked run of the same age is whole.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use baton_runtime::clock::OffsetClock;
use baton_sqlite::SqliteStore;
use baton_test_support::conformance::retention_conformance;

/// Rows of `run_id` in each table that keeps a run's rows.
fn rows_of(path: &std::path::Path, run_id: &str) -> Vec<(&'static str, i64)> {
    let connection = rusqlite::Connection::open(path).unwrap();
    [
        "runs",
        "events",
        "entries",
        "leases",
        "outbox",
        "idempotency",
        "threads",
    ]
    .into_iter()
    .map(|table| {
        let count: i64 = connection
            .query_row(
                &format!("SELECT COUNT(*) FROM {table} WHERE run_id = ?1"),
                [run_id],
                |row| row.get(0),
            )
            .unwrap();
        (table, count)
    })
    .collect()
}

#[tokio::test]
async fn an_ended_run_past_retention_is_deleted_with_all_its_rows() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("baton.sqlite3");
    let clock = Arc::new(OffsetClock::new());
    let store = SqliteStore::open(&path).unwrap().with_clock(clock.clone());
    let case = retention_conformance(&store, &clock, &store, "sqlite")
        .await
        .unwrap();
    let ended = rows_of(&path, &case.ended_run_id);
    assert!(
        ended.iter().all(|(_, count)| *count == 0),
        "no row of the ended run is left: {ended:?}"
    );
    let parked = rows_of(&path, &case.parked_run_id);
    assert!(
        parked
            .iter()
            .any(|(table, count)| *table == "events" && *count == 3),
        "the parked run keeps its frames: {parked:?}"
    );
}

#[tokio::test]
async fn the_counter_is_set_from_the_runs_of_a_file_written_before_it() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("baton.sqlite3");
    {
        let store = SqliteStore::open(&path).unwrap();
        let envelope =
            baton_core::contracts::envelope::TaskEnvelope::parse_value(&serde_json::json!({
                "objective": "counted", "outputContract": {"schema": {"type": "object"}}
            }))
            .unwrap();
        for index in 0..3 {
            let decision = baton_core::engine::start_run(
                baton_core::engine::NewRunIdentity {
                    run_id: format!("run-{index}"),
                    tenant_id: "t".into(),
                    correlation_id: format!("c-{index}"),
                    thread_id: format!("thread-{index}"),
                    trace: None,
                    submitted_by: None,
                },
                envelope.clone(),
                baton_core::basics::instant::Instant::from_unix_millis(1_767_225_600_000),
                3,
            );
            baton_runtime::ports::RunLog::create_run(&store, &decision.state, vec![], vec![], None)
                .await
                .unwrap();
        }
    }
    // As a file from before the counters: the table is not there.
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute("DROP TABLE live_run_counters", [])
        .unwrap();
    let reopened = SqliteStore::open(&path).unwrap();
    assert_eq!(
        baton_runtime::ports::RunQueries::live_runs(&reopened, "t")
            .await
            .unwrap(),
        3
    );
}

#[tokio::test]
async fn the_sqlite_stream_leases_pass_the_conformance_case() {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&directory.path().join("streams.sqlite3")).unwrap();
    baton_test_support::conformance::stream_lease_conformance(&store, "sqlite")
        .await
        .unwrap();
}

#[tokio::test]
async fn the_sqlite_schedule_book_passes_the_conformance_case() {
    let directory = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&directory.path().join("schedules.sqlite3")).unwrap();
    baton_test_support::conformance::schedule_book_conformance(&store, "sqlite")
        .await
        .unwrap();
}
