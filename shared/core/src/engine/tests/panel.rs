//! Panel nodes on the step engine: one step per judge and round, the round
//! closing when every judge answered or its timer fired, discussion while
//! the scores disagree, the consensus as the node's output and as the
//! revision loop's quality score. No I/O; every frame checked against its
//! schema.

use serde_json::{Value, json};

use super::*;
use crate::contracts::panels::round_timer_id;

fn panel_registry() -> Registry {
    let mut registry = Registry::default();
    super::price_the_scripted_model(&mut registry);
    let text =
        json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}});
    let verdict =
        json!({"type": "object", "required": ["consensus", "transcript", "individualResults"]});
    for (name, schema, direction) in [
        ("notes", &text, FacetDirection::Bidirectional),
        ("draft", &text, FacetDirection::Bidirectional),
        ("verdict", &verdict, FacetDirection::Output),
    ] {
        registry
            .add_facet(
                Facet {
                    name: name.into(),
                    title: name.into(),
                    description: name.into(),
                    schema: schema.clone(),
                    semantics: String::new(),
                    direction,
                    required_by_default: true,
                    drives_revisions: false,
                    merge: Default::default(),
                    widget: None,
                    metadata: Map::new(),
                },
                "test",
            )
            .unwrap();
    }
    let judge = |id: &str| json!({"id": id, "capabilities": {"systemPrompt": format!("You are judge {id}.")}});
    for capability in [
        json!({"capabilityId": "write.draft", "agentType": "ai", "version": "1", "displayName": "w", "summary": "w",
               "inputContract": ["notes"], "outputContract": ["draft"]}),
        json!({"capabilityId": "panel.draft", "agentType": "ai", "version": "1", "displayName": "p", "summary": "p",
               "kind": "validation", "inputContract": ["draft"], "outputContract": ["verdict"],
               "panel": {"judges": [judge("j1"), judge("j2"), judge("j3")],
                         "config": {"maxDiscussionRounds": 1, "roundTimeout": 30000, "consensusAlgorithm": "simple_average",
                                    "enableDiscussion": true, "convergenceThreshold": 1.0, "outlierDetection": false},
                         "criteria": ["clear"]},
               "qualityScore": {"pointer": "/verdict/consensus/finalScore", "scale": 10}}),
    ] {
        registry
            .add_capability(serde_json::from_value(capability).unwrap(), "test")
            .unwrap();
    }
    registry
}

/// A run whose draft is written; the panel node (`node_2`) is scheduled.
fn drafted(depth: u32, context: &EngineContext<'_>) -> RunState {
    let envelope = TaskEnvelope::parse_value(&json!({
        "objective": "o",
        "inputs": {"notes": {"text": "n"}},
        "constraints": {"qualityThreshold": 0.8, "executionDepth": depth, "acceptanceCriteria": ["under 100 words"]},
        "policies": {"planner": {"selection": {"require": ["panel.draft"]}}},
        "outputContract": {"schema": {"type": "object", "required": ["draft"], "properties": {"draft": {"type": "object"}}}}
    }))
    .unwrap();
    let started = start_run(identity(), envelope, NOW, 3).state;
    let planned = step(started, Observed::Plan, context);
    let written = step(
        planned.state,
        answer("node_1", 1, json!({"draft": {"text": "d1"}})),
        context,
    );
    assert_eq!(outbox(&written), ["run:node_2:1"]);
    written.state
}

fn judge_command(attempt: u32, round: u32, judge: &str) -> StepCommand {
    StepCommand::AskJudge {
        node_id: "node_2".into(),
        attempt,
        round,
        judge_id: judge.into(),
    }
}

/// What judge `judge` is asked in `round` of attempt `attempt` (its stored call).
fn asked_of(attempt: u32, round: u32, judge: &str) -> String {
    let key = crate::records::entries::EntryKey::PanelRound {
        node_id: "node_2".into(),
        attempt,
        round,
    }
    .storage_key();
    match super::stored_under(&key).as_slice() {
        [entry] => match &entry.body {
            crate::records::entries::EntryBody::PanelRound(calls) => calls
                .iter()
                .find(|call| call.judge_id == judge)
                .map(|call| call.user_message.clone())
                .unwrap(),
            other => panic!("{key} holds {other:?}"),
        },
        other => panic!("{key}: {} entries", other.len()),
    }
}

fn verdict(score: f64) -> String {
    json!({"score": score, "feedback": format!("worth {score}"), "strengths": ["s"], "improvements": ["i"]})
        .to_string()
}

/// One judge's step: begin (the model call it asks for), resume with `content`.
fn judge_answers(
    state: &RunState,
    attempt: u32,
    round: u32,
    judge: &str,
    content: String,
    context: &EngineContext<'_>,
) -> Decision {
    let command = judge_command(attempt, round, judge);
    let StepAdvance::Perform(effect) = begin_step(state, &command, NOW, context).unwrap() else {
        panic!("a judge's step calls the model");
    };
    let Effect::AskJudge(call) = &effect else {
        panic!("expected a judge call, got {effect:?}");
    };
    assert_eq!(effect.claim(), Some((call.claim_key.clone(), attempt)));
    let entry = super::stored_under(&call.round_entry);
    let request = call
        .request_from(entry.first(), context.registry.models())
        .unwrap();
    assert!(request.system_instruction.contains(judge));
    let outcome = TestOutcome::Model(Ok(ModelAnswer {
        content,
        usage: TokenUsage {
            prompt_tokens: 10,
            completion_tokens: 5,
            cached_prompt_tokens: 0,
            cache_write_prompt_tokens: 0,
        },
        model: "scripted".into(),
    }));
    match resume_step(
        state.clone(),
        &command,
        &performed(&effect, outcome),
        NOW,
        context,
    )
    .unwrap()
    {
        StepAdvance::Decided(decision) => {
            assert_frames_match_schemas(&decision.events);
            super::keep_entries(&decision);
            *decision
        }
        other => panic!("expected a decision, got {other:?}"),
    }
}

fn opened(context: &EngineContext<'_>, depth: u32) -> RunState {
    let state = drafted(depth, context);
    let opened = step(
        state,
        Observed::Begin {
            node: "node_2",
            attempt: 1,
        },
        context,
    );
    assert_frames_match_schemas(&opened.events);
    assert_eq!(
        event_types(&opened),
        ["node_start", "progress", "progress"],
        "initializing, then scoring"
    );
    assert_eq!(
        outbox(&opened),
        [
            "run:node_2:1:judge:j1:0",
            "run:node_2:1:judge:j2:0",
            "run:node_2:1:judge:j3:0",
            "run:timer:panel:node_2:1:0"
        ]
    );
    assert_eq!(
        opened.state.nodes["node_2"].status(),
        NodeStatus::Deliberating
    );
    assert_eq!(
        story(&opened)[0].payload.as_ref().unwrap()["executorType"],
        "panel"
    );
    opened.state
}

fn complete_payload(decision: &Decision) -> Value {
    decision
        .events
        .iter()
        .find(|event| event.event_type == crate::wire::event::EventType::Complete)
        .and_then(|event| event.payload_value())
        .expect("a complete frame")
}

#[test]
fn judges_that_agree_conclude_in_one_round_and_their_consensus_is_the_quality_score() {
    let registry = panel_registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let state = opened(&context, 1);
    let first = judge_answers(&state, 1, 0, "j1", verdict(8.0), &context);
    assert_eq!(event_types(&first), ["progress"]);
    assert!(first.outbox.is_empty());
    let progress = story(&first)[0].payload_value().unwrap();
    assert_eq!(progress["scoresReceived"], 1);
    assert_eq!(progress["status"], "scoring");
    // The same judge's message again is stale: it was heard.
    assert!(is_stale(&first.state, &judge_command(1, 0, "j1")));
    let second = judge_answers(&first.state, 1, 0, "j2", verdict(9.0), &context);
    let third = judge_answers(&second.state, 1, 0, "j3", verdict(8.5), &context);
    assert_eq!(
        event_types(&third),
        [
            "progress",
            "progress",
            "progress",
            "node_complete",
            "metrics",
            "complete"
        ]
    );
    assert_eq!(
        story(&third)[1].payload.as_ref().unwrap()["status"],
        "converging"
    );
    assert_eq!(
        story(&third)[2].payload.as_ref().unwrap()["status"],
        "completed"
    );
    let output = third.state.nodes["node_2"].output.clone().unwrap();
    let consensus = &output["verdict"]["consensus"];
    assert!((consensus["finalScore"].as_f64().unwrap() - 8.5).abs() < 1e-9);
    assert_eq!(consensus["convergenceRounds"], 0);
    // The concluding step asks the shell to publish the transcript, once per node attempt.
    assert!(first.transcripts.is_empty() && second.transcripts.is_empty());
    assert_eq!(third.transcripts.len(), 1);
    assert_eq!(third.transcripts[0].idempotency_key, "run:node_2:1");
    assert_eq!(
        serde_json::to_value(&third.transcripts[0].transcript).unwrap(),
        third.state.nodes["node_2"].output.as_ref().unwrap()["verdict"]["transcript"]
    );
    // Every judge's tokens count on the node.
    assert_eq!(third.state.nodes["node_2"].usage.prompt_tokens, 30);
    // The transcript verifies and the criteria include the envelope's.
    let transcript: baton_judge::transcript::EvaluationTranscript =
        serde_json::from_value(output["verdict"]["transcript"].clone()).unwrap();
    assert!(transcript.verify().is_ok_and(|messages| messages >= 5));
    let asked = &asked_of(1, 0, "j1");
    assert!(asked.contains("under 100 words") && asked.contains("clear") && asked.contains("d1"));
    // The round's timer is gone: when its message comes, it is stale.
    assert!(is_stale(
        &third.state,
        &StepCommand::FireTimer {
            timer_id: round_timer_id("node_2", 1, 0)
        }
    ));
    let quality = &complete_payload(&third)["quality"];
    assert!((quality["score"].as_f64().unwrap() - 0.85).abs() < 1e-9);
    assert_eq!(quality["passed"], true);
    assert!(third.state.panels.is_empty());
}

#[test]
fn judges_that_disagree_discuss_until_the_last_round() {
    let registry = panel_registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let mut state = opened(&context, 1);
    for (judge, score) in [("j1", 2.0), ("j2", 9.0)] {
        state = judge_answers(&state, 1, 0, judge, verdict(score), &context).state;
    }
    let closed = judge_answers(&state, 1, 0, "j3", verdict(9.0), &context);
    assert_eq!(event_types(&closed), ["progress", "progress"]);
    assert_eq!(
        story(&closed)[1].payload.as_ref().unwrap()["status"],
        "discussing"
    );
    assert_eq!(
        story(&closed)[1].payload.as_ref().unwrap()["currentRound"],
        1
    );
    assert_eq!(
        outbox(&closed),
        [
            "run:node_2:1:judge:j1:1",
            "run:node_2:1:judge:j2:1",
            "run:node_2:1:judge:j3:1",
            "run:timer:panel:node_2:1:1"
        ]
    );
    // Round 1 asks each judge with the others' scores and reasons.
    let discussion = &asked_of(1, 1, "j1");
    assert!(discussion.contains("worth 9") && discussion.contains("Your latest score: 2"));
    // Round 0's messages no longer apply.
    assert!(is_stale(&closed.state, &judge_command(1, 0, "j1")));
    let mut state = closed.state;
    for (judge, score) in [("j1", 3.0), ("j2", 9.0)] {
        state = judge_answers(&state, 1, 1, judge, verdict(score), &context).state;
    }
    // Still apart after the last round (maxDiscussionRounds = 1): the panel concludes.
    let last = judge_answers(&state, 1, 1, "j3", verdict(9.0), &context);
    let output = last.state.nodes["node_2"].output.clone().unwrap();
    let consensus = &output["verdict"]["consensus"];
    assert!((consensus["finalScore"].as_f64().unwrap() - 7.0).abs() < 1e-9);
    assert_eq!(consensus["convergenceRounds"], 1);
    // 0.7 < 0.8 with one draft allowed: delivered best effort.
    assert_eq!(complete_payload(&last)["quality"]["passed"], false);
}

#[test]
fn a_silent_judge_is_left_out_when_the_round_times_out() {
    let registry = panel_registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let mut state = opened(&context, 1);
    for (judge, score) in [("j1", 8.0), ("j2", 9.0)] {
        state = judge_answers(&state, 1, 0, judge, verdict(score), &context).state;
    }
    let timer = StepCommand::FireTimer {
        timer_id: round_timer_id("node_2", 1, 0),
    };
    let StepAdvance::Decided(fired) = begin_step(&state, &timer, NOW, &context).unwrap() else {
        panic!("a due round timer is decided");
    };
    assert_frames_match_schemas(&fired.events);
    assert_eq!(
        event_types(&fired),
        [
            "warning",
            "progress",
            "progress",
            "node_complete",
            "metrics",
            "complete"
        ]
    );
    let warning = story(&fired)[0].payload_value().unwrap();
    assert_eq!(warning["code"], "judge_left_out");
    assert!(story(&fired)[0].message.as_deref().unwrap().contains("j3"));
    let output = fired.state.nodes["node_2"].output.clone().unwrap();
    assert!(
        (output["verdict"]["consensus"]["finalScore"]
            .as_f64()
            .unwrap()
            - 8.5)
            .abs()
            < 1e-9
    );
    assert_eq!(
        output["verdict"]["individualResults"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // The late judge's message is stale now.
    assert!(is_stale(&fired.state, &judge_command(1, 0, "j3")));
}

#[test]
fn a_judge_answering_outside_its_contract_is_left_out_of_the_round() {
    let registry = panel_registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let mut state = opened(&context, 1);
    let refused = judge_answers(&state, 1, 0, "j1", verdict(42.0), &context);
    assert_eq!(event_types(&refused), ["warning", "progress"]);
    state = refused.state;
    state = judge_answers(&state, 1, 0, "j2", "not json".into(), &context).state;
    let last = judge_answers(&state, 1, 0, "j3", verdict(9.0), &context);
    let output = last.state.nodes["node_2"].output.clone().unwrap();
    assert_eq!(output["verdict"]["consensus"]["finalScore"], 9.0);
    assert_eq!(output["verdict"]["warnings"].as_array().unwrap().len(), 2);
}

#[test]
fn concurrent_judges_commit_one_after_the_other_without_losing_an_answer() {
    let registry = panel_registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let state = opened(&context, 1);
    // Both judges' steps begin on the same version...
    let asks: Vec<_> = ["j1", "j2"]
        .into_iter()
        .map(|judge| {
            let command = judge_command(1, 0, judge);
            let StepAdvance::Perform(effect) = begin_step(&state, &command, NOW, &context).unwrap()
            else {
                panic!("a judge's step calls the model");
            };
            (command, effect)
        })
        .collect();
    let answered = |score: f64| {
        TestOutcome::Model(Ok(ModelAnswer {
            content: verdict(score),
            usage: TokenUsage::default(),
            model: "scripted".into(),
        }))
    };
    let StepAdvance::Decided(first) = resume_step(
        state.clone(),
        &asks[0].0,
        &performed(&asks[0].1, answered(8.0)),
        NOW,
        &context,
    )
    .unwrap() else {
        panic!("decided");
    };
    // ...the second loses the version race, reloads and re-applies its answer.
    let StepAdvance::Decided(second) = resume_step(
        first.state.clone(),
        &asks[1].0,
        &performed(&asks[1].1, answered(6.0)),
        NOW,
        &context,
    )
    .unwrap() else {
        panic!("decided");
    };
    let progress = story(&second)[0].payload_value().unwrap();
    assert_eq!(progress["scoresReceived"], 2);
    assert_eq!(progress["currentScores"], json!({"j1": 8.0, "j2": 6.0}));
    assert_eq!(
        second.state.panels["node_2"]
            .pending
            .iter()
            .collect::<Vec<_>>(),
        ["j3"]
    );
}

#[test]
fn a_low_consensus_revises_the_draft_and_convenes_the_panel_again() {
    let registry = panel_registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let mut state = opened(&context, 2);
    for judge in ["j1", "j2"] {
        state = judge_answers(&state, 1, 0, judge, verdict(4.0), &context).state;
    }
    let low = judge_answers(&state, 1, 0, "j3", verdict(4.0), &context);
    let types = event_types(&low);
    assert!(types.contains(&"plan_updated"), "{types:?}");
    let updated = low
        .events
        .iter()
        .find(|event| event.event_type == crate::wire::event::EventType::PlanUpdated)
        .and_then(|event| event.payload_value())
        .unwrap();
    assert_eq!(updated["trigger"]["kind"], "quality_below_threshold");
    let rewritten = step(
        low.state,
        answer("node_1", 2, json!({"draft": {"text": "d2"}})),
        &context,
    );
    assert_eq!(outbox(&rewritten), ["run:node_2:2"]);
    let reopened = step(
        rewritten.state,
        Observed::Begin {
            node: "node_2",
            attempt: 2,
        },
        &context,
    );
    let mut state = reopened.state;
    assert!(asked_of(2, 0, "j1").contains("d2"));
    for judge in ["j1", "j2"] {
        state = judge_answers(&state, 2, 0, judge, verdict(9.0), &context).state;
    }
    let passed = judge_answers(&state, 2, 0, "j3", verdict(9.0), &context);
    let quality = &complete_payload(&passed)["quality"];
    assert_eq!(quality["drafts"], 2);
    assert_eq!(quality["passed"], true);
}
