//! Memory's search fused with embeddings: `MemoryService` over the
//! in-memory store, its embedder the OpenAI-compatible client of
//! `baton-llm`. The embeddings endpoint is a test double on a local
//! socket: it answers the provider's wire format with vectors that count
//! words of three themes (tone, colour, legal), so "how should the copy
//! sound?" lands near the tone item though no word of it is in the item.
//! What is tested is Baton's side: every written item embedded once, the
//! query embedded at search, the fused ranking, and lexical search alone
//! finding nothing for that query.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use baton_llm::OpenAiCompatibleConfig;
use baton_llm::embeddings::OpenAiCompatibleEmbedder;
use baton_memory::item::Provenance;
use baton_memory::search::FoundBy;
use baton_runtime::clock::SystemClock;
use baton_runtime::memory::InMemoryMemoryStore;
use baton_runtime::services::memory::{MemoryService, MemoryWrite};
use serde_json::{Value, json};

const THEMES: [&[&str]; 3] = [
    &[
        "warm", "plain", "friendly", "sound", "voice", "tone", "shouting",
    ],
    &["navy", "white", "colour", "colours", "palette"],
    &["claim", "claims", "source", "legal", "approval"],
];

/// The double's embedding: how many words of each theme `text` has.
fn embedding(text: &str) -> Vec<f32> {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|character: char| !character.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .collect();
    THEMES
        .iter()
        .map(|theme| words.iter().filter(|word| theme.contains(word)).count() as f32)
        .collect()
}

/// Every text the endpoint was asked to embed.
#[derive(Default, Clone)]
struct Asked(Arc<Mutex<Vec<String>>>);

async fn embeddings_endpoint() -> (String, Asked) {
    let asked = Asked::default();
    let app = Router::new()
        .route(
            "/v1/embeddings",
            post(|State(asked): State<Asked>, axum::Json(body): axum::Json<Value>| async move {
                assert_eq!(body["model"], "theme-embedder");
                let texts: Vec<String> = body["input"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|text| text.as_str().unwrap().to_string())
                    .collect();
                asked.0.lock().unwrap().extend(texts.iter().cloned());
                let data: Vec<Value> = texts
                    .iter()
                    .enumerate()
                    .map(|(index, text)| json!({"object": "embedding", "index": index, "embedding": embedding(text)}))
                    .collect();
                axum::Json(json!({"object": "list", "data": data, "model": "theme-embedder"}))
            }),
        )
        .with_state(asked.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://127.0.0.1:{port}/v1"), asked)
}

fn write(key: &str, text: &str) -> MemoryWrite {
    MemoryWrite {
        namespace: vec!["client".into(), "northwind".into()],
        key: key.into(),
        value: json!(text),
        text: None,
        expires_at: None,
        provenance: Provenance::default(),
    }
}

#[tokio::test]
async fn a_query_sharing_no_word_with_an_item_finds_it_by_meaning() {
    let (base_url, asked) = embeddings_endpoint().await;
    let embedder = OpenAiCompatibleEmbedder::new(
        OpenAiCompatibleConfig::new(base_url, "unused-chat-model", None),
        "theme-embedder",
    )
    .unwrap();
    let store = Arc::new(InMemoryMemoryStore::default());
    let with_meaning = MemoryService::new(
        store.clone(),
        Some(Arc::new(embedder)),
        Arc::new(SystemClock),
        100,
    );
    for (key, text) in [
        ("voice", "Warm and plain, never shouting"),
        ("palette", "Navy and white only"),
        ("legal", "Every claim needs a source"),
    ] {
        let kept = with_meaning.put("acme", write(key, text)).await.unwrap();
        assert_eq!(kept.embedding_model.as_deref(), Some("theme-embedder"));
        assert_eq!(kept.embedding.as_ref().unwrap().len(), 3);
    }
    let namespace = vec![vec!["client".to_string(), "northwind".to_string()]];
    let query = "How should the copy sound? Friendly?";
    let found = with_meaning
        .search("acme", &namespace, query, 3)
        .await
        .unwrap();
    assert_eq!(found[0].item.key, "voice", "{found:?}");
    assert_eq!(found[0].found_by, FoundBy::Embedding);
    assert_eq!(
        asked.0.lock().unwrap().len(),
        4,
        "each item embedded once when written, the query once at search"
    );

    // The same items searched by words alone: nothing shares the query's words.
    let words_only = MemoryService::new(store, None, Arc::new(SystemClock), 100);
    let lexical = words_only
        .search("acme", &namespace, query, 3)
        .await
        .unwrap();
    assert!(lexical.is_empty(), "{lexical:?}");
}
