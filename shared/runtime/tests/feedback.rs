//! Feedback that revises, on the specifications' reference workflow with
//! the shipped registry: a strategist and a copywriter (models), a designer
//! and a director (people). The director's answer carries the registry's
//! feedback facet; each open item names a facet, and the engine re-runs
//! only the node that made it and what depends on it, in a new plan
//! version with trigger `feedback`, at most `constraints.maxRevisions`
//! times.
//!
//! The model is a test double (schema-shaped answers; every request
//! recorded, so the test counts the model calls); the people's answers go
//! through the people service as the API's would. Everything else is the
//! real engine on the in-memory store and queue.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use async_trait::async_trait;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_core::state::tasks::HumanTask;
use baton_runtime::error::LlmError;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::services::{PersonInput, PersonInputOutcome, Services};
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

/// Test double for the model endpoint: a schema-shaped answer to anything;
/// records each request's (schema name, user message).
#[derive(Default)]
struct CountingModel {
    asked: std::sync::Mutex<Vec<(String, Value)>>,
}

impl CountingModel {
    fn calls(&self) -> Vec<String> {
        self.asked
            .lock()
            .unwrap()
            .iter()
            .map(|(schema, _)| schema.clone())
            .collect()
    }
}

#[async_trait]
impl LlmProvider for CountingModel {
    fn model_name(&self) -> String {
        "schema-shaped".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        let message: Value = serde_json::from_str(&request.user_message).unwrap_or_default();
        self.asked
            .lock()
            .unwrap()
            .push((request.schema_name.clone(), message));
        Ok(ModelAnswer {
            content: scripted_llm::generate_instance(&request.output_schema, "answer").to_string(),
            usage: TokenUsage::default(),
            model: "schema-shaped".into(),
        })
    }
}

/// The reference workflow: a post the director approves, made by a
/// strategist, a copywriter and a designer.
fn reviewed_post() -> Value {
    json!({
        "objective": "Publish a social post announcing a new customer case, approved by the director.",
        "inputs": {
            "company_information": {"name": "Company X", "url": "https://companyx.example", "tone_of_voice": "warm"},
            "post_context": {"type": "new_case", "data": {
                "content_description": "Acme Corp achieved a 32% efficiency boost using our platform.",
                "case_url": "https://companyx.example/cases/acme", "customer_name": "Acme Corp"}}
        },
        "outputContract": {"schema": {"type": "object", "required": ["post"],
                                      "properties": {"post": {"type": "object"}, "feedback": {"type": "array"}}}}
    })
}

struct Workflow {
    services: Services,
    runner: LocalRunner,
    model: Arc<CountingModel>,
    run_id: String,
}

impl Workflow {
    async fn start(envelope: Value) -> Workflow {
        let model = Arc::new(CountingModel::default());
        let (services, runner) = TestServices::with_model(model.clone()).build_with_local_runner();
        let run_id = services.runs.submit("t", &envelope).await.unwrap().run_id;
        let workflow = Workflow {
            services,
            runner,
            model,
            run_id,
        };
        assert_eq!(workflow.settle().await, RunStatus::AwaitingHuman);
        workflow
    }

    async fn settle(&self) -> RunStatus {
        self.runner
            .run_until_settled("t", &self.run_id)
            .await
            .unwrap()
    }

    /// The one task waiting, which must be of `capability_id`.
    async fn task_of(&self, capability_id: &str) -> HumanTask {
        let tasks = self.services.people.pending_tasks("t", None).await.unwrap();
        assert_eq!(tasks.len(), 1, "{tasks:?}");
        assert_eq!(tasks[0].capability_id, capability_id, "{tasks:?}");
        tasks[0].clone()
    }

    /// Answers `task` with a schema-shaped answer, `feedback` put in its
    /// feedback facet when it has one.
    async fn answer(&self, task: &HumanTask, feedback: Option<Value>) -> Value {
        let mut output = scripted_llm::generate_instance(&task.output_schema, "person");
        if let Some(feedback) = feedback {
            output["feedback"] = feedback;
        }
        let applied = self
            .services
            .people
            .apply(
                "t",
                &self.run_id,
                PersonInput::Answer {
                    node_id: task.node_id.clone(),
                    expected_plan_version: task.plan_version,
                    output: output.clone(),
                },
            )
            .await
            .unwrap();
        assert!(
            matches!(applied, PersonInputOutcome::Applied { .. }),
            "{applied:?}"
        );
        output
    }

    async fn frames(&self) -> Vec<Value> {
        self.services
            .runs
            .read_all_events_after("t", &self.run_id, 0)
            .await
            .unwrap()
            .iter()
            .map(|frame| serde_json::to_value(frame).unwrap())
            .collect()
    }
}

fn director_asks(facet: &str, message: &str) -> Value {
    json!([{"author": "Director", "facet": facet, "message": message, "severity": "major"}])
}

#[tokio::test(flavor = "multi_thread")]
async fn a_director_asking_for_a_new_visual_re_runs_only_the_visual() {
    let workflow = Workflow::start(reviewed_post()).await;
    let models_before = workflow.model.calls();
    assert_eq!(
        models_before.len(),
        2,
        "the strategist and the copywriter: {models_before:?}"
    );
    let designer = workflow.task_of("designer.VisualDesign").await;
    assert!(designer.feedback.is_empty());
    workflow.answer(&designer, None).await;
    assert_eq!(workflow.settle().await, RunStatus::AwaitingHuman);
    let director = workflow.task_of("director.SocialPostingReview").await;
    // The task carries its facets' widgets from the registry (the visuals
    // name none: the generic form edits them).
    assert_eq!(
        serde_json::to_value(&director.widgets).unwrap(),
        json!({"post": {"kind": "fields", "fields": {"copy": {"kind": "longText", "rows": 5}}},
               "feedback": {"kind": "cards", "cardTitle": "facet"}})
    );
    assert!(designer.widgets.is_empty());
    workflow
        .answer(
            &director,
            Some(director_asks(
                "post_visual",
                "The copy is approved; the visual needs the customer's logo.",
            )),
        )
        .await;

    // Only the designer is asked again, with the feedback on the task.
    assert_eq!(workflow.settle().await, RunStatus::AwaitingHuman);
    let designer_again = workflow.task_of("designer.VisualDesign").await;
    assert_eq!(designer_again.node_id, designer.node_id);
    assert_eq!(designer_again.plan_version, designer.plan_version + 1);
    assert_eq!(designer_again.feedback.len(), 1);
    assert_eq!(
        designer_again.feedback[0]["message"],
        "The copy is approved; the visual needs the customer's logo."
    );
    assert_eq!(
        workflow.model.calls(),
        models_before,
        "no model runs again: the strategist and the copywriter keep their outputs"
    );
    let frames = workflow.frames().await;
    let updated: Vec<&Value> = frames
        .iter()
        .filter(|frame| frame["type"] == "plan_updated")
        .collect();
    assert_eq!(updated.len(), 1);
    let payload = &updated[0]["payload"];
    assert_eq!(payload["trigger"]["kind"], "feedback");
    assert_eq!(payload["trigger"]["nodeId"], director.node_id);
    let reused: Vec<&str> = payload["reusedNodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| node.as_str().unwrap())
        .collect();
    assert_eq!(
        reused.len(),
        2,
        "the strategist's and the copywriter's nodes are reused: {payload}"
    );
    assert!(!reused.contains(&designer.node_id.as_str()));

    // The new visual, then the director approves with no open feedback.
    workflow.answer(&designer_again, None).await;
    assert_eq!(workflow.settle().await, RunStatus::AwaitingHuman);
    let director_again = workflow.task_of("director.SocialPostingReview").await;
    let approved = workflow
        .answer(
            &director_again,
            Some(json!([{"author": "Director", "facet": "post_visual",
                         "message": "Logo added, thanks.", "resolution": "addressed"}])),
        )
        .await;
    assert_eq!(workflow.settle().await, RunStatus::Completed);
    let settled = workflow
        .services
        .runs
        .load("t", &workflow.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        settled.state.output.as_ref().unwrap()["post"],
        approved["post"],
        "the approved post is the output"
    );
    assert_eq!(workflow.model.calls().len(), 2, "two model calls in all");
}

#[tokio::test(flavor = "multi_thread")]
async fn feedback_on_the_copy_re_runs_the_writer_with_it_and_stops_at_max_revisions() {
    let mut envelope = reviewed_post();
    envelope["constraints"] = json!({"maxRevisions": 1});
    let workflow = Workflow::start(envelope).await;
    let designer = workflow.task_of("designer.VisualDesign").await;
    workflow.answer(&designer, None).await;
    workflow.settle().await;
    let director = workflow.task_of("director.SocialPostingReview").await;
    workflow
        .answer(
            &director,
            Some(director_asks("post_copy", "Thank Acme Corp by name.")),
        )
        .await;

    // The copywriter runs again (one more model call) with the feedback in
    // its request; the strategist does not.
    assert_eq!(workflow.settle().await, RunStatus::AwaitingHuman);
    let calls = workflow.model.calls();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(calls[2], calls[1], "the copywriter again: {calls:?}");
    let (_, revision_request) = workflow.model.asked.lock().unwrap()[2].clone();
    assert_eq!(
        revision_request["revisionNotes"]["feedback"][0]["message"], "Thank Acme Corp by name.",
        "{revision_request}"
    );
    // The designer works beside the copywriter (the handoff summary both
    // add to orders neither), so a new copy does not ask for a new visual:
    // the director is asked again at once.
    let director_again = workflow.task_of("director.SocialPostingReview").await;
    assert_eq!(director_again.plan_version, director.plan_version + 1);

    // maxRevisions is 1: more feedback stays open, with a warning, and the
    // run completes with the director's answer.
    workflow
        .answer(
            &director_again,
            Some(director_asks("post_copy", "Shorter, please.")),
        )
        .await;
    assert_eq!(workflow.settle().await, RunStatus::Completed);
    assert_eq!(workflow.model.calls().len(), 3, "no further revision");
    let frames = workflow.frames().await;
    assert_eq!(
        frames
            .iter()
            .filter(|frame| frame["type"] == "plan_updated")
            .count(),
        1
    );
    let exhausted = frames
        .iter()
        .find(|frame| frame["payload"]["code"] == "feedback_revisions_exhausted")
        .expect("the open feedback is said");
    assert!(
        exhausted["message"]
            .as_str()
            .unwrap()
            .contains("1 of 1 revisions made"),
        "{exhausted}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn feedback_naming_nothing_the_plan_makes_is_a_warning_and_revises_nothing() {
    let workflow = Workflow::start(reviewed_post()).await;
    let designer = workflow.task_of("designer.VisualDesign").await;
    workflow.answer(&designer, None).await;
    workflow.settle().await;
    let director = workflow.task_of("director.SocialPostingReview").await;
    workflow
        .answer(
            &director,
            Some(director_asks("positioning", "Not a facet of this plan.")),
        )
        .await;
    assert_eq!(workflow.settle().await, RunStatus::Completed);
    let frames = workflow.frames().await;
    assert!(
        frames
            .iter()
            .any(|frame| frame["payload"]["code"] == "feedback_unmatched"
                && frame["message"].as_str().unwrap().contains("`positioning`")),
        "the unmatched item is said"
    );
    assert!(
        !frames.iter().any(|frame| frame["type"] == "plan_updated"),
        "nothing is revised"
    );
}
