//! The revision loop under `qualityThreshold` / `executionDepth`: a first
//! draft that passes, one revision (0.5 then 0.9), the depth limit (the
//! best draft delivered with a warning), and revision notes reaching the
//! reviser. No I/O; every frame checked against its schema.

use serde_json::{Value, json};

use super::*;

pub(super) fn reviewing_registry() -> Registry {
    let mut registry = Registry::default();
    super::price_the_scripted_model(&mut registry);
    let text =
        json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}});
    let scored = json!({"type": "object", "required": ["score", "notes"],
                        "properties": {"score": {"type": "number", "minimum": 0, "maximum": 10}, "notes": {"type": "string"},
                                       "criteria": {"type": "array"}}});
    for (name, schema) in [("notes", &text), ("draft", &text), ("review", &scored)] {
        registry
            .add_facet(
                Facet {
                    name: name.into(),
                    title: name.into(),
                    description: name.into(),
                    schema: schema.clone(),
                    semantics: String::new(),
                    direction: FacetDirection::Bidirectional,
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
    for capability in [
        json!({"capabilityId": "write.draft", "agentType": "ai", "version": "1", "displayName": "w", "summary": "w",
               "inputContract": ["notes"], "outputContract": ["draft"]}),
        json!({"capabilityId": "review.draft", "agentType": "ai", "version": "1", "displayName": "r", "summary": "r",
               "kind": "validation", "inputContract": ["draft"], "outputContract": ["review"],
               "qualityScore": {"pointer": "/review/score", "scale": 10, "acceptancePointer": "/review/criteria"}}),
    ] {
        registry
            .add_capability(serde_json::from_value(capability).unwrap(), "test")
            .unwrap();
    }
    registry
}

/// A reviewed run's first frames (the start and the plan) and its state.
pub(super) fn reviewed_run_for_narration(
    context: &EngineContext<'_>,
) -> (Vec<EventDraft>, RunState) {
    let envelope = TaskEnvelope::parse_value(&json!({
        "objective": "o",
        "inputs": {"notes": {"text": "n"}},
        "policies": {"planner": {"selection": {"require": ["review.draft"]}}},
        "outputContract": {"schema": {"type": "object", "required": ["draft"], "properties": {"draft": {"type": "object"}}}}
    }))
    .unwrap();
    let started = start_run(identity(), envelope, NOW, 3);
    let planned = step(started.state, Observed::Plan, context);
    let mut frames = started.events;
    frames.extend(planned.events);
    (frames, planned.state)
}

fn reviewed_run(depth: u32, context: &EngineContext<'_>) -> RunState {
    let envelope = TaskEnvelope::parse_value(&json!({
        "objective": "o",
        "inputs": {"notes": {"text": "n"}},
        "constraints": {"qualityThreshold": 0.8, "executionDepth": depth},
        "policies": {"planner": {"selection": {"require": ["review.draft"]}}},
        "outputContract": {"schema": {"type": "object", "required": ["draft"], "properties": {"draft": {"type": "object"}}}}
    }))
    .unwrap();
    let started = start_run(identity(), envelope, NOW, 3).state;
    let planned = step(started, Observed::Plan, context);
    assert_eq!(
        outbox(&planned),
        ["run:node_1:1"],
        "{:?}",
        event_types(&planned)
    );
    planned.state
}

fn draft(text: &str) -> Value {
    json!({"draft": {"text": text}})
}

fn review(score: f64) -> Value {
    json!({"review": {"score": score, "notes": format!("scored {score}"),
                      "criteria": [{"criterion": "under 100 words", "pass": score >= 8.0, "evidence": format!("draft scored {score}")}]}})
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
fn a_first_draft_that_passes_is_not_revised() {
    let registry = reviewing_registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let state = reviewed_run(3, &context);
    let drafted = step(state, answer("node_1", 1, draft("d1")), &context);
    let reviewed = step(drafted.state, answer("node_2", 1, review(9.0)), &context);
    assert_eq!(reviewed.state.status(), RunStatus::Completed);
    assert!(!event_types(&reviewed).contains(&"plan_updated"));
    let quality = &complete_payload(&reviewed)["quality"];
    assert_eq!(quality["source"], "reviewer");
    assert_eq!(quality["drafts"], 1);
    assert_eq!(quality["passed"], true);
    assert!((quality["score"].as_f64().unwrap() - 0.9).abs() < 1e-9);
}

#[test]
fn a_low_score_revises_once_with_the_review_as_notes() {
    let registry = reviewing_registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let state = reviewed_run(3, &context);
    let drafted = step(state, answer("node_1", 1, draft("d1")), &context);
    let revised = step(drafted.state, answer("node_2", 1, review(5.0)), &context);
    assert_eq!(
        event_types(&revised),
        ["node_complete", "plan_requested", "plan_updated"]
    );
    let updated = story(&revised)[2].payload_value().unwrap();
    assert_eq!(updated["trigger"]["kind"], "quality_below_threshold");
    assert_eq!(
        (
            updated["previousVersion"].clone(),
            updated["version"].clone()
        ),
        (json!(1), json!(2))
    );
    assert_eq!(
        outbox(&revised),
        ["run:node_1:2"],
        "the draft is written again"
    );
    // The reviser sees the review, never the orchestrator's prompt.
    let rerun = begin_step(&revised.state, &node_command("node_1", 2), NOW, &context).unwrap();
    let StepAdvance::Perform(Effect::CallModel(call)) = rerun else {
        panic!("expected a model call")
    };
    let user: Value = serde_json::from_str(&call.request.user_message).unwrap();
    // The review, and what the draft failed besides its score (the
    // reviewer marked an acceptance criterion failed).
    assert_eq!(user["revisionNotes"]["review"]["review"]["score"], 5.0);
    assert_eq!(
        user["revisionNotes"]["unmet"],
        json!(["acceptance criterion `under 100 words` failed"])
    );
    let redrafted = step(revised.state, answer("node_1", 2, draft("d2")), &context);
    assert_eq!(outbox(&redrafted), ["run:node_2:2"], "and reviewed again");
    let done = step(redrafted.state, answer("node_2", 2, review(9.0)), &context);
    assert_eq!(done.state.status(), RunStatus::Completed);
    assert_eq!(done.state.output, Some(json!({"draft": {"text": "d2"}})));
    let quality = &complete_payload(&done)["quality"];
    assert_eq!(quality["drafts"], 2);
    assert_eq!(quality["passed"], true);
    assert_eq!(quality["draftScores"], json!([0.5, 0.9]));
    assert_eq!(
        complete_payload(&done)["acceptanceReport"],
        json!([{"criterion": "under 100 words", "pass": true, "evidence": "draft scored 9"}]),
        "the delivered draft's verdicts"
    );
}

#[test]
fn at_the_depth_limit_the_best_draft_is_delivered_with_a_warning() {
    let registry = reviewing_registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let state = reviewed_run(2, &context);
    let drafted = step(state, answer("node_1", 1, draft("d1")), &context);
    let revised = step(drafted.state, answer("node_2", 1, review(6.0)), &context);
    let redrafted = step(revised.state, answer("node_1", 2, draft("d2")), &context);
    let done = step(redrafted.state, answer("node_2", 2, review(4.0)), &context);
    assert_eq!(
        done.state.status(),
        RunStatus::Completed,
        "delivered best effort"
    );
    assert!(event_types(&done).contains(&"warning"));
    let warning = done
        .events
        .iter()
        .find(|event| event.event_type == crate::wire::event::EventType::Warning)
        .and_then(|event| event.payload_value())
        .unwrap();
    assert_eq!(warning["code"], "execution_depth_reached");
    assert_eq!(
        done.state.output,
        Some(json!({"draft": {"text": "d1"}})),
        "the best-scoring draft, not the last"
    );
    let quality = &complete_payload(&done)["quality"];
    assert_eq!(quality["passed"], false);
    assert_eq!(quality["drafts"], 2);
    assert_eq!(
        complete_payload(&done)["acceptanceReport"][0]["evidence"],
        "draft scored 6",
        "the verdicts of the draft delivered (the best), not the last"
    );
    assert!((quality["score"].as_f64().unwrap() - 0.6).abs() < 1e-9);
}
