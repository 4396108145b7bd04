//! Envelope fields that act: the specifications' sample envelopes run with
//! every legacy policy key normalised (a `warning` each) and
//! `hitlRequiredFor: ["final_publish"]` holding the final output for a
//! person's approval; `constraints.resumeRunId` rehydrating a run.
//!
//! The model is a test double (schema-shaped answers for every request);
//! everything else is the real engine on the in-memory store and queue.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use async_trait::async_trait;
use baton_core::engine::ApprovalDecision;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_core::wire::event::EventFrame;
use baton_runtime::error::LlmError;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::services::{PersonInput, PersonInputOutcome, Services};
use baton_runtime::workers::LocalRunner;
use baton_test_support::{TestServices, example_envelope};
use tokio::sync::mpsc::UnboundedSender;

/// Test double for the model endpoint: a schema-shaped answer to anything;
/// records each request's (schema name, user message). The reviewer's
/// scores come from `review_scores` in turn (then 0.9); a writer asked to
/// revise for unmet requirements writes `revised_with` into its first
/// variant.
#[derive(Default)]
struct SchemaShapedModel {
    asked: std::sync::Mutex<Vec<(String, serde_json::Value)>>,
    review_scores: std::sync::Mutex<std::collections::VecDeque<f64>>,
    revised_with: Option<&'static str>,
}

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
        let message: serde_json::Value =
            serde_json::from_str(&request.user_message).unwrap_or_default();
        self.asked
            .lock()
            .unwrap()
            .push((request.schema_name.clone(), message.clone()));
        let mut answer = scripted_llm::generate_instance(&request.output_schema, "answer");
        if request.schema_name == "QualityAssurance_contentReview" {
            let score = self
                .review_scores
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or(0.9);
            answer["qaFindings"]["overallScore"] = serde_json::json!(score);
        }
        if let (Some(term), Some(variants)) = (
            self.revised_with,
            answer
                .get_mut("copyVariants")
                .and_then(serde_json::Value::as_array_mut),
        ) && message["revisionNotes"]["unmet"].is_array()
        {
            variants[0]["body"] = serde_json::json!(format!("Now with the {term}."));
        }
        Ok(ModelAnswer {
            content: answer.to_string(),
            usage: TokenUsage::default(),
            model: "schema-shaped".into(),
        })
    }
}

fn orchestrator() -> (Services, LocalRunner) {
    orchestrator_with(Arc::new(SchemaShapedModel::default()))
}

fn orchestrator_with(model: Arc<SchemaShapedModel>) -> (Services, LocalRunner) {
    TestServices::with_model(model).build_with_local_runner()
}

/// Submits `envelope`, runs it until it settles and checks it ended
/// `expected`; the submitted run.
async fn settle(
    services: &Services,
    runner: &LocalRunner,
    envelope: &serde_json::Value,
    expected: RunStatus,
) -> baton_runtime::services::SubmittedRun {
    let run = services.runs.submit("t", envelope).await.unwrap();
    assert_eq!(
        runner.run_until_settled("t", &run.run_id).await.unwrap(),
        expected
    );
    run
}

async fn frames_of(services: &Services, run_id: &str) -> Vec<EventFrame> {
    services
        .runs
        .read_all_events_after("t", run_id, 0)
        .await
        .unwrap()
}

fn legacy_warnings(frames: &[EventFrame]) -> Vec<String> {
    frames
        .iter()
        .filter(|frame| {
            frame.event_type.as_str() == "warning"
                && frame.payload.as_ref().unwrap()["code"] == "legacy_policy_normalized"
        })
        .map(|frame| {
            frame.payload.as_ref().unwrap()["field"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sample_envelope_says_what_each_legacy_key_became_and_parks_its_final_output_for_approval()
 {
    let (services, runner) = orchestrator();
    let envelope = example_envelope("seed-10.1-sample-envelope.json");
    let run = services.runs.submit("t", &envelope).await.unwrap();
    assert_eq!(
        runner.run_until_settled("t", &run.run_id).await.unwrap(),
        RunStatus::AwaitingHitl,
        "the final output waits for a person (hitlRequiredFor: final_publish)"
    );
    let frames = frames_of(&services, &run.run_id).await;
    assert_eq!(
        legacy_warnings(&frames),
        [
            "$.policies.hitlRequiredFor[0]",
            "$.policies.persona",
            "$.policies.variantCount"
        ]
    );
    assert!(
        !frames
            .iter()
            .any(|frame| frame.event_type.as_str() == "complete"),
        "nothing is delivered before the approval"
    );
    let requested = frames
        .iter()
        .find(|frame| frame.event_type.as_str() == "hitl_request")
        .expect("an approval is asked");
    let request_id = requested.payload.as_ref().unwrap()["requestId"]
        .as_str()
        .unwrap()
        .to_string();
    let state = services
        .runs
        .load("t", &run.run_id)
        .await
        .unwrap()
        .unwrap()
        .state;
    assert!(
        state
            .nodes
            .values()
            .all(|record| record.status() == baton_core::state::run::NodeStatus::Completed),
        "asked once every node is done"
    );
    assert_eq!(
        state.envelope.constraints.other["persona"], "marketer",
        "the persona travels as a constraint"
    );

    let outcome = services
        .people
        .apply(
            "t",
            &run.run_id,
            PersonInput::Resolve {
                request_id,
                decision: ApprovalDecision::Approve,
                note: Some("ship it".into()),
            },
        )
        .await
        .unwrap();
    assert!(
        matches!(outcome, PersonInputOutcome::Applied { .. }),
        "{outcome:?}"
    );
    assert_eq!(
        runner.run_until_settled("t", &run.run_id).await.unwrap(),
        RunStatus::Completed
    );
    let frames = frames_of(&services, &run.run_id).await;
    let complete = frames.last().unwrap();
    assert_eq!(complete.event_type.as_str(), "complete");
    assert!(complete.payload.as_ref().unwrap()["output"]["copyVariants"].is_array());
    baton_test_support::assert_frames_match_schemas(&frames);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_final_output_fails_the_run_and_a_bad_legacy_value_is_refused() {
    let (services, runner) = orchestrator();
    let run = services
        .runs
        .submit("t", &example_envelope("seed-10.1-sample-envelope.json"))
        .await
        .unwrap();
    runner.run_until_settled("t", &run.run_id).await.unwrap();
    let pending = services.people.pending_requests("t").await.unwrap();
    assert_eq!(pending.len(), 1);
    services
        .people
        .apply(
            "t",
            &run.run_id,
            PersonInput::Resolve {
                request_id: pending[0].request.request_id.clone(),
                decision: ApprovalDecision::Reject,
                note: Some("off brand".into()),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        runner.run_until_settled("t", &run.run_id).await.unwrap(),
        RunStatus::Failed
    );

    let mut envelope = example_envelope("seed-10.1-sample-envelope.json");
    envelope["policies"]["hitlRequiredFor"] = serde_json::json!(["launch_party"]);
    match services.runs.submit("t", &envelope).await {
        Err(baton_runtime::error::RuntimeError::InvalidInput { path, message }) => {
            assert_eq!(path, "$.policies.hitlRequiredFor[0]");
            assert!(message.contains("final_publish"), "{message}");
        }
        other => panic!("refused, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn caller_constraints_directives_and_output_hints_reach_the_nodes_they_concern() {
    let model = Arc::new(SchemaShapedModel::default());
    let (services, runner) = orchestrator_with(model.clone());
    let mut envelope = example_envelope("seed-10.1-sample-envelope.json");
    envelope["policies"]
        .as_object_mut()
        .unwrap()
        .remove("hitlRequiredFor");
    envelope["constraints"] = serde_json::json!({
        "mustInclude": ["audit trail"], "language": "de", "platform": "linkedin", "apiKey": "sk-secret"
    });
    envelope["policies"]["planner"] = serde_json::json!({"directives": {"tone": "plain"}});
    envelope["outputContract"]["hints"] = serde_json::json!({"maxLength": 280});
    settle(&services, &runner, &envelope, RunStatus::Completed).await;
    let asked = model.asked.lock().unwrap().clone();
    let constraints_of = |schema: &str| {
        asked
            .iter()
            .find(|(name, _)| name == schema)
            .unwrap_or_else(|| panic!("{schema} was asked: {asked:?}"))
            .1["callerConstraints"]
            .clone()
    };
    let strategy = constraints_of("StrategyManager_writerBrief");
    let writer = constraints_of("ContentGenerator_copyVariants");
    for seen in [&strategy, &writer] {
        assert_eq!(seen["mustInclude"], serde_json::json!(["audit trail"]));
        assert_eq!(seen["language"], "de");
        assert_eq!(seen["platform"], "linkedin");
        assert_eq!(
            seen["persona"], "marketer",
            "the legacy persona, normalised"
        );
        assert_eq!(seen["directives"], serde_json::json!({"tone": "plain"}));
        assert_ne!(
            seen["apiKey"], "sk-secret",
            "a secret never reaches a model"
        );
    }
    assert_eq!(
        writer["outputHints"],
        serde_json::json!({"maxLength": 280}),
        "the node producing the contract's facet gets its hints"
    );
    assert!(
        strategy.get("outputHints").is_none(),
        "a node producing nothing the contract asks for does not"
    );
}

fn plan_updates(frames: &[EventFrame]) -> Vec<serde_json::Value> {
    frames
        .iter()
        .filter(|frame| frame.event_type.as_str() == "plan_updated")
        .map(|frame| frame.payload_value().unwrap())
        .collect()
}

fn warnings_coded(frames: &[EventFrame], code: &str) -> usize {
    frames
        .iter()
        .filter(|frame| {
            frame.event_type.as_str() == "warning"
                && frame.payload.as_ref().unwrap()["code"] == code
        })
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_quality_threshold_alone_plans_a_reviewer_and_a_low_score_revises() {
    let model = Arc::new(SchemaShapedModel::default());
    model.review_scores.lock().unwrap().extend([0.3, 0.9]);
    let (services, runner) = orchestrator_with(model.clone());
    let mut envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    envelope["constraints"] = serde_json::json!({"qualityThreshold": 0.8, "executionDepth": 2});
    let run = services.runs.submit("t", &envelope).await.unwrap();
    let status = runner.run_until_settled("t", &run.run_id).await.unwrap();
    let frames = frames_of(&services, &run.run_id).await;
    assert_eq!(
        status,
        RunStatus::Completed,
        "{:#?}",
        frames
            .iter()
            .filter(
                |f| ["error", "node_error", "validation_error", "plan_rejected"]
                    .contains(&f.event_type.as_str())
            )
            .collect::<Vec<_>>()
    );
    let planned = frames
        .iter()
        .find(|frame| frame.event_type.as_str() == "plan_generated")
        .unwrap();
    let capabilities: Vec<&str> = planned.payload.as_ref().unwrap()["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| node["capabilityId"].as_str().unwrap())
        .collect();
    assert!(
        capabilities.contains(&"QualityAssurance.contentReview"),
        "a reviewer is planned for the threshold: {capabilities:?}"
    );
    let updates = plan_updates(&frames);
    assert_eq!(updates.len(), 1, "one revision");
    assert_eq!(updates[0]["trigger"]["kind"], "quality_below_threshold");
    let complete = frames.last().unwrap().payload_value().unwrap();
    assert_eq!(complete["quality"]["passed"], true, "{complete}");
    // The version the revision replaced is kept beside the run (what
    // `GET /runs/{id}` lists in `planVersions` before the current one).
    let superseded = services
        .runs
        .superseded_plans("t", &run.run_id)
        .await
        .unwrap();
    let versions: Vec<u32> = superseded.iter().map(|plan| plan.plan_version).collect();
    assert_eq!(versions, [1]);
    let state = services
        .runs
        .load("t", &run.run_id)
        .await
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(state.plan.unwrap().plan_version, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_must_include_term_revises_the_draft_and_is_said_when_still_missing() {
    // Under a quality loop: the draft scores well but lacks the term, so it
    // is revised with what it failed; the revision has it.
    let model = Arc::new(SchemaShapedModel {
        revised_with: Some("audit trail"),
        ..SchemaShapedModel::default()
    });
    let (services, runner) = orchestrator_with(model.clone());
    let mut envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    envelope["constraints"] = serde_json::json!({"qualityThreshold": 0.5, "executionDepth": 2, "mustInclude": ["Audit Trail"]});
    let run = settle(&services, &runner, &envelope, RunStatus::Completed).await;
    let frames = frames_of(&services, &run.run_id).await;
    let updates = plan_updates(&frames);
    assert_eq!(updates.len(), 1, "one revision");
    let rationale = updates[0]["rationale"].as_str().unwrap_or_default();
    assert!(
        rationale.contains("mustInclude `Audit Trail` is missing"),
        "{rationale}"
    );
    let revised = model
        .asked
        .lock()
        .unwrap()
        .iter()
        .filter(|(schema, _)| schema == "ContentGenerator_copyVariants")
        .nth(1)
        .unwrap()
        .1
        .clone();
    assert_eq!(
        revised["revisionNotes"]["unmet"],
        serde_json::json!(["mustInclude `Audit Trail` is missing"])
    );
    let output = &frames.last().unwrap().payload.as_ref().unwrap()["output"];
    assert!(output.to_string().contains("audit trail"), "{output}");
    assert_eq!(warnings_coded(&frames, "must_include_missing"), 0);

    // With no quality loop nothing can revise: the missing term is said.
    let (services, runner) = orchestrator();
    let mut envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    envelope["constraints"] = serde_json::json!({"mustInclude": ["a term nobody writes"]});
    let run = settle(&services, &runner, &envelope, RunStatus::Completed).await;
    let frames = frames_of(&services, &run.run_id).await;
    assert_eq!(warnings_coded(&frames, "must_include_missing"), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn max_turns_bounds_the_model_turns_of_the_runs_nodes() {
    // Unbounded, the sample takes `needed` model turns.
    let unbounded = Arc::new(SchemaShapedModel::default());
    let (services, runner) = orchestrator_with(unbounded.clone());
    let mut envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    settle(&services, &runner, &envelope, RunStatus::Completed).await;
    let needed = unbounded.asked.lock().unwrap().len();
    assert!(needed >= 2, "{needed}");

    // One fewer: the run stops before the turn past the bound.
    let model = Arc::new(SchemaShapedModel::default());
    let (services, runner) = orchestrator_with(model.clone());
    envelope["constraints"] = serde_json::json!({"maxTurns": needed - 1});
    let run = settle(&services, &runner, &envelope, RunStatus::Failed).await;
    assert_eq!(
        model.asked.lock().unwrap().len(),
        needed - 1,
        "no turn past the bound"
    );
    let frames = frames_of(&services, &run.run_id).await;
    let error = frames.last().unwrap();
    assert_eq!(error.event_type.as_str(), "error");
    assert_eq!(error.payload.as_ref().unwrap()["code"], "max_turns_reached");
    let message = error.message.clone().unwrap_or_default();
    assert!(
        message.contains(&format!("took {} model turns", needed - 1))
            && message.contains(&format!("maxTurns is {}", needed - 1)),
        "{message}"
    );

    // Exactly enough: it completes.
    envelope["constraints"] = serde_json::json!({"maxTurns": needed});
    settle(&services, &runner, &envelope, RunStatus::Completed).await;
}

fn advisory_warnings(frames: &[EventFrame]) -> Vec<serde_json::Value> {
    frames
        .iter()
        .filter(|frame| {
            frame.event_type.as_str() == "warning"
                && frame.payload.as_ref().unwrap()["code"] == "advisory_field"
        })
        .map(|frame| frame.payload.as_deref().unwrap().clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn diversity_varies_a_list_goal_and_is_said_when_nothing_can_vary_and_a_mode_baton_cannot_enforce_is_refused()
 {
    let (services, runner) = orchestrator();
    // A list goal facet with no fixed count: diversity plans three variants
    // of it (minItems 2, no maxItems), joined; nothing is advisory.
    let mut envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    envelope["policies"]["planner"] =
        serde_json::json!({"optimisation": {"objective": "diversity"}});
    let run = settle(&services, &runner, &envelope, RunStatus::Completed).await;
    let frames = frames_of(&services, &run.run_id).await;
    assert!(advisory_warnings(&frames).is_empty());
    let plan = &frames
        .iter()
        .find(|frame| frame.event_type.as_str() == "plan_generated")
        .unwrap()
        .payload
        .as_deref()
        .unwrap();
    assert_eq!(plan["branchCount"], 3, "{plan}");
    let stored = services.runs.load("t", &run.run_id).await.unwrap().unwrap();
    let output = stored.state.output.unwrap();
    assert_eq!(
        output["copyVariants"].as_array().unwrap().len(),
        3,
        "{output}"
    );

    // Without it, the contract's two are not varied.
    let plain = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    let run = settle(&services, &runner, &plain, RunStatus::Completed).await;
    let frames = frames_of(&services, &run.run_id).await;
    let plan = &frames
        .iter()
        .find(|frame| frame.event_type.as_str() == "plan_generated")
        .unwrap()
        .payload
        .as_deref()
        .unwrap();
    assert_eq!(plan["branchCount"], 0, "{plan}");

    // A contract with no list property: nothing to vary, and it is said.
    let mut envelope =
        baton_test_support::plain_example_envelope("positioning-recommendation.json");
    envelope["policies"]["planner"] =
        serde_json::json!({"optimisation": {"objective": "diversity"}});
    let run = settle(&services, &runner, &envelope, RunStatus::Completed).await;
    let advisory = advisory_warnings(&frames_of(&services, &run.run_id).await);
    assert_eq!(advisory.len(), 1);
    assert_eq!(
        advisory[0]["field"],
        "$.policies.planner.optimisation.objective"
    );

    let mut envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    envelope["outputContract"]["mode"] = serde_json::json!("json_object");
    match services.runs.submit("t", &envelope).await {
        Err(baton_runtime::error::RuntimeError::InvalidInput { path, .. }) => {
            assert_eq!(path, "$.outputContract.mode")
        }
        other => panic!("refused, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn identity_instruction_and_caller_fields_act_as_documented() {
    let model = Arc::new(SchemaShapedModel::default());
    let (services, runner) = orchestrator_with(model.clone());
    let mut envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    envelope["$schema"] = serde_json::json!("https://baton.dev/schemas/envelope.schema.json");
    envelope["correlationId"] = serde_json::json!("corr-from-the-caller");
    envelope["threadId"] = serde_json::json!("thread-from-the-caller");
    envelope["metadata"] = serde_json::json!({"campaign": "q4", "owner": "ana"});
    envelope["specialInstructions"] = serde_json::json!(["Name the audit trail."]);
    envelope["constraints"] = serde_json::json!({"acceptanceCriteria": ["under 100 words"]});
    let run = services.runs.submit("t", &envelope).await.unwrap();
    assert_eq!(run.thread_id, "thread-from-the-caller");
    assert_eq!(
        runner.run_until_settled("t", &run.run_id).await.unwrap(),
        RunStatus::Completed
    );
    let frames = frames_of(&services, &run.run_id).await;
    assert!(
        frames
            .iter()
            .all(|frame| frame.correlation_id == "corr-from-the-caller"),
        "every frame carries the caller's correlation id"
    );
    let state = services
        .runs
        .load("t", &run.run_id)
        .await
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(
        serde_json::to_value(&state.envelope.metadata).unwrap(),
        serde_json::json!({"campaign": "q4", "owner": "ana"}),
        "metadata is kept as sent (the snapshot returns it)"
    );
    for (_, message) in model.asked.lock().unwrap().iter() {
        assert_eq!(
            message["specialInstructions"],
            serde_json::json!(["Name the audit trail."])
        );
        assert_eq!(
            message["acceptanceCriteria"],
            serde_json::json!(["under 100 words"])
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_quality_threshold_no_reviewer_can_check_is_said_at_planning_and_at_the_end() {
    let (services, runner) = orchestrator();
    let mut envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    envelope["constraints"] = serde_json::json!({"qualityThreshold": 0.8});
    // Every reviewer of the registry is forbidden.
    envelope["policies"]["planner"] = serde_json::json!({"selection": {"forbid": [
        "QualityAssurance.contentReview", "ReviewPanel.copyReview", "JudgePanel.evaluate",
        "director.PositioningReview", "director.SocialPostingReview"]}});
    let run = settle(&services, &runner, &envelope, RunStatus::Completed).await;
    let frames = frames_of(&services, &run.run_id).await;
    let planned = frames
        .iter()
        .find(|frame| frame.event_type.as_str() == "plan_generated")
        .unwrap();
    let advisories = planned.payload.as_ref().unwrap()["infos"].to_string()
        + &planned.payload.as_ref().unwrap()["warnings"].to_string();
    assert!(
        advisories.contains("constraints.qualityThreshold"),
        "the plan says the threshold is not checked: {advisories}"
    );
    assert_eq!(warnings_coded(&frames, "specialist_skipped"), 1);
}
