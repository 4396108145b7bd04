//! `baton schedule …` on a SQLite file: a schedule created from an example
//! envelope is listed, paused, resumed and deleted, each change read back
//! from the file by the next command; a wrong expression exits 2 naming its
//! field and keeps nothing; `--store memory` is refused by name. (Firing is
//! `serve`'s: `shared/http/tests/schedules.rs` runs its keeper under a fast
//! clock.) No model is called: the offline model is never loaded.

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
        .env("BATON_LLM", "local")
        .output()
        .unwrap()
}

fn json_of(output: &Output) -> Value {
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn schedules_are_created_listed_paused_resumed_and_deleted_in_the_file() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!(
        "--store=sqlite:{}",
        folder.path().join("schedules.sqlite3").display()
    );
    let created = json_of(&baton(
        folder.path(),
        &[
            "schedule",
            "create",
            "registry/examples/social-post-new-case.json",
            "--expression",
            "cron(30 6 ? * MON-FRI *)",
            "--timezone",
            "America/New_York",
            "--missed-fires",
            "catch-up-once",
            "--description",
            "weekday posts",
            &store,
        ],
    ));
    let schedule_id = created["scheduleId"].as_str().unwrap().to_string();
    assert_eq!(created["tenantId"], "local");
    assert_eq!(created["missedFires"], "catch_up_once");
    assert_eq!(created["state"], "active");
    let next = created["nextFireAt"].as_str().unwrap();
    assert!(
        next.ends_with("T11:30:00Z") || next.ends_with("T10:30:00Z"),
        "06:30 in New York is 11:30 UTC (10:30 in summer): {next}"
    );

    let listed = json_of(&baton(
        folder.path(),
        &["schedule", "list", "--format", "json", &store],
    ));
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["scheduleId"], json_id(&schedule_id));

    let paused = json_of(&baton(
        folder.path(),
        &["schedule", "pause", &schedule_id, &store],
    ));
    assert_eq!(paused["state"], "paused");
    assert!(paused.get("nextFireAt").is_none(), "{paused}");
    let shown = json_of(&baton(
        folder.path(),
        &["schedule", "show", &schedule_id, &store],
    ));
    assert_eq!(shown["state"], "paused", "the pause was kept in the file");
    let resumed = json_of(&baton(
        folder.path(),
        &["schedule", "resume", &schedule_id, &store],
    ));
    assert_eq!(resumed["state"], "active");
    assert!(resumed["nextFireAt"].is_string());

    let deleted = json_of(&baton(
        folder.path(),
        &["schedule", "delete", &schedule_id, &store],
    ));
    assert_eq!(deleted["deleted"], json_id(&schedule_id));
    let listed = json_of(&baton(
        folder.path(),
        &["schedule", "list", "--format", "json", &store],
    ));
    assert_eq!(listed, serde_json::json!([]));
    let missing = baton(folder.path(), &["schedule", "show", &schedule_id, &store]);
    assert_eq!(missing.status.code(), Some(2), "{missing:?}");
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no schedule"));
}

fn json_id(id: &str) -> Value {
    Value::String(id.to_string())
}

#[test]
fn a_wrong_schedule_exits_2_naming_its_field_and_memory_is_refused() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!(
        "--store=sqlite:{}",
        folder.path().join("schedules.sqlite3").display()
    );
    for (expression, timezone, field) in [
        ("rate(1 minutes)", "UTC", "$.expression"),
        ("cron(0 8 * * * *)", "UTC", "$.expression"),
        ("rate(5 minutes)", "Europe/Atlantis", "$.timezone"),
    ] {
        let refused = baton(
            folder.path(),
            &[
                "schedule",
                "create",
                "registry/examples/social-post-new-case.json",
                "--expression",
                expression,
                "--timezone",
                timezone,
                &store,
            ],
        );
        assert_eq!(refused.status.code(), Some(2), "{refused:?}");
        let said = String::from_utf8_lossy(&refused.stderr);
        assert!(said.contains(field), "{expression} in {timezone}: {said}");
    }
    let listed = json_of(&baton(
        folder.path(),
        &["schedule", "list", "--format", "json", &store],
    ));
    assert_eq!(listed, serde_json::json!([]), "nothing refused was kept");
    let memory = baton(folder.path(), &["schedule", "list", "--store", "memory"]);
    assert_eq!(memory.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&memory.stderr).contains("--store memory"));
}
