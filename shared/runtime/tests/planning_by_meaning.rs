//! The planner's candidate scoring by meaning, end to end through the
//! plan step: the shipped registry plus two messaging writers at the
//! shipped writer's cost, one for banks and one for hospitals. With no
//! embedding model the planner ranks them by words; with one, the plan
//! step fuses its vectors with the words (the search `GET /capabilities?q=`
//! uses), so an objective that shares no word with a writer's text still
//! finds it; a failing model leaves the ranking to words and the run goes
//! on. The embedding model is a test double of an embeddings endpoint
//! (each text's vector counts the words it has of two concepts); the chat
//! model is `SchemaShapedModel`, a double answering with its schema's
//! instance.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use async_trait::async_trait;
use baton_core::catalog::registry::Registry;
use baton_core::contracts::capability::CapabilityRegistration;
use baton_runtime::error::LlmError;
use baton_runtime::memory::{InMemoryMemoryStore, InMemoryRunStore};
use baton_runtime::ports::TextEmbedder;
use baton_test_support::TestServices;
use baton_test_support::schema_shaped_model::SchemaShapedModel;
use serde_json::{Value, json};

const TENANT: &str = "t";

/// The concepts the double's vectors measure, each by its words.
const CONCEPTS: [&[&str]; 2] = [
    &[
        "banks",
        "lenders",
        "payment",
        "credit",
        "unions",
        "loans",
        "mortgages",
    ],
    &["hospitals", "clinics", "care", "patients", "nurses"],
];

/// Test double for an embeddings endpoint.
struct ConceptEmbedder;

#[async_trait]
impl TextEmbedder for ConceptEmbedder {
    fn model_name(&self) -> String {
        "concept-double".into()
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
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

/// Test double for an embeddings endpoint that is down.
struct DownEmbedder;

#[async_trait]
impl TextEmbedder for DownEmbedder {
    fn model_name(&self) -> String {
        "down-double".into()
    }
    async fn embed(&self, _texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        Err(LlmError::Timeout { attempts: 3 })
    }
}

fn sector_registry() -> Arc<Registry> {
    let writer = |capability_id: &str, summary: &str| -> CapabilityRegistration {
        serde_json::from_value(json!({
            "capabilityId": capability_id,
            "agentType": "ai",
            "version": "1",
            "displayName": "Sector writer",
            "summary": summary,
            "inputContract": ["company_information", "positioning_context", "positioning_recommendation", "feedback"],
            "outputContract": ["messaging_stack", "handoff_summary"],
            "cost": {"tier": "standard", "estimatedTokens": 4000}
        }))
        .unwrap()
    };
    let writers = [
        writer(
            "writer.MessagingBanking",
            "Writes messaging for banks, lenders and payment companies.",
        ),
        writer(
            "writer.MessagingHealth",
            "Writes messaging for hospitals, clinics and care providers.",
        ),
    ];
    let (registry, left_out) =
        baton_test_support::repository_registry().with_additional_capabilities(writers.iter());
    assert!(left_out.is_empty(), "{left_out:?}");
    Arc::new(registry)
}

/// The messaging writer the run was planned with, and the plan's
/// `metadata.relevance`.
async fn planned_writer(
    embedder: Option<Arc<dyn TextEmbedder>>,
    objective: &str,
) -> (String, Value) {
    let store = Arc::new(InMemoryRunStore::new());
    let mut envelope =
        baton_test_support::plain_example_envelope("positioning-recommendation.json");
    envelope["objective"] = json!(objective);
    let state = TestServices::with_model(Arc::new(SchemaShapedModel))
        .registry(sector_registry())
        .store(store.clone())
        .memory(Arc::new(InMemoryMemoryStore::default()), embedder)
        .run_to_the_end(store.as_ref(), TENANT, &envelope)
        .await;
    let plan = state.plan.expect("the run was planned");
    let writer = plan
        .nodes
        .iter()
        .find(|node| {
            node.output_facets
                .iter()
                .any(|facet| facet == "messaging_stack")
        })
        .map(|node| node.capability_id.clone())
        .unwrap();
    (writer, plan.metadata["relevance"].clone())
}

/// Shares no word with the health writer's text ("nurses" and "patients"
/// are not in it), but means its customers.
const NURSES_OBJECTIVE: &str =
    "Position our rota app for nurses and patients and write the messaging.";

#[tokio::test(flavor = "multi_thread")]
async fn by_words_alone_an_objective_naming_no_sector_goes_to_the_shipped_writer() {
    // The objective names neither sector writer's customers; of the words
    // it shares with all three ("messaging"), the shipped writer's text
    // has most.
    let (writer, relevance) = planned_writer(None, NURSES_OBJECTIVE).await;
    assert_eq!(writer, "copywriter.Messaging", "{relevance}");
    assert_eq!(relevance["rankedBy"], json!("words"));
}

#[tokio::test(flavor = "multi_thread")]
async fn by_words_the_writer_whose_text_names_the_customers_wins() {
    let (writer, relevance) = planned_writer(
        None,
        "Position our rota app for hospitals and clinics and write the messaging.",
    )
    .await;
    assert_eq!(writer, "writer.MessagingHealth", "{relevance}");
    assert_eq!(relevance["ranks"]["writer.MessagingHealth"], json!(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn with_an_embedding_model_the_plan_step_finds_the_writer_by_meaning() {
    let (writer, relevance) =
        planned_writer(Some(Arc::new(ConceptEmbedder)), NURSES_OBJECTIVE).await;
    assert_eq!(writer, "writer.MessagingHealth", "{relevance}");
    assert_eq!(relevance["rankedBy"], json!("words_and_embeddings"));
    assert_eq!(relevance["query"], json!(NURSES_OBJECTIVE));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_embedding_model_leaves_the_ranking_to_words_and_the_run_goes_on() {
    let (writer, relevance) = planned_writer(Some(Arc::new(DownEmbedder)), NURSES_OBJECTIVE).await;
    assert_eq!(writer, "copywriter.Messaging", "{relevance}");
    assert_eq!(relevance["rankedBy"], json!("words"));
}
