//! Agent nodes on the step engine: each model turn and each tool call is a
//! step; invalid calls go back to the model as errors; the guardrails
//! (calls per turn, model turns, the watchdog) end a session incomplete.
//! No I/O; the model's turns and the tools' results are the table's input,
//! and every frame is checked against its schema.

use serde_json::{Value, json};

use super::*;
use crate::records::conversation::{SessionAnswer, SessionTurn, ToolCallRequest, ToolOutcome};
use crate::wire::event::EventType;

fn agent_registry(parallel: bool) -> Registry {
    let mut registry = Registry::default();
    super::price_the_scripted_model(&mut registry);
    for name in ["notes", "answer"] {
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
    for name in ["lookup", "fetch"] {
        registry
            .add_tool(
                serde_json::from_value(json!({
                    "name": name, "description": format!("{name} something"),
                    "parameters": {"type": "object", "required": ["q"], "properties": {"q": {"type": "string"}},
                                   "additionalProperties": false},
                    "executor": {"kind": "http", "method": "GET", "url": format!("https://tools.test/{name}")}
                }))
                .unwrap(),
                "test",
            )
            .unwrap();
    }
    let capability = json!({
        "capabilityId": "research.agent", "agentType": "ai", "version": "1", "displayName": "r",
        "summary": "r", "inputContract": ["notes"], "outputContract": ["answer"],
        "tools": ["lookup", "fetch"], "maxIterations": 3, "maxToolCallsPerTurn": 2,
        "parallelTools": parallel
    });
    registry
        .add_capability(serde_json::from_value(capability).unwrap(), "test")
        .unwrap();
    registry
}

fn agent_envelope() -> TaskEnvelope {
    TaskEnvelope::parse_value(&json!({
        "objective": "o",
        "inputs": {"notes": {"text": "n"}},
        "outputContract": {"schema": {"type": "object", "required": ["answer"], "properties": {"answer": {"type": "object"}}}}
    }))
    .unwrap()
}

fn planned_agent(context: &EngineContext<'_>) -> RunState {
    let started = start_run(identity(), agent_envelope(), NOW, 3).state;
    let planned = step(started, Observed::Plan, context);
    assert_eq!(outbox(&planned), ["run:node_1:1"]);
    planned.state
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCallRequest {
    ToolCallRequest {
        id: id.into(),
        name: name.into(),
        arguments: arguments.to_string(),
    }
}

fn asks(calls: Vec<ToolCallRequest>) -> SessionAnswer {
    SessionAnswer {
        content: String::new(),
        tool_calls: calls,
        usage: TokenUsage {
            prompt_tokens: 10,
            completion_tokens: 2,
            cached_prompt_tokens: 0,
            cache_write_prompt_tokens: 0,
        },
        model: "scripted".into(),
    }
}

fn says(answer: Value) -> SessionAnswer {
    SessionAnswer {
        content: answer.to_string(),
        ..asks(Vec::new())
    }
}

fn turn_command(turn: u32) -> StepCommand {
    StepCommand::AgentTurn {
        node_id: "node_1".into(),
        attempt: 1,
        turn,
    }
}

fn tool_command(turn: u32, call_id: &str) -> StepCommand {
    StepCommand::RunTool {
        node_id: "node_1".into(),
        attempt: 1,
        turn,
        call_id: call_id.into(),
    }
}

/// A model turn's step at `now`: the effect it asks for, and the decision
/// after the model answered `answer`.
fn model_turn(
    state: &RunState,
    command: &StepCommand,
    answer: SessionAnswer,
    now: Instant,
    context: &EngineContext<'_>,
) -> (ConverseCall, Decision) {
    let StepAdvance::Perform(effect) = begin_step(state, command, now, context).unwrap() else {
        panic!("a model turn calls the model");
    };
    let Effect::Converse(call) = &effect else {
        panic!("expected a conversation turn, got {effect:?}");
    };
    assert_frames_match_schemas(&call.start_frames);
    // What the model is sent: the stored turns, as the shell loads them, then the call's own.
    let mut sent = (**call).clone();
    let stored = sent
        .stored_prefix()
        .map(|prefix| super::stored_under(&prefix))
        .unwrap_or_default();
    sent.conversation = call.conversation_with(&stored).unwrap();
    let outcome = TestOutcome::Turn(Ok(Box::new(answer)));
    let StepAdvance::Decided(decision) = resume_step(
        state.clone(),
        command,
        &performed(&effect, outcome),
        now,
        context,
    )
    .unwrap() else {
        panic!("a model turn is decided");
    };
    assert_frames_match_schemas(&decision.events);
    super::keep_entries(&decision);
    (sent, *decision)
}

/// A tool call's step at `now`: the execution it asks for, and the decision
/// after the tool produced `outcome`.
fn tool_step(
    state: &RunState,
    command: &StepCommand,
    outcome: ToolOutcome,
    now: Instant,
    context: &EngineContext<'_>,
) -> (ToolExecution, Decision) {
    let StepAdvance::Perform(effect) = begin_step(state, command, now, context).unwrap() else {
        panic!("a tool step runs the tool");
    };
    let Effect::RunTool(execution) = &effect else {
        panic!("expected a tool call, got {effect:?}");
    };
    let execution = (**execution).clone();
    let StepAdvance::Decided(decision) = resume_step(
        state.clone(),
        command,
        &performed(&effect, TestOutcome::Tool(outcome)),
        now,
        context,
    )
    .unwrap() else {
        panic!("a tool step is decided");
    };
    assert_frames_match_schemas(&decision.events);
    super::keep_entries(&decision);
    (execution, *decision)
}

fn payload_of(decision: &Decision, event_type: EventType) -> Value {
    decision
        .events
        .iter()
        .find(|event| event.event_type == event_type)
        .and_then(|event| event.payload_value())
        .unwrap_or_else(|| panic!("no {event_type:?} frame"))
}

#[test]
fn a_two_turn_tool_loop_is_four_steps_with_its_frames_in_order() {
    let registry = agent_registry(false);
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let state = planned_agent(&context);

    // Step 1, the node's own: turn 0 asks for a lookup.
    let (first_call, first) = model_turn(
        &state,
        &node_command("node_1", 1),
        asks(vec![call("call_1", "lookup", json!({"q": "facts"}))]),
        NOW,
        &context,
    );
    assert_eq!(
        first_call.claim_key.storage_key(),
        "node_1",
        "the node's own claim"
    );
    let claim_types: Vec<&str> = first_call
        .start_frames
        .iter()
        .filter(|event| !is_narration(event))
        .map(|event| event.event_type.as_str())
        .collect();
    assert_eq!(claim_types, ["node_start", "agent_state"]);
    assert_eq!(
        first_call.start_frames[2].payload.as_ref().unwrap()["executorType"],
        "agent"
    );
    let offered: Vec<&str> = first_call
        .conversation
        .tools
        .iter()
        .map(|tool| tool.name.as_str())
        .collect();
    assert_eq!(offered, ["lookup", "fetch"]);
    assert_eq!(event_types(&first), ["tool_call", "agent_state"]);
    assert_eq!(
        payload_of(&first, EventType::ToolCall),
        json!({
            "response": {"model": "scripted", "usage": {"prompt": 10, "completion": 2, "total": 12}},
            "toolName": "lookup", "args": {"q": "facts"}, "callId": "call_1", "turn": 0
        }),
        "the turn's first call carries the answer that asked for it"
    );
    assert_eq!(
        payload_of(&first, EventType::AgentState)["state"],
        "executing_tool"
    );
    assert_eq!(
        outbox(&first),
        ["run:timer:agent:node_1:1", "run:node_1:1:tool:0:call_1"]
    );
    assert_eq!(
        first.state.nodes["node_1"].status(),
        NodeStatus::Deliberating
    );
    assert!(is_stale(&first.state, &node_command("node_1", 1)));
    // Cancelled while the tool runs, the run's error names the tool it
    // waited on, the part that ended it and the stage.
    let cancelled = crate::engine::cancel_run(first.state.clone(), "stop", NOW, &context).unwrap();
    let error = cancelled.events.last().unwrap().payload.as_ref().unwrap();
    assert_eq!(error["tool"], "lookup", "{error:?}");
    assert_eq!(error["component"], "caller", "{error:?}");

    // Step 2: the tool, under its own lease and idempotency key, answering
    // 1.5 s after the model asked for it.
    let (execution, second) = tool_step(
        &first.state,
        &tool_command(0, "call_1"),
        ToolOutcome::Succeeded(json!({"found": ["a fact"]})),
        NOW.plus(std::time::Duration::from_millis(1500)),
        &context,
    );
    assert_eq!(execution.claim_key.storage_key(), "node_1#turn0#call_1");
    assert_eq!(execution.invocation.idempotency_key, "run:node_1:0:call_1");
    assert_eq!(execution.invocation.arguments, json!({"q": "facts"}));
    assert_eq!(event_types(&second), ["tool_result", "agent_state"]);
    assert_eq!(
        payload_of(&second, EventType::ToolResult),
        json!({"toolName": "lookup", "callId": "call_1", "turn": 0, "result": {"found": ["a fact"]}, "durationMs": 1500})
    );
    assert_eq!(
        payload_of(&second, EventType::AgentState)["state"],
        "thinking"
    );
    assert_eq!(outbox(&second), ["run:node_1:1:turn:1"]);
    // Its result is committed: the call's message again is stale, the tool never runs twice.
    assert!(is_stale(&second.state, &tool_command(0, "call_1")));

    // Step 3: turn 1 sees the call and its result, and answers.
    let (second_call, third) = model_turn(
        &second.state,
        &turn_command(1),
        says(json!({"answer": {"text": "a fact"}})),
        NOW,
        &context,
    );
    assert_eq!(second_call.claim_key.storage_key(), "node_1#turn1");
    assert!(second_call.start_frames.is_empty());
    assert_eq!(
        second_call.conversation.turns,
        vec![
            SessionTurn::Assistant {
                content: String::new(),
                tool_calls: vec![call("call_1", "lookup", json!({"q": "facts"}))],
            },
            SessionTurn::Tool {
                call_id: "call_1".into(),
                content: json!({"found": ["a fact"]}).to_string(),
            },
        ]
    );
    assert_eq!(
        event_types(&third),
        ["message", "node_complete", "metrics", "complete"]
    );
    assert_eq!(payload_of(&third, EventType::Message)["turns"], 2);
    assert_eq!(third.state.status(), RunStatus::Completed);
    assert_eq!(
        third.state.output,
        Some(json!({"answer": {"text": "a fact"}}))
    );
    assert!(third.state.sessions.is_empty());
    assert!(third.state.governance.timers.is_empty(), "watchdog cleared");
    let record = &third.state.nodes["node_1"];
    assert_eq!((record.agent_turns, record.usage.prompt_tokens), (2, 20));
}

#[test]
fn an_invalid_call_goes_back_to_the_model_and_the_next_turn_corrects_it() {
    let registry = agent_registry(false);
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let state = planned_agent(&context);
    let (_, first) = model_turn(
        &state,
        &node_command("node_1", 1),
        asks(vec![
            call("call_1", "lookup", json!({"q": 5})),
            call("call_2", "nowhere", json!({"q": "x"})),
        ]),
        NOW,
        &context,
    );
    assert_eq!(
        event_types(&first),
        [
            "tool_call",
            "tool_result",
            "tool_call",
            "tool_result",
            "agent_state"
        ]
    );
    // Nothing valid to run: straight to the next turn.
    assert_eq!(
        outbox(&first),
        ["run:timer:agent:node_1:1", "run:node_1:1:turn:1"]
    );
    let errors: Vec<String> = story(&first)
        .iter()
        .filter(|event| event.event_type == EventType::ToolResult)
        .map(|event| {
            event.payload.as_ref().unwrap()["error"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(errors[0].contains("/q"), "{}", errors[0]);
    assert!(errors[1].contains("no tool `nowhere`"), "{}", errors[1]);

    let (corrected_call, corrected) = model_turn(
        &first.state,
        &turn_command(1),
        asks(vec![call("call_3", "lookup", json!({"q": "five"}))]),
        NOW,
        &context,
    );
    let SessionTurn::Tool { content, .. } = &corrected_call.conversation.turns[1] else {
        panic!("the error is the call's result");
    };
    assert!(content.contains("/q") && content.contains("\"retryable\":false"));
    assert_eq!(outbox(&corrected), ["run:node_1:1:tool:1:call_3"]);
}

#[test]
fn sequential_tools_run_one_after_another_and_parallel_tools_at_once() {
    for (parallel, expected) in [
        (false, vec!["run:node_1:1:tool:0:a"]),
        (true, vec!["run:node_1:1:tool:0:a", "run:node_1:1:tool:0:b"]),
    ] {
        let registry = agent_registry(parallel);
        let validators = ValidatorCache::new();
        let context = engine(&registry, &validators);
        let state = planned_agent(&context);
        let (_, first) = model_turn(
            &state,
            &node_command("node_1", 1),
            asks(vec![
                call("a", "lookup", json!({"q": "1"})),
                call("b", "fetch", json!({"q": "2"})),
            ]),
            NOW,
            &context,
        );
        let sent: Vec<String> = outbox(&first)
            .into_iter()
            .filter(|id| id.contains(":tool:"))
            .collect();
        assert_eq!(sent, expected, "parallel: {parallel}");
        let (_, after_a) = tool_step(
            &first.state,
            &tool_command(0, "a"),
            ToolOutcome::Succeeded(json!(1)),
            NOW,
            &context,
        );
        // Sequential: b goes now; parallel: b is already on its way.
        let expected_next: Vec<&str> = if parallel {
            Vec::new()
        } else {
            vec!["run:node_1:1:tool:0:b"]
        };
        assert_eq!(outbox(&after_a), expected_next, "parallel: {parallel}");
        let (_, after_b) = tool_step(
            &after_a.state,
            &tool_command(0, "b"),
            ToolOutcome::failed("503 from the tool"),
            NOW,
            &context,
        );
        assert_eq!(outbox(&after_b), ["run:node_1:1:turn:1"]);
    }
}

fn ended_incomplete(decision: &Decision, warning: &str) {
    assert_eq!(
        event_types(decision),
        ["warning", "node_error", "metrics", "error"]
    );
    assert_eq!(payload_of(decision, EventType::Warning)["code"], warning);
    assert_eq!(
        payload_of(decision, EventType::Error)["code"],
        "agent_incomplete"
    );
    assert_eq!(decision.state.status(), RunStatus::Failed);
    assert!(decision.state.sessions.is_empty());
    assert!(decision.state.governance.timers.is_empty());
    assert!(
        decision.outbox.iter().all(|message| !matches!(
            message.command,
            StepCommand::RunTool { .. } | StepCommand::AgentTurn { .. }
        )),
        "nothing more runs"
    );
}

#[test]
fn more_calls_in_a_turn_than_allowed_end_the_session_incomplete_without_running_any() {
    let registry = agent_registry(true);
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let state = planned_agent(&context);
    let (_, decision) = model_turn(
        &state,
        &node_command("node_1", 1),
        asks(vec![
            call("a", "lookup", json!({"q": "1"})),
            call("b", "lookup", json!({"q": "2"})),
            call("c", "lookup", json!({"q": "3"})),
        ]),
        NOW,
        &context,
    );
    ended_incomplete(&decision, "tool_calls_per_turn_exceeded");
    let message = decision.events[0].message.clone().unwrap_or_default();
    assert!(
        message.contains("3 tool calls, more than the 2"),
        "{message}"
    );
}

#[test]
fn max_iterations_turns_without_an_answer_end_the_session_incomplete() {
    let registry = agent_registry(false);
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let mut state = planned_agent(&context);
    let mut command = node_command("node_1", 1);
    for turn in 0..2 {
        let id = format!("call_{turn}");
        let (_, asked) = model_turn(
            &state,
            &command,
            asks(vec![call(&id, "lookup", json!({"q": "more"}))]),
            NOW,
            &context,
        );
        let (_, answered) = tool_step(
            &asked.state,
            &tool_command(turn, &id),
            ToolOutcome::Succeeded(json!("nothing yet")),
            NOW,
            &context,
        );
        state = answered.state;
        command = turn_command(turn + 1);
    }
    // The third turn (maxIterations: 3) asks again: the session is over.
    let (_, third) = model_turn(
        &state,
        &command,
        asks(vec![call("call_2", "lookup", json!({"q": "more"}))]),
        NOW,
        &context,
    );
    ended_incomplete(&third, "max_iterations_reached");
}

#[test]
fn the_watchdog_measures_the_session_across_steps() {
    let registry = agent_registry(false);
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let state = planned_agent(&context);
    let (_, first) = model_turn(
        &state,
        &node_command("node_1", 1),
        asks(vec![call("call_1", "lookup", json!({"q": "slow"}))]),
        NOW,
        &context,
    );
    let timer = &first.state.governance.timers["agent:node_1:1"];
    assert_eq!(timer.due_at, NOW.plus(context.agent_session_limit));
    // The tool returns after the session's time is up: no next turn.
    let late = NOW.plus(context.agent_session_limit + std::time::Duration::from_secs(1));
    let (_, after_tool) = tool_step(
        &first.state,
        &tool_command(0, "call_1"),
        ToolOutcome::Succeeded(json!("late")),
        late,
        &context,
    );
    assert_eq!(event_types(&after_tool)[0], "tool_result");
    let ended = Decision {
        events: after_tool.events[1..].to_vec(),
        ..after_tool
    };
    ended_incomplete(&ended, "session_timed_out");

    // A tool that never returns: the watchdog's timer ends the session.
    let fired = begin_step(
        &first.state,
        &StepCommand::FireTimer {
            timer_id: "agent:node_1:1".into(),
        },
        late,
        &context,
    )
    .unwrap();
    let StepAdvance::Decided(fired) = fired else {
        panic!("a timer is decided");
    };
    ended_incomplete(&fired, "session_timed_out");
    // The tool's late result finds the session gone.
    assert!(is_stale(&fired.state, &tool_command(0, "call_1")));
}
