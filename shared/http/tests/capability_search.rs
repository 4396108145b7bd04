//! The registry search by meaning, `GET /api/v1/flex/capabilities?q=`,
//! through the router with `oneshot` (no socket), on the shipped registry:
//! by words offline (BM25, memory's search), fused with embeddings when
//! the deployment has an embedding model, and bad parameters refused
//! naming themselves. The embedding model is a test double of an
//! embeddings endpoint: it maps a text to how much it speaks of a few
//! concepts, each named by several words, so a query and a capability can
//! be near in meaning without sharing a word.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use baton_http::{HttpSettings, TokenAuthenticator};
use baton_runtime::error::LlmError;
use baton_runtime::ports::TextEmbedder;
use serde_json::Value;
use tower::ServiceExt;

/// The concepts the double's vectors measure, each by its words.
const CONCEPTS: [&[&str]; 3] = [
    &[
        "approves", "approve", "sign", "off", "final", "review", "signoff",
    ],
    &[
        "visual", "visuals", "image", "picture", "design", "designer",
    ],
    &["positioning", "market", "competitors", "differentiation"],
];

/// Test double for an embeddings endpoint; counts the texts it embedded.
#[derive(Default)]
struct ConceptEmbedder {
    embedded: AtomicUsize,
}

#[async_trait]
impl TextEmbedder for ConceptEmbedder {
    fn model_name(&self) -> String {
        "concept-double".into()
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        self.embedded.fetch_add(texts.len(), Ordering::Relaxed);
        Ok(texts
            .iter()
            .map(|text| {
                let words: Vec<String> = text
                    .split(|character: char| !character.is_alphanumeric())
                    .map(str::to_lowercase)
                    .collect();
                CONCEPTS
                    .iter()
                    .map(|concept| {
                        words
                            .iter()
                            .filter(|word| concept.contains(&word.as_str()))
                            .count() as f32
                    })
                    .collect()
            })
            .collect())
    }
}

fn api(embedder: Option<Arc<dyn TextEmbedder>>) -> axum::Router {
    support::api_embedding_with(
        TokenAuthenticator::from_configuration("")
            .unwrap()
            .allowing_anonymous_when_unconfigured("local"),
        HttpSettings::default(),
        embedder,
    )
}

async fn get(app: &axum::Router, query: &str) -> (StatusCode, Value) {
    let response = app
        .clone()
        .oneshot(
            Request::get(format!("/api/v1/flex/capabilities{query}"))
                .header("host", "127.0.0.1:8080")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 22)
        .await
        .unwrap();
    (status, serde_json::from_slice(&bytes).unwrap())
}

fn ids(listed: &Value) -> Vec<String> {
    listed["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|capability| capability["capabilityId"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn words_find_the_capabilities_that_share_them_best_first() {
    let app = api(None);
    let (status, every) = get(&app, "").await;
    assert_eq!(status, StatusCode::OK);
    assert!(ids(&every).len() >= 11);
    assert!(every["capabilities"][0].get("found").is_none());

    let (status, found) = get(&app, "?q=positioning%20recommendation").await;
    assert_eq!(status, StatusCode::OK, "{found}");
    let found_ids = ids(&found);
    assert!(!found_ids.is_empty() && found_ids.len() < ids(&every).len());
    assert!(
        found_ids[0].contains("Positioning"),
        "the capability named for it first: {found_ids:?}"
    );
    let scores: Vec<f64> = found["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|capability| {
            assert_eq!(capability["found"]["foundBy"], "lexical");
            capability["found"]["score"].as_f64().unwrap()
        })
        .collect();
    assert!(
        scores.windows(2).all(|pair| pair[0] >= pair[1]),
        "{scores:?}"
    );
    let (_, one) = get(&app, "?q=positioning%20recommendation&limit=1").await;
    assert_eq!(ids(&one), found_ids[..1]);
    // Words no capability has: nothing.
    let (_, none) = get(&app, "?q=zzzz%20qqqq").await;
    assert_eq!(ids(&none), Vec::<String>::new());
}

#[tokio::test]
async fn an_embedding_model_finds_by_meaning_what_no_word_shares() {
    let embedder = Arc::new(ConceptEmbedder::default());
    let app = api(Some(embedder.clone()));
    // "sign off" shares no word with the director's review ("Approves final
    // post…"), only meaning.
    let lexical = get(&api(None), "?q=sign%20off").await.1;
    assert!(
        !ids(&lexical).contains(&"director.SocialPostingReview".to_string()),
        "{lexical}"
    );
    let (status, found) = get(&app, "?q=sign%20off").await;
    assert_eq!(status, StatusCode::OK, "{found}");
    let found_ids = ids(&found);
    assert!(
        found_ids.contains(&"director.SocialPostingReview".to_string()),
        "{found_ids:?}"
    );
    let director = found["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|capability| capability["capabilityId"] == "director.SocialPostingReview")
        .unwrap();
    assert_eq!(director["found"]["foundBy"], "embedding");
    // A word and a meaning both: fused, found both ways, first.
    let (_, both) = get(&app, "?q=visual%20design").await;
    assert_eq!(
        both["capabilities"][0]["capabilityId"],
        "designer.VisualDesign"
    );
    assert_eq!(both["capabilities"][0]["found"]["foundBy"], "both");
    // The capabilities' vectors are made once per text: a second search
    // embeds its query alone.
    let before = embedder.embedded.load(Ordering::Relaxed);
    get(&app, "?q=market").await;
    assert_eq!(embedder.embedded.load(Ordering::Relaxed), before + 1);
}

#[tokio::test]
async fn a_bad_search_parameter_is_refused_naming_it() {
    let app = api(None);
    for (query, parameter) in [
        ("?q=%20%20", "q"),
        ("?q=tone&limit=0", "limit"),
        ("?q=tone&limit=101", "limit"),
        ("?limit=5", "limit"),
        ("?query=tone", "query"),
    ] {
        let (status, body) = get(&app, query).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(body["error"]["details"]["parameter"], parameter, "{query}");
    }
}
