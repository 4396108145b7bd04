//! Escalation ends somewhere by default: on the shipped registry, a node
//! whose model keeps failing and whose facets no other capability (and no
//! person) makes is handed to the shipped catch-all fallback, a person's
//! task carrying the failure with the node's output contract as its form.
//! The person's answer completes the run; a declined fallback fails it. An
//! envelope naming a fallback that is not a catch-all is refused.
//!
//! The model is a test double (schema-shaped answers; a 503 after its
//! retries for the capability named to fail); everything else is the real
//! engine on the in-memory store and queue, and the shipped registry.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use async_trait::async_trait;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_runtime::error::{LlmError, RuntimeError};
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::services::{PersonInput, PersonInputOutcome};
use baton_test_support::TestServices;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

/// Test double for the model endpoint: a schema-shaped answer, except for
/// requests whose schema name starts with `failing`, which fail as a
/// provider that kept answering 503 after its retries.
struct FailsFor {
    failing: &'static str,
    asked: std::sync::Mutex<Vec<String>>,
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
        if request.schema_name.starts_with(self.failing) {
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

/// The shipped positioning example: a strategist, then a copywriter whose
/// facets only it makes.
fn positioning_envelope() -> Value {
    baton_test_support::example_envelope("positioning-recommendation.json")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_node_no_one_else_can_make_ends_on_the_shipped_fallback_with_the_failure_on_the_task()
 {
    let model = Arc::new(FailsFor {
        failing: "copywriter_Messaging",
        asked: std::sync::Mutex::default(),
    });
    let (services, runner) = TestServices::with_model(model.clone()).build_with_local_runner();
    let run = services
        .runs
        .submit("t", &positioning_envelope())
        .await
        .unwrap();
    let status = runner.run_until_settled("t", &run.run_id).await.unwrap();
    assert_eq!(status, RunStatus::AwaitingHuman, "asked: {:?}", model.asked);

    // The task: the shipped catch-all, the failed node's form, its failure.
    let tasks = services.people.pending_tasks("t", None).await.unwrap();
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    let task = &tasks[0];
    assert_eq!(task.capability_id, "HumanAgent.takeOver");
    assert_eq!(
        task.output_facets,
        ["messaging_stack", "handoff_summary"],
        "the copywriter's facets"
    );
    let required = task.output_schema["required"].as_array().unwrap();
    assert!(
        required.iter().any(|name| name == "messaging_stack"),
        "the node's output contract is the form: {}",
        task.output_schema
    );
    let failure = task
        .escalated_from
        .as_ref()
        .expect("the failure is on the task");
    assert_eq!(failure.capability_id, "copywriter.Messaging");
    assert_eq!(failure.trigger, "model_failed");
    assert!(failure.failure.contains("503"), "{failure:?}");
    assert!(
        task.instructions.contains("503") && task.instructions.contains("copywriter.Messaging"),
        "the instructions say what failed: {}",
        task.instructions
    );

    // The frames say it: a new version hands the facets to the fallback.
    let frames = services
        .runs
        .read_all_events_after("t", &run.run_id, 0)
        .await
        .unwrap();
    let updated = frames
        .iter()
        .find(|frame| frame.event_type.as_str() == "plan_updated")
        .expect("a new plan version");
    let payload = updated.payload_value().unwrap();
    assert_eq!(payload["trigger"]["kind"], "model_failed");
    assert!(
        payload["rationale"]
            .as_str()
            .unwrap()
            .contains("catch-all fallback HumanAgent.takeOver"),
        "{payload}"
    );
    assert!(frames.iter().any(|frame| {
        frame.event_type.as_str() == "warning"
            && frame.payload.as_ref().unwrap()["code"] == "capability_fallback"
            && frame
                .message
                .as_deref()
                .unwrap_or_default()
                .contains("uses another capability: HumanAgent.takeOver")
    }));

    // The person answers in the form: the run completes with their output.
    let answer = scripted_llm::generate_instance(&task.output_schema, "person");
    let applied = services
        .people
        .apply(
            "t",
            &run.run_id,
            PersonInput::Answer {
                node_id: task.node_id.clone(),
                expected_plan_version: task.plan_version,
                output: answer.clone(),
            },
        )
        .await
        .unwrap();
    assert!(
        matches!(applied, PersonInputOutcome::Applied { .. }),
        "{applied:?}"
    );
    let status = runner.run_until_settled("t", &run.run_id).await.unwrap();
    assert_eq!(status, RunStatus::Completed);
    let settled = services.runs.load("t", &run.run_id).await.unwrap().unwrap();
    assert_eq!(
        settled.state.output.as_ref().unwrap()["messaging_stack"],
        answer["messaging_stack"],
        "the person's facet is the output's"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_declined_fallback_fails_the_run_with_the_node() {
    let model = Arc::new(FailsFor {
        failing: "copywriter_Messaging",
        asked: std::sync::Mutex::default(),
    });
    let (services, runner) = TestServices::with_model(model).build_with_local_runner();
    let run = services
        .runs
        .submit("t", &positioning_envelope())
        .await
        .unwrap();
    runner.run_until_settled("t", &run.run_id).await.unwrap();
    let task = services.people.pending_tasks("t", None).await.unwrap()[0].clone();
    services
        .people
        .apply(
            "t",
            &run.run_id,
            PersonInput::Decline {
                node_id: task.node_id.clone(),
                reason_code: "cannot".into(),
                note: Some("no one knows this market".into()),
            },
        )
        .await
        .unwrap();
    let status = runner.run_until_settled("t", &run.run_id).await.unwrap();
    assert_eq!(
        status,
        RunStatus::Failed,
        "the catch-all is not asked twice"
    );
    assert!(
        services
            .people
            .pending_tasks("t", None)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn with_fallback_capability_none_the_failing_node_fails_the_run() {
    let (services, runner) = TestServices::with_model(Arc::new(FailsFor {
        failing: "copywriter_Messaging",
        asked: std::sync::Mutex::default(),
    }))
    .build_with_local_runner();
    let mut envelope = positioning_envelope();
    envelope["policies"]["fallbackCapability"] = json!("none");
    let run = services.runs.submit("t", &envelope).await.unwrap();
    let status = runner.run_until_settled("t", &run.run_id).await.unwrap();
    assert_eq!(status, RunStatus::Failed);
    let settled = services.runs.load("t", &run.run_id).await.unwrap().unwrap();
    assert!(
        settled.state.failure.unwrap().message.contains("503"),
        "the node's failure is the run's"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_envelope_names_its_fallback_and_a_capability_that_is_not_a_catch_all_is_refused() {
    let (services, _runner) = TestServices::with_model(Arc::new(FailsFor {
        failing: "nothing",
        asked: std::sync::Mutex::default(),
    }))
    .build_with_local_runner();
    let mut envelope = positioning_envelope();
    envelope["policies"]["fallbackCapability"] = json!("HumanAgent.takeOver");
    services.runs.submit("t", &envelope).await.unwrap();
    // "none" is accepted: no catch-all (the test above runs it).
    envelope["policies"]["fallbackCapability"] = json!("none");
    services.runs.submit("t", &envelope).await.unwrap();
    for (named, said) in [
        ("HumanAgent.clarifyBrief", "is not a catch-all fallback"),
        ("no.such.capability", "is not a capability of the registry"),
    ] {
        envelope["policies"]["fallbackCapability"] = json!(named);
        match services.runs.submit("t", &envelope).await {
            Err(RuntimeError::InvalidInput { path, message }) => {
                assert_eq!(path, "$.policies.fallbackCapability");
                assert!(message.contains(said), "{message}");
            }
            other => panic!("{named}: expected a refusal, got {other:?}"),
        }
    }
}

/// Test double for the model endpoint: schema-shaped answers, recording
/// each request's schema name; answering the strategist, it moves the
/// shared clock past the registration's heartbeat timeout (time passing
/// while the run works, without waiting).
struct ClockMovesWhileTheStrategistWorks {
    clock: Arc<baton_runtime::clock::OffsetClock>,
    asked: std::sync::Mutex<Vec<String>>,
}

#[async_trait]
impl LlmProvider for ClockMovesWhileTheStrategistWorks {
    fn model_name(&self) -> String {
        "schema-shaped".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        self.asked.lock().unwrap().push(request.schema_name.clone());
        if request.schema_name.starts_with("strategist") {
            self.clock.advance(std::time::Duration::from_secs(10));
        }
        Ok(ModelAnswer {
            content: scripted_llm::generate_instance(&request.output_schema, "answer").to_string(),
            usage: TokenUsage::default(),
            model: "schema-shaped".into(),
        })
    }
}

/// A tenant's registration the plan requires lapses mid-run (its 2 s
/// heartbeat timeout passes while the strategist works): its node is not
/// called; a `capability_inactive` warning names it, and the node escalates
/// to the next-ranked capability (the registry's copywriter), which
/// completes the run. A registration renewed in time is called.
#[tokio::test(flavor = "multi_thread")]
async fn a_registration_whose_heartbeat_lapses_mid_run_is_escalated_without_a_call() {
    for renewed_in_time in [false, true] {
        let clock = Arc::new(baton_runtime::clock::OffsetClock::new());
        let model = Arc::new(ClockMovesWhileTheStrategistWorks {
            clock: clock.clone(),
            asked: std::sync::Mutex::default(),
        });
        let (services, runner) = TestServices::with_model(model.clone())
            .clock(clock.clone())
            .build_with_local_runner();
        let timeout_seconds = if renewed_in_time { 60 } else { 2 };
        let registration = json!({
            "capabilityId": "copywriter.Messaging.remote",
            "agentType": "ai",
            "version": "1",
            "displayName": "Remote messaging writer",
            "summary": "Turns a positioning recommendation into a messaging stack.",
            "inputTraits": {"languages": ["en"]},
            "inputContract": ["company_information", "positioning_context", "positioning_recommendation", "feedback"],
            "outputContract": ["messaging_stack", "handoff_summary"],
            "heartbeat": {"intervalSeconds": 1, "timeoutSeconds": timeout_seconds},
            "instructions": "Write the messaging stack for the recommended positioning."
        });
        services
            .capabilities
            .register("t", &registration)
            .await
            .unwrap();
        let mut envelope = positioning_envelope();
        envelope["policies"] =
            json!({"planner": {"selection": {"prefer": ["copywriter.Messaging.remote"]}}});
        let run = services.runs.submit("t", &envelope).await.unwrap();
        let status = runner.run_until_settled("t", &run.run_id).await.unwrap();
        assert_eq!(status, RunStatus::Completed, "asked: {:?}", model.asked);
        let asked = model.asked.lock().unwrap().clone();
        let called_remote = asked
            .iter()
            .any(|name| name.starts_with("copywriter_Messaging_remote"));
        let frames: Vec<Value> = services
            .runs
            .read_all_events_after("t", &run.run_id, 0)
            .await
            .unwrap()
            .iter()
            .map(|frame| serde_json::to_value(frame).unwrap())
            .collect();
        let inactive: Vec<&Value> = frames
            .iter()
            .filter(|frame| frame["type"] == "warning")
            .filter(|frame| frame["payload"]["code"] == "capability_inactive")
            .collect();
        if renewed_in_time {
            assert!(called_remote, "an active registration is called: {asked:?}");
            assert!(inactive.is_empty(), "{inactive:?}");
            continue;
        }
        assert!(
            !called_remote,
            "a lapsed registration is never called: {asked:?}"
        );
        assert_eq!(inactive.len(), 1, "{frames:#?}");
        assert!(
            inactive[0]["message"]
                .as_str()
                .unwrap()
                .contains("copywriter.Messaging.remote"),
            "{}",
            inactive[0]
        );
        assert!(
            asked
                .iter()
                .any(|name| name.starts_with("copywriter_Messaging")),
            "the next-ranked copywriter made the facets: {asked:?}"
        );
        let updated = frames
            .iter()
            .find(|frame| frame["type"] == "plan_updated")
            .expect("a new plan version");
        assert_eq!(
            updated["payload"]["trigger"]["kind"], "capability_inactive",
            "{updated}"
        );
    }
}
