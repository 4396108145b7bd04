//! Budgets a payer sets, through the real step service, queue and worker:
//! `constraints.maxCostUsd` at half of what a run needs ends it
//! `budget_exceeded` after the 80% warning, with the spend in the frame;
//! `constraints.maxDurationSeconds: 2` against a model answering after 5 s
//! ends the run on time (its durable deadline timer fires while the model
//! call is in flight); with an `onBudgetExceeded` policy the same budget
//! parks the run for approval instead: approved, it goes on and completes;
//! rejected, it ends `budget_exceeded`. The model is a test double standing in for an LLM
//! endpoint: schema-shaped answers, priced usage, an optional delay.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use baton_core::engine::ApprovalDecision;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_core::wire::event::EventFrame;
use baton_runtime::error::LlmError;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::services::{PersonInput, PersonInputOutcome, Services};
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

/// Answers every request with schema-shaped output after `delay`, as a
/// catalog model the registry prices, 20,000 prompt tokens a call.
struct PricedModel {
    delay: Duration,
}

#[async_trait]
impl LlmProvider for PricedModel {
    fn model_name(&self) -> String {
        "gpt-4o-mini".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        tokio::time::sleep(self.delay).await;
        Ok(ModelAnswer {
            content: scripted_llm::generate_instance(&request.output_schema, "priced").to_string(),
            usage: TokenUsage {
                prompt_tokens: 20_000,
                completion_tokens: 1_000,
                cached_prompt_tokens: 0,
                cache_write_prompt_tokens: 0,
            },
            model: "gpt-4o-mini".into(),
        })
    }
}

fn orchestrator(delay: Duration) -> (Services, LocalRunner) {
    TestServices::with_model(Arc::new(PricedModel { delay })).build_with_local_runner()
}

async fn run(envelope: &Value, delay: Duration) -> (RunStatus, Vec<EventFrame>) {
    let (services, runner) = orchestrator(delay);
    let run = services.runs.submit("t", envelope).await.unwrap();
    let status = runner.run_until_settled("t", &run.run_id).await.unwrap();
    let frames = services
        .runs
        .read_all_events_after("t", &run.run_id, 0)
        .await
        .unwrap();
    baton_test_support::assert_frames_match_schemas(&frames);
    (status, frames)
}

fn coded<'f>(frames: &'f [EventFrame], kind: &str, code: &str) -> Vec<&'f EventFrame> {
    frames
        .iter()
        .filter(|frame| {
            frame.event_type.as_str() == kind
                && frame
                    .payload
                    .as_ref()
                    .is_some_and(|payload| payload["code"] == code)
        })
        .collect()
}

fn run_cost(frames: &[EventFrame]) -> f64 {
    frames
        .iter()
        .filter(|frame| frame.event_type.as_str() == "node_complete")
        .filter_map(|frame| frame.payload.as_ref()?["costUsd"].as_f64())
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn half_the_cost_a_run_needs_ends_it_budget_exceeded_after_the_warning() {
    let envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    let (status, frames) = run(&envelope, Duration::ZERO).await;
    assert_eq!(status, RunStatus::Completed);
    let needed = run_cost(&frames);
    assert!(needed > 0.0, "the catalog prices the model");

    let mut budgeted = envelope.clone();
    budgeted["constraints"] = json!({"maxCostUsd": needed / 2.0});
    let (status, frames) = run(&budgeted, Duration::ZERO).await;
    assert_eq!(status, RunStatus::Failed);
    let warning = coded(&frames, "warning", "budget_nearly_spent");
    let error = coded(&frames, "error", "budget_exceeded");
    assert_eq!((warning.len(), error.len()), (1, 1));
    assert!(warning[0].id < error[0].id, "the warning comes first");
    let budget = &error[0].payload.as_ref().unwrap()["budget"];
    assert_eq!(budget["field"], "$.constraints.maxCostUsd");
    assert_eq!(budget["limit"].as_f64().unwrap(), needed / 2.0);
    let spent = budget["spent"].as_f64().unwrap();
    assert!(
        spent >= needed / 2.0 && spent < needed,
        "spent {spent} of {needed}"
    );
    assert!(budget["nodeId"].is_string(), "{budget}");
    assert!(
        run_cost(&frames) < needed,
        "the call the budget stopped was not made"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_two_second_deadline_ends_a_run_whose_model_answers_after_five_on_time() {
    let mut envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    envelope["constraints"] = json!({"maxDurationSeconds": 2});
    let (status, frames) = run(&envelope, Duration::from_secs(5)).await;
    assert_eq!(status, RunStatus::Failed);
    let kinds: Vec<&str> = frames
        .iter()
        .map(|frame| frame.event_type.as_str())
        .collect();
    let error = coded(&frames, "error", "budget_exceeded");
    assert_eq!(error.len(), 1, "{kinds:?}");
    assert_eq!(
        coded(&frames, "warning", "budget_nearly_spent").len(),
        1,
        "{kinds:?}"
    );
    assert!(
        !kinds.contains(&"node_complete"),
        "the run ended before the model answered (on time, not after the 5 s call): {kinds:?}"
    );
    assert_eq!(
        error[0].payload.as_ref().unwrap()["budget"]["field"],
        "$.constraints.maxDurationSeconds"
    );
}

/// Submits `envelope` and runs it until it settles or waits on a person.
async fn run_until_parked(
    services: &Services,
    runner: &LocalRunner,
    envelope: &Value,
) -> (String, RunStatus) {
    let run = services.runs.submit("t", envelope).await.unwrap();
    let status = runner.run_until_settled("t", &run.run_id).await.unwrap();
    (run.run_id, status)
}

async fn frames_of(services: &Services, run_id: &str) -> Vec<EventFrame> {
    let frames = services
        .runs
        .read_all_events_after("t", run_id, 0)
        .await
        .unwrap();
    baton_test_support::assert_frames_match_schemas(&frames);
    frames
}

async fn decide(services: &Services, run_id: &str, decision: ApprovalDecision) {
    let pending = services.people.pending_requests("t").await.unwrap();
    let request = pending
        .iter()
        .find(|pending| pending.run_id == run_id)
        .expect("the parked run has an approval request");
    let outcome = services
        .people
        .apply(
            "t",
            run_id,
            PersonInput::Resolve {
                request_id: request.request.request_id.clone(),
                decision,
                note: None,
            },
        )
        .await
        .unwrap();
    assert!(
        matches!(outcome, PersonInputOutcome::Applied { .. }),
        "{outcome:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_budget_policy_parks_the_run_for_approval_which_allows_another_budget() {
    let envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    let (_, frames) = run(&envelope, Duration::ZERO).await;
    let needed = run_cost(&frames);
    let mut budgeted = envelope.clone();
    // Half of what the run needs (it stops there without the policy, see
    // above); two budgets' worth cover it: one approval is enough.
    budgeted["constraints"] = json!({"maxCostUsd": needed / 2.0});
    budgeted["policies"]["runtime"] = json!([{
        "id": "spend-check",
        "trigger": {"kind": "onBudgetExceeded", "budget": "maxCostUsd"},
        "action": {"type": "hitl"}
    }]);

    let (services, runner) = orchestrator(Duration::ZERO);
    let (run_id, status) = run_until_parked(&services, &runner, &budgeted).await;
    assert_eq!(status, RunStatus::AwaitingHitl, "parked, not ended");
    let frames = frames_of(&services, &run_id).await;
    assert!(coded(&frames, "error", "budget_exceeded").is_empty());
    assert_eq!(coded(&frames, "warning", "budget_nearly_spent").len(), 1);
    let triggered: Vec<&EventFrame> = frames
        .iter()
        .filter(|frame| frame.event_type.as_str() == "policy_triggered")
        .collect();
    assert_eq!(triggered.len(), 1);
    let trigger = &triggered[0].payload.as_ref().unwrap()["trigger"];
    assert_eq!(trigger["kind"], "onBudgetExceeded");
    assert_eq!(trigger["metric"], "$.constraints.maxCostUsd");
    let waiting_node = trigger["nodeId"].as_str().unwrap().to_string();
    let request = frames
        .iter()
        .rfind(|frame| frame.event_type.as_str() == "hitl_request")
        .expect("an approval request frame");
    let prompt = request.payload.as_ref().unwrap().to_string();
    assert!(prompt.contains("approve to allow another"), "{prompt}");
    let paid_before = run_cost(&frames);

    decide(&services, &run_id, ApprovalDecision::Approve).await;
    assert_eq!(
        runner.run_until_settled("t", &run_id).await.unwrap(),
        RunStatus::Completed
    );
    let frames = frames_of(&services, &run_id).await;
    assert!(
        run_cost(&frames) > paid_before,
        "the waiting node's call was made"
    );
    let waiting_node_completed = frames.iter().any(|frame| {
        frame.event_type.as_str() == "node_complete"
            && frame.node_id.as_deref() == Some(waiting_node.as_str())
    });
    assert!(
        waiting_node_completed,
        "{waiting_node} ran after the approval"
    );
    assert_eq!(
        coded(&frames, "warning", "budget_nearly_spent").len(),
        2,
        "warned again at 80% of the allowed two budgets"
    );

    // The same parked run, rejected: it ends as it would have with no policy.
    let (run_id, status) = run_until_parked(&services, &runner, &budgeted).await;
    assert_eq!(status, RunStatus::AwaitingHitl);
    decide(&services, &run_id, ApprovalDecision::Reject).await;
    assert_eq!(
        runner.run_until_settled("t", &run_id).await.unwrap(),
        RunStatus::Failed
    );
    let frames = frames_of(&services, &run_id).await;
    let error = coded(&frames, "error", "budget_exceeded");
    assert_eq!(error.len(), 1);
    assert_eq!(
        error[0].payload.as_ref().unwrap()["budget"]["nodeId"],
        waiting_node.as_str()
    );
}

#[tokio::test]
async fn a_budget_policy_without_a_budget_or_with_another_action_is_refused_with_its_path() {
    let (services, _) = orchestrator(Duration::ZERO);
    let mut envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    envelope["policies"]["runtime"] = json!([{
        "id": "spend-check",
        "trigger": {"kind": "onBudgetExceeded", "budget": "maxCostUsd"},
        "action": {"type": "hitl"}
    }]);
    let error = services
        .runs
        .submit("t", &envelope)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("$.policies.runtime[0].trigger.budget") && error.contains("maxCostUsd"),
        "{error}"
    );
    envelope["constraints"] = json!({"maxCostUsd": 1.0});
    envelope["policies"]["runtime"][0]["action"] = json!({"type": "pause"});
    let error = services
        .runs
        .submit("t", &envelope)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("$.policies.runtime[0].action"), "{error}");
    envelope["policies"]["runtime"][0]["action"] = json!({"type": "hitl"});
    envelope["policies"]["runtime"][0]["trigger"]["budget"] = json!("maxTokens");
    let error = services
        .runs
        .submit("t", &envelope)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("$.policies.runtime[0].trigger") && error.contains("maxTokens"),
        "{error}"
    );
}
