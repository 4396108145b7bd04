//! The SQLite store against the shared conformance suites, across a
//! reopen (a new process), and with two connections on one file racing
//! for the same commit (two processes).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use baton_core::basics::ids::RunKey;
use baton_runtime::ports::OutboxStore;
use baton_runtime::ports::RunLog;
use std::sync::Arc;

use baton_core::state::run::RunStatus;
use baton_runtime::error::StoreError;
use baton_runtime::ports::{StepCommit, StoredRun};
use baton_sqlite::SqliteStore;
use baton_test_support::conformance::{
    capability_directory_conformance, run_store_conformance, thread_store_conformance,
};

fn store_in(directory: &tempfile::TempDir) -> SqliteStore {
    SqliteStore::open(&directory.path().join("state").join("baton.sqlite3")).unwrap()
}

/// Services on `store` with an in-memory queue and the scripted model server
/// (the test double for the model endpoint); the server lives as long as
/// the returned handle.
async fn scripted_services(
    store: Arc<SqliteStore>,
) -> (
    baton_runtime::services::Services,
    baton_runtime::workers::LocalRunner,
    scripted_llm::ScriptedLlmServer,
) {
    let model = scripted_llm::ScriptedLlmServer::start().await.unwrap();
    let provider = Arc::new(
        baton_llm::OpenAiCompatibleProvider::new(baton_llm::OpenAiCompatibleConfig::new(
            model.base_url(),
            "scripted",
            None,
        ))
        .unwrap(),
    );
    let queue = Arc::new(baton_runtime::memory::InMemoryStepQueue::new());
    let services = baton_test_support::TestServices::with_model(provider)
        .store(store.clone())
        .queue(queue.clone())
        .capability_directory(store)
        .build()
        .services;
    let runner = baton_runtime::workers::LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    (services, runner, model)
}

#[tokio::test]
async fn the_sqlite_store_passes_the_run_store_conformance_suite() {
    let directory = tempfile::tempdir().unwrap();
    run_store_conformance(Arc::new(store_in(&directory)), "sqlite")
        .await
        .unwrap();
}

#[tokio::test]
async fn the_sqlite_store_passes_the_capability_directory_conformance_suite() {
    let directory = tempfile::tempdir().unwrap();
    capability_directory_conformance(Arc::new(store_in(&directory)), "sqlite")
        .await
        .unwrap();
}

#[tokio::test]
async fn the_sqlite_store_passes_the_request_keys_conformance_suite() {
    let directory = tempfile::tempdir().unwrap();
    let store = store_in(&directory);
    baton_test_support::conformance::request_keys_conformance(Arc::new(store), "sqlite")
        .await
        .unwrap();
}

#[tokio::test]
async fn the_sqlite_store_passes_the_audit_log_conformance_suite() {
    let directory = tempfile::tempdir().unwrap();
    let store = store_in(&directory);
    baton_test_support::conformance::audit_log_conformance(Arc::new(store.clone()), "sqlite")
        .await
        .unwrap();
    // No update path, even in SQL: the table refuses any UPDATE.
    let connection =
        rusqlite::Connection::open(directory.path().join("state").join("baton.sqlite3")).unwrap();
    let refused = connection
        .execute("UPDATE audit_records SET record = '{}'", [])
        .unwrap_err();
    assert!(refused.to_string().contains("append-only"), "{refused}");
}

#[tokio::test]
async fn the_sqlite_store_passes_the_thread_store_conformance_suite() {
    let directory = tempfile::tempdir().unwrap();
    thread_store_conformance(Arc::new(store_in(&directory)), "sqlite")
        .await
        .unwrap();
    // A thread outlives the process that recorded it.
    let reopened = store_in(&directory);
    let exchanges = baton_runtime::ports::ThreadStore::thread_exchanges(
        &reopened,
        baton_core::basics::ids::ThreadKey::new("tenant-a-sqlite", "thread-sqlite"),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(exchanges.len(), 3);
}

/// A run written by one store (process) is read whole by another opened later.
#[tokio::test]
async fn a_run_outlives_the_store_that_wrote_it() {
    let directory = tempfile::tempdir().unwrap();
    let first = store_in(&directory);
    run_store_conformance(Arc::new(first.clone()), "before-reopen")
        .await
        .unwrap();
    let before = first
        .read_events(
            RunKey::new("tenant-before-reopen", "run-before-reopen"),
            0,
            100,
        )
        .await
        .unwrap();
    let written = first
        .load_run(RunKey::new("tenant-before-reopen", "run-before-reopen"))
        .await
        .unwrap()
        .unwrap();
    drop(first);
    let reopened = store_in(&directory);
    let loaded = reopened
        .load_run(RunKey::new("tenant-before-reopen", "run-before-reopen"))
        .await
        .unwrap()
        .expect("the run is still there");
    assert_eq!(loaded.version, written.version);
    assert_eq!(
        serde_json::to_value(&loaded.state).unwrap(),
        serde_json::to_value(&written.state).unwrap()
    );
    let after = reopened
        .read_events(
            RunKey::new("tenant-before-reopen", "run-before-reopen"),
            0,
            100,
        )
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&after).unwrap(),
        serde_json::to_value(&before).unwrap()
    );
    assert!(!after.is_empty());
}

/// A file written before states were compressed holds each run's state as
/// JSON text: it still loads, and the run's next commit writes it compressed.
#[tokio::test]
async fn a_state_stored_as_json_text_by_an_older_baton_still_loads() {
    let directory = tempfile::tempdir().unwrap();
    let store = store_in(&directory);
    run_store_conformance(Arc::new(store.clone()), "text-state")
        .await
        .unwrap();
    let (tenant, run) = ("tenant-text-state", "run-text-state");
    let written = store
        .load_run(RunKey::new(tenant, run))
        .await
        .unwrap()
        .unwrap();
    let path = directory.path().join("state").join("baton.sqlite3");
    let raw = rusqlite::Connection::open(&path).unwrap();
    let stored_type = |raw: &rusqlite::Connection| -> String {
        raw.query_row(
            "SELECT typeof(state) FROM runs WHERE tenant_id = ?1 AND run_id = ?2",
            [tenant, run],
            |row| row.get(0),
        )
        .unwrap()
    };
    assert_eq!(
        stored_type(&raw),
        "blob",
        "this Baton writes compressed states"
    );
    raw.execute(
        "UPDATE runs SET state = ?3 WHERE tenant_id = ?1 AND run_id = ?2",
        [tenant, run, &serde_json::to_string(&written.state).unwrap()],
    )
    .unwrap();
    assert_eq!(stored_type(&raw), "text");

    // Another process reads the row (this one would answer with the state
    // it kept at that version).
    let loaded = store_in(&directory)
        .load_run(RunKey::new(tenant, run))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        serde_json::to_value(&loaded.state).unwrap(),
        serde_json::to_value(&written.state).unwrap()
    );
    store
        .commit_step(
            RunKey::new(tenant, run),
            StepCommit {
                expected_version: loaded.version,
                previous_status: loaded.state.status(),
                retain_until: None,
                state: loaded.state.clone(),
                events: Vec::new(),
                outbox: Vec::new(),
                consumed_message_id: None,
                entries: Vec::new(),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        stored_type(&raw),
        "blob",
        "rewritten compressed at the next commit"
    );

    raw.execute(
        "UPDATE runs SET state = x'00ff00ff' WHERE tenant_id = ?1 AND run_id = ?2",
        [tenant, run],
    )
    .unwrap();
    // Read by another process: this one answers a load at the version it
    // committed with the state it kept, without reading the row.
    let other_process = store_in(&directory);
    match other_process.load_run(RunKey::new(tenant, run)).await {
        Err(StoreError::Corrupt(message)) => assert!(message.contains("stored state"), "{message}"),
        other => panic!("a damaged state is Corrupt, not {other:?}"),
    }
}

/// Two connections on one file (two processes) commit the same version:
/// exactly one wins, the other writes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn two_processes_racing_for_one_commit_make_one_transition() {
    let directory = tempfile::tempdir().unwrap();
    let setup = store_in(&directory);
    run_store_conformance(Arc::new(setup.clone()), "race")
        .await
        .unwrap();
    let stored = setup
        .load_run(RunKey::new("tenant-race", "run-race"))
        .await
        .unwrap()
        .unwrap();
    let events_before = setup
        .read_events(RunKey::new("tenant-race", "run-race"), 0, 1000)
        .await
        .unwrap()
        .len();
    let contenders: Vec<SqliteStore> = (0..2).map(|_| store_in(&directory)).collect();
    let attempts = contenders.iter().enumerate().map(|(index, store)| {
        let commit = StepCommit {
            expected_version: stored.version,
            previous_status: stored.state.status(),
            retain_until: None,
            state: stored.state.clone(),
            events: vec![baton_core::wire::frames::log(
                &baton_core::wire::frames::FrameStamp::new(
                    baton_core::basics::instant::Instant::from_unix_millis(1),
                    0,
                ),
                format!("contender {index}"),
            )],
            outbox: vec![],
            consumed_message_id: None,
            entries: vec![],
        };
        let store = store.clone();
        tokio::spawn(async move {
            store
                .commit_step(RunKey::new("tenant-race", "run-race"), commit)
                .await
        })
    });
    let results: Vec<Result<u64, StoreError>> = futures_join(attempts).await;
    let won = results.iter().filter(|result| result.is_ok()).count();
    let conflicted = results
        .iter()
        .filter(|result| matches!(result, Err(StoreError::VersionConflict { .. })))
        .count();
    assert_eq!((won, conflicted), (1, 1), "{results:?}");
    let events_after = setup
        .read_events(RunKey::new("tenant-race", "run-race"), 0, 1000)
        .await
        .unwrap()
        .len();
    assert_eq!(
        events_after,
        events_before + 1,
        "the loser appended nothing"
    );
}

async fn futures_join<T>(handles: impl Iterator<Item = tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut results = Vec::new();
    for handle in handles.collect::<Vec<_>>() {
        results.push(handle.await.unwrap());
    }
    results
}

/// An example with parallel branches runs to `complete` on the SQLite store
/// (the real step service; the model endpoint is the scripted test double),
/// and a store opened afterwards reads the finished run and its frames.
#[tokio::test(flavor = "multi_thread")]
async fn an_example_runs_to_completion_on_sqlite() {
    let directory = tempfile::tempdir().unwrap();
    let store = Arc::new(store_in(&directory));
    let (services, runner, _model) = scripted_services(store.clone()).await;
    let submitted = services
        .runs
        .submit(
            "t",
            &baton_test_support::example_envelope("seed-10.0.1-stream-contract-variants.json"),
        )
        .await
        .unwrap();
    let status = runner
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Completed);
    let finished = store
        .load_run(RunKey::new("t", &submitted.run_id))
        .await
        .unwrap()
        .unwrap();
    drop(services);
    drop(runner);

    // The plan is kept apart from the rest of the state (compressed once
    // per run), and read back whole by another process.
    let raw =
        rusqlite::Connection::open(directory.path().join("state").join("baton.sqlite3")).unwrap();
    let stored: Vec<u8> = raw
        .query_row(
            "SELECT state FROM runs WHERE tenant_id = 't' AND run_id = ?1",
            [&submitted.run_id],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(stored[..4], [0xFF; 4], "a split value");
    let reopened = store_in(&directory);
    let read = reopened
        .load_run(RunKey::new("t", &submitted.run_id))
        .await
        .unwrap()
        .unwrap();
    assert!(read.state.plan.is_some());
    assert_eq!(
        serde_json::to_value(&read.state).unwrap(),
        serde_json::to_value(&finished.state).unwrap(),
        "the state read by another process is the one committed"
    );

    let frames = reopened
        .read_events(RunKey::new("t", &submitted.run_id), 0, 10_000)
        .await
        .unwrap();
    baton_test_support::assert_frames_match_schemas(&frames);
    let ids: Vec<u64> = frames.iter().map(|frame| frame.id).collect();
    assert_eq!(ids, (1..=frames.len() as u64).collect::<Vec<_>>());
    assert_eq!(
        frames.last().unwrap().event_type.as_str(),
        "complete",
        "the stored stream ends on complete"
    );
    assert_eq!(
        reopened
            .load_run(RunKey::new("t", &submitted.run_id))
            .await
            .unwrap()
            .unwrap()
            .state
            .status(),
        RunStatus::Completed
    );
    assert!(
        reopened
            .pending_outbox(RunKey::new("t", &submitted.run_id))
            .await
            .unwrap()
            .is_empty(),
        "every step consumed its outbox entry"
    );
}

/// A process that died after submitting (its in-memory queue lost): a new
/// process on the same file finds the planning step in the outbox, queues
/// it again, and the run completes.
#[tokio::test(flavor = "multi_thread")]
async fn a_new_process_picks_up_what_the_last_one_left_in_the_outbox() {
    use baton_runtime::memory::InMemoryStepQueue;
    use baton_runtime::ports::StepQueue;
    use baton_runtime::workers::LocalRunner;

    let directory = tempfile::tempdir().unwrap();
    let model = scripted_llm::ScriptedLlmServer::start().await.unwrap();
    let provider = Arc::new(
        baton_llm::OpenAiCompatibleProvider::new(baton_llm::OpenAiCompatibleConfig::new(
            model.base_url(),
            "scripted",
            None,
        ))
        .unwrap(),
    );
    let services_on = |store: Arc<SqliteStore>, queue: Arc<InMemoryStepQueue>| {
        baton_test_support::TestServices::with_model(provider.clone())
            .store(store.clone())
            .queue(queue)
            .capability_directory(store)
            .build()
            .services
    };
    let envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    let run_id = {
        let first = services_on(
            Arc::new(store_in(&directory)),
            Arc::new(InMemoryStepQueue::new()),
        );
        first.runs.submit("t", &envelope).await.unwrap().run_id
        // The process ends here: its queue, holding the planning step, is gone.
    };
    let store = Arc::new(store_in(&directory));
    let left = store.unconsumed_outbox().await.unwrap();
    assert_eq!(left.len(), 1, "the planning step waits in the outbox");
    let queue = Arc::new(InMemoryStepQueue::new());
    queue.send(&left).await.unwrap();
    let services = services_on(store.clone(), queue.clone());
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    assert_eq!(
        runner.run_until_settled("t", &run_id).await.unwrap(),
        RunStatus::Completed
    );
    assert!(store.unconsumed_outbox().await.unwrap().is_empty());
}

/// Two people answer one parked node at once, on SQLite: one answer is
/// applied, the other is refused, and the run completes with one
/// `node_complete` for the node.
#[tokio::test(flavor = "multi_thread")]
async fn two_concurrent_answers_to_one_task_make_one_transition_on_sqlite() {
    use baton_runtime::services::{PersonInput, PersonInputOutcome};

    let directory = tempfile::tempdir().unwrap();
    let store = Arc::new(store_in(&directory));
    let (services, runner, _model) = scripted_services(store.clone()).await;
    let human_review: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(baton_test_support::repository_path(
            "functions/baton/tests/fixtures/human-review.json",
        ))
        .unwrap(),
    )
    .unwrap();
    let run_id = services
        .runs
        .submit("t", &human_review)
        .await
        .unwrap()
        .run_id;
    assert_eq!(
        runner.run_until_settled("t", &run_id).await.unwrap(),
        RunStatus::AwaitingHuman
    );
    let parked = store
        .load_run(RunKey::new("t", &run_id))
        .await
        .unwrap()
        .unwrap();
    let task = baton_core::state::tasks::human_tasks(&parked.state).remove(0);
    let answer = || PersonInput::Answer {
        node_id: task.node_id.clone(),
        expected_plan_version: task.plan_version,
        output: scripted_llm::generate_instance(&task.output_schema, "answer"),
    };
    let (first, second) = tokio::join!(
        services.people.apply("t", &run_id, answer()),
        services.people.apply("t", &run_id, answer())
    );
    let outcomes = [first.unwrap(), second.unwrap()];
    assert_eq!(
        outcomes
            .iter()
            .filter(|outcome| matches!(outcome, PersonInputOutcome::Applied { .. }))
            .count(),
        1,
        "{outcomes:?}"
    );
    assert_eq!(
        runner.run_until_settled("t", &run_id).await.unwrap(),
        RunStatus::Completed
    );
    let frames = store
        .read_events(RunKey::new("t", &run_id), 0, 10_000)
        .await
        .unwrap();
    assert_eq!(
        frames
            .iter()
            .filter(|frame| frame.event_type.as_str() == "node_complete"
                && frame.node_id.as_deref() == Some(task.node_id.as_str()))
            .count(),
        1
    );
}

/// Commits that arrive together share a transaction (group commit), each in
/// its own savepoint: of 24 concurrent commits at one version of one run,
/// one wins and the others conflict without writing anything, while 24
/// commits to other runs at the same moment all land.
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_commits_share_transactions_and_a_loser_writes_nothing() {
    let directory = tempfile::tempdir().unwrap();
    let store = store_in(&directory);
    run_store_conformance(Arc::new(store.clone()), "group")
        .await
        .unwrap();
    let stored = store
        .load_run(RunKey::new("tenant-group", "run-group"))
        .await
        .unwrap()
        .unwrap();
    let mut others = Vec::new();
    for index in 0..24 {
        let mut state = stored.state.clone();
        state.run_id = format!("run-other-{index}");
        store
            .create_run(&state, vec![], vec![], None)
            .await
            .unwrap();
        others.push(state);
    }
    let log = |text: String| {
        vec![baton_core::wire::frames::log(
            &baton_core::wire::frames::FrameStamp::new(
                baton_core::basics::instant::Instant::from_unix_millis(1),
                0,
            ),
            text,
        )]
    };
    let events_before = store
        .read_events(RunKey::new("tenant-group", "run-group"), 0, 1000)
        .await
        .unwrap()
        .len();
    let (groups_before, commits_before) = store.group_commit_figures();
    let mut handles = Vec::new();
    for (index, state) in others.iter().enumerate() {
        let contender = store.clone();
        let commit = StepCommit {
            expected_version: stored.version,
            previous_status: stored.state.status(),
            retain_until: None,
            state: stored.state.clone(),
            events: log(format!("contender {index}")),
            outbox: vec![],
            consumed_message_id: None,
            entries: vec![],
        };
        handles.push(tokio::spawn(async move {
            contender
                .commit_step(RunKey::new("tenant-group", "run-group"), commit)
                .await
        }));
        let other = store.clone();
        let state = state.clone();
        let commit = StepCommit {
            expected_version: 1,
            previous_status: state.status(),
            retain_until: None,
            state: state.clone(),
            events: log(format!("other {index}")),
            outbox: vec![],
            consumed_message_id: None,
            entries: vec![],
        };
        handles.push(tokio::spawn(async move {
            other
                .commit_step(RunKey::new("tenant-group", &state.run_id), commit)
                .await
        }));
    }
    let results = futures_join(handles.into_iter()).await;
    let contenders: Vec<&Result<u64, StoreError>> = results.iter().step_by(2).collect();
    let landed = results
        .iter()
        .skip(1)
        .step_by(2)
        .filter(|result| result.is_ok())
        .count();
    assert_eq!(landed, 24, "every other run's commit landed: {results:?}");
    assert_eq!(
        contenders.iter().filter(|result| result.is_ok()).count(),
        1,
        "{contenders:?}"
    );
    assert!(
        contenders
            .iter()
            .filter(|result| result.is_err())
            .all(|result| matches!(result, Err(StoreError::VersionConflict { .. }))),
        "{contenders:?}"
    );
    let events_after = store
        .read_events(RunKey::new("tenant-group", "run-group"), 0, 1000)
        .await
        .unwrap();
    assert_eq!(
        events_after.len(),
        events_before + 1,
        "the losers appended nothing"
    );
    let ids: Vec<u64> = events_after.iter().map(|frame| frame.id).collect();
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>());
    let (groups, commits) = store.group_commit_figures();
    assert_eq!(commits - commits_before, 48);
    assert!(
        groups - groups_before < 48,
        "48 concurrent commits took {} transactions: none was shared",
        groups - groups_before
    );
}

/// Double texting on SQLite: the four strategies, two messages sent
/// together each time (`baton_test_support::double_texting`; the model is
/// its test double).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_messages_sent_together_obey_each_multitask_strategy_on_sqlite() {
    let directory = tempfile::tempdir().unwrap();
    let store = Arc::new(store_in(&directory));
    baton_test_support::double_texting::double_texting_suite(store.clone(), store, "sqlite").await;
}

/// A plan with two exclusive branches takes exactly one on SQLite (the
/// scenario of `baton_test_support::conformance::two_branches_take_one`; the model is its test
/// double).
#[tokio::test(flavor = "multi_thread")]
async fn two_exclusive_branches_take_one_on_sqlite() {
    let directory = tempfile::tempdir().unwrap();
    baton_test_support::conformance::two_branches_take_one(Arc::new(store_in(&directory))).await;
}

#[tokio::test]
async fn the_sqlite_store_passes_the_memory_conformance_suite() {
    let directory = tempfile::tempdir().unwrap();
    let store = store_in(&directory);
    baton_test_support::conformance::memory_store_conformance(Arc::new(store), "sqlite", false)
        .await
        .unwrap();
}

/// A process answers a load at the version it committed with the state it
/// kept; once another process has committed the run, the row is read.
#[tokio::test(flavor = "multi_thread")]
async fn a_kept_state_never_hides_another_processs_commit() {
    let directory = tempfile::tempdir().unwrap();
    let first = store_in(&directory);
    run_store_conformance(Arc::new(first.clone()), "kept")
        .await
        .unwrap();
    let (tenant, run) = ("tenant-kept", "run-kept");
    let commit_with = |loaded: &StoredRun, turns: u32| {
        let mut state = loaded.state.clone();
        state.model_turns = turns;
        StepCommit {
            expected_version: loaded.version,
            previous_status: loaded.state.status(),
            retain_until: None,
            state,
            events: Vec::new(),
            outbox: Vec::new(),
            consumed_message_id: None,
            entries: Vec::new(),
        }
    };
    let loaded = first
        .load_run(RunKey::new(tenant, run))
        .await
        .unwrap()
        .unwrap();
    let version = first
        .commit_step(RunKey::new(tenant, run), commit_with(&loaded, 11))
        .await
        .unwrap();
    let kept = first
        .load_run(RunKey::new(tenant, run))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((kept.version, kept.state.model_turns), (version, 11));

    let second = store_in(&directory);
    let read = second
        .load_run(RunKey::new(tenant, run))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.state.model_turns, 11);
    second
        .commit_step(RunKey::new(tenant, run), commit_with(&read, 22))
        .await
        .unwrap();

    let after = first
        .load_run(RunKey::new(tenant, run))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after.version, version + 1);
    assert_eq!(after.state.model_turns, 22);
    // The first's stale commit is a conflict, and leaves the row alone.
    assert!(matches!(
        first
            .commit_step(RunKey::new(tenant, run), commit_with(&kept, 33))
            .await,
        Err(StoreError::VersionConflict { .. })
    ));
    let last = first
        .load_run(RunKey::new(tenant, run))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(last.state.model_turns, 22);
}
