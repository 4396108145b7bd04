//! Architecture rules that run as tests: the core does no I/O (no async
//! runtime, AWS SDK, HTTP client/server or Lambda crate in its tree); no
//! Lambda function links the offline model; the sweeper links neither the
//! router nor a model client; only the step function links a model client;
//! production files stay under 600 lines; a run is created by one
//! admission and written by one commit protocol;
//! domain words stay in `registry/`; the repository cites only itself.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use std::path::PathBuf;
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

/// `cargo tree --offline -e normal --prefix none --format {p}` with
/// `arguments`, when it succeeds.
fn cargo_tree(arguments: &[&str]) -> Option<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .args(arguments)
        .current_dir(baton_architecture_tests::manifest_dir())
        .output()
        .unwrap();
    output
        .status
        .success()
        .then(|| String::from_utf8(output.stdout).unwrap())
}

/// The normal dependency tree of `package`: `name vX.Y.Z` per line.
fn dependency_tree(package: &str) -> String {
    cargo_tree(&["-p", package]).expect("cargo tree reads the package")
}

/// The normal dependency tree of `package`, one crate name per line.
fn normal_dependency_names(package: &str) -> Vec<String> {
    dependency_tree(package)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// The crates of `package`'s normal tree that depend on `crate_name`
/// directly (empty when it is not linked).
fn direct_dependents(package: &str, crate_name: &str) -> Vec<String> {
    // `-i` of a crate the tree does not hold fails: nothing depends on it.
    cargo_tree(&["-p", package, "-i", crate_name, "--depth", "1"])
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != crate_name)
        .map(str::to_string)
        .collect()
}

/// An HTTP client in a function that calls no model or tool is the trace
/// exporter's alone.
fn assert_http_client_only_for_traces(function: &str) {
    assert_http_client_only_for(function, &[]);
}

/// [`assert_http_client_only_for_traces`], `also` linking it too.
fn assert_http_client_only_for(function: &str, also: &[&str]) {
    let dependents = direct_dependents(function, "reqwest");
    let others: Vec<&String> = dependents
        .iter()
        .filter(|name| !name.starts_with("opentelemetry") && !also.contains(&name.as_str()))
        .collect();
    assert!(
        others.is_empty(),
        "{function}: reqwest is linked by {others:?}, not only by the OTLP exporter (and {also:?})"
    );
}

/// The offline model (llama.cpp) and the MCP stdio transport (it starts
/// server processes: `process-wrap`) are the CLI's alone: no Lambda
/// function links them.
#[test]
fn no_lambda_function_links_the_local_model_or_starts_mcp_servers() {
    let cli = normal_dependency_names("baton");
    assert!(
        cli.iter().any(|name| name == "llama-cpp-sys-2")
            && cli.iter().any(|name| name == "process-wrap"),
        "the CLI links the local model and the MCP stdio transport (the check can see them)"
    );
    for function in LAMBDA_FUNCTIONS {
        let names = normal_dependency_names(function);
        assert!(
            names.iter().any(|name| name == "baton-runtime"),
            "{function}: tree read"
        );
        let linked: Vec<&String> = names
            .iter()
            .filter(|name| {
                name.starts_with("llama") || *name == "baton-llm-local" || *name == "process-wrap"
            })
            .collect();
        assert!(linked.is_empty(), "{function} links {linked:?}");
    }
}

/// The sweeper needs a store, a queue and a clock: no HTTP router, no
/// model client in its tree (an HTTP client only for its traces).
#[test]
fn the_sweeper_links_neither_the_router_nor_a_model_client() {
    let names = normal_dependency_names("baton-sweeper-function");
    assert!(
        names.iter().any(|name| name == "baton-aws"),
        "tree read: {names:?}"
    );
    let linked: Vec<&String> = names
        .iter()
        .filter(|name| {
            [
                "axum",
                "baton-http",
                "baton-llm",
                "baton-tools",
                "lambda_http",
            ]
            .contains(&name.as_str())
        })
        .collect();
    assert!(linked.is_empty(), "the sweeper links {linked:?}");
    assert_http_client_only_for_traces("baton-sweeper-function");
}

/// Only the step function performs steps: the api, stream and ingest
/// functions link no model client (nor the tool executors, nor a stream
/// decoder); their HTTP client is the trace exporter's alone, but for the
/// identity provider's keys the api and stream functions read (through the
/// outbound guard) and the
/// api function's checks of remote agents' cards at registration, which go
/// through the outbound guard (`baton-a2a-client` without `agent-calls`).
#[test]
fn only_the_step_function_links_a_model_client() {
    for function in [
        "baton-api-function",
        "baton-stream-function",
        "baton-ingest-function",
    ] {
        let names = normal_dependency_names(function);
        assert!(
            names.iter().any(|name| name == "baton-runtime"),
            "tree read: {names:?}"
        );
        let card_checks = function == "baton-api-function";
        // The api and stream functions verify sign-in JWTs: the issuer's
        // JWKS is read through the outbound guard.
        let reads_keys = function != "baton-ingest-function";
        let linked: Vec<&String> = names
            .iter()
            .filter(|name| {
                ["baton-llm", "baton-tools", "eventsource-stream"].contains(&name.as_str())
                    || (!card_checks && name.as_str() == "baton-a2a-client")
                    || (!reads_keys && name.as_str() == "baton-outbound")
            })
            .collect();
        assert!(linked.is_empty(), "{function} links {linked:?}");
        if card_checks {
            assert!(
                names.iter().any(|name| name == "baton-a2a-client"),
                "the api function checks remote agents' cards"
            );
            assert_http_client_only_for(function, &["baton-outbound", "baton-a2a-client"]);
        } else if reads_keys {
            assert_http_client_only_for(function, &["baton-outbound"]);
        } else {
            assert_http_client_only_for_traces(function);
        }
    }
    // The check can see another dependent: the step function's model client.
    assert!(
        direct_dependents("baton-step-function", "reqwest")
            .iter()
            .any(|name| name == "baton-llm"),
        "the dependents check reads the tree"
    );
    let step = normal_dependency_names("baton-step-function");
    assert!(
        step.iter().any(|name| name == "baton-llm"),
        "the check can see a model client"
    );
}

/// The packages deployed as Lambda functions.
const LAMBDA_FUNCTIONS: [&str; 5] = [
    "baton-api-function",
    "baton-stream-function",
    "baton-step-function",
    "baton-sweeper-function",
    "baton-ingest-function",
];

fn repository_root() -> PathBuf {
    baton_architecture_tests::manifest_dir().join("../..")
}

/// Production Rust sources: `src/` of every shared crate and function
/// (test-support crates under `tests/` and `tests.rs` modules excluded),
/// with their text up to the first `#[cfg(test)]` (unit tests come last).
fn production_sources() -> Vec<(PathBuf, String)> {
    let mut sources = Vec::new();
    for group in ["shared", "functions"] {
        let mut stack = vec![repository_root().join(group)];
        while let Some(directory) = stack.pop() {
            for entry in std::fs::read_dir(&directory).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                if path.is_dir() {
                    if !["tests", "benches", "target"].contains(&name.as_str()) {
                        stack.push(path);
                    }
                } else if name.ends_with(".rs")
                    && name != "tests.rs"
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
        }
    }
    assert!(sources.len() > 50, "sources found: {}", sources.len());
    sources
}

/// House rule 8: files stay small enough to read, and no function takes so
/// many arguments that clippy must be silenced.
#[test]
fn production_files_stay_under_600_lines_and_nothing_silences_too_many_arguments() {
    let mut offenders = Vec::new();
    for group in ["shared", "functions"] {
        let mut stack = vec![repository_root().join(group)];
        while let Some(directory) = stack.pop() {
            for entry in std::fs::read_dir(&directory).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                if path.is_dir() {
                    stack.push(path);
                } else if name.ends_with(".rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    if text.contains(&["clippy::too_many", "arguments"].join("_")) {
                        offenders.push(format!("{}: silences too_many_arguments", path.display()));
                    }
                }
            }
        }
    }
    for (path, _) in production_sources() {
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        if lines > 600 {
            offenders.push(format!("{}: {lines} lines", path.display()));
        }
    }
    assert!(offenders.is_empty(), "{offenders:#?}");
}

/// A run comes to exist only through the one admission
/// (`services/admission.rs`) and is written afterwards only through the one
/// commit protocol (`services/commit.rs`). The port's decorators (fault
/// injection, telemetry) pass calls on, the port's own `create_run` is
/// `create_run_within` without a limit, and the store conformance suite
/// drives the port itself: they are its callers by design.
/// A run's status, and a node's, is written only by the engine's life
/// cycle (`shared/core/src/engine/lifecycle.rs`: named transitions, each
/// checked against the status it leaves). Both fields are private to
/// `state/run.rs`, so the compiler refuses a write anywhere else; what is
/// left to check is who calls the crate-wide setters (`run.rs` defines
/// them, and admission's `RunState::queued` sets the first status there),
/// and that the fixtures' setter (feature `test-fixtures`) has no
/// production caller.
#[test]
fn a_runs_status_is_written_only_by_the_life_cycle() {
    let home = "shared/core/src/engine/lifecycle.rs";
    let definition = "shared/core/src/state/run.rs";
    let mut seen = 0;
    let mut offenders = Vec::new();
    for (path, text) in production_sources() {
        let shown = path.display().to_string();
        if shown.ends_with(definition) {
            continue;
        }
        let fixtures = text.matches(".set_status_for_fixtures(").count();
        if fixtures > 0 {
            offenders.push(format!(
                "{shown}: sets a status as a test fixture ({fixtures}x) in production code"
            ));
        }
        let writes = text.matches(".set_status_by_life_cycle(").count();
        if writes == 0 {
            continue;
        }
        if shown.ends_with(home) {
            seen += writes;
        } else {
            offenders.push(format!(
                "{shown}: writes a run's or a node's status ({writes}x); only {home} may"
            ));
        }
    }
    assert!(seen >= 3, "the life cycle's own writes were found ({seen})");
    assert!(offenders.is_empty(), "{offenders:#?}");
}

#[test]
fn a_run_is_created_only_by_admission_and_written_only_by_the_commit_protocol() {
    let decorators_and_suite = ["fault_injection.rs", "telemetry.rs"];
    let mut seen = [0usize; 2];
    let mut offenders = Vec::new();
    for (path, text) in production_sources() {
        let shown = path.display().to_string();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let the_port_itself = shown.ends_with("runtime/src/ports/mod.rs");
        if decorators_and_suite.contains(&name.as_str())
            || the_port_itself
            || shown.contains("/conformance")
        {
            continue;
        }
        for (index, (call, home)) in [
            // `create_run(` and `create_run_within(` alike.
            (".create_run", "services/admission.rs"),
            (".commit_step(", "services/commit.rs"),
        ]
        .into_iter()
        .enumerate()
        {
            let calls = text.matches(call).count();
            if calls == 0 {
                continue;
            }
            if shown.ends_with(home) {
                seen[index] += calls;
            } else {
                offenders.push(format!("{shown}: calls {call} ({calls}x); only {home} may"));
            }
        }
    }
    assert_eq!(
        seen,
        [1, 1],
        "the one admission and the one commit were found"
    );
    assert!(offenders.is_empty(), "{offenders:#?}");
}

/// Words of the examples' domain: the agents that own capabilities (the id
/// before the first `.`), and the brands and platforms the example
/// envelopes name.
fn domain_words() -> Vec<String> {
    let mut words = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(repository_root().join("registry/capabilities")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let capability: serde_json::Value = serde_json::from_str(&text).unwrap();
        let id = capability["capabilityId"].as_str().unwrap();
        words.insert(id.split('.').next().unwrap().to_string());
    }
    fn collect(value: &serde_json::Value, words: &mut std::collections::BTreeSet<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, inner) in map {
                    let named = ["name", "companyName", "brand", "channel", "platform"]
                        .contains(&key.as_str());
                    if named && let Some(text) = inner.as_str() {
                        // One word ("linkedin") is a name; in several, the
                        // capitalised ones are ("Acme Analytics", not "professional network").
                        let parts: Vec<&str> = text.split_whitespace().collect();
                        for word in &parts {
                            let capitalised = word.chars().next().is_some_and(char::is_uppercase);
                            if word.len() > 3 && (parts.len() == 1 || capitalised) {
                                words.insert(word.to_string());
                            }
                        }
                    }
                    collect(inner, words);
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|item| collect(item, words)),
            _ => {}
        }
    }
    for entry in std::fs::read_dir(repository_root().join("registry/examples")).unwrap() {
        let path = entry.unwrap().path();
        // The envelopes; evaluation datasets live in a folder beside them.
        if path.extension().and_then(|extension| extension.to_str()) != Some("json") {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        collect(&serde_json::from_str(&text).unwrap(), &mut words);
    }
    words.into_iter().collect()
}

fn contains_word(text: &str, word: &str) -> bool {
    let text = text.to_lowercase();
    let word = word.to_lowercase();
    text.match_indices(&word).any(|(start, _)| {
        let before = text[..start].chars().next_back();
        let after = text[start + word.len()..].chars().next();
        let is_word_char = |character: Option<char>| {
            character.is_some_and(|character| character.is_alphanumeric() || character == '_')
        };
        !is_word_char(before) && !is_word_char(after)
    })
}

/// House rule 6: domain words live in `registry/`, never in Rust code.
#[test]
fn no_domain_word_appears_in_production_rust_sources() {
    let words = domain_words();
    assert!(words.len() >= 5, "domain words found: {words:?}");
    let mut offenders = Vec::new();
    for (path, text) in production_sources() {
        for word in &words {
            if contains_word(&text, word) {
                offenders.push(format!("{}: {word}", path.display()));
            }
        }
    }
    assert!(offenders.is_empty(), "{offenders:#?}");
}

/// The repository stands alone: no file cites the design brief or the
/// specifications it was built from, which a clone does not have.
#[test]
fn the_repository_cites_only_its_own_files() {
    let design_brief = ["DESIGN", ".md"].concat();
    let specification = ["seed", " 00"].concat();
    let mut offenders = Vec::new();
    let mut stack = vec![
        repository_root().join("README.md"),
        repository_root().join("docs"),
        repository_root().join("shared"),
        repository_root().join("functions"),
        repository_root().join("events"),
        repository_root().join("infra"),
    ];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            for (number, line) in text.lines().enumerate() {
                if line.contains(&design_brief) || line.to_lowercase().contains(&specification) {
                    offenders.push(format!("{}:{}", path.display(), number + 1));
                }
            }
        }
    }
    assert!(
        repository_root().join("docs/architecture.md").is_file(),
        "docs/architecture.md exists"
    );
    assert!(offenders.is_empty(), "{offenders:#?}");
}

/// One HTTP/TLS stack in every function: hyper 1 with rustls 0.23, not
/// the AWS SDK's legacy hyper 0.14 + rustls 0.21 + ring beside it.
#[test]
fn every_function_links_one_http_and_tls_stack() {
    for function in LAMBDA_FUNCTIONS {
        let text = dependency_tree(function);
        let versions = |name: &str| {
            let mut found: Vec<String> = text
                .lines()
                .filter_map(|line| {
                    let mut parts = line.split_whitespace();
                    (parts.next() == Some(name)).then(|| parts.next().unwrap_or("").to_string())
                })
                .collect();
            found.sort();
            found.dedup();
            found
        };
        assert!(!versions("hyper").is_empty(), "{function}: tree read");
        for name in ["hyper", "rustls", "h2", "hyper-rustls"] {
            assert!(
                versions(name).len() <= 1,
                "{function} links {name} {:?}",
                versions(name)
            );
        }
        assert!(
            versions("ring").is_empty(),
            "{function} links ring beside aws-lc-rs"
        );
    }
}

/// A step's working set (`engine/step_context.rs`) shows no field: the
/// engine's files go through its methods (`state`, `state_mut`, `emit`,
/// `enqueue`, `send`, `put_entry`, the life-cycle calls), so what a step
/// produces is added in one way.
#[test]
fn a_steps_working_set_has_no_public_field() {
    let path = repository_root().join("shared/core/src/engine/step_context.rs");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text
        .find("pub(crate) struct StepContext")
        .expect("StepContext is defined in step_context.rs");
    let body = &text[start..start + text[start..].find("\n}").unwrap()];
    let public: Vec<&str> = body
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|line| line.starts_with("pub"))
        .collect();
    assert!(body.lines().count() > 5, "the struct's fields were read");
    assert!(
        public.is_empty(),
        "public fields of StepContext: {public:?}"
    );
}

/// The error type of every `Result<T, E>` written in `text`, as written
/// (generics inside `T` and `E` are kept whole).
fn result_error_types(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("Result<") {
        let inside = &rest[start + "Result<".len()..];
        let (mut depth, mut last_comma, mut end) = (0usize, None, None);
        for (index, character) in inside.char_indices() {
            match character {
                '<' | '(' | '[' => depth += 1,
                '>' | ')' | ']' if depth == 0 => {
                    end = Some(index);
                    break;
                }
                '>' | ')' | ']' => depth -= 1,
                ',' if depth == 0 => last_comma = Some(index),
                _ => {}
            }
        }
        if let (Some(comma), Some(end)) = (last_comma, end) {
            let error = inside[comma + 1..end].trim().trim_end_matches(',').trim();
            found.push(error.to_string());
        }
        rest = &inside[end.unwrap_or(0)..];
    }
    found
}

/// Ports and helpers say what went wrong in a type, not in a bare string:
/// no production signature is a `Result<_, String>`.
#[test]
fn no_production_result_carries_a_bare_string_error() {
    assert_eq!(
        result_error_types(
            "fn f() -> Result<Vec<(String, u8)>, String> { Result<(), Error<A, B>> }"
        ),
        ["String", "Error<A, B>"],
        "the scanner reads nested generics"
    );
    let offenders: Vec<String> = production_sources()
        .iter()
        .flat_map(|(path, text)| {
            result_error_types(text)
                .into_iter()
                .filter(|error| error == "String")
                .map(move |_| path.display().to_string())
        })
        .collect();
    assert!(offenders.is_empty(), "Result<_, String> in {offenders:#?}");
}
