//! Long runs on the DynamoDB store (moto): a 200-turn agent session and a
//! 50-judge panel (allowed three rounds; the scripted judges agree in the
//! first) complete without `state_too_large`,
//! and print how large the stored (compressed) run state grew, the figure
//! that sets each commit's write cost.
//!
//! Test doubles: the model (`baton_test_support::agent_session`: one tool
//! call per turn until the last, then an answer; for the panel, the
//! scripted OpenAI-compatible server answering each judge's schema) and the
//! tool's endpoint (a fixed result). The engine, the step service and the
//! DynamoDB store are the real ones.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use baton_core::basics::ids::RunKey;
use baton_runtime::ports::RunLog;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use baton_aws::DynamoRunStore;
use baton_core::records::conversation::{SessionAnswer, ToolSession};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::RunStatus;
use baton_llm::{OpenAiCompatibleConfig, OpenAiCompatibleProvider};
use baton_runtime::error::LlmError;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::services::OrchestratorSettings;
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use baton_test_support::agent_session::{
    FixedLookup, OneLookupPerTurn, agent_envelope, agent_registry,
};
use moto_server::{MotoServer, unique_name};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

const AGENT_TURNS: usize = 200;
const JUDGES: usize = 50;

/// The stored size of a run's state: compressed bytes, JSON bytes.
async fn stored_state_size(store: &DynamoRunStore, run_id: &str) -> (usize, usize) {
    let state = store
        .load_run(RunKey::new("t", run_id))
        .await
        .unwrap()
        .unwrap()
        .state;
    let json = serde_json::to_vec(&state).unwrap().len();
    let AttributeValue::B(blob) = baton_aws::dynamodb::state_codec::encode_state(&state).unwrap()
    else {
        panic!("the state is stored as binary");
    };
    (blob.as_ref().len(), json)
}

async fn dynamodb_store(moto: &MotoServer) -> Arc<DynamoRunStore> {
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let store = DynamoRunStore::new(&connection, unique_name("baton-long-runs"));
    store.create_table_if_missing().await.unwrap();
    Arc::new(store)
}

/// Test double for the model (`OneLookupPerTurn`, which it asks) that
/// measures the stored state at the last turn (the session at its largest).
struct ManyTurns {
    model: OneLookupPerTurn,
    store: Arc<DynamoRunStore>,
    run_id: Mutex<Option<String>>,
    largest: Mutex<Option<(usize, usize)>>,
}

#[async_trait]
impl LlmProvider for ManyTurns {
    fn model_name(&self) -> String {
        self.model.model_name()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        self.model.complete(request, deltas).await
    }

    async fn converse(
        &self,
        request: &ModelRequest,
        session: &ToolSession,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<SessionAnswer, LlmError> {
        if OneLookupPerTurn::results_in(session) + 1 == AGENT_TURNS {
            let run_id = self.run_id.lock().unwrap().clone().unwrap();
            *self.largest.lock().unwrap() = Some(stored_state_size(&self.store, &run_id).await);
        }
        self.model.converse(request, session, deltas).await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_200_turn_agent_session_completes_on_dynamodb() {
    let moto = MotoServer::start().unwrap();
    let store = dynamodb_store(&moto).await;
    let model = Arc::new(ManyTurns {
        model: OneLookupPerTurn { turns: AGENT_TURNS },
        store: store.clone(),
        run_id: Mutex::new(None),
        largest: Mutex::new(None),
    });
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(model.clone())
        .registry(agent_registry(AGENT_TURNS))
        .store(store.clone())
        .queue(queue.clone())
        .tools(Arc::new(FixedLookup { result_bytes: 60 }))
        // 400 steps on moto outlast the default 90 s session watchdog.
        .settings(OrchestratorSettings {
            agent_session_limit: std::time::Duration::from_secs(1800),
            ..OrchestratorSettings::default()
        })
        .build()
        .services;
    let submitted = services.runs.submit("t", &agent_envelope()).await.unwrap();
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
        .load_run(RunKey::new("t", &submitted.run_id))
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
        baton_aws::dynamodb::state_codec::MAX_STORED_STATE_BYTES
    );
    assert!(largest_compressed < baton_aws::dynamodb::state_codec::MAX_STORED_STATE_BYTES);
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
        .load_run(RunKey::new("t", &submitted.run_id))
        .await
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(status, RunStatus::Completed, "{:?}", state.failure);
    let (compressed, json) = stored_state_size(&store, &submitted.run_id).await;
    eprintln!(
        "{JUDGES}-judge panel on DynamoDB: {} model calls; the completed run's stored state is {compressed} bytes compressed ({json} JSON); the cap is {} bytes",
        model.request_count(),
        baton_aws::dynamodb::state_codec::MAX_STORED_STATE_BYTES
    );
    assert!(model.request_count() >= JUDGES, "every judge was asked");
}
