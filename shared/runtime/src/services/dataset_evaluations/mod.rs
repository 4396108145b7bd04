//! Evaluations a server runs (`POST /api/v1/flex/evaluations`): a dataset
//! given inline runs on the server's own services under the caller's
//! tenant (so its runs are the tenant's, shown in the viewer, counted by
//! its limits), at most `concurrency` examples at once, judged by durable
//! panel runs when a panel is given. The record is kept through
//! [`EvaluationRecords`].
//!
//! An evaluation advances by passes ([`DatasetEvaluations::advance`]),
//! bounded steps that never wait on a run: each looks at the examples at
//! work, scores those that settled and starts the next. Who drives the
//! passes is the deployment's: `baton serve` runs one every
//! [`IN_PROCESS_PASS_EVERY`] in a task per evaluation
//! ([`InProcessDriver`]); the Lambda API runs the first when it accepts
//! the evaluation and the sweeper function the others, every 2 s for 30 s
//! of each invocation while any evaluation runs ([`EvaluationPasses`]).
//!
//! Invariants:
//! - A tenant has at most [`MAX_RUNNING_PER_TENANT`] evaluations running,
//!   as the store counts them.
//! - Each example has one run, whichever pass or process starts it: its
//!   idempotency key is `{evaluationId}.{line}` (the envelope's own key
//!   replaced), its panel's `{evaluationId}.{exampleId}.judges`. A process
//!   that stops leaves nothing to redo: the next pass, in it or another,
//!   takes the runs up where they are. An evaluation whose request is no
//!   longer kept (or no longer fits) is `interrupted`.
//! - An example's results line is a function of its settled runs: passes
//!   repeated or overlapping write the same lines. An example's (and a
//!   panel's) time limit counts from its run's creation, not from a pass,
//!   and past it the run is cancelled.
//! - An ended evaluation older than its tenant's retention is deleted with
//!   its results and transcripts whenever the tenant starts or lists
//!   evaluations and whenever the running ones are gathered.
//! - A request that does not fit is refused naming its JSON path, and
//!   nothing is kept for it.

mod evaluation_pass;
mod example_runs;
mod in_process;
mod panel_judge;
mod run_panel_judge;
mod sweeper_passes;

pub use example_runs::{DEFAULT_EXAMPLE_LIMIT, EmbeddedExampleRuns, PAST_ITS_LIMIT, run_example};
pub use in_process::{IN_PROCESS_PASS_EVERY, InProcessDriver};
pub use panel_judge::PanelJudge;
pub use run_panel_judge::RunPanelJudge;
pub use sweeper_passes::EvaluationPasses;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use baton_core::basics::instant::Instant;
use baton_core::catalog::registry::Registry;
use baton_core::contracts::dataset::ResolvedExample;
use baton_evaluation::checks::judge_request_for;
use baton_evaluation::results::results_text;
use baton_evaluation::served::{EvaluationRecord, EvaluationRequest, EvaluationStatus};
use baton_evaluation::summary::Summary;
use baton_judge::request::PanelRequest;
use serde_json::Value;

use crate::error::StoreError;
use crate::ports::Clock;
use crate::ports::evaluation_ports::EvaluationRecords;
use crate::services::{RunRetention, RunService};
use evaluation_pass::{EvaluationPass, ExampleLook};

/// Evaluations one tenant may have running at once.
pub const MAX_RUNNING_PER_TENANT: usize = 2;

/// Examples at once when the request does not say.
const DEFAULT_CONCURRENCY: usize = 2;

/// Why an evaluation was not started or is not answered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvaluationError {
    /// The request does not fit: the JSON path and what is wrong.
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    /// No such evaluation of the tenant.
    #[error("no such evaluation")]
    NotFound,
    /// The tenant has as many running as it may.
    #[error("{running} evaluations are running; at most {limit} at once")]
    Limit { running: usize, limit: usize },
    /// The store failed; a retry may succeed.
    #[error("the evaluations' store failed: {0}")]
    Unavailable(String),
}

impl From<StoreError> for EvaluationError {
    fn from(error: StoreError) -> Self {
        EvaluationError::Unavailable(error.to_string())
    }
}

/// Why a deployment cannot run judges: the error of whoever was to make
/// its model (its configuration, refused).
pub type NoJudgeModel = Arc<dyn std::error::Error + Send + Sync>;

/// What passes over every running evaluation did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassesReport {
    /// Evaluations a pass looked at.
    pub advanced: usize,
    /// Of those, the ones that ended in it.
    pub ended: usize,
    /// Passes that failed (the next try takes them up).
    pub failed: usize,
    /// Running evaluations left for the next time (the budget ran out).
    pub left: usize,
}

/// What a server's evaluations stand on.
pub struct DatasetEvaluations {
    records: Arc<dyn EvaluationRecords>,
    runs: Arc<RunService>,
    registry: Arc<Registry>,
    /// Whether judges can run here, or why not (a request naming judges
    /// is then refused, saying why).
    judges_can_run: Result<(), NoJudgeModel>,
    clock: Arc<dyn Clock>,
    retention: RunRetention,
}

impl DatasetEvaluations {
    /// Evaluations kept in `records`, run on `runs`.
    pub fn new(
        records: Arc<dyn EvaluationRecords>,
        runs: Arc<RunService>,
        registry: Arc<Registry>,
        judges_can_run: Result<(), NoJudgeModel>,
        clock: Arc<dyn Clock>,
        retention: RunRetention,
    ) -> Self {
        Self {
            records,
            runs,
            registry,
            judges_can_run,
            clock,
            retention,
        }
    }

    /// Every tenant's running evaluations, as (tenant, evaluation id);
    /// the ended ones past their tenant's retention deleted on the way.
    pub async fn running(&self) -> Result<Vec<(String, String)>, EvaluationError> {
        let mut running = Vec::new();
        for tenant_id in self.records.tenants().await? {
            for record in self.prune(&tenant_id).await? {
                if record.status == EvaluationStatus::Running {
                    running.push((tenant_id.clone(), record.evaluation_id));
                }
            }
        }
        Ok(running)
    }

    /// One pass over every running evaluation, oldest first, until
    /// `budget` is spent (the sweeper function's share of its run).
    pub async fn advance_every_running(
        &self,
        budget: Duration,
    ) -> Result<PassesReport, EvaluationError> {
        let started = std::time::Instant::now();
        let running = self.running().await?;
        let mut report = PassesReport::default();
        for (index, (tenant_id, evaluation_id)) in running.iter().enumerate() {
            if started.elapsed() >= budget {
                report.left = running.len() - index;
                break;
            }
            report.advanced += 1;
            match self.advance(tenant_id, evaluation_id).await {
                Ok(EvaluationStatus::Running) => {}
                Ok(_) => report.ended += 1,
                Err(error) => {
                    report.failed += 1;
                    tracing::warn!(%error, tenant_id, evaluation = %evaluation_id, "an evaluation's pass failed; the next one takes it up");
                }
            }
        }
        Ok(report)
    }

    /// Deletes the tenant's ended evaluations older than its retention;
    /// returns the others.
    async fn prune(&self, tenant_id: &str) -> Result<Vec<EvaluationRecord>, EvaluationError> {
        let keep_for = self.retention.of(tenant_id);
        let now = self.clock.now();
        let mut kept = Vec::new();
        for record in self.records.list_records(tenant_id).await? {
            let ended = record.status != EvaluationStatus::Running;
            let expired = Instant::parse_rfc3339(&record.created_at)
                .is_some_and(|created| now.since(created) > keep_for);
            if ended && expired {
                self.records
                    .delete_evaluation(tenant_id, &record.evaluation_id)
                    .await?;
            } else {
                kept.push(record);
            }
        }
        Ok(kept)
    }

    /// Checks the request and keeps it with its record (`running`); the
    /// caller drives its passes. Answers with the record.
    pub async fn start(
        &self,
        tenant_id: &str,
        body: &Value,
    ) -> Result<EvaluationRecord, EvaluationError> {
        let invalid =
            |error: baton_evaluation::served::InvalidEvaluation| EvaluationError::Invalid {
                path: error.path,
                message: error.message,
            };
        let request = EvaluationRequest::parse(body).map_err(invalid)?;
        let dataset = request.dataset().map_err(invalid)?;
        let evaluation_id = format!("eval_{}", uuid::Uuid::new_v4().simple());
        if let Some(template) = &request.judges {
            self.judge(tenant_id, &evaluation_id, template)?;
        }
        let running = self
            .prune(tenant_id)
            .await?
            .iter()
            .filter(|record| record.status == EvaluationStatus::Running)
            .count();
        if running >= MAX_RUNNING_PER_TENANT {
            return Err(EvaluationError::Limit {
                running,
                limit: MAX_RUNNING_PER_TENANT,
            });
        }
        let record = EvaluationRecord {
            evaluation_id,
            name: request
                .name
                .clone()
                .unwrap_or_else(|| dataset.header.name.clone()),
            status: EvaluationStatus::Running,
            created_at: self.clock.now().rfc3339(),
            total: dataset.examples.len(),
            finished: 0,
            passed: 0,
            judged: request.judges.is_some(),
            summary: None,
            results: Vec::new(),
            in_flight: Vec::new(),
        };
        // The request first: a record kept `running` can always be resumed.
        self.records
            .put_request(tenant_id, &record.evaluation_id, &body.to_string())
            .await?;
        self.records.put_record(tenant_id, &record).await?;
        Ok(record)
    }

    /// The request an evaluation was started with and its examples, or
    /// `None` when it is not kept or no longer fits.
    async fn kept_request(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
    ) -> Result<Option<(EvaluationRequest, Vec<ResolvedExample>)>, EvaluationError> {
        let Some(text) = self.records.get_request(tenant_id, evaluation_id).await? else {
            return Ok(None);
        };
        let Ok(body) = serde_json::from_str::<Value>(&text) else {
            return Ok(None);
        };
        let Ok(request) = EvaluationRequest::parse(&body) else {
            return Ok(None);
        };
        let Ok(dataset) = request.dataset() else {
            return Ok(None);
        };
        Ok(Some((request, dataset.examples)))
    }

    /// One pass over a running evaluation (see [`evaluation_pass`]): the
    /// examples that settled are scored and kept, the next ones started;
    /// once every example has its line the evaluation is summarised and
    /// its results kept. Answers where the evaluation stands after it.
    pub async fn advance(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
    ) -> Result<EvaluationStatus, EvaluationError> {
        let Some(mut record) = self.records.get_record(tenant_id, evaluation_id).await? else {
            return Err(EvaluationError::NotFound);
        };
        if record.status != EvaluationStatus::Running {
            return Ok(record.status);
        }
        let kept = self.kept_request(tenant_id, evaluation_id).await?;
        let judge = match kept
            .as_ref()
            .and_then(|(request, _)| request.judges.as_ref())
        {
            Some(template) => self.judge(tenant_id, evaluation_id, template).map(Some),
            None => Ok(None),
        };
        let (Some((request, examples)), Ok(judge)) = (kept, judge) else {
            tracing::warn!(tenant_id, evaluation = %evaluation_id, "an evaluation whose request is not kept, or no longer fits, is interrupted");
            record.status = EvaluationStatus::Interrupted;
            record.in_flight.clear();
            self.records.put_record(tenant_id, &record).await?;
            return Ok(record.status);
        };
        let concurrency = request.concurrency.unwrap_or(DEFAULT_CONCURRENCY).max(1);
        let pass = EvaluationPass {
            runs: &self.runs,
            tenant_id,
            evaluation_id,
            judge: judge.as_ref(),
            clock: self.clock.as_ref(),
        };
        let before = record.clone();
        let mut in_flight = Vec::new();
        let mut looked_at: HashSet<usize> = HashSet::new();
        // The window is the first `concurrency` examples without a line;
        // an example that ends in this pass frees its place at once.
        loop {
            let done: HashSet<usize> = record.results.iter().map(|result| result.line).collect();
            let window: Vec<&ResolvedExample> = examples
                .iter()
                .filter(|example| !done.contains(&example.line))
                .take(concurrency)
                .filter(|example| !looked_at.contains(&example.line))
                .collect();
            if window.is_empty() {
                break;
            }
            let looks = futures_util::future::join_all(window.iter().map(|example| {
                let flight = record
                    .in_flight
                    .iter()
                    .find(|flight| flight.line == example.line)
                    .cloned();
                pass.look(example, flight)
            }))
            .await;
            for (example, look) in window.iter().zip(looks) {
                looked_at.insert(example.line);
                match look? {
                    ExampleLook::Ended(result) => record.results.push(result),
                    ExampleLook::Working(flight) => in_flight.push(flight),
                    ExampleLook::Held => {}
                }
            }
        }
        record.in_flight = in_flight;
        record.finished = record.results.len();
        record.passed = record.results.iter().filter(|result| result.passed).count();
        if record.finished >= record.total {
            // The dataset's order, whatever order they finished in.
            record.results.sort_by_key(|result| result.line);
            record.summary = Some(Summary::of(&record.results));
            record.status = EvaluationStatus::Completed;
            self.records
                .put_results(tenant_id, evaluation_id, &results_text(&record.results))
                .await?;
        }
        if record != before {
            self.records.put_record(tenant_id, &record).await?;
        }
        Ok(record.status)
    }

    /// The tenant's evaluations, newest first, without their results.
    pub async fn list(&self, tenant_id: &str) -> Result<Vec<EvaluationRecord>, EvaluationError> {
        let mut records = self.prune(tenant_id).await?;
        for record in &mut records {
            record.results.clear();
        }
        records.sort_by(|first, second| second.created_at.cmp(&first.created_at));
        Ok(records)
    }

    /// One evaluation, with the results of the examples finished so far.
    pub async fn get(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
    ) -> Result<EvaluationRecord, EvaluationError> {
        self.records
            .get_record(tenant_id, evaluation_id)
            .await?
            .ok_or(EvaluationError::NotFound)
    }

    /// The judge of a request's panel: one durable panel run of the
    /// tenant per example ([`RunPanelJudge`]), its transcripts kept beside
    /// the evaluation; refused naming the path under `$.judges` (a judge
    /// the catalog lacks, a panel past its size, a deployment without a
    /// model or a panel capability).
    fn judge(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
        template: &Value,
    ) -> Result<RunPanelJudge, EvaluationError> {
        let under_judges = |path: String, message: String| EvaluationError::Invalid {
            path: format!("$.judges{}", path.strip_prefix('$').unwrap_or(&path)),
            message,
        };
        if let Err(why) = &self.judges_can_run {
            return Err(under_judges(
                "$".into(),
                format!("this server has no model for judges: {why}"),
            ));
        }
        let Some(entry) = self.runs.panel_entry() else {
            return Err(under_judges(
                "$".into(),
                "this server's registry has no panel capability to run judges".into(),
            ));
        };
        let probe = judge_request_for(template, "probe", "", &Value::Null, None)
            .map_err(|error| under_judges("$.request".into(), error.to_string()))?;
        let request =
            PanelRequest::parse(&probe).map_err(|error| under_judges(error.path, error.message))?;
        baton_core::planning::model_choice::check_judge_models(self.registry.models(), &request)
            .map_err(|(path, message)| under_judges(path, message))?;
        Ok(RunPanelJudge {
            template: template.clone(),
            runs: self.runs.clone(),
            tenant: tenant_id.to_string(),
            entry,
            evaluation_id: evaluation_id.to_string(),
            shelf: self.records.transcript_shelf(tenant_id, evaluation_id),
            limit: DEFAULT_EXAMPLE_LIMIT,
        })
    }
}
