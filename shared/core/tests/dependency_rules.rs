//! House rule 1: the core does no I/O, so no async runtime, AWS SDK, HTTP
//! client/server or Lambda crate may appear in its normal dependency tree.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use std::process::Command;

const FORBIDDEN_PREFIXES: [&str; 7] =
    ["tokio", "aws-", "reqwest", "axum", "lambda", "hyper", "mio"];

#[test]
fn core_has_no_io_crates_in_its_dependency_tree() {
    let crate_names = normal_dependency_names("baton-core");
    assert!(
        crate_names.iter().any(|name| name == "jsonschema"),
        "the tree was read: {crate_names:?}"
    );
    let offenders: Vec<&String> = crate_names
        .iter()
        .filter(|name| {
            FORBIDDEN_PREFIXES
                .iter()
                .any(|prefix| name.starts_with(prefix))
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "baton-core depends on I/O crates: {offenders:?}"
    );
}

/// The normal dependency tree of `package`, one crate name per line.
fn normal_dependency_names(package: &str) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-p",
            package,
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// The offline model (llama.cpp) is the CLI's alone: no Lambda function links it.
#[test]
fn no_lambda_function_links_the_local_model() {
    assert!(
        normal_dependency_names("baton")
            .iter()
            .any(|name| name == "llama-cpp-sys-2"),
        "the CLI links the local model (the check can see it)"
    );
    for function in [
        "baton-api-function",
        "baton-stream-function",
        "baton-step-function",
        "baton-sweeper-function",
        "baton-ingest-function",
    ] {
        let names = normal_dependency_names(function);
        assert!(
            names.iter().any(|name| name == "baton-runtime"),
            "{function}: tree read"
        );
        let linked: Vec<&String> = names
            .iter()
            .filter(|name| name.starts_with("llama") || *name == "baton-llm-local")
            .collect();
        assert!(linked.is_empty(), "{function} links {linked:?}");
    }
}
