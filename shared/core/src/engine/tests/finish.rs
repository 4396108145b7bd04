//! The caller's contract at the end of a run (`engine/finish.rs`): the
//! assembled output checked against `outputContract.schema` as a whole, then
//! the hard `outputContract.constraints` over it. These are the only
//! run-time enforcement of what the caller asked for beyond each node's own
//! contract, so each failure path is reached here with the frames it emits.
//! Two-node plan: `node_1` (plan.brief) → `node_2` (write.draft).

use serde_json::{Value, json};

use super::*;

fn planned_for(output_contract: Value, context: &EngineContext<'_>) -> Decision {
    let envelope = TaskEnvelope::parse_value(&json!({
        "objective": "o",
        "inputs": {"notes": {"text": "n"}},
        "outputContract": output_contract
    }))
    .unwrap();
    let started = start_run(identity(), envelope, NOW, 3).state;
    step(started, Observed::Plan, context)
}

/// Both nodes answer; the last answer's step finishes the run.
fn finished(output_contract: Value, draft: Value, context: &EngineContext<'_>) -> Decision {
    let planned = planned_for(output_contract, context);
    assert_eq!(outbox(&planned), ["run:node_1:1"]);
    let after_brief = step(
        planned.state,
        answer("node_1", 1, json!({"brief": {"text": "b"}})),
        context,
    );
    assert_eq!(outbox(&after_brief), ["run:node_2:1"]);
    step(after_brief.state, answer("node_2", 1, draft), context)
}

fn payload_of(decision: &Decision, event_type: &str) -> Value {
    decision
        .events
        .iter()
        .find(|event| event.event_type.as_str() == event_type)
        .and_then(|event| event.payload_value())
        .unwrap_or_else(|| panic!("no `{event_type}` frame in {:?}", event_types(decision)))
}

#[test]
fn a_hard_constraint_broken_by_the_output_fails_the_run_naming_it() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let contract = json!({
        "schema": {"type": "object", "required": ["draft"], "properties": {"draft": {"type": "object"}}},
        "constraints": [
            {"constraintId": "approved-only", "expr": {"==": [{"var": "draft.text"}, "approved"]}, "level": "hard"}
        ]
    });
    let decision = finished(contract.clone(), json!({"draft": {"text": "d"}}), &context);
    assert_eq!(decision.state.status(), RunStatus::Failed);
    assert_eq!(
        event_types(&decision),
        ["node_complete", "validation_error", "metrics", "error"]
    );
    let invalid = payload_of(&decision, "validation_error");
    assert_eq!(invalid["scope"], "constraints");
    let broken = invalid["errors"].to_string();
    assert!(broken.contains("approved-only"), "{broken}");
    assert_eq!(
        payload_of(&decision, "error")["code"],
        "hard_constraint_violated"
    );
    assert!(decision.outbox.is_empty(), "nothing runs after the gate");
    // The same output meeting the hard constraint completes.
    let kept = finished(contract, json!({"draft": {"text": "approved"}}), &context);
    assert_eq!(kept.state.status(), RunStatus::Completed);
    assert_eq!(event_types(&kept).last(), Some(&"complete"));
}

#[test]
fn an_output_breaking_the_contract_as_a_whole_fails_the_run_with_the_violations() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    // A top-level rule on the output as a whole: it must have two
    // properties, and the contract names one.
    let contract = json!({
        "schema": {"type": "object", "required": ["draft"], "minProperties": 2,
                   "properties": {"draft": {"type": "object"}}}
    });
    let drafted = finished(contract, json!({"draft": {"text": "d"}}), &context);
    // A contract with rules beyond its facets plans the normalizer last,
    // held to the whole schema. Its answer meets `minProperties` with a
    // property the contract does not name, which the assembled output (the
    // contract's properties only) leaves out: the gate sees one property.
    assert_eq!(outbox(&drafted), ["run:normalize:1"]);
    let decision = step(
        drafted.state,
        answer(
            "normalize",
            1,
            json!({"draft": {"text": "d"}, "note": "padding"}),
        ),
        &context,
    );
    assert_eq!(decision.state.status(), RunStatus::Failed);
    assert_eq!(
        event_types(&decision),
        ["node_complete", "validation_error", "metrics", "error"]
    );
    let invalid = payload_of(&decision, "validation_error");
    assert_eq!(invalid["scope"], "output");
    assert!(
        invalid["errors"].to_string().contains("minProperties")
            || invalid["errors"].to_string().contains("2"),
        "{invalid}"
    );
    assert_eq!(
        payload_of(&decision, "error")["code"],
        "output_contract_violated"
    );
}

#[test]
fn without_a_reviewer_the_quality_is_the_constraints_score_and_says_so() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    // Two soft constraints of equal weight, one holding: the score is what
    // `observedSatisfaction` says, and its source is the constraints.
    let contract = json!({
        "schema": {"type": "object", "required": ["draft"], "properties": {"draft": {"type": "object"}}},
        "constraints": [
            {"constraintId": "has-text", "expr": {"!!": [{"var": "draft.text"}]}, "level": "soft"},
            {"constraintId": "approved", "expr": {"==": [{"var": "draft.text"}, "approved"]}, "level": "soft"}
        ]
    });
    let decision = finished(contract, json!({"draft": {"text": "d"}}), &context);
    assert_eq!(decision.state.status(), RunStatus::Completed);
    let complete = payload_of(&decision, "complete");
    let quality = &complete["quality"];
    assert_eq!(quality["source"], "constraints", "{complete}");
    assert_eq!(quality["score"], complete["observedSatisfaction"]);
    assert!(quality["score"].as_f64().unwrap() < 1.0, "{quality}");
    assert_eq!(quality["passed"], true, "no threshold: nothing to miss");
    assert_eq!(quality["drafts"], 0);
    assert!(quality.get("threshold").is_none(), "{quality}");
    // The run keeps what `complete` said, for `GET /runs/{id}`.
    let kept = decision
        .state
        .quality
        .as_ref()
        .expect("the run keeps its quality");
    assert_eq!(serde_json::to_value(kept).unwrap(), *quality);
}
