//! Escalation instead of death: a writer whose provider keeps failing
//! hands its facet to the next-ranked writer in a new plan version; the
//! new version no longer needs the brief, so it goes without the
//! strategist, and says so. No I/O; every frame checked against its schema.

use serde_json::{Value, json};

use super::*;

/// notes → brief (strategist); [notes, brief] → draft (the writer the
/// envelope prefers); [notes] → draft (the other writer).
pub(super) fn escalating_registry() -> Registry {
    let mut registry = Registry::default();
    super::price_the_scripted_model(&mut registry);
    let text =
        json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}});
    for name in ["notes", "brief", "draft"] {
        registry
            .add_facet(
                Facet {
                    name: name.into(),
                    title: name.into(),
                    description: name.into(),
                    schema: text.clone(),
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
        json!({"capabilityId": "plan.brief", "agentType": "ai", "version": "1", "displayName": "s", "summary": "s",
               "kind": "structuring", "inputContract": ["notes"], "outputContract": ["brief"], "cost": {"tier": "low"}}),
        json!({"capabilityId": "write.cheap", "agentType": "ai", "version": "1", "displayName": "c", "summary": "c",
               "inputContract": ["notes", "brief"], "outputContract": ["draft"], "cost": {"tier": "low"}}),
        json!({"capabilityId": "write.plain", "agentType": "ai", "version": "1", "displayName": "p", "summary": "p",
               "inputContract": ["notes"], "outputContract": ["draft"], "cost": {"tier": "standard"}}),
    ] {
        registry
            .add_capability(serde_json::from_value(capability).unwrap(), "test")
            .unwrap();
    }
    registry
}

fn text(facet: &str, value: &str) -> Value {
    json!({facet: {"text": value}})
}

#[test]
fn a_failing_writer_escalates_and_the_specialist_the_new_plan_drops_is_said() {
    let registry = escalating_registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let envelope = TaskEnvelope::parse_value(&json!({
        "objective": "o",
        "inputs": {"notes": {"text": "n"}},
        "policies": {"planner": {"selection": {"prefer": ["write.cheap"]}}},
        "outputContract": {"schema": {"type": "object", "required": ["draft"], "properties": {"draft": {"type": "object"}}}}
    }))
    .unwrap();
    let started = start_run(identity(), envelope, NOW, 3).state;
    let planned = step(started, Observed::Plan, &context);
    let plan = planned.state.plan.clone().unwrap();
    let capabilities: Vec<&str> = plan
        .nodes
        .iter()
        .map(|node| node.capability_id.as_str())
        .collect();
    assert_eq!(capabilities, ["plan.brief", "write.cheap"]);
    let briefed = step(
        planned.state,
        answer("node_1", 1, text("brief", "b")),
        &context,
    );
    let escalated = step(
        briefed.state,
        Observed::ProviderFailed {
            node: "node_2",
            attempt: 1,
        },
        &context,
    );
    assert_ne!(
        escalated.state.status(),
        RunStatus::Failed,
        "an escalation exists"
    );
    let kinds = event_types(&escalated);
    assert!(kinds.contains(&"plan_updated"), "{kinds:?}");
    let warnings: Vec<(Value, String)> = escalated
        .events
        .iter()
        .filter(|event| event.event_type == crate::wire::event::EventType::Warning)
        .map(|event| {
            (
                event.payload_value().unwrap()["code"].clone(),
                event.message.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        warnings
            .iter()
            .any(|(code, message)| code == "capability_fallback"
                && message.contains("write.cheap's model kept failing")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|(code, message)| code == "specialist_skipped"
                && message.contains("goes without plan.brief")),
        "the strategist the new version drops is said: {warnings:?}"
    );
    assert!(
        !warnings
            .iter()
            .any(|(code, message)| code == "specialist_skipped" && message.contains("write.cheap")),
        "the capability the escalation excluded is not a skipped specialist"
    );
    let replanned: Vec<&str> = escalated
        .state
        .plan
        .as_ref()
        .unwrap()
        .nodes
        .iter()
        .map(|node| node.capability_id.as_str())
        .collect();
    assert_eq!(replanned, ["write.plain"]);
    assert_frames_match_schemas(&escalated.events);
}

/// draft made by an AI writer (preferred), a person, or a terminal
/// fallback (`kind: "fallback"`), in that order of escalation.
fn registry_with_a_person_and_a_fallback() -> Registry {
    let mut registry = escalating_registry();
    for capability in [
        json!({"capabilityId": "write.person", "agentType": "human", "version": "1", "displayName": "e", "summary": "an editor writes it",
               "inputContract": ["notes"], "outputContract": ["draft"]}),
        json!({"capabilityId": "write.template", "agentType": "ai", "version": "1", "displayName": "t", "summary": "a canned draft",
               "kind": "fallback", "inputContract": ["notes"], "outputContract": ["draft"], "cost": {"tier": "low"}}),
    ] {
        registry
            .add_capability(serde_json::from_value(capability).unwrap(), "test")
            .unwrap();
    }
    registry
}

fn capabilities_of(state: &RunState) -> Vec<String> {
    state
        .plan
        .as_ref()
        .unwrap()
        .nodes
        .iter()
        .map(|node| node.capability_id.clone())
        .collect()
}

#[test]
fn a_failing_model_escalates_to_a_person_who_is_told_why_then_to_the_terminal_fallback() {
    let registry = registry_with_a_person_and_a_fallback();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let envelope = TaskEnvelope::parse_value(&json!({
        "objective": "o",
        "inputs": {"notes": {"text": "n"}},
        "policies": {"planner": {"selection": {"forbid": ["write.cheap", "plan.brief"]}}},
        "outputContract": {"schema": {"type": "object", "required": ["draft"], "properties": {"draft": {"type": "object"}}}}
    }))
    .unwrap();
    let started = start_run(identity(), envelope, NOW, 3).state;
    let planned = step(started, Observed::Plan, &context);
    assert_eq!(
        capabilities_of(&planned.state),
        ["write.plain"],
        "AI first; the fallback is never chosen while another capability can make the facet"
    );
    // The writer's provider answers 500 after its retries: a person takes over.
    let to_person = step(
        planned.state,
        Observed::ProviderFailed {
            node: "node_1",
            attempt: 1,
        },
        &context,
    );
    assert_eq!(capabilities_of(&to_person.state), ["write.person"]);
    assert_ne!(to_person.state.status(), RunStatus::Failed);
    let person_node = to_person.state.plan.as_ref().unwrap().nodes[0]
        .node_id
        .clone();
    let person_attempt = to_person.state.nodes[&person_node].current_attempt;
    let node_id: &'static str = Box::leak(person_node.clone().into_boxed_str());
    let parked = step(
        to_person.state,
        Observed::Begin {
            node: node_id,
            attempt: person_attempt,
        },
        &context,
    );
    assert_eq!(parked.state.status(), RunStatus::AwaitingHuman);
    let tasks = crate::state::tasks::human_tasks(&parked.state);
    assert_eq!(tasks.len(), 1);
    let carried = tasks[0]
        .escalated_from
        .as_ref()
        .expect("the task carries the failure");
    assert_eq!(carried.capability_id, "write.plain");
    assert_eq!(carried.trigger, "model_failed");
    assert!(carried.failure.contains("500"), "{carried:?}");
    let start = parked
        .events
        .iter()
        .find(|event| event.event_type == crate::wire::event::EventType::NodeStart)
        .unwrap();
    assert_eq!(
        start.payload.as_ref().unwrap()["escalatedFrom"]["capabilityId"],
        "write.plain",
        "the person's node_start carries the failure too"
    );
    let rationale = start.payload.as_ref().unwrap()["rationale"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        rationale.starts_with("takes over draft from node") && rationale.contains("write.plain"),
        "{rationale}"
    );
    // Nobody answers within the SLA: the terminal fallback makes the draft.
    let timer_id = crate::records::governance::human_sla_timer_id(&person_node, person_attempt);
    let StepAdvance::Decided(timed_out) = begin_step(
        &parked.state,
        &StepCommand::FireTimer { timer_id },
        NOW,
        &context,
    )
    .unwrap() else {
        panic!("a timer is decided without an effect")
    };
    assert_frames_match_schemas(&timed_out.events);
    assert_eq!(
        capabilities_of(&timed_out.state),
        ["write.template"],
        "the first failed writer stays excluded; the fallback comes last"
    );
    assert_eq!(timed_out.state.status(), RunStatus::Running);
    let fallback_warnings: Vec<String> = timed_out
        .events
        .iter()
        .filter(|event| {
            event.event_type == crate::wire::event::EventType::Warning
                && event.payload.as_ref().unwrap()["code"] == "capability_fallback"
        })
        .map(|event| event.message.clone().unwrap_or_default())
        .collect();
    assert_eq!(fallback_warnings.len(), 1, "{fallback_warnings:?}");
    assert!(
        fallback_warnings[0].contains("write.person had no answer to the human task"),
        "{fallback_warnings:?}"
    );
    let fallback_node = timed_out.state.plan.as_ref().unwrap().nodes[0]
        .node_id
        .clone();
    let fallback_attempt = timed_out.state.nodes[&fallback_node].current_attempt;
    let node_id: &'static str = Box::leak(fallback_node.into_boxed_str());
    let done = step(
        timed_out.state,
        answer(node_id, fallback_attempt, text("draft", "canned")),
        &context,
    );
    assert_eq!(done.state.status(), RunStatus::Completed);
    assert_eq!(done.state.governance.escalations.len(), 2);
}

/// The escalating registry with a third writer, `write.quick`, level with
/// `write.plain` in the planner's own order (same tier, same inputs; the id
/// breaks the tie for `write.plain`).
fn registry_with_two_level_writers() -> Registry {
    let mut registry = escalating_registry();
    registry
        .add_capability(
            serde_json::from_value(json!({"capabilityId": "write.quick", "agentType": "ai", "version": "1",
                "displayName": "q", "summary": "q", "inputContract": ["notes"], "outputContract": ["draft"],
                "cost": {"tier": "standard"}}))
            .unwrap(),
            "test",
        )
        .unwrap();
    registry
}

/// Plans with `write.cheap` preferred, then fails it: the version that
/// replaces it, and the `plan_updated` payload.
fn escalate_the_cheap_writer(context: &EngineContext<'_>) -> (Vec<String>, Value) {
    let envelope = TaskEnvelope::parse_value(&json!({
        "objective": "o",
        "inputs": {"notes": {"text": "n"}},
        "policies": {"planner": {"selection": {"prefer": ["write.cheap"]}}},
        "outputContract": {"schema": {"type": "object", "required": ["draft"], "properties": {"draft": {"type": "object"}}}}
    }))
    .unwrap();
    let started = start_run(identity(), envelope, NOW, 3).state;
    let planned = step(started, Observed::Plan, context);
    assert_eq!(
        capabilities_of(&planned.state),
        ["plan.brief", "write.cheap"]
    );
    let briefed = step(
        planned.state,
        answer("node_1", 1, text("brief", "b")),
        context,
    );
    let escalated = step(
        briefed.state,
        Observed::ProviderFailed {
            node: "node_2",
            attempt: 1,
        },
        context,
    );
    assert_frames_match_schemas(&escalated.events);
    let updated = escalated
        .events
        .iter()
        .find(|event| event.event_type == crate::wire::event::EventType::PlanUpdated)
        .expect("a new version")
        .payload_value()
        .unwrap();
    (capabilities_of(&escalated.state), updated)
}

#[test]
fn an_escalation_takes_the_healthiest_capability_not_the_planners_fixed_order() {
    use crate::catalog::capability_health::{CallOutcome, HealthTable};
    let registry = registry_with_two_level_writers();
    let validators = ValidatorCache::new();
    // No history: the planner's own order (the id breaks the tie).
    let context = engine(&registry, &validators);
    let (capabilities, updated) = escalate_the_cheap_writer(&context);
    assert_eq!(capabilities, ["write.plain"]);
    let ranking = updated["escalationRanking"].as_array().unwrap();
    assert_eq!(
        ranking.len(),
        2,
        "both writers that could take over: {updated}"
    );
    assert_eq!(ranking[0]["calls"], 0);
    assert_eq!(ranking[0]["successRate"], 0.5);

    // The tenant's recent calls: write.plain failed four times of four,
    // write.quick answered every time, faster.
    let mut table = HealthTable::default();
    for _ in 0..4 {
        table.record(
            "write.plain",
            CallOutcome {
                succeeded: false,
                latency_ms: Some(30_000),
                cost_usd: None,
            },
        );
        table.record(
            "write.quick",
            CallOutcome {
                succeeded: true,
                latency_ms: Some(2_000),
                cost_usd: Some(0.002),
            },
        );
    }
    let mut context = engine(&registry, &validators);
    context.capability_health = &table;
    let (capabilities, updated) = escalate_the_cheap_writer(&context);
    assert_eq!(capabilities, ["write.quick"], "{updated}");
    let ranking = updated["escalationRanking"].as_array().unwrap();
    let ranked: Vec<&str> = ranking
        .iter()
        .map(|entry| entry["capabilityId"].as_str().unwrap())
        .collect();
    assert_eq!(ranked, ["write.quick", "write.plain"]);
    assert_eq!(ranking[0]["calls"], 4);
    assert_eq!(ranking[0]["medianLatencyMs"], 2_000);
    assert_eq!(ranking[0]["meanCostUsd"], 0.002);
    assert!((ranking[1]["successRate"].as_f64().unwrap() - 1.0 / 6.0).abs() < 1e-9);
    assert!(ranking[0]["score"].as_f64().unwrap() > ranking[1]["score"].as_f64().unwrap());
    assert_eq!(updated["trigger"]["kind"], "model_failed");
}

#[test]
fn the_callers_preference_still_ranks_before_health() {
    use crate::catalog::capability_health::{CallOutcome, HealthTable};
    let registry = registry_with_two_level_writers();
    let validators = ValidatorCache::new();
    let mut table = HealthTable::default();
    for _ in 0..4 {
        table.record(
            "write.plain",
            CallOutcome {
                succeeded: false,
                latency_ms: None,
                cost_usd: None,
            },
        );
    }
    let mut context = engine(&registry, &validators);
    context.capability_health = &table;
    let envelope = TaskEnvelope::parse_value(&json!({
        "objective": "o",
        "inputs": {"notes": {"text": "n"}},
        "policies": {"planner": {"selection": {"prefer": ["write.cheap"], "avoid": ["write.quick"]}}},
        "outputContract": {"schema": {"type": "object", "required": ["draft"], "properties": {"draft": {"type": "object"}}}}
    }))
    .unwrap();
    let started = start_run(identity(), envelope, NOW, 3).state;
    let planned = step(started, Observed::Plan, &context);
    assert_eq!(
        capabilities_of(&planned.state),
        ["plan.brief", "write.cheap"]
    );
    let briefed = step(
        planned.state,
        answer("node_1", 1, text("brief", "b")),
        &context,
    );
    let escalated = step(
        briefed.state,
        Observed::ProviderFailed {
            node: "node_2",
            attempt: 1,
        },
        &context,
    );
    assert_eq!(
        capabilities_of(&escalated.state),
        ["write.plain"],
        "the caller avoids write.quick: write.plain's poor health does not overrule that"
    );
}
