//! Per-tenant work against history on the SQLite file: a submission (with
//! a live-run and a submission-rate limit), the live-run check and a page
//! of one status, at 10 and at 100,000 past runs of the tenant. Prints the
//! store calls each makes (the same at both sizes) and its median time,
//! and, for reference, what counting live runs by paging the runs list
//! (the check before the counter) costs at each size.
//!
//!   cargo bench -p baton-sqlite --bench tenant_history
//!
//! The past runs are written straight into the file (one transaction): a
//! hundred thousand runs through the engine would take the bench's time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code

use std::sync::Arc;

use baton_core::state::run::RunStatus;
use baton_sqlite::SqliteStore;
use baton_test_support::tenant_history::{measure_tenant_operations, print_figures};

const TENANT: &str = "bench-tenant";
const ROUNDS: usize = 15;

/// Writes `count` ended runs of the tenant, created a year ago, into the
/// file at `path` (as JSON text, which the store reads as it reads files
/// written before it compressed states).
fn seed_past_runs(path: &std::path::Path, count: usize) {
    let envelope = baton_core::contracts::envelope::TaskEnvelope::parse_value(&serde_json::json!({
        "objective": "a past run", "outputContract": {"schema": {"type": "object"}}
    }))
    .unwrap();
    let year_ago = baton_core::basics::instant::Instant::from_unix_millis(1_735_689_600_000);
    let mut connection = rusqlite::Connection::open(path).unwrap();
    let transaction = connection.transaction().unwrap();
    {
        let mut insert = transaction
            .prepare(
                "INSERT INTO runs (tenant_id, run_id, state, version, status, correlation_id,
                    last_sequence, created_at_millis)
                 VALUES (?1, ?2, ?3, 2, 'completed', ?4, 0, ?5)",
            )
            .unwrap();
        for index in 0..count {
            let run_id = format!("past-{index:06}");
            let created = year_ago.plus(std::time::Duration::from_secs(index as u64));
            let mut state = baton_core::engine::start_run(
                baton_core::engine::NewRunIdentity {
                    run_id: run_id.clone(),
                    tenant_id: TENANT.into(),
                    correlation_id: format!("c-{index}"),
                    thread_id: format!("thread-{index}"),
                    trace: None,
                    submitted_by: None,
                },
                envelope.clone(),
                created,
                3,
            )
            .state;
            state.set_status_for_fixtures(RunStatus::Completed);
            insert
                .execute(rusqlite::params![
                    TENANT,
                    run_id,
                    serde_json::to_string(&state).unwrap(),
                    format!("c-{index}"),
                    created.unix_millis() as i64
                ])
                .unwrap();
        }
    }
    transaction.commit().unwrap();
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    println!("tenant history on SQLite: {ROUNDS} rounds per operation, medians");
    for past_runs in [10, 100_000] {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("history.sqlite3");
        // Opened once so the schema exists, then seeded, then reopened.
        drop(SqliteStore::open(&path).unwrap());
        seed_past_runs(&path, past_runs);
        let store = Arc::new(SqliteStore::open(&path).unwrap());
        let figures =
            runtime.block_on(measure_tenant_operations(store, TENANT, ROUNDS, None, true));
        print_figures("sqlite", past_runs, &figures);
    }
}
