//! Test doubles for a long agent session: a model that asks for one tool
//! call per turn until its last turn, then answers; a tool endpoint that
//! returns a fixed-size result; and the registry of one agent capability
//! offering that tool (`research.agent`: `question` in, `answer` out).
//! They stand in for the model and the tool's endpoint only: the engine,
//! the step service and the store under test are the real ones.

use std::sync::Arc;

use async_trait::async_trait;
use baton_core::catalog::registry::Registry;
use baton_core::catalog::tools::ToolDefinition;
use baton_core::contracts::facet::{Facet, FacetDirection};
use baton_core::records::conversation::{
    SessionAnswer, SessionTurn, ToolCallRequest, ToolInvocation, ToolOutcome, ToolSession,
};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::TokenUsage;
use baton_runtime::error::LlmError;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta, ToolRunner};
use serde_json::json;
use tokio::sync::mpsc::UnboundedSender;

/// The model double: turn `n` (counted by the tool results it is sent)
/// asks for `lookup` until turn `turns - 1`, which answers
/// `{"answer": {"text": "<n> facts checked"}}`.
pub struct OneLookupPerTurn {
    pub turns: usize,
}

impl OneLookupPerTurn {
    /// How many tool results `session` carries (the turn it is at).
    pub fn results_in(session: &ToolSession) -> usize {
        session
            .turns
            .iter()
            .filter(|turn| matches!(turn, SessionTurn::Tool { .. }))
            .count()
    }
}

#[async_trait]
impl LlmProvider for OneLookupPerTurn {
    fn model_name(&self) -> String {
        "one-lookup-per-turn".into()
    }

    async fn complete(
        &self,
        _request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        Err(LlmError::Configuration("an agent node converses".into()))
    }

    async fn converse(
        &self,
        _request: &ModelRequest,
        session: &ToolSession,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<SessionAnswer, LlmError> {
        let results = Self::results_in(session);
        let usage = TokenUsage {
            prompt_tokens: 10,
            completion_tokens: 5,
            cached_prompt_tokens: 0,
            cache_write_prompt_tokens: 0,
        };
        if results + 1 < self.turns {
            return Ok(SessionAnswer {
                content: String::new(),
                tool_calls: vec![ToolCallRequest {
                    id: format!("call_{results}"),
                    name: "lookup".into(),
                    arguments: json!({"q": format!("fact number {results}")}).to_string(),
                }],
                usage,
                model: "gpt-4o-mini".into(),
            });
        }
        Ok(SessionAnswer {
            content: json!({"answer": {"text": format!("{results} facts checked")}}).to_string(),
            tool_calls: Vec::new(),
            usage,
            model: "gpt-4o-mini".into(),
        })
    }
}

/// The tool endpoint double: every call returns about `result_bytes` of
/// text naming its question.
pub struct FixedLookup {
    pub result_bytes: usize,
}

#[async_trait]
impl ToolRunner for FixedLookup {
    async fn run_tool(&self, _tool: &ToolDefinition, invocation: &ToolInvocation) -> ToolOutcome {
        let question = invocation.arguments["q"].as_str().unwrap_or_default();
        // Varied text (it does not compress away), as a real result would be.
        let text: String = (0..self.result_bytes)
            .map(|index| {
                let byte = question.as_bytes()[index % question.len().max(1)];
                char::from(b'a' + (byte.wrapping_mul(31).wrapping_add(index as u8)) % 26)
            })
            .collect();
        ToolOutcome::Succeeded(json!({"fact": format!("{question} holds: {text}")}))
    }
}

/// One agent capability (`research.agent`, at most `max_turns` turns)
/// offering the `lookup` tool.
pub fn agent_registry(max_turns: usize) -> Arc<Registry> {
    let mut registry = Registry::default();
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
                "executor": {"kind": "http", "method": "POST", "url": "https://tools.invalid/lookup"}
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
                "inputContract": ["question"], "outputContract": ["answer"], "tools": ["lookup"],
                "maxIterations": max_turns
            }))
            .unwrap(),
            "test",
        )
        .unwrap();
    Arc::new(registry)
}

/// An envelope the agent registry plans as one agent node.
pub fn agent_envelope() -> serde_json::Value {
    json!({
        "objective": "Answer the question with checked facts.",
        "inputs": {"question": {"text": "Which facts hold?"}},
        "outputContract": {"schema": {"type": "object", "required": ["answer"],
                                      "properties": {"answer": {"type": "object"}}}}
    })
}
