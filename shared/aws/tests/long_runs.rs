//! Long runs on the DynamoDB store (moto): a 200-turn agent session and a
//! 50-judge panel (allowed three rounds; the scripted judges agree in the
//! first) complete without `state_too_large`,
//! and print how large the stored (compressed) run state grew, the figure
//! that sets each commit's write cost.
//!
//! Test doubles: the model (a provider that asks for one tool call per turn
//! until the last, then answers; for the panel, the scripted
//! OpenAI-compatible server answering each judge's schema) and the tool's
//! endpoint (a `ToolRunner` returning a small fixed result). The engine,
//! the step service and the DynamoDB store are the real ones.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use baton_aws::DynamoRunStore;
use baton_core::context::ModelRequest;
use baton_core::conversation::{
    SessionAnswer, SessionTurn, ToolCallRequest, ToolInvocation, ToolOutcome, ToolSession,
};
use baton_core::facet::{Facet, FacetDirection};
use baton_core::registry::Registry;
use baton_core::run::{RunStatus, TokenUsage};
use baton_core::tools::ToolDefinition;
use baton_llm::{OpenAiCompatibleConfig, OpenAiCompatibleProvider};
use baton_runtime::error::LlmError;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta, RunStore, ToolRunner};
use baton_runtime::services::OrchestratorSettings;
use baton_runtime::worker::LocalRunner;
use baton_test_support::TestServices;
use moto_server::{MotoServer, unique_name};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

const AGENT_TURNS: usize = 200;
const JUDGES: usize = 50;

/// The stored size of a run's state: compressed bytes, JSON bytes.
async fn stored_state_size(store: &DynamoRunStore, run_id: &str) -> (usize, usize) {
    let state = store.load_run("t", run_id).await.unwrap().unwrap().state;
    let json = serde_json::to_vec(&state).unwrap().len();
    let AttributeValue::B(blob) = baton_aws::state_codec::encode_state(&state).unwrap() else {
        panic!("the state is stored as binary");
    };
    (blob.as_ref().len(), json)
}

async fn dynamodb_store(moto: &MotoServer) -> Arc<DynamoRunStore> {
    let configuration = moto.sdk_configuration().await;
    let store = DynamoRunStore::new(
        aws_sdk_dynamodb::Client::new(&configuration),
        unique_name("baton-long-runs"),
    );
    store.create_table_if_missing().await.unwrap();
    Arc::new(store)
}

/// Test double for the model: one `lookup` call per turn until the last
/// turn, which answers. At that last turn it measures the stored state (the
/// session at its largest).
struct ManyTurns {
    store: Arc<DynamoRunStore>,
    run_id: Mutex<Option<String>>,
    largest: Mutex<Option<(usize, usize)>>,
}

#[async_trait]
impl LlmProvider for ManyTurns {
    fn model_name(&self) -> String {
        "many-turns".into()
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
        let results = session
            .turns
            .iter()
            .filter(|turn| matches!(turn, SessionTurn::Tool { .. }))
            .count();
        let usage = TokenUsage {
            prompt_tokens: 10,
            completion_tokens: 5,
            cached_prompt_tokens: 0,
        };
        if results + 1 < AGENT_TURNS {
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
        let run_id = self.run_id.lock().unwrap().clone().unwrap();
        *self.largest.lock().unwrap() = Some(stored_state_size(&self.store, &run_id).await);
        Ok(SessionAnswer {
            content: json!({"answer": {"text": format!("{results} facts checked")}}).to_string(),
            tool_calls: Vec::new(),
            usage,
            model: "gpt-4o-mini".into(),
        })
    }
}

/// Test double for the tool's endpoint: a small fixed result per call.
struct FixedLookup;

#[async_trait]
impl ToolRunner for FixedLookup {
    async fn run_tool(&self, _tool: &ToolDefinition, invocation: &ToolInvocation) -> ToolOutcome {
        ToolOutcome::Succeeded(json!({
            "fact": format!("{} holds, checked against the source", invocation.arguments["q"])
        }))
    }
}

fn agent_registry() -> Arc<Registry> {
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
                "maxIterations": AGENT_TURNS
            }))
            .unwrap(),
            "test",
        )
        .unwrap();
    Arc::new(registry)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_200_turn_agent_session_completes_on_dynamodb() {
    let moto = MotoServer::start().unwrap();
    let store = dynamodb_store(&moto).await;
    let model = Arc::new(ManyTurns {
        store: store.clone(),
        run_id: Mutex::new(None),
        largest: Mutex::new(None),
    });
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(model.clone())
        .registry(agent_registry())
        .store(store.clone())
        .queue(queue.clone())
        .tools(Arc::new(FixedLookup))
        // 400 steps on moto outlast the default 90 s session watchdog.
        .settings(OrchestratorSettings {
            agent_session_limit: std::time::Duration::from_secs(1800),
            ..OrchestratorSettings::default()
        })
        .build()
        .services;
    let submitted = services
        .runs
        .submit(
            "t",
            &json!({
                "objective": "Answer the question with checked facts.",
                "inputs": {"question": {"text": "Which facts hold?"}},
                "outputContract": {"schema": {"type": "object", "required": ["answer"],
                                              "properties": {"answer": {"type": "object"}}}}
            }),
        )
        .await
        .unwrap();
    *model.run_id.lock().unwrap() = Some(submitted.run_id.clone());
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    let status = runner
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    let state = store
        .load_run("t", &submitted.run_id)
        .await
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(status, RunStatus::Completed, "{:?}", state.failure);
    assert_eq!(
        state.output.unwrap()["answer"]["text"],
        format!("{} facts checked", AGENT_TURNS - 1)
    );
    let (largest_compressed, largest_json) = model.largest.lock().unwrap().unwrap();
    let (final_compressed, final_json) = stored_state_size(&store, &submitted.run_id).await;
    eprintln!(
        "{AGENT_TURNS}-turn agent session on DynamoDB: the stored state before the last turn was {largest_compressed} bytes compressed ({largest_json} JSON), {final_compressed} ({final_json}) once completed; the cap is {} bytes",
        baton_aws::state_codec::MAX_STORED_STATE_BYTES
    );
    assert!(largest_compressed < baton_aws::state_codec::MAX_STORED_STATE_BYTES);
    // The conversation lives beside the run: its state does not grow with
    // the turns (it was 51 kB of JSON at turn 200 when the state held them).
    assert!(
        largest_json < 8 * 1024,
        "the run state held {largest_json} bytes of JSON before the last turn"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_50_judge_panel_allowed_three_rounds_completes_on_dynamodb() {
    let moto = MotoServer::start().unwrap();
    let store = dynamodb_store(&moto).await;
    let model = scripted_llm::ScriptedLlmServer::start().await.unwrap();
    let provider = OpenAiCompatibleProvider::new(OpenAiCompatibleConfig::new(
        model.base_url(),
        "gpt-4o-mini",
        None,
    ))
    .unwrap();
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(Arc::new(provider))
        .store(store.clone())
        .queue(queue.clone())
        .build()
        .services;
    let body: Value = json!({
        "request": {
            "id": "large-panel", "content": "Baton runs plans one durable step at a time.",
            "criteria": ["Accuracy", "Clarity", "Completeness"],
            "selectedAgents": (0..JUDGES).map(|index| json!({
                "id": format!("judge-{index}"),
                "capabilities": {"systemPrompt": format!("You are judge {index}.")},
                "paymentConfig": {"enabled": false}
            })).collect::<Vec<_>>(),
        },
        "config": {"maxDiscussionRounds": 3, "roundTimeout": 30000, "consensusAlgorithm": "simple_average",
                   "enableDiscussion": true, "convergenceThreshold": 0.0, "outlierDetection": true}
    });
    let request = serde_json::from_value(body.clone()).unwrap();
    let entry = services
        .runs
        .panel_entry()
        .expect("the registry has a panel");
    let submitted = services
        .runs
        .submit_evaluation("t", &entry, &request, &body)
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
    let state = store
        .load_run("t", &submitted.run_id)
        .await
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(status, RunStatus::Completed, "{:?}", state.failure);
    let (compressed, json) = stored_state_size(&store, &submitted.run_id).await;
    eprintln!(
        "{JUDGES}-judge panel on DynamoDB: {} model calls; the completed run's stored state is {compressed} bytes compressed ({json} JSON); the cap is {} bytes",
        model.request_count(),
        baton_aws::state_codec::MAX_STORED_STATE_BYTES
    );
    assert!(model.request_count() >= JUDGES, "every judge was asked");
}
