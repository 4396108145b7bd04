//! Every variable the code reads is in the configuration table (`docs/configuration.md`),
//! and only the one reader touches the process environment.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::{Path, PathBuf};

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `src/` Rust files of the shared crates and functions, unit tests cut off.
fn production_sources() -> Vec<(PathBuf, String)> {
    let mut sources = Vec::new();
    let mut stack = vec![
        repository_root().join("shared"),
        repository_root().join("functions"),
    ];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if !["tests", "benches", "target"].contains(&name.as_str()) {
                for entry in std::fs::read_dir(&path).unwrap() {
                    stack.push(entry.unwrap().path());
                }
            }
        } else if path.extension().is_some_and(|extension| extension == "rs")
            && path.components().any(|part| part.as_os_str() == "src")
        {
            let text = std::fs::read_to_string(&path).unwrap();
            let production = text
                .split("#[cfg(test)]")
                .next()
                .unwrap_or_default()
                .to_string();
            sources.push((path, production));
        }
    }
    sources
}

/// String literals naming a variable: `"BATON_…"`, `"OPENAI_…"`, `"AWS_…"`,
/// and the two home-directory variables the offline model's path reads.
fn variable_names_in(text: &str) -> Vec<String> {
    text.split('"')
        .skip(1)
        .step_by(2)
        .filter(|literal| {
            let looks_like_a_variable = literal.chars().all(|character| {
                character.is_ascii_uppercase() || character.is_ascii_digit() || character == '_'
            });
            looks_like_a_variable
                && (["BATON_", "OPENAI_", "AWS_"]
                    .iter()
                    .any(|prefix| literal.starts_with(prefix))
                    || ["HOME", "XDG_CACHE_HOME"].contains(literal))
        })
        .map(str::to_string)
        .collect()
}

/// The `## Variables` table of `docs/configuration.md`: every backticked name in its rows.
fn documented_variables() -> Vec<String> {
    let readme = std::fs::read_to_string(repository_root().join("docs/configuration.md")).unwrap();
    let section = readme
        .split("\n## Variables")
        .nth(1)
        .expect("docs/configuration.md has a Variables section");
    let section = section.split("\n## ").next().unwrap();
    let table: Vec<&str> = section
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .collect();
    assert!(
        table.len() > 10,
        "one table, not split by blank lines: {table:?}"
    );
    table
        .iter()
        .filter_map(|row| row.split('|').nth(1))
        .flat_map(|cell| {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn every_variable_the_code_reads_is_in_the_readme_table() {
    let documented = documented_variables();
    let mut missing = Vec::new();
    let mut seen = 0;
    for (path, text) in production_sources() {
        for name in variable_names_in(&text) {
            seen += 1;
            if !documented.contains(&name) {
                missing.push(format!("{name} ({})", path.display()));
            }
        }
    }
    assert!(seen > 20, "variables found in the code: {seen}");
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "read by the code, missing from the table in docs/configuration.md: {missing:#?}"
    );
}

#[test]
fn only_the_configuration_reader_touches_the_environment() {
    let reader = Path::new("functions/bootstrap/src/config/mod.rs");
    let mut offenders = Vec::new();
    for (path, text) in production_sources() {
        let touches = ["std::env::var", "env::var_os", "std::env::vars"]
            .iter()
            .any(|call| text.contains(call));
        if touches && !path.ends_with(reader) {
            offenders.push(path.display().to_string());
        }
    }
    assert!(
        offenders.is_empty(),
        "read the environment directly: {offenders:?}"
    );
}
