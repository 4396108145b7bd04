//! Escalation instead of death: a writer whose provider keeps failing
//! hands its facet to the next-ranked writer in a new plan version; the
//! new version no longer needs the brief, so it goes without the
//! strategist, and says so. No I/O; every frame checked against its schema.

use serde_json::{Value, json};

use super::*;

/// notes → brief (strategist); [notes, brief] → draft (the writer the
/// envelope prefers); [notes] → draft (the other writer).
fn escalating_registry() -> Registry {
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
        escalated.state.status,
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
                event.payload.clone().unwrap()["code"].clone(),
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
