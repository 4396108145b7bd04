//! An agent node's session on the real step service with the real tool
//! executors: each model turn and each tool call is its own step, the tool
//! is called over HTTP with the call's idempotency key, and a worker killed
//! after the tool ran but before its commit leaves the call to run again,
//! with the same key, while a committed call never runs again.
//!
//! Test doubles: the model endpoint (a `LlmProvider` that asks for one
//! lookup, then answers with what the lookup returned) and the tool's
//! endpoint (a local HTTP server, allow-listed as for local development).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use baton_core::context::ModelRequest;
use baton_core::conversation::{SessionAnswer, SessionTurn, ToolCallRequest, ToolSession};
use baton_core::event::EventType;
use baton_core::facet::{Facet, FacetDirection};
use baton_core::registry::Registry;
use baton_core::run::{RunStatus, StepCommand, TokenUsage};
use baton_runtime::clock::OffsetClock;
use baton_runtime::error::LlmError;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta, StepQueue};
use baton_runtime::services::{OrchestratorSettings, Services, StepOutcome};
use baton_runtime::worker::LocalRunner;
use baton_test_support::{TestServices, assert_frames_match_schemas};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

/// What the tool endpoint saw: each request's idempotency key and body.
#[derive(Default, Clone)]
struct ToolEndpoint {
    calls: Arc<Mutex<Vec<(String, Value)>>>,
    /// Each request's `traceparent` header, when it had one.
    traceparents: Arc<Mutex<Vec<Option<String>>>>,
    arrived: Arc<tokio::sync::Notify>,
    /// While set, the endpoint takes this long to answer (a slow tool).
    delay: Arc<Mutex<Option<Duration>>>,
}

async fn start_tool_endpoint() -> (u16, ToolEndpoint) {
    let endpoint = ToolEndpoint::default();
    let app = Router::new()
        .route(
            "/lookup",
            post(
                |State(endpoint): State<ToolEndpoint>, headers: HeaderMap, body: Bytes| async move {
                    let key = headers
                        .get("idempotency-key")
                        .and_then(|value| value.to_str().ok())
                        .unwrap_or_default()
                        .to_string();
                    let body: Value = serde_json::from_slice(&body).unwrap();
                    let query = body["q"].as_str().unwrap_or_default().to_string();
                    endpoint.traceparents.lock().unwrap().push(
                        headers
                            .get("traceparent")
                            .and_then(|value| value.to_str().ok())
                            .map(str::to_string),
                    );
                    endpoint.calls.lock().unwrap().push((key, body));
                    endpoint.arrived.notify_one();
                    let delay = *endpoint.delay.lock().unwrap();
                    if let Some(delay) = delay {
                        tokio::time::sleep(delay).await;
                    }
                    axum::Json(json!({"fact": format!("{query} are checked")}))
                },
            ),
        )
        .with_state(endpoint.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (port, endpoint)
}

/// Test double for the model endpoint: the first turn asks for a lookup,
/// the next answers with the lookup's result. Records each turn's session.
/// With `restart_the_answer`, the answering turn streams part of its text,
/// reports the stream restarted (a provider's retry after a cut), then
/// streams the whole answer again.
#[derive(Default)]
struct LookupThenAnswer {
    sessions: Mutex<Vec<ToolSession>>,
    restart_the_answer: bool,
}

#[async_trait]
impl LlmProvider for LookupThenAnswer {
    fn model_name(&self) -> String {
        "lookup-then-answer".into()
    }

    async fn complete(
        &self,
        _request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        Err(LlmError::Configuration(
            "an agent node converses; it never completes".into(),
        ))
    }

    async fn converse(
        &self,
        _request: &ModelRequest,
        session: &ToolSession,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<SessionAnswer, LlmError> {
        self.sessions.lock().unwrap().push(session.clone());
        let usage = TokenUsage {
            prompt_tokens: 7,
            completion_tokens: 3,
            cached_prompt_tokens: 0,
            cache_write_prompt_tokens: 0,
        };
        let last_result = session.turns.iter().rev().find_map(|turn| match turn {
            SessionTurn::Tool { content, .. } => Some(content.clone()),
            _ => None,
        });
        Ok(match last_result {
            None => SessionAnswer {
                content: String::new(),
                tool_calls: vec![ToolCallRequest {
                    id: "call_1".into(),
                    name: "lookup".into(),
                    arguments: json!({"q": "facts"}).to_string(),
                }],
                usage,
                model: "gpt-4o-mini".into(),
            },
            Some(result) => {
                let fact: Value = serde_json::from_str(&result).unwrap();
                let content = json!({"answer": {"text": fact["fact"]}}).to_string();
                if self.restart_the_answer {
                    let (cut, _) = content.split_at(content.len() / 2);
                    let _ = deltas.send(ModelDelta::Text(cut.to_string()));
                    let _ = deltas.send(ModelDelta::Restarted);
                    let (first, second) = content.split_at(content.len() / 3);
                    let _ = deltas.send(ModelDelta::Text(first.to_string()));
                    let _ = deltas.send(ModelDelta::Text(second.to_string()));
                }
                SessionAnswer {
                    content,
                    tool_calls: Vec::new(),
                    usage,
                    model: "gpt-4o-mini".into(),
                }
            }
        })
    }
}

fn agent_registry(port: u16) -> Arc<Registry> {
    let mut registry = Registry::default();
    registry
        .add_model_catalog_document(&baton_core::registry::RegistryDocument {
            source_name: "models.json".into(),
            text: r#"{"providers": {"openai": {"kind": "openai"}}, "models": {"gpt-4o-mini": {"provider": "openai", "inputPerMillionUsd": 0.15, "outputPerMillionUsd": 0.6}}}"#.into(),
        })
        .unwrap();
    for (name, direction) in [
        ("question", FacetDirection::Input),
        ("answer", FacetDirection::Output),
    ] {
        registry
            .add_facet(
                Facet {
                    name: name.into(),
                    title: name.into(),
                    description: name.into(),
                    schema: json!({"type": "object", "required": ["text"],
                                   "properties": {"text": {"type": "string"}}}),
                    semantics: String::new(),
                    direction,
                    required_by_default: true,
                    metadata: serde_json::Map::new(),
                },
                "test",
            )
            .unwrap();
    }
    registry
        .add_tool(
            serde_json::from_value(json!({
                "name": "lookup", "description": "Looks a fact up.",
                "parameters": {"type": "object", "required": ["q"], "properties": {"q": {"type": "string"}}},
                "executor": {"kind": "http", "method": "POST", "url": format!("http://127.0.0.1:{port}/lookup")}
            }))
            .unwrap(),
            "test",
        )
        .unwrap();
    registry
        .add_capability(
            serde_json::from_value(json!({
                "capabilityId": "research.agent", "agentType": "ai", "version": "1",
                "displayName": "Researcher", "summary": "Answers with looked-up facts.",
                "inputContract": ["question"], "outputContract": ["answer"], "tools": ["lookup"]
            }))
            .unwrap(),
            "test",
        )
        .unwrap();
    Arc::new(registry)
}

fn envelope() -> Value {
    json!({
        "objective": "Answer the question with checked facts.",
        "inputs": {"question": {"text": "Which facts hold?"}},
        "outputContract": {"schema": {"type": "object", "required": ["answer"],
                                      "properties": {"answer": {"type": "object"}}}}
    })
}

struct Fixture {
    services: Services,
    queue: Arc<InMemoryStepQueue>,
    clock: Arc<OffsetClock>,
    model: Arc<LookupThenAnswer>,
    endpoint: ToolEndpoint,
}

async fn fixture() -> Fixture {
    fixture_with(LookupThenAnswer::default()).await
}

async fn fixture_with(model: LookupThenAnswer) -> Fixture {
    let (port, endpoint) = start_tool_endpoint().await;
    let registry = agent_registry(port);
    let model = Arc::new(model);
    let queue = Arc::new(InMemoryStepQueue::new());
    let clock = Arc::new(OffsetClock::new());
    let tools = baton_tools::ToolRunner::new(registry.clone(), "127.0.0.1", Arc::new(|_| None));
    let services = TestServices::with_model(model.clone())
        .registry(registry)
        .queue(queue.clone())
        .clock(clock.clone())
        .tools(Arc::new(tools))
        .settings(OrchestratorSettings {
            node_lease: Duration::from_secs(30),
            busy_retry_delay: Duration::from_millis(20),
            ..OrchestratorSettings::default()
        })
        .build()
        .services;
    Fixture {
        services,
        queue,
        clock,
        model,
        endpoint,
    }
}

fn runner(fixture: &Fixture) -> LocalRunner {
    LocalRunner {
        steps: fixture.services.steps.clone(),
        runs: fixture.services.runs.clone(),
        queue: fixture.queue.clone(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_two_turn_session_calls_the_tool_over_http_and_answers_with_its_result() {
    let fixture = fixture().await;
    let submitted = fixture
        .services
        .runs
        .submit("t", &envelope())
        .await
        .unwrap();
    let status = runner(&fixture)
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Completed);

    let frames = fixture
        .services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap();
    assert_frames_match_schemas(&frames);
    let story: Vec<&str> = frames
        .iter()
        .filter(|frame| {
            let narration = matches!(frame.event_type, EventType::Phase | EventType::Handoff)
                || (frame.event_type == EventType::Metrics && frame.node_id.is_some());
            !narration
        })
        .map(|frame| frame.event_type.as_str())
        .collect();
    assert_eq!(
        story,
        [
            "start",
            "plan_requested",
            "plan_generated",
            "node_start",
            "agent_state",
            "tool_call",
            "agent_state",
            "tool_result",
            "agent_state",
            "message",
            "node_complete",
            "metrics",
            "complete"
        ]
    );
    let result = frames
        .iter()
        .find(|frame| frame.event_type == EventType::ToolResult)
        .and_then(|frame| frame.payload.clone())
        .unwrap();
    assert_eq!(result["result"], json!({"fact": "facts are checked"}));

    let calls = fixture.endpoint.calls.lock().unwrap().clone();
    assert_eq!(
        calls,
        [(
            format!("{}:node_1:0:call_1", submitted.run_id),
            json!({"q": "facts"})
        )]
    );
    let sessions = fixture.model.sessions.lock().unwrap().clone();
    assert_eq!(sessions.len(), 2, "two model turns");
    assert_eq!(sessions[0].tools[0].name, "lookup");
    assert_eq!(sessions[1].turns.len(), 2, "the call and its result");
    let stored = fixture
        .services
        .runs
        .load("t", &submitted.run_id)
        .await
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(
        stored.output,
        Some(json!({"answer": {"text": "facts are checked"}}))
    );
    assert_eq!(stored.nodes["node_1"].usage.prompt_tokens, 14);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_whose_stream_restarted_warns_readers_and_streams_its_answer_once() {
    let fixture = fixture_with(LookupThenAnswer {
        restart_the_answer: true,
        ..LookupThenAnswer::default()
    })
    .await;
    let submitted = fixture
        .services
        .runs
        .submit("t", &envelope())
        .await
        .unwrap();
    let status = runner(&fixture)
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Completed);
    let frames = fixture
        .services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap();
    assert_frames_match_schemas(&frames);
    let node: Vec<_> = frames
        .iter()
        .filter(|frame| frame.node_id.as_deref() == Some("node_1"))
        .collect();
    let restart = node
        .iter()
        .position(|frame| {
            frame.event_type == EventType::Warning
                && frame.payload.as_ref().map(|payload| &payload["code"])
                    == Some(&json!("stream_restarted"))
        })
        .expect("the restart is announced to readers");
    let text = |frames: &[&baton_core::event::EventFrame]| -> String {
        frames
            .iter()
            .filter(|frame| frame.event_type == EventType::Delta)
            .filter_map(|frame| frame.message.clone())
            .collect()
    };
    let answer = json!({"answer": {"text": "facts are checked"}}).to_string();
    let before = text(&node[..restart]);
    assert!(
        !before.is_empty() && answer.starts_with(&before),
        "the cut text streamed before the warning: {before}"
    );
    assert_eq!(
        text(&node[restart..]),
        answer,
        "after the warning the answer streams once, whole"
    );
}

/// The next step message on the queue that is not an early timer (a timer
/// is handled as a worker would: sent again for when it is due).
async fn next_step(fixture: &Fixture) -> baton_runtime::ports::ReceivedStep {
    loop {
        let received = fixture
            .queue
            .receive(1, Duration::ZERO)
            .await
            .unwrap()
            .into_iter()
            .next()
            .expect("a step on the queue");
        if !matches!(received.message.command, StepCommand::FireTimer { .. }) {
            return received;
        }
        let deferred = baton_runtime::worker::process_received_step(
            &fixture.services.steps,
            fixture.queue.as_ref(),
            received,
        )
        .await
        .unwrap();
        assert!(
            matches!(deferred, StepOutcome::NotYetDue { .. }),
            "{deferred:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_killed_after_the_tool_ran_leaves_the_call_to_run_again_with_the_same_key() {
    let fixture = fixture().await;
    let steps = fixture.services.steps.clone();
    let submitted = fixture
        .services
        .runs
        .submit("t", &envelope())
        .await
        .unwrap();
    // The planning step, then the node's first turn (which asks for the lookup).
    for _ in 0..2 {
        let received = next_step(&fixture).await;
        let outcome = steps.handle(&received.message).await.unwrap();
        assert!(
            matches!(outcome, StepOutcome::Committed { .. }),
            "{outcome:?}"
        );
        fixture.queue.acknowledge(&received.receipt).await.unwrap();
    }
    let tool_step = next_step(&fixture).await;
    assert!(
        matches!(tool_step.message.command, StepCommand::RunTool { .. }),
        "{:?}",
        tool_step.message
    );

    // The worker runs the tool and is killed while the answer comes back:
    // the tool ran, nothing was committed, its lease is still held.
    *fixture.endpoint.delay.lock().unwrap() = Some(Duration::from_secs(30));
    let worker = {
        let (steps, message) = (steps.clone(), tool_step.message.clone());
        tokio::spawn(async move { steps.handle(&message).await })
    };
    fixture.endpoint.arrived.notified().await;
    worker.abort();
    assert!(worker.await.unwrap_err().is_cancelled());
    *fixture.endpoint.delay.lock().unwrap() = None;

    // Redelivered while the dead worker's lease holds: busy, nothing runs.
    let busy = steps.handle(&tool_step.message).await.unwrap();
    assert!(matches!(busy, StepOutcome::Busy { .. }), "{busy:?}");
    assert_eq!(fixture.endpoint.calls.lock().unwrap().len(), 1);

    // Once the lease expires the call runs again, with the same key.
    fixture.clock.advance(Duration::from_secs(31));
    let committed = steps.handle(&tool_step.message).await.unwrap();
    assert!(
        matches!(committed, StepOutcome::Committed { .. }),
        "{committed:?}"
    );
    let calls = fixture.endpoint.calls.lock().unwrap().clone();
    let expected_key = format!("{}:node_1:0:call_1", submitted.run_id);
    assert_eq!(calls.len(), 2);
    assert!(
        calls.iter().all(|(key, _)| key == &expected_key),
        "{calls:?}"
    );

    // Its result is committed: a late duplicate of the message runs nothing.
    let duplicate = steps.handle(&tool_step.message).await.unwrap();
    assert_eq!(duplicate, StepOutcome::Stale);
    fixture.queue.acknowledge(&tool_step.receipt).await.unwrap();

    let status = runner(&fixture)
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Completed);
    assert_eq!(
        fixture.endpoint.calls.lock().unwrap().len(),
        2,
        "the committed call never ran a third time"
    );
    let tool_results = fixture
        .services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap()
        .iter()
        .filter(|frame| frame.event_type == EventType::ToolResult)
        .count();
    assert_eq!(tool_results, 1, "one result committed for the call");
}

/// With spans exported (an OpenTelemetry layer over an in-memory exporter,
/// on this test's thread), the tool's HTTP request carries its
/// `execute_tool` span as `traceparent`: the tool's server continues the
/// run's trace, under the `run_tool` step's span, under the run's root.
#[tokio::test]
async fn the_tool_request_carries_its_execute_tool_span_as_traceparent() {
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
    use tracing_subscriber::layer::SubscriberExt;
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .with_id_generator(baton_traces::TraceExport::id_generator())
        .build();
    let export = baton_traces::TraceExport::with_provider(provider);
    let _subscriber =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(export.layer()));

    let fixture = fixture().await;
    let submitted = fixture
        .services
        .runs
        .submit("t", &envelope())
        .await
        .unwrap();
    let status = runner(&fixture)
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Completed);
    let trace = fixture
        .services
        .runs
        .load("t", &submitted.run_id)
        .await
        .unwrap()
        .unwrap()
        .state
        .trace
        .unwrap();

    let sent = fixture.endpoint.traceparents.lock().unwrap().clone();
    let [Some(sent)] = sent.as_slice() else {
        panic!("one call with a traceparent: {sent:?}")
    };
    let sent = baton_core::trace_context::TraceParent::parse(sent).unwrap();
    assert_eq!(sent.trace_id, trace.trace_id, "the run's trace");
    let spans = exporter.get_finished_spans().unwrap();
    let hex = |bytes: &[u8]| {
        bytes
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect::<String>()
    };
    let tool_span = spans
        .iter()
        .find(|span| hex(&span.span_context.span_id().to_bytes()) == sent.span_id.to_string())
        .expect("the traceparent names an exported span");
    assert_eq!(tool_span.name, "execute_tool lookup");
    assert!(
        tool_span
            .attributes
            .iter()
            .any(|pair| pair.key.as_str() == "gen_ai.tool.name" && pair.value.as_str() == "lookup")
    );
    let step = spans
        .iter()
        .find(|span| span.span_context.span_id() == tool_span.parent_span_id)
        .expect("the tool span's parent is exported");
    assert_eq!(step.name, "run_tool");
    assert_eq!(
        hex(&step.parent_span_id.to_bytes()),
        trace.root_span_id.to_string(),
        "the step hangs under the run's root"
    );
}
