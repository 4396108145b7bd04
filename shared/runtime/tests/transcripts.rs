//! A concluded panel's transcript reaches the transcript publisher before
//! the verdict is committed, at least once: a publisher that fails once
//! makes the concluding step retry (nothing committed meanwhile), and the
//! transcript it finally gets is the verdict's, hash chain intact. The
//! publisher is a test double for an external ledger; the model a test
//! double answering every judge with 8.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use baton_core::basics::ids::RunKey;
use baton_runtime::ports::RunLog;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use baton_core::contracts::panels::TranscriptPublication;
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_judge::request::PanelRequest;
use baton_runtime::error::LlmError;
use baton_runtime::memory::{InMemoryRunStore, InMemoryStepQueue};
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta, TranscriptPublisher};
use baton_runtime::workers::LocalRunner;
use baton_test_support::TestServices;
use serde_json::json;
use tokio::sync::mpsc::UnboundedSender;

/// Test double for the judges' model endpoint.
#[derive(Default)]
struct JudgeModel {
    calls: AtomicUsize,
}

#[async_trait]
impl LlmProvider for JudgeModel {
    fn model_name(&self) -> String {
        "judge".into()
    }
    async fn complete(
        &self,
        _request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(ModelAnswer {
            content:
                json!({"score": 8.0, "feedback": "sound", "strengths": [], "improvements": []})
                    .to_string(),
            usage: TokenUsage::default(),
            model: "judge".into(),
        })
    }
}

/// Test double for an external ledger: refuses the first publication.
#[derive(Default)]
struct FlakyLedger {
    attempts: AtomicUsize,
    published: Mutex<Vec<(String, TranscriptPublication)>>,
}

#[async_trait]
impl TranscriptPublisher for FlakyLedger {
    async fn publish(
        &self,
        _tenant_id: &str,
        run_id: &str,
        publication: &TranscriptPublication,
    ) -> Result<
        Option<baton_core::contracts::panels::LedgerReceipt>,
        baton_runtime::error::PublishError,
    > {
        if self.attempts.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(baton_runtime::error::PublishError::Unavailable(
                "the ledger is unavailable".into(),
            ));
        }
        self.published
            .lock()
            .unwrap()
            .push((run_id.to_string(), publication.clone()));
        Ok(None)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_concluded_transcript_is_published_before_the_verdict_is_committed() {
    let store = Arc::new(InMemoryRunStore::new());
    let queue = Arc::new(InMemoryStepQueue::new());
    let model = Arc::new(JudgeModel::default());
    let ledger = Arc::new(FlakyLedger::default());
    let services = TestServices::with_model(model.clone())
        .store(store.clone())
        .queue(queue.clone())
        .transcripts(ledger.clone())
        .build()
        .services;
    let body = json!({
        "request": {"id": "req-ledger", "content": "A claim to judge.",
                    "selectedAgents": [{"id": "a"}, {"id": "b"}, {"id": "c"}]},
        "config": {"maxDiscussionRounds": 1, "roundTimeout": 30000, "consensusAlgorithm": "median",
                   "enableDiscussion": true, "convergenceThreshold": 1.0, "outlierDetection": false}
    });
    let request = PanelRequest::parse(&body).unwrap();
    let entry = services.runs.panel_entry().unwrap();
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
    assert_eq!(status, RunStatus::Completed);
    assert_eq!(
        ledger.attempts.load(Ordering::SeqCst),
        2,
        "refused once, then taken"
    );
    // The concluding judge's step failed with the ledger and ran again: its
    // answer had not been committed, so its model call was made again.
    assert_eq!(model.calls.load(Ordering::SeqCst), 4);
    let published = ledger.published.lock().unwrap().clone();
    assert_eq!(published.len(), 1);
    let (run_id, publication) = &published[0];
    assert_eq!(run_id, &submitted.run_id);
    assert_eq!(
        publication.idempotency_key,
        format!("{}:{}:1", submitted.run_id, publication.node_id)
    );
    assert!(publication.transcript.verify().is_ok());
    let state = store
        .load_run(RunKey::new("t", &submitted.run_id))
        .await
        .unwrap()
        .unwrap()
        .state;
    let verdict = state.nodes[&publication.node_id].output.clone().unwrap();
    assert_eq!(
        serde_json::to_value(&publication.transcript).unwrap(),
        verdict[entry.verdict_facet.as_str()]["transcript"]
    );
}
