//! Reads go to their own connection: they are answered while the writer is
//! busy, and that connection cannot write.

use baton_core::basics::ids::RunKey;
use baton_runtime::ports::RunLog;
use std::time::Duration;

use crate::SqliteStore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_is_answered_while_the_writing_connection_is_busy() {
    let folder = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&folder.path().join("store.sqlite3")).unwrap();
    // Hold the writer's thread until the read has been answered.
    let (started, writer_started) = std::sync::mpsc::channel::<()>();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let writer = store.clone();
    let held_write = tokio::spawn(async move {
        writer
            .with_connection(move |_connection| {
                let _ = started.send(());
                let _ = released.recv();
                Ok(())
            })
            .await
    });
    tokio::task::spawn_blocking(move || writer_started.recv())
        .await
        .unwrap()
        .unwrap();
    // Were reads queued on the writer's thread, this would wait forever.
    let read = tokio::time::timeout(
        Duration::from_secs(30),
        store.load_run(RunKey::new("tenant", "run-missing")),
    )
    .await;
    release.send(()).unwrap();
    held_write.await.unwrap().unwrap();
    assert!(
        matches!(read, Ok(Ok(None))),
        "the read was not answered beside the busy writer: {read:?}"
    );
}

#[tokio::test]
async fn the_reading_connection_refuses_to_write() {
    let folder = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&folder.path().join("store.sqlite3")).unwrap();
    let written = store
        .with_reader(|connection| {
            connection
                .execute("CREATE TABLE written_by_the_reader (a INTEGER)", [])
                .map_err(crate::unavailable)
        })
        .await;
    assert!(
        written.is_err(),
        "a query_only connection wrote: {written:?}"
    );
}
