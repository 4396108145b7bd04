//! A replan under the LLM planner (`PlannerChoice::Llm`, what
//! `BATON_PLANNER=llm` selects), through the real step service and queue:
//! a runtime policy asks for a replan with a rationale after the writer
//! completes; the planner model is asked again, sees the rationale, the
//! trigger and the plan in force, and drafts a different plan (a reviewer
//! added); the run completes on it. The model is a test double standing in
//! for an LLM endpoint: it drafts plans and answers nodes with
//! schema-shaped output.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use baton_core::engine::PlannerChoice;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_runtime::error::LlmError;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::services::OrchestratorSettings;
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

/// Drafts the first plan (brief → copy); asked to replan, drafts the same
/// with a reviewer after the copy. Every other request gets schema-shaped output.
#[derive(Default)]
struct PlannerDouble {
    planner_requests: Mutex<Vec<Value>>,
}

#[async_trait]
impl LlmProvider for PlannerDouble {
    fn model_name(&self) -> String {
        "planner-double".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        let answer = if request.schema_name == "plan_draft" {
            let asked: Value = serde_json::from_str(&request.user_message).unwrap();
            let replanning = asked.get("replan").is_some();
            self.planner_requests.lock().unwrap().push(asked);
            let mut nodes = vec![
                json!({"nodeId": "node_1", "capabilityId": "StrategyManager.writerBrief"}),
                json!({"nodeId": "node_2", "capabilityId": "ContentGenerator.copyVariants", "dependsOn": ["node_1"]}),
            ];
            if replanning {
                nodes.push(
                    json!({"nodeId": "review", "capabilityId": "QualityAssurance.contentReview",
                                  "dependsOn": ["node_1", "node_2"]}),
                );
            }
            json!({"nodes": nodes})
        } else {
            scripted_llm::generate_instance(&request.output_schema, "answer")
        };
        Ok(ModelAnswer {
            content: answer.to_string(),
            usage: TokenUsage::default(),
            model: "planner-double".into(),
        })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_policy_replan_is_drafted_by_the_planner_model_which_sees_the_rationale() {
    let model = Arc::new(PlannerDouble::default());
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(model.clone())
        .queue(queue.clone())
        .settings(OrchestratorSettings {
            planner: PlannerChoice::Llm,
            ..OrchestratorSettings::default()
        })
        .build()
        .services;
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    let mut envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    envelope["policies"]["runtime"] = json!([{
        "id": "second-look",
        "trigger": {"kind": "onNodeComplete", "selector": {"nodeId": "node_2"}},
        "action": {"type": "replan", "rationale": "the copy goes out unreviewed: add a reviewer"}
    }]);
    let run = services.runs.submit("t", &envelope).await.unwrap();
    let status = runner.run_until_settled("t", &run.run_id).await.unwrap();
    let frames = services
        .runs
        .read_all_events_after("t", &run.run_id, 0)
        .await
        .unwrap();
    baton_test_support::assert_frames_match_schemas(&frames);
    let kinds: Vec<&str> = frames
        .iter()
        .map(|frame| frame.event_type.as_str())
        .collect();
    assert_eq!(status, RunStatus::Completed, "{kinds:?}");
    let requests = model.planner_requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2, "the first plan, then the replan");
    let replan = &requests[1]["replan"];
    assert_eq!(replan["replacesVersion"], 1);
    assert_eq!(replan["policyId"], "second-look");
    assert_eq!(
        replan["rationale"],
        "the copy goes out unreviewed: add a reviewer"
    );
    assert_eq!(replan["trigger"]["kind"], "onNodeComplete");
    assert_eq!(replan["planInForce"][1]["status"], "completed");
    let updated = frames
        .iter()
        .find(|frame| frame.event_type.as_str() == "plan_updated")
        .expect("a second version")
        .payload
        .clone()
        .unwrap();
    assert_eq!(updated["planner"], "llm");
    assert_eq!(updated["addedNodes"], json!(["review"]));
    assert_eq!(updated["removedNodes"], json!([]));
    assert!(
        !kinds.contains(&"plan_rejected"),
        "the drafted replan was valid: {kinds:?}"
    );
    let reviewed = frames.iter().any(|frame| {
        frame.event_type.as_str() == "node_complete" && frame.node_id.as_deref() == Some("review")
    });
    assert!(reviewed, "the reviewer the replan added ran: {kinds:?}");
    // No node of the first version ran twice: their outputs were kept.
    let starts_of_node_1 = frames
        .iter()
        .filter(|frame| {
            frame.event_type.as_str() == "node_start" && frame.node_id.as_deref() == Some("node_1")
        })
        .count();
    assert_eq!(starts_of_node_1, 1);
}
