//! An agent node's session on the real step service with the real tool
//! executors: each model turn and each tool call is its own step, the tool
//! is called over HTTP with the call's idempotency key, and a worker killed
//! after the tool ran but before its commit leaves the call to run again,
//! with the same key, while a committed call never runs again.
//!
//! Test doubles: the model endpoint (a `LlmProvider` that asks for one
//! lookup, then answers with what the lookup returned) and the tool's
//! endpoint (a local HTTP server, allow-listed as for local development).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod session_fixture;

use std::time::Duration;

use baton_core::state::run::{RunStatus, StepCommand};
use baton_core::wire::event::EventType;
use baton_runtime::ports::StepQueue;
use baton_runtime::services::StepOutcome;
use baton_test_support::assert_frames_match_schemas;
use serde_json::json;
use session_fixture::{Fixture, LookupThenAnswer, envelope, fixture, fixture_with, runner};

#[tokio::test(flavor = "multi_thread")]
async fn a_two_turn_session_calls_the_tool_over_http_and_answers_with_its_result() {
    let fixture = fixture().await;
    let submitted = fixture
        .services
        .runs
        .submit("t", &envelope())
        .await
        .unwrap();
    let status = runner(&fixture)
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Completed);

    let frames = fixture
        .services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap();
    assert_frames_match_schemas(&frames);
    let story: Vec<&str> = frames
        .iter()
        .filter(|frame| {
            let narration = matches!(frame.event_type, EventType::Phase | EventType::Handoff)
                || (frame.event_type == EventType::Metrics && frame.node_id.is_some());
            !narration
        })
        .map(|frame| frame.event_type.as_str())
        .collect();
    assert_eq!(
        story,
        [
            "start",
            "plan_requested",
            "plan_generated",
            "node_start",
            "agent_state",
            "tool_call",
            "agent_state",
            "tool_result",
            "agent_state",
            "message",
            "node_complete",
            "metrics",
            "complete"
        ]
    );
    let result = frames
        .iter()
        .find(|frame| frame.event_type == EventType::ToolResult)
        .and_then(|frame| frame.payload_value())
        .unwrap();
    assert_eq!(result["result"], json!({"fact": "facts are checked"}));

    let calls = fixture.endpoint.calls.lock().unwrap().clone();
    assert_eq!(
        calls,
        [(
            format!("{}:node_1:0:call_1", submitted.run_id),
            json!({"q": "facts"})
        )]
    );
    let sessions = fixture.model.sessions.lock().unwrap().clone();
    assert_eq!(sessions.len(), 2, "two model turns");
    assert_eq!(sessions[0].tools[0].name, "lookup");
    assert_eq!(sessions[1].turns.len(), 2, "the call and its result");
    let stored = fixture
        .services
        .runs
        .load("t", &submitted.run_id)
        .await
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(
        stored.output,
        Some(json!({"answer": {"text": "facts are checked"}}))
    );
    assert_eq!(stored.nodes["node_1"].usage.prompt_tokens, 14);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_whose_stream_restarted_warns_readers_and_streams_its_answer_once() {
    let fixture = fixture_with(LookupThenAnswer {
        restart_the_answer: true,
        ..LookupThenAnswer::default()
    })
    .await;
    let submitted = fixture
        .services
        .runs
        .submit("t", &envelope())
        .await
        .unwrap();
    let status = runner(&fixture)
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Completed);
    let frames = fixture
        .services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap();
    assert_frames_match_schemas(&frames);
    let node: Vec<_> = frames
        .iter()
        .filter(|frame| frame.node_id.as_deref() == Some("node_1"))
        .collect();
    let restart = node
        .iter()
        .position(|frame| {
            frame.event_type == EventType::Warning
                && frame.payload.as_ref().map(|payload| &payload["code"])
                    == Some(&json!("stream_restarted"))
        })
        .expect("the restart is announced to readers");
    let text = |frames: &[&baton_core::wire::event::EventFrame]| -> String {
        frames
            .iter()
            .filter(|frame| frame.event_type == EventType::Delta)
            .filter_map(|frame| frame.message.clone())
            .collect()
    };
    let answer = json!({"answer": {"text": "facts are checked"}}).to_string();
    let before = text(&node[..restart]);
    assert!(
        !before.is_empty() && answer.starts_with(&before),
        "the cut text streamed before the warning: {before}"
    );
    assert_eq!(
        text(&node[restart..]),
        answer,
        "after the warning the answer streams once, whole"
    );
}

/// The next step message on the queue that is not an early timer (a timer
/// is handled as a worker would: sent again for when it is due).
async fn next_step(fixture: &Fixture) -> baton_runtime::ports::ReceivedStep {
    loop {
        let received = fixture
            .queue
            .receive(1, Duration::ZERO)
            .await
            .unwrap()
            .into_iter()
            .next()
            .expect("a step on the queue");
        if !matches!(received.message.command, StepCommand::FireTimer { .. }) {
            return received;
        }
        let deferred = baton_runtime::workers::process_received_step(
            &fixture.services.steps,
            fixture.queue.as_ref(),
            received,
        )
        .await
        .unwrap();
        assert!(
            matches!(deferred, StepOutcome::NotYetDue { .. }),
            "{deferred:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_killed_after_the_tool_ran_leaves_the_call_to_run_again_with_the_same_key() {
    let fixture = fixture().await;
    let steps = fixture.services.steps.clone();
    let submitted = fixture
        .services
        .runs
        .submit("t", &envelope())
        .await
        .unwrap();
    // The planning step, then the node's first turn (which asks for the lookup).
    for _ in 0..2 {
        let received = next_step(&fixture).await;
        let outcome = steps.handle(&received.message).await.unwrap();
        assert!(
            matches!(outcome, StepOutcome::Committed { .. }),
            "{outcome:?}"
        );
        fixture.queue.acknowledge(&received.receipt).await.unwrap();
    }
    let tool_step = next_step(&fixture).await;
    assert!(
        matches!(tool_step.message.command, StepCommand::RunTool { .. }),
        "{:?}",
        tool_step.message
    );

    // The worker runs the tool and is killed while the answer comes back:
    // the tool ran, nothing was committed, its lease is still held.
    *fixture.endpoint.delay.lock().unwrap() = Some(Duration::from_secs(30));
    let worker = {
        let (steps, message) = (steps.clone(), tool_step.message.clone());
        tokio::spawn(async move { steps.handle(&message).await })
    };
    fixture.endpoint.arrived.notified().await;
    worker.abort();
    assert!(worker.await.unwrap_err().is_cancelled());
    *fixture.endpoint.delay.lock().unwrap() = None;

    // Redelivered while the dead worker's lease holds: busy, nothing runs.
    let busy = steps.handle(&tool_step.message).await.unwrap();
    assert!(matches!(busy, StepOutcome::Busy { .. }), "{busy:?}");
    assert_eq!(fixture.endpoint.calls.lock().unwrap().len(), 1);

    // Once the lease expires the call runs again, with the same key.
    fixture.clock.advance(Duration::from_secs(31));
    let committed = steps.handle(&tool_step.message).await.unwrap();
    assert!(
        matches!(committed, StepOutcome::Committed { .. }),
        "{committed:?}"
    );
    let calls = fixture.endpoint.calls.lock().unwrap().clone();
    let expected_key = format!("{}:node_1:0:call_1", submitted.run_id);
    assert_eq!(calls.len(), 2);
    assert!(
        calls.iter().all(|(key, _)| key == &expected_key),
        "{calls:?}"
    );

    // Its result is committed: a late duplicate of the message runs nothing.
    let duplicate = steps.handle(&tool_step.message).await.unwrap();
    assert_eq!(duplicate, StepOutcome::Stale);
    fixture.queue.acknowledge(&tool_step.receipt).await.unwrap();

    let status = runner(&fixture)
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Completed);
    assert_eq!(
        fixture.endpoint.calls.lock().unwrap().len(),
        2,
        "the committed call never ran a third time"
    );
    let tool_results = fixture
        .services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap()
        .iter()
        .filter(|frame| frame.event_type == EventType::ToolResult)
        .count();
    assert_eq!(tool_results, 1, "one result committed for the call");
}
