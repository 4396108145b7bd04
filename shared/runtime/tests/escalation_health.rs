//! An escalation ranks the next capability by what the tenant's earlier
//! runs saw of each (success rate, latency, price), not only by the
//! planner's fixed order: the step service records every committed node
//! outcome and hands the engine the tenant's table.
//!
//! Three writers make `draft`: `write.first` (cheapest, so planned first),
//! then `write.plain` and `write.quick`, level in the planner's order (the
//! id breaks the tie for `write.plain`). The model is a test double that
//! fails, as a provider answering 503 after its retries, for the writers it
//! is told to; every other answer is an instance of its output schema. The
//! engine, the step service, the in-memory store and queue are the real
//! ones.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use baton_core::catalog::registry::Registry;
use baton_core::contracts::capability::CapabilityRegistration;
use baton_core::contracts::facet::{Facet, FacetDirection};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_runtime::error::LlmError;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_test_support::TestServices;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc::UnboundedSender;

/// Test double for the model endpoint: fails for the writers named in
/// `failing` (by schema name prefix), answers every other request.
#[derive(Default)]
struct FailsFor {
    failing: Mutex<Vec<&'static str>>,
    asked: Mutex<Vec<String>>,
}

#[async_trait]
impl LlmProvider for FailsFor {
    fn model_name(&self) -> String {
        "schema-shaped".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        self.asked.lock().unwrap().push(request.schema_name.clone());
        let fails = self
            .failing
            .lock()
            .unwrap()
            .iter()
            .any(|prefix| request.schema_name.starts_with(prefix));
        if fails {
            return Err(LlmError::ServerError {
                status: 503,
                attempts: 3,
                body: "overloaded".into(),
            });
        }
        Ok(ModelAnswer {
            content: scripted_llm::generate_instance(&request.output_schema, "answer").to_string(),
            usage: TokenUsage::default(),
            model: "schema-shaped".into(),
        })
    }
}

fn writers_registry() -> Arc<Registry> {
    let mut registry = Registry::default();
    let text =
        json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}});
    for name in ["notes", "draft"] {
        let facet = Facet {
            name: name.into(),
            title: name.into(),
            description: name.into(),
            schema: text.clone(),
            semantics: String::new(),
            direction: FacetDirection::Bidirectional,
            required_by_default: true,
            drives_revisions: false,
            merge: Default::default(),
            widget: None,
            metadata: Map::new(),
        };
        registry.add_facet(facet, "writers").unwrap();
    }
    for (id, tier) in [
        ("write.first", "low"),
        ("write.plain", "standard"),
        ("write.quick", "standard"),
    ] {
        let registration: CapabilityRegistration = serde_json::from_value(json!({
            "capabilityId": id, "agentType": "ai", "version": "1", "displayName": id,
            "summary": id, "inputContract": ["notes"], "outputContract": ["draft"],
            "cost": {"tier": tier}
        }))
        .unwrap();
        registry.add_capability(registration, "writers").unwrap();
    }
    Arc::new(registry)
}

fn envelope() -> Value {
    json!({
        "objective": "write the draft",
        "inputs": {"notes": {"text": "the notes"}},
        "policies": {"fallbackCapability": "none"},
        "outputContract": {"schema": {"type": "object", "required": ["draft"],
            "properties": {"draft": {"type": "object"}}}}
    })
}

/// The `plan_updated` payloads of a run, in order.
async fn plan_updates(services: &baton_runtime::services::Services, run_id: &str) -> Vec<Value> {
    services
        .runs
        .read_all_events_after("t", run_id, 0)
        .await
        .unwrap()
        .iter()
        .filter(|frame| frame.event_type.as_str() == "plan_updated")
        .map(|frame| frame.payload_value().unwrap())
        .collect()
}

fn ranked_ids(update: &Value) -> Vec<String> {
    update["escalationRanking"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["capabilityId"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_runs_escalation_skips_the_capability_the_first_saw_fail() {
    let model = Arc::new(FailsFor::default());
    *model.failing.lock().unwrap() = vec!["write_first", "write_plain"];
    let (services, runner) = TestServices::with_model(model.clone())
        .registry(writers_registry())
        .build_with_local_runner();

    // Run 1: write.first fails; with no history the planner's order hands
    // the draft to write.plain, which fails too; write.quick makes it.
    let first = services.runs.submit("t", &envelope()).await.unwrap();
    let status = runner.run_until_settled("t", &first.run_id).await.unwrap();
    assert_eq!(status, RunStatus::Completed, "asked: {:?}", model.asked);
    let updates = plan_updates(&services, &first.run_id).await;
    assert_eq!(updates.len(), 2, "{updates:#?}");
    assert_eq!(ranked_ids(&updates[0]), ["write.plain", "write.quick"]);
    assert_eq!(
        updates[0]["escalationRanking"][0]["calls"], 0,
        "no history yet"
    );
    assert_eq!(ranked_ids(&updates[1]), ["write.quick"]);

    // Run 2: only write.first fails. The tenant's table now says
    // write.plain failed and write.quick answered: write.quick is next.
    *model.failing.lock().unwrap() = vec!["write_first"];
    let asked_before = model.asked.lock().unwrap().len();
    let second = services.runs.submit("t", &envelope()).await.unwrap();
    let status = runner.run_until_settled("t", &second.run_id).await.unwrap();
    assert_eq!(status, RunStatus::Completed);
    let updates = plan_updates(&services, &second.run_id).await;
    assert_eq!(updates.len(), 1, "one escalation: {updates:#?}");
    let ranking = &updates[0]["escalationRanking"];
    assert_eq!(
        ranked_ids(&updates[0]),
        ["write.quick", "write.plain"],
        "{ranking}"
    );
    assert_eq!(ranking[0]["calls"], 1);
    assert_eq!(ranking[0]["successRate"], 2.0 / 3.0);
    assert_eq!(ranking[1]["calls"], 1);
    assert_eq!(ranking[1]["successRate"], 1.0 / 3.0);
    let asked_in_second: Vec<String> = model.asked.lock().unwrap()[asked_before..].to_vec();
    assert!(
        !asked_in_second
            .iter()
            .any(|name| name.starts_with("write_plain")),
        "write.plain is not called in the second run: {asked_in_second:?}"
    );

    // Another tenant's runs know nothing of t's: the planner's order again.
    let other = services.runs.submit("u", &envelope()).await.unwrap();
    runner.run_until_settled("u", &other.run_id).await.unwrap();
    let frames = services
        .runs
        .read_all_events_after("u", &other.run_id, 0)
        .await
        .unwrap();
    let update = frames
        .iter()
        .find(|frame| frame.event_type.as_str() == "plan_updated")
        .unwrap()
        .payload_value()
        .unwrap();
    assert_eq!(ranked_ids(&update), ["write.plain", "write.quick"]);
    assert_eq!(update["escalationRanking"][0]["calls"], 0);
}
