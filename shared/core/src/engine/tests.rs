//! Table-driven engine tests: (state, input) → (status, event types, outbox).
//! Every frame a test produces is checked against its published schema in
//! `events/schemas/frames/`.

use serde_json::{Map, Value, json};

use super::*;
// What the engine's face imported before its items moved into files of
// their own (`decision`, `starts`, `steps`); the tables still use them.
pub(super) use crate::basics::{codes::FailureCode, instant::Instant, schema::ValidatorCache};
pub(super) use crate::catalog::registry::Registry;
use crate::contracts::capability::CapabilityRegistration;
pub(super) use crate::contracts::envelope::TaskEnvelope;
use crate::contracts::facet::{Facet, FacetDirection};
use crate::state::run::TokenUsage;
pub(super) use crate::state::run::{NodeStatus, RunState, RunStatus, StepCommand};
pub(super) use crate::wire::event::EventDraft;
use crate::wire::frames::test_support::assert_frames_match_schemas;
pub(super) use std::sync::Arc;

mod agent;
mod branches;
mod cost;
mod escalation;
mod finish;
mod governance;
mod llm_replan;
mod memory;
mod merged_facets;
mod narration;
mod notify;
mod panel;
mod quality;

thread_local! {
    /// The entries the decisions of this test wrote, by key, as a store
    /// keeps them (each test runs on its own thread).
    static STORED_ENTRIES: std::cell::RefCell<std::collections::BTreeMap<String, crate::records::entries::RunEntry>> =
        const { std::cell::RefCell::new(std::collections::BTreeMap::new()) };
}

/// Keeps `decision`'s entries, as its commit would.
pub(super) fn keep_entries(decision: &Decision) {
    STORED_ENTRIES.with(|stored| {
        let mut stored = stored.borrow_mut();
        for entry in &decision.entries {
            stored.insert(entry.key.clone(), entry.clone());
        }
    });
}

/// The kept entries under `prefix`, in key order (a store's prefix read).
pub(super) fn stored_under(prefix: &str) -> Vec<crate::records::entries::RunEntry> {
    STORED_ENTRIES.with(|stored| {
        stored
            .borrow()
            .range(prefix.to_string()..)
            .take_while(|(key, _)| key.starts_with(prefix))
            .map(|(_, entry)| entry.clone())
            .collect()
    })
}

pub(super) const NOW: Instant = Instant::from_unix_millis(1_767_225_600_000);

pub(super) fn registry() -> Registry {
    registry_where_may_clarify(None)
}

/// The test registry; `clarifying` (a capability id) may ask questions.
pub(super) fn registry_where_may_clarify(clarifying: Option<&str>) -> Registry {
    registry_built(clarifying, &[])
}

/// The test registry; `clarifying` (a capability id) may ask questions,
/// and each capability of `remembering` remembers its facets.
pub(super) fn registry_built(
    clarifying: Option<&str>,
    remembering: &[(&str, &[&str])],
) -> Registry {
    let mut registry = Registry::default();
    for name in ["notes", "brief", "draft"] {
        registry
            .add_facet(
                Facet {
                    name: name.into(),
                    title: name.into(),
                    description: name.into(),
                    schema: json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}),
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
    for (id, input, output) in [
        ("plan.brief", "notes", "brief"),
        ("write.draft", "brief", "draft"),
    ] {
        let capability: CapabilityRegistration = serde_json::from_value(json!({
            "capabilityId": id, "agentType": "ai", "version": "1", "displayName": id, "summary": id,
            "inputContract": [input], "outputContract": [output],
            "allowsClarify": clarifying == Some(id),
            "remember": remembering.iter().find(|(named, _)| *named == id).map(|(_, facets)| facets.to_vec()).unwrap_or_default()
        }))
        .unwrap();
        registry.add_capability(capability, "test").unwrap();
    }
    price_the_scripted_model(&mut registry);
    registry
}

/// The test answers' model (`scripted`) costs $1 per million prompt tokens
/// and $2 per million completion tokens.
pub(super) fn price_the_scripted_model(registry: &mut Registry) {
    registry
        .add_model_catalog_document(&crate::catalog::registry::RegistryDocument {
            source_name: "models.json".into(),
            text: r#"{"providers": {"test": {"kind": "openai"}}, "models": {"scripted": {"provider": "test", "inputPerMillionUsd": 1.0, "outputPerMillionUsd": 2.0}}}"#.into(),
        })
        .unwrap();
}

fn envelope() -> TaskEnvelope {
    TaskEnvelope::parse_value(&json!({
        "objective": "o",
        "inputs": {"notes": {"text": "n"}},
        "outputContract": {"schema": {"type": "object", "required": ["draft"], "properties": {"draft": {"type": "object"}}}}
    }))
    .unwrap()
}

pub(super) fn engine<'a>(
    registry: &'a Registry,
    validators: &'a ValidatorCache,
) -> EngineContext<'a> {
    EngineContext {
        registry,
        validators,
        planner: PlannerChoice::Deterministic,
        max_planner_attempts: DEFAULT_MAX_PLANNER_ATTEMPTS,
        human_task_timeout: DEFAULT_HUMAN_TASK_TIMEOUT,
        agent_session_limit: crate::records::agents::DEFAULT_SESSION_LIMIT,
        announce_to_event_bus: false,
        unavailable_capabilities: &NO_CAPABILITY_UNAVAILABLE,
        capability_health: &crate::catalog::capability_health::NO_HEALTH,
        capability_relevance: None,
    }
}

pub(super) fn identity() -> NewRunIdentity {
    NewRunIdentity {
        run_id: "run".into(),
        tenant_id: "t".into(),
        correlation_id: "c".into(),
        thread_id: "th".into(),
        trace: None,
        submitted_by: None,
    }
}

fn started() -> RunState {
    start_run(identity(), envelope(), NOW, 3).state
}

pub(super) fn started_run() -> RunState {
    started()
}

/// What the shell would observe, for the table.
#[derive(Clone)]
pub(super) enum Observed {
    /// The planning step runs (deterministic planner).
    Plan,
    /// The node's model answers `content`.
    Answer {
        node: &'static str,
        attempt: u32,
        content: String,
        tokens: u64,
    },
    /// The node's provider gives up.
    ProviderFailed { node: &'static str, attempt: u32 },
    /// The node's step begins and is decided without an effect.
    Begin { node: &'static str, attempt: u32 },
}

pub(super) fn answer(node: &'static str, attempt: u32, content: Value) -> Observed {
    Observed::Answer {
        node,
        attempt,
        content: content.to_string(),
        tokens: 0,
    }
}

pub(super) fn node_command(node: &str, attempt: u32) -> StepCommand {
    StepCommand::ExecuteNode {
        node_id: node.into(),
        attempt,
    }
}

/// Drives one step the way the shell does and returns its decision. Every
/// frame (effect frames included) is checked against its schema.
/// What a test says an effect produced; [`performed`] pairs it with its
/// effect the way the shell does.
#[derive(Debug, Clone)]
pub(super) enum TestOutcome {
    Model(ModelOutcome),
    Turn(TurnOutcome),
    Tool(crate::records::conversation::ToolOutcome),
    Delivery(DeliveryOutcome),
    Recall(RecallOutcome),
    Remembered(RememberOutcome),
}

/// The effect with its outcome; a pair the shell cannot make (a tool result
/// for a model call) fails the test.
pub(super) fn performed(effect: &Effect, outcome: TestOutcome) -> Performed {
    match (effect.clone(), outcome) {
        (Effect::CallModel(call), TestOutcome::Model(outcome)) => {
            Performed::CallModel(call, outcome)
        }
        (Effect::DraftPlan(call), TestOutcome::Model(outcome)) => {
            Performed::DraftPlan(call, outcome)
        }
        (Effect::AskJudge(call), TestOutcome::Model(outcome)) => Performed::AskJudge(call, outcome),
        (Effect::ReviewPlan(call), TestOutcome::Model(outcome)) => {
            Performed::ReviewPlan(call, outcome)
        }
        (Effect::Converse(call), TestOutcome::Turn(outcome)) => Performed::Converse(call, outcome),
        (Effect::RunTool(call), TestOutcome::Tool(outcome)) => Performed::RunTool(call, outcome),
        (Effect::Notify(delivery), TestOutcome::Delivery(outcome)) => {
            Performed::Notify(delivery, outcome)
        }
        (Effect::RecallMemory(call), TestOutcome::Recall(outcome)) => {
            Performed::RecallMemory(call, outcome)
        }
        (Effect::Remember(remembering), TestOutcome::Remembered(outcome)) => {
            Performed::Remember(remembering, outcome)
        }
        (effect, outcome) => panic!("the shell cannot produce {outcome:?} for {effect:?}"),
    }
}

pub(super) fn step(state: RunState, observed: Observed, context: &EngineContext<'_>) -> Decision {
    let (command, outcome) = match observed {
        Observed::Plan => (StepCommand::Plan, None),
        Observed::Begin { node, attempt } => (node_command(node, attempt), None),
        Observed::Answer {
            node,
            attempt,
            content,
            tokens,
        } => (
            node_command(node, attempt),
            Some(TestOutcome::Model(Ok(ModelAnswer {
                content,
                usage: TokenUsage {
                    prompt_tokens: tokens,
                    completion_tokens: 0,
                    cached_prompt_tokens: 0,
                    cache_write_prompt_tokens: 0,
                },
                model: "scripted".into(),
            }))),
        ),
        Observed::ProviderFailed { node, attempt } => (
            node_command(node, attempt),
            Some(TestOutcome::Model(Err(ModelFailure {
                code: FailureCode::LlmServerError,
                message: "500".into(),
            }))),
        ),
    };
    let advance = begin_step(&state, &command, NOW, context).unwrap();
    let decision = match (advance, outcome) {
        (StepAdvance::Decided(decision), None) => *decision,
        (StepAdvance::Perform(effect), Some(outcome)) => {
            if let Effect::CallModel(call) = &effect {
                assert_frames_match_schemas(&call.start_frames);
            }
            match resume_step(
                state.clone(),
                &command,
                &performed(&effect, outcome),
                NOW,
                context,
            )
            .unwrap()
            {
                StepAdvance::Decided(decision) => *decision,
                other => panic!("expected a decision, got {other:?}"),
            }
        }
        (other, _) => panic!("unexpected advance {other:?}"),
    };
    assert_frames_match_schemas(&decision.events);
    keep_entries(&decision);
    decision
}

fn planned(context: &EngineContext<'_>) -> RunState {
    step(started(), Observed::Plan, context).state
}

/// A run the deterministic planner has planned.
pub(super) fn planned_run(context: &EngineContext<'_>) -> RunState {
    planned(context)
}

/// The frame types of a decision, without the narration (`phase`,
/// `handoff`, a node's `metrics`), which `narration_follows_the_run` checks.
pub(super) fn event_types(decision: &Decision) -> Vec<&'static str> {
    story(decision)
        .iter()
        .map(|event| event.event_type.as_str())
        .collect()
}

/// A decision's frames without the narration.
pub(super) fn story(decision: &Decision) -> Vec<&EventDraft> {
    decision
        .events
        .iter()
        .filter(|event| !is_narration(event))
        .collect()
}

pub(super) fn is_narration(event: &EventDraft) -> bool {
    use crate::wire::event::EventType;
    matches!(event.event_type, EventType::Phase | EventType::Handoff)
        || (event.event_type == EventType::Metrics && event.node_id.is_some())
}

pub(super) fn outbox(decision: &Decision) -> Vec<String> {
    decision
        .outbox
        .iter()
        .map(|message| message.message_id.clone())
        .collect()
}

#[test]
fn start_run_emits_start_and_queues_planning() {
    let decision = start_run(identity(), envelope(), NOW, 3);
    assert_eq!(event_types(&decision), vec!["start"]);
    assert_eq!(outbox(&decision), vec!["run:plan"]);
    assert_eq!(decision.state.status(), RunStatus::Queued);
    assert_eq!(decision.state.created_at.rfc3339(), "2026-01-01T00:00:00Z");
    assert_frames_match_schemas(&decision.events);
}

#[test]
fn step_table() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let valid_brief = json!({"brief": {"text": "b"}});
    let valid_draft = json!({"draft": {"text": "d"}});
    let after_first_node = step(
        planned(&context),
        answer("node_1", 1, valid_brief.clone()),
        &context,
    )
    .state;
    let mut on_last_attempt = planned(&context);
    if let Some(record) = on_last_attempt.node_mut("node_1") {
        record.current_attempt = 3;
    }
    let mut with_human_writer = after_first_node.clone();
    if let Some(plan) = with_human_writer.plan.as_mut() {
        let plan = Arc::make_mut(plan);
        if let Some(node) = plan.nodes.iter_mut().find(|node| node.node_id == "node_2") {
            node.executor = crate::planning::plan::NodeExecutor::Human;
        }
    }
    struct Row {
        name: &'static str,
        state: RunState,
        observed: Observed,
        status: RunStatus,
        events: Vec<&'static str>,
        outbox: Vec<&'static str>,
    }
    let rows = vec![
        Row {
            name: "plan accepted schedules the first node",
            state: started(),
            observed: Observed::Plan,
            status: RunStatus::Running,
            events: vec!["plan_requested", "plan_generated"],
            outbox: vec!["run:node_1:1"],
        },
        Row {
            name: "a valid answer completes the node and schedules the next",
            state: planned(&context),
            observed: answer("node_1", 1, valid_brief.clone()),
            status: RunStatus::Running,
            events: vec!["node_complete"],
            outbox: vec!["run:node_2:1"],
        },
        Row {
            name: "an invalid answer is re-prompted",
            state: planned(&context),
            observed: answer("node_1", 1, json!({"brief": {"wrong": true}})),
            status: RunStatus::Running,
            events: vec!["validation_error"],
            outbox: vec!["run:node_1:2"],
        },
        Row {
            name: "text that is not JSON is re-prompted",
            state: planned(&context),
            observed: Observed::Answer {
                node: "node_1",
                attempt: 1,
                content: "{oops".into(),
                tokens: 0,
            },
            status: RunStatus::Running,
            events: vec!["validation_error"],
            outbox: vec!["run:node_1:2"],
        },
        Row {
            name: "an invalid answer on the last attempt fails the run",
            state: on_last_attempt,
            observed: answer("node_1", 3, json!({})),
            status: RunStatus::Failed,
            events: vec!["validation_error", "node_error", "metrics", "error"],
            outbox: vec![],
        },
        Row {
            name: "the last node's valid answer completes the run",
            state: after_first_node.clone(),
            observed: answer("node_2", 1, valid_draft),
            status: RunStatus::Completed,
            events: vec!["node_complete", "metrics", "complete"],
            outbox: vec![],
        },
        Row {
            name: "a provider failure fails the node and the run",
            state: after_first_node,
            observed: Observed::ProviderFailed {
                node: "node_2",
                attempt: 1,
            },
            status: RunStatus::Failed,
            events: vec!["node_error", "metrics", "error"],
            outbox: vec![],
        },
        Row {
            name: "a human node parks the run without an effect",
            state: with_human_writer,
            observed: Observed::Begin {
                node: "node_2",
                attempt: 1,
            },
            status: RunStatus::AwaitingHuman,
            events: vec!["node_start"],
            // Its SLA: a delayed message that fails the run if unanswered.
            outbox: vec!["run:timer:sla:node_2:1"],
        },
    ];
    for row in rows {
        let decision = step(row.state, row.observed, &context);
        assert_eq!(decision.state.status(), row.status, "{}", row.name);
        assert_eq!(event_types(&decision), row.events, "{}", row.name);
        assert_eq!(outbox(&decision), row.outbox, "{}", row.name);
    }
}

#[test]
fn no_plan_rejects_the_run() {
    let mut empty = Registry::default();
    for facet in registry().facets.list() {
        empty.add_facet(facet.clone(), "test").unwrap();
    }
    let validators = ValidatorCache::new();
    let context = engine(&empty, &validators);
    let decision = step(started(), Observed::Plan, &context);
    assert_eq!(decision.state.status(), RunStatus::PlanRejected);
    assert_eq!(
        event_types(&decision),
        vec!["plan_requested", "plan_rejected", "metrics", "error"]
    );
    assert_eq!(
        decision.state.failure.as_ref().map(|failure| failure.code),
        Some(FailureCode::PlanRejected)
    );
    // The error says which part failed and at which stage.
    let error = decision.events.last().unwrap().payload.as_ref().unwrap();
    assert_eq!(error["component"], "planner", "{error:?}");
    assert_eq!(error["stage"], "planning", "{error:?}");
    assert!(outbox(&decision).is_empty());
}

#[test]
fn frames_carry_the_plan_version_and_node_frames_their_provenance() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let state = planned(&context);
    let StepAdvance::Perform(Effect::CallModel(call)) =
        begin_step(&state, &node_command("node_1", 1), NOW, &context).unwrap()
    else {
        panic!("node_1 is an AI node")
    };
    let started = call
        .start_frames
        .iter()
        .find(|frame| frame.event_type == crate::wire::event::EventType::NodeStart)
        .unwrap();
    assert_eq!(started.plan_version, 1);
    assert_eq!(started.node_id.as_deref(), Some("node_1"));
    let provenance = started.facet_provenance.as_ref().unwrap();
    assert_eq!(provenance.input[0].facet, "notes");
    assert_eq!(provenance.output[0].facet, "brief");
    assert_eq!(started.payload.as_ref().unwrap()["executorType"], "ai");
    // The `complete` frame says where each delivered property came from.
    let briefed = step(
        state,
        answer("node_1", 1, json!({"brief": {"text": "b"}})),
        &context,
    );
    let done = step(
        briefed.state,
        answer("node_2", 1, json!({"draft": {"text": "d"}})),
        &context,
    );
    assert_eq!(done.state.status(), RunStatus::Completed);
    let complete = done
        .events
        .iter()
        .find(|event| event.event_type == crate::wire::event::EventType::Complete)
        .expect("the run completes");
    let delivered = complete
        .facet_provenance
        .as_ref()
        .expect("complete carries provenance");
    assert!(delivered.input.is_empty());
    let facets: Vec<&str> = delivered
        .output
        .iter()
        .map(|entry| entry.facet.as_str())
        .collect();
    assert!(
        !facets.is_empty() && facets.iter().all(|facet| *facet == "draft"),
        "{facets:?}"
    );
    assert_frames_match_schemas(&done.events);
}

#[test]
fn built_in_nodes_and_rejected_inputs_resolve_without_an_effect() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let mut state = planned(&context);
    let mut envelope = (*state.envelope).clone();
    envelope.inputs.insert("notes".into(), json!({"text": 5}));
    state.envelope = Arc::new(envelope);
    let decision = step(
        state,
        Observed::Begin {
            node: "node_1",
            attempt: 1,
        },
        &context,
    );
    assert_eq!(
        event_types(&decision),
        vec!["validation_error", "node_error", "metrics", "error"]
    );
    let errors = &story(&decision)[0].payload.as_ref().unwrap()["errors"];
    assert_eq!(errors[0]["facet"], "notes");
    assert_eq!(
        decision.state.failure.as_ref().map(|failure| failure.code),
        Some(FailureCode::InputContractViolated)
    );
}

#[test]
fn completion_carries_the_output_and_feedback_reaches_the_next_attempt() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let state = step(
        planned(&context),
        answer("node_1", 1, json!({"brief": 1})),
        &context,
    )
    .state;
    let StepAdvance::Perform(Effect::CallModel(call)) =
        begin_step(&state, &node_command("node_1", 2), NOW, &context).unwrap()
    else {
        unreachable!("node_1 is an AI node")
    };
    let user: Value = serde_json::from_str(&call.request.user_message).unwrap();
    assert_eq!(user["previousAttemptErrors"][0]["facet"], "brief");
    let state = step(
        state,
        answer("node_1", 2, json!({"brief": {"text": "b"}})),
        &context,
    )
    .state;
    let done = step(
        state,
        answer("node_2", 1, json!({"draft": {"text": "d"}})),
        &context,
    );
    assert_eq!(done.state.output, Some(json!({"draft": {"text": "d"}})));
    let complete = done.events.last().unwrap();
    assert_eq!(
        complete.payload.as_ref().unwrap()["output"]["draft"]["text"],
        "d"
    );
}

#[test]
fn staleness_table() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let planned_state = planned(&context);
    let first = node_command("node_1", 1);
    assert!(
        is_stale(&planned_state, &StepCommand::Plan),
        "planning twice"
    );
    assert!(matches!(
        begin_step(&planned_state, &StepCommand::Plan, NOW, &context).unwrap(),
        StepAdvance::Stale
    ));
    assert!(!is_stale(&planned_state, &first));
    assert!(
        is_stale(&planned_state, &node_command("node_2", 1)),
        "not scheduled yet"
    );
    let done = step(
        planned_state,
        answer("node_1", 1, json!({"brief": {"text": "b"}})),
        &context,
    )
    .state;
    assert!(is_stale(&done, &first), "duplicate after completion");
    assert!(!is_stale(&started(), &StepCommand::Plan));
}

#[test]
fn resuming_on_a_reloaded_state_reapplies_the_same_outcome_or_finds_it_stale() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let state = planned(&context);
    let command = node_command("node_1", 1);
    let StepAdvance::Perform(effect) = begin_step(&state, &command, NOW, &context).unwrap() else {
        panic!("node_1 calls its model")
    };
    let outcome = TestOutcome::Model(Ok(ModelAnswer {
        content: json!({"brief": {"text": "b"}}).to_string(),
        usage: TokenUsage::default(),
        model: "m".into(),
    }));
    let first = resume_step(
        state.clone(),
        &command,
        &performed(&effect, outcome.clone()),
        NOW,
        &context,
    )
    .unwrap();
    let again = resume_step(
        state.clone(),
        &command,
        &performed(&effect, outcome.clone()),
        NOW,
        &context,
    )
    .unwrap();
    assert_eq!(
        first, again,
        "the same outcome on the same state decides the same"
    );
    let StepAdvance::Decided(decision) = first else {
        panic!("decided")
    };
    let after = resume_step(
        decision.state.clone(),
        &command,
        &performed(&effect, outcome),
        NOW,
        &context,
    )
    .unwrap();
    assert_eq!(
        after,
        StepAdvance::Stale,
        "a twin that lost the race is stale"
    );
}

#[test]
fn the_llm_planner_is_judged_once_per_draft_and_falls_back() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = EngineContext {
        planner: PlannerChoice::Llm,
        max_planner_attempts: 2,
        ..engine(&registry, &validators)
    };
    let state = started();
    let StepAdvance::Perform(first) =
        begin_step(&state, &StepCommand::Plan, NOW, &context).unwrap()
    else {
        panic!("the LLM planner asks the model first")
    };
    let drafted = |content: Value| {
        TestOutcome::Model(Ok(ModelAnswer {
            content: content.to_string(),
            usage: TokenUsage {
                prompt_tokens: 100,
                completion_tokens: 20,
                ..TokenUsage::default()
            },
            model: "planner".into(),
        }))
    };
    let unknown = json!({"nodes": [{"nodeId": "a", "capabilityId": "no.such"}]});
    let StepAdvance::Perform(second) = resume_step(
        state.clone(),
        &StepCommand::Plan,
        &performed(&first, drafted(unknown.clone())),
        NOW,
        &context,
    )
    .unwrap() else {
        panic!("a rejected draft is re-prompted")
    };
    let Effect::DraftPlan(call) = &second else {
        panic!("a plan draft")
    };
    assert_eq!(call.attempt, 2);
    assert_eq!(call.rejected.len(), 1);
    let kinds: Vec<&str> = call
        .frames_before
        .iter()
        .map(|f| f.event_type.as_str())
        .collect();
    assert_eq!(kinds, vec!["plan_requested", "plan_rejected"]);
    assert_frames_match_schemas(&call.frames_before);
    // The second draft is rejected too: the deterministic planner plans.
    let StepAdvance::Decided(fallback) = resume_step(
        state.clone(),
        &StepCommand::Plan,
        &performed(&second, drafted(unknown)),
        NOW,
        &context,
    )
    .unwrap() else {
        panic!("decided")
    };
    // Both rejected drafts' frames are committed with the decision, first
    // (nothing was appended outside it).
    assert_eq!(
        event_types(&fallback),
        vec![
            "plan_requested",
            "plan_rejected",
            "plan_requested",
            "plan_rejected",
            "warning",
            "warning",
            "plan_requested",
            "plan_generated"
        ]
    );
    assert_eq!(story(&fallback)[0].payload.as_ref().unwrap()["attempt"], 1);
    assert_eq!(story(&fallback)[2].payload.as_ref().unwrap()["attempt"], 2);
    // Each rejected draft says what it used; both drafts count in the
    // run's usage (the unpriced model is warned about once).
    for rejected in [1, 3] {
        assert_eq!(
            story(&fallback)[rejected].payload.as_ref().unwrap()["response"],
            json!({"model": "planner", "usage": {"prompt": 100, "completion": 20, "total": 120}})
        );
    }
    assert_eq!(
        story(&fallback)[4].payload.as_ref().unwrap()["code"],
        "model_price_unknown"
    );
    assert_eq!(
        story(&fallback)[5].payload.as_ref().unwrap()["code"],
        "planner_fallback"
    );
    assert_eq!(
        story(&fallback)[5].payload.as_ref().unwrap()["rejectedDrafts"],
        2
    );
    assert_eq!(fallback.state.total_usage().prompt_tokens, 200);
    assert_eq!(fallback.state.total_usage().completion_tokens, 40);
    assert_frames_match_schemas(&fallback.events);
    // A valid first draft is accepted as drafted.
    let valid = json!({"nodes": [
        {"nodeId": "brief", "capabilityId": "plan.brief"},
        {"nodeId": "write", "capabilityId": "write.draft", "dependsOn": ["brief"]}
    ]});
    let StepAdvance::Decided(accepted) = resume_step(
        state.clone(),
        &StepCommand::Plan,
        &performed(&first, drafted(valid)),
        NOW,
        &context,
    )
    .unwrap() else {
        panic!("decided")
    };
    assert_eq!(
        event_types(&accepted),
        vec!["warning", "plan_requested", "plan_generated"]
    );
    assert_eq!(
        story(&accepted)[2].payload.as_ref().unwrap()["response"]["model"],
        "planner"
    );
    assert_eq!(accepted.state.total_usage().total(), 120);
    assert_eq!(
        story(&accepted)[1].payload.as_ref().unwrap()["planner"],
        "llm"
    );
    assert_eq!(outbox(&accepted), vec!["run:brief:1"]);
    // The model is unavailable: fallback at once.
    let StepAdvance::Decided(unavailable) = resume_step(
        state.clone(),
        &StepCommand::Plan,
        &performed(
            &first,
            TestOutcome::Model(Err(ModelFailure {
                code: FailureCode::LlmTimeout,
                message: "timed out".into(),
            })),
        ),
        NOW,
        &context,
    )
    .unwrap() else {
        panic!("decided")
    };
    assert_eq!(
        event_types(&unavailable),
        vec!["warning", "plan_requested", "plan_generated"]
    );
}

#[test]
fn a_planner_request_over_its_models_window_is_not_sent_and_the_deterministic_planner_plans() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = EngineContext {
        planner: PlannerChoice::Llm,
        ..engine(&registry, &validators)
    };
    // A 500,000-character objective: about 125,000 tokens, over the 96,000
    // a 128,000-token window leaves for a prompt.
    let envelope = TaskEnvelope::parse_value(&json!({
        "objective": "o".repeat(500_000),
        "inputs": {"notes": {"text": "n"}},
        "outputContract": {"schema": {"type": "object", "required": ["draft"], "properties": {"draft": {"type": "object"}}}}
    }))
    .unwrap();
    let state = start_run(identity(), envelope, NOW, 3).state;
    let StepAdvance::Decided(planned) =
        begin_step(&state, &StepCommand::Plan, NOW, &context).unwrap()
    else {
        panic!("decided at once: no model call")
    };
    assert_eq!(
        event_types(&planned),
        vec!["warning", "plan_requested", "plan_generated"]
    );
    let warning = &story(&planned)[0];
    assert_eq!(
        warning.payload.as_ref().unwrap()["code"],
        "planner_fallback"
    );
    assert!(
        warning
            .message
            .as_deref()
            .unwrap()
            .contains("not sent: the request is about"),
        "{warning:?}"
    );
    assert_frames_match_schemas(&planned.events);
}

#[test]
fn cancel_and_shell_failures_end_a_live_run_once() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let cancelled = cancel_run(planned(&context), "enough", NOW, &context).unwrap();
    assert_eq!(cancelled.state.status(), RunStatus::Cancelled);
    assert_eq!(event_types(&cancelled), vec!["metrics", "error"]);
    assert_frames_match_schemas(&cancelled.events);
    assert!(cancel_run(cancelled.state, "again", NOW, &context).is_none());
    let failed = fail_run(
        planned(&context),
        FailureCode::StateTooLarge,
        "too big",
        NOW,
        &context,
    )
    .unwrap();
    assert_eq!(
        failed.state.failure.map(|failure| failure.code),
        Some(FailureCode::StateTooLarge)
    );
}

#[test]
fn the_token_budget_stops_the_run_before_more_is_spent() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let with_budget = |budget: u64| {
        let mut state = planned(&context);
        let mut envelope = (*state.envelope).clone();
        envelope.policies.planner =
            Some(serde_json::from_value(json!({"optimisation": {"maxTokens": budget}})).unwrap());
        state.envelope = Arc::new(envelope);
        state
    };
    let costly = |node: &'static str, content: Value, tokens: u64| Observed::Answer {
        node,
        attempt: 1,
        content: content.to_string(),
        tokens,
    };
    // (budget, tokens of the first answer) → (status, last event, steps queued)
    let table = [
        (1_000, 400, RunStatus::Running, "node_complete", 1),
        (1_000, 1_001, RunStatus::Failed, "error", 0),
    ];
    for (budget, tokens, status, last_event, queued) in table {
        let decision = step(
            with_budget(budget),
            costly("node_1", json!({"brief": {"text": "b"}}), tokens),
            &context,
        );
        assert_eq!(decision.state.status(), status, "{budget}/{tokens}");
        assert_eq!(event_types(&decision).last().copied(), Some(last_event));
        assert_eq!(decision.outbox.len(), queued, "{budget}/{tokens}");
        if status == RunStatus::Failed {
            assert_eq!(
                decision.state.failure.as_ref().map(|failure| failure.code),
                Some(FailureCode::TokenBudgetExceeded)
            );
        }
    }
    // Over budget on the last node with a valid answer: the output is
    // delivered, with a warning.
    let after_first = step(
        with_budget(1_000),
        costly("node_1", json!({"brief": {"text": "b"}}), 400),
        &context,
    )
    .state;
    let last = step(
        after_first,
        costly("node_2", json!({"draft": {"text": "d"}}), 700),
        &context,
    );
    assert_eq!(last.state.status(), RunStatus::Completed);
    assert!(event_types(&last).contains(&"warning"));
    assert_eq!(event_types(&last).last().copied(), Some("complete"));
}

#[test]
fn secrets_in_the_envelope_context_never_reach_the_model() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let mut state = planned(&context);
    let mut envelope = (*state.envelope).clone();
    envelope.inputs.insert(
        "crm".into(),
        json!({"apiKey": "sk-live-1", "region": "eu", "usage": {"maxTokens": 9}}),
    );
    envelope.inputs.insert("password".into(), json!("hunter2"));
    state.envelope = Arc::new(envelope);
    let StepAdvance::Perform(Effect::CallModel(call)) =
        begin_step(&state, &node_command("node_1", 1), NOW, &context).unwrap()
    else {
        panic!("node_1 calls its model")
    };
    let user: Value = serde_json::from_str(&call.request.user_message).unwrap();
    assert!(!call.request.user_message.contains("sk-live-1"));
    assert!(!call.request.user_message.contains("hunter2"));
    assert_eq!(user["context"]["crm"]["apiKey"], "[redacted]");
    assert_eq!(user["context"]["crm"]["region"], "eu");
    assert_eq!(user["context"]["crm"]["usage"]["maxTokens"], 9);
    assert_eq!(user["context"]["password"], "[redacted]");
}

/// A run parked on its human node (`node_2` of the two-node plan).
pub(super) fn parked_on_a_person(context: &EngineContext<'_>) -> RunState {
    let parked = parking_on_a_person(context, None).state;
    assert_eq!(parked.status(), RunStatus::AwaitingHuman);
    parked
}

/// The step that parks the run on `node_2`, made a person's node (with
/// `surface`: its capability's instruction templates and assignment
/// defaults).
pub(super) fn parking_on_a_person(
    context: &EngineContext<'_>,
    surface: Option<crate::planning::plan::TaskSurface>,
) -> Decision {
    let mut state = step(
        planned(context),
        answer("node_1", 1, json!({"brief": {"text": "b"}})),
        context,
    )
    .state;
    if let Some(plan) = state.plan.as_mut() {
        let plan = Arc::make_mut(plan);
        if let Some(node) = plan.nodes.iter_mut().find(|node| node.node_id == "node_2") {
            node.executor = crate::planning::plan::NodeExecutor::Human;
            node.task_surface = surface;
        }
    }
    step(
        state,
        Observed::Begin {
            node: "node_2",
            attempt: 1,
        },
        context,
    )
}

#[test]
fn a_persons_node_start_says_why_the_plan_hands_it_to_a_person() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let parked = parking_on_a_person(&context, None);
    let start = parked
        .events
        .iter()
        .find(|event| event.event_type == crate::wire::event::EventType::NodeStart)
        .expect("the person's node starts");
    // node_2 makes the draft the output contract asks for.
    assert_eq!(
        start.payload.as_ref().unwrap()["rationale"],
        "write.draft is a person's capability; it makes draft for the output contract"
    );
}

#[test]
fn a_persons_valid_answer_completes_the_node_and_the_run() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let parked = parked_on_a_person(&context);
    let version = parked.plan_version();
    let decision = answer_human_node(
        parked,
        HumanAnswer {
            node_id: "node_2",
            expected_plan_version: version,
            output: json!({"draft": {"text": "written by a person"}}),
            by: &crate::state::tasks::Answerer::operator(None),
        },
        NOW,
        &context,
    )
    .unwrap()
    .unwrap();
    assert_frames_match_schemas(&decision.events);
    assert_eq!(decision.state.status(), RunStatus::Completed);
    assert_eq!(
        event_types(&decision)[..2],
        ["plan_generated", "node_complete"],
        "a resume restates the plan (metadata.resumed) before going on"
    );
    assert_eq!(
        story(&decision)[0].payload.as_ref().unwrap()["metadata"]["resumed"],
        true
    );
    assert!(
        decision.state.governance.timers.is_empty(),
        "the answered task's SLA timer is gone"
    );
    assert_eq!(event_types(&decision).last(), Some(&"complete"));
    assert_eq!(
        decision.state.output.as_ref(),
        Some(&json!({"draft": {"text": "written by a person"}}))
    );
    // The same answer again finds nothing waiting.
    let again = answer_human_node(
        decision.state,
        HumanAnswer {
            node_id: "node_2",
            expected_plan_version: version,
            output: json!({"draft": {"text": "twice"}}),
            by: &crate::state::tasks::Answerer::operator(None),
        },
        NOW,
        &context,
    )
    .unwrap();
    assert!(matches!(
        again,
        Err(HumanInputRefused::NotAwaiting {
            run_status: RunStatus::Completed,
            node_status: Some(NodeStatus::Completed)
        })
    ));
}

#[test]
fn a_task_assigned_to_a_group_takes_a_members_answer_and_records_who_gave_it() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let mut parked = parked_on_a_person(&context);
    // The capability's assignmentDefaults name a role: a group of people.
    if let Some(plan) = parked.plan.as_mut() {
        let plan = Arc::make_mut(plan);
        if let Some(node) = plan.nodes.iter_mut().find(|node| node.node_id == "node_2") {
            node.task_surface = Some(crate::planning::plan::TaskSurface {
                instruction_templates: None,
                widgets: Default::default(),
                assignment_defaults: json!({"role": "group_a", "users": ["ops@example.org"]})
                    .as_object()
                    .cloned(),
            });
        }
    }
    let tasks = crate::state::tasks::human_tasks(&parked);
    assert_eq!(
        tasks[0].assigned_to,
        Some(crate::state::tasks::Assignment {
            users: vec!["ops@example.org".into()],
            groups: vec!["group_a".into()],
        })
    );
    let version = parked.plan_version();
    let answer_by = |answerer: &crate::state::tasks::Answerer| {
        answer_human_node(
            parked.clone(),
            HumanAnswer {
                node_id: "node_2",
                expected_plan_version: version,
                output: json!({"draft": {"text": "reviewed"}}),
                by: answerer,
            },
            NOW,
            &context,
        )
        .unwrap()
    };
    let outsider = crate::state::tasks::Answerer {
        user: Some("eve@example.org".into()),
        groups: vec!["group_b".into()],
        may_answer_any_task: false,
    };
    assert_eq!(
        answer_by(&outsider).unwrap_err(),
        HumanInputRefused::NotAssignee {
            assigned_to: tasks[0].assigned_to.clone().unwrap()
        }
    );
    let member = crate::state::tasks::Answerer {
        user: Some("ana@example.org".into()),
        groups: vec!["group_a".into()],
        may_answer_any_task: false,
    };
    let decision = answer_by(&member).unwrap();
    assert_frames_match_schemas(&decision.events);
    assert_eq!(
        decision.state.nodes["node_2"].answered_by.as_deref(),
        Some("ana@example.org")
    );
    let completed = decision
        .events
        .iter()
        .find(|event| event.event_type == crate::wire::event::EventType::NodeComplete)
        .unwrap();
    assert_eq!(
        completed.payload.as_ref().unwrap()["answeredBy"],
        "ana@example.org"
    );
    // A user named in the assignment needs no group; an operator needs neither.
    let named = crate::state::tasks::Answerer {
        user: Some("ops@example.org".into()),
        groups: Vec::new(),
        may_answer_any_task: false,
    };
    assert!(answer_by(&named).is_ok());
    assert!(answer_by(&crate::state::tasks::Answerer::operator(None)).is_ok());
}

#[test]
fn the_envelopes_task_assignment_takes_the_place_of_the_capabilitys() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let mut parked = parked_on_a_person(&context);
    let capability_id = parked
        .plan
        .as_ref()
        .unwrap()
        .node("node_2")
        .unwrap()
        .capability_id
        .clone();
    if let Some(plan) = parked.plan.as_mut() {
        let plan = Arc::make_mut(plan);
        if let Some(node) = plan.nodes.iter_mut().find(|node| node.node_id == "node_2") {
            node.task_surface = Some(crate::planning::plan::TaskSurface {
                instruction_templates: None,
                widgets: Default::default(),
                assignment_defaults: json!({"role": "group_a"}).as_object().cloned(),
            });
        }
    }
    let mut envelope = parked.envelope.as_ref().clone();
    envelope.policies.task_assignments = serde_json::from_value(
        json!({capability_id: {"users": ["lee@example.org"], "roles": ["group_c"]}}),
    )
    .unwrap();
    parked.envelope = Arc::new(envelope);
    let assigned = crate::state::tasks::Assignment {
        users: vec!["lee@example.org".into()],
        groups: vec!["group_c".into()],
    };
    assert_eq!(
        crate::state::tasks::human_tasks(&parked)[0].assigned_to,
        Some(assigned.clone())
    );
    let version = parked.plan_version();
    let answer_by = |answerer: &crate::state::tasks::Answerer| {
        answer_human_node(
            parked.clone(),
            HumanAnswer {
                node_id: "node_2",
                expected_plan_version: version,
                output: json!({"draft": {"text": "reviewed"}}),
                by: answerer,
            },
            NOW,
            &context,
        )
        .unwrap()
    };
    // The capability's group no longer answers; the envelope's does.
    let capabilitys_group = crate::state::tasks::Answerer {
        user: Some("ana@example.org".into()),
        groups: vec!["group_a".into()],
        may_answer_any_task: false,
    };
    assert_eq!(
        answer_by(&capabilitys_group).unwrap_err(),
        HumanInputRefused::NotAssignee {
            assigned_to: assigned
        }
    );
    let envelopes_group = crate::state::tasks::Answerer {
        user: Some("kim@example.org".into()),
        groups: vec!["group_c".into()],
        may_answer_any_task: false,
    };
    assert!(answer_by(&envelopes_group).is_ok());
}

#[test]
fn answers_that_cannot_apply_change_nothing_and_say_why() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let parked = parked_on_a_person(&context);
    let version = parked.plan_version();
    let refused = |node_id: &'static str, expected_plan_version: u32, output: Value| {
        answer_human_node(
            parked.clone(),
            HumanAnswer {
                node_id,
                expected_plan_version,
                output,
                by: &crate::state::tasks::Answerer::operator(None),
            },
            NOW,
            &context,
        )
        .unwrap()
        .unwrap_err()
    };
    match refused("node_2", version, json!({"draft": {"text": 5}})) {
        HumanInputRefused::OutputContractViolated(violations) => {
            assert_eq!(violations.len(), 1, "{violations:?}");
            assert_eq!(violations[0].instance_pointer, "/draft/text");
        }
        other => panic!("expected a contract violation, got {other:?}"),
    }
    assert_eq!(
        refused("node_2", version + 1, json!({"draft": {"text": "d"}})),
        HumanInputRefused::StalePlanVersion { current: version }
    );
    assert!(matches!(
        refused("node_1", version, json!({"brief": {"text": "b"}})),
        HumanInputRefused::NotAwaiting {
            run_status: RunStatus::AwaitingHuman,
            node_status: Some(NodeStatus::Completed)
        }
    ));
    assert!(matches!(
        refused("node_9", version, json!({})),
        HumanInputRefused::NotAwaiting {
            node_status: None,
            ..
        }
    ));
}

#[test]
fn a_person_declining_fails_the_run_with_the_reason() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let parked = parked_on_a_person(&context);
    let decision = decline_human_node(
        parked,
        HumanDecline {
            node_id: "node_2",
            reason_code: "out_of_scope",
            note: Some("not our brand"),
            by: &crate::state::tasks::Answerer::operator(None),
        },
        NOW,
        &context,
    )
    .unwrap()
    .unwrap();
    assert_frames_match_schemas(&decision.events);
    assert_eq!(
        event_types(&decision),
        vec!["node_error", "metrics", "error"]
    );
    assert_eq!(decision.state.status(), RunStatus::Failed);
    let failure = decision.state.failure.unwrap();
    assert_eq!(failure.code, FailureCode::HumanDeclined);
    assert!(failure.message.contains("out_of_scope") && failure.message.contains("not our brand"));
    assert!(decision.outbox.is_empty());
}
