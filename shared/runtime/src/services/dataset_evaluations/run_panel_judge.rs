//! The judge of a served evaluation's examples as durable runs: for each
//! example, the panel request (the template with its `content` replaced)
//! is submitted as a panel run of the tenant (`RunService::
//! submit_evaluation_once`), so the judges' calls are steps like any
//! other: committed one at a time, resumed after a restart, counted by the
//! tenant's limits and budgets, cancelled past their time. Each run has the
//! idempotency key `{evaluationId}.{exampleId}.judges`, so a pass that did
//! not see the run another started takes that run up rather than asking
//! the panel twice. Nothing here waits: [`RunPanelJudge::look`] starts the
//! panel or reads where it is, and an evaluation's next pass looks again.
//! The panel's size is checked when the evaluation is submitted (at most
//! `baton_judge::request::MAX_JUDGES`, what one DynamoDB transaction keeps).

use std::sync::Arc;
use std::time::Duration;

use baton_core::basics::status::RunStatus;
use baton_core::contracts::dataset::ResolvedExample;
use baton_evaluation::checks::{JudgeFailure, judge_request_for};
use baton_evaluation::results::JudgeOutcome;
use baton_judge::panel::PanelOutput;
use baton_judge::request::PanelRequest;
use serde_json::Value;

use super::panel_judge::kept_outcome;
use super::{EvaluationError, PAST_ITS_LIMIT};
use crate::error::RuntimeError;
use crate::ports::Clock;
use crate::ports::evaluation_ports::TranscriptShelf;
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

/// Where an example's panel stands.
pub(super) enum PanelLook {
    /// Its run is at work (or the tenant's limits hold its start: `None`).
    Working(Option<String>),
    /// The panel's outcome, or why it gave none.
    Ended(Result<JudgeOutcome, JudgeFailure>),
}

/// Whether a refused submission waits its turn: the tenant is at its
/// limits, and the next pass tries again.
pub(super) fn held_by_limits(error: &RuntimeError) -> bool {
    matches!(
        error,
        RuntimeError::TenantLimit { .. } | RuntimeError::TenantRateLimit { .. }
    )
}

impl RunPanelJudge {
    /// Starts the panel on `output`, the completed run of `example`, or
    /// reads where its run `panel_run` stands; past its limit the run is
    /// cancelled and the panel gave no outcome.
    pub(super) async fn look(
        &self,
        example: &ResolvedExample,
        output: &Value,
        panel_run: Option<String>,
        clock: &dyn Clock,
    ) -> Result<PanelLook, EvaluationError> {
        let run_id = match panel_run {
            Some(run_id) => run_id,
            None => match self.start(example, output).await? {
                Ok(Some(run_id)) => run_id,
                Ok(None) => return Ok(PanelLook::Working(None)),
                Err(failure) => return Ok(PanelLook::Ended(Err(failure))),
            },
        };
        let Some(stored) = self
            .runs
            .load(&self.tenant, &run_id)
            .await
            .map_err(unavailable)?
        else {
            return Ok(PanelLook::Ended(Err(JudgeFailure::NoConsensus(format!(
                "panel run {run_id} is no longer kept"
            )))));
        };
        let state = stored.state;
        if !state.status().is_settled() {
            if clock.now().since(state.created_at) <= self.limit {
                return Ok(PanelLook::Working(Some(run_id)));
            }
            let cancelled = self
                .runs
                .cancel(&self.tenant, &run_id, PAST_ITS_LIMIT)
                .await
                .map_or_else(
                    |error| format!("; cancelling it failed: {error}"),
                    |_| "; it was cancelled".to_string(),
                );
            return Ok(PanelLook::Ended(Err(JudgeFailure::NoConsensus(format!(
                "panel run {run_id} had not settled after {} s{cancelled}",
                self.limit.as_secs()
            )))));
        }
        if state.status() != RunStatus::Completed {
            let why = state.failure.as_ref().map_or_else(
                || state.status().as_str().to_string(),
                |failure| failure.message.clone(),
            );
            return Ok(PanelLook::Ended(Err(JudgeFailure::NoConsensus(format!(
                "panel run {run_id}: {why}"
            )))));
        }
        let verdict = state
            .output
            .as_ref()
            .and_then(|output| output.get(&self.entry.verdict_facet))
            .cloned()
            .unwrap_or(Value::Null);
        let panel: PanelOutput = match serde_json::from_value(verdict) {
            Ok(panel) => panel,
            Err(error) => {
                return Ok(PanelLook::Ended(Err(JudgeFailure::NoConsensus(format!(
                    "panel run {run_id}: its verdict is not a panel's output: {error}"
                )))));
            }
        };
        Ok(PanelLook::Ended(
            kept_outcome(&panel, &example.id, self.shelf.as_ref()).await,
        ))
    }

    /// Submits the example's panel run (or finds the one its key names):
    /// its id, `None` while the tenant's limits hold it, or why the panel
    /// cannot be asked.
    async fn start(
        &self,
        example: &ResolvedExample,
        output: &Value,
    ) -> Result<Result<Option<String>, JudgeFailure>, EvaluationError> {
        let objective = example.envelope["objective"].as_str().unwrap_or_default();
        let body = match judge_request_for(
            &self.template,
            &example.id,
            objective,
            output,
            example.expect.reference.as_ref(),
        ) {
            Ok(body) => body,
            Err(failure) => return Ok(Err(failure)),
        };
        let request = match PanelRequest::parse(&body) {
            Ok(request) => request,
            Err(error) => return Ok(Err(JudgeFailure::InvalidRequest(error.to_string()))),
        };
        let key = format!("{}.{}.judges", self.evaluation_id, example.id);
        match self
            .runs
            .submit_evaluation_once(&self.tenant, &self.entry, &request, &body, Some(&key))
            .await
        {
            Ok(submitted) => Ok(Ok(Some(submitted.run_id))),
            Err(error) if error.is_retryable() => Err(unavailable(error)),
            Err(error) if held_by_limits(&error) => Ok(Ok(None)),
            Err(error) => Ok(Err(JudgeFailure::InvalidRequest(error.to_string()))),
        }
    }
}

pub(super) fn unavailable(error: RuntimeError) -> EvaluationError {
    EvaluationError::Unavailable(error.to_string())
}
