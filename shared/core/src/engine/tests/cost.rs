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
        .filter_map(|frame| frame.payload.as_deref())
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
    assert_eq!(state.status(), RunStatus::Failed);
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

fn budgeted(constraints: serde_json::Value) -> RunState {
    let envelope = TaskEnvelope::parse_value(&json!({
        "objective": "o",
        "inputs": {"notes": {"text": "n"}},
        "constraints": constraints,
        "outputContract": {"schema": {"type": "object", "required": ["draft"], "properties": {"draft": {"type": "object"}}}}
    }))
    .unwrap();
    start_run(identity(), envelope, NOW, 3).state
}

fn frames_coded<'d>(decision: &'d Decision, kind: &str, code: &str) -> Vec<&'d EventDraft> {
    decision
        .events
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

#[test]
fn a_cost_budget_warns_at_80_percent_and_stops_the_next_model_call() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    // The scripted model costs $1 per million prompt tokens: node_1's
    // 1,600 tokens spend $0.0016 of a $0.0015 budget (twice what half
    // the run's two calls would need).
    let planned = step(
        budgeted(json!({"maxCostUsd": 0.0015})),
        Observed::Plan,
        &context,
    );
    let briefed = step(
        planned.state,
        Observed::Answer {
            node: "node_1",
            attempt: 1,
            content: json!({"brief": {"text": "b"}}).to_string(),
            tokens: 1_600,
        },
        &context,
    );
    let warned = frames_coded(&briefed, "warning", "budget_nearly_spent");
    assert_eq!(warned.len(), 1, "{:?}", event_types(&briefed));
    let budget = &warned[0].payload.as_ref().unwrap()["budget"];
    assert_eq!(budget["field"], "$.constraints.maxCostUsd");
    assert_eq!(budget["spent"], 0.0016);
    assert_eq!(briefed.state.status(), RunStatus::Running);
    // node_2's model call is not made: the run ends, naming the budget.
    let StepAdvance::Decided(stopped) =
        begin_step(&briefed.state, &node_command("node_2", 1), NOW, &context).unwrap()
    else {
        panic!("no model call once the budget is spent")
    };
    assert_frames_match_schemas(&stopped.events);
    assert_eq!(stopped.state.status(), RunStatus::Failed);
    assert_eq!(
        stopped.state.failure.as_ref().unwrap().code,
        FailureCode::BudgetExceeded
    );
    let error = frames_coded(&stopped, "error", "budget_exceeded");
    assert_eq!(error.len(), 1);
    let payload = error[0].payload.as_ref().unwrap();
    assert_eq!(payload["budget"]["limit"], 0.0015);
    assert_eq!(payload["budget"]["spent"], 0.0016);
    assert_eq!(payload["budget"]["nodeId"], "node_2");
    assert!(
        error[0]
            .message
            .as_deref()
            .unwrap()
            .contains("node_2's model call was not made"),
        "{:?}",
        error[0].message
    );
    // Under the budget, nothing is said.
    let roomy = step(
        step(
            budgeted(json!({"maxCostUsd": 1.0})),
            Observed::Plan,
            &context,
        )
        .state,
        Observed::Answer {
            node: "node_1",
            attempt: 1,
            content: json!({"brief": {"text": "b"}}).to_string(),
            tokens: 1_600,
        },
        &context,
    );
    assert!(frames_coded(&roomy, "warning", "budget_nearly_spent").is_empty());
}

#[test]
fn a_duration_budget_is_two_durable_timers_and_a_check_before_each_call() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let planned = step(
        budgeted(json!({"maxDurationSeconds": 2})),
        Observed::Plan,
        &context,
    );
    let due: Vec<(String, Option<String>)> = planned
        .outbox
        .iter()
        .map(|message| {
            (
                message.message_id.clone(),
                message.not_before.map(|at| at.rfc3339()),
            )
        })
        .collect();
    assert!(
        due.contains(&(
            "run:timer:deadline:80".into(),
            Some(NOW.plus(std::time::Duration::from_millis(1_600)).rfc3339())
        )),
        "{due:?}"
    );
    assert!(
        due.contains(&(
            "run:timer:deadline".into(),
            Some(NOW.plus(std::time::Duration::from_secs(2)).rfc3339())
        )),
        "{due:?}"
    );
    let fire = |state: &RunState, timer_id: &str, seconds: f64| {
        let StepAdvance::Decided(decision) = begin_step(
            state,
            &StepCommand::FireTimer {
                timer_id: timer_id.into(),
            },
            NOW.plus(std::time::Duration::from_secs_f64(seconds)),
            &context,
        )
        .unwrap() else {
            panic!("a timer is decided without an effect")
        };
        assert_frames_match_schemas(&decision.events);
        *decision
    };
    let warned = fire(&planned.state, "deadline:80", 1.6);
    assert_eq!(
        frames_coded(&warned, "warning", "budget_nearly_spent").len(),
        1
    );
    assert_eq!(warned.state.status(), RunStatus::Running);
    // node_1's model call is in flight when the deadline passes: the run
    // ends on time, naming the node at work.
    let ended = fire(&warned.state, "deadline", 2.0);
    assert_eq!(ended.state.status(), RunStatus::Failed);
    let error = frames_coded(&ended, "error", "budget_exceeded");
    let budget = &error[0].payload.as_ref().unwrap()["budget"];
    assert_eq!(budget["field"], "$.constraints.maxDurationSeconds");
    assert_eq!(budget["spent"], 2.0);
    assert_eq!(budget["nodeId"], "node_1");
    // The node's late answer finds the run ended.
    assert!(is_stale(&ended.state, &node_command("node_1", 1)));
    // Without the timer (a late one), the next model call is refused too.
    let StepAdvance::Decided(refused) = begin_step(
        &planned.state,
        &node_command("node_1", 1),
        NOW.plus(std::time::Duration::from_secs(3)),
        &context,
    )
    .unwrap() else {
        panic!("no model call past the deadline")
    };
    assert_eq!(frames_coded(&refused, "error", "budget_exceeded").len(), 1);
}
