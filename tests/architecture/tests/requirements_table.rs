//! The requirements table (`docs/requirements.md`) stays true: every test
//! a row names exists (a Rust test function, an `#[test]` or
//! `#[tokio::test]` one, or a function of a browser or client test script),
//! and a row that names no test says why: a deliberate **deviation**, or
//! **not built**. Each check is a function of the texts, with a test
//! showing it fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repository_root() -> PathBuf {
    baton_architecture_tests::manifest_dir().join("../..")
}

/// Names of test functions in `text` (Rust): a `fn` within a few lines
/// after a test attribute.
fn rust_test_names(text: &str, names: &mut BTreeSet<String>) {
    let lines: Vec<&str> = text.lines().collect();
    for (index, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if !(trimmed.starts_with("#[test]") || trimmed.starts_with("#[tokio::test")) {
            continue;
        }
        for following in lines.iter().skip(index + 1).take(8) {
            let following = following.trim_start();
            let after = following
                .strip_prefix("async fn ")
                .or_else(|| following.strip_prefix("fn "));
            if let Some(rest) = after {
                let name: String = rest
                    .chars()
                    .take_while(|character| character.is_alphanumeric() || *character == '_')
                    .collect();
                names.insert(name);
                break;
            }
        }
    }
}

/// Names of the functions of a Python test script.
fn python_function_names(text: &str, names: &mut BTreeSet<String>) {
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("def ") {
            let name: String = rest
                .chars()
                .take_while(|character| character.is_alphanumeric() || *character == '_')
                .collect();
            names.insert(name);
        }
    }
}

fn walk(folder: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if !matches!(name.as_ref(), "target" | "node_modules" | ".git") {
                walk(&path, found);
            }
        } else if name.ends_with(".rs") || name.ends_with(".py") {
            found.push(path);
        }
    }
}

/// Every test name of the repository's code and scripts.
fn test_names() -> BTreeSet<String> {
    let root = repository_root();
    let mut files = Vec::new();
    for folder in ["shared", "functions", "tests", "clients"] {
        walk(&root.join(folder), &mut files);
    }
    let mut names = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        if file.extension().is_some_and(|extension| extension == "py") {
            python_function_names(&text, &mut names);
        } else {
            rust_test_names(&text, &mut names);
        }
    }
    names
}

/// What is wrong with the table: each row's last cell names tests that
/// exist, or says it is a deviation or not built.
fn table_problems(table: &str, known: &BTreeSet<String>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut rows = 0;
    for line in table.lines() {
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').collect();
        // Requirement rows have four cells and a test column header of "Shown by".
        if !line.trim_start().starts_with('|') || cells.len() != 4 {
            continue;
        }
        let shown_by = cells[3].trim();
        if shown_by == "Shown by" || shown_by.starts_with("---") {
            continue;
        }
        rows += 1;
        let named: Vec<&str> = shown_by
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|name| {
                name.contains('_')
                    && name.chars().all(|character| {
                        character.is_ascii_lowercase()
                            || character.is_ascii_digit()
                            || character == '_'
                    })
            })
            .collect();
        for name in &named {
            if !known.contains(*name) {
                problems.push(format!("`{name}` is named but is no test: {}", line.trim()));
            }
        }
        let says_why = shown_by.contains("not built") || shown_by.contains("deviation");
        if named.is_empty() && !says_why {
            problems.push(format!(
                "a row names no test and says neither `deviation` nor `not built`: {}",
                line.trim()
            ));
        }
    }
    if rows == 0 {
        problems.push("the table has no requirement rows".into());
    }
    problems
}

#[test]
fn every_test_the_requirements_table_names_exists() {
    let table = std::fs::read_to_string(repository_root().join("docs/requirements.md")).unwrap();
    let known = test_names();
    assert!(
        known.len() > 500,
        "only {} test names were found",
        known.len()
    );
    let problems = table_problems(&table, &known);
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn a_missing_test_and_a_row_without_a_reason_are_named() {
    let known: BTreeSet<String> = ["a_real_test".to_string()].into();
    let table = "| § | Requirement | In Baton | Shown by |\n| --- | --- | --- | --- |\n\
| 1 | works | yes | `a_real_test` |\n\
| 2 | also works | yes | `a_test_nobody_wrote` |\n\
| 3 | silent | yes | nothing |\n\
| 4 | on purpose | no | deviation |\n";
    let problems = table_problems(table, &known);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(problems[0].contains("a_test_nobody_wrote"));
    assert!(problems[1].contains("silent"));
}

#[test]
fn test_names_are_read_from_attributes_and_scripts() {
    let mut names = BTreeSet::new();
    rust_test_names(
        "#[tokio::test(flavor = \"multi_thread\")]\n#[ignore = \"slow\"]\nasync fn a_slow_one() {}\nfn helper() {}\n#[test]\nfn a_quick_one() {}",
        &mut names,
    );
    python_function_names("def scenario_one(page):\n    pass\n", &mut names);
    let expected: BTreeSet<String> = ["a_slow_one", "a_quick_one", "scenario_one"]
        .map(String::from)
        .into();
    assert_eq!(names, expected);
}
