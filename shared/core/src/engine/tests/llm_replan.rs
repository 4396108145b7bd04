//! Replans under the LLM planner: the step that needs a new version records
//! why and queues `StepCommand::Replan`; that step asks the planner model
//! (which sees the trigger, the rationale and the failed node), validates
//! the draft like a first plan, and applies it; a rejected draft is
//! re-prompted, an unavailable model leaves it to the deterministic
//! planner. The model is a test double: each test says what it answered.
//! No I/O; every frame is checked against its schema.

use serde_json::{Value, json};

use super::escalation::escalating_registry;
use super::*;

fn llm_engine<'a>(registry: &'a Registry, validators: &'a ValidatorCache) -> EngineContext<'a> {
    EngineContext {
        planner: PlannerChoice::Llm,
        max_planner_attempts: 2,
        ..engine(registry, validators)
    }
}

fn drafted(content: Value) -> TestOutcome {
    TestOutcome::Model(Ok(ModelAnswer {
        content: content.to_string(),
        usage: TokenUsage::default(),
        model: "planner".into(),
    }))
}

fn unavailable() -> TestOutcome {
    TestOutcome::Model(Err(ModelFailure {
        code: FailureCode::LlmServerError,
        message: "503 from the planner's provider".into(),
    }))
}

fn decided(advance: StepAdvance) -> Decision {
    match advance {
        StepAdvance::Decided(decision) => {
            assert_frames_match_schemas(&decision.events);
            *decision
        }
        other => panic!("expected a decision, got {other:?}"),
    }
}

/// The first plan, drafted by the planner model: brief → write (write.cheap).
/// Then the brief is written and the writer's provider keeps failing.
fn escalated_under_the_llm_planner(context: &EngineContext<'_>) -> Decision {
    let envelope = TaskEnvelope::parse_value(&json!({
        "objective": "o",
        "inputs": {"notes": {"text": "n"}},
        "outputContract": {"schema": {"type": "object", "required": ["draft"], "properties": {"draft": {"type": "object"}}}}
    }))
    .unwrap();
    let started = start_run(identity(), envelope, NOW, 3).state;
    let StepAdvance::Perform(first) =
        begin_step(&started, &StepCommand::Plan, NOW, context).unwrap()
    else {
        panic!("the LLM planner asks the model first")
    };
    let first_draft = json!({"nodes": [
        {"nodeId": "brief", "capabilityId": "plan.brief"},
        {"nodeId": "write", "capabilityId": "write.cheap", "dependsOn": ["brief"]}
    ]});
    let planned = decided(
        resume_step(
            started,
            &StepCommand::Plan,
            &performed(&first, drafted(first_draft)),
            NOW,
            context,
        )
        .unwrap(),
    );
    let briefed = step(
        planned.state,
        answer("brief", 1, json!({"brief": {"text": "b"}})),
        context,
    );
    step(
        briefed.state,
        Observed::ProviderFailed {
            node: "write",
            attempt: 1,
        },
        context,
    )
}

#[test]
fn an_escalation_under_the_llm_planner_is_drafted_by_the_model_which_sees_why() {
    let registry = escalating_registry();
    let validators = ValidatorCache::new();
    let context = llm_engine(&registry, &validators);
    let escalated = escalated_under_the_llm_planner(&context);
    // The failing step only records the replan and queues its step.
    assert_eq!(outbox(&escalated), vec!["run:replan:2"]);
    assert_eq!(escalated.state.plan_version(), 1);
    assert_ne!(escalated.state.status(), RunStatus::Failed);
    assert!(
        !event_types(&escalated).contains(&"plan_updated"),
        "{:?}",
        event_types(&escalated)
    );
    let replan = StepCommand::Replan { version: 2 };
    let StepAdvance::Perform(effect) =
        begin_step(&escalated.state, &replan, NOW, &context).unwrap()
    else {
        panic!("the replan step asks the planner model")
    };
    let Effect::DraftPlan(call) = &effect else {
        panic!("a plan draft, through the first plan's effect")
    };
    let asked: Value = serde_json::from_str(&call.request.user_message).unwrap();
    assert_eq!(asked["replan"]["replacesVersion"], 1);
    assert_eq!(asked["replan"]["trigger"]["kind"], "model_failed");
    assert!(
        asked["replan"]["rationale"]
            .as_str()
            .unwrap()
            .contains("write.cheap's model kept failing (500)"),
        "{}",
        asked["replan"]
    );
    assert_eq!(
        asked["replan"]["failedNodes"][0]["capabilityId"],
        "write.cheap"
    );
    assert_eq!(asked["replan"]["planInForce"][0]["status"], "completed");
    assert!(
        asked["policies"]["planner"]["selection"]["forbid"]
            .as_array()
            .unwrap()
            .contains(&json!("write.cheap")),
        "the failed capability is forbidden in the request: {}",
        asked["policies"]
    );
    // A draft that differs from the first plan: the brief kept, another writer.
    let second_draft = json!({"nodes": [
        {"nodeId": "brief", "capabilityId": "plan.brief"},
        {"nodeId": "rewrite", "capabilityId": "write.plain"}
    ], "rationale": "write.plain needs only the notes"});
    // What the dropped node had used stays the run's.
    let mut spent_state = escalated.state.clone();
    let dropped = spent_state.node_mut("write").unwrap();
    dropped.usage.prompt_tokens += 70;
    dropped.cost_usd = Some(0.5);
    let before = spent_state.total_usage().prompt_tokens;
    let applied = decided(
        resume_step(
            spent_state,
            &replan,
            &performed(&effect, drafted(second_draft)),
            NOW,
            &context,
        )
        .unwrap(),
    );
    assert!(!applied.state.nodes.contains_key("write"));
    assert!(applied.state.retired_spend.usage.prompt_tokens >= 70);
    assert_eq!(applied.state.total_usage().prompt_tokens, before);
    assert!(applied.state.total_cost_usd().unwrap() >= 0.5);
    assert_eq!(applied.state.plan_version(), 2);
    assert!(applied.state.pending_replan.is_none());
    let updated = applied
        .events
        .iter()
        .find(|event| event.event_type == crate::wire::event::EventType::PlanUpdated)
        .unwrap()
        .payload
        .clone()
        .unwrap();
    assert_eq!(updated["planner"], "llm");
    assert_eq!(updated["reusedNodes"], json!(["brief"]));
    assert_eq!(updated["addedNodes"], json!(["rewrite"]));
    assert_eq!(updated["removedNodes"], json!(["write"]));
    assert_eq!(outbox(&applied), vec!["run:rewrite:1"]);
    let fallback = applied
        .events
        .iter()
        .find(|event| event.payload.as_ref().unwrap()["code"] == "capability_fallback")
        .expect("the escalation's warning comes with the new version");
    assert!(
        fallback
            .message
            .as_deref()
            .unwrap()
            .contains("plan version 2 uses another capability"),
        "{fallback:?}"
    );
    // A twin of the replan step that lost the race is stale.
    assert_eq!(
        resume_step(
            applied.state.clone(),
            &replan,
            &performed(&effect, drafted(json!({"nodes": []}))),
            NOW,
            &context,
        )
        .unwrap(),
        StepAdvance::Stale
    );
    assert!(is_stale(&applied.state, &replan));
    let done = step(
        applied.state,
        answer("rewrite", 1, json!({"draft": {"text": "d"}})),
        &context,
    );
    assert_eq!(done.state.status(), RunStatus::Completed);
}

#[test]
fn a_rejected_replan_draft_is_re_prompted_and_an_unavailable_planner_falls_back() {
    let registry = escalating_registry();
    let validators = ValidatorCache::new();
    let context = llm_engine(&registry, &validators);
    let escalated = escalated_under_the_llm_planner(&context);
    let replan = StepCommand::Replan { version: 2 };
    // Nothing new is scheduled while the version is drafted.
    assert!(
        escalated
            .outbox
            .iter()
            .all(|message| message.command == replan)
    );
    let StepAdvance::Perform(first) = begin_step(&escalated.state, &replan, NOW, &context).unwrap()
    else {
        panic!("asks the model")
    };
    // The model reaches for the capability that just failed: rejected, re-prompted.
    let again = json!({"nodes": [{"nodeId": "write", "capabilityId": "write.cheap"}]});
    let StepAdvance::Perform(second) = resume_step(
        escalated.state.clone(),
        &replan,
        &performed(&first, drafted(again)),
        NOW,
        &context,
    )
    .unwrap() else {
        panic!("a rejected replan draft is re-prompted")
    };
    let Effect::DraftPlan(call) = &second else {
        panic!("a plan draft")
    };
    assert_eq!(call.attempt, 2);
    let asked: Value = serde_json::from_str(&call.request.user_message).unwrap();
    assert_eq!(asked["previousAttempts"].as_array().unwrap().len(), 1);
    assert!(asked["replan"].is_object(), "the re-prompt still says why");
    // Then the planner's provider is down: the deterministic planner makes the version.
    let fell_back = decided(
        resume_step(
            escalated.state,
            &replan,
            &performed(&second, unavailable()),
            NOW,
            &context,
        )
        .unwrap(),
    );
    let kinds = event_types(&fell_back);
    assert_eq!(
        kinds[..4],
        [
            "plan_requested",
            "plan_rejected",
            "warning",
            "plan_requested"
        ],
        "{kinds:?}"
    );
    assert!(kinds.contains(&"plan_updated"), "{kinds:?}");
    let planner_fallback = story(&fell_back)[2].payload_value().unwrap();
    assert_eq!(planner_fallback["code"], "planner_fallback");
    let capabilities: Vec<&str> = fell_back
        .state
        .plan
        .as_ref()
        .unwrap()
        .nodes
        .iter()
        .map(|node| node.capability_id.as_str())
        .collect();
    assert_eq!(capabilities, ["write.plain"]);
    assert_eq!(fell_back.state.status(), RunStatus::Running);
    assert_eq!(fell_back.outbox.len(), 1, "the new version's first node");
}
