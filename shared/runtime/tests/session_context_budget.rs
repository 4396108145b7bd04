//! An agent session whose tool results outgrow its model's context window:
//! each turn's request keeps the newest tool rounds that fit (the oldest
//! left out whole, a call never without its result) and says so with a
//! `context_trimmed` warning. The model is a test double that refuses a
//! prompt over the window (as a provider does) and otherwise asks for one
//! more lookup until its last turn; the tool endpoint is the
//! `agent_session` double. Engine, step service and store are the real ones.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use baton_core::records::conversation::{SessionAnswer, SessionTurn, ToolCallRequest, ToolSession};
use baton_core::state::context::ModelRequest;
use baton_core::state::context_budget::DEFAULT_CONTEXT_WINDOW_TOKENS;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_runtime::error::LlmError;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::services::OrchestratorSettings;
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use baton_test_support::agent_session::{FixedLookup, agent_envelope, agent_registry};
use serde_json::json;
use tokio::sync::mpsc::UnboundedSender;

const TURNS: usize = 24;

/// Test double for the model endpoint (see the module doc).
struct WindowedResearcher {
    calls: AtomicUsize,
    largest_prompt_tokens: AtomicUsize,
}

#[async_trait]
impl LlmProvider for WindowedResearcher {
    fn model_name(&self) -> String {
        "windowed-double".into()
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
        request: &ModelRequest,
        session: &ToolSession,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<SessionAnswer, LlmError> {
        let characters = request.system_instruction.len()
            + request.user_message.len()
            + serde_json::to_string(&session.turns).unwrap().len();
        let tokens = characters.div_ceil(4);
        if tokens > DEFAULT_CONTEXT_WINDOW_TOKENS as usize {
            return Err(LlmError::RequestRejected {
                status: 400,
                body: format!("prompt is {tokens} tokens, over the window"),
            });
        }
        // A call is never sent without its result, nor a result without its call.
        for (index, turn) in session.turns.iter().enumerate() {
            if let SessionTurn::Tool { call_id, .. } = turn {
                let asked = session.turns[..index].iter().any(|earlier| {
                    matches!(earlier, SessionTurn::Assistant { tool_calls, .. }
                        if tool_calls.iter().any(|call| &call.id == call_id))
                });
                assert!(asked, "result {call_id} sent without its call");
            }
        }
        self.largest_prompt_tokens
            .fetch_max(tokens, Ordering::SeqCst);
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        let usage = TokenUsage {
            prompt_tokens: tokens as u64,
            completion_tokens: 5,
            cached_prompt_tokens: 0,
            cache_write_prompt_tokens: 0,
        };
        if call + 1 < TURNS {
            return Ok(SessionAnswer {
                content: String::new(),
                tool_calls: vec![ToolCallRequest {
                    id: format!("call_{call}"),
                    name: "lookup".into(),
                    arguments: json!({"q": format!("fact number {call}")}).to_string(),
                }],
                usage,
                model: "gpt-4o-mini".into(),
            });
        }
        Ok(SessionAnswer {
            content: json!({"answer": {"text": format!("{call} facts checked")}}).to_string(),
            tool_calls: Vec::new(),
            usage,
            model: "gpt-4o-mini".into(),
        })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_outgrowing_its_window_leaves_out_its_oldest_tool_rounds() {
    let model = Arc::new(WindowedResearcher {
        calls: AtomicUsize::new(0),
        largest_prompt_tokens: AtomicUsize::new(0),
    });
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(model.clone())
        .registry(agent_registry(TURNS))
        .queue(queue.clone())
        // 40,000 characters a result (about 10,000 tokens): 23 rounds are
        // about 230,000 tokens, far over the 128,000-token window.
        .tools(Arc::new(FixedLookup {
            result_bytes: 40_000,
        }))
        .settings(OrchestratorSettings {
            agent_session_limit: std::time::Duration::from_secs(600),
            ..OrchestratorSettings::default()
        })
        .build()
        .services;
    let submitted = services.runs.submit("t", &agent_envelope()).await.unwrap();
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    let status = runner
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    let state = services
        .runs
        .load("t", &submitted.run_id)
        .await
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(status, RunStatus::Completed, "{:?}", state.failure);
    assert_eq!(model.calls.load(Ordering::SeqCst), TURNS);
    let largest = model.largest_prompt_tokens.load(Ordering::SeqCst);
    assert!(
        largest <= 96_000 + 2_000,
        "every request stayed near its 96,000-token budget: {largest}"
    );
    let frames = services
        .runs
        .read_all_events_after("t", &submitted.run_id, 0)
        .await
        .unwrap();
    baton_test_support::assert_frames_match_schemas(&frames);
    let trims: Vec<_> = frames
        .iter()
        .filter_map(|frame| frame.payload.as_ref())
        .filter(|payload| payload["code"] == "context_trimmed")
        .collect();
    assert!(!trims.is_empty(), "the trimming is said");
    let last = trims.last().unwrap();
    assert!(last["context"]["droppedExchanges"].as_u64().unwrap() > 0);
    assert_eq!(last["context"]["budgetTokens"], 96_000);
}
