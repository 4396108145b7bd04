//! `baton gc` on a SQLite file: a run `baton run` ended carries its expiry
//! (`BATON_RETENTION_DAYS` from its end), `gc` leaves it while it is
//! retained, and once past it (the test ages the row, as two days passing
//! would) deletes it with its frames, so `baton runs` lists it no more
//! (the stores' retention case shows a parked run is never touched); a
//! memory item past its expiry goes too, one without stays. The model is
//! the scripted test double.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::process::Output;

use scripted_llm::ScriptedLlmServer;
use serde_json::Value;

async fn baton(server: &ScriptedLlmServer, arguments: &[&str], retention_days: &str) -> Output {
    let data_home = tempfile::tempdir().unwrap();
    tokio::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(arguments)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .env("XDG_DATA_HOME", data_home.path())
        .env_remove("BATON_REGISTRY_DIR")
        .env_remove("BATON_LOCAL_MODEL_PATH")
        .env_remove("BATON_LLM")
        .env("BATON_LLM_BASE_URL", server.base_url())
        .env("BATON_LLM_MODEL", "gpt-4o-mini")
        .env("BATON_LLM_INITIAL_BACKOFF_MS", "5")
        .env("BATON_RETENTION_DAYS", retention_days)
        .output()
        .await
        .unwrap()
}

fn count(path: &std::path::Path, sql: &str) -> i64 {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row(sql, [], |row| row.get(0))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn gc_deletes_an_ended_run_past_its_retention_and_nothing_else() {
    let server = ScriptedLlmServer::start().await.unwrap();
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("runs.sqlite3");
    let store = format!("--store=sqlite:{}", file.display());
    let ran = baton(
        &server,
        &[
            "run",
            "registry/examples/social-post-new-case.json",
            "--format",
            "ndjson",
            &store,
        ],
        "2",
    )
    .await;
    assert_eq!(ran.status.code(), Some(0), "{ran:?}");
    // Stamped by the commit that ended it: two days from its end.
    let retained_for = count(
        &file,
        "SELECT retain_until_millis - CAST(strftime('%s','now') AS INTEGER) * 1000 FROM runs",
    );
    let two_days = 2 * 24 * 3600 * 1000;
    assert!(
        (two_days - 600_000..=two_days + 1000).contains(&retained_for),
        "the ended run is kept two days from its end ({retained_for} ms)"
    );
    let frames = count(&file, "SELECT COUNT(*) FROM events");
    assert!(frames > 5, "the run's frames are in the file ({frames})");

    let early = baton(&server, &["gc", &store], "2").await;
    assert_eq!(early.status.code(), Some(0), "{early:?}");
    let said: Value = serde_json::from_slice(&early.stdout).unwrap();
    assert_eq!(said["runs"], 0, "nothing is past its retention yet: {said}");
    assert_eq!(count(&file, "SELECT COUNT(*) FROM runs"), 1);

    // Two days pass (the row is aged; no clock in the binary is faked).
    rusqlite::Connection::open(&file)
        .unwrap()
        .execute(
            "UPDATE runs SET retain_until_millis = retain_until_millis - ?1",
            [two_days + 1000],
        )
        .unwrap();
    // Two memory items, one past its expiry (written as a store keeps it;
    // the API refuses an expiry in the past).
    {
        use baton_runtime::ports::MemoryStore;
        let sqlite = baton_sqlite::SqliteStore::open(&file).unwrap();
        for (key, expires_at) in [("gone", Some("2026-01-01T00:00:00Z")), ("kept", None)] {
            let item = baton_memory::item::MemoryItem {
                namespace: vec!["client".into()],
                key: key.into(),
                value: serde_json::json!(key),
                text: key.into(),
                provenance: baton_memory::item::Provenance::default(),
                created_at: "2025-12-01T00:00:00Z".into(),
                updated_at: "2025-12-01T00:00:00Z".into(),
                expires_at: expires_at.map(str::to_string),
                embedding: None,
                embedding_model: None,
            };
            sqlite.put_memory("local", &item, 10).await.unwrap();
        }
    }
    let collected = baton(&server, &["gc", &store], "2").await;
    assert_eq!(collected.status.code(), Some(0), "{collected:?}");
    let said: Value = serde_json::from_slice(&collected.stdout).unwrap();
    assert_eq!(said["runs"], 1, "{said}");
    assert!(
        said["items"].as_u64().unwrap() >= frames as u64,
        "its frames went with it: {said}"
    );
    assert_eq!(count(&file, "SELECT COUNT(*) FROM runs"), 0);
    assert_eq!(count(&file, "SELECT COUNT(*) FROM events"), 0);
    assert_eq!(
        said["memoryItems"], 1,
        "the expired memory item went: {said}"
    );
    assert_eq!(
        count(
            &file,
            "SELECT COUNT(*) FROM memory_items WHERE item_key = 'kept'"
        ),
        1,
        "the item without an expiry stays"
    );
    let listed = baton(&server, &["runs", "--format", "json", &store], "2").await;
    assert_eq!(
        serde_json::from_slice::<Value>(&listed.stdout).unwrap(),
        serde_json::json!([])
    );

    let in_memory = baton(&server, &["gc", "--store", "memory"], "2").await;
    assert_eq!(in_memory.status.code(), Some(2));
    assert!(
        String::from_utf8(in_memory.stderr)
            .unwrap()
            .contains("--store memory keeps nothing")
    );
}
