//! Branches in a plan: `check` reviews the brief; `revise` runs only when
//! the review failed, `approve` only when it passed (guards registered with
//! the capabilities), and `announce` depends only on `approve`. Exactly one
//! branch runs; the other's node is skipped with a frame saying what its
//! guard read, and what depends only on it is skipped too. A guard that
//! reads a facet its node does not consume is refused where it is written.

use serde_json::{Map, Value, json};

use super::*;
use crate::contracts::capability::CapabilityRegistration;
use crate::contracts::facet::{Facet, FacetDirection};

fn facet(name: &str, schema: Value) -> Facet {
    Facet {
        name: name.into(),
        title: name.into(),
        description: name.into(),
        schema,
        semantics: String::new(),
        direction: FacetDirection::Bidirectional,
        required_by_default: false,
        drives_revisions: false,
        merge: Default::default(),
        widget: None,
        metadata: Map::new(),
    }
}

fn capability(id: &str, inputs: &[&str], outputs: &[&str], guard: Option<Value>) -> Value {
    let mut registration = json!({
        "capabilityId": id, "agentType": "ai", "version": "1", "displayName": id, "summary": id,
        "inputContract": inputs, "outputContract": outputs
    });
    if let Some(guard) = guard {
        registration["guard"] = guard;
    }
    registration
}

/// The two-branch registry.
pub(super) fn branching_registry() -> Registry {
    let mut registry = Registry::default();
    let text =
        json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}});
    for name in ["brief", "revised", "approved", "announcement"] {
        registry
            .add_facet(facet(name, text.clone()), "test")
            .unwrap();
    }
    let review = json!({"type": "object", "required": ["passed"],
        "properties": {"passed": {"type": "boolean"}}});
    registry.add_facet(facet("review", review), "test").unwrap();
    for registration in [
        capability("check.brief", &["brief"], &["review"], None),
        capability(
            "revise.brief",
            &["brief", "review"],
            &["revised"],
            Some(json!({"!": {"var": "review.passed"}})),
        ),
        capability(
            "approve.brief",
            &["brief", "review"],
            &["approved"],
            Some(json!({"var": "review.passed"})),
        ),
        capability("announce.brief", &["approved"], &["announcement"], None),
    ] {
        let registration: CapabilityRegistration = serde_json::from_value(registration).unwrap();
        registry.add_capability(registration, "test").unwrap();
    }
    price_the_scripted_model(&mut registry);
    registry
}

pub(super) fn branching_envelope() -> TaskEnvelope {
    TaskEnvelope::parse_value(&json!({
        "objective": "check the brief, then revise it or approve and announce it",
        "inputs": {"brief": {"text": "b"}},
        "outputContract": {"schema": {"type": "object", "required": [],
            "properties": {"revised": {"type": "object"}, "approved": {"type": "object"},
                "announcement": {"type": "object"}}}}
    }))
    .unwrap()
}

fn node_of(state: &RunState, capability_id: &str) -> String {
    let plan = state.plan.as_ref().unwrap();
    let node = plan
        .nodes
        .iter()
        .find(|node| node.capability_id == capability_id)
        .unwrap_or_else(|| panic!("{capability_id} is planned: {:?}", plan.nodes));
    node.node_id.clone()
}

/// Plans, runs `check` with `passed`, then each node that was scheduled;
/// returns the last decision and the frames of the whole run.
fn run_with_review(passed: bool) -> (Decision, Vec<EventDraft>) {
    let registry = branching_registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let started = start_run(identity(), branching_envelope(), NOW, 3).state;
    let planned = step(started, Observed::Plan, &context);
    let plan = planned.state.plan.clone().unwrap_or_else(|| {
        panic!(
            "planned: {:#?}",
            planned
                .events
                .iter()
                .map(|event| (
                    event.event_type,
                    event.message.clone(),
                    event.payload_value()
                ))
                .collect::<Vec<_>>()
        )
    });
    assert!(
        plan.node(&node_of(&planned.state, "approve.brief"))
            .unwrap()
            .guard
            .is_some(),
        "the planner copies the capability's guard"
    );
    let mut frames = planned.events.clone();
    let check = node_of(&planned.state, "check.brief");
    let mut decision = step(
        planned.state,
        answer(
            Box::leak(check.into_boxed_str()),
            1,
            json!({"review": {"passed": passed}}),
        ),
        &context,
    );
    frames.extend(decision.events.clone());
    let mut next: Vec<String> = scheduled_nodes(&decision);
    while let Some(node_id) = next.pop() {
        let facet = plan.node(&node_id).unwrap().output_facets[0].clone();
        decision = step(
            decision.state,
            answer(
                Box::leak(node_id.into_boxed_str()),
                1,
                json!({ facet: {"text": "done"} }),
            ),
            &context,
        );
        frames.extend(decision.events.clone());
        next.extend(scheduled_nodes(&decision));
    }
    (decision, frames)
}

/// The nodes `decision` scheduled (their `ExecuteNode` steps).
fn scheduled_nodes(decision: &Decision) -> Vec<String> {
    decision
        .outbox
        .iter()
        .filter_map(|message| match &message.command {
            StepCommand::ExecuteNode { node_id, .. } => Some(node_id.clone()),
            _ => None,
        })
        .collect()
}

fn skipped_frames(frames: &[EventDraft]) -> Vec<&EventDraft> {
    frames
        .iter()
        .filter(|frame| frame.event_type == crate::wire::event::EventType::NodeSkipped)
        .collect()
}

#[test]
fn a_failed_review_takes_the_revision_branch_only() {
    let (decision, frames) = run_with_review(false);
    assert_eq!(decision.state.status(), RunStatus::Completed);
    let output = decision.state.output.clone().unwrap();
    assert_eq!(output["revised"], json!({"text": "done"}));
    assert!(output.get("approved").is_none() && output.get("announcement").is_none());
    let skipped = skipped_frames(&frames);
    assert_eq!(skipped.len(), 2, "approve and announce are skipped");
    let approve = node_of(&decision.state, "approve.brief");
    let announce = node_of(&decision.state, "announce.brief");
    let guard_false = skipped[0].payload_value().unwrap();
    assert_eq!(skipped[0].node_id.as_deref(), Some(approve.as_str()));
    assert_eq!(guard_false["reason"], "guard_false");
    assert_eq!(guard_false["read"], json!({"review": {"passed": false}}));
    assert_eq!(guard_false["guard"], json!({"var": "review.passed"}));
    let upstream = skipped[1].payload_value().unwrap();
    assert_eq!(skipped[1].node_id.as_deref(), Some(announce.as_str()));
    assert_eq!(upstream["reason"], "upstream_skipped");
    assert_eq!(upstream["skippedUpstream"], json!([approve]));
    for node in [&approve, &announce] {
        assert_eq!(decision.state.nodes[node].status(), NodeStatus::Skipped);
        assert_eq!(
            decision.state.nodes[node].current_attempt, 0,
            "{node} never ran"
        );
    }
}

#[test]
fn a_passed_review_takes_the_approval_branch_and_what_follows_it() {
    let (decision, frames) = run_with_review(true);
    assert_eq!(decision.state.status(), RunStatus::Completed);
    let output = decision.state.output.clone().unwrap();
    assert_eq!(output["approved"], json!({"text": "done"}));
    assert_eq!(output["announcement"], json!({"text": "done"}));
    assert!(output.get("revised").is_none());
    let skipped = skipped_frames(&frames);
    assert_eq!(skipped.len(), 1);
    assert_eq!(
        skipped[0].node_id.as_deref(),
        Some(node_of(&decision.state, "revise.brief").as_str())
    );
    assert_eq!(
        skipped[0].payload_value().unwrap()["read"],
        json!({"review": {"passed": true}})
    );
}

#[test]
fn a_guard_reading_what_its_node_does_not_consume_is_refused_naming_the_path() {
    let mut registry = branching_registry();
    let registration: CapabilityRegistration = serde_json::from_value(capability(
        "peek.brief",
        &["brief"],
        &["revised"],
        Some(json!({"and": [true, {"var": "review.passed"}]})),
    ))
    .unwrap();
    let error = registry
        .add_capability(registration, "peek.json")
        .unwrap_err()
        .to_string();
    assert!(error.contains("$.guard.and[1].var"), "{error}");
    assert!(error.contains("review.passed"), "{error}");
    let unknown: CapabilityRegistration = serde_json::from_value(capability(
        "odd.brief",
        &["brief"],
        &["revised"],
        Some(json!({"between": [1, {"var": "brief.text"}, 3]})),
    ))
    .unwrap();
    let error = registry
        .add_capability(unknown, "odd.json")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("$.guard") && error.contains("between"),
        "{error}"
    );
}

#[test]
fn the_plans_picture_draws_each_branchs_condition() {
    let registry = branching_registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let started = start_run(identity(), branching_envelope(), NOW, 3).state;
    let planned = step(started, Observed::Plan, &context).state;
    let plan = planned.plan.as_ref().unwrap();
    let approve = node_of(&planned, "approve.brief");
    let revise = node_of(&planned, "revise.brief");
    let mermaid = crate::planning::plan_picture::to_mermaid(plan);
    let approve_line = mermaid
        .lines()
        .find(|line| line.trim_start().starts_with(&format!("{approve}[")))
        .unwrap();
    assert!(
        approve_line.contains("<i>if {#quot;var#quot;:#quot;review.passed#quot;}</i>"),
        "{approve_line}"
    );
    let branch_class = mermaid
        .lines()
        .find(|line| line.trim_end().ends_with(" branch") && line.contains("class "))
        .unwrap_or_else(|| panic!("{mermaid}"));
    assert!(branch_class.contains(&approve) && branch_class.contains(&revise));
    let dot = crate::planning::plan_picture::to_dot(plan);
    assert!(
        dot.contains(r#"if {\"!\":{\"var\":\"review.passed\"}}"#),
        "{dot}"
    );
}
