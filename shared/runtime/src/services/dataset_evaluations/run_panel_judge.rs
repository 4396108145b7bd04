//! The judge of a served evaluation's examples as durable runs: for each
//! example, the panel request (the template with its `content` replaced)
//! is submitted as a panel run of the tenant (`RunService::
//! submit_evaluation`), so the judges' calls are steps like any other:
//! committed one at a time, resumed after a restart, counted by the
//! tenant's limits and budgets, cancelled past the example's time. Each run
//! has the idempotency key `{evaluationId}.{line}.judges`, so a server
//! started again takes the panel up rather than asking it twice. The
//! panel's size is checked when the evaluation is submitted (at most
//! `baton_judge::request::MAX_JUDGES`, what one DynamoDB transaction keeps).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use baton_core::basics::status::RunStatus;
use baton_evaluation::checks::{JudgeFailure, judge_request_for};
use baton_evaluation::results::JudgeOutcome;
use baton_judge::panel::PanelOutput;
use baton_judge::request::PanelRequest;
use serde_json::Value;

use super::example_runs::settled_run;
use super::panel_judge::kept_outcome;
use crate::ports::evaluation_ports::{ExampleJudge, TranscriptShelf};
use crate::services::RunService;
use crate::services::runs::PanelEntry;

/// A panel, run as one durable run per example.
pub struct RunPanelJudge {
    pub(super) template: Value,
    pub(super) runs: Arc<RunService>,
    pub(super) tenant: String,
    pub(super) entry: PanelEntry,
    pub(super) evaluation_id: String,
    pub(super) shelf: Arc<dyn TranscriptShelf>,
    /// How long a panel run may take before it is cancelled.
    pub(super) limit: Duration,
}

#[async_trait]
impl ExampleJudge for RunPanelJudge {
    async fn judge(
        &self,
        example_id: &str,
        objective: &str,
        output: &Value,
        reference: Option<&Value>,
    ) -> Result<JudgeOutcome, JudgeFailure> {
        let started = Instant::now();
        let body = judge_request_for(&self.template, example_id, objective, output, reference)?;
        let request = PanelRequest::parse(&body)
            .map_err(|error| JudgeFailure::InvalidRequest(error.to_string()))?;
        let key = format!("{}.{example_id}.judges", self.evaluation_id);
        let submitted = self
            .runs
            .submit_evaluation_once(&self.tenant, &self.entry, &request, &body, Some(&key))
            .await
            .map_err(|error| JudgeFailure::InvalidRequest(error.to_string()))?;
        let state = settled_run(
            &self.runs,
            &self.tenant,
            &submitted.run_id,
            started,
            self.limit,
        )
        .await
        .map_err(|not| JudgeFailure::NoConsensus(not.failed.detail))?;
        if state.status() != RunStatus::Completed {
            let why = state.failure.as_ref().map_or_else(
                || state.status().as_str().to_string(),
                |f| f.message.clone(),
            );
            return Err(JudgeFailure::NoConsensus(format!(
                "panel run {}: {why}",
                submitted.run_id
            )));
        }
        let verdict = state
            .output
            .as_ref()
            .and_then(|output| output.get(&self.entry.verdict_facet))
            .cloned()
            .unwrap_or(Value::Null);
        let panel: PanelOutput = serde_json::from_value(verdict).map_err(|error| {
            JudgeFailure::NoConsensus(format!(
                "panel run {}: its verdict is not a panel's output: {error}",
                submitted.run_id
            ))
        })?;
        kept_outcome(&panel, example_id, self.shelf.as_ref()).await
    }
}
