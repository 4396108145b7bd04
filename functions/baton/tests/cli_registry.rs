//! `baton registry check DIR`: the repository's registry passes; a copy
//! with broken files names each file and JSON path (shapes against the
//! generated schemas, every error at once), then a registry whose shapes
//! hold but whose meaning does not (a capability naming an unknown facet).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn check(directory: &Path) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["registry", "check"])
        .arg(directory)
        .current_dir(repository_root())
        .output()
        .unwrap()
}

fn copy_registry(into: &Path) {
    for folder in [
        "capabilities",
        "facets",
        "tools",
        "prompts",
        "contexts",
        "schemas",
    ] {
        let target = into.join(folder);
        std::fs::create_dir_all(&target).unwrap();
        for entry in std::fs::read_dir(repository_root().join("registry").join(folder)).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, target.join(path.file_name().unwrap())).unwrap();
        }
    }
    for file in ["chat.json", "models.json"] {
        std::fs::copy(
            repository_root().join("registry").join(file),
            into.join(file),
        )
        .unwrap();
    }
}

fn edit(path: &Path, change: impl FnOnce(&mut Value)) {
    let mut document: Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    change(&mut document);
    std::fs::write(path, document.to_string()).unwrap();
}

#[test]
fn the_repository_registry_passes() {
    let output = check(&repository_root().join("registry"));
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        stdout.starts_with("ok: ") && stdout.contains("capabilities"),
        "{stdout}"
    );
    // The catalog's providers are listed with where they are reached and
    // the variable their key comes from (never a value).
    assert!(
        stdout.contains(
            "provider openai (openai): endpoint $BATON_LLM_BASE_URL, key $BATON_LLM_API_KEY; models: "
        ) && stdout.contains("gpt-4o-mini"),
        "{stdout}"
    );
    assert!(
        stdout.contains("provider local (local): in process"),
        "{stdout}"
    );
}

#[test]
fn a_key_written_in_the_model_catalog_is_refused_naming_its_path() {
    let folder = tempfile::tempdir().unwrap();
    copy_registry(folder.path());
    let catalog = folder.path().join("models.json");
    edit(&catalog, |document| {
        document["providers"]["openai"]["apiKey"] = Value::from("sk-live-123")
    });
    let output = check(folder.path());
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("models.json: $.providers['openai'].apiKey: a credential is never written in the catalog"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("sk-live-123"),
        "the key is not echoed: {stderr}"
    );
    // A model of a provider the catalog does not have names its path.
    edit(&catalog, |document| {
        document["providers"]["openai"]
            .as_object_mut()
            .unwrap()
            .remove("apiKey");
        document["models"]["gpt-4o"]["provider"] = Value::from("elsewhere");
    });
    let output = check(folder.path());
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr
            .contains("$.models['gpt-4o'].provider: `elsewhere` is not a provider of this catalog"),
        "{stderr}"
    );
}

#[test]
fn every_shape_error_names_its_file_and_json_path() {
    let folder = tempfile::tempdir().unwrap();
    copy_registry(folder.path());
    let capability = folder
        .path()
        .join("capabilities/strategist.Positioning.json");
    edit(&capability, |document| {
        document["inputContract"] = Value::from("positioning_context")
    });
    let facet = folder.path().join("facets/positioning.json");
    edit(&facet, |document| document["colour"] = Value::from("blue"));
    let tool = folder.path().join("tools/registry_search.json");
    edit(&tool, |document| {
        document.as_object_mut().unwrap().remove("description");
    });
    std::fs::write(
        folder.path().join("facets/broken.json"),
        "{\"name\": \"x\",",
    )
    .unwrap();
    let output = check(folder.path());
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    for (file, path) in [
        (
            "capabilities/strategist.Positioning.json",
            "$.inputContract:",
        ),
        ("facets/positioning.json", "$:"),
        ("tools/registry_search.json", "$:"),
        ("facets/broken.json", "$: not JSON (line 1"),
    ] {
        let line = stderr
            .lines()
            .find(|line| line.contains(file))
            .unwrap_or_else(|| panic!("nothing about {file} in:\n{stderr}"));
        assert!(line.contains(&format!("{file}: {path}")), "{line}");
    }
    assert!(
        stderr.contains("colour"),
        "the unknown property is named:\n{stderr}"
    );
    assert!(
        stderr.contains("description"),
        "the missing property is named:\n{stderr}"
    );
}

#[test]
fn a_meaning_error_names_its_file_and_json_path() {
    let folder = tempfile::tempdir().unwrap();
    copy_registry(folder.path());
    let capability = folder
        .path()
        .join("capabilities/strategist.Positioning.json");
    edit(&capability, |document| {
        document["outputContract"] = serde_json::json!(["no_such_facet"]);
    });
    let output = check(folder.path());
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("strategist.Positioning.json: $.outputContract"),
        "{stderr}"
    );
    assert!(stderr.contains("no_such_facet"), "{stderr}");
}

#[test]
fn a_tenants_file_is_checked_against_its_schema_and_then_as_loaded() {
    let folder = tempfile::tempdir().unwrap();
    copy_registry(folder.path());
    let tenants = folder.path().join("tenants.json");
    std::fs::write(
        &tenants,
        r#"{"tenants": {"team-a": {"retentionDays": 365}}}"#,
    )
    .unwrap();
    let output = check(folder.path());
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    // A retention under a day names its path.
    std::fs::write(&tenants, r#"{"tenants": {"team-a": {"retentionDays": 0}}}"#).unwrap();
    let output = check(folder.path());
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("tenants.json") && stderr.contains("retentionDays"),
        "{stderr}"
    );
    // An unknown setting is refused, not ignored.
    std::fs::write(&tenants, r#"{"tenants": {"team-a": {"retentionDay": 3}}}"#).unwrap();
    let output = check(folder.path());
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        String::from_utf8(output.stderr)
            .unwrap()
            .contains("retentionDay"),
        "the unknown key is named"
    );
}
