//! The code map (`docs/architecture.md`) stays true:
//!
//! - its wire section lists every route the OpenAPI document describes,
//!   one `METHOD /path` per line, and no route the document does not (the
//!   HTTP crate's own test keeps the document and the router equal);
//! - every crate of the workspace is in the map, by its folder;
//! - every file the map names in `code` exists in the repository (a name
//!   may be a path's tail: `services/commit.rs`).
//!
//! Each check is a function of the texts, with a test showing it fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::BTreeSet;
use std::path::PathBuf;

fn repository_root() -> PathBuf {
    baton_architecture_tests::manifest_dir().join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repository_root().join(path)).unwrap()
}

/// `METHOD /path` of every operation in an OpenAPI document.
fn documented_routes(openapi: &serde_json::Value) -> BTreeSet<String> {
    let mut routes = BTreeSet::new();
    for (path, item) in openapi["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                routes.insert(format!("{} {path}", method.to_uppercase()));
            }
        }
    }
    routes
}

/// The `METHOD /path` routes the map's table names (a cell in `code`
/// starting with an HTTP method).
fn mapped_routes(architecture: &str) -> BTreeSet<String> {
    architecture
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split_once('`').map(|(route, _)| route.to_string()))
        .filter(|route| {
            ["GET ", "POST ", "PUT ", "PATCH ", "DELETE "]
                .iter()
                .any(|method| route.starts_with(method))
        })
        .collect()
}

/// The routes one side has and the other lacks, said for a person.
fn route_differences(documented: &BTreeSet<String>, mapped: &BTreeSet<String>) -> Vec<String> {
    let mut differences: Vec<String> = documented
        .difference(mapped)
        .map(|route| format!("`{route}` is served but has no line in the wire section"))
        .collect();
    differences.extend(
        mapped
            .difference(documented)
            .map(|route| format!("`{route}` is in the wire section but not served")),
    );
    differences
}

/// Every file of the repository, as paths from its root (the build's and
/// version control's folders left out).
fn repository_files() -> Vec<String> {
    let root = repository_root();
    let mut files = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(directory) = stack.pop() {
        for entry in std::fs::read_dir(&directory).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                if !["target", ".git", "node_modules"].contains(&name.as_str()) {
                    stack.push(path);
                }
            } else {
                files.push(
                    path.strip_prefix(&root)
                        .unwrap()
                        .to_string_lossy()
                        .to_string(),
                );
            }
        }
    }
    files
}

/// The file names the text gives in `code` (a word with a file extension
/// and no space or wildcard), without a `:line` suffix.
fn named_files(text: &str) -> BTreeSet<String> {
    const EXTENSIONS: [&str; 11] = [
        ".rs", ".md", ".json", ".yaml", ".yml", ".toml", ".sh", ".py", ".js", ".html", ".css",
    ];
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(|code| code.split(':').next().unwrap_or_default().trim())
        .filter(|code| {
            !code.is_empty()
                && !code.contains(char::is_whitespace)
                && !code.contains(['*', '<', '{', '$', '?'])
                && EXTENSIONS.iter().any(|extension| code.ends_with(extension))
        })
        .map(str::to_string)
        .collect()
}

/// The named files no repository file is, or ends with (at a `/`).
fn missing_files(named: &BTreeSet<String>, files: &[String]) -> Vec<String> {
    named
        .iter()
        .filter(|name| {
            let tail = format!("/{}", name.trim_start_matches("./"));
            !files
                .iter()
                .any(|file| file == name.trim_start_matches("./") || file.ends_with(&tail))
        })
        .cloned()
        .collect()
}

#[test]
fn the_wire_section_lists_every_served_route_and_no_other() {
    let openapi: serde_json::Value = serde_json::from_str(&read("docs/openapi.json")).unwrap();
    let documented = documented_routes(&openapi);
    assert!(
        documented.len() > 20,
        "the document's routes were read: {documented:?}"
    );
    let differences = route_differences(&documented, &mapped_routes(&read("docs/architecture.md")));
    assert!(differences.is_empty(), "{differences:#?}");
}

#[test]
fn a_route_added_without_its_line_is_named() {
    let openapi = serde_json::json!({"paths": {
        "/api/v1/flex/runs": {"get": {}, "post": {}},
        "/api/v1/flex/widgets": {"post": {}, "parameters": []}
    }});
    let map = "| route | what |\n| --- | --- |\n| `GET /api/v1/flex/runs` | list |\n| `POST /api/v1/flex/runs` | submit |\n| `DELETE /api/v1/flex/gone` | old |\n";
    let differences = route_differences(&documented_routes(&openapi), &mapped_routes(map));
    assert_eq!(
        differences,
        [
            "`POST /api/v1/flex/widgets` is served but has no line in the wire section",
            "`DELETE /api/v1/flex/gone` is in the wire section but not served",
        ]
    );
}

#[test]
fn every_crate_of_the_workspace_is_in_the_map() {
    let manifest = read("Cargo.toml");
    let members_start = manifest.find("members = [").unwrap();
    let members_end = members_start + manifest[members_start..].find(']').unwrap();
    let members: Vec<&str> = manifest[members_start..members_end]
        .split('"')
        .skip(1)
        .step_by(2)
        .collect();
    assert!(
        members.len() > 20,
        "the workspace's members were read: {members:?}"
    );
    let architecture = read("docs/architecture.md");
    let missing: Vec<&&str> = members
        .iter()
        .filter(|member| !architecture.contains(&format!("`{member}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "crates the code map does not name (as `folder`): {missing:?}"
    );
}

#[test]
fn every_file_the_map_names_exists() {
    let named = named_files(&read("docs/architecture.md"));
    assert!(
        named.len() > 50,
        "the map's file names were read: {named:?}"
    );
    let missing = missing_files(&named, &repository_files());
    assert!(
        missing.is_empty(),
        "docs/architecture.md names files that do not exist: {missing:#?}"
    );
}

#[test]
fn a_file_named_but_gone_is_named() {
    let named =
        named_files("the one `services/commit.rs` and `services/gone.rs`, not `*.rs` or `a b.rs`");
    let files = vec!["shared/runtime/src/services/commit.rs".to_string()];
    assert_eq!(missing_files(&named, &files), ["services/gone.rs"]);
}
