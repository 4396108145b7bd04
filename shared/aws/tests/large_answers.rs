//! A model's large answer on the DynamoDB store (moto), end to end: a
//! chat turn answered with 1 MiB of text that does not compress completes
//! on DynamoDB as it does on SQLite and in memory (its state, its streamed
//! deltas, its `complete` frame and the thread's exchange each larger than
//! one 400 KB item), with the model asked once; the thread's next turn
//! (carrying that history) completes too. A third turn whose answer no
//! longer fits one transaction's 4 MB beside that history ends at once
//! with `state_too_large` naming the size and the limit, the model asked
//! once. Before, the first commit was refused ("Item size has exceeded the
//! maximum allowed size"), retried as if DynamoDB were unavailable, and the
//! model asked again on every retry.
//!
//! Test double: the model endpoint (answers every turn with the same
//! text, streamed in 64 KiB pieces, and counts its calls). The engine, the
//! step service and the DynamoDB store are the real ones.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use baton_aws::DynamoRunStore;
use baton_core::records::conversation::{SessionAnswer, ToolSession};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_runtime::error::LlmError;
use baton_runtime::memory::InMemoryStepQueue;
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta};
use baton_runtime::services::ChatRequest;
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use moto_server::{MotoServer, unique_name};
use tokio::sync::mpsc::UnboundedSender;

const ANSWER_BYTES: usize = 1024 * 1024;

/// Text that does not compress much (the conformance suite's).
fn incompressible_text(bytes: usize) -> String {
    baton_test_support::conformance::incompressible_text(bytes, 0x2545_F491_4F6C_DD1D)
}

/// Test double for the model endpoint: answers of the given lengths, one
/// per call, streamed.
struct LongAnswer {
    lengths: Vec<usize>,
    calls: AtomicUsize,
}

#[async_trait]
impl LlmProvider for LongAnswer {
    fn model_name(&self) -> String {
        "long-answer-double".into()
    }

    async fn complete(
        &self,
        _request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        Err(LlmError::Configuration("a chat node converses".into()))
    }

    async fn converse(
        &self,
        _request: &ModelRequest,
        _session: &ToolSession,
        deltas: UnboundedSender<ModelDelta>,
    ) -> Result<SessionAnswer, LlmError> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        let text = incompressible_text(self.lengths[call.min(self.lengths.len() - 1)]);
        for piece in text.as_bytes().chunks(64 * 1024) {
            let _ = deltas.send(ModelDelta::Text(String::from_utf8(piece.to_vec()).unwrap()));
        }
        Ok(SessionAnswer {
            content: text,
            tool_calls: Vec::new(),
            usage: TokenUsage::default(),
            model: "gpt-4o-mini".into(),
        })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_one_mebibyte_answer_completes_on_dynamodb_with_one_model_call() {
    let moto = MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let store = Arc::new(DynamoRunStore::new(
        &connection,
        unique_name("baton-large-answer"),
    ));
    store.create_table_if_missing().await.unwrap();
    let model = Arc::new(LongAnswer {
        lengths: vec![ANSWER_BYTES, 64 * 1024, 3 * ANSWER_BYTES],
        calls: AtomicUsize::new(0),
    });
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(model.clone())
        .store(store.clone())
        .threads(store.clone())
        .queue(queue.clone())
        .build()
        .services;
    let runner = LocalRunner {
        steps: services.steps.clone(),
        runs: services.runs.clone(),
        queue,
    };
    let mut thread_id = None;
    let started = std::time::Instant::now();
    for (turn, length) in [(0, ANSWER_BYTES), (1, 64 * 1024)] {
        let request = ChatRequest {
            message: format!("Write it all out, turn {turn}."),
            thread_id: thread_id.clone(),
            ..ChatRequest::default()
        };
        let submitted = services.runs.submit_chat("t", &request).await.unwrap();
        thread_id = Some(submitted.thread_id.clone());
        let status = runner
            .run_until_settled("t", &submitted.run_id)
            .await
            .unwrap();
        let stored = services
            .runs
            .load("t", &submitted.run_id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            status,
            RunStatus::Completed,
            "turn {turn}: {:?}",
            stored.state.failure
        );
        let output = stored.state.output.unwrap();
        assert_eq!(
            output["message"].as_str().map(str::len),
            Some(length),
            "turn {turn}: the whole answer is the run's output"
        );
        let frames = services
            .runs
            .read_all_events_after("t", &submitted.run_id, 0)
            .await
            .unwrap();
        let complete = frames.last().unwrap();
        assert_eq!(complete.event_type.as_str(), "complete");
        let streamed: usize = frames
            .iter()
            .filter(|frame| frame.event_type.as_str() == "delta")
            .filter_map(|frame| frame.message.as_deref().map(str::len))
            .sum();
        assert_eq!(streamed, length, "turn {turn}: every delta reads back");
        let values: Vec<serde_json::Value> = frames
            .iter()
            .map(|frame| serde_json::to_value(frame).unwrap())
            .collect();
        baton_test_support::crash_checks::assert_completed_exactly_once(&submitted.run_id, &values);
        assert_eq!(
            model.calls.load(Ordering::SeqCst),
            turn + 1,
            "turn {turn}: the model was asked once"
        );
    }
    baton_test_support::crash_checks::record_figures(
        "dynamodb-one-mebibyte-answer",
        serde_json::json!({
            "store": "DynamoDB (moto)",
            "path": "step service, chat",
            "fault": "a 1 MiB answer that does not compress (state, deltas, complete frame and exchange each past 400 KB), then a turn carrying it",
            "runs": 2,
            "recoveryMs": started.elapsed().as_millis() as u64,
            "modelRequests": model.calls.load(Ordering::SeqCst),
            "checks": baton_test_support::crash_checks::EXACTLY_ONCE_HISTORY_CHECKS,
        }),
    );
    // 3 MiB more beside the 1 MiB history: over one transaction's 4 MB.
    let request = ChatRequest {
        message: "Now three times as much.".into(),
        thread_id,
        ..ChatRequest::default()
    };
    let submitted = services.runs.submit_chat("t", &request).await.unwrap();
    let status = runner
        .run_until_settled("t", &submitted.run_id)
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Failed);
    let failure = services
        .runs
        .load("t", &submitted.run_id)
        .await
        .unwrap()
        .unwrap()
        .state
        .failure
        .unwrap();
    assert_eq!(
        failure.code,
        baton_core::basics::codes::FailureCode::StateTooLarge,
        "{failure:?}"
    );
    assert!(
        failure.message.contains("bytes") && failure.message.contains("DynamoDB"),
        "the failure names the size and the limit: {}",
        failure.message
    );
    assert_eq!(
        model.calls.load(Ordering::SeqCst),
        3,
        "what cannot be stored is not asked for again"
    );
}
