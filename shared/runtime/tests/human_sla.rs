//! A human task past its SLA fails the run, through the real services on
//! the in-memory ports, with a clock the test moves: no process sleeps
//! through the SLA. The timer is a delayed step message; delivered early it
//! changes nothing (the worker sends it back with its remaining delay),
//! delivered once due it fails the run with a recorded rationale.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, StepCommand, TokenUsage};
use baton_runtime::clock::OffsetClock;
use baton_runtime::error::LlmError;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::{Clock, LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::services::{OrchestratorSettings, StepOutcome};
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use serde_json::json;
use tokio::sync::mpsc::UnboundedSender;

/// Test double for the model endpoint: answers with an instance of the
/// requested schema.
struct SchemaModel;

#[async_trait]
impl LlmProvider for SchemaModel {
    fn model_name(&self) -> String {
        "schema".into()
    }
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        Ok(ModelAnswer {
            content: scripted_llm::generate_instance(&request.output_schema, "answer").to_string(),
            usage: TokenUsage::default(),
            model: "schema".into(),
        })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_human_task_past_its_sla_fails_the_run_without_anyone_waiting() {
    let clock = Arc::new(OffsetClock::new());
    let queue = Arc::new(InMemoryStepQueue::new());
    let built = TestServices::with_model(Arc::new(SchemaModel))
        .clock(clock.clone())
        .queue(queue.clone())
        .settings(OrchestratorSettings {
            human_task_timeout: Duration::from_secs(600),
            ..OrchestratorSettings::default()
        })
        .build();
    let services = built.services;
    let submitted = services
        .runs
        .submit(
            "t",
            &json!({
                "objective": "Agree the final positioning with the director.",
                "inputs": {"positioning_context": {"company_name": "Acme", "company_url": "https://acme.example",
                                                    "competing_factors": ["reliability"]}},
                "outputContract": {"schema": {"type": "object", "required": ["positioning"],
                                              "properties": {"positioning": {"type": "object"}}}},
                // No catch-all: past its SLA the task fails the run instead
                // of going to the shipped one (shared/runtime/tests/fallback.rs).
                "policies": {"fallbackCapability": "none"}
            }),
        )
        .await
        .unwrap();
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue: queue.clone(),
    };
    let status = runner
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::AwaitingHuman);
    assert_eq!(
        queue.waiting_timers(),
        1,
        "the SLA waits in the queue; the drain returned without waiting for it"
    );
    let task = services.people.pending_tasks("t", None).await.unwrap()[0].clone();
    let due = task.due_at.clone().expect("the task carries its SLA");

    // The timer's message, as the outbox holds it until its step consumes it.
    let far_future = clock.now().plus(Duration::from_secs(86_400));
    let timer = built
        .store
        .quiet_outbox(far_future, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|entry| entry.message)
        .find(|message| matches!(message.command, StepCommand::FireTimer { .. }))
        .expect("the timer message is in the outbox");
    assert_eq!(timer.not_before.map(|due| due.rfc3339()), Some(due.clone()));

    // Early: nothing changes, the worker is told how long is left.
    let early = services.steps.handle(&timer).await.unwrap();
    let StepOutcome::NotYetDue { remaining } = early else {
        panic!("expected NotYetDue, got {early:?}")
    };
    assert!(remaining > Duration::from_secs(590) && remaining <= Duration::from_secs(600));
    let still = services
        .runs
        .load("t", &submitted.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(still.state.status(), RunStatus::AwaitingHuman);

    // Past the SLA (the clock moves; nobody sleeps): the run fails, saying why.
    clock.advance(Duration::from_secs(601));
    let fired = services.steps.handle(&timer).await.unwrap();
    assert!(matches!(fired, StepOutcome::Committed { .. }), "{fired:?}");
    let failed = services
        .runs
        .load("t", &submitted.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(failed.state.status(), RunStatus::Failed);
    let failure = failed.state.failure.unwrap();
    assert_eq!(failure.code.as_str(), "human_task_timed_out");
    assert!(failure.message.contains(&due), "{}", failure.message);
    let frames = services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap();
    let last: Vec<&str> = frames
        .iter()
        .rev()
        .take(4)
        .map(|frame| frame.event_type.as_str())
        .collect();
    assert_eq!(last, ["error", "metrics", "metrics", "node_error"]);
    baton_test_support::assert_frames_match_schemas(&frames);
    // A second delivery of the timer finds nothing to do.
    assert_eq!(
        services.steps.handle(&timer).await.unwrap(),
        StepOutcome::Stale
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
