//! Cost and usage in the stream: `node_complete` carries the node's tokens,
//! model, duration and cost (the registry's price table); a node's
//! `metrics` carries the run's totals so far; the run's `metrics` comes at
//! every ending, a failure included; a model the table does not price is
//! warned about once per run and has no cost.

use serde_json::json;

use super::narration::node_step_answered_by;
use super::quality::{reviewed_run_for_narration, reviewing_registry};
use super::*;

fn payload_of<'a>(frames: &'a [EventDraft], event_type: &str) -> Vec<&'a serde_json::Value> {
    frames
        .iter()
        .filter(|frame| frame.event_type.as_str() == event_type)
        .filter_map(|frame| frame.payload.as_ref())
        .collect()
}

#[test]
fn node_complete_and_metrics_carry_usage_model_duration_and_cost() {
    let registry = reviewing_registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let (_, planned) = reviewed_run_for_narration(&context);
    let (drafting, drafted, _) = node_step_answered_by(
        planned,
        "node_1",
        json!({"draft": {"text": "d"}}),
        1500,
        "scripted-2026-01-01",
        &context,
    );
    assert_frames_match_schemas(&drafting);
    let complete = payload_of(&drafting, "node_complete")[0];
    // 10 prompt tokens at $1/M + 4 completion tokens at $2/M.
    assert_eq!(
        complete["usage"],
        json!({"prompt": 10, "completion": 4, "total": 14})
    );
    assert_eq!(complete["model"], "scripted-2026-01-01");
    assert_eq!(complete["durationMs"], 1500);
    assert_eq!(complete["costUsd"], 0.000018);
    let node_metrics = payload_of(&drafting, "metrics")[0];
    assert_eq!(node_metrics["costUsd"], 0.000018);
    assert_eq!(
        node_metrics["run"],
        json!({"tokens": {"prompt": 10, "completion": 4, "total": 14}, "costUsd": 0.000018, "nodesCompleted": 1})
    );
    let (reviewing, _, _) = node_step_answered_by(
        drafted,
        "node_2",
        json!({"review": {"score": 9, "notes": "fine", "criteria": []}}),
        700,
        "scripted",
        &context,
    );
    assert_frames_match_schemas(&reviewing);
    let metrics = payload_of(&reviewing, "metrics");
    assert_eq!(metrics[0]["run"]["nodesCompleted"], 2);
    let run_metrics = metrics[1];
    assert_eq!(run_metrics["costUsd"], 0.000036);
    assert_eq!(run_metrics["tokens"]["total"], 28);
    assert!(payload_of(&reviewing, "warning").is_empty());
}

#[test]
fn an_unpriced_model_is_warned_about_once_and_has_no_cost() {
    let registry = reviewing_registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let (_, planned) = reviewed_run_for_narration(&context);
    let (drafting, drafted, _) = node_step_answered_by(
        planned,
        "node_1",
        json!({"draft": {"text": "d"}}),
        10,
        "somebody-elses-model",
        &context,
    );
    assert_frames_match_schemas(&drafting);
    let warnings = payload_of(&drafting, "warning");
    assert_eq!(
        warnings,
        [&json!({"code": "model_price_unknown", "model": "somebody-elses-model"})]
    );
    let complete = payload_of(&drafting, "node_complete")[0];
    assert_eq!(complete["model"], "somebody-elses-model");
    assert!(complete.get("costUsd").is_none(), "{complete}");
    assert_eq!(complete["usage"]["total"], 14);
    let (reviewing, _, _) = node_step_answered_by(
        drafted,
        "node_2",
        json!({"review": {"score": 9, "notes": "fine", "criteria": []}}),
        10,
        "somebody-elses-model",
        &context,
    );
    assert!(payload_of(&reviewing, "warning").is_empty(), "said once");
    let run_metrics = payload_of(&reviewing, "metrics")[1];
    assert!(run_metrics.get("costUsd").is_none(), "{run_metrics}");
    assert_eq!(run_metrics["tokens"]["total"], 28);
}

#[test]
fn a_failed_run_ends_with_its_metrics_before_the_error() {
    let registry = reviewing_registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let (_, planned) = reviewed_run_for_narration(&context);
    let answers = [
        json!({"draft": 1}),
        json!({"draft": 2}),
        json!({"draft": 3}),
    ];
    let mut state = planned;
    let mut last = Vec::new();
    for (attempt, answer) in answers.into_iter().enumerate() {
        let command = node_command("node_1", attempt as u32 + 1);
        let StepAdvance::Perform(effect) = begin_step(&state, &command, NOW, &context).unwrap()
        else {
            panic!("attempt {attempt} calls the model");
        };
        let outcome = TestOutcome::Model(Ok(ModelAnswer {
            content: answer.to_string(),
            usage: TokenUsage {
                prompt_tokens: 100,
                completion_tokens: 50,
                cached_prompt_tokens: 40,
                cache_write_prompt_tokens: 0,
            },
            model: "scripted".into(),
        }));
        let StepAdvance::Decided(decision) =
            resume_step(state, &command, &performed(&effect, outcome), NOW, &context).unwrap()
        else {
            panic!("decided");
        };
        state = decision.state;
        last = decision.events;
    }
    assert_eq!(state.status, RunStatus::Failed);
    assert_frames_match_schemas(&last);
    let types: Vec<&str> = last.iter().map(|frame| frame.event_type.as_str()).collect();
    assert_eq!(
        types,
        [
            "validation_error",
            "node_error",
            "metrics",
            "metrics",
            "error"
        ]
    );
    let node_metrics = &last[2];
    assert_eq!(node_metrics.node_id.as_deref(), Some("node_1"));
    let run_metrics = last[3].payload.as_ref().unwrap();
    assert_eq!(
        run_metrics["tokens"],
        json!({"prompt": 300, "completion": 150, "total": 450, "cached": 120})
    );
    // 180 uncached prompt tokens at $1/M + 120 cached (no cached price: $1/M) + 150 at $2/M.
    assert_eq!(run_metrics["costUsd"], 0.0006);
}
