//! The counters read off committed frames (`telemetry::ObservedRunStore`
//! around the in-memory store): a completed run and a run held for an
//! approval counted in the Prometheus text, node durations by capability,
//! the CloudWatch EMF lines each commit hands to the sink, and plan reviews
//! counted by verdict.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_runtime::error::LlmError;
use baton_runtime::memory::{InMemoryRunStore, InMemoryStepQueue};
use baton_runtime::observe::telemetry::{ObservedRunStore, RunCounters, emf_lines};
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

/// Test double for the model endpoint: schema-shaped answers.
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
        Ok(ModelAnswer {
            content: scripted_llm::generate_instance(&request.output_schema, "specialist")
                .to_string(),
            usage: TokenUsage {
                prompt_tokens: 100,
                completion_tokens: 20,
                cached_prompt_tokens: 0,
                cache_write_prompt_tokens: 0,
            },
            model: "schema-shaped".into(),
        })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn committed_frames_become_counters_histograms_and_emf_lines() {
    let counters = Arc::new(RunCounters::default());
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink_lines = lines.clone();
    let store = Arc::new(
        ObservedRunStore::new(Arc::new(InMemoryRunStore::new()), counters.clone()).with_sink(
            Arc::new(move |seen| {
                sink_lines.lock().unwrap().extend(emf_lines(
                    seen,
                    baton_core::basics::instant::Instant::from_unix_millis(1_000),
                ));
            }),
        ),
    );
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(Arc::new(SchemaShapedModel))
        .store(store.clone())
        .queue(queue.clone())
        .build()
        .services;
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    let envelope = baton_test_support::plain_example_envelope("seed-10.1-sample-envelope.json");
    let completed = services.runs.submit("t", &envelope).await.unwrap();
    assert_eq!(
        runner
            .run_until_settled("t", &completed.run_id)
            .await
            .unwrap(),
        RunStatus::Completed
    );
    let mut gated = envelope.clone();
    gated["policies"]["runtime"] = json!([{"id": "gate", "trigger": {"kind": "onStart"}, "action": {"type": "hitl", "rationale": "Go?"}}]);
    let held = services.runs.submit("t", &gated).await.unwrap();
    assert_eq!(
        runner.run_until_settled("t", &held.run_id).await.unwrap(),
        RunStatus::AwaitingHitl
    );

    let text = counters.prometheus_text();
    for expected in [
        "baton_planner_requests_total 2",
        "baton_plans_generated_total 2",
        "baton_policy_triggers_total{action=\"hitl\"} 1",
        "baton_hitl_requests_total{kind=\"approval\"} 1",
        "baton_runs_ended_total{status=\"completed\"} 1",
        "baton_node_duration_ms_count{capability=\"StrategyManager.writerBrief\"} 1",
        "baton_node_duration_ms_count{capability=\"ContentGenerator.copyVariants\"} 1",
        "baton_node_duration_ms_bucket{capability=\"ContentGenerator.copyVariants\",le=\"+Inf\"} 1",
        // The ended run's two model nodes, 120 tokens each, both the work.
        "baton_model_tokens_total{operation=\"execution\"} 240",
        // Runs moved to a status, the held one's `awaiting_hitl` included.
        "baton_run_status_total{status=\"completed\"} 1",
        "baton_run_status_total{status=\"awaiting_hitl\"} 1",
        // The specification's names, as aliases of the same counts.
        "flex_run_status_total{status=\"awaiting_hitl\"} 1",
        "flex_run_status_total{status=\"completed\"} 1",
        "flex_planner_requests_total 2",
        "flex_planner_generated_total 2",
        "flex_policy_triggers_total{action=\"hitl\"} 1",
        "flex_hitl_requests_total{kind=\"approval\"} 1",
        "flex_node_duration_ms_count{capabilityId=\"StrategyManager.writerBrief\"} 1",
    ] {
        assert!(
            text.contains(expected),
            "`{expected}` missing from:\n{text}"
        );
    }
    assert!(
        !text.contains("runs_ended_total{status=\"awaiting"),
        "a held run has not ended:\n{text}"
    );

    let lines = lines.lock().unwrap();
    let parsed: Vec<Value> = lines
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let durations: Vec<&Value> = parsed
        .iter()
        .filter(|line| line.get("NodeDuration").is_some())
        .collect();
    assert_eq!(durations.len(), 2, "{lines:?}");
    for line in &durations {
        let metrics = &line["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(metrics["Namespace"], "Baton");
        assert_eq!(metrics["Dimensions"], json!([["capability"]]));
        assert_eq!(
            metrics["Metrics"][0],
            json!({"Name": "NodeDuration", "Unit": "Milliseconds"})
        );
        assert_eq!(
            metrics["Metrics"][1],
            json!({"Name": "flex.node.duration_ms", "Unit": "Milliseconds"})
        );
        assert!(line["capability"].is_string() && line["NodeDuration"].is_u64());
    }
    // An alias is a second metric name of the same EMF line.
    let requests = parsed
        .iter()
        .find(|line| line.get("PlannerRequests").is_some())
        .unwrap();
    assert_eq!(
        requests["_aws"]["CloudWatchMetrics"][0]["Metrics"],
        json!([{"Name": "PlannerRequests", "Unit": "Count"}, {"Name": "flex.planner.requests", "Unit": "Count"}])
    );
    assert_eq!(requests["flex.planner.requests"], 1);
    assert!(
        parsed
            .iter()
            .any(|line| line["flex.run.status"] == 1 && line["status"] == "awaiting_hitl")
    );
    let ended: Vec<&Value> = parsed
        .iter()
        .filter(|line| line.get("RunsEnded").is_some())
        .collect();
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0]["status"], "completed");
    let tokens: Vec<&Value> = parsed
        .iter()
        .filter(|line| line.get("ModelTokens").is_some())
        .collect();
    assert_eq!(tokens.len(), 1, "{lines:?}");
    assert_eq!(tokens[0]["operation"], "execution");
    assert_eq!(tokens[0]["ModelTokens"], 240);
}

#[test]
fn plans_drafted_for_review_and_their_reviews_are_counted_by_verdict() {
    use baton_core::wire::event::{EventDraft, EventType};
    use baton_runtime::observe::telemetry::{Observation, observations};
    let at = "2026-11-26T00:00:00.000Z";
    let review = |verdict: &str| {
        EventDraft::new(EventType::PlanReview, at, 1)
            .node("node_1")
            .payload(json!({"verdict": verdict, "notes": "", "plan": {}}))
    };
    let drafted = EventDraft::new(EventType::PlanReadyForReview, at, 1).node("node_1");
    let seen = observations(
        None,
        &[drafted, review("approved"), review("needs_changes")],
    );
    let counted: Vec<(&str, Option<(&str, &str)>)> = seen
        .iter()
        .map(|observation| match observation {
            Observation::Count { name, label } => (
                *name,
                label.as_ref().map(|(key, value)| (*key, value.as_str())),
            ),
            Observation::NodeDuration { .. } | Observation::ModelTokens { .. } => {
                panic!("no node or run ended: {observation:?}")
            }
        })
        .collect();
    assert_eq!(
        counted,
        [
            ("plans_ready_for_review", None),
            ("plan_reviews", Some(("verdict", "approved"))),
            ("plan_reviews", Some(("verdict", "needs_changes"))),
        ]
    );
}

#[test]
fn counters_naming_only_the_registry_never_name_a_tenants_registration() {
    let counters = RunCounters::naming_only(["ContentGenerator.copyVariants".to_string()]);
    counters.record(&[
        baton_runtime::observe::telemetry::Observation::NodeDuration {
            capability: "ContentGenerator.copyVariants".into(),
            millis: 12,
        },
        baton_runtime::observe::telemetry::Observation::NodeDuration {
            capability: "acme.secretWriter".into(),
            millis: 30,
        },
    ]);
    let text = counters.prometheus_text();
    assert!(
        text.contains("capability=\"ContentGenerator.copyVariants\""),
        "{text}"
    );
    assert!(text.contains("capability=\"registered\""), "{text}");
    assert!(!text.contains("acme.secretWriter"), "{text}");
}
