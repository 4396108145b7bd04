//! `baton memory …` on a SQLite file: items put from the command line are
//! read back, listed under a prefix, searched (the one sharing the query's
//! words first), deleted, and forgotten by person, each command reading
//! what the last wrote to the file; a wrong namespace exits 2 naming its
//! field; `--store memory` is refused by name. No model is called.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::process::Output;

use serde_json::Value;

fn baton(data_home: &std::path::Path, arguments: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(arguments)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .env("XDG_DATA_HOME", data_home)
        .env_remove("BATON_REGISTRY_DIR")
        .env_remove("BATON_LLM_BASE_URL")
        .env_remove("BATON_EMBEDDINGS_MODEL")
        .env("BATON_LLM", "local")
        .output()
        .unwrap()
}

fn json_of(output: &Output) -> Value {
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn memory_items_are_kept_read_searched_and_forgotten_in_the_file() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!(
        "--store=sqlite:{}",
        folder.path().join("memory.sqlite3").display()
    );
    let home = folder.path();
    let kept = json_of(&baton(
        home,
        &[
            "memory",
            "put",
            "client/northwind/tone",
            "voice",
            "Warm and plain, never shouting",
            "--person",
            "ada",
            &store,
        ],
    ));
    assert_eq!(
        kept["namespace"],
        serde_json::json!(["client", "northwind", "tone"])
    );
    assert_eq!(kept["provenance"]["person"], "ada");
    json_of(&baton(
        home,
        &[
            "memory",
            "put",
            "client/northwind/tone",
            "palette",
            r#"{"colours": ["navy", "white"]}"#,
            &store,
        ],
    ));
    let read = json_of(&baton(
        home,
        &["memory", "get", "client/northwind/tone", "palette", &store],
    ));
    assert_eq!(
        read["value"]["colours"][0], "navy",
        "a JSON value is kept as JSON: {read}"
    );

    let listed = json_of(&baton(home, &["memory", "list", "client", &store]));
    let keys: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["palette", "voice"]);

    let found = json_of(&baton(
        home,
        &[
            "memory",
            "search",
            "a warm tone of voice",
            "--namespace",
            "client/northwind/tone",
            &store,
        ],
    ));
    assert_eq!(found[0]["item"]["key"], "voice", "{found}");
    assert_eq!(found[0]["foundBy"], "lexical");

    let deleted = json_of(&baton(
        home,
        &[
            "memory",
            "delete",
            "client/northwind/tone",
            "palette",
            &store,
        ],
    ));
    assert_eq!(deleted["deleted"], true);
    let forgotten = json_of(&baton(
        home,
        &["memory", "forget", "--person", "ada", &store],
    ));
    assert_eq!(forgotten["deleted"], 1);
    let left = json_of(&baton(home, &["memory", "list", &store]));
    assert_eq!(left, serde_json::json!([]));

    let wrong = baton(home, &["memory", "put", "", "key", "value", &store]);
    assert_eq!(wrong.status.code(), Some(2), "{wrong:?}");
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("$.namespace"),
        "{wrong:?}"
    );
    let in_memory = baton(home, &["memory", "list", "--store", "memory"]);
    assert_eq!(in_memory.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&in_memory.stderr).contains("--store memory keeps nothing"));
}
