//! The agent-session fixture the session tests share: the real step
//! service and tool executors, with test doubles for the model endpoint (a
//! `LlmProvider` that asks for one lookup, then answers with what the lookup
//! returned) and the tool's endpoint (a local HTTP server, allow-listed as
//! for local development).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use baton_core::catalog::registry::Registry;
use baton_core::contracts::facet::{Facet, FacetDirection};
use baton_core::records::conversation::{SessionAnswer, SessionTurn, ToolCallRequest, ToolSession};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::TokenUsage;
use baton_runtime::clock::OffsetClock;
use baton_runtime::error::LlmError;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::services::{OrchestratorSettings, Services};
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

/// What the tool endpoint saw: each request's idempotency key and body.
#[derive(Default, Clone)]
pub struct ToolEndpoint {
    pub calls: Arc<Mutex<Vec<(String, Value)>>>,
    /// Each request's `traceparent` header, when it had one.
    pub traceparents: Arc<Mutex<Vec<Option<String>>>>,
    pub arrived: Arc<tokio::sync::Notify>,
    /// While set, the endpoint takes this long to answer (a slow tool).
    pub delay: Arc<Mutex<Option<Duration>>>,
}

pub async fn start_tool_endpoint() -> (u16, ToolEndpoint) {
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
pub struct LookupThenAnswer {
    pub sessions: Mutex<Vec<ToolSession>>,
    pub restart_the_answer: bool,
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

pub fn agent_registry(port: u16) -> Arc<Registry> {
    let mut registry = Registry::default();
    registry
        .add_model_catalog_document(&baton_core::catalog::registry::RegistryDocument {
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
                    drives_revisions: false,
                    merge: Default::default(),
                    widget: None,
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

pub fn envelope() -> Value {
    json!({
        "objective": "Answer the question with checked facts.",
        "inputs": {"question": {"text": "Which facts hold?"}},
        "outputContract": {"schema": {"type": "object", "required": ["answer"],
                                      "properties": {"answer": {"type": "object"}}}}
    })
}

pub struct Fixture {
    pub services: Services,
    pub queue: Arc<InMemoryStepQueue>,
    pub clock: Arc<OffsetClock>,
    pub model: Arc<LookupThenAnswer>,
    pub endpoint: ToolEndpoint,
}

pub async fn fixture() -> Fixture {
    fixture_with(LookupThenAnswer::default()).await
}

pub async fn fixture_with(model: LookupThenAnswer) -> Fixture {
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

pub fn runner(fixture: &Fixture) -> LocalRunner {
    LocalRunner {
        steps: fixture.services.steps.clone(),
        runs: fixture.services.runs.clone(),
        queue: fixture.queue.clone(),
    }
}
