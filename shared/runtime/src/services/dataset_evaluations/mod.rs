//! Evaluations a server runs (`POST /api/v1/flex/evaluations` of `baton
//! serve`): a dataset given inline runs on the server's own services
//! under the caller's tenant (so its runs are the tenant's, shown in the
//! viewer, counted by its limits), at most `concurrency` examples at once,
//! judged in process when a panel is given. The record is kept through
//! [`EvaluationRecords`] and rewritten as each example finishes, with its
//! results lines and transcripts once done.
//!
//! Invariants:
//! - A tenant runs at most [`MAX_RUNNING_PER_TENANT`] evaluations at once.
//! - An evaluation a stopped server left `running` is resumed when the
//!   next one opens the store ([`DatasetEvaluations::open`]): the examples
//!   without a result run again, each under the idempotency key
//!   `{evaluationId}.{line}`, so one whose run had started takes that run
//!   up where it is rather than starting another. One whose request was
//!   not kept (or no longer fits) is `interrupted`.
//! - An ended evaluation older than its tenant's retention is deleted with
//!   its results and transcripts, at open and whenever the tenant starts or
//!   lists evaluations.
//! - A request that does not fit is refused naming its JSON path, and
//!   nothing is kept for it.

mod example_runs;
mod panel_judge;
mod run_panel_judge;

pub use example_runs::{DEFAULT_EXAMPLE_LIMIT, EmbeddedExampleRuns, PAST_ITS_LIMIT, run_example};
pub use panel_judge::PanelJudge;
pub use run_panel_judge::RunPanelJudge;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use baton_core::basics::instant::Instant;
use baton_core::catalog::registry::Registry;
use baton_evaluation::checks::judge_request_for;
use baton_evaluation::results::results_text;
use baton_evaluation::served::{EvaluationRecord, EvaluationRequest, EvaluationStatus};
use baton_evaluation::summary::Summary;
use baton_judge::request::PanelRequest;
use serde_json::Value;

use crate::error::StoreError;
use crate::ports::evaluation_ports::{EvaluationRecords, ExampleJudge, ExampleRuns};
use crate::ports::{Clock, LlmProvider};
use crate::services::{RunRetention, RunService};

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

/// Why a server has no model for judges: the error of whoever was to
/// make it (its configuration, refused).
pub type NoJudgeModel = Arc<dyn std::error::Error + Send + Sync>;

/// What a server's evaluations stand on.
pub struct DatasetEvaluations {
    records: Arc<dyn EvaluationRecords>,
    runs: Arc<RunService>,
    registry: Arc<Registry>,
    /// The model the judges are asked through, or why there is none (a
    /// request naming judges is then refused, saying why).
    judge_model: Result<Arc<dyn LlmProvider>, NoJudgeModel>,
    clock: Arc<dyn Clock>,
    retention: RunRetention,
    running: Arc<Mutex<HashMap<String, usize>>>,
}

impl DatasetEvaluations {
    /// Opens the evaluations kept in `records`: any left `running` by an
    /// earlier process is resumed (or, when its request is not kept,
    /// marked `interrupted`), and the ended ones past their tenant's
    /// retention are deleted.
    pub async fn open(
        records: Arc<dyn EvaluationRecords>,
        runs: Arc<RunService>,
        registry: Arc<Registry>,
        judge_model: Result<Arc<dyn LlmProvider>, NoJudgeModel>,
        clock: Arc<dyn Clock>,
        retention: RunRetention,
    ) -> Result<Self, EvaluationError> {
        let evaluations = Self {
            records,
            runs,
            registry,
            judge_model,
            clock,
            retention,
            running: Arc::default(),
        };
        for tenant_id in evaluations.records.tenants().await? {
            for mut record in evaluations.records.list_records(&tenant_id).await? {
                if record.status == EvaluationStatus::Running
                    && !evaluations.resume(&tenant_id, &record).await?
                {
                    record.status = EvaluationStatus::Interrupted;
                    evaluations.records.put_record(&tenant_id, &record).await?;
                }
            }
            evaluations.prune(&tenant_id).await?;
        }
        Ok(evaluations)
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

    /// Checks the request, keeps the record (`running`) and starts its
    /// examples; answers at once with the record.
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
        self.prune(tenant_id).await?;
        let judge: Option<Arc<dyn ExampleJudge>> = match &request.judges {
            Some(template) => Some(Arc::new(self.judge(tenant_id, &evaluation_id, template)?)),
            None => None,
        };
        self.hold_a_slot(tenant_id)?;
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
            judged: judge.is_some(),
            summary: None,
            results: Vec::new(),
        };
        // The request first: a record kept `running` can always be resumed.
        let kept = match self
            .records
            .put_request(tenant_id, &record.evaluation_id, &body.to_string())
            .await
        {
            Ok(()) => self.records.put_record(tenant_id, &record).await,
            Err(error) => Err(error),
        };
        if let Err(error) = kept {
            release(&self.running, tenant_id);
            return Err(error.into());
        }
        let concurrency = request.concurrency.unwrap_or(DEFAULT_CONCURRENCY).max(1);
        self.spawn_work(
            tenant_id,
            record.clone(),
            dataset.examples,
            judge,
            concurrency,
        );
        Ok(record)
    }

    /// Takes up an evaluation an earlier process left `running`: its kept
    /// request read again, the examples without a result run (their slot
    /// held whatever the tenant's limit: it was held before). `false` when
    /// there is nothing to resume it from.
    async fn resume(
        &self,
        tenant_id: &str,
        record: &EvaluationRecord,
    ) -> Result<bool, EvaluationError> {
        let Some(text) = self
            .records
            .get_request(tenant_id, &record.evaluation_id)
            .await?
        else {
            return Ok(false);
        };
        let Ok(body) = serde_json::from_str::<Value>(&text) else {
            return Ok(false);
        };
        let Ok(request) = EvaluationRequest::parse(&body) else {
            return Ok(false);
        };
        let Ok(dataset) = request.dataset() else {
            return Ok(false);
        };
        let judge: Option<Arc<dyn ExampleJudge>> = match &request.judges {
            Some(template) => match self.judge(tenant_id, &record.evaluation_id, template) {
                Ok(judge) => Some(Arc::new(judge)),
                Err(_) => return Ok(false),
            },
            None => None,
        };
        let done: std::collections::HashSet<usize> =
            record.results.iter().map(|result| result.line).collect();
        let left: Vec<_> = dataset
            .examples
            .into_iter()
            .filter(|example| !done.contains(&example.line))
            .collect();
        if let Ok(mut running) = self.running.lock() {
            *running.entry(tenant_id.to_string()).or_insert(0) += 1;
        }
        tracing::info!(tenant_id, evaluation = %record.evaluation_id, examples_left = left.len(), "an evaluation an earlier process left running is resumed");
        let concurrency = request.concurrency.unwrap_or(DEFAULT_CONCURRENCY).max(1);
        self.spawn_work(tenant_id, record.clone(), left, judge, concurrency);
        Ok(true)
    }

    /// Runs `examples` of the evaluation in a task of its own.
    fn spawn_work(
        &self,
        tenant_id: &str,
        record: EvaluationRecord,
        examples: Vec<baton_core::contracts::dataset::ResolvedExample>,
        judge: Option<Arc<dyn ExampleJudge>>,
        concurrency: usize,
    ) {
        let runs: Arc<dyn ExampleRuns> = Arc::new(EmbeddedExampleRuns {
            runs: self.runs.clone(),
            tenant: tenant_id.to_string(),
        });
        let work = RunningEvaluation {
            records: self.records.clone(),
            running: self.running.clone(),
            tenant_id: tenant_id.to_string(),
            runs,
            judge,
            concurrency,
        };
        tokio::spawn(work.run(record, examples));
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
    /// the catalog lacks, a panel past its size, a server without a model
    /// or a panel capability).
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
        if let Err(why) = &self.judge_model {
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

    /// Counts one more running evaluation of the tenant, or refuses it.
    fn hold_a_slot(&self, tenant_id: &str) -> Result<(), EvaluationError> {
        let mut running = self
            .running
            .lock()
            .map_err(|error| EvaluationError::Unavailable(error.to_string()))?;
        let count = running.entry(tenant_id.to_string()).or_insert(0);
        if *count >= MAX_RUNNING_PER_TENANT {
            return Err(EvaluationError::Limit {
                running: *count,
                limit: MAX_RUNNING_PER_TENANT,
            });
        }
        *count += 1;
        Ok(())
    }
}

/// An evaluation at work: its examples run, its record rewritten as each
/// finishes, then summarised and its results kept.
struct RunningEvaluation {
    records: Arc<dyn EvaluationRecords>,
    running: Arc<Mutex<HashMap<String, usize>>>,
    tenant_id: String,
    runs: Arc<dyn ExampleRuns>,
    judge: Option<Arc<dyn ExampleJudge>>,
    concurrency: usize,
}

impl RunningEvaluation {
    async fn run(
        self,
        record: EvaluationRecord,
        examples: Vec<baton_core::contracts::dataset::ResolvedExample>,
    ) {
        let evaluation_id = record.evaluation_id.clone();
        let kept = Arc::new(tokio::sync::Mutex::new(record));
        let slots = Arc::new(tokio::sync::Semaphore::new(self.concurrency));
        let mut tasks = Vec::new();
        for mut example in examples {
            // One run per example, whichever process starts it.
            example.envelope["idempotencyKey"] =
                Value::String(format!("{evaluation_id}.{}", example.line));
            let (runs, judge, slots, kept, records, tenant_id) = (
                self.runs.clone(),
                self.judge.clone(),
                slots.clone(),
                kept.clone(),
                self.records.clone(),
                self.tenant_id.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let _slot = slots.acquire_owned().await;
                let result = run_example(runs.as_ref(), judge.as_deref(), &example).await;
                let mut record = kept.lock().await;
                record.finished += 1;
                record.passed += usize::from(result.passed);
                record.results.push(result);
                if let Err(error) = records.put_record(&tenant_id, &record).await {
                    tracing::warn!(%error, evaluation = %record.evaluation_id, "an example's result was not kept");
                }
            }));
        }
        for task in tasks {
            let _ = task.await;
        }
        let mut record = kept.lock().await;
        // The dataset's order, whatever order they finished in.
        record.results.sort_by_key(|result| result.line);
        record.summary = Some(Summary::of(&record.results));
        record.status = EvaluationStatus::Completed;
        let results = results_text(&record.results);
        if let Err(error) = self
            .records
            .put_results(&self.tenant_id, &record.evaluation_id, &results)
            .await
        {
            tracing::warn!(%error, evaluation = %record.evaluation_id, "the evaluation's results were not kept");
        }
        if let Err(error) = self.records.put_record(&self.tenant_id, &record).await {
            tracing::warn!(%error, evaluation = %record.evaluation_id, "the evaluation's record was not kept");
        }
        release(&self.running, &self.tenant_id);
    }
}

fn release(running: &Mutex<HashMap<String, usize>>, tenant_id: &str) {
    if let Ok(mut running) = running.lock()
        && let Some(count) = running.get_mut(tenant_id)
    {
        *count = count.saturating_sub(1);
    }
}
