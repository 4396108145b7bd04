//! The in-memory adapters (the embedded default) pass the same conformance
//! suites as every other store adapter: the run store, the capability
//! directory (bare and behind the read-through cache) and the thread store.

use std::sync::Arc;
use std::time::Duration;

use baton_runtime::memory::{InMemoryCapabilityDirectory, InMemoryRunStore, InMemoryThreadStore};
use baton_runtime::services::capability_cache::CachingCapabilityDirectory;
use baton_test_support::conformance::{
    capability_directory_conformance, run_store_conformance, thread_store_conformance,
};

#[tokio::test]
async fn the_in_memory_store_passes_the_conformance_suite() {
    let outcome = run_store_conformance(Arc::new(InMemoryRunStore::new()), "memory").await;
    assert_eq!(outcome, Ok(()));
}

#[tokio::test]
async fn the_in_memory_capability_directory_passes_the_conformance_suite() {
    let outcome =
        capability_directory_conformance(Arc::new(InMemoryCapabilityDirectory::new()), "memory")
            .await;
    assert_eq!(outcome, Ok(()));
}

#[tokio::test]
async fn the_capability_cache_passes_the_conformance_suite() {
    let cached = CachingCapabilityDirectory::new(
        Arc::new(InMemoryCapabilityDirectory::new()),
        Duration::from_secs(60),
    );
    let outcome = capability_directory_conformance(Arc::new(cached), "cached").await;
    assert_eq!(outcome, Ok(()));
}

#[tokio::test]
async fn the_in_memory_audit_log_passes_the_conformance_suite() {
    let outcome = baton_test_support::conformance::audit_log_conformance(
        Arc::new(baton_runtime::memory::InMemoryAuditLog::new()),
        "memory",
    )
    .await;
    assert_eq!(outcome, Ok(()));
}

#[tokio::test]
async fn the_in_memory_request_keys_pass_the_conformance_suite() {
    let outcome = baton_test_support::conformance::request_keys_conformance(
        Arc::new(baton_runtime::memory::InMemoryRequestKeys::new()),
        "memory",
    )
    .await;
    assert_eq!(outcome, Ok(()));
}

#[tokio::test]
async fn the_in_memory_thread_store_passes_the_conformance_suite() {
    let outcome = thread_store_conformance(Arc::new(InMemoryThreadStore::new()), "memory").await;
    assert_eq!(outcome, Ok(()));
}

/// The memory store drops ended runs as it goes: past their retention, and
/// past its cap of ended runs, the earliest to expire first.
#[tokio::test]
async fn the_in_memory_store_passes_the_retention_case() {
    let clock = Arc::new(baton_runtime::clock::OffsetClock::new());
    let store = InMemoryRunStore::new().with_clock(clock.clone());
    let case =
        baton_test_support::conformance::retention_conformance(&store, &clock, &store, "memory")
            .await
            .unwrap();
    let frames = baton_runtime::ports::RunLog::read_events(
        &store,
        baton_core::basics::ids::RunKey::new(&case.tenant_id, &case.ended_run_id),
        0,
        10,
    )
    .await;
    assert!(
        matches!(frames, Err(baton_runtime::error::StoreError::RunNotFound)),
        "the ended run's frames are gone with it: {frames:?}"
    );
}

#[tokio::test]
async fn the_in_memory_store_keeps_at_most_its_cap_of_ended_runs() {
    use baton_core::state::run::RunStatus;
    use baton_runtime::ports::{RunLog, RunQueries, StepCommit};
    let store = InMemoryRunStore::new().with_ended_run_cap(2);
    let envelope = baton_core::contracts::envelope::TaskEnvelope::parse_value(&serde_json::json!({
        "objective": "cap", "outputContract": {"schema": {"type": "object"}}
    }))
    .unwrap();
    let far = baton_core::basics::instant::Instant::from_unix_millis(u64::MAX / 4);
    for index in 0..4_u64 {
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
            baton_core::basics::instant::Instant::from_unix_millis(1_767_225_600_000 + index),
            3,
        );
        let mut state = decision.state.clone();
        store
            .create_run(&decision.state, vec![], vec![], None)
            .await
            .unwrap();
        let previous_status = state.status();
        state.set_status_for_fixtures(RunStatus::Completed);
        store
            .commit_step(
                baton_core::basics::ids::RunKey::new("t", &format!("run-{index}")),
                StepCommit {
                    expected_version: 1,
                    previous_status,
                    // Far off: the cap, not the time, drops them.
                    retain_until: Some(far.plus(Duration::from_secs(index))),
                    state,
                    events: vec![],
                    outbox: vec![],
                    consumed_message_id: None,
                    entries: vec![],
                },
            )
            .await
            .unwrap();
    }
    let page = store
        .list_runs(
            "t",
            &baton_core::state::listing::RunListQuery {
                status: None,
                limit: 10,
                cursor: None,
                forked_from: None,
            },
        )
        .await
        .unwrap();
    let kept: Vec<_> = page.runs.iter().map(|run| run.run_id.as_str()).collect();
    assert_eq!(
        kept,
        ["run-3", "run-2"],
        "the two latest to expire are kept"
    );
}

#[tokio::test]
async fn the_in_memory_stream_leases_pass_the_conformance_case() {
    let leases = baton_runtime::memory::InMemoryStreamLeases::new();
    baton_test_support::conformance::stream_lease_conformance(&leases, "memory")
        .await
        .unwrap();
}

#[tokio::test]
async fn the_in_memory_schedule_book_passes_the_conformance_case() {
    let book = baton_runtime::memory::InMemoryScheduleBook::new();
    baton_test_support::conformance::schedule_book_conformance(&book, "memory")
        .await
        .unwrap();
}

#[tokio::test]
async fn the_in_memory_memory_store_passes_the_conformance_suite() {
    let outcome = baton_test_support::conformance::memory_store_conformance(
        Arc::new(baton_runtime::memory::InMemoryMemoryStore::default()),
        "memory",
        false,
    )
    .await;
    assert_eq!(outcome, Ok(()));
}
