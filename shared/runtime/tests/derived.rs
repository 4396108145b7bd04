//! Derived capabilities run on probation. On the shipped registry, with
//! the strategist forbidden, nobody makes the positioning recommendation
//! the copywriter declares as an input: the planner runs the copywriter
//! derived, on the facets at hand. Its answer is checked once more against
//! the caller's contract and the node says so (`derived_output_checked`);
//! with `policies.reviewDerived: true` a person approves it before the run
//! goes on.
//!
//! The model is a test double (`SchemaShapedModel`: schema-shaped answers); everything else is
//! the real engine on the in-memory store and queue.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use baton_core::engine::ApprovalDecision;
use baton_core::state::run::RunStatus;
use baton_runtime::services::PersonInput;
use baton_test_support::schema_shaped_model::SchemaShapedModel as SchemaShaped;
use baton_test_support::{TestServices, example_envelope};
use serde_json::{Value, json};

/// The positioning example asking only for the messaging stack, with the
/// strategist forbidden: the copywriter runs derived.
fn derived_envelope() -> Value {
    let mut envelope = example_envelope("positioning-recommendation.json");
    envelope["outputContract"]["schema"] = json!({
        "type": "object",
        "required": ["messaging_stack"],
        "properties": {"messaging_stack": {"type": "object"}}
    });
    envelope["policies"] = json!({"planner": {"selection": {"forbid": ["strategist"]}}});
    envelope
}

fn frames_json(frames: &[baton_core::wire::event::EventFrame]) -> Vec<Value> {
    frames
        .iter()
        .map(|frame| serde_json::to_value(frame).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_derived_node_is_checked_once_more_and_says_it_ran_on_probation() {
    let (services, runner) =
        TestServices::with_model(Arc::new(SchemaShaped)).build_with_local_runner();
    let run = services
        .runs
        .submit("t", &derived_envelope())
        .await
        .unwrap();
    assert_eq!(
        runner.run_until_settled("t", &run.run_id).await.unwrap(),
        RunStatus::Completed
    );
    let frames = frames_json(
        &services
            .runs
            .read_all_events_after("t", &run.run_id, 0)
            .await
            .unwrap(),
    );
    let plan = frames
        .iter()
        .find(|frame| frame["type"] == "plan_generated")
        .unwrap();
    assert_eq!(
        plan["payload"]["nodes"][0]["derived"], true,
        "the copywriter runs derived: {plan}"
    );
    let probation = frames
        .iter()
        .find(|frame| frame["payload"]["code"] == "derived_output_checked")
        .expect("the derived node says it ran on probation");
    assert_eq!(probation["nodeId"], "node_1");
    let said = probation["message"].as_str().unwrap();
    assert!(
        said.contains("copywriter.Messaging")
            && said.contains("messaging_stack meet the caller's contract"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn review_derived_holds_a_derived_output_for_a_person() {
    let (services, runner) =
        TestServices::with_model(Arc::new(SchemaShaped)).build_with_local_runner();
    let mut envelope = derived_envelope();
    envelope["policies"]["reviewDerived"] = json!(true);
    let run = services.runs.submit("t", &envelope).await.unwrap();
    assert_eq!(
        runner.run_until_settled("t", &run.run_id).await.unwrap(),
        RunStatus::AwaitingHitl
    );
    let pending = services.people.pending_requests("t").await.unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    let request = serde_json::to_value(&pending[0].request).unwrap();
    assert!(
        request.to_string().contains("policies.reviewDerived"),
        "the request says why: {request}"
    );
    services
        .people
        .apply(
            "t",
            &run.run_id,
            PersonInput::Resolve {
                request_id: pending[0].request.request_id.clone(),
                decision: ApprovalDecision::Approve,
                note: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        runner.run_until_settled("t", &run.run_id).await.unwrap(),
        RunStatus::Completed
    );
    // A declared node is not held: without the derived node, nothing waits.
    let mut declared = example_envelope("positioning-recommendation.json");
    declared["policies"] = json!({"reviewDerived": true});
    let run = services.runs.submit("t", &declared).await.unwrap();
    assert_eq!(
        runner.run_until_settled("t", &run.run_id).await.unwrap(),
        RunStatus::Completed
    );
}
