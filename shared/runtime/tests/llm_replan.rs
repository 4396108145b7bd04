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

/// The turn-by-turn orchestrator's model (a test double of the endpoint):
/// each turn answers the next decision of `script` (one list per turn,
/// tried in order while the turn's answers are refused); every node gets
/// schema-shaped output.
struct OrchestratorDouble {
    script: Vec<Vec<Value>>,
    turn_requests: Mutex<Vec<Value>>,
}

#[async_trait]
impl LlmProvider for OrchestratorDouble {
    fn model_name(&self) -> String {
        "orchestrator-double".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        let answer = if request.schema_name == "orchestrator_turn" {
            let asked: Value = serde_json::from_str(&request.user_message).unwrap();
            let turn = asked["turn"].as_u64().unwrap() as usize;
            let refused = asked["refusedAnswers"].as_array().unwrap().len();
            self.turn_requests.lock().unwrap().push(asked);
            self.script[turn - 1][refused].clone()
        } else {
            scripted_llm::generate_instance(&request.output_schema, "answer")
        };
        Ok(ModelAnswer {
            content: answer.to_string(),
            usage: TokenUsage::default(),
            model: "orchestrator-double".into(),
        })
    }
}

async fn run_turn_by_turn(
    script: Vec<Vec<Value>>,
    max_turns: u32,
) -> (
    RunStatus,
    Vec<baton_core::wire::event::EventFrame>,
    Vec<Value>,
    usize,
) {
    let model = Arc::new(OrchestratorDouble {
        script,
        turn_requests: Mutex::new(Vec::new()),
    });
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(model.clone())
        .queue(queue.clone())
        .build()
        .services;
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    // The seed's reference envelope, decided turn by turn (its approval
    // gate left out: not what this is about).
    let mut envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    envelope["policies"]
        .as_object_mut()
        .unwrap()
        .remove("hitlRequiredFor");
    envelope["policies"]["planner"] = json!({"turnByTurn": {"maxTurns": max_turns}});
    let run = services.runs.submit("t", &envelope).await.unwrap();
    let status = runner.run_until_settled("t", &run.run_id).await.unwrap();
    let frames = services
        .runs
        .read_all_events_after("t", &run.run_id, 0)
        .await
        .unwrap();
    baton_test_support::assert_frames_match_schemas(&frames);
    let superseded = services
        .runs
        .superseded_plans("t", &run.run_id)
        .await
        .unwrap()
        .len();
    let requests = model.turn_requests.lock().unwrap().clone();
    (status, frames, requests, superseded)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_turn_by_turn_orchestrator_completes_the_seed_envelope_one_decision_a_plan_version() {
    let handoff = |capability: &str, note: &str| {
        json!({"action": "handoff", "to": capability, "capabilityId": capability,
               "payload": {"focus": "the real-time audit trail"}, "note": note})
    };
    let script = vec![
        vec![handoff("StrategyManager.writerBrief", "a brief first")],
        vec![
            // Too early: nothing made the copy yet, so this is refused.
            json!({"action": "final", "bundle": {"summary": "done?"}}),
            handoff("ContentGenerator.copyVariants", "now the copy"),
        ],
        vec![
            json!({"action": "final", "bundle": {"summary": "two variants written", "artifacts": ["copyVariants"]}}),
        ],
    ];
    let (status, frames, requests, superseded) = run_turn_by_turn(script, 5).await;
    let kinds: Vec<&str> = frames
        .iter()
        .map(|frame| frame.event_type.as_str())
        .collect();
    assert_eq!(status, RunStatus::Completed, "{kinds:?}");
    // Turn 1, turn 2 twice (its first answer refused), turn 3.
    let turns: Vec<u64> = requests
        .iter()
        .map(|asked| asked["turn"].as_u64().unwrap())
        .collect();
    assert_eq!(turns, [1, 2, 2, 3]);
    let refusal = &requests[2]["refusedAnswers"][0]["failures"][0];
    assert_eq!(refusal["constraintId"], "turn.final", "{refusal}");
    assert!(
        refusal["suggestion"]
            .as_str()
            .unwrap()
            .contains("copyVariants"),
        "{refusal}"
    );
    // The third turn saw what the second produced.
    assert!(
        requests[3]["progress"]["produced"]
            .get("copyVariants")
            .is_some()
    );
    // Each handoff is a plan version: the first plan, then a replan with
    // the orchestrator's trigger, its note as the rationale.
    let generated = frames
        .iter()
        .find(|frame| frame.event_type.as_str() == "plan_generated")
        .unwrap();
    let first_nodes = &generated.payload.as_ref().unwrap()["nodes"];
    assert_eq!(first_nodes.as_array().unwrap().len(), 1, "{first_nodes}");
    let updated: Vec<_> = frames
        .iter()
        .filter(|frame| frame.event_type.as_str() == "plan_updated")
        .map(|frame| frame.payload.as_ref().unwrap())
        .collect();
    assert_eq!(updated.len(), 1, "{kinds:?}");
    assert_eq!(updated[0]["trigger"]["kind"], "orchestrator_turn");
    assert_eq!(updated[0]["rationale"], "handoff: now the copy");
    assert_eq!(updated[0]["addedNodes"], json!(["turn_2"]));
    assert_eq!(updated[0]["reusedNodes"], json!(["turn_1"]));
    assert_eq!(superseded, 1, "version 1 is kept beside the run");
    // The handoff's payload reached its node, and nothing ran twice.
    let starts = frames
        .iter()
        .filter(|frame| frame.event_type.as_str() == "node_start")
        .count();
    assert_eq!(starts, 2, "{kinds:?}");
    let decided = frames
        .iter()
        .find(|frame| frame.event_type.as_str() == "log")
        .and_then(|frame| frame.message.clone())
        .unwrap();
    assert!(
        decided.contains("final at turn 3: two variants written"),
        "{decided}"
    );
    let complete = frames.last().unwrap();
    assert_eq!(complete.event_type.as_str(), "complete");
    let variants = complete.payload.as_ref().unwrap()["output"]["copyVariants"]
        .as_array()
        .unwrap()
        .len();
    assert!(variants >= 2, "{variants}");
}

#[tokio::test(flavor = "multi_thread")]
async fn past_max_turns_the_run_finishes_with_what_it_has_and_says_so() {
    let script = vec![vec![
        json!({"action": "handoff", "capabilityId": "StrategyManager.writerBrief"}),
    ]];
    let (status, frames, requests, _) = run_turn_by_turn(script, 1).await;
    assert_eq!(requests.len(), 1, "one decision allowed");
    let warned = frames.iter().any(|frame| {
        frame.event_type.as_str() == "warning"
            && frame.payload.as_ref().unwrap()["code"] == "orchestrator_turns_exhausted"
    });
    assert!(warned);
    // The copy was never made: the contract is not met, and the run says so.
    assert_eq!(status, RunStatus::Failed);
    assert!(
        frames
            .iter()
            .any(|frame| frame.event_type.as_str() == "validation_error")
    );
}
