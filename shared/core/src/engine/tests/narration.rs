//! The narration of a run: `phase` on each change,
//! `handoff` requested when a node is dispatched and occurred when it
//! starts, a node's `metrics` after its `node_complete`, the run's `metrics`
//! with its wall time at the end; model text streamed only in the
//! generation and qa phases.

use serde_json::json;

use super::quality::{reviewed_run_for_narration, reviewing_registry};
use super::*;

/// Runs one node step the way the shell does, returning every frame it
/// writes (the claim's frames first) and the new state.
fn node_step(
    state: RunState,
    node: &'static str,
    answer: serde_json::Value,
    took: u64,
    context: &EngineContext<'_>,
) -> (Vec<EventDraft>, RunState, bool) {
    node_step_answered_by(state, node, answer, took, "scripted", context)
}

/// The same, the answer coming from `model` (10 prompt, 4 completion tokens).
pub(super) fn node_step_answered_by(
    state: RunState,
    node: &'static str,
    answer: serde_json::Value,
    took: u64,
    model: &str,
    context: &EngineContext<'_>,
) -> (Vec<EventDraft>, RunState, bool) {
    let command = node_command(node, 1);
    let StepAdvance::Perform(mut effect) = begin_step(&state, &command, NOW, context).unwrap()
    else {
        panic!("{node} calls the model");
    };
    let Effect::CallModel(call) = &effect else {
        panic!("{node} calls the model");
    };
    let streams = call.stream_deltas;
    let mut frames = effect.take_claim_frames();
    let outcome = TestOutcome::Model(Ok(ModelAnswer {
        content: answer.to_string(),
        usage: TokenUsage {
            prompt_tokens: 10,
            completion_tokens: 4,
            cached_prompt_tokens: 0,
            cache_write_prompt_tokens: 0,
        },
        model: model.into(),
    }));
    let later = Instant::from_unix_millis(NOW.unix_millis() + took);
    let StepAdvance::Decided(decision) = resume_step(
        state,
        &command,
        &performed(&effect, outcome),
        later,
        context,
    )
    .unwrap() else {
        panic!("decided");
    };
    frames.extend(decision.events);
    (frames, decision.state, streams)
}

fn described(frames: &[EventDraft]) -> Vec<String> {
    frames
        .iter()
        .map(|frame| {
            let payload = frame.payload_value().unwrap_or_default();
            match frame.event_type.as_str() {
                "phase" => format!("phase:{}", payload["phase"].as_str().unwrap()),
                "handoff" => format!(
                    "handoff:{}:{}->{}",
                    payload["status"].as_str().unwrap(),
                    payload["from"].as_str().unwrap(),
                    payload["to"].as_str().unwrap()
                ),
                "metrics" if frame.node_id.is_some() => format!(
                    "metrics:{}:{}ms:{}tokens",
                    frame.node_id.as_deref().unwrap(),
                    payload["durationMs"],
                    payload["tokens"]["total"]
                ),
                other => other.to_string(),
            }
        })
        .collect()
}

#[test]
fn narration_follows_the_run() {
    let registry = reviewing_registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let (opening, planned) = reviewed_run_for_narration(&context);
    assert_frames_match_schemas(&opening);
    assert_eq!(
        described(&opening),
        [
            "start",
            "phase:planning",
            "plan_requested",
            "plan_generated",
            "handoff:requested:orchestrator->write.draft"
        ]
    );
    let (drafting, drafted, streamed) = node_step(
        planned,
        "node_1",
        json!({"draft": {"text": "d"}}),
        1500,
        &context,
    );
    assert!(streamed, "a generation node streams its text");
    assert_frames_match_schemas(&drafting);
    assert_eq!(
        described(&drafting),
        [
            "phase:generation",
            "handoff:occurred:orchestrator->write.draft",
            "node_start",
            "node_complete",
            "metrics:node_1:1500ms:14tokens",
            "handoff:requested:write.draft->review.draft"
        ]
    );
    let (reviewing, _, streamed) = node_step(
        drafted,
        "node_2",
        json!({"review": {"score": 9, "notes": "fine", "criteria": []}}),
        700,
        &context,
    );
    assert!(streamed, "a qa node streams its text");
    assert_frames_match_schemas(&reviewing);
    assert_eq!(
        described(&reviewing),
        [
            "phase:qa",
            "handoff:occurred:write.draft->review.draft",
            "node_start",
            "node_complete",
            "metrics:node_2:700ms:14tokens",
            "phase:finalization",
            "metrics",
            "complete"
        ]
    );
    let run_metrics = reviewing[reviewing.len() - 2].payload_value().unwrap();
    assert_eq!(run_metrics["durationMs"], 700);
    assert_eq!(run_metrics["tokens"]["total"], 28);
}

#[test]
fn analysis_nodes_do_not_stream_their_text() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let mut state = step(started_run(), Observed::Plan, &context).state;
    if let Some(plan) = state.plan.as_mut() {
        let plan = Arc::make_mut(plan);
        if let Some(node) = plan.nodes.iter_mut().find(|node| node.node_id == "node_1") {
            node.kind = crate::contracts::capability::NodeKind::Structuring;
        }
    }
    let (frames, _, streamed) = node_step(
        state,
        "node_1",
        json!({"brief": {"text": "b"}}),
        10,
        &context,
    );
    assert!(!streamed, "an analysis node's text is not streamed");
    assert_eq!(described(&frames)[0], "phase:analysis");
}
