//! The orchestrator never writes a domain artifact itself: in every
//! example's delivered output (and in a run reviewed by a judge panel),
//! each property is either what the caller supplied or exactly what a
//! specialist node (a registry capability, AI or human) produced; a
//! built-in join only gathers items specialists produced. The model is a
//! test double answering by the requested schema (judges score 9).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use baton_core::basics::ids::RunKey;
use baton_runtime::ports::RunLog;
use std::sync::Arc;

use async_trait::async_trait;
use baton_core::contracts::capability::AgentType;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{NodeStatus, RunState, RunStatus, TokenUsage};
use baton_runtime::error::LlmError;
use baton_runtime::memory::{InMemoryRunStore, InMemoryStepQueue};
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

/// Test double for the model endpoint: a schema-shaped answer per request.
struct SchemaShapedModel;

#[async_trait]
impl LlmProvider for SchemaShapedModel {
    fn model_name(&self) -> String {
        "schema-shaped".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        let mut answer = scripted_llm::generate_instance(&request.output_schema, "specialist");
        if request.schema_name == "judge_answer" {
            answer["score"] = json!(9.0);
        }
        Ok(ModelAnswer {
            content: answer.to_string(),
            usage: TokenUsage::default(),
            model: "schema-shaped".into(),
        })
    }
}

async fn run_to_the_end(envelope: &Value) -> RunState {
    let store = Arc::new(InMemoryRunStore::new());
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(Arc::new(SchemaShapedModel))
        .store(store.clone())
        .queue(queue.clone())
        .build()
        .services;
    let run = services.runs.submit("t", envelope).await.unwrap();
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    let status = runner.run_until_settled("t", &run.run_id).await.unwrap();
    let state = store
        .load_run(RunKey::new("t", &run.run_id))
        .await
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(status, RunStatus::Completed, "{:?}", state.failure);
    state
}

/// Every value some specialist node produced for `facet`.
fn specialist_values<'s>(state: &'s RunState, facet: &str) -> Vec<&'s Value> {
    let plan = state.plan.as_ref().unwrap();
    plan.nodes
        .iter()
        .filter(|node| node.agent_type() != AgentType::Builtin && node.panel().is_none())
        .filter_map(|node| {
            let record = state.nodes.get(&node.node_id)?;
            (record.status() == NodeStatus::Completed).then_some(())?;
            record.output.as_ref()?.get(facet)
        })
        .collect()
}

fn assert_every_artifact_came_from_a_specialist(name: &str, state: &RunState) {
    let output = state.output.as_ref().unwrap().as_object().unwrap();
    assert!(!output.is_empty(), "{name}: an output was delivered");
    for (property, value) in output {
        if state.envelope.inputs.get(property) == Some(value) {
            continue;
        }
        let produced = specialist_values(state, property);
        if produced.contains(&value) {
            continue;
        }
        // A built-in join: every item is an item a specialist produced.
        let items = value.as_array().unwrap_or_else(|| {
            panic!("{name}: `{property}` was written by no specialist: {value}")
        });
        for item in items {
            assert!(
                produced
                    .iter()
                    .filter_map(|value| value.as_array())
                    .any(|produced_items| produced_items.contains(item)),
                "{name}: an item of `{property}` came from no specialist: {item}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_delivered_artifact_was_produced_by_a_specialist_node() {
    for name in [
        "positioning-recommendation.json",
        "seed-10.0.1-stream-contract-variants.json",
        "seed-10.1-sample-envelope.json",
        "social-post-new-case.json",
    ] {
        let state = run_to_the_end(&baton_test_support::plain_example_envelope(name)).await;
        assert_every_artifact_came_from_a_specialist(name, &state);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panel_reviewed_run_delivers_the_specialists_draft_with_the_panels_score() {
    let mut envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    envelope["constraints"] = json!({"qualityThreshold": 0.8, "executionDepth": 2});
    envelope["policies"]["planner"] = json!({"selection": {"require": ["ReviewPanel.copyReview"]}});
    let state = run_to_the_end(&envelope).await;
    assert_every_artifact_came_from_a_specialist("panel-reviewed", &state);
    let plan = state.plan.as_ref().unwrap();
    let panel = plan
        .nodes
        .iter()
        .find(|node| node.capability_id == "ReviewPanel.copyReview")
        .expect("the required panel is planned");
    let verdict = state.nodes[&panel.node_id].output.clone().unwrap();
    let consensus = &verdict["panelVerdict"]["consensus"];
    assert_eq!(consensus["finalScore"], 9.0);
    assert_eq!(
        verdict["panelVerdict"]["individualResults"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(state.governance.drafts.len(), 1, "0.9 passes at once");
}
