//! The `mcp` tool executor against a real MCP server (this crate's
//! `WordCountServer`, a test double for a tool server) over stdio (the
//! `mcp-test-server` binary) and over streamable HTTP (mounted in a local
//! HTTP server, allow-listed as for local development): a call's result,
//! an error result, a server that cannot start, URLs the outbound guard
//! refuses; and an agent node whose tool is served over MCP, on the step
//! engine. The model is a test double
//! that calls `word_count` once, then answers with its result.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use baton_core::catalog::registry::Registry;
use baton_core::catalog::tools::ToolDefinition;
use baton_core::contracts::facet::{Facet, FacetDirection};
use baton_core::records::conversation::{
    SessionAnswer, SessionTurn, ToolCallRequest, ToolInvocation, ToolOutcome, ToolSession,
};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_runtime::error::LlmError;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

fn mcp_tool(name: &str, command: &str) -> ToolDefinition {
    let tool: ToolDefinition = serde_json::from_value(json!({
        "name": name, "description": "Served by the MCP test server.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}, "reason": {"type": "string"}}},
        "executor": {"kind": "mcp", "server": {"transport": "stdio", "command": command}}
    }))
    .unwrap();
    tool.check().unwrap();
    tool
}

fn invocation(arguments: Value) -> ToolInvocation {
    ToolInvocation {
        call_id: "call_1".into(),
        arguments,
        idempotency_key: "run:node_1:0:call_1".into(),
    }
}

fn runner(registry: Arc<Registry>) -> baton_tools::ToolRunner {
    baton_tools::ToolRunner::new(registry, "", Arc::new(|_| None))
}

const SERVER: &str = env!("CARGO_BIN_EXE_mcp-test-server");

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_tool_answers_its_result_or_its_error_and_a_missing_server_is_said() {
    let runner = runner(Arc::new(Registry::default()));
    let counted = runner
        .run(
            &mcp_tool("word_count", SERVER),
            &invocation(json!({"text": "three small words"})),
        )
        .await;
    assert_eq!(
        counted,
        ToolOutcome::Succeeded(json!({"words": 3, "text": "three small words"}))
    );
    let refused = runner
        .run(
            &mcp_tool("refuse", SERVER),
            &invocation(json!({"reason": "not today"})),
        )
        .await;
    let ToolOutcome::Failed { message, .. } = refused else {
        panic!("an error result is a failure");
    };
    assert!(message.contains("not today"), "{message}");
    let missing = runner
        .run(
            &mcp_tool("word_count", "/nonexistent/mcp-server"),
            &invocation(json!({"text": "x"})),
        )
        .await;
    let ToolOutcome::Failed { message, .. } = missing else {
        panic!("a server that cannot start is a failure");
    };
    assert!(message.contains("could not start"), "{message}");
}

fn http_tool(url: &str) -> ToolDefinition {
    let tool: ToolDefinition = serde_json::from_value(json!({
        "name": "word_count", "description": "Served by the MCP test server over HTTP.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        "executor": {"kind": "mcp", "server": {"transport": "http", "url": url}}
    }))
    .unwrap();
    tool.check().unwrap();
    tool
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_tool_over_streamable_http_answers_and_the_guard_refuses_private_urls() {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let service = StreamableHttpService::new(
        || Ok(baton_test_support::mcp_server::WordCountServer),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let local = baton_tools::ToolRunner::new(
        Arc::new(Registry::default()),
        "127.0.0.1",
        Arc::new(|_| None),
    );
    let counted = local
        .run(
            &http_tool(&format!("http://127.0.0.1:{port}/mcp")),
            &invocation(json!({"text": "over the wire"})),
        )
        .await;
    assert_eq!(
        counted,
        ToolOutcome::Succeeded(json!({"words": 3, "text": "over the wire"}))
    );
    // Without the allow-list, the same server (and any private address) is refused.
    let guarded = runner(Arc::new(Registry::default()));
    for url in [
        format!("http://127.0.0.1:{port}/mcp"),
        "https://169.254.169.254/mcp".to_string(),
        "https://10.0.0.1/mcp".to_string(),
        "https://[::ffff:127.0.0.1]/mcp".to_string(),
    ] {
        let refused = guarded
            .run(&http_tool(&url), &invocation(json!({"text": "x"})))
            .await;
        let ToolOutcome::Failed { message, .. } = refused else {
            panic!("{url} must be refused");
        };
        assert!(message.contains("refused"), "{url}: {message}");
    }
}

/// Test double for the model endpoint.
#[derive(Default)]
struct CountsThenAnswers {
    sessions: Mutex<Vec<ToolSession>>,
}

#[async_trait]
impl LlmProvider for CountsThenAnswers {
    fn model_name(&self) -> String {
        "counts-then-answers".into()
    }

    async fn complete(
        &self,
        _request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        Err(LlmError::Configuration("an agent converses".into()))
    }

    async fn converse(
        &self,
        _request: &ModelRequest,
        session: &ToolSession,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<SessionAnswer, LlmError> {
        self.sessions.lock().unwrap().push(session.clone());
        let counted = session.turns.iter().find_map(|turn| match turn {
            SessionTurn::Tool { content, .. } => Some(content.clone()),
            _ => None,
        });
        let (content, tool_calls) = match counted {
            None => (
                String::new(),
                vec![ToolCallRequest {
                    id: "call_1".into(),
                    name: "word_count".into(),
                    arguments: json!({"text": "one two three four"}).to_string(),
                }],
            ),
            Some(result) => {
                let result: Value = serde_json::from_str(&result).unwrap();
                (
                    json!({"count": {"text": format!("{} words", result["words"])}}).to_string(),
                    Vec::new(),
                )
            }
        };
        Ok(SessionAnswer {
            content,
            tool_calls,
            usage: TokenUsage::default(),
            model: "counts-then-answers".into(),
        })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_calls_a_tool_served_over_mcp() {
    let mut registry = Registry::default();
    for (name, direction) in [
        ("passage", FacetDirection::Input),
        ("count", FacetDirection::Output),
    ] {
        registry
            .add_facet(
                Facet {
                    name: name.into(),
                    title: name.into(),
                    description: name.into(),
                    schema: json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}),
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
        .add_tool(mcp_tool("word_count", SERVER), "test")
        .unwrap();
    registry
        .add_capability(
            serde_json::from_value(json!({
                "capabilityId": "count.agent", "agentType": "ai", "version": "1", "displayName": "Counter",
                "summary": "Counts words with a tool.", "inputContract": ["passage"],
                "outputContract": ["count"], "tools": ["word_count"]
            }))
            .unwrap(),
            "test",
        )
        .unwrap();
    let registry = Arc::new(registry);
    let model = Arc::new(CountsThenAnswers::default());
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(model.clone())
        .registry(registry.clone())
        .queue(queue.clone())
        .tools(Arc::new(runner(registry)))
        .build()
        .services;
    let submitted = services
        .runs
        .submit(
            "t",
            &json!({
                "objective": "Count the words.",
                "inputs": {"passage": {"text": "one two three four"}},
                "outputContract": {"schema": {"type": "object", "required": ["count"],
                                              "properties": {"count": {"type": "object"}}}}
            }),
        )
        .await
        .unwrap();
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    let status = runner
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Completed);
    let state = services
        .runs
        .load("t", &submitted.run_id)
        .await
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(state.output, Some(json!({"count": {"text": "4 words"}})));
    let frames = services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap();
    baton_test_support::assert_frames_match_schemas(&frames);
    let result = frames
        .iter()
        .find(|frame| frame.event_type == baton_core::wire::event::EventType::ToolResult)
        .and_then(|frame| frame.payload_value())
        .unwrap();
    assert_eq!(result["result"]["words"], 4);
    assert_eq!(model.sessions.lock().unwrap().len(), 2);
}
