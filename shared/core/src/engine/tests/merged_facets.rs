//! A facet every producer adds to (`merge: append`): the planner keeps two
//! branches adding to it parallel, their join sees both branches' notes,
//! none lost, and the run's output holds every producer's notes. A facet
//! that replaces orders its producers and is the wired producer's value
//! alone.

use serde_json::{Map, Value, json};

use super::*;
use crate::contracts::capability::CapabilityRegistration;
use crate::contracts::facet::{Facet, FacetDirection, FacetMerge};
use crate::state::context::build_context_bundle;

fn facet(name: &str, schema: Value, merge: FacetMerge, required: bool) -> Facet {
    Facet {
        name: name.into(),
        title: name.into(),
        description: name.into(),
        schema,
        semantics: String::new(),
        direction: FacetDirection::Bidirectional,
        required_by_default: required,
        drives_revisions: false,
        merge,
        widget: None,
        metadata: Map::new(),
    }
}

/// `start` → (`left` ∥ `right`) → `join`, each adding to `log`.
fn branching_registry(log_merge: FacetMerge) -> Registry {
    let mut registry = Registry::default();
    let object =
        json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}});
    for name in ["notes", "brief", "left", "right", "joined"] {
        registry
            .add_facet(
                facet(name, object.clone(), FacetMerge::Replace, true),
                "test",
            )
            .unwrap();
    }
    let list = json!({"type": "array", "items": {"type": "string"}});
    registry
        .add_facet(facet("log", list, log_merge, false), "test")
        .unwrap();
    for (id, inputs, outputs) in [
        ("start.work", vec!["notes"], vec!["brief", "log"]),
        ("left.work", vec!["brief", "log"], vec!["left", "log"]),
        ("right.work", vec!["brief", "log"], vec!["right", "log"]),
        (
            "join.work",
            vec!["left", "right", "log"],
            vec!["joined", "log"],
        ),
    ] {
        let capability: CapabilityRegistration = serde_json::from_value(json!({
            "capabilityId": id, "agentType": "ai", "version": "1", "displayName": id, "summary": id,
            "inputContract": inputs, "outputContract": outputs
        }))
        .unwrap();
        registry.add_capability(capability, "test").unwrap();
    }
    price_the_scripted_model(&mut registry);
    registry
}

fn branching_run() -> RunState {
    let envelope = TaskEnvelope::parse_value(&json!({
        "objective": "o",
        "inputs": {"notes": {"text": "n"}},
        "outputContract": {"schema": {"type": "object", "required": ["joined", "log"],
            "properties": {"joined": {"type": "object"}, "log": {"type": "array"}}}}
    }))
    .unwrap();
    start_run(identity(), envelope, NOW, 3).state
}

/// Plans and runs `start`, `left` and `right` (nodes 1 to 3); the state
/// before `join` (node 4). `parallel`: whether the plan keeps the two
/// branches apart, else orders `right` after `left`.
fn before_the_join(context: &EngineContext<'_>, parallel: bool) -> RunState {
    let mut state = step(branching_run(), Observed::Plan, context).state;
    let plan = state.plan.as_ref().unwrap();
    let upstream_of_join = plan.upstream_closure("node_4");
    assert!(
        ["node_1", "node_2", "node_3"]
            .iter()
            .all(|node| upstream_of_join.contains(node)),
        "the join depends on every node: {:?}",
        plan.edges
    );
    assert_eq!(
        !plan.upstream_closure("node_3").contains("node_2"),
        parallel,
        "{:?}",
        plan.edges
    );
    for (node, content) in [
        (
            "node_1",
            json!({"brief": {"text": "b"}, "log": ["start: briefed"]}),
        ),
        (
            "node_2",
            json!({"left": {"text": "l"}, "log": ["start: briefed", "left: drafted"]}),
        ),
        (
            "node_3",
            json!({"right": {"text": "r"}, "log": ["start: briefed", "right: drew"]}),
        ),
    ] {
        state = step(state, answer(node, 1, content), context).state;
        assert_eq!(state.nodes[node].status(), NodeStatus::Completed, "{node}");
    }
    state
}

fn join_sees(state: &RunState, registry: &Registry) -> Value {
    let node = state.plan.as_ref().unwrap().node("node_4").unwrap();
    build_context_bundle(state, node, registry).inputs["log"].clone()
}

#[test]
fn a_join_sees_every_branchs_notes_once_and_the_output_keeps_them() {
    let registry = branching_registry(FacetMerge::Append);
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let state = before_the_join(&context, true);
    assert_eq!(
        join_sees(&state, &registry),
        json!(["start: briefed", "left: drafted", "right: drew"])
    );
    let decision = step(
        state,
        answer(
            "node_4",
            1,
            json!({"joined": {"text": "j"}, "log": ["start: briefed", "left: drafted", "join: merged"]}),
        ),
        &context,
    );
    assert_eq!(decision.state.status(), RunStatus::Completed);
    assert_eq!(
        decision.state.output.as_ref().unwrap()["log"],
        json!([
            "start: briefed",
            "left: drafted",
            "right: drew",
            "join: merged"
        ]),
        "the output's list holds every producer's notes, even one the join dropped"
    );
}

#[test]
fn a_facet_that_replaces_orders_its_producers_and_is_the_latest_value_alone() {
    let registry = branching_registry(FacetMerge::Replace);
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let state = before_the_join(&context, false);
    assert_eq!(
        join_sees(&state, &registry),
        json!(["start: briefed", "right: drew"]),
        "the wired producer's list: what `left` added is lost when `right` drops it"
    );
}
