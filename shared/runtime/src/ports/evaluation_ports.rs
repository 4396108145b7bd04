//! The ports of evaluations (`services::evaluations`, feature
//! `evaluations`): where a server keeps its evaluations' records, results
//! and judges' transcripts ([`EvaluationRecords`]), where an example's
//! envelope runs ([`ExampleRuns`]: this process's services, or a deployed
//! API), who judges its output ([`ExampleJudge`]), and where a judge
//! panel's whole output goes ([`TranscriptShelf`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use baton_evaluation::results::{Check, JudgeOutcome, Tokens};
use baton_evaluation::served::EvaluationRecord;
use serde_json::Value;

use crate::error::StoreError;

/// A tenant's evaluations, kept by a store. Every write is whole or not at
/// all: a reader sees a record's previous version or its next, never part.
#[async_trait]
pub trait EvaluationRecords: Send + Sync {
    /// Writes `record` (a new one, or its next version).
    async fn put_record(
        &self,
        tenant_id: &str,
        record: &EvaluationRecord,
    ) -> Result<(), StoreError>;
    /// The record, if the tenant has it.
    async fn get_record(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
    ) -> Result<Option<EvaluationRecord>, StoreError>;
    /// Every record the tenant has, in no order.
    async fn list_records(&self, tenant_id: &str) -> Result<Vec<EvaluationRecord>, StoreError>;
    /// Every tenant that has records (a server sweeps them at start).
    async fn tenants(&self) -> Result<Vec<String>, StoreError>;
    /// Keeps the request an evaluation was started with (`request_text`,
    /// JSON), so a server started again resumes it.
    async fn put_request(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
        request_text: &str,
    ) -> Result<(), StoreError>;
    /// The request kept with [`Self::put_request`], if any.
    async fn get_request(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
    ) -> Result<Option<String>, StoreError>;
    /// Keeps an ended evaluation's results lines (`results_text`).
    async fn put_results(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
        results_text: &str,
    ) -> Result<(), StoreError>;
    /// Where the judge panels of this evaluation keep their outputs.
    fn transcript_shelf(&self, tenant_id: &str, evaluation_id: &str) -> Arc<dyn TranscriptShelf>;
    /// Deletes the evaluation with its results and transcripts; nothing
    /// when it is not kept.
    async fn delete_evaluation(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
    ) -> Result<(), StoreError>;
}

/// Where a judge panel's whole output (its evaluation with the
/// hash-chained transcript, as `baton judge verify` reads it) is kept.
#[async_trait]
pub trait TranscriptShelf: Send + Sync {
    /// Keeps `panel_output` (JSON text) for `example_id`; returns where it
    /// is (a file's path, or the store's name for it), as results name it.
    async fn keep(&self, example_id: &str, panel_output: &str) -> Result<String, StoreError>;
}

/// A settled run, as an example's checks need it.
#[derive(Debug, Clone)]
pub struct FinishedRun {
    pub run_id: String,
    pub status: String,
    pub output: Value,
    pub cost_usd: Option<f64>,
    pub tokens: Tokens,
    pub duration_ms: u64,
    pub model_by_node: BTreeMap<String, String>,
}

/// An example whose run never settled: its run id when it had one, and
/// the check that failed (`submitted`, `loaded`, `settled`) with why.
#[derive(Debug, Clone)]
pub struct NotFinished {
    pub run_id: Option<String>,
    pub failed: Check,
}

impl NotFinished {
    pub fn new(run_id: Option<String>, check: &str, detail: impl Into<String>) -> Self {
        NotFinished {
            run_id,
            failed: Check::new(check, false, detail),
        }
    }
}

/// Where an example's envelope runs.
#[async_trait]
pub trait ExampleRuns: Send + Sync {
    /// The API's base URL when the runs are remote (results lines name it).
    fn api(&self) -> Option<String>;
    /// Runs `envelope` to where it settles, waiting at most `limit`.
    async fn run(&self, envelope: &Value, limit: Duration) -> Result<FinishedRun, NotFinished>;
}

/// Who judges an example's output.
#[async_trait]
pub trait ExampleJudge: Send + Sync {
    /// The panel's outcome for one example's output (its transcript kept,
    /// and named in the outcome), or why it gave none.
    async fn judge(
        &self,
        example_id: &str,
        objective: &str,
        output: &Value,
        reference: Option<&Value>,
    ) -> Result<JudgeOutcome, baton_evaluation::checks::JudgeFailure>;
}
