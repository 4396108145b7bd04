//! No input crashes it: generated inputs (`proptest`, a fixed number of
//! cases per run: `BATON_FUZZ_CASES`, default 256) for the envelope, the
//! registry loader, and what a valid-looking envelope reaches behind them
//! (the legacy-key normaliser, the planner, the plan validator and the
//! contracts compiled from the registry's JSON Schemas). Every input either
//! is taken or is refused with an error naming where (a JSON path, a
//! registry file); nothing panics. The model is a test double answering by
//! the requested schema (a planned run takes its plan step only).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::Path;
use std::sync::Arc;

use baton_runtime::RuntimeError;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::StepQueue;
use baton_runtime::registry_loader::load_registry;
use baton_test_support::{SchemaShapedModel, TestServices, repository_path, repository_registry};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Map, Value, json};

fn cases() -> u32 {
    std::env::var("BATON_FUZZ_CASES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(256)
}

/// Keys an envelope, a registry document or a schema uses, so generated
/// objects reach past the first "unknown field".
const KEYS: &[&str] = &[
    "objective",
    "inputs",
    "constraints",
    "outputContract",
    "schema",
    "policies",
    "planner",
    "runtime",
    "selection",
    "require",
    "forbid",
    "prefer",
    "topology",
    "variantCount",
    "optimisation",
    "maxTokens",
    "qualityThreshold",
    "maxTurns",
    "maxCostUsd",
    "maxDurationSeconds",
    "resumeRunId",
    "preferredModels",
    "mustInclude",
    "hitlRequiredFor",
    "persona",
    "type",
    "properties",
    "required",
    "items",
    "minItems",
    "enum",
    "const",
    "$ref",
    "allOf",
    "oneOf",
    "additionalProperties",
    "capabilityId",
    "agentType",
    "inputContract",
    "outputContract",
    "kind",
    "trigger",
    "action",
    "id",
    "condition",
    "var",
    "name",
    "mode",
    "constraints",
    "expr",
    "level",
    "hints",
    "directives",
    "specialInstructions",
    "threadId",
];

fn a_key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(KEYS).prop_map(str::to_string),
        1 => "[a-zA-Z$_.\\[\\]0-9 ]{0,12}",
    ]
}

fn a_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|number| json!(number)),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |number| number.is_finite())
            .prop_map(|number| json!(number)),
        Just(json!(u64::MAX)),
        Just(json!(-0.0)),
        ".{0,24}".prop_map(Value::String),
        proptest::sample::select(
            &[
                "object",
                "array",
                "string",
                "number",
                "integer",
                "boolean",
                "null",
                "json_schema",
                "ai",
                "human",
                "onStart",
                "replan",
                "hitl",
                "final_publish",
                "#/definitions/x",
                "https://example.com/s.json",
                "{{input}}",
                "$.a[0]",
                "",
            ][..]
        )
        .prop_map(|text| Value::String(text.to_string())),
    ]
}

fn a_json() -> impl Strategy<Value = Value> {
    a_leaf().prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec((a_key(), inner), 0..6)
                .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// One change to a JSON document: a value replaced, a key removed or added
/// somewhere along a path the choices pick.
#[derive(Debug, Clone)]
enum Mutation {
    Replace(Vec<usize>, Value),
    Remove(Vec<usize>),
    Insert(Vec<usize>, String, Value),
}

fn a_mutation() -> impl Strategy<Value = Mutation> {
    let path = proptest::collection::vec(any::<usize>(), 0..5);
    prop_oneof![
        3 => (path.clone(), a_json()).prop_map(|(path, value)| Mutation::Replace(path, value)),
        1 => path.clone().prop_map(Mutation::Remove),
        2 => (path, a_key(), a_json()).prop_map(|(path, key, value)| Mutation::Insert(path, key, value)),
    ]
}

/// Follows `choices` down containers: each picks a child by index.
fn walk<'v>(value: &'v mut Value, choices: &[usize]) -> &'v mut Value {
    let Some((first, rest)) = choices.split_first() else {
        return value;
    };
    let length = match value {
        Value::Object(fields) => fields.len(),
        Value::Array(items) => items.len(),
        _ => 0,
    };
    if length == 0 {
        return value;
    }
    let index = first % length;
    let child = match value {
        Value::Object(fields) => fields.values_mut().nth(index),
        Value::Array(items) => items.get_mut(index),
        _ => None,
    };
    match child {
        Some(child) => walk(child, rest),
        None => unreachable!("the index is within the container"),
    }
}

fn apply(document: &mut Value, mutation: &Mutation) {
    match mutation {
        Mutation::Replace(path, value) => *walk(document, path) = value.clone(),
        Mutation::Remove(path) => {
            let (last, parent) = path.split_last().unwrap_or((&0, &[]));
            match walk(document, parent) {
                Value::Object(fields) if !fields.is_empty() => {
                    let key = fields.keys().nth(last % fields.len()).cloned().unwrap();
                    fields.remove(&key);
                }
                Value::Array(items) if !items.is_empty() => {
                    let index = last % items.len();
                    items.remove(index);
                }
                _ => {}
            }
        }
        Mutation::Insert(path, key, value) => match walk(document, path) {
            Value::Object(fields) => {
                fields.insert(key.clone(), value.clone());
            }
            Value::Array(items) => items.push(value.clone()),
            _ => {}
        },
    }
}

const EXAMPLES: &[&str] = &[
    "positioning-recommendation.json",
    "seed-10.0.1-stream-contract-variants.json",
    "seed-10.1-sample-envelope.json",
    "social-post-new-case.json",
];

/// Submits `envelope` and runs its plan step: taken, or refused naming a path.
async fn submit_and_plan(envelope: &Value) {
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(Arc::new(SchemaShapedModel))
        .registry(repository_registry())
        .queue(queue.clone())
        .build()
        .services;
    match services.runs.submit("t", envelope).await {
        Ok(_) => {
            let plan = queue
                .receive(1, std::time::Duration::ZERO)
                .await
                .unwrap()
                .remove(0);
            services.steps.handle(&plan.message).await.unwrap();
        }
        Err(RuntimeError::InvalidInput { path, message }) => {
            assert!(path.starts_with('$'), "{path}: {message}");
            assert!(!unquoted(&path).contains(".["), "a JSON path, not `{path}`");
            assert!(!message.is_empty());
        }
        Err(RuntimeError::TooLarge { path, .. }) => assert_eq!(path, "$"),
        Err(other) => panic!("an envelope is taken or refused naming a path, not: {other}"),
    }
}

/// `path` without its quoted keys' text (`$["a.["]` is a well-formed path
/// to the key `a.[`): what is left must read as a path.
fn unquoted(path: &str) -> String {
    let mut outside = String::new();
    let (mut quoted, mut escaped) = (false, false);
    for character in path.chars() {
        match (quoted, escaped, character) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (true, false, '"') => quoted = false,
            (true, false, _) => {}
            (false, _, '"') => quoted = true,
            (false, _, other) => outside.push(other),
        }
    }
    outside
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Copies the repository's registry into `to`, with `change` applied to
/// the document at `relative` (JSON, or its bytes replaced).
fn registry_copy_with(to: &Path, relative: &str, change: &dyn Fn(&[u8]) -> Vec<u8>) {
    let from = repository_path("registry");
    for entry in walk_files(&from) {
        let inside = entry.strip_prefix(&from).unwrap();
        let target = to.join(inside);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        let bytes = std::fs::read(&entry).unwrap();
        let bytes = if inside == Path::new(relative) {
            change(&bytes)
        } else {
            bytes
        };
        std::fs::write(target, bytes).unwrap();
    }
}

fn walk_files(directory: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(directory).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk_files(&path));
        } else {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The registry's JSON documents, relative to `registry/`.
fn registry_documents() -> Vec<String> {
    let root = repository_path("registry");
    walk_files(&root)
        .into_iter()
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "json")
        })
        .map(|path| path.strip_prefix(&root).unwrap().display().to_string())
        .filter(|path| !path.starts_with("examples") && !path.starts_with("schemas"))
        .collect()
}

proptest! {
    #![proptest_config(Config { cases: cases(), failure_persistence: None, ..Config::default() })]

    #[test]
    fn any_json_is_an_envelope_or_an_error_naming_a_path(value in a_json()) {
        if let Err(error) = baton_core::contracts::envelope::TaskEnvelope::parse_value(&value) {
            let baton_core::CoreError::InvalidEnvelope { path, .. } = &error else {
                panic!("an envelope error names a path: {error}");
            };
            prop_assert!(path.starts_with('$'), "{path}");
        }
    }

    #[test]
    fn a_mutated_example_envelope_plans_or_is_refused_naming_a_path(
        example in proptest::sample::select(EXAMPLES),
        mutations in proptest::collection::vec(a_mutation(), 1..4),
    ) {
        let mut envelope = baton_test_support::example_envelope(example);
        for mutation in &mutations {
            apply(&mut envelope, mutation);
        }
        runtime().block_on(submit_and_plan(&envelope));
    }
}

proptest! {
    // A registry copy per case: fewer cases, the same shapes.
    #![proptest_config(Config { cases: (cases() / 8).max(16), failure_persistence: None, ..Config::default() })]

    #[test]
    fn a_mutated_registry_loads_or_is_refused_naming_the_document(
        pick in any::<usize>(),
        mutations in proptest::collection::vec(a_mutation(), 1..4),
        garbage in proptest::option::weighted(0.15, proptest::collection::vec(any::<u8>(), 0..64)),
    ) {
        let documents = registry_documents();
        let relative = documents[pick % documents.len()].clone();
        let folder = tempfile::tempdir().unwrap();
        registry_copy_with(folder.path(), &relative, &|bytes: &[u8]| match &garbage {
            Some(garbage) => garbage.clone(),
            None => {
                let mut document: Value = serde_json::from_slice(bytes).unwrap();
                for mutation in &mutations {
                    apply(&mut document, mutation);
                }
                serde_json::to_vec_pretty(&document).unwrap()
            }
        });
        match load_registry(folder.path()) {
            Ok(_) => {}
            Err(RuntimeError::Registry(error)) => {
                let text = error.to_string();
                prop_assert!(!text.is_empty());
            }
            Err(RuntimeError::Io { path, .. }) => prop_assert!(!path.is_empty()),
            Err(other) => panic!("{relative}: a registry is loaded or refused naming where, not: {other}"),
        }
    }
}
