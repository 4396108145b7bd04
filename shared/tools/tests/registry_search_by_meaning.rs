//! The registry search by meaning: `registry_search` with an embedder (the
//! OpenAI-compatible client of `baton-llm`) over the shipped registry.
//! The embeddings endpoint is a test double on a local socket: it answers
//! the provider's wire format with vectors that count words of four
//! themes (writing, reviewing, design, strategy), so "critique" lands near
//! the reviewers though no registry text contains the word. What is tested
//! is Baton's side: the request, the ranking, the registry's vectors made
//! once, and the fall-back to words when the endpoint fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use baton_core::catalog::tools::ToolDefinition;
use baton_llm::OpenAiCompatibleConfig;
use baton_llm::embeddings::OpenAiCompatibleEmbedder;
use baton_tools::{ToolCall, ToolOutcome, ToolRunner};
use serde_json::{Value, json};

const THEMES: [&[&str]; 4] = [
    &[
        "write",
        "writer",
        "writes",
        "copy",
        "copywriter",
        "draft",
        "drafts",
        "variants",
        "text",
        "content",
    ],
    &[
        "review",
        "reviewer",
        "reviews",
        "evaluates",
        "evaluate",
        "judge",
        "judges",
        "quality",
        "critique",
        "approval",
        "approves",
    ],
    &["design", "designer", "visual", "visuals", "image", "banner"],
    &["strategy", "strategist", "brief", "positioning", "plan"],
];

/// The double's embedding: how many words of each theme `text` has.
fn embedding(text: &str) -> Vec<f32> {
    let words: Vec<String> = baton_core::catalog::registry_search::words(text);
    THEMES
        .iter()
        .map(|theme| {
            words
                .iter()
                .filter(|word| theme.contains(&word.as_str()))
                .count() as f32
        })
        .collect()
}

/// Every request's number of texts.
#[derive(Default, Clone)]
struct Asked(Arc<Mutex<Vec<usize>>>);

async fn embeddings_endpoint(failing: bool) -> (String, Asked) {
    let asked = Asked::default();
    let app = Router::new()
        .route(
            "/v1/embeddings",
            post(move |State(asked): State<Asked>, axum::Json(body): axum::Json<Value>| async move {
                if failing {
                    return (StatusCode::BAD_REQUEST, axum::Json(json!({"error": {"message": "no such model"}})));
                }
                assert_eq!(body["model"], "theme-embedder");
                let texts: Vec<String> = body["input"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|text| text.as_str().unwrap().to_string())
                    .collect();
                asked.0.lock().unwrap().push(texts.len());
                let data: Vec<Value> = texts
                    .iter()
                    .enumerate()
                    .map(|(index, text)| json!({"object": "embedding", "index": index, "embedding": embedding(text)}))
                    .collect();
                (StatusCode::OK, axum::Json(json!({"object": "list", "data": data, "model": "theme-embedder"})))
            }),
        )
        .with_state(asked.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://127.0.0.1:{port}/v1"), asked)
}

fn search_tool() -> ToolDefinition {
    serde_json::from_value(json!({
        "name": "registry_search", "description": "Searches the registry.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        "executor": {"kind": "builtin", "operation": "registry_search"}
    }))
    .unwrap()
}

fn search(query: &str) -> ToolCall {
    ToolCall {
        call_id: "call_1".into(),
        arguments: json!({"query": query, "kind": "capability", "limit": 3}),
        idempotency_key: "run_1:node_1:1:call_1".into(),
    }
}

fn runner_with_embeddings(base_url: &str) -> ToolRunner {
    let mut config = OpenAiCompatibleConfig::new(base_url, "chat-model", Some("test-key".into()));
    config.max_attempts = 1;
    let embedder = OpenAiCompatibleEmbedder::new(config, "theme-embedder").unwrap();
    ToolRunner::new(
        baton_test_support::repository_registry(),
        "",
        Arc::new(|_| None),
    )
    .with_embedder(Arc::new(embedder))
}

fn found(outcome: ToolOutcome) -> Value {
    match outcome {
        ToolOutcome::Succeeded(value) => value,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_query_finds_capabilities_by_meaning_where_words_find_none() {
    let (base_url, asked) = embeddings_endpoint(false).await;
    let runner = runner_with_embeddings(&base_url);
    let by_meaning = found(
        runner
            .run(&search_tool(), &search("someone to critique it"))
            .await,
    );
    assert_eq!(by_meaning["searchedBy"], "embeddings");
    let ids: Vec<&str> = by_meaning["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|found| found["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3, "{by_meaning}");
    assert!(
        ids.iter()
            .all(|id| id.contains("Review") || id.contains("JudgePanel") || id.contains("Quality")),
        "the reviewers rank first: {ids:?}"
    );

    let by_words = found(
        ToolRunner::new(
            baton_test_support::repository_registry(),
            "",
            Arc::new(|_| None),
        )
        .run(&search_tool(), &search("someone to critique it"))
        .await,
    );
    assert_eq!(by_words["searchedBy"], "words");
    assert_eq!(by_words["total"], 0, "no registry text has these words");

    // A second search embeds only its query: the registry's vectors are kept.
    found(
        runner
            .run(&search_tool(), &search("a designer for the banner"))
            .await,
    );
    let requests = asked.0.lock().unwrap().clone();
    let entries = baton_core::catalog::registry_search::search_entries(
        &baton_test_support::repository_registry(),
    )
    .len();
    assert_eq!(requests, vec![entries, 1, 1]);
}

#[tokio::test]
async fn an_endpoint_that_refuses_leaves_the_search_to_words_and_says_why() {
    let (base_url, _) = embeddings_endpoint(true).await;
    let outcome = found(
        runner_with_embeddings(&base_url)
            .run(&search_tool(), &search("copy variants"))
            .await,
    );
    assert_eq!(outcome["searchedBy"], "words");
    assert!(outcome["total"].as_u64().unwrap() > 0);
    let why = outcome["embeddingsUnavailable"].as_str().unwrap();
    assert!(
        why.contains("theme-embedder") && why.contains("400"),
        "{why}"
    );
}
