//! Forks: a finished five-node run forked at its plan version with a
//! corrected output for its third node. Only the two nodes downstream of
//! the correction call the model (counted at the model double); the first
//! three are reused; the original run is unchanged; a correction that breaks
//! the node's contract, or names a node that had not completed, is refused
//! with its path and writes nothing; a run replanned to a second version,
//! forked at its first version and at a frame of it, reusing what held
//! there (read off the event log). The model is a test double (schema-shaped
//! answers, each request's schema recorded); everything else is real.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use baton_core::engine::{ForkChanges, ForkPoint};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::RunStatus;
use baton_runtime::error::{LlmError, RuntimeError};
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::workers::LocalRunner;
use baton_test_support::five_stages::{five_stage_envelope, five_stage_registry};
use baton_test_support::{SchemaShapedModel, TestServices};
use serde_json::json;
use tokio::sync::mpsc::UnboundedSender;

/// Test double for the model endpoint: schema-shaped answers, each
/// request's schema name recorded.
#[derive(Default)]
struct CountingModel {
    asked: Mutex<Vec<String>>,
}

#[async_trait]
impl LlmProvider for CountingModel {
    fn model_name(&self) -> String {
        "counting".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        self.asked.lock().unwrap().push(request.schema_name.clone());
        SchemaShapedModel.complete(request, deltas).await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fork_with_a_corrected_output_calls_the_model_only_downstream_of_it() {
    let model = Arc::new(CountingModel::default());
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(model.clone())
        .registry(Arc::new(five_stage_registry(&|role| {
            format!("Act as the {role}.")
        })))
        .queue(queue.clone())
        .build()
        .services;
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    let source = services
        .runs
        .submit("t", &five_stage_envelope())
        .await
        .unwrap();
    let status = runner.run_until_settled("t", &source.run_id).await.unwrap();
    assert_eq!(status, RunStatus::Completed);
    assert_eq!(model.asked.lock().unwrap().len(), 5);
    let before = services
        .runs
        .load("t", &source.run_id)
        .await
        .unwrap()
        .unwrap();
    let before_frames = services
        .runs
        .read_all_events_after("t", &source.run_id, 0)
        .await
        .unwrap();
    let plan = before.state.plan.clone().unwrap();
    let order: Vec<String> = plan.nodes.iter().map(|node| node.node_id.clone()).collect();
    let third = &order[2];

    let history = services.runs.history("t", &source.run_id).await.unwrap();
    assert_eq!(
        history.iter().filter(|point| point.kind == "plan").count(),
        1
    );
    assert_eq!(
        history.iter().filter(|point| point.kind == "node").count(),
        5
    );

    // Refused, nothing written: a correction breaking the contract, and a
    // node that is no plan's.
    let runs_before = model.asked.lock().unwrap().len();
    let broken = ForkChanges {
        node_outputs: BTreeMap::from([(
            third.clone(),
            json!({"review_one": {"text": "", "score": 0.5}}),
        )]),
        ..ForkChanges::default()
    };
    match services
        .runs
        .fork("t", &source.run_id, ForkPoint::PlanVersion(1), &broken)
        .await
    {
        Err(RuntimeError::InvalidInput { path, .. }) => {
            assert_eq!(path, format!("$.nodeOutputs.{third}.review_one.text"))
        }
        other => panic!("a correction breaking the contract is refused: {other:?}"),
    }
    let unknown = ForkChanges {
        node_outputs: BTreeMap::from([("node_99".to_string(), json!({}))]),
        ..ForkChanges::default()
    };
    match services
        .runs
        .fork("t", &source.run_id, ForkPoint::PlanVersion(1), &unknown)
        .await
    {
        Err(RuntimeError::InvalidInput { path, .. }) => assert_eq!(path, "$.nodeOutputs.node_99"),
        other => panic!("an unknown node is refused: {other:?}"),
    }
    match services
        .runs
        .fork(
            "t",
            &source.run_id,
            ForkPoint::PlanVersion(7),
            &ForkChanges::default(),
        )
        .await
    {
        Err(RuntimeError::InvalidInput { path, .. }) => assert_eq!(path, "$.at.planVersion"),
        other => panic!("a plan version the run does not hold is refused: {other:?}"),
    }

    let corrected = json!({"review_one": {"text": "Corrected by a person.", "score": 0.9}});
    let changes = ForkChanges {
        node_outputs: BTreeMap::from([(third.clone(), corrected.clone())]),
        ..ForkChanges::default()
    };
    let fork = services
        .runs
        .fork("t", &source.run_id, ForkPoint::PlanVersion(1), &changes)
        .await
        .unwrap();
    assert_ne!(fork.run_id, source.run_id);
    let status = runner.run_until_settled("t", &fork.run_id).await.unwrap();
    assert_eq!(status, RunStatus::Completed);
    let asked = model.asked.lock().unwrap().clone();
    assert_eq!(
        asked[runs_before..],
        ["bench_writer_revision", "bench_qa_final"],
        "only the two nodes after the corrected one called the model"
    );
    let forked = services
        .runs
        .load("t", &fork.run_id)
        .await
        .unwrap()
        .unwrap()
        .state;
    let origin = forked.forked_from.clone().unwrap();
    assert_eq!(origin.run_id, source.run_id);
    assert_eq!(origin.reused_nodes, order[..3].to_vec());
    assert_eq!(*forked.nodes[third].output.clone().unwrap(), corrected);
    let frames = services
        .runs
        .read_all_events_after("t", &fork.run_id, 0)
        .await
        .unwrap();
    baton_test_support::assert_frames_match_schemas(&frames);
    assert_eq!(frames.last().unwrap().event_type.as_str(), "complete");
    let started: Vec<&str> = frames
        .iter()
        .filter(|frame| frame.event_type.as_str() == "node_start")
        .filter_map(|frame| frame.node_id.as_deref())
        .collect();
    assert_eq!(started, [order[3].as_str(), order[4].as_str()]);
    let completed: Vec<(&str, bool)> = frames
        .iter()
        .filter(|frame| frame.event_type.as_str() == "node_complete")
        .map(|frame| {
            (
                frame.node_id.as_deref().unwrap(),
                frame.payload.as_ref().unwrap()["reused"] == true,
            )
        })
        .collect();
    assert_eq!(
        completed,
        [
            (order[0].as_str(), true),
            (order[1].as_str(), true),
            (order[2].as_str(), true),
            (order[3].as_str(), false),
            (order[4].as_str(), false)
        ],
        "the reused outputs are in the stream, marked"
    );
    let third_frame = frames
        .iter()
        .find(|frame| frame.node_id.as_deref() == Some(third.as_str()))
        .unwrap();
    assert_eq!(third_frame.payload.as_ref().unwrap()["output"], corrected);

    // The original run is as it was.
    let after = services
        .runs
        .load("t", &source.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after.version, before.version);
    assert_eq!(
        serde_json::to_value(&after.state).unwrap(),
        serde_json::to_value(&before.state).unwrap()
    );
    let after_frames = services
        .runs
        .read_all_events_after("t", &source.run_id, 0)
        .await
        .unwrap();
    assert_eq!(after_frames.len(), before_frames.len());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_replanned_can_be_forked_at_its_first_plan_version_or_at_a_frame_of_it() {
    let model = Arc::new(CountingModel::default());
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(model.clone())
        .registry(Arc::new(five_stage_registry(&|role| {
            format!("Act as the {role}.")
        })))
        .queue(queue.clone())
        .build()
        .services;
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    // The third node's completion asks for a second plan version; the
    // deterministic planner makes it, reusing what was done.
    let mut envelope = five_stage_envelope();
    envelope["policies"] = json!({"runtime": [{
        "id": "second-version",
        "trigger": {"kind": "onNodeComplete", "selector": {"nodeId": "node_3"}},
        "action": {"type": "replan", "rationale": "look again"}
    }]});
    let source = services.runs.submit("t", &envelope).await.unwrap();
    let status = runner.run_until_settled("t", &source.run_id).await.unwrap();
    assert_eq!(status, RunStatus::Completed);
    let state = services
        .runs
        .load("t", &source.run_id)
        .await
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(state.plan.as_ref().unwrap().plan_version, 2);
    let frames = services
        .runs
        .read_all_events_after("t", &source.run_id, 0)
        .await
        .unwrap();
    let completion = |node: &str| {
        frames
            .iter()
            .find(|frame| {
                frame.event_type.as_str() == "node_complete"
                    && frame.node_id.as_deref() == Some(node)
            })
            .unwrap()
            .clone()
    };
    assert_eq!(completion("node_3").plan_version, 1);

    // At version 1: what it had completed (the first three nodes) is
    // reused, from the event log; the rest runs again.
    let asked_before = model.asked.lock().unwrap().len();
    let fork = services
        .runs
        .fork(
            "t",
            &source.run_id,
            ForkPoint::PlanVersion(1),
            &ForkChanges::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        runner.run_until_settled("t", &fork.run_id).await.unwrap(),
        RunStatus::Completed
    );
    let forked = services
        .runs
        .load("t", &fork.run_id)
        .await
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(forked.plan.as_ref().unwrap().plan_version, 1);
    let origin = forked.forked_from.clone().unwrap();
    assert_eq!(origin.reused_nodes, ["node_1", "node_2", "node_3"]);
    assert_eq!(
        forked.nodes["node_2"].output.as_deref(),
        Some(&completion("node_2").draft.payload.unwrap()["output"]),
        "a reused output is the one its node_complete carried"
    );
    assert_eq!(model.asked.lock().unwrap().len() - asked_before, 2);
    // What the fork paid is its own: reused nodes cost it nothing.
    assert_eq!(forked.nodes["node_1"].usage, Default::default());

    // At version 2 (the current one): the nodes it took over from version 1
    // and those it completed itself are all reused; nothing runs again.
    let asked_before = model.asked.lock().unwrap().len();
    let whole = services
        .runs
        .fork(
            "t",
            &source.run_id,
            ForkPoint::PlanVersion(2),
            &ForkChanges::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        runner.run_until_settled("t", &whole.run_id).await.unwrap(),
        RunStatus::Completed
    );
    let reused = services
        .runs
        .load("t", &whole.run_id)
        .await
        .unwrap()
        .unwrap()
        .state
        .forked_from
        .unwrap()
        .reused_nodes;
    assert_eq!(reused.len(), 5, "{reused:?}");
    assert_eq!(model.asked.lock().unwrap().len(), asked_before);

    // At the frame of node_2's completion: node_1 and node_2 are reused.
    let asked_before = model.asked.lock().unwrap().len();
    let at_frame = services
        .runs
        .fork(
            "t",
            &source.run_id,
            ForkPoint::EventId(completion("node_2").id),
            &ForkChanges::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        runner
            .run_until_settled("t", &at_frame.run_id)
            .await
            .unwrap(),
        RunStatus::Completed
    );
    let forked = services
        .runs
        .load("t", &at_frame.run_id)
        .await
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(
        forked.forked_from.unwrap().reused_nodes,
        ["node_1", "node_2"]
    );
    // The rest ran (node_3's completion fires the replan policy again, so
    // perhaps more), but not the reused two: their schemas were not asked.
    let asked = model.asked.lock().unwrap().clone();
    let first_two = &asked[..2];
    assert!(asked.len() - asked_before >= 3, "{asked:?}");
    assert!(
        asked[asked_before..]
            .iter()
            .all(|name| !first_two.contains(name)),
        "{asked:?}"
    );
    // A frame from before the first plan has nothing to reuse.
    match services
        .runs
        .fork(
            "t",
            &source.run_id,
            ForkPoint::EventId(1),
            &ForkChanges::default(),
        )
        .await
    {
        Err(RuntimeError::InvalidInput { path, .. }) => assert_eq!(path, "$.at.eventId"),
        other => panic!("a frame before any plan is refused: {other:?}"),
    }
}
